"""MPM matter against colliders and rigid bodies at the grid (tigradsim/physics/mpm_boundary.py): the boundary
modes, matter held by every kind of shape, momentum exchanged exactly with a free rigid body, and float64
central-difference gradients along random directions for the colliders' pose, size and friction and for the
two-way coupling (body pose, velocity, mass, friction, shape size)."""
import numpy as np
import pytest
import taichi as ti

import tigradsim as tgs
from tigradsim.io import meshes
from tigradsim.physics.mpm_boundary import SEPARATE, SLIP, STICKY, project
from mpm_scenes import StateLoss


@pytest.fixture(scope="module", autouse=True)
def _f64():
    tgs.init(arch="cpu", precision="f64")
    yield


def test_boundary_modes():
    """project() against the formulas: sticky -> 0, slip -> no normal motion and Coulomb-reduced tangential
    motion either way, separate -> as slip when approaching, unchanged when leaving."""
    out = ti.Vector.field(3, float, shape=6)

    @ti.kernel
    def run(mu: float):
        n = ti.Vector([0.0, 1.0, 0.0])
        toward, away = ti.Vector([2.0, -1.0, 0.0]), ti.Vector([2.0, 1.0, 0.0])
        out[0] = project(toward, n, mu, STICKY)
        out[1] = project(toward, n, mu, SLIP)
        out[2] = project(away, n, mu, SLIP)
        out[3] = project(toward, n, mu, SEPARATE)
        out[4] = project(away, n, mu, SEPARATE)
        out[5] = project(ti.Vector([0.3, -1.0, 0.0]), n, mu, SEPARATE)     # friction stops it

    run(0.5)
    got = out.to_numpy()
    np.testing.assert_allclose(got[0], 0.0, atol=1e-12)
    np.testing.assert_allclose(got[1], [1.5, 0, 0], atol=1e-9)        # |u_t| 2 - mu |u_n| 0.5
    np.testing.assert_allclose(got[2], [1.5, 0, 0], atol=1e-9)
    np.testing.assert_allclose(got[3], [1.5, 0, 0], atol=1e-9)
    np.testing.assert_allclose(got[4], [2.0, 1.0, 0], atol=1e-12)
    np.testing.assert_allclose(got[5], 0.0, atol=1e-9)


def test_bad_boundary_input():
    b = tgs.SceneBuilder()
    with pytest.raises(ValueError, match="mpm_boundary: expected one of .* got 'stick'"):
        b.add_collider("sphere", 0.1, mpm_boundary="stick")
    with pytest.raises(ValueError, match="boundary: expected one of"):
        b.add_mpm_grid(lower=(0, 0, 0), upper=(1, 1, 1), resolution=8, boundary="glue")
    with pytest.raises(ValueError, match="band"):
        tgs.SceneBuilder().add_mpm_grid(lower=(0, 0, 0), upper=(1, 1, 1), resolution=8, band=-0.1)


@pytest.mark.parametrize("shape", ["collider", "body"])
def test_matter_starting_inside_a_shape_is_a_named_error(shape):
    b = tgs.SceneBuilder(gravity=(0, -9.8, 0))
    if shape == "collider":
        b.add_collider("sphere", 0.1, position=(0.5, 0.5, 0.5))
        words = r"MPM object 0 starts 0\.\d+ m inside collider 0 \(sphere\)"
    else:
        v, f = meshes.box_surface((0.2, 0.2, 0.2))
        b.add_rigid_body(v, f, mass=1.0, position=(0.5, 0.5, 0.5))
        words = r"MPM object 0 starts 0\.\d+ m inside rigid body 0"
    b.add_mpm_grid(lower=(0, 0, 0), upper=(1, 1, 1), resolution=8)
    b.add_mpm(box=((0.375, 0.375, 0.375), (0.625, 0.625, 0.625)), material="mpm_neo_hookean")
    with pytest.raises(ValueError, match=words):
        b.finalize()


