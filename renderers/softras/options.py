"""The rasterizer's options, as a few small option objects, and their checks.

    SoftRasterizer(camera, faces, vertex_count, frames,
                   coverage=Coverage(edge_softness=1e-4, coverage_eps=1e-4, closed=False, cull_backfaces=False),
                   surface=Surface(shading="silhouette", color_mode="vertex", vertex_colors=None,
                                   face_colors=None, lights=None, ambient=(0.3, 0.3, 0.3), normals="flat"),
                   blending=Blending(blend=None, gamma=1e-4, depth_eps=1e-3, background=(0, 0, 0)),
                   vertex_map=VertexMap(vertex_ids=None, vertex_offset=0, pixel_offsets=None),
                   schedule=Schedule(tile_size=8, binning=True, pixel_lanes=None, keep_frames=None))

Every field may also be given as a keyword of its own name (`SoftRasterizer(..., shading="lambert",
sigma=3e-3)`, as before the options existed); a keyword replaces that field of its option object.
`sigma` is the old name of `Coverage.edge_softness` (the coverage's width, NDC^2) and stays accepted;
an image loss's blur widths are `blur_px` (`BlurredImageMSE`), and "sigma" elsewhere is a standard deviation.
"""
import dataclasses
import math
import warnings
from dataclasses import dataclass
from typing import Any, Optional

import numpy as np

SHADINGS = ("silhouette", "color", "lambert")
NORMALS = ("flat", "smooth")
COLOR_MODES = ("vertex", "face")
BLENDS = ("coverage", "softmax")

# Softmax blending warns when, for a surface halfway through the normalised depth
# range (z = 0.5), the background's weight relative to the surface's,
# exp(-(0.5 - depth_eps) / gamma), is below this: then colour carries no gradient
# w.r.t. geometry (gamma below ~0.036 with the default depth_eps).
SOFTMAX_BG_WEIGHT_WARN = 1e-6
# keep_frames=None keeps every frame's pairs and per-pixel sums for the backward pass when
# the per-pixel part (frames x H x W x kept floats) is at most this many bytes
# (121 frames of 256 x 256 silhouettes in float64: 63 MB; in RGB: 317 MB, not kept)
KEEP_FRAMES_MAX_BYTES = 256 * 2 ** 20
# pixel_lanes (silhouettes on CPUs) evaluates a tile's rows in groups of pixels, SIMD lanes: one float
# register's worth (`exec.simd.lane_count`: 8 in float32 where LLVM vectorizes 32 bytes wide, else 4), or
# this many where the tile size is no multiple of that; a tile size must be a multiple of some lane count
PIXEL_LANES_MIN = 4
# ... and runs its tile loops on one thread for images up to this many pixels (a 32x64 silhouette's
# pass takes ~0.1 ms, less than a hand-off to the thread pool).  Fixed per renderer, not
# `runtime.serial_loop`: the serial and the parallel loop compile to different SIMD code, whose
# sums may differ in the last bit, and the bookkeeping loops' limit must not change results
PIXEL_LANES_SERIAL_PIXELS = 2048


class RendererWarning(UserWarning):
    """A renderer setting that is legal but will not do what is probably wanted."""


def err(kind, msg):
    """An exception of type `kind` whose message names the renderer."""
    return kind(f"SoftRasterizer: {msg}")


def edge_softness_for_edge(edge_px: float, width: int, height: int) -> float:
    """The coverage softness s = `Coverage.edge_softness` (NDC^2; the keyword `sigma=` is its older name)
    at which a straight silhouette edge's coverage rises from 10 % to 90 % across `edge_px` pixels of a
    width x height image (`sigma_for_edge` is this function's older name).

    D = sigmoid(+-d^2 / s) reaches 10 % / 90 % at d = sqrt(ln(9) s) outside / inside
    the edge, so the 10-90 % width is 2 sqrt(ln(9) s) NDC units; one pixel is
    2 / min(width, height) NDC units (`Projector.pixel_ndc`).  A camera's box-filtered (area) coverage
    of an edge, e.g. a path tracer's antialiased mask or a real sensor's pixel, rises over
    0.8 px (10-90 % of a linear ramp one pixel wide), so edge_px = 0.8 makes the rendered
    silhouette edge as sharp as footage's.  A softer edge is not harmless there: the
    faces that meet at a silhouette edge each add their halo and `1 - prod(1 - D_j)`
    inflates the silhouette by several per cent of its area, which biases a fit to masks; even at
    this softness the two halos of a closed surface's silhouette edges inflate it, which
    `closed=True` removes (figures: benchmarks/RESULTS.md and MEASURED.md, "Moved from the code").
    Blur the image loss (`BlurredImageMSE`) for a wide basin instead.
    """
    for name, v in (("edge_px", edge_px), ("width", width), ("height", height)):
        if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)) or not v > 0 \
                or not math.isfinite(v):
            raise ValueError(f"edge_softness_for_edge: {name} must be a positive number, got {v!r}")
    pixel = 2.0 / min(width, height)
    return (float(edge_px) * pixel) ** 2 / (4.0 * math.log(9.0))



