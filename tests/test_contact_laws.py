"""Contact-law options (tigradsim/physics/contact.py): the force function against the documented formulas,
its Tape gradient against finite differences, rollout gradients (particles and rigid bodies, f64) for
each non-default variant, laws per rigid body, and bad options.

FD scenes keep every contact point in contact for the whole rollout (checked), so no touchdown moves
inside a finite-difference step: with damping="uncapped" the force jumps at touchdown and such a
step would not converge (documented in contact.py).  The FD step is 1e-5 (relative): kd's derivative
is small here, and at 1e-6 round-off in the rollout reaches 2e-5 of it; truncation at 1e-5 is ~1e-8.
"""
import numpy as np
import pytest
import taichi as ti

import tigradsim as tgs
from tigradsim import meshes
from tigradsim.physics.contact import ContactLaw, ground_contact_force
from rigid_tracks import rigid_track_loss
from tigradsim.physics.rigid import quat_to_matrix_np

LAWS = [ContactLaw(), ContactLaw("uncapped"), ContactLaw(friction="huber", friction_velocity=0.05),
        ContactLaw("uncapped", "huber"), ContactLaw("uncapped", "warp", 0.05), ContactLaw(friction="warp")]
RADIUS = 0.01


def reference_force(x, v, ke, kd, kf, mu, law, radius=RADIUS):
    """The module docstring's formulas in numpy (one point)."""
    c = min(x[1] - radius, 0.0)
    vn = v[1]
    vt = v - np.array([0.0, vn, 0.0])
    fe = -ke * c
    if law.damping == "capped":
        fd = min(kd * max(-vn, 0.0), fe)
    else:
        fd = kd * max(-vn, 0.0) if c < 0 else 0.0
    fn = fe + fd
    if law.friction == "capped":
        k = min(kf, mu * fn / np.sqrt(vt @ vt + 1e-12))
    elif law.friction == "warp":       # Warp's eval_rigid_contacts: vt / H * min(kf H, mu_w fn), mu_w = mu delta
        speed, delta = np.sqrt(vt @ vt + 1e-12), law.friction_velocity
        huber = 0.5 * speed ** 2 if speed <= delta else delta * (speed - 0.5 * delta)
        k = min(kf * huber, mu * delta * fn) / huber
    else:
        s = np.sqrt(vt @ vt + law.friction_velocity ** 2)
        k = kf * mu * fn / (kf * s + mu * fn + 1e-30)
    return np.array([0.0, fn, 0.0]) - k * vt


@ti.data_oriented
class ForceProbe:
    """Evaluates ground_contact_force by one law for N points; loss = sum_i w_i . f_i."""

    def __init__(self, law, x, v, params, weights):
        n = len(x)
        self.law = law
        self.x = ti.Vector.field(3, float, n, needs_grad=True)
        self.v = ti.Vector.field(3, float, n, needs_grad=True)
        self.p = ti.Vector.field(4, float, n, needs_grad=True)    # ke, kd, kf, mu
        self.w = ti.Vector.field(3, float, n)
        self.f = ti.Vector.field(3, float, n, needs_grad=True)
        self.loss = ti.field(float, (), needs_grad=True)
        for fld, val in ((self.x, x), (self.v, v), (self.p, params), (self.w, weights)):
            fld.from_numpy(np.asarray(val, dtype=np.float64))

    @ti.kernel
    def run(self):
        for i in self.x:
            p = self.p[i]
            f = ground_contact_force(self.x[i], self.v[i], RADIUS, p[0], p[1], p[2], p[3], self.law)
            self.f[i] = f
            self.loss[None] += self.w[i].dot(f)


def _points(rng, n, y_range):
    x = np.zeros((n, 3))
    x[:, 1] = rng.uniform(*y_range, n)
    v = rng.normal(size=(n, 3)) * rng.choice([1e-4, 1e-2, 0.3, 2.0], size=(n, 1))   # slow to fast slides
    params = np.stack([rng.uniform(1e3, 1e4, n), rng.uniform(1, 50, n), rng.uniform(1, 50, n),
                       rng.uniform(0.2, 1.0, n)], axis=1)
    return x, v, params