def _five_colliders(b, modes=("separate", "slip", "sticky", "separate", "slip")):
    """A tilted plane, a sphere, a box, a capsule and a mesh (an icosphere) under a falling block."""
    v, f = meshes.icosphere(1, radius=0.09)
    b.add_collider("plane", position=(0.5, 0.16, 0.5), rotation=tgs.quat_from_axis_angle((0, 0, 1), 0.15), mu=0.3,
                   mpm_boundary=modes[0])
    b.add_collider("sphere", 0.08, position=(0.36, 0.33, 0.36), mu=0.5, mpm_boundary=modes[1])
    b.add_collider("box", (0.07, 0.05, 0.06), position=(0.64, 0.33, 0.36), rotation=tgs.quat_from_axis_angle(
        (0, 1, 0), 0.4), mu=0.4, mpm_boundary=modes[2])
    b.add_collider("capsule", (0.05, 0.06), position=(0.36, 0.33, 0.64), rotation=tgs.quat_from_axis_angle(
        (1, 0, 0), 1.2), mu=0.6, mpm_boundary=modes[3])
    b.add_collider("mesh", 1.0, position=(0.64, 0.31, 0.64), mesh=(v, f), resolution=12, mu=0.2,
                   mpm_boundary=modes[4])


@pytest.mark.slow        # ~15 s, most of it compiling
def test_every_shape_holds_the_matter():
    """A soft block dropped on five colliders of every kind comes to rest on them: no particle ends inside a
    shape deeper than half a cell (a grid boundary holds matter to about that: a particle's velocity blends
    nodes inside the shape's influence with nodes outside it; at 12 cells across, the
    icosphere let it 0.6 cell in; at 16, every shape less than a quarter)."""
    b = tgs.SceneBuilder(gravity=(0, -9.8, 0))
    b.add_mpm_grid(lower=(0, 0, 0), upper=(1, 1, 1), resolution=16, mu=0.3)
    _five_colliders(b)
    b.add_mpm(box=((0.22, 0.48, 0.22), (0.78, 0.66, 0.78)), material="mpm_neo_hookean", params={"E": 2e4, "nu": 0.3},
              density=300.0, particles_per_cell=8)
    model = b.finalize(requires_grad=False)
    sim = tgs.Simulator(model, dt=1e-3, steps=250)
    sim.run()
    x = sim.final_state("mpm_x")
    assert x[:, 1].max() < 0.61                       # it fell (its top from 0.66 m) ...
    from tigradsim.physics.colliders import Colliders
    table = b.component(Colliders)
    dx = 1.0 / 16
    for c in range(5):
        depth = -table.signed_distance_np(c, x).min()
        assert depth < 0.5 * dx, (c, depth)          # ... and no collider let it through


def _coupled_scene(E=3e3, body_velocity=(0.0, 1.0, 0.0), offset=0.02, resolution=16, ppc=8, mass=1.0,
                   boundary="separate", block=((0.4, 0.5, 0.4), (0.6, 0.65, 0.6)), requires_grad=False):
    """A soft block falling onto a free box thrown up at it, away from the walls and with no ground."""
    b = tgs.SceneBuilder(gravity=(0, -9.8, 0))
    v, f = meshes.box_surface((0.2, 0.1, 0.2))
    b.add_rigid_body(v, f, mass=mass, position=(0.5 + offset, 0.35, 0.5), velocity=body_velocity, mu=0.4)
    b.add_mpm_grid(lower=(0, 0, 0), upper=(1, 1, 1), resolution=resolution, mu=0.3, boundary=boundary)
    obj = b.add_mpm(box=block, material="mpm_neo_hookean", params={"E": E, "nu": 0.3},
                    density=500.0, velocity=(0.0, -1.0, 0.0), particles_per_cell=ppc)
    return b.finalize(requires_grad=requires_grad), obj


