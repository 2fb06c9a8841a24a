"""The assumed constants' range ends the footage rules out (issue 44 item 2; tigradsim/fitting/sensitivity.py,
"Range ends the footage rules out"): on one clip, the interval "with assumed constants" over the whole prior
ranges against the one over the part the footage allows, per [fit] assumption_refit_steps.

    python3 benchmarks/rule_out.py SCENE_DIR [--clip warp_box_push] [--steps 0,3] [--timeout S]
    python3 benchmarks/rule_out.py SCENE_DIR --clip warp_ball_box --scene SCENE.toml --init NAME=V,... [--steps 3]

1. writes the coverage scene of the clip (coverage.make_scene: "clean", contact constants "assume", coverage.py's
   --quick settings: what a user of the clip has, no contact constant) and fits it with `tigradsim fit` as
   coverage.py does (skipped when SCENE_DIR/fit holds a finished estimates.json);
2. per refit_steps K: the same scene with the estimate as every unknown's init, [fit] assumption_refit_steps = K
   and iterations, polish, refine = 0 (`tigradsim fit`: the report at the estimate, no search), timed (CPU s);
   With --scene and --init (an interacting clip's scene file, e.g. the ball's, and an estimate a fit reported):
   step 1 is skipped and the report is made at --init (the truths: interacting_footage.truths_of);
3. prints per estimate the truth, the estimate, ci95, the interval with assumed constants over the whole ranges
   (as before) and over the allowed part, whether each holds the truth, and each ruled-out side's sentence; last
   a JSON line.  truth.json is read only here, to score.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from coverage import make_scene, truths_of  # noqa: E402
from footage import run_fit  # noqa: E402


def at_estimate(scene, estimates, steps, out):
    """A copy of `scene` (a path) with every unknown's init at `estimates` and assumption_refit_steps = steps."""
    text = open(scene).read()
    for name, value in estimates.items():
        text, n = re.subn(rf'(\[unknowns\."{re.escape(name)}"\]\ninit = )[^\n]+', rf"\g<1>{value!r}", text)
        if n != 1:
            raise ValueError(f"{scene}: no [unknowns.\"{name}\"] init to replace")
    for key in ("iterations", "polish", "refine"):          # the report at the estimate only: no search, no LM
        text, n = re.subn(rf"(?m)^{key} = \d+$", f"{key} = 0", text)
        if n > 1:
            raise ValueError(f"{scene}: [fit] {key} more than once")
    text = text.replace("[fit]\n", f"[fit]\nassumption_refit_steps = {int(steps)}\n", 1)
    path = os.path.join(os.path.dirname(scene), f"scene_steps{steps}.toml")
    with open(path, "w") as fh:
        fh.write(text)
    return path


def holds(interval, truth):
    return None if interval is None else bool(interval[0] <= truth <= interval[1])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("scene_dir")
    ap.add_argument("--clip", default="warp_box_push")
    ap.add_argument("--steps", default="0,3")
    ap.add_argument("--timeout", type=float, default=1500)
    ap.add_argument("--scene", default=None, help="a scene file to report at --init instead of step 1")
    ap.add_argument("--init", default=None, help="NAME=VALUE,...: the estimate (with --scene)")
    a = ap.parse_args()
    os.makedirs(a.scene_dir, exist_ok=True)
    fit_cpu = None
    if a.scene:
        from footage import FOOTAGE
        from interacting_footage import truths_of as interacting_truths
        scene = a.scene
        truths = interacting_truths(a.clip, json.load(open(os.path.join(FOOTAGE, a.clip, "truth.json"))))
        estimates = {k: float(v) for k, v in (kv.split("=") for kv in a.init.split(","))}
    else:
        scene, truths = make_scene(a.clip, "clean", "assume", a.scene_dir, a.scene_dir, True)
        fit_dir = os.path.join(a.scene_dir, "fit")
        done = os.path.join(fit_dir, "estimates.json")
        if not os.path.exists(done):
            rc, wall, fit_cpu, last, log, tail = run_fit(scene, fit_dir, a.timeout, False)   # as coverage.py
            if rc != 0:
                raise SystemExit(f"fit failed (rc {rc}): {log}\n" + "\n".join(tail))
        fitted = json.load(open(done))
        estimates = {k: u["estimate"] for k, u in fitted["unknowns"].items()}
    print(f"fit: {estimates} (CPU s {fit_cpu})")
    rows = []
    for steps in [int(s) for s in a.steps.split(",")]:
        out = os.path.join(a.scene_dir, f"report{steps}")
        rc, wall, cpu, last, log, tail = run_fit(at_estimate(scene, estimates, steps, out), out, a.timeout, False)
        if rc != 0:
            print(f"refit_steps {steps}: rc {rc}: {log}\n" + "\n".join(tail))
            continue
        rep = json.load(open(os.path.join(out, "estimates.json")))
        ruled = [r["text"] for r in (rep.get("assumptions") or {}).get("ruled_out", [])]
        for k, truth in truths.items():
            u = rep["unknowns"].get(k)
            if u is None:
                continue
            old, new = u.get("ci95_with_assumptions_whole_range"), u.get("ci95_with_assumptions")
            rows.append({"steps": steps, "unknown": k, "truth": truth, "estimate": u["estimate"],
                         "rel_error": u["estimate"] / truth - 1, "ci95": u["ci95"], "in_ci95": holds(u["ci95"], truth),
                         "whole_range": old, "in_whole_range": holds(old, truth), "allowed": new,
                         "in_allowed": holds(new, truth), "status": u["status"], "cpu_s": round(cpu, 1),
                         "cost": (rep.get("assumptions") or {}).get("cost"), "ruled_out": ruled})
        print(f"\nrefit_steps {steps}: report CPU s {cpu:.1f}; threshold "
              f"{(rep.get('assumptions') or {}).get('threshold')}; sensitivity cost "
              f"{(rep.get('assumptions') or {}).get('cost')}")
        for r in ruled:
            print(f"  - {r}")
        for s in (rep.get("assumptions") or {}).get("shifts", []):
            print(f"  {s['text']}; loss ratios {s['loss_ratio_lower']} / {s['loss_ratio_upper']}")
    fmt = lambda iv: "-" if iv is None else f"[{iv[0]:.4g}, {iv[1]:.4g}]"
    print("\n| refit_steps | estimate | truth | value (error) | ci95 | with assumed constants, whole ranges (before) "
          "| with assumed constants, allowed part (now) | status | report CPU s |\n|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        yes = lambda b: "-" if b is None else ("holds" if b else "**misses**")
        print(f"| {r['steps']} | {r['unknown']} | {r['truth']:.4g} | {r['estimate']:.4g} ({r['rel_error']:+.1%}) | "
              f"{fmt(r['ci95'])} {yes(r['in_ci95'])} | {fmt(r['whole_range'])} {yes(r['in_whole_range'])} | "
              f"{fmt(r['allowed'])} {yes(r['in_allowed'])} | {r['status']} | {r['cpu_s']} |")
    print(json.dumps({"clip": a.clip, "estimates": estimates, "fit_cpu_s": fit_cpu, "rows": rows}))


if __name__ == "__main__":
    main()
