"""Image losses on rendered frames, as kernels that add into a 0-D loss field.

Each loss object holds its targets in Taichi fields; calling it, `lossobj(loss)`,
launches kernels that do `loss[None] += weight * value`, so several losses (and
several frames) sum into one field inside a `ti.ad.Tape`.

* `ImageMSE`: mean over frames, pixels and the chosen channels of
  (image - target)^2.
* `SilhouetteMSE`: the same on the silhouette (alpha) channel only.
* `SoftIoU`: mean over frames of 1 - sum(A T) / sum(A + T - A T).
* `BlurredImageMSE` (in `blurred.py`, built on `ImageMSE`): `ImageMSE` summed over
  Gaussian-blurred copies of image and target (coarse to fine in one loss), blur widths
  `blur_px` [px].

Targets: numpy arrays (K, H, W) or (K, H, W, C) (floats in [0, 1], uint8 0-255 or
uint16 0-65535), or a path accepted by `tigradsim.io.video.load_frames` (a folder of
PNGs, a GIF, an MP4; 16-bit files read at their depth).  `frames[k]` is the image frame
compared with target k; without `frames` the target must have one frame per image frame
(a shorter target is an error, not a fit of the first frames).  `set_frames(frames,
target)` changes the compared frames and their targets after construction (coarse to
fine in time): the fields are allocated once for every image frame.

Colour over a background plate (`background=`, (H, W, C) in [0, 1]): the compared
colour is `A * rgb + (1 - A) * B`, with A the image's alpha channel and B the plate,
so that colour carries gradients with respect to geometry through the soft
silhouette at every `gamma` (the depth-softmax colour alone is piecewise constant
in the vertices when gamma is small).  Do not pass a plate when the renderer
already blends by coverage over its own plate.

Sums run in a fixed order (per-row sums, then one serial sum), so loss values are
bit-reproducible.  `ImageMSE` (and `SilhouetteMSE`, `TiledSilhouetteMSE`, the unblurred
level of `BlurredImageMSE`) has a written-out backward that gives each thread its own image
rows, so its gradients are bit-reproducible on threads; with
`tigradsim.core.runtime.deterministic()` the other loops that read the image (whose reverse
pass adds into the image gradient, shared between threads when frames repeat or blur taps
overlap) run serially, so their gradients are bit-reproducible as well.
"""

import numpy as np
import taichi as ti

from tigradsim.core.aliases import alias_property
from tigradsim.core.runtime import custom_op, deterministic, np_float

# A float target whose largest value is above this is taken for a 0-255 image.
_FLOAT_TARGET_MAX = 1.0 + 1e-6
# RGB channels that differ by at most this are one grey value (RGB-stored silhouettes, MP4 chroma noise).
_GREY_TOL = 2.5 / 255.0


def load_target(target, name="target") -> np.ndarray:
    """Targets as float64 (K, H, W, C) in [0, 1] from an array or a path.

    Accepted: uint8 (0-255), uint16 (0-65535), other integers in [0, 255], bool, floats
    in [0, 1] (a float array with values above 1 is an error: it looks like 0-255 data),
    a `tigradsim.Footage` (its frames), or a path for `tigradsim.io.video.load_frames`
    (read at the files' own depth).
    """
    if isinstance(target, (str, bytes)) or hasattr(target, "__fspath__"):
        from tigradsim.io.video import load_frames

        arr = load_frames(target)
    elif hasattr(target, "frames") and hasattr(target, "times"):          # a Footage
        arr = np.asarray(target.frames, dtype=np.float64)
    else:
        arr = np.asarray(target)
        if arr.dtype == bool:
            arr = arr.astype(np.float64)
        elif arr.dtype == np.uint16:
            arr = arr.astype(np.float64) / 65535.0
        elif np.issubdtype(arr.dtype, np.integer):
            if arr.size and (arr.min() < 0 or arr.max() > 255):
                raise ValueError(f"{name}: integer values must lie in [0, 255], got [{arr.min()}, {arr.max()}]")
            arr = arr.astype(np.float64) / 255.0
        elif np.issubdtype(arr.dtype, np.floating):
            arr = arr.astype(np.float64)
            if not np.all(np.isfinite(arr)):
                raise ValueError(f"{name}: contains NaN or inf")
            if arr.size and arr.max() > _FLOAT_TARGET_MAX:
                raise ValueError(f"{name}: float values must lie in [0, 1], got a maximum of {arr.max():g}; "
                                 f"this looks like 0-255; divide by 255 (or pass uint8)")
            if arr.size and arr.min() < -1e-6:
                raise ValueError(f"{name}: float values must lie in [0, 1], got a minimum of {arr.min():g}")
        else:
            raise TypeError(f"{name}: expected a float or uint8 array or a path, got dtype {arr.dtype}")
    if arr.ndim == 3:
        arr = arr[..., None]
    if arr.ndim != 4:
        raise ValueError(f"{name}: expected shape (K, H, W) or (K, H, W, C), got {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name}: contains NaN or inf")
    return arr


