"""Optimizers over Taichi parameter fields, and an optimisation loop with progress.

Parameters are described by `Param(field, lower, upper, log_space)`: bounds are
enforced by clamping after each step; `log_space=True` optimises log(value)
(for stiffnesses and masses that span decades and must stay positive), so a
step changes the value by a factor rather than an amount.

Bounds are checked when a Param is made, and a bad one is a ValueError naming the
parameter: NaN bounds, lower >= upper, log_space with lower <= 0, bounds that do
not broadcast to the value's shape, and an initial value outside the bounds (an
error, not a clamp: clamping would silently replace the user's initial guess, or
the true value of a synthetic target, by a bound).

Reparametrisations (each with a hand-written chain rule `internal_grad`, FD-tested
with `tgs.check_param_gradient`): `ColumnParam` (one column of a parameter table),
`RatioParam` (a value per unit of another Param, e.g. ke / m), `TiedParam` (one
coordinate written to several fields by a user map), `BasisParam` (a field through
a linear basis).  `StopCriteria` ends `optimize` early.
"""
import contextlib
import copy
import math
import time
from dataclasses import dataclass, field as dc_field
from typing import Callable, Optional, Sequence

import numpy as np

from ..core.errors import SimulationError
from ..core.model import has_grad
from ..core.runtime import np_float
from ..core.tape import tape


def check_has_grad(param):
    """ValueError naming a Param whose field has no gradient, and how to give it one."""
    if not has_grad(param.field):
        raise ValueError(f"Param {param.name!r}: its field has no gradient; finalize the model with requires_grad=True, "
                         f"or name this parameter in SceneBuilder.finalize(requires_grad=...)")


@dataclass
class Param:
    """A differentiable field to optimise.

    field: Taichi field with needs_grad.  name: label for logs and plots.
    lower, upper: bounds (scalars or arrays broadcasting to the value's shape) in
        the field's units; checked at construction (module docstring).
    log_space: optimise log(value); values must be > 0.
    lr: learning rate for this parameter (None: the optimizer's).

    Subclasses that map the optimiser's coordinate onto fields differently override
    `value`, `grad` (dL/d value from the fields' `.grad`) and `write`.
    """

    field: object
    name: str = ""
    lower: Optional[object] = None
    upper: Optional[object] = None
    log_space: bool = False
    lr: Optional[float] = None

    def __post_init__(self):
        if not self.name:
            self.name = getattr(self.field, "name", None) or "param"
        self._dependents = []
        self._validate()

    def _validate(self):
        self.lower, self.upper = check_bounds(self.name, self.value(), self.lower, self.upper, self.log_space,
                                              _field_eps(self.field))

    def value(self) -> np.ndarray:
        return self.field.to_numpy().astype(np.float64)

    def to_internal(self, value):
        return np.log(value) if self.log_space else value

    def from_internal(self, x):
        value = np.exp(x) if self.log_space else x
        if self.lower is not None or self.upper is not None:
            value = np.clip(value, self.lower if self.lower is not None else -np.inf,
                            self.upper if self.upper is not None else np.inf)
        return value

    def internal_bounds(self):
        """(lo, hi) arrays of the value's shape in the optimiser's coordinates (+-inf where unbounded)."""
        shape = np.shape(self.value())
        lo = np.broadcast_to(-np.inf if self.lower is None else self.to_internal(np.asarray(self.lower, float)), shape)
        hi = np.broadcast_to(np.inf if self.upper is None else self.to_internal(np.asarray(self.upper, float)), shape)
        return np.array(lo, dtype=np.float64), np.array(hi, dtype=np.float64)

    def field_grad(self) -> np.ndarray:
        """dL/d field: the whole field's `.grad` after a Tape, as float64.  ValueError where the field
        has no gradient (a model finalized without it), instead of Taichi's AttributeError."""
        check_has_grad(self)
        return self.field.grad.to_numpy().astype(np.float64)

    def grad(self) -> np.ndarray:
        """dL/d value, from the field's `.grad` after a Tape (plus the terms of Params tied to this one)."""
        return self._add_dependent_grads(self.field_grad())

    def internal_grad(self):
        g = self.grad()
        return g * self.value() if self.log_space else g   # d/d(log p) = p d/dp

    def write(self, value):
        kept = self._dependent_values()
        self.field.from_numpy(np.array(value, dtype=np_float(), order="C").reshape(self.field.to_numpy().shape))
        self._rewrite_dependents(kept)

    # -- Params whose fields are computed from this one's value (RatioParam) ------------
    # (getattr: subclasses written before this existed override __post_init__ without super)
    def _dependent_values(self):
        return [d.value() for d in getattr(self, "_dependents", ())]

    def _rewrite_dependents(self, kept):
        # a RatioParam keeps its own coordinate (e.g. ke / m) when this value (m) changes
        for d, v in zip(getattr(self, "_dependents", ()), kept):
            d.write(v)

    def _add_dependent_grads(self, g):
        for d in getattr(self, "_dependents", ()):
            g = g + d.grad_wrt_denominator()
        return g


