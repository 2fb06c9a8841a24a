"""Throw a rigid box (or any closed OBJ mesh) onto the ground with spin: it
bounces, slides and comes to rest.

Contact stiffness ke, damping kd, friction regularisation kf and Coulomb mu are
the body's own (differentiable) parameters.  With a display the Taichi GUI
plays the rollout; without one (or with --headless) frames go to --out as PNGs
and a GIF.  The last stdout line is JSON with `steps`, `seconds`,
`bounce_height_ratio` (peak height after the first bounce over the drop
height, both above the resting height) and `slide_distance` (horizontal
travel of the centre of mass from first touch-down to rest).

    python demos/rigid_bounce.py --headless --out out/rigid_bounce
"""
import argparse
import json
import time

import numpy as np

import tigradsim as tgs
from tigradsim import meshes
from tigradsim.rigid import BodyRecorder, RigidSurface
from tigradsim.viz import Viewer


def build(args):
    if args.mesh:
        vertices, faces = meshes.load_obj(args.mesh)
        vertices = vertices - vertices.mean(0)
        vertices *= 0.3 / np.abs(vertices).max()            # about 0.6 m across
    else:
        vertices, faces = meshes.box_surface((0.4, 0.25, 0.3))
    b = tgs.SceneBuilder(gravity=(0.0, -9.8, 0.0))
    b.add_ground(ke=args.ke, kd=args.kd, kf=args.kf, mu=args.mu)
    tilt = np.array([0.2, 0.0, 0.25, 1.0])
    b.add_rigid_body(vertices, faces, mass=args.mass, position=(-1.2, 1.0, 0.0), rotation=tilt / np.linalg.norm(tilt),
                     velocity=(1.2, 1.0, 0.0), angular_velocity=(0.0, 2.0, 6.0))
    return b.finalize(requires_grad=False)


def metrics(positions, lowest):
    """bounce_height_ratio, slide_distance and the first-contact frame, from centre-of-mass
    positions (frames, 3) and the lowest mesh-vertex height per frame (frames,)."""
    y = positions[:, 1]
    rest = y[-1]
    touch = int(np.argmax(lowest <= 0.0))               # first frame in contact
    drop = y[:touch + 1].max() - rest                    # peak of the throw above the resting height
    bounce = (y[touch:].max() - rest) / drop if drop > 0 else 0.0
    slide = float(np.linalg.norm(positions[-1, [0, 2]] - positions[touch, [0, 2]]))
    return float(bounce), slide, touch


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
    parser.add_argument("--headless", action="store_true", help="write files instead of opening a window")
    parser.add_argument("--out", default="out/rigid_bounce", help="folder for PNG frames and the GIF")
    args = parser.parse_args(argv)

    tgs.init(arch=args.arch, precision="f32")
    model = build(args)
    sim = tgs.Simulator(model, dt=1e-3, steps=args.steps)
    surface = RigidSurface(sim, every=args.every)
    poses = BodyRecorder(sim, every=args.every)
    start = time.time()
    sim.run()
    seconds = time.time() - start
    positions = poses.numpy()[0][:, 0].astype(np.float64)
    verts = surface.numpy()
    bounce, slide, _ = metrics(positions, verts[:, :, 1].min(axis=1))
    speed = float(np.linalg.norm(sim.final_state("body_qd")[0]))

    viewer = Viewer("rigid_bounce", headless=args.headless or None, out_dir=args.out,
                    eye=(0.2, 2.0, 5.5), target=(0.2, 0.2, 0.0))
    for k in range(len(verts)):
        if not viewer.running:
            break
        viewer.ground(extent=2.5)
        viewer.triangles(verts[k], surface.faces)
        viewer.text(f"t = {k * args.every * sim.dt:.2f} s")
        viewer.show()
    gif = viewer.close(fps=max(1, int(round(1.0 / (args.every * sim.dt)))))
    print(json.dumps(dict(steps=args.steps, seconds=round(seconds, 4), bounce_height_ratio=round(bounce, 4),
                          slide_distance=round(slide, 4), final_speed=round(speed, 5), gif=gif,
                          mass=args.mass, ke=args.ke, kd=args.kd, kf=args.kf, mu=args.mu)))


if __name__ == "__main__":
    main()
