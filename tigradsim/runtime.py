"""Taichi runtime set-up and the autodiff helpers every module uses.

`init` wraps `ti.init` with the settings tigradsim needs.  `custom_op` turns a
pair of Python functions (forward, backward) into one entry on `ti.ad.Tape`,
which is how composite operations (a checkpointed segment of a rollout, a
rendered frame that re-uses scratch buffers) keep their gradients right.
"""
from __future__ import annotations

import numpy as np
import taichi as ti
from taichi.lang import impl
from taichi.lang.enums import AutodiffMode

_ARCHS = {"cpu": "cpu", "cuda": "cuda", "vulkan": "vulkan", "gpu": "gpu", "metal": "metal", "opengl": "opengl"}
_PRECISIONS = {"f32": ti.f32, "f64": ti.f64}

# Stack size for locals carried through loops under reverse-mode AD.  Taichi's
# default overflows for loops of 34+ passes (DESIGN.md section 5, rule 5).
AD_STACK_SIZE = 256

_state = {"initialized": False, "precision": "f32", "arch": "cpu"}


def init(arch: str = "cpu", precision: str = "f32", debug: bool = False, seed: int = 0, **kwargs):
    """Initialise Taichi for tigradsim.

    Args:
        arch: "cpu", "cuda", "vulkan", "metal", "opengl" or "gpu" (best available).
        precision: "f32" or "f64"; every float field tigradsim creates uses it.
        debug: Taichi debug mode (bounds checks; use with `Tape(validation=True)`).
        seed: seed of Taichi's random number generator and of numpy's global one.
        kwargs: passed on to `ti.init` (they override the defaults above).
    Calling `init` again resets Taichi: fields created before are gone.
    """
    if arch not in _ARCHS:
        raise ValueError(f"init: arch={arch!r} is not one of {sorted(_ARCHS)}")
    if precision not in _PRECISIONS:
        raise ValueError(f"init: precision={precision!r} is not one of {sorted(_PRECISIONS)}")
    options = dict(
        arch=getattr(ti, _ARCHS[arch]),
        default_fp=_PRECISIONS[precision],
        default_ip=ti.i32,
        debug=debug,
        random_seed=seed,
        ad_stack_size=AD_STACK_SIZE,
        offline_cache=True,
        log_level=ti.WARN,
    )
    options.update(kwargs)
    ti.init(**options)
    np.random.seed(seed)
    _state.update(initialized=True, precision=precision, arch=arch)


def ensure_init():
    """Initialise with defaults if the user has not called `init` yet."""
    if not _state["initialized"]:
        init()


def precision() -> str:
    """"f32" or "f64": the precision chosen in `init`."""
    return _state["precision"]


def np_float():
    """The numpy float type matching the Taichi default float."""
    return np.float64 if _state["precision"] == "f64" else np.float32


def custom_op(forward, backward):
    """Make `forward(*args)` one differentiable entry on the active `ti.ad.Tape`.

    Kernels launched inside `forward` are not recorded on the tape; instead the
    tape calls `backward(*args)` when it runs in reverse.  Unlike
    `ti.ad.grad_replaced`, ops nest: an op called inside another op runs its
    forward only, and the outer op's backward decides how to differentiate it
    (usually by calling `inner.grad(*args)`).
    """

    def op(*args):
        rt = impl.get_runtime()
        outer = rt.grad_replaced
        if rt.target_tape is not None and not outer:
            rt.target_tape.insert(op, args)
        rt.grad_replaced = True
        try:
            forward(*args)
        finally:
            rt.grad_replaced = outer

    op.grad = backward
    op.autodiff_mode = AutodiffMode.NONE
    op.__name__ = getattr(forward, "__name__", "custom_op")
    op.__doc__ = forward.__doc__
    return op


def no_grad(fn):
    """Run `fn` inside a tape without recording it (its gradient is zero)."""
    return custom_op(fn, lambda *args: None)