def _field_eps(field):
    """Relative tolerance for comparing a field's stored values with float64 bounds."""
    try:
        dtype = field.to_numpy().dtype
    except AttributeError:
        return 1e-12
    return 8.0 * float(np.finfo(dtype).eps) if np.issubdtype(dtype, np.floating) else 0.0


def check_bounds(name, value, lower, upper, log_space, rel_tol=1e-12):
    """Validate a Param's bounds against its current `value`; returns (lower, upper)
    as float64 arrays (or None).  Raises ValueError naming the parameter for NaN
    bounds, lower >= upper, log_space with lower <= 0 or a value <= 0, bounds whose
    shape does not broadcast to the value's, and a value outside [lower, upper]
    (beyond `rel_tol` relative, so a float32 field holding the float64 bound passes)."""
    value = np.asarray(value, dtype=np.float64)
    out = []
    for label, b in (("lower", lower), ("upper", upper)):
        if b is None:
            out.append(None)
            continue
        try:
            arr = np.asarray(b, dtype=np.float64)
        except (TypeError, ValueError):
            raise ValueError(f"Param {name!r}: {label} must be a number or an array of numbers, got {b!r}") from None
        if np.any(np.isnan(arr)):
            raise ValueError(f"Param {name!r}: {label} is NaN ({b!r}); use None for no bound")
        try:
            np.broadcast_to(arr, value.shape)
        except ValueError:
            raise ValueError(f"Param {name!r}: {label} has shape {arr.shape}, which does not broadcast to the "
                             f"value's shape {value.shape}") from None
        out.append(arr)
    lo, hi = out
    if lo is not None and hi is not None and np.any(lo >= hi):
        raise ValueError(f"Param {name!r}: lower must be < upper, got lower={_fmt(lo)}, upper={_fmt(hi)}")
    if log_space:
        if lo is not None and np.any(lo <= 0):
            raise ValueError(f"Param {name!r}: log_space needs lower > 0 (or None: log_space alone keeps values "
                             f"> 0), got lower={_fmt(lo)}")
        if np.any(~(value > 0)):
            raise ValueError(f"Param {name!r}: log_space needs values > 0, got {_fmt(value)}")
    if not np.all(np.isfinite(value)):
        raise ValueError(f"Param {name!r}: the initial value is not finite: {_fmt(value)}")
    slack = rel_tol * np.abs(value)
    bad = np.zeros(value.shape, dtype=bool)
    if lo is not None:
        bad |= value < lo - slack
    if hi is not None:
        bad |= value > hi + slack
    if np.any(bad):
        raise ValueError(f"Param {name!r}: the initial value {_fmt(value)} is outside the bounds "
                         f"[{_fmt(lo)}, {_fmt(hi)}]; set a value inside them before making the Param "
                         "(it is not clamped silently)")
    return lo, hi


def _fmt(a):
    if a is None:
        return "None"
    a = np.asarray(a)
    if a.size <= 6:
        return np.array2string(a.reshape(-1) if a.ndim else a, precision=6, separator=", ")
    return f"array{a.shape} in [{np.nanmin(a):.6g}, {np.nanmax(a):.6g}]"


