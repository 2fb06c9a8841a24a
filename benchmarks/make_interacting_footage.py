"""Footage of INTERACTING scenes whose motion NVIDIA Warp 1.9.1 made (issue 46, item 6): Mitsuba 3 renders as
make_footage.py's (same floor, light, sky, camera convention and check, 128 px, 64 spp, masks), of the Warp
rollouts of benchmarks/interacting_sims.py:

    warp_ramp_boxes  box A slides down a ramp into box B resting at the foot: ramp mu, mass ratio m_B / m_A
    warp_ball_box    a soft neo-Hookean ball thrown onto a box resting on the ground: the ball's mu, lam
    warp_cloth_sphere  a square cloth dropped over a static sphere: its stretch (and bending) stiffness

Each clip folder: rgb_%04d.png, mask_%04d.png (the union of the MOVING objects' coverage: both boxes, or the ball
and the box, or the cloth; the ramp and the sphere are scenery and not in the masks: a mask is the moving objects'
whole silhouette, also where the scenery hides them), floor.png, the objects' files (box_a.obj, box_b.obj;
ball.node / ball.ele, box.obj, ball_vertices.npz), scene.toml (what a user has; written by
benchmarks/interacting_footage.py --write-scenes, not here) and
truth.json (camera, timing, objects, initial state, the engine's law and constants, the truth, the true
trajectories: read by the tests and benchmarks/interacting_footage.py to SCORE, never by a fit).

    python3 benchmarks/make_interacting_footage.py [--only warp_ramp_boxes] [--spp 64] [--out benchmarks/footage]
"""
import argparse
import glob
import json
import os
import sys
import time

import numpy as np
from PIL import Image

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import interacting_sims as sims  # noqa: E402
from make_footage import (FPS, HEIGHT, LIGHT, MITSUBA_VARIANT, SKY, WIDTH, _mesh, check_camera,  # noqa: E402
                          linear_to_srgb8, mitsuba_sensor, opencv_camera, quat_matrix, rgb_scene,
                          write_box_obj, write_floor_texture, write_tetgen)

CAMERAS = {
    "warp_ramp_boxes": dict(eye=(-0.05, 0.62, 1.45), target=(-0.12, 0.1, 0.0), focal=118.0, offset=(1.0, -0.5)),
    "warp_ball_box": dict(eye=(0.1, 0.62, 1.3), target=(0.06, 0.2, 0.0), focal=150.0, offset=(-0.5, 1.0)),
    "warp_cloth_sphere": dict(eye=(0.35, 0.95, 1.75), target=(0.04, 0.22, 0.0), focal=140.0, offset=(0.5, -1.0)),
}
COLOURS = {"box_a": (0.75, 0.18, 0.08), "box_b": (0.15, 0.35, 0.75), "ball": (0.12, 0.55, 0.15),
           "box": (0.80, 0.45, 0.05), "ramp": (0.55, 0.55, 0.5),
           "cloth": (0.10, 0.30, 0.70), "sphere": (0.60, 0.50, 0.35)}
TWO_SIDED = {"warp_cloth_sphere"}          # clips whose moving object is a sheet: seen from both sides
RAMP_SLAB = dict(length=1.1, width=0.7, thickness=0.04)     # [m] the ramp as drawn: a slab under its plane


def box_mesh(size):
    from tigradsim.io.meshes import box_surface
    v, f = box_surface(size)
    return np.asarray(v, dtype=np.float64), np.asarray(f, dtype=np.int32)


def posed(local, position, quat):
    return position + local @ quat_matrix(quat).T


def ramp_slab(deg):
    """(vertices, faces) of the drawn ramp: a slab whose top face is the ramp plane, from the foot up."""
    rot, normal, down = sims.ramp_frame(deg)
    v, f = box_mesh((RAMP_SLAB["length"], RAMP_SLAB["thickness"], RAMP_SLAB["width"]))
    centre = -down * RAMP_SLAB["length"] / 2 - normal * RAMP_SLAB["thickness"] / 2
    return posed(v, centre, rot), f


