"""Coverage of the 95 % intervals, measured (issue 44, items 2 and 6): `tigradsim fit` on footage whose
motion tigradsim made (box_push, box_drop) and footage whose motion other engines made (warp_*,
mujoco_*: benchmarks/engine_sims.py; the cloth over a ball, warp_cloth_sphere: coverage_cloth.py), clean / noisy (sigma 0.02) / camera 1 cm and 0.5 degree off,
with NO contact constant and NO contact law given to the fit.

The scene file of each fit is written from what a user of the clip has (truth.json's camera, fps,
mesh, initial pose and velocity, known forces, the ground plane) and nothing else: [ground] states
no ke, kd, kf or mu; the unknowns are the box's mass and friction coefficient, started at the same
round guesses for every clip (1 kg, 0.3: not derived from any truth); the contact constants are
handled by [fit] contact_constants (--contact: "nuisance", fitted within PRIOR_RANGES; or "assume",
held at the library's defaults with the intervals widened by their sensitivity).  The truth stays
in truth.json, read only to score.

Per estimate: estimate, truth, relative error, the 95 % interval (ci95: statistical, marginal over
fitted nuisance constants) and the interval with the assumed / undetermined constants' effect
(ci95_with_assumptions), that one widened further by the model discrepancy (ci95_with_discrepancy:
`tgs.discrepancy_intervals`, refits leaving out the beginning, middle or end of the fitted frames),
whether each contains the truth and the excess: how far outside the truth is, in half-widths (0
inside; in log units for these log-space values).  Then the coverage fraction per parameter and
overall, and the median half-width of each kind of interval (to show they stay useful).  An estimate the report calls undetermined has no interval: counted
apart (it is what the report should say of a box's mass with no known force).

    python3 benchmarks/coverage.py [--clips a,b] [--variants clean,noisy,camera] [--contact nuisance]
                                   [--quick] [--timeout S] [--out DIR] [--merge FILE ...] [--rescore]
                                   [--rigid-damping explicit|implicit] [--substeps N]

--quick: 64 px renders, fewer steps per frame and iterations (the settings are printed with the
table).  Soft clips (warp_soft_drop, newton_soft_drop) are given no damping value or form: one fit per
damping form, combined by model selection (benchmarks/coverage_soft.py); their rows are the combined
estimates, followed by a table per form.  Rigid drop clips are given no contact law either: one fit per
law of --laws (default coverage_laws.DROP_LAWS, including Warp's rigid friction), combined by model
selection (benchmarks/coverage_laws.py); their rows are the combined estimates, followed by a table per
law.  Prints a Markdown table and, last, a JSON line with every number.

--rigid-damping explicit|implicit writes [ground] damping_integration into every clip's scene (rigid and soft; the
cloth clips refuse it) and --substeps N the rigid clips' [simulation] substeps: numerics, not facts of a clip, the
same for every clip and law (measured on the drops: benchmarks/RESULTS.md, "Box drops with implicit rigid damping").
"""
from __future__ import annotations

import argparse
import functools
import json
import math
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
from footage import FOOTAGE, noisy_folder, run_fit, write_clip_scene  # noqa: E402

CLIPS = ("box_push", "box_drop", "warp_box_push", "warp_box_drop", "mujoco_box_push", "mujoco_box_drop",
         "newton_box_push", "newton_box_drop", "warp_soft_drop", "newton_soft_drop", "warp_cloth_sphere")
VARIANTS = ("clean", "noisy", "camera")
GUESS = {"box.mass": 1.0, "box.mu": 0.3}           # the same round guesses for every clip
BOUNDS = {"box.mass": (0.1, 10.0), "box.mu": (0.05, 1.5)}


