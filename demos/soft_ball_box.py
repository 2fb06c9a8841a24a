"""A soft ball (tetrahedral FEM) thrown at a box on the ground: it squashes against the box and knocks it away
(particle-body coupling with the reaction on the body, `tigradsim.physics.coupling`).

Every vertex of the ball touches the box's analytic shape (a box mesh gets the analytic box) with the box's
ke, kd, kf, mu; the box feels the opposite forces at the same points (force and torque).  With a display a
window plays the rollout (Esc/q; --no-wait plays it once); with --headless (or without a display) the frames
go to --out as PNGs and a GIF.  The last stdout line is JSON with `tets`, `steps`, `seconds` (the rollout's
wall time), `box_travel` (horizontal travel of the box's centre [m]), `box_tilt_deg` (the largest tilt of
the box [deg]), `ball_speed_after` (the ball's mean speed at the end [m/s]) and `gif`.

    python demos/soft_ball_box.py --headless --out out/soft_ball_box
    python demos/soft_ball_box.py --quick --headless --out out/soft_ball_box_quick
"""
import argparse
import json
import time

import numpy as np

import tigradsim as tgs
from tigradsim.core.geometry import boundary_faces
from tigradsim.io.viz import Animation, add_view_args, show

BOX = 0.25          # box side [m]
RADIUS = 0.1        # ball radius [m]
# contact constants of the ground and the box: a light vertex of the ball (density 1000: 5-20 g) stays within the
# safe fraction of its contact's explicit limit at dt = 1/1920 s (tigradsim.core.stability)
CONTACT = dict(ke=1.5e4, kd=1.0, kf=5.0, mu=0.5)


def build(speed, mu, lam, resolution):
    b = tgs.SceneBuilder()
    b.add_ground(**CONTACT)
    v, f = tgs.meshes.box_surface((BOX, BOX, BOX))
    b.add_rigid_body(v, f, density=250.0, position=(0.0, BOX / 2, 0.0), **CONTACT)
    bv, bt = tgs.meshes.tet_ball(radius=RADIUS, resolution=resolution, center=(-0.6, RADIUS + 0.12, 0.0))
    b.add_soft_mesh((bv, bt), params={"mu": mu, "lam": lam}, density=1000.0, damping=0.5,
                    velocity=(speed, 0.8, 0.0), radius=0.005)
    return b.finalize(requires_grad=False), boundary_faces(bt)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--speed", type=float, default=3.0, help="the ball's speed towards the box [m/s]")
    parser.add_argument("--mu", type=float, default=3e3, help="neo-Hookean mu [Pa]")
    parser.add_argument("--lam", type=float, default=3e3, help="neo-Hookean lambda [Pa]")
    parser.add_argument("--resolution", type=int, default=2, help="tet_ball resolution (2: 640 tets)")
    parser.add_argument("--steps", type=int, default=2400, help="steps of dt = 1/1920 s")
    parser.add_argument("--every", type=int, default=32, help="steps per shown frame")
    parser.add_argument("--quick", action="store_true", help="a short run (640 steps, resolution 1): the hit")
    parser.add_argument("--arch", default="cpu")
    add_view_args(parser, out_default="out/soft_ball_box")
    args = parser.parse_args(argv)
    steps, resolution = (640, 1) if args.quick else (args.steps, args.resolution)
    dt = 1.0 / 1920

    tgs.init(arch=args.arch, precision="f32")
    model, ball_faces = build(args.speed, args.mu, args.lam, resolution)
    sim = tgs.Simulator(model, dt=dt, steps=steps)
    t0 = time.perf_counter()
    sim.run()
    seconds = time.perf_counter() - t0
    q = sim.state.body_q.to_numpy().astype(np.float64)[:, 0]
    x = sim.state.particle_q.to_numpy().astype(np.float64)
    xd = sim.state.particle_qd.to_numpy().astype(np.float64)
    box_v, box_f = tgs.meshes.box_surface((BOX, BOX, BOX))
    frames = range(0, steps + 1, args.every)
    box_frames = np.array([q[k, :3] + box_v @ tgs.rigid.quat_to_matrix_np(q[k, 3:]).T for k in frames])
    up = np.array([tgs.rigid.quat_to_matrix_np(r)[:, 1] for r in q[:, 3:]])
    anim = Animation(args.every * dt, eye=(-0.2, 1.0, 2.6), target=(-0.1, 0.2, 0.0), ground=True, ground_extent=1.5)
    anim.mesh(box_frames, box_f, color=0xD09050)
    anim.mesh(x[list(frames)], ball_faces)
    anim.caption(lambda k: f"t = {k * args.every * dt:.2f} s")
    shown = show(anim, "soft_ball_box", args)
    print(json.dumps(dict(tets=int(model.tet_count), steps=steps, seconds=round(seconds, 3),
                          box_travel=round(float(np.linalg.norm(q[-1, [0, 2]] - q[0, [0, 2]])), 4),
                          box_tilt_deg=round(float(np.degrees(np.arccos(np.clip(up[:, 1].min(), -1, 1)))), 2),
                          ball_speed_after=round(float(np.linalg.norm(xd[-1].mean(axis=0))), 4), gif=shown["gif"])))


if __name__ == "__main__":
    main()
