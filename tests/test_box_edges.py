"""Edge-edge contact of box-shaped rigid bodies (tigradsim/physics/box_edges.py): two boxes balanced on crossed
ridges rest on each other (no corner of either is inside the other, so corner contact alone lets the top one
sink through), free boxes meeting edge to edge conserve momentum, the Tape gradient of a rollout through
an edge-edge contact matches central differences in float64 (box pairs from the grid broad phase, fused steps;
one launch per step with checkpointed segments; the flat list of box pairs), and the grid's box pairs are the
brute-force ones and give the flat list's trajectories on a small pile.  FD steps: `touch_tracks` (EPS)."""
import numpy as np
import pytest

import tigradsim as tgs
from tigradsim import meshes
from tigradsim.physics.rigid_pose import quat_from_axis_angle
from touch_tracks import PAIR_PARAMS, EPS, f64, touch_loss  # noqa: F401 (f64: a fixture)

H = 0.1                                  # half side of the boxes' square cross-sections [m]
RIDGE = np.sqrt(2.0) * H                 # centre height of a box standing on an edge [m]


def _ridges(builder, top_y, top_velocity=(0.0, 0.0, 0.0), spin=(0.0, 0.0, 0.0), **contact):
    """A 0.2 x 0.2 x 0.6 m box standing on its edge (ridge along z, rotated 45 deg about z) at the origin and a
    0.6 x 0.2 x 0.2 m box above it on its edge (ridge along x), their ridges crossed."""
    v, f = meshes.box_surface((2 * H, 2 * H, 0.6))
    builder.add_rigid_body(v, f, density=500.0, position=(0.0, RIDGE, 0.0),
                           rotation=quat_from_axis_angle((0, 0, 1), np.pi / 4), **contact)
    v, f = meshes.box_surface((0.6, 2 * H, 2 * H))
    builder.add_rigid_body(v, f, density=100.0, position=(0.0, top_y, 0.0),
                           rotation=quat_from_axis_angle((1, 0, 0), np.pi / 4), velocity=top_velocity,
                           angular_velocity=spin, **contact)


@pytest.mark.slow
def test_box_rests_on_crossed_ridge(f64):
    """Dropped from 1 cm onto the other box's ridge, the top box comes to rest on it: after 0.5 s its ridge is
    within 3 mm of the lower box's (the penalty depth of its weight, 1.2 mm here), never lower than 8 mm (the
    impact: 0.44 m/s into ke 2e4 N/m at 2.4 kg, about 5 mm; sinking through would take it 0.2 m down)."""
    contact = dict(ke=2e4, kd=60.0, kf=50.0, mu=0.6)
    b = tgs.SceneBuilder()
    b.add_ground(**contact)
    _ridges(b, 3 * RIDGE + 0.01, **contact)
    model = b.finalize(requires_grad=False)
    assert "BoxEdgeContact" in [type(t).__name__ for t in model.force_terms]
    sim = tgs.Simulator(model, dt=1e-3, steps=500)
    sim.run()
    q = sim.state.body_q.to_numpy()
    gap = q[:, 1, 1] - q[:, 0, 1] - 2 * RIDGE        # top ridge above lower ridge [m]; < 0: pressed in
    assert gap.min() > -8e-3, f"the top box sank into the lower one by {-gap.min():.4g} m"
    last = gap[-100:]                               # the lower box still rocks a little on the ground
    assert last.min() > -3e-3 and last.max() < 1e-3, f"not resting on the ridge: {last}"
    assert np.abs(q[-1, 1, [0, 2]]).max() < 1e-3


@pytest.fixture(scope="module")
def crossed_edges(f64):
    """No gravity, no ground: the top box moves down onto the lower box's ridge (both free), sliding along it
    and spinning a little, its ridge 0.1 mm into the other's at the start: the edges press for most of the
    window."""
    b = tgs.SceneBuilder(gravity=(0.0, 0.0, 0.0))
    _ridges(b, 3 * RIDGE - 1e-4, top_velocity=(0.05, -0.15, 0.03), spin=(0.2, 0.3, -0.1),
            ke=6e3, kd=7.0, kf=20.0, mu=0.4)
    model = b.finalize()
    sim = tgs.Simulator(model, dt=1e-3, steps=40)
    run, total = touch_loss(sim, 2, 10, seed=3)
    return model, sim, run, total