def to_silhouette(arr, name="target", strict=True):
    """(K, H, W, C) in [0, 1] -> (K, H, W, 1) silhouette, by one rule: C = 1 is the
    silhouette; RGBA uses its alpha; RGB is taken as grey (the mean of its channels),
    which is right for a silhouette stored as RGB (channels equal within 2.5/255).
    strict: an RGB colour video (channels differ more) is an error that says to pass
    masks, since a colour photograph is not a silhouette (VideoFit's rule); with
    strict=False (`SilhouetteMSE`, asked for explicitly) its mean is used."""
    C = arr.shape[-1]
    if C == 1:
        return arr
    if C == 4:
        return arr[..., 3:4]
    if C == 3:
        spread = float(np.max(arr.max(axis=-1) - arr.min(axis=-1))) if arr.size else 0.0
        if spread <= _GREY_TOL or not strict:
            return arr.mean(axis=-1, keepdims=True)
        raise ValueError(f"{name}: an RGB colour video (channels differ by up to {spread * 255:.0f}/255) cannot be "
                         f"compared with a silhouette: pass mask frames (K, H, W) in [0, 1] (e.g. "
                         f"tgs.Footage(frames, fps, masks=...)), or render in colour (shading='color' or "
                         f"'lambert') and compare RGB over a background plate")
    raise ValueError(f"{name}: expected 1, 3 or 4 channels, got {C}")


def _check_image(image):
    shape = getattr(image, "shape", None)
    if shape is None or not hasattr(image, "snode") or len(shape) != 3:
        raise TypeError(f"image: expected a Taichi vector field of shape (frames, H, W) (SoftRasterizer.image), "
                        f"got {type(image).__name__} with shape {shape}")
    return shape, getattr(image, "n", 1)


def _frames(frames, k, nframes):
    ids = np.arange(k) if frames is None else np.asarray(frames)
    if ids.ndim != 1 or not np.issubdtype(ids.dtype, np.integer):
        raise ValueError(f"frames: expected a list of integer image frame indices, got {frames!r}")
    if ids.shape != (k,):
        raise ValueError(f"frames: {ids.size} frame indices for a target with {k} frames (one index per target "
                         f"frame is needed)")
    if ids.size and (ids.min() < 0 or ids.max() >= nframes):
        raise ValueError(f"frames={ids.tolist()} out of range: the image has {nframes} frames")
    return ids.astype(np.int32)