sigma_for_edge = edge_softness_for_edge      # its older name

# --------------------------------------------------------------------- options
@dataclass(frozen=True)
class Coverage:
    """Which faces cover which pixels, and how softly (coverage.py).

    edge_softness: s in D = sigmoid(+-d^2 / s), NDC^2, > 0 (larger: softer edges; `edge_softness_for_edge`;
        the keyword `sigma=` is its older name).
    coverage_eps: pairs with coverage below it are skipped (the cutoff), in (0, 0.5).
    closed: the faces form closed surfaces (every edge shared by exactly two faces, checked): each
        face's coverage counts half in the silhouette, so a silhouette edge is as wide as one face's and
        not inflated by the union of the front and back faces that meet there.  Use it for solids against
        real or path-traced masks; False is SoftRas / PyTorch3D's union.  Exact for flat faces of a few
        triangles; on a finely tessellated surface the inner edges of the front and back layers leave
        seams where they cross, so keep the union there.  Not with cull_backfaces.
    cull_backfaces: drop faces whose projection is clockwise.
    """
    edge_softness: float = 1e-4
    coverage_eps: float = 1e-4
    closed: bool = False
    cull_backfaces: bool = False


@dataclass(frozen=True)
class Surface:
    """What a face looks like (shading.py).

    shading: "silhouette" (1 channel), "color" (unlit albedo, RGBA) or "lambert" (albedo * (ambient +
        directional lights), RGBA).
    color_mode: "vertex" (interpolated `vertex_colors`) or "face" (`face_colors`).
    vertex_colors, face_colors: (V, 3) / (F, 3) or (3,) initial values of those fields (white).
    lights: list of (direction_to_light, rgb) pairs; their number is fixed, their values live in the
        `light_dir` / `light_color` fields.  ambient: RGB (field `ambient`).
    normals: Lambert shading with "flat" face normals, or "smooth": area-weighted vertex normals
        interpolated per pixel.
    """
    shading: str = "silhouette"
    color_mode: str = "vertex"
    vertex_colors: Any = None
    face_colors: Any = None
    lights: Any = None
    ambient: Any = (0.3, 0.3, 0.3)
    normals: str = "flat"


@dataclass(frozen=True)
class Blending:
    """How faces' colours combine into a pixel (shading.py's `pixel_value`).

    blend: "coverage" (I = A C + (1 - A) B; the default, None) or "softmax" (SoftRas's background term in
        the depth softmax).  Ignored for silhouettes.
    gamma: depth-softmax temperature, > 0.  depth_eps: the background's normalised inverse depth.
    background: an RGB triple (field `background`) or an (H, W, 3) / (H, W) plate (`set_background`).
    """
    blend: Optional[str] = None
    gamma: float = 1e-4
    depth_eps: float = 1e-3
    background: Any = (0.0, 0.0, 0.0)


@dataclass(frozen=True)
class VertexMap:
    """Where the surface vertices come from and land.

    vertex_ids: (V,) ints: surface vertex v reads `verts[slot, vertex_ids[v]]`; default
        `vertex_offset + arange(V)`.
    pixel_offsets: optional (V, 2) floats [px] added to each vertex's projected pixel (u, v) (constants,
        not differentiated); `fitting.batch_render.AtlasRenderer` tiles copies of a scene with them.
    """
    vertex_ids: Any = None
    vertex_offset: int = 0
    pixel_offsets: Any = None


@dataclass(frozen=True)
class Schedule:
    """How the work runs (images and gradients agree between choices to round-off; `tests/test_render_reference.py`).

    tile_size: tile edge in pixels for binning.
    binning: False evaluates every face at every pixel (brute force, the same cutoff test; for tests).
    pixel_lanes: silhouettes only: render and differentiate tile by tile, each face's rows of the tile in
        groups of pixels as SIMD lanes (lanes.py), instead of a list of (pixel, face) pairs (pairs.py).
        True: groups of one SIMD register's worth (`exec.simd.lane_count`; 4 where tile_size is no
        multiple of that); an integer: groups of that many pixels (a divisor of tile_size).  None: True
        on CPUs for silhouettes with binning and a tile_size divisible by `PIXEL_LANES_MIN`.
    keep_frames: keep every frame's pairs and per-pixel sums for the backward pass (kept.py) instead of
        re-rendering the frame there.  None: keep when the per-pixel part is at most
        `KEEP_FRAMES_MAX_BYTES`.
    """
    tile_size: int = 8
    binning: bool = True
    pixel_lanes: Any = None
    keep_frames: Any = None


