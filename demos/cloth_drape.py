"""A flag pinned at two corners, blowing in the wind (membrane + bending + drag/lift).

The cloth (the paper's 20 x 10 grid, cell 0.1 m) hangs from a pole at x = 0;
wind along +x (with a little +z) pushes it through the aerodynamic drag and lift
terms; the ground is at y = 0.  `--scene drop` instead drops a square cloth onto
the ground.  With a display it opens the Taichi GUI; with `--headless --out DIR`
(or no display) it writes PNG frames and a GIF.  Last line: JSON.

    python demos/cloth_drape.py --headless --out out/cloth_drape
    python demos/cloth_drape.py --material stvk_membrane --mu 80 --lam 40 --wind 6 0 1
"""
import argparse
import json
import time

import numpy as np

import tigradsim as tgs
from tigradsim.viz import Viewer


def build(args):
    b = tgs.SceneBuilder(gravity=(0.0, -9.8, 0.0))
    b.add_ground(ke=2e3, kd=2.0, kf=5.0, mu=0.5)
    params = {"mu": args.mu, "lam": args.lam}
    if args.scene == "flag":
        v, f = tgs.meshes.cloth_grid(args.nx, args.ny, cell=args.cell, origin=(0.0, 0.6, 0.0), plane="xy")
        pinned = [args.nx * 0, args.ny * (args.nx + 1)]          # bottom-left and top-left corners
        wind = args.wind
    else:
        n = args.nx
        v, f = tgs.meshes.cloth_grid(n, n, cell=args.cell, origin=(-0.5 * n * args.cell, 0.8, -0.5 * n * args.cell),
                                     plane="xz")
        v[:, 1] += 0.1 * np.sin(3.0 * v[:, 0]) * np.cos(2.0 * v[:, 2])   # a little wrinkled
        pinned, wind = None, (0.0, 0.0, 0.0)
    cloth = b.add_cloth(v, f, material=args.material, params=params, density=args.density, damping=args.damping,
                        bending_stiffness=args.bending, bending_damping=args.bending * 0.01, drag=args.drag,
                        lift=args.lift, wind=wind, pinned=pinned, radius=0.01)
    return b.finalize(requires_grad=False), cloth


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
    p.add_argument("--steps", type=int, default=2000, help="steps of --dt")
    p.add_argument("--dt", type=float, default=1e-3)
    p.add_argument("--every", type=int, default=40, help="steps per drawn frame")
    p.add_argument("--arch", default="cpu")
    p.add_argument("--headless", action="store_true", help="write files instead of opening a window")
    p.add_argument("--out", default="out/cloth_drape", help="folder for frames and the GIF")
    args = p.parse_args(argv)

    start = time.time()
    tgs.init(arch=args.arch, precision="f32")
    model, cloth = build(args)
    sim = tgs.Simulator(model, dt=args.dt, steps=args.steps)
    rec = tgs.ParticleRecorder(sim, every=args.every, indices=cloth.particles)
    t0 = time.time()
    sim.run()
    sim_seconds = time.time() - t0
    frames = rec.numpy()
    faces = cloth.faces - cloth.particle_start
    eye, target = ((1.0, 1.2, 3.2), (1.0, 0.7, 0.0)) if args.scene == "flag" else ((0.0, 1.6, 3.0), (0.0, 0.3, 0.0))
    viewer = Viewer("cloth_drape", headless=args.headless or None, out_dir=args.out, eye=eye, target=target)
    for k in range(len(frames)):
        if not viewer.running:
            break
        viewer.ground()
        if args.scene == "flag":
            viewer.segments(np.array([[0.0, 0.0, 0.0]]), np.array([[0.0, 0.6 + args.ny * args.cell + 0.1, 0.0]]),
                            radius=2.0, color=0x505050)
        viewer.triangles(frames[k], faces, color=0xD05040 if args.scene == "flag" else 0x60A0E0)
        viewer.text(f"t = {k * args.every * args.dt:.2f} s   {args.material}")
        viewer.show()
    gif = viewer.close(fps=25)
    last = frames[-1]
    print(json.dumps({
        "scene": args.scene, "material": args.material, "particles": model.particle_count,
        "triangles": cloth.triangle_count, "bending_edges": cloth.edge_count, "steps": args.steps,
        "sim_seconds": round(sim_seconds, 2), "seconds": round(time.time() - start, 2),
        "final_bbox_min": [round(float(x), 3) for x in last.min(0)],
        "final_bbox_max": [round(float(x), 3) for x in last.max(0)],
        "finite": bool(np.all(np.isfinite(frames))), "gif": gif,
    }))


if __name__ == "__main__":
    main()
