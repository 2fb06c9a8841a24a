"""Differentiable soft splats: silhouettes of point-sampled matter (MPM particles, particle systems).

Why splats rather than a surface: point-sampled matter (sand, fluid, plasticine under MPM) carries no
connectivity, and a surface extracted each frame (marching cubes) changes topology as the matter flows, so
the loss would jump whenever a parameter moves a vertex across a cell.  A union of soft discs is a smooth
function of every particle position; with discs of half the particle spacing it covers the body's
silhouette (IoU 0.97 against a box's rasterized mask, measured in tests/test_splats.py), and its edge
softness is the disc footprint.

Model, for pixel p = (u, v) (pixel centres at integers, OpenCV camera `x_c = R x + t`, as `Camera`), particle
i at world position x_i projected to pixel coordinates c_i with depth z_i:
    s_i    = radius f / z_i  (perspective; radius f orthographic), f = sqrt(fx fy)     footprint [px]
    a_i(p) = opacity exp(-|p - c_i|^2 / (2 s_i^2))   where |p - c_i| < cutoff s_i, else 0
    A(p)   = 1 - prod_i (1 - a_i(p))                 the silhouette: a union of soft discs, in [0, 1)
Particles at depth <= near are not drawn.  The gradient is written by hand (the chain is short and the
hand-written form needs no per-pixel lists in the reverse pass): with g(p) = dL/dA(p),
    dL/da_i(p) = g (1 - A) / (1 - a_i),   da_i/dc_i = a_i (p - c_i) / s_i^2,   da_i/ds_i = a_i |p - c_i|^2 / s_i^3,
summed by each particle over the pixels of its own footprint (a gather: no atomics, so bit-reproducible in
parallel), then to x_i through Taichi's AD of the projection kernel.  The forward pass bins particles into
tiles (count, prefix sum, fill in particle order) so that every pixel sums its discs in one fixed order.

One `render` is one entry on a `ti.ad.Tape` (`tigradsim.custom_op`), like `SoftRasterizer.render`; `image`
has the rasterizer's silhouette layout (frames, H, W) of 1-vectors, so the image losses and `VideoFit`
take a splatter where they take a rasterizer.
"""
import math

import numpy as np
import taichi as ti

from tigradsim.core.runtime import custom_op, deterministic, ensure_init, np_float

from .camera import Camera


def _positive(name, value):
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)) \
            or not (math.isfinite(value) and value > 0):
        raise ValueError(f"ParticleSplatter: {name}={value!r}; expected a finite number > 0")
    return float(value)


