"""The PAC-NeRF protocol on footage tigradsim did not make (issue 47, item 7): for each of the five material
families a clip whose motion comes from Genesis 1.4.5's MPM (CPU, its own venv: benchmarks/genesis_pacnerf_runner.py)
and whose images come from Mitsuba 3 (CPU `scalar_rgb`), seen by 11 calibrated cameras, 14 frames at 24 fps, with
masks; a tigradsim scene file written from what a user knows; the truth in a file the fit never reads.

    python3 benchmarks/make_pacnerf_footage.py [--only FAMILY]... [--out benchmarks/footage/pacnerf]
    python3 benchmarks/make_pacnerf_footage.py --check [--only FAMILY]...   # tigradsim at the truth: IoU per view

Each clip folder benchmarks/footage/pacnerf/<family>/ holds
    scene.toml             the tigradsim scene file (`tigradsim fit scene.toml`): world, [mpm_grid], the object's
                           initial shape and place (a box, at rest), its density and the parameters a user would
                           know, 11 [[cameras]] (OpenCV K, R, t) each with its own frames and masks, and the
                           unknowns with starting guesses from PAC-NeRF's configs.  Never the truth.
    cNN/rgb_%04d.png       64 x 64 8-bit sRGB frames of camera NN (frame k at t = k / 24 s; k = 0 is the release)
    cNN/mask_%04d.png      64 x 64 8-bit grey masks (255 x the covered fraction of the pixel)
    truth.json             the true parameters (tigradsim's names and Genesis's), the conversions, the engine, its
                           sizes, the render settings, the true particle centroid per frame; NEVER read by a fit
                           (scene.toml does not name it).

The families (PAC-NeRF's five; the truths are tigradsim-material values, the Genesis law and its conversion in
genesis_pacnerf_runner.py's docstring and in FAMILIES below):
    elastic      Genesis MPM.Elastic(corotation)      <-> mpm_fixed_corotated   E, nu identical
    plasticine   Genesis MPM.ElastoPlastic(von Mises) <-> mpm_von_mises         E, nu, yield_stress identical
                 (Genesis: fixed-corotated elastic part; tigradsim: Hencky StVK: equal to first order in strain)
    sand         Genesis MPM.Sand                     <-> mpm_drucker_prager    E, nu, friction_angle identical
                 (Genesis keeps Klar et al.'s volume correction Jp; tigradsim has none)
    newtonian    Genesis MPM.Liquid(viscous=True)     <-> mpm_newtonian         eta = mu_G dt, K = lam_G + 2 mu_G / 3
                 (dt = the substep: 1/2400 s)
    bingham      Genesis user material BinghamLiquid  <-> mpm_bingham           identical (Papanastasiou-regularised)
Floor: elastic and plasticine fall on Genesis's frictionless domain wall (scene: [mpm_grid] mu = 0); sand and the
two fluids on a floor with Coulomb friction 0.5 (Genesis: a fixed rigid plane coupled to the grid; scene: mu = 0.5),
without which they spread into single-particle sheets.  Time step: elastic, plasticine 1/4800 s (PAC-NeRF's);
sand (E 3e5 known), fluids 1/2400 s (their stable step at Genesis's grid); the scene files use the same.
The initial velocity is zero: every object is released from rest at the first frame (t = 0), its lowest point
LIFT above the floor; the scene file says so (no velocity unknown).

Why a surface, not spheres: a camera sees the boundary of the matter, not its particles.  Each frame's particles
become an implicit surface (the level 1/2 of their smoothed density, marching cubes, in the Genesis venv:
genesis_pacnerf_runner.particle_surface), which lies on the faces of the body the particles sample; spheres per
particle would bulge by their radius and show the sampling lattice's bumps.  Masks come from the same mesh (a
second Mitsuba pass, the mesh as an emitter over black, antialiased coverage).

Render: Mitsuba 3.9.1 `scalar_rgb`, path tracer max depth 3, 16 spp (stratified, box filter), a grey diffuse floor
at y = 0, one rectangular area light and a dim sky; masks 16 spp.  Cameras: 8 on a ring at 20 degrees elevation
and 3 at 50 degrees, 1.6 m from the point (0.5, 0.1, 0.5), 64 x 64 px, fov 34 degrees; the OpenCV <-> Mitsuba
conversion of benchmarks/make_footage.py (mitsuba_sensor), checked on camera 0 and 10 of every clip by rendering
markers (`check_camera`).

Last line: JSON with per-family seconds (simulate, surface, render), particle counts and folder sizes; with --check,
the IoU of tigradsim's splat silhouette at the truth with the masks, per camera (the model-mismatch measure).
"""
import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
RUNNER = os.path.join(HERE, "genesis_pacnerf_runner.py")
sys.path.insert(0, HERE)
from make_footage import axis_angle_quat, quat_matrix  # noqa: E402  (the other clips' pose helpers)
GENESIS_PYTHON = "/opt/venvs/genesis/bin/python"
OUT = os.path.join(HERE, "footage", "pacnerf")

