"""Baselines for gradSim Tables 1 (rigid mass) and 2 (rigid contact: mass, ke, kd, kf, mu) at the
gradient fit's budget of simulator runs.

Every method sees the same trials: truths and initial guesses drawn exactly as the demos draw them
(`tigradsim.scenes.rigid_push.draw_masses`, `tigradsim.scenes.rigid_contact.draw`, numpy's generator
seeded by --seed, one draw per trial in order), so trial k here is trial k of
`demos/sysid_rigid_mass.py` / `demos/sysid_rigid_contact.py` at the same seed and scene settings.

Methods (each estimate is compared with the truth by the mean absolute relative error):
  * prior mean: no simulator run; the mean of the distribution the truths are drawn from (mass:
    log-uniform on [0.5, 3] kg, also the guesses' distribution; contact: `TRUE_RANGE` with kd from the
    damping ratio), estimated from 20000 draws of the scene's own draw function.
  * random search: the initial guess and then draws from that same prior, each one forward rollout
    scored by the image loss; the best is the estimate.
  * CMA-ES (`cma` package, optional extra `baselines`): from the initial guess in the fit's
    coordinates (log-parameters, the fit's bounds), initial step per coordinate = the standard
    deviation of log(value) under the prior; the image loss; the best evaluated point is the estimate.
    In 1-D (Table 1) pycma does not run CMA (a covariance matrix is moot there, pycma issue #86): the
    objective gets a second, ignored coordinate, the maintainers' workaround.
  * gradient, image / 3D: the demos' fits (Adam then BFGS through the Tape; image loss or the
    recorded 3D tracks, the paper's DiffPhysics baseline) at their default settings.

Budget: one gradient iteration (one forward + backward rollout) counts as one simulator run, as one
forward rollout of a gradient-free method does; per trial the gradient-free methods get as many runs
as the image-supervised gradient fit used on that trial (its History's length: the demos' iterations
plus one evaluation at the end of each phase; the contact fit stops once converged), or at most
--budget-mass / --budget-contact.  A backward pass costs about 1-2 forward passes here, so at equal
run counts the gradient fits use more CPU; the table's seconds say how much (they include compiling
the kernels of each new scene, which the gradient fits, run first, pay).

    python benchmarks/baselines.py                          # 5 mass trials, 2 contact trials, seed 0
    python benchmarks/baselines.py --only rigid_mass --trials-mass 10
    python benchmarks/baselines.py --quick                  # tiny settings (a test of the machinery)

Results are merged into benchmarks/baselines.json (one entry per experiment; a run replaces only the
experiments it measures) and rendered into benchmarks/paper_tables.md by paper_tables.py (section
"Baselines"); --quick results go to baselines_quick.json and are not rendered there.  The last
stdout line is JSON: {"rigid_mass": {method: {...}}, "rigid_contact": {...}, "settings": {...}}.
"""
import argparse
import datetime
import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from _harness import load_json   # benchmarks/_harness.py (this folder is on sys.path as a script)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXPERIMENTS = ("rigid_mass", "rigid_contact")
METHODS = ("prior mean", "random search", "CMA-ES", "gradient, image", "gradient, 3D (state)")
PRIOR_DRAWS = 20000


# -- derivative-free searches over Params (the fit's internal coordinates) ------------------------

def internal_vector(params):
    """The Params' current values in the optimiser's coordinates (log where log_space), flattened."""
    return np.concatenate([np.ravel(p.to_internal(p.value())) for p in params])


def write_internal(params, x):
    """Write the flattened internal coordinates `x` into the Params (clamped to their bounds)."""
    x, k = np.asarray(x, dtype=np.float64), 0
    for p in params:
        n = int(np.size(p.value()))
        p.write(p.from_internal(x[k:k + n].reshape(np.shape(p.value()))))
        k += n
    if k != x.size:
        raise ValueError(f"x: expected {k} internal coordinates for params {[p.name for p in params]}, got {x.size}")


def internal_bounds(params):
    """(lower, upper) flattened internal bounds of the Params (+-inf where unbounded)."""
    lo, hi = zip(*(p.internal_bounds() for p in params))
    return np.concatenate([np.ravel(a) for a in lo]), np.concatenate([np.ravel(a) for a in hi])


@dataclass
class SearchResult:
    """A derivative-free search: the best evaluated point `x` and its `loss`, the runs used, and the
    loss of every run in order (`trace`)."""
    x: np.ndarray
    loss: float
    runs: int
    trace: list = field(default_factory=list)


