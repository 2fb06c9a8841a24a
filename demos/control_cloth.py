"""Throw a cloth so that it lands where a target image shows it (gradSim's cloth control).

A 20 x 10 cloth (cell 0.1 m, the paper's size) starts flat, 1.5 m above the ground, and flies
under gravity, aerodynamic drag and lift before landing and sliding to rest.  The control is its
initial velocity (one 3-vector for all particles), written into the initial state by a kernel
inside the same Tape as the rollout.  The target is an IMAGE of the flat cloth lying on the
ground, translated by a random x in [0, 3] m; the loss is the pixel MSE of the last rendered frame
against it (plus MSEs of blurred copies).  A coarse stage (the best of a grid of velocities by the
same loss, --grid 0 turns it off) chooses Adam's start.  The scene, why it is tuned so, and the
measurements: `tigradsim.scenes.control_cloth`.

Methods: gradsim (image loss), state (3D centre-of-mass loss), random (a random initial velocity,
each component uniform in [-3, 3] m/s; measured in every run).

    python demos/control_cloth.py                  # 5 seeds x 50 iterations (~4 min), then the viewer
    python demos/control_cloth.py --quick --headless --out out/control_cloth
    python demos/control_cloth.py --batch 1        # the 5 seeds at once: copies of one batched scene

With --batch 1 every seed is a copy of one batched Model (`tgs.batched`): one rollout and one Tape per
iteration train all of them, each with its own Adam, and each seed's result is the one it gets alone.

Writes loss.png and target_vs_final.gif under --out, then plays seed 0's final throw (blue) next
to the target (grey) in a window when a display exists (pictures under --out otherwise).
Last line: JSON with position_error (mean over seeds of the final centre-of-mass distance to the
target's) [m], position_mse (the paper's metric: mean over x, y, z of the squared difference),
the same for the random policy, iters, seeds, seconds, peak_mem_mb, steps, dt, res, per_seed
(with the learned velocity and the coarse stage's start), out.
"""
import argparse
import json
import time

import tigradsim as tgs
from tigradsim.scenes import control, control_cloth
from tigradsim.io.viz import add_view_args, show


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    control.add_flags(p, control_cloth.cloth_throw_task, control_cloth.CLOTH_FLAGS)
    add_view_args(p, out_default="out/control_cloth")
    args = p.parse_args(argv)
    settings = control_cloth.cloth_quick(vars(args)) if args.quick else vars(args)
    start = time.time()
    tgs.init(arch=args.arch, precision=args.precision, seed=args.seed)
    result, run = control.run_experiment(control_cloth.cloth_throw_task, settings, args.out, start=start)
    show(run.animation(), "control_cloth", args)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
