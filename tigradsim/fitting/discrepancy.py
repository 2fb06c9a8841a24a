"""Model discrepancy: 95 % intervals that hold when the model is not the world (issue 44).

`fit_report`'s intervals say how far the estimate would move with fresh noise (iid, or a sandwich
over blocks of frames); `intervals_with_assumptions` adds what the constants nobody measured can
do.  Neither sees the error of a model that cannot follow the footage exactly (another engine's
friction law, a camera a little off): its residual is smooth and shared by neighbouring frames, and
the estimate it biases looks as certain as any.  What such an error does show is drift: the values
that best fit the beginning of the clip are not those that best fit its end.  This module measures
that drift from the fit's own Jacobian, with no extra rollout:

    J, r = tgs.residual_jacobian(residuals, params)               # (N, p), (N,) at the estimate
    stats = tgs.frame_statistics(J, r, frame_of_each_residual)     # per frame J_f^T r_f, J_f^T J_f
    d = tgs.discrepancy_intervals(report, stats)                   # leave beginning / middle / end out
    d.intervals["box.mass"], d.factors["box.mass"]                 # widened 95 % interval, how much wider
    d.widen(intervals_with_assumptions, report)                    # the same widening on those

`tigradsim fit` reports the result as "ci95_with_discrepancy" (tigradsim/scenes/assumed.py).  The
method, its constants and their measured effect: `discrepancy_intervals`.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .uncertainty import Z95, json_safe

# runs of contiguous frames left out in turn by `discrepancy_intervals` (beginning, middle, end)
DISCREPANCY_BLOCKS = 3
_LOG_MAX = 700.0           # exp(700) ~ 1e304: the widest a log-space interval without bounds is written


@dataclass
class FrameStatistics:
    """The least-squares fit's pieces per residual cluster (a video frame), in the clusters' order.

    scores: (G, p) J_g^T r_g; information: (G, p, p) J_g^T J_g; sse: (G,) |r_g|^2; counts: (G,)
    residual values per cluster.  J = dr/dtheta in the optimiser's coordinates (log for log-space
    values), r the residuals at the estimate; sum_g scores = J^T r ~ 0 at a minimum."""

    scores: np.ndarray
    information: np.ndarray
    sse: np.ndarray
    counts: np.ndarray
    frames: int = -1              # the first `frames` clusters are frames; the rest (a prior) always stay

    def __post_init__(self):
        if self.frames < 0:
            self.frames = int(self.scores.shape[0])

    def to_dict(self):
        return json_safe({"scores": self.scores, "information": self.information, "sse": self.sse,
                          "counts": self.counts, "frames": self.frames})

    @classmethod
    def from_dict(cls, d):
        return cls(np.asarray(d["scores"], float), np.asarray(d["information"], float), np.asarray(d["sse"], float),
                   np.asarray(d["counts"], float), int(d.get("frames", -1)))


def frame_statistics(J, r, labels, frames=None) -> FrameStatistics:
    """Per-cluster scores, information, squared residuals and counts (`FrameStatistics`).

    J: (N, p) residual Jacobian; r: (N,) residuals; labels: (N,) cluster labels (ints; clusters are
    taken in sorted label order, e.g. frame index); frames: how many of the clusters (the first) are
    frames, the others (e.g. a camera prior's residuals) are never left out (default: all)."""
    J = np.asarray(J, dtype=np.float64)
    r = np.ravel(np.asarray(r, dtype=np.float64))
    labels = np.ravel(np.asarray(labels))
    if J.ndim != 2 or J.shape[0] != r.size or labels.size != r.size:
        raise ValueError(f"frame_statistics: expected J (N, p), r (N,) and labels (N,), got shapes {J.shape}, "
                         f"{r.shape}, {labels.shape}")
    _, idx = np.unique(labels, return_inverse=True)
    G, p = int(idx.max()) + 1, J.shape[1]
    scores = np.zeros((G, p))
    np.add.at(scores, idx, J * r[:, None])
    information = np.zeros((G, p, p))
    for g in range(G):
        Jg = J[idx == g]
        information[g] = Jg.T @ Jg
    sse = np.bincount(idx, weights=r * r, minlength=G)
    counts = np.bincount(idx, minlength=G).astype(float)
    if frames is not None and not 1 <= frames <= G:
        raise ValueError(f"frames: expected 1 <= frames <= {G} (the clusters), got {frames!r}")
    return FrameStatistics(scores, information, sse, counts, G if frames is None else int(frames))


def _pinv(A, rel_eig_tol):
    """Pseudo-inverse of a symmetric PSD matrix, eigenvalues below rel_eig_tol * the largest dropped."""
    lam, V = np.linalg.eigh(A)
    if lam.size == 0 or lam[-1] <= 0:
        return np.zeros_like(A)
    singular = lam <= rel_eig_tol * lam[-1]
    return (V * np.where(singular, 0.0, 1.0 / np.where(singular, 1.0, lam))) @ V.T


def block_jackknife(stats: FrameStatistics, blocks: int, rel_eig_tol: float = 1e-12):
    """Linearised leave-one-block-out estimates: the frames are cut into `blocks` runs of contiguous
    frames; leaving run b out moves the estimate by the Gauss-Newton step of the other frames,

        delta_b = (A - A_b)^+ S_b,    A = sum_g J_g^T J_g,  A_b, S_b = the run's J^T J and J^T r

    (at the minimum sum_g J_g^T r_g = 0, so the others' gradient is -S_b).  Returns (var, deltas):
    the jackknife variance (B - 1) / B sum_b (delta_b - mean)^2 per coordinate (p,) and the (B, p)
    moves.  A coordinate that the other runs barely determine gets a large move (the rest of the clip
    cannot check it); a direction they leave exactly singular (eigenvalue below rel_eig_tol times the
    largest) is dropped by the pseudo-inverse and does not move."""
    if not (isinstance(blocks, (int, np.integer)) and 2 <= blocks <= stats.frames):
        raise ValueError(f"blocks: expected an integer in [2, {stats.frames}] (the frames), got {blocks!r}")
    A = stats.information.sum(axis=0)
    label = (np.arange(stats.frames) * blocks) // stats.frames
    deltas = []
    for b in range(blocks):
        rows = np.nonzero(label == b)[0]
        deltas.append(_pinv(A - stats.information[rows].sum(axis=0), rel_eig_tol) @ stats.scores[rows].sum(axis=0))
    deltas = np.array(deltas)
    var = (blocks - 1) / blocks * ((deltas - deltas.mean(axis=0)) ** 2).sum(axis=0)
    return var, deltas


@dataclass
class Discrepancy:
    """`discrepancy_intervals`' result.

    blocks: runs of contiguous frames left out in turn; std: (p,) jackknife standard error per
    coordinate (optimiser's coordinates); moves: (B, p)
    the linearised leave-one-run-out moves; factors: {name: how many times wider the 95 % interval
    became (>= 1)}; intervals: {name: (lower, upper)} the report's 95 % interval widened (None for
    an undetermined estimate); notes."""

    blocks: int
    std: np.ndarray
    moves: np.ndarray
    factors: dict
    intervals: dict
    notes: list
    bounds: dict = None           # {name: (lower, upper)} the intervals are cut at

    def widen(self, intervals: dict, report) -> dict:
        """{name: (lower, upper)}: each of `intervals` (intervals that contain the report's 95 % ones,
        e.g. `intervals_with_assumptions`) moved out on each side by as much as the discrepancy moved
        the report's interval out there (optimiser's coordinates), cut at the bounds; None stays None."""
        out = {}
        for e in report.estimates:
            wide, new = intervals.get(e.name), self.intervals.get(e.name)
            if wide is None or new is None or e.lower95 is None:
                out[e.name] = None if wide is None else tuple(wide)
                continue
            if e.log_space:
                lo, hi = wide[0] * new[0] / e.lower95, wide[1] * new[1] / e.upper95
            else:
                lo, hi = wide[0] + new[0] - e.lower95, wide[1] + new[1] - e.upper95
            if self.bounds and e.name in self.bounds:
                lo, hi = max(lo, self.bounds[e.name][0]), min(hi, self.bounds[e.name][1])
            out[e.name] = (float(lo), float(hi))
        return out

    def to_dict(self):
        return json_safe({"blocks": self.blocks, "std": self.std, "moves": self.moves, "factors": self.factors,
                          "intervals": self.intervals, "notes": self.notes})


def discrepancy_intervals(report, stats: FrameStatistics, blocks: int = DISCREPANCY_BLOCKS, bounds=None,
                          rel_eig_tol: float = 1e-12) -> Discrepancy:
    """The 95 % intervals of `report` (a FitReport at the estimate) widened by the model discrepancy
    that the frame-to-frame scatter of the residuals cannot show.

    Why: where the model is not the world (another engine's contact and friction law, a camera a
    little off), the residual left at the best fit is not noise but a smooth error that every frame
    shares in part.  `fit_report`'s intervals (iid, or a sandwich over blocks of frames) measure how
    much the estimate would move with fresh noise; they cannot see that the values that best fit the
    beginning of the clip are not those that best fit its end.  That drift is what the discrepancy
    does to the estimate, so it is measured directly: the fitted frames are cut into `blocks` runs
    of contiguous frames (beginning, middle, end for 3), each run is left out in turn and the
    estimate refitted on the others (one linearised Gauss-Newton step, `block_jackknife`: no
    rollout), and the jackknife standard error of those refits, s_jk, is the discrepancy's.  Each
    determined estimate's interval is widened by the factor max(1, 1.96 s_jk / half-width) about
    the estimate (both sides, in the optimiser's coordinates: log for log-space values), then cut
    at `bounds`.  A model that equals the world gives refits that agree within the noise, so the
    intervals stay as they were (factor 1); the factor grows with the drift, not with a tuned
    constant.

    Why 3 runs and 1.96 (measured, one choice for every fit, not per clip):
    * synthetic (tests/test_discrepancy.py): a 2-D throw with linear drag (time constant 1 - 16 s)
      fitted by the drag-free model: the sandwich interval over 6 blocks has half-widths 0.64 - 0.74
      x the error in g and never covers it; widened, 1.39 - 1.57 x (factor 2.1): always covers.
      With the model right (no drag, 1 mm noise, 10 seeds) the median factor is 1.12 and all 10
      cover.  Leaving out 4 runs gave 1.02 x the error, 6 runs 0.8 x (drag time 1 s).
    * Student's t(B - 1) = 4.30 instead of 1.96 is the textbook quantile for a jackknife over 3
      groups, but it widens the right model's intervals too (median factor 2.5 in the same 10
      seeds) and every interval on the footage benchmark twice as much as 1.96 does, for two more
      of 29 covered (benchmarks/coverage_blocks.py, numbers in benchmarks/RESULTS.md, "Coverage of
      the intervals").
    A fit reported "misfit" (residual far above the footage's noise floor or a low IoU) drifts a
    lot: its intervals widen to most of the prior range, which is what is known then.

    report: FitReport; stats: its `frame_statistics` (same coordinates, at the estimate).
    blocks: runs left out in turn (>= 2).  bounds: {name: (lower, upper)} to cut the intervals at
    (in the values' units), optional.  Returns a `Discrepancy`.
    """
    p = stats.scores.shape[1]
    if len(report.estimates) != p:
        raise ValueError(f"stats: {p} parameter coordinates for the report's {len(report.estimates)} estimates")
    var, moves = block_jackknife(stats, blocks, rel_eig_tol)
    std = np.sqrt(np.maximum(var, 0.0))
    quantile = Z95           # not Student's t(B - 1): see the docstring (measured)
    factors, intervals, notes = {}, {}, []
    for i, e in enumerate(report.estimates):
        if e.lower95 is None or e.upper95 is None:
            intervals[e.name] = None
            continue
        to = math.log if e.log_space else (lambda v: v)
        back = math.exp if e.log_space else (lambda v: v)
        x, a, b = to(e.value), to(e.lower95), to(e.upper95)
        half = 0.5 * (b - a)
        f = 1.0
        if half > 0 and math.isfinite(std[i]):
            f = max(1.0, quantile * float(std[i]) / half)
        lo, hi = x - f * (x - a), x + f * (b - x)         # optimiser's coordinates
        if bounds and e.name in bounds:                   # cut there (log of the bounds in log space)
            lo, hi = max(lo, to(bounds[e.name][0])), min(hi, to(bounds[e.name][1]))
        if e.log_space:                                   # a log-space value with no bound: stay finite
            lo, hi = max(lo, -_LOG_MAX), min(hi, _LOG_MAX)
        lo, hi = back(lo), back(hi)
        factors[e.name], intervals[e.name] = f, (float(lo), float(hi))
        if f > 1.0:
            notes.append(f"{e.name}: refits leaving out one of {blocks} runs of the frames scatter by std "
                         f"{std[i]:.3g}" + (" (log)" if e.log_space else "") + f"; the 95 % interval is {f:.3g} x "
                         "wider: the model does not follow the footage equally well over the clip")
    return Discrepancy(int(blocks), std, moves, factors, intervals, notes, dict(bounds or {}))
