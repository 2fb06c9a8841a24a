"""Projection stage: the camera (and its differentiable correction) and the projection of the surface
vertices to NDC x, y and depth; the per-face geometry every other stage reads (corners, the visibility
test, perspective-correct barycentrics and the normalised inverse depth).

Camera (conventions in `camera.py`): vertices are projected with the camera's OpenCV form
(R, t, fx, fy, cx, cy), corrected by two differentiable fields:

    X' = exp([omega]_x) X + dt   for camera coordinates X = R x + t, i.e.
    R' = exp([omega]_x) R,  t' = exp([omega]_x) t + dt,  (fx', fy') = focal_scale (fx, fy),
    camera_delta = (omega_x, omega_y, omega_z [rad], dt_x, dt_y, dt_z [world units]):

a left-multiplied rigid motion in the camera's own axes (x right, y down, z forward): the camera turns
by the rotation vector omega about its own centre, then the world shifts by dt in camera axes (the
camera centre moves by -R'^T dt), so rotation and translation stay decoupled.  exp is Rodrigues'
formula, with its Taylor series near omega = 0 so that the gradient there is exact (no norm of a zero
vector, DESIGN.md rule 11).
"""
import math

import numpy as np
import taichi as ti

from tigradsim.core.linalg import matmul, matvec
from tigradsim.core.runtime import np_float, serial_loop

from ..camera import Camera, rodrigues
from .coverage import area2, seg_d2, tri_d2, tri_inside
from .options import err

# Rotation-vector norm^2 below which exp([omega]_x) uses its Taylor series
# (truncation error ~|omega|^6 / 5040 < 2e-16 here; exact formula above it).
RODRIGUES_SERIES_BELOW = 1e-4


