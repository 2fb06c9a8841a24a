"""One soft clip fitted with the ground's kd and kf stepped implicitly (damping_integration = "implicit",
tigradsim.physics.contact), next to the explicit fit of benchmarks/coverage_soft.py.

Why: at the soft fits' 112 steps a frame the explicit limit of a 3-5 g corner vertex caps the nuisance ranges
of kd and kf at 5-9 N s/m (`scene_unknowns.soft_contact_caps`), while Warp and Newton use kf 100-150; the
fits sat on the cap (benchmarks/RESULTS.md, "Soft clips with no damping given").  With the implicit option
the caps on kd and kf go (ke keeps its cap) and the nuisance ranges are the library's priors (kd one decade
each side of 10, kf [1, 1000] N s/m).

The scene is coverage_soft.py's (the same mesh, total mass, camera, --quick settings, contact constants as
nuisances, no law), with one damping form (default "warp", the clip's true form: the quickest comparison with
that form's explicit row) and [ground] damping_integration = "implicit".  Prints one JSON line: rows of
cube.mu and cube.lam (estimate, error, intervals), the nuisance estimates, IoU, CPU and wall seconds.
--variant noisy / camera are coverage_soft.py's (footage.write_clip_scene); for "camera" the line also gives
camera_error: the scene's perturbed camera and the fit's refined one against the true camera (degrees, metres).

--mass-distributions volume,equal: the mass distribution as a model choice (tigradsim.physics.fem: the weighed
total spread by the tets' volumes, or equally over the vertices; footage does not say which the engine or the
object has).  One fit per distribution (scene dir .../DIST), then `compare_fit_outputs` over cube.mu and
cube.lam (fitting/ties.py's rule: equally good within 5 % of the best loss) as coverage_soft.py combines
damping forms: the line gets "distributions" (per distribution: rows, IoU, loss, equally good, CPU s),
"comparison", and "rows" = the combined estimate scored.  Default: "volume" alone (the line as before).

--form all --mass-distributions volume,equal: the two choices compared jointly (the product: one fit per
(distribution, damping form), scene dirs OUT/CLIP_VARIANT_FORM_INTEGRATION/DIST, labels "DIST/FORM"), then one
`compare_fit_outputs` over all of them (the ties rule, the suspect rule for fits with a determined value on a
prior bound, the combined estimate): the line gets "variants" (per label: rows, IoU, loss, equally good, bound
hits, CPU s), "comparison", "reference" (the label whose values are reported), "rows" = the combined estimate
scored.  --reuse: a combination whose scene dir already holds a finished fit of the same scene file (the
file written now equal to the one there, but for where the repository's clip folder is) is read, not fitted
again; its CPU seconds come from fit/run.json when there.

--form all (volume alone): the damping-form comparison of coverage_soft.py (`run_soft_clip`: one fit per form of
physics/damping.py DAMPING_MODELS, one after another, then `compare_fit_outputs`) with the same [ground]
damping_integration, volume-lumped masses; the JSON line is coverage.py's result dict (combined rows of mu and
lam, per form: rc, CPU, loss, 2 dL / s^2, equally good, IoU, rows, damping coefficient), fits under
OUT/forms_INTEGRATION/.

    python3 benchmarks/implicit_damping_fit.py [--clip warp_soft_drop] [--variant clean] [--form warp|all]
        [--integration implicit] [--mass-distributions volume[,equal]] [--out out/implicit_damping] [--timeout 3000]
        [--reuse] [--substeps N]

--substeps N: every scene steps N times a frame instead of soft_settings' 112 (tigradsim's step converging on
the clip's motion: benchmarks/soft_drop_diagnose.py; use another --out, the scene dirs do not name the step).
"""
from __future__ import annotations

import argparse
import copy
import json
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from coverage import score                                   # noqa: E402
from coverage_soft import FORMS, make_soft_scene, run_soft_clip   # noqa: E402
from footage import FOOTAGE, ROOT, camera_image_error, camera_pose_error, perturbed_camera, run_fit   # noqa: E402

from tigradsim.fitting.model_selection import FIT_INTERVAL_KEYS, compare_fit_outputs   # noqa: E402
from tigradsim.physics.fem import MASS_DISTRIBUTIONS                                   # noqa: E402


