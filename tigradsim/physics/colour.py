"""Element loops on every CPU thread by graph colouring: no atomic adds, bit-reproducible forward and reverse.

An element set (tets, cloth triangles, bending edges, springs) is cut into blocks of consecutive
elements, and the blocks are coloured at finalize so that no two blocks of a colour share a
particle (`choose_blocks`, `colour_blocks`: greedy; a tet box or a cloth grid needs 2-4 colours).
A kernel and its reverse get different loops (Taichi compiles the reverse kernel from the same
Python code; `gather.differentiating` tells which one is being compiled):

Forward kernel: one parallel top-level loop per colour over its blocks, each block's elements in
order on one thread.  A particle is touched by one block of a colour at most, which `loop_unique`
tells Taichi, so the adds compile to plain adds (`demote_atomics`; ~5x cheaper than Taichi's
compare-and-swap loop on this CPU, measured).  Taichi demotes an add only where ONE pointer per
field is used in the loop body, so corner k of every element adds into its own per-particle
accumulator acc_k:

    A  per particle i:    acc_k[i] = 0
    colour c = 0 .. C-1:  parallel over the blocks of c:  for e in the block:
                              acc_k[idx[e, k]] += f_k(q, qd, p)     (inputs read directly)
    S  per particle i:    f_i += acc_0[i] + ... + acc_{K-1}[i]

Reverse kernel (Taichi's reverse mode rejects `loop_unique`): one parallel loop over the elements
with the gather path's per-element ports (`tigradsim.physics.gather`; loop A fills the particles',
`RowFill` and `ChunkFill` the parameters', a row cut into chunks so that a row shared by a whole
mesh is summed in parallel; the element reads q = stop_grad(q) + port; the ports' values are exact
zeros, so the forward kernel skips those stores and reads its inputs directly).  In the reverse
kernel the elements add their forces straight into f_i, and A and S leave the accumulators alone:
the adjoint of an add is a read, here of f_i's adjoint, which threads may share, so the element
loop's reverse writes only its own port adjoints, and the ports' reverses sum them per particle /
parameter row in a fixed order.  The element loop zeroes its port adjoints (a store to a `.grad`
field is kept, in order, in Taichi's reverse kernel, as on the gather path).

Every location is written by one thread per loop in a fixed order, forward and reverse, and the
blocks do not depend on the thread count, so results and gradients are the same bits for any
thread count; a particle's sum runs block by block in colour order, not in element order, so it
differs from the serial path's by rounding.

Why blocks and not single elements: one colour of single elements is spread over the whole mesh
(a tet box needs ~40 colours, each a stride-40 subset), and on FEM 40,960 tets its scattered reads
made the element loop 2.5x slower than in element order (kernel profiler, one thread); blocks
keep element order inside a block and need 2-4 loops instead of ~40 (each loop costs a launch of
the thread pool, ~5-13 us here).  Why the reverse is not coloured too: the same block loops in the
reverse kernel, with per-block ports, measured 1.7x slower than one loop over the elements with
per-element ports (FEM 40,960 tets, one thread).

The checked forward kernel of `ti.ad.Tape(validation=True)` (Taichi's global data access rule,
which rejects any buffer reused step after step) gets the colour loops with atomic adds straight
into the particles' forces and no accumulators or ports; the reverse kernel is compiled apart.

Elements are not reordered (handles such as `SoftMesh.tet_start` keep their meaning).

Measured against `tigradsim.physics.parts` (per-part buffers, one thread-pool hand-off per element loop)
in one process, 2 cores, best of 5 (bench_fem / bench_cloth --threads-compare --paths parts,colour,
2026-12-04), speedup on 2 threads over serial on 1, forward / forward+backward: FEM box32 colour 1.19x /
0.99x, parts 1.50x / 1.30x; cloth64 colour 0.91x / 0.90x, parts 1.35x / 1.19x.  "auto" uses parts.
"""
from typing import Sequence

import numpy as np
import taichi as ti
from taichi.lang.misc import loop_unique