def random_search(objective: Callable, candidates) -> SearchResult:
    """Evaluate `objective(x)` at every row of `candidates` (n, d); keep the lowest.  Non-finite
    losses (a rollout that blew up) count as runs and are never chosen."""
    candidates = np.atleast_2d(np.asarray(candidates, dtype=np.float64))
    if len(candidates) < 1:
        raise ValueError("candidates: expected at least one point to evaluate")
    trace = [float(objective(x)) for x in candidates]
    scores = np.where(np.isfinite(trace), trace, np.inf)
    best = int(np.argmin(scores))
    return SearchResult(candidates[best].copy(), float(trace[best]), len(trace), trace)


def cma_search(objective: Callable, x0, stds, lower, upper, budget, seed) -> SearchResult:
    """CMA-ES (pycma) on `objective` from `x0` (d,), initial step `stds` (d,) per coordinate, box
    bounds `lower`, `upper` (d,), at most `budget` evaluations (whole generations only: the last
    generation that would overrun the budget is not started).  seed: pycma's seed (a positive int).

    1-D problems get a second, ignored coordinate (pycma runs no CMA in 1-D; pycma issue #86)."""
    import cma      # the optional extra `baselines`

    x0, stds = np.atleast_1d(np.asarray(x0, float)), np.atleast_1d(np.asarray(stds, float))
    lower, upper = np.atleast_1d(np.asarray(lower, float)), np.atleast_1d(np.asarray(upper, float))
    d = x0.size
    if not (stds.shape == lower.shape == upper.shape == (d,)):
        raise ValueError(f"stds, lower, upper: expected shape ({d},) like x0, got {stds.shape}, {lower.shape}, "
                         f"{upper.shape}")
    if int(budget) != budget or budget < 1:
        raise ValueError(f"budget: expected a positive integer number of runs, got {budget!r}")
    if int(seed) != seed or seed < 1:
        raise ValueError(f"seed: expected a positive integer (pycma draws a time seed for 0), got {seed!r}")
    pad = d == 1
    if pad:
        x0, stds, lower, upper = (np.append(a, v) for a, v in ((x0, 0.0), (stds, 1.0), (lower, -1.0), (upper, 1.0)))
    popsize = 4 + int(3 * np.log(x0.size))          # pycma's default, but a budget below it still gets runs
    opts = {"bounds": [list(lower), list(upper)], "CMA_stds": list(stds), "seed": int(seed), "verbose": -9,
            "maxfevals": int(budget), "popsize": max(2, min(popsize, int(budget)))}
    es = cma.CMAEvolutionStrategy(list(x0), 1.0, opts)
    trace, best = [], SearchResult(x0[:d].copy(), np.inf, 0)
    while len(trace) + es.popsize <= budget:
        xs = es.ask()
        fs = []
        for x in xs:
            f = float(objective(np.asarray(x[:d])))
            trace.append(f)
            fs.append(f if np.isfinite(f) else 1e300)     # a blown-up rollout: worst, never chosen
            if np.isfinite(f) and f < best.loss:
                best = SearchResult(np.asarray(x[:d], float).copy(), f, 0)
        es.tell(xs, fs)
        if es.stop() and "maxfevals" not in es.stop():
            break
    best.runs, best.trace = len(trace), trace
    return best


# -- the two experiments ------------------------------------------------------------------------------

class MassProblem:
    """Table 1: one PushScene per shape (image and state supervision), built on first use; trial k
    uses shape SHAPES[k % 5] as the demo does."""
    names = ("mass",)

    def __init__(self, scene):
        from tigradsim.scenes import rigid_push
        self.mod, self.scene, self.scenes = rigid_push, scene, {}

    def draw(self, rng):
        truth, guess = self.mod.draw_masses(rng)
        return {"mass": truth}, {"mass": guess}

    def prior_draw(self, rng):
        return {"mass": self.mod.draw_masses(rng)[0]}

    def scenes_for(self, trial):
        shape = self.mod.SHAPES[trial % len(self.mod.SHAPES)]
        if shape not in self.scenes:
            self.scenes[shape] = {sup: self.mod.PushScene(shape, supervision=sup, **self.scene)
                                  for sup in ("image", "state")}
        return shape, self.scenes[shape]

    def set(self, sc, values):
        sc.set_mass(values["mass"])

    def get(self, sc):
        return {"mass": sc.get_mass()}

    def params(self, sc):
        return [sc.mass]

    def gradient_fit(self, sc, target, fit):
        sc.fit_mass(target, **fit)


