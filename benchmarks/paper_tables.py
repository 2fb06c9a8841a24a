"""The gradSim paper's tables, reproduced: system identification (Tables 1-3)
and control from pixels.  Each experiment demo runs at its default settings in
its own subprocess (image and state supervision; for control the image-loss
and 3D-loss methods, the random policy measured in every run), and a markdown
table of our numbers beside the paper's (DESIGN.md section 6) is written, with
seconds and peak memory.

    python benchmarks/paper_tables.py                        # everything (hours on 2 cores)
    python benchmarks/paper_tables.py --only sysid_rigid_mass --supervision image
    python benchmarks/paper_tables.py --only control_fem --extra "--seeds 6 --iters 40"
    python benchmarks/paper_tables.py --render               # rewrite the table from stored results
    python benchmarks/paper_tables.py --ray --seeds 0 1 2 3 4   # every (experiment, seed, trial) a Ray task
    python benchmarks/paper_tables.py --ray auto --only sysid_rigid_mass   # on a running Ray cluster
    python benchmarks/paper_tables.py --seeds 0 1 --only sysid_rigid_mass  # the same tasks one after another

Sweeps (--ray or --seeds): each (experiment, supervision, seed, trial) is one task, a demo run of
that one trial (`task_flags`: rigid mass and contact get the seed's k-th truth and guess as flags,
control the k-th target's seed; FEM and cloth run a seed's trials in one task); results are merged
per (experiment, supervision) into paper_tables.json after every task (mean over all trials of all
seeds, the standard deviation over seeds, per_trial), with a progress line per task.  Ray is the
optional extra `distributed` (pip install -e .[distributed]).

Measured (2026-12-04, this 2-core machine, no other jobs, kernels in Taichi's cache, the same
estimates every run): 6 rigid-mass tasks, --only sysid_rigid_mass --supervision image --seeds 0 1 2
--trials 2 --extra "--iters 20 --polish 5 --res 32 --duration 0.5": one after another 43.3 s, local
Ray with 2 workers 23.6 s (1.83x; 1.71x counting Ray's start, 44.0 s against 25.7 s for the whole
command).  Each local Ray worker's demo runs Taichi on cores / workers threads
(TI_CPU_MAX_NUM_THREADS): before that, two demos of 2 threads each on 2 cores (and other jobs)
made the same kind of sweep slower on Ray (56 s sequential, 128 s on Ray, 2026-12-03).  Tiny tasks
(--iters 2 --res 16 --duration 0.1, about 4 s each) gain less: 27.5 s against 20.4 s (1.35x).

Results are kept in benchmarks/paper_tables.json, one entry per (experiment,
supervision) with the flags and date of its run; a run replaces only the
entries it measures, so experiments can be measured one at a time and the
table always shows the latest measurement of each.  --quick results are kept
apart (paper_tables_quick.*) so they never replace full ones.
"""
import argparse
import datetime
import json
import os
import subprocess
import sys
import time

import numpy as np

from _harness import load_json   # benchmarks/_harness.py (this folder is on sys.path as a script)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# paper: absolute relative errors (image supervision) from gradSim, Tables 1-3
SYSID = {
    "sysid_rigid_mass": {"table": "1", "paper": {"mass": 9.01e-5}, "paper_state": {"mass": 5.17e-9},
                         "flags": ["--trials", "10"]},          # the target is over 10 trials
    "sysid_rigid_contact": {"table": "2", "paper": {"mass": 2.87e-4, "kd": 0.400, "ke": 0.003, "kf": 0.001,
                                                    "mu": 0.007}},
    "sysid_fem": {"table": "3", "paper": {"mu": 0.0054, "lam": 0.0056}, "flags": ["--estimate", "lame"]},
    "sysid_fem_mass": {"table": "3", "paper": {"mass": 0.048}, "script": "sysid_fem",
                       "flags": ["--estimate", "mass"]},
    "sysid_cloth": {"table": "3", "paper": {"velocity": 0.026}},
}
# paper: final centre-of-mass error of the image-loss controller and of a random policy (gradSim section 5.3)
CONTROL = {
    "control_walker": {"paper": "goal image reached in 3 iterations"},
    "control_fem": {"paper": "MSE 0.107 after 40 iterations, 6 seeds (random 3.5)"},
    "control_cloth": {"paper": "MSE 0.199 after 50 iterations, 5 seeds (random 8.07)"},
}
EXPERIMENTS = {**SYSID, **CONTROL}
# the flag value each kind of demo takes for image / 3D supervision
MODE_FLAG = {"sysid": ("--supervision", {"image": "image", "state": "state"}),
             "control": ("--method", {"image": "gradsim", "state": "state"})}