@ti.data_oriented
class _TargetLoss:
    """Targets and frame selection shared by every image loss (see the module docstring).

    Attributes: frame_count (frames of the image; `nframes` is its older name), count (frames
    compared now), size (H, W), channels, weight.
    """

    nframes = alias_property("frame_count")

    # whether the loss keeps per-pixel terms in `pixel` (summed by `_reduce`); ImageMSE sums its
    # terms straight into row sums instead (`_mse_rows`)
    _pixel_buffer = True

    def __init__(self, image, target, frames=None, channels=None, weight=1.0, background=None):
        (nframes, H, W), C = _check_image(image)
        tgt = self._prepare_target(load_target(target))
        Ct = tgt.shape[3]
        if channels is None:
            if Ct > C:
                raise ValueError(self._channel_error(C, Ct))
            channels = list(range(Ct))
        channels = [int(c) for c in np.atleast_1d(channels)]
        if len(channels) != Ct or min(channels) < 0 or max(channels) >= C:
            raise ValueError(f"channels={channels}: expected {Ct} image channel indices in [0, {C - 1}] "
                             f"for a target with {Ct} channels")
        self.image = image
        self.frame_count = nframes
        self.channels = tuple(channels)
        self.weight = float(weight)
        self.composite = background is not None
        # Loops that read the image run serially when kernels must sum in a fixed order: their
        # reverse adds into image.grad, shared between threads when frames repeat or blur taps overlap.
        self.serial = deterministic()
        if self.composite:
            if C != 4 or 3 in self.channels:
                raise ValueError(f"background: compositing over a plate needs an RGBA image (4 channels, got {C}) "
                                 f"and colour channels only (got channels={list(self.channels)})")
            self.background = ti.Vector.field(Ct, float, shape=(H, W))
        # allocated once for every image frame, so set_frames can grow the clip without new fields
        self.fid = ti.field(ti.i32, shape=nframes)
        # the compared frames by image frame (k with fid[k] == f: by_frame[frame_start[f]:frame_start[f + 1]],
        # in increasing k), for backward passes that give each thread its own image rows
        self.by_frame = ti.field(ti.i32, shape=nframes)
        self.frame_start = ti.field(ti.i32, shape=nframes + 1)
        self.target = ti.Vector.field(Ct, float, shape=(nframes, H, W))
        if self._pixel_buffer:
            self.pixel = ti.field(float, shape=(nframes, H, W), needs_grad=True)
        self.rows = ti.field(float, shape=(nframes, H), needs_grad=True)
        self.size = (H, W)
        self.count = 0
        self._reduce_op = None
        if self.composite:
            self.set_background(background)
        self.set_frames(frames, tgt)

    @staticmethod
    def _channel_error(C, Ct):
        if C == 1:
            return (f"target: {Ct} channels, but the image has 1 (a silhouette renderer, shading='silhouette'): "
                    f"compare mask frames (K, H, W) with SilhouetteMSE, or render in colour (shading='color' "
                    f"or 'lambert')")
        return f"target: {Ct} channels, but the image has {C}: pass channels= (the image channel of each)"

    @property
    def shape(self):
        """(K, H, W): compared frames and image size."""
        return (self.count,) + self.size

    def _prepare_target(self, arr):
        return arr

    def _check_target(self, arr, count):
        K, th, tw, Ct = arr.shape
        H, W = self.size
        if (th, tw) != (H, W):
            raise ValueError(f"target: frames are {th}x{tw} (HxW) but the image is {H}x{W}")
        if Ct != self.target.n:
            raise ValueError(f"target: {Ct} channels, expected {self.target.n}")
        if count is not None and K != count:
            raise ValueError(f"target: {K} frames, but {count} are compared (the image has {self.frame_count}); "
                             f"to compare a different set pass frames= (the image frame of each target frame) "
                             f"to set_frames(frames, target)")

    def set_frames(self, frames, target):
        """Compare image frames `frames` (K,) with `target` (K, H, W[, C]) from now on.

        frames: None means every image frame (then the target must have one frame per
        image frame).  K may change from call to call (up to the image's frame count):
        coarse-to-fine in time grows the clip without new fields."""
        arr = self._prepare_target(load_target(target))
        K, n = arr.shape[0], self.frame_count
        if frames is None and K < n:
            raise ValueError(f"target: {K} frames but the image has {n} (one target frame per rendered frame is "
                             f"expected); pass frames= (the rendered frame compared with each target frame, e.g. "
                             f"frames=range({K}) for the first {K}) to compare only some")
        if frames is None and K > n:
            raise ValueError(f"target: {K} frames but the image has only {n}: render {K} frames (SoftRasterizer("
                             f"frames={K}) and an observer with {K} frames, e.g. tgs.footage.render_at_times) or "
                             f"compare a subset of the target (target[:{n}], footage[:{n}])")
        if K > n:
            raise ValueError(f"target: {K} frames, more than the image's {n} (each target frame is compared with "
                             f"one rendered frame; the loss holds at most {n})")
        self._check_target(arr, None)
        ids = _frames(frames, arr.shape[0], self.frame_count)
        if len(ids) == 0:
            raise ValueError("frames: at least one frame must be compared")
        self.count = len(ids)
        fid = np.zeros(self.frame_count, np.int32)
        fid[:self.count] = ids
        self.fid.from_numpy(fid)
        ids = np.asarray(ids, dtype=np.int64)
        by_frame = np.zeros(self.frame_count, np.int32)
        by_frame[:self.count] = np.argsort(ids, kind="stable")
        self.by_frame.from_numpy(by_frame)
        self.frame_start.from_numpy(np.searchsorted(np.sort(ids), np.arange(self.frame_count + 1)).astype(np.int32))
        self._store_target(arr)

    def set_target(self, target):
        """Replace the targets of the compared frames (same frame count; see `set_frames`)."""
        arr = self._prepare_target(load_target(target))
        self._check_target(arr, self.count)
        self._store_target(arr)

    def set_background(self, plate):
        """The background plate (H, W, C) (or (H, W) / (C,)) in [0, 1] that the colour is composited over."""
        if not self.composite:
            raise ValueError("set_background: this loss was built without background= (no compositing)")
        H, W = self.size
        arr = np.asarray(plate, dtype=np.float64)
        if arr.ndim == 2:
            arr = arr[..., None]
        if arr.shape in ((self.target.n,), (1,)):
            arr = np.broadcast_to(arr, (H, W, self.target.n))
        if arr.ndim == 3 and arr.shape[-1] == 1 and self.target.n > 1:
            arr = np.repeat(arr, self.target.n, axis=-1)
        if arr.shape != (H, W, self.target.n):
            raise ValueError(f"background: expected shape ({H}, {W}, {self.target.n}), got {np.shape(plate)}")
        if not np.all(np.isfinite(arr)) or arr.min() < 0 or arr.max() > _FLOAT_TARGET_MAX:
            raise ValueError(f"background: values must be finite and lie in [0, 1] (divide 0-255 data by 255), "
                             f"got [{np.nanmin(arr):g}, {np.nanmax(arr):g}]")
        self.background.from_numpy(np.ascontiguousarray(arr).astype(np_float()))

    def _store_target(self, arr):
        full = np.zeros((self.frame_count,) + self.size + (self.target.n,), np_float())
        full[:len(arr)] = arr
        self.target.from_numpy(full)

    def compared(self, image=None) -> np.ndarray:
        """The compared image values (K, H, W, C) as numpy (composited when a plate is set)."""
        img = (self.image if image is None else image).to_numpy()
        if img.ndim == 3:
            img = img[..., None]
        v = img[self.fid.to_numpy()[:self.count]][..., list(self.channels)]
        if self.composite:
            a = img[self.fid.to_numpy()[:self.count]][..., 3:4]
            v = a * v + (1 - a) * self.background.to_numpy()[None]
        return v

    def residuals(self) -> np.ndarray:
        """Compared image values minus targets, (K, H, W, C) numpy."""
        return self.compared() - self.target.to_numpy()[:self.count]

    @ti.func
    def _value(self, image: ti.template(), f, i, j):
        """The compared channels of image[f, i, j] (composited over the plate when set)."""
        px = image[f, i, j]
        v = ti.Vector([px[self.channels[c]] for c in ti.static(range(len(self.channels)))])
        if ti.static(self.composite):
            a = px[3]
            v = a * v + (1.0 - a) * self.background[i, j]
        return v

    @ti.func
    def _value_grad(self, image: ti.template(), f, i, j, gv):
        """The reverse of `_value`: adds gv (one adjoint per compared channel) into image.grad[f, i, j],
        as a plain load and store (the caller guarantees one writer per pixel at a time)."""
        px = image[f, i, j]
        g = ti.Vector.zero(float, ti.static(image.n))
        for c in ti.static(range(len(self.channels))):
            if ti.static(self.composite):
                a = px[3]
                g[self.channels[c]] += a * gv[c]
                g[3] += gv[c] * (px[self.channels[c]] - self.background[i, j][c])
            else:
                g[self.channels[c]] += gv[c]
        image.grad[f, i, j] = image.grad[f, i, j] + g

    def _reduce(self, loss, scale, K):
        """loss += scale * sum(pixel[:K]) in a fixed order (rows in parallel, then one serial sum):
        one Tape entry whose backward is written out (`_sum_rows_grad`)."""
        if self._reduce_op is None:
            self._reduce_op = custom_op(self._sum_rows, self._sum_rows_grad)
        self._reduce_op(loss, scale, K)

    @ti.kernel
    def _sum_rows(self, loss: ti.template(), scale: float, K: ti.i32):
        for k, i in ti.ndrange(K, self.size[0]):
            row = 0.0
            for j in range(self.size[1]):
                row += self.pixel[k, i, j]
            self.rows[k, i] = row
        self._add_rows(loss, scale, K)

    @ti.func
    def _add_rows(self, loss: ti.template(), scale, K):
        """loss += scale * the row sums of the first K compared frames, on one thread in a fixed order."""
        ti.loop_config(serialize=True)
        for k in range(K):
            for i in range(self.size[0]):
                loss[None] += scale * self.rows[k, i]

    @ti.kernel
    def _sum_rows_grad(self, loss: ti.template(), scale: float, K: ti.i32):
        """The reverse of `_sum_rows`: d loss / d pixel = scale (times the loss's adjoint)."""
        g = scale * loss.grad[None]
        for k, i in ti.ndrange(K, self.size[0]):
            for j in range(self.size[1]):
                self.pixel.grad[k, i, j] = self.pixel.grad[k, i, j] + g


