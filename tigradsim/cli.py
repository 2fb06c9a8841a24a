"""The `tigradsim` command: check a scene against its footage, and fit its unknowns.

    tigradsim render SCENE.toml --out DIR     simulate at the initial values; write the
                                              rendered frames and their outline over the
                                              footage (GIF + PNG) to check the camera and
                                              the start pose before fitting
    tigradsim fit SCENE.toml --out DIR        fit the unknowns to the footage; write a report
                  [--quick]                   folder: estimates with uncertainties (JSON,
                                              Markdown), loss curve, parameter traces, and
                                              the fitted rollout's outline over the footage

The scene file format is documented in `tigradsim.scenes.scene_file` (examples: demos/scenes/).
Progress goes to stdout; the LAST line of stdout is always one JSON object.  Every failure is one
`error: ...` line on stderr, "ok": false and "error" in the JSON line, and an exit status:
  2  the input is wrong: the arguments, the scene file, the footage or another file it names (missing,
     unreadable, not an image), a journal in --out that --resume cannot use, or a value the library
     refuses (its ValueError / OSError);
  1  the run failed: a rollout blew up, or the gradient could not be trusted in the middle of a fit
     (the fit then ends with its best estimate so far, written as usual and marked "stopped_early"),
     or an internal error (a bug in tigradsim: --debug shows its traceback);
  130  interrupted (Ctrl-C): `tigradsim fit ... --resume` continues the fit.
`tigradsim fit` keeps a journal of its rollouts in the output folder (fit_journal.bin): a fit that
was killed or interrupted continues with `--resume`, to the same bits as an uninterrupted run.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
import warnings

import numpy as np

from .scenes.outline_outputs import fitted_iou, iou_summary, views_outlines, write_outline

EXAMPLES = """examples:
  tigradsim render demos/scenes/box_push.toml --out out/box_push_check
  tigradsim fit demos/scenes/box_push.toml --out out/box_push_fit
  tigradsim fit demos/scenes/box_push.toml --out out/quick --quick
  tigradsim laws demos/scenes/box_push.toml --out out/laws     # fit under every contact law, compare