class ContactProblem:
    """Table 2: one BounceBoxScene per supervision, five parameters."""

    def __init__(self, scene):
        from tigradsim.scenes import rigid_contact
        self.mod, self.names, self.scene, self.pair = rigid_contact, rigid_contact.NAMES, scene, None

    def draw(self, rng):
        return self.mod.draw(rng)

    def prior_draw(self, rng):
        return self.mod.draw(rng)[0]

    def scenes_for(self, trial):
        if self.pair is None:
            self.pair = {sup: self.mod.BounceBoxScene(supervision=sup, **self.scene) for sup in ("image", "state")}
        return "box", self.pair

    def set(self, sc, values):
        sc.set(values)

    def get(self, sc):
        return sc.get()

    def params(self, sc):
        return sc.params

    def gradient_fit(self, sc, target, fit):
        sc.fit_contact(target, **fit)


def prior_samples(problem, seed, n):
    """(n, d) values drawn from the truths' distribution with the scene's own draw function."""
    rng = np.random.default_rng(seed)
    rows = (problem.prior_draw(rng) for _ in range(n))
    return np.array([[row[k] for k in problem.names] for row in rows]).reshape(n, len(problem.names))


def run_experiment(name, trials, seed, budget, scene, fit, printer=print):
    """All methods on `trials` trials of experiment `name` ("rigid_mass" | "rigid_contact"); returns
    {"methods": {method: summary}, "per_trial": [...], ...} (summaries: mean relative error per
    parameter and over parameters, the mean absolute error [parameter units], runs, seconds)."""
    if name not in EXPERIMENTS:
        raise ValueError(f"name: unknown experiment {name!r}; expected one of {EXPERIMENTS}")
    if int(trials) != trials or trials < 1:
        raise ValueError(f"trials: expected a positive integer, got {trials!r}")
    if budget is not None and (int(budget) != budget or budget < 1):
        raise ValueError(f"budget: expected None (the image fit's runs) or a positive integer cap, got {budget!r}")
    problem = (MassProblem if name == "rigid_mass" else ContactProblem)(scene)
    names = problem.names
    # the prior: truths' distribution (the trials' own generator is not touched: its draws stay the demo's)
    prior = prior_samples(problem, seed + 10_000, PRIOR_DRAWS)
    prior_mean = dict(zip(names, prior.mean(0)))
    log_std = np.log(prior).std(0)
    rng = np.random.default_rng(seed)
    rows = []
    for trial in range(trials):
        truth, guess = problem.draw(rng)
        label, scenes = problem.scenes_for(trial)
        img, st = scenes["image"], scenes["state"]
        printer(f"{name} trial {trial} ({label}): truth " + ", ".join(f"{k}={truth[k]:.5g}" for k in names)
                + "; guess " + ", ".join(f"{k}={guess[k]:.5g}" for k in names))
        problem.set(img, truth)
        target = img.target()
        problem.set(st, truth)
        target_state = st.target()
        results = {"prior mean": (dict(prior_mean), 0, 0.0)}
        # the gradient fits first: the image fit's run count is the gradient-free methods' budget
        for method, sc, tgt in (("gradient, image", img, target), ("gradient, 3D (state)", st, target_state)):
            problem.set(sc, guess)
            t0 = time.time()
            problem.gradient_fit(sc, tgt, fit)
            # runs: one per History entry, plus the forward runs of a Levenberg-Marquardt stage (the
            # contact fit's, when BFGS ends above stop_loss; its iterations are History entries too)
            results[method] = (problem.get(sc), len(sc.fit.history.loss) + getattr(sc, "lm_rollouts", 0),
                               time.time() - t0)
        runs = min(results["gradient, image"][1], budget) if budget else results["gradient, image"][1]
        params = problem.params(img)

        def objective(x):
            write_internal(params, x)
            return img.fit.loss_value()

        # random search: the guess, then budget - 1 prior draws (its own generator per trial)
        problem.set(img, guess)
        img.fit.set_target(target)
        x0 = internal_vector(params)
        draws = prior_samples(problem, 1 + 1000 * seed + trial, runs - 1)
        cand = np.vstack([x0[None]] + [[p.to_internal(v) for p, v in zip(params, row)] for row in draws])
        t0 = time.time()
        rs = random_search(objective, cand)
        write_internal(params, rs.x)
        results["random search"] = (problem.get(img), rs.runs, time.time() - t0)
        # CMA-ES from the guess
        problem.set(img, guess)
        lo, hi = internal_bounds(params)
        t0 = time.time()
        cm = cma_search(objective, x0, log_std, lo, hi, runs, seed=1 + 1000 * seed + trial)
        write_internal(params, cm.x)
        results["CMA-ES"] = (problem.get(img), cm.runs, time.time() - t0)
        row = {"trial": trial, "label": label, "truth": truth, "guess": guess,
               "rel_err_initial": {k: abs(guess[k] - truth[k]) / truth[k] for k in names}, "methods": {}}
        for method, (est, runs, secs) in results.items():
            row["methods"][method] = {"estimate": est, "runs": runs, "seconds": round(secs, 2),
                                      "rel_err": {k: abs(est[k] - truth[k]) / truth[k] for k in names},
                                      "abs_err": {k: abs(est[k] - truth[k]) for k in names}}
            printer(f"  {method:>22}: " + ", ".join(f"{k} {row['methods'][method]['rel_err'][k]:.2e}" for k in names)
                    + f"  ({runs} runs, {secs:.1f} s)")
        rows.append(row)
    summary = {}
    for method in METHODS:
        per = [r["methods"][method] for r in rows]
        rel = {k: float(np.mean([p["rel_err"][k] for p in per])) for k in names}
        summary[method] = {
            "rel_err": rel, "rel_err_mean": float(np.mean(list(rel.values()))),
            "rel_err_std_over_trials": {k: float(np.std([p["rel_err"][k] for p in per])) for k in names},
            "abs_err": {k: float(np.mean([p["abs_err"][k] for p in per])) for k in names},
            "runs": float(np.mean([p["runs"] for p in per])), "runs_max": int(max(p["runs"] for p in per)),
            "seconds": round(float(np.mean([p["seconds"] for p in per])), 2)}
    return {"methods": summary, "per_trial": rows, "trials": trials, "seed": seed, "budget": budget,
            "prior_mean": prior_mean, "rel_err_initial": {k: float(np.mean([r["rel_err_initial"][k] for r in rows]))
                                                          for k in names}}


