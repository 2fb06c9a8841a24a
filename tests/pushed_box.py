"""The pushed-box scene several rendering and fitting tests film: a 0.2 m box (1 kg) on the ground, pushed
along +x by 20 N for its first 0.05 s (dt = 1/480 s), with the ground's and the box's contact constants."""
import numpy as np

import tigradsim as tgs


def body_surface(model):
    """(faces (F, 3) int: every rigid body's surface in model vertex indices, vertex_count)."""
    start = model.body_vertex_start
    return np.concatenate([fc + start[i] for i, fc in enumerate(model.body_faces)]), int(start[-1])


def pushed_box(steps, checkpoint_every):
    """Returns (model, sim, faces (F, 3) int: every body's surface in model vertex indices, vertex_count)."""
    from tigradsim.io.meshes import box_surface
    v, f = box_surface((0.2, 0.2, 0.2))
    b = tgs.SceneBuilder(gravity=(0.0, -9.8, 0.0))
    b.add_ground(ke=1e4, kd=20.0, kf=30.0, mu=0.3)
    body = b.add_rigid_body(v, f, mass=1.0, position=(-0.3, 0.1, 0.0), ke=5e3, kd=10.0, kf=15.0)
    b.component(tgs.rigid.RigidBodies).add_force(b, body, force=(20.0, 0.0, 0.0), start=0.0, end=0.05)
    model = b.finalize(requires_grad=True)
    sim = tgs.Simulator(model, dt=1 / 480, steps=steps, checkpoint_every=checkpoint_every)
    return (model, sim) + body_surface(model)
