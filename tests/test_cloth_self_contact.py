"""Cloth self-contact (tigradsim/physics/cloth_self_contact.py): a strip folded onto itself whose upper layer is
thrown down onto the lower one stays above it by about the thickness (and falls through without self-contact),
momentum of a free pair is conserved, float64 central-difference gradients through the broad phase's pairs,
the pre-flight row, and bad options.
"""
import numpy as np
import pytest
import taichi as ti

import tigradsim as tgs
from tigradsim import meshes
from tigradsim.core.stability import explicit_dt_limit
from tigradsim.physics.cloth_self_contact import largest_circumradius

CELL = 0.05
NX, NZ = 9, 3                     # cells: 10 columns of 4 vertices: 0-3 the lower layer, 3-6 the crease, 6-9 the upper
RADIUS = 3 * CELL / np.pi         # the crease: a half circle of 3 edges


@pytest.fixture(scope="module")
def f64():
    tgs.init(arch="cpu", precision="f64")
    yield


def _folded(self_contact=True, steps=600, dt=5e-4, velocity=0.0, gap=2 * RADIUS, ground=True, integration=None,
            **kwargs):
    """A 9 x 3-cell strip (cell 5 cm, flat at rest) folded in the middle: its lower third lies on the ground, its
    upper third `gap` m above it (default 9.5 cm: the crease a half circle of 3 edges), and falls onto it, thrown
    down at `velocity` m/s.  Self-contact thickness 4 cm (above the triangles' circumradius, 3.54 cm).
    ground=False: no ground and no gravity (the strip floats; only the self-contact stops the upper layer).
    integration: the ground's (and so the self-contact's) damping_integration; with ground=False a ground is then
    still added (the law's carrier), and no gravity, and the strip starts 10 cm higher so that it never reaches it."""
    rest, tris = meshes.cloth_grid(NX, NZ, cell=CELL, origin=(0.0, 0.005, 0.0), plane="xz")
    column = np.tile(np.arange(NX + 1), NZ + 1)
    folded = rest.copy()
    for k in range(3, NX + 1):
        at = column == k
        if k <= 6:                                   # the crease
            angle = np.pi * (k - 3) / 3 - np.pi / 2
            folded[at, 0] = 3 * CELL + RADIUS * np.cos(angle)
            folded[at, 1] += (RADIUS + RADIUS * np.sin(angle)) * gap / (2 * RADIUS)
        else:
            folded[at, 0] = (NX - k) * CELL
            folded[at, 1] += gap
    upper = column >= 6
    b = tgs.SceneBuilder(gravity=(0.0, -9.8 if ground else 0.0, 0.0))
    if ground or integration is not None:
        b.add_ground(ke=100.0, kd=0.1, kf=0.1, mu=0.3, damping_integration=integration or "explicit")
    opts = dict(self_contact=True, thickness=0.04, self_contact_params={"ke": 20.0, "kd": 0.1, "kf": 0.05, "mu": 0.2},
                **kwargs) if self_contact else {}
    vel = np.zeros_like(rest)
    vel[upper, 1] = velocity
    b.add_cloth(rest, tris, params={"mu": 10.0, "lam": 20.0, "damping": 0.05}, density=1.0, velocity=vel,
                **opts)
    model = b.finalize()
    if integration is not None and not ground:
        folded[:, 1] += 0.1
    model.particle_q0.from_numpy(folded)
    sim = tgs.Simulator(model, dt=dt, steps=steps)
    return model, sim, column


def _layer_gap(sim, column):
    """Mean height [m] of the upper layer's two outer columns over the lower layer's (right under them), per step."""
    q = sim.state.particle_q.to_numpy()
    return q[:, column >= NX - 1, 1].mean(axis=1) - q[:, column <= 1, 1].mean(axis=1)


def test_folded_cloth_does_not_pass_through_itself(f64):
    model, sim, column = _folded()
    h = float(2 * model.cloth_self_radius.to_numpy().max())
    sim.run()
    gap = _layer_gap(sim, column)
    # it lands on the lower layer (and bounces: the contacts and the membrane are only lightly damped)
    assert 0.6 * h < gap.min() < 1.2 * h, f"the upper layer should land on the lower one ~{h:.3g} m up, came to " \
                                          f"{gap.min():.3g} m"
    _, sim, column = _folded(self_contact=False)
    sim.run()
    assert _layer_gap(sim, column).min() < 0.2 * h, "without self-contact the layers should pass through each other"


def test_momentum_is_conserved(f64):
    """Two self-contact cloths (one triangle each) thrown at each other without gravity or ground."""
    b = tgs.SceneBuilder(gravity=(0.0, 0.0, 0.0))
    tri = np.array([[0, 1, 2]])
    v = np.array([[0.0, 0.0, 0.0], [0.1, 0.0, 0.0], [0.0, 0.0, 0.1]])
    b.add_cloth(v, tri, params={"mu": 10.0, "lam": 20.0}, density=1.0, velocity=(0.0, 1.0, 0.0), self_contact=True)
    b.add_cloth(v + [0.02, 0.1, 0.02], tri, params={"mu": 10.0, "lam": 20.0}, density=2.0,
                velocity=(0.1, -1.0, 0.0), self_contact=True)
    model = b.finalize(requires_grad=False)
    sim = tgs.Simulator(model, dt=2e-4, steps=600)
    sim.run()
    m = model.particle_mass.to_numpy()
    qd = sim.state.particle_qd.to_numpy()
    assert np.abs(qd[-1, 0] - qd[0, 0]).max() > 0.3, "the cloths should have collided"
    np.testing.assert_allclose((m[:, None] * qd[-1]).sum(0), (m[:, None] * qd[0]).sum(0), atol=1e-12)


