"""Differentiable soft rasterizer (SoftRas, Liu et al. 2019) in Taichi.

Model, per pixel p and face j (DESIGN.md sections 4 and 7):

* coverage  D_j(p) = sigmoid(delta_j(p) d_j(p)^2 / sigma), delta = +1 inside the
  projected triangle and -1 outside, d the NDC distance to the triangle's edges;
* silhouette  A(p) = 1 - prod_j (1 - D_j(p))^c, computed as 1 - exp(c sum_j log(1 - D_j)),
  c = 1 (SoftRas), or c = 1/2 for `closed` surfaces: there every silhouette edge is
  shared by a front and a back face, and with c = 1 the two halos add up (the edge
  moves outwards by ~0.2 px at `sigma_for_edge(0.8)`; a box rendered against a path
  tracer's antialiased masks came out 5 % too large in area); with c = 1/2 the edge has
  one face's profile on both sides, A = D, and deep inside (two or more layers) A -> 1;
* depth-softmax weights  w_j = D_j exp(z_j / gamma),
  z_j = (far - depth_j(p)) / (far - near) the normalised inverse depth,
  depth_j(p) interpolated with perspective-correct barycentrics that are then
  clipped to [0, 1] and renormalised (PyTorch3D order);
* background  B(p) = background + background_image[p] (a constant RGB plus a
  per-pixel plate, zero unless `set_background` gives one);
* colour, by `blend`:
  - "coverage" (default for RGB):  I(p) = A(p) C(p) + (1 - A(p)) B(p) with
    C(p) = sum_j w_j C_j(p) / sum_j w_j (no background term): the colour of
    the visible surface, laid over the background by the soft silhouette, so
    colour carries geometry gradients through A at the object's outline at any
    gamma (DESIGN.md section 7);
  - "softmax" (SoftRas / PyTorch3D):  I(p) = (sum_j w_j C_j(p) + w_b B(p)) /
    (sum_j w_j + w_b), w_b = exp(depth_eps / gamma).  At small gamma w_b
    vanishes next to any face within the cutoff, every such pixel takes its
    face's full colour and colour carries no gradient w.r.t. geometry (a
    warning says so at construction);
* C_j(p): per-vertex colours interpolated with those barycentrics, or per-face
  colours, optionally Lambert-shaded: C = albedo * (ambient + sum_l
  light_color_l max(0, n . normalize(light_dir_l))), n the world-space face
  normal (CCW winding; normals="flat") or the normalised interpolation of
  area-weighted vertex normals (normals="smooth").  `light_dir` points from the
  surface *towards* the light.

Camera (conventions in `camera.py`): vertices are projected with the camera's
OpenCV form (R, t, fx, fy, cx, cy), corrected by two differentiable fields:

    X' = exp([omega]_x) X + dt   for camera coordinates X = R x + t, i.e.
    R' = exp([omega]_x) R,  t' = exp([omega]_x) t + dt,  (fx', fy') = focal_scale (fx, fy),
    camera_delta = (omega_x, omega_y, omega_z [rad], dt_x, dt_y, dt_z [world units]):

a left-multiplied rigid motion in the camera's own axes (x right, y down, z
forward): the camera turns by the rotation vector omega about its own centre,
then the world shifts by dt in camera axes (the camera centre moves by
-R'^T dt), so rotation and translation stay decoupled.  exp is Rodrigues'
formula, with its Taylor series near omega = 0 so that the gradient there is
exact (no norm of a zero vector, DESIGN.md rule 11).  The identity correction
by default; `corrected_camera()` returns the corrected `Camera`,
`reset_camera_correction()` restores the identity.

Only pairs (p, j) with p inside triangle j or d^2 < sigma ln(1/coverage_eps - 1)
(D above `coverage_eps`) are evaluated; the rest are treated as D = 0.

How a frame is rendered (all of it is ONE entry on a `ti.ad.Tape`, see
`tigradsim.custom_op`, because the scratch buffers are re-used every frame):

1. `_prepare` (differentiable): apply the camera correction, gather the vertices
   `verts[slot, vertex_ids[v]]`, project them to NDC + depth, and Lambert-shade
   every face.
2. `_bin` (no gradient): bin faces into tiles of `tile_size`^2 pixels using
   their NDC bounding box grown by the coverage cutoff, sort each tile's list
   (deterministic results), then per pixel run the exact cutoff test over its
   tile's faces (after a bounding-box pre-test), count the surviving faces and
   their maximum depth logit (stable softmax; its gradient cancels exactly),
   remember the survivors as bits over the tile list, prefix-sum the counts
   and write a compact list of (pixel, face) pairs, pixel-major.  Memory is
   O(pairs), i.e. O(pixels x faces near a pixel), never O(pixels x faces).
   Fixed capacities grow automatically when a frame needs more.
3. `_composite` (forward): per pixel, in parallel, a loop over its own
   contiguous range of pairs sums log(1-D), the softmax weights and the
   weighted colours in a fixed order and forms the pixel of the frame.
4. Backward: `_accumulate.grad`, the reverse of a flat loop over the pairs that
   `+=` into per-pixel sums followed by a per-pixel loop forming the image (the
   structure Taichi differentiates correctly, DESIGN.md rule 4), then
   `_prepare.grad`.  It needs the frame's pairs and per-pixel sums in the
   scratch buffers: with `keep_frames` (the default below a memory budget) the
   forward keeps a copy of each frame's pairs and sums, and the backward copies
   them back (`_restore`) after re-running only `_prepare` (O(vertices));
   otherwise it re-runs 1-3 for its frame.  Either is skipped when its frame was
   the last one rendered (the buffers still hold it); the scratch gradients are
   cleared either way.

Silhouettes on CPUs (`pixel_lanes`, the default there) skip the pair list: after
step 2, `_bin_lanes` walks each tile's sorted faces and, for each, the rows of
the tile its box reaches in groups of `lane_count` pixels, branch-free, in
stages that end in stores of their lanes (so that LLVM packs them into SIMD),
summing S = sum log(1 - D) per pixel in the same face order; the backward
(`_silhouette_grad_lanes`) walks the same tiles (dL/dS per pixel, each face's
corner adjoints summed over its tile, the tiles' sums scattered in list order).
A kept frame keeps only its per-pixel S: the backward kernel projects the frame
and bins its tile lists again itself, as `_bin_lanes` projects, bins and
composites, so a frame is one launch forward and two backward (with
`_prepare.grad`).  Measured (bench_batch's 16-copy atlas, f64, per frame): binning
with sums and pair writes 2.6 -> 0.8 ms, the backward 2.2 -> 1.4 ms (averages).

Reproducibility: when `tigradsim.core.runtime.deterministic()` is True (the CPU
default) every loop that adds into shared locations in a thread-dependent
order (the reverse pair loop's vertex and colour adjoints, the camera and
background adjoints, smooth normals' sums) runs serially, so frames and
gradients are bit-identical from run to run; the forward per-pixel sums are in
a fixed order either way.

Image layout: `image` is a Taichi vector field of shape (frames, H, W) with
`channels` components: 1 (the silhouette A) for shading="silhouette", else 4
(R, G, B, A).  Row 0 is the top of the image.  `image.to_numpy()` gives
(frames, H, W, channels).
"""

import math
import warnings

import numpy as np
import taichi as ti

from tigradsim.core.fastmath import exp_neg
from tigradsim.core.linalg import matmul, matvec

from tigradsim.core.model import has_grad
from tigradsim.core.runtime import custom_op, deterministic, ensure_init, np_float, serial_loop
from tigradsim.core.simd import lane_count
from tigradsim.io.meshes import unpaired_edge

from ..camera import Camera, rodrigues

SHADINGS = ("silhouette", "color", "lambert")
NORMALS = ("flat", "smooth")
COLOR_MODES = ("vertex", "face")
BLENDS = ("coverage", "softmax")

# Softmax blending warns when, for a surface halfway through the normalised depth
# range (z = 0.5), the background's weight relative to the surface's,
# exp(-(0.5 - depth_eps) / gamma), is below this: then colour carries no gradient
# w.r.t. geometry (gamma below ~0.036 with the default depth_eps).
SOFTMAX_BG_WEIGHT_WARN = 1e-6
# Rotation-vector norm^2 below which exp([omega]_x) uses its Taylor series
# (truncation error ~|omega|^6 / 5040 < 2e-16 here; exact formula above it).
RODRIGUES_SERIES_BELOW = 1e-4
# zmax start value in coverage mode: the softmax over faces only (no background term)
_NO_DEPTH = -1e30
# keep_frames=None keeps every frame's pairs and per-pixel sums for the backward pass when
# the per-pixel part (frames x H x W x kept floats) is at most this many bytes
# (121 frames of 256 x 256 silhouettes in float64: 63 MB; in RGB: 317 MB, not kept)
KEEP_FRAMES_MAX_BYTES = 256 * 2 ** 20
# pixel_lanes (silhouettes on CPUs) evaluates a tile's rows in groups of pixels, SIMD lanes: one float
# register's worth (`core.simd.lane_count`: 8 in float32 where LLVM vectorizes 32 bytes wide, else 4), or
# this many where the tile size is no multiple of that; a tile size must be a multiple of some lane count
PIXEL_LANES_MIN = 4
# ... and runs its tile loops on one thread for images up to this many pixels (a 32x64 silhouette's
# pass takes ~0.1 ms, less than a hand-off to the thread pool).  Fixed per renderer, not
# `runtime.serial_loop`: the serial and the parallel loop compile to different SIMD code, whose
# sums may differ in the last bit, and the bookkeeping loops' limit must not change results
PIXEL_LANES_SERIAL_PIXELS = 2048


def sigma_for_edge(edge_px: float, width: int, height: int) -> float:
    """The `sigma` (NDC^2) at which a straight silhouette edge's coverage rises from 10 %
    to 90 % across `edge_px` pixels of a width x height image.

    D = sigmoid(+-d^2 / sigma) reaches 10 % / 90 % at d = sqrt(ln(9) sigma) outside / inside
    the edge, so the 10-90 % width is 2 sqrt(ln(9) sigma) NDC units; one pixel is
    2 / min(width, height) NDC units (`_pixel_ndc`).  A camera's box-filtered (area) coverage
    of an edge, e.g. a path tracer's antialiased mask or a real sensor's pixel, rises over
    0.8 px (10-90 % of a linear ramp one pixel wide), so edge_px = 0.8 makes the rendered
    silhouette edge as sharp as footage's.  A softer edge is not harmless there: the
    faces that meet at a silhouette edge each add their halo and `1 - prod(1 - D_j)`
    inflates the silhouette (measured on a path-traced box at 128 px: +14 % area at sigma
    3e-4, +3.7 % at 3e-5), which biases a fit to masks (box push: mu -1.3 % at 3e-4,
    -0.3 % at 3e-5); even at this sigma the two halos of a closed surface's silhouette
    edges add +5 % area at 64 px, which `closed=True` removes.  Blur the image loss
    (`BlurredImageMSE`) for a wide basin instead.
    """
    for name, v in (("edge_px", edge_px), ("width", width), ("height", height)):
        if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)) or not v > 0 \
                or not math.isfinite(v):
            raise ValueError(f"sigma_for_edge: {name} must be a positive number, got {v!r}")
    pixel = 2.0 / min(width, height)
    return (float(edge_px) * pixel) ** 2 / (4.0 * math.log(9.0))


class RendererWarning(UserWarning):
    """A renderer setting that is legal but will not do what is probably wanted."""


def _err(kind, msg):
    return kind(f"SoftRasterizer: {msg}")


def _check_positive(name, value):
    try:
        v = float(value)
    except (TypeError, ValueError) as exc:
        raise _err(TypeError, f"{name}={value!r} must be a positive number") from exc
    if not (v > 0.0 and math.isfinite(v)):
        raise _err(ValueError, f"{name}={value!r} must be a positive finite number (> 0)")
    return v


