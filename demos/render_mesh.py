"""A shaded, spinning mesh rendered with the differentiable soft rasterizer.

    python demos/render_mesh.py                          # window (if a display exists)
    python demos/render_mesh.py --headless --out out/    # PNG frames + a GIF
    python demos/render_mesh.py --mesh bunny.obj --size 256 --frames 60

The whole turn is rendered into the frames of one image field: the rotated
vertex positions of every frame sit in one (frames, V) field, and frame k
renders slot k (the way a simulation rollout is rendered).
"""
import argparse
import json
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import taichi as ti  # noqa: E402

import tigradsim as tgs  # noqa: E402
from tigradsim.renderers import Camera, SoftRasterizer, icosphere, load_obj  # noqa: E402


def load_mesh(path, subdivisions):
    if path:
        v, f = load_obj(path)
    else:
        v, f = icosphere(subdivisions, 1.0)
        v = v * np.array([1.0, 0.8, 0.9])          # a slightly squashed sphere shows the spin
    v = v - 0.5 * (v.max(0) + v.min(0))
    return v / np.abs(v).max(), f


def turntable(v, frames, tilt=0.35):
    out = np.empty((frames,) + v.shape)
    ct, st = np.cos(tilt), np.sin(tilt)
    tilt_m = np.array([[1, 0, 0], [0, ct, -st], [0, st, ct]])
    for k in range(frames):
        a = 2 * np.pi * k / frames
        rot = np.array([[np.cos(a), 0, np.sin(a)], [0, 1, 0], [-np.sin(a), 0, np.cos(a)]])
        out[k] = v @ (tilt_m @ rot).T
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--headless", action="store_true", help="no window: write PNG frames and a GIF")
    ap.add_argument("--out", default="out/render_mesh", help="output folder (headless)")
    ap.add_argument("--mesh", default=None, help="an OBJ file (default: an icosphere)")
    ap.add_argument("--subdivisions", type=int, default=3)
    ap.add_argument("--size", type=int, default=128)
    ap.add_argument("--frames", type=int, default=36)
    ap.add_argument("--fps", type=float, default=20.0)
    ap.add_argument("--sigma", type=float, default=1e-5)
    ap.add_argument("--gamma", type=float, default=1e-4)
    ap.add_argument("--normals", default="smooth", choices=["flat", "smooth"])
    ap.add_argument("--arch", default="cpu")
    args = ap.parse_args(argv)

    headless = args.headless
    if not headless and not os.environ.get("DISPLAY"):
        print("render_mesh: no display found (DISPLAY is not set); writing files to", args.out, "instead")
        headless = True

    tgs.init(arch=args.arch, precision="f32")
    v, f = load_mesh(args.mesh, args.subdivisions)
    colors = 0.55 + 0.45 * v / np.abs(v).max()
    cam = Camera(eye=(0.0, 0.6, 3.2), target=(0, 0, 0), fov=45, width=args.size, height=args.size)
    ren = SoftRasterizer(cam, f, len(v), frames=args.frames, shading="lambert", sigma=args.sigma,
                         gamma=args.gamma, vertex_colors=colors, background=(0.08, 0.08, 0.1),
                         ambient=(0.25, 0.25, 0.28), lights=[((0.6, 1.0, 0.8), (0.85, 0.8, 0.75))],
                         cull_backfaces=True, normals=args.normals)
    X = ti.Vector.field(3, float, shape=(args.frames, len(v)))
    X.from_numpy(turntable(v, args.frames).astype(np.float32))

    t0 = time.perf_counter()
    for k in range(args.frames):
        ren.render(X, k, k)
    ti.sync()
    seconds = time.perf_counter() - t0
    frames = ren.image.to_numpy()[..., :3]

    if headless:
        from tigradsim import video

        paths = video.save_frames(frames, args.out, prefix="frame")
        gif = video.save_gif(frames, os.path.join(args.out, "spin.gif"), fps=args.fps)
        print(f"wrote {len(paths)} PNG frames and {gif}")
    else:
        gui = ti.GUI("tigradsim: soft rasterizer", res=(args.size, args.size))
        k = 0
        while gui.running:
            gui.set_image(np.ascontiguousarray(frames[k][::-1].swapaxes(0, 1)))   # GUI origin: bottom-left
            gui.show()
            k = (k + 1) % args.frames
    print(json.dumps({"frames": args.frames, "size": args.size, "faces": int(len(f)),
                      "render_seconds": round(seconds, 4), "ms_per_frame": round(1e3 * seconds / args.frames, 3),
                      "out": args.out if headless else None}))


if __name__ == "__main__":
    main()
