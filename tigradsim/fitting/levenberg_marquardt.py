"""Levenberg-Marquardt least squares over `Param`s, with a finite-difference Jacobian in their internal
coordinates (`least_squares`), stepping the Params' packed internal vector (`params.pack`)."""
import time
from typing import Callable, Optional, Sequence

import numpy as np

from .history import History, param_summary
from .params import as_params, pack, unpack


def least_squares(residuals: Callable[[], np.ndarray], params: Sequence, iters: int = 10, fd_step: float = 1e-4,
                  damping: float = 1e-3, log_every: int = 1, printer=print, history: Optional["History"] = None,
                  rtol: float = 1e-14, stop_mse: float = 0.0, step_tol: float = 0.01):
    """Levenberg-Marquardt refinement of `params` minimising |residuals()|^2 / 2.

    `residuals()` runs the model at the parameters' current values and returns
    the residual vector (e.g. rendered minus target pixels).  The Jacobian
    with respect to the internal (log-space where asked) coordinates is taken
    by central finite differences of step `fd_step`, so each iteration costs
    2 n + 1 or more residual evaluations (n parameter values): meant for
    polishing a handful of parameters near the minimum of a fit, where
    Gauss-Newton converges much faster than gradient descent (quadratically
    on zero-residual problems).  A step is kept only if it lowers the cost
    (the damping then falls by 3; else it grows by 4).  Records the cost
    (|r|^2 / 2) and parameter values in `history` every iteration (the cost as
    the mean squared residual |r|^2 / len(r), the scale of an MSE loss);
    returns the History.
    Why not Nielsen's gain-ratio rule (damping x max(1/3, 1 - (2 rho - 1)^3)):
    measured against this one on 17 fits and not kept; its steps were no
    shorter along the flat directions that carry weakly determined values to
    their bounds, and within a fit's few LM iterations its higher damping ended
    at higher losses (benchmarks/RESULTS.md, "Levenberg-Marquardt: Nielsen's
    damping rule").
    stop_mse: stop once that mean squared residual is <= stop_mse (the fit is as
    good as the data allow, e.g. round-off on synthetic targets; 0: only at an
    exact zero).
    step_tol: stop ("converged") once a kept step moves the estimate by less than
    step_tol of its own standard deviation: |J dx| <= step_tol * s, s^2 = |r|^2 /
    (N - n) the residuals' variance, i.e. the step's Mahalanobis length under the
    Gauss-Newton covariance s^2 (J^T J)^-1.  Why: on a noisy objective the steps
    near the minimum keep lowering the cost by round-off-sized amounts (rtol 1e-14
    is not reached), each one costing a Jacobian (2 n rollouts) and rejected
    trials, for moves no interval can show (the box push clip: iterations 4-8 of
    10).  A zero-residual problem (s -> 0) is not stopped by it; 0 turns it off.
    """
    if not stop_mse >= 0:
        raise ValueError(f"stop_mse: expected a mean squared residual >= 0, got {stop_mse!r}")
    if not step_tol >= 0:
        raise ValueError(f"step_tol: expected a fraction of a standard deviation >= 0, got {step_tol!r}")
    params = as_params(params)
    history = history or History()
    start = time.time()
    x = pack(params)
    r = np.ravel(residuals())
    cost = 0.5 * float(r @ r)
    lam = float(damping)
    for it in range(iters + 1):
        history.record(2 * cost / max(r.size, 1), params, time.time() - start)
        if log_every and (it % log_every == 0 or it == iters):
            printer(f"LM {it:4d}/{iters}  mse {2 * cost / max(r.size, 1):.6e}  damping {lam:.1e}  "
                    + "  ".join(param_summary(p) for p in params))
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
                unpack(params, xi)
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
            unpack(params, x + dx)
            x_new = pack(params)          # bounds may clamp
            r_new = np.ravel(residuals())
            cost_new = 0.5 * float(r_new @ r_new)
            if np.isfinite(cost_new) and cost_new < cost:
                converged = (cost - cost_new <= rtol * cost
                             or _within_step_tol(J @ (x_new - x), r_new, x.size, step_tol))
                x, r, lam = x_new, r_new, max(lam / 3.0, 1e-12)
                cost = cost_new
                improved = True
                break
            lam *= 4.0
        unpack(params, x)
        if not improved or converged:
            if log_every:
                printer(f"LM {it + 1:4d}/{iters}  stopped: {'no step lowers the cost' if not improved else 'converged'}")
            break
    return history


def _within_step_tol(J_step, r_new, n, step_tol) -> bool:
    """Whether the step's Mahalanobis length |J step| / s is <= step_tol, s^2 = |r_new|^2 / (N - n) (N
    residuals, n values); False where N <= n or the residuals are all zero (no noise scale)."""
    dof = r_new.size - n
    if step_tol <= 0 or dof <= 0:
        return False
    s2 = float(r_new @ r_new) / dof
    return s2 > 0.0 and float(J_step @ J_step) <= step_tol ** 2 * s2
