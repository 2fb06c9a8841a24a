"""Tetrahedral FEM (stable neo-Hookean) + ground contact: time per step, forward
and forward+backward, tet-steps per second and peak memory, per scene.

    python benchmarks/bench_fem.py [--arch cpu] [--precision f32] [--scenes ball,box16,box32] [--scatter auto]
                                   [--threads N]
    python benchmarks/bench_fem.py --threads-compare [--scenes box32] [--rounds 5] [--paths parts]

Scenes: the paper's ball (tet_ball, ~430-640 tets, 3840 steps at 1/1920 s,
checkpointed every 64 steps), tet_box grids of 16x8x8 cells (5,120 tets) and
32x16x16 cells (40,960 tets), 200 steps of 1 ms.  Each scene runs in its own
process so that peak RSS is its own.  Prints one JSON object per scene.

No ratios against figures from another run: compare with Warp side by side in one
run with benchmarks/vs_warp.py (same grids, dt, steps and laws).  The ball's one
reference figure (gradSim's dflex, which cannot be installed here) is printed as
recorded, with its date, and never divided into.

--threads-compare times, in ONE process and alternating round by round (so that load on the
machine hits all alike), the serial path on 1 and 2 threads and each of --paths (element loops on
both cores: "parts" (default), "parallel") on 2 and 1 threads, best of --rounds, with the load average.  Each
configuration needs its own `tgs.init`, so every round rebuilds each scene (kernels come from
Taichi's offline cache).  Prints one JSON line per scene: us per step [forward, forward+backward]
per configuration, and the speedups of each path on 2 threads over the serial path.
"""
import argparse
import json
import os
import time

import numpy as np

from _harness import PIN_THREADS, add_pin_threads_argument, run_child, time_rollout

# dflex (gradSim's engine) forward time per step of the ball, recorded on 2026-12-02 on this
# machine, another day's load: a label, not a live comparison.
DFLEX_RECORDED = {"ball": {"dflex_forward_us_recorded_2026_12_02": 104.0}}


