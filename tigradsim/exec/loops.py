"""The one interface element kernels use, and the one place that decides how their loops run.

An element term (tets, cloth triangles, bending edges, springs) is built with a path from
`element_path(element_count)` and the ports that path needs from `make_ports`; `wrap_terms` puts the
ports' own loops around the term in the model's force terms.  Its kernel loops with
`for_each_element(term, state, s, t, start, end)`, which calls `term.element(state, s, t, e, b)`, and
the element body reads and adds only through `corner_q`, `corner_qd`, `table_row` and `corner_put`:
the physics never asks which path it is on.

Paths: "serial" (one thread, plain adds: Taichi demotes the atomics of a serial loop), "parallel"
(threads, atomic adds: GPUs and CPUs with many threads) and "parts" (threads, per-part force buffers,
bit-reproducible: `tigradsim.exec.parts`).  A serial term with `element_lanes` runs its forward
kernel in lanes of several elements per iteration (`tigradsim.exec.lanes`).
"""
import taichi as ti
from taichi.lang import impl

from .parts import PartPorts, part_elements
from .ports import NO_PORTS, csr_starts, differentiating, reversing, row_value, stopped_state, validating
from ..core.runtime import scatter_mode, serial_scatter

__all__ = ["PARTS_MIN_ELEMENTS", "element_path", "make_ports", "wrap_terms", "for_each_element", "corner_q",
           "corner_qd", "table_row", "corner_put", "NO_PORTS", "csr_starts", "differentiating", "reversing",
           "row_value", "stopped_state"]

# "auto" runs an element set of at least this many elements on the parts path on a CPU with 2 or more
# threads, smaller ones serially: each parallel loop costs a thread-pool hand-off and a model with one
# stops fusing its steps into one launch (`Simulator.fused`), so parts pays off from ~10 thousand
# elements per set (figures: benchmarks/MEASURED.md).  Cloth has its own thresholds since its loops run
# in lanes on one thread (`cloth.CLOTH_PARTS_MIN_TRIANGLES`, `CLOTH_PARTS_MIN_THREADS`).
PARTS_MIN_ELEMENTS = 8192

PATHS = ("serial", "parallel", "parts")


def element_path(element_count: int, parts_min_elements: int = PARTS_MIN_ELEMENTS, parts_min_threads: int = 2) -> str:
    """How an element loop of `element_count` elements adds its forces, decided when the term is
    built: "serial" (one thread, plain adds), "parallel" (threads, atomic adds: GPUs) or "parts"
    (threads, per-part buffers, no atomic adds into particles, bit-reproducible: `tigradsim.exec.parts`).

    scatter mode (`tgs.init(scatter=...)`): "serial", "parallel" and "parts" are obeyed; "auto" gives
    "parallel" where `runtime.serial_scatter` says not serial (GPUs, CPUs with many threads unless
    `deterministic()`), else "parts" for sets of at least `parts_min_elements` (PARTS_MIN_ELEMENTS; cloth:
    `cloth.CLOTH_PARTS_MIN_TRIANGLES`) elements on a CPU with `parts_min_threads` (2; cloth: 3) or more
    threads, else "serial".
    """
    mode = scatter_mode()
    if mode in PATHS:
        return mode
    if not serial_scatter():
        return "parallel"
    cfg = impl.current_cfg()
    if cfg.arch == ti.cpu and cfg.cpu_max_num_threads >= parts_min_threads and element_count >= parts_min_elements:
        return "parts"
    return "serial"


def make_ports(path: str, model, indices, tables=(), ranges=None):
    """The ports an element set needs on `path` (`element_path`): None (serial, parallel) or a
    `parts.PartPorts` (`indices`: (E, K) particle indices; `tables`: (table, rows (E,)) pairs read
    through a row index; `ranges`: the [start, end) element ranges of its terms, default one)."""
    if path == "parts":
        return PartPorts(model, indices, tables, ranges)
    return None


def wrap_terms(ports, terms) -> list:
    """`terms` with the ports' loops before and after them (no ports: `terms` alone)."""
    return (ports.before() + list(terms) + ports.after()) if ports is not None else list(terms)


# -- reading an element's inputs on any path (ports: a PartPorts, or NO_PORTS) ----------------

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
    """Row `row` of `table` (the ports' table j on the parts path) as element e (in part b) reads it."""
    if ti.static(not ports.active):
        return row_value(table, row)
    else:
        return ports.param(j, e, b, row)


@ti.func
def corner_put(ports: ti.template(), state: ti.template(), s, e, b, k: ti.template(), i, f):
    """Add force f [N] on corner k (particle i) of element e (in part b) at slot s: into the particle (serial and
    parallel paths) or into its part's buffer (parts).  Call it exactly once per corner and element."""
    if ti.static(not ports.active):
        state.particle_f[s, i] += f
    else:
        ports.put(state, s, e, b, k, i, f)


@ti.func
def for_each_element(term: ti.template(), state: ti.template(), s: ti.template(), t: ti.template(),
                     start: ti.template(), end: ti.template()):
    """Run `term.element(state, s, t, e, b)` for the elements e in [start, end): one loop, serialized
    or not as `term.serial` says (b = 0); or (parts path, `term.ports.parted`) one struct-for over the
    parts b, each part's elements in order (`tigradsim.exec.parts`); or (a serial term with
    `element_lanes(state, s, t, base, end)`, forward kernels) one loop over groups of term.forward_lanes elements
    (`tigradsim.exec.lanes`); or nothing, for
    a term whose elements a `parts.PartLoop` runs with other element sets' (`term.merged`), except in
    the checked forward kernel of `Tape(validation=True)`, where every term runs its own plain loop."""
    if ti.static(getattr(term, "merged", False) and not validating()):
        pass
    elif ti.static(getattr(term, "in_lanes", False) and not differentiating() and not validating()):
        # one thread, forward kernels: term.forward_lanes elements per iteration (`exec.lanes`); derivative
        # kernels run the term's reverse in lanes (cloth: `virtual_work`) or one element at a time (`element`)
        n = ti.static(term.forward_lanes)
        ti.loop_config(serialize=True)
        for g in range((end - start + n - 1) // n):
            term.element_lanes(state, s, t, start + g * n, end)
    elif ti.static(term.ports.parted and not validating()):
        for b in term.ports.cells:           # one CPU task per part; b is the loop's own index
            part_elements(term, state, s, t, start, end, b)
    else:
        ti.loop_config(serialize=term.serial)
        for e in range(start, end):
            term.element(state, s, t, e, 0)
