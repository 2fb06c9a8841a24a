"""Element loops on every CPU thread without atomic adds, bit-reproducible forward and reverse.

An element loop (tets, cloth triangles, bending edges, springs) reads the state of its K
corner particles and adds a force into each.  Run in parallel, the forward adds race (atomic
adds, ~9 ns per vec3 on this CPU against ~1.3 ns for a plain add, and an order that changes run
to run); and Taichi's reverse of the corner READS is the same racing scatter into the state's
adjoint.  Serially, Taichi demotes both to plain adds, which is why the element loops ran on one
thread.  Here each element term runs as four loops, none of which adds into a location another
iteration touches (`PortFill`, `ParamFill`, the element term itself, `ForceGather`):

    A  per particle i:   qport_k[e] = q_i - stop_grad(q_i)        for each incidence (e, k) of i
    D  per table row r:  pport[e]   = p_r - stop_grad(p_r)         for each element e using row r
    B  per element e:    q_k = stop_grad(q[idx[e, k]]) + qport_k[e],  p = stop_grad(p[row[e]]) + pport[e]
                         force_k[e] = f_k(q, qd, p)                 (a store, element-owned)
    C  per particle i:   f_i += force_k[e]                          for each incidence (e, k) of i

The ports hold exact zeros, so B computes the same forces as the serial loop (only the order
of the final per-particle sums differs: incidences by corner, then element).  Their job is the
reverse pass, which Taichi runs loop by loop backwards.  There B adds its forces straight into f_i
and C is not emitted (the adjoint of an add is a read, of f_i's adjoint here, which threads may
share); B' writes each element's input adjoints into its OWN port slots (stop_grad keeps it
from scattering into the state), A' sums a particle's port slots into q_i's adjoint in a fixed
order, D' a row's port slots into the parameter's adjoint in element order.  Every adjoint
location is written by one thread in a fixed order, so gradients are bit-reproducible for
any thread count.  B reads q through stop_grad, not through the ports' values, so its
recomputation in the reverse kernel uses the current step's state although the element
buffers (no step index: O(E), not O(E T) memory) hold the last step's.

The ports' adjoints accumulate across steps, so B zeroes them where the reverse pass is about to
accumulate into them: a store to a `.grad` field is kept, in order, in Taichi's reverse kernel
(checked against the serial path in tests/test_parallel_elements.py).

Memory: 3 K vec3 per element (ports for q and qd, forces), the ports' adjoints, and one port per
element and per parameter table.  A step becomes one kernel launch with these loops
(the Simulator fuses a run of steps into one launch only when every loop is serial).
"""
from typing import Sequence

import numpy as np
import taichi as ti
from taichi.lang import impl
from taichi.lang.enums import AutodiffMode

from ..core.model import StepTerm, has_grad
from ..core.runtime import scatter_mode

# Measured on this 2-core machine while shared with other jobs (load 5-7; f32, us per step, forward
# / forward+backward, best of 5-7 in one process, alternating with the serial path): FEM 40,960
# tets: serial 1,916 / 9,754, gather 2 threads 7,152 / 15,025, 1 thread 6,292 / 13,144; cloth
# 64x64: serial 2,483 / 13,144, gather 2 threads 2,597 / 6,578, 1 thread 10,819 / 26,439.  Runs
# disagreed by 2-4x; the kernel profiler (FEM, 1 thread) put the element loop at ~3x the whole
# serial step and each port / gather loop at about one serial step: per-iteration cost of Taichi's
# parallel range-for and O(E) port traffic, not atomics.  "auto" never chooses this path; on CPUs
# it chooses `parts` for large element sets (below).

# "auto" runs an element set of at least this many elements on the parts path (`physics.parts`) on a
# CPU with 2 or more threads, smaller ones serially.  Measured on 2 cores (f32, us per step, forward /
# forward+backward, serial on 1 thread -> parts on 2; vs_warp's scenes, named gradients): FEM 40,960
# tets 996 / 2,692 -> 665-688 / 1,912-2,038; 5,120 tets 133 / 345 -> 169 / 487; cloth 64x64 (8,192
# triangles and 12,160 bending edges, two sets) 453 / 1,512 -> 415-462 / 1,404-1,527; cloth 32x32
# 107 / 361 -> 204 / 612.  bench_fem / bench_cloth --threads-compare (damping, every gradient): box32
# 1.50x / 1.30x, cloth64 1.35x / 1.19x.  Each parallel loop costs a thread-pool hand-off (35-60 us
# here) and a model with one stops fusing its steps into one launch (`Simulator.fused`), so parts pays
# off from ~10 thousand elements per set; 8,192 puts 40,960-tet FEM on it (and 17,280: 310 / 812 against
# 410 / 1,083 serial), 5,120-tet FEM not.  Cloth has its own thresholds since its loops run in lanes on
# one thread (`cloth.CLOTH_PARTS_MIN_TRIANGLES`, `CLOTH_PARTS_MIN_THREADS`).
PARTS_MIN_ELEMENTS = 8192


