"""Rigid-body dynamics: conservation in free flight, the intermediate-axis
instability, Coulomb sliding, bounce damping, applied impulses (f64)."""
import numpy as np
import pytest

import tigradsim as tgs
from tigradsim import meshes
from tigradsim.physics.rigid import add_body_force, quat_to_matrix_np


def _trajectory(sim):
    sim.run()
    return sim.state.body_q.to_numpy(), sim.state.body_qd.to_numpy()


def _momenta(model, q, qd, b=0):
    """Linear momentum, angular momentum about the origin, kinetic energy of body b per slot."""
    m = model.get("body_mass")[b]
    iu = model.get("body_inertia")[b]
    out = []
    for pose, vel in zip(q[:, b], qd[:, b]):
        R = quat_to_matrix_np(pose[3:])
        iw = R @ (m * iu) @ R.T
        w, v = vel[:3], vel[3:]
        out.append((m * v, iw @ w + np.cross(pose[:3], m * v), 0.5 * m * v @ v + 0.5 * w @ iw @ w))
    return [np.array(x) for x in zip(*out)]


def _free_body(size, w0, v0=(0.0, 0.0, 0.0), dt=1e-3, steps=1000, rotation=(0.0, 0.0, 0.0, 1.0)):
    b = tgs.SceneBuilder(gravity=(0.0, 0.0, 0.0))
    v, f = meshes.box_surface(size)
    b.add_rigid_body(v, f, density=500.0, position=(0.0, 1.0, 0.0), rotation=rotation, velocity=v0,
                     angular_velocity=w0)
    model = b.finalize(requires_grad=False)
    return model, tgs.Simulator(model, dt=dt, steps=steps)


def test_free_flight_conserves_momentum_and_energy(f64):
    q = np.array([0.2, -0.3, 0.1, 0.9])
    errors = []
    for dt in (2e-3, 1e-3):
        model, sim = _free_body((0.3, 0.5, 0.8), w0=(1.0, 2.0, -3.0), v0=(0.5, -0.2, 1.0), dt=dt,
                                steps=int(round(1.0 / dt)), rotation=q / np.linalg.norm(q))
        p, L, E = _momenta(model, *_trajectory(sim))
        np.testing.assert_allclose(p, np.broadcast_to(p[0], p.shape), rtol=1e-13, atol=1e-13)
        errors.append((np.abs(L - L[0]).max() / np.linalg.norm(L[0]), np.abs(E - E[0]).max() / E[0]))
        assert np.all(np.linalg.norm(sim.state.body_q.to_numpy()[:, 0, 3:], axis=1) - 1 < 1e-12)
    (l2, e2), (l1, e1) = errors
    assert l1 < 2e-3 and e1 < 2e-3, errors
    # first-order integrator: halving dt roughly halves the drift
    assert 1.5 < l2 / l1 < 2.5 and 1.5 < e2 / e1 < 2.5, errors


def test_intermediate_axis_flips(f64):
    size = (1.0, 0.5, 0.1)   # principal inertias: x smallest, y intermediate, z largest
    spin = 10.0              # growth rate of a perturbation: spin * 0.74 per second
    model, sim = _free_body(size, w0=(1e-2, spin, 1e-2), dt=2e-3, steps=1000)
    q, qd = _trajectory(sim)
    w_body = np.array([quat_to_matrix_np(pose[3:]).T @ vel[:3] for pose, vel in zip(q[:, 0], qd[:, 0])])
    assert w_body[:, 1].min() < -0.9 * spin, "spin about the intermediate axis should flip"
    # about the major axis it stays put
    model, sim = _free_body(size, w0=(1e-2, 1e-2, spin), dt=2e-3, steps=1000)
    q, qd = _trajectory(sim)
    w_body = np.array([quat_to_matrix_np(pose[3:]).T @ vel[:3] for pose, vel in zip(q[:, 0], qd[:, 0])])
    assert w_body[:, 2].min() > 0.99 * spin


def _sliding_block(kf, mu=0.4, v0=2.0, steps=300, dt=1e-3):
    b = tgs.SceneBuilder()
    b.add_ground(ke=1e5, kd=200.0, kf=kf, mu=mu)
    v, f = meshes.box_surface((0.2, 0.2, 0.2))
    mass = 10.0
    b.add_rigid_body(v, f, mass=mass, position=(0.0, 0.1 - mass * 9.8 / 1e5, 0.0), velocity=(v0, 0.0, 0.0))
    model = b.finalize(requires_grad=False)
    return tgs.Simulator(model, dt=dt, steps=steps)


def test_sliding_block_decelerates_at_mu_g(f64):
    sim = _sliding_block(kf=1e3)
    q, qd = _trajectory(sim)
    vx = qd[:, 0, 3]
    t = np.arange(len(vx)) * sim.dt
    window = slice(50, 250)                              # sliding throughout (v stays > 1 m/s)
    decel = -np.polyfit(t[window], vx[window], 1)[0]
    assert decel == pytest.approx(0.4 * 9.8, rel=1e-2)
    assert q[:, 0, 1].max() < 0.1 + 2e-3      # stays on the ground (friction makes it rock a little)
    # with a small kf friction stays viscous (kf v per contact point), below the Coulomb cap
    _, qd = _trajectory(_sliding_block(kf=1.0))
    decel = -np.polyfit(t[window], qd[window, 0, 3], 1)[0]
    assert 0.1 * 9.8 * 0.4 < decel < 0.5 * 0.4 * 9.8


