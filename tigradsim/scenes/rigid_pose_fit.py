"""An object's pose (translation and rotation) from one target image, by gradient descent through the
soft rasterizer.

The object, a coloured ellipsoid (0.9 x 0.55 x 0.4 m semi-axes, colour varying with the surface
direction, Lambert-shaded), is posed by six numbers, a translation [m] and an axis-angle rotation
[rad], in a differentiable Taichi kernel (`PosedMesh`); the rendered image is compared with the
target by pixel MSE (RGB + silhouette), and Adam (`tgs.Adam` on a `Param` of the six numbers)
updates the pose from the Tape gradient.

    sc = PoseScene(size=64, seed=0)          # target at TRUE_POSE, initial guess drawn from the seed
    result = sc.fit(iters=120, lr=0.03)      # PoseFit: poses, errors, the target / initial / final images
"""
import time
from dataclasses import dataclass, field

import numpy as np
import taichi as ti

from ..fitting.optim import Adam, Param, optimize
from ..renderers import Camera, ImageMSE, SoftRasterizer, icosphere
from ..core.aliases import alias_property
from ..core.runtime import np_float

TRUE_POSE = (0.1, -0.05, 0.0, 0.2, 0.5, -0.1)   # translation [m], axis-angle rotation [rad]
OFFSET = (0.25, 0.35)                            # the guess: truth + uniform in +-0.25 m, +-0.35 rad per axis
SEMI_AXES = (0.9, 0.55, 0.4)                     # [m]


def rotation_matrix(r):
    """Axis-angle 3-vector [rad] -> 3x3 rotation (numpy, Rodrigues)."""
    r = np.asarray(r, dtype=np.float64)
    th = np.linalg.norm(r)
    if th < 1e-12:
        return np.eye(3)
    k = r / th
    K = np.array([[0, -k[2], k[1]], [k[2], 0, -k[0]], [-k[1], k[0], 0]])
    return np.eye(3) + np.sin(th) * K + (1 - np.cos(th)) * K @ K


def pose_errors(p, q):
    """(translation error [m], rotation angle error [rad]) between two poses (6,)."""
    p, q = np.asarray(p, dtype=np.float64), np.asarray(q, dtype=np.float64)
    dt = float(np.linalg.norm(p[:3] - q[:3]))
    rel = rotation_matrix(p[3:]) @ rotation_matrix(q[3:]).T
    ang = float(np.arccos(np.clip((np.trace(rel) - 1) / 2, -1.0, 1.0)))
    return dt, ang


@ti.data_oriented
class PosedMesh:
    """World vertices X[0, i] = R(pose[3:6]) rest[i] + pose[0:3], differentiable in `pose` (6,).

    rest: (V, 3) vertices [m]; X: Vector field (1, V) for the renderer (frame 0); vertex_count: V
    (`n` is its older name)."""

    n = alias_property("vertex_count")

    def __init__(self, rest):
        rest = np.asarray(rest)
        if rest.ndim != 2 or rest.shape[1] != 3 or len(rest) == 0:
            raise ValueError(f"rest: expected vertices of shape (V, 3), got {rest.shape}")
        self.vertex_count = len(rest)
        self.rest = ti.Vector.field(3, float, shape=self.vertex_count)
        self.rest.from_numpy(rest.astype(np_float()))
        self.pose = ti.field(float, shape=6, needs_grad=True)
        self.X = ti.Vector.field(3, float, shape=(1, self.vertex_count), needs_grad=True)

    @ti.kernel
    def apply(self):
        for i in range(self.vertex_count):
            t = ti.Vector([self.pose[0], self.pose[1], self.pose[2]])
            r = ti.Vector([self.pose[3], self.pose[4], self.pose[5]])
            th = ti.sqrt(r.dot(r) + 1e-12)        # no NaN gradient at r = 0
            k = r / th
            p = self.rest[i]
            # Rodrigues: p cos th + (k x p) sin th + k (k . p)(1 - cos th)
            self.X[0, i] = p * ti.cos(th) + k.cross(p) * ti.sin(th) + k * (k.dot(p) * (1.0 - ti.cos(th))) + t


