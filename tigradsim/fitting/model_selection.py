"""Choosing between models that fit the same data: which fit equally well, and one estimate that covers them.

The footage of a real object does not say which contact law made it.  Fitting it under each law the library
has (or any other set of model variants: a damping form, a time step) gives one `FitReport` per model; this
module compares them as `identify` compares minima:

* model i fits as well as the best when its loss L = 1/2 |r|^2 on the same residuals is within tie_rtol of
  the best's (default 5 %), or when 2 (L_i - L_best) / s^2 <= tie_chi2 (s^2 the best model's residual
  variance; default 3.84, the 95 % point of chi^2 with one degree of freedom): the rule `identify` uses for
  equally good minima, tigradsim/fitting/ties.py, which says why the likelihood-ratio test alone does not
  decide (footage residuals are correlated over neighbouring pixels and frames: between contact laws whose
  losses differed by 0.15-5.8 % it gave 600-6,400 against 3.84).  The statistic stays in the table for
  information;
* the combined estimate of a parameter is the best model's value with the interval that covers every
  equally good model's 95 % interval (their envelope): the spread between laws that fit equally well is
  part of what the footage cannot say, so it enters the interval rather than being hidden by a choice;
* a parameter whose equally good models disagree by more than the best model's own half-width is marked
  "law-dominated" (the choice of model, not the data, sets it), one undetermined in any of them is
  "undetermined";
* the suspect rule: a model whose fit has a determined value (the parameters compared or any other unknown,
  nuisance constants included) on a bound of its prior range is "suspect" (`bound_hits` says why such a loss
  may be bought by compensation the prior rules out).  A suspect model cannot win alone: (a) where an equally
  good model has no bound hit, the best such model is the reference (its values are reported), and the
  combined interval still covers every equally good model, the suspect ones included; (b) where none does,
  the suspect best keeps its values, but the combined interval also covers the best model without bound hits
  (whatever its loss) and every combined status is "suspect"; (c) where every model is suspect, the status is
  "suspect" and nothing is added.  No threshold is added to the tie rule: a bound hit says the loss cannot be
  trusted to rank the model, not by how much; the loss gap alone cannot tell compensation from a better
  model (the suspect model's loss would only fall further without its bound), so the interval keeps the
  best alternative that needs no such stretch rather than a band calibrated on a few clips.

    comparison = compare_models({"capped": report_a, "huber": report_b}, quality={"capped": 0.97, ...})
    print(comparison.to_markdown())

`compare_fit_outputs` does the same from the reports `tigradsim fit` writes (estimates.json, one per
model, e.g. one per material-damping form), for every kind of interval the report has (statistical,
with the assumed constants, with the model discrepancy), so that the combined interval of each kind
covers the equally good models' intervals of that kind.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from .bound_hits import output_bound_hits, report_bound_hits
from .ties import TIE_CHI2, TIE_RTOL, check_tie_thresholds, likelihood_ratio, tied_with_best
from .uncertainty import FitReport, json_safe

__all__ = ["CombinedEstimate", "ModelComparison", "compare_models", "compare_fit_outputs", "FIT_INTERVAL_KEYS",
           "suspect_rule"]


@dataclass
class CombinedEstimate:
    """One parameter over the equally good models: the best model's value, the envelope of their 95 %
    intervals (None where some model has none), the spread of their values, and a status ("ok",
    "law-dominated", "undetermined")."""

    name: str
    value: float
    lower95: Optional[float]
    upper95: Optional[float]
    spread: float
    status: str
    models: list = field(default_factory=list)

    def to_dict(self):
        return json_safe(self.__dict__)


@dataclass
class ModelComparison:
    """What `compare_models` found: `rows` (one dict per model, best first: label, loss, loss_excess
    ((L - L_best) / |L_best|), delta_chi2 (2 dL / s^2, for information), equally_good, quality,
    estimates {name: (value, lower95, upper95, status)}), `best` (label), `equally_good` (labels),
    `combined` {name: CombinedEstimate}, `tie_chi2`, `tie_rtol`, `reference` (the model whose values the
    combined estimates report: `best` unless the suspect rule moved it), `combined_models` (the models whose
    intervals the combined ones cover), `suspect_note` (what the suspect rule did, "" when nothing).  Each row
    has "suspect": its bound hits ([] for none)."""

    rows: list
    best: str
    equally_good: list
    combined: dict
    tie_chi2: float
    tie_rtol: float = TIE_RTOL
    reference: Optional[str] = None
    combined_models: list = field(default_factory=list)
    suspect_note: str = ""

    def to_dict(self):
        return json_safe({"rows": self.rows, "best": self.best, "equally_good": self.equally_good,
                          "combined": {k: v.to_dict() for k, v in self.combined.items()}, "tie_chi2": self.tie_chi2,
                          "tie_rtol": self.tie_rtol, "reference": self.reference,
                          "combined_models": self.combined_models, "suspect_note": self.suspect_note})

    def to_markdown(self, title="Models compared") -> str:
        names = list(self.combined)
        out = [f"## {title}", "",
               f"Models that fit as well as the best ({self.best}): a loss within {100 * self.tie_rtol:g} % of the "
               f"best's, or 2 dL / s^2 <= {self.tie_chi2:g} (pixels counted as independent: for information "
               f"otherwise): {', '.join(self.equally_good)}.", "",
               "| model | loss | dL / L_best | 2 dL / s^2 | quality | " + " | ".join(names) + " |",
               "|---|---|---|---|---|" + "---|" * len(names)]
        for row in self.rows:
            cells = []
            for n in names:
                v, lo, hi, status = row["estimates"][n]
                interval = f" [{lo:.4g}, {hi:.4g}]" if lo is not None else ""
                cells.append(f"{v:.4g}{interval}" + ("" if status == "ok" else f" ({status})"))
            quality = "" if row["quality"] is None else f"{row['quality']:.3f}"
            mark = (" (equally good)" if row["equally_good"] else "") + (
                f" (suspect: {'; '.join(row['suspect'])})" if row.get("suspect") else "")
            out.append(f"| {row['label']}{mark} | {row['loss']:.4g} | {100 * row['loss_excess']:.2f} % | "
                       f"{row['delta_chi2']:.3g} | {quality} | "
                       + " | ".join(cells) + " |")
        out += ["", "Combined (the best model's value, the envelope of the equally good models' intervals):", ""]
        if self.suspect_note:
            out[-2:-1] = [f"Combined ({self.reference}'s value, the envelope of {', '.join(self.combined_models)}'s "
                          f"intervals; {self.suspect_note}):"]
        for c in self.combined.values():
            interval = "no interval" if c.lower95 is None else f"95 % [{c.lower95:.5g}, {c.upper95:.5g}]"
            out.append(f"- {c.name} = {c.value:.5g}, {interval}, spread between models {c.spread:.3g}: {c.status}")
        return "\n".join(out) + "\n"


def _ties(losses: dict, s2: float, tie_chi2: float, tie_rtol: float):
    """(labels sorted by loss, {label: (L - L_best) / |L_best|}, {label: 2 (L - L_best) / s2}, the labels
    tied with the best by fitting/ties.py's rule)."""
    check_tie_thresholds(tie_chi2, tie_rtol)
    order = sorted(losses, key=lambda k: losses[k])
    best = losses[order[0]]
    excess = {k: (losses[k] - best) / max(abs(best), 1e-300) for k in order}
    delta = {k: likelihood_ratio(losses[k], best, s2) for k in order}
    return order, excess, delta, [k for k in order if tied_with_best(losses[k], best, s2, tie_chi2, tie_rtol)]


def suspect_rule(order: list, good: list, suspect: dict):
    """The suspect rule (module docstring) on a comparison's ranking.

    order: labels by loss, best first; good: the equally good labels (best first); suspect: {label: bound
    hits} ([] or absent: none).  Returns (reference label, the labels whose intervals the combined ones cover
    (reference first), whether the reference is suspect, a note saying what the rule did ("" when nothing))."""
    hit = lambda k: bool(suspect.get(k))          # noqa: E731
    best = order[0]
    if not hit(best):
        return best, list(good), False, ""
    clean = [k for k in order if not hit(k)]
    if not clean:
        return best, list(good), True, "every model has a value on a prior bound: suspect"
    tied_clean = [k for k in good if not hit(k)]
    if tied_clean:
        ref = tied_clean[0]
        return ref, [ref] + [k for k in good if k != ref], False, (
            f"the best, {best}, has a value on a prior bound; {ref}, equally good without one, is the reference")
    return best, list(good) + [clean[0]], True, (
        f"the best, {best}, has a value on a prior bound and no equally good model is without one: the interval "
        f"also covers {clean[0]}, the best model without a bound hit; suspect")


def _check_suspect(suspect, labels):
    if suspect is None:
        return
    if not isinstance(suspect, dict):
        raise TypeError(f"suspect: expected {{label: [bound hits]}}, got {type(suspect).__name__}")
    unknown = [k for k in suspect if k not in labels]
    if unknown:
        raise ValueError(f"suspect: labels {unknown} are not among the models compared ({list(labels)})")


def compare_models(reports: dict, tie_chi2: float = TIE_CHI2, quality: Optional[dict] = None,
                   tie_rtol: float = TIE_RTOL, suspect: Optional[dict] = None) -> ModelComparison:
    """Compare fits of the same data under several models (module docstring).

    reports: {label: FitReport} over the same residuals and parameters (e.g. one per contact law).
    tie_chi2, tie_rtol: the thresholds of "equally good" (fitting/ties.py): 2 dL / s^2 <= tie_chi2 or
        dL <= tie_rtol |L_best|.
    quality: optional {label: a fit-quality figure shown in the table, e.g. the silhouette IoU}.
    suspect: optional {label: [bound hits]} for the suspect rule (default: each report's estimates with the
        status "at bound", `bound_hits.report_bound_hits`; a caller that knows the bounds passes them all).
    """
    if not reports:
        raise ValueError("reports: expected at least one {label: FitReport}")
    for label, rep in reports.items():
        if not isinstance(rep, FitReport):
            raise TypeError(f"reports[{label!r}]: expected a FitReport, got {type(rep).__name__}")
    _check_suspect(suspect, reports)
    suspect = {k: list((suspect or {}).get(k) or []) for k in reports} if suspect is not None else \
        {k: report_bound_hits(r) for k, r in reports.items()}
    names = [e.name for e in next(iter(reports.values())).estimates]
    for label, rep in reports.items():
        if [e.name for e in rep.estimates] != names:
            raise ValueError(f"reports[{label!r}]: estimates {[e.name for e in rep.estimates]} differ from the "
                             f"first report's {names}: models compared must share their parameters")
    losses = {k: r.loss for k, r in reports.items()}
    order, excess, deltas, good = _ties(losses, min(reports.items(), key=lambda kv: kv[1].loss)[1].s2, tie_chi2,
                                        tie_rtol)
    rows = []
    for label in order:
        rep = reports[label]
        rows.append({"label": label, "loss": rep.loss, "loss_excess": excess[label], "delta_chi2": deltas[label],
                     "equally_good": label in good,
                     "quality": None if quality is None else quality.get(label),
                     "suspect": suspect[label],
                     "estimates": {e.name: (e.value, e.lower95, e.upper95, e.status) for e in rep.estimates}})
    reference, members, suspect_ref, note = suspect_rule(order, good, suspect)
    combined = {}
    for name in names:
        ests = [reports[label][name] for label in members]
        b = ests[0]
        values = [e.value for e in ests]
        spread = max(values) - min(values)
        if any(e.lower95 is None or not e.determined for e in ests):
            lower = upper = None
            status = "undetermined"
        else:
            lower, upper = min(e.lower95 for e in ests), max(e.upper95 for e in ests)
            half = 0.5 * (b.upper95 - b.lower95)
            status = "suspect" if suspect_ref else "law-dominated" if spread > half else "ok"
        combined[name] = CombinedEstimate(name, b.value, lower, upper, spread, status, list(members))
    return ModelComparison(rows, order[0], good, combined, float(tie_chi2), float(tie_rtol), reference, members,
                           note)


FIT_INTERVAL_KEYS = ("ci95", "ci95_with_assumptions", "ci95_with_discrepancy")


def compare_fit_outputs(outputs: dict, shared=None, tie_chi2: float = TIE_CHI2, interval_keys=FIT_INTERVAL_KEYS,
                        tie_rtol: float = TIE_RTOL, suspect: Optional[dict] = None) -> dict:
    """Compare fits of the same footage under several models from the reports `tigradsim fit` wrote.

    outputs: {label: the estimates.json dict of that model's fit}.  Each must have finished with a
        best minimum (identification.minima[0].report: its loss 1/2 |r|^2 and residual variance s2)
        on the same residuals (the same residual count: the same frames and pixels).
    shared: the unknowns to combine (default: those every output has); an unknown whose meaning
        differs between models (a damping coefficient whose units depend on the form) is left out by
        the caller and stays in the per-model rows only.
    interval_keys: the interval kinds of the report's unknowns to combine.
    tie_chi2, tie_rtol: "equally good" as in `compare_models`.
    suspect: optional {label: [bound hits]} for the suspect rule (module docstring); default: each output's
        determined unknowns on a bound of their range, nuisance constants included (`output_bound_hits`).
    Returns {"best", "equally_good", "reference", "combined_models", "suspect_note", "tie_chi2", "tie_rtol",
    "rows": [{label, loss, loss_excess, delta_chi2, equally_good, iou, suspect (bound hits),
    unknowns: {name: {estimate, status, KEY: [lo, hi] | None ...}}}] best first,
    "combined": {name: {estimate (the reference model's: the best's unless the suspect rule moved it), spread
    (max - min over the combined models), status ("ok", "model-dominated": the spread exceeds the reference's
    ci95 half-width, "suspect": the reference has a bound hit, "undetermined": some combined model has no
    interval, "misfit": the reference's fit is one), KEY: the envelope of the combined models' intervals of
    that kind, or None}}}.
    """
    if not isinstance(outputs, dict) or not outputs:
        raise ValueError("outputs: expected at least one {label: estimates.json dict}")
    fits = {}
    for label, out in outputs.items():
        minima = ((out or {}).get("identification") or {}).get("minima") or []
        rep = minima[0].get("report") if minima else None
        if rep is None or not isinstance(out.get("unknowns"), dict):
            raise ValueError(f"outputs[{label!r}]: expected a finished fit's report (identification.minima[0].report "
                             "and unknowns), got none")
        fits[label] = rep
    _check_suspect(suspect, outputs)
    suspect = {k: list((suspect or {}).get(k) or []) for k in outputs} if suspect is not None else \
        {k: output_bound_hits(o["unknowns"]) for k, o in outputs.items()}
    counts = {k: int(r["residual_count"]) for k, r in fits.items()}
    if len(set(counts.values())) > 1:
        raise ValueError(f"outputs: residual counts differ between models ({counts}): fits compared must share "
                         "their residuals (the same frames)")
    names = [n for n in next(iter(outputs.values()))["unknowns"] if all(n in o["unknowns"] for o in outputs.values())]
    if shared is not None:
        missing = [n for n in shared if n not in names]
        if missing:
            raise ValueError(f"shared: {missing} are not unknowns of every output (common: {names})")
        names = list(shared)
    losses = {k: float(r["loss"]) for k, r in fits.items()}
    order, excess, deltas, good = _ties(losses, float(fits[min(losses, key=losses.get)]["s2"]), tie_chi2, tie_rtol)
    reference, members, suspect_ref, note = suspect_rule(order, good, suspect)
    rows = [{"label": k, "loss": losses[k], "loss_excess": excess[k], "delta_chi2": deltas[k], "equally_good": k in good,
             "iou": outputs[k].get("iou_final"), "suspect": suspect[k],
             "unknowns": {n: {"estimate": u["estimate"], "status": u["status"], **{key: u.get(key) for key in interval_keys}}
                          for n, u in outputs[k]["unknowns"].items()}} for k in order]
    combined = {}
    for n in names:
        us = [outputs[k]["unknowns"][n] for k in members]
        values = [u["estimate"] for u in us]
        entry = {"estimate": values[0], "spread": max(values) - min(values), "models": list(members)}
        for key in interval_keys:
            cis = [u.get(key) for u in us]
            entry[key] = None if any(c is None for c in cis) else [min(c[0] for c in cis), max(c[1] for c in cis)]
        best_ci = us[0].get(interval_keys[0])
        if entry[interval_keys[0]] is None:
            entry["status"] = "undetermined"
        elif suspect_ref:
            entry["status"] = "suspect"
        else:
            entry["status"] = "model-dominated" if entry["spread"] > 0.5 * (best_ci[1] - best_ci[0]) else "ok"
        if us[0]["status"] == "misfit":         # the reference did not reach the footage: neither does this
            entry["status"] = "misfit"
        combined[n] = entry
    return json_safe({"best": order[0], "equally_good": good, "reference": reference, "combined_models": members,
                      "suspect_note": note, "tie_chi2": float(tie_chi2), "tie_rtol": float(tie_rtol),
                      "rows": rows,
                      "combined": combined})