class ImageMSE(_TargetLoss):
    """`loss += weight * mean((image[frames][..., channels] - target)^2)`.

    Args:
        image: `SoftRasterizer.image` (or any (frames, H, W) vector field).
        target: (K, H, W[, C]) array or path; C target channels are compared
            with image channels `channels` (default 0..C-1, so an RGB target
            is compared with the R, G, B of an RGBA image).
        frames: image frame of each target frame (default: every image frame, and
            then K must equal the image's frame count).
        weight: multiplier.
        background: optional (H, W, C) plate: compare `A rgb + (1 - A) plate` (module docstring).
    """

    _pixel_buffer = False
    _mse_op = None            # the custom op of `_mse`, made on first use

    def __call__(self, loss):
        self._mse(loss, self.weight / float(np.prod(self.shape) * len(self.channels)))

    def _mse(self, loss, scale):
        """loss += scale * sum over compared frames and pixels of `_pixel_weight` |value - target|^2:
        one Tape entry (`custom_op`) whose backward is written out (`_mse_rows_grad`)."""
        if self._mse_op is None:
            self._mse_op = custom_op(self._mse_rows, self._mse_rows_grad)
        self._mse_op(self.image, loss, scale, self.count)

    @ti.func
    def _pixel_weight(self, i, j):
        """Weight of pixel (i, j)'s term (1; `TiledSilhouetteMSE` drops its gutters)."""
        return 1.0

    @ti.func
    def _error(self, image: ti.template(), k, i, j):
        return self._value(image, self.fid[k], i, j) - self.target[k, i, j]

    @ti.kernel
    def _mse_rows(self, image: ti.template(), loss: ti.template(), scale: float, K: ti.i32):
        # the terms summed straight into per-row sums (no per-pixel buffer to write, read and clear),
        # rows in parallel, then one serial sum: the same order on every run
        for k, i in ti.ndrange(K, self.size[0]):
            row = 0.0
            for j in range(self.size[1]):
                e = self._error(image, k, i, j)
                row += self._pixel_weight(i, j) * e.dot(e)
            self.rows[k, i] = row
        self._add_rows(loss, scale, K)

    @ti.kernel
    def _mse_rows_grad(self, image: ti.template(), loss: ti.template(), scale: float, K: ti.i32):
        """The reverse of `_mse_rows`: image.grad += 2 scale w (value - target) d value / d image, times the
        loss's adjoint.  One (image frame, row) per thread, the target frames compared with it in
        increasing order within (`by_frame`): every image.grad entry has one writer and sums in a fixed
        order even when a frame is compared twice: no atomics, bit-reproducible, on threads."""
        g2 = 2.0 * scale * loss.grad[None]
        for f, i in ti.ndrange(self.frame_count, self.size[0]):
            for m in range(self.frame_start[f], self.frame_start[f + 1]):
                k = self.by_frame[m]
                for j in range(self.size[1]):
                    e = self._error(image, k, i, j)
                    nonzero = False
                    for c in ti.static(range(e.n)):
                        nonzero |= e[c] != 0.0
                    if nonzero:        # a pixel where value and target agree (most of a small object's frame) adds 0
                        self._value_grad(image, f, i, j, (g2 * self._pixel_weight(i, j)) * e)