OPTION_TYPES = {"coverage": Coverage, "surface": Surface, "blending": Blending, "vertex_map": VertexMap,
                "schedule": Schedule}
# keyword -> (option object, field); every field by its own name, plus the old names
KEYWORDS = {f.name: (group, f.name) for group, cls in OPTION_TYPES.items() for f in dataclasses.fields(cls)}
KEYWORDS["sigma"] = ("coverage", "edge_softness")


def resolve_options(given, keywords):
    """The five option objects from `given` (name -> object or None) and loose `keywords` (each replaces
    its field); raises TypeError naming an unknown keyword or an option of the wrong type."""
    out = {}
    for group, cls in OPTION_TYPES.items():
        obj = given.get(group)
        if obj is None:
            obj = cls()
        if not isinstance(obj, cls):
            raise err(TypeError, f"{group}={obj!r} must be a {cls.__name__} (or None for the defaults)")
        out[group] = obj
    if "sigma" in keywords and "edge_softness" in keywords:
        raise err(TypeError, "sigma and edge_softness name the same option (sigma is its old name): give one")
    updates = {group: {} for group in OPTION_TYPES}
    for name, value in keywords.items():
        if name not in KEYWORDS:
            raise err(TypeError, f"unknown option {name}={value!r}; expected one of {sorted(KEYWORDS)}")
        group, fname = KEYWORDS[name]
        updates[group][fname] = value
    return {g: dataclasses.replace(obj, **updates[g]) if updates[g] else obj for g, obj in out.items()}


# ------------------------------------------------------------------ checks
def check_positive(name, value):
    try:
        v = float(value)
    except (TypeError, ValueError) as exc:
        raise err(TypeError, f"{name}={value!r} must be a positive number") from exc
    if not (v > 0.0 and math.isfinite(v)):
        raise err(ValueError, f"{name}={value!r} must be a positive finite number (> 0)")
    return v


def check_count(name, value, minimum=1):
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        kind = "positive" if minimum == 1 else "non-negative"
        raise err(ValueError, f"{name}={value!r} must be a {kind} integer")
    return int(value)


