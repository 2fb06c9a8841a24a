"""A towel dropped over a soft ball: cloth against a FEM body (tigradsim/physics/cloth_soft_contact.py).

A square cloth falls onto a neo-Hookean ball standing on the ground (its bottom pinned); the cloth's vertices
touch the ball's boundary triangles and the ball's boundary vertices touch the cloth's triangles, both ways, so
the cloth drapes over the ball (which dents under it) instead of falling through.  With a display it opens the
viewer; with `--headless` (or no display) it writes PNG frames and a GIF to `--out`.  The scene:
`tigradsim.scenes.cloth_soft_drape`.  Last line: JSON.

    python demos/cloth_soft_drape.py --headless --out out/cloth_soft_drape
    python demos/cloth_soft_drape.py --quick --headless --out out/cloth_soft_drape     # a small, short run
    python demos/cloth_soft_drape.py --cells 64 --resolution 3 --prism-layers 2 --dt 2e-4 --steps 5000
                                                                    # 64 x 64 on 4,800 tets
"""
import argparse
import json
import time

import numpy as np

import tigradsim as tgs
from tigradsim.io.viz import Animation, add_view_args, show
from tigradsim.scenes import cloth_soft_drape


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--cells", type=int, default=32, help="cloth cells per side")
    p.add_argument("--resolution", type=int, default=3, help="the ball's icosphere level (tet_ball)")
    p.add_argument("--prism-layers", type=int, default=0, help="tet_ball's prism layers")
    p.add_argument("--youngs", type=float, default=5e3, help="the ball's Young's modulus [Pa]")
    p.add_argument("--steps", type=int, default=4000, help="steps of --dt")
    p.add_argument("--dt", type=float, default=2.5e-4,
                   help="time step [s] (the membrane's explicit limit falls with the cell: 64 cells need 2e-4)")
    p.add_argument("--every", type=int, default=100, help="steps per drawn frame")
    p.add_argument("--quick", action="store_true",
                   help="a short run: 20 x 20 cells, ball level 2, 1000 steps of 0.5 ms")
    p.add_argument("--arch", default="cpu")
    add_view_args(p, out_default="out/cloth_soft_drape")
    args = p.parse_args(argv)
    if args.quick:
        args.cells, args.resolution, args.prism_layers, args.steps, args.dt, args.every = 20, 2, 0, 1000, 5e-4, 50

    start = time.time()
    tgs.init(arch=args.arch, precision="f32")
    model, cloth, ball = cloth_soft_drape.towel_on_ball(args.cells, args.resolution, args.prism_layers, args.youngs,
                                                         dt=args.dt)
    frames, ball_frames, sim_seconds = cloth_soft_drape.simulate(model, cloth, ball, dt=args.dt, steps=args.steps,
                                                                 every=args.every)
    anim = Animation(args.every * args.dt, eye=cloth_soft_drape.VIEW[0], target=cloth_soft_drape.VIEW[1])
    anim.mesh(ball_frames, ball.faces - ball.particle_start, color=0x70C070)
    anim.mesh(frames, cloth.faces - cloth.particle_start, color=0xD05040)
    anim.caption(lambda k: f"t = {k * args.every * args.dt:.2f} s   cloth {args.cells}x{args.cells} on "
                           f"{ball.tet_count} tets")
    shown = show(anim, "cloth_soft_drape", args)
    last, ball_last = frames[-1], ball_frames[-1]
    centre = np.argmin(np.linalg.norm(frames[0][:, [0, 2]], axis=1))
    print(json.dumps({
        "cloth_vertices": cloth.particle_count, "tets": ball.tet_count, "steps": args.steps,
        "sim_seconds": round(sim_seconds, 2), "seconds": round(time.time() - start, 2),
        "ball_top": round(float(ball_last[:, 1].max()), 4), "cloth_centre_y": round(float(last[centre, 1]), 4),
        "cloth_lowest_y": round(float(last[:, 1].min()), 4),
        "finite": bool(np.all(np.isfinite(frames)) and np.all(np.isfinite(ball_frames))), "gif": shown["gif"],
    }))


if __name__ == "__main__":
    main()