class ColumnParam(Param):
    """One column of a parameter table as its own Param: e.g. `tet_params[:, 0]`
    (mu) or `tet_params[:, 1]` (lam), leaving the other columns (damping) as they are.

    field: a 2-D scalar field (rows, columns) or a 1-D field of vectors (rows,) of n.
    column: the column index.  rows: the rows to optimise (a slice, an index array, or
    None: all), e.g. one soft mesh's `handle.param_rows`.  The value has shape (len(rows),).
    """

    def __init__(self, field, column, name="", lower=None, upper=None, log_space=False, lr=None, rows=None):
        table = field.to_numpy()
        if table.ndim != 2:
            raise ValueError(f"ColumnParam {name!r}: field must be a table (rows, columns), got shape {table.shape}")
        if not (isinstance(column, (int, np.integer)) and 0 <= column < table.shape[1]):
            raise ValueError(f"ColumnParam {name!r}: column must be an integer in [0, {table.shape[1] - 1}], "
                             f"got {column!r}")
        self.column = int(column)
        self.rows = np.arange(table.shape[0])[slice(None) if rows is None else rows].reshape(-1)
        if self.rows.size == 0:
            raise ValueError(f"ColumnParam {name!r}: rows selects no row of the {table.shape[0]}-row table")
        super().__init__(field, name or f"{getattr(field, 'name', None) or 'column'}[:, {self.column}]",
                         lower, upper, log_space, lr)

    def value(self):
        return self.field.to_numpy().astype(np.float64)[self.rows, self.column]

    def grad(self):
        g = self.field_grad()[self.rows, self.column]
        return self._add_dependent_grads(g)

    def write(self, value):
        kept = self._dependent_values()
        table = self.field.to_numpy()
        table[self.rows, self.column] = np.asarray(value, dtype=table.dtype).reshape(-1)
        self.field.from_numpy(table)
        self._rewrite_dependents(kept)


class RatioParam(Param):
    """A value per unit of another quantity, e.g. a contact stiffness per unit mass:
    the optimiser's coordinate is theta = field / denominator, and writing theta sets
    field = theta * denominator.

    denominator: a Param (e.g. the body mass, itself optimised or not) or a Taichi
        field, whose value broadcasts to the field's shape (a 0-D ground stiffness
        over one particle mass, or per-body ke over per-body mass).
    When the denominator is a Param, it is tied to this one: writing it rewrites this
    field so that theta is kept (ke = theta * new m), and its gradient gains the term
    theta dL/dfield (dL/dm at fixed theta = dL/dm + dL/dke * theta), so optimising m
    and ke / m together is consistent.  Chain rule: dL/dtheta = dL/dfield * denominator.
    Bounds and log_space apply to theta (e.g. ke / m in [1e2, 1e5] 1/s^2).
    """

    def __init__(self, field, denominator, name="", lower=None, upper=None, log_space=False, lr=None):
        self.denominator = denominator
        self._shape = field.to_numpy().shape
        den = self._den()
        try:
            np.broadcast_to(den, self._shape)
        except ValueError:
            raise ValueError(f"RatioParam {name!r}: the denominator's shape {den.shape} does not broadcast to the "
                             f"field's shape {self._shape}") from None
        if np.any(den == 0) or not np.all(np.isfinite(den)):
            raise ValueError(f"RatioParam {name!r}: the denominator must be finite and non-zero, got {_fmt(den)}")
        super().__init__(field, name, lower, upper, log_space, lr)
        if isinstance(denominator, Param):
            if not hasattr(denominator, "_dependents"):
                denominator._dependents = []
            denominator._dependents.append(self)

    def _den_raw(self):
        d = self.denominator
        return d.value() if isinstance(d, Param) else d.to_numpy().astype(np.float64)

    def _den(self):
        den = self._den_raw()
        # one mass for a 0-D field (a ground stiffness per unit of one particle's mass)
        return den.reshape(()) if den.size == 1 and self._shape == () else den

    def value(self):
        return self.field.to_numpy().astype(np.float64) / self._den()

    def grad(self):
        g = self.field_grad() * self._den()
        return self._add_dependent_grads(g)

    def write(self, value):
        kept = self._dependent_values()
        v = np.broadcast_to(np.asarray(value, dtype=np.float64) * self._den(), self._shape)
        self.field.from_numpy(np.array(v, dtype=np_float(), order="C"))
        self._rewrite_dependents(kept)

    def grad_wrt_denominator(self):
        """This Param's term of dL/d denominator at fixed theta: theta dL/dfield, summed
        over the axes the denominator was broadcast along."""
        g = self.field_grad() * self.value()
        den_shape = np.shape(self._den())
        extra = g.ndim - len(den_shape)
        g = g.sum(axis=tuple(range(extra))) if extra > 0 else g
        axes = tuple(k for k, n in enumerate(den_shape) if n == 1 and g.shape[k] != 1)
        g = g.sum(axis=axes, keepdims=True) if axes else g
        return g.reshape(np.shape(self._den_raw()))