FPS = 24.0
FRAMES = 14                      # PAC-NeRF's clips: 13-16 frames at 24 fps
STEPS_PER_FRAME = 200            # dt = 1 / 4800 s, PAC-NeRF's
GRAVITY = 9.8
DENSITY = 1000.0                 # kg / m^3, PAC-NeRF's rho; known (weighed)
LIFT = 0.15                      # m: the lowest point of the object above the floor at release
CENTER_XZ = (0.5, 0.5)
# Genesis: a finer grid than the scene file's (the footage is "reality"; the fit's model is coarser)
GENESIS_GRID = 32                # 1 / dx [1/m]; particles at dx / 2 (8 per cell)
SCENE_RESOLUTION = 24            # the scene file's [mpm_grid] resolution over the 1 m domain
WIDTH = HEIGHT = 64
FOV_DEG = 34.0
CAMERA_DISTANCE = 1.6
CAMERA_TARGET = (0.5, 0.1, 0.5)
SPP, MASK_SPP = 16, 16
LIGHT = dict(center=(-0.3, 2.0, 0.9), size=1.0, radiance=14.0)
SKY = 0.3
FLOOR_ALBEDO = 0.45


# Per family: the box (size [m], tilt axis, degrees), the tigradsim material and its TRUE values (PAC-NeRF's
# ranges: its configs start E at 1e4-3.2e5 Pa, yield stress at 1e3 Pa, the friction angle at 10 degrees, the
# viscosity at 10 Pa s with K 1e4 Pa, a Bingham yield stress at 10 Pa with plastic viscosity 1 Pa s and K 1e5 Pa:
# the truths lie within a decade or two of those), the known values a user has, the unknowns with PAC-NeRF's
# starting guesses and bounds, the Genesis law.
FAMILIES = {
    "elastic": dict(
        name="jelly", box=(0.24, 0.16, 0.20), tilt=((1.0, 0.0, 0.6), 25.0), colour=(0.75, 0.12, 0.10),
        material="mpm_fixed_corotated", truth={"E": 1.0e5, "nu": 0.3}, known={},
        unknowns={"E": (316228.0, 1e3, 1e7), "nu": (0.25, 0.05, 0.45)},
        law="elastic", genesis=lambda t: dict(E=t["E"], nu=t["nu"])),
    "plasticine": dict(
        name="dough", box=(0.22, 0.18, 0.22), tilt=((0.0, 0.0, 1.0), 15.0), colour=(0.10, 0.35, 0.75),
        material="mpm_von_mises", truth={"E": 5.0e4, "nu": 0.3, "yield_stress": 2.0e3}, known={},
        unknowns={"E": (1e4, 1e3, 1e7), "nu": (0.25, 0.05, 0.45), "yield_stress": (1e3, 10.0, 1e5)},
        law="von_mises", genesis=lambda t: dict(E=t["E"], nu=t["nu"], yield_stress=t["yield_stress"])),
    "sand": dict(
        name="sand", box=(0.16, 0.26, 0.16), tilt=((1.0, 0.0, 1.0), 10.0), colour=(0.80, 0.62, 0.30),
        material="mpm_drucker_prager", truth={"friction_angle": 35.0}, known={"E": 3e5, "nu": 0.3},
        unknowns={"friction_angle": (10.0, 2.0, 60.0)}, floor_mu=0.5, steps_per_frame=100,
        law="sand", genesis=lambda t: dict(E=3e5, nu=0.3, friction_angle=t["friction_angle"])),
    "newtonian": dict(
        name="fluid", box=(0.20, 0.20, 0.20), tilt=((1.0, 0.0, 1.0), 20.0), colour=(0.15, 0.60, 0.35),
        material="mpm_newtonian", truth={"viscosity": 25.0, "bulk_modulus": 1.0e5}, known={},
        unknowns={"viscosity": (10.0, 0.1, 1e4), "bulk_modulus": (1e4, 1e3, 1e7)}, floor_mu=0.5, steps_per_frame=100,
        law="newtonian", genesis=lambda t: dict(viscosity=t["viscosity"], bulk_modulus=t["bulk_modulus"])),
    "bingham": dict(
        name="paste", box=(0.20, 0.20, 0.20), tilt=((0.0, 0.0, 1.0), 10.0), colour=(0.85, 0.80, 0.70),
        material="mpm_bingham", truth={"yield_stress": 400.0, "plastic_viscosity": 4.0, "bulk_modulus": 3.0e5},
        known={"regularization_rate": 1.0},
        unknowns={"yield_stress": (10.0, 1.0, 1e5), "plastic_viscosity": (1.0, 0.01, 1e3),
                  "bulk_modulus": (1e5, 1e3, 1e7)}, floor_mu=0.5, steps_per_frame=100,
        law="bingham", genesis=lambda t: dict(yield_stress=t["yield_stress"], plastic_viscosity=t["plastic_viscosity"],
                                              bulk_modulus=t["bulk_modulus"], regularization_rate=1.0)),
}

