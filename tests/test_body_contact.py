"""Rigid-rigid contact (tigradsim/physics/body_contact.py, body_shapes.py, body_overlap.py): Tape gradients of
short rollouts against central differences (float64), a stack that stays stacked, momentum conservation of two
colliding free bodies, the interpenetration error, body shapes and bad inputs.
The finite-difference steps: `touch_tracks` (EPS) says why.
"""
import numpy as np
import pytest

import tigradsim as tgs
from tigradsim import meshes
from tigradsim.physics.body_overlap import InterpenetrationError
from tigradsim.physics.body_shapes import is_box_mesh
from tigradsim.physics.shapes import BOX, MESH, SPHERE
from touch_tracks import PAIR_PARAMS, EPS, f64, touch_loss  # noqa: F401 (f64: a fixture)



def _box_on_box(steps=60):
    """A 0.2 m box resting (at its equilibrium depth, 0.2 mm) on a 0.5 x 0.2 x 0.5 m box on the ground, sliding
    at 0.4 m/s and spinning: every corner of the top box touches the lower box's top face at every step."""
    b = tgs.SceneBuilder()
    b.add_ground(ke=2e4, kd=15.0, kf=50.0, mu=0.6)          # kd != ke dt: off the capped damping's kink
    v, f = meshes.box_surface((0.5, 0.2, 0.5))
    # small normal velocities at the start: resting at v_n = 0 exactly sits on max(-v_n, 0)'s kink
    b.add_rigid_body(v, f, mass=4.0, position=(0.0, 0.0994, 0.0), velocity=(0.05, -0.02, 0.0))
    v, f = meshes.box_surface((0.2, 0.2, 0.2))
    b.add_rigid_body(v, f, mass=1.0, position=(0.0, 0.2992, 0.0), velocity=(0.4, -0.06, 0.1),
                     angular_velocity=(0.0, 1.5, 0.0), ke=8e3, kd=8.0, kf=20.0, mu=0.3)
    model = b.finalize()
    sim = tgs.Simulator(model, dt=1e-3, steps=steps)
    return model, sim


def test_box_shapes_are_detected(f64):
    v, f = meshes.box_surface((0.3, 0.2, 0.1))
    assert is_box_mesh(v)
    assert not is_box_mesh(meshes.icosphere(1)[0])
    b = tgs.SceneBuilder()
    b.add_rigid_body(v, f, position=(0, 1, 0))
    sv, sf = meshes.icosphere(1, radius=0.1)
    b.add_rigid_body(sv, sf, position=(1, 1, 0))
    b.add_rigid_body(sv, sf, position=(2, 1, 0), shape="sphere")
    b.add_rigid_body(v, f, position=(3, 1, 0), shape="box", shape_size=(0.2, 0.1, 0.05))
    model = b.finalize()
    assert model.body_shape_kind.to_numpy().tolist() == [BOX, MESH, SPHERE, BOX]
    size = model.body_shape_size.to_numpy()
    np.testing.assert_allclose(size[0], [0.15, 0.1, 0.05])
    assert abs(size[2, 0] - np.linalg.norm(sv, axis=1).max()) < 1e-12
    np.testing.assert_allclose(size[3], [0.2, 0.1, 0.05])


@pytest.mark.parametrize("kwargs, match", [
    (dict(shape="cone"), "shape: expected one of"),
    (dict(shape_size=0.1), "shape_size: give it with shape="),
    (dict(shape="box", shape_size=(0.1, 0.1)), "shape_size: a box takes"),
    (dict(shape="sphere", shape_size=-0.1), "shape_size"),
    (dict(shape="mesh", shape_resolution=2), "shape_resolution: expected a whole number >= 4"),
])
def test_bad_shape_options_are_named(f64, kwargs, match):
    v, f = meshes.box_surface()
    with pytest.raises(ValueError, match=match):
        tgs.SceneBuilder().add_rigid_body(v, f, **kwargs)


def test_interpenetration_is_a_named_error(f64):
    b = tgs.SceneBuilder()
    v, f = meshes.box_surface((0.2, 0.2, 0.2))
    b.add_rigid_body(v, f, position=(0.0, 1.0, 0.0))
    b.add_rigid_body(v, f, position=(0.05, 1.15, 0.03))
    with pytest.raises(InterpenetrationError, match=r"rigid body 1 starts 0\.03 m inside rigid body 0"):
        b.finalize()
    # resting contact (1 mm) is not an error
    b = tgs.SceneBuilder()
    b.add_rigid_body(v, f, position=(0.0, 1.0, 0.0))
    b.add_rigid_body(v, f, position=(0.05, 1.199, 0.0))
    b.finalize()


