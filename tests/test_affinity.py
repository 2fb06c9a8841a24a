"""Taichi's CPU worker threads pinned one per CPU (`tigradsim.core.affinity`, `init(pin_threads=...)`)."""
import os
import sys
import threading
import time

import numpy as np
import pytest

import tigradsim as tgs
from tigradsim.core import affinity

linux_two_cpus = pytest.mark.skipif(
    not sys.platform.startswith("linux") or not hasattr(os, "sched_getaffinity")
    or len(os.sched_getaffinity(0)) < 2, reason="needs Linux and at least 2 CPUs this process may use")


def _all_cpus():
    return set(os.sched_getaffinity(0))


# one worker per CPU this process may use: the only case `init` pins (see affinity.pin_workers)
NCPU = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 1


@linux_two_cpus
def test_workers_pinned_one_per_cpu():
    tgs.init(cpu_max_num_threads=NCPU, pin_threads=True)
    info = tgs.pinned_threads()
    assert info["reason"] == ""
    pinned = info["pinned"]
    assert len(pinned) == NCPU
    assert len(set(pinned.values())) == NCPU                   # distinct CPUs
    assert set(pinned.values()) <= _all_cpus()
    threads = affinity.thread_ids()
    for tid, cpu in pinned.items():
        assert tid in threads
        assert os.sched_getaffinity(tid) == {cpu}
    # the thread that called init (here the main thread) is not touched
    assert threading.get_native_id() not in pinned
    assert os.sched_getaffinity(0) == _all_cpus()
    tgs.init()                                                 # the default again: nothing pinned
    assert tgs.pinned_threads()["pinned"] == {}


@linux_two_cpus
def test_the_pinned_threads_are_the_ones_that_run_parallel_loops():
    tgs.init(cpu_max_num_threads=NCPU, pin_threads="auto")
    pinned = tgs.pinned_threads()["pinned"]
    assert len(pinned) == NCPU, tgs.pinned_threads()
    others = affinity.thread_ids() - set(pinned)
    before = {t: affinity._runs(t) for t in affinity.thread_ids()}
    out = np.zeros(64)
    for _ in range(10):
        affinity._burn(out)
        time.sleep(1e-3)
    woke = {t: affinity._runs(t) - before[t] for t in before if affinity._runs(t) is not None}
    assert all(woke[t] >= 5 for t in pinned), woke
    assert all(woke[t] < 5 for t in others if t in woke and t != os.getpid()), woke
    tgs.init()


@linux_two_cpus
def test_unpinned_by_default_and_one_thread_pins_nothing():
    before = affinity.thread_ids()
    tgs.init(cpu_max_num_threads=2)
    assert tgs.pinned_threads() == {"pinned": {}, "reason": "init(pin_threads=False), the default"}
    # the threads this init started (a program an earlier test kept alive may keep its own)
    new = affinity.thread_ids() - before
    assert len(new) >= 2
    assert all(os.sched_getaffinity(t) == _all_cpus() for t in new)
    tgs.init(cpu_max_num_threads=1, pin_threads="auto")
    info = tgs.pinned_threads()
    assert info["pinned"] == {} and "1 worker thread" in info["reason"]
    with pytest.raises(RuntimeError, match="pin_threads=True.*1 worker thread"):
        tgs.init(cpu_max_num_threads=1, pin_threads=True)
    tgs.init()


def test_more_workers_than_cpus_are_left_to_the_scheduler():
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 1
    tgs.init(cpu_max_num_threads=cpus + 1, pin_threads="auto")
    info = tgs.pinned_threads()
    assert info["pinned"] == {}
    assert "left to the scheduler" in info["reason"] or "sched_setaffinity" in info["reason"]
    tgs.init()


def test_fewer_workers_than_cpus_are_left_to_the_scheduler(monkeypatch):
    """Pinned, every process would take the same first CPUs: so only a process whose CPU set has as
    many CPUs as workers (Taichi's default, or taskset) pins."""
    tgs.init(cpu_max_num_threads=2)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1, 2, 3})
    affinity.pin_workers(set(), 2, required=False)
    info = tgs.pinned_threads()
    assert info["pinned"] == {} and "2 worker threads for 4 CPUs" in info["reason"] and "taskset" in info["reason"]
    with pytest.raises(RuntimeError, match="2 worker threads for 4 CPUs"):
        affinity.pin_workers(set(), 2, required=True)
    monkeypatch.undo()
    tgs.init()


def test_workers_that_cannot_be_told_apart_are_not_pinned(monkeypatch):
    tgs.init(cpu_max_num_threads=2, pin_threads=False)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1})     # 2 workers, 2 CPUs
    with pytest.raises(RuntimeError, match="cannot be pinned: found 0 candidate threads for 2 workers"):
        affinity.pin_workers(set(), 2, required=True)
    affinity.pin_workers(set(), 2, required=False)
    assert tgs.pinned_threads() == {"pinned": {}, "reason": "found 0 candidate threads for 2 workers"}
    monkeypatch.undo()
    tgs.init()


def test_bad_pin_threads_value():
    with pytest.raises(ValueError, match="pin_threads='yes' is not one of 'auto', True, False"):
        tgs.init(pin_threads="yes")


@linux_two_cpus
def test_pinning_changes_no_result_bit():
    """A cloth on the parts path (every element loop on both threads), pinned and not: the same bits."""
    out = []
    for pin in (True, False):
        tgs.init(precision="f64", scatter="parts", cpu_max_num_threads=NCPU, pin_threads=pin)
        b = tgs.SceneBuilder()
        v, f = tgs.meshes.cloth_grid(12, 12, cell=0.05, origin=(0.0, 0.5, 0.0), plane="xz")
        b.add_cloth(v, f, params={"mu": 10.0, "lam": 20.0}, density=1.0, bending_stiffness=1e-4,
                    velocity=np.tile([0.1, -0.5, 0.0], (len(v), 1)))
        model = b.finalize()
        assert any(getattr(t, "path", None) == "parts" for t in model.force_terms)
        sim = tgs.Simulator(model, dt=1e-3, steps=20)
        sim.run()
        out.append(sim.state.particle_q.to_numpy()[-1])
    assert np.array_equal(out[0], out[1])
    tgs.init()