@pytest.mark.parametrize("law", LAWS, ids=str)
def test_force_matches_the_documented_formula(f64, law):
    rng = np.random.default_rng(0)
    x, v, params = _points(rng, 64, (-0.02, 0.03))          # some points off the ground
    x[0, 1], v[0] = RADIUS - 1e-9, [0.3, -1.0, 0.0]          # just touching down at 1 m/s
    probe = ForceProbe(law, x, v, params, np.zeros((64, 3)))
    probe.run()
    f = probe.f.to_numpy()
    ref = np.array([reference_force(x[i], v[i], *params[i], law) for i in range(64)])
    np.testing.assert_allclose(f, ref, rtol=1e-12, atol=1e-12)
    assert np.all(f[x[:, 1] > RADIUS] == 0), "no force off the ground"
    assert np.all(f[:, 1] >= 0), "never attractive"
    ke, kd, kf, mu = params[0]
    if law.damping == "uncapped":      # dflex / Warp: full damping from the first penetrating step
        assert f[0, 1] == pytest.approx(kd * 1.0, rel=1e-6)
    else:                              # capped: continuous, 0 at c = 0
        assert f[0, 1] < 1e-4
    fn = f[:, 1]
    ft = np.linalg.norm(f[:, [0, 2]], axis=1)
    if law.friction == "warp":        # above mu fn at low slip: the cone of the slip speed's Huber factor
        speed = np.linalg.norm(v[:, [0, 2]], axis=1)
        delta = law.friction_velocity
        factor = np.where(speed <= delta, 2 * delta / np.maximum(speed, 1e-6), speed / (speed - 0.5 * delta))
        assert np.all(ft <= params[:, 3] * fn * factor * (1 + 1e-9)), "inside the Huber-widened cone"
    else:
        assert np.all(ft <= mu * 0 + params[:, 3] * fn * (1 + 1e-12)), "inside the Coulomb cone"


def test_huber_friction_limits(f64):
    """Viscous kf v_t for slow slides, the Coulomb value mu fn for fast ones, and the pure pseudo-Huber
    law -mu fn v_t / sqrt(|v_t|^2 + v_s^2) as kf grows."""
    law = ContactLaw(friction="huber", friction_velocity=1e-3)
    ke, kd, kf, mu = 1e4, 0.0, 20.0, 0.5
    fn = ke * 0.001                     # 1 mm penetration, at rest vertically: 10 N, Coulomb cap 5 N
    x = np.array([[0.0, RADIUS - 0.001, 0.0]] * 3)
    speeds = np.array([1e-4, 100.0, 0.01])
    v = np.zeros((3, 3))
    v[:, 0] = speeds
    params = np.array([[ke, kd, kf, mu], [ke, kd, kf, mu], [ke, kd, 1e12, mu]])
    probe = ForceProbe(law, x, v, params, np.zeros((3, 3)))
    probe.run()
    ft = -probe.f.to_numpy()[:, 0]
    assert ft[0] == pytest.approx(kf * 1e-4, rel=1e-2)          # kf (1 - kf s / (mu fn)) v_t, s ~ v_s
    assert ft[1] == pytest.approx(mu * fn, rel=5e-3)            # mu fn (1 - mu fn / (kf |v_t|))
    assert ft[2] == pytest.approx(mu * fn * 0.01 / np.hypot(0.01, 1e-3), rel=1e-9)