CONVERSIONS = {
    "elastic": "Genesis MPM.Elastic(model='corotation', E, nu) is tigradsim's mpm_fixed_corotated (E, nu): the same "
               "stress tau = 2 mu (F - R) F^T + lam J (J - 1) I, the same Lame parameters from E, nu.",
    "plasticine": "Genesis MPM.ElastoPlastic(use_von_mises=True, von_mises_yield_stress=yield_stress, E, nu) and "
                  "tigradsim's mpm_von_mises (E, nu, yield_stress): the same return mapping of the Hencky strain's "
                  "deviator onto the radius yield_stress / (2 mu); Genesis's elastic part is fixed-corotated on the "
                  "projected F, tigradsim's is Hencky StVK (PAC-NeRF's): equal to first order in the strain.",
    "sand": "Genesis MPM.Sand(friction_angle, E, nu) and tigradsim's mpm_drucker_prager (E, nu, friction_angle): "
            "Hencky StVK and Klar et al.'s projection with alpha = sqrt(2/3) 2 sin(phi) / (3 - sin(phi)) in both; "
            "Genesis adds the volume correction Jp (log-volume gained in tension carried to the next step).",
    "newtonian": "Genesis MPM.Liquid(viscous=True, mu=mu_G, lam=lam_G) resets F to J^(1/3) I every substep and "
                 "takes the corotated stress of the trial F, a Newtonian fluid of viscosity eta = mu_G dt and bulk "
                 "modulus K = lam_G + 2 mu_G / 3 (to first order in dt): mu_G = viscosity / dt, lam_G = "
                 "bulk_modulus - 2 viscosity / (3 dt), dt = 1/4800 s.  tigradsim's mpm_newtonian: "
                 "tau = K J (J - 1) I + 2 viscosity J dev(sym C).",
    "bingham": "Genesis has no yield-stress fluid: a Genesis user material (BinghamLiquid in "
               "genesis_pacnerf_runner.py, a subclass of MPM.Liquid; Genesis's grid, transfers and time stepping) "
               "states Papanastasiou's regularised Bingham law with tigradsim's mpm_bingham parameters "
               "(yield_stress, plastic_viscosity, bulk_modulus, regularization_rate) unchanged; its strain rate is "
               "the substep's, from the trial F.",
}


