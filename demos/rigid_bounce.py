"""Throw a rigid box (or any closed OBJ mesh) onto the ground with spin: it bounces, slides and comes
to rest.

Contact stiffness ke, damping kd, friction regularisation kf and Coulomb mu are the body's own
(differentiable) parameters (the scene: `tigradsim.scenes.rigid_bounce`).  With a display a window
plays the rollout at real time and loops until closed (Esc/q; --no-wait plays it once); without one
(or with --headless) the frames go to --out as PNGs and a GIF.  The last stdout line is JSON with
`steps`, `seconds`, `bounce_height_ratio` (peak height after the first bounce over the drop height,
both above the resting height), `slide_distance` (horizontal travel of the centre of mass from first
touch-down to rest), `final_speed` and `gif`.

    python demos/rigid_bounce.py --headless --out out/rigid_bounce
"""
import argparse
import json

import tigradsim as tgs
from tigradsim.scenes.rigid_bounce import BounceScene
from tigradsim.io.viz import Animation, add_view_args, show


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mesh", default=None, help="closed, outward-oriented OBJ mesh (default: a box)")
    parser.add_argument("--mass", type=float, default=1.0, help="body mass [kg]")
    parser.add_argument("--ke", type=float, default=1e4, help="contact stiffness [N/m]")
    parser.add_argument("--kd", type=float, default=10.0, help="contact damping [N s/m]")
    parser.add_argument("--kf", type=float, default=10.0, help="friction regularisation [N s/m]")
    parser.add_argument("--mu", type=float, default=0.5, help="Coulomb friction coefficient")
    parser.add_argument("--steps", type=int, default=4000, help="steps of dt = 1 ms")
    parser.add_argument("--every", type=int, default=20, help="steps per shown frame")
    parser.add_argument("--arch", default="cpu")
    add_view_args(parser, out_default="out/rigid_bounce")
    args = parser.parse_args(argv)

    tgs.init(arch=args.arch, precision="f32")
    scene = BounceScene(args.mesh, mass=args.mass, ke=args.ke, kd=args.kd, kf=args.kf, mu=args.mu, steps=args.steps,
                        every=args.every)
    r = scene.run()
    anim = Animation(r.frame_dt, eye=(0.2, 2.0, 5.5), target=(0.2, 0.2, 0.0), ground=True, ground_extent=2.5)
    anim.mesh(r.vertices, r.faces)
    anim.caption(lambda k: f"t = {k * r.frame_dt:.2f} s")
    shown = show(anim, "rigid_bounce", args)
    print(json.dumps(dict(steps=args.steps, seconds=round(r.seconds, 4),
                          bounce_height_ratio=round(r.bounce_height_ratio, 4),
                          slide_distance=round(r.slide_distance, 4), final_speed=round(r.final_speed, 5),
                          gif=shown["gif"], mass=args.mass, ke=args.ke, kd=args.kd, kf=args.kf, mu=args.mu)))


if __name__ == "__main__":
    main()