def test_warp_friction_limits(f64):
    """friction="warp": the Coulomb value mu fn |v_t| / (|v_t| - delta / 2) for fast slides (-> mu fn), twice
    mu fn at |v_t| = delta, viscous kf v_t for slow ones, and the default delta is Warp's 1 m/s."""
    assert ContactLaw(friction="warp").friction_velocity == 1.0
    delta = 0.02
    law = ContactLaw("uncapped", "warp", delta)
    ke, kd, kf, mu = 1e4, 0.0, 1000.0, 0.3        # kf |v_t| above the cap down to 3 mm/s
    fn = ke * 0.001
    speeds = np.array([100.0, 0.2, delta, 1e-4])
    x = np.array([[0.0, RADIUS - 0.001, 0.0]] * 4)
    v = np.zeros((4, 3))
    v[:, 0] = speeds
    probe = ForceProbe(law, x, v, np.array([[ke, kd, kf, mu]] * 4), np.zeros((4, 3)))
    probe.run()
    ft = -probe.f.to_numpy()[:, 0]
    assert ft[0] == pytest.approx(mu * fn, rel=1e-3)
    assert ft[1] == pytest.approx(mu * fn * 0.2 / 0.19, rel=1e-9)
    assert ft[2] == pytest.approx(2 * mu * fn, rel=1e-7)       # |v_t| = sqrt(delta^2 + 1e-12): just past d
    assert ft[3] == pytest.approx(kf * 1e-4, rel=1e-9)


@pytest.mark.parametrize("law", LAWS, ids=str)
def test_force_gradient_matches_finite_differences(f64, law):
    rng = np.random.default_rng(1)
    x, v, params = _points(rng, 32, (-0.02, 0.005))          # every point in contact: no jump
    probe = ForceProbe(law, x, v, params, rng.normal(size=(32, 3)))

    def run():
        probe.run()

    report = tgs.check_gradient(run, probe.loss, [probe.x, probe.v, probe.p], n_dirs=3, eps=1e-7, rtol=1e-6)
    report.assert_ok()


# -- rollouts ------------------------------------------------------------------------------
VARIANTS = [("uncapped", "capped"), ("capped", "huber"), ("uncapped", "warp")]
# the rigid rollout's bodies (one law each, one model): the first two; friction "warp" is FD-tested on the force
# and in the particle rollout (a third body did not finish compiling within 28 min on the loaded 2-vCPU VM)
RIGID_VARIANTS = VARIANTS[:2]


def sliding_particles(damping, friction, kd=0.5, kf=5.0, integration="explicit", dt=1e-3, steps=300, on="ground"):
    """Four particles of 0.1-0.25 kg sliding on the ground under one contact law (ke 200, mu 0.4): (model,
    Simulator).  They start near their static sink (5-12 mm; vertical oscillation at 28-45 rad/s), so they stay in
    contact, and with no v_n = 0 exactly at the start (max(-v_n, 0) has a kink there, where the Tape takes one
    side).  A StabilityWarning (kd, kf past the explicit pre-flight) is the caller's to expect.  on: "ground", or
    "collider" (a plane collider y = 0 with the same constants and law, and no ground)."""
    b = tgs.SceneBuilder()
    contact = dict(ke=200.0, kd=kd, kf=kf, mu=0.4, damping=damping, friction=friction,
                   friction_velocity=0.02 if friction != "capped" else None, damping_integration=integration)
    if on == "ground":
        b.add_ground(**contact)
    else:
        b.add_collider("plane", **contact)
    masses = np.array([0.1, 0.2, 0.15, 0.25])
    radius = 0.05
    sink = masses * 9.8 / 200.0
    q = np.zeros((4, 3))
    q[:, 0] = np.arange(4) * 0.5
    q[:, 1] = radius - 1.2 * sink
    qd = np.array([[0.5, 0.05, 0.0], [-0.3, 0.08, 0.6], [0.05, -0.06, 0.02], [0.9, -0.04, -0.9]])
    b.add_particles(q, qd, masses, radius=radius)
    model = b.finalize()
    return model, tgs.Simulator(model, dt=dt, steps=steps)


