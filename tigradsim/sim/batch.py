"""Batched scenes: B independent copies of a scene in ONE Model, advanced by the same kernel launches.

    def build(b, copy):                       # b: the shared SceneBuilder, copy: 0..B-1
        b.add_ground(ke=1e4, kd=20, kf=30, mu=0.3)
        return b.add_rigid_body(vertices, faces, mass=1.0, position=(-0.5, 0.15, 0.0))
    batch = tgs.batched(build, copies=16)     # batch.model, batch.handles[copy], batch.rows(kind, copy)
    batch.set("body_mass", masses)            # one value (array) per copy
    masses = batch.params("body_mass", "mass", lower=0.05, upper=50, log_space=True)   # one Param per copy

Why one Model: a small scene's step costs less than a kernel launch (50-100 us here), so B copies
stepped by the same launches cost about what one copy costs (measured in benchmarks/bench_batch.py).

Independence (what makes copy b's gradient of the summed loss equal to its own gradient): the copies
are disjoint sets of particles, springs, rigid bodies, applied loads and elements, and tigradsim has no
interaction between different bodies or particles other than the elements a scene adds (no
particle-particle contact, and body-body and particle-body contact act only within a contact group:
each copy is its own group, `SceneBuilder.contact_groups`), so copies may overlap in space.  `batched` checks what it can before any kernel runs: every spring added by copy
b joins two particles of copy b; every copy adds the same ground (one 0-D ground field is shared); no
copy adds a user force term or a collider (a `tgs.ForceTerm` acts on the whole Model and could couple copies,
and a static collider is touched by every copy: add them to the builder before `batched`, knowing that every
copy sees them).  Model-wide 0-D fields (gravity,
ground_ke, ...) are shared by all copies, so they cannot be fitted per copy.

Per-copy rows are contiguous for particles, springs, rigid bodies and applied loads (`rows`); tet and
cloth element tables are reordered at finalize, so per-copy element rows come from the handles a build
function returns (e.g. a soft mesh's `param_rows`).
"""
from __future__ import annotations

from typing import Any, Callable, Optional

import numpy as np

from .builder import SceneBuilder
from ..fitting.batch import RowsParam
from ..physics.rigid import RigidBodies

KINDS = ("particles", "springs", "bodies", "forces")
# field-name prefixes -> the kind of row they index (checked in this order: the longer prefixes first)
_PREFIXES = (("body_force", "forces"), ("body_torque", "forces"), ("body_", "bodies"), ("particle_", "particles"),
             ("spring_", "springs"))


def _rigid(builder):
    for comp in builder.components:
        if type(comp) is RigidBodies:
            return comp
    return None


def _collider_count(builder) -> int:
    return sum(len(comp) for comp in builder.components if type(comp).__name__ == "Colliders")


def _counts(builder) -> dict:
    rigid = _rigid(builder)
    return {"particles": builder.particle_count,
            "springs": int(sum(len(a) for a in builder._springs)),
            "bodies": 0 if rigid is None else rigid.count,
            "forces": 0 if rigid is None else len(rigid.forces)}


def kind_of_field(name: str) -> str:
    """The kind of row ("particles", "springs", "bodies", "forces") a per-item model field indexes."""
    for prefix, kind in _PREFIXES:
        if name.startswith(prefix):
            return kind
    raise ValueError(f"field {name!r}: its per-copy rows are not known (per-copy rows exist for fields named "
                     f"particle_*, spring_*, body_* and body_force*/body_torque; tet and cloth tables are reordered "
                     f"at finalize: build Params on the rows your build function's handles give, e.g. "
                     f"tgs.ColumnParam(model.tet_params, 0, rows=handle.param_rows))")