class TiedParam(Param):
    """One optimiser coordinate theta written to several fields by a user map.

    ties: a sequence of (field, forward, backward):
        forward(theta) -> the field's values (numpy, the field's shape);
        backward(theta, g) -> dL/dtheta's share, given g = dL/dfield (the field's `.grad`),
            i.e. the vector-Jacobian product of `forward` (its chain rule).
    value: the initial theta (array-like); the fields are written from it at construction.
    Example, two bodies sharing one log-space friction coefficient:
        TiedParam([(model.body_mu, lambda t: np.full(2, t), lambda t, g: g.sum())], value=0.5,
                  name="mu", lower=0.05, upper=2, log_space=True)
    Check a map's chain rule with `tgs.check_param_gradient` (the tests do, in float64).
    """

    def __init__(self, ties, value, name="tied", lower=None, upper=None, log_space=False, lr=None):
        self.ties = [tuple(t) for t in ties]
        if not self.ties or any(len(t) != 3 or not (callable(t[1]) and callable(t[2])) for t in self.ties):
            raise ValueError(f"TiedParam {name!r}: ties must be a non-empty sequence of (field, forward, backward) "
                             "with forward and backward callables")
        self._theta = np.array(value, dtype=np.float64)
        super().__init__(self.ties[0][0], name, lower, upper, log_space, lr)
        self.write(self._theta)

    def value(self):
        return self._theta.copy()

    def grad(self):
        g = np.zeros_like(self._theta)
        for fld, _, backward in self.ties:
            g = g + np.asarray(backward(self._theta.copy(), fld.grad.to_numpy().astype(np.float64)),
                               dtype=np.float64).reshape(self._theta.shape)
        return self._add_dependent_grads(g)

    def write(self, value):
        kept = self._dependent_values()
        self._theta = np.asarray(value, dtype=np.float64).reshape(self._theta.shape).copy()
        for fld, forward, _ in self.ties:
            shape = fld.to_numpy().shape
            v = np.asarray(forward(self._theta.copy()), dtype=np.float64)
            try:
                v = np.broadcast_to(v, shape)
            except ValueError:
                raise ValueError(f"TiedParam {self.name!r}: forward returned shape {v.shape} for a field of shape "
                                 f"{shape}") from None
            fld.from_numpy(np.array(v, dtype=fld.to_numpy().dtype, order="C"))
        self._rewrite_dependents(kept)


def smoothing_matrix(points, length):
    """Gaussian smoothing matrix B (N, N) over `points` (N, 3) [m] with width `length`
    [m], scaled so that its rows sum to 1 on average; None (the identity) for length <= 0."""
    if length <= 0:
        return None
    pts = np.asarray(points, dtype=np.float64)
    d2 = ((pts[:, None, :] - pts[None, :, :]) ** 2).sum(-1)
    K = np.exp(-0.5 * d2 / float(length) ** 2)
    return K / K.sum(1).mean()


class BasisParam(Param):
    """A field optimised through a linear basis: the optimiser's coordinates are z
    (shape (k,) + the field's trailing shape), and

        field = clip(base + B z)            (additive)
        field = clip(base * exp(B z))       (multiplicative: relative steps, stays > 0)

    with `base` the field when the Param is made (or at `start()`), B (N, k) the
    basis (None: the identity) and clip to [lower, upper].  Examples: B = ones((N, 1))
    scales a whole field by one factor; B = `smoothing_matrix(rest, 0.25)` makes the
    steps smoothed gradients B^T g (a Sobolev-type preconditioner that keeps steps out
    of particle-to-particle patterns a video cannot see).  `internal_grad` is the chain
    rule B^T (dL/dfield [* field]), checked by `tgs.check_param_gradient` in the tests.
    """

    def __init__(self, field, basis=None, name="", multiplicative=False, lower=None, upper=None):
        self.basis = None if basis is None else np.asarray(basis, dtype=np.float64)
        self.multiplicative = bool(multiplicative)
        self._field_bounds = (lower, upper)
        self.bounds = (-np.inf if lower is None else lower, np.inf if upper is None else upper)
        super().__init__(field, name)       # no Param bounds: those would clip z, not the field
        self.start()

    def _validate(self):
        # the bounds clip the field (not z): check them against the field's values
        check_bounds(self.name, self.field.to_numpy(), *self._field_bounds, log_space=False,
                     rel_tol=_field_eps(self.field))

    def start(self):
        """Take the field's current values as `base` (z = 0)."""
        self.base = self.field.to_numpy().astype(np.float64)
        k = len(self.base) if self.basis is None else self.basis.shape[1]
        self.z = np.zeros((k,) + self.base.shape[1:])

    def _apply(self, x):
        return x if self.basis is None else np.tensordot(self.basis, x, axes=1)

    def value(self):
        return self.z.copy()

    def internal_grad(self):
        g = self.field_grad()
        if self.multiplicative:
            g = g * self.field.to_numpy().astype(np.float64)
        return g if self.basis is None else np.tensordot(self.basis.T, g, axes=1)

    def write(self, value):
        self.z = np.asarray(value, dtype=np.float64).reshape(self.z.shape)
        step = self._apply(self.z)
        v = self.base * np.exp(step) if self.multiplicative else self.base + step
        self.field.from_numpy(np.clip(v, *self.bounds).astype(self.field.to_numpy().dtype))


