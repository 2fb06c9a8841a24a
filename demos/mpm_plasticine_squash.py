"""A rigid box squashing plasticine (MPM, von Mises; two-way coupled with the box; the scene:
`tigradsim.scenes.mpm_showcase.plasticine_squash`).

A 10 kg box is pressed with --press newtons onto a 0.15 m block of plasticine (yield stress --yield-stress Pa)
for 0.3 s, then released: the block flattens under it and stays flat (plastic flow), the box resting on top.
With a display a window plays the rollout (Esc/q closes it; --no-wait plays it once); without one (or with
--headless) the frames go to --out as PNGs and a GIF.  The last stdout line is JSON with `particles`, `steps`,
`seconds` (the rollout, compile included), `height_start`, `height_pressed` (the block's lowest top during
the press), `height_end` [m] (the top: the 95th-percentile particle height), `spring_back` (height_end -
height_pressed [m]), `widening` (the block's growth across [m]), `box_rest` (the box's bottom at the end [m])
and `gif`.

    python demos/mpm_plasticine_squash.py --headless --out out/mpm_plasticine_squash
    python demos/mpm_plasticine_squash.py --quick --headless --out out/mpm_plasticine_squash_quick
"""
import argparse
import json

import numpy as np

import tigradsim as tgs
from tigradsim.io.viz import Animation, add_view_args, show
from tigradsim.scenes.mpm_showcase import plasticine_squash


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--yield-stress", type=float, default=2e3, help="von Mises yield stress [Pa]")
    parser.add_argument("--press", type=float, default=300.0, help="downward force on the box [N] until 0.3 s")
    parser.add_argument("--resolution", type=int, default=24, help="grid cells along the 1 m domain")
    parser.add_argument("--steps", type=int, default=1200, help="steps of 0.4 ms")
    parser.add_argument("--quick", action="store_true", help="a short run (a 16-cell grid, 1000 steps)")
    parser.add_argument("--arch", default="cpu")
    add_view_args(parser, out_default="out/mpm_plasticine_squash")
    args = parser.parse_args(argv)
    resolution, steps = (16, 1000) if args.quick else (args.resolution, args.steps)

    tgs.init(arch=args.arch, precision="f32")
    scene = plasticine_squash(resolution=resolution, steps=steps, yield_stress=args.yield_stress, press=args.press)
    x, boxes, seconds = scene.run()
    top = np.percentile(x[:, :, 1], 95, axis=1)
    width = lambda k: float(np.percentile(x[k, :, 0], 99) - np.percentile(x[k, :, 0], 1))
    anim = Animation(scene.frame_dt, eye=(0.5, 0.7, 1.5), target=(0.5, 0.1, 0.5), ground=True, ground_extent=1.0)
    anim.mesh(boxes, scene.box[1], color=0x8090A0)
    anim.particles(x, radius=0.5 / (resolution * 2), color=0xC05070)
    anim.caption(lambda k: f"t = {k * scene.frame_dt:.2f} s   plasticine, yield {args.yield_stress:g} Pa"
                           + ("   pressed" if k * scene.frame_dt < 0.3 else ""))
    shown = show(anim, "mpm_plasticine_squash", args)
    print(json.dumps(dict(particles=int(x.shape[1]), steps=steps, seconds=round(seconds, 3),
                          height_start=round(float(top[0]), 4), height_pressed=round(float(top.min()), 4),
                          height_end=round(float(top[-1]), 4), spring_back=round(float(top[-1] - top.min()), 4),
                          widening=round(width(-1) - width(0), 4), box_rest=round(float(boxes[-1, :, 1].min()), 4),
                          gif=shown["gif"])))


if __name__ == "__main__":
    main()
