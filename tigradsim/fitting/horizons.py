"""Horizons from step doubling: how many leading footage frames a model at time step dt can follow.

The same fit is run at dt and at dt / 2 with the same values, both rendered at the footage times; per
frame the distance between their silhouettes (`silhouette_disagreement`, a mean edge displacement in
pixels) times the Richardson factor 2^p / (2^p - 1) estimates the dt model's error against the
continuous motion, and the predictable horizon is the leading frames whose error is within a tolerance
(`predictable_horizon`, `predictability`).  Used by scene files' [fit] horizon = "auto"
(tigradsim/scenes/scene_build.py) and callable on any pair of renders, e.g. two `VideoFit`s:

    copy_values(fit.params, half.params)              # the same values at dt / 2
    pred = predictability(fit.render, half.render, tolerance=0.5, dt=dt)
    pred.horizon, pred.reason()
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .refined_model import richardson_factor as refined_factor

__all__ = ["INTEGRATOR_ORDER", "richardson_factor", "silhouette_disagreement", "predictable_horizon",
           "Predictability", "predictability", "copy_values"]

# The simulator's integrator (semi-implicit Euler) is of order 1, so the rollout at dt errs by about
# 2^p / (2^p - 1) = 2 times its difference from the rollout at dt / 2 (Richardson)
INTEGRATOR_ORDER = 1


def richardson_factor(order: int = INTEGRATOR_ORDER) -> float:
    """2^p / (2^p - 1): the error of a rollout at dt over its difference from the rollout at dt / 2, for an
    integrator of order p >= 1 (2 for semi-implicit Euler); other ratios: `refined_model.richardson_factor`."""
    if isinstance(order, bool) or not isinstance(order, (int, np.integer)) or order < 1:
        raise ValueError(f"order: expected an integrator order >= 1, got {order!r}")
    return refined_factor(order, 2.0)


def silhouette_disagreement(alpha_a, alpha_b) -> np.ndarray:
    """Per frame, how far apart two renders' silhouettes are, as a mean edge displacement in
    pixels: sum over pixels of |alpha_a - alpha_b| divided by the silhouette's perimeter in
    pixels (the mean of the two renders' total variation, sum |grad alpha| by central
    differences inside the image, at least 1 px).

    Why this measure: an edge moved by delta px along its normal changes sum |a - b| by
    |delta| per pixel of edge length, whatever the edge's soft profile (coarea formula), and
    the total variation of a silhouette with values 0 inside-out to 1 is its perimeter; so
    the ratio is the mean |normal displacement| of the outline (for a rigid shift by delta:
    delta for a straight edge across it, 2 delta / pi averaged around a disc).
    alpha_a, alpha_b: (K, H, W) in [0, 1].  Returns (K,) pixels."""
    a = np.asarray(alpha_a, dtype=np.float64)
    b = np.asarray(alpha_b, dtype=np.float64)
    if a.ndim != 3 or a.shape != b.shape:
        raise ValueError(f"alpha_a, alpha_b: expected two (K, H, W) arrays of the same shape, got {a.shape} and "
                         f"{b.shape}")

    def perimeter(x):
        # central differences: forward ones, staggered half a pixel between x and y, put diagonal
        # edges ~7 % long (a disc of radius 15 px: 101 px against 2 pi 15 = 94.2; central: 95.5)
        gy, gx = np.gradient(x, axis=(1, 2))
        return np.sqrt(gx * gx + gy * gy).sum(axis=(1, 2))

    length = np.maximum(0.5 * (perimeter(a) + perimeter(b)), 1.0)
    return np.abs(a - b).sum(axis=(1, 2)) / length


def predictable_horizon(error, tolerance) -> int:
    """The number of leading frames whose `error` (K,) is within `tolerance` (K when all are)."""
    e = np.asarray(error, dtype=np.float64)
    bad = np.flatnonzero(~(e <= tolerance))          # NaN counts as beyond the tolerance
    return int(bad[0]) if bad.size else int(e.size)


@dataclass
class Predictability:
    """`predictability`'s result at one set of values.

    disagreement: (K,) px, mean silhouette-edge displacement between the rollouts at dt and
        dt / 2 (`silhouette_disagreement`) per footage frame.
    error: (K,) px, the estimated error of the rollout at dt against the continuous motion
        (Richardson: disagreement 2^p / (2^p - 1), p = INTEGRATOR_ORDER).
    tolerance: px; horizon: leading frames with error <= tolerance; dt: the fit's step [s].
    """

    disagreement: np.ndarray
    error: np.ndarray
    tolerance: float
    horizon: int
    dt: float

    @classmethod
    def from_disagreement(cls, disagreement, tolerance, dt, order=INTEGRATOR_ORDER):
        d = np.asarray(disagreement, dtype=np.float64)
        e = richardson_factor(order) * d
        return cls(d, e, float(tolerance), predictable_horizon(e, tolerance), float(dt))

    @property
    def frames(self) -> int:
        return int(self.error.size)

    def reason(self) -> str:
        """One sentence: why the horizon is where it is."""
        K, n = self.frames, self.horizon
        if n >= K:
            return (f"all {K} frames are predictable: the rollouts at dt = {self.dt:.4g} s and dt/2 differ by at most "
                    f"{self.disagreement.max():.3f} px (estimated model error {self.error.max():.3f} px <= "
                    f"horizon_tolerance {self.tolerance:g} px)")
        return (f"from frame {n} on the rollouts at dt = {self.dt:.4g} s and dt/2 differ by {self.disagreement[n]:.3f} "
                f"px (estimated model error {self.error[n]:.3f} px > horizon_tolerance {self.tolerance:g} px; "
                f"{self.disagreement[min(n + 5, K - 1)]:.2f} px at frame {min(n + 5, K - 1)}, "
                f"{self.disagreement[-1]:.2f} px at the last): the model cannot follow them at this dt "
                "(finer substeps may extend it)")

    def to_dict(self) -> dict:
        return {"horizon": self.horizon, "frames": self.frames, "tolerance_px": self.tolerance, "dt": self.dt,
                "disagreement_px": [round(float(v), 4) for v in self.disagreement],
                "error_px": [round(float(v), 4) for v in self.error], "reason": self.reason()}


def _alpha(video, name):
    """The silhouette (K, H, W) of a render: its last channel when it has channels."""
    v = np.asarray(video)
    if v.ndim == 4:
        return v[..., -1]
    if v.ndim == 3:
        return v
    raise ValueError(f"{name}: expected a render (K, H, W) or (K, H, W, C), got shape {v.shape}")


def predictability(render, render_half, tolerance, dt, order=INTEGRATOR_ORDER) -> Predictability:
    """Step doubling: `render()` and `render_half()` run the same fit at dt and at dt / 2 (same
    values: see `copy_values`) and return their renders at the footage times, (K, H, W) or
    (K, H, W, C) with the silhouette last (e.g. `VideoFit.render`); returns their per-frame
    `silhouette_disagreement`, the estimated error of the dt model (Richardson: 2^p / (2^p - 1)
    times the disagreement, p = `order`) and the predictable horizon: the leading frames whose
    estimated error is within `tolerance` px.  dt: the step of `render` [s], for the report."""
    if not (isinstance(tolerance, (int, float, np.floating)) and not isinstance(tolerance, bool)
            and math.isfinite(tolerance) and tolerance > 0):
        raise ValueError(f"tolerance: expected a positive number of pixels, got {tolerance!r}")
    if not (isinstance(dt, (int, float, np.floating)) and math.isfinite(dt) and dt > 0):
        raise ValueError(f"dt: expected a positive time step in seconds, got {dt!r}")
    a = _alpha(render(), "render()")
    b = _alpha(render_half(), "render_half()")
    return Predictability.from_disagreement(silhouette_disagreement(a, b), float(tolerance), dt, order)


def copy_values(source, target):
    """Write each Param's value of `source` into the matching Param of `target` (same order, same
    shapes): the fit at dt / 2 at the values of the fit at dt.  A RatioParam keeps its ratio when
    its denominator is written after it."""
    source, target = list(source), list(target)
    if len(source) != len(target):
        raise ValueError(f"target: expected {len(source)} Params to match source, got {len(target)}")
    for p, q in zip(source, target):
        v = p.value()
        if np.shape(q.value()) != np.shape(v):
            raise ValueError(f"target: Param {q.name!r} has shape {np.shape(q.value())}, its source {p.name!r} "
                             f"{np.shape(v)}")
        q.write(v)