def as_params(params):
    """Params as given, a bare field wrapped as `Param(field)`."""
    return [p if isinstance(p, Param) else Param(p) for p in params]


_as_params = as_params


class Optimizer:
    """Base: keeps internal (possibly log) coordinates of each Param."""

    def __init__(self, params: Sequence, lr: float):
        if not (lr > 0 and math.isfinite(lr)):
            raise ValueError(f"lr: must be a finite number > 0, got {lr!r}")
        self.params = _as_params(params)
        self.lr = float(lr)
        self.iteration = 0

    def step(self):
        """Update every parameter from its field's `.grad`."""
        self.iteration += 1
        for k, p in enumerate(self.params):
            x = p.to_internal(p.value())
            g = p.internal_grad()
            if not np.all(np.isfinite(g)):
                raise SimulationError(f"gradient of {p.name!r} is not finite at iteration {self.iteration}")
            x = x - self._update(k, g, p.lr or self.lr)
            p.write(p.from_internal(x))

    def state_dict(self):
        return {"lr": self.lr, "iteration": self.iteration}

    def load_state_dict(self, state):
        self.lr, self.iteration = float(state["lr"]), int(state["iteration"])


class SGD(Optimizer):
    """Plain gradient descent with optional momentum."""

    def __init__(self, params, lr=1e-2, momentum=0.0):
        super().__init__(params, lr)
        self.momentum = momentum
        self._v = [None] * len(self.params)

    def _update(self, k, g, lr):
        v = g if self._v[k] is None else self.momentum * self._v[k] + g
        self._v[k] = v
        return lr * v

    def state_dict(self):
        return {**super().state_dict(), "v": self._v}

    def load_state_dict(self, state):
        super().load_state_dict(state)
        self._v = list(state["v"])


class Adam(Optimizer):
    """Adam (Kingma & Ba 2015) with bias correction.

    lr_decay: the learning rate is multiplied by this factor after every step
    (exponential schedule; 1 = constant).
    """

    def __init__(self, params, lr=1e-2, betas=(0.9, 0.999), eps=1e-8, lr_decay=1.0):
        super().__init__(params, lr)
        if not (0 < lr_decay <= 1):
            raise ValueError(f"lr_decay: must be in (0, 1], got {lr_decay!r}")
        self.betas, self.eps, self.lr_decay = betas, eps, float(lr_decay)
        self._m = [None] * len(self.params)
        self._v = [None] * len(self.params)

    def step(self):
        super().step()
        self.lr *= self.lr_decay

    def _update(self, k, g, lr):
        b1, b2 = self.betas
        m = (1 - b1) * g if self._m[k] is None else b1 * self._m[k] + (1 - b1) * g
        v = (1 - b2) * g * g if self._v[k] is None else b2 * self._v[k] + (1 - b2) * g * g
        self._m[k], self._v[k] = m, v
        mhat = m / (1 - b1 ** self.iteration)
        vhat = v / (1 - b2 ** self.iteration)
        return lr * mhat / (np.sqrt(vhat) + self.eps)

    def state_dict(self):
        return {**super().state_dict(), "m": self._m, "v": self._v}

    def load_state_dict(self, state):
        super().load_state_dict(state)
        self._m, self._v = list(state["m"]), list(state["v"])


