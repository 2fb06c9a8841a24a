"""The contact law as a model choice in the coverage measurement (benchmarks/coverage.py, issue 44 item 3):
a rigid clip fitted once per contact law, then compared and combined by `tgs.compare_fit_outputs`, as the
soft clips are over damping forms (coverage_soft.py).

Footage does not say which law made it, so none is given: the scene file of each fit is coverage.py's
(no contact constant, the unknowns' round guesses, [fit] contact_constants) with only [ground]'s law keys
(damping, friction, friction_velocity) set to the law's (tigradsim/scenes/law_compare.law_spec does the
same for `tigradsim laws`).  The laws are labelled as `law_compare.law_label` writes them ("capped",
"uncapped", "capped+huber", "capped+warp(0.01)", "uncapped+warp(0.1)", ...); friction = "warp" comes once per
friction velocity of its documented grid (physics/contact.py WARP_FRICTION_VELOCITIES), never the clip's own.
Each law is fitted in a process of its own (`tigradsim fit`).

Models compare on the same residuals only: the first law listed fits with [fit] horizon = "auto" (its
predictable horizon), every other law on the frames that fit chose ([fit] horizon = N), as
`compare_scene_variants` does.  The rows scored are the combined estimates (the best law's value, each
interval kind the envelope of the equally good laws' intervals); `laws_table` prints one row per law.
"""
from __future__ import annotations

import json
import os
import sys

from tigradsim.fitting.model_selection import FIT_INTERVAL_KEYS, compare_fit_outputs
from tigradsim.scenes.law_compare import LAWS, parse_law_label

# The laws a drop clip is fitted under by default: every law the library has, as `tigradsim laws` compares
# them (law_compare.LAWS: both dampings, each friction, Warp's friction once per friction velocity of its grid),
# the library's default law first (it sets the horizon every other one fits).  Footage does not say its law,
# so none is left out: the drops' earlier set of four left out uncapped damping with Warp's friction, the law
# Warp's clips were made with (measured in RESULTS.md, "Box drops with implicit rigid damping").
DROP_LAWS = ("capped",) + tuple(label for label in LAWS if label != "capped")


def law_options(label):
    """[ground]'s law keys of the law `label` ("capped", "uncapped+warp(0.01)": law_compare.parse_law_label)."""
    law = parse_law_label(label)
    out = {"damping": law.damping, "friction": law.friction}
    if law.friction in ("huber", "warp"):
        out["friction_velocity"] = law.friction_velocity
    return out


def law_folder(label):
    """A folder name for a law label ("capped+warp(0.01)" -> "capped+warp_0.01")."""
    return label.replace("(", "_").replace(")", "")


