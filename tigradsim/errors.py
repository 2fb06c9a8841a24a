"""Input validation shared by every builder, and the simulation error.

Every check runs in Python before any kernel launches, and its message names
the argument, the value found and what was expected.
"""
from __future__ import annotations

import numpy as np


class SimulationError(RuntimeError):
    """A rollout produced non-finite state (it blew up)."""


class GradientError(RuntimeError):
    """A backward pass produced an exploding or non-finite adjoint (the gradient cannot be trusted)."""


def as_array(name, value, shape=None, dtype=np.float64, finite=True):
    """Convert `value` to a numpy array and check its shape and finiteness.

    `shape` is a tuple whose entries are ints or None (any size); a scalar
    input is broadcast when `shape` has no None entries.
    """
    try:
        arr = np.asarray(value, dtype=dtype)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{name}: expected numbers convertible to {np.dtype(dtype).name}, got {value!r}") from exc
    if shape is not None:
        if arr.ndim == 0 and all(s is not None for s in shape):
            arr = np.broadcast_to(arr, shape).copy()
        if arr.ndim != len(shape) or any(s is not None and s != a for s, a in zip(shape, arr.shape)):
            want = "(" + ", ".join("N" if s is None else str(s) for s in shape) + ")"
            raise ValueError(f"{name}: expected shape {want}, got {arr.shape}")
    if finite and np.issubdtype(arr.dtype, np.floating) and not np.all(np.isfinite(arr)):
        bad = np.argwhere(~np.isfinite(arr))[0]
        raise ValueError(f"{name}: contains a non-finite value ({arr[tuple(bad)]}) at index {tuple(int(b) for b in bad)}")
    return arr


def check_indices(name, indices, count, arity):
    """Check an (M, arity) integer index array against `count` items."""
    idx = np.asarray(indices)
    if idx.size == 0:
        return np.zeros((0, arity), dtype=np.int32)
    if not np.issubdtype(idx.dtype, np.integer):
        if np.issubdtype(idx.dtype, np.floating) and np.all(np.mod(idx, 1) == 0):
            idx = idx.astype(np.int64)
        else:
            raise TypeError(f"{name}: expected integer indices, got dtype {idx.dtype}")
    if idx.ndim == 1 and idx.size == arity:
        idx = idx.reshape(1, arity)
    if idx.ndim != 2 or idx.shape[1] != arity:
        raise ValueError(f"{name}: expected shape (M, {arity}), got {idx.shape}")
    bad = np.argwhere((idx < 0) | (idx >= count))
    if len(bad):
        r, c = bad[0]
        raise IndexError(f"{name}[{r}] = {idx[r].tolist()}: index {idx[r, c]} is out of range for {count} particles")
    return idx.astype(np.int32)


def check_positive(name, value, allow_zero=False):
    arr = as_array(name, value)
    bad = arr < 0 if allow_zero else arr <= 0
    if np.any(bad):
        where = np.argwhere(np.atleast_1d(bad))[0][0]
        got = np.atleast_1d(arr)[where]
        need = ">= 0" if allow_zero else "> 0"
        raise ValueError(f"{name}: must be {need}, got {got}" + (f" at index {where}" if arr.ndim else ""))
    return arr
