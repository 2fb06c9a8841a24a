"""Footage that tigradsim did not render: clips from Mitsuba 3, with their ground truth.

For each clip the motion is simulated by tigradsim at a much finer time step
than any fit uses (dt = 1/7680 s, float64, 256 steps per video frame) and
each 30 fps video frame is rendered by Mitsuba 3 (CPU variant `scalar_rgb`,
unidirectional path tracer, 128 x 128 px): a textured floor on the ground
plane y = 0, a rectangular area light (soft shadows) plus a dim uniform sky,
the object as a diffuse mesh.  A second pass renders the object's mask
(the object as a constant emitter over black: antialiased coverage).  Each
clip folder holds

    rgb_%04d.png    8-bit sRGB frames            mask_%04d.png   8-bit grey masks
    truth.json      camera (OpenCV K, R, t), timing, object, initial state,
                    known forces, contact law and parameters, the TRUE
                    physical parameters, the simulation dt, the per-frame
                    true trajectory and the camera check
    floor.png       the floor texture tile       box.obj / cube.node + cube.ele  the object

Clips (see benchmarks/footage/README.md):
    box_push   box resting on the floor, pushed by a known force: mass, mu
    box_drop   box dropped with spin, bounces and slides, no known force: mass, ke, kd, kf, mu
    soft_drop  neo-Hookean cube (320 tets) dropped on an edge: mu, lam

--engine warp | mujoco | newton: the same clips with the motion of another engine
(benchmarks/engine_sims.py; folders ENGINE_CLIP): the boxes for every engine, soft_drop for warp
(Warp's own add_soft_grid cube, equal node masses) and newton (SolverSemiImplicit on tigradsim's
tet_box with 6 tets per cell, masses lumped by Newton).  Newton runs in its own venv
(benchmarks/requirements-newton.txt, benchmarks/newton_sim.py, benchmarks/newton_soft_sim.py).

Camera conversion (OpenCV -> Mitsuba), checked on every run: Mitsuba's camera
frame has x LEFT, y up, z forward, so its camera-to-world matrix is
[R^T diag(-1, -1, 1) | -R^T t]; `fov` is the x field of view 2 atan(W / (2 fx))
(square pixels: fx = fy); the principal-point offsets are
-(cx - (W/2 - 0.5)) / W and -(cy - (H/2 - 0.5)) / H (fractions of the film
size, sign measured: OpenCV's pixel centres are integers, Mitsuba's film
pixel i covers [i, i + 1]).  `check_camera` renders three small emissive
spheres at known points and asserts that their centroids land within 0.5 px
of OpenCV's (u, v) (measured: about 0.05 px, the sampling noise).

Noisy copies are not committed (noise does not compress); `noisy_copy`
regenerates them exactly: Gaussian noise of sigma 0.02 in [0, 1] units from
`numpy.random.default_rng(seed)` (seed 0), drawn as ONE array of shape
(frames, H, W, 3) in frame order, added to rgb / 255, clipped to [0, 1] and
re-quantised as round(255 x).  Importable without Mitsuba:
`from benchmarks.make_footage import noisy_copy, add_noise`.

    python3 -m pip install -e ".[footage]"      # mitsuba==3.9.1
    python3 benchmarks/make_footage.py --out benchmarks/footage
    python3 benchmarks/make_footage.py --only box_push --spp 16 --out /tmp/footage

Last line: JSON with per-clip frame counts, simulation and render seconds and sizes.
"""
import argparse
import glob
import json
import math
import os
import subprocess
import sys
import time

import numpy as np
from PIL import Image

FPS = 30
SIM_DT = 1.0 / 7680.0                 # 256 steps per video frame
STEPS_PER_FRAME = 256
WIDTH = HEIGHT = 128
GRAVITY = (0.0, -9.8, 0.0)
MITSUBA_VARIANT = "scalar_rgb"
NOISE_SIGMA = 0.02
NOISE_SEED = 0
CAMERA_TOLERANCE_PX = 0.5

FLOOR_TILE = 0.5                      # [m] side of the floor texture tile (2 x 2 checker squares of 25 cm)
FLOOR_HALF = 10.0                     # [m] the floor is [-10, 10]^2 in x, z
LIGHT = dict(center=(-1.2, 1.8, 0.6), size=0.8, radiance=22.0)   # area light [m], radiance (W / m^2 / sr, RGB grey)
SKY = 0.25                            # uniform sky radiance (fill light)

