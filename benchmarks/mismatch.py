"""Model mismatch: how far off are identified parameters when the target was simulated with a finer
time step or another contact law than the fit uses, and how much of that is recovered by
(1) fitting with the matching law option, (2) more substeps per frame, (3) fitting the contact
parameters (ke, kd, kf) as nuisance parameters while reporting only mass and mu.

Scene: the box of demos/sysid_rigid_contact.py (same size, drop, known off-centre push, truths drawn
by its `draw`, bounds), observed by the world positions of its 8 surface vertices at --fps (state
supervision: no renderer, to stay quick).  The fit's base time step is --dt (1/960 s: 32 substeps per
frame at 30 fps, the demo's --quick step).  The targets:
  * finer dt: the same (capped) law simulated at dt/4 and dt/8 ("the world is continuous");
  * another law: damping="uncapped" (dflex / Warp) fitted with the default capped law, and the
    reverse (tigradsim.physics.contact documents both).
Each fit starts from the same guess (truth times a log-uniform factor in [1/--guess-factor,
--guess-factor]) and runs BFGS (`tgs.BFGS`, trust radius --lr in log-parameters) until the loss stops
improving (relative change below 1e-6 over --chunk steps) or --iters steps, then --refine
Levenberg-Marquardt iterations (`VideoFit.refine`), so that each fit ends at its model's optimum
(the matching-law rows check that: there the optimum is the truth).  Free parameters: "all"
(mass, ke, kd, kf, mu) or "mass,mu" (ke, kd, kf fixed at the target's true values: what a user does
who trusts the contact constants).  Errors are absolute relative errors, mean over --trials.

Measured (defaults: 2 trials, seed 0; mean abs. relative error of mass / mu, the reported parameters):

    target          fit             free        mass     mu       (ke, kd, kf)
    dt/4            dt              mass,mu     8.7e-3   1.4e-2   fixed at truth
    dt/4            dt              all         3.9e-3   7.9e-3   1.2e-2, 9.0e-2, 1.5e-1
    dt/8            dt              mass,mu     9.4e-3   1.5e-2
    dt/8            dt              all         4.6e-3   9.3e-3   1.5e-2, 1.1e-1, 1.9e-1
    dt/8            dt/2            all         2.0e-3   4.0e-3   5.5e-3, 4.6e-2, 6.2e-2
    dt/8            dt/4            all         6.7e-4   1.3e-3   2.0e-3, 1.7e-2, 1.9e-2
    uncapped        capped          mass,mu     4.4e-3   8.2e-3
    uncapped        capped          all         3.9e-3   2.2e-3   0.43, 6.5, 1.6 (no longer physical)
    uncapped        uncapped        all         6.3e-5   5.3e-5   1.3e-2, 2.0e-2, 1.0e-2 (see below)
    capped          uncapped        mass,mu     1.9e-2   3.5e-2
    capped          uncapped        all         1.0e-2   9.0e-3   0.29, 0.36, 2.7

  * A finer-dt target costs ~1 % of the mass and mu; the error falls in proportion to dt_fit - dt_target
    (7 : 3 : 1 for fits at dt, dt/2, dt/4 of a dt/8 target): more substeps is the cure.
  * Fitting ke, kd, kf as nuisance parameters halves the mass and mu errors under both kinds of
    mismatch (4x for mu under the law mismatch), while the contact values themselves become fudge
    factors (the capped law needs kd 4-9x larger to mimic the uncapped one's touchdown damping).
  * The matching law recovers the truth: trial 0's uncapped-on-uncapped fit ends at 1e-15 in every
    parameter (as the demo's own-law fits with the default capped law do); trial 1's stalled at mass
    1.3e-4, ke 2.5e-2 (loss 5e-8): the uncapped law's loss jumps wherever a parameter moves a
    touchdown to another step (tigradsim/physics/contact.py), which is what stops BFGS and LM there.
  Run time: 9.4 min wall, 171 s CPU (2 cores shared with other jobs, load average ~9), peak 450 MB.

    python benchmarks/mismatch.py            # defaults: 2 trials, about 10 minutes on 2 cores
    python benchmarks/mismatch.py --quick    # 1 trial, fewer cases

Prints a table, then a last line of JSON (rows: case, target, fit, free, rel_err per parameter).
"""
import argparse
import json
import resource
import time

import numpy as np

