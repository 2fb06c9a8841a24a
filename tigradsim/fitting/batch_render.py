"""Render B copies of a batched scene into one atlas image with ONE SoftRasterizer per frame.

A frame of a small scene renders in well under a kernel launch's worth of pixel work, so B copies
rendered by B renderers cost B times the launches; rendered as tiles of one wide image they cost the
launches of one (measured in benchmarks/bench_batch.py).

How a copy lands in its tile: the atlas camera has the copy camera's R, t, fx, fy, cx, cy and an image
B tiles wide (tiles side by side along the image's longer side, so s = min(width, height), the NDC
scale that edge_softness is measured in, stays the copy camera's), with a gutter of `gutter` pixels between
tiles, and copy b's vertices are moved by b * pitch pixels along the tiling axis after projection
(`SoftRasterizer(pixel_offsets=...)`; pitch = tile width + gutter): their depth, and so the soft
coverage, the depth softmax and perspective-correct interpolation, are unchanged.  Copy b's tile of the
atlas is then what the copy camera renders of copy b alone (to round-off), as long as no face of a copy
reaches a pixel of another tile (faces count only within the coverage cutoff, `SoftRasterizer`):
`check` raises when a copy leaves its tile and gutter (an object that leaves its view would spill into
the next tile).  Gutter pixels are excluded from the loss (`TiledSilhouetteMSE`), so the part of a
copy's halo that falls outside its tile counts as it does in an unbatched render (not at all).
(The copies were first sheared in camera space, X' = X + k_b Z, by a kernel of their own per frame: the
same images, with two more launches a frame and a (frames, V) field.)

Limits: silhouettes only (the tiled loss and the batched fit's use); the camera correction
(`camera_delta`, `focal_scale`) is the atlas's and is not per copy: fit the camera unbatched.
"""

import math

import numpy as np
import taichi as ti

from ..core.aliases import alias_property, renamed_keyword
from ..core.runtime import np_float
from ..renderers.losses import SilhouetteMSE, load_target