@dataclass
class PoseFit:
    """What `PoseScene.fit` returns: the poses (6,), their (translation, rotation) errors, the
    images (H, W, 4) at the truth, the guess and the fit, the fit's frames (RGB, every `keep_every`
    iterations) and its wall time [s]."""
    true_pose: np.ndarray
    initial_pose: np.ndarray
    final_pose: np.ndarray
    initial_errors: tuple
    final_errors: tuple
    target: np.ndarray
    initial: np.ndarray
    final: np.ndarray
    seconds: float
    frames: list = field(default_factory=list)


class PoseScene:
    """The ellipsoid, its renderer (size x size px), the target at `true_pose`, a guess drawn from `seed`.

    Attributes: renderer, obj (PosedMesh), true_pose, init_pose (6,), pose (the Param of obj.pose)."""

    def __init__(self, size=64, seed=0, true_pose=TRUE_POSE, offset=OFFSET):
        if int(size) != size or size < 8:
            raise ValueError(f"size: expected an image size >= 8 px, got {size!r}")
        true_pose = np.asarray(true_pose, dtype=np.float64)
        if true_pose.shape != (6,):
            raise ValueError(f"true_pose: expected 6 numbers (translation, axis-angle), got shape {true_pose.shape}")
        v, f = icosphere(2, 1.0)
        colors = 0.5 + 0.5 * v                       # colour varies with the surface direction
        cam = Camera(eye=(0.0, 0.4, 3.0), target=(0, 0, 0), fov=50, width=size, height=size)
        self.renderer = SoftRasterizer(cam, f, len(v), shading="lambert", edge_softness=3e-4, gamma=1e-4, vertex_colors=colors,
                                       background=(0.0, 0.0, 0.0), ambient=(0.35, 0.35, 0.35),
                                       lights=[((0.4, 1.0, 0.9), (0.65, 0.65, 0.65))], cull_backfaces=True)
        self.obj = PosedMesh(v * np.array(SEMI_AXES))
        self.true_pose = true_pose
        rng = np.random.default_rng(seed)
        self.init_pose = true_pose + np.concatenate([rng.uniform(-offset[0], offset[0], 3),
                                                     rng.uniform(-offset[1], offset[1], 3)])
        self.pose = Param(self.obj.pose, "pose")

    def render(self, pose) -> np.ndarray:
        """The image (H, W, 4: RGB, alpha) at `pose` (6,)."""
        self.obj.pose.from_numpy(np.asarray(pose).astype(np_float()))
        self.obj.apply()
        self.renderer.render(self.obj.X, 0, 0)
        return self.renderer.image.to_numpy()[0].copy()

    def fit(self, iters=120, lr=0.03, print_every=10, keep_every=4, printer=print) -> PoseFit:
        """Adam (lr, in metres and radians) on the pose from the initial guess, `iters` steps."""
        target = self.render(self.true_pose)
        first = self.render(self.init_pose)
        mse = ImageMSE(self.renderer.image, target[None])        # RGB and silhouette
        loss = ti.field(float, shape=(), needs_grad=True)
        e0 = pose_errors(self.init_pose, self.true_pose)
        printer(f"initial pose error: translation {e0[0]:.4f}, rotation {e0[1]:.4f} rad")
        frames = []
        self.pose.write(self.init_pose)

        def forward():
            self.obj.apply()
            self.renderer.render(self.obj.X, 0, 0)
            mse(loss)

        def report(it, value):            # it: steps taken so far (the image is before step it + 1)
            if it % keep_every == keep_every - 1 or it == 0:
                frames.append(self.renderer.image.to_numpy()[0, ..., :3].copy())
            if print_every and (it % print_every == 0 or it == iters):
                pose = self.pose.value()
                et, er = pose_errors(pose, self.true_pose)
                printer(f"iter {it:4d}  loss {value:.6f}  t {np.round(pose[:3], 4).tolist()}  "
                        f"r {np.round(pose[3:], 4).tolist()}  err t {et:.4f} r {er:.4f}")

        t0 = time.perf_counter()
        optimize(forward, loss, Adam([self.pose], lr=lr), iters=iters, log_every=0, callback=report, printer=printer)
        seconds = time.perf_counter() - t0
        pose = self.pose.value().astype(np.float64)
        final = self.render(pose)
        return PoseFit(self.true_pose, self.init_pose, pose, e0, pose_errors(pose, self.true_pose), target, first,
                       final, seconds, frames)
