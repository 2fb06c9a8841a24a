"""The fit's time step chosen from the footage: [simulation] substeps = "auto".

A fit at a step too coarse for the motion estimates the parameters of the coarse model, not of the
motion (benchmarks/RESULTS.md: Warp's box drop at Warp's truth, 0.2 mm corner RMS at 256 steps a
frame, 18.9 mm at 64).  [fit] horizon = "auto" measures that error by step doubling and then CUTS the
fitted frames where it exceeds horizon_tolerance; `choose_substeps` uses the same measurement
(`Scene.predictability`: the rollouts at dt and dt / 2 at the same values, rendered at the footage
times, their per-frame silhouette disagreement times the Richardson factor) to REFINE the step instead:
at the unknowns' initial values (the file's init; the camera uncorrected) it starts at min_substeps
steps a frame and doubles the count until every footage frame's estimated model error is within
horizon_tolerance, or until doubling again would pass max_substeps (the cap: the fit then runs at the
last count tried and the horizon rule cuts frames as before), or until a doubling no longer lengthens the
predictable horizon (the leading frames within the tolerance; "stalled": the fit then runs at the count
with the longest horizon).  Why the stall rule: where the dt-vs-dt/2 disagreement comes from the step, it
shrinks at every frame as the step does (first order), so the horizon grows with each doubling; where it
comes from a motion that amplifies any small difference (a box tumbling and settling on its corners,
contacts switching), a finer step moves the rollout as much as a coarser one and the horizon stays or even
shrinks (Warp's box drop at the start values: 15 frames at 64 steps a frame, 35 at 128, 19 at 256, 25 at
512; benchmarks/RESULTS.md).  Doubling further there buys CPU and no predictability.  A horizon of one frame
(the first frame alone, where both rollouts start) is not a stall: the step is then too coarse to show
anything.  Each check runs two forward rollouts
without gradients (the finer one is the next count's scene, `refined_scene`), so a clip that needs
k doublings costs rollouts at min_substeps x 2^0 .. 2^(k+1).

    spec, step = choose_substeps(spec, footage)   # a SceneSpec at the chosen substeps, the report
    Scene(spec, footage)                          # the fit's scene (requires_grad as usual)

The check is made at the start values, which may not show what the estimate does (on Warp's ramp clip box
A stops on the ramp at the initial mu 0.5 and never reaches box B: the check passes at 32 steps a frame with
0.008 px, benchmarks/RESULTS.md).  So after the fit `recheck_at_estimate` repeats it at the estimate (the
horizon rule's own predictability there, or two rollouts) and the report says whether the step still holds;
it does not refit (the horizon rule and time_step_bias act on a step that fails there, as before).
"""
from __future__ import annotations

import dataclasses
import warnings

__all__ = ["choose_substeps", "step_summary", "recheck_at_estimate"]


def _check_row(substeps, pred) -> dict:
    """One doubling's figures: the count, its dt [s], the largest estimated model error and raw dt-vs-dt/2
    disagreement over the clip [render px], the leading frames within the tolerance, and whether all are."""
    return {"substeps": int(substeps), "dt": float(pred.dt), "max_error_px": round(float(pred.error.max()), 4),
            "max_disagreement_px": round(float(pred.disagreement.max()), 4),
            "frames_within": int(pred.horizon), "frames": int(pred.frames),
            "passed": bool(pred.horizon >= pred.frames)}


def _next_move(checks, max_substeps) -> str:
    """What the doubling does after the last check: "passed" (every frame within), "stalled" (the horizon did
    not grow over the previous count's, which had more than the first frame), "cap" (doubling would pass
    max_substeps) or "double"."""
    last = checks[-1]
    if last["passed"]:
        return "passed"
    if len(checks) > 1 and checks[-2]["frames_within"] > 1 and last["frames_within"] <= checks[-2]["frames_within"]:
        return "stalled"
    return "cap" if 2 * last["substeps"] > max_substeps else "double"


def step_summary(report) -> str:
    """One paragraph for the console and estimates.md: the count chosen and the check's figure at each
    count tried, or that the cap was hit."""
    rows = report["checks"]
    tol = report["tolerance_px"]
    figures = "; ".join(f"{r['substeps']}: {r['max_error_px']:.3g} px" + ("" if r["passed"] else
                        f" ({r['frames_within']} of {r['frames']} frames within)") for r in rows)
    head = (f"time step: substeps = \"auto\" chose {report['substeps']} steps a frame (dt {report['dt']:.4g} s). "
            f"Largest estimated model error over the clip (rollouts at dt and dt/2 at the start values, "
            f"x{report['richardson_factor']:g}; horizon_tolerance {tol:g} px) per count tried: {figures}.")
    if report["passed"]:
        return head + f"  Every frame is within the tolerance at {report['substeps']} steps a frame."
    chosen = next(r for r in rows if r["substeps"] == report["substeps"])
    cut = (f"at {report['substeps']} steps a frame and " +
           ("[fit] horizon = \"auto\" cuts the frames past the predictable horizon." if report["horizon_auto"]
            else "fits every frame anyway ([fit] horizon is not \"auto\"): those frames' residuals are "
            "partly the step's error."))
    if report.get("stalled"):
        before, after = rows[-2], rows[-1]
        return head + (f"  HORIZON STALLED: doubling from {before['substeps']} to {after['substeps']} steps a frame "
                       f"did not lengthen the predictable horizon ({before['frames_within']} -> "
                       f"{after['frames_within']} of {after['frames']} frames within): past it the rollouts part "
                       f"for a reason a finer step does not remove (a motion that amplifies small differences: "
                       f"tumbling, switching contacts).  The fit runs " + cut +
                       f"  Frames {chosen['frames_within']}..{chosen['frames'] - 1} are not predictable at any "
                       f"count tried.")
    return head + (f"  CAP HIT: max_substeps = {report['max_substeps']} is reached with frames "
                   f"{rows[-1]['frames_within']}..{rows[-1]['frames'] - 1} still beyond the tolerance; the fit runs "
                   + cut + "  Raise max_substeps to refine further.")


