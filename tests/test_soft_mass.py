"""Soft bodies as other engines and real objects define them: mass as density, total mass or
per-vertex masses (input and unknown: `SoftMassParam`, FD-checked in float64), the material
damping models of `tigradsim.physics.damping` (their stresses against numpy, their gradients
against central differences), and tet meshes from Gmsh / VTU files and node / tet arrays,
through `add_soft_mesh` and the scene file."""
import numpy as np
import pytest

import tigradsim as tgs
from tigradsim import fem
from tigradsim.io.mesh_io import MeshFileError, save_mesh, tets_from_arrays
from tigradsim.physics.damping import DAMPING_MODELS
from tigradsim.scenes.scene_file import SceneError, parse_scene

SIZE = np.array([0.1, 0.1, 0.1])


def box():
    """The 2x2x2-cell tet box: 27 vertices, 40 tets, 1e-3 m^3."""
    return tgs.meshes.tet_box(2, 2, 2, size=SIZE, origin=(0.0, 0.03, 0.0))


def built(**kwargs):
    b = tgs.SceneBuilder(gravity=kwargs.pop("gravity", (0.0, -9.8, 0.0)))
    h = b.add_soft_mesh(kwargs.pop("mesh", box()), **kwargs)
    return b, h


# ------------------------------------------------------------------------------------ mass input

def test_density_mass_and_node_mass_inputs(f64):
    v, t = box()
    volume = float(np.prod(SIZE))
    _, h = built()                                                    # no mass input: the default density
    assert np.isclose(h.mass, fem.DEFAULT_DENSITY * volume) and np.isclose(h.volume, volume)
    b, h_rho = built(density=500.0)
    lumped = b.finalize().get("particle_mass")
    assert np.isclose(lumped.sum(), 0.5) and np.ptp(lumped) > 0      # lumped by volume: corners get less
    b, h_m = built(mass=2.0)
    m = b.finalize().get("particle_mass")
    assert np.isclose(m.sum(), 2.0) and np.allclose(m, lumped * 4.0)  # spread like the density
    b, _ = built(node_mass=0.01)                                      # Warp's add_soft_grid: all alike
    assert np.allclose(b.finalize().get("particle_mass"), 0.01)
    per = np.linspace(0.01, 0.05, len(v))
    b, h = built(node_mass=per)
    assert np.allclose(b.finalize().get("particle_mass"), per) and np.allclose(h.node_mass, per)
    fixed = np.zeros(len(v), bool)
    fixed[:3] = True
    b, h = built(mass=1.0, fixed=fixed)
    m = b.finalize().get("particle_mass")
    assert np.all(m[:3] == 0) and np.isclose(h.mass, 1.0) and np.isclose(m.sum(), 1.0 - h.node_mass[:3].sum())


@pytest.mark.parametrize("kwargs, err, match", [
    (dict(mass=0.0), ValueError, "mass: must be > 0, got 0.0"),
    (dict(mass=-1.0), ValueError, "mass: must be > 0"),
    (dict(mass=float("nan")), ValueError, "mass: contains a non-finite value"),
    (dict(mass=[1.0, 2.0]), ValueError, r"mass: expected shape \(\)"),
    (dict(node_mass=0.0), ValueError, "node_mass: must be > 0"),
    (dict(node_mass=np.r_[np.full(26, 0.1), -0.1]), ValueError, "node_mass: must be > 0, got -0.1 at index 26"),
    (dict(node_mass=np.r_[np.full(26, 0.1), np.nan]), ValueError, "node_mass: contains a non-finite value"),
    (dict(node_mass=np.full(26, 0.1)), ValueError, r"node_mass: expected a scalar or shape \(27,\).*got shape \(26,\)"),
    (dict(node_mass="heavy"), TypeError, "node_mass: expected numbers"),
    (dict(density=10.0, mass=1.0), ValueError, "give one of density=, mass= and node_mass=, got density and mass"),
    (dict(mass=1.0, node_mass=0.1), ValueError, "got mass and node_mass"),
    (dict(damping_model="kelvin"), ValueError, "damping_model: expected one of 'deformation_rate', 'warp'"),
])
def test_bad_mass_and_damping_inputs(f64, kwargs, err, match):
    b = tgs.SceneBuilder()
    with pytest.raises(err, match=match):
        b.add_soft_mesh(box(), **kwargs)
    assert b.particle_count == 0 and b.component(fem.TetMeshes).elements.count == 0


