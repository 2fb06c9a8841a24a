"""Reverse kernels in lanes through per-lane-group ports (`LaneGroupPorts`), and the virtual-work field such a
reverse adds into (`virtual_work_field`).

An element term whose reverse runs LANES elements at a time (the cloth membrane and bending terms'
`virtual_work`, `tigradsim.exec.lanes`) reads its corners' positions and velocities as stop_grad(state) +
port, the ports of its lane group, so that Taichi's reverse of its loop adds the input adjoints side by side
into the group's own ports; the ports' own loop then adds them into the particles' adjoints.
"""
import numpy as np
import taichi as ti

from ..core.model import StepTerm
from .lanes import LANES
from .ports import csr_starts, reversing


def virtual_work_field(element_count: int):
    """W of an element term's `virtual_work` (cloth membrane and bending), one entry per lane group of its `element_count` elements, with an
    adjoint.  Every iteration of that loop stores W's adjoint (1) and adds to W: into one scalar, both threads
    wrote one cache line each iteration, and each took it from the other (cloth64, each step's reverse on two
    threads: 527-529 against 498-504 us with an entry per group; the same gradient bits)."""
    return ti.field(float, shape=(max(-(-element_count // LANES), 1),), needs_grad=True)


@ti.data_oriented
class LaneGroupPorts(StepTerm):
    """The input ports of an element set whose reverse runs in lanes (`ClothBendingForces.virtual_work`,
    `ClothMembraneForces.virtual_work`), one per lane group g of LANES elements: qport[g] and qdport[g],
    vectors of 3 K LANES zeros (component c of corner k on lane l at (3 k + c) LANES + l).  The element term reads its corners' positions and velocities
    as stop_grad(state) + port, so Taichi's reverse of its lanes loop adds the input adjoints into the group's
    own ports; every access to them in that loop has the index g alone, so Taichi adds without atomics and
    the loop runs on threads.  This term's loop comes before the element term's in a step, so in the reverse
    kernel it runs after it: per particle, on threads, it sums the port adjoints of the particle's
    incidences (listed by corner, lane, then group: a fixed order, bit-reproducible for any thread count)
    into the particle's adjoints, reading each at a run-time component index.  The forward kernel runs
    nothing here.

    On two threads it beats the ports on one thread (figures: benchmarks/MEASURED.md).

    indices: (E, K) numpy particle indices of the elements; parallel: run the reverse loops on threads (the
    element term must add nothing else from its lanes into shared adjoints: parameter tables without
    gradients)."""

    def __init__(self, model, indices, parallel: bool):
        super().__init__(model)
        idx = np.asarray(indices, dtype=np.int64)
        E, K = idx.shape
        self.parallel = bool(parallel)
        self.parallel_reverse = self.parallel
        groups = -(-E // LANES)
        width = 3 * K * LANES
        self.qport = ti.Vector.field(width, float, shape=groups, needs_grad=True)
        self.qdport = ti.Vector.field(width, float, shape=groups, needs_grad=True)
        # incidences per particle (CSR: start, then per incidence its lane group and the index of its x
        # component in the group's port, 3 k LANES + l), ordered by corner, lane, then group: one list and
        # one loop per particle (a list per corner and lane, each its own loop, took 9 s more to compile
        # where the steps are fused and read 2 K LANES starts per particle)
        N = model.particle_count
        e = np.repeat(np.arange(E), K)
        k = np.tile(np.arange(K), E)
        particle = idx.reshape(-1)
        order = np.lexsort((e // LANES, k * LANES + e % LANES, particle))
        self.start = ti.field(ti.i32, shape=N + 1)
        self.start.from_numpy(csr_starts(particle, N))
        n = max(E * K, 1)
        self.group = ti.field(ti.i32, shape=n)
        self.offset = ti.field(ti.i32, shape=n)
        if E:
            self.group.from_numpy((e // LANES)[order].astype(np.int32))
            self.offset.from_numpy((3 * k * LANES + e % LANES)[order].astype(np.int32))

    def _index_port_adjoints(self):
        """Let kernels index the ports' adjoints by a run-time component (Taichi 1.7 computes the stride of
        a vector field's components for the field itself, not for its adjoint); called while a kernel is
        traced, after the fields are materialized."""
        for port in (self.qport, self.qdport):
            if port.grad._get_dynamic_index_stride() is None:
                port.grad._calc_dynamic_index_stride()

    def stability_limits(self):
        return []

    @ti.func
    def apply_forces(self, state: ti.template(), s: ti.template(), t: ti.template()):
        if ti.static(reversing()):
            ti.static(self._index_port_adjoints())
            ti.loop_config(serialize=not self.parallel)
            for i in range(self.model.particle_count):
                # straight into the particle's adjoints: a local summed across the loop would sit on Taichi's
                # AD stack where the steps are fused (measured: the reverse twice as slow)
                for j in range(self.start[i], self.start[i + 1]):
                    g = self.group[j]
                    o = self.offset[j]
                    state.particle_q.grad[s, i] += ti.Vector(
                        [self.qport.grad[g][o + c * LANES] for c in ti.static(range(3))])
                    state.particle_qd.grad[s, i] += ti.Vector(
                        [self.qdport.grad[g][o + c * LANES] for c in ti.static(range(3))])

    @ti.func
    def open(self, g):
        """Zero lane group g's port adjoints (its element term's reverse is about to add into them)."""
        self.qport.grad[g] = ti.Vector([0.0 for _ in ti.static(range(self.qport.n))])
        self.qdport.grad[g] = ti.Vector([0.0 for _ in ti.static(range(self.qdport.n))])

    @ti.func
    def corner(self, port: ti.template(), g, k: ti.template()):
        """Corner k's ports of lane group g, a lane triple."""
        return [ti.Vector([port[g][(3 * k + c) * LANES + l] for l in ti.static(range(LANES))]) for c in ti.static(range(3))]
