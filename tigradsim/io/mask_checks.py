"""Plausibility checks of silhouette masks before a fit: masks that cannot be right are an
error, masks that are probably wrong a warning, both before any parameter changes.

    check_masks(masks)                 # tgs.Footage does this on its masks (scene files too)
    check_initial_pose(masks, alpha)   # VideoFit.fit and fit_scene, on the render at the initial guess

A pixel is inside a mask when its value is above MASK_LEVEL (the rule of the silhouette IoU).

* every mask empty: FootageError (a fit would pull the object out of view and report a
  confident estimate; the message says what the masks' largest value suggests: 0/1 masks
  in an 8-bit file, 8-bit values in a 16-bit file, the wrong folder);
* every mask covering the whole image: FootageError (no silhouette to fit; inverted empty masks);
* an empty mask between frames that have one: FootageWarning naming the frames (a failed
  segmentation or a missing file; an object entering or leaving the view empties the first or
  last masks, which is not warned about);
* masks that look inverted: in most frames they cover most of the image border and most of the
  image, where an object in view leaves the border to the background: FootageWarning "inverted?";
* the first frame's mask far from the silhouette rendered at the initial guess (IoU below
  MIN_INITIAL_IOU): FootageWarning naming the IoU (a wrong camera, a camera-to-world pose given
  as world-to-camera, a wrong initial position or masks of another clip: a fit of physical
  parameters cannot move the object onto its mask).
"""
from __future__ import annotations

import warnings

import numpy as np

from ..core.errors import FootageError, FootageWarning

MASK_LEVEL = 0.5            # inside the mask: value above this
INVERTED_BORDER = 0.75      # inverted? the masks cover at least this fraction of the image border ...
INVERTED_AREA = 0.5         # ... and of the image ...
INVERTED_FRAMES = 0.5       # ... in more than this fraction of the frames
MIN_INITIAL_IOU = 0.5       # first mask vs the silhouette rendered at the initial guess
_LISTED = 8                 # frames named in a message


def silhouette_iou(alpha, masks) -> np.ndarray:
    """Per-frame IoU of alpha > 0.5 and masks > 0.5, both (K, H, W) -> (K,); 1 where both are empty."""
    a, m = np.asarray(alpha) > MASK_LEVEL, np.asarray(masks) > MASK_LEVEL
    inter = (a & m).sum(axis=(1, 2))
    union = (a | m).sum(axis=(1, 2))
    return np.where(union > 0, inter / np.maximum(union, 1), 1.0)


def _frame_list(frames, labels):
    shown = ", ".join(f"{k} ({labels[k]})" if labels is not None else str(k) for k in frames[:_LISTED])
    return shown + (f" and {len(frames) - _LISTED} more" if len(frames) > _LISTED else "")


def _empty_hint(largest):
    if largest == 0:
        return "every value is 0: the wrong folder or pattern, or masks that were never written?"
    if abs(largest - 1.0 / 255.0) < 1e-9:
        return (f"the largest value is {largest:.4g} = 1/255: masks stored as 0 and 1 in an 8-bit file? A mask is "
                f"255 (white) on the object")
    if largest <= 255.0 / 65535.0 + 1e-9:
        return (f"the largest value is {largest:.4g} <= 255/65535: 8-bit values (or 0 and 1) in a 16-bit file? A "
                f"16-bit mask is 65535 on the object")
    return f"the largest value is {largest:.4g}: masks too dark, or soft masks that never reach {MASK_LEVEL}?"


