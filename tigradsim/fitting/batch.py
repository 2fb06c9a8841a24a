"""Per-copy parameters and optimizers for batched scenes (`tigradsim.sim.batch`).

The loss of a batched fit is the SUM of the copies' losses.  Copies do not interact, so the gradient
of the sum with respect to copy b's parameters is copy b's own gradient, and one Tape gives every
copy's gradient at once.  `PerCopy` then steps one optimizer per copy on its own parameters: any
optimizer of `tigradsim.fitting.optim` (Adam, SGD, and BFGS too: its steps use one gradient each and no
line search, and its curvature pairs stay per copy) follows exactly the path it follows in a
sequential fit of that copy alone (tests/test_batch.py checks Adam and BFGS to float64 round-off).
One optimizer over the concatenated vector would be the same for per-coordinate rules (Adam, SGD), but
BFGS would mix the copies' curvature, and the copies' learning-rate schedules could not differ.

One thing is shared: `optimize`'s retry after a rollout that blows up halves the learning rate of
every copy (the rollout is one), so a copy that diverges changes the schedule of the others.
"""
from __future__ import annotations

import contextlib
import copy as _copy
from typing import Callable, Sequence

import numpy as np

from ..core.runtime import np_float
from .optim import Param


class RowsParam(Param):
    """Rows `rows` of a per-item field (particles, bodies, ...) as one Param: one copy's masses, or
    initial velocities (vector fields: the value is (len(rows), n)).

    field: a 1-D Taichi field of scalars or vectors with needs_grad.  rows: int index array.
    The other arguments as for `Param`; bounds broadcast to the value's shape.
    """

    def __init__(self, field, rows, name="", lower=None, upper=None, log_space=False, lr=None):
        shape = tuple(field.shape)
        if len(shape) != 1:
            raise ValueError(f"RowsParam {name!r}: field must be 1-D (one row per item), got shape {shape}")
        rows = np.asarray(rows)
        if rows.ndim != 1 or rows.size == 0 or not np.issubdtype(rows.dtype, np.integer):
            raise ValueError(f"RowsParam {name!r}: rows must be a non-empty 1-D integer array, got {rows!r}")
        if rows.min() < 0 or rows.max() >= shape[0]:
            raise ValueError(f"RowsParam {name!r}: rows must lie in [0, {shape[0] - 1}], got [{rows.min()}, "
                             f"{rows.max()}]")
        self.rows = rows.astype(np.int64)
        super().__init__(field, name, lower, upper, log_space, lr)

    def value(self):
        tables = _Tables.active
        table = tables.values(self.field) if tables else self.field.to_numpy().astype(np.float64)
        return table[self.rows]          # rows is an index array: a copy

    def grad(self):
        tables = _Tables.active
        g = (tables.grads(self) if tables else self.field_grad())[self.rows]
        return self._add_dependent_grads(g)

    def write(self, value):
        tables = _Tables.active
        if tables:
            table = tables.values(self.field, dirty=True)
            table[self.rows] = np.asarray(value, dtype=np.float64).reshape(table[self.rows].shape)
            return
        kept = self._dependent_values()
        table = self.field.to_numpy()
        table[self.rows] = np.asarray(value, dtype=np.float64).reshape(table[self.rows].shape)
        self.field.from_numpy(np.ascontiguousarray(table, dtype=np_float()))
        self._rewrite_dependents(kept)


class _Tables:
    """Within one `PerCopy.step`: each per-item field the copies' RowsParams use read once (values and
    gradient, as float64 tables) and written back once at the end, instead of a whole-field read per
    copy and value, gradient and write (16 copies: ~80 field transfers a step, ~6 ms of a ~115 ms
    batched image iteration).  Reads after a write see it, as they would see the field."""

    active = None

    def __init__(self):
        self._values, self._grads, self._dirty = {}, {}, {}

    def values(self, field, dirty=False):
        key = id(field)
        if key not in self._values:
            self._values[key] = field.to_numpy().astype(np.float64)
        if dirty:
            self._dirty[key] = field
        return self._values[key]

    def grads(self, param):
        key = id(param.field)
        if key not in self._grads:
            self._grads[key] = param.field_grad()
        return self._grads[key]

    def flush(self):
        for key, field in self._dirty.items():
            field.from_numpy(np.ascontiguousarray(self._values[key], dtype=np_float()))

    @staticmethod
    def usable(params) -> bool:
        """Only RowsParams without tied Params (whose writes rewrite other fields)."""
        return all(type(p) is RowsParam and not getattr(p, "_dependents", ()) for p in params)