# -- the clips ---------------------------------------------------------------------------------------
# Cameras: a look-at pose turned into OpenCV K, R, t (the numbers stored in truth.json are the truth;
# the look-at is only how they were chosen).  Principal points slightly off-centre on purpose.
CLIPS = {
    "box_push": dict(
        kind="rigid", duration=1.2, colour=(0.75, 0.18, 0.08),
        size=(0.3, 0.15, 0.2), mass=1.3, position=(-0.35, None, 0.0), rotation=(0.0, 0.0, 0.0, 1.0),
        velocity=(0.0, 0.0, 0.0), angular_velocity=(0.0, 0.0, 0.0),
        contact=dict(ke=2500.0, kd=30.0, kf=10.0, mu=0.4),
        # pushed at the middle of its back face (x = -0.15 in the box's frame) along +x: no torque about the centre
        forces=[dict(force=(18.0, 0.0, 0.0), point=(-0.15, 0.0, 0.0), start=0.2, end=0.4)],
        unknowns=("mass", "mu"),
        camera=dict(eye=(0.15, 0.75, 1.45), target=(0.0, 0.05, 0.0), focal=150.0, offset=(1.5, -1.0))),
    "box_drop": dict(
        kind="rigid", duration=1.5, colour=(0.80, 0.45, 0.05),
        size=(0.24, 0.14, 0.18), mass=0.9, position=(-0.3, 0.35, 0.0),
        rotation=None, tilt=dict(axis=(1.0, 0.3, 0.5), degrees=30.0),
        velocity=(0.6, 0.5, 0.0), angular_velocity=(3.0, -2.0, 4.0),
        contact=dict(ke=3000.0, kd=12.0, kf=15.0, mu=0.5),
        forces=[],
        unknowns=("mass", "ke", "kd", "kf", "mu"),
        camera=dict(eye=(-0.05, 0.8, 1.35), target=(-0.06, 0.15, 0.03), focal=185.0, offset=(-1.0, 1.5))),
    "soft_drop": dict(
        kind="soft", duration=1.2, colour=(0.12, 0.55, 0.15),
        size=0.3, cells=4, tets_per_cell=5, density=100.0, damping=0.5,
        material=dict(mu=3000.0, lam=6000.0),
        position=(-0.1, 0.45, 0.0), tilt=dict(axis=(0.4, 0.2, 1.0), degrees=25.0),
        velocity=(0.2, 0.0, 0.0), angular_velocity=(0.0, 0.0, 0.0),
        ground=dict(ke=2e4, kd=5.0, kf=10.0, mu=0.5), particle_radius=0.0,
        unknowns=("mu", "lam"),
        camera=dict(eye=(0.2, 0.75, 1.35), target=(0.13, 0.2, 0.0), focal=140.0, offset=(1.0, 0.5))),
}


# -- cameras ------------------------------------------------------------------------------------------
def opencv_camera(eye, target, focal, offset=(0.0, 0.0), width=WIDTH, height=HEIGHT, up=(0.0, 1.0, 0.0)):
    """OpenCV K (3, 3), R (3, 3), t (3,) of a camera at `eye` looking at `target`.

    K = [[f, 0, cx], [0, f, cy], [0, 0, 1]] with cx = W/2 - 0.5 + offset[0], cy = H/2 - 0.5 + offset[1]
    (pixel centres at integer coordinates); x_cam = R x_world + t, camera x right, y down, z forward.
    """
    eye, target, up = (np.asarray(a, dtype=np.float64) for a in (eye, target, up))
    forward = target - eye
    forward /= np.linalg.norm(forward)
    right = np.cross(forward, up)
    right /= np.linalg.norm(right)
    down = np.cross(forward, right)
    R = np.stack([right, down, forward])
    t = -R @ eye
    K = np.array([[focal, 0.0, width / 2 - 0.5 + offset[0]], [0.0, focal, height / 2 - 0.5 + offset[1]],
                  [0.0, 0.0, 1.0]])
    return K, R, t


def project(K, R, t, points):
    """OpenCV pixel coordinates (N, 2) of world points (N, 3): u = fx X/Z + cx, v = fy Y/Z + cy."""
    X = np.asarray(points, dtype=np.float64).reshape(-1, 3) @ np.asarray(R).T + np.asarray(t)
    if np.any(X[:, 2] <= 0):
        raise ValueError(f"points: every point must lie in front of the camera (Z > 0), got Z = {X[:, 2].tolist()}")
    return np.stack([K[0, 0] * X[:, 0] / X[:, 2] + K[0, 2], K[1, 1] * X[:, 1] / X[:, 2] + K[1, 2]], axis=1)


def mitsuba_sensor(K, R, t, width, height, spp, seed=0):
    """A Mitsuba `perspective` sensor dict equal to the OpenCV camera (K, R, t) (box pixel filter)."""
    import mitsuba as mi
    K, R, t = (np.asarray(a, dtype=np.float64) for a in (K, R, t))
    if abs(K[0, 0] - K[1, 1]) > 1e-9 * K[0, 0] or K[0, 1] != 0.0:
        raise ValueError(f"K: Mitsuba's perspective sensor needs square pixels and no skew (fx = fy, s = 0), got {K.tolist()}")
    to_world = np.eye(4)
    to_world[:3, :3] = R.T @ np.diag([-1.0, -1.0, 1.0])      # Mitsuba camera frame: x left, y up, z forward
    to_world[:3, 3] = -R.T @ t
    return {
        "type": "perspective",
        "fov": math.degrees(2.0 * math.atan(width / (2.0 * K[0, 0]))), "fov_axis": "x",
        "principal_point_offset_x": -(K[0, 2] - (width / 2 - 0.5)) / width,
        "principal_point_offset_y": -(K[1, 2] - (height / 2 - 0.5)) / height,
        "near_clip": 0.01, "far_clip": 100.0,
        "to_world": mi.ScalarTransform4f(to_world.tolist()),
        "sampler": {"type": "stratified", "sample_count": int(spp), "seed": int(seed)},
        "film": {"type": "hdrfilm", "width": int(width), "height": int(height), "pixel_format": "rgb",
                 "rfilter": {"type": "box"}},
    }