# -- settings -----------------------------------------------------------------------------------------

def settings(name, quick):
    """(scene keyword arguments, gradient-fit keyword arguments) of experiment `name`: the demos'
    defaults; quick: tiny rollouts for tests (short clips, 16 px, a few iterations)."""
    if name == "rigid_mass":
        return (dict(duration=0.15, res=16, every=12), dict(iters=4, polish=2)) if quick else ({}, {})
    if quick:
        return (dict(duration=0.3, dt=1 / 960, res=16, every=32, push_start=0.1, push_time=0.1),
                dict(iters=4, polish=2, stop_every=2))
    return {}, {}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--only", action="append", choices=EXPERIMENTS, help="run only this experiment (repeatable)")
    p.add_argument("--trials-mass", type=int, default=5, help="Table 1 trials (one per shape at 5)")
    p.add_argument("--trials-contact", type=int, default=2, help="Table 2 trials")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--budget-mass", type=int, default=None,
                   help="cap on the gradient-free runs per trial (default: the image fit's runs on that trial)")
    p.add_argument("--budget-contact", type=int, default=None, help="the same for Table 2")
    p.add_argument("--quick", action="store_true", help="tiny settings (seconds; results kept in *_quick.json)")
    p.add_argument("--json", default=None, help="results file (default benchmarks/baselines[_quick].json)")
    p.add_argument("--no-render", action="store_true", help="do not rewrite benchmarks/paper_tables.md")
    p.add_argument("--arch", default="cpu")
    args = p.parse_args(argv)
    import tigradsim as tgs
    tgs.init(arch=args.arch, precision="f64", seed=args.seed)
    json_path = args.json or os.path.join(ROOT, "benchmarks", "baselines_quick.json" if args.quick else "baselines.json")
    out = {}
    for name in args.only or EXPERIMENTS:
        scene, fit = settings(name, args.quick)
        budget = getattr(args, f"budget_{name.split('_')[1]}")
        trials = args.trials_mass if name == "rigid_mass" else args.trials_contact
        start, load_start = time.time(), os.getloadavg()[0]
        res = run_experiment(name, trials, args.seed, budget, scene, fit)
        res.update(wall_seconds=round(time.time() - start, 1), date=datetime.date.today().isoformat(),
                   quick=args.quick, scene=scene, fit=fit, load=[load_start, os.getloadavg()[0]],
                   command="benchmarks/baselines.py " + " ".join(argv if argv is not None else sys.argv[1:]))
        out[name] = res
        stored = load_json(json_path)          # re-read: another run may have written meanwhile
        stored[name] = res
        with open(json_path, "w") as fh:
            json.dump(stored, fh, indent=1)
    print("\n".join(baseline_tables(out)))
    if not args.quick and not args.no_render and args.json is None:
        subprocess.run([sys.executable, os.path.join(ROOT, "benchmarks", "paper_tables.py"), "--render"],
                       check=True, stdout=subprocess.DEVNULL, cwd=ROOT)
    print(json.dumps({**{k: v["methods"] for k, v in out.items()},
                      "settings": {k: {"trials": v["trials"], "seed": v["seed"], "budget": v["budget"]}
                                   for k, v in out.items()}}))


