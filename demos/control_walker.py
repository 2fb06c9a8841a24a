"""A soft walker that must move to where a goal image shows it (gradSim's walker).

The walker is a thin slab of tets in the xy plane (a body block on two legs,
`tigradsim.meshes_extra.tet_walker`, 0.1 m cells) standing on the ground with
friction.  Each tet's activation at every step comes from a linear + tanh
policy of 8 sinusoid phase inputs (`tigradsim.control.LinearTanhPolicy`),
evaluated in Taichi inside the Tape of the rollout.  The goal is an IMAGE of
the walker at rest, translated by a random x; the loss is the pixel MSE of
the last rendered frame (plus blurred copies).  Methods: gradsim (image),
state (3D centre of mass), random (random activations each step).

    python demos/control_walker.py --headless --out out/control_walker

Last line: JSON with position_error (mean final centre-of-mass distance to the
goal's), position_error_random, position_mse (the paper's metric), iters,
seeds, seconds.
"""
import argparse
import json
import os
import time

import tigradsim as tgs
from tigradsim.meshes_extra import tet_walker

from control_fem import FemControlTask, common_flags, run_experiment

DEFAULTS = dict(seeds=3, iters=20, lr=0.02, lr_decay=0.95, res=64, duration=2.0, dt=1 / 960, every=40,
                strength=0.15, frequency=6.0, velocity=[0.0, 0.0, 0.0], target_range=[0.15, 0.4],
                blur=[0.0, 2.0, 6.0], checkpoint=64, out="out/control_walker")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    common_flags(p, DEFAULTS)
    p.add_argument("--eye", type=float, nargs=3, default=[0.5, 0.8, 2.4])
    p.add_argument("--look-at", type=float, nargs=3, default=[0.5, 0.2, 0.0])
    p.add_argument("--fov", type=float, default=45.0)
    p.add_argument("--ground", type=float, nargs=3, default=[300.0, 2.0, 0.3], help="contact ke, kd, kf")
    args = p.parse_args(argv)
    if args.quick:
        args.seeds, args.iters, args.res = min(args.seeds, 1), min(args.iters, 10), min(args.res, 48)
        args.duration = min(args.duration, 1.5)
    start = time.time()
    tgs.init(arch=args.arch, precision=args.precision, seed=args.seed)
    os.makedirs(args.out, exist_ok=True)
    mesh = tet_walker(cell=0.1, depth=2, origin=(0.0, 0.011, -0.1))
    ke, kd, kf = args.ground
    task = FemControlTask(mesh, args, {"mu": 1e3, "lam": 1e3}, density=10.0, damping=0.5,
                          ground=dict(ke=ke, kd=kd, kf=kf, mu=0.8))
    print(json.dumps(run_experiment(args, task, "control_walker", start)))


if __name__ == "__main__":
    main()