# -- geometry and cameras ------------------------------------------------------------------------------
def initial_pose(fam):
    """(centre (3,), quaternion x y z w) of the family's box at release: centred over CENTER_XZ, its lowest
    corner LIFT above the floor."""
    q = axis_angle_quat(*fam["tilt"])
    half = np.asarray(fam["box"]) / 2
    corners = np.array([[sx, sy, sz] for sx in (-1, 1) for sy in (-1, 1) for sz in (-1, 1)]) * half
    low = (corners @ quat_matrix(q).T)[:, 1].min()
    return np.array([CENTER_XZ[0], LIFT - low, CENTER_XZ[1]]), q


def cameras():
    """The 11 cameras: [(name, K, R, t)] (OpenCV; make_footage.opencv_camera)."""
    from make_footage import opencv_camera
    focal = WIDTH / (2.0 * math.tan(math.radians(FOV_DEG) / 2))
    rigs = [(20.0, 15.0 + 45.0 * i) for i in range(8)] + [(50.0, 40.0 + 120.0 * i) for i in range(3)]
    out = []
    for i, (elev, azim) in enumerate(rigs):
        e, a = math.radians(elev), math.radians(azim)
        eye = np.array(CAMERA_TARGET) + CAMERA_DISTANCE * np.array([math.cos(e) * math.sin(a), math.sin(e),
                                                                    math.cos(e) * math.cos(a)])
        K, R, t = opencv_camera(eye, CAMERA_TARGET, focal, width=WIDTH, height=HEIGHT)
        out.append((f"c{i:02d}", K, R, t))
    return out


# -- the engine ------------------------------------------------------------------------------------------
def steps_per_frame(fam):
    return fam.get("steps_per_frame", STEPS_PER_FRAME)


def simulate(family, fam, work):
    """Run Genesis (its venv) on the family's clip; returns the runner's npz as a dict and the spec.  Without
    floor friction the floor is Genesis's own domain wall (frictionless, 3 cells inside its bounds: y = 0); with
    it (fam["floor_mu"]) a fixed rigid plane y = 0 coupled to the grid with coup_friction = floor_mu, the domain's
    wall then 3 cells below it."""
    centre, q = initial_pose(fam)
    dx = 1.0 / GENESIS_GRID
    lower = [-3 * dx, -6 * dx if fam.get("floor_mu") else -3 * dx, -3 * dx]
    spec = dict(law=fam["law"], rho=DENSITY, grid_density=float(GENESIS_GRID), lower_bound=lower,
                upper_bound=[1 + 3 * dx] * 3, particle_size=dx / 2, box_size=list(fam["box"]),
                box_center=centre.tolist(), box_quat=[q[3], q[0], q[1], q[2]], gravity=[0.0, -GRAVITY, 0.0],
                dt=1.0 / (FPS * steps_per_frame(fam)), steps_per_frame=steps_per_frame(fam), frames=FRAMES,
                floor_friction=fam.get("floor_mu"), surface_voxel=dx / 4,
                surface_sigma=0.6 * dx / 2, threads=2, **fam["genesis"](fam["truth"]))
    spec_path, out_path = os.path.join(work, f"{family}.json"), os.path.join(work, f"{family}.npz")
    with open(spec_path, "w") as fh:
        json.dump(spec, fh)
    r = subprocess.run([GENESIS_PYTHON, RUNNER, spec_path, out_path], capture_output=True, text=True, cwd=ROOT)
    if r.returncode != 0:
        raise RuntimeError(f"Genesis runner failed for {family}:\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}")
    with np.load(out_path) as d:
        return {k: d[k] for k in d.files}, spec


def frame_surface(res, k):
    vo, fo = res["vertex_offsets"], res["face_offsets"]
    return res["surface_vertices"][vo[k]:vo[k + 1]], res["surface_faces"][fo[k]:fo[k + 1]]


