"""Soft-body clips in the coverage measurement (benchmarks/coverage.py): the scene files a user writes
for a soft clip another engine made (warp_soft_drop, newton_soft_drop: benchmarks/engine_sims.py), from
truth.json's user-side facts only: the engine's tet mesh (TetGen files), the object's total mass (as
weighed: `mass`, spread over the vertices from the tets' volumes, as for any object of uniform density;
not the engine's per-node masses), the initial pose and velocity, the camera and the ground plane.
Nothing about the material's damping is given: neither its value nor its form.

The damping is a model choice fitted like the contact law (issue 44, item 3): one `tigradsim fit` per
damping form of the library (tigradsim.physics.damping: deformation_rate, warp, rayleigh_stiffness,
rayleigh_mass), each with the coefficient an unknown searched over the form's documented prior range
(DAMPING_PRIORS, started at its geometric centre), then `tgs.compare_fit_outputs`: a row per form
(loss, 2 dL / s^2, IoU, estimates and intervals) and a combined estimate of mu and lam, the best
form's value with each kind of interval (statistical, with assumed constants, with discrepancy) the
envelope of the equally good forms' intervals of that kind.  [ground] states no contact constant and
no law; the contact constants are handled by [fit] contact_constants as for the boxes.  mu, lam start
at the same round guesses for every soft clip.  The truth stays in truth.json's "truth", read only to
score.
"""
from __future__ import annotations

import json
import os
import sys

from footage import FOOTAGE, SETTINGS, noisy_folder, run_fit, write_clip_scene

from tigradsim.fitting.model_selection import FIT_INTERVAL_KEYS, compare_fit_outputs
from tigradsim.physics.damping import DAMPING_MODELS, DAMPING_PRIORS

GUESS = {"cube.mu": 1500.0, "cube.lam": 3000.0}    # round guesses, the same for every soft clip
BOUNDS = {"cube.mu": (100.0, 1e5), "cube.lam": (100.0, 1e5)}
FORMS = tuple(DAMPING_MODELS)                       # every damping form the library has


def soft_settings(quick):
    """[simulation] and [fit] of a soft drop: footage.py's soft_drop settings (112 steps per frame,
    horizons 12 then 24 frames, 8 starts), fewer iterations with quick."""
    sim = dict(SETTINGS["soft_drop"]["simulation"])
    fit = dict(SETTINGS["soft_drop"]["fit"])
    if quick:
        fit.update(iterations=20, polish=10, starts=4, refine=6)
    return sim, fit


def make_soft_scene(clip, variant, contact, scene_dir, out, quick, form, ground=None, mass_distribution="volume",
                    substeps=None):
    """Write scene_dir/scene.toml for a soft clip fitted under damping form `form`; returns (path, truths).
    ground: [ground] keys that are numerics, not facts about the clip (e.g. {"damping_integration": "implicit"},
    benchmarks/implicit_damping_fit.py); default none.  mass_distribution: how the weighed total is spread
    over the vertices, a model choice ("volume", the default and the file's default, or "equal":
    tigradsim.physics.fem), not a fact of the clip.  substeps: [simulation] substeps instead of the settings' 112
    (a numerics choice: benchmarks/implicit_damping_fit.py --substeps, benchmarks/soft_drop_diagnose.py)."""
    folder = os.path.join(FOOTAGE, clip)
    truth = json.load(open(os.path.join(folder, "truth.json")))
    frames_folder = noisy_folder(clip, out) if variant == "noisy" else folder
    rel = lambda p: os.path.relpath(p, scene_dir)
    obj = truth["object"]
    pose, vel = obj["initial_pose"], obj["initial_velocity"]
    sim, fit = soft_settings(quick)
    if substeps is not None:
        if isinstance(substeps, bool) or not isinstance(substeps, int) or substeps < 1:
            raise ValueError(f"substeps: expected an integer >= 1 (steps a frame), got {substeps!r}")
        sim["substeps"] = substeps
    lower, upper = DAMPING_PRIORS[form]
    centre = (lower * upper) ** 0.5
    body = {"type": "soft", "tetgen": rel(os.path.join(folder, obj["mesh"]["node"])), "material": "neo_hookean",
            "params": {"mu": GUESS["cube.mu"], "lam": GUESS["cube.lam"]},
            "mass": float(obj["masses"]["total_mass"]),         # weighed: the total only
            "damping": centre, "damping_model": form, "radius": float(obj["particle_radius"]),
            "position": pose["position"], "rotation": pose["quaternion_xyzw"], "velocity": vel["linear"]}
    if mass_distribution != "volume":
        body["mass_distribution"] = mass_distribution
    if any(vel["angular"]):
        body["angular_velocity"] = vel["angular"]
    tables = [("[world]", {"up": "y", "gravity": -float(truth["world"]["gravity"][1])}), ("[simulation]", sim),
              ("[ground]", dict(ground or {})),       # no contact constant, no law
              ("[objects.cube]", body)]
    guess, bounds = dict(GUESS), dict(BOUNDS)
    guess["cube.damping"], bounds["cube.damping"] = centre, (lower, upper)
    path = write_clip_scene(tables, truth, variant, fit, contact, folder, frames_folder, scene_dir, guess, bounds)
    return path, soft_truths(truth)


def soft_truths(truth):
    """The true values of a soft clip's shared estimates: tigradsim's neo_hookean mu and lam (the engine's
    own parameters converted as truth.json's object.material_conversion says)."""
    return {"cube.mu": float(truth["truth"]["mu"]), "cube.lam": float(truth["truth"]["lam"])}