def test_bounce_is_lower_with_more_damping(f64):
    b = tgs.SceneBuilder()
    b.add_ground(ke=1e4, kd=0.0, kf=10.0, mu=0.5)
    v, f = meshes.box_surface((0.2, 0.2, 0.2))
    b.add_rigid_body(v, f, mass=1.0, position=(0.0, 0.4, 0.0))
    model = b.finalize(requires_grad=False)
    sim = tgs.Simulator(model, dt=5e-4, steps=1000)
    heights = []
    for kd in (0.0, 5.0, 20.0):
        model.set("body_kd", [kd])
        q, qd = _trajectory(sim)
        y, vy = q[:, 0, 1], qd[:, 0, 4]
        first_rise = np.argmax(vy > 0)
        heights.append((y[first_rise:].max() - 0.1) / 0.3)
    assert heights[0] > 0.95                      # kd = 0: nearly elastic
    assert heights[0] > heights[1] > heights[2] + 0.05, heights


def test_applied_impulse_changes_momenta(f64):
    b = tgs.SceneBuilder(gravity=(0.0, 0.0, 0.0))
    v, f = meshes.box_surface((0.4, 0.2, 0.3))
    body = b.add_rigid_body(v, f, mass=2.0, position=(0.0, 1.0, 0.0))
    dt = 1e-3
    force, point = np.array([0.0, 0.0, 50.0]), np.array([0.2, 0.1, 0.15])
    add_body_force(b, body, force=force, point=point, start=0.0, end=10 * dt)   # exactly 10 steps
    model = b.finalize(requires_grad=False)
    sim = tgs.Simulator(model, dt=dt, steps=40)
    p, L, _ = _momenta(model, *_trajectory(sim))
    impulse = force * 10 * dt
    np.testing.assert_allclose(p[-1], impulse, atol=1e-12)
    np.testing.assert_allclose(p[10:], np.broadcast_to(impulse, p[10:].shape), atol=1e-12)
    # angular momentum about the origin gained: sum over loaded steps of x_point(t) x F dt
    q = sim.state.body_q.to_numpy()[:10, 0]
    arm = np.array([pose[:3] + quat_to_matrix_np(pose[3:]) @ point for pose in q])
    expected = np.cross(arm, force).sum(0) * dt
    # exact for the translational part; the rotational update is first order in dt (error ~ 2e-5 here)
    np.testing.assert_allclose(L[-1], expected, atol=1e-4 * np.linalg.norm(expected))


def test_surface_observer_and_parameters_as_numpy(f64):
    from tigradsim.physics.rigid import BodyRecorder, RigidSurface
    b = tgs.SceneBuilder()
    b.add_ground(ke=2e3, kd=5.0, kf=10.0, mu=0.3)
    b.add_particle((0.5, 0.2, 0.0), radius=0.01)            # particles and bodies share the fused step
    box_v, box_f = meshes.box_surface((0.2, 0.1, 0.3))
    ball_v, ball_f = meshes.icosphere(1, 0.1)
    b.add_rigid_body(box_v, box_f, density=300.0, position=(0.0, 0.5, 0.0), angular_velocity=(1.0, 2.0, 3.0))
    q = np.array([0.3, 0.1, 0.0, 0.9])
    b.add_rigid_body(ball_v, ball_f, mass=0.5, position=(1.0, 0.3, 0.0), rotation=q / np.linalg.norm(q), mu=0.9)
    model = b.finalize()
    np.testing.assert_allclose(model.get("body_mu"), [0.3, 0.9])           # per body, ground default
    np.testing.assert_allclose(model.get("body_ke"), [2e3, 2e3])
    model.set("body_mass", [2.0, 0.5])
    np.testing.assert_allclose(model.get("body_mass"), [2.0, 0.5])
    sim = tgs.Simulator(model, dt=1e-3, steps=100, checkpoint_every=30)
    surface = RigidSurface(sim, every=25)
    poses = BodyRecorder(sim, every=25)
    sim.run()
    assert surface.faces.shape == (len(box_f) + len(ball_f), 3) and surface.vertex_count == len(box_v) + len(ball_v)
    np.testing.assert_array_equal(surface.faces[len(box_f):], ball_f + len(box_v))
    verts = surface.numpy()
    pos, rot = poses.numpy()
    assert verts.shape == (5, surface.vertex_count, 3)
    for k in range(5):
        for body, (v, start) in enumerate([(box_v, 0), (ball_v, len(box_v))]):
            local = model.body_vertex.to_numpy()[start:start + len(v)]
            np.testing.assert_allclose(local, v - model.body_com_offset[body], atol=1e-14)
            world = pos[k, body] + local @ quat_to_matrix_np(rot[k, body]).T
            np.testing.assert_allclose(verts[k, start:start + len(v)], world, atol=1e-12)
    assert verts[-1, :, 1].min() > -0.01                      # nothing fell through the ground