class BFGS(Optimizer):
    """Quasi-Newton steps (BFGS inverse-Hessian updates) over the internal
    coordinates of all parameters together, one gradient per step and no line
    search: meant to polish a fit of a few parameters near its minimum (e.g.
    after Adam), where it converges much faster than a first-order method.
    For a single scalar parameter it is the secant method on the gradient.

    lr: trust radius, the largest change of any internal coordinate in one
    step (in log-space: a factor exp(lr)); the first step is a gradient step
    of that length.  Pairs that violate the curvature condition s.y > 0 are
    skipped.  Memory and time are O(n^2) in the number n of parameter values.
    """

    def __init__(self, params, lr=1e-2):
        super().__init__(params, lr)
        self._x = self._g = self._H = None

    def _flat(self):
        xs, gs = [], []
        for p in self.params:
            xs.append(np.ravel(p.to_internal(p.value())))
            g = np.ravel(p.internal_grad())
            if not np.all(np.isfinite(g)):
                raise SimulationError(f"gradient of {p.name!r} is not finite at iteration {self.iteration}")
            gs.append(g)
        return np.concatenate(xs), np.concatenate(gs)

    def step(self):
        self.iteration += 1
        x, g = self._flat()
        if self._x is not None:
            s, y = x - self._x, g - self._g
            sy = float(s @ y)
            if sy > 1e-12 * np.linalg.norm(s) * np.linalg.norm(y):
                if self._H is None:
                    self._H = np.eye(len(x)) * (sy / float(y @ y))
                rho = 1.0 / sy
                v = np.eye(len(x)) - rho * np.outer(s, y)
                self._H = v @ self._H @ v.T + rho * np.outer(s, s)
        gmax = float(np.max(np.abs(g))) if g.size else 0.0
        if self._H is None:
            d = -self.lr * g / gmax if gmax > 0 else np.zeros_like(g)
        else:
            d = -self._H @ g
        dmax = float(np.max(np.abs(d))) if d.size else 0.0
        if dmax > self.lr:
            d *= self.lr / dmax
        self._x, self._g = x, g
        _write_internal_vector(self.params, x + d)

    def state_dict(self):
        return {**super().state_dict(), "x": self._x, "g": self._g, "H": self._H}

    def load_state_dict(self, state):
        super().load_state_dict(state)
        self._x, self._g, self._H = state["x"], state["g"], state["H"]


def _internal_vector(params):
    return np.concatenate([np.ravel(p.to_internal(p.value())) for p in params])


def _write_internal_vector(params, x):
    k = 0
    for p in params:
        shape = np.shape(p.value())
        n = int(np.prod(shape))
        p.write(p.from_internal(np.asarray(x[k:k + n]).reshape(shape)))
        k += n


# Public parameter packing: every Param's internal (log where log_space) coordinates as one flat vector,
# in Param order (what identify, fit_report and least_squares search in).
pack = _internal_vector                # pack(params) -> (n,) internal coordinates
unpack = _write_internal_vector        # unpack(params, x): write them back (clamped to the bounds)


def internal_bounds(params):
    """(lower, upper), each (n,): the packed coordinates' bounds (+-inf where a Param has none)."""
    return tuple(np.concatenate([p.internal_bounds()[i].reshape(-1) for p in params]) for i in (0, 1))


