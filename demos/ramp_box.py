"""A box slides down a ramp onto the ground, with a few particles beside it: a plane collider tilted by
--angle with its own friction --mu (`SceneBuilder.add_collider`; the scene: `tigradsim.scenes.ramp_slide`).

On the ramp the box's centre accelerates at g (sin - mu cos) (every bottom corner slides at the Coulomb cap);
on the ground (friction --ground-mu) it stops.  With a display a window plays the rollout at real time and
loops until closed (Esc/q; --no-wait plays it once); without one (or with --headless) the frames go to --out
as PNGs and a GIF.  The last stdout line is JSON with `steps`, `seconds`, `acceleration` (measured on the ramp
[m/s^2]), `analytic` (g (sin - mu cos)), `accel_rel_err`, `final_x` (the box's centre at the end [m]; > 0:
on the ground), `gif` and the parameters; with the fit (default; --no-fit skips it): `fit` = {truth, guess,
estimate, rel_err, loss_initial, loss_final, iters, seconds}: the ramp's mu identified from the box's rendered
silhouettes (64 px, a side camera), starting from --guess-factor x the truth (`tigradsim.scenes.ramp_slide`).

    python demos/ramp_box.py --headless --out out/ramp_box
"""
import argparse
import json

import numpy as np

import tigradsim as tgs
from tigradsim.scenes.ramp_slide import PARTICLE_RADIUS, RAMP_LENGTH, RampScene, fit_ramp_mu, ramp_frame
from tigradsim.io.viz import Animation, add_view_args, show


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--angle", type=float, default=25.0, help="ramp angle [degrees]")
    parser.add_argument("--mu", type=float, default=0.2, help="the ramp's Coulomb friction coefficient")
    parser.add_argument("--ground-mu", type=float, default=0.5, help="the ground's Coulomb friction coefficient")
    parser.add_argument("--mass", type=float, default=1.0, help="box mass [kg]")
    parser.add_argument("--particles", type=int, default=3, help="particles sliding beside the box")
    parser.add_argument("--steps", type=int, default=2500, help="steps of dt = 1 ms")
    parser.add_argument("--every", type=int, default=20, help="steps per shown frame")
    parser.add_argument("--quick", action="store_true", help="a short run (1200 steps; 5 fit iterations)")
    parser.add_argument("--no-fit", dest="fit", action="store_false", help="skip identifying mu from the frames")
    parser.add_argument("--guess-factor", type=float, default=1.6, help="the fit's initial mu: truth x this")
    parser.add_argument("--iters", type=int, default=12, help="quasi-Newton steps of the fit")
    parser.add_argument("--res", type=int, default=64, help="rendered silhouette size [px] of the fit")
    parser.add_argument("--arch", default="cpu")
    add_view_args(parser, out_default="out/ramp_box")
    args = parser.parse_args(argv)
    steps = 1200 if args.quick else args.steps

    tgs.init(arch=args.arch, precision="f64")
    scene = RampScene(args.angle, args.mu, mass=args.mass, ground_mu=args.ground_mu, particles=args.particles,
                      steps=steps, every=args.every, fit=args.fit, res=args.res)
    r = scene.run()
    fit = None
    if args.fit:
        fit = fit_ramp_mu(scene, args.mu * args.guess_factor, iters=5 if args.quick else args.iters)
        fit = {k: round(v, 6) if isinstance(v, float) else v for k, v in fit.items()}
    anim = Animation(r.frame_dt, eye=(0.3, 1.6, 4.2), target=(-0.4, 0.4, 0.0), ground=True, ground_extent=2.5)
    # the ramp (a plane collider) as a square from its foot RAMP_LENGTH up the slope, as the viewer draws colliders
    down = ramp_frame(scene.angle)[2]
    anim.colliders(scene.model, center=-down * RAMP_LENGTH / 2, extent=RAMP_LENGTH / 2)
    anim.mesh(r.vertices, r.faces)
    if r.particles.shape[1]:
        anim.particles(r.particles, radius=PARTICLE_RADIUS, color=0xD04040)
    anim.caption(lambda k: f"t = {k * r.frame_dt:.2f} s   ramp {args.angle:g} deg, mu {args.mu:g}")
    shown = show(anim, "ramp_box", args)
    err = abs(r.acceleration - r.analytic) / abs(r.analytic) if np.isfinite(r.acceleration) else None
    print(json.dumps(dict(steps=steps, seconds=round(r.seconds, 4), acceleration=round(r.acceleration, 4),
                          analytic=round(r.analytic, 4), accel_rel_err=None if err is None else round(err, 5),
                          final_x=round(r.final_x, 4), gif=shown["gif"], angle=args.angle, mu=args.mu,
                          ground_mu=args.ground_mu, mass=args.mass, particles=args.particles, fit=fit)))


if __name__ == "__main__":
    main()
