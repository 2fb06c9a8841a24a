"""Timing helpers shared by the benchmark scripts (not a test)."""
import json
import os
import subprocess
import sys
import time

from tigradsim.core.memory import peak_rss_mb


def time_rollout(sim, loss, repeats=2):
    """Best-of-`repeats` seconds per step of `sim.run(); loss()`, forward and under a Tape.

    Returns a dict with us_per_step_forward, us_per_step_forward_backward,
    state_fields_mb (state + checkpoints, gradients included) and peak_rss_mb.
    Compiles first (one untimed forward and one untimed taped pass).
    """
    import taichi as ti

    def forward():
        sim.run()
        loss()

    forward()
    with ti.ad.Tape(loss.value):
        forward()
    ti.sync()
    fwd, fwd_bwd = [], []
    for _ in range(repeats):
        t0 = time.perf_counter()
        forward()
        ti.sync()
        fwd.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        with ti.ad.Tape(loss.value):
            forward()
        ti.sync()
        fwd_bwd.append(time.perf_counter() - t0)
    state_mb = (sim.state.nbytes() + (sim.checkpoints.nbytes() if sim.checkpoints else 0)) / 2 ** 20
    return {
        "us_per_step_forward": round(min(fwd) / sim.steps * 1e6, 1),
        "us_per_step_forward_backward": round(min(fwd_bwd) / sim.steps * 1e6, 1),
        "state_fields_mb": round(state_mb, 1),
        "peak_rss_mb": round(peak_rss_mb(), 1),
    }


# --pin-threads: Taichi's CPU workers one per CPU (tgs.init(pin_threads=...), tigradsim.core.affinity).
# On by default here because a benchmark has the machine to itself; "off" for several at once.
PIN_THREADS = {"auto": "auto", "off": False}


def mpm_centroid_loss(sim, steps, axis):
    """The mean of the MPM particles' coordinate `axis` after `steps` steps (the rollout's last), as the loss
    `time_rollout` differentiates (observed once, at the end: the backward pass is the whole rollout's)."""
    import taichi as ti

    n = sim.model.mpm_particle_count

    @ti.data_oriented
    class Centroid:
        def __init__(self):
            self.value = ti.field(float, shape=(), needs_grad=True)

        @ti.kernel
        def observe(self, state: ti.template(), s: ti.i32):
            for i in range(n):
                self.value[None] += state.mpm_x[s, i][axis] / n

        def __call__(self):
            pass

    loss = Centroid()
    sim.observe(lambda state, slot, frame: loss.observe(state, slot), every=steps)
    return loss


def add_pin_threads_argument(parser):
    parser.add_argument("--pin-threads", choices=tuple(PIN_THREADS), default="auto",
                        help="pin Taichi's CPU worker threads one per CPU where possible (tgs.init(pin_threads=)); "
                             "off: leave them to the scheduler (several processes at once)")


def run_child(script, args):
    """Run `python script --child ARGS` in its own process (its own peak RSS); returns its last JSON line."""
    cmd = [sys.executable, script, "--child"] + [str(a) for a in args]
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def child_row(cmd, label, tail=3000):
    """Run `cmd` (a list) in its own process and return the dict of the first line it prints as "ROW {json}",
    or None, printing `label` and the tail of its stderr, when it printed none (a child that failed)."""
    out = subprocess.run(cmd, capture_output=True, text=True)
    got = [line[4:] for line in out.stdout.splitlines() if line.startswith("ROW ")]
    if not got:
        print(f"{label}: failed\n{out.stderr[-tail:]}", flush=True)
        return None
    return json.loads(got[0])


def child_rows(jobs, tail=3000):
    """`child_row` for each (cmd, label) of `jobs`, one process each in turn: the rows that came back, each printed
    as a JSON line as soon as it does (a long diagnosis shows its progress)."""
    rows = []
    for cmd, label in jobs:
        row = child_row(cmd, label, tail=tail)
        if row is not None:
            rows.append(row)
            print(json.dumps(row), flush=True)
    return rows


def load_json(path):
    """The JSON object stored at `path`, or {} when the file does not exist yet."""
    if os.path.exists(path):
        with open(path) as fh:
            return json.load(fh)
    return {}
