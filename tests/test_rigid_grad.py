"""Finite-difference gradient checks (f64) of a rigid rollout that bounces,
slides and spins, and checkpointed == full gradients.

The scene: an asymmetric box thrown tilted onto the ground with spin and a
known impulse at a corner over the first 10 steps; 200 steps of 2 ms.  Its
contact points touch down and lift off at different steps, so the loss is only
piecewise smooth in the parameters (the damping and friction forces switch on
when a point first touches).  Central differences converge here because no
contact point is within the finite-difference step of y = 0 at any step for
these parameter values (checked: every derivative agrees to ~1e-7 relative;
the tolerance is 1e-5).  Both friction regimes occur (viscous kf below the
Coulomb cap, mu above it), so kf and mu both carry gradient.
"""
import numpy as np
import pytest
import taichi as ti

import tigradsim as tgs
from tigradsim import meshes
from atomic_order import assert_same_sums
from rigid_tracks import rigid_track_loss
from tigradsim.physics.rigid import add_body_controls, add_body_force

PARAMS = ["body_mass", "body_ke", "body_kd", "body_kf", "body_mu", "body_qd0", "body_q0", "body_force",
          "body_force_point", "body_inertia"]


def _scene(checkpoint_every=None, fuse_steps=None):
    b = tgs.SceneBuilder()
    b.add_ground()
    v, f = meshes.box_surface((0.3, 0.2, 0.25))
    q = np.array([0.15, 0.1, -0.2, 1.0])
    body = b.add_rigid_body(v, f, mass=1.0, position=(0.0, 0.3, 0.0), rotation=q / np.linalg.norm(q),
                            velocity=(1.5, -1.0, 0.3), angular_velocity=(1.0, 4.0, -2.0),
                            ke=3e3, kd=4.0, kf=30.0, mu=0.4)
    add_body_force(b, body, force=(0.0, 20.0, 30.0), point=(0.15, 0.1, 0.0), start=0.0, end=0.02)
    model = b.finalize()
    sim = tgs.Simulator(model, dt=2e-3, steps=200, checkpoint_every=checkpoint_every, fuse_steps=fuse_steps)
    controls = add_body_controls(sim)                        # per-step (torque, force), zero here
    run, total = rigid_track_loss(sim, 1, 20, 50, seed=0)

    return model, sim, run, total, controls


@pytest.fixture(scope="module")
def scene():
    tgs.init(arch="cpu", precision="f64")
    return _scene()


def test_rollout_bounces_and_slides(scene):
    model, sim, run, total, controls = scene
    run()
    q = sim.state.body_q.to_numpy()[:, 0]
    y = q[:, 1]
    assert y.min() < 0.15 and np.any(np.diff(y)[50:] > 0), "the box should touch down and bounce"
    assert q[-1, 0] > 0.3, "and travel along the ground"


@pytest.mark.parametrize("name", PARAMS)
def test_gradient_matches_finite_differences(scene, name):
    model, sim, run, total, controls = scene
    param = model.parameters()[name]
    report = tgs.check_gradient(run, total, [param], n_dirs=2, eps=1e-6, rtol=1e-5)
    report.assert_ok()
    assert max(abs(a) for a in report.analytic) > 1e-4, f"{name}: gradient should not vanish here"


def test_control_gradient_matches_finite_differences(scene):
    model, sim, run, total, controls = scene
    tgs.check_gradient(run, total, [controls], n_dirs=2, eps=1e-6, rtol=1e-5, scale=[1.0]).assert_ok()


def test_checkpointed_and_fused_gradients_equal_full(f64):
    """Checkpointing, and one launch per step instead of fused steps, give the same gradients
    (applied loads, per-step controls, contact, two observers)."""
    grads = {}
    keys = ((None, None), (16, None), (None, False))
    for ck, fuse in keys:
        model, sim, run, total, controls = _scene(ck, fuse)
        assert sim.checkpointing == (ck is not None)
        with ti.ad.Tape(total):
            run()
        grads[ck, fuse] = {name: model.parameters()[name].grad.to_numpy() for name in PARAMS}
        grads[ck, fuse]["controls"] = controls.grad.to_numpy()
    for name in PARAMS + ["controls"]:
        full = grads[None, None][name]
        assert np.abs(full).max() > 0
        for key in keys[1:]:
            np.testing.assert_allclose(grads[key][name], full, rtol=1e-12, atol=1e-12 * np.abs(full).max(),
                                       err_msg=f"{key}: {name}")


def test_small_loops_serial_or_parallel_agree(f64, monkeypatch):
    """The recorders' and the simulator's small loops run on one thread below
    `runtime.SERIAL_LOOP_MAX` entries: with every such loop serial, then every one parallel, the
    recorded track and every gradient are bit-identical (on a GPU, equal to rounding: atomic_order)."""
    out = []
    for limit in (10 ** 9, 0):
        monkeypatch.setattr(tgs.runtime, "SERIAL_LOOP_MAX", limit)
        model, sim, run, total, controls = _scene()
        with ti.ad.Tape(total):
            run()
        out.append([total[None]] + [model.parameters()[name].grad.to_numpy() for name in PARAMS])
    assert np.abs(out[0][1]).max() > 0
    for a, b in zip(*out):
        assert_same_sums(a, b)
