"""A jelly cube of MPM matter dropped on the floor (MLS-MPM, neo-Hookean; the scene: `tigradsim.scenes.mpm_jelly`),
then its Young's modulus identified from the soft-splat silhouettes of one camera (`renderers.ParticleSplatter`),
starting from --guess-factor x the truth.

With a display a window plays the rollout (Esc/q closes it; --no-wait plays it once); without one (or with
--headless) the frames go to --out as PNGs and a GIF.  The last stdout line is JSON with `particles`, `steps`,
`seconds` (the rollout), `bounce_height` (the centre's highest point after the first touchdown [m]),
`final_height` (the centre at the end [m]), `gif`, `E`, `nu`, and `fit` (null with --no-fit): {truth, guess,
estimate, rel_err, loss_initial, loss_final, iters, seconds}.

    python demos/mpm_jelly.py --headless --out out/mpm_jelly
"""
import argparse
import json

import numpy as np

import tigradsim as tgs
from tigradsim.io.viz import Animation, add_view_args, show
from tigradsim.scenes.mpm_jelly import JellyScene, fit_youngs_modulus


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--E", type=float, default=2e4, help="Young's modulus [Pa]")
    parser.add_argument("--nu", type=float, default=0.3, help="Poisson's ratio")
    parser.add_argument("--resolution", type=int, default=16, help="grid cells along the 1 m domain")
    parser.add_argument("--steps", type=int, default=600, help="steps of 1 ms")
    parser.add_argument("--quick", action="store_true", help="a short run (300 steps, a 12-cell grid, 4 fit steps)")
    parser.add_argument("--no-fit", dest="fit", action="store_false", help="skip identifying E from the frames")
    parser.add_argument("--guess-factor", type=float, default=2.0, help="the fit's initial E: truth x this")
    parser.add_argument("--iters", type=int, default=8, help="quasi-Newton steps of the fit")
    parser.add_argument("--arch", default="cpu")
    add_view_args(parser, out_default="out/mpm_jelly")
    args = parser.parse_args(argv)
    steps = 300 if args.quick else args.steps
    resolution = 12 if args.quick else args.resolution

    tgs.init(arch=args.arch, precision="f64")
    scene = JellyScene(E=args.E, nu=args.nu, resolution=resolution, steps=steps, requires_grad=args.fit)
    x, target, seconds = scene.run()
    height = x[:, :, 1].mean(axis=1)
    low = int(np.argmin(height[: max(2, len(height) // 2)]))
    fit = None
    if args.fit:
        fit = fit_youngs_modulus(scene, target, args.E * args.guess_factor, iters=4 if args.quick else args.iters)
        fit = {k: round(v, 6) if isinstance(v, float) else v for k, v in fit.items()}
    anim = Animation(scene.every * scene.dt, eye=(0.5, 0.8, 2.2), target=(0.5, 0.25, 0.5), ground=True,
                     ground_extent=1.0)
    anim.particles(x, radius=0.5 / (resolution * 2), color=0x40A0E0)
    anim.caption(lambda k: f"t = {k * scene.every * scene.dt:.2f} s   jelly E {args.E:g} Pa, nu {args.nu:g}")
    shown = show(anim, "mpm_jelly", args)
    print(json.dumps(dict(particles=int(x.shape[1]), steps=steps, seconds=round(seconds, 4),
                          bounce_height=round(float(height[low:].max()), 4), final_height=round(float(height[-1]), 4),
                          gif=shown["gif"], E=args.E, nu=args.nu, fit=fit)))


if __name__ == "__main__":
    main()
