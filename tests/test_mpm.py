"""MPM physics and inputs: momentum in free flight, an elastic cube that bounces and comes to rest, a fluid
column that spreads, a blow-up caught with its step, mesh sampling, and bad input rejected before any kernel."""
import numpy as np
import pytest

import tigradsim as tgs
from mpm_scenes import block_scene


@pytest.fixture(scope="module", autouse=True)
def _f64():
    tgs.init(arch="cpu", precision="f64")
    yield


def _momentum(model, sim, obj):
    v = sim.final_state("mpm_v")
    return obj.density * obj.particle_volume * v.sum(axis=0)


def test_momentum_is_conserved_in_free_flight():
    """No gravity, no wall reached: P2G, the stress and G2P conserve the total momentum exactly (sum_i w_i
    (x_i - x_p) = 0 for the quadratic B-spline), whatever the particles' velocities and deformation."""
    model, obj = block_scene("mpm_neo_hookean", {"E": 5e3, "nu": 0.3}, gravity=(0, 0, 0), velocity=(0, 0, 0))
    rng = np.random.default_rng(0)
    v0 = 0.3 * rng.standard_normal((obj.particle_count, 3))
    model.set("mpm_v0", v0)
    sim = tgs.Simulator(model, dt=1e-3, steps=60)
    sim.run()
    p0 = obj.density * obj.particle_volume * v0.sum(axis=0)
    p1 = _momentum(model, sim, obj)
    scale = obj.mass * np.abs(v0).max()
    assert np.abs(p1 - p0).max() < 1e-12 * scale, (p0, p1)
    assert np.abs(sim.final_state("mpm_v") - v0).max() > 1e-2       # the velocities did change (elastic waves)


@pytest.mark.slow            # 4,000 steps of 1,000 particles: ~30 s on 2 shared cores
def test_elastic_cube_bounces_and_comes_to_rest():
    b = tgs.SceneBuilder(gravity=(0, -9.8, 0))
    b.add_mpm_grid(lower=(0, 0, 0), upper=(1, 1, 1), resolution=16, mu=0.5)
    b.add_mpm(box=((0.375, 0.375, 0.375), (0.625, 0.625, 0.625)), material="mpm_fixed_corotated",
              params={"E": 2e4, "nu": 0.3}, density=500.0, particles_per_cell=8)
    model = b.finalize(requires_grad=False)
    steps, dt, every = 4000, 1e-3, 10
    sim = tgs.Simulator(model, dt=dt, steps=steps)
    sim.run()
    x = sim.state.mpm_x.to_numpy()[::every]                 # (frames, N, 3)
    height = x[:, :, 1].mean(axis=1)
    vy = np.gradient(height, every * dt)
    rising = np.nonzero((vy[:-1] > 0) & (vy[1:] <= 0))[0]  # the tops of the bounces
    assert len(rising) >= 3 and vy.min() < -2.0             # it fell (~2.4 m/s from 0.375 m) and bounced
    tops = height[rising[:3]]
    assert 0.2 < tops[0] < 0.45 and tops[1] < tops[0] - 0.02 and tops[2] < tops[1] - 0.01, tops   # losing energy
    last = height[-30:]                                     # the last 0.3 s
    assert last.max() - last.min() < 0.012 and np.abs(vy[-30:]).max() < 0.1      # at rest
    dx = 1 / 16
    assert 0.0 < x[-1, :, 1].min() < 1.5 * dx                # on the floor (MPM's walls act within a cell)
    assert abs(height[-1] - x[-1, :, 1].min() - 0.125) < 0.03           # at about its own size
    assert np.abs(x[-1, :, [0, 2]].mean(axis=1) - 0.5).max() < 1e-6   # where it fell (symmetry)


def test_fluid_column_spreads():
    b = tgs.SceneBuilder(gravity=(0, -9.8, 0))
    b.add_mpm_grid(lower=(0, 0, 0), upper=(1, 1, 1), resolution=16, mu=0.0)
    col = b.add_mpm(box=((0.0, 0.0, 0.375), (0.25, 0.5, 0.625)), material="mpm_newtonian",
                    params={"viscosity": 0.1, "bulk_modulus": 2e4}, density=1000.0, particles_per_cell=8)
    model = b.finalize(requires_grad=False)
    sim = tgs.Simulator(model, dt=5e-4, steps=800)
    x0 = model.get("mpm_x0")
    sim.run()
    x1 = sim.final_state("mpm_x")
    assert x1[:, 0].max() > x0[:, 0].max() + 0.3            # the front ran along the floor (dam break)
    assert x1[:, 1].max() < 0.6 * x0[:, 1].max()            # and the column fell
    J = np.linalg.det(sim.final_state("mpm_F"))
    assert np.median(np.abs(J - 1)) < 0.05                   # nearly incompressible (K / rho g h = 4)