def test_each_point_touches_by_its_bodys_law(f64):
    """Bodies with different contact laws: one term per law, over the contact points of its bodies."""
    b = tgs.SceneBuilder()
    v, f = meshes.box_surface((0.2, 0.2, 0.2))
    b.add_rigid_body(v, f, position=(0.0, 1.0, 0.0))
    b.add_rigid_body(v, f, position=(1.0, 1.0, 0.0), damping="uncapped")
    b.add_rigid_body(v, f, position=(2.0, 1.0, 0.0))
    model = b.finalize()
    terms = [t for t in model.force_terms if type(t).__name__ == "BodyBodyContact"]
    assert sorted(t.law.damping for t in terms) == ["capped", "uncapped"]
    points = {t.law.damping: sorted(t.points.to_numpy().tolist()) for t in terms}
    assert points == {"capped": list(range(8)) + list(range(16, 24)), "uncapped": list(range(8, 16))}


def test_box_stack_stays_stacked(f64):
    """Three boxes (0.3, 0.25, 0.2 m) stacked on the ground stay stacked for 1 s: heights within 5 mm of
    rest, horizontal drift under 1 mm."""
    b = tgs.SceneBuilder()
    b.add_ground(ke=2e4, kd=20.0, kf=50.0, mu=0.6)
    sizes = [0.3, 0.25, 0.2]
    y, rest = 0.0, []
    for s in sizes:
        v, f = meshes.box_surface((s, s, s))
        rest.append(y + s / 2)
        b.add_rigid_body(v, f, density=200.0, position=(0.0, y + s / 2, 0.0), ke=2e4, kd=20.0, kf=50.0, mu=0.6)
        y += s
    sim = tgs.Simulator(b.finalize(requires_grad=False), dt=1e-3, steps=1000)
    sim.run()
    q = sim.final_state("body_q")
    np.testing.assert_allclose(q[:, 1], rest, atol=5e-3)
    assert np.abs(q[:, [0, 2]]).max() < 1e-3


def test_colliding_free_bodies_conserve_momentum(f64):
    """Two spinning boxes collide off-centre without gravity or ground: linear and angular momentum (about
    the origin) are conserved to rounding, while each body's own momentum changes."""
    b = tgs.SceneBuilder(gravity=(0.0, 0.0, 0.0))
    v, f = meshes.box_surface((0.2, 0.3, 0.25))
    b.add_rigid_body(v, f, mass=1.0, position=(-0.3, 0.0, 0.0), velocity=(2.0, 0.1, 0.0),
                     angular_velocity=(0.5, 1.0, 0.0), ke=5e3, kd=5.0, kf=10.0, mu=0.4)
    v, f = meshes.box_surface((0.3, 0.2, 0.2))
    q = np.array([0.1, 0.2, 0.05, 1.0])
    b.add_rigid_body(v, f, mass=2.0, position=(0.3, 0.07, 0.02), rotation=q / np.linalg.norm(q),
                     velocity=(-1.0, 0.0, 0.0), angular_velocity=(0.0, -2.0, 1.0), ke=3e3, kd=3.0, kf=10.0, mu=0.6)
    model = b.finalize(requires_grad=False)
    sim = tgs.Simulator(model, dt=5e-4, steps=600)
    sim.run()
    mass = model.body_mass.to_numpy()
    inertia = model.body_inertia.to_numpy() * mass[:, None, None]
    qs, qds = sim.state.body_q.to_numpy(), sim.state.body_qd.to_numpy()

    def momenta(t):
        p = (mass[:, None] * qds[t, :, 3:]).sum(axis=0)
        L = np.zeros(3)
        for k in range(2):
            R = tgs.rigid.quat_to_matrix_np(qs[t, k, 3:])
            L += R @ inertia[k] @ R.T @ qds[t, k, :3] + np.cross(qs[t, k, :3], mass[k] * qds[t, k, 3:])
        return p, L

    p0, L0 = momenta(0)
    p1, L1 = momenta(-1)
    assert np.abs(qds[-1, 0, 3:] - qds[0, 0, 3:]).max() > 0.5, "the bodies should have collided"
    np.testing.assert_allclose(p1, p0, atol=1e-9)
    # the implicit gyroscopic step changes |L| of a spinning free body by O(dt^2): compare with its own drift
    assert np.abs(L1 - L0).max() < 2e-3 * np.abs(L0).max()