def kind(name):
    return "control" if name in CONTROL else "sysid"


def run_one(name, supervision, quick, extra, timeout, label=None):
    spec = EXPERIMENTS[name]
    script = os.path.join(ROOT, "demos", f"{spec.get('script', name)}.py")
    extra = list(spec.get("flags", [])) + list(extra)
    out = os.path.join(ROOT, "out", "paper_tables", f"{name}_{supervision}", *([label] if label else []))
    flag, values = MODE_FLAG[kind(name)]
    cmd = [sys.executable, script, "--headless", flag, values[supervision], "--out", out] + list(extra)
    if quick:
        cmd.append("--quick")
    start = time.time()
    meta = {"flags": " ".join(os.path.relpath(c, ROOT) if c.startswith(ROOT) else c for c in cmd[1:]),
            "date": datetime.date.today().isoformat()}
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=ROOT)
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout} s", "wall_seconds": round(time.time() - start, 1), **meta}
    wall = round(time.time() - start, 1)
    lines = [ln for ln in proc.stdout.strip().splitlines() if ln.startswith("{")]
    if proc.returncode != 0 or not lines:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
        return {"error": f"exit {proc.returncode}: " + " | ".join(tail), "wall_seconds": wall, **meta}
    return {**json.loads(lines[-1]), "wall_seconds": wall, **meta}


def fmt(x):
    if x is None:
        return "—"
    if isinstance(x, str):
        return x
    return f"{x:.2e}" if (x != 0 and (abs(x) < 1e-2 or abs(x) >= 1e3)) else f"{x:.3g}"


def cell(res, key, sub=None):
    """One result's value (or its error message), formatted."""
    if not res:
        return "—"
    if "error" in res:
        return "failed: " + res["error"][:80]
    v = res.get(key)
    if sub is not None:
        v = (v or {}).get(sub)
    std = (res.get(f"{key}_std_over_seeds") or {}).get(sub) if sub is not None else None
    if std is not None and isinstance(res.get("seeds"), list) and len(res["seeds"]) > 1:
        return f"{fmt(v)} ± {fmt(std)} ({len(res['seeds'])} seeds)"    # a sweep: std of the per-seed means
    return fmt(v)


def sysid_table(results):
    rows = ["| experiment (paper table) | parameter | paper (image) | ours, image | ours, state | initial guess "
            "| trials | iters | seconds (image / state) | peak MB (image / state) |",
            "|---|---|---|---|---|---|---|---|---|---|"]
    for name, spec in SYSID.items():
        img, st = results.get(name, {}).get("image", {}), results.get(name, {}).get("state", {})
        if not img and not st:
            continue
        any_res = img if "rel_err" in img else st
        params = list(spec["paper"])
        params += [k for k in (any_res.get("rel_err") or {}) if k not in params]
        for k, param in enumerate(params):
            paper = fmt(spec["paper"].get(param))
            if param in spec.get("paper_state", {}):
                paper += f" (state: {fmt(spec['paper_state'][param])})"
            cells = [f"{name} ({spec['table']})" if k == 0 else "", param, paper,
                     cell(img, "rel_err", param), cell(st, "rel_err", param),
                     cell(any_res, "rel_err_initial", param)]
            if k == 0:
                cells += [str(any_res.get("trials", "—")), str(any_res.get("iters", "—")),
                          f"{img.get('seconds', '—')} / {st.get('seconds', '—')}",
                          f"{img.get('peak_mem_mb', '—')} / {st.get('peak_mem_mb', '—')}"]
            else:
                cells += ["", "", "", ""]
            rows.append("| " + " | ".join(cells) + " |")
    return rows


