"""A stack of three boxes knocked over by a thrown box (rigid-rigid contact, `tigradsim.physics.body_contact`).

Three boxes (0.3, 0.25 and 0.2 m, each a little smaller than the one below, so that corners rest on faces)
stand on the ground; a 0.15 m box thrown at 4 m/s hits the middle one.  Every body touches the ground and
every other body with its 8 corners against the others' analytic boxes (a box mesh gets the analytic box).
With a display a window plays the rollout (Esc/q; --no-wait plays it once); with --headless (or without a
display) the frames go to --out as PNGs and a GIF.  The last stdout line is JSON with `steps`, `seconds`
(the rollout's wall time), `top_box_drop` (how far the top box's centre fell [m]), `top_box_travel`
(its horizontal travel [m]), `knocked_over` (it fell by more than half its size) and `gif`.

    python demos/box_stack.py --headless --out out/box_stack
    python demos/box_stack.py --quick --headless --out out/box_stack_quick
"""
import argparse
import json
import time

import numpy as np

import tigradsim as tgs
from tigradsim.io.viz import Animation, add_view_args, show

SIZES = (0.3, 0.25, 0.2)
CONTACT = dict(ke=2e4, kd=20.0, kf=50.0, mu=0.5)


def build(speed):
    """The scene: the stack (bodies 0..2, bottom first) and the thrown box (body 3)."""
    b = tgs.SceneBuilder()
    b.add_ground(**CONTACT)
    y = 0.0
    for s in SIZES:
        v, f = tgs.meshes.box_surface((s, s, s))
        b.add_rigid_body(v, f, density=200.0, position=(0.0, y + s / 2, 0.0), **CONTACT)
        y += s
    v, f = tgs.meshes.box_surface((0.15, 0.15, 0.15))
    b.add_rigid_body(v, f, density=400.0, position=(-0.8, SIZES[0] + SIZES[1] / 2 + 0.05, 0.02),
                     velocity=(speed, 1.0, 0.0), angular_velocity=(0.0, 0.0, -3.0), **CONTACT)
    return b.finalize(requires_grad=False)


def world_vertices(model, body_q):
    """(frames, V, 3) world positions of every body's mesh vertices from body poses (frames, B, 7)."""
    local = model.body_vertex.to_numpy().astype(np.float64)
    owner = model.vertex_body.to_numpy()
    out = np.empty((len(body_q), len(local), 3))
    for k, q in enumerate(body_q):
        for b in range(model.body_count):
            R = tgs.rigid.quat_to_matrix_np(q[b, 3:])
            sel = owner == b
            out[k, sel] = q[b, :3] + local[sel] @ R.T
    return out


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--speed", type=float, default=4.0, help="speed of the thrown box [m/s]")
    parser.add_argument("--steps", type=int, default=2500, help="steps of dt = 1 ms")
    parser.add_argument("--every", type=int, default=20, help="steps per shown frame")
    parser.add_argument("--quick", action="store_true", help="a short run (700 steps): the hit and the first fall")
    parser.add_argument("--arch", default="cpu")
    add_view_args(parser, out_default="out/box_stack")
    args = parser.parse_args(argv)
    steps = 700 if args.quick else args.steps

    tgs.init(arch=args.arch, precision="f32")
    model = build(args.speed)
    sim = tgs.Simulator(model, dt=1e-3, steps=steps)
    t0 = time.perf_counter()
    sim.run()
    seconds = time.perf_counter() - t0
    q = sim.state.body_q.to_numpy().astype(np.float64)
    frames = q[::args.every]
    top0, top1 = q[0, 2, :3], q[-1, 2, :3]
    faces = np.concatenate([f + start for f, start in zip(model.body_faces, model.body_vertex_start[:-1])])
    anim = Animation(args.every * 1e-3, eye=(0.3, 1.4, 3.2), target=(0.0, 0.35, 0.0), ground=True, ground_extent=1.5)
    anim.mesh(world_vertices(model, frames), faces)
    anim.caption(lambda k: f"t = {k * args.every * 1e-3:.2f} s")
    shown = show(anim, "box_stack", args)
    drop = float(top0[1] - top1[1])
    print(json.dumps(dict(steps=steps, seconds=round(seconds, 3), top_box_drop=round(drop, 4),
                          top_box_travel=round(float(np.linalg.norm(top1[[0, 2]] - top0[[0, 2]])), 4),
                          knocked_over=bool(drop > SIZES[2] / 2), gif=shown["gif"])))


if __name__ == "__main__":
    main()
