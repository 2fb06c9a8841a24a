"""Clusters of residuals for the sandwich covariance of `fit_report(groups=...)`: blocks of contiguous
footage frames.

Why blocks and not frames: a model mismatch (the time step, the edge profile, the contact law) moves
the silhouette the same way over many neighbouring frames, so single frames are not independent
clusters.  Blocks widen the intervals only as far as the mismatch varies between blocks; a bias the
whole clip shares (the time step's) is covered by `tigradsim.fitting.time_step_bias` instead
(box-push clip, masks, 64 steps per frame: 6 blocks give +-0.10 % / +-0.17 % for mass / mu against
errors of +0.20 % / -0.31 %; with the time-step bias added the mass interval contains the truth and
mu's ends 0.005 % short).  Used by scene files (tigradsim/scenes/scene_build.py) and by any fit whose
residuals are frame-major, e.g. a `VideoFit`'s:

    labels = residual_groups([fit.residuals().size], frames=K, blocks=interval_blocks(K, coordinates))
"""
from __future__ import annotations

import numpy as np

__all__ = ["MIN_INTERVAL_BLOCKS", "frame_blocks", "interval_blocks", "residual_groups"]

# Intervals: residuals are clustered into at least this many blocks of contiguous footage frames
# (with few clusters the interval uses Student's t quantile, fit_report)
MIN_INTERVAL_BLOCKS = 6


def frame_blocks(frames: int, blocks: int) -> np.ndarray:
    """(frames,) block label of each frame: `blocks` runs of contiguous frames, as equal as
    they can be (frame k in block floor(k blocks / frames))."""
    if not 1 <= blocks <= frames:
        raise ValueError(f"frame_blocks: expected 1 <= blocks <= frames, got blocks={blocks}, frames={frames}")
    return (np.arange(frames) * blocks) // frames


def interval_blocks(frames: int, coordinates: int, minimum: int = MIN_INTERVAL_BLOCKS) -> int:
    """Clusters of contiguous frames for the intervals: at least `minimum` and twice the unknowns'
    `coordinates` (the sandwich covariance needs more clusters than coordinates, and its
    small-sample factor G / (G - p) stays <= 2), at most one per frame."""
    return int(min(frames, max(minimum, 2 * coordinates)))


def residual_groups(part_sizes, frames: int, blocks: int, extra: int = 0, count=None,
                    part_frames=None) -> np.ndarray:
    """One cluster label per residual: the residuals are parts (e.g. mask, then RGB) of
    `part_sizes[i]` values each, every part frame-major over `frames` frames; a residual's label
    is its frame's block (`frame_blocks(frames, blocks)`), the same for a frame's residuals in
    every part; then `extra` residuals (e.g. a camera prior's 6) form one more cluster, label
    `blocks`.  count: the residual count, as a check.  part_frames: for each part, the
    index among the `frames` frames that each of its own frames belongs to (cameras with frame times of
    their own: the nearest of the first camera's frames); None: part i is frame-major over all
    `frames`.  Returns (sum(part_sizes) + extra,) ints."""
    block_of_frame = frame_blocks(frames, blocks)
    if part_frames is None:
        part_frames = [np.arange(frames)] * len(part_sizes)
    labels = []
    for size, frame_of in zip(part_sizes, part_frames):
        c = len(frame_of)
        if size % c:
            raise ValueError(f"part_sizes: expected each part to hold a whole number of frames' residuals, got "
                             f"{size} residuals for {c} frames")
        labels.append(np.repeat(block_of_frame[np.minimum(frame_of, frames - 1)], size // c))
    if extra:
        labels.append(np.full(int(extra), blocks))
    out = np.concatenate(labels)
    if count is not None and out.size != count:
        raise ValueError(f"residual_groups: {out.size} labels for {count} residuals")
    return out