# -- rendering -------------------------------------------------------------------------------------------
def rgb_scene(K, R, t, verts, faces, colour, seed):
    import mitsuba as mi
    from make_footage import _mesh, mitsuba_sensor
    c, s = LIGHT["center"], LIGHT["size"] / 2
    return {"type": "scene", "integrator": {"type": "path", "max_depth": 3},
            "sensor": mitsuba_sensor(K, R, t, WIDTH, HEIGHT, SPP, seed),
            "sky": {"type": "constant", "radiance": {"type": "rgb", "value": [SKY] * 3}},
            "floor": {"type": "rectangle", "to_world": mi.ScalarTransform4f().rotate([1, 0, 0], -90).scale([10, 10, 1]),
                      "bsdf": {"type": "diffuse", "reflectance": {"type": "rgb", "value": [FLOOR_ALBEDO] * 3}}},
            "light": {"type": "rectangle",
                      "to_world": mi.ScalarTransform4f().translate(list(c)).rotate([1, 0, 0], 90).scale([s, s, 1]),
                      "emitter": {"type": "area", "radiance": {"type": "rgb", "value": [LIGHT["radiance"]] * 3}}},
            "object": _mesh("object", verts, faces, bsdf={"type": "diffuse",
                                                          "reflectance": {"type": "rgb", "value": list(colour)}})}


def mask_scene(K, R, t, verts, faces, seed):
    from make_footage import _mesh, mitsuba_sensor
    return {"type": "scene", "integrator": {"type": "path", "max_depth": 1},
            "sensor": mitsuba_sensor(K, R, t, WIDTH, HEIGHT, MASK_SPP, seed),
            "object": _mesh("object", verts, faces, bsdf={"type": "diffuse", "reflectance": {"type": "rgb", "value": [0, 0, 0]}},
                            emitter={"type": "area", "radiance": {"type": "rgb", "value": [1.0, 1.0, 1.0]}})}


def render(folder, fam, res, cams):
    """Write every camera's frames and masks; returns (seconds, camera check errors [px])."""
    import mitsuba as mi
    from PIL import Image
    from make_footage import check_camera, linear_to_srgb8
    mi.set_variant("scalar_rgb")
    t0 = time.time()
    x0 = res["positions"][0].mean(0)
    markers = [x0, res["positions"][-1].mean(0), np.array([x0[0] + 0.2, 0.0, x0[2] - 0.15])]
    checks = {}
    for name, K, R, t in (cams[0], cams[-1]):
        checks[name] = np.abs(check_camera(K, R, t, markers, width=WIDTH, height=HEIGHT, spp=256)).max()
    for ci, (name, K, R, t) in enumerate(cams):
        sub = os.path.join(folder, name)
        os.makedirs(sub, exist_ok=True)
        for k in range(FRAMES):
            v, f = frame_surface(res, k)
            seed = 1000 * ci + k
            img = mi.render(mi.load_dict(rgb_scene(K, R, t, v, f, fam["colour"], seed)))
            Image.fromarray(linear_to_srgb8(np.array(img))).save(os.path.join(sub, f"rgb_{k:04d}.png"), optimize=True)
            m = np.array(mi.render(mi.load_dict(mask_scene(K, R, t, v, f, seed))))[..., 0]
            Image.fromarray(np.round(np.clip(m, 0, 1) * 255).astype(np.uint8), mode="L").save(
                os.path.join(sub, f"mask_{k:04d}.png"), optimize=True)
    return time.time() - t0, {k: float(v) for k, v in checks.items()}


