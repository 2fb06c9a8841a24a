"""damping_integration="implicit" (tigradsim/physics/contact.py): kd and kf applied as k / (1 + dt k / m).

* the force function against the formula (explicit force with the effective coefficients) and its Tape gradient
  against central differences, for every law, including d/d(dt / m);
* rollout gradients (f64, random directions) w.r.t. ke, kd, kf, mu, initial positions and velocities and the
  masses, in the regime where it matters (dt k / m ~ 0.5-2, past the explicit limit), covering both damping laws
  and the three friction laws;
* a 4 g vertex with kd = kf = 150 N s/m at 112 steps a frame: flagged and chattering explicitly, within the
  pre-flight and settling implicitly; the ke mode stays limited;
* implicit and explicit agree as dt -> 0; bad options rejected before any kernel runs.

As in test_contact_laws.py, FD scenes keep every point in contact for the whole rollout (checked), so no
touchdown moves inside a finite-difference step.
"""
import warnings

import numpy as np
import pytest
import taichi as ti

import tigradsim as tgs
from tigradsim.core.errors import StabilityWarning
from tigradsim.physics.contact import ContactLaw, check_law_options, ground_contact_force
from test_contact_laws import sliding_particles, trajectory_loss  # noqa: E402  (the same sliding particles)

RADIUS = 0.01
LAWS = [ContactLaw(damping_integration="implicit"),
        ContactLaw("uncapped", damping_integration="implicit"),
        ContactLaw(friction="huber", friction_velocity=0.05, damping_integration="implicit"),
        ContactLaw("uncapped", "warp", 0.05, damping_integration="implicit")]


@ti.data_oriented
class ImplicitProbe:
    """ground_contact_force by one law for N points with per-point dt / m; loss = sum_i w_i . f_i."""

    def __init__(self, law, x, v, params, dt_w, weights):
        n = len(x)
        self.law = law
        self.x = ti.Vector.field(3, float, n, needs_grad=True)
        self.v = ti.Vector.field(3, float, n, needs_grad=True)
        self.p = ti.Vector.field(4, float, n, needs_grad=True)    # ke, kd, kf, mu
        self.dt_w = ti.field(float, n, needs_grad=True)          # dt / m [s/kg]
        self.w = ti.Vector.field(3, float, n)
        self.f = ti.Vector.field(3, float, n, needs_grad=True)
        self.loss = ti.field(float, (), needs_grad=True)
        for fld, val in ((self.x, x), (self.v, v), (self.p, params), (self.dt_w, dt_w), (self.w, weights)):
            fld.from_numpy(np.asarray(val, dtype=np.float64))

    @ti.kernel
    def run(self):
        for i in self.x:
            p = self.p[i]
            f = ground_contact_force(self.x[i], self.v[i], RADIUS, p[0], p[1], p[2], p[3], self.law, self.dt_w[i])
            self.f[i] = f
            self.loss[None] += self.w[i].dot(f)


def _points(rng, n):
    x = np.zeros((n, 3))
    x[:, 1] = rng.uniform(-0.02, 0.005, n)                    # every point in contact
    v = rng.normal(size=(n, 3)) * rng.choice([1e-4, 1e-2, 0.3, 2.0], size=(n, 1))
    params = np.stack([rng.uniform(1e3, 1e4, n), rng.uniform(1, 200, n), rng.uniform(1, 200, n),
                       rng.uniform(0.2, 1.0, n)], axis=1)
    dt_w = rng.uniform(1e-3, 0.2, n)                           # dt k / m from ~0.001 to 40
    return x, v, params, dt_w


@pytest.mark.parametrize("law", LAWS, ids=str)
def test_implicit_force_is_the_explicit_force_with_effective_coefficients(f64, law):
    rng = np.random.default_rng(3)
    x, v, params, dt_w = _points(rng, 48)
    probe = ImplicitProbe(law, x, v, params, dt_w, np.zeros((48, 3)))
    probe.run()
    explicit_law = ContactLaw(law.damping, law.friction, law.friction_velocity)
    eff = params.copy()
    eff[:, 1] = params[:, 1] / (1 + dt_w * params[:, 1])
    eff[:, 2] = params[:, 2] / (1 + dt_w * params[:, 2])
    ref = ImplicitProbe(explicit_law, x, v, eff, np.zeros(48), np.zeros((48, 3)))
    ref.run()
    np.testing.assert_allclose(probe.f.to_numpy(), ref.f.to_numpy(), rtol=1e-12, atol=1e-12)
    # unconditionally stable: the damping mode's dt k_eff / m < 1 whatever k and dt
    assert np.all(dt_w * eff[:, 1] < 1) and np.all(dt_w * eff[:, 2] < 1)
    assert np.any(dt_w * params[:, 1] > 2), "some points are past the explicit limit"