def copy_params(params) -> list:
    """Normalise per-copy parameters to a list (over copies) of lists of Params: `params` is a
    sequence over copies whose items are a Param or a sequence of Params (e.g. `batch.params(...)`,
    or `list(zip(masses, frictions))`)."""
    if isinstance(params, Param) or not hasattr(params, "__len__") or len(params) == 0:
        raise ValueError(f"params: expected a non-empty sequence over copies of Params (or of lists of Params), "
                         f"got {params!r}")
    out = []
    for b, item in enumerate(params):
        group = [item] if isinstance(item, Param) else list(item)
        if not group or not all(isinstance(p, Param) for p in group):
            raise ValueError(f"params[{b}]: expected a Param or a non-empty list of Params, got {item!r}")
        out.append(group)
    names = [p.name for group in out for p in group]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise ValueError(f"params: names must be unique across copies (the History keys them), repeated: {dup}")
    return out


class PerCopy:
    """One optimizer per copy, stepped together after one shared Tape (module docstring).

    optimizers: a sequence of Optimizers (e.g. `[tgs.Adam(p, lr=0.1) for p in per_copy_params]`).
    Use `PerCopy.build(factory, per_copy_params)` to make them.  Quacks like an Optimizer for
    `tgs.optimize` and `VideoFit.fit`: `params` (every copy's, in copy order), `step()`, `iteration`,
    `lr` (reading gives copy 0's; assigning scales every copy's by the same factor), `state_dict()`,
    `load_state_dict()`, and `reading()` (a context for reading every copy's values at once).
    """

    def __init__(self, optimizers: Sequence):
        self.optimizers = list(optimizers)
        if not self.optimizers:
            raise ValueError("optimizers: expected at least one optimizer (one per copy)")
        for k, o in enumerate(self.optimizers):
            if not (hasattr(o, "step") and hasattr(o, "params")):
                raise TypeError(f"optimizers[{k}]: expected a tigradsim optimizer (Adam, SGD, BFGS), got {o!r}")
        self.params = [p for o in self.optimizers for p in o.params]

    @classmethod
    def build(cls, factory: Callable[[list], object], params) -> "PerCopy":
        """`factory(params_of_copy_b)` -> an Optimizer, for each copy of `params` (see `copy_params`)."""
        if not callable(factory):
            raise TypeError(f"factory: expected a callable params -> optimizer (e.g. lambda p: tgs.Adam(p, lr=0.1)), "
                            f"got {factory!r}")
        return cls([factory(group) for group in copy_params(params)])

    @property
    def iteration(self) -> int:
        return self.optimizers[0].iteration

    @property
    def lr(self) -> float:
        return self.optimizers[0].lr

    @lr.setter
    def lr(self, value):
        scale = float(value) / self.optimizers[0].lr
        for o in self.optimizers:
            o.lr *= scale

    def step(self):
        with self._tables(write=True):
            for o in self.optimizers:
                o.step()

    def reading(self):
        """A context in which the copies' parameter values are read from one read of each field
        (`optimize` records and snapshots every copy's values each iteration: 16 copies, ~50 whole-field
        reads an iteration otherwise)."""
        return self._tables(write=False)

    @contextlib.contextmanager
    def _tables(self, write):
        """`_Tables` active within (when every Param is a plain RowsParam and none is active yet);
        with write, the tables written back to the fields at the end."""
        if not _Tables.usable(self.params) or _Tables.active is not None:
            yield
            return
        tables = _Tables.active = _Tables()
        try:
            yield
        finally:
            _Tables.active = None
        if write:
            tables.flush()

    def state_dict(self):
        return {"optimizers": [_copy.deepcopy(o.state_dict()) for o in self.optimizers],
                "kinds": [type(o).__name__ for o in self.optimizers]}

    def load_state_dict(self, state):
        kinds = [type(o).__name__ for o in self.optimizers]
        if list(state.get("kinds", [])) != kinds:
            raise ValueError(f"state: saved for optimizers {state.get('kinds')}, these are {kinds}")
        for o, s in zip(self.optimizers, state["optimizers"]):
            o.load_state_dict(s)


def split_copies(values: np.ndarray, counts) -> list:
    """Split an array whose axis 1 runs over the items of all copies ((frames, N, ...)) into a list
    of per-copy arrays (frames, counts[b], ...)."""
    edges = np.concatenate([[0], np.cumsum(counts)])
    return [values[:, edges[b]:edges[b + 1]] for b in range(len(counts))]