def camera_errors(clip, report):
    """{"scene": (deg, m), "fitted": (deg, m), "scene_px": (mean, max), "fitted_px": (mean, max)}: the
    "camera" variant's perturbed camera and the fit's refined one (estimates.json "camera") against the
    clip's true camera, as poses (camera_pose_error) and in the image (camera_image_error over the true
    centroid trajectory, footage pixels)."""
    truth = json.load(open(os.path.join(FOOTAGE, clip, "truth.json")))
    cam, points = truth["camera"], truth["trajectory"]["centroid"]
    true_camera = (cam["K"], cam["R"], cam["t"])
    R, t = perturbed_camera(cam["R"], cam["t"])
    out = {"scene": camera_pose_error(R, t, cam["R"], cam["t"]),
           "scene_px": camera_image_error((cam["K"], R, t), true_camera, points)}
    if report.get("camera"):
        fitted = report["camera"]
        out["fitted"] = camera_pose_error(fitted["R"], fitted["t"], cam["R"], cam["t"])
        out["fitted_px"] = camera_image_error((fitted["K"], fitted["R"], fitted["t"]), true_camera, points)
    return out


def _read(path):
    """A scene file's text for the --reuse comparison (None when absent), with the location of the repository's
    clip folder left out (another worktree's checkout of the same clip files writes another relative path)."""
    if not os.path.exists(path):
        return None
    with open(path) as fh:
        return re.sub(r'"[^"]*?benchmarks/footage/', '"FOOTAGE/', fh.read())


def fit_one(a, scene_dir, distribution):
    """One fit of the clip under `distribution` and a.form; its result dict (rows, nuisance, IoU, damping,
    CPU) and report.  a.reuse (optional): read a finished fit of the same scene file instead (module docstring)."""
    scene_path = os.path.join(scene_dir, "scene.toml")
    before = _read(scene_path)
    steps = {"substeps": a.substeps} if getattr(a, "substeps", None) else {}     # default: the settings' 112
    scene, truths = make_soft_scene(a.clip, a.variant, "nuisance", scene_dir, a.out, True, a.form,
                                    ground={"damping_integration": a.integration}, mass_distribution=distribution,
                                    **steps)
    rep_path, run_path = os.path.join(scene_dir, "fit", "estimates.json"), os.path.join(scene_dir, "fit", "run.json")
    if getattr(a, "reuse", False) and before is not None and before == _read(scene) and os.path.exists(rep_path):
        res = dict(json.load(open(run_path)) if os.path.exists(run_path) else {"rc": 0, "cpu_s": None, "wall_s": None},
                   reused=True)
    else:
        rc, wall, cpu, last, log, tail = run_fit(scene, os.path.join(scene_dir, "fit"), a.timeout, False)
        res = {"rc": rc, "cpu_s": round(cpu, 1), "wall_s": round(wall, 1), "log": log}
        if os.path.isdir(os.path.dirname(run_path)):
            with open(run_path, "w") as fh:
                json.dump(res, fh)
    report = None
    if os.path.exists(rep_path):
        report = json.load(open(rep_path))
        res["rows"], res["nuisance"] = score(truths, report)
        res["iou_final"] = report.get("iou_final")
        res["damping"] = {k: report["unknowns"]["cube.damping"].get(k) for k in ("estimate", "status", "ci95")}
        if a.variant == "camera":            # how far the scene's camera and the refined one are from the truth
            res["camera_error"] = camera_errors(a.clip, report)
    else:
        res["error"] = (last or {}).get("error") or "\n".join(tail)
    return res, report, truths


def compare_distributions(a, base_dir, distributions):
    """Fit under each mass distribution and combine mu, lam (module docstring)."""
    jobs = {dist: (os.path.join(base_dir, dist), a.form, dist) for dist in distributions}
    return compare_jobs(a, jobs, "distributions")


def compare_product(a, distributions, forms):
    """Fit every (distribution, damping form) and combine mu, lam over all of them (module docstring)."""
    jobs = {f"{dist}/{form}": (os.path.join(a.out, f"{a.clip}_{a.variant}_{form}_{a.integration}", dist), form, dist)
            for dist in distributions for form in forms}
    res = compare_jobs(a, jobs, "variants")
    res["form"] = "all"
    return res


