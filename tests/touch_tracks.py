"""Test helper: a scalar loss on a rollout with rigid bodies and (optionally) particles, against random targets,
for the finite-difference gradient checks of body-body contact and particle-body coupling, their steps and
their float64 fixture.

The finite-difference step is 1e-7 (relative to each field's RMS): resting contact crosses the capped damping's
kink (kd |v_n| = ke |c|, `physics.contact`) in some steps, and a step of 1e-6 can straddle one (measured on the
box on a box: 4e-5 relative error at 1e-6, 3e-9 at 1e-7).  Parameters whose gradient is small here (kd, mu, the
particles' masses: 1e-8 to 1e-6) take 1e-5 (`EPS`): at 1e-7 central differences are at their round-off
(measured: the ball's d/d mu 3.71848e-8 by the Tape, 3.71848e-8 / 3.71803e-8 / 3.71925e-8 by central differences
at 1e-5 / 1e-6 / 1e-7).
"""
import numpy as np
import pytest
import taichi as ti

import tigradsim as tgs
from tigradsim.physics.rigid import BodyRecorder, RigidSurface

EPS = {"body_kd": 1e-5, "body_mu": 1e-5, "body_pair_kd": 1e-5, "body_pair_mu": 1e-5, "particle_mass": 1e-5}
BODY_PARAMS = ["body_mass", "body_q0", "body_qd0", "body_ke", "body_kd", "body_kf", "body_mu", "body_shape_size"]
# body against body: the pair's constants are the means of body_pair_X (body_X is the ground's and particles')
PAIR_PARAMS = ["body_mass", "body_q0", "body_qd0", "body_pair_ke", "body_pair_kd", "body_pair_kf", "body_pair_mu",
               "body_shape_size"]


@pytest.fixture(scope="module")
def f64():
    tgs.init(arch="cpu", precision="f64")
    yield


def touch_loss(sim, body_count, every, seed=0, particles=False):
    """(run, total): `run()` rolls `sim` out and sets `total[None]` to the MSE of the body positions, the body
    surface vertices and (particles=True) the particle positions, recorded every `every` steps, against fixed
    random targets near their own unperturbed values (numpy seed `seed`)."""
    rng = np.random.default_rng(seed)
    recorders = [BodyRecorder(sim, every), RigidSurface(sim, every)]
    if particles:
        recorders.append(tgs.ParticleRecorder(sim, every=every))
    sim.run()
    losses = []
    for rec in recorders:
        values = rec.positions if isinstance(rec, BodyRecorder) else rec.vertices if isinstance(rec, RigidSurface) \
            else rec.values
        current = values.to_numpy()
        losses.append(tgs.MSELoss(values, current + rng.normal(size=current.shape) * 0.05))
    total = ti.field(float, shape=(), needs_grad=True)

    @ti.kernel
    def add():
        for k in ti.static(range(len(losses))):
            total[None] += losses[k].value[None]

    def run():
        for loss in losses:
            loss.value[None] = 0
        sim.run()
        for loss in losses:
            loss()
        add()

    return run, total