def build(scene, tgs):
    b = tgs.SceneBuilder()
    b.add_ground(ke=1e4, kd=1.0, kf=10.0, mu=0.5)
    if scene == "ball":
        mesh = tgs.meshes.tet_ball(1.0, resolution=2, center=(0.0, 1.5, 0.0))
        b.add_soft_mesh(mesh, params={"mu": 1e3, "lam": 1e3, "damping": 0.1}, density=10.0, velocity=(1.0, 0.0, 0.0))
        return b.finalize(), 1 / 1920, 3840, 64
    n = {"box16": 16, "box32": 32}[scene]
    mesh = tgs.meshes.tet_box(n, n // 2, n // 2, size=(2.0, 1.0, 1.0), origin=(0.0, 0.2, 0.0))
    b.add_soft_mesh(mesh, params={"mu": 1e4, "lam": 1e4, "damping": 0.05}, density=1000.0, velocity=(0.5, -1.0, 0.0))
    return b.finalize(), 1e-3, 200, None


def run_scene(scene, arch, precision, scatter="auto", threads=None, pin_threads="auto"):
    import taichi as ti
    import tigradsim as tgs
    tgs.init(arch=arch, precision=precision, scatter=scatter, pin_threads=PIN_THREADS[pin_threads],
             **({"cpu_max_num_threads": threads} if threads else {}))
    model, dt, steps, ck = build(scene, tgs)
    sim = tgs.Simulator(model, dt=dt, steps=steps, checkpoint_every=ck)
    com = tgs.CenterOfMassRecorder(sim, every=steps)
    loss = tgs.MSELoss(com.com, np.zeros((2, 3)))
    timing = time_rollout(sim, loss)
    fwd = timing["us_per_step_forward"] * 1e-6
    fwd_bwd = timing["us_per_step_forward_backward"] * 1e-6
    out = {
        "scene": scene, "scatter": scatter, "threads": ti.lang.impl.current_cfg().cpu_max_num_threads,
        "serial": tgs.runtime.serial_scatter(), "particles": model.particle_count, "tets": model.tet_count, "steps": steps, "dt": dt,
        "checkpoint_every": ck, **timing,
        "tet_steps_per_s_forward": round(model.tet_count / fwd),
        "tet_steps_per_s_forward_backward": round(model.tet_count / fwd_bwd),
        "grad_norm_mu_lam": float(np.linalg.norm(model.tet_params.grad.to_numpy())),
    }
    out.update(DFLEX_RECORDED.get(scene, {}))
    return out


def fem_timer(scene, tgs):
    """A function timing one forward and one forward+backward pass of `scene` (seconds per step);
    compiled (one untimed pass of each) before it is returned."""
    import taichi as ti
    model, dt, steps, ck = build(scene, tgs)
    sim = tgs.Simulator(model, dt=dt, steps=steps, checkpoint_every=ck)
    com = tgs.CenterOfMassRecorder(sim, every=steps)
    loss = tgs.MSELoss(com.com, np.zeros((2, 3)))

    def forward():
        sim.run()
        loss()

    def once():
        out = []
        for taped in (False, True):
            ti.sync()
            t0 = time.perf_counter()
            if taped:
                with ti.ad.Tape(loss.value):
                    forward()
            else:
                forward()
            ti.sync()
            out.append((time.perf_counter() - t0) / steps)
        return out

    once()
    return once


def threads_compare(make_timer, precision, paths, rounds, label, pin_threads="auto"):
    """Alternate (serial, 1 thread), (serial, 2), and (path, 2), (path, 1) for each path, `rounds`
    times, in this process; `make_timer(tgs)` builds the scene after `tgs.init` and returns a
    function giving (forward, forward+backward) seconds per step.  Returns the best of the rounds
    (us per step) per configuration, the 1-minute load average before each round, and each path's
    speedup on 2 threads over the serial path on 1 and on 2 threads."""
    import tigradsim as tgs
    configs = [("serial", 1), ("serial", 2)] + [(p, t) for p in paths for t in (2, 1)]
    best = {c: [float("inf"), float("inf")] for c in configs}
    loads = []
    for _ in range(rounds):
        loads.append(round(os.getloadavg()[0], 2))
        for scatter, threads in configs:
            tgs.init(precision=precision, scatter=scatter, cpu_max_num_threads=threads,
                     pin_threads=PIN_THREADS[pin_threads])
            fwd, fwd_bwd = make_timer(tgs)()
            best[(scatter, threads)] = [min(best[(scatter, threads)][0], fwd), min(best[(scatter, threads)][1], fwd_bwd)]
    us = {f"{s}_{t}thread": [round(v * 1e6, 1) for v in best[(s, t)]] for s, t in configs}
    out = {"scene": label, "precision": precision, "rounds": rounds, "load_1min_per_round": loads,
           "pin_threads": pin_threads,
           "us_per_step_fwd_fwdbwd": us}
    for p in paths:
        for ref in (1, 2):
            out[f"{p}_2thread_speedup_over_serial_{ref}thread"] = [
                round(a / b, 2) for a, b in zip(best[("serial", ref)], best[(p, 2)])]
    return out


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--arch", default="cpu")
    parser.add_argument("--precision", default="f32")
    parser.add_argument("--scenes", default="ball,box16,box32")
    parser.add_argument("--scatter", choices=("auto", "parallel", "serial", "parts"), default="auto",
                        help="element loops: serial plain adds, parallel atomics, or both cores without "
                             "atomics (parts) (tgs.init)")
    parser.add_argument("--threads", type=int, default=None, help="CPU threads (ti.init cpu_max_num_threads)")
    parser.add_argument("--threads-compare", action="store_true",
                        help="serial vs --paths on 1 and 2 threads, alternating in one process (see above)")
    parser.add_argument("--paths", default="parts", help="paths for --threads-compare, comma-separated")
    parser.add_argument("--rounds", type=int, default=5, help="rounds for --threads-compare (best of)")
    add_pin_threads_argument(parser)
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(run_scene(args.child, args.arch, args.precision, args.scatter, args.threads, args.pin_threads)))
        return
    if args.threads_compare:
        for scene in args.scenes.split(","):
            print(json.dumps(threads_compare(lambda tgs: fem_timer(scene, tgs), args.precision,
                                             args.paths.split(","), args.rounds, label=scene,
                                             pin_threads=args.pin_threads)), flush=True)
        return
    for scene in args.scenes.split(","):
        try:
            result = run_child(__file__, [scene, "--arch", args.arch, "--precision", args.precision, "--scatter",
                                          args.scatter, "--pin-threads", args.pin_threads]
                               + (["--threads", args.threads] if args.threads else []))
        except RuntimeError as exc:
            result = {"scene": scene, "error": str(exc).strip().splitlines()[-1]}
        print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
