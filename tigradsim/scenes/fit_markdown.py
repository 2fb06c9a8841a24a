"""The Markdown report of a scene fit (`tigradsim fit` writes it as estimates.md)."""


def _fmt(v):
    return "-" if v is None else f"{v:.6g}"


def fit_markdown(spec, report, result, honesty_md=None) -> str:
    """estimates.md of `tigradsim fit`: the summary, one row per unknown (estimate, std, model bias, 95 %
    interval, the interval with the assumed constants, status, bounds), the camera correction, what the clip
    does not determine, how the intervals were made, the assumed constants' sensitivity and the
    identification's details.  `report`: the dict written to estimates.json."""
    from .scene_views import camera_lines
    iou = (f"; silhouette IoU {report['iou_initial']:.3f} -> {report['iou_final']:.3f}"
           if report["iou_final"] is not None else "")
    lines = [f"# Fit of {spec.path}", "",
             f"{report['frames']} frames at {report['size'][0]}x{report['size'][1]} px, supervision "
             f"{report['supervision']}, {report['rollouts']} rollouts, {report['seconds']} s.  "
             f"Loss {_fmt(report['loss_initial'])} -> {_fmt(report['loss_final'])}{iou}.  **{report['summary']}**", "",
             "| unknown | initial | estimate | std | model bias | 95% interval | with assumed constants | status "
             "| bounds |",
             "|---|---|---|---|---|---|---|---|---|"]
    if report.get("cameras"):       # [[cameras]]: the IoU of each camera
        lines[2] += "  Silhouette IoU per camera: " + ", ".join(
            f"{name} " + ("-" if v["iou"] is None else f"{v['iou_initial']:.3f} -> {v['iou']:.3f}")
            for name, v in report["cameras"].items()) + "."
    if report.get("horizon_reason"):
        fitted = (f" (loss {_fmt(report['loss_final_fitted_frames'])} on them)"
                  if report.get("loss_final_fitted_frames") is not None else "")
        lines[4:4] = [f"Frames: {report['horizon_reason']}{fitted}.  The loss and IoU above and the outline video "
                      "cover every frame.", ""]
    step = report.get("time_step_choice")
    if step:                        # [simulation] substeps = "auto" (step_choice.py)
        lines[4:4] = ["Time step: " + step["summary"].removeprefix("time step: "), ""]
    for name, u in report["unknowns"].items():
        ci = "-" if u["ci95"] is None else f"[{_fmt(u['ci95'][0])}, {_fmt(u['ci95'][1])}]"
        std = "-" if u["std"] is None else f"{u['std']:.3g}" + (" (log)" if u["std_space"] == "log" else "")
        est = _fmt(u["estimate"]) if u["status"] != "undetermined" else f"({_fmt(u['estimate'])})"
        b = u.get("model_bias")
        bias = "-" if not b else f"{b:+.3g}" + (" (log)" if u["std_space"] == "log" else "")
        wide = u.get("ci95_with_assumptions")
        wide = "-" if wide is None else f"[{_fmt(wide[0])}, {_fmt(wide[1])}]"
        status = u["status"] + (" (nuisance)" if u.get("nuisance") else "")
        lines.append(f"| {name} | {_fmt(u['initial'])} | {est} | {std} | {bias} | {ci} | {wide} | {status} | "
                     f"[{_fmt(u['lower'])}, {_fmt(u['upper'])}] |")
    for line in camera_lines(report["camera"]):
        lines += ["", line]
    profiled = {n: u["profile"] for n, u in report["unknowns"].items() if u.get("profile")}
    if profiled:                    # [fit] profile (tigradsim/fitting/profile.py)
        lines += ["", "Profile likelihood (each value stepped out with the other unknowns refitted, until the loss "
                      "rose past the threshold the intervals imply, or to the bound; the 95 % interval above is "
                      "the union of it and the Gauss-Newton one):"]
        lines += [f"- {n}: [{_fmt(p['lower'])} ({p['lower_reason']}), {_fmt(p['upper'])} ({p['upper_reason']})], "
                  f"loss-rise threshold {_fmt(p['threshold'])}, {len(p['points'])} points, {p['rollouts']} rollouts, "
                  f"{p['seconds']:.0f} s" + (f"; {p['mode']}: {p['why']}" if p.get("why") else "")
                  for n, p in profiled.items()]
    if report["undetermined"]:
        lines += ["", "Not determined by the clip (the value shown is one point of a flat valley, not an estimate):"]
        lines += [f"- {d['text']}" for d in report["undetermined"]]
    if report.get("stopped_early"):
        lines += ["", f"**The fit stopped early**: {report['error']}  The estimates are its best rollout so far "
                      "(see Frames above); they have no uncertainty."]
    lines += ["", "Intervals: Gauss-Newton at the optimum (local, linearised), in the optimiser's coordinates (log "
                  "for log-space unknowns), residuals clustered by blocks of frames; with [fit] time_step_bias they "
                  "also cover the time step's bias (the estimate's shift at dt/2, times 2), and in MPM scenes with [fit] "
                  "grid_bias the grid's (the shift at a 4/3 finer grid, times 4): their sum is the model bias column.  "
                  "They assume the rest of the model (camera, contact law, shapes) is right; the constants the "
                  "scene did not state are held at defaults, and how far each estimate moves over their prior "
                  "ranges is below (an estimate moved further than its interval is \"assumption-dominated\"); the "
                  "interval with assumed constants takes those moves over the part of each range the footage does "
                  "not rule out (where the loss, refitted, stays within the profile intervals' 95 % threshold)."]
    if honesty_md:
        lines += ["", honesty_md]
    if result is not None:
        lines += ["", result.to_markdown("Identification details")]
    return "\n".join(lines) + "\n"