class SilhouetteMSE(ImageMSE):
    """MSE on the silhouette: image channel `channel` (default the last, alpha)
    against a target silhouette (K, H, W) (converted by `to_silhouette(strict=False)`:
    RGBA uses its alpha, RGB the mean of its channels)."""

    def __init__(self, image, target, frames=None, channel=None, weight=1.0):
        _, C = _check_image(image)
        channel = C - 1 if channel is None else channel
        super().__init__(image, target, frames=frames, channels=[channel], weight=weight)

    def _prepare_target(self, arr):
        return to_silhouette(arr, strict=False)


class SoftIoU(SilhouetteMSE):
    """`loss += weight * mean_k (1 - sum(A T) / sum(A + T - A T))` on the silhouette.

    Call it once per Tape (its per-frame sums are scratch fields).
    """

    _pixel_buffer = True

    def __init__(self, image, target, frames=None, channel=None, weight=1.0):
        super().__init__(image, target, frames=frames, channel=channel, weight=weight)
        n, (H, W) = self.frame_count, self.size
        self.union_px = ti.field(float, shape=(n, H, W), needs_grad=True)
        self.union_rows = ti.field(float, shape=(n, H), needs_grad=True)
        self.inter = ti.field(float, shape=n, needs_grad=True)
        self.union = ti.field(float, shape=n, needs_grad=True)

    def __call__(self, loss):
        self._iou(self.image, loss, self.weight / self.count, self.count)

    @ti.kernel
    def _iou(self, image: ti.template(), loss: ti.template(), scale: float, K: ti.i32):
        # fixed summation order: per-pixel terms, per-row sums, per-frame serial sums
        if ti.static(self.serial):
            ti.loop_config(serialize=True)
        for k, i, j in ti.ndrange(K, self.size[0], self.size[1]):
            a = image[self.fid[k], i, j][self.channels[0]]
            t = self.target[k, i, j][0]
            self.pixel[k, i, j] = a * t
            self.union_px[k, i, j] = a + t - a * t
        for k, i in ti.ndrange(K, self.size[0]):
            self.rows[k, i] = 0.0
            self.union_rows[k, i] = 0.0
        for k, i in ti.ndrange(K, self.size[0]):
            for j in range(self.size[1]):
                self.rows[k, i] += self.pixel[k, i, j]
                self.union_rows[k, i] += self.union_px[k, i, j]
        for k in range(K):
            self.inter[k] = 0.0
            self.union[k] = 0.0
        for k in range(K):
            for i in range(self.size[0]):
                self.inter[k] += self.rows[k, i]
                self.union[k] += self.union_rows[k, i]
        ti.loop_config(serialize=True)
        for k in range(K):
            loss[None] += scale * (1.0 - self.inter[k] / (self.union[k] + 1e-12))