@pytest.mark.slow
def test_crossed_edges_push_apart_and_conserve_momentum(crossed_edges):
    model, sim, run, total = crossed_edges
    run()
    mass = model.body_mass.to_numpy()
    qd = sim.state.body_qd.to_numpy()
    p = (mass[None, :, None] * qd[:, :, 3:]).sum(axis=1)
    np.testing.assert_allclose(p[-1], p[0], atol=1e-12)
    assert qd[-1, 0, 4] < -0.02 and qd[-1, 1, 4] > qd[0, 1, 4] + 0.05, "the edges should push the boxes apart"


# d loss / d kf is small here (1e-10 to 1e-8: the edges slide at the Coulomb cap mu fn most of the time, and kf
# acts only while the slip is viscous), so round-off, not truncation, limits central differences: measured on both
# dirs, explicit / implicit damping, relative error 1e-5 step: 2.3e-5 / 5.5e-5 (one CPU: the latter failed CI at
# 5e-5), 3e-5: 4.1e-6 / 7.5e-7, 1e-4: 2.8e-6 / 7.5e-7, 3e-4: 1.7e-7 / 1.7e-6.  kf takes 1e-4, and the usual rtol 1e-5
EDGE_EPS = dict(EPS, body_pair_kf=1e-4)


@pytest.mark.slow
@pytest.mark.parametrize("name", PAIR_PARAMS)
def test_crossed_edges_gradients(crossed_edges, name):
    model, sim, run, total = crossed_edges
    report = tgs.check_gradient(run, total, [model.parameters()[name]], n_dirs=2, eps=EDGE_EPS.get(name, 1e-7),
                                rtol=1e-5)
    report.assert_ok()
    assert max(abs(a) for a in report.analytic) > 1e-10, f"{name}: gradient should not vanish here"


def crossed_edges_sim(damping_integration=None, **sim_kwargs):
    """The `crossed_edges` scene (a Simulator of 40 steps); damping_integration: both boxes' (None: explicit)."""
    b = tgs.SceneBuilder(gravity=(0.0, 0.0, 0.0))
    _ridges(b, 3 * RIDGE - 1e-4, top_velocity=(0.05, -0.15, 0.03), spin=(0.2, 0.3, -0.1),
            ke=6e3, kd=7.0, kf=20.0, mu=0.4, damping_integration=damping_integration)
    b.broad_phase = sim_kwargs.pop("broad_phase", "grid")
    model = b.finalize()
    return model, tgs.Simulator(model, dt=1e-3, steps=40, **sim_kwargs)


@pytest.mark.slow
@pytest.mark.parametrize("sim_kwargs", [dict(fuse_steps=False, checkpoint_every=15), dict(broad_phase="flat")],
                         ids=["grid-checkpointed", "flat"])
def test_crossed_edges_gradients_other_paths(f64_without_ir_passes, sim_kwargs):
    """The fixture's rollout (the grid, fused) with one launch per step and checkpointed segments (each step's
    box pairs rebuilt from the stored state in the backward pass), and with the flat list of box pairs."""
    model, sim = crossed_edges_sim(**sim_kwargs)
    edges = [t for t in sim.force_terms if type(t).__name__ == "BoxEdgeContact"]
    assert len(edges) == 1 and (edges[0].broad is None) == ("broad_phase" in sim_kwargs)
    run, total = touch_loss(sim, 2, 10, seed=3)
    params = model.parameters()
    for name in ("body_q0", "body_qd0", "body_shape_size"):
        report = tgs.check_gradient(run, total, [params[name]], n_dirs=2, eps=EPS.get(name, 1e-7), rtol=1e-5)
        report.assert_ok()
        assert max(abs(a) for a in report.analytic) > 1e-6, f"{name}: gradient should not vanish here"


