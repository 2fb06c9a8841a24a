"""Body-body contact against NVIDIA Warp 1.9.1 (warp.sim, SemiImplicitIntegrator): a rigid ball dropped on a box
that rests on the ground, the same laws and constants in both (slow; skipped without warp).

What is made equal: the ball's contact is its centre with the ball's radius as contact radius (Warp's sphere
shape: the distance from the centre to the box, less the radius); the box touches the ground with its 8 corners
(Warp's box-plane contact); damping="uncapped" (Warp's `min(vn, 0) kd` while penetrating); one ke, kd, kf, mu
for the ball, the box and the ground (Warp averages the two shapes' materials, tigradsim the two bodies': equal
here); the masses and inertias of tigradsim's bodies are given to Warp's (its shapes get density 0); gravity
9.8; angular_damping 0.  The drop is straight down, so the tangential velocity stays 0 and the friction laws,
which differ (`physics.body_contact`), do not act.  Box-box contact is not compared: Warp's is edge-based (each
of the 12 edges' closest point to the other box: on a flat face 8 contacts, 4 of them at points along the
bottom edges that its line search picks), tigradsim's the 8 corners, so their forces differ by design.

Tolerance: 2e-5 m on every body's centre of mass over 0.6 s (measured: 4.1e-6 m; Warp runs in float32; the ball
lands at 0.14 s and bounces).
"""
import numpy as np
import pytest

import tigradsim as tgs
from tigradsim import meshes

pytestmark = pytest.mark.slow
KE, KD, KF, MU = 2e4, 5.0, 10.0, 0.5
DT, STEPS = 1e-3, 600


def _tigradsim(radius, box_half, ball_y):
    b = tgs.SceneBuilder()
    b.add_ground(ke=KE, kd=KD, kf=KF, mu=MU, damping="uncapped")
    v, f = meshes.box_surface(2 * np.asarray(box_half))
    b.add_rigid_body(v, f, density=300.0, position=(0.0, box_half[1], 0.0))
    sv, sf = meshes.icosphere(2, radius=radius)
    b.add_rigid_body(sv, sf, density=500.0, position=(0.0, ball_y, 0.0), shape="sphere", shape_size=radius,
                     contact_points=[[0.0, 0.0, 0.0]], contact_radius=radius)
    model = b.finalize(requires_grad=False)
    sim = tgs.Simulator(model, dt=DT, steps=STEPS)
    sim.run()
    return model, sim.state.body_q.to_numpy()[:, :, :3]


def _warp(model, radius, box_half, ball_y):
    wp = pytest.importorskip("warp")
    import warp.sim  # noqa: F401
    wp.init()
    mass = model.body_mass.to_numpy().astype(np.float64)
    inertia = model.body_inertia.to_numpy().astype(np.float64) * mass[:, None, None]
    builder = wp.sim.ModelBuilder(up_vector=(0.0, 1.0, 0.0), gravity=-9.8)
    box = builder.add_body(origin=wp.transform(wp.vec3(0.0, box_half[1], 0.0), wp.quat_identity()),
                           m=float(mass[0]), I_m=wp.mat33(*inertia[0].reshape(-1)))
    builder.add_shape_box(box, hx=box_half[0], hy=box_half[1], hz=box_half[2], density=0.0, ke=KE, kd=KD, kf=KF,
                          mu=MU, thickness=0.0)
    ball = builder.add_body(origin=wp.transform(wp.vec3(0.0, ball_y, 0.0), wp.quat_identity()),
                            m=float(mass[1]), I_m=wp.mat33(*inertia[1].reshape(-1)))
    builder.add_shape_sphere(ball, radius=radius, density=0.0, ke=KE, kd=KD, kf=KF, mu=MU, thickness=0.0)
    builder.set_ground_plane(ke=KE, kd=KD, kf=KF, mu=MU)
    m = builder.finalize(device="cpu")
    m.ground = True
    integrator = wp.sim.SemiImplicitIntegrator(angular_damping=0.0)
    s0, s1 = m.state(), m.state()
    out = [s0.body_q.numpy()[:, :3].copy()]
    for _ in range(STEPS):
        s0.clear_forces()
        wp.sim.collide(m, s0)
        integrator.simulate(m, s0, s1, DT)
        s0, s1 = s1, s0
        out.append(s0.body_q.numpy()[:, :3].copy())
    return np.array(out, dtype=np.float64)


def test_ball_dropped_on_box_matches_warp():
    pytest.importorskip("warp")
    tgs.init(arch="cpu", precision="f64")
    radius, box_half, ball_y = 0.1, (0.25, 0.1, 0.2), 0.45
    model, ours = _tigradsim(radius, box_half, ball_y)
    theirs = _warp(model, radius, box_half, ball_y)
    assert ours[:, 1, 1].min() < 0.2 + radius, "the ball should land on the box"
    assert np.any(np.diff(ours[:, 1, 1]) > 0), "and bounce"
    diff = np.abs(ours - theirs).max()
    assert diff < 2e-5, f"max |x_tigradsim - x_warp| = {diff:.3g} m"