def settings(clip, quick):
    """[simulation] and [fit] of a clip kind: push (a known force) or drop (none)."""
    push = clip.endswith("box_push")
    if push:
        sim = {"substeps": 32 if quick else 64}
        fit = {"iterations": 40 if quick else 60, "optimizer": "adam+bfgs", "lr": 0.05, "polish": 20 if quick else 30,
               "supervision": "mask", "resolution": 64 if quick else 128, "blur": [0.0, 1.0, 2.0],
               "refine": 6 if quick else 10}
    else:
        sim = {"substeps": 64 if quick else 128}
        # the search (issue 44 item 4): 16 / 24 Latin-hypercube starts scored on the first 10 frames (the
        # first contact is at frame ~8 in every drop clip; tied starts are scored again on 15), the best 8
        # fitted on that horizon, and at most 3 distinct ones, none clearly worse (> 2 x the best loss on
        # the same frames), go on to the next (identify's breadth-first continuation)
        fit = {"iterations": 40 if quick else 60, "optimizer": "adam+bfgs", "polish": 20 if quick else 30,
               "starts": 16 if quick else 24, "local_starts": 8, "keep": 3, "drop_ratio": 2.0,
               "horizons": [10, 15], "horizon": "auto",
               "supervision": "mask", "resolution": 64, "blur": [0.0, 1.0, 2.0], "refine": 6 if quick else 10}
    return sim, fit


def make_scene(clip, variant, contact, scene_dir, out, quick, law=None, horizon=None, ground=None, substeps=None):
    """Write scene_dir/scene.toml from the clip's user-side facts; returns (path, truths).  law: [ground]'s
    law keys of one model of a law comparison (coverage_laws.py; None: the library's default law);
    horizon: [fit] horizon = that frame count (the frames the comparison's first law fitted); ground: [ground]
    keys that are numerics, not facts about the clip (--rigid-damping: {"damping_integration": "implicit"}),
    the same for every clip and law; substeps: [simulation] substeps instead of `settings`' (--substeps)."""
    folder = os.path.join(FOOTAGE, clip)
    truth = json.load(open(os.path.join(folder, "truth.json")))
    from coverage_cloth import is_cloth_clip
    if is_cloth_clip(truth):                  # the cloth over a ball: coverage_cloth.py writes its scene files
        from coverage_cloth import make_cloth_scene
        if ground or substeps:
            raise ValueError(f"{clip}: --rigid-damping and --substeps are not implemented for the cloth clips "
                             "(coverage_cloth.py)")
        return make_cloth_scene(clip, variant, contact, scene_dir, out, quick)
    if truth["object"]["type"] == "soft":
        raise ValueError(f"{clip}: a soft clip is fitted once per damping form: coverage_soft.run_soft_clip")
    frames_folder = noisy_folder(clip, out) if variant == "noisy" else folder
    rel = lambda p: os.path.relpath(p, scene_dir)
    obj = truth["object"]
    pose, vel = obj["initial_pose"], obj["initial_velocity"]
    sim, fit = settings(clip, quick)
    if substeps is not None:
        sim["substeps"] = int(substeps)
    if horizon is not None:
        fit["horizon"] = int(horizon)
    tables = [("[world]", {"up": "y", "gravity": -float(truth["world"]["gravity"][1])}), ("[simulation]", sim),
              ("[ground]", dict(law or {}, **(ground or {}))),   # no contact constant; the law of this model
              ("[objects.box]", {"type": "rigid", "mesh": rel(os.path.join(folder, obj["mesh"])),
                                 "mass": GUESS["box.mass"], "mu": GUESS["box.mu"],
                                 "position": pose["position"], "rotation": pose["quaternion_xyzw"],
                                 "velocity": vel["linear"], "angular_velocity": vel["angular"]})]
    for f in truth.get("forces", []):
        tables.append(("[[forces]]", {"object": "box", "force": f["force"], "point": f["point"], "start": f["start"],
                                      "end": f["end"]}))
    path = write_clip_scene(tables, truth, variant, fit, contact, folder, frames_folder, scene_dir, GUESS, BOUNDS)
    return path, truths_of(clip)


def law_set(clip, laws):
    """The contact laws a clip is fitted under (--laws; module docstring of coverage_laws.py)."""
    from coverage_laws import DROP_LAWS, law_options
    if laws == "drops":
        return list(DROP_LAWS) if clip.endswith("box_drop") else ["capped"]
    out = [x.strip() for x in laws.split(",") if x.strip()]
    for x in out:
        law_options(x)
    return out