def trajectory_loss(sim):
    """(run, loss field): the rollout's positions every 30 steps against fixed random targets (MSE)."""
    rec = tgs.ParticleRecorder(sim, 30)
    loss = tgs.MSELoss(rec.values, np.random.default_rng(2).normal(size=(rec.frames, 4, 3)) * 0.3)

    def run():
        loss.value[None] = 0
        sim.run()
        loss()

    return run, loss.value


def _particle_scene(damping, friction):
    model, sim = sliding_particles(damping, friction)
    run, loss = trajectory_loss(sim)
    return model, sim, run, loss


@pytest.mark.parametrize("damping, friction", VARIANTS)
def test_particle_rollout_gradient(f64, damping, friction):
    model, sim, run, loss = _particle_scene(damping, friction)
    run()
    q = sim.state.particle_q.to_numpy()
    qd = sim.state.particle_qd.to_numpy()
    assert np.all(q[:, :, 1] < 0.05), "every particle stays in contact (no touchdown inside an FD step)"
    speed = np.linalg.norm(qd[:, :, [0, 2]], axis=2)
    assert speed[0].max() > 0.5 and speed[-1].min() < 0.05, "slides, then (nearly) stops"
    names = ["ground_ke", "ground_kd", "ground_kf", "ground_mu", "particle_qd0", "particle_mass"]
    fields = [model.parameters()[n] for n in names]
    tgs.check_gradient(run, loss, fields, n_dirs=3, eps=1e-5, rtol=1e-5).assert_ok()
    for name, fld in zip(names[:4], fields[:4]):
        report = tgs.check_gradient(run, loss, [fld], n_dirs=1, eps=1e-5, rtol=1e-5)
        report.assert_ok()
        assert abs(report.analytic[0]) > 1e-7, f"{name} should matter here"


BOX = (0.3, 0.1, 0.22)


def _rigid_scene():
    """Two boxes sliding and spinning on the ground, one per non-default law (one model: one compile)."""
    b = tgs.SceneBuilder()
    b.add_ground()
    v, f = meshes.box_surface(BOX)
    ke = 500.0
    sink = 9.8 / (4 * ke)                         # 4.9 mm; a 2 mm vertical oscillation at 45 rad/s
    for k, (damping, friction) in enumerate(RIGID_VARIANTS):
        # no corner with v_n = 0 exactly at the start (a kink of max(-v_n, 0), where the Tape takes one side)
        b.add_rigid_body(v, f, mass=1.0 + 0.2 * k, position=(2.0 * k, BOX[1] / 2 - 1.1 * sink, 0.0),
                         velocity=(0.8, -0.1, 0.3 - 0.5 * k), angular_velocity=(0.05, 2.0 - 3.0 * k, -0.03), ke=ke,
                         kd=5.0, kf=10.0, mu=0.4, damping=damping, friction=friction,
                         friction_velocity=0.02 if friction != "capped" else None)
    # 2 m apart, they never meet: a contact group each, so the step has no body-body terms (corners and crossed
    # edges per law), whose reverse kernel was most of this test's 5-minute compile from an empty cache
    b.contact_groups = {"bodies": np.arange(len(RIGID_VARIANTS))}
    model = b.finalize()
    sim = tgs.Simulator(model, dt=1e-3, steps=300)
    run, total = rigid_track_loss(sim, len(RIGID_VARIANTS), 30, 60, seed=3)

    return model, sim, run, total


def _corner_heights(model, sim, body):
    q = sim.state.body_q.to_numpy()[:, body]
    corners = model.contact_point.to_numpy()[model.contact_body.to_numpy() == body]
    return np.array([(quat_to_matrix_np(p[3:]) @ corners.T).T[:, 1] + p[1] for p in q])


