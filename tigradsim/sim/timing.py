"""Substeps per video frame.

A rollout observed every `substeps` steps of `dt` seconds samples footage at fps frames per second
exactly when dt = 1 / (fps * substeps): frame k is step k * substeps.  The time step comes from
`tigradsim.io.footage.dt_for_fps` (the largest dt <= max_dt that divides the frame period).
"""
from ..io.footage import dt_for_fps


def substeps_per_frame(fps, max_dt):
    """(substeps, dt): the fewest substeps per frame with dt = 1 / (fps * substeps) <= max_dt [s].

    fps: frames per second of the footage (> 0, e.g. 30 or 29.97).  max_dt: the largest time step
    [s] the scene tolerates (> 0; from a stability estimate, or the dt a fit was validated at).
    Use as `Simulator(model, dt=dt, steps=frames * substeps)` with observers `every=substeps`:
    observation k is then at k / fps seconds.  (An exact ratio, e.g. 1/30 s over 1/960 s, gives
    32 substeps, not 33: the ratio is rounded up with a 1e-12 relative slack.)
    """
    dt = dt_for_fps(fps, max_dt)
    return int(round(1.0 / (float(fps) * dt))), dt