def test_blow_up_names_the_step():
    model, _ = block_scene("mpm_neo_hookean", {"E": 1e9, "nu": 0.3}, requires_grad=False)
    sim = tgs.Simulator(model, dt=5e-3, steps=300, check_every=50)
    with pytest.raises(tgs.SimulationError, match=r"non-finite at step \d+.*smaller time step"):
        sim.run()


def test_mesh_sampling_matches_the_box():
    b = tgs.SceneBuilder()
    b.add_mpm_grid(lower=(0, 0, 0), upper=(1, 1, 1), resolution=16)
    v, f = tgs.meshes.box_surface((0.25, 0.25, 0.25))
    by_mesh = b.add_mpm(mesh=(v + 0.5, f), particles_per_cell=8)
    by_box = b.add_mpm(box=((0.375, 0.375, 0.375), (0.625, 0.625, 0.625)), particles_per_cell=8)
    assert by_mesh.particle_count == by_box.particle_count == 8 ** 3
    assert by_mesh.particle_volume == pytest.approx((1 / 32) ** 3)


def test_a_box_is_sampled_on_its_own_lattice_in_any_pose():
    """A box off the grid's lattice, axis-aligned and turned: its particles fill its exact extent (half a spacing
    inside each face), stand for equal shares of its volume, and the turned box's points are the axis-aligned
    box's points turned about its centre (a quaternion and its matrix give the same)."""
    from tigradsim.physics.rigid_pose import quat_from_axis_angle, quat_to_matrix_np

    lower, upper = np.array([0.31, 0.4, 0.33]), np.array([0.55, 0.56, 0.53])      # 0.24 x 0.16 x 0.2 m
    centre, size = (lower + upper) / 2, upper - lower
    q = quat_from_axis_angle((0.3, 1.0, 0.5), 0.7)
    b = tgs.SceneBuilder()
    b.add_mpm_grid(lower=(0, 0, 0), upper=(1, 1, 1), resolution=16)                # h = 1/32 m
    plain = b.add_mpm(box=(lower, upper), particles_per_cell=8)
    turned = b.add_mpm(box=(lower, upper), particles_per_cell=8, rotation=q)
    by_matrix = b.add_mpm(box=(lower, upper), particles_per_cell=8, rotation=quat_to_matrix_np(q))
    counts = np.ceil(size * 32 - 1e-9).astype(int)                                 # 8, 6, 7 points per axis
    assert plain.particle_count == turned.particle_count == int(np.prod(counts))
    assert plain.particle_volume == pytest.approx(np.prod(size) / np.prod(counts), rel=1e-12)
    pts = [o["positions"] for o in b.component(tgs.physics.mpm.MPMBodies).objects]
    spacing = size / counts
    np.testing.assert_allclose(pts[0].min(axis=0), lower + spacing / 2, atol=1e-12)
    np.testing.assert_allclose(pts[0].max(axis=0), upper - spacing / 2, atol=1e-12)
    R = quat_to_matrix_np(q)
    np.testing.assert_allclose(pts[1], (pts[0] - centre) @ R.T + centre, atol=1e-12)
    np.testing.assert_allclose(pts[2], pts[1], atol=1e-12)


def test_a_box_on_the_lattice_gets_the_grids_points():
    b = tgs.SceneBuilder()
    b.add_mpm_grid(lower=(0, 0, 0), upper=(1, 1, 1), resolution=8)                 # h = 1/16 m
    b.add_mpm(box=((0.25, 0.25, 0.25), (0.5, 0.5, 0.75)), particles_per_cell=8)
    pts = b.component(tgs.physics.mpm.MPMBodies).objects[0]["positions"]
    np.testing.assert_allclose(pts * 16 - 0.5, np.round(pts * 16 - 0.5), atol=1e-9)  # cell centres of h