def control_table(results):
    rows = ["| task | paper (image loss) | ours, image loss | ours, 3D loss | random policy | seeds | iters "
            "| seconds (image / 3D) | peak MB (image / 3D) |",
            "|---|---|---|---|---|---|---|---|---|"]
    for name, spec in CONTROL.items():
        img, st = results.get(name, {}).get("image", {}), results.get(name, {}).get("state", {})
        if not img and not st:
            continue
        any_res = img if "position_error" in img else st

        def both(res):
            if not res or "error" in res:
                return cell(res, "position_error")
            mse = [row["position_mse"] for row in res.get("per_seed", []) if "position_mse" in row]
            spread = f" ± {fmt(float(np.std(mse)))}" if len(mse) > 1 else ""    # std over seeds (targets)
            return f"{fmt(res['position_error'])} m (MSE {fmt(res.get('position_mse'))}{spread})"

        rand = (f"{fmt(any_res.get('position_error_random'))} m (MSE {fmt(any_res.get('position_mse_random'))})"
                if "position_error_random" in any_res else "—")
        rows.append("| " + " | ".join([
            name, spec["paper"], both(img), both(st), rand, str(any_res.get("seeds", "—")),
            str(any_res.get("iters", "—")), f"{img.get('seconds', '—')} / {st.get('seconds', '—')}",
            f"{img.get('peak_mem_mb', '—')} / {st.get('peak_mem_mb', '—')}"]) + " |")
    return rows


def table(results):
    text = "# gradSim's tables: ours beside the paper's\n\n"
    text += ("Written by `benchmarks/paper_tables.py` from paper_tables.json (each experiment's latest "
             "measurement; its flags and date are listed below).  CPU, 2 shared cores.\n\n")
    text += ("## System identification (Tables 1-3)\n\nMean absolute relative error over trials "
             "(|estimate - truth| / truth), each demo at its default settings unless its flags say otherwise; "
             "paper: image supervision.\n\n")
    text += "\n".join(sysid_table(results)) + "\n\n"
    text += ("## Control from pixels\n\nMean over seeds of the final centre-of-mass distance to the target's "
             "(m), and the mean squared distance (the paper's metric) ± its standard deviation over seeds.\n\n")
    text += "\n".join(control_table(results)) + "\n\n"
    text += extra_sections()
    text += "## Runs\n\n"
    for name in EXPERIMENTS:
        for sup, res in results.get(name, {}).items():
            text += (f"- {name} ({sup}): {res.get('date', '?')}, wall {res.get('wall_seconds', '?')} s, "
                     f"`{res.get('flags', '?')}`" + (f"; {res['note']}" if res.get("note") else "") + "\n")
    return text


# -- sweeps: every (experiment, supervision, seed, trial) as its own task, on Ray or one after another -------
# trials per seed of each experiment (the demos' defaults; Table 1 over 10 trials)
TRIALS = {"sysid_rigid_mass": 10, "sysid_rigid_contact": 3, "sysid_fem": 1, "sysid_fem_mass": 1, "sysid_cloth": 1,
          "control_walker": 6, "control_fem": 3, "control_cloth": 5}