def least_squares(residuals: Callable[[], np.ndarray], params: Sequence, iters: int = 10, fd_step: float = 1e-4,
                  damping: float = 1e-3, log_every: int = 1, printer=print, history: Optional["History"] = None,
                  rtol: float = 1e-14, stop_mse: float = 0.0):
    """Levenberg-Marquardt refinement of `params` minimising |residuals()|^2 / 2.

    `residuals()` runs the model at the parameters' current values and returns
    the residual vector (e.g. rendered minus target pixels).  The Jacobian
    with respect to the internal (log-space where asked) coordinates is taken
    by central finite differences of step `fd_step`, so each iteration costs
    2 n + 1 or more residual evaluations (n parameter values): meant for
    polishing a handful of parameters near the minimum of a fit, where
    Gauss-Newton converges much faster than gradient descent (quadratically
    on zero-residual problems).  A step is kept only if it lowers the cost
    (else the damping grows).  Records the cost (|r|^2 / 2) and parameter
    values in `history` every iteration (the cost as the mean squared residual
    |r|^2 / len(r), the scale of an MSE loss); returns the History.
    stop_mse: stop once that mean squared residual is <= stop_mse (the fit is as
    good as the data allow, e.g. round-off on synthetic targets; 0: only at an
    exact zero).
    """
    if not stop_mse >= 0:
        raise ValueError(f"stop_mse: expected a mean squared residual >= 0, got {stop_mse!r}")
    params = _as_params(params)
    history = history or History()
    start = time.time()
    x = _internal_vector(params)
    r = np.ravel(residuals())
    cost = 0.5 * float(r @ r)
    lam = float(damping)
    for it in range(iters + 1):
        history.record(2 * cost / max(r.size, 1), params, time.time() - start)
        if log_every and (it % log_every == 0 or it == iters):
            printer(f"LM {it:4d}/{iters}  mse {2 * cost / max(r.size, 1):.6e}  damping {lam:.1e}  "
                    + "  ".join(_summary(p) for p in params))
        if it == iters or cost == 0.0:
            break
        if 2 * cost / max(r.size, 1) <= stop_mse:
            if log_every:
                printer(f"LM {it:4d}/{iters}  stopped: mse <= stop_mse {stop_mse:.1e}")
            break
        J = np.empty((r.size, x.size))
        for i in range(x.size):
            cols = []
            for sgn in (1.0, -1.0):
                xi = x.copy()
                xi[i] += sgn * fd_step
                _write_internal_vector(params, xi)
                cols.append(np.ravel(residuals()))
            J[:, i] = (cols[0] - cols[1]) / (2 * fd_step)
        A, g = J.T @ J, J.T @ r
        diag = np.maximum(np.diag(A), 1e-300)
        improved = False
        for _ in range(12):
            try:
                dx = -np.linalg.solve(A + lam * np.diag(diag), g)
            except np.linalg.LinAlgError:
                lam *= 10.0
                continue
            _write_internal_vector(params, x + dx)
            x_new = _internal_vector(params)          # bounds may clamp
            r_new = np.ravel(residuals())
            cost_new = 0.5 * float(r_new @ r_new)
            if np.isfinite(cost_new) and cost_new < cost:
                x, r, lam = x_new, r_new, max(lam / 3.0, 1e-12)
                converged = cost - cost_new <= rtol * cost
                cost = cost_new
                improved = True
                break
            lam *= 4.0
        _write_internal_vector(params, x)
        if not improved or converged:
            if log_every:
                printer(f"LM {it + 1:4d}/{iters}  stopped: {'no step lowers the cost' if not improved else 'converged'}")
            break
    return history


@dataclass
class History:
    """What `optimize` recorded: per iteration the loss and each parameter's value."""

    loss: list = dc_field(default_factory=list)
    params: dict = dc_field(default_factory=dict)
    seconds: list = dc_field(default_factory=list)
    retries: int = 0
    stop_reason: str = ""

    def record(self, loss, params, seconds):
        self.loss.append(float(loss))
        for p in params:
            self.params.setdefault(p.name, []).append(p.value().copy())
        self.seconds.append(seconds)

    def restore_best(self, params, start=0) -> Optional[int]:
        """Write into `params` the values they had at the lowest loss recorded from entry
        `start` on, when that loss is below the last one (optimisers without a line
        search, such as `BFGS` and `Adam`, may end above their best iterate).  Entries
        are matched by position, so `start` must be where these params' records begin
        (`len(history.loss)` before their phase).  Returns the index written, or None
        (nothing recorded, or the last entry is the best)."""
        if len(self.loss) <= start:
            return None
        best = start + int(np.argmin(self.loss[start:]))
        if not self.loss[best] < self.loss[-1]:
            return None
        for p in params:
            trace = self.params.get(p.name, [])
            offset = len(trace) - (len(self.loss) - best)     # this param's record of entry `best`
            if offset < 0:
                raise ValueError(f"restore_best: {p.name!r} was not recorded at entry {best}")
            p.write(trace[offset])
        return best


def param_summary(p: Param) -> str:
    """One short text of a Param's value ("mass=[1.02]", or its mean when it has many entries)."""
    v = p.value()
    if v.size <= 3:
        return f"{p.name}=" + np.array2string(v.reshape(-1), precision=5, separator=",")
    return f"{p.name}[mean]={v.mean():.5g}"


_summary = param_summary