def ramp_clip(folder):
    spec = sims.RAMP
    r = sims.simulate_ramp_boxes(spec)
    va, fa = box_mesh(spec["size_a"])
    vb, fb = box_mesh(spec["size_b"])
    T = len(r["positions"])
    moving = [[(posed(va, r["positions"][k, 0], r["quats"][k, 0]), fa, COLOURS["box_a"]),
               (posed(vb, r["positions"][k, 1], r["quats"][k, 1]), fb, COLOURS["box_b"])] for k in range(T)]
    static = [(*ramp_slab(spec["ramp_deg"]), COLOURS["ramp"])]
    write_box_obj(os.path.join(folder, "box_a.obj"), spec["size_a"])
    write_box_obj(os.path.join(folder, "box_b.obj"), spec["size_b"])
    rot, normal, down = sims.ramp_frame(spec["ramp_deg"])
    s0 = r["state0"]
    objects = {
        "box_a": {"type": "rigid", "mesh": "box_a.obj", "size": list(spec["size_a"]),
                  "initial_pose": {"position": s0["positions"][0].tolist(), "quaternion_xyzw": s0["quats"][0].tolist()},
                  "initial_velocity": {"linear": s0["velocities"][0].tolist(), "angular": [0.0, 0.0, 0.0]},
                  "colour_linear_rgb": list(COLOURS["box_a"])},
        "box_b": {"type": "rigid", "mesh": "box_b.obj", "size": list(spec["size_b"]),
                  "initial_pose": {"position": s0["positions"][1].tolist(), "quaternion_xyzw": s0["quats"][1].tolist(),
                                   "rule": "resting on the ground at its static sink m g / (4 ke)"},
                  "initial_velocity": {"linear": [0.0, 0.0, 0.0], "angular": [0.0, 0.0, 0.0]},
                  "colour_linear_rgb": list(COLOURS["box_b"])}}
    extra = {
        "colliders": {"ramp": {"kind": "plane", "point": [0.0, 0.0, 0.0], "normal": normal.tolist(),
                               "angle_deg": spec["ramp_deg"], "rises_towards": "-x", "foot": "the line x = 0, y = 0",
                               "drawn_as": {"slab": RAMP_SLAB, "note": "a slab under the plane from the foot up"}}},
        "objects": objects,
        "unknowns": ["ramp.mu", "mass ratio m_B / m_A", "every contact constant (the engine's own law)"],
        "known": {"geometry": "boxes' sizes, the ramp plane, the ground", "initial_state": "poses and velocities"},
        "trajectory": {"times": [k / FPS for k in range(T)],
                       "position": np.round(r["positions"], 9).tolist(),
                       "quaternion_xyzw": np.round(r["quats"], 9).tolist(),
                       "objects": ["box_a", "box_b"],
                       "note": "centre of mass and orientation of each box at each frame time (Warp's)"},
    }
    return moving, static, r["info"], extra, r["positions"][:, 0]