# ------------------------------------------------------------------------------------ mass unknown

def throw_scene(node_mass=None, damping_model="deformation_rate", damping=3.0, material="neo_hookean",
                requires_grad=True, ground=True):
    """The box thrown at the ground (or falling freely), its vertices moving apart (contact,
    elasticity, damping)."""
    v, t = box()
    rng = np.random.default_rng(3)
    vel = np.array([0.5, -1.2, 0.3]) + rng.normal(size=(len(v), 3)) * 0.3
    b = tgs.SceneBuilder()
    if ground:
        b.add_ground(ke=2e3, kd=5.0, kf=50.0, mu=0.4)
    kw = dict(density=6000.0) if node_mass is None else dict(node_mass=node_mass)
    h = b.add_soft_mesh((v, t), material=material, params={"mu": 5e3, "lam": 8e3}, damping=damping,
                        damping_model=damping_model, velocity=vel, radius=0.02, **kw)
    return b.finalize(requires_grad=requires_grad), h


def rollout(model, steps=40):
    sim = tgs.Simulator(model, dt=2e-3, steps=steps)
    rec = tgs.ParticleRecorder(sim, every=10)
    sim.run()
    target = rec.numpy() + np.random.default_rng(0).normal(size=(rec.frames, rec.count, 3)) * 0.05
    loss = tgs.MSELoss(rec.values, target)

    def run():
        loss.value[None] = 0
        sim.run()
        loss()

    return sim, run, loss.value


@pytest.mark.parametrize("quantity", ["mass", "density"])
def test_soft_mass_param_writes_and_gradient(f64, quantity):
    """A soft body's total mass (or density) as one unknown: written into its vertex masses with
    their distribution kept (here per-vertex masses as given), gradient = central differences."""
    per = np.linspace(0.1, 0.3, 27)
    model, h = throw_scene(node_mass=per)
    sim, run, loss = rollout(model)
    assert sim.state.particle_q.to_numpy()[:, :, 1].min() < 0.02, "the box must touch the ground"
    total = per.sum()
    p = tgs.SoftMassParam(model, h, quantity=quantity, lower=1e-3)
    start = total if quantity == "mass" else total / h.volume
    assert np.isclose(p.value()[0], start)
    p.write([2.0 * start])
    assert np.allclose(model.get("particle_mass"), 2.0 * per)
    p.write([start])
    report = tgs.check_param_gradient(run, loss, p, n_dirs=1, eps=1e-6, rtol=1e-5)   # one coordinate: +-1
    assert report.ok, str(report)
    assert abs(report.analytic[0]) > 1e-9, "zero gradient"


def test_soft_mass_param_errors(f64):
    model, h = throw_scene(requires_grad={"tet_params"})
    with pytest.raises(ValueError, match="particle_mass has no gradient"):
        tgs.SoftMassParam(model, h)
    model, h = throw_scene()
    with pytest.raises(ValueError, match="quantity: expected one of"):
        tgs.SoftMassParam(model, h, quantity="weight")
    with pytest.raises(ValueError, match="value: expected a positive finite mass"):
        tgs.SoftMassParam(model, h, value=-1.0, log_space=False)
    with pytest.raises(ValueError, match="outside the bounds"):
        tgs.SoftMassParam(model, h, value=5.0, upper=1.0)


# ------------------------------------------------------------------------------------ damping

TET_X = np.array([[0.0, 0.0, 0.0], [0.1, 0.0, 0.0], [0.0, 0.12, 0.0], [0.0, 0.0, 0.09]])