class Batch:
    """B copies of a scene built into one Model (made by `batched`).

    Attributes:
        model: the Model (all copies).  copies: B.
        handles: what the build function returned for each copy (a list of B values).
        ranges: {kind: (B + 1,) int array}: copy b owns rows ranges[kind][b]:ranges[kind][b + 1] of
            the per-particle ("particles"), per-spring ("springs"), per-body ("bodies") and per-applied-load
            ("forces") fields.
    """

    def __init__(self, model, copies: int, handles: list, ranges: dict):
        self.model = model
        self.copies = copies
        self.handles = handles
        self.ranges = ranges

    def rows(self, kind: str, copy: int) -> np.ndarray:
        """The row indices (int64 array) of copy `copy` in the fields of `kind` (see `ranges`)."""
        if kind not in self.ranges:
            raise ValueError(f"kind: expected one of {KINDS}, got {kind!r}")
        self._check_copy(copy)
        r = self.ranges[kind]
        return np.arange(r[copy], r[copy + 1])

    def copy_of(self, kind: str) -> np.ndarray:
        """(N,) int array: the copy of each row of the fields of `kind`."""
        r = self.ranges[kind]
        return np.repeat(np.arange(self.copies), np.diff(r)).astype(np.int32)

    def _check_copy(self, copy):
        if isinstance(copy, bool) or not isinstance(copy, (int, np.integer)) or not 0 <= copy < self.copies:
            raise IndexError(f"copy: expected an integer in [0, {self.copies - 1}], got {copy!r}")

    def _field_rows(self, name):
        if name not in self.model.parameters():
            raise KeyError(f"name: unknown parameter {name!r}; known: {sorted(self.model.parameters())}")
        kind = kind_of_field(name)
        fld = self.model.parameters()[name]
        n = int(self.ranges[kind][-1])
        if len(fld.shape) != 1 or fld.shape[0] != n:
            raise ValueError(f"field {name!r}: shape {tuple(fld.shape)}, expected ({n},) (one row per {kind[:-1]})")
        return kind

    def get(self, name: str) -> list:
        """Each copy's rows of parameter field `name`: a list of B numpy arrays (rows, ...)."""
        kind = self._field_rows(name)
        full = self.model.get(name)
        return [full[self.rows(kind, b)] for b in range(self.copies)]

    def set(self, name: str, values) -> None:
        """Write each copy's rows of parameter field `name`: `values` is a sequence of B arrays (or an
        array with leading dimension B), copy b's of shape (rows of copy b, ...) or broadcasting to it
        (one mass per copy for a one-body copy: `batch.set("body_mass", [1.0, 2.0, ...])`).
        Checked like `Model.set` (shape, finite, physical)."""
        kind = self._field_rows(name)
        if isinstance(values, np.ndarray) and values.ndim == 0 or not hasattr(values, "__len__"):
            raise ValueError(f"values: expected one entry per copy ({self.copies}), got {values!r}")
        if len(values) != self.copies:
            raise ValueError(f"values: expected one entry per copy ({self.copies}), got {len(values)}")
        full = np.array(self.model.get(name), dtype=np.float64)
        for b, v in enumerate(values):
            rows = self.rows(kind, b)
            try:
                full[rows] = np.broadcast_to(np.asarray(v, dtype=np.float64), full[rows].shape)
            except ValueError:
                raise ValueError(f"values[{b}]: shape {np.shape(v)} does not broadcast to copy {b}'s rows of "
                                 f"{name!r}, shape {full[rows].shape}") from None
        self.model.set(name, full)

    def params(self, name: str, label: Optional[str] = None, lower=None, upper=None, log_space=False,
               lr=None) -> list:
        """One `RowsParam` per copy over its rows of parameter field `name` (e.g. "body_mass"), named
        "label[b]" (label defaults to the field name).  Bounds and log_space as for `tgs.Param` (the
        bounds apply to every copy; an array bound broadcasts to one copy's value)."""
        kind = self._field_rows(name)
        fld = self.model.parameters()[name]
        label = label or name
        return [RowsParam(fld, self.rows(kind, b), f"{label}[{b}]", lower, upper, log_space, lr)
                for b in range(self.copies)]