class AtlasRenderer:
    """B copies' surfaces as tiles of one silhouette image.

    Args:
        camera: the copy camera (a perspective `tigradsim.renderers.Camera`, W x H px).
        faces: (F, 3) int indices into the surface vertices (all copies').
        vertex_copy: (V,) int, the copy of each surface vertex.
        copies: B.  frames: frames rendered.
        edge_softness, gamma, coverage_eps: the SoftRasterizer's (shading "silhouette"; `sigma=` is
            edge_softness's older name).
        gutter: pixels between tiles (default: the coverage cutoff in pixels + max(2, tile/8)).
    Attributes: renderer (the SoftRasterizer over the atlas camera; `renderer.image` is
    (frames, H, Wa) or (frames, Ha, W)), tile (W, H), pitch, gutter, axis (1: tiles along columns,
    0: along rows), vertex_count (V; `num_vertices` is its older name).
    """

    num_vertices = alias_property("vertex_count")       # the older name

    def __init__(self, camera, faces, vertex_copy, copies, frames, edge_softness=None, gamma=1e-4,
                 coverage_eps=1e-4, gutter=None, sigma=None):
        from ..renderers import Camera, SoftRasterizer
        edge_softness, _ = renamed_keyword("edge_softness", edge_softness, "sigma", sigma, 1e-4, "AtlasRenderer")
        if not isinstance(camera, Camera) or not camera.perspective:
            raise ValueError(f"camera: expected a perspective tigradsim.renderers.Camera, got {camera!r}")
        vertex_copy = np.asarray(vertex_copy)
        if vertex_copy.ndim != 1 or vertex_copy.size == 0 or vertex_copy.min() < 0 or vertex_copy.max() >= copies:
            raise ValueError(f"vertex_copy: expected (V,) ints in [0, {copies - 1}], got {vertex_copy!r}")
        W, H = camera.width, camera.height
        self.axis = 1 if H <= W else 0                 # tile along the longer side: s = min(W, H) is kept
        tile = W if self.axis == 1 else H
        s = float(min(W, H))
        self.cutoff_px = math.sqrt(float(edge_softness) * math.log(1.0 / coverage_eps - 1.0)) * s / 2.0
        if gutter is None:
            gutter = int(math.ceil(self.cutoff_px)) + max(2, tile // 8)
        if isinstance(gutter, bool) or not isinstance(gutter, (int, np.integer)) or gutter < 0:
            raise ValueError(f"gutter: expected an integer >= 0 (pixels), got {gutter!r}")
        self.copies, self.frames, self.tile, self.gutter = int(copies), int(frames), (W, H), int(gutter)
        self.pitch = tile + self.gutter
        size = copies * tile + (copies - 1) * self.gutter
        Wa, Ha = (size, H) if self.axis == 1 else (W, size)
        self.camera = camera
        self.atlas_camera = Camera.from_opencv(camera.K, camera.R, camera.t, Wa, Ha, near=camera.near, far=camera.far)
        self.vertex_copy = vertex_copy.astype(np.int32)
        V = len(vertex_copy)
        self.vertex_count = V
        offsets = np.zeros((V, 2))
        offsets[:, 0 if self.axis == 1 else 1] = vertex_copy * self.pitch
        self.renderer = SoftRasterizer(self.atlas_camera, faces, V, frames=frames, edge_softness=edge_softness, gamma=gamma,
                                       shading="silhouette", coverage_eps=coverage_eps, pixel_offsets=offsets)
        self._rendered = {}        # frame -> (vertex field, slot) it was rendered from (`check`)

    def render(self, verts, slot, frame):
        """Render `verts[slot, :V]` (world [m], all copies) into atlas frame `frame` (one Tape entry)."""
        self.renderer.render(verts, slot, frame)
        self._rendered[int(frame)] = (verts, int(slot))

    # -- tiles ----------------------------------------------------------------
    def _tile_slice(self, b):
        start = b * self.pitch
        return slice(start, start + self.tile[0 if self.axis == 1 else 1])

    def split(self, image) -> np.ndarray:
        """Atlas frames (K, Ha, Wa[, C]) -> per-copy frames (B, K, H, W[, C])."""
        img = np.asarray(image)
        ax = 1 + self.axis
        return np.stack([np.take(img, np.arange(img.shape[ax])[self._tile_slice(b)], axis=ax)
                         for b in range(self.copies)])

    def tile_targets(self, targets) -> np.ndarray:
        """Per-copy videos (B, K, H, W[, C]) (arrays, float in [0, 1] or uint8) -> the atlas video
        (K, Ha, Wa, C) float64 with zeros in the gutters."""
        if not hasattr(targets, "__len__") or len(targets) != self.copies:
            raise ValueError(f"targets: expected one video per copy ({self.copies}), got "
                             f"{len(targets) if hasattr(targets, '__len__') else targets!r}")
        vids = [load_target(t, name=f"targets[{b}]") for b, t in enumerate(targets)]
        W, H = self.tile
        K = vids[0].shape[0]
        for b, v in enumerate(vids):
            if v.shape[:3] != (K, H, W) or v.shape[3] != vids[0].shape[3]:
                raise ValueError(f"targets[{b}]: shape {v.shape}, expected ({K}, {H}, {W}, {vids[0].shape[3]}) "
                                 "(every copy's video has the copy camera's size and the same frame count)")
        out = np.zeros((K, self.atlas_camera.height, self.atlas_camera.width, vids[0].shape[3]))
        for b, v in enumerate(vids):
            sl = self._tile_slice(b)
            if self.axis == 1:
                out[:, :, sl] = v
            else:
                out[:, sl] = v
        return out

    def mask(self) -> np.ndarray:
        """(Wa,) or (Ha,) float: 1 on tile pixels, 0 on gutter pixels, along the tiling axis."""
        n = self.atlas_camera.width if self.axis == 1 else self.atlas_camera.height
        m = np.zeros(n)
        for b in range(self.copies):
            m[self._tile_slice(b)] = 1.0
        return m

    def check(self, frames=None):
        """Raise RuntimeError when a copy's vertices (plus the coverage cutoff) reach another tile in
        any frame rendered so far (of the first `frames`; the atlas would then differ from the
        unbatched renders)."""
        items = sorted((k, v) for k, v in self._rendered.items() if frames is None or k < frames)
        if not items:
            return
        tables = {}                 # each vertex field read once
        for _, (verts, _) in items:
            if id(verts) not in tables:
                tables[id(verts)] = verts.to_numpy()
        pts = np.stack([tables[id(verts)][slot, :self.vertex_count] for _, (verts, slot) in items])
        K, V, _ = pts.shape
        uv = self.camera.project_pixels(pts.reshape(-1, 3)).reshape(K, V, 3)
        coord = uv[..., 0 if self.axis == 1 else 1]          # within the copy's own tile
        tile = self.tile[0 if self.axis == 1 else 1]
        lo, hi = -self.gutter - 1 + self.cutoff_px, tile + self.gutter - self.cutoff_px
        bad = ~((coord > lo) & (coord < hi))
        if np.any(bad):
            k, v = (int(i) for i in np.argwhere(bad)[0])
            b = int(self.vertex_copy[v])
            raise RuntimeError(f"copy {b} left its tile in frame {items[k][0]}: a vertex projects to pixel "
                               f"{coord[k, v]:.1f} along the tiling axis of its {tile}-px tile (allowed ({lo:.1f}, "
                               f"{hi:.1f}) with gutter {self.gutter} px and the coverage cutoff {self.cutoff_px:.1f} "
                               "px); it would reach the next copy's tile: keep the copies in view, or pass a larger "
                               "gutter=")


@ti.data_oriented
class TiledSilhouetteMSE(SilhouetteMSE):
    """Sum over tiles of each tile's silhouette MSE: `loss += weight * sum_b mean over (frames, tile
    pixels) of (A - T)^2`, the sum of the copies' `SilhouetteMSE`s; gutter pixels (tile_mask 0) are
    not compared.

    Args: image, target: the atlas (`AtlasRenderer.renderer.image`, `tile_targets(...)`);
    tile_mask: (Wa,) or (Ha,) 0/1 along the tiling axis (`AtlasRenderer.mask()`); tile_pixels: H * W of
    one tile.
    """

    def __init__(self, image, target, tile_mask, tile_pixels, weight=1.0):
        self._tile_pixels = int(tile_pixels)
        m = np.asarray(tile_mask, dtype=np.float64)
        self._mask_np = m.astype(bool)
        self._axis = 1 if len(m) == image.shape[2] else 0
        self.tile_mask = ti.field(float, shape=len(m))
        self.tile_mask.from_numpy(m.astype(np_float()))
        super().__init__(image, target, weight=weight)

    def __call__(self, loss):
        self._mse(loss, self.weight / float(self.count * self._tile_pixels))

    @ti.func
    def _pixel_weight(self, i, j):
        return self.tile_mask[j] if ti.static(self._axis == 1) else self.tile_mask[i]

    def residuals(self):
        """Compared minus target on tile pixels only, (K, H, B * W, 1) (or (K, B * H, W, 1))."""
        r = super().residuals()
        return r[:, :, self._mask_np] if self._axis == 1 else r[:, self._mask_np]
