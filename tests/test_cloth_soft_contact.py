"""Cloth against soft (FEM) bodies (tigradsim/physics/cloth_soft_contact.py): a cloth dropped on a soft block rests
on it about the thickness up (and falls through when they are in different contact groups), momentum of a cloth
thrown at a free block is conserved, float64 central-difference gradients through a short rollout of a cloth landing
on a block (contact constants, initial positions and velocities, the block's material), the pre-flight rows, the
closest-point weights against a brute-force search, and bad options.
"""
import numpy as np
import pytest
import taichi as ti

import tigradsim as tgs
from tigradsim import meshes
from tigradsim.core.stability import explicit_dt_limit
from tigradsim.physics.cloth_soft_contact import closest_barycentric

CONSTANTS = {"ke": 50.0, "kd": 0.02, "kf": 0.05, "mu": 0.3}


@pytest.fixture(scope="module")
def f64():
    tgs.init(arch="cpu", precision="f64")
    yield


def _drape(touch=True, steps=600, dt=5e-4, ground=True, cloth_y=0.13, cloth_velocity=(0.0, 0.0, 0.0),
           block=(2, 1, 2), cloth_cells=8, requires_grad=True, shift=(0.0, 0.0), integration="explicit",
           block_y=0.0):
    """A cloth of cloth_cells^2 4 cm cells (1 kg/m^2) held flat `cloth_y` m up over a soft block 0.2 x 0.1 x 0.2 m
    (block cells, neo-Hookean, 100 kg/m^3); contact radii 5 mm each, so the thickness is 1 cm.  touch=False puts the
    cloth and the block in different contact groups.  ground=False: no ground and no gravity.  block_y: the block's
    bottom [m]."""
    b = tgs.SceneBuilder(gravity=(0.0, -9.8 if ground else 0.0, 0.0))
    if ground:
        b.add_ground(ke=100.0, kd=0.1, kf=0.1, mu=0.5, damping_integration=integration)
    v, t = meshes.tet_box(*block, size=(0.2, 0.1, 0.2), origin=(-0.1, block_y, -0.1))
    soft = b.add_soft_mesh((v, t), params={"mu": 2e3, "lam": 2e3}, density=100.0, damping=1.0, radius=0.005)
    half = cloth_cells * 0.02
    cv, ct = meshes.cloth_grid(cloth_cells, cloth_cells, cell=0.04, origin=(shift[0] - half, cloth_y, shift[1] - half),
                               plane="xz")
    cloth = b.add_cloth(cv, ct, params={"mu": 20.0, "lam": 20.0, "damping": 0.02}, density=1.0, radius=0.005,
                        velocity=cloth_velocity)
    b.set_cloth_soft_contact(**CONSTANTS)
    if not touch:
        b.contact_groups = {"particles": np.r_[np.zeros(len(v), int), np.ones(len(cv), int)]}
    model = b.finalize(requires_grad=requires_grad)
    sim = tgs.Simulator(model, dt=dt, steps=steps)
    return model, sim, soft, cloth


def _centre_height(sim, cloth):
    """Height [m] of the cloth's vertex nearest the vertical axis, per step."""
    q = sim.state.particle_q.to_numpy()
    cl = cloth.particles
    centre = cl[np.argmin(np.linalg.norm(q[0, cl][:, [0, 2]], axis=1))]
    return q[:, centre, 1]


def test_cloth_rests_on_the_block(f64):
    model, sim, soft, cloth = _drape()
    sim.run()
    y = _centre_height(sim, cloth)
    top = sim.state.particle_q.to_numpy()[-1, soft.particle_start:soft.particle_start + soft.particle_count, 1].max()
    assert top > 0.095, "the block should stand on the ground"
    assert abs(y[-1] - (top + 0.01)) < 0.004, f"the cloth's middle should rest ~1 cm (the thickness) above the " \
                                             f"block's top {top:.4f} m, is at {y[-1]:.4f} m"
    # its edges hang over the block's sides, below its top
    q = sim.state.particle_q.to_numpy()[-1]
    assert q[cloth.particles, 1].min() < top - 0.02, "the cloth's overhang should drape down"
    _, sim, _, cloth = _drape(touch=False)
    sim.run()
    assert _centre_height(sim, cloth).min() < 0.03, "in different contact groups the cloth should fall through"