def batched(build: Callable[[SceneBuilder, int], Any], copies: int, builder: Optional[SceneBuilder] = None,
            requires_grad=True) -> Batch:
    """Build `copies` copies of a scene into one Model: `build(builder, copy)` is called for
    copy = 0 .. copies - 1 on one SceneBuilder (`builder`, default `SceneBuilder()`), adds one copy's
    particles, springs, bodies, loads and elements, and returns a handle (anything; kept in
    `Batch.handles`).  Returns the `Batch` with the finalized Model.  requires_grad: as for
    `SceneBuilder.finalize` (True, False, or the names of the parameters that get gradients).

    Raises, before any kernel runs: ValueError for copies < 1 or not an integer, for a copy that adds
    nothing, a spring that joins two copies, a copy that adds a different ground (or ground contact
    law) than copy 0, or a user force term added inside `build`; TypeError when `build` is not callable.
    """
    if isinstance(copies, bool) or not isinstance(copies, (int, np.integer)) or copies < 1:
        raise ValueError(f"copies: expected an integer >= 1, got {copies!r}")
    if not callable(build):
        raise TypeError(f"build: expected a callable build(builder, copy) -> handle, got {build!r}")
    b = SceneBuilder() if builder is None else builder
    if not isinstance(b, SceneBuilder):
        raise TypeError(f"builder: expected a tgs.SceneBuilder or None, got {type(b).__name__}")
    start = _counts(b)
    ranges = {k: [start[k]] for k in KINDS}
    handles = []
    ground = None
    for copy in range(int(copies)):
        terms = len(b._force_term_factories)
        colliders = _collider_count(b)
        springs_before = ranges["springs"][-1]
        handles.append(build(b, copy))
        now = _counts(b)
        if len(b._force_term_factories) != terms:
            raise ValueError(f"build: copy {copy} added a user force term; a tgs.ForceTerm acts on the whole Model "
                             "(every copy), so add it once to the builder before tgs.batched")
        if _collider_count(b) != colliders:
            raise ValueError(f"build: copy {copy} added a collider; a static collider is touched by every particle "
                             "and body of the Model (every copy), so add it once to the builder before tgs.batched")
        if all(now[k] == ranges[k][-1] for k in KINDS):
            raise ValueError(f"build: copy {copy} added no particle, spring, rigid body or load")
        lo, hi = ranges["particles"][-1], now["particles"]
        if now["springs"] > springs_before:
            idx = np.concatenate(b._springs)[springs_before:]
            bad = np.nonzero((idx < lo) | (idx >= hi))[0]
            if len(bad):
                raise ValueError(f"build: copy {copy} added a spring between particles {idx[bad[0]].tolist()}, but its "
                                 f"own particles are {lo}..{hi - 1}: copies must not be coupled (use the index "
                                 f"add_particles returns, not a fixed one)")
        this_ground = (b.ground, b.ground_law)
        if copy == 0:
            ground = this_ground
        elif this_ground != ground:
            raise ValueError(f"build: copy {copy} set the ground to {b.ground} ({b.ground_law}), copy 0 to "
                             f"{ground[0]} ({ground[1]}); the ground is one shared 0-D field: give every copy the "
                             "same ground (per-body contact parameters are per copy)")
        for k in KINDS:
            ranges[k].append(now[k])
    # copies never touch each other (body-body and particle-body contact act within a contact group); what
    # was added before `batched` (group -1) touches every copy
    b.contact_groups = {k: np.concatenate([np.full(int(ranges[k][0]), -1),
                                           np.repeat(np.arange(int(copies)), np.diff(ranges[k]))]).astype(np.int32)
                        for k in ("bodies", "particles")}
    model = b.finalize(requires_grad=requires_grad)
    return Batch(model, int(copies), handles, {k: np.asarray(v, dtype=np.int64) for k, v in ranges.items()})