def element_path(element_count: int, parts_min_elements: int = PARTS_MIN_ELEMENTS, parts_min_threads: int = 2) -> str:
    """How an element loop of `element_count` elements adds its forces, decided when the term is
    built: "serial" (one thread, plain adds), "parallel" (threads, atomic adds: GPUs), "gather"
    (threads, no atomic adds, bit-reproducible: this module), "colour" (threads, no atomic adds,
    bit-reproducible: `tigradsim.physics.colour`) or "parts" (threads, per-part buffers, no atomic
    adds into particles, bit-reproducible: `tigradsim.physics.parts`).

    scatter mode (`tgs.init(scatter=...)`): the five paths are obeyed; "auto" gives "parallel" where
    `runtime.serial_scatter` says not serial (GPUs, CPUs with many threads unless `deterministic()`),
    else "parts" for sets of at least `parts_min_elements` (PARTS_MIN_ELEMENTS; cloth: `cloth.CLOTH_PARTS_MIN_TRIANGLES`)
    elements on a CPU with `parts_min_threads` (2; cloth: 3) or more threads, else "serial".
    """
    from ..core.runtime import serial_scatter
    mode = scatter_mode()
    if mode in ("serial", "parallel", "gather", "colour", "parts"):
        return mode
    if not serial_scatter():
        return "parallel"
    cfg = impl.current_cfg()
    if cfg.arch == ti.cpu and cfg.cpu_max_num_threads >= parts_min_threads and element_count >= parts_min_elements:
        return "parts"
    return "serial"


def csr_starts(keys, count: int) -> np.ndarray:
    """(count + 1,) int32 starts of a CSR list whose entries are sorted by key (ints in [0, count)):
    key r's entries are [starts[r], starts[r + 1])."""
    starts = np.zeros(count + 1, dtype=np.int32)
    starts[1:] = np.cumsum(np.bincount(np.asarray(keys, dtype=np.int64).reshape(-1), minlength=count))
    return starts


def _compiling_mode():
    kernel = impl.get_runtime().current_kernel
    return AutodiffMode.NONE if kernel is None else kernel.autodiff_mode


