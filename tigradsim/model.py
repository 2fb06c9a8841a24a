"""The Model: static scene data and differentiable parameters as Taichi fields.

A Model is made by `SceneBuilder.finalize()`.  It owns no per-step state (that
lives in a `StateStore`).  Besides fields it lists:
  * `state_kinds`: the per-step state the scene needs (`StateKind`s),
  * `force_terms`: objects with a `@ti.func apply_forces(state, s, t)` that
    `+=` forces for slot `s` (simulation step `t`),
  * `integrators`: objects with a `@ti.func integrate(state, s, t, dt)` that
    write slot `s + 1` from slot `s` (they run after every force term, in order).
Each runs exactly ONE loop (a kind with several loops, e.g. one per material,
is several terms), and says in `serial` whether that loop is serialized (the
`StepTerm` base sets it).  Each kind of element (springs, tets, cloth, rigid
bodies, contact) has its terms in its own module; the simulator fuses them into
one kernel per substep, or per run of substeps (simulator.py says why both rules).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

import numpy as np
import taichi as ti

from .errors import as_array
from .runtime import np_float, serial_scatter


@dataclass
class StateKind:
    """One kind of per-step state.

    name: field name in the state store (e.g. "particle_q").
    dtype: Taichi element type (e.g. `ti.types.vector(3, float)`).
    count: number of items (particles, bodies).
    initial: parameter field holding the value at step 0, or None.
    accumulator: True for forces, which are summed per step and are not part
        of a checkpoint.
    """

    name: str
    dtype: Any
    count: int
    initial: Optional[Any] = None
    accumulator: bool = False


class StepTerm:
    """Base of force terms and integrators: the model, and whether the term's one loop runs
    serially (`runtime.serial_scatter`, read when the term is built at model finalize).
    Subclasses are `@ti.data_oriented` and define the `@ti.func` `apply_forces` or
    `integrate` of the module docstring; they start their loop with
    `ti.loop_config(serialize=self.serial)`."""

    def __init__(self, model):
        self.model = model
        self.serial = serial_scatter()


def new_field(dtype, shape, needs_grad):
    """A Taichi field of a scalar, vector or matrix dtype."""
    return ti.field(dtype, shape=shape, needs_grad=needs_grad) if not hasattr(dtype, "ndim") else \
        dtype.field(shape=shape, needs_grad=needs_grad)


class Model:
    """Scene description in Taichi fields.

    Particle fields (N = particle_count):
        particle_q0 (N,) vec3 [m]       initial positions (differentiable)
        particle_qd0 (N,) vec3 [m/s]    initial velocities (differentiable)
        particle_mass (N,) [kg]         0 marks a fixed (pinned) particle
        particle_radius (N,) [m]        contact radius
    Spring fields (S = spring_count):
        spring_indices (S,) ivec2, spring_stiffness (S,) [N/m],
        spring_damping (S,) [N s/m], spring_rest_length (S,) [m]
    Ground (0-D): ground_ke [N/m], ground_kd [N s/m], ground_kf [N s/m], ground_mu [-]
    gravity (0-D vec3) [m/s^2]
    """

    def __init__(self, requires_grad: bool = True):
        self.requires_grad = requires_grad
        self.particle_count = 0
        self.spring_count = 0
        self.has_ground = False
        self.state_kinds: list[StateKind] = []
        self.force_terms: list = []
        self.integrators: list = []
        self._params: dict[str, Any] = {}

    # -- fields -----------------------------------------------------------
    def add_field(self, name, dtype, shape, values=None, param=True):
        """Create field `name` (differentiable when `param` and requires_grad) and fill it."""
        fld = new_field(dtype, shape, needs_grad=param and self.requires_grad)
        if values is not None:
            fld.from_numpy(np.array(values, dtype=_np_dtype(dtype), order="C"))
        setattr(self, name, fld)
        if param:
            self._params[name] = fld
        return fld

    def parameters(self) -> dict:
        """Differentiable parameter fields by name."""
        return dict(self._params)

    def get(self, name: str) -> np.ndarray:
        """A parameter's values as numpy (a 0-D field gives a scalar or vector)."""
        fld = self._field(name)
        return fld.to_numpy()

    def set(self, name: str, values) -> None:
        """Write a parameter from numpy, checking shape and finiteness."""
        fld = self._field(name)
        shape = tuple(fld.shape) + tuple(getattr(fld, "n", None) and ([fld.n] if fld.m == 1 else [fld.n, fld.m]) or [])
        arr = as_array(f"{name} values", values, shape=shape)
        fld.from_numpy(np.array(arr, dtype=_np_dtype(fld.dtype), order="C"))

    def _field(self, name):
        if name not in self._params:
            raise KeyError(f"unknown parameter {name!r}; known: {sorted(self._params)}")
        return self._params[name]


def _np_dtype(dtype):
    base = getattr(dtype, "dtype", dtype)
    if base in (ti.i32, ti.i64, ti.u8):
        return {ti.i32: np.int32, ti.i64: np.int64, ti.u8: np.uint8}[base]
    return np_float()
