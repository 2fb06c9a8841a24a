"""Parameters of a fit: Taichi fields, or a map onto them, seen by the optimizers as internal coordinates.

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
a linear basis).  The optimizers that step them are in `optim.py`.
"""
from dataclasses import dataclass
from typing import Optional

import numpy as np

from ..core.model import has_grad
from ..core.runtime import np_float


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


# Parameter packing: every Param's internal (log where log_space) coordinates as one flat vector, in Param
# order (what identify, fit_report and least_squares search in).
def pack(params) -> np.ndarray:
    """(n,) the Params' internal coordinates, concatenated in order."""
    return np.concatenate([np.ravel(p.to_internal(p.value())) for p in params])


def unpack(params, x):
    """Write the packed internal coordinates `x` (n,) back into the Params (clamped to their bounds)."""
    k = 0
    for p in params:
        shape = np.shape(p.value())
        n = int(np.prod(shape))
        p.write(p.from_internal(np.asarray(x[k:k + n]).reshape(shape)))
        k += n


def internal_bounds(params):
    """(lower, upper), each (n,): the packed coordinates' bounds (+-inf where a Param has none)."""
    return tuple(np.concatenate([p.internal_bounds()[i].reshape(-1) for p in params]) for i in (0, 1))