def check_camera(K, R, t, points, width=WIDTH, height=HEIGHT, spp=256):
    """Render emissive spheres (1 cm) at up to 3 world points (red, green, blue) and compare each
    channel's intensity centroid with OpenCV's projection.  Returns the errors [px] (N, 2);
    raises AssertionError when one exceeds CAMERA_TOLERANCE_PX."""
    import mitsuba as mi
    points = np.asarray(points, dtype=np.float64).reshape(-1, 3)[:3]
    scene = {"type": "scene", "integrator": {"type": "path", "max_depth": 1},
             "sensor": mitsuba_sensor(K, R, t, width, height, spp)}
    for i, p in enumerate(points):
        colour = [0.0, 0.0, 0.0]
        colour[i] = 1.0
        scene[f"marker{i}"] = {"type": "sphere", "center": p.tolist(), "radius": 0.01,
                               "emitter": {"type": "area", "radiance": {"type": "rgb", "value": colour}}}
    img = np.array(mi.render(mi.load_dict(scene)), dtype=np.float64)
    rows, cols = np.mgrid[0:height, 0:width]
    expected = project(K, R, t, points)
    errors = []
    for i, (u, v) in enumerate(expected):
        w = img[..., i]
        if w.sum() <= 0:
            raise AssertionError(f"camera check: marker {i} at {points[i].tolist()} (OpenCV u={u:.2f}, v={v:.2f}) "
                                 "is not visible in the Mitsuba render")
        errors.append(((w * cols).sum() / w.sum() - u, (w * rows).sum() / w.sum() - v))
    errors = np.array(errors)
    if np.abs(errors).max() > CAMERA_TOLERANCE_PX:
        raise AssertionError(f"camera check: Mitsuba and OpenCV disagree by {errors.tolist()} px "
                             f"(tolerance {CAMERA_TOLERANCE_PX})")
    return errors


# -- geometry -----------------------------------------------------------------------------------------
def axis_angle_quat(axis, degrees):
    """Unit quaternion (x, y, z, w) of a rotation by `degrees` about `axis`."""
    a = np.asarray(axis, dtype=np.float64)
    a = a / np.linalg.norm(a)
    h = math.radians(degrees) / 2
    return np.concatenate([a * math.sin(h), [math.cos(h)]])


def quat_matrix(q):
    """Rotation matrix of a unit quaternion (x, y, z, w)."""
    from tigradsim.physics.rigid import quat_to_matrix_np
    return quat_to_matrix_np(np.asarray(q, dtype=np.float64))


def write_box_obj(path, size):
    """A box centred at the origin as an exporter writes it: 24 vertices (4 per face, corners NOT
    shared, so each face keeps its own normal), 6 outward quads with `vn` normals, metres."""
    h = 0.5 * np.asarray(size, dtype=np.float64)
    faces = []                 # (normal, 4 corners counter-clockwise seen from outside)
    for axis in range(3):
        e = np.eye(3)
        u, v = e[(axis + 1) % 3], e[(axis + 2) % 3]          # u x v = +e_axis
        for sign in (1.0, -1.0):
            a, b = (u, v) if sign > 0 else (v, u)          # a x b = sign e_axis: outward
            corners = [sign * e[axis] * h + (i * a + j * b) * h for i, j in ((-1, -1), (1, -1), (1, 1), (-1, 1))]
            faces.append((sign * e[axis], corners))
    with open(path, "w") as fh:
        fh.write(f"# box {size[0]:g} x {size[1]:g} x {size[2]:g} m, centred at its centre of mass; "
                 "written by benchmarks/make_footage.py\no box\n")
        for _, corners in faces:
            for c in corners:
                fh.write("v %.9g %.9g %.9g\n" % tuple(c))
        for n, _ in faces:
            fh.write("vn %g %g %g\n" % tuple(n))
        for k in range(6):
            fh.write("f " + " ".join(f"{4 * k + j + 1}//{k + 1}" for j in range(4)) + "\n")


def write_tetgen(stem, vertices, tets):
    """TetGen `stem.node` / `stem.ele` (1-based, as TetGen writes them), metres."""
    with open(stem + ".node", "w") as fh:
        fh.write(f"{len(vertices)} 3 0 0\n")
        for i, p in enumerate(vertices):
            fh.write("%d %.17g %.17g %.17g\n" % (i + 1, *p))
    with open(stem + ".ele", "w") as fh:
        fh.write(f"{len(tets)} 4 0\n")
        for i, t in enumerate(tets):
            fh.write("%d %d %d %d %d\n" % (i + 1, *(np.asarray(t) + 1)))


# -- simulation (tigradsim, f64, dt 1/7680) -----------------------------------------------------------
def frame_count(spec):
    return int(round(spec["duration"] * FPS))


def initial_rotation(spec):
    if spec.get("rotation") is not None:
        return np.asarray(spec["rotation"], dtype=np.float64)
    return axis_angle_quat(spec["tilt"]["axis"], spec["tilt"]["degrees"])


def simulate_rigid(spec):
    """Simulate a rigid box; returns (vertices (T, 8, 3), faces (12, 3), positions (T, 3), quats (T, 4), state0)."""
    import tigradsim as tgs
    from tigradsim import meshes
    from tigradsim.physics.rigid import BodyRecorder, RigidSurface
    frames = frame_count(spec)
    c = spec["contact"]
    position = list(spec["position"])
    if position[1] is None:   # resting: the centre at its static sink, m g / (4 ke) per corner
        position[1] = spec["size"][1] / 2 - spec["mass"] * -GRAVITY[1] / (4 * c["ke"])
    rotation = initial_rotation(spec)
    vertices, faces = meshes.box_surface(spec["size"])
    b = tgs.SceneBuilder(gravity=GRAVITY)
    b.add_ground(**c)
    body = b.add_rigid_body(vertices, faces, mass=spec["mass"], position=position, rotation=rotation,
                            velocity=spec["velocity"], angular_velocity=spec["angular_velocity"], **c)
    for f in spec["forces"]:
        tgs.add_body_force(b, body, force=f["force"], point=f["point"], start=f["start"], end=f["end"])
    model = b.finalize(requires_grad=False)
    sim = tgs.Simulator(model, dt=SIM_DT, steps=STEPS_PER_FRAME * (frames - 1), checkpoint_every=1024)
    surface = RigidSurface(sim, every=STEPS_PER_FRAME)
    poses = BodyRecorder(sim, every=STEPS_PER_FRAME)
    sim.run()
    pos, rot = poses.numpy()
    state0 = dict(position=np.asarray(position, dtype=np.float64), rotation=rotation)
    return surface.numpy(), surface.faces, pos[:, 0], rot[:, 0], state0


