"""Element loops on every CPU thread with per-part force buffers: no atomic adds into shared particles,
bit-reproducible forward and reverse, one thread-pool hand-off per element loop.

An element set (tets, cloth triangles, bending edges, springs) of E elements with K corners is cut
into PARTS contiguous parts of about E / PARTS elements.  Each part adds its corner forces into its
OWN row of per-corner buffers, acc_k[part, particle], so two parts never write the same location and
no colouring is needed.  The element loop is a struct-for over a sparse field with one active cell per
part: Taichi's CPU backend hands each cell to a thread as a task of its own (a range-for gives a
thread at least 512 consecutive indices), and the part index is the loop's own index, so Taichi's
`demote_atomics` proves every acc_k[part, i] += f unique to its iteration and emits a plain add
(one pointer per field in the loop body: hence one buffer per corner):

    F (reverse kernel only)  per particle i, per part p touching i: port_k[p, i] = q_i - stop_grad(q_i),
                the same for qd and, per part and row, for each parameter table with a gradient
    E (threads) per part p: for e in the part: acc_k[p, idx[e, k]] += f_k(q, qd, params)
    G           per particle i:  f_i += sum over parts p touching i, corners k of acc_k[p, i];
                then acc_k[p, i] = 0 for the next step

Reverse kernel: the elements add their forces straight into f_i (`PartPorts.put`; G is not emitted
there), since the adjoint of an add is a read: E' reads f_i's adjoint, which threads may share, so no
pass has to copy it into per-part buffers first (that serial pass, G', cost a few per cent of a step's
reverse: benchmarks/MEASURED.md, "Moved from the code").  Taichi runs E', F' in that order.  E' writes the input adjoints into the part's ports (the element reads q = stop_grad(q)
+ port_k[p, i], and the ports hold exact zeros); port_k[p, i] is unique to part p again, so those adds
are plain too.  F' then sums each particle's (and each parameter row's) port adjoints in part order.
Taichi's reverse of a store reads the stored location's adjoint and sets it to 0 (checked: a kernel y =
2 x leaves y.grad = 0 after its reverse), so the reverse of F's stores clears the ports' adjoints for
the step before.  A per-element field an element reads directly (tet_activation,
cloth_bend_rest_angle) gets its adjoint by an atomic add: each element belongs to one part, so the
order, and every bit, stays fixed.

Why this and not colouring or per-element ports (both retired; benchmarks/MEASURED.md): Taichi's thread
pool costs more per parallel loop than a small loop's work (figures: benchmarks/MEASURED.md), so a path
pays per loop, not per element.  Colouring needs a loop per colour and, in reverse, per-element ports (two more
parallel passes over every incidence); here each element loop is one hand-off forward and one in
reverse; the per-particle loop G runs on one thread, F (reverse kernel only) on all of them for a large
mesh (`runtime.serial_loop`: each particle's port sum is its own iteration's).  Work per part is balanced
by element count.

Several element sets on this path (a cloth's triangles and bending edges, an FEM block beside them)
share that struct-for: `merge_part_loops`, run at model finalize, puts the first term of each set into
one `PartLoop`, whose part b does its elements of each set in turn, so a step pays one hand-off per
direction, not one per set (cloth 64x64: see `PartLoop`).  Every set still adds into its own buffers at
row b, and its elements keep their order, so the results are the bits of one loop per set.

The partition and the summation order (parts in order, corners in order, elements in order inside a
part) do not depend on the thread count, so results and gradients are the same bits for any thread
count; a particle's sum differs from the serial path's by rounding only.

Memory: acc_k (no adjoint) and, with gradients, 2 K ports per part and particle (vec3) with their
adjoints, and a port per part and row of each parameter table with a gradient.  The checked forward kernel of
`ti.ad.Tape(validation=True)` gets one plain loop over the elements with atomic adds straight into the
particles (Taichi's data access rule rejects the reused buffers); the reverse kernel is compiled apart.
"""
from typing import Sequence

import numpy as np
import taichi as ti

from .ports import PortsBase, PortTerm, differentiating, reversing, row_value, stopped_state, validating, zeros
from ..core.model import StepTerm
from ..core.runtime import serial_loop

# Parts per element set: 2 would do for two threads, but a struct-for's two tasks often went to one
# thread (the other woke too late; cloth 64x64 bending, kernel profiler: mean 2x the best), and 4 gave
# an even split every time.  A fixed number, not the thread count, so that every result bit is the same
# for any thread count.
PARTS = 4