def check_masks(masks, name="masks", labels=None):
    """Check silhouette masks (K, H, W) in [0, 1] before a fit (see the module docstring).

    Raises FootageError when every mask is empty or every mask covers the whole image;
    warns (FootageWarning) about empty masks between non-empty ones and about masks that
    look inverted.  `name` starts the messages (None: no prefix, where the caller names
    the source); `labels` (K,), e.g. the mask files' names, follow the frame numbers they
    give.  Returns None."""
    name = "" if name is None else f"{name}: "
    m = np.asarray(masks)
    if m.ndim != 3 or m.size == 0:
        raise FootageError(f"{name}expected masks of shape (K, H, W) with K, H, W > 0, got {m.shape}")
    inside = m > MASK_LEVEL
    K, H, W = inside.shape
    count = inside.sum(axis=(1, 2))
    if not count.any():
        raise FootageError(f"{name}every mask is empty (no pixel above {MASK_LEVEL} in any of the {K} frames); "
                           f"{_empty_hint(float(m.max()))}")
    if np.all(count == H * W):
        raise FootageError(f"{name}every mask covers the whole image ({K} frames), so there is no silhouette to "
                           f"fit: inverted empty masks? A mask is 1 (white) on the object, 0 on the background")
    nonempty = np.flatnonzero(count)
    gaps = np.flatnonzero(count[nonempty[0]:nonempty[-1] + 1] == 0) + nonempty[0]
    if gaps.size:
        warnings.warn(f"{name}the mask of frame{'s' if gaps.size > 1 else ''} {_frame_list(gaps, labels)} is empty "
                      f"(no pixel above {MASK_LEVEL}) while earlier and later frames have one: a failed or missing "
                      f"mask? The fit would pull the object out of view there; fix the mask or leave the frame out "
                      f"(footage.subset)", FootageWarning, stacklevel=2)
    if H > 1 and W > 1:
        border = np.concatenate([inside[:, 0, :], inside[:, -1, :], inside[:, 1:-1, 0], inside[:, 1:-1, -1]], axis=1)
        border_cover = border.mean(axis=1)
        area = count / float(H * W)
        suspect = (border_cover >= INVERTED_BORDER) & (area >= INVERTED_AREA)
        if suspect.mean() > INVERTED_FRAMES:
            warnings.warn(f"{name}inverted? In {int(suspect.sum())} of the {K} frames the masks cover at least "
                          f"{INVERTED_BORDER:.0%} of the image border (median {np.median(border_cover):.0%}) and "
                          f"{INVERTED_AREA:.0%} of the image (median {np.median(area):.0%}), where an object in view "
                          f"leaves the border to the background. A mask is 1 (white) on the object and 0 (black) on "
                          f"the background; to invert: 1 - masks (255 - masks for 8-bit files)",
                          FootageWarning, stacklevel=2)


def check_initial_pose(masks, alpha, name="masks", threshold=MIN_INITIAL_IOU):
    """Compare the first frame's mask with the silhouette rendered at the initial guess.

    masks: (K, H, W) (or (H, W), one frame) in [0, 1]; alpha: the rendered silhouettes
    (K', H, W) (or (H, W)) of the same frames; only frame 0 of each is compared.  Warns
    (FootageWarning, naming the IoU) when IoU(mask > 0.5, alpha > 0.5) < `threshold`.
    Returns the IoU."""
    name = "" if name is None else f"{name}: "
    m, a = np.asarray(masks), np.asarray(alpha)
    m, a = (m[None] if m.ndim == 2 else m[:1]), (a[None] if a.ndim == 2 else a[:1])
    if m.shape != a.shape:
        raise FootageError(f"{name}the first mask is {m.shape[1]}x{m.shape[2]} (HxW) but the render is "
                           f"{a.shape[1]}x{a.shape[2]}")
    iou = float(silhouette_iou(a, m)[0])
    if iou < threshold:
        mask_px, render_px = int((m > MASK_LEVEL).sum()), int((a > MASK_LEVEL).sum())
        what = ("the render is empty: the object is outside the view at the initial guess" if render_px == 0 else
                f"mask {mask_px} px, render {render_px} px")
        warnings.warn(f"{name}the first frame's mask is far from the silhouette rendered at the initial guess: IoU "
                      f"{iou:.3f} < {threshold} ({what}). A wrong camera (pose or intrinsics; a camera-to-world "
                      f"rotation given as world-to-camera), a wrong initial position, or masks of another clip? A "
                      f"fit of physical parameters cannot move the object onto its mask",
                      FootageWarning, stacklevel=2)
    return iou


__all__ = ["check_masks", "check_initial_pose", "silhouette_iou", "MASK_LEVEL", "MIN_INITIAL_IOU"]