def soft_rest_mesh(spec):
    """The cube's rest mesh, centred at the origin: (vertices (V, 3), tets (T, 4)) from tet_box."""
    from tigradsim import meshes
    n, s = spec["cells"], spec["size"]
    return meshes.tet_box(n, n, n, size=(s, s, s), origin=(-s / 2,) * 3, tets_per_cell=spec["tets_per_cell"])


def simulate_soft(spec):
    """Simulate the neo-Hookean cube; returns (vertices (T, V, 3), surface faces (F, 3), centroids (T, 3))."""
    import tigradsim as tgs
    from tigradsim.io.meshes import boundary_faces
    frames = frame_count(spec)
    rest, tets = soft_rest_mesh(spec)
    R = quat_matrix(initial_rotation(spec))
    x0 = rest @ R.T + np.asarray(spec["position"])
    v0 = np.asarray(spec["velocity"]) + np.cross(np.asarray(spec["angular_velocity"], dtype=np.float64), x0 - spec["position"])
    b = tgs.SceneBuilder(gravity=GRAVITY)
    b.add_ground(**spec["ground"])
    b.add_soft_mesh((x0, tets), material="neo_hookean", params=dict(spec["material"]), density=spec["density"],
                    damping=spec["damping"], velocity=v0, radius=spec["particle_radius"])
    model = b.finalize(requires_grad=False)
    sim = tgs.Simulator(model, dt=SIM_DT, steps=STEPS_PER_FRAME * (frames - 1), checkpoint_every=1024)
    rec = tgs.ParticleRecorder(sim, every=STEPS_PER_FRAME)
    sim.run()
    x = rec.numpy()
    mass = model.get("particle_mass").astype(np.float64)
    centroids = (x * mass[None, :, None]).sum(1) / mass.sum()
    return x, boundary_faces(tets).astype(np.int32), centroids