def ball_clip(folder):
    spec = sims.BALL
    r = sims.simulate_ball_box(spec)
    from tigradsim.io.meshes import boundary_faces
    faces_ball = np.asarray(boundary_faces(r["tets"]), dtype=np.int32)
    vb, fb = box_mesh(spec["box_size"])
    T = len(r["particles"])
    moving = [[(r["particles"][k], faces_ball, COLOURS["ball"]),
               (posed(vb, r["box_positions"][k], r["box_quats"][k]), fb, COLOURS["box"])] for k in range(T)]
    write_tetgen(os.path.join(folder, "ball"), r["rest"], r["tets"])
    write_box_obj(os.path.join(folder, "box.obj"), spec["box_size"])
    s0 = r["state0"]
    m = r["masses"]
    centroids = (r["particles"] * m[None, :, None]).sum(1) / m.sum()
    objects = {
        "ball": {"type": "soft", "mesh": {"node": "ball.node", "ele": "ball.ele",
                                          "generator": f"tigradsim.io.meshes.tet_ball({spec['radius']}, "
                                                       f"{spec['resolution']})",
                                          "vertices": int(len(r["rest"])), "tets": int(len(r["tets"]))},
                 "mesh_frame": "rest shape centred at the origin",
                 "initial_pose": {"position": list(spec["position"]), "quaternion_xyzw": [0.0, 0.0, 0.0, 1.0],
                                  "rule": "x0 = position + x_rest (undeformed)"},
                 "initial_velocity": {"linear": list(spec["velocity"]), "angular": [0.0, 0.0, 0.0]},
                 "density": spec["density"], "mass": float(m.sum()),
                 "masses": "lumped: a quarter of density x volume of each adjacent tet",
                 "material": "Warp's stable neo-Hookean (k_mu, k_lambda, k_damp) = tigradsim neo_hookean, "
                             "damping_model \"warp\"",
                 "colour_linear_rgb": list(COLOURS["ball"])},
        "box": {"type": "rigid", "mesh": "box.obj", "size": list(spec["box_size"]), "mass": spec["box_mass"],
                "initial_pose": {"position": s0["box_position"].tolist(), "quaternion_xyzw": [0.0, 0.0, 0.0, 1.0],
                                 "rule": "resting on the ground at its static sink m g / (4 ke)"},
                "initial_velocity": {"linear": [0.0, 0.0, 0.0], "angular": [0.0, 0.0, 0.0]},
                "colour_linear_rgb": list(COLOURS["box"])}}
    extra = {
        "objects": objects,
        "unknowns": ["ball.mu", "ball.lam", "ball.damping", "every contact constant (the engine's own law)"],
        "known": {"ball": "its mesh, density (weighed: mass / volume)", "box": "its size and mass (weighed)",
                  "initial_state": "poses and velocities"},
        "trajectory": {"times": [k / FPS for k in range(T)], "ball_centroid": np.round(centroids, 9).tolist(),
                       "box_position": np.round(r["box_positions"], 9).tolist(),
                       "box_quaternion_xyzw": np.round(r["box_quats"], 9).tolist(),
                       "ball_vertices_npz": None,
                       "note": "the ball's mass-weighted centroid, the box's centre and orientation (Warp's)"},
    }
    np.savez_compressed(os.path.join(folder, "ball_vertices.npz"), x=r["particles"].astype(np.float32))
    extra["trajectory"]["ball_vertices_npz"] = "ball_vertices.npz: x (T, V, 3) float32, every vertex at each frame"
    return moving, [], r["info"], extra, centroids


def facing(vertices, faces, eye):
    """`faces` (F, 3) with each triangle's winding reversed where its normal points away from `eye` (3,)."""
    x = vertices[faces]
    n = np.cross(x[:, 1] - x[:, 0], x[:, 2] - x[:, 0])
    away = np.einsum("ij,ij->i", n, eye - x.mean(axis=1)) < 0
    out = faces.copy()
    out[away] = faces[away][:, ::-1]
    return out


def write_cloth_obj(path, vertices, triangles):
    """The cloth's rest mesh as an OBJ (metres, 1-based faces, Warp's vertex order and triangles)."""
    with open(path, "w") as fh:
        fh.write("# warp_cloth_sphere: the cloth's rest mesh (flat), Warp add_cloth_grid's vertices and triangles\n")
        for p in vertices:
            fh.write("v %.9g %.9g %.9g\n" % tuple(p))
        for t in triangles:
            fh.write("f %d %d %d\n" % tuple(np.asarray(t) + 1))


