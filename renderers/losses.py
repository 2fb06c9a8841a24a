"""Image losses on rendered frames, as kernels that add into a 0-D loss field.

Each loss object holds its targets in Taichi fields; calling it, `lossobj(loss)`,
launches one kernel that does `loss[None] += weight * value`, so several losses
(and several frames) sum into one field inside a `ti.ad.Tape`.

* `ImageMSE`: mean over frames, pixels and the chosen channels of
  (image - target)^2.
* `SilhouetteMSE`: the same on the silhouette (alpha) channel only.
* `SoftIoU`: mean over frames of 1 - sum(A T) / sum(A + T - A T).
* `BlurredImageMSE`: `ImageMSE` summed over Gaussian-blurred copies of image and
  target (coarse to fine in one loss).

Targets: numpy arrays (K, H, W) or (K, H, W, C) (floats in [0, 1], or uint8
0-255), or a path accepted by `tigradsim.video.load_video` (a folder of PNGs, a
GIF, an MP4).  `frames[k]` is the image frame compared with target k (default:
0..K-1).
"""

import numpy as np
import taichi as ti

from tigradsim.runtime import np_float


def load_target(target) -> np.ndarray:
    """Targets as float (K, H, W, C) in [0, 1] from an array or a path."""
    if isinstance(target, (str, bytes)) or hasattr(target, "__fspath__"):
        from tigradsim.video import load_video

        arr = load_video(target).astype(np.float64) / 255.0
    else:
        arr = np.asarray(target)
        if np.issubdtype(arr.dtype, np.integer):
            arr = arr.astype(np.float64) / 255.0
        elif np.issubdtype(arr.dtype, np.floating) or arr.dtype == bool:
            arr = arr.astype(np.float64)
        else:
            raise TypeError(f"target: expected a float or uint8 array or a path, got dtype {arr.dtype}")
    if arr.ndim == 3:
        arr = arr[..., None]
    if arr.ndim != 4:
        raise ValueError(f"target: expected shape (K, H, W) or (K, H, W, C), got {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise ValueError("target: contains NaN or inf")
    return arr


def _check_image(image):
    shape = getattr(image, "shape", None)
    if shape is None or not hasattr(image, "snode") or len(shape) != 3:
        raise TypeError(f"image: expected a Taichi vector field of shape (frames, H, W) (SoftRasterizer.image), "
                        f"got {type(image).__name__} with shape {shape}")
    return shape, getattr(image, "n", 1)


def _frames(frames, k, nframes):
    ids = np.arange(k) if frames is None else np.asarray(frames)
    if ids.shape != (k,) or not np.issubdtype(ids.dtype, np.integer):
        raise ValueError(f"frames: expected {k} integer frame indices (one per target frame), got {frames!r}")
    if ids.size and (ids.min() < 0 or ids.max() >= nframes):
        raise ValueError(f"frames={ids.tolist()} out of range: the image has {nframes} frames")
    return ids.astype(np.int32)


def _to_silhouette(arr):
    if arr.shape[-1] == 4:
        return arr[..., 3:4]
    return arr.mean(axis=-1, keepdims=True)


@ti.data_oriented
class _TargetLoss:
    def __init__(self, image, target, frames=None, channels=None, weight=1.0):
        (nframes, H, W), C = _check_image(image)
        tgt = self._prepare_target(load_target(target))
        K, th, tw, Ct = tgt.shape
        if (th, tw) != (H, W):
            raise ValueError(f"target: frames are {th}x{tw} (HxW) but the image is {H}x{W}")
        if channels is None:
            channels = list(range(Ct)) if Ct <= C else None
        channels = [int(c) for c in np.atleast_1d(channels)] if channels is not None else None
        if channels is None or len(channels) != Ct or min(channels) < 0 or max(channels) >= C:
            raise ValueError(f"channels={channels}: expected {Ct} image channel indices in [0, {C - 1}] "
                             f"for a target with {Ct} channels")
        self.image = image
        self.channels = tuple(channels)
        self.weight = float(weight)
        self.shape = (K, H, W)
        self.fid = ti.field(ti.i32, shape=K)
        self.fid.from_numpy(_frames(frames, K, nframes))
        self.target = ti.Vector.field(Ct, float, shape=(K, H, W))
        self.set_target(tgt)

    def _prepare_target(self, arr):
        return arr

    def set_target(self, target):
        """Replace the target frames (same shape)."""
        arr = self._prepare_target(load_target(target))
        if arr.shape[:3] != self.shape or arr.shape[3] != self.target.n:
            raise ValueError(f"target: expected shape {self.shape + (self.target.n,)}, got {arr.shape}")
        self.target.from_numpy(arr.astype(np_float()))


class ImageMSE(_TargetLoss):
    """`loss += weight * mean((image[frames][..., channels] - target)^2)`.

    Args:
        image: `SoftRasterizer.image` (or any (frames, H, W) vector field).
        target: (K, H, W[, C]) array or path; C target channels are compared
            with image channels `channels` (default 0..C-1, so an RGB target
            is compared with the R, G, B of an RGBA image).
        frames: image frame of each target frame (default 0..K-1).
        weight: multiplier.
    """

    def __call__(self, loss):
        self._kernel(self.image, loss, self.weight / float(np.prod(self.shape) * len(self.channels)))

    @ti.kernel
    def _kernel(self, image: ti.template(), loss: ti.template(), scale: float):
        for k, i, j in self.target:
            f = self.fid[k]
            acc = 0.0
            for c in ti.static(range(len(self.channels))):
                e = image[f, i, j][self.channels[c]] - self.target[k, i, j][c]
                acc += e * e
            loss[None] += scale * acc


class SilhouetteMSE(ImageMSE):
    """MSE on the silhouette: image channel `channel` (default the last, alpha)
    against a target silhouette (K, H, W) (an RGBA target uses its alpha, an RGB
    one the mean of its channels)."""

    def __init__(self, image, target, frames=None, channel=None, weight=1.0):
        _, C = _check_image(image)
        channel = C - 1 if channel is None else channel
        super().__init__(image, target, frames=frames, channels=[channel], weight=weight)

    def _prepare_target(self, arr):
        return _to_silhouette(arr)


class SoftIoU(SilhouetteMSE):
    """`loss += weight * mean_k (1 - sum(A T) / sum(A + T - A T))` on the silhouette.

    Call it once per Tape (its per-frame sums are scratch fields).
    """

    def __init__(self, image, target, frames=None, channel=None, weight=1.0):
        super().__init__(image, target, frames=frames, channel=channel, weight=weight)
        K = self.shape[0]
        self.inter = ti.field(float, shape=K, needs_grad=True)
        self.union = ti.field(float, shape=K, needs_grad=True)

    def __call__(self, loss):
        self._iou(self.image, loss, self.weight / self.shape[0])

    @ti.kernel
    def _iou(self, image: ti.template(), loss: ti.template(), scale: float):
        for k in self.inter:
            self.inter[k] = 0.0
            self.union[k] = 0.0
        for k, i, j in self.target:
            a = image[self.fid[k], i, j][self.channels[0]]
            t = self.target[k, i, j][0]
            self.inter[k] += a * t
            self.union[k] += a + t - a * t
        for k in self.inter:
            loss[None] += scale * (1.0 - self.inter[k] / (self.union[k] + 1e-12))


def gaussian_weights(sigma):
    """Normalised 1D Gaussian taps (2 r + 1,) and the radius r = max(1, ceil(3 sigma)) [px]."""
    r = max(1, int(np.ceil(3 * sigma)))
    w = np.exp(-0.5 * (np.arange(-r, r + 1) / sigma) ** 2)
    return w / w.sum(), r


def gaussian_blur(img, sigma):
    """Separable Gaussian blur with zero padding over the first two axes (H, W, ...)
    of a numpy array: the numpy twin of `BlurredImageMSE`'s kernels."""
    img = np.asarray(img, dtype=np.float64)
    if sigma <= 0:
        return img.copy()
    w, r = gaussian_weights(sigma)
    H, W = img.shape[:2]
    rest = [(0, 0)] * (img.ndim - 2)
    p = np.pad(img, [(0, 0), (r, r)] + rest)
    tmp = sum(w[k] * p[:, k:k + W] for k in range(2 * r + 1))
    p = np.pad(tmp, [(r, r), (0, 0)] + rest)
    return sum(w[k] * p[k:k + H] for k in range(2 * r + 1))


class BlurredImageMSE(ImageMSE):
    """`loss += weight * sum_s mean((G_s * image[frames][..., channels] - G_s * target)^2)`
    over blur widths s in `sigmas` [px] (s = 0: the plain `ImageMSE`), G_s a Gaussian
    with zero padding.

    Why: with sharp silhouettes the pixel MSE grows like |error| once an edge is off
    by more than its soft width, and is flat once the object and its target no longer
    overlap, so gradient steps neither shrink near the answer nor find a far one.  The
    blurred copies make the loss quadratic out to ~s pixels and give it a gradient
    before the object overlaps the target.

    Args: as `ImageMSE`, plus `sigmas`.  `target=None` starts from zeros for every
    image frame and channel (call `set_target` before use; `VideoFit` does).
    Call it once per Tape (its blurred images are scratch fields written once).
    """

    def __init__(self, image, target=None, frames=None, channels=None, weight=1.0, sigmas=(0.0, 2.0, 4.0)):
        if target is None:
            (nframes, H, W), C = _check_image(image)
            target = np.zeros((nframes, H, W, C))
        super().__init__(image, target, frames=frames, channels=channels, weight=weight)
        K, H, W = self.shape
        self.levels = []
        for s in sigmas:
            s = float(s)
            if s < 0 or not np.isfinite(s):
                raise ValueError(f"sigmas: blur widths must be finite and >= 0 px, got {s}")
            lvl = {"sigma": s}
            if s > 0:
                w, r = gaussian_weights(s)
                lvl["r"] = r
                lvl["w"] = ti.field(float, shape=2 * r + 1)
                lvl["w"].from_numpy(w.astype(np_float()))
                for name in ("tmp", "blur"):
                    lvl[name] = ti.Vector.field(self.target.n, float, shape=(K, H, W), needs_grad=True)
                lvl["target"] = ti.Vector.field(self.target.n, float, shape=(K, H, W))
            self.levels.append(lvl)
        self._blur_targets()

    def set_target(self, target):
        super().set_target(target)
        if hasattr(self, "levels"):
            self._blur_targets()

    def _blur_targets(self):
        t = np.moveaxis(self.target.to_numpy().astype(np.float64), 0, -1)      # (H, W, C, K)
        for lvl in self.levels:
            if lvl["sigma"] > 0:
                lvl["target"].from_numpy(np.moveaxis(gaussian_blur(t, lvl["sigma"]), -1, 0).astype(np_float()))

    def __call__(self, loss):
        scale = self.weight / float(np.prod(self.shape) * len(self.channels))
        for lvl in self.levels:
            if lvl["sigma"] <= 0:
                self._kernel(self.image, loss, scale)
            else:
                self._clear(lvl["tmp"], lvl["blur"])
                self._rows(self.image, lvl["tmp"], lvl["w"], lvl["r"])
                self._cols(lvl["tmp"], lvl["blur"], lvl["w"], lvl["r"])
                self._mse(lvl["blur"], lvl["target"], loss, scale)

    @ti.kernel
    def _clear(self, tmp: ti.template(), blur: ti.template()):
        for k, i, j in tmp:      # a kernel, not fill(): it must sit on the Tape in order
            tmp[k, i, j] = ti.Vector.zero(float, ti.static(len(self.channels)))
            blur[k, i, j] = ti.Vector.zero(float, ti.static(len(self.channels)))

    @ti.kernel
    def _rows(self, image: ti.template(), tmp: ti.template(), w: ti.template(), r: ti.i32):
        for k, i, j, d in ti.ndrange(self.shape[0], self.shape[1], self.shape[2], 2 * r + 1):
            jj = j + d - r
            if 0 <= jj < self.shape[2]:
                f = self.fid[k]
                v = ti.Vector.zero(float, ti.static(len(self.channels)))
                for c in ti.static(range(len(self.channels))):
                    v[c] = image[f, i, jj][self.channels[c]]
                tmp[k, i, j] += w[d] * v

    @ti.kernel
    def _cols(self, tmp: ti.template(), blur: ti.template(), w: ti.template(), r: ti.i32):
        for k, i, j, d in ti.ndrange(self.shape[0], self.shape[1], self.shape[2], 2 * r + 1):
            ii = i + d - r
            if 0 <= ii < self.shape[1]:
                blur[k, i, j] += w[d] * tmp[k, ii, j]

    @ti.kernel
    def _mse(self, blur: ti.template(), target: ti.template(), loss: ti.template(), scale: float):
        for k, i, j in blur:
            e = blur[k, i, j] - target[k, i, j]
            loss[None] += scale * e.dot(e)