@pytest.mark.slow          # ~13 s: its own kernels (the implicit law compiles apart)
def test_implicit_damping_rests_and_reports(f64):
    """damping_integration="implicit" (the ground's law): the cloth still rests on the block, and the pre-flight's
    contact row says its kd, kf are stepped implicitly (unconditionally stable) and allows a step at least as long
    as the explicit row's."""
    model, sim, soft, cloth = _drape(integration="implicit", requires_grad=False)
    rows = [r for r in sim.stability_report().rows if r.term == "ClothSoftContact[cloth on soft]"]
    m = model.particle_mass.to_numpy()
    w = 1.0 / m[cloth.particles].min() + 1.0 / m[soft.particle_start:soft.particle_start + soft.particle_count].min()
    explicit = explicit_dt_limit(np.sqrt(CONSTANTS["ke"] * w), CONSTANTS["kd"] * w)
    assert rows and "unconditionally stable" in str(rows[0]) and rows[0].dt_limit >= explicit * (1 - 1e-12)
    sim.run()
    top = sim.state.particle_q.to_numpy()[-1, soft.particle_start:soft.particle_start + soft.particle_count, 1].max()
    assert abs(_centre_height(sim, cloth)[-1] - (top + 0.01)) < 0.004


def test_momentum_is_conserved(f64):
    """No gravity, no ground: a cloth thrown down at a free block; the contact forces are equal and opposite."""
    model, sim, soft, cloth = _drape(ground=False, cloth_y=0.115, cloth_velocity=(0.1, -0.5, 0.05), steps=300,
                                     requires_grad=False)
    sim.run()
    m = model.particle_mass.to_numpy()
    qd = sim.state.particle_qd.to_numpy()
    block = slice(soft.particle_start, soft.particle_start + soft.particle_count)
    pushed = (m[block, None] * qd[-1, block]).sum(0)
    assert pushed[1] < -0.3 * 0.5 * m[cloth.particles].sum(), "the cloth should have pushed the block down"
    np.testing.assert_allclose((m[:, None] * qd[-1]).sum(0), (m[:, None] * qd[0]).sum(0), atol=1e-12)


@pytest.mark.slow
def test_cloth_soft_gradients(f64):
    """40 steps of a cloth thrown down onto a free block (no ground, no gravity), loss = MSE of every vertex every
    10 steps against random targets; the Tape against central differences along random directions.  The cloth is
    shifted off the block's axes: a vertex exactly over the top face's diagonal sits where the closest point
    changes region, a kink of the force's derivative (central differences there average the two sides); and its
    height is such that no vertex comes to exactly the thickness above the block at a step (from 0.113 m at
    0.3 m/s and dt 0.5 ms every vertex reaches d = h exactly at step 20, where the contact switches on: a kink
    that central differences straddle)."""
    model, sim, soft, cloth = _drape(ground=False, cloth_y=0.1134, cloth_velocity=(0.05, -0.3, 0.02), steps=40,
                                     block=(1, 1, 1), cloth_cells=4, shift=(0.013, 0.007))
    rec = tgs.ParticleRecorder(sim, every=10)
    sim.run()
    assert _centre_height(sim, cloth)[-1] < 0.1 + 0.01, "the cloth should touch the block in this rollout"
    rng = np.random.default_rng(7)
    loss = tgs.MSELoss(rec.values, rec.values.to_numpy() + rng.normal(size=rec.values.shape + (3,)) * 0.01)

    def run():
        sim.run()
        loss()

    params = model.parameters()
    for name, eps in (("cloth_soft_ke", 1e-4), ("cloth_soft_kd", 1e-6), ("cloth_soft_kf", 1e-6),
                      ("cloth_soft_mu", 1e-6), ("particle_q0", 1e-6), ("particle_qd0", 1e-5), ("tet_params", 1e-5)):
        report = tgs.check_gradient(run, loss.value, [params[name]], n_dirs=2, eps=eps, rtol=1e-5)
        report.assert_ok()
        assert max(abs(a) for a in report.analytic) > 1e-12, f"{name}: gradient should not vanish here"