The scene file (TOML) is described in `python -c "import tigradsim.scenes.scene_file as s; help(s)"`."""

QUICK_ITERATIONS = 12
JOURNAL_NAME = "fit_journal.bin"        # in the output folder: every rollout of the fit (--resume)
BAD_INPUT, RUN_FAILED, INTERRUPTED = 2, 1, 130


class UsageError(ValueError):
    """A command line that argparse refuses (reported as every other error: one line, JSON, status 2)."""


class _Parser(argparse.ArgumentParser):
    """argparse, its errors raised (as UsageError) instead of printed with the usage and exiting."""

    def error(self, message):
        raise UsageError(f"{self.prog}: {message} (see {self.prog} --help)")


def _whole_number(minimum):
    """An argparse type: a whole number >= `minimum`, refused with a message naming the text otherwise."""
    def parse(text):
        try:
            value = int(text)
        except ValueError:
            value = None
        if value is None or value < minimum:
            raise argparse.ArgumentTypeError(f"expected a whole number >= {minimum}, got {text!r}")
        return value
    return parse


def _folder(text):
    if os.path.exists(text) and not os.path.isdir(text):
        raise argparse.ArgumentTypeError(f"{text!r} is an existing file; expected a folder (created if missing)")
    return text


def _parser():
    p = _Parser(prog="tigradsim", description=__doc__.split("\n\n")[0],
                epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="command", metavar="{render,fit,laws}")

    def common(sp):
        sp.add_argument("scene", help="scene file (TOML); paths in it are relative to it")
        sp.add_argument("--out", required=True, type=_folder, help="output folder (created)")
        sp.add_argument("--arch", default="cpu", help="Taichi backend: cpu (default), cuda, vulkan, gpu, ...")
        sp.add_argument("--precision", default=None, choices=("f32", "f64"),
                        help="float precision (default: f64 for fit, f32 for render)")
        sp.add_argument("--resolution", type=_whole_number(1), default=None,
                        help="render width in pixels (overrides [fit] resolution; must divide the footage width)")
        sp.add_argument("--pin-threads", action="store_true",
                        help="pin Taichi's CPU worker threads one per CPU where possible: faster when this is the "
                             "only busy process, slower beside others (tgs.init(pin_threads='auto'))")
        sp.add_argument("--debug", action="store_true",
                        help="on an error, also print its Python traceback (for a bug report)")

    r = sub.add_parser("render", help="forward run at the initial values: rendered frames and their outline over "
                                      "the footage", description="Simulate at the initial values and draw the render's "
                                      "outline (red) over the footage, with the masks' outline (green), to check the "
                                      "camera and the start pose before fitting.")
    common(r)
    r.add_argument("--file-values", action="store_true",
                   help="simulate with the values the objects and the ground have in the file, not the [unknowns] "
                        "initial values (e.g. a clip's known truth, to check the camera over the whole clip)")
    f = sub.add_parser("fit", help="fit the unknowns to the footage and write a report folder",
                       description="Fit the scene's [unknowns] to its footage through the differentiable simulator "
                                   "and renderer; writes estimates with uncertainties, plots and an outline video.")
    common(f)
    f.add_argument("--quick", action="store_true",
                   help=f"a smoke run: at most {QUICK_ITERATIONS} iterations, one start, no Levenberg-Marquardt "
                        "refinement")
    f.add_argument("--iterations", type=_whole_number(0), default=None, help="override [fit] iterations")
    f.add_argument("--resume", action="store_true",
                   help=f"continue the fit whose journal ({JOURNAL_NAME}) is in --out, e.g. after it was killed: "
                        "its rollouts are replayed without running, then the fit goes on; the result is the same, "
                        "to the bit, as an uninterrupted run's (same scene file, footage and options; not with "
                        "[fit] time_budget, which depends on the clock).  Without a journal there, the fit starts "
                        "from the beginning")
    f.add_argument("--quiet", action="store_true", help="print only the final JSON line")
    c = sub.add_parser("laws", help="fit under every contact law and compare: a table per law and one estimate "
                                    "whose interval covers the laws that fit equally well",
                       description="Fit the scene's [unknowns] once per contact law of the library (capped or "
                                   "uncapped damping, each with capped, pseudo-Huber or Warp's friction at 0.01 and "
                                   "0.1 m/s: 8 laws, each fitted in a process of its own), compare the fits (equally good: a "
                                   "loss within 5 % of the best's, as the multi-start search ties minima), and "
                                   "write laws.md / laws.json with the combined estimate.")
    common(c)
    c.add_argument("--quick", action="store_true", help=f"a smoke run per law: at most {QUICK_ITERATIONS} "
                                                        "iterations, one start, no Levenberg-Marquardt refinement")
    c.add_argument("--quiet", action="store_true", help="print only the final JSON line")
    return p


def _json_default(o):
    if isinstance(o, np.generic):
        return o.item()
    if isinstance(o, np.ndarray):
        return o.tolist()
    raise TypeError(f"{type(o).__name__} is not JSON serialisable")


def _finite(x):
    return None if x is None or not math.isfinite(x) else float(x)


def _threads():
    """{"pinned_cpus": [...], "unpinned_because": "..."}: where Taichi's CPU workers run (--pin-threads)."""
    import tigradsim as tgs
    info = tgs.pinned_threads()
    return {"pinned_cpus": sorted(info["pinned"].values()), "unpinned_because": info["reason"]}


def _last_line(obj):
    print(json.dumps(obj, default=_json_default), flush=True)


def _one_line(exc) -> str:
    """An exception's message on one line (some libraries' messages span several)."""
    text = " ".join(str(exc).split())
    return text or type(exc).__name__


def _fail(command, message, code, extra=None) -> int:
    """The CLI's answer to every failure: one `error:` line on stderr, the JSON last line (with the
    entries of `extra`), the exit status `code`."""
    print(f"error: {message}", file=sys.stderr, flush=True)
    _last_line({"ok": False, "command": command, "error": message, **(extra or {})})
    return code


