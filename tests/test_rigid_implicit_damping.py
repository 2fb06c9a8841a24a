"""damping_integration="implicit" for rigid bodies' contact points (tigradsim/physics/body_effective_mass.py):
kd and kf applied as k / (1 + dt k w_split), w_split = P (1 / m + (r x d)^T I_world^-1 (r x d)) along the normal
(kd) and the slip (kf), P the body's contact point count (its mass split over its points).

* the force against the formula: the explicit force with the effective coefficients from a numpy effective mass,
  for every law, a body point against a static surface and a pair of bodies; its Tape gradient against central
  differences (pose, arm, normal, velocity, constants, mass, inertia, dt);
* rollout gradients (f64, random directions) with implicit damping in the regime where it matters (dt k w_split
  ~ 1-3): a box sliding and spinning down a plane collider (ke, kd, kf, mu, the initial state and mass) and a box
  resting and spinning on a box (the pair's constants, masses, initial states);
* a 50 g cube with kd = 100 N s/m, and one with kf = 100 N s/m, at 32 steps a 30 fps frame: flagged and chattering
  explicitly, within the pre-flight and settling implicitly (the kf case is what the mass split is for); the same
  cube on a box (body-body) and a 5 g vertex on a box (particle-body);
* every rigid pairing's pre-flight row; the ground and a plane collider y = 0 give the same motion; implicit and
  explicit agree as dt -> 0; add_rigid_body's option and the ground's reaching the body.

As in test_implicit_damping.py, FD scenes keep every bottom corner in contact for the whole rollout (checked).
"""
import warnings

import numpy as np
import pytest
import taichi as ti

import tigradsim as tgs
from tigradsim import meshes
from tigradsim.core.errors import StabilityWarning
from tigradsim.physics.body_effective_mass import body_pair_dt_inverse_masses, body_point_dt_inverse_masses
from tigradsim.physics.contact import ContactLaw, contact_force, contact_force_along
from tigradsim.physics.rigid import quat_to_matrix_np

from rigid_tracks import rigid_track_loss  # noqa: E402
from test_implicit_damping import LAWS, assert_implicit_tends_to_explicit  # noqa: E402  (the four implicit laws)

DT = 1.0 / 960.0


