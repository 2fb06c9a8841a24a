"""Recover mass, contact stiffness, damping and friction of a box from video (gradSim Table 2).

A box dropped from --height bounces (ke, kd, mass) and settles; at --push-start a known force (--push N,
--push-time s, --push-offset off the centre) slides it until friction (mu, kf) stops it.  All five
parameters are fitted together from silhouettes (log-space, bounded): Adam, then up to --polish BFGS
steps (until the loss is <= --stop-loss), then, only if the loss is still above --stop-loss, up to
--refine Levenberg-Marquardt iterations (Gauss-Newton: it takes the slow kf direction from the Jacobian).  Truths come from
the seed, guesses are truth x/ up to --guess-factor; the scene and why it is so:
`tigradsim.scenes.rigid_contact`.  Measured (seed 0, 3 trials): mass 3.0e-15, ke 7.7e-15, kd 3.1e-14,
kf 4.6e-13, mu 4.1e-15 (paper 2.87e-4, 0.003, 0.400, 0.001, 0.007).

    python demos/sysid_rigid_contact.py --headless --out out/sysid_rigid_contact

Writes loss.png, params.png, target_initial_estimate.gif, overlay.png (trial 0) and trials.gif (every
trial, labelled) to --out; plays trials.gif when a display exists.  Last line: JSON with rel_err (per
parameter, mean abs. relative error over trials), rel_err_initial, iters, trials, seconds, per_trial.
"""
import argparse
import json
import os
import resource
import time

import numpy as np

import tigradsim as tgs
from tigradsim.core.aliases import add_renamed_flag
from tigradsim.core.memory import peak_rss_mb
from tigradsim.io.panels import trials_grid
from tigradsim.scenes.rigid_contact import NAMES, contact_trials
from tigradsim.io.video import save_gif
from tigradsim.io.viz import add_view_args, play_video


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--trials", type=int, default=3)
    p.add_argument("--iters", type=int, default=160, help="gradient iterations (Adam, then --polish BFGS steps)")
    p.add_argument("--polish", type=int, default=110, help="last gradient iterations done by quasi-Newton (tgs.BFGS)")
    p.add_argument("--stop-loss", type=float, default=1e-26, help="stop BFGS at this loss (~1e-8 relative errors)")
    p.add_argument("--stop-every", type=int, default=10, help="check --stop-loss every this many BFGS steps")
    p.add_argument("--refine", type=int, default=10,
                   help="Levenberg-Marquardt iterations (tgs.least_squares) when BFGS ends above --stop-loss")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--res", type=int, default=64, help="image width = height [px]")
    p.add_argument("--supervision", choices=("image", "state"), default="image")
    for n in NAMES:
        p.add_argument(f"--true-{n}", type=float, default=None, help=f"override the true {n}")
        p.add_argument(f"--init-{n}", type=float, default=None, help=f"override the initial guess of {n}")
    p.add_argument("--fd-step", type=float, default=1e-4, help="FD step (log-parameters) of the --refine Jacobian")
    p.add_argument("--guess-factor", type=float, default=1.5, help="initial guesses: truth x/ up to this factor")
    p.add_argument("--lr", type=float, default=0.05, help="Adam step in log-parameters")
    p.add_argument("--lr-decay", type=float, default=0.97, help="Adam learning-rate factor per iteration")
    p.add_argument("--polish-lr", type=float, default=0.05, help="BFGS trust radius in log-parameters")
    p.add_argument("--push", type=float, default=20.0, help="known kick force [N] along +x")
    p.add_argument("--push-offset", type=float, default=0.05, help="kick point [m] off the centre along z (spin)")
    p.add_argument("--push-start", type=float, default=0.95, help="the kick starts at this time [s]")
    p.add_argument("--push-time", type=float, default=0.1, help="the kick lasts this long [s]")
    p.add_argument("--box", type=float, nargs=3, default=(0.3, 0.1, 0.22), help="box size x y z [m]")
    p.add_argument("--height", type=float, default=0.12, help="initial height of the box centre [m]")
    p.add_argument("--duration", type=float, default=1.6, help="seconds simulated")
    p.add_argument("--dt", type=float, default=1 / 1920, help="time step [s] (at 1/960 the loss ripples in ke)")
    p.add_argument("--every", type=int, default=32, help="render every this many steps")
    p.add_argument("--edge-softness", type=float, default=1e-3, help="soft-rasterizer edge softness (NDC^2)")
    add_renamed_flag(p, "--sigma", "--edge-softness", "edge_softness", type=float)
    p.add_argument("--checkpoint", type=int, default=None, help="checkpoint every K steps")
    p.add_argument("--quick", action="store_true", help="small settings for tests (~1 minute)")
    p.add_argument("--resume", action="store_true", help="continue fits saved in --out")
    p.add_argument("--arch", default="cpu")
    add_view_args(p, out_default="out/sysid_rigid_contact")
    args = p.parse_args(argv)
    if args.quick:
        args.trials, args.iters, args.polish = min(args.trials, 1), min(args.iters, 90), min(args.polish, 40)
        args.res, args.every, args.dt, args.refine = 32, 32, 1 / 960, min(args.refine, 0)
    start = time.time()
    tgs.init(arch=args.arch, precision="f64", seed=args.seed)
    os.makedirs(args.out, exist_ok=True)
    a = vars(args)
    pick = lambda *keys: {k: a[k] for k in keys}   # noqa: E731
    given = lambda kind: {n: a[f"{kind}_{n}"] for n in NAMES if a[f"{kind}_{n}"] is not None}   # noqa: E731
    fit = pick("iters", "polish", "lr", "lr_decay", "polish_lr", "stop_loss", "stop_every", "refine", "fd_step")
    scene = pick("box", "height", "push", "push_offset", "push_start", "push_time", "duration", "dt", "every", "res",
                 "edge_softness", "checkpoint", "supervision")
    trials, errors, initial_errors, strips = [], [], [], []
    for t in contact_trials(args.trials, args.seed, args.guess_factor, given("true"), given("init"), fit=fit,
                            resume_dir=args.out if args.resume else None, **scene):
        errors.append(t.rel_err)
        initial_errors.append(t.rel_err_initial)
        trials.append(t.summary())
        strips.append(t.scene.fit.report_strip(t.target_video, t.initial_video, truth=t.true))
        if t.index == 0:
            paths = t.scene.fit.save_report(args.out, t.target_video, t.initial_video, truth=t.true,
                                            title="mass, ke, kd, kf, mu from video")
            print(f"wrote {paths['loss_plot']}, {paths['param_plot']}, {paths['gif']}, {paths['overlay']}")
    grid = trials_grid(strips)
    gif = save_gif(grid, os.path.join(args.out, "trials.gif"), fps=15)
    print(f"wrote {gif}")
    play_video(grid, "mass, ke, kd, kf, mu from video: every trial", args, saved_at=gif)
    mean = lambda rows: {n: float(np.mean([r[n] for r in rows])) for n in NAMES}   # noqa: E731
    print(json.dumps({
        "experiment": "rigid_contact", "supervision": args.supervision,
        "rel_err": mean(errors), "rel_err_initial": mean(initial_errors),
        "iters": args.iters, "polish": args.polish, "refine": args.refine, "trials": args.trials, "res": args.res,
        "seconds": round(time.time() - start, 1),
        "cpu_seconds": round(sum(resource.getrusage(resource.RUSAGE_SELF)[:2]), 1),
        "peak_mem_mb": round(peak_rss_mb(), 1),
        "per_trial": trials, "out": args.out,
    }))


if __name__ == "__main__":
    main()
