"""Test helper: a scalar loss on a rigid rollout's tracks (centres of mass and surface vertices),
against random targets, for finite-difference gradient checks of rigid-body physics."""
import numpy as np
import taichi as ti

import tigradsim as tgs
from tigradsim.physics.rigid import BodyRecorder, RigidSurface


def rigid_track_loss(sim, body_count, position_every, surface_every, seed):
    """(run, total): `run()` rolls `sim` out and sets `total[None]` to the MSE of the recorded body
    positions (every `position_every` steps) plus that of the surface vertices (every `surface_every`
    steps), each against a fixed random target (numpy seed `seed`, scale 0.3 m)."""
    rec = BodyRecorder(sim, position_every)
    surf = RigidSurface(sim, surface_every)
    rng = np.random.default_rng(seed)
    l1 = tgs.MSELoss(rec.positions, rng.normal(size=(rec.frames, body_count, 3)) * 0.3)
    l2 = tgs.MSELoss(surf.vertices, rng.normal(size=(surf.frames, surf.vertex_count, 3)) * 0.3)
    total = ti.field(float, shape=(), needs_grad=True)

    @ti.kernel
    def add():
        total[None] += l1.value[None] + l2.value[None]

    def run():
        l1.value[None] = 0
        l2.value[None] = 0
        sim.run()
        l1()
        l2()
        add()

    return run, total
