"""The time step's bias on a fit's estimate, as a systematic for `fit_report(systematics=...)`.

A fit at time step dt estimates the parameters of the dt model, not of the continuous motion.  Its
residuals at the same values but at dt / 2, times the Richardson factor 2^p / (2^p - 1)
(`tigradsim.fitting.horizons.richardson_factor`), are what the linearised refit needs to estimate how
far the dt model's estimate sits from the exact model's (`fit_report` adds that shift as a
systematic).  One case of `tigradsim.fitting.refined_model.Refinement` (ratio 2, p = INTEGRATOR_ORDER);
the MPM grid's is tigradsim/fitting/grid_bias.py.  Used by scene files' [fit] time_step_bias
(tigradsim/scenes/scene_refined.py) and by any fit that can be made at dt / 2, e.g. a second `VideoFit`:

    copy_values(fit.params, half.params)
    identify(..., systematics=lambda: time_step_systematics(half.residuals, dt))
"""
from __future__ import annotations

import math

import numpy as np

from .horizons import INTEGRATOR_ORDER
from .refined_model import Refinement

__all__ = ["time_step_systematics", "time_step_label", "time_step_refinement"]


def time_step_label(dt) -> str:
    """The name the report gives the time step's systematic."""
    return f"time step (dt {dt:.4g} s against dt / 2)"


def time_step_refinement(dt, order=INTEGRATOR_ORDER) -> Refinement:
    """The `Refinement` dt -> dt / 2 of an integrator of order `order`.  dt: the fit's step [s]."""
    if isinstance(dt, bool) or not (isinstance(dt, (int, float, np.floating)) and math.isfinite(dt) and dt > 0):
        raise ValueError(f"dt: expected a positive time step in seconds, got {dt!r}")
    return Refinement(time_step_label(dt), 2.0, order)


def time_step_systematics(half_residuals, dt, order=INTEGRATOR_ORDER) -> dict:
    """{label: (residuals, factor)} for `fit_report(systematics=...)`: `half_residuals`, the
    residuals (N,) of the fit at dt / 2 at the current values and on the frames fitted now (an
    array, or a callable that returns it: one forward rollout at dt / 2), with the Richardson
    factor 2^p / (2^p - 1) (p = `order`).  dt: the fit's step [s], for the label."""
    return time_step_refinement(dt, order).systematics(half_residuals)