@pytest.mark.slow
def test_cloth_soft_gradients_both_ways_implicit(f64):
    """Both directions of the contact and its implicit damping under the Tape: a 24 cm cloth (wider than the
    20 cm block, so the block's top corners lie under cloth triangles: "soft on cloth" as well as "cloth on
    soft") thrown down onto the block resting on an implicit-damping ground (whose law the contact takes), 40
    steps with gravity; the Tape against central differences along random directions for the contact
    constants, the initial state and the FEM material."""
    # the block starts 1 cm up, falling from rest: resting on the ground its vertices would start at v_n = 0, the
    # kink of the damping's max(-v_n, 0), where the Tape takes one side (the ground's own tests avoid it too)
    model, sim, soft, cloth = _drape(cloth_y=0.1234, cloth_velocity=(0.05, -0.3, 0.02), steps=40, block=(1, 1, 1),
                                     cloth_cells=6, shift=(0.013, 0.007), integration="implicit", block_y=0.01)
    terms = {getattr(t, "description", None): t for t in sim.force_terms}
    assert terms["cloth on soft"].law.implicit and terms["soft on cloth"].law.implicit
    rec = tgs.ParticleRecorder(sim, every=10)
    sim.run()
    q = sim.state.particle_q.to_numpy()[-1]
    top = [i for i in range(soft.particle_start, soft.particle_start + soft.particle_count) if q[i, 1] > 0.1]
    assert len(top) == 4 and terms["soft on cloth"].broad.pair_count[None] > 0
    # every top corner of the block is within the thickness (1 cm) below the cloth: "soft on cloth" pushes there
    cl = np.asarray(cloth.particles)
    for i in top:
        near = cl[np.argmin(np.linalg.norm(q[cl][:, [0, 2]] - q[i, [0, 2]], axis=1))]
        assert 0.0 < q[near, 1] - q[i, 1] < 0.01, (i, q[near, 1] - q[i, 1])
    rng = np.random.default_rng(8)
    loss = tgs.MSELoss(rec.values, rec.values.to_numpy() + rng.normal(size=rec.values.shape + (3,)) * 0.01)

    def run():
        sim.run()
        loss()

    params = model.parameters()
    # gradients of 1e-9..1e-7 on a loss of ~1e-4: central differences with steps below ~1e-4 are in round-off
    for name, eps in (("cloth_soft_ke", 1e-4), ("cloth_soft_kd", 1e-4), ("cloth_soft_kf", 1e-4),
                      ("cloth_soft_mu", 1e-4), ("particle_q0", 1e-6), ("particle_qd0", 1e-4), ("tet_params", 1e-5)):
        report = tgs.check_gradient(run, loss.value, [params[name]], n_dirs=2, eps=eps, rtol=1e-5)
        report.assert_ok()
        assert max(abs(a) for a in report.analytic) > 1e-12, f"{name}: gradient should not vanish here"


def test_preflight_rows(f64):
    model, sim, soft, cloth = _drape(steps=2)
    rows = {r.term: r for r in sim.stability_report().rows if r.term.startswith("ClothSoftContact")}
    assert set(rows) == {"ClothSoftContact[cloth on soft]", "ClothSoftContact[soft on cloth]"}
    m = model.particle_mass.to_numpy()
    w = 1.0 / m[cloth.particles].min() + 1.0 / m[soft.particle_start:soft.particle_start + soft.particle_count].min()
    want = explicit_dt_limit(np.sqrt(CONSTANTS["ke"] * w), CONSTANTS["kd"] * w)
    assert abs(rows["ClothSoftContact[cloth on soft]"].dt_limit - want) < 1e-9 * want


def test_closest_point_weights(f64):
    """The weights of `closest_barycentric` against the closest of a fine grid of points of the triangle."""
    rng = np.random.default_rng(3)
    tri = rng.normal(size=(3, 3))
    points = rng.normal(size=(64, 3)) * 1.5
    out = ti.Vector.field(4, float, shape=(64,))

    @ti.kernel
    def weights(p: ti.types.ndarray(), a: ti.types.vector(3, float), b: ti.types.vector(3, float),
                c: ti.types.vector(3, float)):
        for k in range(64):
            wa, wb, wc, face = closest_barycentric(ti.Vector([p[k, 0], p[k, 1], p[k, 2]]), a, b, c)
            out[k] = ti.Vector([wa, wb, wc, ti.cast(face, float)])

    weights(points, *tri)
    got = out.to_numpy()
    u, v = np.meshgrid(np.linspace(0, 1, 401), np.linspace(0, 1, 401))
    keep = u + v <= 1
    bary = np.stack([1 - u[keep] - v[keep], u[keep], v[keep]], 1)
    grid = bary @ tri
    for k, p in enumerate(points):
        nearest = np.linalg.norm(grid - p, axis=1).min()
        assert abs(np.linalg.norm(got[k, :3] @ tri - p) - nearest) < 1e-4
        assert abs(got[k, :3].sum() - 1) < 1e-12 and got[k, :3].min() >= -1e-12
        assert got[k, 3] == float(got[k, :3].min() > 1e-12)


