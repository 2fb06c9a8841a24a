"""Small MPM scenes and a loss for the MPM tests (tests/test_mpm*.py)."""
import numpy as np
import taichi as ti

import tigradsim as tgs


def block_scene(material="mpm_fixed_corotated", params=None, resolution=8, box=((0.375, 0.5, 0.375), (0.625, 0.75, 0.625)),
                velocity=(0.3, -0.2, 0.1), particles_per_cell=1, gravity=(0.0, -9.8, 0.0), mu=0.3, density=1000.0,
                requires_grad=True):
    """A block of MPM matter in the unit-cube domain; returns (model, object)."""
    b = tgs.SceneBuilder(gravity=gravity)
    b.add_mpm_grid(lower=(0, 0, 0), upper=(1, 1, 1), resolution=resolution, mu=mu)
    obj = b.add_mpm(box=box, material=material, params=params, density=density, velocity=velocity,
                    particles_per_cell=particles_per_cell)
    return b.finalize(requires_grad=requires_grad), obj


@ti.data_oriented
class StateLoss:
    """loss = sum over the recorded frames of sum_i (a_i . x_i + b_i . v_i + A_i : F_i + c_i C_i:C_i) with fixed
    random weights: every part of the MPM state feeds the gradient."""

    def __init__(self, model, seed=0):
        n = model.mpm_particle_count
        rng = np.random.default_rng(seed)
        self.loss = ti.field(float, shape=(), needs_grad=True)
        self.a = ti.Vector.field(3, float, shape=n)
        self.b = ti.Vector.field(3, float, shape=n)
        self.A = ti.Matrix.field(3, 3, float, shape=n)
        self.a.from_numpy(rng.standard_normal((n, 3)))
        self.b.from_numpy(rng.standard_normal((n, 3)))
        self.A.from_numpy(rng.standard_normal((n, 3, 3)))

    @ti.kernel
    def observe(self, state: ti.template(), s: ti.i32):
        for i in range(self.a.shape[0]):
            C = state.mpm_C[s, i]
            self.loss[None] += (self.a[i].dot(state.mpm_x[s, i]) + self.b[i].dot(state.mpm_v[s, i])
                                + (self.A[i] * state.mpm_F[s, i]).sum() + 1e-3 * (C * C).sum())


def watch(sim, loss):
    """Record `loss` at the first and last step of `sim`."""
    sim.observe(lambda state, slot, frame: loss.observe(state, slot), every=sim.steps)
