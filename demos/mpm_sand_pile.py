"""Sand poured onto a box (MPM, Drucker-Prager; two-way coupled with a free rigid box on the ground; the scene:
`tigradsim.scenes.mpm_showcase.sand_pile`).

A column of sand (friction angle --friction-angle degrees) falls onto an 8 kg box resting on the ground, heaps
on it, runs off its sides and spreads on the floor; the box carries the sand's weight through the MPM grid
(`tigradsim.physics.mpm_boundary`).  With a display a window plays the rollout (Esc/q closes it; --no-wait
plays it once); without one (or with --headless) the frames go to --out as PNGs and a GIF.  The last stdout
line is JSON with `particles`, `steps`, `seconds` (the rollout, compile included), `on_box` (the fraction of
the sand resting on the box's top), `heap_height` (the sand's 99th-percentile height above the box top [m]),
`floor_spread` (the 95th-percentile distance from the centre of the sand on the floor [m]), `box_sink` (how far
the box sank into its ground contact [m]) and `gif`.

    python demos/mpm_sand_pile.py --headless --out out/mpm_sand_pile
    python demos/mpm_sand_pile.py --quick --headless --out out/mpm_sand_pile_quick
"""
import argparse
import json

import numpy as np

import tigradsim as tgs
from tigradsim.io.viz import Animation, add_view_args, show
from tigradsim.scenes.mpm_showcase import sand_pile


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--friction-angle", type=float, default=35.0, help="Drucker-Prager friction angle [deg]")
    parser.add_argument("--resolution", type=int, default=24, help="grid cells along the 1 m domain")
    parser.add_argument("--steps", type=int, default=1500, help="steps of 0.5 ms")
    parser.add_argument("--quick", action="store_true", help="a short run (a 16-cell grid, 700 steps)")
    parser.add_argument("--arch", default="cpu")
    add_view_args(parser, out_default="out/mpm_sand_pile")
    args = parser.parse_args(argv)
    resolution, steps = (16, 700) if args.quick else (args.resolution, args.steps)

    tgs.init(arch=args.arch, precision="f32")
    scene = sand_pile(resolution=resolution, steps=steps, friction_angle=args.friction_angle)
    x, boxes, seconds = scene.run()
    top, half = scene.info["box_top"], scene.info["box_half"]
    last = x[-1]
    radial = np.linalg.norm(last[:, [0, 2]] - 0.5, axis=1)
    on_top = (np.abs(last[:, 0] - 0.5) < half) & (np.abs(last[:, 2] - 0.5) < half) & (last[:, 1] > top - 0.02)
    floor = last[:, 1] < top - 0.02
    heap = float(np.percentile(last[on_top, 1], 99) - top) if on_top.any() else 0.0
    anim = Animation(scene.frame_dt, eye=(0.5, 0.9, 1.9), target=(0.5, 0.2, 0.5), ground=True, ground_extent=1.0)
    anim.mesh(boxes, scene.box[1], color=0x8090A0)
    anim.particles(x, radius=0.5 / (resolution * 2), color=0xD8B060)
    anim.caption(lambda k: f"t = {k * scene.frame_dt:.2f} s   sand, friction angle {args.friction_angle:g} deg")
    shown = show(anim, "mpm_sand_pile", args)
    print(json.dumps(dict(particles=int(x.shape[1]), steps=steps, seconds=round(seconds, 3),
                          on_box=round(float(on_top.mean()), 4),
                          heap_height=round(heap, 4),
                          floor_spread=round(float(np.percentile(radial[floor], 95)) if floor.any() else 0.0, 4),
                          box_sink=round(float(-boxes[-1, :, 1].min()), 5), gif=shown["gif"])))


if __name__ == "__main__":
    main()
