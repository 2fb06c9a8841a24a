"""Differentiable soft rasterizer (SoftRas, Liu et al. 2019) in Taichi: the facade over its stages.

Model, per pixel p and face j (DESIGN.md sections 4 and 7; the formulas live in the stage modules):

* coverage D_j(p) = sigmoid(+-d_j(p)^2 / sigma) and silhouette A(p) = 1 - prod_j (1 - D_j(p))^c,
  c = 1 (SoftRas) or 1/2 for `closed` surfaces (coverage.py; `Coverage`);
* depth-softmax weights w_j = D_j exp(z_j / gamma), z_j the normalised inverse depth interpolated with
  perspective-correct barycentrics, clipped and renormalised (projection.py);
* colour by `blend`: "coverage" I = A C + (1 - A) B (default) or SoftRas's "softmax" (shading.py);
* a differentiable camera correction `camera_delta`, `focal_scale` (projection.py).

Only pairs (p, j) with p inside triangle j or d^2 < sigma ln(1/coverage_eps - 1) (D above
`coverage_eps`) are evaluated; the rest are treated as D = 0.

How a frame is rendered, by stages that hand each other their fields (all of it is ONE entry on a
`ti.ad.Tape`, see `tigradsim.custom_op`, because the scratch buffers are re-used every frame):

1. `Shader.prepare` (differentiable): the corrected camera, the vertices `verts[slot, vertex_ids[v]]`
   projected to NDC + depth (`Projector`), every face Lambert-shaded (`Shader`);
2. `Binner`: faces into tiles, each tile's list sorted;
3. either the pair list (`PairList`: per-pixel cutoff test, pairs, `composite`; backward
   `accumulate.grad` for colour, `silhouette_grad` for silhouettes) or, for silhouettes on CPUs, pixel
   lanes (`PixelLanes`: no pair list, one kernel forward and one backward);
4. the backward pass needs the frame's pairs and per-pixel sums: `KeptFrames` keeps them (the default
   below a memory budget) and they are copied back after re-running only step 1; otherwise it re-runs
   1-3 for its frame.  Either is skipped when its frame was the last one rendered; the scratch
   gradients are cleared either way.

`reference.py` is a slow numpy float64 rasterizer of the same model that the tests compare every path
against.  Reproducibility: when `tigradsim.core.runtime.deterministic()` is True (the CPU default)
every loop that adds into shared locations in a thread-dependent order runs serially, so frames and
gradients are bit-identical from run to run.

Image layout: `image` is a Taichi vector field of shape (frames, H, W) with `channels` components:
1 (the silhouette A) for shading="silhouette", else 4 (R, G, B, A).  Row 0 is the top of the image.
"""
import math

import numpy as np
import taichi as ti

from tigradsim.core.aliases import alias_property, renamed_keyword
from tigradsim.core.model import has_grad
from tigradsim.core.runtime import custom_op, deterministic, ensure_init, np_float
from tigradsim.exec.simd import lane_count
from tigradsim.io.meshes import unpaired_edge

from ..camera import Camera
from .binning import Binner
from .kept import KeptFrames
from .lanes import PixelLanes
from .options import (BLENDS, COLOR_MODES, KEEP_FRAMES_MAX_BYTES, NORMALS, PIXEL_LANES_MIN,
                      PIXEL_LANES_SERIAL_PIXELS, SHADINGS, check_choice, check_count, check_faces, check_positive,
                      err, parse_lights, pixel_lane_count, resolve_options, vertex_ids_of, warn_softmax_gamma)
from .pairs import PairList
from .projection import Projector
from .shading import Shader

# zmax start value in coverage mode: the softmax over faces only (no background term)
_NO_DEPTH = -1e30


