"""A cloth dropped over a ball: a square cloth (membrane + bending) falls onto a static sphere collider standing on
the ground (`SceneBuilder.add_collider("sphere", ...)`), rests on its top and drapes down around it; its edges
reach the ground.  The scene: `tigradsim.scenes.cloth_sphere`.

With a display a window plays the rollout at real time and loops until closed (Esc/q; --no-wait plays it once);
without one (or with --headless) the frames go to --out as PNGs and a GIF.  The last stdout line is JSON with
`steps`, `seconds` (the rollout's wall time), `particles`, `triangles`, `min_y` / `max_y` (the cloth's lowest and
highest point at the end [m]), `on_sphere` / `on_ground` (the share of its particles resting on each at the end),
`finite`, `gif` and the parameters.

    python demos/cloth_sphere.py --headless --out out/cloth_sphere
"""
import argparse
import json

import tigradsim as tgs
from tigradsim.scenes.cloth_sphere import VIEW, ClothSphere
from tigradsim.io.viz import Animation, add_view_args, show


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nx", type=int, default=16, help="cloth cells per side")
    parser.add_argument("--side", type=float, default=1.2, help="cloth side [m]")
    parser.add_argument("--radius", type=float, default=0.3, help="sphere radius [m]")
    parser.add_argument("--height", type=float, default=0.75, help="the cloth's starting height [m]")
    parser.add_argument("--mu", type=float, default=60.0, help="membrane mu [N/m]")
    parser.add_argument("--lam", type=float, default=80.0, help="membrane lam [N/m]")
    parser.add_argument("--bending", type=float, default=3e-4, help="bending stiffness per edge [N m/rad^2]")
    parser.add_argument("--steps", type=int, default=3000, help="steps of dt = 0.5 ms")
    parser.add_argument("--every", type=int, default=40, help="steps per shown frame")
    parser.add_argument("--quick", action="store_true", help="a short run (1200 steps)")
    parser.add_argument("--arch", default="cpu")
    add_view_args(parser, out_default="out/cloth_sphere")
    args = parser.parse_args(argv)
    steps = 1200 if args.quick else args.steps

    tgs.init(arch=args.arch, precision="f32")
    scene = ClothSphere(steps=steps, dt=5e-4, every=args.every, nx=args.nx, side=args.side, height=args.height,
                        radius=args.radius, mu=args.mu, lam=args.lam, bending=args.bending)
    frames, seconds = scene.run()
    frame_dt = args.every * scene.sim.dt
    anim = Animation(frame_dt, eye=VIEW[0], target=VIEW[1], ground=True, ground_extent=1.5)
    anim.colliders(scene.model)                  # the sphere, as the viewer draws every collider
    anim.mesh(frames, scene.faces, color=0x60A0E0)
    anim.caption(lambda k: f"t = {k * frame_dt:.2f} s   cloth over a ball")
    shown = show(anim, "cloth_sphere", args)
    print(json.dumps(dict(steps=steps, seconds=round(seconds, 3), particles=int(frames.shape[1]),
                          triangles=int(len(scene.faces)), **scene.summary(frames), gif=shown["gif"], nx=args.nx,
                          side=args.side, radius=args.radius, mu=args.mu, lam=args.lam, bending=args.bending)))


if __name__ == "__main__":
    main()