def one_tet_step(damping_model, Fdot, F=np.eye(3), c=2.0, mu=3e3, lam=5e3):
    """One step of a single tet (mass 1 kg per vertex, no gravity) at deformation F with velocities
    giving dF/dt = Fdot; returns (corner forces from the velocity change (4, 3), rest X, V)."""
    X = TET_X
    b = tgs.SceneBuilder(gravity=(0.0, 0.0, 0.0))
    b.add_soft_mesh((X @ F.T, np.array([[0, 1, 2, 3]])), params={"mu": mu, "lam": lam}, damping=c,
                    damping_model=damping_model, node_mass=1.0, velocity=X @ Fdot.T)
    model = b.finalize()
    # rest shape X: re-finalized with the deformed positions as rest would give F = I, so write them
    Dm_inv = np.linalg.inv((X[1:] - X[0]).T)
    model.tet_Dm_inv.from_numpy(Dm_inv[None])
    model.tet_volume.from_numpy(np.array([abs(np.linalg.det((X[1:] - X[0]).T)) / 6.0]))
    dt = 1e-4
    sim = tgs.Simulator(model, dt=dt, steps=1)
    sim.run()
    qd = sim.state.particle_qd.to_numpy()
    elastic = elastic_forces(F, mu, lam, Dm_inv, model.tet_volume.to_numpy()[0])
    return (qd[1] - qd[0]) / dt - elastic, Dm_inv, float(model.tet_volume.to_numpy()[0])


def neo_hookean_stress(F, mu, lam):
    alpha = 1.0 + 0.75 * mu / lam
    J = np.linalg.det(F)
    cof = J * np.linalg.inv(F).T
    return mu * (1.0 - 1.0 / (np.sum(F * F) + 1.0)) * F + lam * (J - alpha) * cof


def corner_forces(P, Dm_inv, V):
    H = -V * P @ Dm_inv.T
    return np.vstack([-H.sum(axis=1), H.T])


def elastic_forces(F, mu, lam, Dm_inv, V):
    return corner_forces(neo_hookean_stress(F, mu, lam), Dm_inv, V)


@pytest.mark.parametrize("damping_model", list(DAMPING_MODELS))
def test_damping_model_stresses(f64, damping_model):
    """Each model's corner forces equal -V P_d Dm^-T of the formula in physics/damping.py (numpy):
    Warp's k_damp adds c (dJ/dt) cof F; Rayleigh beta at rest is beta (2 mu_L E_dot + lam_L tr(E_dot) I)
    with neo-Hookean's small-strain Lame parameters (3/4 mu, lam - 5/8 mu)."""
    rng = np.random.default_rng(5)
    F = np.eye(3) + 0.1 * rng.normal(size=(3, 3))
    Fdot = rng.normal(size=(3, 3))
    c, mu, lam = 2.0, 3e3, 5e3
    got, Dm_inv, V = one_tet_step(damping_model, Fdot, F, c, mu, lam)
    cof = np.linalg.det(F) * np.linalg.inv(F).T
    if damping_model == "deformation_rate":
        P = c * Fdot
    elif damping_model == "warp":
        P = c * (Fdot + np.sum(cof * Fdot) * cof)
    elif damping_model == "rayleigh_stiffness":
        Edot = 0.5 * (F.T @ Fdot + Fdot.T @ F)
        S = 2 * 0.75 * mu * Edot + (lam - 0.625 * mu) * np.trace(Edot) * np.eye(3)
        P = c * F @ S
    else:
        P = np.zeros((3, 3))
    want = corner_forces(P, Dm_inv, V)
    if damping_model == "rayleigh_mass":
        want = -c * 1.0 * (TET_X @ Fdot.T)          # -alpha m v, m = 1 kg
    assert np.abs(want).max() > 1e-3
    assert np.allclose(got, want, rtol=1e-5, atol=1e-6 * np.abs(want).max()), (got, want)