# -- rendering (Mitsuba scalar_rgb) --------------------------------------------------------------------
def write_floor_texture(path, px=128, seed=7):
    """A 2 x 2 checker tile (warm light grey / blue grey) with smooth low-contrast noise, sRGB PNG (px x px)."""
    rng = np.random.default_rng(seed)
    i, j = np.mgrid[0:px, 0:px]
    checker = ((i // (px // 2) + j // (px // 2)) % 2).astype(np.float64)
    light, dark = np.array([0.78, 0.74, 0.66]), np.array([0.42, 0.46, 0.52])
    img = light * (1 - checker[..., None]) + dark * checker[..., None]
    # periodic smooth noise (a few low Fourier modes) so the tile repeats without seams
    noise = np.zeros((px, px))
    for _ in range(12):
        kx, ky = rng.integers(1, 6, size=2)
        noise += np.cos(2 * np.pi * (kx * i + ky * j) / px + rng.uniform(0, 2 * np.pi)) / (kx + ky)
    img = img * (1.0 + 0.12 * noise[..., None] / np.abs(noise).max())
    Image.fromarray(np.round(np.clip(img, 0, 1) * 255).astype(np.uint8)).save(path, optimize=True)


def _mesh(name, vertices, faces, bsdf=None, emitter=None):
    """A Mitsuba triangle mesh (flat shading: face normals) from numpy arrays."""
    import mitsuba as mi
    props = mi.Properties()
    props["face_normals"] = True
    if bsdf is not None:
        props["bsdf"] = mi.load_dict(bsdf)
    if emitter is not None:
        props["emitter"] = mi.load_dict(emitter)
    mesh = mi.Mesh(name, len(vertices), len(faces), has_vertex_normals=False, has_vertex_texcoords=False, props=props)
    params = mi.traverse(mesh)
    params["vertex_positions"] = type(params["vertex_positions"])(np.asarray(vertices, dtype=np.float32).ravel())
    params["faces"] = type(params["faces"])(np.asarray(faces, dtype=np.uint32).ravel())
    params.update()
    return mesh


def rgb_scene(K, R, t, vertices, faces, colour, floor_png, spp, seed):
    import mitsuba as mi
    c, s = LIGHT["center"], LIGHT["size"] / 2
    return {
        "type": "scene",
        "integrator": {"type": "path", "max_depth": 4},
        "sensor": mitsuba_sensor(K, R, t, WIDTH, HEIGHT, spp, seed),
        "sky": {"type": "constant", "radiance": {"type": "rgb", "value": [SKY] * 3}},
        # the unit rectangle lies in z = 0 with normal +z: rotated -90 degrees about x it is the plane
        # y = 0 with normal +y; uv repeats the texture tile every FLOOR_TILE metres
        "floor": {"type": "rectangle",
                  "to_world": mi.ScalarTransform4f().rotate([1, 0, 0], -90).scale([FLOOR_HALF, FLOOR_HALF, 1]),
                  "bsdf": {"type": "diffuse", "reflectance": {
                      "type": "bitmap", "filename": floor_png, "wrap_mode": "repeat", "raw": False,
                      "to_uv": mi.ScalarTransform4f().scale([2 * FLOOR_HALF / FLOOR_TILE] * 2 + [1])}}},
        # +90 degrees about x: normal -y, the light faces down (rectangle emitters are one-sided)
        "light": {"type": "rectangle",
                  "to_world": mi.ScalarTransform4f().translate(list(c)).rotate([1, 0, 0], 90).scale([s, s, 1]),
                  "emitter": {"type": "area", "radiance": {"type": "rgb", "value": [LIGHT["radiance"]] * 3}}},
        "object": _mesh("object", vertices, faces, bsdf={"type": "diffuse", "reflectance": {"type": "rgb", "value": list(colour)}}),
    }


def mask_scene(K, R, t, vertices, faces, spp, seed):
    # the object alone, a constant emitter (radiance 1) that reflects nothing, seen directly (max_depth 1):
    # a pixel's value is the fraction of its area the object covers (box filter)
    return {"type": "scene", "integrator": {"type": "path", "max_depth": 1},
            "sensor": mitsuba_sensor(K, R, t, WIDTH, HEIGHT, spp, seed),
            "object": _mesh("object", vertices, faces, bsdf={"type": "diffuse", "reflectance": {"type": "rgb", "value": [0, 0, 0]}},
                            emitter={"type": "area", "radiance": {"type": "rgb", "value": [1.0, 1.0, 1.0]}})}


def linear_to_srgb8(img):
    """Linear RGB (float) -> 8-bit sRGB (the IEC 61966-2-1 curve), clipped."""
    x = np.clip(np.asarray(img, dtype=np.float64), 0.0, 1.0)
    s = np.where(x <= 0.0031308, 12.92 * x, 1.055 * np.power(x, 1 / 2.4) - 0.055)
    return np.round(s * 255).astype(np.uint8)


def render_clip(name, spec, out, spp, mask_spp, engine="tigradsim"):
    """Simulate (tigradsim, or another engine: benchmarks/engine_sims.py), render and write one clip
    to out/NAME (tigradsim) or out/ENGINE_NAME; returns a summary dict."""
    import mitsuba as mi
    folder = os.path.join(out, name if engine == "tigradsim" else f"{engine}_{name}")
    os.makedirs(folder, exist_ok=True)
    for old in glob.glob(os.path.join(folder, "*.png")):
        os.remove(old)
    t0 = time.time()
    frames = frame_count(spec)
    engine_info = None
    if engine != "tigradsim":
        import engine_sims
        if spec["kind"] == "rigid":
            verts, faces, positions, quats, state0, engine_info = engine_sims.simulate(engine, spec, frames,
                                                                                    initial_rotation(spec))
        elif engine in engine_sims.ENGINE_SOFT_CLIPS:
            verts, faces, centroids, rest, tets, masses, engine_info = engine_sims.simulate_soft(
                engine, spec, frames, initial_rotation(spec))
        else:
            raise SystemExit(f"--engine {engine}: only the rigid clips (box_push, box_drop), not {name!r}")
    elif spec["kind"] == "rigid":
        verts, faces, positions, quats, state0 = simulate_rigid(spec)
    else:
        verts, faces, centroids = simulate_soft(spec)
    sim_seconds = time.time() - t0
    print(f"[{name}] simulated {spec['duration']} s by {engine} in {sim_seconds:.1f} s", flush=True)
    K, R, t = opencv_camera(**spec["camera"])
    # camera check: markers at the object's first and middle positions and at a floor point
    first = verts[0].mean(0)
    markers = [first, verts[frames // 2].mean(0), np.array([first[0] + 0.3, 0.0, first[2] - 0.2])]
    cam_err = check_camera(K, R, t, markers)
    print(f"[{name}] camera check: Mitsuba vs OpenCV {np.abs(cam_err).max():.3f} px (max |du|, |dv|)", flush=True)
    floor_png = os.path.join(folder, "floor.png")
    write_floor_texture(floor_png)
    t1 = time.time()
    coverage = []
    for k in range(frames):
        img = mi.render(mi.load_dict(rgb_scene(K, R, t, verts[k], faces, spec["colour"], floor_png, spp, seed=k)))
        Image.fromarray(linear_to_srgb8(np.array(img))).save(os.path.join(folder, f"rgb_{k:04d}.png"), optimize=True)
        m = np.array(mi.render(mi.load_dict(mask_scene(K, R, t, verts[k], faces, mask_spp, seed=k))))[..., 0]
        coverage.append(float(np.clip(m, 0, 1).mean()))
        Image.fromarray(np.round(np.clip(m, 0, 1) * 255).astype(np.uint8), mode="L").save(
            os.path.join(folder, f"mask_{k:04d}.png"), optimize=True)
        if k % 10 == 0 or k == frames - 1:
            print(f"[{name}] frame {k + 1}/{frames} ({time.time() - t1:.1f} s)", flush=True)
    render_seconds = time.time() - t1
    truth = {
        "clip": name,
        "fps": FPS, "start_time": 0.0, "frame_count": frames,
        "frame_times": "start_time + k / fps, k = 0 .. frame_count - 1 (simulation time 0 = the initial state below)",
        "image_size": {"width": WIDTH, "height": HEIGHT},
        "files": {"rgb": "rgb_%04d.png", "mask": "mask_%04d.png", "floor_texture": "floor.png"},
        "camera": {"model": "opencv_pinhole", "K": K.tolist(), "R": R.tolist(), "t": t.tolist(),
                   "convention": "x_cam = R x_world + t; u = fx X/Z + cx, v = fy Y/Z + cy; camera x right, "
                                 "y down, z forward; pixel centres at integer (u, v), (0, 0) the top-left pixel",
                   "distortion": None},
        "world": {"up": [0.0, 1.0, 0.0], "up_axis": "+y", "gravity": list(GRAVITY), "ground": "plane y = 0",
                  "units": "m, kg, s, N"},
        "simulation": {"simulator": "tigradsim", "dt": SIM_DT, "steps_per_frame": STEPS_PER_FRAME,
                       "precision": "f64", "integrator": "semi-implicit Euler",
                       **_provenance()},
        "render": {"renderer": f"Mitsuba {mi.__version__}", "variant": MITSUBA_VARIANT,
                   "integrator": "path, max_depth 4", "spp": spp, "mask_spp": mask_spp, "sampler": "stratified",
                   "pixel_filter": "box", "encoding": "8-bit sRGB PNG (rgb), 8-bit linear coverage PNG (mask)",
                   "light": {"rectangle_center": list(LIGHT["center"]), "rectangle_size": LIGHT["size"],
                             "radiance": LIGHT["radiance"], "facing": "-y", "sky_radiance": SKY},
                   "floor": {"texture": "floor.png", "tile_size_m": FLOOR_TILE,
                             "extent": [[-FLOOR_HALF, FLOOR_HALF], [-FLOOR_HALF, FLOOR_HALF]]},
                   "object_colour_linear_rgb": list(spec["colour"]), "shading": "flat (face normals), diffuse"},
        "camera_check": {"points": [list(map(float, p)) for p in markers], "error_px": cam_err.tolist(),
                         "tolerance_px": CAMERA_TOLERANCE_PX},
        "noise": {"sigma": NOISE_SIGMA, "seed": NOISE_SEED,
                  "rule": "benchmarks.make_footage.noisy_copy: numpy.random.default_rng(seed).normal(0, sigma, "
                          "(frames, H, W, 3)) added to rgb / 255, clipped to [0, 1], round(255 x)"},
        "mask_coverage_mean": coverage,
    }
    if spec["kind"] == "rigid":
        truth.update(_rigid_truth(spec, folder, state0, positions, quats))
        if engine_info is not None:
            _engine_truth(truth, spec, engine_info)
    elif engine_info is not None:
        truth.update(_engine_soft_truth(spec, folder, centroids, rest, tets, engine_info))
    else:
        truth.update(_soft_truth(spec, folder, centroids))
    with open(os.path.join(folder, "truth.json"), "w") as fh:
        json.dump(truth, fh, indent=1)
    size = sum(os.path.getsize(p) for p in glob.glob(os.path.join(folder, "*")))
    print(f"[{name}] rendered {frames} frames in {render_seconds:.1f} s; folder {size / 1e6:.2f} MB", flush=True)
    return {"frames": frames, "sim_seconds": round(sim_seconds, 1), "render_seconds": round(render_seconds, 1),
            "bytes": size, "camera_error_px": float(np.abs(cam_err).max())}


def _rigid_truth(spec, folder, state0, positions, quats):
    write_box_obj(os.path.join(folder, "box.obj"), spec["size"])
    c, m = spec["contact"], spec["mass"]
    truth = {"mass": m, **c}
    return {
        "object": {"type": "rigid", "mesh": "box.obj", "size": list(spec["size"]),
                   "mesh_frame": "origin at the centre of mass, axes the body axes (24 unshared corner vertices, "
                                 "6 quads, as an exporter writes them)",
                   "initial_pose": {"position": state0["position"].tolist(),
                                    "quaternion_xyzw": state0["rotation"].tolist()},
                   "initial_velocity": {"linear": list(spec["velocity"]), "angular": list(spec["angular_velocity"]),
                                        "angular_frame": "world"},
                   "colour_linear_rgb": list(spec["colour"])},
        "forces": [{"force": list(f["force"]), "force_frame": "world", "point": list(f["point"]),
                    "point_frame": "object mesh coordinates (moves with the body)", "start": f["start"],
                    "end": f["end"],
                    "window_rule": "step k (time k dt) is loaded when (k + 1/2) dt lies in [start, end)"}
                   for f in spec["forces"]],
        "contact": {"law": "tigradsim.physics.contact.ground_contact_force: penalty, damping capped by the elastic force, "
                           "friction min(kf, mu fn / |v_t|) v_t",
                    "points": "the 8 box corners (welded mesh vertices), contact radius 0",
                    "per": "contact point", **c},
        "truth": truth,
        "derived": {"ke/mass": c["ke"] / m, "kd/mass": c["kd"] / m, "kf/mass": c["kf"] / m,
                    "density": m / float(np.prod(spec["size"]))},
        "unknowns": list(spec["unknowns"]),
        "known": {k: v for k, v in truth.items() if k not in spec["unknowns"]},
        "trajectory": {"times": [k / FPS for k in range(len(positions))],
                       "position": np.round(positions, 9).tolist(), "quaternion_xyzw": np.round(quats, 9).tolist(),
                       "note": "centre of mass and orientation at each frame time (the simulation's, dt above)"},
    }


def _engine_truth(truth, spec, info):
    """Replace tigradsim's simulation, contact and truth entries by the other engine's (engine_sims)."""
    truth["simulation"] = {**info["simulation"], "generator": "benchmarks/engine_sims.py"}
    truth["contact"] = {**info["contact"], "points": "the engine's own (see simulation.collision)",
                        "comparable_with_tigradsim": info["comparable"]}
    truth["truth"] = dict(info["truth"])
    m = info["truth"]["mass"]
    truth["derived"] = {"density": m / float(np.prod(spec["size"]))}
    truth["unknowns"] = ["mass", "mu"] if spec["forces"] else ["mass", "mu", "contact (the engine's own law)"]
    truth["known"] = {"contact": "nothing: a fit is given no contact constant and no contact law"}
    truth["trajectory"]["note"] = "centre of mass and orientation at each frame time (the engine's, dt above)"
    if info.get("initial_position_rule"):
        truth["object"]["initial_pose"]["rule"] = info["initial_position_rule"]


def _soft_truth(spec, folder, centroids):
    rest, tets = soft_rest_mesh(spec)
    write_tetgen(os.path.join(folder, "cube"), rest, tets)
    mu, lam = spec["material"]["mu"], spec["material"]["lam"]
    n, s = spec["cells"], spec["size"]
    return {
        "object": {"type": "soft", "mesh": {"node": "cube.node", "ele": "cube.ele",
                                            "generator": f"tigradsim.io.meshes.tet_box({n}, {n}, {n}, size=({s}, {s}, {s}), "
                                                         f"origin=({-s / 2}, {-s / 2}, {-s / 2}), "
                                                         f"tets_per_cell={spec['tets_per_cell']})",
                                            "vertices": int(len(rest)), "tets": int(len(tets)),
                                            "surface": "tigradsim.io.meshes.boundary_faces(tets)"},
                   "mesh_frame": "rest shape centred at the origin",
                   "initial_pose": {"position": list(spec["position"]),
                                    "quaternion_xyzw": initial_rotation(spec).tolist(),
                                    "rule": "x0 = position + R(q) x_rest (the body starts undeformed)"},
                   "initial_velocity": {"linear": list(spec["velocity"]), "angular": list(spec["angular_velocity"]),
                                        "angular_frame": "world", "rule": "v0 = linear + angular x (x0 - position)"},
                   "material": "neo_hookean (stable neo-Hookean, Smith et al. 2018, tigradsim's parametrisation)",
                   "density": spec["density"], "damping": spec["damping"],
                   "masses": "lumped: a quarter of density x volume of each adjacent tet",
                   "particle_radius": spec["particle_radius"], "colour_linear_rgb": list(spec["colour"])},
        "forces": [],
        "contact": {"law": "tigradsim.physics.contact.ground_contact_force per vertex (penalty, damping capped by the "
                           "elastic force)", "points": "every mesh vertex, radius above", "per": "vertex",
                    **spec["ground"]},
        "truth": {"mu": mu, "lam": lam},
        "derived": {"small_strain_lame": {"mu": 0.75 * mu, "lam": lam - 0.625 * mu},
                    "mass": spec["density"] * s ** 3},
        "unknowns": list(spec["unknowns"]),
        "known": {"density": spec["density"], "damping": spec["damping"], **{f"ground_{k}": v for k, v in spec["ground"].items()}},
        "trajectory": {"times": [k / FPS for k in range(len(centroids))], "centroid": np.round(centroids, 9).tolist(),
                       "note": "mass-weighted centroid at each frame time"},
    }


def _engine_soft_truth(spec, folder, centroids, rest, tets, info):
    """truth.json entries of a soft clip another engine simulated (engine_sims.simulate_soft): the
    engine's own mesh (TetGen files), masses, material, damping and ground law.  What a user of the
    clip has ("known": the mesh, the total mass, as weighed) is kept apart from what the fit must not
    read (the material, the damping form and value, the per-node masses' rule: "truth", "object.masses",
    "object.damping")."""
    out = _soft_truth(spec, folder, centroids)
    write_tetgen(os.path.join(folder, "cube"), rest, tets)     # over tigradsim's tet_box: the engine's mesh
    obj = out["object"]
    obj["mesh"].update({"generator": info["simulation"]["builder"], "vertices": int(len(rest)), "tets": int(len(tets))})
    mat, masses = info["material"], info["masses"]
    obj["material"] = mat["law"]
    obj["material_conversion"] = mat["conversion_to_tigradsim"]
    for k in ("density", "damping", "masses", "particle_radius"):
        obj.pop(k, None)
    if masses.get("node_mass") is not None:
        obj["node_mass"] = masses["node_mass"]
    obj["masses"] = masses
    obj["damping"] = {"form": "warp (tigradsim damping_model \"warp\")", "k_damp": mat["k_damp"]}
    obj["particle_radius"] = info["contact"]["particle_radius"]
    out["simulation"] = {**info["simulation"], "generator": "benchmarks/engine_sims.py"}
    out["contact"] = {**info["contact"], "comparable_with_tigradsim": info["comparable"]}
    out["truth"] = dict(info["truth"])
    mu, lam = info["truth"]["mu"], info["truth"]["lam"]
    out["derived"] = {"small_strain_lame": {"mu": 0.75 * mu, "lam": lam - 0.625 * mu},
                      "mass": masses["total_mass"]}
    out["known"] = {"total_mass": masses["total_mass"],
                    "contact": "nothing: a fit is given no contact constant and no contact law",
                    "damping": "nothing: a fit is given no damping value and no damping form"}
    return out


def _provenance():
    """Which tigradsim simulated the clip: its source folder, the git commit of that folder's repository
    (or, when tigradsim was imported from a plain export, the environment variable TIGRADSIM_COMMIT, else
    this script's checkout's HEAD) and whether tigradsim's files differed from that commit (None: unknown)."""
    import tigradsim
    source = os.path.dirname(os.path.abspath(tigradsim.__file__))

    def git(cwd, *args):
        try:
            r = subprocess.run(["git", *args], capture_output=True, text=True, cwd=cwd)
        except OSError:
            return None
        return r.stdout.strip() if r.returncode == 0 else None

    commit = git(source, "rev-parse", "HEAD")
    if commit is not None:
        status = git(source, "status", "--porcelain", "--", ".", "../materials", "../renderers")
        return {"tigradsim_source": source, "tigradsim_commit": commit, "tigradsim_modified": bool(status)}
    if os.environ.get("TIGRADSIM_COMMIT"):
        return {"tigradsim_source": source, "tigradsim_commit": os.environ["TIGRADSIM_COMMIT"],
                "tigradsim_modified": False,
                "note": "tigradsim imported from a clean `git archive` export of this commit (TIGRADSIM_COMMIT)"}
    here = os.path.dirname(os.path.abspath(__file__))
    return {"tigradsim_source": source, "tigradsim_commit": git(here, "rev-parse", "HEAD"),
            "tigradsim_modified": None,
            "note": "tigradsim imported from outside a git checkout; the commit is this script's checkout's HEAD"}


# -- noisy copies (no Mitsuba needed) ---------------------------------------------------------------------
def add_noise(frames, sigma=NOISE_SIGMA, seed=NOISE_SEED):
    """Seeded Gaussian pixel noise on 8-bit frames.

    frames: uint8 array (T, H, W, C).  Returns uint8 of the same shape:
    round(255 clip(frames / 255 + N, 0, 1)), N = default_rng(seed).normal(0, sigma, frames.shape).
    """
    frames = np.asarray(frames)
    if frames.dtype != np.uint8 or frames.ndim != 4:
        raise ValueError(f"frames: expected a uint8 array (T, H, W, C), got dtype {frames.dtype}, shape {frames.shape}")
    if not (np.isfinite(sigma) and sigma >= 0):
        raise ValueError(f"sigma: expected a finite number >= 0 (in [0, 1] intensity units), got {sigma!r}")
    noise = np.random.default_rng(seed).normal(0.0, sigma, size=frames.shape)
    return np.round(np.clip(frames / 255.0 + noise, 0.0, 1.0) * 255.0).astype(np.uint8)


def load_clip(folder, kind="rgb"):
    """Frames of a clip folder as uint8 (T, H, W, 3) for kind "rgb", (T, H, W) for "mask"."""
    if kind not in ("rgb", "mask"):
        raise ValueError(f"kind: expected 'rgb' or 'mask', got {kind!r}")
    paths = sorted(glob.glob(os.path.join(folder, f"{kind}_[0-9][0-9][0-9][0-9].png")))
    if not paths:
        raise FileNotFoundError(f"folder: no {kind}_%04d.png frames in {folder!r}")
    return np.stack([np.asarray(Image.open(p).convert("RGB" if kind == "rgb" else "L")) for p in paths])


def noisy_copy(folder, out=None, sigma=NOISE_SIGMA, seed=NOISE_SEED):
    """The clip's RGB frames with `add_noise` (uint8 (T, H, W, 3)); with `out`, also written there as
    rgb_%04d.png (masks, truth.json and the mesh files are copied unchanged)."""
    noisy = add_noise(load_clip(folder, "rgb"), sigma, seed)
    if out is not None:
        import shutil
        os.makedirs(out, exist_ok=True)
        for k, img in enumerate(noisy):
            Image.fromarray(img).save(os.path.join(out, f"rgb_{k:04d}.png"))
        for p in glob.glob(os.path.join(folder, "*")):
            if not os.path.basename(p).startswith("rgb_"):
                shutil.copy(p, out)
    return noisy


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", default=os.path.join("benchmarks", "footage"), help="folder of the clip folders")
    p.add_argument("--only", choices=sorted(CLIPS), action="append", help="render only this clip (repeatable)")
    p.add_argument("--spp", type=int, default=64, help="samples per pixel of the RGB frames")
    p.add_argument("--mask-spp", type=int, default=64, help="samples per pixel of the masks (8 x 8 strata)")
    p.add_argument("--engine", choices=("tigradsim", "warp", "mujoco", "newton"), default="tigradsim",
                   help="who simulates the motion (warp, mujoco, newton: benchmarks/engine_sims.py, the rigid clips "
                        "and, for warp and newton, soft_drop; clip folders ENGINE_CLIP)")
    args = p.parse_args(argv)
    if args.spp < 1 or args.mask_spp < 1:
        raise SystemExit(f"--spp, --mask-spp: expected integers >= 1, got {args.spp}, {args.mask_spp}")
    try:
        import mitsuba as mi
    except ImportError:
        raise SystemExit("make_footage needs Mitsuba 3: python3 -m pip install -e \".[footage]\" (mitsuba==3.9.1)")
    mi.set_variant(MITSUBA_VARIANT)
    import tigradsim as tgs
    tgs.init(arch="cpu", precision="f64")
    start = time.time()
    summary = {}
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    if args.engine == "tigradsim":
        names = args.only or list(CLIPS)
    else:
        import engine_sims
        names = args.only or [n for n in CLIPS if CLIPS[n]["kind"] == "rigid" or args.engine in engine_sims.ENGINE_SOFT_CLIPS]
    for name in names:
        summary[name] = render_clip(name, CLIPS[name], args.out, args.spp, args.mask_spp, args.engine)
    total = sum(os.path.getsize(p) for p in glob.glob(os.path.join(args.out, "**", "*"), recursive=True)
                if os.path.isfile(p))
    print(json.dumps({"engine": args.engine, "clips": summary, "spp": args.spp, "mask_spp": args.mask_spp, "seconds": round(time.time() - start, 1),
                      "out": args.out, "total_bytes": total, "argv": sys.argv[1:]}))


if __name__ == "__main__":
    main()