def test_rigid_rollout_gradient(f64):
    model, sim, run, total = _rigid_scene()
    laws = sorted(str(t.law) for t in model.force_terms if type(t).__name__ == "RigidGroundContact")
    assert laws == sorted(str(ContactLaw(*v, **({"friction_velocity": 0.02} if v[1] != "capped" else {})))
                          for v in RIGID_VARIANTS)
    assert not [t for t in model.force_terms if type(t).__name__ in ("BodyBodyContact", "BoxEdgeContact")]
    run()
    for body in range(len(RIGID_VARIANTS)):
        y = _corner_heights(model, sim, body)
        bottom = y[0] < 0
        assert bottom.sum() == 4 and np.all(y[:, bottom] < 0) and np.all(y[:, ~bottom] > 0), \
            "the four bottom corners stay in contact, the top ones never touch"
        qd = sim.state.body_qd.to_numpy()[:, body]
        assert np.linalg.norm(qd[-1, 3:]) < 0.2 * np.linalg.norm(qd[0, 3:]), "friction slows the slide"
    names = ["body_mass", "body_ke", "body_kd", "body_kf", "body_mu", "body_qd0"]
    fields = [model.parameters()[n] for n in names]
    tgs.check_gradient(run, total, fields, n_dirs=2, eps=1e-5, rtol=1e-5).assert_ok()
    for body, law in enumerate(RIGID_VARIANTS):       # each parameter of each body (law) on its own
        for name, fld in zip(names[:5], fields[:5]):
            mask = np.arange(len(RIGID_VARIANTS)) == body
            report = tgs.check_gradient(run, total, [fld], n_dirs=1, eps=1e-5, rtol=1e-5, masks=[mask])
            assert report.ok, f"{law} {name}: {report}"
            assert abs(report.analytic[0]) > 1e-8, f"{law} {name} should matter here"


def _two_boxes(laws, ground_law):
    b = tgs.SceneBuilder()
    b.add_ground(ke=3e3, kd=8.0, kf=10.0, mu=0.4, **ground_law)
    v, f = meshes.box_surface(BOX)
    for k, law in enumerate(laws):
        if law is not None:
            b.add_rigid_body(v, f, mass=1.0, position=(2.0 * k, 0.1, 0.0), velocity=(1.0, -0.5, 0.2),
                             angular_velocity=(0.5, 2.0, 0.0), **law)
    model = b.finalize(requires_grad=False)
    sim = tgs.Simulator(model, dt=1e-3, steps=250)
    sim.run()
    return model, sim.state.body_q.to_numpy()


def test_laws_per_body(f64):
    """Two bodies with different laws in one model move as each does alone with its law; a body
    without options takes the ground's law."""
    ground = dict(friction="huber", friction_velocity=0.01)
    own = dict(damping="uncapped", friction="capped")
    model, q = _two_boxes([own, {}], ground)
    contact_terms = [t for t in model.force_terms if type(t).__name__ == "RigidGroundContact"]
    assert sorted(str(t.law) for t in contact_terms) == sorted(
        [str(ContactLaw("uncapped", "capped")), str(ContactLaw("capped", "huber", 0.01))])
    _, q0 = _two_boxes([own], ground)
    _, q1 = _two_boxes([None, {}], ground)
    np.testing.assert_allclose(q[:, 0], q0[:, 0], rtol=0, atol=1e-13)
    np.testing.assert_allclose(q[:, 1], q1[:, 0], rtol=0, atol=1e-13)
    assert np.abs(q[-1, 0, :3] - q[-1, 1, :3] + [-2.0, 0.0, 0.0]).max() > 1e-3, "the laws differ"



# Heights of the contact point above y = radius: in the air, at the boundary, barely in (1e-15 m: a
# cutoff for "in contact" anywhere below zero down to -1e-15 skips it), and deep.  The contact loops skip points that do not
# penetrate (contact.touches_ground); their force there must be what the formula gives, to the bit.
GAPS = [0.2, 1e-9, 0.0, -1e-15, -1e-9, -3e-3, -2e-2]