def test_free_fall_collision_conserves_momentum():
    """Matter and body collide in free fall (no wall, no ground): the sum of their momenta changes by the
    gravity impulse alone, to round-off, while each one's momentum changed by much more (they did collide,
    off-centre: the body turns)."""
    model, obj = _coupled_scene()
    steps, dt = 150, 1e-3
    sim = tgs.Simulator(model, dt=dt, steps=steps)
    sim.run()
    particle_mass = obj.mass / obj.particle_count
    matter = particle_mass * sim.state.mpm_v.to_numpy()[[0, steps]].sum(axis=1)
    body = 1.0 * sim.state.body_qd.to_numpy()[[0, steps], 0, 3:]
    gravity_impulse = (obj.mass + 1.0) * np.array([0.0, -9.8, 0.0]) * steps * dt
    change = (matter[1] + body[1]) - (matter[0] + body[0])
    np.testing.assert_allclose(change, gravity_impulse, atol=1e-10 * obj.mass)
    exchanged = (body[1] - body[0]) - 1.0 * np.array([0.0, -9.8, 0.0]) * steps * dt
    assert exchanged[1] < -1.0, exchanged                                  # the matter pushed the body down
    assert abs(sim.state.body_qd.to_numpy()[steps, 0, 2]) > 0.1            # and turned it (off-centre hit)


@ti.data_oriented
class _BodyLoss(StateLoss):
    """StateLoss plus random weights on the body's pose and velocity (so that the reaction's gradient counts)."""

    def __init__(self, model, seed=0):
        super().__init__(model, seed)
        rng = np.random.default_rng(seed + 1)
        self.wq = ti.Vector.field(7, float, shape=())
        self.wqd = ti.Vector.field(6, float, shape=())
        self.wq.from_numpy(rng.standard_normal(7))
        self.wqd.from_numpy(rng.standard_normal(6))

    @ti.kernel
    def observe_body(self, state: ti.template(), s: ti.i32):
        for b in range(1):
            self.loss[None] += self.wq[None].dot(state.body_q[s, b]) + self.wqd[None].dot(state.body_qd[s, b])


def _gradcheck(model, fields, steps, dt=2e-3, body=False, rtol=1e-5):
    """Each field on its own (two random directions): the Tape's directional derivative against central
    differences, and not zero (each field does reach the loss)."""
    sim = tgs.Simulator(model, dt=dt, steps=steps)
    loss = _BodyLoss(model) if body else StateLoss(model)

    def observe(state, slot, frame):
        loss.observe(state, slot)
        if body:
            loss.observe_body(state, slot)
    sim.observe(observe, every=steps)
    for k, field in enumerate(fields):
        report = tgs.check_gradient(sim.run, loss.loss, [field], direction_count=2, eps=1e-6, rtol=rtol, seed=k)
        report.assert_ok()
        assert max(abs(a) for a in report.analytic) > 1e-6, (field, report)


@pytest.mark.slow        # 158 s from an empty cache in the suite with Taichi's IR passes, 25 s without
def test_collider_pose_size_friction_gradients(f64_without_ir_passes):
    """d(loss)/d(collider pose, size, mu) through the grid boundary of five shapes in all three modes."""
    b = tgs.SceneBuilder(gravity=(0, -9.8, 0))
    b.add_mpm_grid(lower=(0, 0, 0), upper=(1, 1, 1), resolution=8, mu=0.3)
    _five_colliders(b)
    b.add_mpm(box=((0.25, 0.375, 0.25), (0.75, 0.625, 0.75)), material="mpm_neo_hookean", params={"E": 2e3, "nu": 0.3},
              density=500.0, velocity=(0.3, -1.0, 0.2), particles_per_cell=1)
    model = b.finalize()
    _gradcheck(model, [model.collider_pose, model.collider_size, model.collider_mu, model.mpm_x0], steps=6)


@pytest.mark.slow        # 119 s from an empty cache in the suite with Taichi's IR passes, 21 s without
def test_rigid_coupling_gradients(f64_without_ir_passes):
    """d(loss)/d(body pose, velocity, mass, friction, shape size; the matter's start) through the two-way
    coupling (the loss reads the body's final pose and velocity too)."""
    model, _ = _coupled_scene(E=2e3, resolution=8, ppc=1, body_velocity=(0.1, 2.0, 0.0), offset=0.05,
                              block=((0.375, 0.5, 0.375), (0.625, 0.75, 0.625)), requires_grad=True)
    model.set("body_qd0", np.array([[0.5, -0.3, 1.0, 0.1, 2.0, 0.0]]))
    _gradcheck(model, [model.body_q0, model.body_qd0, model.body_mass, model.body_mu, model.body_shape_size,
                       model.mpm_x0], steps=8, body=True)
