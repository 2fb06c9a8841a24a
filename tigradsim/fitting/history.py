"""The record of a fit (`History`: per iteration the loss and each parameter's value) and when to stop one
early (`StopCriteria`), shared by `optimize` and `least_squares`."""
import math
from dataclasses import dataclass, field as dc_field
from typing import Optional

import numpy as np

from .params import Param


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
