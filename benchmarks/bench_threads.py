"""How often a parallel loop really runs on every CPU: one struct-for of --parts equal parts of pure
arithmetic, launched --launches times, on 1 thread, on every thread with Taichi's workers left to the
scheduler, and on every thread with them pinned one per CPU (`tgs.init(pin_threads=True)`,
tigradsim.core.affinity).  Wall clock per launch (ms): best, median, mean, 90th percentile.

    python benchmarks/bench_threads.py [--parts 4] [--work 20000] [--launches 500] [--rounds 2]

The configurations alternate, --rounds times each (each needs its own `tgs.init`); every statistic is
the best of the rounds.  The last line is one JSON object:
{"parts", "work", "launches", "threads", "configs": {name: {"best_ms", "median_ms", "mean_ms", "p90_ms"}},
 "mean_speedup_unpinned", "mean_speedup_pinned"} (one thread's mean / that configuration's mean).

Measured on the shared 2-core machine (2026-12-04, defaults; best / median / mean / p90, ms): 1 thread
0.83 / 0.88 / 0.92 / 0.92, 2 threads 0.42 / 0.63 / 0.66 / 0.87, 2 threads pinned 0.42 / 0.48 / 0.49 /
0.52: mean speedup 1.40x unpinned, 1.90x pinned.  (The first measurement, a script with sin and cos per
step: 1.09 / 1.16 / 1.22 / 1.25, 0.56 / 0.87 / 0.91 / 1.18, pinned 0.52 / 0.57 / 0.62 / 0.69.)
"""
import argparse
import json
import os
import time

import numpy as np


def make_loop(parts, work):
    """A kernel running a struct-for over `parts` active cells, each `work` sin evaluations."""
    import taichi as ti
    cells = ti.field(ti.i32)
    ti.root.pointer(ti.i, parts).place(cells)
    sink = ti.field(float, shape=(parts, 16))        # one cache line per part: no false sharing

    @ti.kernel
    def activate():
        for p in range(parts):
            cells[p] = 1

    @ti.kernel
    def loop():
        for b in cells:                              # one CPU task per cell
            acc = 0.0
            for k in range(work):
                acc += ti.sin(ti.cast(k + b, float) * 1e-3)
            sink[b, 0] += acc

    activate()
    return loop


def time_config(threads, pin, parts, work, launches):
    """{"best_ms", "median_ms", "mean_ms", "p90_ms"} of `launches` launches after 10 untimed ones."""
    import taichi as ti
    import tigradsim as tgs
    tgs.init(precision="f32", cpu_max_num_threads=threads, pin_threads=pin)
    loop = make_loop(parts, work)
    for _ in range(10):
        loop()
    ti.sync()
    ms = []
    for _ in range(launches):
        t0 = time.perf_counter()
        loop()
        ti.sync()
        ms.append((time.perf_counter() - t0) * 1e3)
    ms = np.array(ms)
    return {"best_ms": float(ms.min()), "median_ms": float(np.median(ms)), "mean_ms": float(ms.mean()),
            "p90_ms": float(np.percentile(ms, 90)), "pinned": tgs.pinned_threads()}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--parts", type=int, default=4)
    ap.add_argument("--work", type=int, default=20000, help="sin evaluations per part")
    ap.add_argument("--launches", type=int, default=500)
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args(argv)
    for name in ("parts", "work", "launches", "rounds"):
        if getattr(args, name) < 1:
            ap.error(f"--{name} must be at least 1, got {getattr(args, name)}")
    threads = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    configs = {"1 thread": (1, False), f"{threads} threads": (threads, False),
               f"{threads} threads, pinned": (threads, "auto")}
    best = {}
    for r in range(args.rounds):
        for name, (t, pin) in configs.items():
            res = time_config(t, pin, args.parts, args.work, args.launches)
            why = res.pop("pinned")["reason"]
            if pin and why:
                print(f"{name}: not pinned ({why})")
            old = best.get(name, {k: float("inf") for k in res})
            best[name] = {k: min(old[k], v) for k, v in res.items()}
            print(f"round {r} {name:22s} " + " ".join(f"{k} {v:.3f}" for k, v in res.items()), flush=True)
    one = best["1 thread"]["mean_ms"]
    out = {"parts": args.parts, "work": args.work, "launches": args.launches, "threads": threads,
           "configs": {k: {m: round(v, 4) for m, v in d.items()} for k, d in best.items()},
           "mean_speedup_unpinned": round(one / best[f"{threads} threads"]["mean_ms"], 3),
           "mean_speedup_pinned": round(one / best[f"{threads} threads, pinned"]["mean_ms"], 3)}
    print(json.dumps(out))


if __name__ == "__main__":
    main()
