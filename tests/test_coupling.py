"""Particle-body coupling (tigradsim/physics/coupling.py): particles, and the vertices of a FEM ball, against a
rigid box, with the reaction on the box.  Tape gradients of short rollouts against central differences
(float64), Newton's third law (momentum of a particle and a free body), the interpenetration error, and
copies of a batch that never touch.
The finite-difference steps: `touch_tracks` (EPS) says why.
"""
import numpy as np
import pytest

import tigradsim as tgs
from tigradsim import meshes
from tigradsim.physics.body_overlap import InterpenetrationError
from touch_tracks import BODY_PARAMS, EPS, f64, touch_loss  # noqa: F401 (f64: a fixture)



def test_newtons_third_law(f64):
    """No gravity, no ground: particles thrown at a spinning free box; the total linear momentum of the particles
    and the box is conserved to rounding, while the box's changes."""
    b = tgs.SceneBuilder(gravity=(0.0, 0.0, 0.0))
    v, f = meshes.box_surface((0.3, 0.2, 0.25))
    b.add_rigid_body(v, f, mass=1.5, angular_velocity=(0.3, 0.5, 0.0), ke=4e3, kd=4.0, kf=10.0, mu=0.5)
    b.add_particles([[-0.3, 0.05, 0.02], [0.05, 0.3, -0.03]], velocities=[[2.0, 0.3, 0.0], [0.4, -2.5, 0.0]],
                    masses=[0.2, 0.3], radius=0.03)
    model = b.finalize(requires_grad=False)
    sim = tgs.Simulator(model, dt=5e-4, steps=400)
    sim.run()
    pm = model.particle_mass.to_numpy()
    bm = model.body_mass.to_numpy()

    def momentum(t):
        particles = (pm[:, None] * sim.state.particle_qd.to_numpy()[t]).sum(0)
        return particles + bm[0] * sim.state.body_qd.to_numpy()[t, 0, 3:]

    assert np.abs(sim.state.body_qd.to_numpy()[-1, 0, 3:]).max() > 0.2, "the particles should have hit the box"
    np.testing.assert_allclose(momentum(-1), momentum(0), atol=1e-10)


def test_particle_inside_a_body_is_a_named_error(f64):
    b = tgs.SceneBuilder()
    v, f = meshes.box_surface((0.2, 0.2, 0.2))
    b.add_rigid_body(v, f, position=(0.0, 1.0, 0.0))
    b.add_particles([[0.0, 1.5, 0.0], [0.02, 1.05, 0.01]], radius=0.01)
    with pytest.raises(InterpenetrationError, match=r"particles 0\.\.1 starts 0\.06 m inside rigid body 0"):
        b.finalize()


def test_batch_copies_do_not_touch(f64):
    """Copies of a batch overlap in space (each is its own contact group): no interpenetration error, and each
    copy moves as the single scene does."""
    v, f = meshes.box_surface((0.2, 0.2, 0.2))

    def build(b, copy):
        b.add_ground()
        b.add_rigid_body(v, f, mass=1.0, position=(0.0, 0.3, 0.0), velocity=(0.1 * copy, 0.0, 0.0))
        b.add_particles([[0.0, 0.45, 0.0]], radius=0.05, masses=0.1)

    batch = tgs.batched(build, copies=3, requires_grad=False)
    sim = tgs.Simulator(batch.model, dt=1e-3, steps=300)
    sim.run()
    single = tgs.SceneBuilder()
    build(single, 2)
    ref = tgs.Simulator(single.finalize(requires_grad=False), dt=1e-3, steps=300)
    ref.run()
    np.testing.assert_allclose(sim.final_state("body_q")[2], ref.final_state("body_q")[0], atol=1e-12)
    np.testing.assert_allclose(sim.final_state("particle_q")[2], ref.final_state("particle_q")[0], atol=1e-12)
    assert ref.final_state("particle_q")[0, 1] > 0.24, "the particle rests on the box"


def particles_on_box_scene(damping_integration=None):
    """Four particles sliding on the top of a box that rests on the ground (all in contact throughout).  No
    particle moves with the box's normal velocity at the start (v_n = 0 exactly: the kink of max(-v_n, 0)).
    damping_integration: the box's (`add_rigid_body`; None: the ground's, explicit).  (model, sim, run, total)."""
    b = tgs.SceneBuilder()
    b.add_ground(ke=2e4, kd=15.0, kf=50.0, mu=0.6)
    v, f = meshes.box_surface((0.4, 0.2, 0.4))
    b.add_rigid_body(v, f, mass=2.0, position=(0.0, 0.0989, 0.0), velocity=(0.02, -0.005, 0.0),
                     ke=5e3, kd=3.0, kf=20.0, mu=0.4, damping_integration=damping_integration)
    b.add_particles([[-0.1, 0.21885, -0.1], [0.1, 0.2188, -0.05], [0.0, 0.21885, 0.1], [-0.05, 0.2188, 0.05]],
                    velocities=[[0.5, -0.007, 0.0], [0.0, -0.004, 0.3], [-0.2, -0.003, -0.2], [0.05, -0.006, 0.02]],
                    masses=[0.05, 0.08, 0.06, 0.07], radius=0.02)
    model = b.finalize()
    sim = tgs.Simulator(model, dt=1e-3, steps=60)
    run, total = touch_loss(sim, 1, 15, seed=3, particles=True)
    return model, sim, run, total