@pytest.mark.parametrize("law", LAWS, ids=str)
def test_contact_terms_give_the_formula_in_the_air_and_in_contact(f64, law):
    """One step's contact force on particles (ParticleGroundContact) and on a tilted box
    (RigidGroundContact: its corners span the heights) against `reference_force`."""
    rng = np.random.default_rng(4)
    ground = dict(ke=2e3, kd=3.0, kf=7.0, mu=0.6)
    b = tgs.SceneBuilder()
    b.add_ground(**ground, damping=law.damping, friction=law.friction, friction_velocity=law.friction_velocity)
    n = len(GAPS)
    x = np.zeros((n, 3))
    x[:, 0] = np.arange(n)
    x[:, 1] = RADIUS + np.array(GAPS)
    v = rng.normal(size=(n, 3)) * 0.5
    b.add_particles(x, v, np.full(n, 0.1), radius=RADIUS)
    verts, faces = meshes.box_surface(BOX)
    rot = np.array([0.3, 0.2, -0.1, 1.0]) / np.linalg.norm([0.3, 0.2, -0.1, 1.0])
    R = quat_to_matrix_np(rot)
    corners = verts - verts.mean(0)
    low = int(np.argmin((corners @ R.T)[:, 1]))
    position = np.array([20.0, -(corners @ R.T)[low, 1] - 1e-9, 0.0])     # lowest corner 1e-9 m in
    w, vel = np.array([0.4, -1.0, 0.7]), np.array([0.3, -0.2, 0.1])
    b.add_rigid_body(verts, faces, mass=1.0, position=position, rotation=rot, velocity=vel, angular_velocity=w,
                     **ground)
    model = b.finalize(requires_grad=False)
    sim = tgs.Simulator(model, dt=1e-4, steps=1)
    sim.run()
    ref = np.array([reference_force(x[i], v[i], **ground, law=law) for i in range(n)])
    got = sim.state.particle_f.to_numpy()[0]
    assert np.all(got[GAPS.index(0.2)] == 0) and got[GAPS.index(-1e-15), 1] > 0, "air / barely in"
    np.testing.assert_allclose(got, ref, rtol=1e-12, atol=1e-300)
    arm = corners @ R.T
    heights = position[1] + arm[:, 1]
    assert (heights > 0.01).sum() >= 4 and heights.min() < 0, "some corners in the air, one barely in"
    f_ref = [reference_force(position + r, vel + np.cross(w, r), **ground, law=law, radius=0.0) for r in arm]
    torque = sum(np.cross(r, f) for r, f in zip(arm, f_ref))
    got = sim.state.body_f.to_numpy()[0, 0]
    np.testing.assert_allclose(got, np.concatenate([torque, sum(f_ref)]), rtol=1e-12, atol=1e-300)
    assert abs(got[4]) > 0, "the corner 1e-9 m in pushes"

def test_bad_law_options():
    with pytest.raises(ValueError, match="damping: expected one of"):
        ContactLaw("soft")
    with pytest.raises(ValueError, match="friction_velocity: only used by friction='huber'"):
        ContactLaw(friction="capped", friction_velocity=0.1)
    with pytest.raises(ValueError, match="friction_velocity: expected a finite number > 0"):
        ContactLaw(friction="huber", friction_velocity=-1.0)
    b = tgs.SceneBuilder()
    with pytest.raises(ValueError, match="friction: expected one of"):
        b.add_ground(friction="coulomb")
    v, f = meshes.box_surface(BOX)
    with pytest.raises(ValueError, match="damping: expected one of"):
        b.add_rigid_body(v, f, damping="none")
    with pytest.raises(ValueError, match="friction_velocity: expected a finite number > 0"):
        b.add_rigid_body(v, f, friction="huber", friction_velocity=0.0)


def test_friction_velocity_without_huber_is_rejected_at_finalize(f64):
    b = tgs.SceneBuilder()
    b.add_ground()
    v, f = meshes.box_surface(BOX)
    b.add_rigid_body(v, f, position=(0.0, BOX[1] / 2, 0.0), friction_velocity=0.1)   # the ground's friction is "capped"
    with pytest.raises(ValueError, match="rigid body 0: friction_velocity: only used by friction='huber'"):
        b.finalize()