def cloth_clip(folder):
    spec = sims.CLOTH
    r = sims.simulate_cloth_sphere(spec)
    from tigradsim.io.meshes import icosphere
    radius = spec["sphere_radius"]
    vs, fs = icosphere(3, radius=radius, center=(0.0, radius, 0.0))
    tris = r["triangles"].astype(np.int32)
    T = len(r["particles"])
    moving = [[(r["particles"][k], tris, COLOURS["cloth"])] for k in range(T)]
    static = [(np.asarray(vs, dtype=np.float64), np.asarray(fs, dtype=np.int32), COLOURS["sphere"])]
    rest = r["rest"]
    write_cloth_obj(os.path.join(folder, "cloth.obj"), rest, r["triangles"])
    centre = rest.mean(axis=0)
    m = r["masses"]
    centroids = (r["particles"] * m[None, :, None]).sum(1) / m.sum()
    objects = {
        "cloth": {"type": "cloth", "mesh": "cloth.obj", "mesh_frame": "world: the rest mesh IS the initial pose",
                  "vertices": int(len(rest)), "triangles": int(len(tris)), "rest_centre": centre.tolist(),
                  "initial_pose": {"position": [0.0, 0.0, 0.0], "quaternion_xyzw": [0.0, 0.0, 0.0, 1.0],
                                   "rule": "x0 = the OBJ's vertices (flat, at rest)"},
                  "initial_velocity": {"linear": [0.0, 0.0, 0.0], "angular": [0.0, 0.0, 0.0]},
                  "mass": spec["mass"], "masses": "a uniform sheet's lumped masses (a third of density x area of "
                                                  "each adjacent triangle)",
                  "contact_radius": spec["particle_radius"],
                  "material": "Warp's triangle membrane (tri_ke, tri_ka, tri_kd) and dihedral bending (edge_ke); "
                              "conversion in interacting_sims.py",
                  "material_conversion": sims.cloth_conversion(spec),
                  "colour_linear_rgb": list(COLOURS["cloth"])}}
    extra = {
        "colliders": {"sphere": {"kind": "sphere", "position": [0.0, radius, 0.0], "radius": radius,
                                 "drawn_as": "an icosphere (level 3) of the same radius, scenery (not in the masks)"}},
        "objects": objects,
        "unknowns": ["cloth.mu", "cloth.lam", "cloth.bending", "cloth.damping",
                     "every contact constant (the engine's own law)"],
        "known": {"cloth": "its rest mesh (flat, the initial pose), total mass (weighed), contact radius (half its "
                           "thickness)", "sphere": "its centre and radius", "initial_state": "at rest"},
        "trajectory": {"times": [k / FPS for k in range(T)], "cloth_centroid": np.round(centroids, 9).tolist(),
                       "cloth_vertices_npz": "cloth_vertices.npz: x (T, V, 3) float32, every vertex at each frame",
                       "note": "the cloth's mass-weighted centroid (Warp's)"},
    }
    np.savez_compressed(os.path.join(folder, "cloth_vertices.npz"), x=r["particles"].astype(np.float32))
    return moving, static, r["info"], extra, centroids


CLIPS = {"warp_ramp_boxes": ramp_clip, "warp_ball_box": ball_clip, "warp_cloth_sphere": cloth_clip}