@pytest.fixture(scope="module")
def particles_on_box(f64):
    return particles_on_box_scene()


def test_particles_rest_and_slide_on_box(particles_on_box):
    model, sim, run, total = particles_on_box
    run()
    p = sim.state.particle_q.to_numpy()
    top = sim.state.body_q.to_numpy()[:, 0, 1] + 0.1
    depth = top[:, None] - (p[:, :, 1] - 0.02)
    assert np.all(depth > 0) and np.all(depth < 2e-3), "the particles should rest on the box throughout"
    assert abs(p[-1, 0, 0] - p[0, 0, 0]) > 0.01, "and slide on it"


@pytest.mark.slow
@pytest.mark.parametrize("name", BODY_PARAMS + ["particle_q0", "particle_qd0", "particle_mass"])
def test_particles_on_box_gradients(particles_on_box, name):
    model, sim, run, total = particles_on_box
    # d/d body_kd is 2.1402e-8 (the particles barely bounce): central differences give 2.14016e-8 at 1e-5,
    # 2.13995e-8 at 1e-6, so 1e-4 there
    rtol = 1e-4 if name == "body_kd" else 1e-5
    report = tgs.check_gradient(run, total, [model.parameters()[name]], n_dirs=2, eps=EPS.get(name, 1e-7), rtol=rtol)
    report.assert_ok()
    assert max(abs(a) for a in report.analytic) > 1e-8, f"{name}: gradient should not vanish here"


@pytest.fixture(scope="module")
def ball_on_box(f64):
    """A small FEM ball (meshes.tet_ball, 55 vertices) pressed onto a box resting on the ground."""
    b = tgs.SceneBuilder()
    b.add_ground(ke=2e4, kd=15.0, kf=50.0, mu=0.6)
    v, f = meshes.box_surface((0.4, 0.2, 0.4))
    b.add_rigid_body(v, f, mass=2.0, position=(0.0, 0.0997, 0.0), velocity=(0.0, -0.01, 0.0),
                     ke=3e3, kd=3.0, kf=20.0, mu=0.5)
    bv, bt = meshes.tet_ball(radius=0.08, resolution=1, center=(0.01, 0.2 + 0.08 + 0.005 - 0.001, 0.0))
    b.add_soft_mesh((bv, bt), params={"mu": 2e3, "lam": 3e3}, density=300.0, damping=0.5,
                    velocity=(0.2, -0.6, 0.1), radius=0.005)
    model = b.finalize()
    sim = tgs.Simulator(model, dt=5e-4, steps=80)
    run, total = touch_loss(sim, 1, 20, seed=4, particles=True)
    return model, sim, run, total


def test_ball_presses_box(ball_on_box):
    model, sim, run, total = ball_on_box
    run()
    y = sim.state.body_q.to_numpy()[:, 0, 1]
    p = sim.state.particle_q.to_numpy()
    assert p[:, :, 1].min() < 0.2 + 0.005 - 1e-4, "the ball should press into the box's top"
    assert y.min() < 0.0997 - 1e-4, "and push the box into the ground"


@pytest.mark.slow
@pytest.mark.parametrize("name", ["body_mass", "body_ke", "body_kd", "body_mu", "body_shape_size", "particle_qd0",
                                  "tet_params"])
def test_ball_on_box_gradients(ball_on_box, name):
    model, sim, run, total = ball_on_box
    report = tgs.check_gradient(run, total, [model.parameters()[name]], n_dirs=2, eps=EPS.get(name, 1e-7), rtol=1e-5)
    report.assert_ok()
    assert max(abs(a) for a in report.analytic) > 1e-8, f"{name}: gradient should not vanish here"


def test_stability_preflight_counts_the_new_contacts(f64):
    """The pre-flight reports body-body and particle-body contact like the ground's: a stiff pair past the
    explicit limit is named (no rollout runs)."""
    b = tgs.SceneBuilder()
    v, f = meshes.box_surface((0.2, 0.2, 0.2))
    b.add_rigid_body(v, f, mass=0.1, position=(0.0, 1.0, 0.0), ke=4e6)
    b.add_rigid_body(v, f, mass=0.1, position=(1.0, 1.0, 0.0), ke=4e6)
    b.add_particles([[3.0, 1.0, 0.0]], masses=0.01, radius=0.01)
    model = b.finalize(requires_grad=False)
    report = tgs.Simulator(model, dt=1e-6, steps=1).stability_report()
    terms = {r.term for r in report.rows}
    assert {"BodyBodyContact", "ParticleBodyContact"} <= terms
    with pytest.warns(tgs.StabilityWarning, match="ParticleBodyContact|BodyBodyContact"):
        tgs.Simulator(model, dt=2e-3, steps=1)