@pytest.fixture(scope="module")
def box_on_box(f64):
    model, sim = _box_on_box()
    run, total = touch_loss(sim, 2, 15, seed=1)
    return model, sim, run, total


def test_box_on_box_touches_throughout(box_on_box):
    model, sim, run, total = box_on_box
    run()
    q = sim.state.body_q.to_numpy()
    gap = q[:, 1, 1] - q[:, 0, 1] - 0.2                   # < 0: the corners are inside the lower box
    assert np.all(gap < 0) and np.all(gap > -2e-3), "the top box should rest on the lower one"
    q = q[:, 1]
    assert q[-1, 0] > 0.015, "and slide on it"


# The top box slides on the lower one at the Coulomb cap mu fn throughout: the pair's kf does not act (its
# gradient is exactly 0; kf is checked by the sphere and the crossed edges, test_box_edges.py), and the pair's kd
# only through the small vertical rocking (d loss / d kd 4.4e-7 measured, where body_kd, also the ground's, gave
# more than 1e-6).
BOX_ON_BOX_FLOOR = {"body_pair_kd": 1e-7}


@pytest.mark.slow
@pytest.mark.parametrize("name", [n for n in PAIR_PARAMS if n != "body_pair_kf"])
def test_box_on_box_gradients(box_on_box, name):
    model, sim, run, total = box_on_box
    report = tgs.check_gradient(run, total, [model.parameters()[name]], n_dirs=2, eps=EPS.get(name, 1e-7), rtol=1e-5)
    report.assert_ok()
    assert max(abs(a) for a in report.analytic) > BOX_ON_BOX_FLOOR.get(name, 1e-6), \
        f"{name}: gradient should not vanish here"


@pytest.fixture(scope="module")
def sphere_box(f64):
    """A sphere body (analytic sphere shape, its icosphere vertices as contact points) thrown at a box resting
    on the ground: it hits the box's side and pushes it."""
    b = tgs.SceneBuilder()
    b.add_ground(ke=2e4, kd=15.0, kf=50.0, mu=0.5)
    v, f = meshes.box_surface((0.3, 0.2, 0.3))
    b.add_rigid_body(v, f, mass=1.0, position=(0.0, 0.0997, 0.0), velocity=(0.0, -0.02, 0.0))
    sv, sf = meshes.icosphere(1, radius=0.08)
    # it hits the side at mid height (0.10-0.12 m), away from the box's edges (where the nearest face switches),
    # and its first point touches inside a step (a gap of exactly 10 steps x 2 mm touches at c = 0 exactly: a kink
    # of the capped damping at the base point, where the Tape takes one side and central differences the mean)
    b.add_rigid_body(sv, sf, mass=0.5, position=(-0.2537, 0.11, 0.02), velocity=(2.0, 0.3, 0.0),
                     shape="sphere", ke=6e3, kd=6.0, kf=20.0, mu=0.4)
    model = b.finalize()
    sim = tgs.Simulator(model, dt=1e-3, steps=80)
    run, total = touch_loss(sim, 2, 20, seed=2)
    return model, sim, run, total


def test_sphere_pushes_box(sphere_box):
    model, sim, run, total = sphere_box
    run()
    q = sim.state.body_q.to_numpy()
    assert q[-1, 0, 0] > 0.01, "the box should be pushed"


@pytest.mark.slow
@pytest.mark.parametrize("name", PAIR_PARAMS)
def test_sphere_box_gradients(sphere_box, name):
    model, sim, run, total = sphere_box
    report = tgs.check_gradient(run, total, [model.parameters()[name]], n_dirs=2, eps=EPS.get(name, 1e-7), rtol=1e-5)
    report.assert_ok()
    # the sphere hits the box's side nearly head on: the pair's mu acts little (5.4e-7 measured; body_mu, also the
    # ground's under the pushed box, gave more than 1e-6)
    floor = 1e-7 if name == "body_pair_mu" else 1e-6
    assert max(abs(a) for a in report.analytic) > floor, f"{name}: gradient should not vanish here"