@pytest.mark.parametrize("kwargs,match", [
    (dict(rotation=(0.0, 0.0, 0.5, 0.5)), r"rotation: expected a unit quaternion"),
    (dict(rotation=np.diag([1.0, 1.0, -1.0])), r"rotation: expected .* proper rotation matrix"),
    (dict(params={"E": 0.0, "nu": 0.3}), r"'E'.*must be > 0, got 0"),
    (dict(params={"E": 1e4, "nu": 0.5}), r"'nu'.*\(-1, 0.5\), got 0.5"),
    (dict(params={"E": 1e4, "nu": -1.2}), r"'nu'.*got -1.2"),
    (dict(box=((0.45, 0.45, 0.45), (0.55, 0.9, 0.55))), r"grid is too coarse.*axis 0"),
    (dict(box=((0.5, 0.5, 0.5), (0.8, 1.2, 0.8))), r"outside the MPM domain"),
    (dict(material="neo_hookean"), r"'tet' material; MPM needs one of kind 'mpm'"),
    (dict(particles_per_cell=6), r"particles_per_cell: expected a cube number"),
    (dict(density=-1.0), r"density: must be > 0"),
    (dict(particles=np.zeros((2, 3)) + 0.5, particle_volume=1.0), r"particle_volume.*more than a grid cell"),
    (dict(particles=np.zeros((2, 3)) + 0.5, particle_volume=1e-4, rotation=(0, 0, 0, 1.0)),
     r"rotation: only a box= is turned"),
])
def test_bad_input_is_rejected(kwargs, match):
    b = tgs.SceneBuilder()
    b.add_mpm_grid(lower=(0, 0, 0), upper=(1, 1, 1), resolution=8)
    args = dict(box=((0.25, 0.25, 0.25), (0.75, 0.75, 0.75)), material="mpm_fixed_corotated")
    if "particles" in kwargs:
        args.pop("box")
    args.update(kwargs)
    with pytest.raises(ValueError, match=match):
        b.add_mpm(**args)


def test_bad_grid_and_order():
    b = tgs.SceneBuilder()
    with pytest.raises(ValueError, match="add_mpm_grid.*first"):
        b.add_mpm(box=((0, 0, 0), (1, 1, 1)))
    with pytest.raises(ValueError, match="resolution: expected an integer >= 4"):
        b.add_mpm_grid(lower=(0, 0, 0), upper=(1, 1, 1), resolution=2)
    with pytest.raises(ValueError, match="upper: must exceed lower"):
        b.add_mpm_grid(lower=(0, 0, 0), upper=(1, 0, 1), resolution=8)
    with pytest.raises(ValueError, match="mu: must be >= 0"):
        b.add_mpm_grid(lower=(0, 0, 0), upper=(1, 1, 1), resolution=8, mu=-0.1)


def test_model_set_checks_material_rules():
    model, _ = block_scene(params={"E": 2e3, "nu": 0.3}, requires_grad=False)
    with pytest.raises(ValueError, match=r"mpm_params values: row 0.*'nu'"):
        model.set("mpm_params", [[2e3, 0.7]])
    with pytest.raises(ValueError, match=r"mpm_mu values: must be >= 0"):
        model.set("mpm_mu", -0.2)
    model.set("mpm_params", [[3e3, 0.2]])
    assert model.get("mpm_params").tolist() == [[3e3, 0.2]]


def test_preflight_checks_the_grid_cfl_bound():
    """The pre-flight's MPM row: dt <= dx / c, c = sqrt((lam + 2 mu) / rho) (the P-wave speed): a stiff cube on
    a coarse step warns naming the object; the row's limit is that bound."""
    import math
    import warnings
    tgs.init(arch="cpu", precision="f64")
    b = tgs.SceneBuilder(gravity=(0, -9.8, 0))
    b.add_mpm_grid(lower=(0, 0, 0), upper=(1, 1, 1), resolution=16)
    b.add_mpm(box=((0.375, 0.375, 0.375), (0.625, 0.625, 0.625)), material="mpm_neo_hookean",
              params={"E": 1e6, "nu": 0.3}, density=500.0)
    model = b.finalize(requires_grad=False)
    E, nu, rho, dx = 1e6, 0.3, 500.0, 1 / 16
    mu, lam = E / (2 * (1 + nu)), E * nu / ((1 + nu) * (1 - 2 * nu))
    report = tgs.stability_report(model, 1e-3)
    (row,) = [r for r in report.rows if r.term.startswith("ParticleStress")]
    assert row.dt_limit == pytest.approx(dx / math.sqrt((lam + 2 * mu) / rho), rel=1e-9)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        tgs.Simulator(model, dt=2e-3, steps=2)
    assert any(issubclass(w.category, tgs.StabilityWarning) and "ParticleStress[object 0]" in str(w.message)
               for w in caught)