# Loop indices per block of the colour path's loops (see `for_each_element`): Taichi 1.7.4 gives each
# CPU task max(512, n / (32 threads)) .. 1024 indices of a parallel loop of n.
TASK_STRIDE = 512


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
    (Taichi's global data access rule: it rejects a buffer reused step after step, as the gather and
    colour paths' buffers are).  Used at compile time only."""
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
    coloured = False
    parted = False


NO_PORTS = NoPorts()


class _Table:
    """A differentiable parameter table read per element through a row index, and its port.

    table: scalar field (R,), vector field (R,) of n, or scalar field (R, W) (read as a W-vector).
    rows: (E,) numpy row of each element.
    """

    def __init__(self, table, rows, element_count):
        self.table = table
        shape = tuple(table.shape)
        self.width = shape[1] if len(shape) == 2 else getattr(table, "n", 0)    # 0: scalar
        rows = np.asarray(rows, dtype=np.int64).reshape(-1)
        if len(rows) != element_count:
            raise ValueError(f"rows: expected one row per element ({element_count}), got {len(rows)}")
        R = shape[0]
        order = np.argsort(rows, kind="stable")
        start = csr_starts(rows, R)
        self.row_count = R
        self.row_start = ti.field(ti.i32, shape=(R + 1,))
        self.row_start.from_numpy(start)
        self.row_elem = ti.field(ti.i32, shape=(element_count,))
        self.row_elem.from_numpy(order.astype(np.int32))
        self.port = ti.field(float, shape=(element_count,), needs_grad=True) if self.width == 0 else \
            ti.Vector.field(self.width, float, shape=(element_count,), needs_grad=True)


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
    """What every set of ports shares (`ElementPorts`, `colour.ColourPorts`, `parts.PartPorts`): the checked
    element indices, which parameter tables get ports (those with gradients), and `stop`."""

    active = True
    coloured = False
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


@ti.data_oriented
class ElementPorts(PortsBase):
    """Incidences, ports and force slots of one element set (E elements of K corners).

    Build it at finalize with the elements' global particle indices (E, K) and the parameter
    tables they read through a row index; put `before()` ahead of the element term(s) and
    `after()` behind them in `model.force_terms`.  The element term, in its loop over e:
      * calls `ports.stop(state)` and `ports.open(e)` first (with `ti.static(ports.grad)`, the
        table fields need `ti.stop_grad(table)` too: `ports.stop` does all of them);
      * reads corner k's position / velocity with `ports.q(state, s, e, b, k, i)` / `ports.qd(...)`,
        a table's row with `ports.param(j, e, b, row)` (j: position in `tables`; b: the block
        index `for_each_element` passes, used by `colour.ColourPorts`);
      * stores corner k's force with `ports.put(state, s, e, b, k, i, f)` (exactly once per corner and step).
    """

    def __init__(self, model, indices, tables: Sequence = (), slots: bool = True):
        idx, ported = self._set_up(model, indices, tables)
        N = model.particle_count
        start = np.stack([csr_starts(idx[:, k], N) for k in range(self.K)])
        elem = np.stack([np.argsort(idx[:, k], kind="stable") for k in range(self.K)]).astype(np.int32)
        self.start = ti.field(ti.i32, shape=(self.K, N + 1))
        self.start.from_numpy(start)
        self.elem = ti.field(ti.i32, shape=(self.K, self.E))
        self.elem.from_numpy(elem)
        vec3 = ti.types.vector(3, float)
        # slots=False (a subclass that adds forces its own way): no force slots.  No adjoint: in the reverse
        # kernel the elements add into f_i directly (`put`)
        self.force = [vec3.field(shape=(self.E,)) for _ in range(self.K)] if slots else []
        self.qport = [vec3.field(shape=(self.E,), needs_grad=True) for _ in range(self.K)] if self.grad else []
        self.qdport = [vec3.field(shape=(self.E,), needs_grad=True) for _ in range(self.K)] if self.grad else []
        self.tables = [_Table(*tables[j], self.E) for j in ported]

    def before(self):
        """The loops that run before the element term(s): the ports (only with gradients)."""
        if not self.grad:
            return []
        return [PortFill(self.model, self)] + [ParamFill(self.model, self, j) for j in range(len(self.tables))]

    def after(self):
        """The loop that runs after the element term(s): the per-particle force sums."""
        return [ForceGather(self.model, self)]

    def ported(self):
        """Whether the kernel being compiled reads the state and tables through the ports (a
        compile-time choice; here whenever the model has gradients)."""
        return self.grad

    # -- for the element term's loop body (stop: PortsBase's) ------------------
    @ti.func
    def open(self, e):
        """Zero element e's port adjoints: the reverse of this loop accumulates into them and the
        reverse of `PortFill` / `ParamFill` (later in the reverse pass) consumes them."""
        if ti.static(self.ported()):
            for k in ti.static(range(self.K)):
                self.qport[k].grad[e] = ti.Vector([0.0, 0.0, 0.0])
                self.qdport[k].grad[e] = ti.Vector([0.0, 0.0, 0.0])
            for tb in ti.static(self.tables):
                tb.port.grad[e] = zeros(tb.width)

    @ti.func
    def q(self, state: ti.template(), s, e, b, k: ti.template(), i):
        v = state.particle_q[s, i]
        if ti.static(self.ported()):
            v = v + self.qport[k][e]
        return v

    @ti.func
    def qd(self, state: ti.template(), s, e, b, k: ti.template(), i):
        v = state.particle_qd[s, i]
        if ti.static(self.ported()):
            v = v + self.qdport[k][e]
        return v

    @ti.func
    def param(self, j: ti.template(), e, b, row):
        """Row `row` of table j (a scalar, or a vector for vector / 2-D tables)."""
        if ti.static(self.ported() and self.table_slot[j] >= 0):
            return row_value(self.raw_tables[j], row) + self.tables[self.table_slot[j]].port[e]
        else:
            return row_value(self.raw_tables[j], row)

    @ti.func
    def put(self, state: ti.template(), s, e, b, k: ti.template(), i, f):
        if ti.static(reversing()):
            # the adjoint of this add is a read of f_i's adjoint, which threads may share: no loop C' has to
            # hand f_i's adjoint to the slots first
            state.particle_f[s, i] += f
        else:
            self.force[k][e] = f


class _PortTerm(StepTerm):
    """A loop of the gather path: parallel, no force of its own, no stability limit."""

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


@ti.data_oriented
class PortFill(_PortTerm):
    """Loop A: qport_k[e] = q_i - stop_grad(q_i) (= 0) for every incidence (e, k) of particle i."""

    @ti.func
    def apply_forces(self, state: ti.template(), s: ti.template(), t: ti.template()):
        if ti.static(not self.reverse_only or differentiating()):
            for i in range(self.model.particle_count):
                self.fill(state, s, i)

    @ti.func
    def fill(self, state: ti.template(), s, i):
        """Particle i's ports of step s (the body of the loop over particles)."""
        q_ng, qd_ng = stopped_state(state, s, i)
        for k in ti.static(range(self.ports.K)):
            for j in range(self.ports.start[k, i], self.ports.start[k, i + 1]):
                # q is read inside the inner loop: a differentiable local carried into a
                # dynamic inner loop gets wrong gradients in Taichi 1.7.4 (measured).
                e = self.ports.elem[k, j]
                self.ports.qport[k][e] = state.particle_q[s, i] - q_ng      # exactly 0, d/dq = 1
                self.ports.qdport[k][e] = state.particle_qd[s, i] - qd_ng


@ti.data_oriented
class ParamFill(_PortTerm):
    """Loop D: pport[e] = p_r - stop_grad(p_r) (= 0) for every element e reading row r of one table."""

    def __init__(self, model, ports, j, reverse_only: bool = False):
        super().__init__(model, ports, reverse_only)
        self.tb = ports.tables[j]

    @ti.func
    def apply_forces(self, state: ti.template(), s: ti.template(), t: ti.template()):
        if ti.static(not self.reverse_only or differentiating()):
            for r in range(self.tb.row_count):
                for j in range(self.tb.row_start[r], self.tb.row_start[r + 1]):
                    # The row is read inside the inner loop: a local read before it and used inside
                    # gives wrong gradients or crashes Taichi 1.7.4's reverse pass (measured).
                    v = row_value(self.tb.table, r)
                    v_ng = zeros(self.tb.width)
                    if j >= 0:                   # a block of its own: stop_grad applies to it only
                        ti.stop_grad(self.tb.table)
                        v_ng = row_value(self.tb.table, r)
                    self.tb.port[self.tb.row_elem[j]] = v - v_ng


@ti.data_oriented
class ForceGather(_PortTerm):
    """Loop C: f_i += force_k[e] over particle i's incidences (corner, then element order).  Forward
    kernels only: in the reverse kernel the elements add into f_i themselves (`ElementPorts.put`)."""

    @ti.func
    def apply_forces(self, state: ti.template(), s: ti.template(), t: ti.template()):
        if ti.static(not reversing()):
            for i in range(self.model.particle_count):
                for k in ti.static(range(self.ports.K)):
                    for j in range(self.ports.start[k, i], self.ports.start[k, i + 1]):
                        state.particle_f[s, i] += self.ports.force[k][self.ports.elem[k, j]]


# -- reading an element's inputs on either path (ports: an ElementPorts, or NO_PORTS) ----------------

@ti.func
def corner_q(ports: ti.template(), state: ti.template(), s, e, b, k: ti.template(), i):
    """Position [m] of corner k (particle i) of element e (in block b of `for_each_element`), at slot s."""
    if ti.static(not ports.active):
        return state.particle_q[s, i]
    else:
        return ports.q(state, s, e, b, k, i)


@ti.func
def corner_qd(ports: ti.template(), state: ti.template(), s, e, b, k: ti.template(), i):
    """Velocity [m/s] of corner k (particle i) of element e (in block b), at slot s."""
    if ti.static(not ports.active):
        return state.particle_qd[s, i]
    else:
        return ports.qd(state, s, e, b, k, i)


@ti.func
def table_row(ports: ti.template(), j: ti.template(), table: ti.template(), e, b, row):
    """Row `row` of `table` (the ports' table j on the gather and colour paths) as element e (in block b) reads it."""
    if ti.static(not ports.active):
        return row_value(table, row)
    else:
        return ports.param(j, e, b, row)


@ti.func
def corner_put(ports: ti.template(), state: ti.template(), s, e, b, k: ti.template(), i, f):
    """Add force f [N] on corner k (particle i) of element e (in block b) at slot s: into the particle (serial and
    parallel paths), into the element's slot (gather) or into the corner's accumulator (colour).
    Call it exactly once per corner and element."""
    if ti.static(not ports.active):
        state.particle_f[s, i] += f
    else:
        ports.put(state, s, e, b, k, i, f)


@ti.func
def part_elements(term: ti.template(), state: ti.template(), s: ti.template(), t: ti.template(),
                  start: ti.template(), end: ti.template(), b):
    """Part b's elements of [start, end), in order (parts path: `for_each_element`, `parts.PartLoop`)."""
    r = ti.static(term.ports.range_index(start, end))
    for e in range(term.ports.part_lo[r, b], term.ports.part_hi[r, b]):
        term.element(state, s, t, e, b)


@ti.func
def for_each_element(term: ti.template(), state: ti.template(), s: ti.template(), t: ti.template(),
                     start: ti.template(), end: ti.template()):
    """Run `term.element(state, s, t, e, b)` for the elements e in [start, end): one loop, serialized
    or not as `term.serial` says (b = 0); or (parts path, `term.ports.parted`) one struct-for over the
    parts b, each part's elements in order (`tigradsim.physics.parts`); or (a serial term with
    `element_lanes(state, s, t, base, end)`, forward kernels) one loop over groups of term.forward_lanes elements
    (`tigradsim.physics.lanes`); or (colour path,
    `term.ports.coloured`, forward kernels) one parallel loop per colour over its blocks b, each block's
    elements in order (`tigradsim.physics.colour`; its reverse kernel has the one loop); or nothing, for
    a term whose elements a `parts.PartLoop` runs with other element sets' (`term.merged`), except in
    the checked forward kernel of `Tape(validation=True)`, where every term runs its own plain loop."""
    if ti.static(getattr(term, "merged", False) and not validating()):
        pass
    elif ti.static(getattr(term, "in_lanes", False) and not differentiating() and not validating()):
        # one thread, forward kernels: term.forward_lanes elements per iteration (`physics.lanes`); derivative
        # kernels run the term's reverse in lanes (cloth: `virtual_work`) or one element at a time (`element`)
        n = ti.static(term.forward_lanes)
        ti.loop_config(serialize=True)
        for g in range((end - start + n - 1) // n):
            term.element_lanes(state, s, t, start + g * n, end)
    elif ti.static(term.ports.parted and not validating()):
        for b in term.ports.cells:           # one CPU task per part; b is the loop's own index
            part_elements(term, state, s, t, start, end, b)
    elif ti.static(term.ports.coloured and not differentiating()):
        for span in ti.static(term.ports.spans(start, end)):
            # One block per TASK_STRIDE loop indices: Taichi 1.7.4's CPU backend hands a thread at
            # least 512 consecutive indices (cpu_block_dim_adaptive, overriding loop_config), so a
            # loop over ~10 blocks would run on one thread (measured: no speedup on 2 threads).
            for j in range(span[0] * TASK_STRIDE, span[1] * TASK_STRIDE):
                if j % TASK_STRIDE == 0:
                    b = j // TASK_STRIDE
                    for e in range(term.ports.block_lo[b], term.ports.block_hi[b]):
                        term.element(state, s, t, e, b)
    else:
        ti.loop_config(serialize=term.serial)
        for e in range(start, end):
            term.element(state, s, t, e, 0)


def make_ports(path: str, model, indices, tables: Sequence = (), ranges=None):
    """The ports an element set needs on `path` (`element_path`): None (serial, parallel), an
    `ElementPorts` (gather) or a `colour.ColourPorts` (colour; `ranges`: the [start, end) element
    ranges of its terms, default one)."""
    if path == "gather":
        return ElementPorts(model, indices, tables)
    if path == "colour":
        from .colour import ColourPorts
        return ColourPorts(model, indices, tables, ranges)
    if path == "parts":
        from .parts import PartPorts
        return PartPorts(model, indices, tables, ranges)
    return None


def wrap_terms(ports, terms: Sequence) -> list:
    """`terms` with the ports' loops before and after them (no ports: `terms` alone)."""
    return (ports.before() + list(terms) + ports.after()) if ports is not None else list(terms)
