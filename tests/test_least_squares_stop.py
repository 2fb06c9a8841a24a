"""tgs.least_squares(stop_mse=...): Levenberg-Marquardt stops once the mean squared residual is at or
below stop_mse (as BounceBoxScene.fit_contact uses it after BFGS), and rejects a bad threshold."""
import numpy as np
import pytest
import taichi as ti

import tigradsim as tgs


def _samples(samples=40, noise=0.0, seed=0):
    """(t, y): `samples` times in [0, 1] and y = 2 exp(-3 t) plus Gaussian noise of sigma `noise`."""
    t = np.linspace(0.0, 1.0, samples)
    return t, 2.0 * np.exp(-3.0 * t) + noise * np.random.default_rng(seed).normal(size=samples)


def _problem(samples=40, noise=0.0, seed=0):
    """r = a exp(-k t) - y on `_samples(samples, noise, seed)` (noise 0: zero residual at the truth a = 2,
    k = 3, where Gauss-Newton converges quadratically from a 30 % guess).
    Returns (params, residuals, calls: one entry per residuals() call)."""
    a, k = ti.field(float, shape=()), ti.field(float, shape=())
    a[None], k[None] = 1.4, 3.9
    t, y = _samples(samples, noise, seed)
    calls = []

    def residuals():
        calls.append(1)
        return a[None] * np.exp(-k[None] * t) - y

    params = [tgs.Param(a, "a", lower=0.1, upper=10.0, log_space=True),
              tgs.Param(k, "k", lower=0.1, upper=10.0, log_space=True)]
    return params, residuals, calls


def test_stop_mse_ends_the_iterations_at_the_threshold(f64):
    params, residuals, calls = _problem()
    full = tgs.least_squares(residuals, params, iters=12, log_every=0)
    full_calls = len(calls)
    assert full.loss[-1] < 1e-20          # without the threshold it runs on towards round-off

    params, residuals, calls = _problem()
    lines = []
    h = tgs.least_squares(residuals, params, iters=12, stop_mse=1e-10, printer=lines.append)
    # the last recorded mse is the first at or below the threshold, the one before is above it
    assert h.loss[-1] <= 1e-10 < h.loss[-2]
    assert len(h.loss) < len(full.loss) and len(calls) < full_calls
    assert any("stopped: mse <= stop_mse" in s for s in lines)
    assert params[0].value() == pytest.approx(2.0, rel=1e-4) and params[1].value() == pytest.approx(3.0, rel=1e-4)


def test_stop_mse_rejects_a_negative_or_nan_threshold(f64):
    params, residuals, calls = _problem()
    for bad in (-1e-3, float("nan")):
        with pytest.raises(ValueError, match=r"stop_mse: expected a mean squared residual >= 0, got"):
            tgs.least_squares(residuals, params, stop_mse=bad, log_every=0)
    assert not calls                      # rejected before any residual evaluation
