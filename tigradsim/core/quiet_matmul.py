"""Make `@` quiet (and cheap to differentiate) inside material functions.

Why: Taichi 1.7.4 compiles `A @ B` on `ti.Matrix` values (taichi/lang/matrix_ops.py,
`_matmul_helper`) into a mutable local matrix filled entry by entry
(`mat_z[i, j] = mat_z[i, j] + ...`).  Reverse-mode AD then meets loads of local
variables it has not seen stored and prints "Loading variable ... before anything is
stored to it" once per entry and per kernel: a user's St. Venant-Kirchhoff written with
`@` printed 216 TaichiWarnings for one FEM rollout with a gradient (measured), and the
reverse kernels compile more slowly.  `tigradsim.core.linalg.matmul` writes every
entry as one expression instead: same sums in the same order (bit-identical, except
that the sign of an exact zero may differ), nothing spilled, no warnings.

`quiet_matmul_scope(fn)` wraps a `@ti.func` so that while Taichi builds *its* body
(and the functions it calls), the `@` operator means `linalg.matmul` / `linalg.matvec`;
outside material functions `@` keeps Taichi's meaning.  `register_material` applies it
to `stress` and `energy`, so users may write `@` naturally in their materials.
"""
import functools

from taichi.lang import impl
from taichi.lang import matrix_ops as _ops

from . import linalg

# Taichi's AST transformer looks `matrix_ops.matmul` up each time it compiles an `@`
# (taichi/lang/ast/ast_transformer.py, build_BinOp), so swapping the module attribute
# changes what `@` compiles to.
_taichi_matmul = _ops.matmul


def _quiet_matmul(a, b):
    """`a @ b` for Taichi-scope matrices/vectors without a mutable local result."""
    sa = a.get_shape() if hasattr(a, "get_shape") else None
    sb = b.get_shape() if hasattr(b, "get_shape") else None
    if sa is not None and sb is not None and len(sa) == 2:
        if len(sb) == 2:
            return linalg.matmul(a, b)
        if len(sb) == 1:
            return linalg.matvec(a, b)
    return _taichi_matmul(a, b)   # vector @ matrix, vector @ vector: Taichi's own (no warnings there)


def quiet_matmul_scope(fn):
    """Wrap a `@ti.func` (plain or method) so that `@` in its body compiles through `_quiet_matmul`.

    The swap lasts only while Taichi inlines `fn` into the kernel being compiled and is
    restored afterwards (also on errors), so other Taichi code is unaffected.
    """
    if getattr(fn, "_tigradsim_quiet_matmul", False):
        return fn

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        if not impl.inside_kernel():
            return fn(*args, **kwargs)
        previous = _ops.matmul
        _ops.matmul = _quiet_matmul
        try:
            return fn(*args, **kwargs)
        finally:
            _ops.matmul = previous

    wrapper._is_taichi_function = True          # Taichi calls it as a ti.func (no "non-taichi function" warning)
    wrapper._tigradsim_quiet_matmul = True
    return wrapper