@ti.data_oriented
class ParticleSplatter:
    """Soft-splat silhouettes of particles into `frames` images.

    Args:
        camera: a `Camera` (fixes width, height and projection).
        particle_count: N, the number of particles drawn: `verts[slot, particle_ids[i]]`, i < N.
        frames: number of frames in `image`.
        radius: disc radius [m]: half the particle spacing (a box sampled on a grid splats to its
            rasterized mask with IoU 0.97 at opacity 0.5; a radius of one spacing grows the silhouette
            past the edges, IoU 0.77-0.85: tests/test_splats.py).
        opacity: peak coverage of one disc, in (0, 1).
        cutoff: footprint radius in units of s_i (3: the Gaussian is 1 % of its peak there).
        particle_ids: (N,) indices into the verts field's second axis (default 0..N-1).
        tile: tile size [px] of the forward binning.
    Fields: `image` (frames, H, W) of 1-vectors (the silhouette A), with gradients.
    """

    def __init__(self, camera: Camera, particle_count, frames=1, radius=0.01, opacity=0.5, cutoff=3.0,
                 particle_ids=None, tile=8):
        ensure_init()
        if not isinstance(camera, Camera):
            raise TypeError(f"ParticleSplatter: camera must be a Camera, got {type(camera).__name__}")
        for name, val in (("particle_count", particle_count), ("frames", frames), ("tile", tile)):
            if isinstance(val, bool) or not isinstance(val, (int, np.integer)) or val < 1:
                raise ValueError(f"ParticleSplatter: {name}={val!r}; expected a whole number >= 1")
        self.radius = _positive("radius", radius)
        self.opacity = _positive("opacity", opacity)
        if not self.opacity < 1.0:
            raise ValueError(f"ParticleSplatter: opacity={opacity!r}; expected a number in (0, 1)")
        self.cutoff = _positive("cutoff", cutoff)
        N, H, W = int(particle_count), camera.height, camera.width
        ids = np.arange(N) if particle_ids is None else np.asarray(particle_ids)
        if ids.shape != (N,) or not np.issubdtype(ids.dtype, np.integer) or (N and ids.min() < 0):
            raise ValueError(f"ParticleSplatter: particle_ids must be ({N},) non-negative integers, got "
                             f"shape {ids.shape} dtype {ids.dtype}")
        self.particle_count, self.frames, self.tile = N, int(frames), int(tile)
        self.width, self.height = W, H
        self.tiles_x, self.tiles_y = -(-W // self.tile), -(-H // self.tile)
        self._max_id = int(ids.max()) if N else -1
        fl = float
        self.image = ti.Vector.field(1, fl, shape=(self.frames, H, W), needs_grad=True)
        self.particle_ids = ti.field(ti.i32, shape=(N,))
        self.particle_ids.from_numpy(ids.astype(np.int32))
        self.center = ti.Vector.field(2, fl, shape=(N,), needs_grad=True)     # c_i [px]
        self.footprint = ti.field(fl, shape=(N,), needs_grad=True)            # s_i [px]
        self.visible = ti.field(ti.i32, shape=(N,))
        self.cam_R = ti.Matrix.field(3, 3, fl, shape=())
        self.cam_t = ti.Vector.field(3, fl, shape=())
        self.cam_k = ti.Vector.field(4, fl, shape=())                        # fx, fy, cx, cy
        self.tile_count = ti.field(ti.i32, shape=(self.tiles_y, self.tiles_x))
        self.tile_start = ti.field(ti.i32, shape=(self.tiles_y, self.tiles_x))
        self.tile_fill = ti.field(ti.i32, shape=(self.tiles_y, self.tiles_x))
        self.total = ti.field(ti.i32, shape=())
        self._entries_tree, self.entries, self.capacity = None, None, 0
        self._serial = deterministic()
        self.set_camera(camera)
        self._op = custom_op(self._forward, self._backward)

    def set_camera(self, camera: Camera):
        """Use another camera of the same image size."""
        if (camera.width, camera.height) != (self.width, self.height):
            raise ValueError(f"set_camera: the camera's image is {camera.width}x{camera.height}, the splatter's "
                             f"{self.width}x{self.height}")
        self.camera = camera
        f = np_float()
        self.cam_R[None] = camera.R.astype(f)
        self.cam_t[None] = camera.t.astype(f)
        self.cam_k[None] = np.array([camera.fx, camera.fy, camera.cx, camera.cy], f)
        self._perspective = camera.perspective
        self._near = float(camera.near)

    # -- projection (differentiated by Taichi) ----------------------------------------
    @ti.kernel
    def _project(self, verts: ti.template(), slot: ti.i32):
        for i in range(self.particle_count):
            R, t, k = self.cam_R[None], self.cam_t[None], self.cam_k[None]   # read in the loop: AD needs one
            focal = ti.sqrt(k[0] * k[1])
            xc = R @ verts[slot, self.particle_ids[i]] + t
            if ti.static(self._perspective):
                z = ti.max(xc[2], self._near)
                self.center[i] = ti.Vector([k[0] * xc[0] / z + k[2], k[1] * xc[1] / z + k[3]])
                self.footprint[i] = self.radius * focal / z
                self.visible[i] = ti.cast(xc[2] > self._near, ti.i32)
            else:
                self.center[i] = ti.Vector([k[0] * xc[0] + k[2], k[1] * xc[1] + k[3]])
                self.footprint[i] = self.radius * focal
                self.visible[i] = 1

    @ti.func
    def _pixel_range(self, i):
        """The pixels (x0..x1, y0..y1, inclusive, clipped to the image) of particle i's footprint."""
        c, r = self.center[i], self.cutoff * self.footprint[i]
        x0 = ti.max(ti.cast(ti.ceil(c[0] - r), ti.i32), 0)
        x1 = ti.min(ti.cast(ti.floor(c[0] + r), ti.i32), self.width - 1)
        y0 = ti.max(ti.cast(ti.ceil(c[1] - r), ti.i32), 0)
        y1 = ti.min(ti.cast(ti.floor(c[1] + r), ti.i32), self.height - 1)
        return x0, x1, y0, y1

    @ti.func
    def _disc(self, i, x, y):
        """a_i at pixel (x, y) and the offset p - c_i (0 outside the cutoff)."""
        d = ti.Vector([ti.cast(x, float), ti.cast(y, float)]) - self.center[i]
        s = self.footprint[i]
        r2 = d.dot(d)
        a = 0.0
        if r2 < (self.cutoff * s) ** 2:
            a = self.opacity * ti.exp(-r2 / (2.0 * s * s))
        return a, d, r2

    # -- binning (forward only) -----------------------------------------------------
    @ti.func
    def _tile_range(self, i):
        """The tiles (ty0..ty1 - 1, tx0..tx1 - 1) that particle i's footprint touches (none if not visible)."""
        x0, x1, y0, y1 = self._pixel_range(i)
        ty0, ty1, tx0, tx1 = 0, 0, 0, 0
        if self.visible[i] and x0 <= x1 and y0 <= y1:
            ty0, ty1 = y0 // self.tile, y1 // self.tile + 1
            tx0, tx1 = x0 // self.tile, x1 // self.tile + 1
        return ty0, ty1, tx0, tx1

    @ti.kernel
    def _count(self):
        for ty, tx in self.tile_count:
            self.tile_count[ty, tx] = 0
            self.tile_fill[ty, tx] = 0
        for i in range(self.particle_count):
            ty0, ty1, tx0, tx1 = self._tile_range(i)
            for ty in range(ty0, ty1):
                for tx in range(tx0, tx1):
                    ti.atomic_add(self.tile_count[ty, tx], 1)
        ti.loop_config(serialize=True)
        for _ in range(1):
            run = 0
            for ty in range(self.tiles_y):
                for tx in range(self.tiles_x):
                    self.tile_start[ty, tx] = run
                    run += self.tile_count[ty, tx]
            self.total[None] = run

    @ti.kernel
    def _fill(self, entries: ti.template()):
        ti.loop_config(serialize=self._serial)      # fixed order: each pixel sums its discs in particle order
        for i in range(self.particle_count):
            ty0, ty1, tx0, tx1 = self._tile_range(i)
            for ty in range(ty0, ty1):
                for tx in range(tx0, tx1):
                    slot = ti.atomic_add(self.tile_fill[ty, tx], 1)
                    entries[self.tile_start[ty, tx] + slot] = i

    def _bin(self):
        self._count()
        need = int(self.total[None])
        if need > self.capacity:
            if self._entries_tree is not None:
                self._entries_tree.destroy()
            cap = max(need + need // 4, 1024)
            fb = ti.FieldsBuilder()
            self.entries = ti.field(ti.i32)
            fb.dense(ti.i, cap).place(self.entries)
            self._entries_tree = fb.finalize()
            self.capacity = cap
        self._fill(self.entries)       # the field is an argument: a new one after a reallocation recompiles

    @ti.kernel
    def _shade(self, frame: ti.i32, entries: ti.template()):
        for y, x in ti.ndrange(self.height, self.width):
            ty, tx = y // self.tile, x // self.tile
            start = self.tile_start[ty, tx]
            log_clear = 0.0
            for k in range(start, start + self.tile_count[ty, tx]):
                a, _d, _r2 = self._disc(entries[k], x, y)
                log_clear += ti.log(1.0 - a)
            self.image[frame, y, x] = ti.Vector([1.0 - ti.exp(log_clear)])

    # -- backward (hand-written, a gather per particle) --------------------------------
    @ti.kernel
    def _shade_grad(self, frame: ti.i32):
        for i in range(self.particle_count):
            if self.visible[i]:
                x0, x1, y0, y1 = self._pixel_range(i)
                s = self.footprint[i]
                gc = ti.Vector([0.0, 0.0])
                gs = 0.0
                for y in range(y0, y1 + 1):
                    for x in range(x0, x1 + 1):
                        g = self.image.grad[frame, y, x][0]
                        a, d, r2 = self._disc(i, x, y)
                        if g != 0.0 and a > 0.0:
                            ga = g * (1.0 - self.image[frame, y, x][0]) / (1.0 - a)
                            gc += ga * a / (s * s) * d
                            gs += ga * a * r2 / (s * s * s)
                self.center.grad[i] += gc
                self.footprint.grad[i] += gs

    @ti.kernel
    def _clear_projection_grads(self):
        for i in range(self.particle_count):
            self.center.grad[i] = ti.Vector([0.0, 0.0])
            self.footprint.grad[i] = 0.0

    def _forward(self, verts, slot, frame):
        self._project(verts, slot)
        self._bin()
        self._shade(frame, self.entries)

    def _backward(self, verts, slot, frame):
        self._project(verts, slot)         # the projection of this frame's state (the scratch is shared)
        self._clear_projection_grads()
        self._shade_grad(frame)
        self._project.grad(verts, slot)

    # -- public -------------------------------------------------------------------
    def render(self, verts, slot=0, frame=0):
        """Splat `verts[slot, particle_ids[i]]` into `image[frame]` (one differentiable Tape entry).

        `verts`: a Taichi field (slots, M) of 3-vectors [m] (e.g. a simulator's `particle_q`); gradients of a
        loss on `image` flow to `verts.grad[slot, ...]`.  Render each frame at most once per Tape.
        """
        shape = getattr(verts, "shape", None)
        if not hasattr(verts, "snode") or shape is None or len(shape) != 2 or getattr(verts, "n", None) != 3:
            raise TypeError(f"ParticleSplatter.render: verts must be a Taichi field (slots, M) of 3-vectors, got "
                            f"{type(verts).__name__} of shape {shape}")
        if self._max_id >= shape[1]:
            raise ValueError(f"ParticleSplatter.render: particle_ids reach {self._max_id}, verts has {shape[1]} "
                             "entries per slot")
        for name, val, hi in (("slot", slot, shape[0]), ("frame", frame, self.frames)):
            if isinstance(val, bool) or not isinstance(val, (int, np.integer)) or not 0 <= val < hi:
                raise IndexError(f"ParticleSplatter.render: {name}={val!r} out of range [0, {hi - 1}]")
        self._op(verts, int(slot), int(frame))

    def render_numpy(self, points, frame=0) -> np.ndarray:
        """Splat an (N, 3) array of world points [m] into `image[frame]`; returns it as (H, W)."""
        pts = np.asarray(points, dtype=np_float()).reshape(1, -1, 3)
        field = ti.Vector.field(3, float, shape=pts.shape[:2])
        field.from_numpy(pts)
        self.render(field, 0, frame)
        return self.image.to_numpy()[frame, :, :, 0]


def splat_silhouette_np(camera: Camera, points, radius, opacity=0.5, cutoff=3.0) -> np.ndarray:
    """The module docstring's silhouette A (H, W) of world points (N, 3), in numpy float64 (a reference)."""
    pix = camera.project_pixels(np.asarray(points, dtype=np.float64))
    focal = math.sqrt(camera.fx * camera.fy)
    if camera.perspective:
        visible = pix[:, 2] > camera.near
        s = radius * focal / np.maximum(pix[:, 2], camera.near)
    else:
        visible = np.ones(len(pix), dtype=bool)
        s = np.full(len(pix), radius * focal)
    v, u = np.mgrid[0:camera.height, 0:camera.width]
    log_clear = np.zeros((camera.height, camera.width))
    for (cu, cv, _z), si, vis in zip(pix, s, visible):
        if not vis:
            continue
        r2 = (u - cu) ** 2 + (v - cv) ** 2
        a = np.where(r2 < (cutoff * si) ** 2, opacity * np.exp(-r2 / (2 * si * si)), 0.0)
        log_clear += np.log1p(-a)
    return 1.0 - np.exp(log_clear)
