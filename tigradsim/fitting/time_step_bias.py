"""The time step's bias on a fit's estimate, as a systematic for `fit_report(systematics=...)`.

A fit at time step dt estimates the parameters of the dt model, not of the continuous motion.  Its
residuals at the same values but at dt / 2, times the Richardson factor 2^p / (2^p - 1)
(`tigradsim.fitting.horizons.richardson_factor`), are what the linearised refit needs to estimate how
far the dt model's estimate sits from the exact model's (`fit_report` adds that shift as a
systematic).  Used by scene files' [fit] time_step_bias (tigradsim/scenes/scene_build.py) and by any
fit that can be made at dt / 2, e.g. a second `VideoFit`:

    copy_values(fit.params, half.params)
    identify(..., systematics=lambda: time_step_systematics(half.residuals, dt))
"""
from __future__ import annotations

import math

import numpy as np

from .horizons import INTEGRATOR_ORDER, richardson_factor

__all__ = ["time_step_systematics", "time_step_label"]


def time_step_label(dt) -> str:
    """The name the report gives the time step's systematic."""
    return f"time step (dt {dt:.4g} s against dt / 2)"


def time_step_systematics(half_residuals, dt, order=INTEGRATOR_ORDER) -> dict:
    """{label: (residuals, factor)} for `fit_report(systematics=...)`: `half_residuals`, the
    residuals (N,) of the fit at dt / 2 at the current values and on the frames fitted now (an
    array, or a callable that returns it: one forward rollout at dt / 2), with the Richardson
    factor 2^p / (2^p - 1) (p = `order`).  dt: the fit's step [s], for the label."""
    if not (isinstance(dt, (int, float, np.floating)) and math.isfinite(dt) and dt > 0):
        raise ValueError(f"dt: expected a positive time step in seconds, got {dt!r}")
    factor = richardson_factor(order)
    r = half_residuals() if callable(half_residuals) else half_residuals
    r = np.asarray(r)
    if r.ndim != 1 or r.size == 0:
        raise ValueError(f"half_residuals: expected a non-empty flat (N,) residual vector, got shape {r.shape}")
    return {time_step_label(dt): (r, factor)}