def part_bounds(start: int, end: int, parts: int = PARTS) -> np.ndarray:
    """(parts + 1,) element bounds of `parts` contiguous parts of [start, end), as equal as can be."""
    if not (isinstance(parts, (int, np.integer)) and parts >= 1):
        raise ValueError(f"parts: expected an integer >= 1, got {parts!r}")
    if end < start:
        raise ValueError(f"[start, end) = [{start}, {end}) is not a range")
    return np.array([start + (end - start) * p // parts for p in range(parts + 1)], dtype=np.int64)


# Unused entries after each part's row of a table port: with a table of one row (a parameter every
# element shares) the parts' entries would lie side by side, and every element of every part adds into
# its part's entry in the reverse pass, so the two threads would write one cache line in turn (false
# sharing).  16 entries of at least 4 bytes put the parts' rows at least 64 bytes apart.
TABLE_PORT_PAD = 16


class _PartTable:
    """A parameter table with a gradient, and its per-part port (parts, R + TABLE_PORT_PAD)."""

    def __init__(self, table, parts):
        self.table = table
        shape = tuple(table.shape)
        self.width = shape[1] if len(shape) == 2 else getattr(table, "n", 0)    # 0: scalar
        self.row_count = shape[0]
        port_shape = (parts, self.row_count + TABLE_PORT_PAD)
        self.port = ti.field(float, shape=port_shape, needs_grad=True) if self.width == 0 else \
            ti.Vector.field(self.width, float, shape=port_shape, needs_grad=True)


@ti.data_oriented
class PartPorts(PortsBase):
    """Per-part force buffers and ports of one element set (E elements of K corners).

    Build it at finalize with the elements' global particle indices (E, K), the parameter tables they
    read through a row index ((table, rows (E,)) pairs) and the element
    ranges [start, end) that separate terms loop over (material groups; default one range); put
    `before()` ahead of the element terms and `after()` behind them in `model.force_terms`.  An element
    term loops with `loops.for_each_element(term, state, s, t, start, end)` and, in its element body
    `element(state, s, t, e, b)`, calls `ports.stop(state)` and `ports.open(e)` and reads / adds through
    `loops.corner_q`, `corner_qd`, `table_row` and `corner_put` (b is the element's part).
    """

    parted = True

    def __init__(self, model, indices, tables: Sequence = (), ranges=None, parts: int = PARTS):
        idx, ported = self._set_up(model, indices, tables)
        for j, (_, rows) in enumerate(tables):
            if np.asarray(rows).size != self.E:
                raise ValueError(f"tables[{j}]: expected one row per element ({self.E}), got {np.asarray(rows).size}")
        if not (isinstance(parts, (int, np.integer)) and 1 <= parts <= 30):
            raise ValueError(f"parts: expected an integer in [1, 30] (one bit per part in a particle's touch mask), "
                             f"got {parts!r}")
        N = model.particle_count
        self.parts = int(parts)
        P = self.parts
        ranges = [(0, self.E)] if ranges is None else [(int(a), int(b)) for a, b in ranges]
        bounds, mask = [], np.zeros(N, dtype=np.int64)
        self._range_index = {}
        for a, b in ranges:
            if not 0 <= a < b <= self.E:
                raise ValueError(f"ranges: [{a}, {b}) is not a non-empty range within [0, {self.E})")
            bd = part_bounds(a, b, P)
            for p in range(P):
                mask[np.unique(idx[bd[p]:bd[p + 1]])] |= 1 << p
            self._range_index[(a, b)] = len(bounds)
            bounds.append(bd)
        bounds = np.asarray(bounds, dtype=np.int32)
        self.part_lo = ti.field(ti.i32, shape=(len(bounds), P))
        self.part_lo.from_numpy(np.ascontiguousarray(bounds[:, :-1]))
        self.part_hi = ti.field(ti.i32, shape=(len(bounds), P))
        self.part_hi.from_numpy(np.ascontiguousarray(bounds[:, 1:]))
        # which parts touch each particle (bit p): F and G visit only those buffers
        self.touch = ti.field(ti.i32, shape=(N,))
        self.touch.from_numpy(mask.astype(np.int32))
        # one active cell per part: a struct-for over it gives each part a CPU task of its own
        self.cells = ti.field(ti.i32)
        ti.root.pointer(ti.i, P).place(self.cells)
        self._activate()
        vec3 = ti.types.vector(3, float)
        self.acc = [vec3.field(shape=(P, N)) for _ in range(self.K)]     # no adjoint: see `put`
        self.qport = [vec3.field(shape=(P, N), needs_grad=True) for _ in range(self.K)] if self.grad else []
        self.qdport = [vec3.field(shape=(P, N), needs_grad=True) for _ in range(self.K)] if self.grad else []
        self.tables = [_PartTable(self.raw_tables[j], P) for j in ported]
        self.max_rows = max([tb.row_count for tb in self.tables], default=0)

    @ti.kernel
    def _activate(self):
        for p in range(self.parts):
            self.cells[p] = 1

    def range_index(self, start, end):
        """Index of the element range [start, end) in `part_lo` / `part_hi` (compile time)."""
        return self._range_index[(start, end)]

    def before(self):
        """The loop that runs before the element terms: the ports (emitted in the reverse kernel only)."""
        return [PartFill(self.model, self)]

    def after(self):
        """The loop that runs after the element terms: the per-particle force sums."""
        return [PartGather(self.model, self)]

    def ported(self):
        """Only the reverse kernel reads through the ports; the forward kernel reads the state and
        tables directly (its ports hold zeros)."""
        return self.grad and differentiating()

    # -- for the element body (stop: PortsBase's) ------------------------------------------------------
    @ti.func
    def open(self, e):
        """Nothing per element: the reverse of `PartFill`'s stores clears the ports' adjoints."""
        pass

    @ti.func
    def q(self, state: ti.template(), s, e, b, k: ti.template(), i):
        v = state.particle_q[s, i]
        if ti.static(self.ported()):
            v = v + self.qport[k][b, i]
        return v

    @ti.func
    def qd(self, state: ti.template(), s, e, b, k: ti.template(), i):
        v = state.particle_qd[s, i]
        if ti.static(self.ported()):
            v = v + self.qdport[k][b, i]
        return v

    @ti.func
    def param(self, j: ti.template(), e, b, row):
        """Row `row` of table j (a scalar, or a vector for vector / 2-D tables)."""
        if ti.static(self.ported() and self.table_slot[j] >= 0):
            return row_value(self.raw_tables[j], row) + self.tables[self.table_slot[j]].port[b, row]
        else:
            return row_value(self.raw_tables[j], row)

    @ti.func
    def put(self, state: ti.template(), s, e, b, k: ti.template(), i, f):
        if ti.static(validating() or reversing()):
            # checked forward kernel: no reused buffer.  Reverse kernel: the adjoint of this add is a read
            # of f_i's adjoint, so the threads share nothing, and no G' copies f_i's adjoint into acc's
            state.particle_f[s, i] += f
        else:
            self.acc[k][b, i] += f               # part b's own row: a plain add (see the module docstring)


@ti.data_oriented
class PartFill(PortTerm):
    """Loop F (reverse kernel only; the forward kernel reads its inputs directly): port_k[p, i] = q_i -
    stop_grad(q_i) (= 0) for the parts p touching particle i, the same for qd, and per part and row of
    each table with a gradient.  Its reverse sums the part's adjoints into q_i's (row r's) in part order.
    One thread, or all of them for a large mesh (`runtime.serial_loop`; each i is its own iteration's)."""

    def __init__(self, model, ports):
        super().__init__(model, ports, reverse_only=True)
        self.serial = True               # no hand-off in forward kernels (it emits nothing there)

    @ti.func
    def apply_forces(self, state: ti.template(), s: ti.template(), t: ti.template()):
        P = ti.static(self.ports.parts)
        if ti.static(self.ports.grad and differentiating() and not validating()):
            ti.loop_config(serialize=ti.static(serial_loop(self.model.particle_count, 2 * self.ports.K)))
            for i in range(self.model.particle_count):
                touch = self.ports.touch[i]
                q = state.particle_q[s, i]
                qd = state.particle_qd[s, i]
                q_ng, qd_ng = stopped_state(state, s, i)
                for p in ti.static(range(P)):
                    if touch & (1 << p):
                        for k in ti.static(range(self.ports.K)):
                            self.ports.qport[k][p, i] = q - q_ng
                            self.ports.qdport[k][p, i] = qd - qd_ng
            if ti.static(self.ports.tables):
                ti.loop_config(serialize=True)
                for r in range(self.ports.max_rows):
                    for tb in ti.static(self.ports.tables):
                        if r < tb.row_count:
                            v = row_value(tb.table, r)
                            v_ng = zeros(tb.width)
                            if r >= 0:           # a block of its own: stop_grad applies to it only
                                ti.stop_grad(tb.table)
                                v_ng = row_value(tb.table, r)
                            for p in ti.static(range(P)):
                                tb.port[p, r] = v - v_ng


@ti.data_oriented
class PartGather(PortTerm):
    """Loop G: f_i += acc_k[p, i] over the parts p touching particle i and the corners k, in that order,
    then acc_k[p, i] = 0 for the next step (the buffers start at zero).  One thread.  Forward kernels
    only: in the reverse kernel the elements add into f_i themselves (`PartPorts.put`)."""

    def __init__(self, model, ports):
        super().__init__(model, ports)
        self.serial = True               # one thread in forward kernels, which is what `fused` asks

    @ti.func
    def apply_forces(self, state: ti.template(), s: ti.template(), t: ti.template()):
        P = ti.static(self.ports.parts)
        # the checked forward kernel and the reverse kernel: the elements add into f_i directly (`put`)
        if ti.static(not validating() and not reversing()):
            ti.loop_config(serialize=True)
            for i in range(self.model.particle_count):
                touch = self.ports.touch[i]
                f = ti.Vector([0.0, 0.0, 0.0])
                for p in ti.static(range(P)):
                    if touch & (1 << p):
                        for k in ti.static(range(self.ports.K)):
                            f += self.ports.acc[k][p, i]
                for p in ti.static(range(P)):
                    if touch & (1 << p):
                        for k in ti.static(range(self.ports.K)):
                            self.ports.acc[k][p, i] = ti.Vector([0.0, 0.0, 0.0])
                state.particle_f[s, i] += f


@ti.func
def part_elements(term: ti.template(), state: ti.template(), s: ti.template(), t: ti.template(),
                  start: ti.template(), end: ti.template(), b):
    """Part b's elements of [start, end), in order (`loops.for_each_element`, `PartLoop`)."""
    r = ti.static(term.ports.range_index(start, end))
    for e in range(term.ports.part_lo[r, b], term.ports.part_hi[r, b]):
        term.element(state, s, t, e, b)


@ti.data_oriented
class PartLoop(StepTerm):
    """One struct-for over the parts that runs the element loops of several element sets (each with
    its own `PartPorts`), part b doing its elements of each set in turn: one thread-pool hand-off per
    step and direction instead of one per set (a hand-off costs 10-30 us of wall clock on a 2-core
    machine; cloth has two sets, triangles and bending edges).  Each set still adds into its own
    buffers at the part's row, so every add stays a plain one and the order within a set is its own
    loop's.  Built by `merge_part_loops`; the terms it runs have `merged` set, and their own
    `loops.for_each_element` emits nothing.

    Measured on vs_warp's cloth64 (2 threads, one process alternating with one loop per set, best of
    10, five runs, named and all gradients): forward 364-451 against 418-512 us per step, 10-19 % less
    in every run; forward + backward 1,340-2,190 against 1,496-2,313, less in 4 of the 5 runs."""

    def __init__(self, model, terms):
        super().__init__(model)
        self.terms = list(terms)
        self.serial = False
        self.path = "parts"
        self.cells = self.terms[0].ports.cells

    def stability_limits(self):
        return []                        # the terms it runs are checked themselves

    @ti.func
    def apply_forces(self, state: ti.template(), s: ti.template(), t: ti.template()):
        # the checked forward kernel of Tape(validation=True): the terms run their own plain loops
        if ti.static(not validating()):
            for b in self.cells:         # one CPU task per part; b is the loop's own index
                for term in ti.static(self.terms):
                    part_elements(term, state, s, t, ti.static(term.element_range[0]), ti.static(term.element_range[1]), b)


def merge_part_loops(model, terms):
    """`terms` (a model's force terms) with the element loops of different element sets on the parts
    path run by one `PartLoop`: one term per set (a set's other terms, e.g. FEM material groups, keep
    their own loops: two loops writing one set's buffers in one struct-for would make Taichi's adds
    atomic), placed after every merged set's `PartFill` and before every `PartGather`.  Unchanged
    when fewer than two sets are on the parts path."""
    chosen, seen = [], set()
    for term in terms:
        ports = getattr(term, "ports", None)
        if getattr(ports, "parted", False) and hasattr(term, "element_range") and id(ports) not in seen:
            if not chosen or ports.parts == chosen[0].ports.parts:
                chosen.append(term)
                seen.add(id(ports))
    if len(chosen) < 2:
        return list(terms)
    port_terms = [t for t in terms if isinstance(t, (PartFill, PartGather)) and id(t.ports) in seen]
    rest = [t for t in terms if not any(t is p for p in port_terms)]
    elements = [k for k, t in enumerate(rest) if id(getattr(t, "ports", None)) in seen]   # every term of those sets
    first, last = elements[0], elements[-1]
    fills = [t for t in port_terms if isinstance(t, PartFill)]
    gathers = [t for t in port_terms if isinstance(t, PartGather)]
    for term in chosen:
        term.merged = True
    return rest[:first] + fills + [PartLoop(model, chosen)] + rest[first:last + 1] + gathers + rest[last + 1:]
