"""A flag pinned at two corners, blowing in the wind (membrane + bending + drag/lift).

The cloth (the paper's 20 x 10 grid, cell 0.1 m) hangs from a pole at x = 0;
wind along +x (with a little +z) pushes it through the aerodynamic drag and lift
terms; the ground is at y = 0.  `--scene drop` instead drops a square cloth onto
the ground.  With a display it opens the viewer (until closed; `--no-wait` plays
once); with `--headless` (or no display) it writes PNG frames and a GIF to `--out`.
The scene: `tigradsim.scenes.cloth_drape`.  Last line: JSON.

    python demos/cloth_drape.py --headless --out out/cloth_drape
    python demos/cloth_drape.py --material stvk_membrane --mu 80 --lam 40 --wind 6 0 1
"""
import argparse
import json
import time

import numpy as np

import tigradsim as tgs
from tigradsim.scenes import cloth_drape
from tigradsim.io.viz import Animation, add_view_args, show


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--scene", choices=["flag", "drop"], default="flag")
    p.add_argument("--material", default="membrane", help=f"shell material ({', '.join(tgs.list_materials('shell'))})")
    p.add_argument("--mu", type=float, default=60.0, help="membrane mu [N/m]")
    p.add_argument("--lam", type=float, default=80.0, help="membrane lam [N/m]")
    p.add_argument("--damping", type=float, default=0.05, help="membrane damping on dF/dt")
    p.add_argument("--density", type=float, default=0.25, help="mass per area [kg/m^2]")
    p.add_argument("--bending", type=float, default=2e-3, help="bending stiffness per edge [N m/rad^2]")
    p.add_argument("--drag", type=float, default=1.0, help="drag coefficient")
    p.add_argument("--lift", type=float, default=0.6, help="lift coefficient")
    p.add_argument("--wind", type=float, nargs=3, default=(5.0, 0.0, 1.0), help="wind velocity [m/s] (flag)")
    p.add_argument("--nx", type=int, default=20)
    p.add_argument("--ny", type=int, default=10)
    p.add_argument("--cell", type=float, default=0.1, help="grid cell [m]")
    p.add_argument("--steps", type=int, default=4000, help="steps of --dt")
    p.add_argument("--dt", type=float, default=5e-4, help="time step [s] (0.28 of the membrane's explicit limit)")
    p.add_argument("--every", type=int, default=80, help="steps per drawn frame")
    p.add_argument("--arch", default="cpu")
    add_view_args(p, out_default="out/cloth_drape")
    args = p.parse_args(argv)

    start = time.time()
    tgs.init(arch=args.arch, precision="f32")
    model, cl = cloth_drape.drape(args.scene, args.material, args.mu, args.lam, args.damping, args.density, args.bending,
                            args.drag, args.lift, args.wind, args.nx, args.ny, args.cell)
    frames, sim_seconds = cloth_drape.simulate(model, cl, dt=args.dt, steps=args.steps, every=args.every)

    eye, target = cloth_drape.DRAPE_VIEW[args.scene]
    anim = Animation(args.every * args.dt, eye=eye, target=target)
    if args.scene == "flag":     # the pole
        anim.segments(np.array([[0.0, 0.0, 0.0], [0.0, 0.6 + args.ny * args.cell + 0.1, 0.0]]), [[0, 1]],
                      color=0x505050)
    anim.mesh(frames, cl.faces - cl.particle_start, color=0xD05040 if args.scene == "flag" else 0x60A0E0)
    anim.caption(lambda k: f"t = {k * args.every * args.dt:.2f} s   {args.material}")
    shown = show(anim, "cloth_drape", args)
    last = frames[-1]
    print(json.dumps({
        "scene": args.scene, "material": args.material, "particles": model.particle_count,
        "triangles": cl.triangle_count, "bending_edges": cl.edge_count, "steps": args.steps,
        "sim_seconds": round(sim_seconds, 2), "seconds": round(time.time() - start, 2),
        "final_bbox_min": [round(float(x), 3) for x in last.min(0)],
        "final_bbox_max": [round(float(x), 3) for x in last.max(0)],
        "finite": bool(np.all(np.isfinite(frames))), "gif": shown["gif"],
    }))


if __name__ == "__main__":
    main()