@pytest.mark.parametrize("law", LAWS, ids=str)
def test_implicit_force_gradient_matches_finite_differences(f64, law):
    rng = np.random.default_rng(4)
    x, v, params, dt_w = _points(rng, 32)
    probe = ImplicitProbe(law, x, v, params, dt_w, rng.normal(size=(32, 3)))
    report = tgs.check_gradient(probe.run, probe.loss, [probe.x, probe.v, probe.p, probe.dt_w], n_dirs=3,
                                eps=1e-7, rtol=1e-6)
    report.assert_ok()


# -- rollouts ------------------------------------------------------------------------------
# (damping, friction): each damping law and each friction law at least once
ROLLOUT_LAWS = [("capped", "capped"), ("uncapped", "huber"), ("capped", "warp")]


def _scene(damping, friction, integration, kd=30.0, kf=80.0, dt=1e-3, steps=300, on="ground"):
    """test_contact_laws' four sliding particles of 0.1-0.25 kg with kd 30, kf 80: dt kd / m = 0.12-0.3,
    dt kf / m = 0.3-0.8 (a visible implicit correction; kf 80 at dt 1 ms is past the pre-flight's safe limit on
    0.1 kg explicitly)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", StabilityWarning)       # the explicit twin of the dt -> 0 test
        return sliding_particles(damping, friction, kd=kd, kf=kf, integration=integration, dt=dt, steps=steps,
                                 on=on)


@pytest.mark.slow
@pytest.mark.parametrize("damping, friction", ROLLOUT_LAWS)
def test_implicit_rollout_gradient(f64, damping, friction):
    model, sim = _scene(damping, friction, "implicit")
    assert sim.stability_report().ok, "implicit: within the pre-flight"
    _assert_sliding_gradients(model, sim, "ground")


def _assert_sliding_gradients(model, sim, surface):
    """The sliding particles stay in contact (no touchdown inside an FD step), and the Tape gradient of their
    trajectory loss matches central differences (float64, random directions) for the surface's ("ground" or
    "collider") ke, kd, kf, mu and the particles' initial state and masses; each constant matters."""
    run, loss = trajectory_loss(sim)
    run()
    assert np.all(sim.state.particle_q.to_numpy()[:, :, 1] < 0.05), "every particle stays in contact"
    names = [f"{surface}_{k}" for k in ("ke", "kd", "kf", "mu")] + ["particle_q0", "particle_qd0", "particle_mass"]
    fields = [model.parameters()[n] for n in names]
    tgs.check_gradient(run, loss, fields, n_dirs=3, eps=1e-5, rtol=1e-5).assert_ok()
    for name, fld in zip(names[:4], fields[:4]):
        report = tgs.check_gradient(run, loss, [fld], n_dirs=1, eps=1e-5, rtol=1e-5)
        report.assert_ok()
        assert abs(report.analytic[0]) > 1e-7, f"{name} should matter here"


def _light_vertex(integration, ke=1e3):
    """A 4 g vertex (an FEM corner's mass) resting on the ground with a 5 cm/s slide, kd = kf = 150 N s/m (Warp's
    and Newton's soft-clip values), at 112 steps a frame of 30 fps (dt 0.3 ms): dt k / m = 11."""
    b = tgs.SceneBuilder()
    b.add_ground(ke=ke, kd=150.0, kf=150.0, mu=0.5, damping_integration=integration)
    m = 0.004
    b.add_particles(np.array([[0.0, RADIUS - m * 9.8 / ke, 0.0]]), np.array([[0.05, -0.01, 0.0]]),
                    np.array([m]), radius=RADIUS)
    model = b.finalize(requires_grad=False)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        sim = tgs.Simulator(model, dt=1.0 / (30 * 112), steps=600)
    flagged = any(issubclass(w.category, StabilityWarning) for w in caught)
    return sim, flagged


