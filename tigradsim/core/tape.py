"""`tape(loss)`: `ti.ad.Tape(loss)` with the same clearing of every gradient, launched cheaply.

`ti.ad.Tape(loss)` first zeroes the adjoint of every field in the program, one parallel kernel
launch per group of fields that share a parent SNode.  Handing a loop to the thread pool costs
~50-100 us on this 2-core machine, so in a one-box 64 px silhouette fit the clearing took 8.6 ms
of a 37 ms iteration, and every other scene alive in the process added its own fields (one
sequential fit of `benchmarks/bench_batch.py`: 2.2 s alone, 5.8 s with the batched model built).

A new SNode tree (a field allocated after the last tape: a splat renderer's tile list that grew, a
refined model's scene) changes the plan.  The rebuilt plan reuses the wrapper of every place it already
had (`_place_field`, by SNode id): the zeroing kernel is instantiated per tuple of field objects, so new
wrappers of the same places recompiled every group's kernel (measured in a PAC-NeRF fit's gradient
rollout: 156 kernels re-created, 4.5 CPU s, benchmarks/pacnerf_profile.py); with the same wrappers only the
groups of the new tree compile.

`tape(loss)` zeroes exactly the same adjoints (every place of gradient type ADJOINT under every
SNode tree, found as `taichi.ad.clear_all_gradients` finds them), each group in a loop that runs
on one thread when small (`runtime.serial_loop`), from a plan rebuilt only when the program
(`ti.init`) or its set of SNode trees changes, then opens `ti.ad.Tape(loss, clear_gradients=False)`.  The optimizers and the
gradient checker use it; a user's own `ti.ad.Tape` still works the same.
"""
import math

import taichi as ti
from taichi._snode.fields_builder import FieldsBuilder
from taichi.lang import impl
from taichi.lang.expr import Expr
from taichi.lang.field import ScalarField
from taichi.lang.snode import SNode
from taichi._lib import core as _ti_core

from .runtime import serial_loop

_plan = {"program": None, "key": None, "groups": [], "places": {}}


def _place_field(place):
    """The ScalarField of an adjoint place (a C++ SNode), the same object for the same place for as long as the
    program lives (SNode ids are not reused within a program), so that the zeroing kernel of its group is
    compiled once."""
    field = _plan["places"].get(place.id)
    if field is None:
        field = _plan["places"][place.id] = ScalarField(Expr(place.get_expr()))
    return field


def _adjoint_groups():
    """((field, ...), ...): the adjoint places of every SNode tree as scalar fields, grouped by
    parent as Taichi's clear_all_gradients groups them; rebuilt when the trees change (a tree's
    root SNode id is new whenever a tree is created, also when a destroyed tree's slot is reused)."""
    runtime = impl.get_runtime()
    runtime.materialize()
    roots = FieldsBuilder._finalized_roots()
    key = tuple(root.ptr.id for root in roots)
    # SNode ids restart with every ti.init: the program object (held, so never confused with a
    # later one at the same address) tells the plans of two programs apart
    if runtime.prog is not _plan["program"] or key != _plan["key"]:
        if runtime.prog is not _plan["program"]:         # ids restart with a new program
            _plan["places"] = {}
        groups = []

        def visit(node):
            places = []
            for k in range(node.ptr.get_num_ch()):
                child = node.ptr.get_ch(k)
                if not child.is_place():
                    visit(SNode(child))
                elif child.get_snode_grad_type() == _ti_core.SNodeGradType.ADJOINT:
                    places.append(_place_field(child))
            if places:
                groups.append(tuple(places))

        for root in roots:
            visit(root)
        _plan.update(program=runtime.prog, key=key, groups=groups)
    return _plan["groups"]


def _one_shape(fields):
    """The shape every field of `fields` has (the places of one parent SNode: a vector field's
    components), or () if they differ or are 0-D."""
    shapes = {tuple(f.shape) for f in fields}
    return shapes.pop() if len(shapes) == 1 else ()


@ti.kernel
def zero_fields(fields: ti.template()):
    """Zero every field of the tuple `fields` (any shape and element type) in one launch; a small
    loop runs on one thread (`runtime.serial_loop`).  Fields of one shape (an adjoint group: the
    components of a vector field) are zeroed in one loop, entry by entry: one thread-pool hand-off
    and one pass over their memory instead of one per component (measured on vs_warp's rigid64,
    whose state adjoints are vec7 / vec6 fields: 19 loops, ~2 ms per backward pass, became 3)."""
    if ti.static(len(_one_shape(fields)) > 0):
        ti.loop_config(serialize=ti.static(serial_loop(math.prod(_one_shape(fields)) * len(fields))))
        for I in ti.grouped(ti.ndrange(*ti.static(_one_shape(fields)))):
            for f in ti.static(fields):
                f[I] = ti.zero(f[I])
    else:
        for f in ti.static(fields):
            if ti.static(len(f.shape) == 0):
                f[None] = ti.zero(f[None])
            else:
                ti.loop_config(serialize=ti.static(serial_loop(math.prod(f.shape))))
                for I in ti.grouped(ti.ndrange(*f.shape)):
                    f[I] = ti.zero(f[I])


def clear_gradients():
    """Zero the adjoint of every field in the program (what `ti.ad.Tape` does on entry)."""
    for group in _adjoint_groups():
        zero_fields(group)


def tape(loss, validation=False):
    """`ti.ad.Tape(loss)`, its gradient clearing done by `clear_gradients` (module docstring)."""
    clear_gradients()
    return ti.ad.Tape(loss, clear_gradients=False, validation=validation)
