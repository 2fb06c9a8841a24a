"""Optimizers over Taichi parameter fields, and an optimisation loop with progress.

This module holds the optimizers (`SGD`, `Adam`, `BFGS`) and the loop (`optimize`); the parameters are in
`params.py`, the record of a run and the stopping rules in `history.py`, Levenberg-Marquardt in
`levenberg_marquardt.py`.  Every name is importable from here as before.
"""
import contextlib
import copy
import math
import time
from typing import Callable, Optional, Sequence

import numpy as np

from ..core.errors import SimulationError
from ..core.tape import tape
from .history import History, StopCriteria, param_summary
from .params import as_params, check_has_grad, unpack

# every public name that was defined here stays importable from here
from .levenberg_marquardt import least_squares  # noqa: F401
from .params import internal_bounds, pack  # noqa: F401
from .params import (BasisParam, ColumnParam, Param, RatioParam, TiedParam, check_bounds,  # noqa: F401
                     smoothing_matrix)


class Optimizer:
    """Base: keeps internal (possibly log) coordinates of each Param."""

    def __init__(self, params: Sequence, lr: float):
        if not (lr > 0 and math.isfinite(lr)):
            raise ValueError(f"lr: must be a finite number > 0, got {lr!r}")
        self.params = as_params(params)
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
    of that length, unless `inverse_hessian` is given.  Pairs that violate the
    curvature condition s.y > 0 are skipped.  Memory and time are O(n^2) in the
    number n of parameter values.

    A Param with its own `lr` (as Adam takes it: the scale of a step in its
    units, e.g. a camera correction's CAMERA_LR rad / m against the unknowns'
    log units) has that trust radius instead, and its coordinates enter the
    first gradient step and the first curvature guess scaled by p.lr / lr:
    the steps are taken in coordinates z = x / scale, where every coordinate
    has the same step scale.  Why: without the scaling the first step goes
    wholly to the coordinate of the largest gradient, and a camera turn of
    1 rad moves the image far more than a unit log change of a material does,
    so that step turned the camera by lr = 0.05 rad (3 degrees: the loss x34
    on Newton's soft cube) and the first curvature guess sy / yy I, set by the
    camera's curvature, then kept every physics step tiny (benchmarks/
    RESULTS.md, branch cam44b).  BFGS's updates are invariant to such a
    scaling; only the first step, the first guess and the trust radius are not.

    inverse_hessian: (n, n) symmetric positive definite, in the internal
    coordinates and the loss's units: the curvature to start from (e.g. the
    `inverse_hessian` of a BFGS run on a cheaper model of the same loss, as
    `tgs.identify`'s `bfgs_inverse_hessian`); the first step is then the
    quasi-Newton step -H g (still within the trust radius) instead of a
    gradient step of the whole radius, which would throw a start that is
    already near the minimum out of it.
    """

    def __init__(self, params, lr=1e-2, inverse_hessian=None):
        super().__init__(params, lr)
        self._x = self._g = self._H = None
        # each internal coordinate's step scale: its Param's own lr over the trust radius lr (1 without one)
        self._scale = np.concatenate([np.full(int(np.size(p.value())), (p.lr or self.lr) / self.lr)
                                      for p in self.params]) if self.params else np.zeros(0)
        if inverse_hessian is not None:
            H = np.array(inverse_hessian, dtype=np.float64)
            n = sum(int(np.size(p.value())) for p in self.params)
            if H.shape != (n, n) or not np.all(np.isfinite(H)) or not np.allclose(H, H.T, rtol=1e-8, atol=0.0):
                raise ValueError(f"inverse_hessian: expected a finite symmetric ({n}, {n}) matrix (the parameters' "
                                 f"{n} internal coordinates), got shape {H.shape}")
            try:
                np.linalg.cholesky(0.5 * (H + H.T))
            except np.linalg.LinAlgError:
                raise ValueError("inverse_hessian: expected a positive definite matrix (a descent direction "
                                 "-H g), got one with an eigenvalue <= 0") from None
            self._H = 0.5 * (H + H.T)

    @property
    def inverse_hessian(self):
        """The current inverse-Hessian estimate (n, n) (a copy), or None before the first curvature pair."""
        return None if self._H is None else self._H.copy()

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
                if self._H is None:          # sy / yy in the scaled coordinates z = x / scale
                    sc = self._scale
                    self._H = np.diag(sc ** 2) * (sy / float((sc * y) @ (sc * y)))
                rho = 1.0 / sy
                v = np.eye(len(x)) - rho * np.outer(s, y)
                self._H = v @ self._H @ v.T + rho * np.outer(s, s)
        sc = self._scale                    # steps in z = x / sc: dz = d / sc, dL/dz = sc g
        gmax = float(np.max(np.abs(sc * g))) if g.size else 0.0
        if self._H is None:
            d = -self.lr * sc * (sc * g) / gmax if gmax > 0 else np.zeros_like(g)
        else:
            d = -self._H @ g
        dmax = float(np.max(np.abs(d / sc))) if d.size else 0.0
        if dmax > self.lr:
            d *= self.lr / dmax
        self._x, self._g = x, g
        unpack(self.params, x + d)

    def state_dict(self):
        return {**super().state_dict(), "x": self._x, "g": self._g, "H": self._H}

    def load_state_dict(self, state):
        super().load_state_dict(state)
        self._x, self._g, self._H = state["x"], state["g"], state["H"]


def objective_function(forward: Optional[Callable[[], None]], loss, residuals: Optional[Callable[[], np.ndarray]]):
    """The fit's objective at the parameters' current values, as one callable used by every search:
    loss[None] after `forward()` (the Tape path, `forward` given) or 1/2 |r|^2 of `residuals()` (the
    least-squares path).  Returns a float."""
    def objective():
        if forward is not None:
            loss[None] = 0.0
            forward()
            return float(loss[None])
        r = np.ravel(residuals())
        return 0.5 * float(r @ r)
    return objective


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
                printer(f"iter {it:4d}/{iters}  loss {value:.6e}  " + "  ".join(param_summary(p) for p in optimizer.params))
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
