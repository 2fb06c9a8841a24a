"""A discretisation's bias on a fit's estimate, from one rollout of a refined model: the systematic
`fit_report(systematics=...)` adds to the intervals.

A fit estimates the parameters of its discretised model (time step dt, grid spacing dx, ...), not of
the continuous one.  With h the discretisation's size, a method of order p errs by C h^p; the same
model refined once by the ratio q (h -> h / q) errs by C (h / q)^p, so the coarse model's error is
q^p / (q^p - 1) times the difference between the two (Richardson).  The residuals of the refined
model at the fit's values, on the frames fitted, are what the linearised refit needs: `fit_report`
moves the estimate by (J^T J)^+ J^T (r - r_refined), times that factor, and widens the interval to
cover the estimate so moved.

`Refinement` is that one mechanism, given its label (the report's name for the systematic), the
refinement ratio q and the order p; each discretisation supplies how its refined model is made:

    time step:  tigradsim/fitting/time_step_bias.py   (dt -> dt / 2, p = INTEGRATOR_ORDER)
    MPM grid:   tigradsim/fitting/grid_bias.py        (dx -> dx / (4/3), p = GRID_ORDER)

and a Scene (tigradsim/scenes/scene_refined.py) builds the refined scene and runs it:

    refinement.systematics(refined.residuals)      # {label: (residuals, factor)}
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

__all__ = ["Refinement", "richardson_factor"]


def richardson_factor(order, ratio=2.0) -> float:
    """q^p / (q^p - 1): the error of a model of order p >= 1 in its discretisation's size h over its
    difference from the model at h / q (q = `ratio` > 1)."""
    if isinstance(order, bool) or not isinstance(order, (int, float, np.integer, np.floating)) or \
            not (math.isfinite(order) and order > 0):
        raise ValueError(f"order: expected a positive order of convergence (1 for a first-order method), got {order!r}")
    if isinstance(ratio, bool) or not isinstance(ratio, (int, float, np.integer, np.floating)) or \
            not (math.isfinite(ratio) and ratio > 1):
        raise ValueError(f"ratio: expected a refinement ratio > 1 (2: h -> h / 2), got {ratio!r}")
    g = float(ratio) ** float(order)
    return g / (g - 1.0)


@dataclass(frozen=True)
class Refinement:
    """One discretisation refined once: `label` (the systematic's name in the report, e.g. "time step
    (dt 0.833 ms against dt / 2)"), `ratio` q > 1 (h -> h / q) and `order` p (the method's order of
    convergence in h); `factor` = q^p / (q^p - 1)."""
    label: str
    ratio: float
    order: float

    def __post_init__(self):
        if not isinstance(self.label, str) or not self.label:
            raise ValueError(f"label: expected a non-empty name for the systematic, got {self.label!r}")
        richardson_factor(self.order, self.ratio)          # checks both

    @property
    def factor(self) -> float:
        return richardson_factor(self.order, self.ratio)

    def systematics(self, refined_residuals) -> dict:
        """{label: (residuals, factor)} for `fit_report(systematics=...)`: `refined_residuals`, the
        residuals (N,) of the refined model at the fit's current values on the frames fitted now (an
        array, or a callable returning it: one forward rollout of the refined model)."""
        r = refined_residuals() if callable(refined_residuals) else refined_residuals
        r = np.asarray(r)
        if r.ndim != 1 or r.size == 0:
            raise ValueError(f"refined_residuals: expected a non-empty flat (N,) residual vector, got shape {r.shape}")
        return {self.label: (r, self.factor)}