@dataclass
class StopCriteria:
    """When `optimize` stops before its `iters` (any criterion that is not None):

    loss_tol: the loss is <= loss_tol.
    rtol, window: the loss fell by less than rtol (relative) over the last `window`
        iterations of this call (min over the window before vs the current loss).
    gtol: the largest |gradient| in the optimiser's (log where log_space) coordinates
        is <= gtol.
    time_budget: seconds since this call started.
    The reason is kept in `History.stop_reason` ("iters" when none fired).
    """

    loss_tol: Optional[float] = None
    rtol: Optional[float] = None
    window: int = 10
    gtol: Optional[float] = None
    time_budget: Optional[float] = None

    def __post_init__(self):
        for name in ("loss_tol", "rtol", "gtol", "time_budget"):
            v = getattr(self, name)
            if v is not None and not (isinstance(v, (int, float, np.floating)) and v >= 0 and not math.isnan(v)):
                raise ValueError(f"StopCriteria.{name}: must be a number >= 0 or None, got {v!r}")
        if not (isinstance(self.window, (int, np.integer)) and self.window >= 1):
            raise ValueError(f"StopCriteria.window: must be an integer >= 1, got {self.window!r}")

    def reason(self, losses, params, seconds) -> str:
        """Why to stop now ("" to go on), given this call's losses so far."""
        if self.loss_tol is not None and losses[-1] <= self.loss_tol:
            return f"loss {losses[-1]:.3e} <= loss_tol {self.loss_tol:.3e}"
        if self.rtol is not None and len(losses) > self.window:
            before = min(losses[:-self.window])
            if before - losses[-1] <= self.rtol * abs(before):
                return f"loss fell by less than rtol {self.rtol:g} over {self.window} iterations"
        if self.gtol is not None:
            gmax = max((float(np.max(np.abs(p.internal_grad()))) for p in params), default=0.0)
            if gmax <= self.gtol:
                return f"gradient {gmax:.3e} <= gtol {self.gtol:.3e}"
        if self.time_budget is not None and seconds >= self.time_budget:
            return f"time budget {self.time_budget:g} s spent"
        return ""


def optimize(forward: Callable[[], None], loss, optimizer: Optimizer, iters: int, log_every: int = 1,
             callback: Optional[Callable[[int, float], None]] = None, max_retries: int = 4,
             printer=print, history: Optional[History] = None, stop: Optional[StopCriteria] = None) -> History:
    """Gradient descent: each iteration runs `forward()` under `ti.ad.Tape(loss)`
    and steps the optimizer, `iters` times, or until a `stop` criterion holds
    (`StopCriteria`; the reason goes to `history.stop_reason`).

    A rollout that blows up (SimulationError or a non-finite loss) goes back to
    the parameters before the last step, halves the learning rate and takes
    that step again, at most `max_retries` times in a row.  Progress
    (iteration, loss, parameter values) is printed every `log_every`
    iterations.  Returns the History, whose last entry is the loss at the final
    parameters (so it has iters + 1 entries when no criterion stops it early).
    """
    for p in optimizer.params:
        check_has_grad(p)                    # before the first rollout
    history = history or History()
    start = time.time()
    retries = 0
    snapshot = None
    it = optimizer.iteration
    losses = []
    while True:
        try:
            with tape(loss):                 # ti.ad.Tape(loss), its clearing cheaper (core.tape)
                forward()
            value = float(loss[None])
            if not math.isfinite(value):
                raise SimulationError(f"the loss is {value}")
        except SimulationError as exc:
            if snapshot is None or retries >= max_retries:
                raise
            retries += 1
            history.retries += 1
            values, state, grads = snapshot
            optimizer.load_state_dict(copy.deepcopy(state))
            optimizer.lr *= 0.5
            for p, v, g in zip(optimizer.params, values, grads):
                p.write(v)
                p.field.grad.from_numpy(g)
            printer(f"iter {it:4d}  rollout diverged ({exc}); retrying the step with lr {optimizer.lr:.3g}")
            optimizer.step()
            continue
        retries = 0
        # optimizers over many Params of one field (`PerCopy`) read it once for all of them
        reading = getattr(optimizer, "reading", contextlib.nullcontext)
        with reading():
            history.record(value, optimizer.params, time.time() - start)
        if callback:
            callback(it, value)
        losses.append(value)
        reason = stop.reason(losses, optimizer.params, time.time() - start) if stop is not None else ""
        if it >= iters and not reason:
            reason = "iters"
        if log_every and (it % log_every == 0 or reason):
            with reading():
                printer(f"iter {it:4d}/{iters}  loss {value:.6e}  " + "  ".join(_summary(p) for p in optimizer.params))
        if reason:
            history.stop_reason = reason
            if log_every and reason != "iters":
                printer(f"iter {it:4d}/{iters}  stopped: {reason}")
            break
        with reading():
            grads = {}                       # one copy per field, however many Params share it
            for p in optimizer.params:
                if id(p.field) not in grads:
                    grads[id(p.field)] = p.field.grad.to_numpy()
            snapshot = ([p.value() for p in optimizer.params], copy.deepcopy(optimizer.state_dict()),
                        [grads[id(p.field)] for p in optimizer.params])
        optimizer.step()
        it += 1
    return history