def test_light_vertex_with_large_damping_is_stable_implicitly_and_flagged_explicitly(f32):
    results = {}
    for integration in ("explicit", "implicit"):
        sim, flagged = _light_vertex(integration)
        sim.run()
        qd = sim.state.particle_qd.to_numpy()[:, 0]
        results[integration] = (sim.stability_report(), flagged, qd)
    report, flagged, qd = results["explicit"]
    assert flagged and not report.ok
    assert "kf = 150" in report.violations[0].detail or "kd = 150" in report.violations[0].detail
    tangential = np.abs(qd[:, 0])
    # past 2 m / dt the viscous branch overshoots: the slide chatters at the Coulomb cap's amplitude
    assert tangential[-100:].max() > 1e-4
    assert np.sum(np.diff(np.sign(qd[-100:, 0])) != 0) > 20, "the sign of the slip flips step after step"
    report, flagged, qd = results["implicit"]
    assert not flagged and report.ok, str(report)
    assert "implicit" in report.rows[0].detail
    assert report.rows[0].gamma * report.dt < 1
    assert np.all(np.isfinite(qd)) and np.abs(qd).max() < 0.06, "bounded"
    assert np.abs(qd[-100:]).max() < 1e-5, "the slide and the bounce stop: overdamped, no chatter"
    # the ke mode keeps its explicit limit: omega dt > sqrt(2) is flagged whatever the damping
    stiff, flagged = _light_vertex("implicit", ke=1e5)
    assert flagged and not stiff.stability_report().ok
    assert "ke = 1e+05" in stiff.stability_report().violations[0].detail


def _final_state(integration, dt):
    model, sim = _scene("capped", "huber", integration, kd=5.0, kf=10.0, dt=dt, steps=int(round(0.1 / dt)))
    sim.run()
    return np.concatenate([sim.final_state("particle_q").ravel(), sim.final_state("particle_qd").ravel()])


def assert_implicit_tends_to_explicit(final_state, finest_gap):
    """final_state(integration, dt) -> state vector after 0.1 s.  The implicit and explicit runs differ at
    dt = 1 ms and agree as dt -> 0: k_eff = k (1 - dt k w + ...), so the gap shrinks like dt (at least 5x per
    decade) and is below `finest_gap` at dt = 1e-5 s.  Shared with test_rigid_implicit_damping.py."""
    gaps = []
    for dt in (1e-3, 1e-4, 1e-5):
        gaps.append(np.abs(final_state("implicit", dt) - final_state("explicit", dt)).max())
    assert gaps[0] > 1e-4, "the implicit coefficient differs at a coarse step"
    assert gaps[1] < gaps[0] / 5 and gaps[2] < gaps[1] / 5, gaps
    assert gaps[2] < finest_gap, gaps


@pytest.mark.slow
def test_implicit_and_explicit_agree_as_dt_goes_to_zero(f64):
    assert_implicit_tends_to_explicit(_final_state, 1e-4)          # w = 1 / m of the sliding particles


def test_bad_damping_integration():
    with pytest.raises(ValueError, match="damping_integration: expected one of .*'explicit', 'implicit'.*got 'backward'"):
        ContactLaw(damping_integration="backward")
    with pytest.raises(ValueError, match="damping_integration: expected one of"):
        ContactLaw(damping_integration=None)
    with pytest.raises(ValueError, match="damping_integration: expected one of .* got 'semi'"):
        check_law_options(damping_integration="semi")
    b = tgs.SceneBuilder()
    with pytest.raises(ValueError, match="damping_integration: expected one of .* got 'Implicit'"):
        b.add_ground(damping_integration="Implicit")
    with pytest.raises(ValueError, match="damping_integration: expected one of .* got 1"):
        b.add_collider("plane", damping_integration=1)
    law = ContactLaw(damping_integration="implicit")
    assert law.implicit and not ContactLaw().implicit
    assert law.merged(friction="huber").damping_integration == "implicit", "merging keeps it"
    assert not law.is_default