def _small_pile(mode, steps=150):
    """Two towers of three 0.2 x 0.2 x 0.6 m bars on the ground, 0.8 m apart, each bar on one of its edges
    (rotated 45 deg, and a little more, about its long axis) and crossing the one below: edge on edge from the
    first steps, and 6 bars, 15 box pairs of which the grid lists the few whose bounding spheres overlap."""
    b = tgs.SceneBuilder()
    contact = dict(ke=2e4, kd=30.0, kf=40.0, mu=0.5)
    b.add_ground(**contact)
    long_z, long_x = meshes.box_surface((2 * H, 2 * H, 0.6)), meshes.box_surface((0.6, 2 * H, 2 * H))
    for k in range(6):
        x, level = (-0.4 if k < 3 else 0.4), k % 3
        (v, f), axis = (long_z, (0, 0, 1)) if level % 2 == 0 else (long_x, (1, 0, 0))
        b.add_rigid_body(v, f, density=300.0, position=(x + 0.01 * level, RIDGE * (1 + 2 * level) + 0.002 * level,
                                                        0.01 * k), rotation=quat_from_axis_angle(axis, np.pi / 4 + 0.02 * k),
                         **contact)
    b.broad_phase = mode
    model = b.finalize(requires_grad=False)
    return tgs.Simulator(model, dt=1e-3, steps=steps)


def test_small_pile_grid_matches_flat(f64):
    """The two towers of crossed bars: the grid's box pairs give the flat list's trajectories (serial loops: the same pairs
    in the same order), the edges carry the crossings, and at the end
    the grid lists exactly the pairs whose bounding spheres overlap (brute force)."""
    flat, grid = _small_pile("flat"), _small_pile("grid")
    flat.run(), grid.run()
    q_flat, q_grid = flat.state.body_q.to_numpy(), grid.state.body_q.to_numpy()
    np.testing.assert_allclose(q_grid, q_flat, rtol=0, atol=1e-12)
    lowest = (q_grid[:, [1, 2, 4, 5], 1] - q_grid[0, [1, 2, 4, 5], 1]).min()
    # without the edge term the upper bars fall freely through the lower ones (0.111 m in 0.15 s); with it they
    # settle and begin to tip off their ridges (measured: 0.028 to 0.055 m lower)
    assert lowest > -0.07, f"the upper bars sank {-lowest:.3g} m into the lower ones: the edges did not hold them"
    edges = next(t for t in grid.force_terms if type(t).__name__ == "BoxEdgeContact")
    edges.broad.build(grid.state, grid.steps, grid.steps)
    got = edges.broad.pairs.to_numpy()[:int(edges.broad.pair_count[None])]
    x = q_grid[-1, :, :3].astype(np.float64)
    bound = np.linalg.norm(grid.model.body_shape_size.to_numpy(), axis=1)
    a, b = np.triu_indices(len(x), 1)
    want = {(i, j) for i, j in zip(a, b) if np.linalg.norm(x[i] - x[j]) < bound[i] + bound[j]}
    assert len(want) >= 2, "the bars should be touching"
    assert len(got) == len(set(map(tuple, got))) and set(map(tuple, got.tolist())) == want


def test_stability_limits_read_the_pair_constants(f64):
    """The pre-flight's box-pair row uses the constants the edge force reads, body_pair_X (the bodies' against
    each other), not body_X (against the ground): raising body_pair_ke alone moves its omega by sqrt(ke ratio),
    raising body_ke alone leaves it."""
    b = tgs.SceneBuilder()
    b.add_ground(ke=1e4, kd=10.0, kf=10.0, mu=0.5)
    _ridges(b, 3 * RIDGE + 0.01, ke=1e4, kd=10.0, kf=10.0, mu=0.5)
    model = b.finalize(requires_grad=False)
    edges = next(t for t in model.force_terms if type(t).__name__ == "BoxEdgeContact")

    def omega():
        return max(r.omega for r in edges.stability_limits())

    before = omega()
    model.body_ke.from_numpy(np.full(2, 1e6))
    assert omega() == pytest.approx(before)
    model.body_pair_ke.from_numpy(np.full(2, 4e4))
    assert omega() == pytest.approx(2.0 * before)
