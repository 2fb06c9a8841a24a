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
`StepTerm` base sets it).  A user's own force term subclasses the public
`ForceTerm` (exported as `tgs.ForceTerm`) and is added with
`SceneBuilder.add_force_term`.  Each kind of element (springs, tets, cloth, rigid
bodies, contact) has its terms in its own module; the simulator fuses them into
one kernel per substep, or per run of substeps (simulator.py says why both rules).
"""
from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any, Optional

import weakref

import numpy as np
import taichi as ti
from taichi.lang import impl

from .errors import as_array, check_parameter
from .runtime import np_float, precision, serial_scatter


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
        # a term whose reverse kernel runs a loop on threads although its forward loop is serial
        # (`exec.lane_ports.LaneGroupPorts`): the backward pass then launches each step's reverse on its own
        # (`Simulator.reverse_per_step`)
        self.parallel_reverse = False
        # an element term whose loop a `exec.parts.PartLoop` runs, with other element sets' (its own
        # `exec.loops.for_each_element` then emits nothing): set by `parts.merge_part_loops` at finalize
        self.merged = False


@ti.data_oriented
class ForceTerm(StepTerm):
    """Base class of a user's own force term (another contact, drag or damping law, a field force).

    Subclass it, build it with `super().__init__(model)`, define a `@ti.func apply_forces(self, state,
    s, t)`, and add it with `SceneBuilder.add_force_term(factory)` before `finalize()`: the factory
    (e.g. the class, or `lambda model: MyTerm(model, c=0.1)`) is called at finalize with the Model,
    after every built-in element, so the term can read any model field; the simulator then runs the
    term every step, fused with the built-in terms, inside or outside `ti.ad.Tape` and with
    checkpointing, and its forces carry gradients like the built-in ones.  The built terms are listed,
    in order, in `model.user_force_terms`.

    The rules of `apply_forces(self, state, s, t)` (Taichi 1.7.4's reverse mode is wrong, silently,
    when they are broken; test a new term with `tgs.check_gradient` in float64):
      * `s` is the slot of the current step in `state`, `t` its step index (time t * dt).  Read the
        state at slot `s`: `state.particle_q[s, i]` [m], `state.particle_qd[s, i]` [m/s] (vec3),
        `state.body_q[s, b]` (vec7: position [m], quaternion x, y, z, w) and `state.body_qd[s, b]`
        (vec6: angular [rad/s], linear [m/s] velocity, world frame), as a scene has them.
      * Write forces only with `+=`, into `state.particle_f[s, i]` (vec3 [N]) or
        `state.body_f[s, b]` (vec6: torque about the centre of mass [N m], then force [N], world
        frame).  Never write anything else (no state, no model or term field: values read inside
        the Tape must not change).
      * Run exactly ONE top-level loop, and start it with `ti.loop_config(serialize=self.serial)`:
        fused steps nest every term's loop inside the step loop, and Taichi reverses two sibling
        loops there wrongly.  A term that needs two loops is two terms.
      * No plain `range` inner loop that carries a local through non-linear operations (wrong
        gradients); use `ti.static(range(n))` for small fixed counts.  `norm()` at 0 has a NaN
        gradient: use `ti.sqrt(v.dot(v) + eps)`.
    Differentiable coefficients: `self.add_parameter(name, value)` makes a model field (listed in
    `model.parameters()`, settable with `model.set`, fitted with `tgs.Param(model.<name>)`).

    Example (quadratic air drag f = -c |v| v on every particle, c [kg/m] to be identified)::

        import taichi as ti
        import tigradsim as tgs

        @ti.data_oriented
        class QuadraticDrag(tgs.ForceTerm):
            def __init__(self, model, c=0.1):
                super().__init__(model)                       # sets self.model, self.serial
                self.c = self.add_parameter("drag_c", c)      # 0-D field [kg/m], differentiable

            @ti.func
            def apply_forces(self, state: ti.template(), s: ti.template(), t: ti.template()):
                ti.loop_config(serialize=self.serial)
                for i in range(self.model.particle_count):    # the one loop
                    v = state.particle_qd[s, i]
                    speed = ti.sqrt(v.dot(v) + 1e-12)         # no NaN gradient at v = 0
                    state.particle_f[s, i] += -self.c[None] * speed * v

        tgs.init(precision="f64")
        b = tgs.SceneBuilder()
        b.add_particles([[0.0, 1.0, 0.0]], velocities=[[3.0, 2.0, 0.0]], masses=0.2)
        b.add_force_term(lambda model: QuadraticDrag(model, c=0.05))
        model = b.finalize()
        sim = tgs.Simulator(model, dt=1e-3, steps=500)
        drag = tgs.Param(model.drag_c, "drag", lower=1e-4, log_space=True)   # fit it like any parameter

    A rigid-body term loops over `range(self.model.body_count)` (or the contact points) and adds
    `spatial(torque, force)` (`tigradsim.physics.rigid.spatial`) into `state.body_f[s, b]`.
    """

    def add_parameter(self, name: str, value, shape=None):
        """A differentiable model field `name` of floats (the model's precision) holding `value`.

        value: scalar or array [the coefficient's units]; shape: the field's shape (default: the
        value's, () for a scalar).  Returns the field (also `model.<name>`).  Raises ValueError if the
        model already has an attribute `name` (a built-in field, or another term's parameter).
        """
        if not (isinstance(name, str) and name.isidentifier()):
            raise ValueError(f"name: expected a Python identifier, got {name!r}")
        if hasattr(self.model, name):
            raise ValueError(f"name: the model already has an attribute {name!r}; choose another parameter name")
        arr = as_array(f"{name} value", value, shape=None if shape is None else tuple(shape))
        return self.model.add_field(name, float, arr.shape, arr)


def check_force_term(term, model) -> ForceTerm:
    """Validate a user's force term built for `model` (see `ForceTerm`); returns it."""
    if not isinstance(term, ForceTerm):
        raise TypeError(f"force term: expected an instance of tgs.ForceTerm (the factory must return one), "
                        f"got {type(term).__name__}")
    name = type(term).__name__
    if not hasattr(term, "serial") or getattr(term, "model", None) is None:
        raise TypeError(f"force term {name}: its __init__ must call super().__init__(model)")
    if term.model is not model:
        raise ValueError(f"force term {name}: it was built for another Model; build it from the model the factory "
                         "receives")
    method = getattr(type(term), "apply_forces", None)
    if method is None:
        raise TypeError(f"force term {name}: defines no apply_forces; add a `@ti.func def apply_forces(self, state: "
                        "ti.template(), s: ti.template(), t: ti.template())`")
    if not getattr(method, "_is_taichi_function", False):
        raise TypeError(f"force term {name}: apply_forces must be decorated with @ti.func")
    params = list(inspect.signature(method).parameters)
    if len(params) != 4:
        raise TypeError(f"force term {name}: apply_forces must take (self, state, s, t), got ({', '.join(params)})")
    return term


def has_grad(field) -> bool:
    """Whether a Taichi field was made with needs_grad (without it, `.grad` is a placeholder whose
    storage is missing: Taichi fails deep inside with an AttributeError).  Plain Python: usable in
    `ti.static(...)` to compile a derivative kernel's branch only where a gradient is wanted."""
    g = getattr(field, "grad", None)
    snode = getattr(g, "snode", None) if g is not None else None
    return g is not None and (snode is None or snode.ptr is not None)


def grad_request(requires_grad):
    """`finalize`'s requires_grad as (any gradients: bool, parameter names or None for all of them).

    True: every parameter field gets a gradient; False: none; a collection of parameter names
    (e.g. {"particle_qd0"} or ("tet_params",)): only those (the state always has gradients then).
    """
    if isinstance(requires_grad, (bool, np.bool_)):
        return bool(requires_grad), None
    if isinstance(requires_grad, str):
        raise TypeError(f"requires_grad: expected True, False or a collection of parameter names, got the string "
                        f"{requires_grad!r} (write ({requires_grad!r},))")
    try:
        names = list(requires_grad)
    except TypeError:
        raise TypeError(f"requires_grad: expected True, False or a collection of parameter names, got "
                        f"{requires_grad!r}") from None
    bad = [n for n in names if not isinstance(n, str)]
    if bad:
        raise TypeError(f"requires_grad: parameter names must be strings, got {bad[0]!r}")
    if not names:
        raise ValueError("requires_grad: an empty collection of parameter names; pass False for no gradients")
    return True, frozenset(names)


def new_field(dtype, shape, needs_grad):
    """A Taichi field of a scalar, vector or matrix dtype."""
    return ti.field(dtype, shape=shape, needs_grad=needs_grad) if not hasattr(dtype, "ndim") else \
        dtype.field(shape=shape, needs_grad=needs_grad)


def runtime_tag():
    """(weak reference to Taichi's current runtime, precision): `tgs.init` replaces the runtime, and
    the fields of a model built before belong to the old one (checked by the Simulator)."""
    return weakref.ref(impl.get_runtime()), precision()


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
    gravity (0-D vec3) [m/s^2]; step_dt (0-D) [s]: the running Simulator's dt (`use_dt`, not a parameter)
    "Differentiable" means: has a gradient when the model was finalized with requires_grad=True, or
    with requires_grad naming it (`SceneBuilder.finalize`; `has_grad(model.<name>)` tells).
    """

    def __init__(self, requires_grad=True):
        # requires_grad: any gradients at all (the state's); grad_params: the parameter fields that
        # get one (None: all).  Derivative kernels skip terms whose coefficients are 0 and have none.
        self.requires_grad, self.grad_params = grad_request(requires_grad)
        self.particle_count = 0
        self.spring_count = 0
        self.has_ground = False
        self.state_kinds: list[StateKind] = []
        self.force_terms: list = []
        self.integrators: list = []
        self.user_force_terms: list = []     # the ForceTerms of SceneBuilder.add_force_term, in order
        self._params: dict[str, Any] = {}
        self.version = 0                     # bumped by `set` (stability pre-flight, tigradsim.core.stability)
        self.runtime = runtime_tag()         # the Taichi runtime (tgs.init) whose fields these are

    def use_dt(self, dt: float):
        """Write the running Simulator's step dt [s] into `step_dt` (read by contact laws with
        damping_integration="implicit"); a write only when it changes (the Simulator calls this before every
        forward and backward launch, so Simulators of different dt may share the model)."""
        step = getattr(self, "step_dt", None)
        if step is not None and getattr(self, "_step_dt_value", None) != dt:
            step[None] = dt
            self._step_dt_value = dt

    # -- fields -----------------------------------------------------------
    def add_field(self, name, dtype, shape, values=None, param=True, grad=False):
        """Create field `name` and fill it.  It is differentiable when `param` and the model gives
        parameter `name` a gradient (`wants_grad`), or, with grad=True (a control added after
        finalize, e.g. `tet_activation_t`), whenever the model has gradients at all."""
        wanted = self.requires_grad if grad else self.wants_grad(name)
        fld = new_field(dtype, shape, needs_grad=param and wanted)
        if values is not None:
            fld.from_numpy(np.array(values, dtype=_np_dtype(dtype), order="C"))
        setattr(self, name, fld)
        if param:
            self._params[name] = fld
        return fld

    def wants_grad(self, name: str) -> bool:
        """Whether parameter `name` gets a gradient (`finalize(requires_grad=...)`)."""
        return self.requires_grad and (self.grad_params is None or name in self.grad_params)

    def check_grad_params(self):
        """ValueError for names in `finalize(requires_grad=...)` that are not parameters of this model."""
        unknown = sorted(set(self.grad_params or ()) - set(self._params))
        if unknown:
            raise ValueError(f"requires_grad: {unknown} {'is not a parameter' if len(unknown) == 1 else 'are not parameters'}"
                             f" of this model; its parameters are {sorted(self._params)}")

    def parameters(self) -> dict:
        """Differentiable parameter fields by name."""
        return dict(self._params)

    def get(self, name: str) -> np.ndarray:
        """A parameter's values as numpy (a 0-D field gives a scalar or vector)."""
        fld = self._field(name)
        return fld.to_numpy()

    def set(self, name: str, values) -> None:
        """Write a parameter from numpy, checking shape, finiteness and that the values are physical
        (`errors.check_parameter`: no negative mass, stiffness, damping or friction; material rules).
        Bumps `version`, so Simulators re-run their stability pre-flight at the next `run()`."""
        fld = self._field(name)
        shape = tuple(fld.shape) + tuple(getattr(fld, "n", None) and ([fld.n] if fld.m == 1 else [fld.n, fld.m]) or [])
        arr = as_array(f"{name} values", values, shape=shape)
        check_parameter(self, name, arr)
        fld.from_numpy(np.array(arr, dtype=_np_dtype(fld.dtype), order="C"))
        self.version += 1

    def _field(self, name):
        if name not in self._params:
            raise KeyError(f"unknown parameter {name!r}; known: {sorted(self._params)}")
        return self._params[name]


def _np_dtype(dtype):
    base = getattr(dtype, "dtype", dtype)
    if base in (ti.i32, ti.i64, ti.u8):
        return {ti.i32: np.int32, ti.i64: np.int64, ti.u8: np.uint8}[base]
    return np_float()