def excess(interval, truth):
    """How far outside `interval` the truth is, in half-widths of the interval (log units): 0 inside."""
    if interval is None:
        return None
    lo, hi = interval
    hw = 0.5 * math.log(hi / lo)
    out = max(0.0, math.log(lo / truth), math.log(truth / hi))
    return out / hw if hw > 0 else (math.inf if out > 0 else 0.0)


def truths_of(clip):
    """The clip's true values of the estimates a fit reports: mass and mu, and for tigradsim's own clips
    (its own contact law) the contact constants per unit mass too (the other engines' have no counterpart)."""
    truth = json.load(open(os.path.join(FOOTAGE, clip, "truth.json")))
    from coverage_cloth import cloth_truths, is_cloth_clip
    if is_cloth_clip(truth):
        return cloth_truths(truth)
    if truth["object"]["type"] == "soft":
        from coverage_soft import soft_truths
        return soft_truths(truth)
    t = truth["truth"]
    out = {"box.mass": float(t["mass"]), "box.mu": float(t["mu"])}
    if truth["simulation"].get("simulator", "tigradsim") == "tigradsim":
        for x in ("ke", "kd", "kf"):
            out[f"box.{x}_per_mass"] = float(t[x]) / float(t["mass"])
    return out


def score(truths, report):
    rows = []
    for k, tv in truths.items():
        if k not in report["unknowns"]:
            continue          # a nuisance the fit did not have (contact_constants = "assume")
        u = report["unknowns"][k]
        est, ci, wide, disc = u["estimate"], u["ci95"], u.get("ci95_with_assumptions"), u.get("ci95_with_discrepancy")
        rows.append({"unknown": k, "truth": tv, "estimate": est, "rel_error": (est - tv) / tv, "status": u["status"],
                     "ci95": ci, "in_ci95": None if ci is None else bool(ci[0] <= tv <= ci[1]),
                     "excess_ci95": excess(ci, tv),
                     "ci95_with_assumptions": wide,
                     "in_wide": None if wide is None else bool(wide[0] <= tv <= wide[1]),
                     "excess_wide": excess(wide, tv),
                     "ci95_with_discrepancy": disc,
                     "in_disc": None if disc is None else bool(disc[0] <= tv <= disc[1]),
                     "excess_disc": excess(disc, tv),
                     "ci95_over_minima": u.get("ci95_over_minima")})
    nuisance = {k: {"estimate": u["estimate"], "status": u["status"], "ci95": u["ci95"]}
                for k, u in report["unknowns"].items() if u.get("nuisance")}
    return rows, nuisance


def coverage(results, key, skip_misfit=False):
    """{parameter: (inside, with interval, undetermined)} and overall, for interval `key` ("in_ci95" /
    "in_wide"); skip_misfit: leave out the estimates the report itself marks "misfit"."""
    per = {}
    for r in results:
        for row in r.get("rows", []):
            if skip_misfit and row["status"] == "misfit":
                continue
            c = per.setdefault(row["unknown"], [0, 0, 0])
            if row.get(key) is None:
                c[2] += 1
            else:
                c[0] += row[key]
                c[1] += 1
    total = [sum(c[i] for c in per.values()) for i in range(3)]
    return per, total


def half_widths(results, key, skip_misfit=False):
    """{parameter: median relative half-width} of the intervals `key` ("ci95", "ci95_with_assumptions",
    "ci95_with_discrepancy"): 0.5 log(upper / lower), i.e. about the relative +- of the interval;
    skip_misfit: of the estimates the report does not mark "misfit" only."""
    per = {}
    for r in results:
        for row in r.get("rows", []):
            ci = row.get(key)
            if skip_misfit and row["status"] == "misfit":
                continue
            if ci is not None and ci[0] > 0:
                per.setdefault(row["unknown"], []).append(0.5 * math.log(ci[1] / ci[0]))
    return {k: float(np.median(v)) for k, v in per.items()}


