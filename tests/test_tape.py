"""`tgs.tape(loss)`: `ti.ad.Tape` with its gradient clearing done by `core.tape.clear_gradients`,
which must zero every adjoint `ti.ad.clear_all_gradients` zeroes, also after fields are added and
SNode trees are destroyed and rebuilt."""
import warnings

import numpy as np
import pytest
import taichi as ti

import tigradsim as tgs
from tigradsim.core import runtime
from tigradsim.core.tape import clear_gradients


def _fields():
    """Adjoint-carrying fields of every kind the library allocates: 0-D, scalar, vector, matrix,
    2-D, one larger than the serial-loop limit, and one in its own FieldsBuilder tree."""
    out = [ti.field(float, shape=(), needs_grad=True), ti.field(float, shape=7, needs_grad=True),
           ti.Vector.field(3, float, shape=(4, 5), needs_grad=True),
           ti.Matrix.field(2, 2, float, shape=9, needs_grad=True),
           ti.field(float, shape=runtime.SERIAL_LOOP_MAX + 5, needs_grad=True)]
    fb = ti.FieldsBuilder()
    own = ti.Vector.field(2, float, needs_grad=True)
    fb.dense(ti.i, 6).place(own, own.grad)
    return out + [own], fb.finalize()


def _dirty(fields):
    for k, f in enumerate(fields):
        f.grad.fill(k + 1.5)
        assert np.all(f.grad.to_numpy() != 0)


def _all_zero(fields):
    return all(not np.any(f.grad.to_numpy()) for f in fields)


def test_clear_gradients_zeroes_every_adjoint(f64):
    fields, tree = _fields()
    _dirty(fields)
    with warnings.catch_warnings():          # Taichi warns (SyntaxWarning) of Python calls it cannot compile
        warnings.simplefilter("error")
        clear_gradients()
    assert _all_zero(fields)
    more, tree2 = _fields()                 # new trees after a plan was built: it is rebuilt
    _dirty(fields + more)
    clear_gradients()
    assert _all_zero(fields + more)
    tree2.destroy()                         # a destroyed tree's slot is reused by the next one
    again, tree3 = _fields()
    _dirty(fields + again)
    clear_gradients()
    assert _all_zero(fields + again)
    tree.destroy()
    tree3.destroy()


def test_rebuilt_plan_keeps_the_fields_of_known_places(f64):
    """A new SNode tree rebuilds the plan; the places it already had keep their field objects, so their groups'
    zeroing kernels (instantiated per tuple of field objects) are not compiled again."""
    from tigradsim.core.tape import _adjoint_groups
    fields, tree = _fields()
    clear_gradients()
    before = [f for group in _adjoint_groups() for f in group]
    more, tree2 = _fields()
    after = [f for group in _adjoint_groups() for f in group]
    assert len(after) > len(before)
    kept = {id(f) for f in after}
    assert all(id(f) in kept for f in before)
    _dirty(fields + more)
    clear_gradients()
    assert _all_zero(fields + more)
    tree.destroy()
    tree2.destroy()


def test_tape_gradients_equal_taichi_tape_and_do_not_accumulate(f64):
    x = ti.Vector.field(3, float, shape=40, needs_grad=True)
    loss = ti.field(float, shape=(), needs_grad=True)

    @ti.kernel
    def f():
        for i in x:
            loss[None] += ti.sin(x[i]).dot(x[i])

    x.from_numpy(np.random.default_rng(0).normal(size=(40, 3)))
    with ti.ad.Tape(loss):
        f()
    want = x.grad.to_numpy().copy()
    assert np.any(want != 0)
    for _ in range(2):                      # twice: the second Tape must start from zero again
        with tgs.tape(loss):
            f()
        np.testing.assert_array_equal(x.grad.to_numpy(), want)


@pytest.mark.slow
def test_plan_is_rebuilt_after_reinit(f64):
    """ti.init starts a new program whose SNode ids restart: the same fields again must not reuse
    the previous program's plan (its places are gone)."""
    for _ in range(2):
        tgs.init(precision="f64")
        fields, tree = _fields()
        _dirty(fields)
        clear_gradients()
        assert _all_zero(fields)
