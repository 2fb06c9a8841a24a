"""Time steps that fit a video's frame rate.

A rollout observed every `substeps` steps of `dt` seconds samples the footage's frames exactly when
dt = 1 / (fps * substeps): frame k is step k * substeps.  `substeps_per_frame` picks the fewest
substeps whose dt does not exceed the largest stable (or accurate enough) step.
"""
from __future__ import annotations

import math
import numbers


def substeps_per_frame(fps, max_dt):
    """(substeps, dt): the smallest integer substeps >= 1 with dt = 1 / (fps * substeps) <= max_dt.

    fps: frames per second of the footage (> 0, e.g. 30 or 29.97).  max_dt: the largest time step
    [s] the scene tolerates (> 0; e.g. from a stability estimate, or the dt a fit was validated at).
    Use it as `Simulator(model, dt=dt, steps=frames * substeps)` with observers `every=substeps`:
    observation k is then at k / fps seconds exactly (up to rounding of dt).  dt may exceed max_dt by
    at most 1e-9 relative (so that an exact ratio is not rounded up to one more substep).
    """
    for name, value in (("fps", fps), ("max_dt", max_dt)):
        if isinstance(value, bool) or not isinstance(value, numbers.Real) or not (math.isfinite(value) and value > 0):
            raise ValueError(f"{name}: expected a finite number > 0, got {value!r}")
    frame = 1.0 / float(fps)
    # the 1e-9 slack keeps an exact ratio (1/30 over 1/960 = 32) from rounding up to 33
    substeps = max(1, math.ceil(frame / float(max_dt) * (1.0 - 1e-9)))
    return substeps, frame / substeps
