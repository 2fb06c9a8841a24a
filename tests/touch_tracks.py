"""Test helper: a scalar loss on a rollout with rigid bodies and (optionally) particles, against random targets,
for the finite-difference gradient checks of body-body contact and particle-body coupling."""
import numpy as np
import taichi as ti

import tigradsim as tgs
from tigradsim.physics.rigid import BodyRecorder, RigidSurface


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
