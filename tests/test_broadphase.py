"""The grid broad phase (tigradsim/physics/broadphase.py) against the flat loop it replaces: the same pairs as a
brute-force numpy search, the same trajectories (to rounding) on a box stack, a pile of boxes in a bin and
particles on boxes, float64 central-difference gradients through the grid path (fused steps, one launch per step,
checkpointed segments), the capacity error and bad options.
The finite-difference steps: `touch_tracks` (EPS) says why.
"""
import numpy as np
import pytest

import tigradsim as tgs
from tigradsim import meshes
from tigradsim.physics.broadphase import BroadPhaseCapacityError
from touch_tracks import EPS, f64, touch_loss  # noqa: F401 (f64: a fixture)


def _stack(mode, steps=300):
    """Three boxes (0.3, 0.25, 0.2 m) stacked, each a little off-centre, on the ground."""
    b = tgs.SceneBuilder()
    b.add_ground(ke=2e4, kd=20.0, kf=50.0, mu=0.6)
    y = 0.0
    for s in (0.3, 0.25, 0.2):
        v, f = meshes.box_surface((s, s, s))
        b.add_rigid_body(v, f, density=200.0, position=(0.03 * s, y + s / 2, 0.0), ke=2e4, kd=20.0, kf=50.0, mu=0.6)
        y += s
    b.broad_phase = mode
    return tgs.Simulator(b.finalize(requires_grad=False), dt=1e-3, steps=steps)