def task_flags(name, seed, trial, trials):
    """The demo flags that run only trial `trial` of seed `seed` (as run by the demo with --seed seed
    --trials `trials`), and whether the demo can do one trial alone.

    rigid mass / contact: the seed's truths and guesses are drawn with the scenes' own draw functions
    (trial k: the k-th draw of numpy's generator seeded by `seed`) and passed as --true-*/--init-*
    (--shape: the demo's shape of trial k), so the one-trial run fits exactly the demo's trial k.
    Control: trial k is the target of seed s * trials + k (--seeds 1), so seed 0's targets are those of
    the demo's default run; its random-policy and policy-initialisation draws then come from that one
    seed (they differ from a multi-target run's).  FEM and cloth draw inside the scene: one task per
    seed runs all its trials (returns trial=None)."""
    if name == "sysid_rigid_mass":
        from tigradsim.scenes.rigid_push import SHAPES, draw_masses
        rng = np.random.default_rng(seed)
        for _ in range(trial + 1):
            true, init = draw_masses(rng)
        return ["--seed", str(seed), "--trials", "1", "--shape", SHAPES[trial % len(SHAPES)],
                "--true-mass", repr(true), "--init-mass", repr(init)], True
    if name == "sysid_rigid_contact":
        from tigradsim.scenes.rigid_contact import NAMES, draw
        rng = np.random.default_rng(seed)
        for _ in range(trial + 1):
            true, init = draw(rng)
        flags = ["--seed", str(seed), "--trials", "1"]
        for n in NAMES:
            flags += [f"--true-{n}", repr(true[n]), f"--init-{n}", repr(init[n])]
        return flags, True
    if name in CONTROL:
        return ["--seed", str(seed * trials + trial), "--seeds", "1"], True
    return ["--seed", str(seed), "--trials", str(trials)], False


def make_tasks(names, sups, seeds, trials=None):
    """Task dicts {name, supervision, seed, trial, flags}: one per (experiment, supervision, seed,
    trial), or per seed where a demo cannot run one trial alone (trial None).  trials: per seed
    (default `TRIALS`)."""
    tasks = []
    for name in names:
        n = trials or TRIALS[name]
        for seed in seeds:
            for trial in range(n):
                flags, alone = task_flags(name, seed, trial, n)
                for sup in sups:
                    tasks.append({"name": name, "supervision": sup, "seed": seed, "trial": trial if alone else None,
                                  "trials": 1 if alone else n, "flags": flags})
                if not alone:
                    break
    return tasks


def run_task(task, quick, extra, timeout):
    """Run one task's demo (its own --out folder); returns the demo's JSON plus the task's keys."""
    label = f"seed{task['seed']}" + ("" if task["trial"] is None else f"_trial{task['trial']}")
    res = run_one(task["name"], task["supervision"], quick, list(extra) + list(task["flags"]), timeout, label)
    return {**res, **{k: task[k] for k in ("name", "supervision", "seed", "trial")}}


def dry_run_task(task, quick, extra, timeout):
    """A task's stand-in for --dry-run: the demo command it would run and the process that got it
    (no demo runs; checks the fan-out and the merge in seconds)."""
    spec = EXPERIMENTS[task["name"]]
    flag, values = MODE_FLAG[kind(task["name"])]
    cmd = ([f"demos/{spec.get('script', task['name'])}.py", flag, values[task["supervision"]]]
           + list(spec.get("flags", [])) + (["--quick"] if quick else []) + list(extra) + list(task["flags"]))
    return {"command": " ".join(cmd), "pid": os.getpid(), "seconds": 0.0,
            "taichi_threads": os.environ.get("TI_CPU_MAX_NUM_THREADS"),
            **{k: task[k] for k in ("name", "supervision", "seed", "trial")}}


