"""A shaded, spinning mesh rendered with the differentiable soft rasterizer.

    python demos/render_mesh.py                          # window (if a display exists), loops until closed
    python demos/render_mesh.py --no-wait                # plays the turn once and exits
    python demos/render_mesh.py --headless --out out/    # PNG frames + a GIF
    python demos/render_mesh.py --mesh bunny.obj --size 256 --frames 60

The whole turn is rendered into the frames of one image field: the rotated
vertex positions of every frame sit in one (frames, V) field, and frame k
renders slot k (the way a simulation rollout is rendered).  The mesh and the
turn: `tigradsim.scenes.shapes.unit_mesh` and `turntable`.

JSON (printed before the window opens; the last line when no window opens):
frames, size [px], faces, render_seconds, ms_per_frame, out (the folder of the
PNG frames and spin.gif, or null when a window showed them).
"""
import argparse
import json
import os
import time

import numpy as np
import taichi as ti

import tigradsim as tgs
from tigradsim.core.aliases import add_renamed_flag
from tigradsim.io import video
from tigradsim.renderers import Camera, SoftRasterizer
from tigradsim.scenes.shapes import turntable, unit_mesh
from tigradsim.io.viz import add_view_args, has_display, play_video


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mesh", default=None, help="an OBJ file (default: an icosphere)")
    ap.add_argument("--subdivisions", type=int, default=3)
    ap.add_argument("--size", type=int, default=128)
    ap.add_argument("--frames", type=int, default=36)
    ap.add_argument("--fps", type=float, default=20.0, help="frames per second of the GIF and the window")
    ap.add_argument("--edge-softness", type=float, default=1e-5, help="soft-rasterizer edge softness (NDC^2)")
    add_renamed_flag(ap, "--sigma", "--edge-softness", "edge_softness", type=float)
    ap.add_argument("--gamma", type=float, default=1e-4)
    ap.add_argument("--normals", default="smooth", choices=["flat", "smooth"])
    ap.add_argument("--arch", default="cpu")
    add_view_args(ap, out_default="out/render_mesh")
    args = ap.parse_args(argv)
    window = not args.headless and has_display()

    tgs.init(arch=args.arch, precision="f32")
    v, f = unit_mesh(args.mesh, args.subdivisions)
    colors = 0.55 + 0.45 * v / np.abs(v).max()
    cam = Camera(eye=(0.0, 0.6, 3.2), target=(0, 0, 0), fov=45, width=args.size, height=args.size)
    ren = SoftRasterizer(cam, f, len(v), frames=args.frames, shading="lambert", edge_softness=args.edge_softness,
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

    gif = None
    if not window:
        paths = video.save_frames(frames, args.out, prefix="frame")
        gif = video.save_gif(frames, os.path.join(args.out, "spin.gif"), fps=args.fps)
        print(f"wrote {len(paths)} PNG frames and {gif}")
    result = json.dumps({"frames": args.frames, "size": args.size, "faces": int(len(f)),
                         "render_seconds": round(seconds, 4), "ms_per_frame": round(1e3 * seconds / args.frames, 3),
                         "out": None if window else args.out})
    if window:
        print(result, flush=True)       # before the window: it loops until closed (Esc/q), --no-wait plays once
    play_video(frames, "render_mesh", args, saved_at=gif, fps=args.fps)
    if not window:
        print(result)


if __name__ == "__main__":
    main()
