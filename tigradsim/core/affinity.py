"""Pin Taichi's CPU worker threads, one to each CPU the process may use.

Why: Taichi's CPU thread pool wakes its workers for every parallel loop (a struct-for or range-for
task) and puts them back to sleep after it.  Left to themselves, the workers of a loop split evenly
across two threads often ran on one CPU (what we believe happens: Linux wakes both on the CPU of the
thread that woke them, and the other CPU takes one only at its next load balance).  Pinning removes
most of those slow launches and shortens a two-thread simulation step by about a tenth (figures:
benchmarks/MEASURED.md, "Retired prototypes").  OpenMP runtimes offer the same, off by default (OMP_PROC_BIND), and so
does `init(pin_threads=...)`: where several processes share the CPUs (pytest -n 2, a process pool), a
pinned worker waits for the CPU another process holds instead of moving to a free one; the test suite
on 2 xdist workers ran more than twice as long with every process pinned.

How the workers are found: Taichi names no thread and exposes none, so `init` lists the process's
threads (/proc/self/task) before and after `ti.init`; of the threads `ti.init` started (the worker
pool and the compiler's threads), the workers are those that wake for the launches of a small
parallel kernel (`find_workers`; their counts in /proc/self/task/<tid>/schedstat).  Linux only;
elsewhere, or when the threads cannot be told apart, nothing is pinned and `pinned_threads()` says why.
It pins only when there are as many workers as CPUs the process may use (Taichi's default): with fewer,
every process would take the same first CPUs (to run several, give each its own CPUs with taskset).
Pinning changes where threads run, never what they compute: every result is the same bit for bit.
"""

import os
import threading
import time

import numpy as np
import taichi as ti

_TASK_DIR = "/proc/self/task"
# Finding the workers: BURN_LAUNCHES launches of a parallel kernel of BURN_TASKS_PER_THREAD small
# tasks per worker, BURN_PAUSE_S apart.  Every launch wakes every worker (Taichi's pool notifies them
# all), so each worker's count of runs on a CPU (schedstat's third field) grows by about one per
# launch, whoever ends up doing the tasks; the compiler's threads sleep through it.  The pause lets the
# workers go back to sleep (a worker still awake when the next launch comes is not counted again).
BURN_LAUNCHES = 12
BURN_PAUSE_S = 5e-4
BURN_TASKS_PER_THREAD = 4
BURN_ITERS = 500

_status = {"pinned": {}, "reason": "init has not run"}


def thread_ids() -> set:
    """Native ids of this process's threads (empty where /proc is not available)."""
    try:
        return {int(t) for t in os.listdir(_TASK_DIR)}
    except OSError:
        return set()


def _runs(tid):
    """How many times thread `tid` was put on a CPU (schedstat's third field); None once it is gone."""
    try:
        with open(f"{_TASK_DIR}/{tid}/schedstat") as f:
            return int(f.read().split()[2])
    except (OSError, ValueError, IndexError):
        return None


@ti.kernel
def _burn(out: ti.types.ndarray()):
    ti.loop_config(block_dim=1)          # one task per index
    for i in range(out.shape[0]):
        acc = 0.0
        for k in range(BURN_ITERS):
            acc += ti.sin(ti.cast(k + i, float) * 1e-3)
        out[i] = acc


def find_workers(candidates, threads: int):
    """(the `threads` ids among `candidates` that woke for the launches of a parallel kernel, "")
    or (None, why not)."""
    out = np.zeros(BURN_TASKS_PER_THREAD * threads, dtype=np.float64)
    _burn(out)                           # compiled (or loaded from the cache) before counting
    before = {t: _runs(t) for t in candidates}
    for _ in range(BURN_LAUNCHES):
        _burn(out)
        time.sleep(BURN_PAUSE_S)
    woke = {}
    for t, b in before.items():
        a = _runs(t)
        if a is not None and b is not None:
            woke[t] = a - b
    ranked = sorted(woke, key=woke.get, reverse=True)
    if len(ranked) < threads:
        unread = len(candidates) - len(ranked)
        return None, (f"found {len(ranked)} candidate threads for {threads} workers"
                      + (f" ({unread} without a readable schedstat)" if unread else ""))
    chosen, rest = ranked[:threads], ranked[threads:]
    # workers: about one run per launch; every other thread: a few at most (measured: 14 against 1-3)
    if min(woke[t] for t in chosen) < BURN_LAUNCHES // 2 or any(woke[t] > BURN_LAUNCHES // 4 for t in rest):
        return None, (f"could not tell the {threads} workers apart: runs per thread over {BURN_LAUNCHES} "
                      f"launches {sorted(woke.values(), reverse=True)}")
    return chosen, ""


def pin_workers(candidates, threads: int, required: bool):
    """Pin Taichi's `threads` workers (found among `candidates`, the thread ids `ti.init` started)
    one per allowed CPU, when there are exactly as many workers as CPUs this process may use (Taichi's
    default; with fewer, every process would pin to the same CPUs).  Records the outcome for
    `pinned_threads()`.  required: raise instead of recording why it could not be done."""
    def skip(reason):
        unpinned(reason)
        if required:
            raise RuntimeError(f"init: pin_threads=True, but the worker threads cannot be pinned: {reason}")

    if not hasattr(os, "sched_setaffinity"):
        return skip("this system has no os.sched_setaffinity")
    cpus = sorted(os.sched_getaffinity(0))
    if threads < 2:
        return skip(f"{threads} worker thread: nothing to spread")
    if threads != len(cpus):
        # more workers than CPUs: two would share one; fewer: every process would take the same first CPUs
        return skip(f"{threads} worker threads for {len(cpus)} CPUs: left to the scheduler (pinning needs one "
                    f"worker per CPU; to run several processes, give each its own CPUs with taskset)")
    candidates = set(candidates) - {threading.get_native_id()}
    workers, why = find_workers(candidates, threads)
    if workers is None:
        return skip(why)
    pinned = {}
    for k, tid in enumerate(sorted(workers)):
        try:
            os.sched_setaffinity(tid, {cpus[k]})
        except OSError as err:
            for t in pinned:                 # all or nothing
                try:
                    os.sched_setaffinity(t, set(cpus))
                except OSError:
                    pass
            return skip(f"sched_setaffinity({tid}, {{{cpus[k]}}}) failed: {err}")
        pinned[tid] = cpus[k]
    _status.update(pinned=pinned, reason="")


def unpinned(reason: str):
    """Record that `init` pinned nothing, and why."""
    _status.update(pinned={}, reason=reason)


def pinned_threads() -> dict:
    """{"pinned": {thread id: CPU}, "reason": why nothing was pinned ("" when pinned)} of the last `init`."""
    return {"pinned": dict(_status["pinned"]), "reason": _status["reason"]}