def color_array(name, value, count, default):
    if value is None:
        value = default
    arr = np.asarray(value, dtype=np.float64)
    if arr.shape == (3,):
        arr = np.broadcast_to(arr, (count, 3)).copy()
    if arr.shape != (count, 3):
        raise err(ValueError, f"{name} must have shape ({count}, 3) or (3,), got {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise err(ValueError, f"{name} contains a non-finite value")
    return arr


def check_faces(faces, V):
    arr = np.asarray(faces)
    if arr.ndim != 2 or arr.shape[1] != 3 or arr.shape[0] == 0:
        raise err(ValueError, f"faces must have shape (F, 3) with F >= 1, got {arr.shape}")
    if not np.issubdtype(arr.dtype, np.integer):
        raise err(TypeError, f"faces must be an integer array, got dtype {arr.dtype}")
    lo, hi = int(arr.min()), int(arr.max())
    if lo < 0 or hi >= V:
        bad = lo if lo < 0 else hi
        row = int(np.argwhere((arr < 0) | (arr >= V))[0][0])
        raise err(ValueError, f"faces index vertex {bad} (face {row}: {arr[row].tolist()}) but "
                              f"vertex_count={V}; expected indices in [0, {V - 1}]")
    return arr


def check_choice(name, value, choices):
    if value not in choices:
        raise err(ValueError, f"{name}={value!r} must be one of {choices}")
    return value


def parse_lights(lights, shading):
    """(directions (L, 3), colours (L, 3)) of the `lights` option (one black light for Lambert without)."""
    if lights is None:
        lights = [((0.4, 0.8, 1.0), (0.7, 0.7, 0.7))]
    lights = list(lights)
    if len(lights) == 0 and shading == "lambert":
        lights = [((0.0, 0.0, 1.0), (0.0, 0.0, 0.0))]
    count = max(len(lights), 1)
    ldir = np.zeros((count, 3))
    lcol = np.zeros((count, 3))
    for k, item in enumerate(lights):
        try:
            d, c = item
        except (TypeError, ValueError) as exc:
            raise err(ValueError, f"lights[{k}]={item!r} must be a (direction, rgb) pair") from exc
        ldir[k] = color_array(f"lights[{k}] direction", d, 1, None)[0]
        lcol[k] = color_array(f"lights[{k}] color", c, 1, None)[0]
        if np.linalg.norm(ldir[k]) < 1e-12:
            raise err(ValueError, f"lights[{k}] direction={tuple(d)} is the zero vector")
    return ldir, lcol


def vertex_ids_of(vertex_map: VertexMap, V):
    """(vertex_ids as int32 (V,), pixel_offsets (V, 2) or None), checked."""
    vertex_ids, pixel_offsets = vertex_map.vertex_ids, vertex_map.pixel_offsets
    if vertex_ids is None:
        offset = vertex_map.vertex_offset
        if isinstance(offset, bool) or not isinstance(offset, (int, np.integer)) or offset < 0:
            raise err(ValueError, f"vertex_offset={offset!r} must be a non-negative integer")
        vertex_ids = np.arange(V, dtype=np.int64) + int(offset)
    vid = np.asarray(vertex_ids)
    if vid.shape != (V,):
        raise err(ValueError, f"vertex_ids must have shape ({V},) (one entry per surface vertex), got {vid.shape}")
    if not np.issubdtype(vid.dtype, np.integer):
        raise err(TypeError, f"vertex_ids must be integers, got dtype {vid.dtype}")
    if vid.size and vid.min() < 0:
        raise err(ValueError, f"vertex_ids contains a negative index {int(vid.min())}")
    if pixel_offsets is not None:
        pixel_offsets = np.asarray(pixel_offsets, dtype=np.float64)
        if pixel_offsets.shape != (V, 2):
            raise err(ValueError, f"pixel_offsets must have shape ({V}, 2) (one (u, v) offset in pixels per "
                                  f"surface vertex), got {pixel_offsets.shape}")
        if not np.all(np.isfinite(pixel_offsets)):
            raise err(ValueError, f"pixel_offsets must be finite, got a non-finite entry at row "
                                  f"{int(np.argwhere(~np.isfinite(pixel_offsets))[0, 0])}")
    return vid.astype(np.int32), pixel_offsets


def pixel_lane_count(pixel_lanes, shading, binning, tile_size, float_bytes, on_cpu, lane_count) -> int:
    """Pixels per lane group for the `pixel_lanes` option (`Schedule`; floats of `float_bytes`, the
    register's `lane_count(float_bytes)`), 0 for the pair list."""
    possible = shading == "silhouette" and bool(binning) and tile_size % PIXEL_LANES_MIN == 0
    if pixel_lanes is None:
        pixel_lanes = possible and on_cpu
    if isinstance(pixel_lanes, (bool, np.bool_)):
        if not pixel_lanes:
            return 0
        if not possible:
            raise err(ValueError, f"pixel_lanes=True needs shading='silhouette', binning=True and a tile_size "
                                  f"divisible by {PIXEL_LANES_MIN}; got shading={shading!r}, binning={binning!r}, "
                                  f"tile_size={tile_size}")
        lanes = lane_count(float_bytes)
        return lanes if tile_size % lanes == 0 else PIXEL_LANES_MIN
    if not isinstance(pixel_lanes, (int, np.integer)):
        raise err(TypeError, f"pixel_lanes={pixel_lanes!r} must be True, False, None (automatic) or a "
                             f"number of pixels per lane group")
    if pixel_lanes <= 0 or tile_size % pixel_lanes != 0 or shading != "silhouette" or not binning:
        raise err(ValueError, f"pixel_lanes={pixel_lanes} needs shading='silhouette', binning=True and a "
                              f"positive divisor of tile_size; got shading={shading!r}, binning={binning!r}, "
                              f"tile_size={tile_size}")
    return int(pixel_lanes)


def warn_softmax_gamma(shading, blend, gamma, depth_eps):
    """Warn (`RendererWarning`) when softmax blending's colour carries (almost) no geometry gradient."""
    if shading == "silhouette" or blend != "softmax":
        return
    w = math.exp(-(0.5 - depth_eps) / gamma)
    if w < SOFTMAX_BG_WEIGHT_WARN:
        warnings.warn(
            f"SoftRasterizer: blend='softmax' with gamma={gamma:g}: the background's weight in the depth "
            f"softmax is exp(-(z - depth_eps)/gamma) = {w:.1e} of a surface's at normalised inverse depth "
            f"z = 0.5, so every pixel near a face takes the face's full colour and the RGB channels carry "
            f"(almost) no gradient w.r.t. geometry (only the alpha channel does).  Use blend='coverage' "
            f"(I = A C + (1 - A) B), or gamma of order 0.1 or more.", RendererWarning, stacklevel=3)