def run_soft_clip(clip, variant, contact, out, quick, timeout, score, fit=True, ground=None):
    """Fit a soft clip under every damping form and combine (module docstring).  `score(truths, report)`
    is coverage.py's scorer of one estimates.json dict.  fit=False: no fitting, the fits already in `out`
    are combined again (coverage.py --rescore).  ground: `make_soft_scene`'s numerics keys of [ground]
    (benchmarks/implicit_damping_fit.py --form all).  Returns coverage.py's result dict: "rows" (the combined
    estimates of mu and lam, scored), "forms" (per form: rc, CPU, wall, loss, 2 dL / s^2, IoU, equally
    good, rows scored, the damping coefficient's estimate), "comparison"."""
    outputs, forms, truths = {}, {}, None
    cpu_total = wall_total = 0.0
    for form in FORMS:
        scene_dir = os.path.join(out, f"{clip}_{variant}_{contact}", form)
        scene, truths = make_soft_scene(clip, variant, contact, scene_dir, out, quick, form, ground)
        run_json = os.path.join(scene_dir, "fit", "run.json")
        if fit:
            rc, wall, cpu, last, log, tail = run_fit(scene, os.path.join(scene_dir, "fit"), timeout, False)
            entry = {"rc": rc, "cpu_s": round(cpu, 1), "wall_s": round(wall, 1), "log": log}
            with open(run_json, "w") as fh:
                json.dump(entry, fh)
        else:
            entry = json.load(open(run_json)) if os.path.exists(run_json) else {"rc": None, "cpu_s": None,
                                                                                   "wall_s": None, "log": None}
            last, tail = None, []
        cpu_total += entry["cpu_s"] or 0.0
        wall_total += entry["wall_s"] or 0.0
        rep_path = os.path.join(scene_dir, "fit", "estimates.json")
        report = json.load(open(rep_path)) if os.path.exists(rep_path) else None
        if report is not None and not report.get("stopped_early"):
            entry["rc"] = 0 if entry["rc"] is None else entry["rc"]
            entry["rows"], entry["nuisance"] = score(truths, report)
            entry["iou_final"] = report.get("iou_final")
            entry["damping"] = {k: report["unknowns"]["cube.damping"].get(k) for k in ("estimate", "status", "ci95")}
            if (report.get("identification") or {}).get("minima"):
                outputs[form] = report
        else:
            entry["error"] = ((report or {}).get("error") or (last or {}).get("error") or "\n".join(tail)
                              or "no estimates.json")
        if fit:
            print(f"#   {clip}/{variant} damping {form}: rc {entry['rc']}, {entry['wall_s']:.0f} s wall, "
                  f"{entry['cpu_s']:.0f} s CPU", file=sys.stderr, flush=True)
        forms[form] = entry
    res = {"clip": clip, "variant": variant, "contact": contact, "rc": 0 if outputs else 1, "cpu_s": round(cpu_total, 1),
           "wall_s": round(wall_total, 1), "log": None, "forms": forms}
    if not outputs:
        res["error"] = "no damping form's fit finished"
        return res
    try:
        comparison = compare_fit_outputs(outputs, shared=list(GUESS))
    except ValueError as exc:
        res.update(rc=1, error=str(exc))
        return res
    for row in comparison["rows"]:
        forms[row["label"]].update(loss=row["loss"], delta_chi2=row["delta_chi2"], equally_good=row["equally_good"])
    res["comparison"] = comparison
    # the combined estimate scored like one fit's report (coverage.score reads these keys)
    combined = {"unknowns": {n: {"estimate": c["estimate"], "status": c["status"],
                                 **{k: c[k] for k in FIT_INTERVAL_KEYS}} for n, c in comparison["combined"].items()}}
    res["rows"], _ = score(truths, combined)
    best = outputs[comparison["best"]]
    res["nuisance"] = forms[comparison["best"]].get("nuisance", {})
    res.update(iou_final=best.get("iou_final"), summary=f"best form {comparison['best']}; equally good: "
               + ", ".join(comparison["equally_good"]), frames_fitted=best.get("frames_fitted"))
    return res


def forms_table(results):
    """Markdown rows of the per-form fits of the soft clips in `results` (coverage.py's result dicts)."""
    out = ["| clip | variant | damping form | 2 dL / s^2 | equally good | IoU | mu (error) [95 %, discrepancy] | "
           "lam (error) [95 %, discrepancy] | damping coefficient | CPU s |", "|---|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        for form, e in (r.get("forms") or {}).items():
            if "rows" not in e:
                out.append(f"| {r['clip']} | {r['variant']} | {form} | (fit failed, rc {e['rc']}) | | | | | | {e['cpu_s']} |")
                continue
            cells = []
            for name in GUESS:
                row = next((x for x in e["rows"] if x["unknown"] == name), None)
                ci, disc = row["ci95"], row.get("ci95_with_discrepancy")
                fmt = lambda c: "-" if c is None else f"{c[0]:.4g}-{c[1]:.4g}"
                cells.append(f"{row['estimate']:.4g} ({100 * row['rel_error']:+.1f} %) [{fmt(ci)}, {fmt(disc)}]")
            d = e.get("damping") or {}
            delta = e.get("delta_chi2")
            out.append(f"| {r['clip']} | {r['variant']} | {form} | {'-' if delta is None else f'{delta:.3g}'} | "
                       f"{'yes' if e.get('equally_good') else 'no'} | {e.get('iou_final') or 0:.3f} | {cells[0]} | "
                       f"{cells[1]} | {d.get('estimate', 0):.3g} ({d.get('status')}) | {e['cpu_s']} |")
    return "\n".join(out)
