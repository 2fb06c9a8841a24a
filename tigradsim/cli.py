"""The `tigradsim` command: check a scene against its footage, and fit its unknowns.

    tigradsim render SCENE.toml --out DIR     simulate at the initial values; write the
                                              rendered frames and their outline over the
                                              footage (GIF + PNG) to check the camera and
                                              the start pose before fitting
    tigradsim fit SCENE.toml --out DIR        fit the unknowns to the footage; write a report
                  [--quick]                   folder: estimates with uncertainties (JSON,
                                              Markdown), loss curve, parameter traces, and
                                              the fitted rollout's outline over the footage

The scene file format is documented in `tigradsim.scene_file` (examples: demos/scenes/).
Progress goes to stdout; the LAST line of stdout is always one JSON object (with "ok":
false and "error" when the scene file is wrong; exit status 2).
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time

import numpy as np

EXAMPLES = """examples:
  tigradsim render demos/scenes/box_push.toml --out out/box_push_check
  tigradsim fit demos/scenes/box_push.toml --out out/box_push_fit
  tigradsim fit demos/scenes/box_push.toml --out out/quick --quick

The scene file (TOML) is described in `python -c "import tigradsim.scene_file as s; help(s)"`."""

QUICK_ITERATIONS = 12


def _parser():
    p = argparse.ArgumentParser(prog="tigradsim", description=__doc__.split("\n\n")[0],
                                epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="command", metavar="{render,fit}")

    def common(sp):
        sp.add_argument("scene", help="scene file (TOML); paths in it are relative to it")
        sp.add_argument("--out", required=True, help="output folder (created)")
        sp.add_argument("--arch", default="cpu", help="Taichi backend: cpu (default), cuda, vulkan, gpu, ...")
        sp.add_argument("--precision", default=None, choices=("f32", "f64"),
                        help="float precision (default: f64 for fit, f32 for render)")
        sp.add_argument("--resolution", type=int, default=None,
                        help="render width in pixels (overrides [fit] resolution; must divide the footage width)")

    r = sub.add_parser("render", help="forward run at the initial values: rendered frames and their outline over "
                                      "the footage", description="Simulate at the initial values and draw the render's "
                                      "outline (red) over the footage, with the masks' outline (green), to check the "
                                      "camera and the start pose before fitting.")
    common(r)
    f = sub.add_parser("fit", help="fit the unknowns to the footage and write a report folder",
                       description="Fit the scene's [unknowns] to its footage through the differentiable simulator "
                                   "and renderer; writes estimates with uncertainties, plots and an outline video.")
    common(f)
    f.add_argument("--quick", action="store_true",
                   help=f"a smoke run: at most {QUICK_ITERATIONS} iterations, one start, no Levenberg-Marquardt "
                        "refinement")
    f.add_argument("--iterations", type=int, default=None, help="override [fit] iterations")
    f.add_argument("--quiet", action="store_true", help="print only the final JSON line")
    return p


def _json_default(o):
    if isinstance(o, np.generic):
        return o.item()
    if isinstance(o, np.ndarray):
        return o.tolist()
    raise TypeError(f"{type(o).__name__} is not JSON serialisable")


def _finite(x):
    return None if x is None or not math.isfinite(x) else float(x)


def _last_line(obj):
    print(json.dumps(obj, default=_json_default), flush=True)


def main(argv=None) -> int:
    """Entry point of the `tigradsim` command (pyproject `[project.scripts]`); returns the exit status."""
    parser = _parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 0
    from .scene_file import SceneError
    try:
        if args.command == "render":
            return _render(args)
        return _fit(args)
    except SceneError as exc:
        print(f"error: {exc}", file=sys.stderr)
        _last_line({"ok": False, "command": args.command, "error": str(exc)})
        return 2


# ---------------------------------------------------------------------------

def _prepare(args, precision, requires_grad):
    """Parse + validate + load footage (no kernel), then init Taichi and build the scene."""
    import tigradsim as tgs
    from .scene_build import Scene, load_scene_footage
    from .scene_file import load_scene

    spec = load_scene(args.scene)
    footage = load_scene_footage(spec, args.resolution)
    tgs.init(arch=args.arch, precision=precision)
    scene = Scene(spec, footage, requires_grad=requires_grad)
    return spec, footage, scene


def _write_outline(path_gif, path_png, footage, alpha, fps):
    from .scene_build import outline_frames
    from .video import save_gif
    import imageio.v3 as iio

    H = footage.frames.shape[1]
    up = max(1, int(math.ceil(256 / H)))             # small renders are hard to judge: show >= 256 px
    frames = outline_frames(footage.frames, alpha, footage.masks, upscale=up)
    save_gif(frames, path_gif, fps=min(fps, 30.0))
    # first, middle and last frame side by side: the camera and the start pose at a glance
    K = len(frames)
    picks = sorted({0, K // 2, K - 1})
    gap = np.full((frames.shape[1], 4, 3), 255, np.uint8)
    row = [x for k in picks for x in (frames[k], gap)][:-1]
    iio.imwrite(path_png, np.concatenate(row, axis=1))
    return picks


def _iou(footage, alpha):
    from .scene_build import silhouette_iou
    if footage.masks is None:
        return None
    iou = silhouette_iou(alpha, footage.masks)
    return {"mean": float(iou.mean()), "min": float(iou.min()), "first": float(iou[0]), "last": float(iou[-1]),
            "per_frame": [round(float(v), 4) for v in iou]}


def _render(args):
    from .video import save_frames

    t0 = time.time()
    spec, footage, scene = _prepare(args, args.precision or "f32", requires_grad=False)
    video = scene.render()
    alpha = video[..., -1]
    out = args.out
    os.makedirs(out, exist_ok=True)
    frames_dir = os.path.join(out, "render")
    save_frames(video[..., 0] if video.shape[-1] == 1 else video[..., :3], frames_dir)
    gif, png = os.path.join(out, "outline.gif"), os.path.join(out, "outline.png")
    picks = _write_outline(gif, png, footage, alpha, footage.fps)
    iou = _iou(footage, alpha)
    summary = {"ok": True, "command": "render", "scene": os.path.abspath(args.scene), "out": os.path.abspath(out),
               "frames": int(len(video)), "size": [int(video.shape[2]), int(video.shape[1])],
               "dt": scene.dt, "steps": scene.steps, "substeps_per_frame": scene.every,
               "rendered_frames": [int(k) for k in scene.frame_ids[[0, -1]]], "up": spec.up,
               "values": scene.values(), "iou": iou,
               "files": {"frames": frames_dir, "outline_gif": gif, "outline_png": png,
                         "outline_png_frames": picks},
               "seconds": round(time.time() - t0, 2)}
    if iou is not None:
        print(f"silhouette IoU with the masks at the initial values: mean {iou['mean']:.3f}, "
              f"first frame {iou['first']:.3f}, min {iou['min']:.3f}")
    print(f"wrote {gif} (red: render, green: masks) and {png}")
    with open(os.path.join(out, "summary.json"), "w") as fh:
        json.dump(summary, fh, indent=1, default=_json_default)
    _last_line(summary)
    return 0


# ---------------------------------------------------------------------------

def _fit(args):
    from . import scene_build as sb
    from .plots import plot_loss, plot_params

    t0 = time.time()
    printer = (lambda *a, **k: None) if args.quiet else (lambda *a, **k: print(*a, **k, flush=True))
    spec, footage, scene = _prepare(args, args.precision or "f64", requires_grad=True)
    f = spec.fit
    if not scene.params:
        raise spec.error(None, "[unknowns]", "nothing to fit: add at least one [unknowns.\"OBJECT.PARAM\"] table")
    iterations = args.iterations if args.iterations is not None else f.iterations
    starts, refine = f.starts, f.refine
    if args.quick:
        iterations, starts, refine = min(iterations, QUICK_ITERATIONS), 1, 0
    f.refine = refine
    out = args.out
    os.makedirs(out, exist_ok=True)
    initial = scene.values()
    scene.make_loss()
    loss0 = scene.loss_value()
    alpha0 = scene.render()[..., -1]
    printer(f"scene {spec.path}: {len(footage.frames)} frames at {footage.frames.shape[2]}x{footage.frames.shape[1]} "
            f"px, dt {scene.dt:.6g} s ({scene.every} steps per frame), {scene.steps} steps; unknowns "
            + ", ".join(f"{k}={v:.5g}" for k, v in initial.items()) + f"; loss {loss0:.6e}")
    starts_info = None
    if starts > 1:
        starts_info = sb.multi_start(scene, starts, f.seed, printer=printer)
    sb.run_fit(scene, iterations, printer=printer)
    history = scene.fit.history
    estimates = scene.values()
    loss1 = scene.loss_value()
    printer("estimating uncertainties ...")
    unc = sb.uncertainty(scene)
    alpha1 = scene.render()[..., -1]
    files = {
        "loss_plot": plot_loss(history, os.path.join(out, "loss.png"), title=f"{spec.name}: loss"),
        "param_plot": plot_params(history, os.path.join(out, "params.png"), title=f"{spec.name}: unknowns"),
        "fit_outline_gif": os.path.join(out, "fit_outline.gif"),
        "fit_outline_png": os.path.join(out, "fit_outline.png"),
        "initial_outline_gif": os.path.join(out, "initial_outline.gif"),
        "estimates_json": os.path.join(out, "estimates.json"),
        "estimates_md": os.path.join(out, "estimates.md"),
    }
    _write_outline(files["fit_outline_gif"], files["fit_outline_png"], footage, alpha1, footage.fps)
    _write_outline(files["initial_outline_gif"], os.path.join(out, "initial_outline.png"), footage, alpha0, footage.fps)
    iou0, iou1 = _iou(footage, alpha0), _iou(footage, alpha1)
    report = {
        "scene": os.path.abspath(args.scene), "supervision": f.supervision,
        "frames": int(len(footage.frames)), "size": [int(footage.frames.shape[2]), int(footage.frames.shape[1])],
        "dt": scene.dt, "steps": scene.steps, "iterations": int(len(history.loss) - 1), "quick": bool(args.quick),
        "loss_initial": _finite(loss0), "loss_final": _finite(loss1),
        "iou_initial": None if iou0 is None else iou0["mean"], "iou_final": None if iou1 is None else iou1["mean"],
        "unknowns": {}, "undetermined": unc["undetermined"], "uncertainty_method": unc["method"],
        "residual_variance": unc["residual_variance"], "multi_start": starts_info,
        "seconds": round(time.time() - t0, 2),
    }
    for u in spec.unknowns:
        e = unc["parameters"][u.target]
        report["unknowns"][u.target] = {"initial": initial[u.target], "estimate": estimates[u.target],
                                        "std": e["std"], "ci95": e["ci95"], "determined": e["determined"],
                                        "lower": u.lower, "upper": u.upper, "log": u.log}
    with open(files["estimates_json"], "w") as fh:
        json.dump(report, fh, indent=1, default=_json_default)
    with open(files["estimates_md"], "w") as fh:
        fh.write(_markdown(spec, report))
    printer("\n" + _markdown(spec, report))
    _last_line({"ok": True, "command": "fit", "out": os.path.abspath(out),
                "estimates": estimates, "std": {k: v["std"] for k, v in report["unknowns"].items()},
                "ci95": {k: v["ci95"] for k, v in report["unknowns"].items()},
                "undetermined": [u["combination"] for u in unc["undetermined"]],
                "loss_initial": report["loss_initial"], "loss_final": report["loss_final"],
                "iou_final": report["iou_final"], "iterations": report["iterations"],
                "seconds": report["seconds"], "files": files})
    return 0


def _fmt(v):
    return "-" if v is None else f"{v:.6g}"


def _markdown(spec, report) -> str:
    lines = [f"# Fit of {spec.path}", "",
             f"{report['frames']} frames at {report['size'][0]}x{report['size'][1]} px, supervision "
             f"{report['supervision']}, {report['iterations']} iterations, {report['seconds']} s.  "
             f"Loss {_fmt(report['loss_initial'])} -> {_fmt(report['loss_final'])}"
             + (f"; silhouette IoU {report['iou_initial']:.3f} -> {report['iou_final']:.3f}"
                if report["iou_final"] is not None else "") + ".", "",
             "| unknown | initial | estimate | std | 95% interval | bounds |", "|---|---|---|---|---|---|"]
    for name, u in report["unknowns"].items():
        ci = "undetermined" if not u["determined"] else f"[{_fmt(u['ci95'][0])}, {_fmt(u['ci95'][1])}]"
        bounds = f"[{_fmt(u['lower'])}, {_fmt(u['upper'])}]" + (" log" if u["log"] else "")
        lines.append(f"| {name} | {_fmt(u['initial'])} | {_fmt(u['estimate'])} | {_fmt(u['std'])} | {ci} | {bounds} |")
    lines += ["", f"Uncertainty: {report['uncertainty_method']}; residual variance "
                  f"{report['residual_variance']:.3g}.  Intervals are approximate (local, linearised) and assume the "
                  "model (camera, contact law, time step) is right."]
    if report["undetermined"]:
        lines += ["", "Combinations the clip does not determine (directions in log-parameter space along which the "
                      "loss is flat; their values above are one point of a valley, not estimates):"]
        for u in report["undetermined"]:
            lines.append("- " + " ".join(f"{c:+.3f} {n}" for n, c in u["combination"].items()))
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
