"""Visuomotor control of a soft gear from pixels (gradSim's FEM control experiment).

A gear-shaped soft body (1,152 tets) stands on the ground like a wheel and is pushed off at
1.5 m/s.  Every tet's activation at every step comes from a linear + tanh policy of sinusoid
phase inputs, evaluated in Taichi inside the same Tape as the rollout; Adam trains it through the
renderer and the FEM simulation so that the last frame matches a target IMAGE (the gear at rest,
translated by a random x).  The scene, its tuning and measurements:
`tigradsim.scenes.control_fem.gear_task`; the protocol: `tigradsim.scenes.control`.

Methods (--method): gradsim (image loss), state (3D centre-of-mass loss, the paper's
"physics-only" baseline), random (random activations each step, the paper's random policy).  The
random policy's error is measured in every run.

    python demos/control_fem.py                    # 3 seeds x 30 iterations (~7 min), then the viewer
    python demos/control_fem.py --quick --headless --out out/control_fem

Writes loss.png and target_vs_final.gif under --out, then plays seed 0's final behaviour (blue)
next to the target pose (grey) in a window when a display exists (pictures under --out otherwise).
Last line: JSON with position_error (mean over seeds of the final centre-of-mass distance to the
target's) [m], position_mse (the paper's metric: mean over x, y, z of the squared difference),
the same for the random policy, iters, seeds, seconds, peak_mem_mb, steps, dt, tets, res,
per_seed, out.
"""
import argparse
import json
import time

import tigradsim as tgs
from tigradsim.scenes import control, control_fem
from tigradsim.io.viz import add_view_args, show


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    control.add_flags(p, control_fem.gear_task, control_fem.GEAR_FLAGS)
    add_view_args(p, out_default="out/control_fem")
    args = p.parse_args(argv)
    settings = control_fem.gear_quick(vars(args)) if args.quick else vars(args)
    start = time.time()
    tgs.init(arch=args.arch, precision=args.precision, seed=args.seed)
    result, run = control.run_experiment(control_fem.gear_task, settings, args.out, start=start)
    show(run.animation(), "control_fem", args)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