def test_bad_constants(f64):
    b = tgs.SceneBuilder()
    with pytest.raises(ValueError, match=r"unknown constants \['stiffness'\]"):
        b.set_cloth_soft_contact(stiffness=1.0)
    with pytest.raises(ValueError, match=r"ke"):
        b.set_cloth_soft_contact(ke=-1.0)
    with pytest.raises(ValueError, match=r"mu"):
        b.set_cloth_soft_contact(mu=float("nan"))
    with pytest.raises(TypeError, match=r"cloth: expected a ClothHandle"):
        b.set_cloth_soft_contact(cloth=0, ke=1.0)
    with pytest.raises(TypeError, match=r"soft: expected a SoftMesh"):
        b.set_cloth_soft_contact(soft="ball", ke=1.0)


@pytest.mark.slow          # ~1 min on the shared 2-core VM (compiles a cloth, a ball and both contact terms)
def test_demo_quick(tmp_path, capsys):
    """demos/cloth_soft_drape.py --quick --headless: the cloth ends on the ball (its middle about the thickness
    above the ball's top), its rim hangs to the ground, and the GIF is written."""
    import json
    import runpy
    import sys
    argv = sys.argv
    sys.argv = ["cloth_soft_drape", "--quick", "--headless", "--out", str(tmp_path)]
    try:
        runpy.run_path("demos/cloth_soft_drape.py", run_name="__main__")
    finally:
        sys.argv = argv
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert out["finite"] and out["gif"] and (tmp_path / "cloth_soft_drape.gif").exists()
    assert 0.0 < out["cloth_centre_y"] - out["ball_top"] < 0.02, out
    assert out["cloth_lowest_y"] < 0.25, out


@pytest.mark.slow          # ~25 s cold (7 s with its kernels cached): a scene file's cloth and soft box
def test_scene_file_with_cloth_and_soft_object(tmp_path, f64):
    """A scene file with a cloth and a soft object gets the contact without saying so: the cloth (0.3 m, 3 x 3
    cells) dropped from 3.5 cm above a soft box 0.18 m high stays on its top."""
    from test_scene_cloth import _cloth_scene
    from tigradsim.scenes.scene_build import Scene, load_scene_footage
    from tigradsim.scenes.scene_file import parse_scene
    data = _cloth_scene(tmp_path, unknowns={"cloth.mu": {"init": 40.0, "lower": 2.0, "upper": 300.0}})
    del data["colliders"]
    data["objects"]["box"] = {"type": "soft", "tet_box": {"cells": [2, 1, 2], "size": [0.24, 0.18, 0.24]},
                              "material": "neo_hookean", "params": {"mu": 1e3, "lam": 2e3}, "density": 100.0,
                              "position": [0.0, 0.09, 0.0]}
    data["simulation"]["duration"] = 0.25
    spec = parse_scene(data, str(tmp_path / "scene.toml"))
    scene = Scene(spec, load_scene_footage(spec))
    terms = [t for t in scene.sim.force_terms if type(t).__name__ == "ClothSoftContact"]
    assert len(terms) == 2
    scene.sim.run()
    q = scene.sim.state.particle_q.to_numpy()
    cloth = np.nonzero(scene.model.cloth_soft_cloth.to_numpy() >= 0)[0]
    box = np.nonzero(scene.model.cloth_soft_mesh.to_numpy() >= 0)[0]
    top = q[-1, box, 1].max()
    assert q[-1, cloth, 1].mean() < q[0, cloth, 1].mean() - 0.01, "the cloth should have come down onto the box"
    assert q[:, cloth, 1].min() > top - 0.01, "the cloth should rest on the soft box, not pass through it"