def test_rayleigh_does_not_damp_rigid_spin(f64):
    """Stiffness-proportional damping acts on the strain rate: a rigid spin (dF/dt = W, W skew) at
    rest shape meets no damping force, while dF/dt damping (deformation_rate) resists it."""
    W = np.array([[0.0, -2.0, 1.0], [2.0, 0.0, -0.5], [-1.0, 0.5, 0.0]])
    rayleigh, _, _ = one_tet_step("rayleigh_stiffness", W)
    rate, _, _ = one_tet_step("deformation_rate", W)
    assert np.abs(rayleigh).max() < 1e-9 * np.abs(rate).max() and np.abs(rate).max() > 1e-3


def check_columns(run, loss, model, n_dirs=1):
    """Gradient checks of tet_params one column at a time, each stepped at its own scale (the
    default, the table's RMS, would step a damping of 1e-3 by the size of mu)."""
    table = model.get("tet_params")
    for col in range(table.shape[1]):
        mask = np.zeros((1, table.shape[1]))
        mask[0, col] = 1
        report = tgs.check_gradient(run, loss, [model.tet_params], masks=[mask], n_dirs=n_dirs, eps=1e-5, rtol=1e-5,
                                    scale=[float(np.abs(table[:, col]).max())])
        assert report.ok and max(abs(a) for a in report.analytic) > 1e-12, (col, str(report))