def _pile(mode, count=27, steps=250, particles=False):
    """`count` 0.1 m boxes at random orientations on a lattice 0.18 m apart, dropped into a bin of four static
    box walls on the ground (vs_warp.py's pile64, smaller; like it, at 0.87 of the box-box contact's explicit
    limit, past the pre-flight's safe half: a forward comparison); particles=True adds a 4 x 4 sheet of
    particles falling onto them."""
    b = tgs.SceneBuilder()
    b.add_ground(ke=1e4, kd=10.0, kf=10.0, mu=0.5)
    v, f = meshes.box_surface((0.1, 0.1, 0.1))
    side = int(np.ceil(count ** (1 / 3)))
    rng = np.random.default_rng(1)
    for k in range(count):
        i, j, l = k % side, (k // side) % side, k // (side * side)
        q = rng.normal(size=4)
        b.add_rigid_body(v, f, density=100.0, position=(0.18 * (i - (side - 1) / 2), 0.1 + 0.18 * l,
                                                        0.18 * (j - (side - 1) / 2)), rotation=q / np.linalg.norm(q))
    for x, z, hx, hz in ((0.32, 0.0, 0.05, 0.32), (-0.32, 0.0, 0.05, 0.32), (0.0, 0.32, 0.27, 0.05),
                         (0.0, -0.32, 0.27, 0.05)):
        b.add_collider("box", (hx, 0.2, hz), (x, 0.201, z), ke=1e4, kd=10.0, kf=10.0, mu=0.5)
    if particles:
        g = np.linspace(-0.15, 0.15, 4)
        xz = np.array([(x, z) for x in g for z in g])
        b.add_particles(np.c_[xz[:, 0], np.full(len(xz), 0.1 + 0.18 * side), xz[:, 1]], masses=0.05, radius=0.02)
    b.broad_phase = mode
    return tgs.Simulator(b.finalize(requires_grad=False), dt=1e-3, steps=steps)


def test_box_stack_matches_flat(f64):
    flat, grid = _stack("flat"), _stack("grid")
    flat.run(), grid.run()
    q_flat, q_grid = flat.state.body_q.to_numpy(), grid.state.body_q.to_numpy()
    assert np.abs(q_flat[-1, :, 1] - q_flat[0, :, 1]).max() < 5e-3, "the stack should stay stacked"
    np.testing.assert_allclose(q_grid, q_flat, rtol=0, atol=1e-12)


@pytest.mark.slow
def test_pile_with_particles_matches_flat(f64):
    """27 boxes and 16 particles in the bin: the boxes land on each other (many pairs change over the run) and
    the same trajectories come out of both paths."""
    flat, grid = _pile("flat", particles=True), _pile("grid", particles=True)
    flat.run(), grid.run()
    q_flat, q_grid = flat.state.body_q.to_numpy(), grid.state.body_q.to_numpy()
    touching = [t for t in grid.force_terms if getattr(t, "broad", None) is not None]
    assert len(touching) == 3 and min(int(t.broad.pair_count[None]) for t in touching) > 0, \
        "boxes should touch boxes (corners and edges), and particles boxes, at the end"
    np.testing.assert_allclose(q_grid, q_flat, rtol=0, atol=1e-10)
    np.testing.assert_allclose(grid.state.particle_q.to_numpy(), flat.state.particle_q.to_numpy(), rtol=0, atol=1e-10)


def test_pairs_are_the_brute_force_pairs(f64):
    """At the end of a pile's run, the grid's (contact point, body) pairs are exactly those whose point lies
    inside the other body's bounding sphere (inflated by the point's radius), found by brute force."""
    sim = _pile("grid", count=27, steps=250)
    sim.run()
    model = sim.model
    term = next(t for t in sim.force_terms if type(t).__name__ == "BodyBodyContact")
    term.broad.build(sim.state, sim.steps, sim.steps)
    got = term.broad.pairs.to_numpy()[:int(term.broad.pair_count[None])]
    q = sim.state.body_q.to_numpy()[sim.steps].astype(np.float64)
    points, owner = model.contact_point.to_numpy(), model.contact_body.to_numpy()
    rot = np.array([tgs.rigid.quat_to_matrix_np(qq[3:]) for qq in q])
    world = q[owner, :3] + np.einsum("cij,cj->ci", rot[owner], points)
    bound = np.linalg.norm(model.body_shape_size.to_numpy(), axis=1) + model.body_contact_radius.to_numpy()[owner][:, None]
    dist = np.linalg.norm(world[:, None, :] - q[None, :, :3], axis=2)
    inside = (dist < bound) & (owner[:, None] != np.arange(len(q))[None, :])
    want = set(zip(*np.nonzero(inside)))
    assert len(want) > 20, "the boxes should be piled up"
    assert len(got) == len(set(map(tuple, got))), "no pair twice"
    assert set(map(tuple, got.tolist())) == want


def test_capacity_error_names_the_capacity(f64):
    """Four particles in the 2 cm gap between two boxes: each is inside both boxes' bounding spheres, 8 pairs
    for a list of 1 per particle."""
    v, f = meshes.box_surface((0.2, 0.2, 0.2))
    b = tgs.SceneBuilder()
    b.add_rigid_body(v, f, position=(-0.11, 1.0, 0.0))
    b.add_rigid_body(v, f, position=(0.11, 1.0, 0.0))
    b.add_particles([[0.0, 1.0, z] for z in (-0.03, -0.01, 0.01, 0.03)], radius=0.005)
    b.broad_phase_capacity = 1
    sim = tgs.Simulator(b.finalize(requires_grad=False), dt=1e-3, steps=2)
    with pytest.raises(BroadPhaseCapacityError, match=r"8 candidate \(particle, body\) pairs at step 0 exceed the "
                                                      r"pair list's capacity 4 \(1 per particle x 4\); raise "
                                                      r"SceneBuilder.broad_phase_capacity .* to at least 2"):
        sim.run()


def test_box_pair_capacity_error_names_the_builder_setting(f64):
    """64 boxes of 0.1 m on a lattice 0.15 m apart: each box's bounding sphere (radius 0.087 m) meets its face
    neighbours' only (144 pairs) and no corner lies in another's sphere; the box-pair list holds BODY_PAIR_SCALE
    (2) x broad_phase_capacity per box: 128 at 1, so the error asks for 2."""
    v, f = meshes.box_surface((0.1, 0.1, 0.1))
    b = tgs.SceneBuilder(gravity=(0.0, 0.0, 0.0))
    for k in range(64):
        b.add_rigid_body(v, f, position=(0.15 * (k % 4), 1.0 + 0.15 * (k // 4 % 4), 0.15 * (k // 16)))
    b.broad_phase_capacity = 1
    sim = tgs.Simulator(b.finalize(requires_grad=False), dt=1e-3, steps=2)
    with pytest.raises(BroadPhaseCapacityError, match=r"144 candidate \(body, body\) pairs at step 0 exceed the "
                                                      r"pair list's capacity 128 \(2 per body x 64\); raise "
                                                      r"SceneBuilder.broad_phase_capacity .* to at least 2"):
        sim.run()


@pytest.mark.parametrize("attr, value, match", [
    ("broad_phase", "octree", "broad_phase: expected one of"),
    ("broad_phase_capacity", 0, "broad_phase_capacity: expected a whole number >= 1"),
])
def test_bad_broad_phase_options(f64, attr, value, match):
    v, f = meshes.box_surface((0.2, 0.2, 0.2))
    b = tgs.SceneBuilder()
    b.add_rigid_body(v, f, position=(0.0, 1.0, 0.0))
    b.add_rigid_body(v, f, position=(0.0, 1.5, 0.0))
    setattr(b, attr, value)
    with pytest.raises(ValueError, match=match):
        b.finalize()


def _box_box_particles(**sim_kwargs):
    """A 0.2 m box resting on a wider box on the ground, sliding and spinning, with two particles landing on the
    top box: body-body and particle-body pairs through the grid in every step."""
    b = tgs.SceneBuilder()
    b.add_ground(ke=2e4, kd=15.0, kf=50.0, mu=0.6)
    v, f = meshes.box_surface((0.5, 0.2, 0.5))
    b.add_rigid_body(v, f, mass=4.0, position=(0.0, 0.0994, 0.0), velocity=(0.05, -0.02, 0.0))
    v, f = meshes.box_surface((0.2, 0.2, 0.2))
    b.add_rigid_body(v, f, mass=1.0, position=(0.0, 0.2992, 0.0), velocity=(0.4, -0.06, 0.1),
                     angular_velocity=(0.0, 1.5, 0.0), ke=8e3, kd=8.0, kf=20.0, mu=0.3)
    b.add_particles([[0.03, 0.425, 0.02], [-0.04, 0.43, -0.03]], velocities=[[0.1, -0.5, 0.0], [0.0, -0.6, 0.1]],
                    masses=0.12, radius=0.02)
    model = b.finalize()
    sim = tgs.Simulator(model, dt=1e-3, steps=50, **sim_kwargs)
    return model, sim


@pytest.mark.slow
@pytest.mark.parametrize("sim_kwargs", [{}, dict(fuse_steps=False, checkpoint_every=20)], ids=["fused", "checkpointed"])
def test_gradients_through_the_grid(f64_without_ir_passes, sim_kwargs):
    model, sim = _box_box_particles(**sim_kwargs)
    assert all(t.broad is not None for t in sim.force_terms if hasattr(t, "broad"))
    run, total = touch_loss(sim, 2, 10, seed=3, particles=True)
    params = model.parameters()
    names = ("body_q0", "body_qd0", "particle_q0", "body_ke", "body_pair_ke", "body_shape_size") if not sim_kwargs else \
        ("body_qd0", "particle_q0", "body_shape_size")
    for name in names:
        report = tgs.check_gradient(run, total, [params[name]], n_dirs=2, eps=EPS.get(name, 1e-7), rtol=1e-5)
        report.assert_ok()
        assert max(abs(a) for a in report.analytic) > 1e-6, f"{name}: gradient should not vanish here"