def choose_substeps(spec, footage, printer=print):
    """(spec, report): with [simulation] substeps = "auto" (spec.auto_substeps = (min_substeps,
    max_substeps)), a copy of `spec` at the chosen steps per frame and the report (a dict: substeps, dt,
    min_substeps, max_substeps, tolerance_px, passed, cap_hit, stalled, checks: one `_check_row` per count
    tried, summary); otherwise (spec, None) and nothing runs.  `footage`: the scene's Footage, or one per
    camera.  Builds scenes without gradients (Taichi must be initialised)."""
    if spec.auto_substeps is None:
        return spec, None
    from ..fitting.horizons import INTEGRATOR_ORDER, richardson_factor
    from .scene_build import Scene
    from .scene_refined import refined_scene

    lo, hi = spec.auto_substeps
    tol = spec.fit.horizon_tolerance
    substeps, checks = lo, []
    with warnings.catch_warnings():
        # the coarse counts may be past a pre-flight limit: the fit's own scene, at the count chosen, warns
        warnings.simplefilter("ignore")
        scene = Scene(dataclasses.replace(spec, dt=None, substeps=lo), footage, requires_grad=False)
    while True:
        pred = scene.predictability(tol)            # rollouts at dt and dt / 2 (the next count's scene)
        checks.append(_check_row(substeps, pred))
        r, move = checks[-1], _next_move(checks, hi)
        printer(f"time step: {substeps} steps a frame (dt {pred.dt:.4g} s): largest estimated model error "
                f"{r['max_error_px']:.3g} px over the clip, {r['frames_within']} of {r['frames']} frames within "
                f"{tol:g} px" + {"passed": "", "double": " -> doubling", "cap": " (cap)",
                                  "stalled": " (the horizon stopped growing)"}[move])
        if move != "double":
            break
        scene = refined_scene(scene, "time_step")   # the scene at dt / 2 is the next count's
        substeps *= 2
    # stalled: the count with the longest horizon (the cheaper of equals); else the last
    chosen = max(checks, key=lambda c: (c["frames_within"], -c["substeps"])) if move == "stalled" else checks[-1]
    report = {"substeps": chosen["substeps"], "dt": chosen["dt"], "min_substeps": lo, "max_substeps": hi,
              "tolerance_px": tol, "richardson_factor": richardson_factor(INTEGRATOR_ORDER),
              "passed": move == "passed", "cap_hit": move == "cap", "stalled": move == "stalled",
              "horizon_auto": spec.fit.horizon == "auto", "checks": checks}
    report["summary"] = step_summary(report)
    printer(report["summary"])
    return dataclasses.replace(spec, dt=None, substeps=report["substeps"]), report


def recheck_at_estimate(report, scene, pred=None) -> dict:
    """The same check at the fit's estimate (`scene` holds it), added to `report` as "at_estimate" (substeps,
    max_error_px, frames_within, frames, passed) with a sentence appended to its summary; returns `report`.
    pred: `scene.predictability()` at the estimate when the caller has it (the horizon rule's), else it runs
    (two forward rollouts)."""
    pred = scene.predictability(report["tolerance_px"]) if pred is None else pred
    row = _check_row(report["substeps"], pred)
    report["at_estimate"] = {k: row[k] for k in ("substeps", "max_error_px", "max_disagreement_px", "frames_within",
                                                 "frames", "passed")}
    if row["passed"]:
        report["summary"] += (f"  At the estimate the check still passes at {row['substeps']} steps a frame "
                              f"({row['max_error_px']:.3g} px).")
    else:
        unseen = " (the start values did not show it)" if report["passed"] else ""
        if report.get("stalled"):
            way = "the doubling stalled at the start values, so a finer step may not help here either"
        elif 2 * row["substeps"] <= report["max_substeps"]:
            way = f"a refit with min_substeps = {2 * row['substeps']} would refine it"
        else:
            way = f"a finer step needs max_substeps > {report['max_substeps']}"
        report["summary"] += (f"  AT THE ESTIMATE the check fails at {row['substeps']} steps a frame: "
                              f"{row['max_error_px']:.3g} px > {report['tolerance_px']:g} px from frame "
                              f"{row['frames_within']} on{unseen}; {way}.")
    return report
