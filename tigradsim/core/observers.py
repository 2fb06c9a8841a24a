"""Observers: differentiable kernels that record state at chosen steps.

`Simulator.observe(fn, every)` calls `fn(state, slot, frame)`; these classes are
such functions, writing into per-frame fields that losses read.  They work the
same with or without checkpointing.
"""
import numpy as np
import taichi as ti

from .errors import check_indices
from .runtime import deterministic, no_grad, serial_loop


def check_every(owner, every):
    """`every` must be an integer >= 1 (steps between frames): raise ValueError naming it otherwise."""
    if isinstance(every, bool) or not (isinstance(every, (int, np.integer)) and every >= 1):
        raise ValueError(f"{owner}: every: must be an integer >= 1, got {every!r}")


@ti.data_oriented
class ParticleRecorder:
    """Records particle positions (or another vec3 particle state) every `every` steps.

    Attributes:
        values: field (frames, M) vec3 — frame k is step k * every.
        indices: the M recorded particles (default: all).
    """

    def __init__(self, sim, every, indices=None, state="particle_q"):
        check_every("ParticleRecorder", every)
        n = sim.model.particle_count
        idx = np.arange(n) if indices is None else check_indices("indices", np.asarray(indices).reshape(-1, 1), n, 1)[:, 0]
        self.count = len(idx)
        self.state_name = state
        self.indices = ti.field(ti.i32, shape=self.count)
        self.indices.from_numpy(idx.astype(np.int32))
        self.frames = sim.frame_count(every)
        self.values = ti.Vector.field(3, float, shape=(self.frames, self.count), needs_grad=sim.model.requires_grad)
        # repeated indices add their adjoints into one particle: in a fixed order when deterministic
        self._serial = deterministic()
        sim.observe(self, every)

    def __call__(self, state, slot, frame):
        self._record(getattr(state, self.state_name), slot, frame)

    @ti.kernel
    def _record(self, src: ti.template(), slot: ti.i32, frame: ti.i32):
        ti.loop_config(serialize=ti.static(self._serial or serial_loop(self.count)))
        for k in range(self.count):
            self.values[frame, k] = src[slot, self.indices[k]]

    def numpy(self):
        """Recorded values, shape (frames, M, 3)."""
        return self.values.to_numpy()


@ti.data_oriented
class CenterOfMassRecorder:
    """Records the mass-weighted centre of mass of a set of particles every `every` steps.

    Attributes: `com` field (frames,) vec3 [m].
    Like every observer it is idempotent per frame: its accumulators are
    cleared (off the tape) before each frame is summed, so a checkpointed
    recompute gives the same values.
    """

    def __init__(self, sim, every, indices=None):
        check_every("CenterOfMassRecorder", every)
        model = sim.model
        n = model.particle_count
        idx = np.arange(n) if indices is None else check_indices("indices", np.asarray(indices).reshape(-1, 1), n, 1)[:, 0]
        if model.particle_mass.to_numpy()[idx].sum() <= 0:
            raise ValueError("indices: the selected particles have zero total mass (all fixed?)")
        self.model = model
        self.count = len(idx)
        self.indices = ti.field(ti.i32, shape=self.count)
        self.indices.from_numpy(idx.astype(np.int32))
        self.frames = sim.frame_count(every)
        grad = model.requires_grad
        self.weighted = ti.Vector.field(3, float, shape=self.frames, needs_grad=grad)
        self.mass = ti.field(float, shape=self.frames, needs_grad=grad)
        self.com = ti.Vector.field(3, float, shape=self.frames, needs_grad=grad)
        self._clear_op = no_grad(self._clear)
        # the sums over particles run in a fixed order when deterministic (threads would add in any order)
        self._serial = deterministic()
        sim.observe(self, every)

    def __call__(self, state, slot, frame):
        self._clear_op(frame)
        self._record(state.particle_q, slot, frame)

    @ti.kernel
    def _clear(self, frame: ti.i32):
        self.weighted[frame] = ti.Vector.zero(float, 3)
        self.mass[frame] = 0.0

    @ti.kernel
    def _record(self, q: ti.template(), slot: ti.i32, frame: ti.i32):
        ti.loop_config(serialize=ti.static(self._serial or serial_loop(self.count)))
        for k in range(self.count):
            i = self.indices[k]
            m = self.model.particle_mass[i]
            self.weighted[frame] += q[slot, i] * m
            self.mass[frame] += m
        ti.loop_config(serialize=True)        # one iteration: no thread-pool dispatch
        for _ in range(1):
            self.com[frame] = self.weighted[frame] / self.mass[frame]

    def numpy(self):
        """Recorded centres of mass, shape (frames, 3)."""
        return self.com.to_numpy()
