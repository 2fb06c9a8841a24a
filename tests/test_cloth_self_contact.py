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
from tigradsim.physics.cloth_self_contact import largest_circumradius

CELL = 0.05
NX, NZ = 7, 3                     # cells: 8 columns of 4 vertices; columns 0-3 the lower layer, 4-7 the upper


@pytest.fixture(scope="module")
def f64():
    tgs.init(arch="cpu", precision="f64")
    yield


def _folded(self_contact=True, steps=400, dt=5e-4, velocity=-0.5, **kwargs):
    """A 7 x 3-cell strip (cell 5 cm, flat at rest) folded in the middle: its lower half lies on the ground and
    its upper half 5 cm above it (the crease a vertical edge of rest length), thrown down at `velocity` m/s."""
    rest, tris = meshes.cloth_grid(NX, NZ, cell=CELL, origin=(0.0, 0.005, 0.0), plane="xz")
    column = np.tile(np.arange(NX + 1), NZ + 1)
    upper = column > NX // 2
    folded = rest.copy()
    folded[upper, 0] = (NX - column[upper]) * CELL
    folded[upper, 1] += CELL
    b = tgs.SceneBuilder()
    b.add_ground(ke=100.0, kd=0.05, kf=0.1, mu=0.3)
    opts = dict(self_contact=True, self_contact_params={"ke": 20.0, "kd": 0.02, "kf": 0.05, "mu": 0.2}, **kwargs) \
        if self_contact else {}
    vel = np.zeros_like(rest)
    vel[upper, 1] = velocity
    b.add_cloth(rest, tris, params={"mu": 10.0, "lam": 20.0}, density=1.0, bending_stiffness=1e-4, velocity=vel,
                **opts)
    model = b.finalize()
    model.particle_q0.from_numpy(folded)
    sim = tgs.Simulator(model, dt=dt, steps=steps)
    return model, sim, upper


def _layer_gap(sim, upper):
    """Mean height of the upper layer over the lower one [m], per step."""
    q = sim.state.particle_q.to_numpy()
    return q[:, upper, 1].mean(axis=1) - q[:, ~upper, 1].mean(axis=1)


def test_folded_cloth_does_not_pass_through_itself(f64):
    model, sim, upper = _folded()
    h = float(2 * model.cloth_self_radius.to_numpy().max())
    sim.run()
    gap = _layer_gap(sim, upper)
    assert gap.min() > 0.6 * h, f"the upper layer should rest on the lower one ~{h:.3g} m up, came to {gap.min():.3g}"
    assert gap[-1] < 0.9 * CELL, "it should have come down onto the lower layer"
    _, sim, upper = _folded(self_contact=False)
    sim.run()
    assert _layer_gap(sim, upper)[-1] < 0.2 * h, "without self-contact the layers should pass through each other"


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


@pytest.mark.slow
def test_self_contact_gradients(f64):
    """60 steps in which the upper layer comes down onto the lower one: loss = MSE of every vertex every 10 steps
    against random targets; the Tape against central differences along random directions."""
    model, sim, upper = _folded(steps=60, velocity=-0.8)
    rec = tgs.ParticleRecorder(sim, every=10)
    sim.run()
    h = float(2 * model.cloth_self_radius.to_numpy().max())
    assert _layer_gap(sim, upper)[-1] < h, "the layers should touch in this rollout"
    rng = np.random.default_rng(4)
    loss = tgs.MSELoss(rec.values, rec.values.to_numpy() + rng.normal(size=rec.values.shape + (3,)) * 0.01)

    def run():
        sim.run()
        loss()

    params = model.parameters()
    for name, eps in (("particle_q0", 1e-7), ("particle_qd0", 1e-7), ("cloth_self_ke", 1e-6),
                      ("cloth_self_kd", 1e-5)):
        report = tgs.check_gradient(run, loss.value, [params[name]], n_dirs=2, eps=eps, rtol=1e-5)
        report.assert_ok()
        assert max(abs(a) for a in report.analytic) > 1e-9, f"{name}: gradient should not vanish here"


def test_preflight_has_a_self_contact_row(f64):
    model, sim, _ = _folded(steps=2)
    rows = [r for r in sim.stability_report().rows if r.term == "ClothSelfContact"]
    assert rows, "the pre-flight should check the self-contact"
    m = model.particle_mass.to_numpy().min()
    omega = np.sqrt(20.0 * 2.0 / m)                  # ke on 1/m + 1/m of the lightest vertex
    assert abs(2.0 / omega - min(r.dt_limit for r in rows)) < 0.2 * 2.0 / omega


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
