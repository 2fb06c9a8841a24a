"""Which fitted values sit on a bound of their prior range (a "bound hit"), for the model comparison's
suspect rule (`model_selection`).

A determined value on its bound means the data pull it past the range the prior calls plausible: the fit
reached its loss only by pressing that constant (or unknown) against the edge, and would go further without
the bound.  When model variants are compared, such a variant's lower loss may be bought by compensation in
a direction the prior rules out rather than by the variant being the world's model (measured: Newton's soft
clip fitted with equal node masses fits 26 % better than with its true volume-lumped masses, with the
ground's mu at its bound 1.0 and the material's mu +77 %; benchmarks/RESULTS.md).  A value the data do not
determine ("undetermined") may rest on a bound without the bound doing anything (the loss is flat there),
so it is not a hit.

"On the bound": within 1e-6 max(|x|, 1) of it in the optimiser's coordinate x (log(value) for a log-space
unknown; the tolerance `fit_report` uses for the status "at bound", which a clamped float32 value meets), or,
where the value's standard error s (in the same coordinate) is known, closer to it than s: the data cannot
tell such a value from the bound's, and a bounded optimiser may stop just inside the bound it presses on
(measured: the capped laws' box-drop mu 1.49988 at the bound 1.5, s = 0.0049 in log, 95 % [1.483, 1.5];
benchmarks/RESULTS.md, "The suspect rule within a standard error").
"""
from __future__ import annotations

import math
from typing import Optional

__all__ = ["on_bound", "output_bound_hits", "report_bound_hits", "mark_suspect"]


def on_bound(value: float, lower, upper, log_space: bool, std: Optional[float] = None) -> Optional[str]:
    """"lower" or "upper" when `value` sits on that bound (module docstring), else None.  std: the value's
    standard error in the optimiser's coordinate (None: unknown).  A bound that is None or infinite is never
    hit."""
    def coord(v):
        return math.log(v) if log_space else float(v)

    if value is None or not math.isfinite(value) or (log_space and value <= 0):
        return None
    x = coord(value)
    h = 1e-6 * max(abs(x), 1.0)
    if std is not None and math.isfinite(std):
        h = max(h, float(std))
    for side, bound in (("lower", lower), ("upper", upper)):
        if bound is None or not math.isfinite(bound) or (log_space and bound <= 0):
            continue
        if abs(x - coord(bound)) <= h:
            return side
    return None


def _describe(name, value, side, bound):
    return f"{name} = {value:.4g} at its {side} bound {bound:.4g}"


def output_bound_hits(unknowns: dict) -> list:
    """The bound hits of one `tigradsim fit` report (estimates.json "unknowns": {name: {estimate, status,
    lower, upper, std, std_space}}), nuisance constants included: one text per hit ("ground.mu = 1 at its upper
    bound 1"); [] for none.  An unknown without bounds in the report is never a hit."""
    hits = []
    for name, u in unknowns.items():
        if u.get("status") == "undetermined":
            continue
        side = on_bound(u.get("estimate"), u.get("lower"), u.get("upper"), u.get("std_space") == "log", u.get("std"))
        if side is None and u.get("status") == "at bound":      # the fit's own verdict, bounds not written
            hits.append(f"{name} = {u.get('estimate'):.4g} at a bound")
        elif side is not None:
            hits.append(_describe(name, u["estimate"], side, u[side]))
    return hits


def report_bound_hits(report, bounds: Optional[dict] = None) -> list:
    """The bound hits of a `FitReport`: estimates whose status is "at bound", and (bounds given: {name:
    (lower, upper, log_space)}, e.g. from the fitted Params) every determined estimate on a bound, which
    finds the hits that a misfit's status ("misfit" replaces "at bound") hides."""
    hits = []
    for e in report.estimates:
        if e.status == "undetermined":
            continue
        lower, upper, log_space = (bounds or {}).get(e.name, (None, None, e.log_space))
        side = on_bound(e.value, lower, upper, log_space, e.std)
        if side is not None:
            hits.append(_describe(e.name, e.value, side, lower if side == "lower" else upper))
        elif e.status == "at bound":
            hits.append(f"{e.name} = {e.value:.4g} at a bound")
    return hits


SUSPECT = "suspect"


def mark_suspect(report, bounds: Optional[dict] = None) -> Optional[str]:
    """One fit's suspect rule: where a determined value (an unknown or a nuisance constant) sits on a bound of its
    prior range (`report_bound_hits`), the fit bought its loss by pressing that value against the edge the prior
    calls plausible (module docstring), so the model may not be the footage's (another contact law, damping form
    or mass distribution would fit without it; measured: MuJoCo's box drop under tigradsim's uncapped law, kd/m on
    its bound 300, mu 36 % from the truth with a 2 % interval and status "ok").  Every "ok" or
    "assumption-dominated" estimate of `report` becomes "suspect" and the report gets a note; returns that
    sentence (None when nothing is on a bound).  The values on the bound keep their own status ("at bound"),
    undetermined ones are not hits.  A comparison of models (`model_selection`) resolves what one fit cannot."""
    hits = report_bound_hits(report, bounds)
    if not hits:
        return None
    text = ("suspect: " + "; ".join(hits) + ": the fit reached its loss by pressing it against its prior range, "
            "so the model may not be the footage's (compare contact laws: `tigradsim laws`); the estimates and "
            "intervals hold only if that bound is right")
    for e in report.estimates:
        if e.status in ("ok", "assumption-dominated"):
            e.status = SUSPECT
    report.notes.append(text)
    return text