def test_scene_file_implicit_ground_lifts_the_soft_caps_on_kd_and_kf(tmp_path):
    """[ground] damping_integration = "implicit" reaches the ground's law, and with a soft object and [fit]
    contact_constants = "nuisance" the kd and kf ranges are the library's priors (Warp's and Newton's 100-150 N s/m
    inside), while ke keeps the step's cap; a bad value names the key."""
    from test_damping_forms import parse_scene, soft_scene
    from tigradsim.fitting.sensitivity import PRIOR_RANGES
    from tigradsim.scenes.scene_file import SceneError
    from tigradsim.scenes.scene_unknowns import soft_contact_caps
    v, t = tgs.meshes.tet_box(1, 1, 1, size=(0.1, 0.1, 0.1), origin=(0.0, 0.03, 0.0))
    np.save(tmp_path / "x.npy", v)
    np.save(tmp_path / "t.npy", t)
    data = soft_scene(tmp_path, {"nodes": "x.npy", "tets": "t.npy", "mass": 0.3, "params": {"mu": 3e3, "lam": 5e3}},
                      {"cube.mu": {"init": 2e3}})
    data["fit"]["contact_constants"] = "nuisance"
    data["ground"] = {}
    explicit = parse_scene(data, str(tmp_path / "scene.toml"))
    data["ground"] = {"damping_integration": "implicit"}
    spec = parse_scene(data, str(tmp_path / "scene.toml"))
    assert spec.ground["law"] == {"damping_integration": "implicit"}
    caps, explicit_caps = soft_contact_caps(spec), soft_contact_caps(explicit)
    assert set(caps) == {"ke"} and caps["ke"] == explicit_caps["ke"]
    ranges = {u.param: (u.lower, u.upper) for u in spec.unknowns if u.nuisance}
    assert ranges["kd"] == PRIOR_RANGES["kd"](10.0) and ranges["kf"] == PRIOR_RANGES["kf"](10.0)
    assert ranges["kf"][1] >= 150 and ranges["kd"][1] >= 100
    assert ranges["ke"][1] == pytest.approx(min(PRIOR_RANGES["ke"](1e4)[1], caps["ke"]))
    assert {u.param: u.upper for u in explicit.unknowns if u.nuisance}["kf"] < 150, "explicitly capped"
    data["ground"] = {"damping_integration": "backward"}
    with pytest.raises(SceneError, match="damping_integration.*expected one of 'explicit', 'implicit'"):
        parse_scene(data, str(tmp_path / "scene.toml"))


def _sliding_vertex(where, integration):
    """The 4 g vertex of `_light_vertex` on the ground (`where="ground"`) or on a plane collider y = 0 with the
    same constants and law (no ground)."""
    b = tgs.SceneBuilder()
    constants = dict(ke=1e3, kd=150.0, kf=150.0, mu=0.5, damping_integration=integration)
    if where == "ground":
        b.add_ground(**constants)
    else:
        b.add_collider("plane", **constants)
    m = 0.004
    b.add_particles(np.array([[0.0, RADIUS - m * 9.8 / 1e3, 0.0]]), np.array([[0.05, -0.01, 0.0]]),
                    np.array([m]), radius=RADIUS)
    model = b.finalize(requires_grad=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", StabilityWarning)
        sim = tgs.Simulator(model, dt=1.0 / (30 * 112), steps=200)
    sim.run()
    return sim.state.particle_qd.to_numpy()[:, 0], sim.stability_report()


@pytest.mark.slow
def test_collider_contact_takes_the_implicit_option_as_the_ground_does(f64):
    """A plane collider y = 0 with the ground's constants and damping_integration gives the ground's motion, and
    its pre-flight row the same verdict: the option reaches the collider term and its stability row."""
    ground, ground_report = _sliding_vertex("ground", "implicit")
    plane, plane_report = _sliding_vertex("collider", "implicit")
    np.testing.assert_allclose(plane, ground, rtol=1e-9, atol=1e-12)
    assert plane_report.ok and ground_report.ok
    explicit, explicit_report = _sliding_vertex("collider", "explicit")
    assert not explicit_report.ok and np.abs(explicit - plane).max() > 1e-3


@pytest.mark.slow
def test_implicit_collider_rollout_gradient(f64):
    """The plane collider's contact with damping_integration="implicit" (its own kernel path, colliders._force with
    the vertex's dt / m): the Tape against central differences along random directions through 300 steps of the
    four sliding particles, for the collider's ke, kd, kf, mu and the particles' initial state and masses."""
    model, sim = _scene("capped", "capped", "implicit", on="collider")
    assert sim.stability_report().ok, "implicit: within the pre-flight"
    _assert_sliding_gradients(model, sim, "collider")
