"""Levenberg-Marquardt (`tgs.least_squares`) stops once a kept step moves the estimate by less than step_tol
of its standard deviation, and still converges where the damping must both rise and fall."""
import numpy as np
import pytest
import taichi as ti

import tigradsim as tgs
from test_least_squares_stop import _problem, _samples


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
    """A noisy objective (the exponential of test_least_squares_stop, 400 samples, sigma 0.01): the run
    stopped by step_tol ends within 1 % of a standard deviation of the one run to round-off (step_tol 0),
    with fewer residual evaluations."""
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
    t, y = _samples(400, 0.01)
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