def compare_jobs(a, jobs, key):
    """Fit each job {label: (scene dir, damping form, distribution)} and combine cube.mu, cube.lam with
    `compare_fit_outputs` (ties rule, suspect rule); the result dict has the per-label entries under `key`."""
    per, outputs, truths = {}, {}, None
    for label, (scene_dir, form, dist) in jobs.items():
        job = copy.copy(a)
        job.form = form
        per[label], report, truths = fit_one(job, scene_dir, dist)
        print(f"#   {a.clip}/{a.variant} {label}: rc {per[label]['rc']}, {per[label]['cpu_s']} s CPU"
              + (" (reused)" if per[label].get("reused") else ""), file=sys.stderr, flush=True)
        if report is not None and (report.get("identification") or {}).get("minima"):
            outputs[label] = report
    cpus = [e["cpu_s"] for e in per.values() if e.get("cpu_s") is not None]
    res = {"clip": a.clip, "variant": a.variant, "form": a.form, "integration": a.integration,
           "cpu_s": round(sum(cpus), 1), "cpu_s_complete": len(cpus) == len(per), key: per}
    if not outputs:
        res["error"] = "no fit finished"
        return res
    comparison = compare_fit_outputs(outputs, shared=["cube.mu", "cube.lam"])
    for row in comparison["rows"]:
        per[row["label"]].update(loss=row["loss"], loss_excess=row["loss_excess"], equally_good=row["equally_good"],
                                 suspect=row["suspect"])
    combined = {"unknowns": {n: {"estimate": c["estimate"], "status": c["status"],
                                 **{k: c[k] for k in FIT_INTERVAL_KEYS}} for n, c in comparison["combined"].items()}}
    res["rows"], _ = score(truths, combined)
    res.update(comparison=comparison, best=comparison["best"], equally_good=comparison["equally_good"],
               reference=comparison["reference"], combined_models=comparison["combined_models"],
               suspect_note=comparison["suspect_note"])
    return res


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--clip", default="warp_soft_drop")
    ap.add_argument("--variant", default="clean")
    ap.add_argument("--form", default="warp", choices=FORMS + ("all",))
    ap.add_argument("--integration", choices=("explicit", "implicit"), default="implicit")
    ap.add_argument("--out", default=os.path.join(ROOT, "out", "implicit_damping"))
    ap.add_argument("--timeout", type=float, default=3000.0)
    ap.add_argument("--mass-distributions", default="volume",
                    help="comma-separated: " + ", ".join(MASS_DISTRIBUTIONS) + " (more than one: fit each, combine)")
    ap.add_argument("--substeps", type=int, default=None,
                    help="[simulation] substeps (steps a frame) of every scene instead of the settings' 112 (a "
                         "numerics choice; benchmarks/soft_drop_diagnose.py measures what it moves)")
    ap.add_argument("--reuse", action="store_true",
                    help="read a finished fit of the same scene file instead of fitting it again")
    a = ap.parse_args(argv)
    if a.substeps is not None and a.substeps < 1:
        ap.error(f"--substeps: expected an integer >= 1 (steps a frame), got {a.substeps}")
    distributions = [d.strip() for d in a.mass_distributions.split(",") if d.strip()]
    bad = [d for d in distributions if d not in MASS_DISTRIBUTIONS]
    if bad or not distributions:
        ap.error(f"--mass-distributions: expected names among {', '.join(MASS_DISTRIBUTIONS)}, got {a.mass_distributions!r}")
    if len(set(distributions)) != len(distributions):
        ap.error(f"--mass-distributions: a distribution is given twice in {a.mass_distributions!r}")
    if a.form == "all" and distributions != ["volume"]:     # the product of distributions and forms
        res = compare_product(a, distributions, FORMS)
        print(json.dumps(res, default=float))
        return 0 if "rows" in res else 1
    if a.form == "all":                     # every damping form, compared and combined (module docstring)
        res = run_soft_clip(a.clip, a.variant, "nuisance", os.path.join(a.out, f"forms_{a.integration}"), True,
                            a.timeout, score, ground={"damping_integration": a.integration})
        res["integration"] = a.integration
        print(json.dumps(res, default=float))
        return 0 if "rows" in res else 1
    scene_dir = os.path.join(a.out, f"{a.clip}_{a.variant}_{a.form}_{a.integration}")
    if distributions != ["volume"]:
        res = compare_distributions(a, scene_dir, distributions)
        print(json.dumps(res))
        return 0 if "rows" in res else 1
    one, _, _ = fit_one(a, scene_dir, "volume")
    res = {"clip": a.clip, "variant": a.variant, "form": a.form, "integration": a.integration, **one}
    print(json.dumps(res))
    return 0 if "rows" in res else 1


if __name__ == "__main__":
    sys.exit(main())
