"""The reserve that replaces a candidate whose local fit fails, on every horizon of `tgs.identify`.

Why a reserve.  A local fit fails (a rollout that blows up, an adjoint the check rejects: `SimulationError`,
`GradientError`) for reasons that say nothing about whether its basin is the right one: a start past the
explicit-integration limit of a contact fails at once, a candidate that moved to a stiff, undamped contact fails
on a longer horizon.  If a failure only removed its candidate, the set the later horizons compare would shrink by
chance, and a fit could end with no estimate although fitted candidates were at hand (benchmarks/RESULTS.md,
issue 46: the ramp's seed 2 lost 3 of its 4 candidates so, and stopped early at a +62 % mass ratio; issue 44,
cam44: Newton's camera variant ended with none).  So, on every horizon, each failed candidate is replaced, one for
one, by the next entry of one reserve, which is fitted on the same horizon in its place.

Its order is the evidence the fit has about each entry:

* **on the first stage**, the spare search starts (finite search score, not among the fitted ones), in the
  search's order: those of the last rescoring of tied starts by that score first, then the rest by the first
  horizon's score (`spare_starts`);
* **on a later stage**, the candidates the previous horizon dropped as clearly worse or capped by `keep`, lowest
  loss on the previous horizon's frames first (`dropped_candidates`).  They were fitted through every earlier
  horizon, as the candidate they replace was, and compared with it on the frames all had seen.  Not the "same
  point" ones (they sit at a kept candidate's point and would fail where it fails) nor the failed ones.

Spare search starts do not follow the dropped candidates on a later stage: a spare start was fitted on none of the
earlier horizons, and fitting it directly on the longer frames is the one-horizon fit that the continuation exists
to avoid (the longer horizon's loss has the local minima the short ones smooth away); its only evidence is one
forward rollout on the first horizon, where every fitted candidate ranked above it; catching it up would cost one
local fit per earlier horizon.  When the reserve is empty, a failed candidate is not replaced (a note says so),
and when no candidate of the fit is left identify raises the last GradientError (the caller's "stopped early").

    reserve = Reserve([(run, x, "the next the search ranks"), ...])
    entry = reserve.take()            # None when empty
    note = replacement_note(failed_run, entry, frames=20)
"""
from __future__ import annotations

import math
from typing import Optional

__all__ = ["Reserve", "dropped_candidates", "replacement_note", "spare_starts"]

SEARCH_NEXT = "the next the search ranks"


class Reserve:
    """Entries (run, x, why) in the order they replace failed candidates: run a `Run` (its `start` names it),
    x (n,) the packed values its fit starts from, why the phrase the notes give for it (e.g. "the next the
    search ranks")."""

    def __init__(self, entries=()):
        self.entries = list(entries)

    def take(self):
        """The next entry (run, x, why), removed from the reserve; None when it is empty."""
        return self.entries.pop(0) if self.entries else None

    def __len__(self):
        return len(self.entries)


def spare_starts(scores: dict, rescored: list, chosen: list) -> list:
    """The finite-scored starts not among `chosen`, in the search's order: those of the last rescoring (tied
    starts scored again on a later horizon) by that score first, then the rest by the first horizon's."""
    last = rescored[-1]["scores"] if rescored else {}

    def key(i):
        again = last.get(i, math.inf)
        return (not math.isfinite(again), again if math.isfinite(again) else 0.0, scores[i], i)

    return sorted((i for i in scores if i not in chosen and math.isfinite(scores[i])), key=key)


def dropped_candidates(decision, by_start: dict) -> list:
    """Reserve entries (run, x, why) for the stage after `decision` (a continuation.StageDecision whose
    `frames` is set): its clearly worse and capped candidates, lowest loss on its frames first (then by
    start).  by_start: {start: (run, x)} of the candidates fitted on that stage."""
    where = f"the {decision.frames}-frame horizon" if decision.frames is not None else "the previous stage"
    ids = sorted(decision.worse + decision.capped, key=lambda i: (decision.objectives[i], i))
    return [(*by_start[i], f"dropped after {where} as "
             + ("clearly worse" if i in decision.worse else f"more than keep = {decision.keep} competitive")
             + f" (loss {decision.objectives[i]:.4g}), the best of those left") for i in ids]


def replacement_note(failed, entry, frames: Optional[object]) -> str:
    """The one note for a failed candidate (a Run) on the horizon of `frames` (None: no horizons): which entry
    (run, x, why) of the reserve was fitted in its place, or, entry None, that none was left."""
    where = f" on the {frames}-frame horizon" if frames is not None else ""
    if entry is None:
        return f"start {failed.start + 1} failed{where}; the reserve was empty, no candidate took its place"
    return (f"start {failed.start + 1} failed{where}; start {entry[0].start + 1}, {entry[2]}, was fitted in its "
            "place")