def _assert_recorded_gradients(model, sim, rec, names_eps):
    """An MSE of the recorded positions against themselves plus 1 cm noise: the Tape gradient matches central
    differences (float64, 2 random directions, rtol 1e-5) for each (parameter name, FD step), and does not vanish."""
    rng = np.random.default_rng(4)
    loss = tgs.MSELoss(rec.values, rec.values.to_numpy() + rng.normal(size=rec.values.shape + (3,)) * 0.01)

    def run():
        sim.run()
        loss()

    params = model.parameters()
    for name, eps in names_eps:
        report = tgs.check_gradient(run, loss.value, [params[name]], n_dirs=2, eps=eps, rtol=1e-5)
        report.assert_ok()
        assert max(abs(a) for a in report.analytic) > 1e-9, f"{name}: gradient should not vanish here"


@pytest.mark.slow
def test_self_contact_gradients(f64):
    """60 steps in which the upper layer comes down onto the lower one (no ground, no gravity: the ground's
    resting contact has kinks of its own): loss = MSE of every vertex every 10 steps against random targets; the
    Tape against central differences along random directions."""
    model, sim, column = _folded(steps=60, velocity=-0.3, gap=0.045, ground=False)
    rec = tgs.ParticleRecorder(sim, every=10)
    sim.run()
    h = float(2 * model.cloth_self_radius.to_numpy().max())
    assert _layer_gap(sim, column)[-1] < h, "the layers should touch in this rollout"
    _assert_recorded_gradients(model, sim, rec, (("particle_q0", 1e-6), ("particle_qd0", 1e-5),
                                                 ("cloth_self_ke", 1e-6), ("cloth_self_kd", 1e-5)))


@pytest.mark.slow
def test_self_contact_gradients_implicit(f64):
    """As test_self_contact_gradients, with the self-contact's kd, kf stepped implicitly (the ground's law: a
    ground is there, which the floating strip does not reach): Tape against central differences."""
    model, sim, column = _folded(steps=60, velocity=-0.3, gap=0.045, ground=False, integration="implicit")
    term = [t for t in sim.force_terms if type(t).__name__ == "ClothSelfContact"][0]
    assert term.law.implicit
    rec = tgs.ParticleRecorder(sim, every=10)
    sim.run()
    q = sim.state.particle_q.to_numpy()
    assert q[:, :, 1].min() > 0.0 and np.all(sim.state.particle_qd.to_numpy()[:, :, 1].max(0) > -1.0)
    h = float(2 * model.cloth_self_radius.to_numpy().max())
    assert _layer_gap(sim, column)[-1] < h, "the layers should touch in this rollout"
    _assert_recorded_gradients(model, sim, rec, (("particle_q0", 1e-6), ("particle_qd0", 1e-5),
                                                 ("cloth_self_ke", 1e-6), ("cloth_self_kd", 1e-5),
                                                 ("cloth_self_kf", 1e-5)))


def test_preflight_has_a_self_contact_row(f64):
    model, sim, _ = _folded(steps=2)
    rows = [r for r in sim.stability_report().rows if r.term == "ClothSelfContact"]
    assert rows, "the pre-flight should check the self-contact"
    w = 2.0 / model.particle_mass.to_numpy().min()     # 1/m + 1/m of the lightest vertex
    want = explicit_dt_limit(np.sqrt(20.0 * w), 0.1 * w)   # ke = 20 N/m, kd = 0.1 N s/m (friction kf is softer)
    assert abs(min(r.dt_limit for r in rows) - want) < 1e-9 * want


@pytest.mark.parametrize("kwargs, match", [
    (dict(thickness=0.03), r"thickness: 0\.03 m is not above the cloth's largest triangle circumradius 0\.03536"),
    (dict(self_contact_params={"stiffness": 1.0}), r"self_contact_params: unknown keys \['stiffness'\]"),
    (dict(self_contact_params={"ke": -1.0}), r"self_contact_params\['ke'\]"),
])
def test_bad_self_contact_options(f64, kwargs, match):
    v, f = meshes.cloth_grid(2, 2, cell=CELL, plane="xz")
    with pytest.raises(ValueError, match=match):
        tgs.SceneBuilder().add_cloth(v, f, self_contact=True, **kwargs)
    with pytest.raises(ValueError, match="give them with self_contact=True"):
        tgs.SceneBuilder().add_cloth(v, f, thickness=0.05)
    assert abs(largest_circumradius(v, f) - CELL / np.sqrt(2)) < 1e-12