@ti.data_oriented
class Projector:
    """Fields: faces (F,) of 3 ints, vid (V,) (surface vertex v reads verts[slot, vid[v]]), pixel_offsets
    (V, 2) [px] (constants), cam_R, cam_t, cam_k (fx, fy, cx, cy [px], near, far), camera_delta (6,) and
    focal_scale (differentiable), cam_eff_* (the corrected camera, scratch) and proj (V,): NDC x, y and
    depth of every surface vertex (scratch, differentiable)."""

    def __init__(self, camera, faces, vertex_ids, pixel_offsets, cull_backfaces, serial):
        fl = float
        V, F = len(vertex_ids), len(faces)
        self.camera = camera
        self.width, self.height, self.perspective = camera.width, camera.height, camera.perspective
        self.vertex_count, self.face_count = V, F
        self.cull_backfaces = bool(cull_backfaces)
        self.serial = serial
        self.has_pixel_offsets = pixel_offsets is not None
        self.faces = ti.Vector.field(3, ti.i32, shape=F)
        self.faces.from_numpy(faces.astype(np.int32))
        self.vid = ti.field(ti.i32, shape=V)
        self.vid.from_numpy(vertex_ids)
        self.pixel_offsets = ti.Vector.field(2, fl, shape=V if self.has_pixel_offsets else 1)
        if self.has_pixel_offsets:
            self.pixel_offsets.from_numpy(pixel_offsets.astype(np_float()))
        # the camera in OpenCV form (camera.py): X = R x + t; fx, fy, cx, cy [px], near, far
        self.cam_R = ti.Matrix.field(3, 3, fl, shape=())
        self.cam_t = ti.Vector.field(3, fl, shape=())
        self.cam_k = ti.field(fl, shape=6)          # fx, fy, cx, cy, near, far
        # differentiable correction (module docstring) and the corrected camera (scratch)
        self.camera_delta = ti.field(fl, shape=6, needs_grad=True)
        self.focal_scale = ti.field(fl, shape=(), needs_grad=True)
        self.cam_eff_R = ti.Matrix.field(3, 3, fl, shape=(), needs_grad=True)
        self.cam_eff_t = ti.Vector.field(3, fl, shape=(), needs_grad=True)
        self.cam_eff_f = ti.Vector.field(2, fl, shape=(), needs_grad=True)
        self.proj = ti.Vector.field(3, fl, shape=V, needs_grad=True)
        self.focal_scale[None] = 1.0
        self.set_camera(camera)

    # ------------------------------------------------------------- camera
    def set_camera(self, camera: Camera):
        """Use another camera with the same image size and projection type."""
        if not isinstance(camera, Camera):
            raise err(TypeError, f"camera must be a Camera, got {type(camera).__name__}")
        if (camera.width, camera.height, camera.projection) != (self.width, self.height, self.camera.projection):
            raise err(ValueError, f"camera has size {camera.width}x{camera.height} ({camera.projection}); "
                                  f"expected {self.width}x{self.height} ({self.camera.projection}) as at construction")
        self.camera = camera
        npf = np_float()
        self.cam_R.from_numpy(camera.R.astype(npf))
        self.cam_t.from_numpy(camera.t.astype(npf))
        self.cam_k.from_numpy(np.array([camera.fx, camera.fy, camera.cx, camera.cy, camera.near, camera.far],
                                       dtype=npf))

    def camera_correction(self):
        """(omega (3,) [rad], dt (3,) [world units], focal_scale): the current correction."""
        d = self.camera_delta.to_numpy().astype(np.float64)
        return d[:3], d[3:], float(self.focal_scale[None])

    def corrected_camera(self) -> Camera:
        """The camera the renderer projects with: `camera` with `camera_delta` and `focal_scale` applied
        (module docstring), as a numpy `Camera`: an OpenCV camera (perspective) or an orthographic look-at
        camera."""
        omega, dt, k = self.camera_correction()
        if not (np.all(np.isfinite(omega)) and np.all(np.isfinite(dt)) and math.isfinite(k) and k > 0.0):
            raise err(ValueError, f"corrected_camera: the correction is not valid (camera_delta="
                                  f"{np.concatenate([omega, dt]).tolist()}, focal_scale={k}); expected finite "
                                  "values and focal_scale > 0")
        cam = self.camera
        Rw = rodrigues(omega)
        R = Rw @ cam.R
        t = Rw @ cam.t + dt
        if cam.perspective:
            K = cam.K
            K[0, 0] *= k
            K[1, 1] *= k
            return Camera.from_opencv(K, R, t, cam.width, cam.height, near=cam.near, far=cam.far)
        eye = -R.T @ t
        return Camera(eye=eye, target=eye + R[2], up=-R[1], width=cam.width, height=cam.height, near=cam.near,
                      far=cam.far, projection="orthographic", ortho_scale=cam.ortho_scale / k)

    def reset_camera_correction(self):
        """Set the correction to the identity (camera_delta = 0, focal_scale = 1)."""
        self.camera_delta.fill(0.0)
        self.focal_scale[None] = 1.0

    # ------------------------------------------------------------- per face
    @ti.func
    def corners(self, f):
        """Face f's projected corners a, b, c (NDC x, y and depth)."""
        idx = self.faces[f]
        return self.proj[idx[0]], self.proj[idx[1]], self.proj[idx[2]]

    @ti.func
    def face_ok(self, f):
        """Face f is drawn: all corners beyond `near`, not degenerate (and front-facing with culling)."""
        a, b, c = self.corners(f)
        near = self.cam_k[4]
        area = area2(a, b, c)
        ok = (a[2] > near) & (b[2] > near) & (c[2] > near) & (ti.abs(area) > 1e-12)
        if ti.static(self.cull_backfaces):
            ok = ok & (area > 0.0)
        return ok

    @ti.func
    def face_inside(self, f, px, py):
        a, b, c = self.corners(f)
        return tri_inside(a, b, c, px, py)

    @ti.func
    def face_d2(self, f, px, py):
        a, b, c = self.corners(f)
        return tri_d2(a, b, c, px, py)

    @ti.func
    def perspective_bary(self, w0, w1, w2, a, b, c):
        # every local is assigned once: Taichi's reverse mode turns re-assigned
        # locals into AD stacks, which costs time
        if ti.static(self.perspective):
            q = ti.Vector([w0 / a[2], w1 / b[2], w2 / c[2]])
            s = q.sum()
            return q / ti.select(ti.abs(s) > 1e-20, s, 1e-20)
        else:
            return ti.Vector([w0, w1, w2])

    @ti.func
    def face_geom(self, f, px, py):
        """(inside, d^2, clipped perspective-correct barycentrics, normalised inverse depth
        z = (far - depth) / (far - near)) of face f at NDC point (px, py)."""
        a, b, c = self.corners(f)
        area = area2(a, b, c)
        w0 = ((c[0] - b[0]) * (py - b[1]) - (c[1] - b[1]) * (px - b[0])) / area
        w1 = ((a[0] - c[0]) * (py - c[1]) - (a[1] - c[1]) * (px - c[0])) / area
        w2 = ((b[0] - a[0]) * (py - a[1]) - (b[1] - a[1]) * (px - a[0])) / area
        inside = ti.min(w0, ti.min(w1, w2)) >= 0.0
        # `tri_d2`'s arithmetic, written as the original kernel wrote it
        d2 = ti.min(seg_d2(px, py, a, b), ti.min(seg_d2(px, py, b, c), seg_d2(px, py, c, a)))
        bp = self.perspective_bary(w0, w1, w2, a, b, c)
        bq = ti.max(bp, 0.0)              # clip to [0, 1] and renormalise (PyTorch3D)
        bc = bq / ti.max(bq.sum(), 1e-20)
        depth = bc[0] * a[2] + bc[1] * b[2] + bc[2] * c[2]
        near = self.cam_k[4]
        far = self.cam_k[5]
        z = (far - depth) / (far - near)
        return inside, d2, bc, z

    @ti.func
    def pixel_ndc(self, i, j):
        """NDC x, y of the centre of pixel (row i, column j)."""
        s = ti.static(float(min(self.width, self.height)))
        return (2.0 * j + 1.0 - self.width) / s, (self.height - 2.0 * i - 1.0) / s

    # ------------------------------------------------------------- projecting
    @ti.func
    def pixel_uv(self, c):
        """Pixel (u, v) of camera coordinates c under the corrected camera (camera.py)."""
        fc = self.cam_eff_f[None]
        if ti.static(self.perspective):
            zs = ti.select(c[2] > 1e-12, c[2], 1.0)      # faces behind `near` are dropped anyway
            return ti.Vector([fc[0] * (c[0] / zs) + self.cam_k[2], fc[1] * (c[1] / zs) + self.cam_k[3]])
        else:
            return ti.Vector([fc[0] * c[0] + self.cam_k[2], fc[1] * c[1] + self.cam_k[3]])

    @ti.func
    def pixel_offset(self, v):
        """Vertex v's `pixel_offsets` entry [px] (zero without them)."""
        if ti.static(self.has_pixel_offsets):
            return self.pixel_offsets[v]
        else:
            return ti.Vector([0.0, 0.0])

    @ti.func
    def project(self, verts: ti.template(), slot: ti.template()):
        """The corrected camera, then every surface vertex verts[slot, vid[v]] into proj (top-level loops:
        call it from a kernel's top level).  slot is a template so the call copies nothing."""
        W = ti.static(float(self.width))
        H = ti.static(float(self.height))
        s = ti.static(float(min(self.width, self.height)))
        # 1. the corrected camera: R' = exp([w]x) R, t' = exp([w]x) t + dt, f' = k f
        ti.loop_config(serialize=True)        # one iteration: no thread-pool dispatch
        for _ in range(1):
            w = ti.Vector([self.camera_delta[0], self.camera_delta[1], self.camera_delta[2]])
            a2 = w.dot(w)
            small = a2 < RODRIGUES_SERIES_BELOW
            # the exact branch sees a safe argument, so sqrt and the division
            # never produce inf/NaN adjoints where the series is selected (rule 11)
            a2s = ti.select(small, 1.0, a2)
            a = ti.sqrt(a2s)
            hs = ti.sin(0.5 * a)
            sa = ti.select(small, 1.0 - a2 / 6.0 + a2 * a2 / 120.0, ti.sin(a) / a)
            ca = ti.select(small, 0.5 - a2 / 24.0 + a2 * a2 / 720.0, 2.0 * hs * hs / a2s)
            Wm = ti.Matrix([[0.0, -w[2], w[1]], [w[2], 0.0, -w[0]], [-w[1], w[0], 0.0]])
            Rw = ti.Matrix.identity(float, 3) + sa * Wm + ca * matmul(Wm, Wm)
            self.cam_eff_R[None] = matmul(Rw, self.cam_R[None])
            self.cam_eff_t[None] = matvec(Rw, self.cam_t[None]) \
                + ti.Vector([self.camera_delta[3], self.camera_delta[4], self.camera_delta[5]])
            k = self.focal_scale[None]
            self.cam_eff_f[None] = ti.Vector([k * self.cam_k[0], k * self.cam_k[1]])
        # 2. project: u = fx X/Z + cx, v = fy Y/Z + cy (orthographic: fx X + cx), then
        #    NDC x = (2u + 1 - W)/s, y = (H - 2v - 1)/s, and the depth Z
        ti.loop_config(serialize=self.serial)       # camera adjoints add up in vertex order
        for v in range(self.vertex_count):
            p = verts[slot, self.vid[v]]
            c = matvec(self.cam_eff_R[None], p) + self.cam_eff_t[None]
            uv = self.pixel_uv(c) + self.pixel_offset(v)
            self.proj[v] = ti.Vector([(2.0 * uv[0] + 1.0 - W) / s, (H - 2.0 * uv[1] - 1.0) / s, c[2]])

    @ti.func
    def zero_grads(self):
        """Zero the gradients of this stage's scratch fields (reused by every frame)."""
        ti.loop_config(serialize=ti.static(serial_loop(self.proj.shape[0])))
        for v in range(self.proj.shape[0]):
            self.proj.grad[v] = ti.Vector([0.0, 0.0, 0.0])

    @ti.func
    def zero_camera_grads(self):
        ti.loop_config(serialize=True)        # one iteration: no thread-pool dispatch
        for _ in range(1):
            self.cam_eff_R.grad[None] = ti.Matrix.zero(float, 3, 3)
            self.cam_eff_t.grad[None] = ti.Vector([0.0, 0.0, 0.0])
            self.cam_eff_f.grad[None] = ti.Vector([0.0, 0.0])