def test_rayleigh_mass_is_a_drag_on_every_vertex(f64):
    """alpha M v: a uniformly moving box at its rest shape (no elastic or strain-rate force) slows
    by alpha v at every vertex, whatever its lumped mass and its number of tets."""
    b = tgs.SceneBuilder(gravity=(0.0, 0.0, 0.0))
    v = np.array([1.0, -2.0, 0.5])
    b.add_soft_mesh(box(), damping=4.0, damping_model="rayleigh_mass", density=700.0, velocity=v)
    sim = tgs.Simulator(b.finalize(), dt=1e-4, steps=1)
    sim.run()
    qd = sim.state.particle_qd.to_numpy()
    assert np.allclose((qd[1] - qd[0]) / 1e-4, -4.0 * v, rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("damping_model", ["warp", "rayleigh_stiffness", "rayleigh_mass"])
def test_damping_model_gradients(f64, damping_model):
    """Gradients through each added damping model (its coefficient, the material parameters the
    Rayleigh tangent reads, the initial velocity; for the mass-proportional drag the masses) match
    central differences in float64."""
    damping = {"warp": 3.0, "rayleigh_stiffness": 2e-3, "rayleigh_mass": 5.0}[damping_model]
    model, h = throw_scene(damping_model=damping_model, damping=damping, ground=False)
    sim, run, loss = rollout(model)
    check_columns(run, loss, model)
    report = tgs.check_gradient(run, loss, [model.particle_qd0], n_dirs=1, eps=1e-5, rtol=1e-5)
    assert report.ok, str(report)
    if damping_model == "rayleigh_mass":
        report = tgs.check_gradient(run, loss, [model.particle_mass], n_dirs=1, eps=1e-5, rtol=1e-5)
        assert report.ok, str(report)
    report = tgs.check_gradient(run, loss, [model.particle_qd0], n_dirs=1, eps=1e-5, rtol=1e-5)
    assert report.ok, str(report)
    if damping_model == "rayleigh_mass":
        report = tgs.check_gradient(run, loss, [model.particle_mass], n_dirs=1, eps=1e-5, rtol=1e-5)
        assert report.ok, str(report)


def test_two_damping_models_in_one_material_group(f64):
    """Two meshes of one material with different damping models share one loop (the model is read
    per tet): each behaves as when alone, and gradients still match central differences."""
    v, t = tgs.meshes.tet_box(1, 1, 1, size=(0.1, 0.1, 0.1), origin=(0.0, 0.05, 0.0))
    vel = np.random.default_rng(2).normal(size=(len(v), 3))

    def scene(models):
        b = tgs.SceneBuilder(gravity=(0.0, 0.0, 0.0))
        for k, m in enumerate(models):
            b.add_soft_mesh((v + [0.3 * k, 0.0, 0.0], t), damping=1e-3 if m == "rayleigh_stiffness" else 2.0,
                            damping_model=m, density=1000.0, velocity=vel)
        return b.finalize(requires_grad=True)

    def last_q(model):
        sim = tgs.Simulator(model, dt=1e-3, steps=20)
        sim.run()
        return sim.state.particle_q.to_numpy()[-1]

    models = ["warp", "rayleigh_stiffness", "rayleigh_mass"]
    mixed = scene(models)
    assert len(mixed.tet_forces) == 1 and mixed.tet_forces[0].damping_models == (1, 2, 3)
    together = last_q(mixed)
    n = len(v)
    for k, m in enumerate(models):
        alone = last_q(scene([m]))
        assert np.allclose(together[k * n:(k + 1) * n] - [0.3 * k, 0.0, 0.0], alone, atol=1e-12), m
        assert not np.allclose(alone, last_q(scene(["deformation_rate"])), atol=1e-6), m
    for path in ("parts", "parallel"):                 # ports (gather) and atomic paths: the same motion
        tgs.runtime.set_scatter(path)
        try:
            other = scene(models)
        finally:
            tgs.runtime.set_scatter("auto")
        assert np.allclose(last_q(other), together, atol=1e-12), path
    sim, run, loss = rollout(mixed, steps=20)
    check_columns(run, loss, mixed, n_dirs=2)


# ------------------------------------------------------------------------------------ mesh files

def test_tets_from_arrays_orients_and_rejects(f64):
    v, t = box()
    flipped = t.copy()
    flipped[:, [2, 3]] = flipped[:, [3, 2]]
    v2, t2 = tets_from_arrays(v, flipped.astype(float))              # text tables load as floats
    assert np.all(tgs.meshes.tet_volumes(v2, t2) > 0) and t2.dtype == np.int32
    flat = v.copy()
    flat[:, 1] = 0.0
    with pytest.raises(MeshFileError, match="inverted or degenerate tet"):
        tets_from_arrays(flat, t)
    with pytest.raises(MeshFileError, match="out of range"):
        tets_from_arrays(v, np.r_[t, [[0, 1, 2, 99]]])
    with pytest.raises(MeshFileError, match=r"tets: expected shape \(T, 4\)"):
        tets_from_arrays(v, t[:, :3])
    with pytest.raises(MeshFileError, match="tets: expected integer vertex indices"):
        tets_from_arrays(v, t + 0.5)


def soft_scene(tmp_path, obj, unknowns=None):
    """A scene dict with one soft object (look-at camera, 3 footage frames of 8x8 px)."""
    import imageio.v3 as iio
    (tmp_path / "clip").mkdir(exist_ok=True)
    mask = np.zeros((8, 8), np.uint8)
    mask[2:6, 2:6] = 255                # a plausible mask (an empty one is a FootageError)
    for k in range(3):
        iio.imwrite(tmp_path / "clip" / f"rgb_{k:04d}.png", np.full((8, 8, 3), 60, np.uint8))
        iio.imwrite(tmp_path / "clip" / f"mask_{k:04d}.png", mask)
    return {
        "world": {"up": "y", "gravity": 9.8},
        "simulation": {"substeps": 4},
        "ground": {"ke": 1e4, "kd": 10.0, "kf": 10.0, "mu": 0.5},
        "objects": {"cube": dict({"type": "soft", "position": [0.0, 0.06, 0.0]}, **obj)},
        "camera": {"eye": [0.0, 0.5, 1.2], "target": [0.0, 0.05, 0.0], "fov": 40.0, "width": 8, "height": 8},
        "footage": {"frames": "clip/rgb_%04d.png", "masks": "clip/mask_*.png", "fps": 30.0},
        "unknowns": unknowns or {},
        "fit": {"iterations": 5, "supervision": "mask"},
    }


def parse(tmp_path, obj, unknowns=None):
    return parse_scene(soft_scene(tmp_path, obj, unknowns), str(tmp_path / "scene.toml"))


def scene_error(tmp_path, obj, unknowns=None):
    with pytest.raises(SceneError) as info:
        parse(tmp_path, obj, unknowns)
    return str(info.value)


@pytest.mark.parametrize("suffix", [".msh", ".vtu"])
def test_scene_soft_mesh_from_meshio_files(tmp_path, suffix):
    v, t = box()
    save_mesh(tmp_path / f"cube{suffix}", v, t, file_format="gmsh22" if suffix == ".msh" else None)
    o = parse(tmp_path, {"mesh": f"cube{suffix}", "mass": 0.2}).objects["cube"]
    assert o.tets.shape == (40, 4) and np.allclose(o.vertices, v) and o.mass == 0.2 and o.density is None
    assert np.allclose(tgs.meshes.tet_volumes(o.vertices, o.tets).sum(), np.prod(SIZE))


def test_scene_soft_mesh_from_arrays(tmp_path):
    v, t = box()
    np.save(tmp_path / "x.npy", v)
    np.save(tmp_path / "t.npy", t)
    np.savetxt(tmp_path / "t.csv", t, fmt="%d", delimiter=",")
    np.save(tmp_path / "m.npy", np.full(len(v), 0.01))
    o = parse(tmp_path, {"nodes": "x.npy", "tets": "t.npy", "node_mass": "m.npy",
                         "damping": 2.0, "damping_model": "warp"}).objects["cube"]
    assert o.tets.shape == (40, 4) and np.allclose(o.node_mass, 0.01) and o.damping_model == "warp"
    o = parse(tmp_path, {"nodes": v.tolist(), "tets": "t.csv", "node_mass": 0.02}).objects["cube"]
    assert np.array_equal(o.tets, t) and np.allclose(o.node_mass, 0.02) and o.density is None
    o = parse(tmp_path, {"nodes": "x.npy", "tets": t.tolist(), "node_mass": np.full(27, 0.03).tolist()}).objects["cube"]
    assert np.allclose(o.node_mass, 0.03)
    spec = parse(tmp_path, {"nodes": "x.npy", "tets": "t.npy", "density": 300.0},
                 {"cube.mass": {"init": 0.4}, "cube.density": {"init": 200.0}})
    assert [u.param for u in spec.unknowns] == ["mass", "density"]


@pytest.mark.parametrize("obj, match", [
    ({"nodes": "x.npy", "density": 1.0}, r"\[objects.cube\] tets: missing: nodes = ... needs tets"),
    ({"tet_box": {"cells": [1, 1, 1], "size": [0.1, 0.1, 0.1]}, "tets": "t.npy", "density": 1.0},
     r"tets: only with nodes"),
    ({"nodes": "x.npy", "mesh": "cube.msh", "tets": "t.npy", "density": 1.0}, r"give only one of \(got mesh, nodes\)"),
    ({"nodes": "x.npy", "tets": "t.npy"}, r"density / mass / node_mass: missing: give one of density, mass, node_mass"),
    ({"nodes": "x.npy", "tets": "t.npy", "mass": 1.0, "density": 2.0}, r"give only one of \(got density, mass\)"),
    ({"nodes": "x.npy", "tets": "t.npy", "mass": -1.0}, r"mass: expected a positive number, got -1"),
    ({"nodes": "x.npy", "tets": "t.npy", "node_mass": [0.1, 0.2]}, r"node_mass: expected one mass per vertex \(27\), got 2"),
    ({"nodes": "x.npy", "tets": "t.npy", "node_mass": 0}, r"node_mass: expected a positive number, got 0"),
    ({"nodes": "x.npy", "tets": "flat.npy", "density": 1.0}, r"nodes / tets: .*inverted or degenerate tet 0"),
    ({"nodes": "x.npy", "tets": "nope.npy", "density": 1.0}, r"tets: file not found"),
    ({"nodes": "x.npy", "tets": "t.npy", "density": 1.0, "damping_model": "rayleigh_stifness"},
     r"damping_model: expected one of .*did you mean 'rayleigh_stiffness'"),
    ({"mesh": "surface.obj", "density": 1.0}, r"mesh: cannot read a tet mesh: .*tetrahedra"),
])
def test_scene_soft_errors(tmp_path, obj, match):
    v, t = box()
    np.save(tmp_path / "x.npy", v)
    np.save(tmp_path / "t.npy", t)
    np.save(tmp_path / "flat.npy", np.array([[0, 1, 2, 0]]))
    save_mesh(tmp_path / "cube.msh", v, t, file_format="gmsh22")
    tgs.meshes.save_obj(tmp_path / "surface.obj", *tgs.meshes.box_surface([0.1, 0.1, 0.1]))
    assert scene_error(tmp_path, obj).startswith("scene.toml: [objects.cube] ")
    assert pytest.raises(SceneError, parse, tmp_path, obj).match(match)


def test_scene_soft_mass_unknown_gradient(tmp_path, f64):
    """[unknowns."cube.mass"] on a soft object given per-vertex masses in the file: a SoftMassParam
    that keeps the given distribution, gradient = central differences (float64)."""
    from tigradsim.scenes.scene_build import Scene, load_scene_footage
    v, t = box()
    np.save(tmp_path / "x.npy", v - [0.05, 0.0, 0.05])
    np.save(tmp_path / "t.npy", t)
    per = np.linspace(0.005, 0.015, len(v))
    data = soft_scene(tmp_path, {"nodes": "x.npy", "tets": "t.npy", "node_mass": per.tolist(),
                                 "params": {"mu": 3e3, "lam": 5e3}, "damping": 1e-3,
                                 "damping_model": "rayleigh_stiffness", "velocity": [0.4, -1.0, 0.0]},
                      {"cube.mass": {"init": 0.5, "lower": 0.05, "upper": 5.0}})
    data["simulation"] = {"substeps": 40, "duration": 0.07}
    data["ground"] = {"ke": 500.0, "kd": 1.0, "kf": 1.0, "mu": 0.5}      # within the explicit limit of 5-g vertices
    spec = parse_scene(data, str(tmp_path / "scene.toml"))
    scene = Scene(spec, load_scene_footage(spec))
    m = scene.model.get("particle_mass")
    assert np.allclose(m, per * 0.5 / per.sum())
    assert scene.model.tet_forces[0].damping_models == (DAMPING_MODELS["rayleigh_stiffness"],)
    rec = tgs.ParticleRecorder(scene.sim, every=40)
    loss = tgs.MSELoss(rec.values, np.zeros((rec.frames, rec.count, 3)) + [0.1, 0.02, 0.05])

    def run():
        loss.value[None] = 0.0
        scene.sim.run()
        loss()

    report = tgs.check_param_gradient(run, loss.value, scene.params[0], n_dirs=1, eps=1e-6, rtol=1e-5)
    assert report.ok and abs(report.analytic[0]) > 1e-9, str(report)


def test_stability_report_reads_each_damping_model(f64):
    """The explicit-step check converts each model's coefficient to the viscous one with the same
    largest damping rate: beta M for Rayleigh's beta (M = lam + 2 mu, the wave modulus), 2 c for
    Warp's c (deviatoric plus volumetric)."""
    from tigradsim.core.registry import get_material
    params = {"mu": 5e3, "lam": 8e3}
    M = float(type(get_material("neo_hookean")).wave_modulus({k: np.array([v]) for k, v in params.items()})[0])

    def gamma(damping_model, damping):
        b = tgs.SceneBuilder()
        b.add_soft_mesh(box(), params=params, damping=damping, damping_model=damping_model, density=1000.0)
        rows = [r for r in tgs.stability_report(b.finalize(), 1e-4).rows if r.term.startswith("TetForces")]
        assert len(rows) == 1
        return rows[0].gamma

    viscous = gamma("deformation_rate", 3.0)
    assert viscous > 0
    assert np.isclose(gamma("rayleigh_stiffness", 3.0 / M), viscous, rtol=1e-9)
    assert np.isclose(gamma("warp", 1.5), viscous, rtol=1e-9)
