"""Recover a soft ball's material or per-particle masses from video (gradSim Table 3, deformables).

A neo-Hookean ball is thrown onto the ground; from a wrong guess, Adam then BFGS fit
`--estimate lame` (the stable neo-Hookean mu, lam a user sets; paper 0.0054, 0.0056) or
`mass` (every particle's; paper 0.048) to a rendered video, through the renderer and the
FEM simulation.  Scene, schedule, measured errors: `tigradsim.scenes.soft`.

    python demos/sysid_fem.py --estimate lame --headless --out out/sysid_fem_lame
    python demos/sysid_fem.py --estimate mass --quick

Last line: JSON with rel_err (name -> mean abs relative error over trials),
rel_err_initial, iters, trials, seconds, seconds_per_iter, peak_mem_mb.
"""
import argparse, json, os, time

import numpy as np

import tigradsim as tgs
from tigradsim.core.aliases import add_renamed_flag
from tigradsim.scenes import soft
from tigradsim.scenes.trial_report import collect_trials, timing as trial_timing
from tigradsim.io.viz import add_view_args, play_video

SCENE = ("res", "supervision", "true_mu", "true_lam", "density", "damping", "radius", "resolution", "height", "vx",
         "spin", "ke", "kd", "kf", "friction", "duration", "dt", "every", "edge_softness", "shading",
         "checkpoint")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    f = p.add_argument
    f("--estimate", choices=("lame", "mass"), default="lame")
    f("--trials", type=int, default=1)
    # the fit's schedule: None = the tuned default (see tigradsim.scenes.soft.BallFitSchedule)
    f("--iters", type=int, default=None,
      help="Adam then --polish BFGS steps (lame: 0 after the search, 60 with --search 0; 160 mass; --full 200)")
    f("--polish", type=int, default=None, help="last iterations by BFGS (half (lame), 100 (mass); --quick 20)")
    f("--polish-lr", type=float, default=0.05, help="BFGS trust radius in log-parameters")
    f("--seed", type=int, default=0)
    f("--res", type=int, default=64, help="image width = height [px]")
    f("--supervision", choices=("image", "state"), default="image")
    f("--init-mu", type=float, default=None, help="initial guess (default: truth x random factor)")
    f("--init-lam", type=float, default=None)
    f("--init-scale", type=float, default=None,
      help="mass mode: initial guess = uniform lumped masses x this (default: x a factor drawn per trial, "
           "log-uniform in [1/2, 1/1.3] u [1.3, 2])")
    f("--blur", type=float, nargs="*", default=None, help="blur widths [px] of the pixel loss (BallFitSchedule)")
    f("--mass-truth", choices=("smooth", "white"), default="smooth", help="smooth or per-particle true factor")
    f("--mass-length", type=float, default=0.3, help="length of the smooth true mass factor [m]")
    f("--mass-uniform", type=int, default=None,
      help="mass mode: BFGS steps on one mass scale after the search (0 with --refine; else 10)")
    f("--mass-degree", type=int, default=2, help="mass mode: degree of the polynomial log-mass fitted by --refine")
    f("--mass-smoothing", type=float, default=None, help="smoothing length [m] of the log-mass steps (0.25)")
    f("--lr", type=float, default=None, help="Adam step in log space (0.05 lame, 0.03 mass)")
    f("--lr-decay", type=float, default=None, help="lr factor per iteration (0.98; --quick 0.93)")
    f("--search", type=int, default=None, help="lame: grid points per axis of the coarse search first (9; 0: none)")
    f("--search-factor", type=float, default=2.0, help="the search grid spans guess / this .. guess x this")
    f("--refine", type=int, default=None,
      help="Levenberg-Marquardt iterations per FD step (lame 20 on mu, lam; mass 8 on a polynomial log-mass; 0: none)")
    for name, default, what in (("true-mu", None, "neo-Hookean mu [Pa] of the target (default: drawn per trial, "
                                 "log-uniform in soft.TRUE_RANGE, 500-2000)"),
                                ("true-lam", None, "its lam [Pa] (default: drawn)"),
                                ("density", 10.0, "[kg/m^3]"), ("damping", 0.0, "FEM damping on dF/dt [Pa s]"),
                                ("radius", 0.5, "ball radius [m]"), ("height", 0.9, "initial centre height [m]"),
                                ("vx", 0.8, "initial velocity [m/s]"), ("spin", 0.0, "initial spin [rad/s]"),
                                ("ke", 1e4, "ground"), ("kd", 1.0, "ground"), ("kf", 10.0, "ground"),
                                ("friction", 0.5, "ground Coulomb mu"), ("duration", 1.0, "seconds simulated"),
                                ("dt", 1 / 1920, "[s]"), ("edge-softness", 1e-4, "soft edge [NDC^2]")):
        f(f"--{name}", type=float, default=default, help=what)
    add_renamed_flag(p, "--sigma", "--edge-softness", "edge_softness", type=float)
    f("--resolution", type=int, default=2, help="tet_ball resolution (2: 640 tets, 1: 160)")
    f("--every", type=int, default=32, help="render every this many steps")
    f("--shading", choices=("silhouette", "color"), default="silhouette")
    f("--checkpoint", type=int, default=128, help="checkpoint every K steps")
    f("--full", action="store_true", help="the paper's settings: 2 s clip (3840 steps), 200 iters")
    f("--quick", action="store_true", help="small settings for tests (< 1 minute)")
    f("--resume", action="store_true", help="continue fits saved in --out")
    f("--arch", default="cpu")
    f("--out", default=None, help="folder for pictures and results (default out/sysid_fem_<estimate>)")
    add_view_args(p)
    args = p.parse_args(argv)
    if args.full:
        args.duration = 2.0
    if args.quick:
        vars(args).update(soft.QUICK_SCENE, trials=min(args.trials, 1))
    sched = soft.BallFitSchedule(args.iters, args.polish, args.polish_lr, args.lr, args.lr_decay, args.blur, args.mass_uniform,
                                 args.mass_smoothing, args.search, args.search_factor,
                                 args.refine, mass_degree=args.mass_degree).resolved(args.estimate, args.quick, args.full, args.mass_truth)
    args.out = args.out or f"out/sysid_fem_{args.estimate}"

    start = time.time()
    tgs.init(arch=args.arch, precision="f64", seed=args.seed)
    os.makedirs(args.out, exist_ok=True)
    sc = soft.SoftBallFit(args.estimate, **{k: getattr(args, k) for k in SCENE})
    print(f"ball: {sc.model.tet_count} tets, {sc.sim.steps} steps, {sc.renderer.frames} frames {args.res} px")
    trials = sc.trials(args.trials, np.random.default_rng(args.seed), sched, args.init_mu, args.init_lam,
                        args.init_scale, args.mass_truth, args.mass_length, args.out if args.resume else None)
    rows, fit_seconds, grid, gif = collect_trials(sc, trials, args.out, f"FEM ball: {args.estimate} from video")
    timing = trial_timing(start, fit_seconds,
                          args.trials * max(1, sched.iters + sched.refine * len(sched.refine_fd)))
    result = {"experiment": f"fem_{args.estimate}", "supervision": args.supervision,
              **soft.summarize(sc, rows, sched, timing)}
    if args.estimate == "mass":
        result.update(mass_truth=args.mass_truth, mass_smoothing=sched.mass_smoothing)
    result.update(blur=list(sched.blur), per_trial=rows, out=args.out)
    play_video(grid, f"FEM ball: {args.estimate} from video", args, saved_at=gif)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