from .gather import (TASK_STRIDE, ElementPorts, PortFill, _PortTerm, differentiating, reversing, row_value,
                     validating, zeros)


# Block sizes tried (elements per block) and the fewest blocks a colour should have: a colour's blocks
# are handed to the threads one at a time, so with 8 or more per colour two threads (four, nearly)
# finish a colour within one block of each other.  Fixed numbers, not the thread count, so that the
# summation order, and so every result bit, is the same for any thread count.
BLOCK_SIZES = tuple(2 ** k for k in range(4, 14))
MIN_BLOCKS_PER_COLOUR = 8


def colour_blocks(indices, size: int) -> np.ndarray:
    """Greedy colouring of blocks of `size` consecutive elements by shared particles: (ceil(E / size),)
    int colour of each block, such that no two blocks of one colour share a particle.  Blocks are
    taken in order and each gets the lowest colour none of its particles has yet (size 1: a
    colouring of single elements).

    indices: (E, K) particle indices of each element's corners.
    """
    idx = np.asarray(indices, dtype=np.int64)
    if idx.ndim != 2:
        raise ValueError(f"indices: expected shape (E, K), got {idx.shape}")
    if not (isinstance(size, (int, np.integer)) and size >= 1):
        raise ValueError(f"size: expected an integer >= 1, got {size!r}")
    used = {}                                   # particle -> bit mask of the colours of its blocks
    colours = np.empty((len(idx) + size - 1) // size, dtype=np.int64)
    for b in range(len(colours)):
        verts = np.unique(idx[b * size:(b + 1) * size]).tolist()
        mask = 0
        for i in verts:
            mask |= used.get(i, 0)
        c = (~mask & (mask + 1)).bit_length() - 1   # lowest colour not in mask
        bit = 1 << c
        for i in verts:
            used[i] = used.get(i, 0) | bit
        colours[b] = c
    return colours


def choose_blocks(indices):
    """(size, colours): the block size of `BLOCK_SIZES` whose colouring has the fewest colours among
    those with at least MIN_BLOCKS_PER_COLOUR blocks in every colour (ties: the smaller size).  If
    none qualifies (a small mesh), the size whose smallest colour has the most blocks."""
    idx = np.asarray(indices)
    best, fallback = None, None
    for size in BLOCK_SIZES:
        if size > 1 and size * MIN_BLOCKS_PER_COLOUR > len(idx) and fallback is not None:
            break                               # too few blocks for any colour to qualify
        col = colour_blocks(idx, size)
        counts = np.bincount(col)
        if counts.min() >= MIN_BLOCKS_PER_COLOUR and (best is None or len(counts) < best[2]):
            best = (size, col, len(counts))
        if fallback is None or counts.min() > fallback[2]:
            fallback = (size, col, counts.min())
    chosen = best if best is not None else fallback
    return chosen[0], chosen[1]


@ti.data_oriented
class ColourPorts(ElementPorts):
    """Block colouring and per-corner accumulators (forward kernel), and the gather path's per-element
    ports (reverse kernel), of one element set (E elements of K corners).

    Build it at finalize with the elements' global particle indices (E, K), the parameter tables
    they read through a row index ((table, rows (E,)) pairs, as `gather.ElementPorts`) and the
    element ranges [start, end) that separate terms loop over (material groups; default one
    range); put `before()` ahead of the element terms and `after()` behind them in
    `model.force_terms`.  An element term loops with `gather.for_each_element(term, state, s, t,
    start, end)` and, in its element body `element(state, s, t, e, b)`, calls `ports.stop(state)`
    and `ports.open(e)` and reads / adds through `gather.corner_q`, `corner_qd`, `table_row` and
    `corner_put` (as on the gather path).
    """

    coloured = True

    def __init__(self, model, indices, tables: Sequence = (), ranges=None):
        super().__init__(model, indices, tables, slots=False)
        idx = np.asarray(indices, dtype=np.int64)
        ranges = [(0, self.E)] if ranges is None else [(int(a), int(b)) for a, b in ranges]
        lo, hi, self._spans, self.block_size = [], [], {}, {}
        for a, b in ranges:
            if not 0 <= a < b <= self.E:
                raise ValueError(f"ranges: [{a}, {b}) is not a non-empty range within [0, {self.E})")
            size, col = choose_blocks(idx[a:b])
            order = np.argsort(col, kind="stable")                  # blocks by colour, in order within one
            starts = len(lo) + np.concatenate([[0], np.cumsum(np.bincount(col))])
            self._spans[(a, b)] = [(int(starts[c]), int(starts[c + 1])) for c in range(len(starts) - 1)]
            self.block_size[(a, b)] = size
            lo.extend((a + order * size).tolist())
            hi.extend(np.minimum(a + (order + 1) * size, b).tolist())
        self.colour_count = max(len(v) for v in self._spans.values())
        self.block_count = len(lo)
        self.block_lo = ti.field(ti.i32, shape=(len(lo),))
        self.block_lo.from_numpy(np.asarray(lo, dtype=np.int32))
        self.block_hi = ti.field(ti.i32, shape=(len(hi),))
        self.block_hi.from_numpy(np.asarray(hi, dtype=np.int32))
        vec3 = ti.types.vector(3, float)
        self.acc = [vec3.field(shape=(model.particle_count,)) for _ in range(self.K)]   # no adjoint: see `put`
        self.chunks = [_Chunks(tb) for tb in self.tables]
        self.table_chunks = list(zip(self.tables, self.chunks))
        self.max_rows = max([tb.row_count for tb in self.tables], default=0)
        self.max_chunks = max([ch.count for ch in self.chunks], default=0)

    def spans(self, start, end):
        """The colour loops of elements [start, end): per colour, the range [first, last + 1) of its
        blocks in `block_lo` / `block_hi` (block j: elements [block_lo[j], block_hi[j]))."""
        return self._spans[(start, end)]

    def before(self):
        """The loops that run before the element terms: cleared accumulators (with, in the reverse
        kernel, the gather path's particle ports), then the parameter ports (reverse kernel only)."""
        return [CornerFill(self.model, self)] + \
            ([RowFill(self.model, self, reverse_only=True), ChunkFill(self.model, self, reverse_only=True)]
             if self.tables else [])

    def after(self):
        """The loop that runs after the element terms: the per-particle force sums."""
        return [CornerGather(self.model, self)]

    # -- for the element body (stop, open, q, qd, param: `ElementPorts`') ----------------------------
    def ported(self):
        """Only the reverse kernel reads through the ports; the forward kernel reads the state and
        tables directly (its ports hold zeros)."""
        return self.grad and differentiating()

    @ti.func
    def put(self, state: ti.template(), s, e, b, k: ti.template(), i, f):
        if ti.static(reversing() or validating()):
            # reverse kernel: the adjoint of this add is a read of f_i's adjoint, which threads may share.
            # Checked forward kernel: no reused buffer (atomic adds)
            state.particle_f[s, i] += f
        else:
            self.acc[k][loop_unique(i)] += f     # no other block of this colour has particle i: a plain add


# Elements per chunk of a parameter row (reverse kernel): a row shared by a whole mesh is summed
# chunk by chunk in parallel, then chunk sums per row.
ROW_CHUNK = 1024


class _Chunks:
    """A parameter table's rows cut into chunks of at most ROW_CHUNK elements (of `gather._Table`'s
    per-row element lists), and one port per chunk."""

    def __init__(self, tb):
        start = tb.row_start.to_numpy()
        lo, row_first = [], [0]
        for r in range(tb.row_count):
            lo.extend(range(start[r], start[r + 1], ROW_CHUNK))
            row_first.append(len(lo))
        hi = [min(a + ROW_CHUNK, start[np.searchsorted(start, a, side="right")]) for a in lo]
        self.count = len(lo)
        self.lo = ti.field(ti.i32, shape=(max(self.count, 1),))
        self.hi = ti.field(ti.i32, shape=(max(self.count, 1),))
        self.row_first = ti.field(ti.i32, shape=(tb.row_count + 1,))
        if self.count:
            self.lo.from_numpy(np.asarray(lo, dtype=np.int32))
            self.hi.from_numpy(np.asarray(hi, dtype=np.int32))
        self.row_first.from_numpy(np.asarray(row_first, dtype=np.int32))
        shape = (max(self.count, 1),)
        self.port = ti.field(float, shape=shape, needs_grad=True) if tb.width == 0 else \
            ti.Vector.field(tb.width, float, shape=shape, needs_grad=True)


@ti.data_oriented
class RowFill(_PortTerm):
    """Loop D1 (reverse kernel): cport[c] = p_r - stop_grad(p_r) (= 0) for every chunk c of row r, every
    table in one loop over rows: its reverse sums a row's chunk adjoints in order."""

    @ti.func
    def apply_forces(self, state: ti.template(), s: ti.template(), t: ti.template()):
        if ti.static(differentiating()):
            for r in range(self.ports.max_rows):
                for tb, ch in ti.static(self.ports.table_chunks):
                    if r < tb.row_count:
                        for c in range(ch.row_first[r], ch.row_first[r + 1]):
                            # the row is read inside the inner loop (see gather.ParamFill)
                            v = row_value(tb.table, r)
                            v_ng = zeros(tb.width)
                            if c >= 0:       # a block of its own: stop_grad applies to it only
                                ti.stop_grad(tb.table)
                                v_ng = row_value(tb.table, r)
                            ch.port[c] = v - v_ng


@ti.data_oriented
class ChunkFill(_PortTerm):
    """Loop D2 (reverse kernel): pport[e] = cport[c] (= 0) for the elements e of chunk c, every table in
    one loop over chunks: its reverse sums the chunk's element adjoints in order (in parallel over
    chunks, where `gather.ParamFill` runs a shared row's elements on one thread)."""

    @ti.func
    def apply_forces(self, state: ti.template(), s: ti.template(), t: ti.template()):
        if ti.static(differentiating()):
            for jc in range(self.ports.max_chunks * TASK_STRIDE):     # one chunk per CPU task (for_each_element)
                if jc % TASK_STRIDE == 0:
                    c = jc // TASK_STRIDE
                    for tb, ch in ti.static(self.ports.table_chunks):
                        if c < ch.count:
                            for k in range(ch.lo[c], ch.hi[c]):
                                tb.port[tb.row_elem[k]] = ch.port[c]


@ti.data_oriented
class CornerFill(PortFill):
    """Loop A: acc_k[i] = 0 (a store before this step's reads: Taichi's validation mode rejects
    zeroing after them) and, in the reverse kernel, the gather path's particle ports (`PortFill`)."""

    @ti.func
    def apply_forces(self, state: ti.template(), s: ti.template(), t: ti.template()):
        for i in range(self.model.particle_count):
            if ti.static(not validating() and not reversing()):
                for k in ti.static(range(self.ports.K)):
                    self.ports.acc[k][i] = ti.Vector([0.0, 0.0, 0.0])
            if ti.static(self.ports.grad and differentiating()):
                self.fill(state, s, i)


@ti.data_oriented
class CornerGather(_PortTerm):
    """Loop S: f_i += acc_0[i] + ... + acc_{K-1}[i].  Not in the checked forward kernel nor in the
    reverse kernel: there the elements add into f_i directly (`ColourPorts.put`)."""

    @ti.func
    def apply_forces(self, state: ti.template(), s: ti.template(), t: ti.template()):
        if ti.static(not validating() and not reversing()):
            for i in range(self.model.particle_count):
                f = ti.Vector([0.0, 0.0, 0.0])
                for k in ti.static(range(self.ports.K)):
                    f += self.ports.acc[k][i]
                state.particle_f[s, i] += f
