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
    """Adam (Kingma & Ba 2015) with bias correction."""

    def __init__(self, params, lr=1e-2, betas=(0.9, 0.999), eps=1e-8):
        super().__init__(params, lr)
        self.betas, self.eps = betas, eps
        self._m = [None] * len(self.params)
        self._v = [None] * len(self.params)

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