# -- tables (also rendered by paper_tables.py) --------------------------------------------------------

def _fmt(x):
    return f"{x:.2e}" if (x != 0 and (abs(x) < 1e-2 or abs(x) >= 1e3)) else f"{x:.3g}"


PAPER = {"rigid_mass": {"gradient, image": {"mass": 9.01e-5}, "gradient, 3D (state)": {"mass": 5.17e-9}},
         "rigid_contact": {"gradient, image": {"mass": 2.87e-4, "kd": 0.400, "ke": 0.003, "kf": 0.001,
                                               "mu": 0.007}}}


def baseline_tables(results):
    """Markdown lines: one table per experiment in `results` (paper_tables.py renders these)."""
    lines = []
    for name in EXPERIMENTS:
        res = results.get(name)
        if not res:
            continue
        names = list(res["prior_mean"])
        title = ("Table 1, rigid mass" if name == "rigid_mass" else "Table 2, rigid contact (mass, ke, kd, kf, mu)")
        lines += [f"### {title}: {res['trials']} trials, seed {res['seed']}, budget per trial: "
                  + (f"at most {res['budget']} runs" if res["budget"] else "the image fit's runs")
                  + (" (quick settings)" if res.get("quick") else ""), ""]
        head = "| method | " + " | ".join(f"{k}: abs. rel. error" for k in names)
        head += " | mean abs. error (kg)" if name == "rigid_mass" else ""
        head += " | simulator runs per trial (mean / max) | seconds per trial | paper (gradSim) |"
        lines += [head, "|" + "---|" * (len(names) + (5 if name == "rigid_mass" else 4))]
        for method in METHODS:
            m = res["methods"][method]
            cells = [method] + [f"{_fmt(m['rel_err'][k])} ± {_fmt(m['rel_err_std_over_trials'][k])}" for k in names]
            if name == "rigid_mass":
                cells.append(_fmt(m["abs_err"]["mass"]))
            paper = PAPER[name].get(method)
            cells += [f"{m['runs']:.4g} / {m['runs_max']}", f"{m['seconds']:.3g}",
                      ", ".join(f"{k} {_fmt(v)}" for k, v in paper.items()) if paper else "—"]
            lines.append("| " + " | ".join(cells) + " |")
        lines += ["", f"Initial guesses' error: " + ", ".join(f"{k} {_fmt(v)}" for k, v in res["rel_err_initial"].items())
                  + f"; `{res.get('command', '?')}`, {res.get('date', '?')}, wall {res.get('wall_seconds', '?')} s"
                  + (f", load average {res['load'][0]:.1f} at the start, {res['load'][1]:.1f} at the end (2 cores)"
                     if "load" in res else "") + ".", ""]
    return lines


CAPTION = ("Mean absolute relative error over trials (± standard deviation over trials).  Every method sees "
           "the same truths and initial guesses (those of the demos at the same seed).  Budget: one gradient "
           "iteration (a forward and a backward rollout) counts as one simulator run, as one forward rollout of "
           "random search or CMA-ES does; on each trial the gradient-free methods get as many runs as the "
           "image-supervised gradient fit used (its iterations plus one evaluation closing each Adam / BFGS phase; "
           "the contact fit stops early once converged).  Prior mean: the mean of the truths' distribution, no "
           "run.  Random search: the initial guess, then draws from that prior, scored by the image loss.  "
           "CMA-ES (pycma): from the initial guess in log-parameters within the fit's bounds, initial steps the "
           "prior's standard deviation of log(value), image loss; best evaluated point.  Gradient: the demos' "
           "fits (Adam then BFGS), image or 3D-track loss.  Seconds: per trial on 2 shared cores (loaded by other "
           "jobs; the gradient fits run first on each new scene and their seconds include compiling its kernels).")


if __name__ == "__main__":
    main()
