"""What `tigradsim.identify` returns: the local fits (`Run`), the distinct minima (`Minimum`) and the whole
result (`Identification`), with its summary, JSON and Markdown report.  How they are found: fitting/identify.py.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field as dc_field
from typing import Optional

import numpy as np

from .uncertainty import FitReport, json_safe


@dataclass
class Run:
    """One local fit: start index (0-based, into `Identification.search`), start values,
    final objective, why it stopped, and the minimum it reached (index into
    `Identification.minima`, None if it failed), and its BFGS stage's final inverse-Hessian estimate
    (internal coordinates, loss units; None without one): the curvature a fit of a finer model can start from."""

    start: int
    start_values: dict
    search_loss: float
    objective: float = math.nan
    stop_reason: str = ""
    minimum: Optional[int] = None
    seconds: float = 0.0
    inverse_hessian: Optional[np.ndarray] = None

    def to_dict(self):
        return json_safe({k: v for k, v in self.__dict__.items() if k != "inverse_hessian"})


@dataclass
class Minimum:
    """A distinct local minimum: the objective, the values (name -> value),
    the internal coordinates, its FitReport (None without residuals) and the
    runs that reached it."""

    objective: float
    values: dict
    x: np.ndarray
    report: Optional[FitReport]
    runs: list = dc_field(default_factory=list)

    def to_dict(self):
        return json_safe({"objective": self.objective, "values": self.values, "runs": self.runs,
                      "report": self.report.to_dict() if self.report is not None else None})


@dataclass
class Identification:
    """What `identify` found.

    minima: distinct minima, best first.  ambiguous: more than one minimum fits
    equally well (then `tied` lists their indices and no single value should be
    believed).  search: (values, loss) of every scored start.  runs: the local fits.
    The Params hold the best minimum's values afterwards.
    """

    minima: list
    ambiguous: bool
    tied: list
    search: list
    runs: list
    seconds: float
    notes: list = dc_field(default_factory=list)
    search_tied: list = dc_field(default_factory=list)    # starts (search indices) tied with the best score
    search_fitted: list = dc_field(default_factory=list)  # the starts the local fits ran from
    search_rescored: list = dc_field(default_factory=list)  # [{"frames": h, "scores": {start: loss}}] of tied starts
    stages: list = dc_field(default_factory=list)  # continuation.StageDecision after each horizon but the last
    coarse_stage: Optional[dict] = None  # a scene fit's [fit] coarse stage: its own Identification's to_dict()

    @property
    def untried_ties(self) -> list:
        """Starts that tied with the best search score but got no local fit."""
        return [i for i in self.search_tied if i not in self.search_fitted]

    @property
    def best(self) -> Optional[FitReport]:
        """The best minimum's FitReport (None without residuals)."""
        return self.minima[0].report if self.minima else None

    def envelope(self, name: str):
        """(lower, upper): the range of `name` over the equally good minima (`tied`): their 95 %
        intervals' envelope, or their values where a minimum has no interval; None without minima."""
        lows, highs = [], []
        for i in self.tied:
            m = self.minima[i]
            e = None
            if m.report is not None:
                try:
                    e = m.report[name]
                except KeyError:
                    e = None
            if e is not None and e.lower95 is not None:
                lows.append(e.lower95)
                highs.append(e.upper95)
            elif name in m.values:
                lows.append(m.values[name])
                highs.append(m.values[name])
        return (min(lows), max(highs)) if lows else None

    @property
    def values(self) -> dict:
        return dict(self.minima[0].values) if self.minima else {}

    def to_dict(self):
        return json_safe({"ambiguous": self.ambiguous, "tied": self.tied, "minima": [m.to_dict() for m in self.minima],
                      "search": [{"values": v, "loss": l} for v, l in self.search],
                      "runs": [r.to_dict() for r in self.runs], "seconds": self.seconds, "notes": self.notes,
                      "search_tied": self.search_tied, "search_fitted": self.search_fitted,
                      "search_rescored": [{"frames": r["frames"], "scores": {str(k): v for k, v in r["scores"].items()}}
                                          for r in self.search_rescored],
                      "stages": [d.to_dict() for d in self.stages], "coarse_stage": self.coarse_stage})

    def summary(self) -> str:
        if not self.minima:
            return "no local fit converged"
        if self.ambiguous:
            return (f"ambiguous: {len(self.tied)} distinct minima fit equally well; the data do not choose "
                    "between them")
        if self.untried_ties:
            return (f"one best minimum of the {len(self.search_fitted)} starts fitted; {len(self.search_tied)} "
                    f"starts tied on the search and {len(self.untried_ties)} of them were not fitted (another "
                    "basin may have been missed)" + self._capped_clause())
        return "one best minimum" + self._capped_clause()

    def _capped_clause(self) -> str:
        # not those that went on after all in place of a failed candidate (StageDecision.revived)
        capped = sorted({i for d in self.stages for i in d.capped if i not in d.revived})
        if not capped:
            return ""
        return (f"; {len(capped)} candidate(s) were dropped between horizons while still within "
                f"{self.stages[0].drop_ratio:g} x the best loss, only because at most {self.stages[0].keep} continue "
                "(another basin may have been missed: raise keep)")

    def to_markdown(self, title="Identification"):
        out = [f"## {title}", "", f"**{self.summary()}** ({len(self.runs)} local fits from {len(self.search)} "
                                  f"scored starts, {self.seconds:.1f} s)", ""]
        show = self.tied if self.ambiguous else [0] if self.minima else []
        for i in show:
            m = self.minima[i]
            head = f"Minimum {i + 1} (objective {m.objective:.6g}, reached by {len(m.runs)} run(s))"
            out.append(m.report.to_markdown(head) if m.report is not None else
                       f"### {head}\n\n" + "\n".join(f"- {k} = {v:.6g}" for k, v in m.values.items()) + "\n")
        others = [i for i in range(len(self.minima)) if i not in show]
        if others:
            out.append("Other (worse) minima: " + "; ".join(
                f"objective {self.minima[i].objective:.4g} at " +
                ", ".join(f"{k}={v:.4g}" for k, v in self.minima[i].values.items()) for i in others))
        out += [f"- {n}" for n in self.notes]
        return "\n".join(out) + "\n"

    def __str__(self):
        lines = [self.summary()]
        show = self.tied if self.ambiguous else [0] if self.minima else []
        for i in show:
            m = self.minima[i]
            lines.append(f"minimum {i + 1}: objective {m.objective:.6g}")
            lines.append(str(m.report) if m.report is not None else
                         "\n".join(f"{k} = {v:.6g} (no residuals: no uncertainty)" for k, v in m.values.items()))
        lines += [f"note: {n}" for n in self.notes]
        return "\n".join(lines)
