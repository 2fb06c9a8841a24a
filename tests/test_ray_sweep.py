"""benchmarks/paper_tables.py sweeps: tasks that reproduce the demos' trials, the merge of task
results into one table entry, and a small sweep on an embedded local Ray (skipped without the extra
`distributed`)."""
import json
import os
import sys

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))

import paper_tables as pt  # noqa: E402

pytestmark = pytest.mark.slow          # runs the paper's demos as sweep tasks


def _flag(flags, name):
    return flags[flags.index(name) + 1]


def test_tasks_reproduce_the_demos_trials():
    from tigradsim.scenes.rigid_contact import NAMES, draw
    from tigradsim.scenes.rigid_push import SHAPES, draw_masses
    tasks = pt.make_tasks(["sysid_rigid_mass", "sysid_rigid_contact", "control_fem", "sysid_fem"],
                          ["image", "state"], seeds=[3, 4], trials=3)
    mass = [t for t in tasks if t["name"] == "sysid_rigid_mass"]
    assert len(mass) == 2 * 3 * 2                               # seeds x trials x supervisions
    for seed in (3, 4):
        rng = np.random.default_rng(seed)                       # what demos/sysid_rigid_mass.py --seed draws
        for k in range(3):
            true, init = draw_masses(rng)
            for t in (t for t in mass if t["seed"] == seed and t["trial"] == k):
                f = t["flags"]
                assert float(_flag(f, "--true-mass")) == true and float(_flag(f, "--init-mass")) == init
                assert _flag(f, "--shape") == SHAPES[k] and _flag(f, "--trials") == "1"
    rng = np.random.default_rng(4)
    for k in range(3):
        true, init = draw(rng)
        (t,) = [t for t in tasks if t["name"] == "sysid_rigid_contact" and t["seed"] == 4 and t["trial"] == k
                and t["supervision"] == "state"]
        assert all(float(_flag(t["flags"], f"--true-{n}")) == true[n] for n in NAMES)
        assert all(float(_flag(t["flags"], f"--init-{n}")) == init[n] for n in NAMES)
    # control: one target per task, seed s's targets s*3 .. s*3+2 (seed 0: the demo's default targets)
    ctl = sorted(int(_flag(t["flags"], "--seed")) for t in tasks if t["name"] == "control_fem"
                 and t["supervision"] == "image")
    assert ctl == [9, 10, 11, 12, 13, 14]
    # the FEM demo draws inside its scene: one task per seed runs all its trials
    fem = [t for t in tasks if t["name"] == "sysid_fem"]
    assert len(fem) == 2 * 2 and all(t["trial"] is None and _flag(t["flags"], "--trials") == "3" for t in fem)


def test_aggregate_means_over_trials_and_std_over_seeds():
    def res(seed, trial, err, trials=1):
        return {"name": "sysid_rigid_mass", "supervision": "image", "seed": seed, "trial": trial, "trials": trials,
                "rel_err": {"mass": err}, "rel_err_initial": {"mass": 0.5}, "iters": 60, "seconds": 2.0,
                "peak_mem_mb": 100.0 + seed, "per_trial": [{"rel_err": err}], "flags": "x"}

    done = [res(0, 0, 1.0), res(0, 1, 3.0), res(1, 0, 6.0), res(1, 1, 6.0),
            {"name": "sysid_rigid_mass", "supervision": "image", "seed": 2, "trial": 0, "error": "exit 1: boom"}]
    entry = pt.aggregate(done, wall=12.3)
    assert entry["rel_err"]["mass"] == pytest.approx(4.0)                      # over every trial of every seed
    assert entry["rel_err_per_seed"] == {"0": {"mass": 2.0}, "1": {"mass": 6.0}}
    assert entry["rel_err_std_over_seeds"]["mass"] == pytest.approx(2.0)       # std of (2, 6)
    assert entry["trials"] == 4 and entry["seeds"] == [0, 1] and entry["seconds"] == 8.0
    assert entry["peak_mem_mb"] == 101.0 and entry["failed_tasks"] == [{"seed": 2, "trial": 0, "error": "exit 1: boom"}]
    assert pt.cell(entry, "rel_err", "mass") == "4 ± 2 (2 seeds)"
    # a per-seed task holding 3 trials weighs 3 times a one-trial task
    entry = pt.aggregate([res(0, None, 1.0, trials=3), res(1, 0, 5.0)], wall=1.0)
    assert entry["rel_err"]["mass"] == pytest.approx((3 * 1.0 + 5.0) / 4) and entry["trials"] == 4
    assert "error" in pt.aggregate(done[-1:], wall=1.0)


def test_sweep_on_local_ray(tmp_path):
    """Eight tasks on an embedded local Ray of 2 workers (the --dry-run runner: no demo runs, so this
    takes seconds): every task runs once, in Ray's worker processes, with one progress line each."""
    ray = pytest.importorskip("ray")
    tasks = pt.make_tasks(["sysid_rigid_mass"], ["image", "state"], seeds=[0, 1], trials=2)
    lines, merged = [], []
    done = pt.sweep(tasks, workers=2, runner=pt.dry_run_task, printer=lines.append,
                    on_result=lambda res, so_far: merged.append(len(so_far)))
    assert not ray.is_initialized()                     # the embedded Ray started here is shut down
    assert len(done) == len(tasks) == 8 and merged == list(range(1, 9))
    key = lambda r: (r["supervision"], r["seed"], r["trial"])   # noqa: E731
    assert sorted(map(key, done)) == sorted(map(key, tasks))
    assert {r["pid"] for r in done}.isdisjoint({os.getpid()})   # run by Ray workers, not this process
    # each of the 2 workers' demos gets its share of the cores (unless the user set TI_CPU_MAX_NUM_THREADS)
    if "TI_CPU_MAX_NUM_THREADS" not in os.environ:
        share = str(max(1, (os.cpu_count() or 1) // min(os.cpu_count() or 1, 2)))
        assert {r["taichi_threads"] for r in done} == {share}
    progress = [ln for ln in lines if ln.startswith("[")]
    assert len(progress) == 8 and progress[-1].startswith("[8/8")
    for r in done:
        (t,) = [t for t in tasks if key(t) == key(r)]
        assert r["command"].endswith(" ".join(t["flags"]))
    # the same tasks without Ray: the same commands
    seq = pt.sweep(tasks, use_ray=False, runner=pt.dry_run_task, printer=lambda line: None)
    assert sorted((key(r), r["command"]) for r in seq) == sorted((key(r), r["command"]) for r in done)
    assert all(r["pid"] == os.getpid() for r in seq)
    json.dumps(done)                                    # results are plain JSON for paper_tables.json