def aggregate(done, wall):
    """One paper_tables.json entry from finished task results of one (experiment, supervision):
    sysid: rel_err and rel_err_initial = mean over every trial of every seed, rel_err_std_over_seeds
    (std of the per-seed means; 0 with one seed), per_trial; control: position_error / _mse and the
    random policy's, mean over targets, per_seed.  Failed tasks are listed under failed_tasks."""
    ok = [r for r in done if "error" not in r]
    failed = [{k: r.get(k) for k in ("seed", "trial", "error")} for r in done if "error" in r]
    if not ok:
        return {"error": f"all {len(done)} tasks failed: " + failed[0]["error"], "failed_tasks": failed,
                "wall_seconds": round(wall, 1)}
    first, seeds = ok[0], sorted({r["seed"] for r in ok})
    out = {"tasks": len(ok), "seeds": seeds, "wall_seconds": round(wall, 1),
           "seconds": round(sum(r.get("seconds", 0.0) for r in ok), 1),
           "peak_mem_mb": max(r.get("peak_mem_mb", 0.0) for r in ok), "iters": first.get("iters"),
           "date": datetime.date.today().isoformat(),
           "flags": f"ray/sweep of {len(done)} tasks, seeds {seeds}: " + first.get("flags", "")}
    if failed:
        out["failed_tasks"] = failed
    if first["name"] in CONTROL:
        rows = [row for r in ok for row in r.get("per_seed", [])]
        for key, src in (("position_error", "position_error"), ("position_mse", "position_mse"),
                         ("position_error_random", "random_error"), ("position_mse_random", "random_mse")):
            out[key] = float(np.mean([row[src] for row in rows]))
        out.update(per_seed=rows)
        out["seeds"] = len(rows)
        out["sweep_seeds"] = seeds
        return out
    weights = np.array([r.get("trials", 1) for r in ok], dtype=float)   # a per-seed task holds `trials` trials
    for key in ("rel_err", "rel_err_initial"):
        params = list(first.get(key) or {})
        out[key] = {k: float(np.average([r[key][k] for r in ok], weights=weights)) for k in params}
    per_seed = {s: {k: float(np.average([r["rel_err"][k] for r in ok if r["seed"] == s],
                                        weights=[w for r, w in zip(ok, weights) if r["seed"] == s]))
                    for k in out["rel_err"]} for s in seeds}
    out["rel_err_per_seed"] = {str(s): v for s, v in per_seed.items()}
    out["rel_err_std_over_seeds"] = {k: float(np.std([per_seed[s][k] for s in seeds])) for k in out["rel_err"]}
    out["trials"] = int(weights.sum())
    out["per_trial"] = [{"seed": r["seed"], "trial": r["trial"], **row} for r in ok
                        for row in (r.get("per_trial") or [{}])]
    return out