# -- the files -------------------------------------------------------------------------------------------
def write_scene(folder, family, fam, cams):
    """scene.toml: only what a user knows (module docstring)."""
    from footage import write_toml
    centre, q = initial_pose(fam)
    name = fam["name"]
    params = dict(fam["known"])
    tables = [
        ("[world]", {"up": "y", "gravity": GRAVITY}),
        ("[simulation]", {"substeps": steps_per_frame(fam)}),
        ("[mpm_grid]", {"lower": [0.0, 0.0, 0.0], "upper": [1.0, 1.0, 1.0], "resolution": SCENE_RESOLUTION,
                        "mu": fam.get("floor_mu") or 0.0, "boundary": "separate"}),
        (f"[objects.{name}]", {"type": "mpm", "box": list(fam["box"]), "position": centre.round(6).tolist(),
                               "rotation": q.round(9).tolist(), "velocity": [0.0, 0.0, 0.0],
                               "material": fam["material"], **({"params": params} if params else {}),
                               "density": DENSITY, "particles_per_cell": 8}),
        ("[footage]", {"fps": FPS, "start_time": 0.0}),
    ]
    for cname, K, R, t in cams:
        tables.append(("[[cameras]]", {"name": cname, "K": K.round(9).tolist(), "R": R.round(12).tolist(),
                                       "t": t.round(12).tolist(), "width": WIDTH, "height": HEIGHT,
                                       "frames": f"{cname}/rgb_%04d.png", "masks": f"{cname}/mask_%04d.png"}))
    for p, (init, lo, hi) in fam["unknowns"].items():
        tables.append((f'[unknowns."{name}.{p}"]', {"init": init, "lower": lo, "upper": hi}))
    tables.append(("[fit]", {"supervision": "mask", "optimizer": "bfgs", "iterations": 8}))
    path = os.path.join(folder, "scene.toml")
    write_toml(path, tables)
    head = (f"# PAC-NeRF-protocol clip ({family}), made by benchmarks/make_pacnerf_footage.py: the motion is Genesis "
            f"1.4.5's MPM, the images Mitsuba 3's;\n# tigradsim did not make it.  What a user knows: the box and its "
            f"place at release (at rest, t = 0 = frame 0), its density\n# (weighed), the floor's friction (mu) and the "
            f"frictionless walls of the 1 m domain, 11 calibrated cameras.  The unknowns start at PAC-NeRF's\n# configs' guesses.  "
            f"The truth is kept in a file beside this one that no fit reads.\n\n")
    with open(path) as fh:
        body = fh.read()
    with open(path, "w") as fh:
        fh.write(head + body)
    return path


def folder_bytes(folder):
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(folder) for f in fs)


def make_family(family, out, work):
    import mitsuba as mi
    fam = FAMILIES[family]
    folder = os.path.join(out, family)
    if os.path.isdir(folder):
        shutil.rmtree(folder)
    os.makedirs(folder)
    t0 = time.time()
    res, spec = simulate(family, fam, work)
    wall_sim = time.time() - t0
    cams = cameras()
    print(f"[{family}] Genesis: {int(res['particles'])} particles, {wall_sim:.1f} s wall "
          f"({float(res['seconds_simulate']):.1f} s stepping, {float(res['seconds_surface']):.1f} s surfaces)", flush=True)
    render_s, checks = render(folder, fam, res, cams)
    print(f"[{family}] Mitsuba: {len(cams)} x {FRAMES} frames + masks in {render_s:.1f} s; camera check {checks} px",
          flush=True)
    write_scene(folder, family, fam, cams)
    centre, q = initial_pose(fam)
    cent = res["positions"].astype(np.float64).mean(1)
    truth = {
        "family": family, "object": fam["name"],
        "truth": {"material": fam["material"], **fam["truth"]},
        "known": {"density": DENSITY, **fam["known"], "initial_velocity": [0.0, 0.0, 0.0],
                  "box": list(fam["box"]), "position": centre.tolist(), "rotation_xyzw": q.tolist(),
                  "floor_and_walls": ("the faces of [0, 1]^3 (floor y = 0), frictionless (Genesis's slip walls)"
                                      if not fam.get("floor_mu") else
                                      f"floor y = 0 with Coulomb friction {fam['floor_mu']} (Genesis: a fixed rigid "
                                      "plane, coup_friction); the other faces of [0, 1]^3 frictionless walls")},
        "unknowns": {f"{fam['name']}.{p}": {"init": v[0], "lower": v[1], "upper": v[2]} for p, v in fam["unknowns"].items()},
        "conversion": CONVERSIONS[family],
        "engine": {"name": "Genesis", "version": "1.4.5", "backend": "cpu", "precision": "32", "law": fam["law"],
                   "genesis_spec": {k: v for k, v in spec.items() if k not in ("surface_voxel", "surface_sigma", "threads")},
                   "particles": int(res["particles"]), "grid_nodes": res["grid_nodes"].tolist(),
                   "dt": spec["dt"], "steps_per_frame": spec["steps_per_frame"], "sampler": "regular",
                   "seconds_stepping": float(res["seconds_simulate"]), "seconds_wall": wall_sim},
        "surface": {"method": "level 1/2 of the particles' density (trilinear deposit, Gaussian smoothing), marching "
                              "cubes (scikit-image in the Genesis venv)", "voxel_m": spec["surface_voxel"],
                    "sigma_m": spec["surface_sigma"]},
        "render": {"renderer": f"Mitsuba {mi.__version__}", "variant": "scalar_rgb", "integrator": "path, max_depth 3",
                   "spp": SPP, "mask_spp": MASK_SPP, "sampler": "stratified", "pixel_filter": "box",
                   "size": [WIDTH, HEIGHT], "fov_deg_x": FOV_DEG, "light": LIGHT, "sky_radiance": SKY,
                   "floor_albedo": FLOOR_ALBEDO, "object_colour_linear_rgb": list(fam["colour"]),
                   "seconds": render_s, "camera_check_px": checks},
        "fps": FPS, "frame_count": FRAMES, "frame_times": "k / fps, k = 0 .. frame_count - 1 (0 = release at rest)",
        "centroid_per_frame": cent.round(5).tolist(),
    }
    with open(os.path.join(folder, "truth.json"), "w") as fh:
        json.dump(truth, fh, indent=1)
    size = folder_bytes(folder)
    print(f"[{family}] {folder}: {size / 1e6:.2f} MB", flush=True)
    return {"family": family, "particles": int(res["particles"]), "seconds_genesis_wall": round(wall_sim, 1),
            "seconds_stepping": round(float(res["seconds_simulate"]), 1), "seconds_render": round(render_s, 1),
            "bytes": size}


