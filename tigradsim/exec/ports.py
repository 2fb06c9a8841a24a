"""Ports: how an element loop on threads reads its inputs without scattering adjoints into shared particles.

An element loop (tets, cloth triangles, bending edges, springs) reads the state of its K corner
particles and adds a force into each.  Run in parallel, Taichi's reverse of the corner READS is a racing
scatter into the state's adjoint.  A path that runs element loops on threads (`parts.PartPorts`) reads
each corner as q = stop_grad(q_i) + port, the port holding an exact zero (q_i - stop_grad(q_i)) that
its owner fills in a loop of its own: the forward values are the serial loop's, and the reverse pass
writes each input adjoint into a port that one thread owns, summed into the state's adjoint in a fixed
order afterwards (bit-reproducible for any thread count).

This module holds what every set of ports shares (`PortsBase`, `NO_PORTS` for the paths without ports,
the port loops' base `PortTerm`, `stopped_state`, `row_value`) and the compile-time questions a kernel
body asks (`differentiating`, `reversing`, `validating`).  Element kernels use `tigradsim.exec.loops`.
"""
from typing import Sequence

import numpy as np
import taichi as ti
from taichi.lang import impl
from taichi.lang.enums import AutodiffMode

from ..core.model import StepTerm, has_grad


def csr_starts(keys, count: int) -> np.ndarray:
    """(count + 1,) int32 starts of a CSR list whose entries are sorted by key (ints in [0, count)):
    key r's entries are [starts[r], starts[r + 1])."""
    starts = np.zeros(count + 1, dtype=np.int32)
    starts[1:] = np.cumsum(np.bincount(np.asarray(keys, dtype=np.int64).reshape(-1), minlength=count))
    return starts


def _compiling_mode():
    kernel = impl.get_runtime().current_kernel
    return AutodiffMode.NONE if kernel is None else kernel.autodiff_mode


def differentiating() -> bool:
    """Whether the kernel being compiled is a derivative kernel, reverse or forward mode (Taichi
    compiles those from the same Python code as the kernel itself; a `ti.static(differentiating())`
    branch gives them different code).  Used at compile time only."""
    return _compiling_mode() in (AutodiffMode.REVERSE, AutodiffMode.FORWARD)


def reversing() -> bool:
    """Whether the kernel being compiled is a reverse-mode derivative kernel (what `ti.ad.Tape` and
    `kernel.grad()` run).  Used at compile time only."""
    return _compiling_mode() == AutodiffMode.REVERSE


def validating() -> bool:
    """Whether the kernel being compiled is the checked forward kernel of `ti.ad.Tape(validation=True)`
    (Taichi's global data access rule: it rejects a buffer reused step after step, as the parts path's
    buffers are).  Used at compile time only."""
    return _compiling_mode() == AutodiffMode.VALIDATION


@ti.func
def zeros(n: ti.template()):
    """0.0 (n = 0) or a zero n-vector."""
    if ti.static(n == 0):
        return 0.0
    else:
        return ti.Vector([0.0 for _ in ti.static(range(n))])


class NoPorts:
    """Stands for "no ports" (the serial and parallel paths) in `corner_q` & co."""

    active = False
    parted = False


NO_PORTS = NoPorts()


@ti.func
def row_value(table: ti.template(), r):
    """Row r of a parameter table: a scalar (R,) field's value, a vector (R,) field's vector, or
    a 2-D (R, W) field's row as a W-vector."""
    if ti.static(len(table.shape) == 2):
        return ti.Vector([table[r, c] for c in ti.static(range(table.shape[1]))])
    else:
        return table[r]


@ti.data_oriented
class PortsBase:
    """What every set of ports shares (`parts.PartPorts`): the checked
    element indices, which parameter tables get ports (those with gradients), and `stop`."""

    active = True
    parted = False

    def _set_up(self, model, indices, tables: Sequence):
        """Check `indices` (E, K) against the model's particles, set model, E, K, grad, raw_tables and
        table_slot (table j's place among the ported tables, or -1: read directly), and return
        (indices as int64, the ported tables' positions j)."""
        idx = np.asarray(indices, dtype=np.int64)
        if idx.ndim != 2 or idx.shape[0] == 0:
            raise ValueError(f"indices: expected shape (E, K) with E >= 1, got {idx.shape}")
        self.model = model
        self.E, self.K = idx.shape
        N = model.particle_count
        if idx.min() < 0 or idx.max() >= N:
            raise IndexError(f"indices: particle indices must lie in [0, {N}), got [{idx.min()}, {idx.max()}]")
        self.grad = bool(model.requires_grad)
        # ports only for the tables that have gradients (`finalize(requires_grad=...)` may leave some without)
        self.raw_tables = [t for t, _ in tables]
        ported = [j for j, t in enumerate(self.raw_tables) if self.grad and has_grad(t)]
        self.table_slot = [ported.index(j) if j in ported else -1 for j in range(len(self.raw_tables))]
        return idx, ported

    @ti.func
    def stop(self, state: ti.template()):
        """Cut the direct gradient paths of the state and the ported tables (they go through the ports)."""
        if ti.static(self.ported()):
            ti.stop_grad(state.particle_q)
            ti.stop_grad(state.particle_qd)
            for tb in ti.static(self.tables):
                ti.stop_grad(tb.table)


class PortTerm(StepTerm):
    """A loop of a ported path: parallel, no force of its own, no stability limit."""

    def __init__(self, model, ports, reverse_only: bool = False):
        super().__init__(model)
        self.ports = ports
        self.serial = False
        # reverse_only: the loop is emitted only in derivative kernels (`differentiating`); in the
        # forward kernel its values (exact zeros) are already in place and it would cost a pass
        self.reverse_only = reverse_only

    def stability_limits(self):
        return []


@ti.func
def stopped_state(state: ti.template(), s, i):
    """Particle i's position and velocity at slot s, read with no gradient path: a port is the state
    minus this (exactly 0, derivative 1).  The stop_grad sits in a block of its own, so it cuts only
    these two reads."""
    q_ng = ti.Vector([0.0, 0.0, 0.0])
    qd_ng = ti.Vector([0.0, 0.0, 0.0])
    if i >= 0:
        ti.stop_grad(state.particle_q)
        ti.stop_grad(state.particle_qd)
        q_ng = state.particle_q[s, i]
        qd_ng = state.particle_qd[s, i]
    return q_ng, qd_ng


