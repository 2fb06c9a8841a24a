"""Compile time and run time with Taichi's IR optimisation passes on (the default) and off.

    python benchmarks/compile_time.py [--steps 600] [--fuse both|fused|per-step]

The scene: tests/test_rigid_implicit_damping.py's box resting on a box on the ground (ground, body-body
and edge-edge contact, implicit damping), float64, the Tape of a loss on the body positions and surface
vertices.  Each configuration runs in its own process with an empty kernel cache, so its first Tape
compiles every kernel; the second Tape is timed warm.  The two settings run side by side in this one run.
Prints one JSON object: per setting, seconds to build and run the forward pass (compiling it), the first
Tape (compiling the reverse kernels), a warm Tape, and the body masses' gradient (the same to round-off).

Why: Taichi's store-forwarding pass replaces each use of a value by walking the whole kernel, so a big
fused contact step spends minutes there; `tgs.init(advanced_optimization=False)` (or the environment
variable TI_ADVANCED_OPTIMIZATION=0) skips Taichi's passes and leaves the optimising to LLVM.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def child(steps, fuse, optimized):
    sys.path.insert(0, os.path.join(HERE, "..", "tests"))
    import taichi as ti
    import tigradsim as tgs
    from test_rigid_implicit_damping import _box_on_box_implicit
    from touch_tracks import touch_loss
    tgs.init(arch="cpu", precision="f64", advanced_optimization=optimized)
    t0 = time.perf_counter()
    model, _ = _box_on_box_implicit(steps)
    sim = tgs.Simulator(model, dt=1e-3, steps=steps, fuse_steps=None if fuse == "fused" else False)
    run, total = touch_loss(sim, 2, 15, seed=1)
    t1 = time.perf_counter()
    with ti.ad.Tape(total):
        run()
    t2 = time.perf_counter()
    with ti.ad.Tape(total):
        run()
    t3 = time.perf_counter()
    print(json.dumps(dict(forward_with_compile_s=round(t1 - t0, 2), first_tape_s=round(t2 - t1, 2),
                          warm_tape_s=round(t3 - t2, 4), fused=sim.fused, loss=total[None],
                          body_mass_grad=model.parameters()["body_mass"].grad.to_numpy().tolist())))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=600)
    ap.add_argument("--fuse", choices=["both", "fused", "per-step"], default="fused")
    ap.add_argument("--child", nargs=2, metavar=("FUSE", "OPTIMIZED"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        return child(args.steps, args.child[0], args.child[1] == "1")
    results = []
    for fuse in (["fused", "per-step"] if args.fuse == "both" else [args.fuse]):
        for optimized in (True, False):
            with tempfile.TemporaryDirectory() as cache:
                env = dict(os.environ, TI_OFFLINE_CACHE_FILE_PATH=cache)
                env.pop("TI_ADVANCED_OPTIMIZATION", None)
                out = subprocess.run([sys.executable, __file__, "--steps", str(args.steps), "--child", fuse,
                                      str(int(optimized))], env=env, capture_output=True, text=True, check=True)
            row = json.loads(out.stdout.strip().splitlines()[-1])
            results.append(dict(fuse=fuse, taichi_ir_passes=optimized, **row))
            print(f"{fuse:8s} passes {'on ' if optimized else 'off'}: first Tape {row['first_tape_s']:7.1f} s, "
                  f"warm Tape {row['warm_tape_s']:.3f} s", file=sys.stderr)
    print(json.dumps(dict(steps=args.steps, results=results)))


if __name__ == "__main__":
    main()
