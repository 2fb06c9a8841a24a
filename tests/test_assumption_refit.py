"""The assumed constants' sensitivity carried past the linearised refit (`refit_steps`: Levenberg-Marquardt iterations
with fresh finite-difference Jacobians, from the linearised refit; tigradsim/fitting/sensitivity.py
`_refit_at_end`).

A model whose residuals are strongly non-linear in the estimate over the move an assumed constant causes:
r_t(x, c) = exp(x t) - y_t + c t on t in [0, 1], y_t = exp(t) + 0.01 sin(20 t) (a small misfit), the estimate
x ~ 1 at the assumed c = 0, the constant's range [-1, 2].  The exact refit at each end (a dense 1-D search) is what a user would get by refitting; the
linearised move misses it by 17 % / 46 %, the refit steps land on it within 1 %.  No differentiable piece is added
(the refit is `least_squares` over forward residuals, tested on its own), so there is no gradient check here."""
import numpy as np
import pytest

import taichi as ti
import tigradsim as tgs
from tigradsim.fitting.sensitivity import AssumedConstant, assumption_sensitivity

T = np.linspace(0.0, 1.0, 40)
Y = np.exp(T) + 0.01 * np.sin(20.0 * T)


def _refit(c):
    """(x, |r|^2) minimising the loss with the constant at c (within the Param's bounds [-5, 5])."""
    grid = np.linspace(-5.0, 5.0, 1001)
    g0 = grid[np.argmin(np.sum((np.exp(grid[:, None] * T) - Y + c * T) ** 2, axis=1))]
    fine = np.linspace(g0 - 0.01, g0 + 0.01, 20001)
    loss = np.sum((np.exp(fine[:, None] * T) - Y + c * T) ** 2, axis=1)
    return float(fine[np.argmin(loss)]), float(loss.min())


@pytest.fixture(scope="module")
def problem():
    tgs.init(arch="cpu", precision="f64")
    field = ti.field(ti.f64, shape=(1,))
    field[0] = _refit(0.0)[0]
    x = tgs.Param(field, "x", lower=-5.0, upper=5.0, log_space=False)
    constant = {"c": 0.0}

    def residuals():
        return np.exp(field[0] * T) - Y + constant["c"] * T

    report = tgs.fit_report(residuals, [x], noise_floor=1e-4)
    assumed = AssumedConstant("c", 0.0, -1.0, 2.0, write=lambda v: constant.update(c=v))
    return residuals, x, report, assumed, constant


def test_refit_steps_reach_the_refit_the_linearised_move_misses(problem):
    residuals, x, report, assumed, constant = problem
    x_hat, loss_hat = _refit(0.0)
    exact = {end: _refit(c) for end, c in (("lower", -1.0), ("upper", 2.0))}     # moves +0.37, -1.64
    linear = assumption_sensitivity(residuals, [x], [assumed], report, mark=False).shifts[0]
    refit = assumption_sensitivity(residuals, [x], [assumed], report, mark=False, refit_steps=6)
    shift = refit.shifts[0]
    for end in ("lower", "upper"):
        move, loss = exact[end][0] - x_hat, exact[end][1]
        lin, ref = getattr(linear, f"shift_{end}"), getattr(shift, f"shift_{end}")
        assert abs(lin - move) > 0.05 * abs(move), (end, lin, move)                   # the linear miss
        assert abs(ref - move) < 0.01 * abs(move), (end, ref, move)
        # the loss with the constant at the end over the estimate's: refitted, the exact refit's; before the
        # refit (linear), larger
        assert getattr(shift, f"loss_ratio_{end}") == pytest.approx(loss / loss_hat, rel=1e-3)
        assert getattr(linear, f"loss_ratio_{end}") > getattr(shift, f"loss_ratio_{end}") > 1.0
    assert x.value()[0] == pytest.approx(x_hat) and constant["c"] == 0.0             # restored
    assert refit.preferred_ends == [] and not any("fits better" in w for w in refit.warnings())
    assert refit.refit_steps == 6 and refit.to_dict()["refit_steps"] == 6
    assert "then up to 6 Levenberg-Marquardt iterations" in refit.to_markdown()
    assert "linearised refit)" in assumption_sensitivity(residuals, [x], [assumed], report, mark=False).to_markdown()


def test_refit_steps_is_checked(problem):
    residuals, x, report, assumed, _ = problem
    for bad in (-1, 1.5, True):
        with pytest.raises(ValueError, match=r"refit_steps: expected an integer >= 0, got"):
            assumption_sensitivity(residuals, [x], [assumed], report, refit_steps=bad)


def test_an_end_the_footage_prefers_is_said(problem):
    """An assumed constant whose range end fits better than its assumed value (the data were made at c = 0.5, the
    scene assumes c = 0): the shift's loss ratio there is below 1 and the warnings say to state or fit it."""
    residuals, x, report, _, constant = problem
    moved = AssumedConstant("c", 0.0, -1.0, 0.5, write=lambda v: constant.update(c=v - 0.5))
    constant["c"] = -0.5
    try:
        sens = assumption_sensitivity(residuals, [x], [moved], report, mark=False, refit_steps=4)
    finally:
        constant["c"] = 0.0
    (c, end, ratio), = sens.preferred_ends
    assert (c, end) == ("c", 0.5) and ratio < 0.95 and sens.shifts[0].loss_ratio_upper == ratio
    assert any(w.startswith("the footage fits better with c = 0.5 than at the assumed 0") for w in sens.warnings())
