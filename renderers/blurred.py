"""Gaussian blur of images and `BlurredImageMSE`, the image loss summed over blurred copies.

`gaussian_blur` / `gaussian_weights` are the numpy side (targets, residuals, tests);
`BlurredImageMSE` runs the same separable blur as kernels on the rendered image so its
gradient reaches the renderer.  Blur widths are Gaussian standard deviations in pixels and
are called `blur_px` everywhere (the renderer's own edge width is `Coverage.edge_softness`).
"""

import numpy as np
import taichi as ti

from tigradsim.core.aliases import renamed_keyword
from tigradsim.core.runtime import np_float

from .losses import ImageMSE, _check_image

# The blur widths [px] when none are given: the unblurred loss plus two coarser levels.
DEFAULT_BLUR_PX = (0.0, 2.0, 4.0)


def gaussian_weights(blur_px):
    """Normalised 1D Gaussian taps (2 r + 1,) with standard deviation `blur_px` [px] and
    the radius r = max(1, ceil(3 blur_px)) [px]."""
    r = max(1, int(np.ceil(3 * blur_px)))
    w = np.exp(-0.5 * (np.arange(-r, r + 1) / blur_px) ** 2)
    return w / w.sum(), r


def gaussian_blur(img, blur_px):
    """Separable Gaussian blur of width `blur_px` [px] (its standard deviation) with zero
    padding over the first two axes (H, W, ...) of a numpy array: the numpy twin of
    `BlurredImageMSE`'s kernels.  `blur_px <= 0` returns a copy."""
    img = np.asarray(img, dtype=np.float64)
    if blur_px <= 0:
        return img.copy()
    w, r = gaussian_weights(blur_px)
    H, W = img.shape[:2]
    rest = [(0, 0)] * (img.ndim - 2)
    p = np.pad(img, [(0, 0), (r, r)] + rest)
    tmp = sum(w[k] * p[:, k:k + W] for k in range(2 * r + 1))
    p = np.pad(tmp, [(r, r), (0, 0)] + rest)
    return sum(w[k] * p[k:k + H] for k in range(2 * r + 1))


