"""Optimizers over Taichi parameter fields, and an optimisation loop with progress.

Parameters are described by `Param(field, lower, upper, log_space)`: bounds are
enforced by clamping after each step; `log_space=True` optimises log(value)
(for stiffnesses and masses that span decades and must stay positive), so a
step changes the value by a factor rather than an amount.
"""
import copy
import math
import time
from dataclasses import dataclass, field as dc_field
from typing import Callable, Optional, Sequence

import numpy as np
import taichi as ti

from .errors import SimulationError
from .runtime import np_float


@dataclass
class Param:
    """A differentiable field to optimise.

    field: Taichi field with needs_grad.  name: label for logs and plots.
    lower, upper: bounds (scalars or arrays) in the field's units.
    log_space: optimise log(value); values must be > 0.
    lr: learning rate for this parameter (None: the optimizer's).
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
        if self.log_space and np.any(self.field.to_numpy() <= 0):
            raise ValueError(f"Param {self.name!r}: log_space needs values > 0, got {self.field.to_numpy()}")

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

    def internal_grad(self):
        g = self.field.grad.to_numpy().astype(np.float64)
        return g * self.value() if self.log_space else g   # d/d(log p) = p d/dp

    def write(self, value):
        self.field.from_numpy(np.array(value, dtype=np_float(), order="C").reshape(self.field.to_numpy().shape))


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
        self.bounds = (-np.inf if lower is None else lower, np.inf if upper is None else upper)
        super().__init__(field, name)       # no Param bounds: those would clip z, not the field
        self.start()

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
        g = self.field.grad.to_numpy().astype(np.float64)
        if self.multiplicative:
            g = g * self.field.to_numpy().astype(np.float64)
        return g if self.basis is None else np.tensordot(self.basis.T, g, axes=1)

    def write(self, value):
        self.z = np.asarray(value, dtype=np.float64).reshape(self.z.shape)
        step = self._apply(self.z)
        v = self.base * np.exp(step) if self.multiplicative else self.base + step
        self.field.from_numpy(np.clip(v, *self.bounds).astype(self.field.to_numpy().dtype))


def _as_params(params):
    return [p if isinstance(p, Param) else Param(p) for p in params]


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


def least_squares(residuals: Callable[[], np.ndarray], params: Sequence, iters: int = 10, fd_step: float = 1e-4,
                  damping: float = 1e-3, log_every: int = 1, printer=print, history: Optional["History"] = None,
                  rtol: float = 1e-14):
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
    """
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

    def record(self, loss, params, seconds):
        self.loss.append(float(loss))
        for p in params:
            self.params.setdefault(p.name, []).append(p.value().copy())
        self.seconds.append(seconds)


def _summary(p: Param) -> str:
    v = p.value()
    if v.size <= 3:
        return f"{p.name}=" + np.array2string(v.reshape(-1), precision=5, separator=",")
    return f"{p.name}[mean]={v.mean():.5g}"


def optimize(forward: Callable[[], None], loss, optimizer: Optimizer, iters: int, log_every: int = 1,
             callback: Optional[Callable[[int, float], None]] = None, max_retries: int = 4,
             printer=print, history: Optional[History] = None) -> History:
    """Gradient descent: each iteration runs `forward()` under `ti.ad.Tape(loss)`
    and steps the optimizer, `iters` times.

    A rollout that blows up (SimulationError or a non-finite loss) goes back to
    the parameters before the last step, halves the learning rate and takes
    that step again, at most `max_retries` times in a row.  Progress
    (iteration, loss, parameter values) is printed every `log_every`
    iterations.  Returns the History, whose last entry is the loss at the final
    parameters (so it has iters + 1 entries).
    """
    history = history or History()
    start = time.time()
    retries = 0
    snapshot = None
    it = optimizer.iteration
    while True:
        try:
            with ti.ad.Tape(loss):
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
        history.record(value, optimizer.params, time.time() - start)
        if callback:
            callback(it, value)
        if log_every and (it % log_every == 0 or it >= iters):
            printer(f"iter {it:4d}/{iters}  loss {value:.6e}  " + "  ".join(_summary(p) for p in optimizer.params))
        if it >= iters:
            break
        snapshot = ([p.value() for p in optimizer.params], copy.deepcopy(optimizer.state_dict()),
                    [p.field.grad.to_numpy() for p in optimizer.params])
        optimizer.step()
        it += 1
    return history