def _run_flagged(model, steps):
    """Build a Simulator (recording whether its pre-flight warned: StabilityWarning) and run it."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        sim = tgs.Simulator(model, dt=DT, steps=steps)
    sim.run()
    return sim, any(issubclass(w.category, StabilityWarning) for w in caught)


def _random_bodies(rng, n):
    """n bodies: mass [kg], inertia per unit mass (a box's, turned by a random rotation: not diagonal), contact
    point count P."""
    mass = rng.uniform(0.05, 3.0, n)
    inertia = np.empty((n, 3, 3))
    for k in range(n):
        h = rng.uniform(0.02, 0.3, 3)
        diag = np.diag([h[1] ** 2 + h[2] ** 2, h[0] ** 2 + h[2] ** 2, h[0] ** 2 + h[1] ** 2]) / 3.0
        q = rng.normal(size=4)
        R = quat_to_matrix_np(q / np.linalg.norm(q))
        inertia[k] = R @ diag @ R.T
    return mass, inertia, rng.choice([1.0, 4.0, 8.0], n)


def _unit(rng, n, dim):
    x = rng.normal(size=(n, dim))
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def _inverse_mass_np(mass, inertia, count, quat, r, d):
    """P (1/m + (r x d)^T (R I R^T)^-1 (r x d)) in numpy, straight from the world-frame inertia."""
    R = quat_to_matrix_np(quat)
    u = np.cross(r, d)
    return count * (1.0 / mass + u @ np.linalg.solve(R @ (mass * inertia) @ R.T, u))


@ti.data_oriented
class RigidProbe:
    """N contact points: point i of body a_i (against a static surface) or of a_i against b_i (pair); the
    fields the effective mass reads (body_mass, body_inertia, body_contact_point_count, step_dt) make the probe
    a model.  loss = sum_i w_i . f_i."""

    def __init__(self, law, bodies, a, b, quats, arms, normals, c, v, params, dt, weights, pair):
        mass, inertia, count = bodies
        n, B = len(a), len(mass)
        self.law, self.pair = law, pair
        self.body_mass = ti.field(float, B, needs_grad=True)
        self.body_inertia = ti.Matrix.field(3, 3, float, B, needs_grad=True)
        self.body_contact_point_count = ti.field(float, B)
        self.step_dt = ti.field(float, (), needs_grad=True)
        self.a, self.b = ti.field(ti.i32, n), ti.field(ti.i32, n)
        self.quat = ti.Vector.field(4, float, (n, 2), needs_grad=True)
        self.arm = ti.Vector.field(3, float, (n, 2), needs_grad=True)
        self.normal = ti.Vector.field(3, float, n, needs_grad=True)
        self.c = ti.field(float, n, needs_grad=True)
        self.v = ti.Vector.field(3, float, n, needs_grad=True)
        self.p = ti.Vector.field(4, float, n, needs_grad=True)    # ke, kd, kf, mu
        self.w = ti.Vector.field(3, float, n)
        self.f = ti.Vector.field(3, float, n, needs_grad=True)
        self.loss = ti.field(float, (), needs_grad=True)
        for fld, val in ((self.body_mass, mass), (self.body_inertia, inertia), (self.body_contact_point_count, count),
                         (self.a, a), (self.b, b), (self.quat, quats), (self.arm, arms), (self.normal, normals),
                         (self.c, c), (self.v, v), (self.p, params), (self.w, weights)):
            fld.from_numpy(np.asarray(val))
        self.step_dt[None] = dt

    @ti.kernel
    def run(self):
        for i in self.a:
            p = self.p[i]
            n = self.normal[i]
            dt_wn, dt_wt = 0.0, 0.0
            if ti.static(self.pair):
                dt_wn, dt_wt = body_pair_dt_inverse_masses(self, self.a[i], self.quat[i, 0], self.arm[i, 0], self.b[i],
                                                           self.quat[i, 1], self.arm[i, 1], n, self.v[i], self.law)
            else:
                dt_wn, dt_wt = body_point_dt_inverse_masses(self, self.a[i], self.quat[i, 0], self.arm[i, 0], n,
                                                            self.v[i], self.law)
            f = contact_force_along(self.c[i], n, self.v[i], p[0], p[1], p[2], p[3], self.law, dt_wn, dt_wt)
            self.f[i] = f
            self.loss[None] += self.w[i].dot(f)


@ti.data_oriented
class ExplicitProbe:
    """The explicit law's force at given (already effective) coefficients."""

    def __init__(self, law, c, normals, v, params):
        n = len(c)
        self.law = law
        self.c, self.normal, self.v = ti.field(float, n), ti.Vector.field(3, float, n), ti.Vector.field(3, float, n)
        self.p, self.f = ti.Vector.field(4, float, n), ti.Vector.field(3, float, n)
        for fld, val in ((self.c, c), (self.normal, normals), (self.v, v), (self.p, params)):
            fld.from_numpy(np.asarray(val))

    @ti.kernel
    def run(self):
        for i in self.c:
            p = self.p[i]
            self.f[i] = contact_force(self.c[i], self.normal[i], self.v[i], p[0], p[1], p[2], p[3], self.law)


def _points(rng, n, bodies):
    B = len(bodies[0])
    a = rng.integers(0, B, n).astype(np.int32)
    b = ((a + 1 + rng.integers(0, B - 1, n)) % B).astype(np.int32)
    quats = _unit(rng, 2 * n, 4).reshape(n, 2, 4)
    arms = rng.uniform(-0.3, 0.3, (n, 2, 3))
    normals = _unit(rng, n, 3)
    c = rng.uniform(-0.02, -1e-4, n)                                  # every point penetrating
    v = rng.normal(size=(n, 3)) * rng.choice([1e-2, 0.3, 2.0], size=(n, 1))
    params = np.stack([rng.uniform(1e3, 1e4, n), rng.uniform(1, 200, n), rng.uniform(1, 200, n),
                       rng.uniform(0.2, 1.0, n)], axis=1)
    return a, b, quats, arms, normals, c, v, params


@pytest.mark.parametrize("pair", [False, True], ids=["static", "pair"])
@pytest.mark.parametrize("law", LAWS, ids=str)
def test_rigid_force_is_the_explicit_force_with_split_effective_mass(f64, law, pair):
    rng = np.random.default_rng(5)
    bodies = _random_bodies(rng, 4)
    n = 40
    a, b, quats, arms, normals, c, v, params = _points(rng, n, bodies)
    probe = RigidProbe(law, bodies, a, b, quats, arms, normals, c, v, params, DT, np.zeros((n, 3)), pair)
    probe.run()
    eff = params.copy()
    xs = []
    for i in range(n):
        vt = v[i] - normals[i] * (v[i] @ normals[i])
        slip = vt / np.sqrt(vt @ vt + 1e-12)
        w = [0.0, 0.0]
        for side, body in ((0, a[i]), (1, b[i])) if pair else ((0, a[i]),):
            args = (bodies[0][body], bodies[1][body], bodies[2][body], quats[i, side], arms[i, side])
            w[0] += _inverse_mass_np(*args, normals[i])
            w[1] += _inverse_mass_np(*args, slip)
        eff[i, 1] = params[i, 1] / (1 + DT * params[i, 1] * w[0])
        eff[i, 2] = params[i, 2] / (1 + DT * params[i, 2] * w[1])
        xs.append(DT * params[i, 1] * w[0])
    ref = ExplicitProbe(ContactLaw(law.damping, law.friction, law.friction_velocity), c, normals, v, eff)
    ref.run()
    np.testing.assert_allclose(probe.f.to_numpy(), ref.f.to_numpy(), rtol=1e-10, atol=1e-10)
    assert np.any(np.array(xs) > 2), "some points are past the explicit limit"
    explicit = ExplicitProbe(ContactLaw(law.damping, law.friction, law.friction_velocity), c, normals, v, params)
    explicit.run()
    assert np.abs(explicit.f.to_numpy() - probe.f.to_numpy()).max() > 1.0, "the implicit coefficient acts"


@pytest.mark.parametrize("pair", [False, True], ids=["static", "pair"])
@pytest.mark.parametrize("law", [LAWS[0], LAWS[3]], ids=str)
def test_rigid_force_gradient_matches_finite_differences(f64, law, pair):
    rng = np.random.default_rng(6)
    bodies = _random_bodies(rng, 3)
    n = 24
    a, b, quats, arms, normals, c, v, params = _points(rng, n, bodies)
    probe = RigidProbe(law, bodies, a, b, quats, arms, normals, c, v, params, DT, rng.normal(size=(n, 3)), pair)
    fields = [probe.quat, probe.arm, probe.normal, probe.c, probe.v, probe.p, probe.body_mass, probe.body_inertia,
              probe.step_dt]
    tgs.check_gradient(probe.run, probe.loss, fields, n_dirs=3, eps=1e-7, rtol=1e-6).assert_ok()
    for fld in (probe.body_mass, probe.body_inertia, probe.step_dt):       # the effective mass's own inputs
        report = tgs.check_gradient(probe.run, probe.loss, [fld], n_dirs=1, eps=1e-7, rtol=1e-6)
        report.assert_ok()
        assert abs(report.analytic[0]) > 1e-6


# -- a rollout: a box sliding and spinning down a plane collider ------------------------------------------------
BOX = (0.3, 0.1, 0.22)


def _box_on_ramp(integration, kd=20.0, kf=40.0, steps=300, dt=1e-3, theta=np.radians(15.0), on="collider"):
    """test_colliders' box on a 15 degree plane, 1 kg, ke 500 (its bottom corners in contact throughout), with
    kd = 20, kf = 40 N s/m: dt k w_split = 1-2.5 at dt 1 ms (P = 8, w = 1/m + (r x n)^T I^-1 (r x n) ~ 6 /kg), so
    k_eff is 1/2 to 1/3 of k.  on="ground": the ground y = 0 (theta 0) instead of a plane collider."""
    b = tgs.SceneBuilder()
    ke = 500.0
    contact = dict(ke=ke, kd=kd, kf=kf, mu=0.4, friction="huber", friction_velocity=0.02,
                   damping="uncapped", damping_integration=integration)
    rot = tgs.quat_from_axis_angle((0.0, 0.0, 1.0), theta)
    if on == "collider":
        b.add_collider("plane", rotation=rot, **contact)
    else:
        b.add_ground(**contact)
    v, f = meshes.box_surface(BOX)
    normal = quat_to_matrix_np(rot)[:, 1]
    down = np.array([-np.cos(theta), -np.sin(theta), 0.0])
    sink = 9.8 * np.cos(theta) / (4 * ke)
    b.add_rigid_body(v, f, mass=1.0, position=normal * (BOX[1] / 2 - 1.1 * sink) - down * 0.5, rotation=rot,
                     velocity=down * 0.8 - normal * 0.03, angular_velocity=normal * 1.5 + np.array([0.02, 0.0, -0.03]))
    model = b.finalize()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", StabilityWarning)
        sim = tgs.Simulator(model, dt=dt, steps=steps)
    return model, sim, normal


def _corner_heights(model, sim, normal, origin=np.zeros(3)):
    q = sim.state.body_q.to_numpy()[:, 0]
    corners = model.contact_point.to_numpy()
    return np.array([((quat_to_matrix_np(p[3:]) @ corners.T).T + p[:3] - origin) @ normal for p in q])


@pytest.mark.slow
def test_implicit_rigid_rollout_gradient(f64):
    model, sim, normal = _box_on_ramp("implicit")
    report = sim.stability_report()
    assert report.ok and "implicit" in report.rows[0].detail, str(report)
    run, total = rigid_track_loss(sim, 1, 30, 60, seed=7)
    run()
    y = _corner_heights(model, sim, normal)
    bottom = y[0] < 0
    assert bottom.sum() == 4 and np.all(y[:, bottom] < 0) and np.all(y[:, ~bottom] > 0), \
        "the four bottom corners stay in contact, the top ones never touch"
    params = model.parameters()
    names = ["collider_ke", "collider_kd", "collider_kf", "collider_mu", "body_q0", "body_qd0", "body_mass"]
    # eps 1e-6: at 1e-5 the quaternion of body_q0 has a truncation error of 2e-5 relative (measured), 2e-9 at 1e-6
    tgs.check_gradient(run, total, [params[n] for n in names], n_dirs=3, eps=1e-6, rtol=1e-5).assert_ok()
    for name in names[:4] + ["body_mass"]:
        one = tgs.check_gradient(run, total, [params[name]], n_dirs=1, eps=1e-5, rtol=1e-5)
        assert one.ok, f"{name}: {one}"
        assert abs(one.analytic[0]) > 1e-8, f"{name} should matter here"


# -- stability: a light cube with a large kd or kf -------------------------------------------------------------
def _light_cube(integration, kd, kf, on="ground", steps=300):
    """A 50 g cube of 5 cm resting on its face, sliding at 10 cm/s and spinning at 1 rad/s, at 32 steps a 30 fps
    frame: dt k / m = 2 at k = 100 N s/m, dt k w = 11 per corner (effective mass 9 g)."""
    b = tgs.SceneBuilder()
    ke = 2e3
    contact = dict(ke=ke, kd=kd, kf=kf, mu=0.5, damping_integration=integration)
    if on == "ground":
        b.add_ground(**contact)
    else:
        b.add_collider("plane", **contact)
    v, f = meshes.box_surface((0.05, 0.05, 0.05))
    m = 0.05
    b.add_rigid_body(v, f, mass=m, position=(0.0, 0.025 - m * 9.8 / (4 * ke), 0.0), velocity=(0.1, -0.01, 0.0),
                     angular_velocity=(0.0, 1.0, 0.0))
    model = b.finalize(requires_grad=False)
    sim, flagged = _run_flagged(model, steps)
    return sim.state.body_qd.to_numpy()[:, 0], sim.stability_report(), flagged


@pytest.mark.parametrize("kd, kf", [(100.0, 5.0), (10.0, 100.0)], ids=["kd100", "kf100"])
def test_light_cube_with_large_damping_is_stable_implicitly_and_flagged_explicitly(f64, kd, kf):
    qd, report, flagged = _light_cube("explicit", kd, kf)
    assert flagged and not report.ok
    assert f"kd = {kd:g}" in report.violations[0].detail or f"kf = {kf:g}" in report.violations[0].detail
    # past the explicit limit the slide chatters: the spin and the slip flip sign step after step
    assert np.abs(qd[-50:, :3]).max() > 0.1, "the spin chatters (Coulomb-capped) instead of stopping"
    assert np.sum(np.diff(np.sign(qd[-100:, 3])) != 0) > 50
    qd, report, flagged = _light_cube("implicit", kd, kf)
    assert not flagged and report.ok, str(report)
    row = report.rows[0]
    assert "implicit" in row.detail and row.gamma * report.dt < 1
    assert np.all(np.isfinite(qd)) and np.abs(qd[:, 3:]).max() < 0.11, "bounded"
    assert np.abs(qd[-50:, :3]).max() < 1e-6 and np.abs(qd[-50:, 3:]).max() < 1e-4, \
        "the slide, the spin and the bounce stop: no chatter"


def test_ground_and_plane_collider_agree_for_a_rigid_body(f64):
    """The plane collider y = 0 with the ground's constants and law gives the ground's motion (the two kernel
    paths of a body's point, RigidGroundContact and RigidColliderContact)."""
    ground, ground_report, _ = _light_cube("implicit", 10.0, 100.0, steps=150)
    plane, plane_report, _ = _light_cube("implicit", 10.0, 100.0, on="collider", steps=150)
    np.testing.assert_allclose(plane, ground, rtol=1e-9, atol=1e-12)
    assert ground_report.ok and plane_report.ok


def _final_state(integration, dt):
    model, sim, _ = _box_on_ramp(integration, kd=5.0, kf=10.0, steps=int(round(0.1 / dt)), dt=dt, theta=0.0,
                                 on="ground")
    sim.run()
    return np.concatenate([sim.final_state("body_q").ravel(), sim.final_state("body_qd").ravel()])


@pytest.mark.slow
def test_implicit_and_explicit_agree_as_dt_goes_to_zero(f64):
    # w = w_split here: dt k w_split = 0.5 at 1 ms (P = 8 corners), hence the looser finest gap
    assert_implicit_tends_to_explicit(_final_state, 1e-3)


def test_add_rigid_body_takes_damping_integration():
    b = tgs.SceneBuilder()
    b.add_ground()
    v, f = meshes.box_surface((0.1, 0.1, 0.1))
    with pytest.raises(ValueError, match="damping_integration: expected one of .* got 'backward'"):
        b.add_rigid_body(v, f, position=(0.0, 0.2, 0.0), damping_integration="backward")
    b.add_rigid_body(v, f, position=(0.0, 0.2, 0.0), damping_integration="implicit")
    b.add_rigid_body(v, f, position=(1.0, 0.2, 0.0))
    model = b.finalize(requires_grad=False)
    laws = sorted(t.law.damping_integration for t in model.force_terms if type(t).__name__ == "RigidGroundContact")
    assert laws == ["explicit", "implicit"]
    np.testing.assert_array_equal(model.body_contact_point_count.to_numpy(), [8, 8])
    # a body without its own option takes the ground's ([ground] damping_integration in a scene file)
    b = tgs.SceneBuilder()
    b.add_ground(damping_integration="implicit")
    b.add_rigid_body(v, f, position=(0.0, 0.2, 0.0), contact_points=v[:4])
    model = b.finalize(requires_grad=False)
    assert [t.law.damping_integration for t in model.force_terms if type(t).__name__ == "RigidGroundContact"] == \
        ["implicit"]
    np.testing.assert_array_equal(model.body_contact_point_count.to_numpy(), [4])


def _stacked_boxes(integration, kd):
    """A 50 g cube of 5 cm resting on a 1 kg box on the ground, with a soft ball of 8 vertices of 5 g beside it
    (particle-body): every rigid contact term's pre-flight row at kd = kf."""
    b = tgs.SceneBuilder()
    b.add_ground(ke=2e3, kd=kd, kf=kd, mu=0.5, damping_integration=integration)
    v, f = meshes.box_surface((0.3, 0.1, 0.3))
    b.add_rigid_body(v, f, mass=1.0, position=(0.0, 0.05, 0.0))
    v, f = meshes.box_surface((0.05, 0.05, 0.05))
    b.add_rigid_body(v, f, mass=0.05, position=(0.0, 0.1251, 0.0), rotation=tgs.quat_from_axis_angle((0, 1, 0), 0.3))
    b.add_particles(np.array([[0.1, 0.12, 0.1], [-0.1, 0.12, 0.1]]), np.zeros((2, 3)), np.array([0.005, 0.005]),
                    radius=0.01)
    model = b.finalize(requires_grad=False)
    return tgs.stability_report(model, DT)


def test_preflight_rows_of_every_rigid_pairing_under_implicit_damping(f64):
    """Body-body corners, box edges and particle-body take the implicit row (the ke mode's, with the split
    damping fraction gamma_eff dt < 1) where the law is implicit; explicitly the same kd flags them."""
    terms = ("RigidGroundContact", "BodyBodyContact", "BoxEdgeContact", "ParticleBodyContact")
    explicit = _stacked_boxes("explicit", 200.0)
    assert {r.term for r in explicit.violations} >= set(terms), str(explicit)
    implicit = _stacked_boxes("implicit", 200.0)
    assert implicit.ok, str(implicit)
    rows = {r.term: r for r in implicit.rows}
    for term in terms:
        assert "implicit" in rows[term].detail and 0 < rows[term].gamma * implicit.dt < 1, (term, rows[term])


def _cube_on_box(integration, steps=300):
    """The light cube of `_light_cube` sliding and spinning on a 1 kg box that rests on the ground: the pair's
    kd = kf = 100 N s/m (the bodies' constants; the ground's kd 10, kf 10 are within the explicit limit of the
    heavy box)."""
    b = tgs.SceneBuilder()
    b.add_ground(ke=2e4, kd=10.0, kf=10.0, mu=0.5, damping_integration=integration)
    v, f = meshes.box_surface((0.3, 0.1, 0.3))
    b.add_rigid_body(v, f, mass=1.0, position=(0.0, 0.05 - 9.8 / 8e4, 0.0))
    v, f = meshes.box_surface((0.05, 0.05, 0.05))
    b.add_rigid_body(v, f, mass=0.05, position=(0.0, 0.125 - 0.05 * 9.8 / 8e3 - 9.8 / 8e4, 0.0), ke=2e3, kd=100.0,
                     kf=100.0, velocity=(0.1, -0.01, 0.0), angular_velocity=(0.0, 1.0, 0.0))
    model = b.finalize(requires_grad=False)
    model.set("body_pair_ke", [2e3, 2e3])
    sim, flagged = _run_flagged(model, steps)
    qd = sim.state.body_qd.to_numpy()
    return qd[:, 1] - qd[:, 0], sim.stability_report(), flagged


@pytest.mark.slow
def test_light_cube_on_a_box_settles_implicitly(f64):
    """Body-body contact (corners, `BodyBodyContact`) with implicit damping: the pair's effective mass (both
    bodies' split w summed) keeps a 50 g cube with the pair's kd = kf = 100 N s/m from chattering on the box."""
    rel, report, flagged = _cube_on_box("explicit")
    assert flagged and any(r.term == "BodyBodyContact" for r in report.violations), str(report)
    assert np.abs(rel[-50:, :3]).max() > 0.05, "explicitly the spin chatters"
    rel, report, flagged = _cube_on_box("implicit")
    assert not flagged and report.ok, str(report)
    # (measured: the spin 9.5e-3 rad/s at steps 50-100, 4.9e-5 at 250-300, 1e-6 at 550-600; explicitly 0.34 throughout)
    assert np.all(np.isfinite(rel)) and np.abs(rel[-50:, :3]).max() < 2e-4 and np.abs(rel[-50:, 3:]).max() < 1e-3, \
        "the cube comes to rest on the box"
    assert np.abs(rel[-50:, :3]).max() < 0.02 * np.abs(rel[50:100, :3]).max(), "and its spin decays"


def _vertex_on_box(integration, steps=300):
    """A 5 g particle (a soft ball's vertex) sliding on a resting 1 kg box whose kd = kf = 150 N s/m (Warp's and
    Newton's soft-clip values; the ground's are 10): particle-body contact, at the particle's 1 / m plus the box
    point's split w.  Returns the particle's velocity relative to the box, the report, whether it was flagged."""
    b = tgs.SceneBuilder()
    b.add_ground(ke=2e3, kd=10.0, kf=10.0, mu=0.5, damping_integration=integration)
    v, f = meshes.box_surface((0.3, 0.1, 0.3))
    b.add_rigid_body(v, f, mass=1.0, position=(0.0, 0.05 - 1.005 * 9.8 / 8e3, 0.0), ke=2e3, kd=150.0, kf=150.0)
    radius = 0.01
    b.add_particles(np.array([[0.0, 0.1 + radius - 0.005 * 9.8 / 2e3, 0.0]]), np.array([[0.05, -0.01, 0.0]]),
                    np.array([0.005]), radius=radius)
    model = b.finalize(requires_grad=False)
    sim, flagged = _run_flagged(model, steps)
    rel = sim.state.particle_qd.to_numpy()[:, 0] - sim.state.body_qd.to_numpy()[:, 0, 3:]
    return rel, sim.stability_report(), flagged


@pytest.mark.slow
def test_light_vertex_on_a_box_settles_implicitly(f64):
    """Particle-body contact (`coupling.ParticleBodyContact`) with implicit damping: flagged and chattering
    explicitly, within the pre-flight and at rest on the box implicitly."""
    rel, report, flagged = _vertex_on_box("explicit")
    assert flagged and any(r.term == "ParticleBodyContact" for r in report.violations), str(report)
    # (measured: the slip flips sign every second step at an amplitude of 4-7 mm/s to the end)
    assert np.sum(np.diff(np.sign(rel[-100:, 0])) != 0) > 40 and np.abs(rel[-50:, 0]).max() > 1e-3, \
        "explicitly the slip chatters"
    rel, report, flagged = _vertex_on_box("implicit")
    assert not flagged and report.ok, str(report)
    assert np.all(np.isfinite(rel)) and np.abs(rel[-50:]).max() < 1e-4, "the vertex comes to rest on the box"


def _box_on_box_implicit(steps=60):
    """test_body_contact's 0.2 m box resting on a 0.5 x 0.2 x 0.5 m box on the ground, sliding and spinning, with
    damping_integration="implicit" and the top box's kd 40, kf 60 (pair means 27.5, 55 N s/m): dt kd w_split ~ 1
    at the top box's corners (P = 8 on each box)."""
    b = tgs.SceneBuilder()
    b.add_ground(ke=2e4, kd=15.0, kf=50.0, mu=0.6, damping_integration="implicit")
    v, f = meshes.box_surface((0.5, 0.2, 0.5))
    b.add_rigid_body(v, f, mass=4.0, position=(0.0, 0.0994, 0.0), velocity=(0.05, -0.02, 0.0))
    v, f = meshes.box_surface((0.2, 0.2, 0.2))
    b.add_rigid_body(v, f, mass=1.0, position=(0.0, 0.2992, 0.0), velocity=(0.4, -0.06, 0.1),
                     angular_velocity=(0.0, 1.5, 0.0), ke=8e3, kd=40.0, kf=60.0, mu=0.3)
    model = b.finalize()
    return model, tgs.Simulator(model, dt=1e-3, steps=steps)


@pytest.mark.slow
def test_implicit_box_on_box_rollout_gradient(f64_without_ir_passes):
    """Body-body contact (the top box's corners in the lower box, `BodyBodyContact`) with implicit damping: the Tape
    against central differences along random directions for the pair's constants, masses and initial states."""
    from touch_tracks import EPS, touch_loss
    model, sim = _box_on_box_implicit()
    assert sim.stability_report().ok
    run, total = touch_loss(sim, 2, 15, seed=1)
    run()
    q = sim.state.body_q.to_numpy()
    gap = q[:, 1, 1] - q[:, 0, 1] - 0.2
    assert np.all(gap < 0) and np.all(gap > -2e-3), "the top box rests on the lower one throughout"
    params = model.parameters()
    names = ["body_pair_ke", "body_pair_kd", "body_pair_mu", "body_mass", "body_q0", "body_qd0"]
    tgs.check_gradient(run, total, [params[n] for n in names], n_dirs=3, eps=1e-6, rtol=1e-5).assert_ok()
    # the resting top box presses with its capped elastic force: the pair's kd acts only through the small rocking
    # (d loss / d kd 5.5e-9 measured; as in test_body_contact's explicit twin, 4.4e-7 there)
    # kd's step: touch_tracks.EPS (its derivative is 5e-7 of the loss, 0.012; at 1e-6 the differences' rounding
    # was 1.6e-5 of it, 1.2e-7 at 1e-5)
    for name, floor in (("body_pair_kd", 1e-9), ("body_mass", 1e-6)):
        one = tgs.check_gradient(run, total, [params[name]], n_dirs=1, eps=EPS.get(name, 1e-6), rtol=1e-5)
        assert one.ok, f"{name}: {one}"
        assert abs(one.analytic[0]) > floor, f"{name} should matter here"


@pytest.mark.slow
def test_implicit_particles_on_box_rollout_gradient(f64_without_ir_passes):
    """Particle-body contact (`coupling.ParticleBodyContact`, 1 / m_i + the body point's w) with implicit
    damping: test_coupling's four particles sliding on a box, the box implicit.  Tape against central
    differences along random directions for the body's constants (kd, kf enter through k_eff), the box's pose,
    velocity and mass (through w), and the particles' initial states and masses."""
    from test_coupling import particles_on_box_scene
    from touch_tracks import EPS
    model, sim, run, total = particles_on_box_scene("implicit")
    run()
    p = sim.state.particle_q.to_numpy()
    top = sim.state.body_q.to_numpy()[:, 0, 1] + 0.1
    depth = top[:, None] - (p[:, :, 1] - 0.02)
    assert np.all(depth > 0) and np.all(depth < 2e-3), "the particles rest on the box throughout"
    params = model.parameters()
    for name in ("body_kd", "body_kf", "body_mu", "body_mass", "body_q0", "body_qd0", "particle_qd0",
                 "particle_mass"):
        report = tgs.check_gradient(run, total, [params[name]], n_dirs=2, eps=EPS.get(name, 1e-7),
                                    rtol=1e-4 if name == "body_kd" else 1e-5)
        report.assert_ok()
        assert max(abs(a) for a in report.analytic) > 1e-10, f"{name}: gradient should not vanish here"


@pytest.mark.slow
def test_implicit_crossed_edges_rollout_gradient(f64_without_ir_passes):
    """Edge-edge contact (`box_edges.BoxEdgeContact`, both boxes' w summed) with implicit damping: test_box_edges'
    crossed ridges, both boxes implicit.  Tape against central differences for the pair's constants and the
    boxes' masses, poses and velocities (w depends on the pose through I_world)."""
    from test_box_edges import EDGE_EPS, crossed_edges_sim
    from touch_tracks import touch_loss
    model, sim = crossed_edges_sim("implicit")
    run, total = touch_loss(sim, 2, 10, seed=3)
    params = model.parameters()
    for name in ("body_pair_kd", "body_pair_kf", "body_pair_mu", "body_mass", "body_q0", "body_qd0"):
        report = tgs.check_gradient(run, total, [params[name]], n_dirs=2, eps=EDGE_EPS.get(name, 1e-7),
                                    rtol=1e-5)
        report.assert_ok()
        assert max(abs(a) for a in report.analytic) > 1e-10, f"{name}: gradient should not vanish here"
