"""A fluid splash (MPM, Newtonian; the scene: `tigradsim.scenes.mpm_showcase.fluid_splash`).

A 0.2 m cube of water-like fluid (viscosity --viscosity Pa s) is thrown down into a shallow pool beside a
static sphere (a collider met at the grid with "slip"): the pool splashes up and its wave runs round the
sphere.  With a display a window plays the rollout (Esc/q closes it; --no-wait plays it once); without one (or
with --headless) the frames go to --out as PNGs and a GIF.  The last stdout line is JSON with `particles`,
`steps`, `seconds` (the rollout, compile included), `splash_height` (the highest a pool particle rose above
the pool's surface [m]), `blob_spread` (how far the thrown fluid spread across, 5th to 95th percentile [m]),
`in_sphere` (the deepest any particle ended inside the sphere [m]) and `gif`.

    python demos/mpm_fluid_splash.py --headless --out out/mpm_fluid_splash
    python demos/mpm_fluid_splash.py --quick --headless --out out/mpm_fluid_splash_quick
"""
import argparse
import json

import numpy as np

import tigradsim as tgs
from tigradsim.io.viz import Animation, add_view_args, show
from tigradsim.scenes.mpm_showcase import fluid_splash


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--viscosity", type=float, default=0.05, help="dynamic viscosity [Pa s]")
    parser.add_argument("--resolution", type=int, default=24, help="grid cells along the 1 m domain")
    parser.add_argument("--steps", type=int, default=1000, help="steps of 0.4 ms")
    parser.add_argument("--quick", action="store_true", help="a short run (a 16-cell grid, 800 steps)")
    parser.add_argument("--arch", default="cpu")
    add_view_args(parser, out_default="out/mpm_fluid_splash")
    args = parser.parse_args(argv)
    resolution, steps = (16, 800) if args.quick else (args.resolution, args.steps)

    tgs.init(arch=args.arch, precision="f32")
    scene = fluid_splash(resolution=resolution, steps=steps, viscosity=args.viscosity)
    x, _, seconds = scene.run()
    start, count = scene.info["pool"]
    pool, blob = x[:, start:start + count], x[:, start + count:]
    centre, radius = scene.info["sphere"]
    anim = Animation(scene.frame_dt, eye=(0.5, 0.5, 1.9), target=(0.5, 0.1, 0.5), ground=True, ground_extent=1.0)
    anim.colliders(scene.model, color=0x8090A0)  # the sphere, as the viewer draws every collider
    anim.particles(pool, radius=0.5 / (resolution * 2), color=0x3070C0)
    anim.particles(blob, radius=0.5 / (resolution * 2), color=0x60C0F0)
    anim.caption(lambda k: f"t = {k * scene.frame_dt:.2f} s   Newtonian fluid, viscosity {args.viscosity:g} Pa s")
    shown = show(anim, "mpm_fluid_splash", args)
    depth_in = radius - np.linalg.norm(x[-1] - centre, axis=1)
    print(json.dumps(dict(particles=int(x.shape[1]), steps=steps, seconds=round(seconds, 3),
                          splash_height=round(float(pool[:, :, 1].max() - scene.info["pool_depth"]), 4),
                          blob_spread=round(float(np.percentile(blob[-1, :, 0], 95)
                                                  - np.percentile(blob[-1, :, 0], 5)), 4),
                          in_sphere=round(float(max(depth_in.max(), 0.0)), 4), gif=shown["gif"])))


if __name__ == "__main__":
    main()
