"""Rigid boxes dropped onto the ground: microseconds per step, forward and
forward + backward, for 1, 16 and 64 boxes over 1,920 steps of dt = 1/960 s.

    python benchmarks/bench_rigid.py [--steps 1920] [--counts 1 16 64] [--arch cpu] [--precision f32]

Forward: a model without gradients (like dflex's untaped forward).  Taped:
the forward inside `ti.ad.Tape` (requires_grad model) and the backward pass,
timed separately.  Best of --repeat runs after a compile run.  On a small CPU
the steps between frames run as one kernel launch (`Simulator(fuse_steps=None)`);
--compare also times one launch per step and prints the ratios.  Printed for
reference only, never divided into (another day's run): gradSim's dflex, as
recorded in the issue on 2026-12-02, one box 7 us forward, 69 + 109 us taped
forward + backward; 64 boxes 119 us forward, 216 + 396 us.  Warp side by side:
benchmarks/vs_warp.py.  Prints one JSON object.
"""
import argparse
import json
import time

import numpy as np

DFLEX_RECORDED_2026_12_02 = {1: dict(forward_us=7, taped_forward_us=69, backward_us=109),
             64: dict(forward_us=119, taped_forward_us=216, backward_us=396)}


def build(count, requires_grad):
    import tigradsim as tgs
    from tigradsim import meshes
    b = tgs.SceneBuilder()
    b.add_ground(ke=1e4, kd=10.0, kf=10.0, mu=0.5)
    v, f = meshes.box_surface((0.2, 0.2, 0.2))
    side = int(np.ceil(np.sqrt(count)))
    rng = np.random.default_rng(0)
    for k in range(count):
        q = rng.normal(size=4)
        b.add_rigid_body(v, f, density=100.0, position=(0.5 * (k % side), 0.4 + 0.05 * k / count, 0.5 * (k // side)),
                         rotation=q / np.linalg.norm(q), velocity=(0.5, 0.0, 0.2), angular_velocity=(1.0, 2.0, 0.5))
    return b.finalize(requires_grad=requires_grad)


def bench(count, steps, dt, repeat, fuse_steps=None):
    import taichi as ti
    import tigradsim as tgs
    from tigradsim.physics.rigid import BodyRecorder

    model = build(count, requires_grad=False)
    sim = tgs.Simulator(model, dt=dt, steps=steps, fuse_steps=fuse_steps)
    sim.run()
    ti.sync()
    forward = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        sim.run()
        ti.sync()
        forward.append(time.perf_counter() - t0)

    model = build(count, requires_grad=True)
    sim = tgs.Simulator(model, dt=dt, steps=steps, fuse_steps=fuse_steps)
    rec = BodyRecorder(sim, every=steps)
    loss = tgs.MSELoss(rec.positions, np.zeros((rec.frames, count, 3)))

    def run():
        loss.value[None] = 0
        sim.run()
        loss()

    taped, backward = [], []
    for k in range(repeat + 1):
        t0 = time.perf_counter()
        with ti.ad.Tape(loss.value):
            run()
            ti.sync()
            t1 = time.perf_counter()
        ti.sync()
        t2 = time.perf_counter()
        if k:                                   # the first one compiles
            taped.append(t1 - t0)
            backward.append(t2 - t1)
    us = 1e6 / steps
    out = dict(bodies=count, fused_steps=sim.fused, contact_points=int(model.contact_point_count), steps=steps,
               forward_us=round(min(forward) * us, 2), taped_forward_us=round(min(taped) * us, 2),
               backward_us=round(min(backward) * us, 2))
    out["forward_backward_us"] = round(out["taped_forward_us"] + out["backward_us"], 2)
    if count in DFLEX_RECORDED_2026_12_02:
        out["dflex_us_recorded_2026_12_02"] = DFLEX_RECORDED_2026_12_02[count]
    return out


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=1920)
    parser.add_argument("--counts", type=int, nargs="+", default=[1, 16, 64])
    parser.add_argument("--dt", type=float, default=1.0 / 960)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--arch", default="cpu")
    parser.add_argument("--precision", default="f32")
    parser.add_argument("--compare", action="store_true", help="also time one kernel launch per step")
    args = parser.parse_args(argv)
    import taichi as ti
    import tigradsim as tgs
    tgs.init(arch=args.arch, precision=args.precision)
    results = [bench(c, args.steps, args.dt, args.repeat) for c in args.counts]
    if args.compare:
        for r in results:
            step = bench(r["bodies"], args.steps, args.dt, args.repeat, fuse_steps=False)
            r["stepwise"] = {k: step[k] for k in ("forward_us", "taped_forward_us", "backward_us", "forward_backward_us")}
            r["stepwise_over_default"] = {k: round(step[k] / r[k], 2) for k in r["stepwise"]}
    print(json.dumps(dict(arch=args.arch, precision=args.precision, dt=args.dt, threads=ti.lang.impl.get_runtime()
                          .prog.config().cpu_max_num_threads if args.arch == "cpu" else None, results=results)))


if __name__ == "__main__":
    main()