def sweep(tasks, quick=False, extra=(), timeout=1800, ray_address=None, use_ray=True, workers=None,
          on_result=None, printer=print, runner=run_task, stagger=0.0):
    """Run `tasks` (from `make_tasks`) and return their results in order of completion.

    use_ray: each task is a Ray task of one CPU: on an embedded local Ray started here (`workers`
    CPUs, default all) when ray_address is None, else on the cluster at ray_address ("auto" or
    "ray://host:10001"; its nodes need tigradsim installed and this checkout at the same path).
    use_ray False: one after another in this process.  on_result(result, done_so_far): called after
    each task (the caller merges and saves).  Progress: one line per finished task.  runner:
    runner(task, quick, extra, timeout) -> result dict (`run_task`; `dry_run_task` for --dry-run).
    stagger: seconds between the submissions of the first wave of Ray tasks (one per CPU), so their
    demos do not start (and read Taichi's shared kernel cache) at the same instant; 0: all at once."""
    start, done = time.time(), []

    def report(res):
        done.append(res)
        what = {k: res[k] for k in ("rel_err", "position_error", "error") if k in res}
        printer(f"[{len(done)}/{len(tasks)} {time.time() - start:7.1f} s] {res['name']} ({res['supervision']}) "
                f"seed {res['seed']}" + ("" if res["trial"] is None else f" trial {res['trial']}")
                + f": {json.dumps(what)}")
        if on_result:
            on_result(res, list(done))

    if not use_ray:
        for t in tasks:
            report(runner(t, quick, extra, timeout))
        return done
    import ray      # the optional extra `distributed`
    started_here = not ray.is_initialized()
    if started_here:
        env = {"env_vars": {"PYTHONPATH": os.pathsep.join([os.path.join(ROOT, "benchmarks"), ROOT]
                                                          + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p])}}
        if ray_address is None and "TI_CPU_MAX_NUM_THREADS" not in os.environ:
            # each demo's Taichi would start one thread per core: `workers` of them would oversubscribe
            # the cores, so each gets its share (Taichi reads ti.init's options from TI_* variables)
            cores = os.cpu_count() or 1
            env["env_vars"]["TI_CPU_MAX_NUM_THREADS"] = str(max(1, cores // min(cores, workers or cores)))
        if ray_address is None:
            # Ray starts its workers at nice 15: on a machine others load, the demos they run would wait
            # behind every other process
            os.environ.setdefault("RAY_worker_niceness", "0")
            ray.init(num_cpus=workers, include_dashboard=False, runtime_env=env, log_to_driver=False)
        else:
            ray.init(address=ray_address, runtime_env=env, log_to_driver=False)
    try:
        remote = ray.remote(num_cpus=1, max_retries=0)(runner)
        cpus = int(ray.cluster_resources().get("CPU", 1))
        printer(f"ray: {len(tasks)} tasks on {cpus} CPUs")
        pending = {}
        for i, t in enumerate(tasks):
            if 0 < i < cpus and stagger > 0:
                time.sleep(stagger)
            pending[remote.remote(t, quick, list(extra), timeout)] = t
        while pending:
            ready, _ = ray.wait(list(pending), num_returns=1)
            for ref in ready:
                t = pending.pop(ref)
                try:
                    res = ray.get(ref)
                except Exception as exc:       # a worker died: the task's failure, not the sweep's
                    res = {"error": f"ray task failed: {type(exc).__name__}: {str(exc)[:200]}",
                           **{k: t[k] for k in ("name", "supervision", "seed", "trial")}}
                report(res)
    finally:
        if started_here:
            ray.shutdown()
    return done


def extra_sections():
    """The sections other scripts measure, rendered from their own files when present:
    benchmarks/baselines.json (benchmarks/baselines.py), benchmarks/rq4.json (benchmarks/rq4.py) and
    benchmarks/landscapes/*.png (benchmarks/landscapes.py)."""
    import baselines            # benchmarks/baselines.py (this folder is on sys.path when run as a script)
    import rq4                  # benchmarks/rq4.py
    text = ""
    base = load_json(os.path.join(ROOT, "benchmarks", "baselines.json"))
    if base:
        text += ("## Baselines (Tables 1 and 2)\n\nWritten from baselines.json by `benchmarks/baselines.py`.  "
                 + baselines.CAPTION + "\n\n" + "\n".join(baselines.baseline_tables(base)) + "\n")
    ablations = load_json(os.path.join(ROOT, "benchmarks", "rq4.json"))
    if ablations.get("tables"):
        text += ("## RQ4: imperfect dynamics, imperfect rendering, shading cues (Table 1 scene)\n\nWritten from "
                 "rq4.json by `benchmarks/rq4.py`.  " + rq4.CAPTION + "\n\n" + "\n".join(rq4.rq4_tables(ablations)) + "\n")
    pictures = os.path.join(ROOT, "benchmarks", "landscapes")
    pngs = sorted(f for f in os.listdir(pictures) if f.endswith(".png")) if os.path.isdir(pictures) else []
    if pngs:
        meta = load_json(os.path.join(pictures, "landscapes.json"))
        how = (f" (`{meta['command']}`, {meta['seconds']} s; truth: trial 0 of the contact demo at its --seed (default 0): "
               + ", ".join(f"{k} {fmt(v)}" for k, v in meta["truth"].items()) + ")") if meta.get("command") else ""
        text += ("## Loss landscapes (rigid contact)\n\nWritten by `benchmarks/landscapes.py`" + how + ".  Image "
                 "loss (pixel MSE) and 3D loss (vertex-track MSE) against one parameter with the others at the truth "
                 "(red line), and the mass x mu slice (log10 loss, truth starred).\n\n"
                 + "".join(f"![{f[:-4]}](landscapes/{f})\n" for f in pngs) + "\n")
    return text


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="each demo's --quick settings (kept in *_quick.*)")
    p.add_argument("--only", action="append", choices=list(EXPERIMENTS), help="run only this experiment (repeatable)")
    p.add_argument("--supervision", choices=("image", "state", "both"), default="both",
                   help="image / 3D supervision (for control: --method gradsim / state)")
    p.add_argument("--timeout", type=float, default=1800, help="seconds per run")
    p.add_argument("--extra", default="", help="extra flags passed to every demo, e.g. '--trials 2'")
    p.add_argument("--note", default="", help="a remark stored with these runs and shown in the table")
    p.add_argument("--render", action="store_true", help="only rewrite the markdown from the stored JSON")
    p.add_argument("--out", default=os.path.join(ROOT, "benchmarks", "paper_tables.md"))
    p.add_argument("--ray", nargs="?", const="local", default=None, metavar="ADDRESS",
                   help="run every (experiment, supervision, seed, trial) as a Ray task: an embedded local Ray "
                        "(no ADDRESS), or the cluster at ADDRESS ('auto', 'ray://host:10001'); needs the extra "
                        "`distributed`")
    p.add_argument("--seeds", type=int, nargs="+", default=None,
                   help="sweep these seeds task by task (default with --ray: 0); without --ray the tasks run "
                        "one after another")
    p.add_argument("--trials", type=int, default=None, help="sweep: trials per seed (default: each experiment's)")
    p.add_argument("--workers", type=int, default=None, help="local Ray: CPUs (default: all)")
    p.add_argument("--stagger", type=float, default=0.0,
                   help="Ray: seconds between the first wave's task starts (see sweep())")
    p.add_argument("--dry-run", action="store_true",
                   help="sweep: list each task's demo command (run by the workers) instead of running it")
    args = p.parse_args(argv)
    if args.quick:
        args.out = args.out.replace(".md", "_quick.md")
    json_path = os.path.splitext(args.out)[0] + ".json"
    results = load_json(json_path)
    if not args.render and (args.ray or args.seeds):
        names = args.only or list(EXPERIMENTS)
        sups = ("image", "state") if args.supervision == "both" else (args.supervision,)
        tasks = make_tasks(names, sups, args.seeds or [0], args.trials)
        start = time.time()

        def merge(res, done):
            key = (res["name"], res["supervision"])
            entry = aggregate([r for r in done if (r["name"], r["supervision"]) == key], time.time() - start)
            entry["complete"] = sum((t["name"], t["supervision"]) == key for t in tasks) == entry.get("tasks", 0) + \
                len(entry.get("failed_tasks", []))
            if args.note:
                entry["note"] = args.note
            stored = load_json(json_path)     # re-read: other sweeps may have written meanwhile
            stored.setdefault(key[0], {})[key[1]] = entry
            with open(json_path, "w") as fh:
                json.dump(stored, fh, indent=1)

        if args.dry_run:
            sweep(tasks, args.quick, args.extra.split(), args.timeout, use_ray=bool(args.ray), workers=args.workers,
                  ray_address=None if args.ray == "local" else args.ray, runner=dry_run_task,
                  printer=lambda line: None, on_result=lambda res, done: print(f"pid {res['pid']}: {res['command']}"))
            return
        sweep(tasks, args.quick, args.extra.split(), args.timeout, ray_address=None if args.ray == "local" else args.ray,
              use_ray=bool(args.ray), workers=args.workers, on_result=merge, stagger=args.stagger)
        print(f"sweep of {len(tasks)} tasks: {time.time() - start:.1f} s wall", flush=True)
        results = load_json(json_path)
    elif not args.render:
        names = args.only or list(EXPERIMENTS)
        sups = ("image", "state") if args.supervision == "both" else (args.supervision,)
        for name in names:
            for sup in sups:
                print(f"{name} ({sup}) ...", flush=True)
                res = run_one(name, sup, args.quick, args.extra.split(), args.timeout)
                if args.note:
                    res["note"] = args.note
                results = load_json(json_path)     # re-read: other sweeps may have written meanwhile
                results.setdefault(name, {})[sup] = res
                print("  " + json.dumps({k: res.get(k) for k in ("rel_err", "position_error", "position_error_random",
                                                                 "seconds", "peak_mem_mb", "error") if k in res}),
                      flush=True)
                with open(json_path, "w") as fh:  # after every run, so an interrupted sweep keeps what it measured
                    json.dump(results, fh, indent=1)
    text = table(results)
    with open(args.out, "w") as fh:
        fh.write(text)
    print(text)
    print(json.dumps({"written": args.out}))


if __name__ == "__main__":
    main()