def _color_array(name, value, count, default):
    if value is None:
        value = default
    arr = np.asarray(value, dtype=np.float64)
    if arr.shape == (3,):
        arr = np.broadcast_to(arr, (count, 3)).copy()
    if arr.shape != (count, 3):
        raise _err(ValueError, f"{name} must have shape ({count}, 3) or (3,), got {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise _err(ValueError, f"{name} contains a non-finite value")
    return arr


@ti.data_oriented
class SoftRasterizer:
    """Soft rasterizer of one triangle mesh into `frames` images.

    Args:
        camera: a `Camera` (fixes width, height and the projection type).
        faces: (F, 3) integer array of vertex indices (into the surface vertices
            0..num_vertices-1), counter-clockwise seen from outside.
        num_vertices: number V of surface vertices.
        frames: number of frames in `image`.
        sigma: coverage sharpness (NDC^2 units), > 0.
        gamma: depth-softmax temperature, > 0.
        shading: "silhouette" (1 channel), "color" (unlit albedo, RGBA) or
            "lambert" (albedo * (ambient + directional lights), RGBA).
        color_mode: "vertex" (interpolated `vertex_colors`) or "face" (`face_colors`).
        vertex_colors: (V, 3) or (3,) initial values of the `vertex_colors` field.
        face_colors: (F, 3) or (3,) initial values of the `face_colors` field.
        lights: list of (direction_to_light, rgb) pairs; the number of lights is
            fixed, their values live in the `light_dir`/`light_color` fields.
        ambient: ambient RGB (field `ambient`).
        background: background B: an RGB triple (field `background`) or an
            (H, W, 3) / (H, W) plate in [0, 1] (or uint8) (field `background_image`);
            see `set_background`.
        blend: "coverage" (I = A C + (1 - A) B; the default for "color" and
            "lambert") or "softmax" (SoftRas's background term in the depth
            softmax); see the module docstring.  Ignored for "silhouette".
        cull_backfaces: drop faces whose projection is clockwise.
        closed: the faces form closed surfaces (every edge shared by exactly two
            faces, checked: a ValueError names the first edge that is not): each
            face's coverage counts half in the silhouette (module docstring), so a
            silhouette edge is as wide as one face's and not inflated by the union
            of the front and back faces that meet there.  Use it for solids (rigid
            bodies) against real or path-traced masks; False (default) is SoftRas /
            PyTorch3D's union.  Exact for flat faces of a few triangles (a box:
            edges within 0.02 px, union +0.19 px); on a finely tessellated surface
            the inner edges of the front and back layers leave seams where they
            cross (a 4x4x4 tet box's surface: -0.49 px, union +0.14 px), so keep the
            union there.  Not with cull_backfaces.
        vertex_ids: (V,) integer array: surface vertex v reads
            `verts[slot, vertex_ids[v]]`; default `vertex_offset + arange(V)`.
        vertex_offset: see `vertex_ids`.
        pixel_offsets: optional (V, 2) floats [px]: vertex v's projected pixel (u, v) is moved by
            pixel_offsets[v] (constants, not differentiated), so its depth, normal and world position
            stay what they are.  `tigradsim.fitting.batch_render.AtlasRenderer` places copies of a
            scene side by side in one image with them.
        coverage_eps: pairs with coverage below it are skipped (cutoff).
        depth_eps: the background's normalised inverse depth in the softmax.
        tile_size: tile edge in pixels for binning.
        binning: False evaluates every face at every pixel (a brute-force
            reference, same cutoff test; for tests only).
        normals: Lambert shading with "flat" face normals, or "smooth":
            area-weighted vertex normals interpolated per pixel.
        keep_frames: keep every frame's (pixel, face) pairs and per-pixel sums
            for the backward pass instead of re-binning and re-compositing the
            frame there (measured: the backward re-render was ~30 % of a
            batched image fit).  Costs frames x H x W x (1 silhouette, 5 RGB)
            floats plus frames x the largest pair count x 2 ints.  None (default):
            keep when the per-pixel part is at most `KEEP_FRAMES_MAX_BYTES`.
        pixel_lanes: silhouettes only: render and differentiate tile by tile, each
            face's rows of the tile in groups of pixels as SIMD lanes (`_bin_lanes`,
            no pair list), instead of pixel by pixel over a list of (pixel, face)
            pairs.  True: groups of one SIMD register's worth of pixels
            (`core.simd.lane_count`: 8 in float32 on CPUs with AVX2, else 4; 4
            where the tile_size is no multiple of that); an integer: groups of
            that many pixels (a divisor of tile_size).
            None (default): True on CPUs for silhouettes with binning and a
            tile_size divisible by `PIXEL_LANES_MIN`; GPUs keep the pair list (a
            thread per pixel).  Same images and gradients to round-off.

    Differentiable fields (all `needs_grad`): `vertex_colors`, `face_colors`,
    `light_dir`, `light_color`, `ambient`, `background` (3,), `background_image`
    (H, W) of RGB, `camera_delta` (6,: rotation vector [rad], translation [world
    units]; zero), `focal_scale` (0-D, multiplies fx and fy; 1), and the vertex
    field passed to `render`.  `image` holds the frames.  Fit the camera with
    `tgs.Param(ren.camera_delta, "camera_pose")` and
    `tgs.Param(ren.focal_scale, "focal", log_space=True)`.
    """

    def __init__(self, camera: Camera, faces, num_vertices, frames=1, sigma=1e-4, gamma=1e-4,
                 shading="silhouette", color_mode="vertex", vertex_colors=None, face_colors=None,
                 lights=None, ambient=(0.3, 0.3, 0.3), background=(0.0, 0.0, 0.0), cull_backfaces=False,
                 vertex_ids=None, vertex_offset=0, coverage_eps=1e-4, depth_eps=1e-3, tile_size=8,
                 binning=True, normals="flat", blend=None, keep_frames=None, closed=False, pixel_lanes=None,
                 pixel_offsets=None):
        ensure_init()
        if not isinstance(camera, Camera):
            raise _err(TypeError, f"camera must be a tigradsim.renderers.Camera, got {type(camera).__name__}")
        if isinstance(num_vertices, bool) or not isinstance(num_vertices, (int, np.integer)) or num_vertices <= 0:
            raise _err(ValueError, f"num_vertices={num_vertices!r} must be a positive integer")
        V = int(num_vertices)
        faces = self._check_faces(faces, V)
        F = faces.shape[0]
        if isinstance(frames, bool) or not isinstance(frames, (int, np.integer)) or frames <= 0:
            raise _err(ValueError, f"frames={frames!r} must be a positive integer")
        if shading not in SHADINGS:
            raise _err(ValueError, f"shading={shading!r} must be one of {SHADINGS}")
        if color_mode not in COLOR_MODES:
            raise _err(ValueError, f"color_mode={color_mode!r} must be one of {COLOR_MODES}")
        if normals not in NORMALS:
            raise _err(ValueError, f"normals={normals!r} must be one of {NORMALS}")
        if blend is None:
            blend = "coverage"
        if blend not in BLENDS:
            raise _err(ValueError, f"blend={blend!r} must be one of {BLENDS} (or None: 'coverage')")
        coverage_eps = _check_positive("coverage_eps", coverage_eps)
        if coverage_eps >= 0.5:
            raise _err(ValueError, f"coverage_eps={coverage_eps} must lie in (0, 0.5)")
        if isinstance(tile_size, bool) or not isinstance(tile_size, (int, np.integer)) or tile_size <= 0:
            raise _err(ValueError, f"tile_size={tile_size!r} must be a positive integer")
        float_bytes = np.dtype(np_float()).itemsize
        lanes = self._pixel_lane_count(pixel_lanes, shading, binning, tile_size, float_bytes)
        if not isinstance(closed, (bool, np.bool_)):
            raise _err(TypeError, f"closed={closed!r} must be True or False")
        if closed:
            if cull_backfaces:
                raise _err(ValueError, "closed=True counts the front and the back face of every silhouette "
                                       "edge; it cannot be combined with cull_backfaces=True")
            edge = unpaired_edge(faces)
            if edge is not None:
                raise _err(ValueError, f"closed=True but the faces are not closed surfaces: edge {edge} is not "
                                       "shared by exactly two faces (weld duplicate vertices, or pass closed=False)")

        self.camera = camera
        self.num_vertices, self.num_faces, self.frames = V, F, int(frames)
        self.width, self.height = camera.width, camera.height
        self.shading, self.color_mode = shading, color_mode
        self.smooth = shading == "lambert" and normals == "smooth"
        self.normals = normals
        self.channels = 1 if shading == "silhouette" else 4
        self.blend = blend
        # coverage mode: the softmax runs over faces only, so zmax starts below any depth
        self._z_init = float(depth_eps) if blend == "softmax" else _NO_DEPTH
        # ordered (serial) loops wherever threads would add into shared locations
        self._serial = deterministic()
        self.alpha_channel = self.channels - 1
        self.cull_backfaces = bool(cull_backfaces)
        self.closed = bool(closed)
        self._coverage_power = 0.5 if self.closed else 1.0
        self.binning = bool(binning)
        self.perspective = camera.perspective
        self.coverage_eps = coverage_eps
        self.depth_eps = float(depth_eps)
        self.tile_size = int(tile_size)
        self.tiles_x = -(-self.width // self.tile_size)
        self.tiles_y = -(-self.height // self.tile_size)
        self.lane_count = lanes       # pixels per lane group; 0: the pair list
        self.pixel_lanes = lanes > 0
        self._lanes_serial = self.width * self.height <= PIXEL_LANES_SERIAL_PIXELS
        self.sigma = sigma          # validated by the property setter
        self.gamma = gamma

        if lights is None:
            lights = [((0.4, 0.8, 1.0), (0.7, 0.7, 0.7))]
        lights = list(lights)
        if len(lights) == 0 and shading == "lambert":
            lights = [((0.0, 0.0, 1.0), (0.0, 0.0, 0.0))]
        self.num_lights = max(len(lights), 1)
        ldir = np.zeros((self.num_lights, 3))
        lcol = np.zeros((self.num_lights, 3))
        for k, item in enumerate(lights):
            try:
                d, c = item
            except (TypeError, ValueError) as exc:
                raise _err(ValueError, f"lights[{k}]={item!r} must be a (direction, rgb) pair") from exc
            ldir[k] = _color_array(f"lights[{k}] direction", d, 1, None)[0]
            lcol[k] = _color_array(f"lights[{k}] color", c, 1, None)[0]
            if np.linalg.norm(ldir[k]) < 1e-12:
                raise _err(ValueError, f"lights[{k}] direction={tuple(d)} is the zero vector")

        if vertex_ids is None:
            if isinstance(vertex_offset, bool) or not isinstance(vertex_offset, (int, np.integer)) or vertex_offset < 0:
                raise _err(ValueError, f"vertex_offset={vertex_offset!r} must be a non-negative integer")
            vertex_ids = np.arange(V, dtype=np.int64) + int(vertex_offset)
        vid = np.asarray(vertex_ids)
        if vid.shape != (V,):
            raise _err(ValueError, f"vertex_ids must have shape ({V},) (one entry per surface vertex), got {vid.shape}")
        if not np.issubdtype(vid.dtype, np.integer):
            raise _err(TypeError, f"vertex_ids must be integers, got dtype {vid.dtype}")
        if vid.size and vid.min() < 0:
            raise _err(ValueError, f"vertex_ids contains a negative index {int(vid.min())}")
        self.vertex_ids = vid.astype(np.int32)
        self._max_vid = int(vid.max()) if vid.size else -1
        if pixel_offsets is not None:
            pixel_offsets = np.asarray(pixel_offsets, dtype=np.float64)
            if pixel_offsets.shape != (V, 2):
                raise _err(ValueError, f"pixel_offsets must have shape ({V}, 2) (one (u, v) offset in pixels per "
                                       f"surface vertex), got {pixel_offsets.shape}")
            if not np.all(np.isfinite(pixel_offsets)):
                raise _err(ValueError, f"pixel_offsets must be finite, got a non-finite entry at row "
                                       f"{int(np.argwhere(~np.isfinite(pixel_offsets))[0, 0])}")
        self._has_pixel_offsets = pixel_offsets is not None

        fl = float
        # ---------------------------------------------------------------- fields
        self.faces = ti.Vector.field(3, ti.i32, shape=F)
        self.faces.from_numpy(faces.astype(np.int32))
        self.vid = ti.field(ti.i32, shape=V)
        self.vid.from_numpy(self.vertex_ids)
        self.pixel_offsets = ti.Vector.field(2, fl, shape=V if self._has_pixel_offsets else 1)
        if self._has_pixel_offsets:
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
        self.face_shade = ti.Vector.field(3, fl, shape=F, needs_grad=True)
        nv = V if self.smooth else 1
        self.vnormal_sum = ti.Vector.field(3, fl, shape=nv, needs_grad=True)   # area-weighted sums
        self.vnormal = ti.Vector.field(3, fl, shape=nv, needs_grad=True)       # unit vertex normals
        self.light_unit = ti.Vector.field(3, fl, shape=self.num_lights, needs_grad=True)
        self.vertex_colors = ti.Vector.field(3, fl, shape=V, needs_grad=True)
        self.face_colors = ti.Vector.field(3, fl, shape=F, needs_grad=True)
        self.light_dir = ti.Vector.field(3, fl, shape=self.num_lights, needs_grad=True)
        self.light_color = ti.Vector.field(3, fl, shape=self.num_lights, needs_grad=True)
        self.ambient = ti.Vector.field(3, fl, shape=(), needs_grad=True)
        self.background = ti.Vector.field(3, fl, shape=(), needs_grad=True)
        self.background_image = ti.Vector.field(3, fl, shape=(self.height, self.width), needs_grad=True)
        H, W = self.height, self.width
        # per-pixel sums; their gradients only where a backward pass reads them: colour's
        # (`_accumulate.grad`), the silhouette pair list's acc_log (`_silhouette_grad`); pixel lanes
        # sum into kept_log (`_bin_lanes`) and keep dL/dS in lane_gs
        colour = self.channels != 1
        self.acc_log = ti.field(fl, shape=(1, 1) if self.pixel_lanes else (H, W),
                                needs_grad=colour or not self.pixel_lanes)
        self.acc_w = ti.field(fl, shape=(H, W), needs_grad=colour)
        self.acc_c = ti.Vector.field(3, fl, shape=(H, W), needs_grad=colour)
        self.zmax = ti.field(fl, shape=(H, W))
        self.fbox = ti.Vector.field(4, fl, shape=F)   # NDC bounding box grown by the cutoff radius
        self.pix_count = ti.field(ti.i32, shape=H * W)
        self.pix_offset = ti.field(ti.i32, shape=H * W)
        self.row_sum = ti.field(ti.i32, shape=H)
        self.tile_count = ti.field(ti.i32, shape=self.tiles_x * self.tiles_y)
        self.counters = ti.field(ti.i32, shape=2)    # number of pairs, largest tile list
        # pixel lanes: per tile, its pixels' running sums (log part, product part) and dL/dS by
        # (tile, row, group of lane_count columns)[lane], and the per-lane adjoint sums of one
        # face's six corner coordinates; a single entry each otherwise
        L = self.lane_count or PIXEL_LANES_MIN
        nt, ts = (self.tiles_x * self.tiles_y, self.tile_size) if self.pixel_lanes else (1, L)
        lanes = ti.types.vector(L, fl)
        self.lane_log = lanes.field(shape=(nt, ts + 1, ts // L))    # row ts: see `_bin_lanes`
        self.lane_prod = lanes.field(shape=(nt, ts + 1, ts // L))
        self.lane_gs = lanes.field(shape=(nt, ts, ts // L))
        self.lane_grad = lanes.field(shape=(nt, 6))
        self.lane_tmp = lanes.field(shape=(nt, 12))   # two groups' stage results (`_bin_lanes`: two rows at a time)
        self.image = ti.Vector.field(self.channels, fl, shape=(self.frames, H, W), needs_grad=True)
        # what the backward pass needs of each frame (keep_frames): its per-pixel sums (and
        # the softmax's zmax) here, its pairs in `kept_pairs` (allocated as pairs appear)
        kept_floats = 1 if self.channels == 1 else 6
        if keep_frames is None:
            keep_frames = self.frames * H * W * kept_floats * float_bytes <= KEEP_FRAMES_MAX_BYTES
        if not isinstance(keep_frames, (bool, np.bool_)):
            raise _err(TypeError, f"keep_frames={keep_frames!r} must be True, False or None (automatic)")
        self.keep_frames = bool(keep_frames)
        S = self.frames if self.keep_frames else 1
        Sc = S if self.channels != 1 else 1
        self.kept_log = ti.field(fl, shape=(S, H, W))
        self.kept_w = ti.field(fl, shape=(Sc, H, W))
        self.kept_c = ti.Vector.field(3, fl, shape=(Sc, H, W))
        self.kept_z = ti.field(fl, shape=(Sc, H, W))
        self._kept_tree = None
        self.kept_capacity = 0
        self._kept_tokens = [None] * S      # the render (token) whose data each frame's slot holds

        npf = np_float()
        self.vertex_colors.from_numpy(_color_array("vertex_colors", vertex_colors, V, (1.0, 1.0, 1.0)).astype(npf))
        self.face_colors.from_numpy(_color_array("face_colors", face_colors, F, (1.0, 1.0, 1.0)).astype(npf))
        self.light_dir.from_numpy(ldir.astype(npf))
        self.light_color.from_numpy(lcol.astype(npf))
        self.ambient[None] = _color_array("ambient", ambient, 1, None)[0].tolist()
        self.set_background(background)
        self.focal_scale[None] = 1.0

        self._tile_tree = None
        self._pair_tree = None
        self.tile_capacity = 0
        self.pair_capacity = 0
        self._alloc_tiles(max(16, min(F, 64)))
        self._alloc_pairs(max(1024, 4 * H * W))
        self.set_camera(camera)
        self._warn_softmax_gamma()
        self._np_verts = None
        self.num_pairs = 0
        self.regrows = 0
        self._scratch_token = None
        # True: backward re-runs a frame even when the scratch still holds it or it
        # was kept (benchmarks and tests of the recompute path)
        self.always_recompute = False
        self._op = custom_op(self._forward, self._backward)

    # ------------------------------------------------------------ validation
    @staticmethod
    def _pixel_lane_count(pixel_lanes, shading, binning, tile_size, float_bytes) -> int:
        """Pixels per lane group for the `pixel_lanes` argument (see __init__; floats of `float_bytes`),
        0 for the pair list."""
        possible = shading == "silhouette" and bool(binning) and tile_size % PIXEL_LANES_MIN == 0
        if pixel_lanes is None:
            pixel_lanes = possible and ti.lang.impl.current_cfg().arch == ti.cpu
        if isinstance(pixel_lanes, (bool, np.bool_)):
            if not pixel_lanes:
                return 0
            if not possible:
                raise _err(ValueError, f"pixel_lanes=True needs shading='silhouette', binning=True and a tile_size "
                                       f"divisible by {PIXEL_LANES_MIN}; got shading={shading!r}, binning={binning!r}, "
                                       f"tile_size={tile_size}")
            lanes = lane_count(float_bytes)
            return lanes if tile_size % lanes == 0 else PIXEL_LANES_MIN
        if not isinstance(pixel_lanes, (int, np.integer)):
            raise _err(TypeError, f"pixel_lanes={pixel_lanes!r} must be True, False, None (automatic) or a "
                                  f"number of pixels per lane group")
        if pixel_lanes <= 0 or tile_size % pixel_lanes != 0 or shading != "silhouette" or not binning:
            raise _err(ValueError, f"pixel_lanes={pixel_lanes} needs shading='silhouette', binning=True and a "
                                   f"positive divisor of tile_size; got shading={shading!r}, binning={binning!r}, "
                                   f"tile_size={tile_size}")
        return int(pixel_lanes)

    @staticmethod
    def _check_faces(faces, V):
        arr = np.asarray(faces)
        if arr.ndim != 2 or arr.shape[1] != 3 or arr.shape[0] == 0:
            raise _err(ValueError, f"faces must have shape (F, 3) with F >= 1, got {arr.shape}")
        if not np.issubdtype(arr.dtype, np.integer):
            raise _err(TypeError, f"faces must be an integer array, got dtype {arr.dtype}")
        lo, hi = int(arr.min()), int(arr.max())
        if lo < 0 or hi >= V:
            bad = lo if lo < 0 else hi
            row = int(np.argwhere((arr < 0) | (arr >= V))[0][0])
            raise _err(ValueError, f"faces index vertex {bad} (face {row}: {arr[row].tolist()}) but "
                                   f"num_vertices={V}; expected indices in [0, {V - 1}]")
        return arr

    @property
    def sigma(self):
        return self._sigma

    @sigma.setter
    def sigma(self, value):
        self._sigma = _check_positive("sigma", value)
        # d^2 below which D = sigmoid(-d^2/sigma) exceeds coverage_eps
        self._r2 = self._sigma * math.log(1.0 / self.coverage_eps - 1.0)

    @property
    def gamma(self):
        return self._gamma

    @gamma.setter
    def gamma(self, value):
        self._gamma = _check_positive("gamma", value)

    def set_camera(self, camera: Camera):
        """Use another camera with the same image size and projection type."""
        if not isinstance(camera, Camera):
            raise _err(TypeError, f"camera must be a Camera, got {type(camera).__name__}")
        if (camera.width, camera.height, camera.projection) != (self.width, self.height, self.camera.projection):
            raise _err(ValueError, f"camera has size {camera.width}x{camera.height} ({camera.projection}); "
                                   f"expected {self.width}x{self.height} ({self.camera.projection}) as at construction")
        self.camera = camera
        npf = np_float()
        self.cam_R.from_numpy(camera.R.astype(npf))
        self.cam_t.from_numpy(camera.t.astype(npf))
        self.cam_k.from_numpy(np.array([camera.fx, camera.fy, camera.cx, camera.cy, camera.near, camera.far],
                                       dtype=npf))

    # ------------------------------------------------------ camera correction
    def camera_correction(self):
        """(omega (3,) [rad], dt (3,) [world units], focal_scale): the current correction."""
        d = self.camera_delta.to_numpy().astype(np.float64)
        return d[:3], d[3:], float(self.focal_scale[None])

    def corrected_camera(self) -> Camera:
        """The camera the renderer projects with: `camera` with `camera_delta` and
        `focal_scale` applied (module docstring), as a numpy `Camera`: an OpenCV
        camera (perspective) or an orthographic look-at camera."""
        omega, dt, k = self.camera_correction()
        if not (np.all(np.isfinite(omega)) and np.all(np.isfinite(dt)) and math.isfinite(k) and k > 0.0):
            raise _err(ValueError, f"corrected_camera: the correction is not valid (camera_delta="
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

    # ------------------------------------------------------------ background
    def set_background(self, value):
        """Set the background B(p) = `background` + `background_image`[p].

        value: an RGB triple (3,): a constant colour (the plate is zeroed); or a plate
        of shape (H, W, 3) (or (H, W) / (H, W, 1) grey), floats in [0, 1] or uint8 (divided by 255),
        e.g. the median of footage frames (`background` is zeroed).
        """
        arr = np.asarray(value)
        if arr.shape == (3,) or arr.ndim == 1:
            self.background[None] = _color_array("background", arr, 1, None)[0].tolist()
            self.background_image.fill(0.0)
            return
        H, W = self.height, self.width
        if arr.shape not in ((H, W), (H, W, 1), (H, W, 3)):
            raise _err(ValueError, f"background has shape {arr.shape}; expected an RGB triple (3,) or a plate of "
                                   f"shape ({H}, {W}, 3), ({H}, {W}, 1) or ({H}, {W}) (the image size)")
        if arr.dtype == np.uint8:
            plate = arr.astype(np.float64) / 255.0
        elif np.issubdtype(arr.dtype, np.floating) or np.issubdtype(arr.dtype, np.integer):
            plate = arr.astype(np.float64)
            if not np.all(np.isfinite(plate)):
                raise _err(ValueError, "background plate contains a non-finite value")
            lo, hi = float(plate.min()), float(plate.max())
            if lo < 0.0 or hi > 1.0 + 1e-6:
                raise _err(ValueError, f"background plate values lie in [{lo:g}, {hi:g}]; expected [0, 1] "
                                       "(floats) or uint8 (0-255)")
        else:
            raise _err(TypeError, f"background plate has dtype {arr.dtype}; expected floats in [0, 1] or uint8")
        if plate.ndim == 2:
            plate = plate[..., None]
        if plate.shape[-1] == 1:
            plate = np.repeat(plate, 3, axis=-1)
        self.background[None] = [0.0, 0.0, 0.0]
        self.background_image.from_numpy(np.ascontiguousarray(plate, dtype=np_float()))

    def _warn_softmax_gamma(self):
        if self.shading == "silhouette" or self.blend != "softmax":
            return
        w = math.exp(-(0.5 - self.depth_eps) / self._gamma)
        if w < SOFTMAX_BG_WEIGHT_WARN:
            warnings.warn(
                f"SoftRasterizer: blend='softmax' with gamma={self._gamma:g}: the background's weight in the depth "
                f"softmax is exp(-(z - depth_eps)/gamma) = {w:.1e} of a surface's at normalised inverse depth "
                f"z = 0.5, so every pixel near a face takes the face's full colour and the RGB channels carry "
                f"(almost) no gradient w.r.t. geometry (only the alpha channel does).  Use blend='coverage' "
                f"(I = A C + (1 - A) B), or gamma of order 0.1 or more.", RendererWarning, stacklevel=3)

    # ------------------------------------------------------------- capacities
    def _alloc_tiles(self, cap):
        if self._tile_tree is not None:
            self._tile_tree.destroy()
        fb = ti.FieldsBuilder()
        self.tile_faces = ti.field(ti.i32)
        fb.dense(ti.ij, (self.tiles_x * self.tiles_y, cap)).place(self.tile_faces)
        # per pixel, one bit per entry of its tile's list: does the pair pass the cutoff?
        self.pix_mask = ti.field(ti.i32)
        fb.dense(ti.ij, (1, 1) if self.pixel_lanes else (self.width * self.height, (cap + 31) // 32)).place(
            self.pix_mask)
        # pixel lanes: each tile's adjoints of each of its faces' corners (x, y of a, b, c)
        self.tile_grad = ti.Vector.field(6, float)
        fb.dense(ti.ij, (self.tiles_x * self.tiles_y, cap) if self.pixel_lanes else (1, 1)).place(self.tile_grad)
        self._tile_tree = fb.finalize()
        self.tile_capacity = cap

    def _alloc_kept(self, cap):
        """Room for `cap` pairs per kept frame; the frames kept so far are dropped (their
        backward passes re-render them)."""
        if self._kept_tree is not None:
            self._kept_tree.destroy()
        fb = ti.FieldsBuilder()
        self.kept_pairs = ti.Vector.field(2, ti.i32)
        fb.dense(ti.ij, (self.frames, cap)).place(self.kept_pairs)
        self._kept_tree = fb.finalize()
        self.kept_capacity = cap
        self._kept_tokens = [None] * self.frames

    def _alloc_pairs(self, cap):
        if self._pair_tree is not None:
            self._pair_tree.destroy()
        fb = ti.FieldsBuilder()
        self.pairs = ti.Vector.field(2, ti.i32)
        fb.dense(ti.i, cap).place(self.pairs)
        # silhouettes: each pair's adjoint of its face's projected corners (x, y of a, b, c),
        # written by threads into the pair's own row (`_silhouette_grad`)
        self.pair_grad = ti.Vector.field(6, float)
        fb.dense(ti.i, cap if self.channels == 1 else 1).place(self.pair_grad)
        self._pair_tree = fb.finalize()
        self.pair_capacity = cap

    def memory_bytes(self) -> int:
        """Bytes held by this renderer's fields, gradients included (the
        render_numpy staging field too, once created)."""
        from taichi.lang.field import Field
        from taichi.lang.util import to_numpy_type

        total = 0
        for value in vars(self).values():
            if isinstance(value, Field):
                comps = getattr(value, "n", 1) * (getattr(value, "m", 1) or 1)
                itemsize = np.dtype(to_numpy_type(value.dtype)).itemsize
                size = int(np.prod(value.shape)) * comps * itemsize
                total += size * (2 if has_grad(value) else 1)
        return total

    # ------------------------------------------------------------- kernels
    @ti.func
    def _edge(self, a, b):
        """The segment a -> b in NDC (x, y of a and b): its vector and 1 / its squared length."""
        e = ti.Vector([b[0] - a[0], b[1] - a[1]])
        return e, 1.0 / (e[0] * e[0] + e[1] * e[1] + 1e-30)

    @ti.func
    def _seg_d2_edge(self, px, py, a, e, inv_l):
        """Squared NDC distance from (px, py) to the segment from a along e (`_edge`)."""
        t = ti.min(ti.max(((px - a[0]) * e[0] + (py - a[1]) * e[1]) * inv_l, 0.0), 1.0)
        dx = px - a[0] - t * e[0]
        dy = py - a[1] - t * e[1]
        return dx * dx + dy * dy

    @ti.func
    def _seg_d2(self, px, py, a, b):
        e, inv_l = self._edge(a, b)
        return self._seg_d2_edge(px, py, a, e, inv_l)

    @ti.func
    def _perspective_bary(self, w0, w1, w2, a, b, c):
        # every local is assigned once: Taichi's reverse mode turns re-assigned
        # locals into AD stacks, which costs time
        if ti.static(self.perspective):
            q = ti.Vector([w0 / a[2], w1 / b[2], w2 / c[2]])
            s = q.sum()
            return q / ti.select(ti.abs(s) > 1e-20, s, 1e-20)
        else:
            return ti.Vector([w0, w1, w2])

    @ti.func
    def _albedo(self, f, bc):
        if ti.static(self.color_mode == "vertex"):
            idx = self.faces[f]
            return bc[0] * self.vertex_colors[idx[0]] + bc[1] * self.vertex_colors[idx[1]] \
                + bc[2] * self.vertex_colors[idx[2]]
        else:
            return self.face_colors[f]

    @ti.func
    def _lambert(self, n):
        """ambient + sum_l light_color_l max(0, n . l_l) for a unit normal n."""
        shade = self.ambient[None]
        for l in ti.static(range(self.num_lights)):
            shade += self.light_color[l] * ti.max(n.dot(self.light_unit[l]), 0.0)
        return shade

    @ti.func
    def _shaded(self, f, bc):
        if ti.static(self.smooth):
            idx = self.faces[f]
            n = bc[0] * self.vnormal[idx[0]] + bc[1] * self.vnormal[idx[1]] + bc[2] * self.vnormal[idx[2]]
            return self._albedo(f, bc) * self._lambert(n / ti.sqrt(n.dot(n) + 1e-30))
        elif ti.static(self.shading == "lambert"):
            return self._albedo(f, bc) * self.face_shade[f]
        else:
            return self._albedo(f, bc)

    @ti.func
    def _area2(self, a, b, c):
        """Twice the signed NDC area of triangle a, b, c (positive counter-clockwise)."""
        return (b[0] - a[0]) * (c[1] - a[1]) - (b[1] - a[1]) * (c[0] - a[0])

    @ti.func
    def _face_geom(self, f, px, py):
        """(inside, d^2, clipped perspective-correct barycentrics, normalised inverse depth)."""
        a, b, c = self._corners(f)
        area = self._area2(a, b, c)
        w0 = ((c[0] - b[0]) * (py - b[1]) - (c[1] - b[1]) * (px - b[0])) / area
        w1 = ((a[0] - c[0]) * (py - c[1]) - (a[1] - c[1]) * (px - c[0])) / area
        w2 = ((b[0] - a[0]) * (py - a[1]) - (b[1] - a[1]) * (px - a[0])) / area
        inside = ti.min(w0, ti.min(w1, w2)) >= 0.0
        d2 = ti.min(self._seg_d2(px, py, a, b), ti.min(self._seg_d2(px, py, b, c), self._seg_d2(px, py, c, a)))
        bp = self._perspective_bary(w0, w1, w2, a, b, c)
        bq = ti.max(bp, 0.0)              # clip to [0, 1] and renormalise (PyTorch3D)
        bc = bq / ti.max(bq.sum(), 1e-20)
        depth = bc[0] * a[2] + bc[1] * b[2] + bc[2] * c[2]
        near = self.cam_k[4]
        far = self.cam_k[5]
        z = (far - depth) / (far - near)
        return inside, d2, bc, z

    @ti.func
    def _tri_inside(self, a, b, c, px, py):
        """`_face_geom`'s inside test (every w_k = e_k / area >= 0) read off the signs of
        the edge functions e_k, without the divisions; a, b, c: the corners' NDC x, y."""
        area = self._area2(a, b, c)
        e0 = (c[0] - b[0]) * (py - b[1]) - (c[1] - b[1]) * (px - b[0])
        e1 = (a[0] - c[0]) * (py - c[1]) - (a[1] - c[1]) * (px - c[0])
        e2 = (b[0] - a[0]) * (py - a[1]) - (b[1] - a[1]) * (px - a[0])
        return ti.select(area > 0.0, ti.min(e0, ti.min(e1, e2)) >= 0.0, ti.max(e0, ti.max(e1, e2)) <= 0.0)

    @ti.func
    def _tri_d2(self, a, b, c, px, py):
        """`_face_geom`'s d^2 (the same arithmetic): squared NDC distance to the edges."""
        return ti.min(self._seg_d2(px, py, a, b), ti.min(self._seg_d2(px, py, b, c), self._seg_d2(px, py, c, a)))

    @ti.func
    def _face_inside(self, f, px, py):
        idx = self.faces[f]
        return self._tri_inside(self.proj[idx[0]], self.proj[idx[1]], self.proj[idx[2]], px, py)

    @ti.func
    def _face_d2(self, f, px, py):
        idx = self.faces[f]
        return self._tri_d2(self.proj[idx[0]], self.proj[idx[1]], self.proj[idx[2]], px, py)

    @ti.func
    def _hit(self, f, px, py, r2):
        """(does pair (pixel, f) pass the cutoff: inside or d^2 < r2, its depth logit z).
        A silhouette needs no depth (z = 0) and d^2 only outside the face."""
        hit = False
        z = 0.0
        if ti.static(self.channels == 1):
            hit = self._face_inside(f, px, py)
            if not hit:
                hit = self._face_d2(f, px, py) < r2
        else:
            inside, d2, bc, zf = self._face_geom(f, px, py)
            hit = inside or d2 < r2
            z = zf
        return hit, z

    @ti.func
    def _corners(self, f):
        """Face f's projected corners a, b, c (NDC x, y and depth)."""
        idx = self.faces[f]
        return self.proj[idx[0]], self.proj[idx[1]], self.proj[idx[2]]

    @ti.func
    def _face_ok(self, f):
        a, b, c = self._corners(f)
        near = self.cam_k[4]
        area = self._area2(a, b, c)
        ok = (a[2] > near) & (b[2] > near) & (c[2] > near) & (ti.abs(area) > 1e-12)
        if ti.static(self.cull_backfaces):
            ok = ok & (area > 0.0)
        return ok

    @ti.func
    def _pixel_ndc(self, i, j):
        s = ti.static(float(min(self.width, self.height)))
        return (2.0 * j + 1.0 - self.width) / s, (self.height - 2.0 * i - 1.0) / s

    @ti.func
    def _pixel_uv(self, c):
        """Pixel (u, v) of camera coordinates c under the corrected camera (camera.py)."""
        fc = self.cam_eff_f[None]
        if ti.static(self.perspective):
            zs = ti.select(c[2] > 1e-12, c[2], 1.0)      # faces behind `near` are dropped anyway
            return ti.Vector([fc[0] * (c[0] / zs) + self.cam_k[2], fc[1] * (c[1] / zs) + self.cam_k[3]])
        else:
            return ti.Vector([fc[0] * c[0] + self.cam_k[2], fc[1] * c[1] + self.cam_k[3]])

    @ti.func
    def _pixel_offset(self, v):
        """Vertex v's `pixel_offsets` entry [px] (zero without them)."""
        if ti.static(self._has_pixel_offsets):
            return self.pixel_offsets[v]
        else:
            return ti.Vector([0.0, 0.0])

    @ti.kernel
    def _prepare(self, verts: ti.template(), slot: ti.i32):
        self._project(verts, slot)

    @ti.func
    def _project(self, verts: ti.template(), slot: ti.template()):
        """Step 1 of the module docstring (`_prepare`'s body; pixel-lane silhouettes run it as the first
        loops of their binning and backward kernels: no launch of its own).  slot is a template so the
        call copies nothing: `_prepare` must hold loops alone for Taichi's autodiff."""
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
        ti.loop_config(serialize=self._serial)       # camera adjoints add up in vertex order
        for v in range(self.num_vertices):
            p = verts[slot, self.vid[v]]
            c = matvec(self.cam_eff_R[None], p) + self.cam_eff_t[None]
            uv = self._pixel_uv(c) + self._pixel_offset(v)
            self.proj[v] = ti.Vector([(2.0 * uv[0] + 1.0 - W) / s, (H - 2.0 * uv[1] - 1.0) / s, c[2]])
        if ti.static(self.shading == "lambert"):
            ti.loop_config(serialize=ti.static(serial_loop(self.num_lights)))
            for l in range(self.num_lights):
                ld = self.light_dir[l]
                self.light_unit[l] = ld / ti.sqrt(ld.dot(ld) + 1e-30)
            if ti.static(self.smooth):
                ti.loop_config(serialize=ti.static(serial_loop(self.num_vertices)))
                for v in range(self.num_vertices):
                    self.vnormal_sum[v] = ti.Vector([0.0, 0.0, 0.0])
                ti.loop_config(serialize=self._serial)   # shared vertex sums (and adjoints) in face order
                for f in range(self.num_faces):
                    idx = self.faces[f]
                    p0 = verts[slot, self.vid[idx[0]]]
                    n = (verts[slot, self.vid[idx[1]]] - p0).cross(verts[slot, self.vid[idx[2]]] - p0)
                    for k in ti.static(range(3)):
                        self.vnormal_sum[idx[k]] += n          # area-weighted
                ti.loop_config(serialize=ti.static(serial_loop(self.num_vertices)))
                for v in range(self.num_vertices):
                    ns = self.vnormal_sum[v]
                    self.vnormal[v] = ns / ti.sqrt(ns.dot(ns) + 1e-30)
            else:
                ti.loop_config(serialize=self._serial)   # vertex and light adjoints in face order
                for f in range(self.num_faces):
                    idx = self.faces[f]
                    p0 = verts[slot, self.vid[idx[0]]]
                    n = (verts[slot, self.vid[idx[1]]] - p0).cross(verts[slot, self.vid[idx[2]]] - p0)
                    self.face_shade[f] = self._lambert(n / ti.sqrt(n.dot(n) + 1e-30))

    @ti.func
    def _box_pixels(self, bb):
        """The pixel columns c0..c1 and rows r0..r1 (floats, not clipped to the image) whose centres lie
        in the NDC box bb = (xmin, xmax, ymin, ymax); empty when c1 < c0 or r1 < r0."""
        W = ti.static(self.width)
        H = ti.static(self.height)
        s = ti.static(float(min(self.width, self.height)))
        return ti.ceil((bb[0] * s + W - 1.0) * 0.5), ti.floor((bb[1] * s + W - 1.0) * 0.5), \
            ti.ceil((H - 1.0 - bb[3] * s) * 0.5), ti.floor((H - 1.0 - bb[2] * s) * 0.5)

    @ti.func
    def _bin_faces(self, tile_faces: ti.template(), r2):
        """Steps 2 and 3 of `_bin`: each face's NDC box grown by the cutoff radius (into fbox) and the
        face appended to the list of every tile the box reaches; then each tile's list sorted (so
        sums over it run in face order, whatever the threads did)."""
        TS = ti.static(self.tile_size)
        TX = ti.static(self.tiles_x)
        W = ti.static(self.width)
        H = ti.static(self.height)
        cap = ti.static(tile_faces.shape[1])
        ti.loop_config(serialize=ti.static(serial_loop(self.tiles_x * self.tiles_y)))
        for t in range(self.tiles_x * self.tiles_y):
            self.tile_count[t] = 0
            if t == 0:
                self.counters[1] = 0
        # 2. faces -> tiles (bounding box grown by the cutoff radius)
        ti.loop_config(serialize=ti.static(serial_loop(self.num_faces, 16)))
        for f in range(self.num_faces):
            if self._face_ok(f):
                a, b, c = self._corners(f)
                r = ti.sqrt(r2) * 1.0001 + 1e-6
                xmin = ti.min(a[0], ti.min(b[0], c[0])) - r
                xmax = ti.max(a[0], ti.max(b[0], c[0])) + r
                ymin = ti.min(a[1], ti.min(b[1], c[1])) - r
                ymax = ti.max(a[1], ti.max(b[1], c[1])) + r
                bb = ti.Vector([xmin, xmax, ymin, ymax])
                self.fbox[f] = bb
                c0, c1, r0, r1 = self._box_pixels(bb)
                if c0 <= c1 and r0 <= r1 and c1 >= 0.0 and r1 >= 0.0 and c0 <= W - 1.0 and r0 <= H - 1.0:
                    ic0 = ti.cast(ti.max(c0, 0.0), ti.i32) // TS
                    ic1 = ti.cast(ti.min(c1, W - 1.0), ti.i32) // TS
                    ir0 = ti.cast(ti.max(r0, 0.0), ti.i32) // TS
                    ir1 = ti.cast(ti.min(r1, H - 1.0), ti.i32) // TS
                    for ty in range(ir0, ir1 + 1):
                        for tx in range(ic0, ic1 + 1):
                            t = ty * TX + tx
                            k = ti.atomic_add(self.tile_count[t], 1)
                            if k < cap:
                                tile_faces[t, k] = f
                            ti.atomic_max(self.counters[1], k + 1)
        # 3. sort each tile's list (deterministic order of summation)
        ti.loop_config(serialize=ti.static(serial_loop(self.tiles_x * self.tiles_y)))
        for t in range(self.tiles_x * self.tiles_y):
            n = ti.min(self.tile_count[t], cap)
            for a_ in range(1, n):
                key = tile_faces[t, a_]
                b_ = a_ - 1
                while b_ >= 0:
                    if tile_faces[t, b_] > key:
                        tile_faces[t, b_ + 1] = tile_faces[t, b_]
                        b_ -= 1
                    else:
                        break
                tile_faces[t, b_ + 1] = key

    @ti.kernel
    def _bin(self, tile_faces: ti.template(), pix_mask: ti.template(), pairs: ti.template(), r2: float,
             sigma: float, clear_grads: ti.template()):
        TS = ti.static(self.tile_size)
        TX = ti.static(self.tiles_x)
        W = ti.static(self.width)
        H = ti.static(self.height)
        cap = ti.static(tile_faces.shape[1])
        pcap = ti.static(pairs.shape[0])
        s = ti.static(float(min(self.width, self.height)))
        # 1. clear accumulators (and, in backward, the scratch gradients).  Bookkeeping loops
        #    like these run on one thread when small (`runtime.serial_loop`: a parallel loop's
        #    dispatch costs more than a 64x64 frame's copy)
        ti.loop_config(serialize=ti.static(serial_loop(W * H)))
        for i, j in ti.ndrange(H, W):
            self.acc_log[i, j] = 0.0
            self.acc_w[i, j] = 0.0
            self.acc_c[i, j] = ti.Vector([0.0, 0.0, 0.0])
            self.zmax[i, j] = self._z_init
        if ti.static(clear_grads):
            self._zero_scratch_grads()
        if ti.static(self.binning):
            self._bin_faces(tile_faces, r2)
        # 4. per pixel: exact cutoff test, count and maximum depth logit; in
        #    binning mode the survivors are remembered as bits over the tile list
        for i, j in self.zmax:
            px, py = self._pixel_ndc(i, j)
            t = (i // TS) * TX + j // TS
            n = self.num_faces
            if ti.static(self.binning):
                n = ti.min(self.tile_count[t], cap)
            cnt = 0
            zm = self._z_init
            slog = 0.0
            sprod = 1.0
            word = 0
            for k in range(n):
                f = k
                ok = True
                if ti.static(self.binning):
                    f = tile_faces[t, k]
                    bb = self.fbox[f]      # cheap rejection before the exact test
                    ok = (px >= bb[0]) & (px <= bb[1]) & (py >= bb[2]) & (py <= bb[3])
                else:
                    ok = self._face_ok(f)
                if ok:
                    if ti.static(self.channels == 1):
                        # silhouette: the pair's term of sum log(1 - D) right here (the
                        # order of the pair list), so `_composite` has no pair loop
                        inside = self._face_inside(f, px, py)
                        d2 = self._face_d2(f, px, py)
                        if inside or d2 < r2:
                            cnt += 1
                            word |= 1 << (k & 31)
                            # log(1 - D) = -log(1 + exp(+-x)), x = d^2 / sigma >= 0 (+ inside):
                            # = -(x + log(1 + exp(-x))) inside, -log(1 + exp(-x)) outside.  The
                            # factors 1 + exp(-x) in (1, 2] are multiplied and their log taken once
                            # per pixel: one exp per pair instead of an exp and a log (measured:
                            # this loop 2.24 -> 1.75 ms per frame on bench_batch's 16-copy atlas)
                            x = d2 * (1.0 / sigma)      # as in `_bin_lanes`
                            if inside:
                                slog -= x
                            sprod *= 1.0 + ti.exp(-x)
                    else:
                        hit, z = self._hit(f, px, py, r2)
                        if hit:
                            cnt += 1
                            word |= 1 << (k & 31)
                            zm = ti.max(zm, z)
                if ti.static(self.binning):
                    if (k & 31) == 31 or k == n - 1:
                        pix_mask[i * W + j, k >> 5] = word
                        word = 0
            self.pix_count[i * W + j] = cnt
            self.zmax[i, j] = zm
            if ti.static(self.channels == 1):
                # sprod <= 2^(pairs at this pixel), so it can pass the float range only with more than
                # 127 pairs (f32); then the log is inf, slog -inf and the pixel's A = 1, which is what
                # 1 - prod(1 - D), with prod(1 - D) = 1 / sprod below 2^-128, rounds to
                self.acc_log[i, j] = slog - ti.log(sprod)
        # 5. exclusive prefix sum of the counts: rows in parallel, then the row
        #    totals serially (H steps), then the offsets within each row
        ti.loop_config(serialize=ti.static(serial_loop(W * H)))
        for i in range(H):
            acc = 0
            for j in range(W):
                acc += self.pix_count[i * W + j]
            self.row_sum[i] = acc
        ti.loop_config(serialize=True)        # one iteration: no thread-pool dispatch
        for _ in range(1):
            acc = 0
            for i in range(H):
                cnt = self.row_sum[i]
                self.row_sum[i] = acc
                acc += cnt
            self.counters[0] = acc
        ti.loop_config(serialize=ti.static(serial_loop(W * H)))
        for i in range(H):
            acc = self.row_sum[i]
            for j in range(W):
                self.pix_offset[i * W + j] = acc
                acc += self.pix_count[i * W + j]
        # 6. write the (pixel, face) pairs
        ti.loop_config(serialize=ti.static(serial_loop(W * H, 8)))
        for i, j in ti.ndrange(H, W):
            t = (i // TS) * TX + j // TS
            off = self.pix_offset[i * W + j]
            if ti.static(self.binning):
                n = ti.min(self.tile_count[t], cap)
                for k in range(n):
                    if (pix_mask[i * W + j, k >> 5] >> (k & 31)) & 1:
                        if off < pcap:
                            pairs[off] = ti.Vector([i * W + j, tile_faces[t, k]])
                        off += 1
            else:
                px, py = self._pixel_ndc(i, j)
                for f in range(self.num_faces):
                    if self._face_ok(f):
                        hit, z = self._hit(f, px, py, r2)
                        if hit:
                            if off < pcap:
                                pairs[off] = ti.Vector([i * W + j, f])
                            off += 1

    # ------------------------------------------- silhouettes in pixel lanes (pixel_lanes)
    @ti.func
    def _box_span(self, f, tx, ty):
        """The part of tile (tx, ty) that face f's box (fbox) reaches, rounded as `_bin_faces` rounds
        it: (first row, last row, first lane group, last lane group) within the tile; empty when a
        last is below its first."""
        TS, W, H, L = ti.static(self.tile_size, self.width, self.height, self.lane_count)
        c0f, c1f, r0f, r1f = self._box_pixels(self.fbox[f])
        r0 = ti.cast(ti.min(ti.max(r0f, 0.0), H * 1.0), ti.i32) - ty * TS
        r1 = ti.cast(ti.max(ti.min(r1f, H - 1.0), -1.0), ti.i32) - ty * TS
        c0 = ti.cast(ti.min(ti.max(c0f, 0.0), W * 1.0), ti.i32) - tx * TS
        c1 = ti.cast(ti.max(ti.min(c1f, W - 1.0), -1.0), ti.i32) - tx * TS
        return ti.max(r0, 0), ti.min(r1, TS - 1), ti.max(c0, 0) // L, ti.min(c1, TS - 1) // L

    @ti.func
    def _tile_face(self, f):
        """Face f's projected corners a, b, c and its `_face_edges`."""
        a, b, c = self._corners(f)
        eab, lab, ebc, lbc, eca, lca = self._face_edges(a, b, c)
        return a, b, c, eab, lab, ebc, lbc, eca, lca

    @ti.func
    def _edge_lines(self, a, b, c, eab, lab, ebc, lbc, eca, lca):
        """The face's edges ab, bc, ca as lines n . p = o with unit outward normals n (`_beyond_edges`)."""
        s = ti.select(self._area2(a, b, c) > 0.0, 1.0, -1.0)   # the winding
        n0 = (s * ti.sqrt(lab)) * ti.Vector([eab[1], -eab[0]])
        n1 = (s * ti.sqrt(lbc)) * ti.Vector([ebc[1], -ebc[0]])
        n2 = (s * ti.sqrt(lca)) * ti.Vector([eca[1], -eca[0]])
        return n0, n0[0] * a[0] + n0[1] * a[1], n1, n1[0] * b[0] + n1[1] * b[1], n2, n2[0] * c[0] + n2[1] * c[1]

    @ti.func
    def _beyond_edges(self, i, j0, n0, o0, n1, o1, n2, o2, r_far):
        """Whether all of lane group (i, j0 .. j0 + lane_count - 1) lies more than r_far beyond one edge
        line of the face (`_edge_lines`): then no pixel of it is inside the face or within the cutoff,
        and the group adds exactly nothing (in the box's corners: ~20 % of the groups of bench_batch's
        atlas).  The distance is linear along the row, so its least value is at an end of the group."""
        xa, y = self._pixel_ndc(i, j0)
        xb, _ = self._pixel_ndc(i, j0 + ti.static(self.lane_count - 1))
        return (ti.min(n0[0] * xa, n0[0] * xb) + n0[1] * y - o0 > r_far) | \
            (ti.min(n1[0] * xa, n1[0] * xb) + n1[1] * y - o1 > r_far) | \
            (ti.min(n2[0] * xa, n2[0] * xb) + n2[1] * y - o2 > r_far)

    @ti.func
    def _lane_distances(self, t, i, j0, a, b, c, eab, lab, ebc, lbc, eca, lca, o: ti.template() = 0):
        """The first stage of a lane group (pixels (i, j0 .. j0 + lane_count - 1)) of tile t: the
        squared distances to the face's edges ab, bc, ca and whether inside (1.0 / 0.0), into
        lane_tmp[t, o .. o + 3]."""
        for l in ti.static(range(self.lane_count)):
            px, py = self._pixel_ndc(i, j0 + l)
            dab, dbc, dca = self._edge_d2s(px, py, a, b, c, eab, lab, ebc, lbc, eca, lca)
            self.lane_tmp[t, o + 0][l] = dab
            self.lane_tmp[t, o + 1][l] = dbc
            self.lane_tmp[t, o + 2][l] = dca
            self.lane_tmp[t, o + 3][l] = ti.select(self._tri_inside(a, b, c, px, py), 1.0, 0.0)

    @ti.func
    def _lane_terms(self, t, i, j0, a, b, c, eab, lab, ebc, lbc, eca, lca, inv_sigma, r2, o: ti.template()):
        """The stages of a lane group (pixels (i, j0 .. j0 + lane_count - 1)) of tile t up to its terms, into
        lane_tmp[t, o .. o + 5]: `_lane_distances`, then x = d^2 / sigma (d^2 the nearest edge's) and whether
        the pair is within the cutoff (inside or d^2 < r2; 1.0 / 0.0).  In stages, each ending in stores of
        its lanes: LLVM's SLP vectorizer packs a tree of at most 12 levels into SIMD, and one pixel's formula
        is deeper."""
        self._lane_distances(t, i, j0, a, b, c, eab, lab, ebc, lbc, eca, lca, o)
        for l in ti.static(range(self.lane_count)):
            d2 = ti.min(self.lane_tmp[t, o][l], ti.min(self.lane_tmp[t, o + 1][l], self.lane_tmp[t, o + 2][l]))
            self.lane_tmp[t, o + 4][l] = d2 * inv_sigma
            self.lane_tmp[t, o + 5][l] = ti.select((self.lane_tmp[t, o + 3][l] > 0.0) | (d2 < r2), 1.0, 0.0)

    @ti.func
    def _lane_accumulate(self, t, r, g, o: ti.template()):
        """Add the terms in lane_tmp[t, o .. o + 5] (`_lane_terms`) to the sums of lane group (r, g) of tile t:
        log(1 - D) = -(x + log(1 + exp(-x))) inside, -log(1 + exp(-x)) outside (`_bin`), the first part
        into lane_log, 1 + exp(-x) into the product lane_prod (one log per pixel at the end)."""
        for l in ti.static(range(self.lane_count)):
            x = self.lane_tmp[t, o + 4][l]
            self.lane_log[t, r, g][l] = self.lane_log[t, r, g][l] - self.lane_tmp[t, o + 3][l] * x
            self.lane_prod[t, r, g][l] = self.lane_prod[t, r, g][l] * (1.0 + self.lane_tmp[t, o + 5][l] * exp_neg(x))

    @ti.kernel
    def _bin_lanes(self, verts: ti.template(), slot: ti.i32, tile_faces: ti.template(), r2: float, sigma: float,
                   frame: ti.i32):
        """`_bin` of a silhouette in pixel lanes: faces binned into tiles as there (`_bin_faces`), then
        per tile, in parallel, its faces in list order and, for each, the part of the tile its box
        reaches, two rows at a time in groups of lane_count pixels: branch-free arithmetic (selects,
        `exp_neg`) ending in stores to consecutive addresses, which LLVM packs into SIMD.  Each
        pixel's S = sum of log(1 - D) over the faces within the cutoff, summed in `_bin`'s order,
        lands in kept_log (`_silhouette_sum`) and its value A in image[frame]: the frame is
        composited here, in the tile's own iteration (no `_composite` pass).  No pair list:
        `_silhouette_grad_lanes` walks the same tiles.  It first projects verts[slot] (`_project`)."""
        TS, TX, W, H, L = ti.static(self.tile_size, self.tiles_x, self.width, self.height, self.lane_count)
        cap = ti.static(tile_faces.shape[1])
        self._project(verts, slot)
        self._bin_faces(tile_faces, r2)
        ti.loop_config(serialize=self._lanes_serial)
        for t in range(self.tiles_x * self.tiles_y):
            ty = t // TX
            tx = t % TX
            inv_sigma = 1.0 / sigma
            r_far = ti.sqrt(r2) * 1.001 + 1e-6      # past the cutoff with room for rounding in either precision
            empty = self.tile_count[t] == 0      # most tiles of a small object's frame: no scratch, no log
            # element by element, as every other access to these fields (Taichi 1.7.4 forwarded a
            # whole-vector store past later element stores in the same loop: stale sums, measured)
            if not empty:
                for r, g in ti.ndrange(TS + 1, TS // L):
                    for l in ti.static(range(L)):
                        self.lane_log[t, r, g][l] = 0.0
                        self.lane_prod[t, r, g][l] = 1.0
            for k in range(ti.min(self.tile_count[t], cap)):
                a, b, c, eab, lab, ebc, lbc, eca, lca = self._tile_face(tile_faces[t, k])
                n0, o0, n1, o1, n2, o2 = self._edge_lines(a, b, c, eab, lab, ebc, lbc, eca, lca)
                r0, r1, g0, g1 = self._box_span(tile_faces[t, k], tx, ty)
                # two rows at a time: their groups' arithmetic is independent, and the CPU overlaps the two
                # chains of dependent multiplies and adds (Taichi 1.7's CPU code fuses none into FMAs).  25
                # atlas frames of bench_batch, f64: 19.7-19.8 -> 18.0-18.1 ms (f32: 12.7-12.8 -> 11.4); a
                # renderer's kernels compile in 9.7 s against 7.5 (a loop of its own for an odd count's last
                # row: 17.7 ms, 12.6 s).  A pair is skipped where both groups lie beyond an edge line; one that
                # lies beyond adds exact zeros (mask 0), so every pixel's sums, in face order, are the bits of
                # one row at a time.  (The backward pass in pairs measured 4 % slower: it keeps one row.)
                for rp in range((r1 - r0 + 2) // 2):
                    r = r0 + 2 * rp
                    # an odd row count's last row is paired with the scratch row TS (zeroed with the others,
                    # never read)
                    rb = ti.select(r + 1 <= r1, r + 1, TS)
                    for g in range(g0, g1 + 1):
                        if self._beyond_edges(ty * TS + r, tx * TS + g * L, n0, o0, n1, o1, n2, o2, r_far) and \
                                ((rb == TS) | self._beyond_edges(ty * TS + r + 1, tx * TS + g * L, n0, o0, n1, o1, n2,
                                                                 o2, r_far)):
                            continue
                        self._lane_terms(t, ty * TS + r, tx * TS + g * L, a, b, c, eab, lab, ebc, lbc, eca, lca,
                                         inv_sigma, r2, 0)
                        self._lane_terms(t, ty * TS + r + 1, tx * TS + g * L, a, b, c, eab, lab, ebc, lbc, eca, lca,
                                         inv_sigma, r2, 6)
                        self._lane_accumulate(t, r, g, 0)
                        self._lane_accumulate(t, rb, g, 6)
            sums = self._sum_slot(frame)
            for r, g in ti.ndrange(TS, TS // L):
                for l in ti.static(range(L)):
                    if ty * TS + r < H and tx * TS + g * L + l < W:
                        S = 0.0                  # an empty tile: S = 0, so A = 0 (`_pixel_value`: no exp)
                        if not empty:
                            S = self.lane_log[t, r, g][l] - ti.log(self.lane_prod[t, r, g][l])
                        self.kept_log[sums, ty * TS + r, tx * TS + g * L + l] = S
                        self.image[frame, ty * TS + r, tx * TS + g * L + l] = self._pixel_value(
                            ty * TS + r, tx * TS + g * L + l, S, 0.0, ti.Vector([0.0, 0.0, 0.0]), 0.0)

    @ti.func
    def _sum_slot(self, frame):
        """The slot of kept_log holding frame `frame`'s per-pixel sums in pixel lanes: the frame's own
        with keep_frames, else the one slot (the last frame binned)."""
        slot = frame
        if ti.static(not self.keep_frames):
            slot = 0
        return slot

    @ti.func
    def _silhouette_sum(self, frame, i, j):
        """S = sum of log(1 - D) of pixel (i, j) of frame `frame` as its binning left it: kept_log's slot
        in pixel lanes (`_bin_lanes`), acc_log on the pair list (`_bin`, or `_restore` from kept_log)."""
        S = 0.0
        if ti.static(self.pixel_lanes):
            S = self.kept_log[self._sum_slot(frame), i, j]
        else:
            S = self.acc_log[i, j]
        return S

    @ti.func
    def _log1m_sigmoid(self, x):
        """log(1 - sigmoid(x)) = -softplus(x), in a form safe for large |x|."""
        return -(ti.max(x, 0.0) + ti.log(1.0 + ti.exp(-ti.abs(x))))

    @ti.func
    def _pixel_value(self, i, j, slog, sw, sc, gamma):
        """The image value of pixel (i, j) from its sums over faces: slog = sum log(1 - D),
        sw = sum of softmax weights, sc = sum of weighted colours (module docstring)."""
        if ti.static(self.shading == "silhouette"):
            # forward only (silhouettes have their own backward): where no face is within the cutoff
            # (most pixels of a small object) A = 0 without an exp
            alpha = 0.0
            if slog != 0.0:
                alpha = 1.0 - ti.exp(ti.static(self._coverage_power) * slog)
            return ti.Vector([alpha])
        else:
            # every local assigned once (`_accumulate`'s reverse differentiates this)
            alpha = 1.0 - ti.exp(ti.static(self._coverage_power) * slog)
            bg = self.background[None] + self.background_image[i, j]
            rgb = bg
            if ti.static(self.blend == "coverage"):
                # C = sc / sw: the faces' colour alone (sw > 0 wherever a pair exists:
                # the face at zmax has weight D >= coverage_eps); A = 0 elsewhere
                rgb = alpha * (sc / ti.select(sw > 0.0, sw, 1.0)) + (1.0 - alpha) * bg
            else:
                eb = ti.exp((self.depth_eps - self.zmax[i, j]) / gamma)
                rgb = (sc + eb * bg) / (sw + eb)
            return ti.Vector([rgb[0], rgb[1], rgb[2], alpha])

    @ti.func
    def _softmax_weight(self, x, z, zmax, gamma):
        # z <= zmax (same arithmetic as in _bin), so the exponent is <= 0; no
        # clamp here: a min() would drop the gradient of the face at the max
        return ti.exp((z - zmax) / gamma) / (1.0 + ti.exp(-x))

    @ti.kernel
    def _composite(self, pairs: ti.template(), kept_pairs: ti.template(), frame: ti.i32, n_pairs: ti.i32,
                   sigma: float, gamma: float):
        """Forward: per pixel, its own pairs (contiguous, pixel-major) summed in list
        order, so the sums do not depend on threads.  Not differentiated (the inner
        loop carries sums: DESIGN.md rule 4); `_accumulate` is its differentiable twin.
        With keep_frames the pairs and sums are also kept in slot `frame` (`_restore`)."""
        W = ti.static(self.width)
        if ti.static(self.keep_frames):
            ti.loop_config(serialize=ti.static(serial_loop(pairs.shape[0])))
            for e in range(n_pairs):
                kept_pairs[frame, e] = pairs[e]
        # silhouettes: a few operations per pixel (`_bin` summed the pairs)
        ti.loop_config(serialize=ti.static(self.shading == "silhouette" and serial_loop(self.width * self.height, 8)))
        for p in range(self.width * self.height):
            i = p // W
            j = p % W
            px, py = self._pixel_ndc(i, j)
            zm = self.zmax[i, j]
            off = self.pix_offset[p]
            slog = 0.0
            sw = 0.0
            sc = ti.Vector([0.0, 0.0, 0.0])
            if ti.static(self.shading == "silhouette"):
                slog = self.acc_log[i, j]          # summed by `_bin`
            else:
                for e in range(off, off + self.pix_count[p]):
                    f = pairs[e][1]
                    inside, d2, bc, z = self._face_geom(f, px, py)
                    x = ti.select(inside, d2, -d2) / sigma
                    slog += self._log1m_sigmoid(x)
                    wgt = self._softmax_weight(x, z, zm, gamma)
                    sw += wgt
                    sc += wgt * self._shaded(f, bc)
            if ti.static(self.shading != "silhouette"):      # a silhouette's acc_log is its sum already
                self.acc_log[i, j] = slog
                self.acc_w[i, j] = sw
                self.acc_c[i, j] = sc
            self.image[frame, i, j] = self._pixel_value(i, j, slog, sw, sc, gamma)
            if ti.static(self.keep_frames):
                self.kept_log[frame, i, j] = slog
                if ti.static(self.channels != 1):
                    self.kept_w[frame, i, j] = sw
                    self.kept_c[frame, i, j] = sc
                    self.kept_z[frame, i, j] = zm

    @ti.kernel
    def _accumulate(self, pairs: ti.template(), n_pairs: ti.i32, frame: ti.i32, sigma: float, gamma: float):
        """Differentiable twin of `_composite` (only its `.grad` runs; it reads the sums
        `_composite` left in acc_*): a flat loop over the pairs that only `+=` into
        per-pixel sums, then the per-pixel image.  Serial when deterministic: the
        reverse pair loop adds vertex, colour and light adjoints, the reverse pixel
        loop the background's, into shared locations.  Colour shadings only: silhouettes
        have their own backward, `_silhouette_grad`."""
        W = ti.static(self.width)
        ti.loop_config(serialize=self._serial)
        for e in range(n_pairs):
            pr = pairs[e]
            i = pr[0] // W
            j = pr[0] % W
            f = pr[1]
            px, py = self._pixel_ndc(i, j)
            inside, d2, bc, z = self._face_geom(f, px, py)
            x = ti.select(inside, d2, -d2) / sigma
            self.acc_log[i, j] += self._log1m_sigmoid(x)
            if ti.static(self.shading != "silhouette"):
                wgt = self._softmax_weight(x, z, self.zmax[i, j], gamma)
                col = self._shaded(f, bc)
                self.acc_w[i, j] += wgt
                self.acc_c[i, j] += wgt * col
        ti.loop_config(serialize=self._serial)
        for p in range(self.width * self.height):
            i = p // W
            j = p % W
            self.image[frame, i, j] = self._pixel_value(i, j, self.acc_log[i, j], self.acc_w[i, j],
                                                        self.acc_c[i, j], gamma)

    @ti.func
    def _seg_d2_grad(self, px, py, a, e, inv_l, g):
        """Adjoints (of the start a, of the end b = a + e; x and y) of `_seg_d2_edge(px, py, a, e, inv_l)`
        times g.  With d = p - a - t e: d^2 moves with t by -2 d . e, which is 0 where t lies strictly in
        (0, 1) (d is then normal to e) and t is a constant where the clamp holds it at 0 or 1, so only the
        ends' direct part is left: d(d^2)/da = -2 (1 - t) d, d(d^2)/db = -2 t d (the step-by-step reverse of
        the clamp and of inv_l, as Taichi's autodiff forms it, adds terms in d . e, zero but for rounding)."""
        t = ti.min(ti.max(((px - a[0]) * e[0] + (py - a[1]) * e[1]) * inv_l, 0.0), 1.0)
        gd = -2.0 * g * ti.Vector([px - a[0] - t * e[0], py - a[1] - t * e[1]])
        return (1.0 - t) * gd, t * gd

    @ti.func
    def _coverage_sum_grad(self, frame, i, j):
        """dL/dS of pixel (i, j) of silhouette frame `frame`: -c exp(c S) dL/dA (A = 1 - exp(c S),
        S = sum over the pixel's pairs of log(1 - D)), dL/dA taken by `_take_image_grad`."""
        c = ti.static(self._coverage_power)
        g_a = self._take_image_grad(frame, i, j)
        g_s = 0.0
        if g_a != 0.0:            # most pixels of a small object's frame: no exp
            g_s = -c * ti.exp(c * self._silhouette_sum(frame, i, j)) * g_a
        return g_s

    @ti.func
    def _take_image_grad(self, frame, i, j):
        """dL/dA of pixel (i, j) of silhouette frame `frame`, zeroed where it is not 0: consumed, as Taichi's
        reverse of the store `image[frame] = ...` does, so a frame rendered again in the same Tape (a
        checkpoint segment's first step repeats the previous segment's last) passes its image gradient on
        once, not twice."""
        g_a = self.image.grad[frame, i, j][0]
        if g_a != 0.0:            # most pixels of a small object's frame: no store
            self.image.grad[frame, i, j] = ti.Vector([0.0])
        return g_a

    @ti.func
    def _face_edges(self, a, b, c):
        """`_edge` of a face's three edges ab, bc, ca: (e_ab, 1/|e_ab|^2, e_bc, ..., 1/|e_ca|^2)."""
        eab, lab = self._edge(a, b)
        ebc, lbc = self._edge(b, c)
        eca, lca = self._edge(c, a)
        return eab, lab, ebc, lbc, eca, lca

    @ti.func
    def _edge_d2s(self, px, py, a, b, c, eab, lab, ebc, lbc, eca, lca):
        """Squared NDC distances from (px, py) to a face's edges ab, bc, ca (`_face_edges`)."""
        return self._seg_d2_edge(px, py, a, eab, lab), self._seg_d2_edge(px, py, b, ebc, lbc), \
            self._seg_d2_edge(px, py, c, eca, lca)

    @ti.func
    def _d2_adjoint(self, inside, dab, dbc, dca, g_s, inv_sigma, r2):
        """The backward pass of one pair's term log(1 - D) of its pixel's S, given g_s = dL/dS:
        (dL/d(d^2), the edge that d^2 is the distance to: 0 ab, 1 bc, 2 ca).  d^2 is the nearest
        edge's (ti.min's choice: the first on ties); dlog(1 - sigmoid(x))/dx = -sigmoid(x),
        x = +-d^2 / sigma (+ inside); zero past the cutoff (outside and d^2 >= r2).  inv_sigma = 1 / sigma
        (a multiply per pair where a divide would cost several)."""
        d2 = ti.min(dab, ti.min(dbc, dca))
        sign = ti.select(inside, 1.0, -1.0)
        x = sign * d2 * inv_sigma
        q = exp_neg(ti.abs(x))
        inv = 1.0 / (1.0 + q)
        sig = ti.select(x >= 0.0, inv, q * inv)                       # sigmoid(x), stable
        gd2 = ti.select(inside | (d2 < r2), -sig * sign * inv_sigma * g_s, 0.0)
        return gd2, ti.select(dab <= ti.min(dbc, dca), 0, ti.select(dbc <= dca, 1, 2))

    @ti.func
    def _corner_adjoints(self, px, py, a, b, c, eab, lab, ebc, lbc, eca, lca, gd2, edge):
        """dL/d(x, y) of the face's corners a, b, c, (ga, gb, gc), from gd2 = dL/d(d^2) of the pair at
        (px, py), through the distance to edge `edge` (`_d2_adjoint`).  Selects, no branches."""
        on_ab = edge == 0
        on_bc = edge == 1
        g0, g1 = self._seg_d2_grad(px, py, ti.select(on_ab, a, ti.select(on_bc, b, c)),
                                   ti.select(on_ab, eab, ti.select(on_bc, ebc, eca)),
                                   ti.select(on_ab, lab, ti.select(on_bc, lbc, lca)), gd2)
        zero = ti.Vector([0.0, 0.0])
        return ti.select(on_ab, g0, ti.select(on_bc, zero, g1)), ti.select(on_ab, g1, ti.select(on_bc, g0, zero)), \
            ti.select(on_ab, zero, ti.select(on_bc, g1, g0))

    @ti.kernel
    def _silhouette_grad(self, pairs: ti.template(), pair_grad: ti.template(), n_pairs: ti.i32, frame: ti.i32,
                         sigma: float, r2: float):
        """The backward pass of a silhouette frame, written out (its forward is `_bin`'s
        sum S(p) = sum over pairs of log(1 - D) and A = 1 - exp(c S), c the coverage power
        (1, or 1/2 when `closed`)): adds dL/d(NDC x, y) of every face corner into proj.grad.

        1. per pixel: dL/dS = -c exp(c S) dL/dA (into acc_log.grad; dL/dA is then zeroed);
        2. per pair, on threads: dL/dS dlog(1 - D)/dx dx/dd^2 dd^2/d(corners), with
           dlog(1 - sigmoid(x))/dx = -sigmoid(x), x = +-d^2 / sigma and d^2 the nearest edge's
           `_seg_d2`, into the pair's own row of pair_grad (no shared writes);
        3. the rows added into the corners' proj.grad in pair order (serially when
           deterministic: the same sums, bit for bit, on every run).
        """
        W = ti.static(self.width)
        ti.loop_config(serialize=ti.static(serial_loop(self.width * self.height, 8)))
        for i, j in ti.ndrange(self.height, self.width):
            self.acc_log.grad[i, j] = self._coverage_sum_grad(frame, i, j)
        for e in range(n_pairs):
            pr = pairs[e]
            i = pr[0] // W
            j = pr[0] % W
            idx = self.faces[pr[1]]
            px, py = self._pixel_ndc(i, j)
            a = self.proj[idx[0]]
            b = self.proj[idx[1]]
            c = self.proj[idx[2]]
            eab, lab, ebc, lbc, eca, lca = self._face_edges(a, b, c)
            dab, dbc, dca = self._edge_d2s(px, py, a, b, c, eab, lab, ebc, lbc, eca, lca)
            gd2, edge = self._d2_adjoint(self._tri_inside(a, b, c, px, py), dab, dbc, dca, self.acc_log.grad[i, j],
                                         1.0 / sigma, r2)
            ga, gb, gc = self._corner_adjoints(px, py, a, b, c, eab, lab, ebc, lbc, eca, lca, gd2, edge)
            out = ti.Vector([ga[0], ga[1], gb[0], gb[1], gc[0], gc[1]])
            pair_grad[e] = out
        ti.loop_config(serialize=self._serial)
        for e in range(n_pairs):
            idx = self.faces[pairs[e][1]]
            g = pair_grad[e]
            for k in ti.static(range(3)):
                self.proj.grad[idx[k]] += ti.Vector([g[2 * k], g[2 * k + 1], 0.0])

    @ti.kernel
    def _silhouette_grad_lanes(self, verts: ti.template(), slot: ti.i32, tile_faces: ti.template(), frame: ti.i32,
                               sigma: float, r2: float):
        """`_silhouette_grad` in pixel lanes (after `_bin_lanes`): per tile, in parallel, first its
        pixels' dL/dS as there, in (tile, row, group)[lane] layout (0 off the image), then per face of
        its list the corner adjoints of the face's pairs (`_d2_adjoint`, `_corner_adjoints`: zero
        past the cutoff) summed over the groups its box reaches, lanes apart, then over the lanes,
        into the tile's own tile_grad entry; these added into proj.grad tile by tile in list order
        (serially when deterministic).  It first projects verts[slot] again (`_project`), bins the
        tile lists again (`_bin_faces`) and zeroes the scratch gradients."""
        TS, TX, W, H, L = ti.static(self.tile_size, self.tiles_x, self.width, self.height, self.lane_count)
        cap = ti.static(tile_faces.shape[1])
        # the projection and the tile lists of the frame (a kept frame's were overwritten by the frames
        # rendered after it; both are deterministic, so they are the forward's), and the scratch gradients
        # zeroed: in this launch, not in launches of their own
        self._project(verts, slot)
        self._bin_faces(tile_faces, r2)
        self._zero_scratch_grads()
        ti.loop_config(serialize=self._lanes_serial)
        for t in range(self.tiles_x * self.tiles_y):
            ty = t // TX
            tx = t % TX
            inv_sigma = 1.0 / sigma
            r_far = ti.sqrt(r2) * 1.001 + 1e-6      # as in `_bin_lanes`
            # the tile's dL/dS first, while its pixels are in cache (every tile's: the image gradient
            # is consumed everywhere, `_coverage_sum_grad`; a tile with no face passes it on to nothing)
            if self.tile_count[t] == 0:
                for r, g in ti.ndrange(TS, TS // L):
                    for l in ti.static(range(L)):
                        if ty * TS + r < H and tx * TS + g * L + l < W:
                            self._take_image_grad(frame, ty * TS + r, tx * TS + g * L + l)
            else:
                for r, g in ti.ndrange(TS, TS // L):
                    for l in ti.static(range(L)):
                        g_s = 0.0
                        if ty * TS + r < H and tx * TS + g * L + l < W:
                            g_s = self._coverage_sum_grad(frame, ty * TS + r, tx * TS + g * L + l)
                        self.lane_gs[t, r, g][l] = g_s
            for k in range(ti.min(self.tile_count[t], cap)):
                a, b, c, eab, lab, ebc, lbc, eca, lca = self._tile_face(tile_faces[t, k])
                n0, o0, n1, o1, n2, o2 = self._edge_lines(a, b, c, eab, lab, ebc, lbc, eca, lca)
                for q in ti.static(range(6)):
                    for l in ti.static(range(L)):       # element by element (`_bin_lanes`)
                        self.lane_grad[t, q][l] = 0.0
                r0, r1, g0, g1 = self._box_span(tile_faces[t, k], tx, ty)
                for r in range(r0, r1 + 1):
                    for g in range(g0, g1 + 1):
                        # a group whose pixels all have dL/dS = 0 (no face within the cutoff there and
                        # the target 0, or a loss that ignores them), or that lies past one of the face's
                        # edges by more than the cutoff (`_beyond_edges`), adds nothing: skipped
                        any_gs = False
                        for l in ti.static(range(L)):
                            any_gs |= self.lane_gs[t, r, g][l] != 0.0
                        if any_gs and not self._beyond_edges(ty * TS + r, tx * TS + g * L, n0, o0, n1, o1, n2, o2,
                                                             r_far):
                            # in stages ending in stores of their lanes, as in `_bin_lanes`
                            self._lane_distances(t, ty * TS + r, tx * TS + g * L, a, b, c, eab, lab, ebc, lbc, eca, lca)
                            live = False
                            for l in ti.static(range(L)):
                                gd2, edge = self._d2_adjoint(self.lane_tmp[t, 3][l] > 0.0, self.lane_tmp[t, 0][l],
                                                             self.lane_tmp[t, 1][l], self.lane_tmp[t, 2][l],
                                                             self.lane_gs[t, r, g][l], inv_sigma, r2)
                                self.lane_tmp[t, 4][l] = gd2
                                self.lane_tmp[t, 5][l] = ti.cast(edge, float)
                                live |= gd2 != 0.0
                            if live:                     # groups with no pair within the cutoff: skipped
                                for l in ti.static(range(L)):
                                    px, py = self._pixel_ndc(ty * TS + r, tx * TS + g * L + l)
                                    ga, gb, gc = self._corner_adjoints(px, py, a, b, c, eab, lab, ebc, lbc, eca, lca,
                                                                       self.lane_tmp[t, 4][l],
                                                                       ti.cast(self.lane_tmp[t, 5][l], ti.i32))
                                    gl = ti.Vector([ga[0], ga[1], gb[0], gb[1], gc[0], gc[1]])
                                    for q in ti.static(range(6)):
                                        self.lane_grad[t, q][l] = self.lane_grad[t, q][l] + gl[q]
                g_sum = ti.Vector([0.0, 0.0, 0.0, 0.0, 0.0, 0.0])
                for q in ti.static(range(6)):
                    for l in ti.static(range(L)):
                        g_sum[q] += self.lane_grad[t, q][l]
                self.tile_grad[t, k] = g_sum
        ti.loop_config(serialize=self._serial)
        for t in range(self.tiles_x * self.tiles_y):
            for k in range(ti.min(self.tile_count[t], cap)):
                idx = self.faces[tile_faces[t, k]]
                g = self.tile_grad[t, k]
                for q in ti.static(range(3)):
                    self.proj.grad[idx[q]] += ti.Vector([g[2 * q], g[2 * q + 1], 0.0])

    # --------------------------------------------------------------- driver
    def _run_bin(self, r2, sigma, clear_grads, frame, verts, slot):
        """Bin (and, for silhouettes, sum) the frame that `_prepare` projected (pixel lanes: project
        verts[slot] and bin it), growing the capacities until it fits; returns the number of (pixel,
        face) pairs (0 in pixel lanes: no list, and image[frame] composited already).  clear_grads: the
        pair list's `_bin` zeroes the scratch gradients too (pixel lanes: their backward kernel does)."""
        while True:
            if self.pixel_lanes:
                self._bin_lanes(verts, slot, self.tile_faces, r2, sigma, frame)
            else:
                self._bin(self.tile_faces, self.pix_mask, self.pairs, r2, sigma, clear_grads)
            # two scalar reads: to_numpy launches a parallel copy (~70 us here) per frame
            n_pairs = 0 if self.pixel_lanes else int(self.counters[0])
            max_tile = int(self.counters[1])
            if self.binning and max_tile > self.tile_capacity:
                self._alloc_tiles(int(max_tile * 1.25) + 8)
                self.regrows += 1
                continue
            if n_pairs > self.pair_capacity:
                self._alloc_pairs(int(n_pairs * 1.25) + 1024)
                self.regrows += 1
                continue
            self.num_pairs = n_pairs
            return n_pairs

    @ti.kernel
    def _clear_scratch_grads(self):
        self._zero_scratch_grads()

    @ti.kernel
    def _restore(self, kept_pairs: ti.template(), pairs: ti.template(), frame: ti.i32, n_pairs: ti.i32):
        """The scratch buffers as `_bin` + `_composite` left them for kept frame `frame`
        (its pairs, per-pixel sums and zmax; what `_accumulate.grad` reads), and the
        scratch gradients zeroed (the pair list; pixel lanes need none of it:
        `_silhouette_grad_lanes`)."""
        ti.loop_config(serialize=ti.static(serial_loop(pairs.shape[0])))
        for e in range(n_pairs):
            pairs[e] = kept_pairs[frame, e]
        ti.loop_config(serialize=ti.static(serial_loop(self.width * self.height)))
        for i, j in ti.ndrange(self.height, self.width):
            self.acc_log[i, j] = self.kept_log[frame, i, j]
            if ti.static(self.channels != 1):
                self.acc_w[i, j] = self.kept_w[frame, i, j]
                self.acc_c[i, j] = self.kept_c[frame, i, j]
                self.zmax[i, j] = self.kept_z[frame, i, j]
        self._zero_scratch_grads()

    @ti.func
    def _zero_scratch_grads(self):
        """Zero the gradients of the per-frame scratch fields (they are reused by every frame).  A
        silhouette's per-pixel sums need none: its backward sets every pixel's dL/dS before reading it."""
        if ti.static(self.channels != 1):
            ti.loop_config(serialize=ti.static(serial_loop(self.width * self.height)))
            for i, j in ti.ndrange(self.height, self.width):
                self.acc_log.grad[i, j] = 0.0
                self.acc_w.grad[i, j] = 0.0
                self.acc_c.grad[i, j] = ti.Vector([0.0, 0.0, 0.0])
        ti.loop_config(serialize=ti.static(serial_loop(self.proj.shape[0])))
        for v in range(self.proj.shape[0]):
            self.proj.grad[v] = ti.Vector([0.0, 0.0, 0.0])
        ti.loop_config(serialize=ti.static(serial_loop(self.face_shade.shape[0])))
        for f in range(self.face_shade.shape[0]):
            self.face_shade.grad[f] = ti.Vector([0.0, 0.0, 0.0])
        ti.loop_config(serialize=ti.static(serial_loop(self.vnormal.shape[0])))
        for v in range(self.vnormal.shape[0]):
            self.vnormal.grad[v] = ti.Vector([0.0, 0.0, 0.0])
            self.vnormal_sum.grad[v] = ti.Vector([0.0, 0.0, 0.0])
        ti.loop_config(serialize=ti.static(serial_loop(self.light_unit.shape[0])))
        for l in range(self.light_unit.shape[0]):
            self.light_unit.grad[l] = ti.Vector([0.0, 0.0, 0.0])
        ti.loop_config(serialize=True)        # one iteration: no thread-pool dispatch
        for _ in range(1):
            self.cam_eff_R.grad[None] = ti.Matrix.zero(float, 3, 3)
            self.cam_eff_t.grad[None] = ti.Vector([0.0, 0.0, 0.0])
            self.cam_eff_f.grad[None] = ti.Vector([0.0, 0.0])

    def _composite_frame(self, frame, n, sigma, gamma, token):
        """`_composite` of the binned pairs into `image[frame]`, kept for the backward pass
        (keep_frames) under `token` (pixel lanes: `_bin_lanes` composited and kept it)."""
        if self.pixel_lanes:
            if self.keep_frames:
                self._kept_tokens[frame] = token
        elif self.keep_frames:
            if n > self.kept_capacity or self._kept_tree is None:    # drops the frames kept so far
                self._alloc_kept(int(n * 1.25) + 1024)
            self._composite(self.pairs, self.kept_pairs, frame, n, sigma, gamma)
            self._kept_tokens[frame] = token
        else:
            self._composite(self.pairs, self.pairs, frame, n, sigma, gamma)
        self._scratch_token = token

    def _forward(self, verts, slot, frame, token):
        if not self.pixel_lanes:            # pixel lanes project in their binning kernel
            self._prepare(verts, slot)
        n = self._run_bin(self._r2, self._sigma, False, frame, verts, slot)
        # what backward needs to reproduce this frame (sigma may be changed later)
        token.update(n=n, sigma=self._sigma, gamma=self._gamma, r2=self._r2)
        self._composite_frame(frame, n, self._sigma, self._gamma, token)

    def _backward(self, verts, slot, frame, token):
        n, sigma, gamma = token["n"], token["sigma"], token["gamma"]
        # the scratch buffers still hold this frame (it was the last one rendered), or it was kept
        scratch = self._scratch_token is token and not self.always_recompute
        kept = self.keep_frames and self._kept_tokens[frame] is token and not self.always_recompute
        if self.pixel_lanes:
            # the frame's sums stay where its binning left them (`_silhouette_sum`), and
            # `_silhouette_grad_lanes` projects the vertices, bins the tile lists again and zeroes the
            # scratch gradients itself
            if kept and not scratch:
                self._scratch_token = token
            elif not scratch:
                # recomputed (keep_frames off, always_recompute): the backward kernel projects and bins this
                # frame a second time (O(vertices + faces), serial); skipping that would take a second
                # compiled variant of the backward kernel, the renderer's largest
                self._run_bin(token["r2"], sigma, False, frame, verts, slot)
                self._composite_frame(frame, 0, sigma, gamma, token)
            self._silhouette_grad_lanes(verts, slot, self.tile_faces, frame, sigma, token["r2"])
            self._prepare.grad(verts, slot)
            return
        if scratch:
            # no recompute needed, only clear the scratch gradients
            self._clear_scratch_grads()
        elif kept:
            # only the projection is recomputed, pairs and sums are copied back
            self._prepare(verts, slot)
            self._restore(self.kept_pairs, self.pairs, frame, n)
            self._scratch_token = token
        else:
            self._prepare(verts, slot)
            n = self._run_bin(token["r2"], sigma, True, frame, verts, slot)
            self._composite_frame(frame, n, sigma, gamma, token)
        if self.channels == 1:
            self._silhouette_grad(self.pairs, self.pair_grad, n, frame, sigma, token["r2"])
        else:
            self._accumulate.grad(self.pairs, n, frame, sigma, gamma)
        self._prepare.grad(verts, slot)

    def _check_verts_field(self, verts):
        shape = getattr(verts, "shape", None)
        n = getattr(verts, "n", None)
        if not hasattr(verts, "snode") or shape is None:
            raise _err(TypeError, f"verts must be a Taichi vector field of shape (slots, N) with 3 components, "
                                  f"got {type(verts).__name__}")
        if len(shape) != 2 or n != 3 or getattr(verts, "m", 1) != 1:
            raise _err(ValueError, f"verts must be a Taichi field of shape (slots, N) of 3-vectors, "
                                   f"got shape {shape} with n={n}")
        if verts.dtype != self.proj.dtype:
            raise _err(TypeError, f"verts has dtype {verts.dtype}; expected the default float {self.proj.dtype}")
        if self._max_vid >= shape[1]:
            raise _err(ValueError, f"vertex_ids reach index {self._max_vid} but verts has only {shape[1]} "
                                   f"entries per slot (shape {shape})")
        return shape

    def render(self, verts, slot=0, frame=0):
        """Render `verts[slot, vertex_ids[v]]` into `image[frame]` (one differentiable Tape entry).

        `verts`: a Taichi field of shape (slots, N) of 3-vectors (world space),
        e.g. a simulator's `particle_q`.  Gradients of a loss on `image` flow to
        `verts.grad[slot, vertex_ids[v]]` (when `verts` has needs_grad) and to
        the colour and light fields.  Render each frame at most once per Tape.
        """
        shape = self._check_verts_field(verts)
        for name, val, hi in (("slot", slot, shape[0]), ("frame", frame, self.frames)):
            if isinstance(val, bool) or not isinstance(val, (int, np.integer)):
                raise _err(TypeError, f"{name}={val!r} must be an integer")
            if not 0 <= val < hi:
                raise _err(IndexError, f"{name}={val} out of range [0, {hi - 1}]")
        self._op(verts, int(slot), int(frame), {})

    def render_numpy(self, verts, frame=0) -> np.ndarray:
        """Render surface vertices given as a (V, 3) array; returns image[frame] as (H, W, channels)."""
        arr = np.asarray(verts)
        if arr.shape != (self.num_vertices, 3):
            raise _err(ValueError, f"verts must have shape ({self.num_vertices}, 3), got {arr.shape}")
        if not (np.issubdtype(arr.dtype, np.floating) or np.issubdtype(arr.dtype, np.integer)):
            raise _err(TypeError, f"verts must be a float array, got dtype {arr.dtype}")
        arr = arr.astype(np.float64)
        if not np.all(np.isfinite(arr)):
            bad = int(np.argwhere(~np.isfinite(arr))[0][0])
            raise _err(ValueError, f"verts contains a non-finite value (NaN or inf) at vertex {bad}: "
                                   f"{arr[bad].tolist()}")
        if isinstance(frame, bool) or not isinstance(frame, (int, np.integer)) or not 0 <= frame < self.frames:
            raise _err(IndexError, f"frame={frame!r} out of range [0, {self.frames - 1}]")
        if self._np_verts is None:
            self._np_verts = ti.Vector.field(3, float, shape=(1, self._max_vid + 1))
        full = np.zeros((1, self._max_vid + 1, 3), dtype=np_float())
        full[0, self.vertex_ids] = arr
        self._np_verts.from_numpy(full)
        self._op(self._np_verts, 0, int(frame), {})
        return self.image.to_numpy()[frame]