def search_path(report):
    """The search of a fit in a few words (identify's breadth-first continuation, issue 44 item 4): starts
    scored, candidates per horizon ("8 on 10 fr -> 3 on 15 fr -> 3 on 26 fr"), equally good minima."""
    idn = report.get("identification") or {}
    stages = idn.get("stages") or []
    if not stages:
        return f"{len(idn.get('search', []))} starts, {len(idn.get('runs', []))} fitted"
    parts = [f"{len(d['objectives'])} on {d['frames']} fr" for d in stages]
    parts.append(f"{len(stages[-1]['kept'])} on {report.get('frames_fitted')} fr")
    tied = len(idn.get("tied") or [])
    return (f"{len(idn.get('search', []))} starts: " + " -> ".join(parts)
            + (f"; {tied} minima equally good" if idn.get("ambiguous") else ""))


def _f(v, n=4):
    return "-" if v is None else f"{v:.{n}g}"


def _ci(ci):
    return "-" if ci is None else f"[{_f(ci[0])}, {_f(ci[1])}]"


def finish(results, args_dict):
    print("| clip | variant | unknown | truth | estimate | error | 95% interval | in | excess | with assumed constants "
          "| in | excess | with discrepancy | in | excess | status |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in results:
        if "rows" not in r:
            print(f"| {r['clip']} | {r['variant']} | (fit failed, rc {r['rc']}: {str(r.get('error'))[:120]}) |"
                  " | | | | | | | | | |")
            continue
        for row in r["rows"]:
            yn = lambda b: "-" if b is None else ("yes" if b else "**no**")
            print(f"| {r['clip']} | {r['variant']} | {row['unknown'].split('.')[1]} | {_f(row['truth'])} | "
                  f"{_f(row['estimate'])} | {100 * row['rel_error']:+.2f}% | {_ci(row['ci95'])} | {yn(row['in_ci95'])} | "
                  f"{_f(row['excess_ci95'], 3)} | {_ci(row['ci95_with_assumptions'])} | {yn(row['in_wide'])} | "
                  f"{_f(row['excess_wide'], 3)} | {_ci(row.get('ci95_with_discrepancy'))} | {yn(row.get('in_disc'))} | "
                  f"{_f(row.get('excess_disc'), 3)} | {row['status']} |")
    print()
    print("| clip | variant | nuisance estimates | IoU | IoU fitted frames | residual / noise floor | search | CPU s "
          "| wall s |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in results:
        nu = ", ".join(f"{k.split('.')[1]} {_f(v['estimate'], 3)} ({v['status']})" for k, v in r.get("nuisance", {}).items())
        print(f"| {r['clip']} | {r['variant']} | {nu or '-'} | {_f(r.get('iou_final'), 3)} | "
              f"{_f(r.get('iou_fitted_frames'), 3)} | {_f(r.get('residual_over_noise'), 3)} | {r.get('search', '-')} | {r['cpu_s']} | {r['wall_s']} |")
    print()
    if any(r.get("laws") for r in results):
        from coverage_laws import laws_table
        print("Rigid clips, one fit per contact law (the rows above are their combined estimates):\n")
        print(laws_table(results))
        print()
    if any(r.get("forms") for r in results):
        from coverage_soft import forms_table
        print("Soft clips, one fit per damping form (the rows above are their combined estimates):\n")
        print(forms_table(results))
        print()
    summary = {}
    for key, label, skip in (("in_ci95", "95% interval", False), ("in_wide", "with assumed constants", False),
                             ("in_wide", "with assumed constants, estimates not marked misfit", True),
                             ("in_disc", "with discrepancy", False),
                             ("in_disc", "with discrepancy, estimates not marked misfit", True)):
        per, total = coverage(results, key, skip)
        summary[key + ("_not_misfit" if skip else "")] = {"per": per, "total": total}
        parts = [f"{k.split('.')[1]} {c[0]}/{c[1]}" + (f" ({c[2]} undetermined)" if c[2] else "") for k, c in per.items()]
        frac = f"{total[0] / total[1]:.0%}" if total[1] else "-"
        print(f"Coverage ({label}): " + ", ".join(parts) + f"; overall {total[0]}/{total[1]} = {frac}")
    excess2 = [(r["clip"], r["variant"], row["unknown"]) for r in results for row in r.get("rows", [])
               if row["excess_wide"] is not None and row["excess_wide"] > 2]
    print(f"Intervals (with assumed constants) that exclude the truth by more than 2 half-widths: {len(excess2)}")
    excess2d = [(r["clip"], r["variant"], row["unknown"]) for r in results for row in r.get("rows", [])
                if row.get("excess_disc") is not None and row["excess_disc"] > 2]
    print(f"Intervals (with discrepancy) that exclude the truth by more than 2 half-widths: {len(excess2d)} "
          + ", ".join("/".join(x) for x in excess2d))
    for skip in (False, True):
        widths = {key: half_widths(results, key, skip) for key in ("ci95", "ci95_with_assumptions",
                                                                    "ci95_with_discrepancy")}
        summary["median_half_width" + ("_not_misfit" if skip else "")] = widths
        for key, w in widths.items():
            print(f"Median half-width ({key}{', not misfit' if skip else ''}, 0.5 log(upper / lower)): "
                  + ", ".join(f"{k.split('.')[1]} {100 * v:.3g} %" for k, v in w.items()))
    print(json.dumps({"fits": results, "coverage": summary, "args": args_dict, "load_avg": os.getloadavg()},
                     default=lambda o: o.tolist() if isinstance(o, np.ndarray) else str(o)))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--clips", default=",".join(CLIPS))
    ap.add_argument("--variants", default=",".join(VARIANTS))
    ap.add_argument("--contact", choices=("nuisance", "assume"), default="nuisance",
                    help="[fit] contact_constants of every scene (default: nuisance)")
    ap.add_argument("--quick", action="store_true", help="64 px, fewer steps and iterations (settings above)")
    ap.add_argument("--timeout", type=float, default=1200.0)
    ap.add_argument("--out", default=os.path.join(ROOT, "out", "coverage"))
    ap.add_argument("--merge", nargs="+", metavar="FILE", help="print the table of saved outputs of this script")
    ap.add_argument("--rescore", action="store_true",
                    help="soft clips and law comparisons: no fitting, combine the fits already under --out again "
                         "(a law whose fit is missing is fitted)")
    ap.add_argument("--laws", default="drops",
                    help="contact laws compared on the rigid clips (coverage_laws.py): comma-separated law labels "
                         "('capped', 'uncapped+warp(0.01)': law_compare.parse_law_label), the first setting the horizon; 'drops' (default): the "
                         "drop clips under coverage_laws.DROP_LAWS, the pushes under the default law only; 'capped': "
                         "one fit per clip under the default law, no comparison")
    ap.add_argument("--rigid-damping", choices=("explicit", "implicit"), default=None,
                    help="[ground] damping_integration of every clip's scene (rigid and soft; kd, kf stepped by "
                         "local backward Euler when implicit: tigradsim.physics.contact); default: not written "
                         "(the library's default, explicit)")
    ap.add_argument("--substeps", type=int, default=None,
                    help="[simulation] substeps (steps per frame) of every rigid clip's scene instead of the "
                         "settings' (--quick: 32 push, 64 drop); soft and cloth clips refuse it")
    args = ap.parse_args(argv)
    if args.substeps is not None and args.substeps < 1:
        ap.error(f"--substeps: expected an integer >= 1, got {args.substeps}")
    ground = {"damping_integration": args.rigid_damping} if args.rigid_damping else None
    scene_of = functools.partial(make_scene, ground=ground, substeps=args.substeps)
    if args.merge:
        results = []
        for path in args.merge:
            lines = [ln for ln in open(path).read().splitlines() if ln.startswith('{"fits"')]
            if not lines:
                ap.error(f"--merge: no JSON line in {path!r}")
            results += json.loads(lines[-1])["fits"]
        latest = {(r["clip"], r["variant"], r.get("contact")): r for r in results}
        for r in latest.values():         # re-scored from the saved reports (this file's truths_of)
            if r.get("forms") or r.get("laws") or not r.get("log"):
                continue                  # soft clips: combined over the damping forms when they ran
            rep_path = os.path.join(os.path.dirname(r["log"]), "estimates.json")
            if r["rc"] == 0 and os.path.exists(rep_path):
                report = json.load(open(rep_path))
                r["rows"], r["nuisance"] = score(truths_of(r["clip"]), report)
                r.update(ambiguous=report.get("ambiguous"), search=search_path(report),
                         residual_over_noise=(report.get("fit_quality") or {}).get("ratio"),
                         iou_fitted_frames=report.get("iou_final_fitted_frames"))
        return finish(list(latest.values()), {"merge": args.merge})
    clips, variants = args.clips.split(","), args.variants.split(",")
    for c in clips:
        if c not in CLIPS:
            ap.error(f"--clips: {c!r} is not one of {CLIPS}")
    for v in variants:
        if v not in VARIANTS:
            ap.error(f"--variants: {v!r} is not one of {VARIANTS}")
    out = os.path.abspath(args.out)
    results = []
    for clip in clips:
        for variant in variants:
            if json.load(open(os.path.join(FOOTAGE, clip, "truth.json"))).get("object", {}).get("type") == "soft":
                from coverage_soft import run_soft_clip
                if args.substeps is not None:
                    ap.error(f"--substeps: not implemented for the soft clips ({clip}: coverage_soft.py's settings)")
                res = run_soft_clip(clip, variant, args.contact, out, args.quick, args.timeout, score,
                                    fit=not args.rescore, ground=ground)
                print(f"# {clip}/{variant}: {res['wall_s']:.0f} s wall, {res['cpu_s']:.0f} s CPU (all damping forms)",
                      file=sys.stderr, flush=True)
                results.append(res)
                continue
            laws = law_set(clip, args.laws)
            if len(laws) > 1:
                from coverage_laws import run_law_clip
                res = run_law_clip(clip, variant, args.contact, out, args.quick, args.timeout, laws, scene_of,
                                   score, run_fit, fit=not args.rescore)
                print(f"# {clip}/{variant}: {res['wall_s']:.0f} s wall, {res['cpu_s']:.0f} s CPU (all laws; "
                      f"{res.get('summary') or res.get('error')})", file=sys.stderr, flush=True)
                results.append(res)
                continue
            scene_dir = os.path.join(out, f"{clip}_{variant}_{args.contact}")
            scene, truths = scene_of(clip, variant, args.contact, scene_dir, out, args.quick)
            rc, wall, cpu, last, log, tail = run_fit(scene, os.path.join(scene_dir, "fit"), args.timeout, False)
            res = {"clip": clip, "variant": variant, "contact": args.contact, "rc": rc, "wall_s": round(wall, 1),
                   "cpu_s": round(cpu, 1), "log": log}
            rep_path = os.path.join(scene_dir, "fit", "estimates.json")
            if rc == 0 and os.path.exists(rep_path):
                report = json.load(open(rep_path))
                res["rows"], res["nuisance"] = score(truths, report)
                res.update(iou_final=report.get("iou_final"), summary=report.get("summary"),
                           frames_fitted=report.get("frames_fitted"), ambiguous=report.get("ambiguous"),
                           search=search_path(report),
                           residual_over_noise=(report.get("fit_quality") or {}).get("ratio"),
                           iou_fitted_frames=report.get("iou_final_fitted_frames"))
            else:
                res["error"] = (last or {}).get("error") or "\n".join(tail)
            print(f"# {clip}/{variant}: rc {rc}, {wall:.0f} s wall, {cpu:.0f} s CPU", file=sys.stderr, flush=True)
            results.append(res)
    finish(results, {"clips": clips, "variants": variants, "contact": args.contact, "quick": args.quick,
                     "rigid_damping": args.rigid_damping, "substeps": args.substeps})
    return 0


if __name__ == "__main__":
    sys.exit(main())
