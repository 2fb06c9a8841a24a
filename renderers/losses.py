"""Image losses on rendered frames, as kernels that add into a 0-D loss field.

Each loss object holds its targets in Taichi fields; calling it, `lossobj(loss)`,
launches one kernel that does `loss[None] += weight * value`, so several losses
(and several frames) sum into one field inside a `ti.ad.Tape`.

* `ImageMSE`: mean over frames, pixels and the chosen channels of
  (image - target)^2.
* `SilhouetteMSE`: the same on the silhouette (alpha) channel only.
* `SoftIoU`: mean over frames of 1 - sum(A T) / sum(A + T - A T).

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