# -- the check: tigradsim at the truth ---------------------------------------------------------------------
def check_family(family, out, precision="f32", resolution=None):
    """Parse the clip's scene file, set its object's parameters to truth.json's, roll tigradsim out and render its
    splat silhouette from every camera: {camera: mean IoU with the masks}, their mean, the per-frame mean over the
    cameras, and the seconds.  `resolution` replaces the file's [mpm_grid] resolution (a what-if)."""
    import tigradsim as tgs
    from tigradsim.scenes.scene_build import Scene
    from tigradsim.scenes.scene_file import load_scene
    from tigradsim.scenes.scene_views import load_views_footage, views_iou
    folder = os.path.join(out, family)
    spec = load_scene(os.path.join(folder, "scene.toml"))
    with open(os.path.join(folder, "truth.json")) as fh:
        truth = json.load(fh)
    obj = spec.objects[truth["object"]]
    obj.params = {**obj.params, **{k: v for k, v in truth["truth"].items() if k != "material"}}
    if resolution is not None:
        spec.mpm_grid["resolution"] = int(resolution)
    tgs.init(arch="cpu", precision=precision)
    t0, c0 = time.time(), time.process_time()
    scene = Scene(spec, load_views_footage(spec), requires_grad=False, unknowns=False)
    videos = scene.render_views()
    report = views_iou(scene, videos)
    ious = {k: round(v["iou"], 3) for k, v in report.items()}
    per_frame = np.mean([v["iou_per_frame"] for v in report.values()], axis=0)
    return {"family": family, "resolution": spec.mpm_grid["resolution"], "iou_per_camera": ious,
            "iou_mean": round(float(np.mean(list(ious.values()))), 3),
            "iou_per_frame": per_frame.round(3).tolist(),
            "iou_min_frame": round(float(min(min(v["iou_per_frame"]) for v in report.values())), 3),
            "particles": int(scene.model.mpm_particle_count), "steps": scene.steps, "seconds": round(time.time() - t0, 1),
            "cpu_seconds": round(time.process_time() - c0, 1)}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", action="append", choices=list(FAMILIES))
    parser.add_argument("--out", default=OUT)
    parser.add_argument("--check", action="store_true", help="tigradsim at the truth: IoU per camera")
    parser.add_argument("--resolution", type=int, help="with --check: replace the scene's [mpm_grid] resolution")
    args = parser.parse_args(argv)
    sys.path.insert(0, HERE)
    families = args.only or list(FAMILIES)
    results = []
    if args.check:
        sys.path.insert(0, ROOT)
        for fam in families:
            results.append(check_family(fam, args.out, resolution=args.resolution))
            print(json.dumps(results[-1]), flush=True)
    else:
        with tempfile.TemporaryDirectory() as work:
            for fam in families:
                results.append(make_family(fam, args.out, work))
    print(json.dumps(results))


if __name__ == "__main__":
    sys.exit(main())