def main(argv=None) -> int:
    """Entry point of the `tigradsim` command (pyproject `[project.scripts]`); returns the exit status
    (module docstring: 0 done, 2 bad input, 1 the run failed, 130 interrupted)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    command = argv[0] if argv and argv[0] in ("render", "fit", "laws") else None
    try:
        args = _parser().parse_args(argv)
    except UsageError as exc:
        return _fail(command, _one_line(exc), BAD_INPUT)
    if args.command is None:
        _parser().print_help()
        return 0
    from .core.errors import GradientError, SimulationError
    try:
        if args.command == "render":
            return _render(args)
        if args.command == "laws":
            return _laws(args)
        return _fit(args)
    except (SimulationError, GradientError) as exc:     # a rollout blew up: say so, with the scene's time step
        _traceback(args)
        what = "the rollout blew up: " if isinstance(exc, SimulationError) else ""
        return _fail(args.command, f"{os.path.basename(args.scene)}: [simulation] {what}{_one_line(exc)}", RUN_FAILED)
    except (ValueError, OSError) as exc:                # the library's checks of the input, files it cannot read
        _traceback(args)
        return _fail(args.command, _one_line(exc), BAD_INPUT)
    except KeyboardInterrupt:
        resume = (f"; `tigradsim fit {args.scene} --out {args.out} --resume` continues the fit"
                  if args.command == "fit" else "")
        return _fail(args.command, f"interrupted{resume}", INTERRUPTED)
    except Exception as exc:                            # a bug: say so, and where to find the traceback
        _traceback(args)
        hint = "the traceback is above" if args.debug else "rerun with --debug for the traceback"
        return _fail(args.command, f"internal error (a bug in tigradsim, please report it; {hint}): "
                                   f"{type(exc).__name__}: {_one_line(exc)}", RUN_FAILED)


def _traceback(args):
    if getattr(args, "debug", False):
        import traceback
        traceback.print_exc()


# ---------------------------------------------------------------------------

def _prepare(args, precision, requires_grad, unknowns=True, choose_step=False, printer=print):
    """Parse + validate + load footage (no kernel), then init Taichi and build the scene.  choose_step:
    with [simulation] substeps = "auto", the scene is built at the step `choose_substeps` picks (its report
    in scene.step_choice; None otherwise)."""
    import tigradsim as tgs
    from .scenes.scene_build import Scene, load_scene_footage
    from .scenes.scene_file import load_scene

    spec = load_scene(args.scene)
    with warnings.catch_warnings(record=True) as caught_footage:    # tgs.FootageWarning: masks probably wrong
        warnings.simplefilter("always")
        if spec.several_cameras:             # [[cameras]]: one clip per camera; `footage` is the first's
            from .scenes.scene_views import load_views_footage
            footages = load_views_footage(spec, args.resolution)
            footage = footages[0]
        else:
            footage = footages = load_scene_footage(spec, args.resolution)
    tgs.init(arch=args.arch, precision=precision, pin_threads="auto" if args.pin_threads else False)
    step = None
    if choose_step:                         # substeps = "auto": step doubling at the start values first
        from .scenes.step_choice import choose_substeps
        spec, step = choose_substeps(spec, footages, printer)
    with warnings.catch_warnings(record=True) as caught:    # e.g. tgs.StabilityWarning: dt past a limit
        warnings.simplefilter("always")
        scene = Scene(spec, footages, requires_grad=requires_grad, unknowns=unknowns)
    scene.warnings = [f"{type(w.message).__name__}: {w.message}" for w in caught_footage + caught]
    scene.step_choice = step
    for w in scene.warnings:
        print(f"warning: {w}", file=sys.stderr)
    return spec, footage, scene


def _timing(scene):
    steps, alphas = scene.timed.steps, scene.timed.alphas
    return {"dt": scene.dt, "steps": scene.steps, "frame_steps": [int(steps[0]), int(steps[-1])],
            "blended_frames": int(np.count_nonzero(alphas))}


def _render(args):
    from .io.mask_checks import check_initial_pose
    from .io.video import save_frames
    from .scenes.scene_picture import scene_picture

    t0 = time.time()
    spec, footage, scene = _prepare(args, args.precision or "f32", requires_grad=False,
                                    unknowns=not args.file_values)
    video = scene.render()
    alpha = video[..., -1]
    if footage.masks is not None:            # tgs.FootageWarning when the first mask is far from the render
        check_initial_pose(footage.masks, alpha)
    out = args.out
    os.makedirs(out, exist_ok=True)
    frames_dir = os.path.join(out, "render")
    save_frames(video[..., 0] if video.shape[-1] == 1 else video[..., :3], frames_dir)
    gif, png = os.path.join(out, "outline.gif"), os.path.join(out, "outline.png")
    picks = write_outline(gif, png, footage, alpha, footage.fps)
    iou = iou_summary(footage, alpha)
    picture = scene_picture(scene)               # the objects with the colliders they touch (None: no collider)
    extra_files = {}
    if picture is not None:
        extra_files["scene_frames"] = os.path.join(out, "scene")
        save_frames(picture[..., :3], extra_files["scene_frames"])
    views = views_outlines(scene, out, "render")
    for view in scene.views[1:]:             # [[cameras]]: every other camera's frames and outline
        frames = view.renderer.image.to_numpy()
        extra_files[f"frames_{view.name}"] = os.path.join(out, f"render_{view.name}")
        save_frames(frames[..., 0] if frames.shape[-1] == 1 else frames[..., :3], extra_files[f"frames_{view.name}"])
        extra_files[f"outline_gif_{view.name}"] = os.path.join(out, f"render_outline_{view.name}.gif")
    summary = {"ok": True, "command": "render", "scene": os.path.abspath(args.scene), "out": os.path.abspath(out),
               **({"cameras": views} if views else {}),
               "frames": int(len(video)), "size": [int(video.shape[2]), int(video.shape[1])], **_timing(scene),
               "up": spec.up, "values": scene.values() if not args.file_values else "file", "iou": iou,
               "warnings": scene.warnings, "threads": _threads(),
               "files": {"frames": frames_dir, "outline_gif": gif, "outline_png": png,
                         "outline_png_frames": picks, **extra_files},
               "seconds": round(time.time() - t0, 2)}
    if iou is not None:
        print(f"silhouette IoU with the masks at the initial values: mean {iou['mean']:.3f}, "
              f"first frame {iou['first']:.3f}, min {iou['min']:.3f}" + (f" (camera {scene.views[0].name!r})"
                                                                          if views else ""))
    for name, v in list(views.items())[1:]:
        if v["iou"] is not None:
            print(f"camera {name!r}: silhouette IoU mean {v['iou']:.3f}")
    print(f"wrote {gif} (red: render, green: masks) and {png}")
    with open(os.path.join(out, "summary.json"), "w") as fh:
        json.dump(summary, fh, indent=1, default=_json_default)
    _last_line(summary)
    return 0


# ---------------------------------------------------------------------------

def _fit(args):
    from .core.errors import GradientError
    from .io.plots import plot_loss, plot_params
    from .scenes.fit_journal import FitJournal
    from .scenes.fit_markdown import fit_markdown
    from .scenes.scene_build import fit_scene

    t0 = time.time()
    printer = (lambda *a, **k: None) if args.quiet else (lambda *a, **k: print(*a, **k, flush=True))
    spec, footage, scene = _prepare(args, args.precision or "f64", requires_grad=True, choose_step=True,
                                    printer=printer)
    f = spec.fit
    if not scene.params:
        raise spec.error(None, "[unknowns]", "nothing to fit: add at least one [unknowns.\"OBJECT.PARAM\"] table")
    iterations = args.iterations if args.iterations is not None else f.iterations
    overrides = {}
    if args.quick:
        overrides = dict(starts=1, local_starts=1, refine=0, horizons=None, coarse=None)
        iterations = min(iterations, QUICK_ITERATIONS)
    out = args.out
    os.makedirs(out, exist_ok=True)
    initial = scene.values()
    loss0 = scene.loss_value()
    alpha0 = scene.render()[..., -1]
    views0 = views_outlines(scene, out, "initial")          # [[cameras]]: each camera's IoU at the start
    timing = _timing(scene)
    printer(f"scene {spec.path}: {len(footage)} frames at {footage.width}x{footage.height} px, dt {scene.dt:.6g} s, "
            f"{scene.steps} steps ({timing['blended_frames']} frames between steps); unknowns "
            + ", ".join(f"{k}={v:.5g}" for k, v in initial.items()) + f"; loss {loss0:.6e}")
    clips = [v.footage for v in scene.views]           # every camera's footage ties the journal to this fit
    journal = FitJournal(os.path.join(out, JOURNAL_NAME), _fingerprint(args, spec, clips, loss0, iterations),
                         resume=args.resume)
    if journal.recorded_before:
        printer(f"resuming: {journal.recorded_before} rollouts recorded in {journal.path} are replayed without "
                "running, then the fit goes on")
    elif args.resume:
        printer(f"--resume: no journal of this fit in {out}: the fit starts from the beginning")
    stopped = None                  # the error that ended the fit early
    journal.attach(scene)
    try:
        result, history = fit_scene(scene, iterations=iterations, printer=printer, initial_alpha=alpha0,
                                    **overrides)
    except GradientError as exc:    # the best rollout so far is the estimate (no uncertainty without the minimum)
        stopped = exc
    finally:
        journal.detach()
    if stopped is None:
        # [fit] horizon = "auto": the frames fitted and why (the renders and loss_final cover every frame)
        horizon = dict(scene.horizon_info or {"frames_fitted": len(footage), "frames_total": len(footage)})
    else:
        result, history, horizon = None, journal.history(), _stop_early(scene, journal, stopped, printer)
    estimates = scene.values()
    if scene.step_choice is not None and stopped is None:      # substeps = "auto": does the step hold at the estimate?
        from .fitting.horizons import Predictability
        from .scenes.step_choice import recheck_at_estimate
        at = horizon.get("predictability_at_estimate")       # [fit] horizon = "auto" measured it already
        recheck_at_estimate(scene.step_choice, scene, None if at is None else
                            Predictability.from_disagreement(at["disagreement_px"], at["tolerance_px"], at["dt"]))
        printer(scene.step_choice["summary"])
    if horizon["frames_fitted"] < len(footage):
        scene.use_frames(horizon["frames_fitted"])
        horizon["loss_final_fitted_frames"] = _finite(scene.loss_value())
        scene.use_frames(len(footage))
    loss1 = scene.loss_value()
    alpha1 = scene.render()[..., -1]
    files = {
        "loss_plot": plot_loss(history, os.path.join(out, "loss.png"), title=f"{spec.name}: loss per rollout"),
        "param_plot": plot_params(history, os.path.join(out, "params.png"), title=f"{spec.name}: unknowns per rollout"),
        "fit_outline_gif": os.path.join(out, "fit_outline.gif"),
        "fit_outline_png": os.path.join(out, "fit_outline.png"),
        "initial_outline_gif": os.path.join(out, "initial_outline.gif"),
        "estimates_json": os.path.join(out, "estimates.json"),
        "estimates_md": os.path.join(out, "estimates.md"),
        "journal": journal.path,
        **{f"{when}_outline_gif_{v.name}": os.path.join(out, f"{when}_outline_{v.name}.gif")
           for v in scene.views[1:] for when in ("fit", "initial")},       # [[cameras]]: the other cameras'
    }
    write_outline(files["fit_outline_gif"], files["fit_outline_png"], footage, alpha1, footage.fps)
    write_outline(files["initial_outline_gif"], os.path.join(out, "initial_outline.png"), footage, alpha0, footage.fps)
    iou0, iou1 = iou_summary(footage, alpha0), iou_summary(footage, alpha1)
    views1 = views_outlines(scene, out, "fit", before=views0)
    if views1:                      # several cameras: the IoU of the fit is the mean over them
        from .scenes.scene_views import mean_iou
        iou0, iou1 = {"mean": mean_iou(views0)}, {"mean": mean_iou(views1)}
        iou0, iou1 = (None, None) if iou1["mean"] is None else (iou0, iou1)
    best = result.best if result is not None else None
    error = None if stopped is None else _one_line(stopped)
    honesty = None                  # assumed constants' sensitivity and the fit's quality (marks best's statuses)
    if best is not None:
        from .core.errors import SimulationError
        from .scenes.assumed import scene_honesty
        try:
            honesty = scene_honesty(scene, best, horizon["frames_fitted"],
                                    fitted_iou(iou1, views1, horizon["frames_fitted"]))
        except (ValueError, SimulationError) as exc:      # a rollout near the estimate blew up: say so, keep going
            honesty = {"assumptions": None, "fit_quality": None, "markdown": None, "nuisance": None,
                       "intervals_with_assumptions": {}, "intervals_with_discrepancy": {},
                       "warnings": [f"no sensitivity to the assumed constants: {_one_line(exc)}"]}
        for w in honesty["warnings"]:
            print(f"warning: {w}", file=sys.stderr)
    report = {
        "scene": os.path.abspath(args.scene), "supervision": f.supervision, "frames": len(footage),
        "size": [footage.width, footage.height], **timing, "rollouts": len(history.loss), "quick": bool(args.quick),
        "loss_initial": _finite(loss0), "loss_final": _finite(loss1),
        "iou_initial": None if iou0 is None else iou0["mean"], "iou_final": None if iou1 is None else iou1["mean"],
        # IoU on the fitted frames (a misfit there: the search's or the model's; past them: its prediction)
        "iou_final_fitted_frames": fitted_iou(iou1, views1, horizon["frames_fitted"]),
        "iou_final_per_frame": None if iou1 is None else iou1.get("per_frame"),
        **({"cameras": views1} if views1 else {}),
        "ambiguous": None if result is None else result.ambiguous,
        "summary": (f"stopped early ({type(stopped).__name__}): the best rollout so far, no uncertainty"
                    if result is None else _search_summary(result, honesty)),
        "stopped_early": stopped is not None, "error": error, **horizon,
        "substeps": spec.substeps, "time_step_choice": scene.step_choice,    # substeps = "auto": how it was chosen
        "unknowns": {},
        "undetermined": [d.to_dict() for d in best.undetermined] if best is not None else [],
        "camera": scene.camera_report(), "warnings": scene.warnings + (honesty["warnings"] if honesty else []),
        "assumptions": honesty and honesty["assumptions"], "fit_quality": honesty and honesty["fit_quality"],
        "nuisance": honesty and honesty["nuisance"], "contact_constants": f.contact_constants,
        "frame_statistics": honesty and honesty.get("frame_statistics"),
        "discrepancy": honesty and honesty.get("discrepancy"),
        "identification": None if result is None else result.to_dict(),
        "resumed": {"rollouts_recorded": journal.recorded_before, "rollouts_replayed": journal.replayed},
        "seconds": round(time.time() - t0, 2),
    }
    for u in spec.unknowns:
        e = best[u.target] if best is not None else None
        report["unknowns"][u.target] = {
            "initial": initial[u.target], "estimate": estimates[u.target],
            "std": None if e is None or not e.determined else _finite(e.std), "std_space": "log" if u.log else "linear",
            "ci95": None if e is None or e.lower95 is None else [e.lower95, e.upper95],
            # the interval widened by what the assumed / undetermined nuisance constants can do over their ranges
            "ci95_with_assumptions": (list(honesty["intervals_with_assumptions"][u.target])
                                      if honesty and honesty["intervals_with_assumptions"].get(u.target) else None),
            # the same over the constants' whole prior ranges, ends the footage rules out included
            "ci95_with_assumptions_whole_range": (
                list(honesty["intervals_with_assumptions_whole_range"][u.target])
                if honesty and (honesty.get("intervals_with_assumptions_whole_range") or {}).get(u.target) else None),
            # and widened further by the model discrepancy (tgs.discrepancy_intervals)
            "ci95_with_discrepancy": (list(honesty["intervals_with_discrepancy"][u.target])
                                      if honesty and (honesty.get("intervals_with_discrepancy") or {}).get(u.target)
                                      else None),
            # several minima fit equally well (identify's tie rules): the range their intervals span
            "ci95_over_minima": (list(result.envelope(u.target)) if result is not None and result.ambiguous
                                 and result.envelope(u.target) is not None else None),
            "nuisance": u.nuisance,
            # [fit] profile: the profile-likelihood walk (fitting/profile.py); ci95 is then its union with Laplace's
            "profile": (best.profiles[u.target].to_dict() if best is not None and u.target in best.profiles
                        else None),
            "model_bias": None if e is None or not e.determined else _finite(e.bias),
            "status": ("stopped early" if stopped is not None else "no uncertainty") if e is None else e.status,
            "lower": u.lower, "upper": u.upper}
    with open(files["estimates_json"], "w") as fh:
        json.dump(report, fh, indent=1, default=_json_default)
    md = fit_markdown(spec, report, result, honesty and honesty["markdown"])
    with open(files["estimates_md"], "w") as fh:
        fh.write(md)
    printer("\n" + md)
    from .scenes.scene_views import camera_summary
    summary = {"ok": stopped is None, "command": "fit", "out": os.path.abspath(out), "threads": _threads(),
               "estimates": estimates,
               "std": {k: v["std"] for k, v in report["unknowns"].items()},
               "std_space": {k: v["std_space"] for k, v in report["unknowns"].items()},
               "ci95": {k: v["ci95"] for k, v in report["unknowns"].items()},
               "ci95_with_assumptions": {k: v["ci95_with_assumptions"] for k, v in report["unknowns"].items()},
               "ci95_with_discrepancy": {k: v["ci95_with_discrepancy"] for k, v in report["unknowns"].items()},
               "status": {k: v["status"] for k, v in report["unknowns"].items()},
               "undetermined": [d["text"] for d in report["undetermined"]], "ambiguous": report["ambiguous"],
               "frames_fitted": horizon["frames_fitted"], "frames_total": horizon["frames_total"],
               "horizon_reason": horizon.get("horizon_reason"),
               "loss_initial": report["loss_initial"], "loss_final": report["loss_final"],
               "iou_initial": report["iou_initial"], "iou_final": report["iou_final"],
               **({"cameras": {k: {"iou_initial": v["iou_initial"], "iou_final": v["iou"]}
                               for k, v in views1.items()}} if views1 else {}),
               "camera": camera_summary(report["camera"]),
               "warnings": report["warnings"], "rollouts": report["rollouts"], "resumed": report["resumed"],
               "seconds": report["seconds"], "files": files}
    if stopped is None:
        _last_line(summary)
        return 0
    # a failure like the others (one error line, the JSON last line), with the estimates written
    return _fail("fit", error, RUN_FAILED, {**{k: v for k, v in summary.items() if k not in ("ok", "command")},
                                            "stopped_early": True})


def _laws(args):
    import tigradsim as tgs
    from .scenes.law_compare import compare_contact_laws
    from .scenes.scene_build import load_scene_footage
    from .scenes.scene_file import load_scene

    t0 = time.time()
    printer = (lambda *a, **k: None) if args.quiet else (lambda *a, **k: print(*a, **k, flush=True))
    spec = load_scene(args.scene)
    if spec.several_cameras:                 # [[cameras]]: one clip per camera
        from .scenes.scene_views import load_views_footage
        footage = load_views_footage(spec, args.resolution)
    else:
        footage = load_scene_footage(spec, args.resolution)
    if not spec.unknowns:
        raise spec.error(None, "[unknowns]", "nothing to fit: add at least one [unknowns.\"OBJECT.PARAM\"] table")
    tgs.init(arch=args.arch, precision=args.precision or "f64", pin_threads="auto" if args.pin_threads else False)
    overrides = {}
    if args.quick:
        overrides = dict(starts=1, local_starts=1, refine=0, horizons=None,
                         iterations=min(spec.fit.iterations, QUICK_ITERATIONS))
    comparison, _results = compare_contact_laws(spec, footage, printer=printer, **overrides)
    os.makedirs(args.out, exist_ok=True)
    files = {"laws_json": os.path.join(args.out, "laws.json"), "laws_md": os.path.join(args.out, "laws.md")}
    with open(files["laws_json"], "w") as fh:
        json.dump(comparison.to_dict(), fh, indent=1, default=_json_default)
    with open(files["laws_md"], "w") as fh:
        fh.write(comparison.to_markdown("Contact laws compared (quality: silhouette IoU)"))
    _last_line({"ok": True, "command": "laws", "out": os.path.abspath(args.out), "best": comparison.best,
                "equally_good": comparison.equally_good,
                "combined": {k: {"value": c.value, "ci95": None if c.lower95 is None else [c.lower95, c.upper95],
                                 "spread": c.spread, "status": c.status} for k, c in comparison.combined.items()},
                "seconds": round(time.time() - t0, 2), "files": files})
    return 0


def _search_summary(result, honesty) -> str:
    """The identification's summary, and when its best minimum is a misfit (`fit_quality`: residual far
    above the footage's noise floor, or a low IoU) that it is the best the search found, not the answer:
    "one best minimum" alone would read as success; otherwise the best fit's residual against the noise
    floor (and its IoU)."""
    text = result.summary()
    quality = (honesty or {}).get("fit_quality")
    if quality and quality.get("misfit") and result.minima:
        why = quality["text"].split(": the model")[0]
        text += (f"; but the best of the {len(result.runs)} local fits is a misfit ({why}): the search may have "
                 "missed the basin that follows the footage, or the model cannot follow it")
    elif quality and result.minima:                 # the best loss against the noise floor, said every time
        text += f" ({quality['text']})"
    return text


def _stop_early(scene, journal, exc, printer) -> dict:
    """After `exc` (a GradientError) ended the fit: the Params at the best rollout so far
    (`FitJournal.best`), the scene back on every frame; returns the report's horizon entries."""
    K = len(scene.footage)
    best = journal.best()
    if best is None:                # not one finite rollout: the initial values stay
        frames, where = K, "no rollout finished; the initial values are reported"
    else:
        journal.write_values(best)
        frames = best["key"][1]
        where = (f"the best of {len(journal.forwards())} rollouts so far (loss {best['loss']:.6e} on frames "
                 f"0..{frames - 1} of {K})")
    scene.use_frames(K)
    printer(f"stopped early: {_one_line(exc)}\nreporting {where}")
    return {"frames_fitted": int(frames), "frames_total": K, "horizon_reason": f"stopped early: {where}"}


def _fingerprint(args, spec, footage, loss0, iterations) -> dict:
    """What ties a fit journal to its fit (`FitJournal`): the scene file, the footage at the render
    resolution, the initial loss (which the meshes and everything else the scene builds move), the
    options that change the fit, and tigradsim's version."""
    import hashlib
    import tigradsim as tgs

    with open(args.scene, "rb") as fh:
        scene_sha = hashlib.sha256(fh.read()).hexdigest()
    h = hashlib.sha256()
    for clip in footage if isinstance(footage, list) else [footage]:      # [[cameras]]: every camera's
        for a in (clip.frames, clip.masks, getattr(clip, "background", None)):
            if a is not None:
                h.update(np.ascontiguousarray(a).tobytes())
    return {"scene file (sha256)": scene_sha, "footage (sha256)": h.hexdigest(), "initial loss": float(loss0).hex(),
            "options": {"iterations": iterations, "quick": bool(args.quick), "resolution": args.resolution,
                        "precision": args.precision, "arch": args.arch},
            "tigradsim": tgs.__version__}


if __name__ == "__main__":
    sys.exit(main())
