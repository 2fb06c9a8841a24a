"""Broad phase scaling: time per step, forward and forward+backward, of piles of 64, 256 and 1024 boxes dropped
into a bin, with the flat loops (every (contact point, body) pair for the corners, every box pair for the crossed
edges) and with the grid broad phase (`tigradsim.physics.broadphase`, both terms' pairs).

The scene is vs_warp.py's pile64 grown: 0.1 m boxes (density 100, random orientations, seed 1) on a lattice of
side ceil(count^(1/3)), 0.18 m apart, dropped from 0.1 m up into a bin of four static box walls around the
lattice's footprint (+ 0.1 m), ground ke 1e4, kd 10, kf 10, mu 0.5 (the capped law); dt 1 ms, `--steps` steps
from the drop (the lower layers land within the first 100 steps, so most of the run has boxes on boxes).
Gradients: body_qd0 only (as vs_warp.py), loss = MSE of the body positions at the last step.

    python benchmarks/bench_broadphase.py [--counts 64,256,1024] [--steps 200] [--repeats 2] [--modes flat,grid]
    python benchmarks/bench_broadphase.py --quick      # 64 and 256 boxes, 100 steps, 1 repeat

Prints a JSON line per configuration as it is measured, then one JSON line with all of them (us per step; the
grid's pairs at the last step by term: BodyBodyContact (contact point, body), BoxEdgeContact (box, box);
first_pass_s / first_pass_cpu_s: wall and process CPU seconds of the first forward + taped pass, which compile
the configuration's kernels (a new (count, mode) compiles again: the fields' shapes are in the kernels); timings
only, no test asserts them).  Progress goes to stderr as it happens: the defaults' six configurations compile
six times, each about 100-115 CPU seconds on the 2-vCPU AMD VM (measured at 64 boxes, benchmarks/RESULTS.md), so
on a machine shared at load 30 (this process getting a tenth of a core) the first figure comes after ~20 minutes
of silence and the whole run takes hours; --quick compiles four.
"""
import argparse
import json
import sys
import time

import numpy as np

from _harness import time_rollout


def pile(count, mode, steps):
    import tigradsim as tgs
    from tigradsim.physics.rigid import BodyRecorder
    b = tgs.SceneBuilder()
    b.add_ground(ke=1e4, kd=10.0, kf=10.0, mu=0.5)
    v, f = tgs.meshes.box_surface((0.1, 0.1, 0.1))
    side = int(np.ceil(count ** (1 / 3)))
    rng = np.random.default_rng(1)
    for k in range(count):
        i, j, l = k % side, (k // side) % side, k // (side * side)
        q = rng.normal(size=4)
        b.add_rigid_body(v, f, density=100.0, position=(0.18 * (i - (side - 1) / 2), 0.1 + 0.18 * l,
                                                        0.18 * (j - (side - 1) / 2)), rotation=q / np.linalg.norm(q))
    half = 0.09 * side + 0.1                 # the bin's inner half width
    height = 0.2
    for x, z, hx, hz in ((half + 0.05, 0.0, 0.05, half + 0.1), (-half - 0.05, 0.0, 0.05, half + 0.1),
                         (0.0, half + 0.05, half, 0.05), (0.0, -half - 0.05, half, 0.05)):
        b.add_collider("box", (hx, height, hz), (x, height + 1e-3, z), ke=1e4, kd=10.0, kf=10.0, mu=0.5)
    b.broad_phase = mode
    model = b.finalize(requires_grad={"body_qd0"})
    sim = tgs.Simulator(model, dt=1e-3, steps=steps)
    rec = BodyRecorder(sim, steps)
    loss = tgs.MSELoss(rec.positions, np.zeros(rec.positions.shape + (3,)))
    return sim, loss


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--counts", default="64,256,1024")
    p.add_argument("--modes", default="flat,grid")
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--arch", default="cpu")
    p.add_argument("--precision", default="f32")
    p.add_argument("--quick", action="store_true", help="64 and 256 boxes, 100 steps, 1 repeat (overrides "
                                                            "--counts, --steps, --repeats)")
    args = p.parse_args()
    if args.quick:
        args.counts, args.steps, args.repeats = "64,256", 100, 1
    import taichi as ti
    import tigradsim as tgs
    tgs.init(arch=args.arch, precision=args.precision)
    rows = []
    for count in (int(c) for c in args.counts.split(",")):
        for mode in args.modes.split(","):
            t0, c0 = time.perf_counter(), time.process_time()
            sim, loss = pile(count, mode, args.steps)
            print(f"{count} boxes, {mode}: built in {time.perf_counter() - t0:.1f} s; compiling (first forward and "
                  "taped pass)", file=sys.stderr, flush=True)
            t1, c1 = time.perf_counter(), time.process_time()
            loss.value[None] = 0.0
            with ti.ad.Tape(loss.value):                # the first pass: compiles forward and backward kernels
                sim.run()
                loss()
            ti.sync()
            first = (round(time.perf_counter() - t1, 1), round(time.process_time() - c1, 1))
            print(f"{count} boxes, {mode}: first pass {first[0]} s wall, {first[1]} s CPU; timing "
                  f"{args.repeats} repeat(s)", file=sys.stderr, flush=True)
            t = time_rollout(sim, loss, repeats=args.repeats)
            pairs = {}
            for term in sim.force_terms:            # the last step's pairs (the backward pass left step 0's)
                if getattr(term, "broad", None) is not None:
                    term.broad.build(sim.state, args.steps, args.steps)
                    pairs[type(term).__name__] = int(term.broad.pair_count[None])
            row = {"boxes": count, "broad_phase": mode, "us_per_step_forward": t["us_per_step_forward"],
                   "us_per_step_forward_backward": t["us_per_step_forward_backward"],
                   "last_step_candidate_pairs": pairs or None, "first_pass_s": first[0],
                   "first_pass_cpu_s": first[1], "peak_rss_mb": t["peak_rss_mb"]}
            rows.append(row)
            print(json.dumps(row), flush=True)
    print(json.dumps({"benchmark": "broadphase", "arch": args.arch, "precision": args.precision,
                      "steps": args.steps, "rows": rows}))


if __name__ == "__main__":
    main()
