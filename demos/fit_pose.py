"""Recover an object's translation and rotation from one target image by
gradient descent through the soft rasterizer.

    python demos/fit_pose.py                          # window (if a display exists)
    python demos/fit_pose.py --headless --out out/    # PNGs + GIF of the fit

The object (a coloured ellipsoid) is posed by six numbers, a translation and
an axis-angle rotation, in a differentiable Taichi kernel; the rendered image
is compared with the target by pixel MSE (RGB + silhouette), and Adam updates
the pose from the Tape gradient.  The last line printed is a JSON summary.
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
from tigradsim.renderers import Camera, ImageMSE, SoftRasterizer, icosphere  # noqa: E402


def rotation_matrix(r):
    """Axis-angle 3-vector -> 3x3 rotation (numpy, Rodrigues)."""
    r = np.asarray(r, dtype=np.float64)
    th = np.linalg.norm(r)
    if th < 1e-12:
        return np.eye(3)
    k = r / th
    K = np.array([[0, -k[2], k[1]], [k[2], 0, -k[0]], [-k[1], k[0], 0]])
    return np.eye(3) + np.sin(th) * K + (1 - np.cos(th)) * K @ K


def pose_errors(p, q):
    """(translation error, rotation angle error in radians) between two poses."""
    dt = float(np.linalg.norm(p[:3] - q[:3]))
    rel = rotation_matrix(p[3:]) @ rotation_matrix(q[3:]).T
    ang = float(np.arccos(np.clip((np.trace(rel) - 1) / 2, -1.0, 1.0)))
    return dt, ang


@ti.data_oriented
class PosedMesh:
    """World vertices X[0, i] = R(pose[3:6]) rest[i] + pose[0:3], differentiable in `pose`."""

    def __init__(self, rest):
        self.n = len(rest)
        self.rest = ti.Vector.field(3, float, shape=self.n)
        self.rest.from_numpy(rest.astype(tgs.runtime.np_float()))
        self.pose = ti.field(float, shape=6, needs_grad=True)
        self.X = ti.Vector.field(3, float, shape=(1, self.n), needs_grad=True)

    @ti.kernel
    def apply(self):
        for i in range(self.n):
            t = ti.Vector([self.pose[0], self.pose[1], self.pose[2]])
            r = ti.Vector([self.pose[3], self.pose[4], self.pose[5]])
            th = ti.sqrt(r.dot(r) + 1e-12)        # no NaN gradient at r = 0
            k = r / th
            p = self.rest[i]
            # Rodrigues: p cos th + (k x p) sin th + k (k . p)(1 - cos th)
            self.X[0, i] = p * ti.cos(th) + k.cross(p) * ti.sin(th) + k * (k.dot(p) * (1.0 - ti.cos(th))) + t


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--headless", action="store_true", help="no window: write PNGs and a GIF")
    ap.add_argument("--out", default="out/fit_pose", help="output folder (headless)")
    ap.add_argument("--size", type=int, default=64)
    ap.add_argument("--iters", type=int, default=120)
    ap.add_argument("--lr", type=float, default=0.03)
    ap.add_argument("--print-every", type=int, default=10)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--arch", default="cpu")
    args = ap.parse_args(argv)
    headless = args.headless
    if not headless and not os.environ.get("DISPLAY"):
        print("fit_pose: no display found (DISPLAY is not set); writing files to", args.out, "instead")
        headless = True

    tgs.init(arch=args.arch, precision="f32", seed=args.seed)
    v, f = icosphere(2, 1.0)
    rest = v * np.array([0.9, 0.55, 0.4])
    colors = 0.5 + 0.5 * v                       # colour varies with the surface direction
    cam = Camera(eye=(0.0, 0.4, 3.0), target=(0, 0, 0), fov=50, width=args.size, height=args.size)
    ren = SoftRasterizer(cam, f, len(v), shading="lambert", sigma=3e-4, gamma=1e-4, vertex_colors=colors,
                         background=(0.0, 0.0, 0.0), ambient=(0.35, 0.35, 0.35),
                         lights=[((0.4, 1.0, 0.9), (0.65, 0.65, 0.65))], cull_backfaces=True)
    obj = PosedMesh(rest)

    true_pose = np.array([0.1, -0.05, 0.0, 0.2, 0.5, -0.1])
    rng = np.random.default_rng(args.seed)
    init_pose = true_pose + np.concatenate([rng.uniform(-0.25, 0.25, 3), rng.uniform(-0.35, 0.35, 3)])

    def render(pose):
        obj.pose.from_numpy(pose.astype(tgs.runtime.np_float()))
        obj.apply()
        ren.render(obj.X, 0, 0)
        return ren.image.to_numpy()[0].copy()

    target = render(true_pose)
    first = render(init_pose)
    mse = ImageMSE(ren.image, target[None])        # RGB and silhouette
    loss = ti.field(float, shape=(), needs_grad=True)

    # Adam on the six pose numbers
    pose = init_pose.copy()
    m = np.zeros(6)
    s = np.zeros(6)
    b1, b2, eps = 0.9, 0.999, 1e-8
    lr = np.full(6, args.lr)
    history = []
    e0 = pose_errors(init_pose, true_pose)
    print(f"initial pose error: translation {e0[0]:.4f}, rotation {e0[1]:.4f} rad")
    t0 = time.perf_counter()
    for it in range(1, args.iters + 1):
        obj.pose.from_numpy(pose.astype(tgs.runtime.np_float()))
        with ti.ad.Tape(loss):
            obj.apply()
            ren.render(obj.X, 0, 0)
            mse(loss)
        g = obj.pose.grad.to_numpy().astype(np.float64)
        m = b1 * m + (1 - b1) * g
        s = b2 * s + (1 - b2) * g * g
        step = lr * (m / (1 - b1 ** it)) / (np.sqrt(s / (1 - b2 ** it)) + eps)
        pose = pose - step
        if headless and (it % 4 == 0 or it == 1):
            history.append(ren.image.to_numpy()[0, ..., :3].copy())
        if it % args.print_every == 0 or it == 1 or it == args.iters:
            et, er = pose_errors(pose, true_pose)
            print(f"iter {it:4d}  loss {loss[None]:.6f}  t {np.round(pose[:3], 4).tolist()}  "
                  f"r {np.round(pose[3:], 4).tolist()}  err t {et:.4f} r {er:.4f}")
    seconds = time.perf_counter() - t0
    final = render(pose)
    e1 = pose_errors(pose, true_pose)

    if headless:
        from tigradsim import video

        os.makedirs(args.out, exist_ok=True)
        video.save_frames(np.stack([target, first, final])[..., :3], args.out, prefix="target_initial_final")
        video.save_gif(np.stack(history), os.path.join(args.out, "fit.gif"), fps=15)
        print("wrote", args.out)
    else:
        gui = ti.GUI("fit_pose: target | fitted", res=(2 * args.size, args.size))
        both = np.concatenate([target[..., :3], final[..., :3]], axis=1)
        while gui.running:
            gui.set_image(np.ascontiguousarray(both[::-1].swapaxes(0, 1)).astype(np.float32))
            gui.show()

    print(json.dumps({
        "pose_error_initial": round(e0[0] + e0[1], 6), "pose_error_final": round(e1[0] + e1[1], 6),
        "translation_error_initial": round(e0[0], 6), "translation_error_final": round(e1[0], 6),
        "rotation_error_initial_rad": round(e0[1], 6), "rotation_error_final_rad": round(e1[1], 6),
        "iters": args.iters, "seconds": round(seconds, 3), "true_pose": true_pose.tolist(),
        "initial_pose": np.round(init_pose, 6).tolist(), "final_pose": np.round(pose, 6).tolist(),
    }))


if __name__ == "__main__":
    main()
