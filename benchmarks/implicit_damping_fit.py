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

--form all: the damping-form comparison of coverage_soft.py (`run_soft_clip`: one fit per form of
physics/damping.py DAMPING_MODELS, one after another, then `compare_fit_outputs`) with the same [ground]
damping_integration; the JSON line is coverage.py's result dict (combined rows of mu and lam, per form: rc,
CPU, loss, 2 dL / s^2, equally good, IoU, rows, damping coefficient), fits under OUT/forms_INTEGRATION/.

    python3 benchmarks/implicit_damping_fit.py [--clip warp_soft_drop] [--variant clean] [--form warp|all]
        [--integration implicit] [--out out/implicit_damping] [--timeout 3000]
"""
from __future__ import annotations

import argparse
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from coverage import score                                   # noqa: E402
from coverage_soft import FORMS, make_soft_scene, run_soft_clip   # noqa: E402
from footage import FOOTAGE, ROOT, camera_pose_error, perturbed_camera, run_fit   # noqa: E402


def camera_errors(clip, report):
    """{"scene": (deg, m), "fitted": (deg, m)}: the "camera" variant's perturbed camera and the fit's refined
    one (estimates.json "camera") against the clip's true camera (camera_pose_error)."""
    cam = json.load(open(os.path.join(FOOTAGE, clip, "truth.json")))["camera"]
    out = {"scene": camera_pose_error(*perturbed_camera(cam["R"], cam["t"]), cam["R"], cam["t"])}
    if report.get("camera"):
        out["fitted"] = camera_pose_error(report["camera"]["R"], report["camera"]["t"], cam["R"], cam["t"])
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--clip", default="warp_soft_drop")
    ap.add_argument("--variant", default="clean")
    ap.add_argument("--form", default="warp", choices=FORMS + ("all",))
    ap.add_argument("--integration", choices=("explicit", "implicit"), default="implicit")
    ap.add_argument("--out", default=os.path.join(ROOT, "out", "implicit_damping"))
    ap.add_argument("--timeout", type=float, default=3000.0)
    a = ap.parse_args(argv)
    if a.form == "all":                     # every damping form, compared and combined (module docstring)
        res = run_soft_clip(a.clip, a.variant, "nuisance", os.path.join(a.out, f"forms_{a.integration}"), True,
                            a.timeout, score, ground={"damping_integration": a.integration})
        res["integration"] = a.integration
        print(json.dumps(res, default=float))
        return 0 if "rows" in res else 1
    scene_dir = os.path.join(a.out, f"{a.clip}_{a.variant}_{a.form}_{a.integration}")
    scene, truths = make_soft_scene(a.clip, a.variant, "nuisance", scene_dir, a.out, True, a.form,
                                    ground={"damping_integration": a.integration})
    rc, wall, cpu, last, log, tail = run_fit(scene, os.path.join(scene_dir, "fit"), a.timeout, False)
    rep_path = os.path.join(scene_dir, "fit", "estimates.json")
    res = {"clip": a.clip, "variant": a.variant, "form": a.form, "integration": a.integration, "rc": rc,
           "cpu_s": round(cpu, 1), "wall_s": round(wall, 1), "log": log}
    if os.path.exists(rep_path):
        report = json.load(open(rep_path))
        res["rows"], res["nuisance"] = score(truths, report)
        res["iou_final"] = report.get("iou_final")
        res["damping"] = {k: report["unknowns"]["cube.damping"].get(k) for k in ("estimate", "status", "ci95")}
        if a.variant == "camera":            # how far the scene's camera and the refined one are from the truth
            res["camera_error"] = camera_errors(a.clip, report)
    else:
        res["error"] = (last or {}).get("error") or "\n".join(tail)
    print(json.dumps(res))
    return 0 if "rows" in res else 1


if __name__ == "__main__":
    sys.exit(main())