class BlurredImageMSE(ImageMSE):
    """`loss += weight * sum_s mean((G_s * image[frames][..., channels] - G_s * target)^2)`
    over blur widths s in `blur_px` [px, Gaussian standard deviations] (s = 0: the plain `ImageMSE`), G_s a Gaussian
    with zero padding (applied after compositing, when a plate is set).

    Why: with sharp silhouettes the pixel MSE grows like |error| once an edge is off
    by more than its soft width, and is flat once the object and its target no longer
    overlap, so gradient steps neither shrink near the answer nor find a far one.  The
    blurred copies make the loss quadratic out to ~s pixels and give it a gradient
    before the object overlaps the target.

    Args: as `ImageMSE`, plus `blur_px` (the blur widths [px]; `sigmas=` is its older
    name, still accepted; giving both is an error).  `target=None` starts from zeros for every
    image frame and channel (call `set_target` or `set_frames` before use; `VideoFit`
    does).  Call it once per Tape (its blurred images are scratch fields written once).
    """

    _pixel_buffer = True       # the blurred levels' terms

    def __init__(self, image, target=None, frames=None, channels=None, weight=1.0, blur_px=None,
                 background=None, sigmas=None):
        widths, name = renamed_keyword("blur_px", blur_px, "sigmas", sigmas, DEFAULT_BLUR_PX)
        sig = []
        for s in np.atleast_1d(np.asarray(widths, dtype=np.float64)):
            if s < 0 or not np.isfinite(s):
                raise ValueError(f"{name}: blur widths must be finite and >= 0 px, got {s}")
            sig.append(float(s))
        if target is None:
            (nframes, H, W), C = _check_image(image)
            nc = len(channels) if channels is not None else (3 if background is not None else C)
            target = np.zeros((nframes, H, W, nc))
            frames = None
        self.levels = []
        super().__init__(image, target, frames=frames, channels=channels, weight=weight, background=background)
        n, (H, W) = self.frame_count, self.size
        for s in sig:
            lvl = {"blur_px": s}
            if s > 0:
                w, r = gaussian_weights(s)
                lvl["r"] = r
                lvl["w"] = ti.field(float, shape=2 * r + 1)
                lvl["w"].from_numpy(w.astype(np_float()))
                for name in ("tmp", "blur"):
                    lvl[name] = ti.Vector.field(self.target.n, float, shape=(n, H, W), needs_grad=True)
                lvl["target"] = ti.Vector.field(self.target.n, float, shape=(n, H, W))
            self.levels.append(lvl)
        self._blur_targets()

    def _store_target(self, arr):
        super()._store_target(arr)
        self._blur_targets()

    def _blur_targets(self):
        if not self.levels:
            return
        t = np.moveaxis(self.target.to_numpy().astype(np.float64), 0, -1)      # (H, W, C, frames)
        for lvl in self.levels:
            if lvl["blur_px"] > 0:
                lvl["target"].from_numpy(np.moveaxis(gaussian_blur(t, lvl["blur_px"]), -1, 0).astype(np_float()))

    def level_residuals(self) -> np.ndarray:
        """The residuals of every blur level, (levels, K, H, W, C) numpy: sqrt(weight) x
        (G_s * compared values - G_s * target), so their mean square times the number of
        levels is this loss (least squares on the loss itself: `VideoFit.refine(levels=True)`).
        `residuals()` stays the plain compared-minus-target values."""
        K = self.count
        diff = np.moveaxis(self.compared() - self.target.to_numpy().astype(np.float64)[:K], 0, -1)  # (H, W, C, K)
        out = [gaussian_blur(diff, lvl["blur_px"]) for lvl in self.levels]     # the blur is linear
        return np.sqrt(self.weight) * np.moveaxis(np.stack(out), -1, 1)

    def __call__(self, loss):
        K = self.count
        scale = self.weight / float(np.prod(self.shape) * len(self.channels))
        for lvl in self.levels:
            if lvl["blur_px"] <= 0:
                self._mse(loss, scale)
            else:
                self._clear(lvl["tmp"], lvl["blur"], K)
                self._rows(self.image, lvl["tmp"], lvl["w"], lvl["r"], K)
                self._cols(lvl["tmp"], lvl["blur"], lvl["w"], lvl["r"], K)
                self._blurred_terms(lvl["blur"], lvl["target"], K)
                self._reduce(loss, scale, K)

    @ti.kernel
    def _clear(self, tmp: ti.template(), blur: ti.template(), K: ti.i32):
        for k, i, j in ti.ndrange(K, self.size[0], self.size[1]):   # a kernel, not fill(): it must sit on the Tape
            tmp[k, i, j] = ti.Vector.zero(float, ti.static(len(self.channels)))
            blur[k, i, j] = ti.Vector.zero(float, ti.static(len(self.channels)))

    @ti.kernel
    def _rows(self, image: ti.template(), tmp: ti.template(), w: ti.template(), r: ti.i32, K: ti.i32):
        if ti.static(self.serial):
            ti.loop_config(serialize=True)
        for k, i, j, d in ti.ndrange(K, self.size[0], self.size[1], 2 * r + 1):
            jj = j + d - r
            if 0 <= jj < self.size[1]:
                tmp[k, i, j] += w[d] * self._value(image, self.fid[k], i, jj)

    @ti.kernel
    def _cols(self, tmp: ti.template(), blur: ti.template(), w: ti.template(), r: ti.i32, K: ti.i32):
        if ti.static(self.serial):
            ti.loop_config(serialize=True)
        for k, i, j, d in ti.ndrange(K, self.size[0], self.size[1], 2 * r + 1):
            ii = i + d - r
            if 0 <= ii < self.size[0]:
                blur[k, i, j] += w[d] * tmp[k, ii, j]

    @ti.kernel
    def _blurred_terms(self, blur: ti.template(), target: ti.template(), K: ti.i32):
        for k, i, j in ti.ndrange(K, self.size[0], self.size[1]):
            e = blur[k, i, j] - target[k, i, j]
            self.pixel[k, i, j] = e.dot(e)