import tigradsim as tgs
from tigradsim.physics.rigid import RigidSurface
from tigradsim.scenes.rigid_contact import BOUNDS, FIELDS, NAMES, bounce_box_model, draw
from tigradsim.fitting.sysid import VideoFit, relative_error

CONTACT = ("ke", "kd", "kf")


class MismatchScene:
    """The demo's box, push and ground with a contact law and time step dt = 1 / (fps * substeps),
    observed every `substeps` steps by its surface vertices (so every scene sees the same instants)."""

    def __init__(self, args, substeps, damping="capped", friction="capped"):
        self.substeps = substeps
        self.dt = 1.0 / (args.fps * substeps)
        self.model = bounce_box_model(box=args.box, height=args.height, push=args.push, push_offset=args.push_offset,
                                      push_start=args.push_start, push_time=args.push_time, damping=damping,
                                      friction=friction)
        frames = int(round(args.duration * args.fps))
        self.sim = tgs.Simulator(self.model, dt=self.dt, steps=frames * substeps)
        self.surface = RigidSurface(self.sim, every=substeps)
        self.fits = {}

    def set(self, values):
        for n in NAMES:
            self.model.set(FIELDS[n], [values[n]])

    def get(self):
        return {n: float(self.model.get(FIELDS[n])[0]) for n in NAMES}

    def record(self, values):
        self.set(values)
        self.sim.run()
        return self.surface.vertices.to_numpy().copy()

    def fit(self, target, guess, fixed, free, args):
        """BFGS over the `free` parameters (log-space, the demo's bounds) from `guess`, the others at
        `fixed`; returns (estimate, loss, steps)."""
        key = tuple(free)
        if key not in self.fits:
            params = [tgs.Param(getattr(self.model, FIELDS[n]), n, lower=BOUNDS[n][0], upper=BOUNDS[n][1],
                                log_space=True) for n in free]
            self.fits[key] = VideoFit(self.sim, None, params, supervision="state",
                                      state_source=self.surface.vertices)
        fit = self.fits[key]
        self.set({n: (guess[n] if n in free else fixed[n]) for n in NAMES})
        fit.history = tgs.History()
        opt = tgs.BFGS(fit.params, lr=args.lr)
        done, best = 0, np.inf
        while done < args.iters:
            done = min(done + args.chunk, args.iters)
            fit.fit(target, iters=done, optimizer=opt, log_every=0, printer=lambda *_: None)
            loss = min(fit.history.loss)
            if loss >= best * (1 - 1e-6) or loss < 1e-24:
                best = min(best, loss)
                break
            best = loss
        if args.refine:
            fit.refine(target, iters=args.refine, fd_step=args.fd_step, log_every=0, printer=lambda *_: None)
        return self.get(), fit.loss_value(), opt.iteration


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--trials", type=int, default=2)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--fps", type=float, default=30.0, help="observation rate [1/s]")
    p.add_argument("--dt", type=float, default=1 / 960, help="the fit's base time step [s] (a divisor of 1/fps)")
    p.add_argument("--iters", type=int, default=60, help="most BFGS steps per fit")
    p.add_argument("--chunk", type=int, default=10, help="stop when a chunk of this many steps gains < 1e-6")
    p.add_argument("--lr", type=float, default=0.1, help="BFGS trust radius (log-parameters)")
    p.add_argument("--refine", type=int, default=8,
                   help="Levenberg-Marquardt iterations after BFGS (VideoFit.refine: FD Jacobian, 2 n + 1 rollouts each)")
    p.add_argument("--fd-step", type=float, default=1e-3, help="FD step (log-parameters) of the LM Jacobian")
    p.add_argument("--guess-factor", type=float, default=1.25)
    p.add_argument("--duration", type=float, default=1.6)
    p.add_argument("--quick", action="store_true", help="1 trial, 30 steps, fewer cases (a smoke run)")
    for name, default in (("push", 20.0), ("push_offset", 0.05), ("push_start", 0.95), ("push_time", 0.1),
                          ("height", 0.12)):
        p.add_argument("--" + name.replace("_", "-"), type=float, default=default, help="as in the demo")
    p.add_argument("--box", type=float, nargs=3, default=(0.3, 0.1, 0.22))
    args = p.parse_args(argv)
    if args.quick:
        args.trials, args.iters, args.refine = 1, min(args.iters, 30), min(args.refine, 4)
    start = time.time()
    tgs.init(arch="cpu", precision="f64", seed=args.seed)
    base, rem = divmod(round(1 / (args.fps * args.dt) * 1e6), 10 ** 6)
    if rem:
        raise ValueError(f"--dt: 1/fps must be a whole number of steps, got 1/fps / dt = {1 / (args.fps * args.dt)}")
    scenes = {}

    def scene(div, damping="capped"):
        if (div, damping) not in scenes:
            scenes[div, damping] = MismatchScene(args, base * div, damping)
        return scenes[div, damping]

    # (case, target (substep multiple, law), fit (substep multiple, law), free parameters)
    cases = [
        ("dt", (4, "capped"), (1, "capped"), NAMES),
        ("dt", (4, "capped"), (1, "capped"), ("mass", "mu")),
        ("dt", (8, "capped"), (1, "capped"), NAMES),
        ("dt", (8, "capped"), (1, "capped"), ("mass", "mu")),
        ("dt", (8, "capped"), (2, "capped"), NAMES),
        ("dt", (8, "capped"), (4, "capped"), NAMES),
        ("law", (1, "uncapped"), (1, "capped"), NAMES),
        ("law", (1, "uncapped"), (1, "capped"), ("mass", "mu")),
        ("law", (1, "uncapped"), (1, "uncapped"), NAMES),
        ("law", (1, "capped"), (1, "uncapped"), NAMES),
        ("law", (1, "capped"), (1, "uncapped"), ("mass", "mu")),
    ]
    if args.quick:
        cases = [c for k, c in enumerate(cases) if k in (0, 1, 6, 7, 8)]
    rng = np.random.default_rng(args.seed)
    rows = {k: [] for k in range(len(cases))}
    for trial in range(args.trials):
        truth, guess = draw(rng, args.guess_factor)
        targets = {}
        for k, (case, tgt, fit_model, free) in enumerate(cases):
            if tgt not in targets:
                targets[tgt] = scene(*tgt).record(truth)
            t0 = time.time()
            est, loss, steps = scene(*fit_model).fit(targets[tgt], guess, truth, free, args)
            err = {n: relative_error(est[n], truth[n]) for n in free}
            rows[k].append(dict(err=err, loss=loss, steps=steps, seconds=time.time() - t0))
            print(f"trial {trial} {case:3s} target dt/{tgt[0]} {tgt[1]:8s} fit dt/{fit_model[0]} {fit_model[1]:8s} "
                  f"free {','.join(free):18s} " + " ".join(f"{n} {err[n]:.1e}" for n in free) +
                  f"  loss {loss:.2e}  {steps} steps  {time.time() - t0:.0f} s", flush=True)
    table, out = [], []
    header = f"{'case':4s} {'target':18s} {'fit':18s} {'free':8s} " + " ".join(f"{n:>8s}" for n in NAMES) + \
        f" {'loss':>9s} {'steps':>5s}"
    for k, (case, tgt, fit_model, free) in enumerate(cases):
        mean = {n: float(np.mean([r["err"][n] for r in rows[k]])) for n in free}
        row = dict(case=case, target=dict(dt=args.dt / tgt[0], damping=tgt[1]),
                   fit=dict(dt=args.dt / fit_model[0], damping=fit_model[1]), free=list(free), rel_err=mean,
                   loss=float(np.mean([r["loss"] for r in rows[k]])), steps=float(np.mean([r["steps"] for r in rows[k]])))
        out.append(row)
        table.append(f"{case:4s} {'dt/' + str(tgt[0]) + ' ' + tgt[1]:18s} {'dt/' + str(fit_model[0]) + ' ' + fit_model[1]:18s} "
                     f"{'all' if len(free) == 5 else 'mass,mu':8s} " +
                     " ".join(f"{mean[n]:8.1e}" if n in mean else f"{'(fixed)':>8s}" for n in NAMES) +
                     f" {row['loss']:9.2e} {row['steps']:5.0f}")
    print(f"\nmean abs. relative error over {args.trials} trial(s); dt = {args.dt:.6g} s, {args.fps:g} fps")
    print(header)
    print("\n".join(table))
    print(json.dumps({"benchmark": "mismatch", "trials": args.trials, "dt": args.dt, "fps": args.fps,
                      "iters": args.iters, "guess_factor": args.guess_factor, "rows": out,
                      "seconds": round(time.time() - start, 1),
                      "cpu_seconds": round(sum(resource.getrusage(resource.RUSAGE_SELF)[:2]), 1)}))


if __name__ == "__main__":
    main()