class SoftRasterizer:
    """Soft rasterizer of one triangle mesh into `frames` images.

    Args:
        camera: a `Camera` (fixes width, height and the projection type).
        faces: (F, 3) integer array of vertex indices (into the surface vertices
            0..vertex_count-1), counter-clockwise seen from outside.
        vertex_count: number V of surface vertices (`num_vertices=` is its older name).
        frames: number of frames in `image`.
        coverage, surface, blending, vertex_map, schedule: option objects (`options.py`: `Coverage`,
            `Surface`, `Blending`, `VertexMap`, `Schedule`; None: their defaults).
        **keywords: any field of those by its own name (`sigma=`, `shading=`, `pixel_lanes=`, ...),
            replacing it; `sigma` is `edge_softness`'s old name.

    Differentiable fields (all `needs_grad`): `vertex_colors`, `face_colors`, `light_dir`, `light_color`,
    `ambient`, `background` (3,), `background_image` (H, W) of RGB, `camera_delta` (6,: rotation vector
    [rad], translation [world units]; zero), `focal_scale` (0-D, multiplies fx and fy; 1), and the vertex
    field passed to `render`.  `image` holds the frames.  Fit the camera with
    `tgs.Param(ren.camera_delta, "camera_pose")` and `tgs.Param(ren.focal_scale, "focal", log_space=True)`.
    Stages: `projector`, `shader`, `binner`, `pair_list`, `lanes`, `kept`.
    """

    def __init__(self, camera: Camera, faces, vertex_count=None, frames=1, *, coverage=None, surface=None,
                 blending=None, vertex_map=None, schedule=None, num_vertices=None, **keywords):
        ensure_init()
        opts = resolve_options(dict(coverage=coverage, surface=surface, blending=blending, vertex_map=vertex_map,
                                    schedule=schedule), keywords)
        cov, surf, blend_o, vmap, sched = (opts[k] for k in ("coverage", "surface", "blending", "vertex_map",
                                                             "schedule"))
        self.options = opts
        if not isinstance(camera, Camera):
            raise err(TypeError, f"camera must be a tigradsim.renderers.Camera, got {type(camera).__name__}")
        vertex_count, name = renamed_keyword("vertex_count", vertex_count, "num_vertices", num_vertices,
                                             owner="SoftRasterizer")
        V = check_count(name, vertex_count)
        faces = check_faces(faces, V)
        F = faces.shape[0]
        self.frames = check_count("frames", frames)
        shading = check_choice("shading", surf.shading, SHADINGS)
        check_choice("color_mode", surf.color_mode, COLOR_MODES)
        check_choice("normals", surf.normals, NORMALS)
        blend = "coverage" if blend_o.blend is None else blend_o.blend
        if blend not in BLENDS:
            raise err(ValueError, f"blend={blend!r} must be one of {BLENDS} (or None: 'coverage')")
        blend_o = type(blend_o)(blend=blend, gamma=blend_o.gamma, depth_eps=blend_o.depth_eps,
                                background=blend_o.background)
        coverage_eps = check_positive("coverage_eps", cov.coverage_eps)
        if coverage_eps >= 0.5:
            raise err(ValueError, f"coverage_eps={coverage_eps} must lie in (0, 0.5)")
        tile_size = check_count("tile_size", sched.tile_size)
        float_bytes = np.dtype(np_float()).itemsize
        lanes = pixel_lane_count(sched.pixel_lanes, shading, sched.binning, tile_size, float_bytes,
                                 ti.lang.impl.current_cfg().arch == ti.cpu, lane_count)
        closed, cull = cov.closed, bool(cov.cull_backfaces)
        if not isinstance(closed, (bool, np.bool_)):
            raise err(TypeError, f"closed={closed!r} must be True or False")
        if closed:
            if cull:
                raise err(ValueError, "closed=True counts the front and the back face of every silhouette "
                                      "edge; it cannot be combined with cull_backfaces=True")
            edge = unpaired_edge(faces)
            if edge is not None:
                raise err(ValueError, f"closed=True but the faces are not closed surfaces: edge {edge} is not "
                                      "shared by exactly two faces (weld duplicate vertices, or pass closed=False)")
        lights = parse_lights(surf.lights, shading)
        self.vertex_ids, pixel_offsets = vertex_ids_of(vmap, V)
        self._max_vid = int(self.vertex_ids.max()) if self.vertex_ids.size else -1

        # plain settings (read by tests, benchmarks and the fitting code)
        self.vertex_count, self.face_count = V, F
        self.width, self.height = camera.width, camera.height
        self.shading, self.color_mode, self.normals, self.blend = shading, surf.color_mode, surf.normals, blend
        self.smooth = shading == "lambert" and surf.normals == "smooth"
        self.channels = 1 if shading == "silhouette" else 4
        self.alpha_channel = self.channels - 1
        self.cull_backfaces, self.closed = cull, bool(closed)
        self.binning = bool(sched.binning)
        self.perspective = camera.perspective
        self.coverage_eps = coverage_eps
        self.depth_eps = float(blend_o.depth_eps)
        self.tile_size = tile_size
        self.lane_count = lanes       # pixels per lane group; 0: the pair list
        self.pixel_lanes = lanes > 0
        self.light_count = len(lights[0])
        self.sigma = cov.edge_softness          # validated by the property setter
        self.gamma = blend_o.gamma
        keep = sched.keep_frames
        if keep is None:
            kept_floats = 1 if self.channels == 1 else 6
            keep = self.frames * self.height * self.width * kept_floats * float_bytes <= KEEP_FRAMES_MAX_BYTES
        if not isinstance(keep, (bool, np.bool_)):
            raise err(TypeError, f"keep_frames={keep!r} must be True, False or None (automatic)")
        self.keep_frames = bool(keep)

        # ---------------------------------------------------------------- stages
        serial = deterministic()     # ordered (serial) loops wherever threads would add into shared locations
        self.projector = Projector(camera, faces, self.vertex_ids, pixel_offsets, cull, serial)
        self.shader = Shader(self.projector, surf, blend_o, lights, 0.5 if self.closed else 1.0, serial)
        self.binner = Binner(self.projector, tile_size, self.pixel_lanes)
        self.kept = KeptFrames(self.frames, self.height, self.width, self.keep_frames, self.channels != 1)
        self.image = ti.Vector.field(self.channels, float, shape=(self.frames, self.height, self.width),
                                     needs_grad=True)
        z_init = float(blend_o.depth_eps) if blend == "softmax" else _NO_DEPTH
        self.pair_list = PairList(self.projector, self.shader, self.binner, self.kept, self.image, self.channels,
                                  self.binning, z_init, self.pixel_lanes, serial)
        self.lanes = PixelLanes(self.projector, self.shader, self.binner, self.kept, self.image, lanes,
                                self.width * self.height <= PIXEL_LANES_SERIAL_PIXELS, serial, PIXEL_LANES_MIN)
        warn_softmax_gamma(shading, blend, self._gamma, self.depth_eps)

        # the stages' public fields, under the names they always had
        p, s = self.projector, self.shader
        self.faces, self.proj, self.camera_delta, self.focal_scale = p.faces, p.proj, p.camera_delta, p.focal_scale
        self.vertex_colors, self.face_colors, self.ambient = s.vertex_colors, s.face_colors, s.ambient
        self.light_dir, self.light_color = s.light_dir, s.light_color
        self.background, self.background_image = s.background, s.background_image
        self.kept_log = self.kept.kept_log
        self._np_verts = None
        self.pair_count = 0
        self.regrows = 0
        self._scratch_token = None
        # True: backward re-runs a frame even when the scratch still holds it or it
        # was kept (benchmarks and tests of the recompute path)
        self.always_recompute = False
        self._op = custom_op(self._forward, self._backward)

    # ------------------------------------------------------------ settings
    @property
    def sigma(self):
        """The coverage's softness (NDC^2; `Coverage.edge_softness`)."""
        return self._sigma

    @sigma.setter
    def sigma(self, value):
        self._sigma = check_positive("sigma", value)
        # d^2 below which D = sigmoid(-d^2/sigma) exceeds coverage_eps
        self._r2 = self._sigma * math.log(1.0 / self.coverage_eps - 1.0)

    edge_softness = sigma

    # the older names of the counts (one scheme: `*_count`)
    num_vertices = alias_property("vertex_count")
    num_faces = alias_property("face_count")
    num_lights = alias_property("light_count")
    num_pairs = alias_property("pair_count")

    @property
    def gamma(self):
        return self._gamma

    @gamma.setter
    def gamma(self, value):
        self._gamma = check_positive("gamma", value)

    @property
    def camera(self):
        return self.projector.camera

    @property
    def tile_capacity(self):
        return self.binner.capacity

    @property
    def pair_capacity(self):
        return self.pair_list.capacity

    @property
    def kept_capacity(self):
        return self.kept.capacity

    def set_camera(self, camera: Camera):
        """Use another camera with the same image size and projection type."""
        self.projector.set_camera(camera)

    def camera_correction(self):
        """(omega (3,) [rad], dt (3,) [world units], focal_scale): the current correction."""
        return self.projector.camera_correction()

    def corrected_camera(self) -> Camera:
        """The camera the renderer projects with (`Projector.corrected_camera`)."""
        return self.projector.corrected_camera()

    def reset_camera_correction(self):
        """Set the correction to the identity (camera_delta = 0, focal_scale = 1)."""
        self.projector.reset_camera_correction()

    def set_background(self, value):
        """Set the background B(p) = `background` + `background_image`[p] (`Shader.set_background`)."""
        self.shader.set_background(value)

    def memory_bytes(self) -> int:
        """Bytes held by this renderer's fields (all stages'), gradients included (the render_numpy
        staging field too, once created)."""
        from taichi.lang.field import Field
        from taichi.lang.util import to_numpy_type

        fields = {}
        for owner in (self, self.projector, self.shader, self.binner, self.kept, self.pair_list, self.lanes):
            for value in vars(owner).values():
                if isinstance(value, Field):
                    fields[id(value)] = value
        total = 0
        for value in fields.values():
            comps = getattr(value, "n", 1) * (getattr(value, "m", 1) or 1)
            itemsize = np.dtype(to_numpy_type(value.dtype)).itemsize
            size = int(np.prod(value.shape)) * comps * itemsize
            total += size * (2 if has_grad(value) else 1)
        return total

    # --------------------------------------------------------------- driver
    def _run_bin(self, r2, sigma, clear_grads, frame, verts, slot):
        """Bin (and, for silhouettes, sum) the frame that `Shader.prepare` projected (pixel lanes: project
        verts[slot] and bin it), growing the capacities until it fits; returns the number of (pixel,
        face) pairs (0 in pixel lanes: no list, and image[frame] composited already).  clear_grads: the
        pair list's `bin` zeroes the scratch gradients too (pixel lanes: their backward kernel does)."""
        b = self.binner
        while True:
            if self.pixel_lanes:
                self.lanes.bin_lanes(verts, slot, b.tile_faces, r2, sigma, frame)
            else:
                self.pair_list.bin(b.tile_faces, b.pix_mask, self.pair_list.pairs, r2, sigma, clear_grads)
            # two scalar reads: to_numpy launches a parallel copy (~70 us here) per frame
            n_pairs = 0 if self.pixel_lanes else int(b.counters[0])
            max_tile = int(b.counters[1])
            if self.binning and max_tile > b.capacity:
                b.alloc(int(max_tile * 1.25) + 8)
                self.regrows += 1
                continue
            if n_pairs > self.pair_list.capacity:
                self.pair_list.alloc(int(n_pairs * 1.25) + 1024)
                self.regrows += 1
                continue
            self.pair_count = n_pairs
            return n_pairs

    def _composite_frame(self, frame, n, sigma, gamma, token):
        """`PairList.composite` of the binned pairs into `image[frame]`, kept for the backward pass
        (keep_frames) under `token` (pixel lanes: `bin_lanes` composited and kept it)."""
        pl, kept = self.pair_list, self.kept
        if self.pixel_lanes:
            if self.keep_frames:
                kept.tokens[frame] = token
        elif self.keep_frames:
            if not kept.fits(n):                     # drops the frames kept so far
                kept.alloc(int(n * 1.25) + 1024)
            pl.composite(pl.pairs, kept.kept_pairs, frame, n, sigma, gamma)
            kept.tokens[frame] = token
        else:
            pl.composite(pl.pairs, pl.pairs, frame, n, sigma, gamma)
        self._scratch_token = token

    def _forward(self, verts, slot, frame, token):
        if not self.pixel_lanes:            # pixel lanes project in their binning kernel
            self.shader.prepare(verts, slot)
        n = self._run_bin(self._r2, self._sigma, False, frame, verts, slot)
        # what backward needs to reproduce this frame (sigma may be changed later)
        token.update(n=n, sigma=self._sigma, gamma=self._gamma, r2=self._r2)
        self._composite_frame(frame, n, self._sigma, self._gamma, token)

    def _backward(self, verts, slot, frame, token):
        n, sigma, gamma = token["n"], token["sigma"], token["gamma"]
        pl = self.pair_list
        # the scratch buffers still hold this frame (it was the last one rendered), or it was kept
        scratch = self._scratch_token is token and not self.always_recompute
        kept = self.kept.holds(frame, token) and not self.always_recompute
        if self.pixel_lanes:
            # the frame's sums stay where its binning left them (`KeptFrames.sum_slot`), and
            # `silhouette_grad_lanes` projects the vertices, bins the tile lists again and zeroes the
            # scratch gradients itself
            if kept and not scratch:
                self._scratch_token = token
            elif not scratch:
                # recomputed (keep_frames off, always_recompute): the backward kernel projects and bins this
                # frame a second time (O(vertices + faces), serial); skipping that would take a second
                # compiled variant of the backward kernel, the renderer's largest
                self._run_bin(token["r2"], sigma, False, frame, verts, slot)
                self._composite_frame(frame, 0, sigma, gamma, token)
            self.lanes.silhouette_grad_lanes(verts, slot, self.binner.tile_faces, frame, sigma, token["r2"])
            self.shader.prepare.grad(verts, slot)
            return
        if scratch:
            # no recompute needed, only clear the scratch gradients
            pl.clear_scratch_grads()
        elif kept:
            # only the projection is recomputed, pairs and sums are copied back
            self.shader.prepare(verts, slot)
            pl.restore(self.kept.kept_pairs, pl.pairs, frame, n)
            self._scratch_token = token
        else:
            self.shader.prepare(verts, slot)
            n = self._run_bin(token["r2"], sigma, True, frame, verts, slot)
            self._composite_frame(frame, n, sigma, gamma, token)
        if self.channels == 1:
            pl.silhouette_grad(pl.pairs, pl.pair_grad, n, frame, sigma, token["r2"])
        else:
            pl.accumulate.grad(pl.pairs, n, frame, sigma, gamma)
        self.shader.prepare.grad(verts, slot)

    def _check_verts_field(self, verts):
        shape = getattr(verts, "shape", None)
        n = getattr(verts, "n", None)
        if not hasattr(verts, "snode") or shape is None:
            raise err(TypeError, f"verts must be a Taichi vector field of shape (slots, N) with 3 components, "
                                 f"got {type(verts).__name__}")
        if len(shape) != 2 or n != 3 or getattr(verts, "m", 1) != 1:
            raise err(ValueError, f"verts must be a Taichi field of shape (slots, N) of 3-vectors, "
                                  f"got shape {shape} with n={n}")
        if verts.dtype != self.proj.dtype:
            raise err(TypeError, f"verts has dtype {verts.dtype}; expected the default float {self.proj.dtype}")
        if self._max_vid >= shape[1]:
            raise err(ValueError, f"vertex_ids reach index {self._max_vid} but verts has only {shape[1]} "
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
                raise err(TypeError, f"{name}={val!r} must be an integer")
            if not 0 <= val < hi:
                raise err(IndexError, f"{name}={val} out of range [0, {hi - 1}]")
        self._op(verts, int(slot), int(frame), {})

    def render_numpy(self, verts, frame=0) -> np.ndarray:
        """Render surface vertices given as a (V, 3) array; returns image[frame] as (H, W, channels)."""
        arr = np.asarray(verts)
        if arr.shape != (self.vertex_count, 3):
            raise err(ValueError, f"verts must have shape ({self.vertex_count}, 3), got {arr.shape}")
        if not (np.issubdtype(arr.dtype, np.floating) or np.issubdtype(arr.dtype, np.integer)):
            raise err(TypeError, f"verts must be a float array, got dtype {arr.dtype}")
        arr = arr.astype(np.float64)
        if not np.all(np.isfinite(arr)):
            bad = int(np.argwhere(~np.isfinite(arr))[0][0])
            raise err(ValueError, f"verts contains a non-finite value (NaN or inf) at vertex {bad}: "
                                  f"{arr[bad].tolist()}")
        if isinstance(frame, bool) or not isinstance(frame, (int, np.integer)) or not 0 <= frame < self.frames:
            raise err(IndexError, f"frame={frame!r} out of range [0, {self.frames - 1}]")
        if self._np_verts is None:
            self._np_verts = ti.Vector.field(3, float, shape=(1, self._max_vid + 1))
        full = np.zeros((1, self._max_vid + 1, 3), dtype=np_float())
        full[0, self.vertex_ids] = arr
        self._np_verts.from_numpy(full)
        self._op(self._np_verts, 0, int(frame), {})
        return self.image.to_numpy()[frame]
