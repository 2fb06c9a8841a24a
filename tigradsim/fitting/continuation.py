"""Continuation over horizons with several candidates: which local fits go on to the next horizon.

`tgs.identify` fits its candidates (the best starts of the search) breadth first: every candidate is
fitted on the first horizon, then they are compared on those frames (the frames all of them have
seen) and only the survivors are fitted on the next horizon, and so on; the survivors of the last
horizon become the minima.  Why breadth first: on a drop the early horizons show little (a free fall
fits every contact value alike), so the candidate that is best there need not be best once the
contact frames come in; a depth-first fit of one start through every horizon cannot know that, and
keeping only the best of a stage would bet everything on the frames that say least.

The rule (`keep_candidates`), applied after every horizon but the last:

* a candidate whose fit failed (rollout blew up, non-finite loss) is dropped ("failed");
* a candidate is **clearly worse** when its loss on the stage's frames is more than `drop_ratio`
  times the best candidate's loss on the same frames (default 2: twice the best's squared
  residual; a ratio, not a chi^2 test, because on footage from another simulator the residual is
  dominated by model mismatch, not by pixel noise, and a chi^2 test on pixel noise would call any
  two different fits distinguishable); it is dropped ("worse");
* a candidate that has reached the same point as a better one (every internal coordinate within
  `same_fraction` (1 %) of the search box's span: log units for log-space values) is dropped
  ("same"): it would spend a place on a basin already kept, and keeping several is for keeping
  different basins;
* of the others, the best `keep` continue (sorted by loss, then by start); the rest are dropped
  while still competitive ("capped") and the report says so: a basin reached only from them may
  have been missed (raise keep);
* **a cap through a tie is not decided by the tie**: when the candidate the cap would drop and
  the last one it keeps tie on the stage's frames (losses within `tie_rtol`, fitting/ties.py's
  rule, the one the search uses for its starts), the stage's loss cannot say which should
  continue (e.g. every candidate fits the frames before an impact alike, whatever the mass that
  the impact shows).  The candidates tied with that boundary are then scored again by `rescore`
  (the caller's function: one forward rollout each at its fitted values, on the NEXT horizon's
  frames) and ranked there; the cap applies to that ranking (`StageDecision.rescored`).  Without
  `rescore` (no next horizon) the tie is broken by the stage's loss, then by start, as before.

    decision = keep_candidates({0: 0.011, 3: 0.012, 5: 0.05}, keep=2, drop_ratio=2.0)
    decision.kept, decision.worse, decision.capped        # [0, 3], [5], []
    # 0 and 3 tie (within 5 %) at a cap of 1: ranked on the next horizon instead
    decision = keep_candidates({0: 0.0110, 3: 0.0112}, keep=1, rescore=lambda ids: {0: 0.09, 3: 0.02})
    decision.kept, decision.capped, decision.rescored     # [3], [0], {0: 0.09, 3: 0.02}
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from .ties import TIE_RTOL, check_tie_thresholds, loss_tied

__all__ = ["KEEP_DROP_RATIO", "SAME_FRACTION", "StageDecision", "keep_candidates"]

# a candidate is clearly worse than the best when its loss on the same frames exceeds twice the best's
KEEP_DROP_RATIO = 2.0
# two candidates are at the same point when every coordinate differs by at most 1 % of the search box
SAME_FRACTION = 0.01


@dataclass
class StageDecision:
    """What `keep_candidates` decided after one horizon.

    frames: the horizon (frame count asked; None without horizons).  objectives: {start: loss on
    the stage's frames}.  kept: starts that continue, best first.  worse: dropped, loss >
    drop_ratio x the best.  same: dropped, at the point of a better kept one.  capped: dropped
    only because more than `keep` were competitive.  failed: dropped, non-finite loss.  keep,
    drop_ratio: the rule's settings.  rescored: {start: loss on the next horizon's frames} of the
    candidates that tied at the cap and were ranked there instead (empty: the cap cut no tie, or there
    was no next horizon); rescored_frames: that horizon (as the caller gave it).  revived: the dropped ones
    (worse or capped) fitted on the next horizon after all, each in place of a candidate that failed there
    (`tgs.identify`'s reserve, fitting/reserve.py): not lost, the report's "dropped ... raise keep" leaves them out."""

    frames: object
    objectives: dict
    kept: list
    worse: list = field(default_factory=list)
    same: list = field(default_factory=list)
    capped: list = field(default_factory=list)
    failed: list = field(default_factory=list)
    keep: int = 0
    drop_ratio: float = KEEP_DROP_RATIO
    rescored: dict = field(default_factory=dict)
    rescored_frames: object = None
    revived: list = field(default_factory=list)

    @property
    def best(self) -> float:
        finite = [v for v in self.objectives.values() if math.isfinite(v)]
        return min(finite) if finite else math.inf

    def to_dict(self) -> dict:
        return {"frames": self.frames, "objectives": {str(k): v for k, v in self.objectives.items()},
                "kept": list(self.kept), "worse": list(self.worse), "same": list(self.same), "capped": list(self.capped),
                "failed": list(self.failed), "keep": self.keep, "drop_ratio": self.drop_ratio,
                "rescored": {str(k): v for k, v in self.rescored.items()}, "rescored_frames": self.rescored_frames,
                "revived": list(self.revived)}

    def sentence(self) -> str:
        """One line for the report (starts numbered from 1)."""
        n = lambda ids: ", ".join(str(i + 1) for i in ids)
        text = (f"after the {self.frames}-frame horizon " if self.frames is not None else "after the stage ") + (
            f"{len(self.kept)} of {len(self.objectives)} candidates continue (starts {n(self.kept)}; best loss "
            f"{self.best:.4g})")
        if self.worse:
            text += f"; dropped as clearly worse (loss > {self.drop_ratio:g} x the best): starts {n(self.worse)}"
        if self.same:
            text += f"; dropped as the same point as a better one: starts {n(self.same)}"
        if self.rescored:
            where = f"the {self.rescored_frames}-frame horizon's" if self.rescored_frames is not None else "the next"
            text += (f"; starts {n(sorted(self.rescored))} tied at the cap on these frames, so they were ranked on "
                     f"{where} frames (" + ", ".join(f"start {k + 1} {v:.4g}" for k, v in
                                                      sorted(self.rescored.items(), key=lambda kv: kv[0])) + ")")
        if self.capped:
            text += (f"; dropped while within {self.drop_ratio:g} x the best, only because at most {self.keep} "
                     f"continue: starts {n(self.capped)} (a basin reached only from them may be missed: raise keep)")
        if self.failed:
            text += f"; failed: starts {n(self.failed)}"
        if self.revived:
            text += (f"; fitted on the next horizon after all, in place of candidates that failed there: starts "
                     f"{n(self.revived)}")
        return text


def keep_candidates(objectives: dict, keep: int, drop_ratio: float = KEEP_DROP_RATIO, points: dict = None,
                    spans=None, same_fraction: float = SAME_FRACTION, rescore=None, tie_rtol: float = TIE_RTOL,
                    rescored_frames=None) -> StageDecision:
    """The module's rule: which candidates ({start: loss on the frames all were fitted on}) continue.

    keep: at most this many continue (>= 1).  drop_ratio: > 1; a loss above drop_ratio x the best
    is clearly worse.  A best loss of 0 makes every positive loss clearly worse.
    points: {start: (n,) internal coordinates} and spans (n,) the search box's width per coordinate:
    a candidate within same_fraction x span of a better kept one in every coordinate is the same
    point (None: no such check).  rescore: None, or a function of a list of starts returning {start:
    loss on the next horizon's frames} (non-finite: ranked last): when the cap would cut through
    candidates that tie (within tie_rtol) at its boundary, those are ranked by it (module docstring);
    rescored_frames: that horizon, for the report.  Returns a `StageDecision` (frames None: the caller
    sets it)."""
    if isinstance(keep, bool) or not isinstance(keep, (int, np.integer)) or keep < 1:
        raise ValueError(f"keep: expected an integer >= 1 (candidates kept per horizon), got {keep!r}")
    if isinstance(drop_ratio, bool) or not isinstance(drop_ratio, (int, float)) or not drop_ratio > 1.0 \
            or not math.isfinite(drop_ratio):
        raise ValueError(f"drop_ratio: expected a finite number > 1 (a loss above drop_ratio x the best is "
                         f"clearly worse), got {drop_ratio!r}")
    if points is not None:
        missing = [k for k in objectives if k not in points]
        if missing or spans is None:
            raise ValueError(f"points, spans: expected a point for every candidate and the spans, missing points "
                             f"for {missing}, spans {spans!r}")
        spans = np.asarray(spans, dtype=np.float64)
    keep = int(keep)
    objectives = {k: float(v) for k, v in objectives.items()}
    failed = sorted(k for k, v in objectives.items() if not math.isfinite(v))
    order = sorted((k for k in objectives if k not in failed), key=lambda k: (objectives[k], k))
    if not order:
        return StageDecision(None, objectives, [], failed=failed, keep=keep, drop_ratio=float(drop_ratio))
    best = objectives[order[0]]
    competitive = [k for k in order if objectives[k] <= drop_ratio * best]
    worse = [k for k in order if k not in competitive]
    distinct, same = [], []
    for k in competitive:
        if points is not None and any(np.all(np.abs(np.asarray(points[k], dtype=np.float64) -
                                                     np.asarray(points[j], dtype=np.float64))
                                             <= same_fraction * spans) for j in distinct):
            same.append(k)
        else:
            distinct.append(k)
    rescored = {}
    if rescore is not None and not callable(rescore):
        raise ValueError(f"rescore: expected None or a function of a list of starts, got {rescore!r}")
    check_tie_thresholds(0.0, tie_rtol)
    if rescore is not None and len(distinct) > keep:
        distinct, rescored = _rank_tie_at_cap(distinct, objectives, keep, rescore, tie_rtol)
    return StageDecision(None, objectives, distinct[:keep], worse, same, distinct[keep:], failed, keep,
                         float(drop_ratio), rescored, rescored_frames if rescored else None)


def _rank_tie_at_cap(distinct: list, objectives: dict, keep: int, rescore, tie_rtol: float):
    """(distinct re-ordered, {start: next-horizon loss}): when the first candidate past the cap ties with the
    last one kept, the run of candidates tied with that last one (a contiguous run of the loss-sorted list)
    is ranked by `rescore`'s losses (non-finite last, then the stage's order); otherwise unchanged, {}."""
    boundary = objectives[distinct[keep - 1]]

    def tied(k):
        a, b = sorted((objectives[k], boundary))
        return loss_tied(b, a, tie_rtol)

    if not tied(distinct[keep]):
        return distinct, {}
    group = [k for k in distinct if tied(k)]
    scores = rescore(list(group))
    missing = [k for k in group if k not in scores]
    if missing:
        raise ValueError(f"rescore: expected a loss for every tied candidate {group}, missing {missing}")
    scores = {k: float(scores[k]) for k in group}
    rank = {k: i for i, k in enumerate(distinct)}
    ranked = sorted(group, key=lambda k: (not math.isfinite(scores[k]), scores[k] if math.isfinite(scores[k])
                                          else 0.0, rank[k]))
    first = rank[group[0]]
    return distinct[:first] + ranked + distinct[first + len(group):], scores