def run_law_clip(clip, variant, contact, out, quick, timeout, laws, make_scene, score, run_fit, fit=True):
    """Fit a rigid clip under each law of `laws` (labels of LAWS, the first one setting the horizon) and
    combine (module docstring).  make_scene(clip, variant, contact, scene_dir, out, quick, law=..., horizon=...)
    writes a law's scene file (coverage.make_scene); score(truths, report) scores one estimates.json dict;
    run_fit is footage.run_fit.  fit=False: no fitting, only laws whose estimates.json is missing are fitted
    (the others are read back).  Returns coverage.py's result dict: "rows" (combined, scored), "laws" (per
    law: rc, CPU, wall, loss, 2 dL / s^2, equally good, IoU, rows scored), "comparison"."""
    laws = list(laws)
    for label in laws:
        law_options(label)
    outputs, entries, truths, horizon = {}, {}, None, None
    cpu_total = wall_total = 0.0
    for label in laws:
        scene_dir = os.path.join(out, f"{clip}_{variant}_{contact}", law_folder(label))
        scene, truths = make_scene(clip, variant, contact, scene_dir, out, quick, law=law_options(label),
                                   horizon=horizon)
        rep_path = os.path.join(scene_dir, "fit", "estimates.json")
        run_json = os.path.join(scene_dir, "fit", "run.json")
        if fit or not os.path.exists(rep_path):
            rc, wall, cpu, last, log, tail = run_fit(scene, os.path.join(scene_dir, "fit"), timeout, False)
            entry = {"rc": rc, "cpu_s": round(cpu, 1), "wall_s": round(wall, 1), "log": log}
            with open(run_json, "w") as fh:
                json.dump(entry, fh)
            print(f"#   {clip}/{variant} law {label}: rc {rc}, {wall:.0f} s wall, {cpu:.0f} s CPU", file=sys.stderr,
                  flush=True)
        else:
            entry = json.load(open(run_json)) if os.path.exists(run_json) else {"rc": 0, "cpu_s": None,
                                                                                   "wall_s": None, "log": None}
            last, tail = None, []
        cpu_total += entry["cpu_s"] or 0.0
        wall_total += entry["wall_s"] or 0.0
        report = json.load(open(rep_path)) if os.path.exists(rep_path) else None
        if report is not None and not report.get("stopped_early") and (report.get("identification") or {}).get("minima"):
            entry["rows"], entry["nuisance"] = score(truths, report)
            entry.update(iou_final=report.get("iou_final"), frames_fitted=report.get("frames_fitted"),
                         iou_fitted_frames=report.get("iou_final_fitted_frames"),
                         residual_over_noise=(report.get("fit_quality") or {}).get("ratio"))
            outputs[label] = report
            if horizon is None:              # the first finished law's frames: every later law fits these
                horizon = int(report["frames_fitted"])
        else:
            entry["error"] = ((report or {}).get("error") or (last or {}).get("error") or "\n".join(tail)
                              or "no estimates.json")
        entries[label] = entry
    res = {"clip": clip, "variant": variant, "contact": contact, "rc": 0 if outputs else 1,
           "cpu_s": round(cpu_total, 1), "wall_s": round(wall_total, 1), "log": None, "laws": entries}
    if not outputs:
        res["error"] = "no law's fit finished"
        return res
    try:
        comparison = compare_fit_outputs(outputs)
    except ValueError as exc:
        res.update(rc=1, error=str(exc))
        return res
    for row in comparison["rows"]:
        entries[row["label"]].update(loss=row["loss"], loss_excess=row["loss_excess"], delta_chi2=row["delta_chi2"],
                                     equally_good=row["equally_good"])
    res["comparison"] = comparison
    combined = {"unknowns": {n: {"estimate": c["estimate"], "status": c["status"], **{k: c[k] for k in FIT_INTERVAL_KEYS}}
                             for n, c in comparison["combined"].items()}}
    res["rows"], _ = score(truths, combined)
    best = outputs[comparison["best"]]
    res["nuisance"] = entries[comparison["best"]].get("nuisance", {})
    res.update(iou_final=best.get("iou_final"), frames_fitted=best.get("frames_fitted"),
               iou_fitted_frames=best.get("iou_final_fitted_frames"),
               residual_over_noise=(best.get("fit_quality") or {}).get("ratio"),
               summary=f"best law {comparison['best']}; equally good: " + ", ".join(comparison["equally_good"]))
    return res


def laws_table(results):
    """Markdown rows of the per-law fits in `results` (coverage.py's result dicts with "laws"): the loss
    above the best law's (relative; within tie_rtol = 5 % is equally good, fitting/ties.py) and 2 dL / s^2 (for
    information: it counts correlated pixels as independent), whether it is equally good, IoU, and each estimate with its error and intervals."""
    out = ["| clip | variant | law | dL / L_best (2 dL / s^2) | equally good | IoU (all / fitted) | estimates: value (error) "
           "[95 %; with discrepancy] status | CPU s |", "|---|---|---|---|---|---|---|---|"]
    fmt = lambda c: "-" if c is None else f"{c[0]:.4g}-{c[1]:.4g}"
    for r in results:
        for label, e in (r.get("laws") or {}).items():
            if "rows" not in e:
                out.append(f"| {r['clip']} | {r['variant']} | {label} | (fit failed, rc {e['rc']}) | | | | {e['cpu_s']} |")
                continue
            cells = []
            for row in e["rows"]:
                if row["unknown"].endswith(".mass") and row["status"] == "undetermined":
                    continue
                cells.append(f"{row['unknown'].split('.')[1]} {row['estimate']:.4g} ({100 * row['rel_error']:+.1f} %) "
                             f"[{fmt(row['ci95'])}; {fmt(row.get('ci95_with_discrepancy'))}] {row['status']}")
            for k, v in (e.get("nuisance") or {}).items():
                if not any(row["unknown"] == k for row in e["rows"]):      # no truth for it (another engine)
                    cells.append(f"{k.split('.')[1]} {v['estimate']:.4g} {v['status']}")
            delta = e.get("delta_chi2")
            excess = e.get("loss_excess")
            delta = None if delta is None else (f"{delta:.3g}" if excess is None else f"{100 * excess:+.2f} % ({delta:.3g})")
            iou = e.get("iou_final")
            fitted = e.get("iou_fitted_frames")
            out.append(f"| {r['clip']} | {r['variant']} | {label} | {'-' if delta is None else delta} | "
                       f"{'yes' if e.get('equally_good') else 'no'} | {'-' if iou is None else f'{iou:.3f}'} / "
                       f"{'-' if fitted is None else f'{fitted:.3f}'} ({e.get('frames_fitted')} fr) | "
                       + "; ".join(cells) + f" | {e['cpu_s']} |")
    return "\n".join(out)
