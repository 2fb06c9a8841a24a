"""Levenberg-Marquardt's damping follows the gain ratio (Nielsen's rule, fitting/levenberg_marquardt.py):
a kept step whose linear model was poor raises the damping instead of lowering it."""
import re

import numpy as np
import pytest
import taichi as ti

import tigradsim as tgs
from tigradsim.fitting.levenberg_marquardt import _damping_after, gain_ratio
from test_least_squares_stop import _problem


def test_gain_ratio_is_one_on_a_linear_residual_and_falls_with_curvature():
    rng = np.random.default_rng(3)
    J, b = rng.normal(size=(12, 3)), rng.normal(size=12)
    x = rng.normal(size=3)
    r = J @ x - b
    for lam in (0.0, 1e-2, 1.0, 30.0):                   # any damped step: the model is the residual itself
        step = -np.linalg.solve(J.T @ J + lam * np.eye(3), J.T @ r)
        r_new = J @ (x + step) - b
        assert gain_ratio(0.5 * r @ r, 0.5 * r_new @ r_new, J, r, step) == pytest.approx(1.0, rel=1e-10)
    # r(x) = atan(x) at 1.3: the Gauss-Newton step lowers the cost by ~1/9 of what its model promised
    x0 = 1.3
    r0, J0 = np.array([np.arctan(x0)]), np.array([[1.0 / (1.0 + x0 ** 2)]])
    step = -r0 / J0[0, 0]
    r1 = np.arctan(x0 + step)
    rho = gain_ratio(0.5 * float(r0 @ r0), 0.5 * float(r1 @ r1), J0, r0, step)
    assert 0.05 < rho < 0.2
    # a short step along it: the model is nearly exact
    short = step * 1e-4
    r_short = np.arctan(x0 + short)
    assert gain_ratio(0.5 * float(r0 @ r0), 0.5 * float(r_short @ r_short), J0, r0, short) == pytest.approx(1.0, abs=1e-3)
    # a step the model says climbs (e.g. clamped by a bound): 0, not a negative or infinite ratio
    assert gain_ratio(1.0, 0.5, J0, r0, -step) == 0.0


def test_damping_after_a_kept_step():
    assert _damping_after(3e-3, 1.0) == pytest.approx(1e-3)        # good model: / 3
    assert _damping_after(3e-3, 5.0) == pytest.approx(1e-3)        # better than the model: still / 3
    assert _damping_after(3e-3, 0.5) == pytest.approx(3e-3)        # half of it: unchanged
    assert _damping_after(3e-3, 0.0) == pytest.approx(6e-3)        # poor: x 2
    assert _damping_after(3e-3, -1.0) == pytest.approx(6e-3)
    assert _damping_after(1e-12, 1.0) == 1e-12                      # the floor


def _damping_log(lines):
    return [float(m.group(1)) for m in (re.search(r"damping (\S+)", s) for s in lines) if m]


def test_a_kept_step_with_a_poor_model_raises_the_damping(f64):
    """r = atan(x) from 1.3: the first (Gauss-Newton) step overshoots to -1.16 and is kept (the cost falls
    0.419 -> 0.370, rho 0.12); the damping then rises (x 1.45) where the plain rule divided it by 3."""
    x = ti.field(float, shape=())
    x[None] = 1.3
    params = [tgs.Param(x, "x", lower=-10.0, upper=10.0)]
    lines = []
    tgs.least_squares(lambda: np.array([np.arctan(x[None])]), params, iters=2, fd_step=1e-6,
                      printer=lines.append)
    damping = _damping_log(lines)
    assert damping[1] == pytest.approx(1e-3 * (1.0 - (2 * 0.117 - 1.0) ** 3), rel=0.05)
    assert damping[1] > damping[0]


def test_lm_still_converges_on_the_rosenbrock_valley(f64):
    """r = (10 (y - x^2), 1 - x) from (-1.2, 1): the curved valley, where the damping must both rise (the
    bend) and fall (along it).  Converges to (1, 1)."""
    x, y = ti.field(float, shape=()), ti.field(float, shape=())
    x[None], y[None] = -1.2, 1.0
    params = [tgs.Param(x, "x", lower=-5.0, upper=5.0), tgs.Param(y, "y", lower=-5.0, upper=5.0)]
    h = tgs.least_squares(lambda: np.array([10.0 * (y[None] - x[None] ** 2), 1.0 - x[None]]), params,
                          iters=60, fd_step=1e-7, log_every=0)
    assert x[None] == pytest.approx(1.0, abs=1e-6) and y[None] == pytest.approx(1.0, abs=1e-6)
    assert h.loss[-1] < 1e-12


def test_lm_stops_once_a_step_moves_less_than_step_tol_standard_deviations(f64):
    """A noisy objective (the exponential of test_least_squares_stop, 400 samples, sigma 0.01): the run stopped by step_tol ends within 1 % of a standard deviation of the one run
    to round-off (step_tol 0), with fewer residual evaluations."""
    params, residuals, calls = _problem(samples=400, noise=0.01)
    lines = []
    tgs.least_squares(residuals, params, iters=40, printer=lines.append)
    short = np.array([p.value() for p in params]).ravel()
    short_calls = len(calls)
    assert any("stopped: converged" in s for s in lines)

    params, residuals, calls = _problem(samples=400, noise=0.01)
    tgs.least_squares(residuals, params, iters=40, step_tol=0.0, log_every=0)
    full = np.array([p.value() for p in params]).ravel()
    assert short_calls < len(calls)
    # the Gauss-Newton standard deviations at the end (the model is linear enough here)
    a, k = full
    t = np.linspace(0.0, 1.0, 400)
    y = 2.0 * np.exp(-3.0 * t) + 0.01 * np.random.default_rng(0).normal(size=t.size)
    J = np.stack([np.exp(-k * t), -a * t * np.exp(-k * t)], axis=1)
    r = a * np.exp(-k * t) - y
    cov = (r @ r) / (t.size - 2) * np.linalg.inv(J.T @ J)
    assert np.all(np.abs(short - full) <= 0.01 * np.sqrt(np.diag(cov)))


def test_step_tol_rejects_a_negative_or_nan_value(f64):
    params, residuals, calls = _problem(samples=400, noise=0.01)
    for bad in (-0.1, float("nan")):
        with pytest.raises(ValueError, match=r"step_tol: expected a fraction of a standard deviation >= 0, got"):
            tgs.least_squares(residuals, params, step_tol=bad, log_every=0)
    assert not calls
