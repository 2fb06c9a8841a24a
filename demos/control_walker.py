"""A soft walker that must move to where a goal image shows it (gradSim's walker).

The walker is a thin slab of tets in the xy plane (a body block on two legs, 0.1 m cells, 200
tets) standing on the ground with friction.  Each tet's activation at every step comes from a
linear + tanh policy of sinusoid phase inputs (starting from the zero policy), evaluated in Taichi
inside the Tape of the rollout.  The goal is an IMAGE of the walker at rest, translated by a
random x in [0.15, 0.4] m; the loss is the pixel MSE of the last rendered frame (plus blurred
copies, 2 and 6 px), and Adam trains the policy through the renderer and the FEM simulation.
Methods: gradsim (image), state (3D centre of mass), random (random activations each step, the
paper's random policy; measured in every run).  The scene, what makes it trainable and the
measurements: `tigradsim.scenes.control_fem.walker_task`.

    python demos/control_walker.py                 # 6 seeds x 30 iterations (~3 min), then the viewer
    python demos/control_walker.py --quick --headless --out out/control_walker

Writes loss.png and target_vs_final.gif under --out, then plays seed 0's final behaviour (blue)
next to the goal pose (grey) in a window when a display exists (pictures under --out otherwise).
Last line: JSON with position_error (mean final centre-of-mass distance to the goal's) [m],
position_error_random, position_mse (the paper's metric), position_mse_random, iters, seeds,
seconds, peak_mem_mb, steps, dt, tets, res, per_seed, out.
"""
import argparse
import json
import time

import tigradsim as tgs
from tigradsim.scenes import control, control_fem
from tigradsim.io.viz import add_view_args, show


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    control.add_flags(p, control_fem.walker_task, control_fem.WALKER_FLAGS)
    add_view_args(p, out_default="out/control_walker")
    args = p.parse_args(argv)
    settings = control_fem.walker_quick(vars(args)) if args.quick else vars(args)
    start = time.time()
    tgs.init(arch=args.arch, precision=args.precision, seed=args.seed)
    result, run = control.run_experiment(control_fem.walker_task, settings, args.out, start=start)
    show(run.animation(), "control_walker", args)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
