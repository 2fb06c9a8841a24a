"""Throw a 3D mass-spring lattice so that its centre of mass lands on a target.

The optimiser (Adam) learns the initial velocity of every particle through the
differentiable rollout (springs + ground contact with friction); the scene is
`tigradsim.scenes.springs.LatticeThrow`.  With a display it shows the final throw
in the viewer (until closed; `--no-wait` plays once); with `--headless` (or no
display) it writes frames and a GIF; a loss-curve PNG always.  Last line: JSON.

    python demos/mass_spring.py --headless --out out/mass_spring
"""
import argparse
import json
import os
import time

import tigradsim as tgs
from tigradsim.io.plots import plot_loss
from tigradsim.scenes.springs import LatticeThrow
from tigradsim.io.viz import Animation, add_view_args, show


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--iters", type=int, default=40, help="optimisation iterations")
    parser.add_argument("--steps", type=int, default=800, help="simulation steps of dt = 1 ms")
    parser.add_argument("--n", type=int, default=5, help="particles per lattice edge")
    parser.add_argument("--lr", type=float, default=0.08, help="Adam learning rate [m/s]")
    parser.add_argument("--target", type=float, nargs=3, default=(1.2, 0.25, 0.4), help="target centre of mass [m]")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--arch", default="cpu")
    add_view_args(parser, out_default="out/mass_spring")
    args = parser.parse_args(argv)

    start = time.time()
    tgs.init(arch=args.arch, precision="f32", seed=args.seed)
    sc = LatticeThrow(n=args.n, steps=args.steps, target=args.target)
    history = sc.fit(iters=args.iters, lr=args.lr)
    os.makedirs(args.out, exist_ok=True)
    curve = plot_loss(history, os.path.join(args.out, "loss.png"), title="mass-spring throw: COM distance^2")

    frames = sc.rollout(every=20)            # the final throw
    anim = Animation(20 * sc.sim.dt, eye=(0.6, 1.2, 3.2), target=(0.6, 0.2, 0.2))
    anim.segments(frames, sc.springs, color=0x3070B0)
    anim.particles(frames, radius=0.01)
    anim.particles(sc.target[None], radius=0.03, color=0xD03030)
    anim.caption(lambda k: f"t = {k * 20e-3:.2f} s   loss {history.loss[-1]:.2e}")
    shown = show(anim, "mass_spring", args)
    print(json.dumps({
        "loss_initial": history.loss[0], "loss_final": history.loss[-1], "iters": args.iters,
        "final_com": [round(float(x), 4) for x in sc.final_com()], "target": list(args.target),
        "particles": sc.model.particle_count, "springs": sc.model.spring_count, "steps": args.steps,
        "seconds": round(time.time() - start, 2), "gif": shown["gif"], "loss_plot": curve,
    }))


if __name__ == "__main__":
    main()