def render(name, out, spp, mask_spp):
    import mitsuba as mi
    folder = os.path.join(out, name)
    os.makedirs(folder, exist_ok=True)
    for old in glob.glob(os.path.join(folder, "*.png")):
        os.remove(old)
    t0 = time.time()
    moving, static, info, extra, track = CLIPS[name](folder)
    sim_seconds = time.time() - t0
    K, R, t = opencv_camera(**CAMERAS[name])
    T = len(moving)
    markers = [track[0], track[T // 2], np.array([track[0][0] + 0.3, 0.0, track[0][2] - 0.2])]
    cam_err = check_camera(K, R, t, markers)
    floor_png = os.path.join(folder, "floor.png")
    write_floor_texture(floor_png)
    t1 = time.time()
    coverage = []
    for k in range(T):
        (v0, f0, c0), rest = moving[k][0], moving[k][1:]
        scene = rgb_scene(K, R, t, v0, f0, c0, floor_png, spp, seed=k)
        if name in TWO_SIDED:                   # a sheet: diffuse on both faces
            scene["object"] = _mesh("object", v0, f0, bsdf={"type": "twosided", "bsdf": {
                "type": "diffuse", "reflectance": {"type": "rgb", "value": list(c0)}}})
        for j, (v, f, c) in enumerate(rest + static):
            scene[f"object{j + 1}"] = _mesh(f"object{j + 1}", v, f, bsdf={"type": "diffuse", "reflectance":
                                                                           {"type": "rgb", "value": list(c)}})
        img = mi.render(mi.load_dict(scene))
        Image.fromarray(linear_to_srgb8(np.array(img))).save(os.path.join(folder, f"rgb_{k:04d}.png"), optimize=True)
        mask = {"type": "scene", "integrator": {"type": "path", "max_depth": 1},
                "sensor": mitsuba_sensor(K, R, t, WIDTH, HEIGHT, mask_spp, k)}
        for j, (v, f, _) in enumerate(moving[k]):
            if name in TWO_SIDED:           # area emitters emit from the front face only: a sheet's triangles
                f = facing(v, f, -R.T @ t)  # are each wound to face the camera
            mask[f"object{j}"] = _mesh(f"object{j}", v, f, bsdf={"type": "diffuse", "reflectance":
                                                                 {"type": "rgb", "value": [0, 0, 0]}},
                                       emitter={"type": "area", "radiance": {"type": "rgb", "value": [1.0] * 3}})
        m = np.array(mi.render(mi.load_dict(mask)))[..., 0]
        coverage.append(float(np.clip(m, 0, 1).mean()))
        Image.fromarray(np.round(np.clip(m, 0, 1) * 255).astype(np.uint8), mode="L").save(
            os.path.join(folder, f"mask_{k:04d}.png"), optimize=True)
        if k % 10 == 0:
            print(f"[{name}] frame {k + 1}/{T} ({time.time() - t1:.1f} s)", flush=True)
    render_seconds = time.time() - t1
    truth = {
        "clip": name, "fps": FPS, "start_time": 0.0, "frame_count": T,
        "frame_times": "start_time + k / fps (simulation time 0 = the initial state)",
        "image_size": {"width": WIDTH, "height": HEIGHT},
        "files": {"rgb": "rgb_%04d.png", "mask": "mask_%04d.png (the union of the moving objects)",
                  "floor_texture": "floor.png"},
        "camera": {"model": "opencv_pinhole", "K": K.tolist(), "R": R.tolist(), "t": t.tolist(),
                   "convention": "x_cam = R x_world + t; u = fx X/Z + cx, v = fy Y/Z + cy; pixel centres at integer "
                                 "(u, v)", "distortion": None},
        "world": {"up": [0.0, 1.0, 0.0], "gravity": [0.0, -sims.GRAVITY, 0.0], "ground": "plane y = 0",
                  "units": "m, kg, s, N"},
        "simulation": info["simulation"],
        "contact": {**info["contact"], "comparable_with_tigradsim": info["comparable"]},
        "truth": info["truth"],
        "forces": [],
        "render": {"renderer": f"Mitsuba {mi.__version__}", "variant": MITSUBA_VARIANT, "integrator": "path, max_depth 4",
                   "spp": spp, "mask_spp": mask_spp, "sampler": "stratified", "pixel_filter": "box",
                   "light": {"rectangle_center": list(LIGHT["center"]), "rectangle_size": LIGHT["size"],
                             "radiance": LIGHT["radiance"], "sky_radiance": SKY},
                   "generator": "benchmarks/make_interacting_footage.py"},
        "camera_check": {"points": [list(map(float, p)) for p in markers], "error_px": cam_err.tolist()},
        "mask_coverage_mean": coverage,
        **extra,
    }
    with open(os.path.join(folder, "truth.json"), "w") as fh:
        json.dump(truth, fh, indent=1)
    size = sum(os.path.getsize(p) for p in glob.glob(os.path.join(folder, "*")))
    print(f"[{name}] simulated in {sim_seconds:.1f} s, camera check {np.abs(cam_err).max():.3f} px, rendered {T} "
          f"frames in {render_seconds:.1f} s; folder {size / 1e6:.2f} MB", flush=True)
    return {"frames": T, "sim_seconds": round(sim_seconds, 1), "render_seconds": round(render_seconds, 1),
            "bytes": size, "camera_error_px": float(np.abs(cam_err).max())}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", default=os.path.join(HERE, "footage"))
    p.add_argument("--only", choices=sorted(CLIPS), action="append")
    p.add_argument("--spp", type=int, default=64)
    p.add_argument("--mask-spp", type=int, default=64)
    args = p.parse_args(argv)
    import mitsuba as mi
    mi.set_variant(MITSUBA_VARIANT)
    summary = {n: render(n, args.out, args.spp, args.mask_spp) for n in (args.only or CLIPS)}
    print(json.dumps({"clips": summary, "spp": args.spp, "mask_spp": args.mask_spp}))


if __name__ == "__main__":
    main()
