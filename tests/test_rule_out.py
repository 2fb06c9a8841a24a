"""Range ends of an assumed constant that the footage rules out (tigradsim/fitting/sensitivity.py, module docstring
"Range ends the footage rules out"; `_rule_out`, `rule_out_threshold`).

A model whose refit is exact, so the allowed end is known in closed form: residuals
    block A (40 values): x + s(c) - y_A      (y_A = 1 + 0.01 sin(...): a small misfit; x absorbs s(c) exactly)
    block B (1 value):   b max(0, s(k) - s(c))  (no x in it: below the knee k the footage cannot be fitted)
with s = log for a positive range ([0.01, 100], assumed 1) and s = identity for one through 0 ([-1, 3], assumed 1).
The refit of x at c moves x by -(s(c) - s(c0)) and leaves the loss rise 1/2 b^2 (s(k) - s(c))^2, so the lower end is
ruled out past s(c*) = s(k) - sqrt(2 threshold) / b, the upper end never.  No differentiable piece is added (the
bisection evaluates forward residuals), so there is no gradient check here."""
import math

import numpy as np
import pytest

import taichi as ti
import tigradsim as tgs
from tigradsim.core.errors import SimulationError
from tigradsim.fitting.profile import loss_rise_threshold
from tigradsim.fitting.sensitivity import (RULE_OUT_REFIT_STEPS, RULE_OUT_STEPS, AssumedConstant, assumption_sensitivity,
                                           intervals_with_assumptions)

T = np.linspace(0.0, 1.0, 40)
Y = 1.0 + 0.01 * np.sin(20.0 * T)
KNEE = 0.5
CASES = {"log": (math.log, math.exp, 0.01, 100.0), "linear": (float, float, -1.0, 3.0)}


def _problem(scale, b, fail_between=None, knee=KNEE):
    """(residuals, x Param, report, AssumedConstant, the constant's dict) at the exact estimate, c assumed 1.
    fail_between: (lo, hi): a rollout with lo < c < hi raises SimulationError."""
    s, _, lower, upper = CASES[scale]
    field = ti.field(ti.f64, shape=(1,))
    field[0] = float(np.mean(Y)) - s(1.0)
    x = tgs.Param(field, "x", lower=-50.0, upper=50.0, log_space=False)
    constant = {"c": 1.0}

    def residuals():
        c = constant["c"]
        if fail_between is not None and fail_between[0] < c < fail_between[1]:
            raise SimulationError(f"rollout blew up at c = {c}")
        return np.concatenate([field[0] + s(c) - Y, [b * max(0.0, s(knee) - s(c))]])

    report = tgs.fit_report(residuals, [x], noise_floor=1e-4)
    return residuals, x, report, AssumedConstant("c", 1.0, lower, upper, write=lambda v: constant.update(c=v)), \
        constant


@pytest.fixture(scope="module", autouse=True)
def f64():
    tgs.init(arch="cpu", precision="f64")


@pytest.mark.parametrize("scale", ["log", "linear"])
@pytest.mark.parametrize("refit_steps", [0, 2])
def test_a_ruled_out_end_gives_the_allowed_sub_range_and_the_interval_uses_it(scale, refit_steps):
    s, s_inv, lower, upper = CASES[scale]
    residuals, x, report, assumed, constant = _problem(scale, b=0.02)
    sens = assumption_sensitivity(residuals, [x], [assumed], report, mark=False, refit_steps=refit_steps)
    assert constant["c"] == 1.0 and x.value()[0] == pytest.approx(float(np.mean(Y)) - s(1.0))      # restored
    # the profile intervals' one threshold (iid report: std ratio 1)
    assert sens.threshold == loss_rise_threshold(report, 1.0)[0] > 0
    crossing = s_inv(s(KNEE) - math.sqrt(2.0 * sens.threshold) / 0.02)
    assert lower < crossing < 1.0
    (out,) = sens.ruled_out                                    # the lower side only
    assert (out.constant, out.side, out.bound, out.evaluations) == ("c", "lower", lower, RULE_OUT_STEPS)
    # the crossing lies in the last bracket, which is 1 / 2^RULE_OUT_STEPS of the way in the constant's scale
    assert out.outside < crossing <= out.allowed
    assert s(out.allowed) - s(out.outside) == pytest.approx((s(1.0) - s(lower)) / 2 ** RULE_OUT_STEPS)
    loss0 = 2.0 * report.loss
    assert out.loss_ratio == pytest.approx(1.0 + (0.02 * (s(KNEE) - s(lower))) ** 2 / loss0, rel=1e-6)
    # judged on a refitted loss: the sensitivity's own refit, or RULE_OUT_REFIT_STEPS where it is linearised
    assert out.refit_steps == (refit_steps or RULE_OUT_REFIT_STEPS)
    assert f"the footage rules out c below {out.allowed:.4g}" in out.text and out.text in sens.to_markdown()
    (shift,) = sens.shifts
    # the upper end: with nothing refitted its loss is far past the threshold (x absorbs s(c) only when refitted),
    # the refit brings it back to the estimate's: not ruled out
    if refit_steps == 0:
        assert shift.loss_ratio_upper > 1.0 + sens.threshold / report.loss
    assert shift.allowed_upper is None and shift.allowed_lower == out.allowed
    # the moves: x absorbs s(c), so x moves by -(s(c) - s(1)) exactly (the refit is exact: linear in x)
    assert shift.shift_lower == pytest.approx(s(1.0) - s(lower), rel=1e-6)
    assert shift.allowed_shift_lower == pytest.approx(s(1.0) - s(out.allowed), rel=1e-6)
    assert shift.shift_upper == pytest.approx(s(1.0) - s(upper), rel=1e-6)
    e = report["x"]
    lo, hi = intervals_with_assumptions(report, sens)["x"]
    assert lo == pytest.approx(e.lower95 + s(1.0) - s(upper))
    assert hi == pytest.approx(e.upper95 + s(1.0) - s(out.allowed))
    old_lo, old_hi = intervals_with_assumptions(report, sens, whole_range=True)["x"]
    assert old_lo == pytest.approx(lo) and old_hi == pytest.approx(e.upper95 + s(1.0) - s(lower)) and old_hi > hi
    assert "(ruled out; " in sens.to_markdown() and "the footage allows" in shift.text
    # the cost: the rule-out's rollouts are part of the whole; linearised, the 2 end rollouts are the rest, plus
    # the upper end's judging refit (its loss with nothing refitted passes the threshold), charged to the rule-out
    assert 0 < sens.cost["rule_out_rollouts"] < sens.cost["rollouts"]
    if refit_steps == 0:
        assert sens.cost["rollouts"] - sens.cost["rule_out_rollouts"] == 2


@pytest.mark.parametrize("scale", ["log", "linear"])
def test_an_end_the_footage_does_not_rule_out_changes_nothing(scale):
    s, _, lower, upper = CASES[scale]
    residuals, x, report, assumed, _ = _problem(scale, b=1e-4)
    sens = assumption_sensitivity(residuals, [x], [assumed], report, mark=False)
    assert sens.ruled_out == [] and sens.threshold > 0
    (shift,) = sens.shifts
    assert shift.allowed_lower is None and shift.allowed_upper is None
    assert shift.moves() == shift.moves(whole_range=True) == [shift.shift_lower, shift.shift_upper]
    e = report["x"]
    assert intervals_with_assumptions(report, sens)["x"] == pytest.approx(
        (e.lower95 + s(1.0) - s(upper), e.upper95 + s(1.0) - s(lower)))
    off = assumption_sensitivity(residuals, [x], [assumed], report, mark=False, rule_out=False)
    assert off.threshold is None and off.ruled_out == []


def test_a_failed_rollout_inside_keeps_the_whole_range_and_rule_out_false_is_as_before():
    residuals, x, report, assumed, _ = _problem("log", b=0.02, fail_between=(0.011, 0.99))
    sens = assumption_sensitivity(residuals, [x], [assumed], report, mark=False)
    (shift,) = sens.shifts
    assert sens.ruled_out == [] and shift.allowed_lower is None      # the bisection could not measure: kept
    assert any("the rollout failed" in n for n in sens.notes)
    residuals, x, report, assumed, _ = _problem("log", b=0.02)
    off = assumption_sensitivity(residuals, [x], [assumed], report, mark=False, rule_out=False)
    assert off.ruled_out == [] and off.shifts[0].allowed_lower is None
    with pytest.raises(ValueError, match=r"rule_out: expected True or False, got 'yes'"):
        assumption_sensitivity(residuals, [x], [assumed], report, rule_out="yes")


def test_dominated_uses_the_allowed_range():
    """An estimate moved past its interval only at a ruled-out end is not "assumption-dominated" (the same
    constant judged over the whole prior range is)."""
    # a steep knee at the assumed value: the footage allows c no further below 1 than the first bisection point
    residuals, x, report, assumed, _ = _problem("log", b=100.0, knee=1.0)
    narrow = AssumedConstant("c", 1.0, 0.01, 1.0 + 1e-4, write=assumed.write)   # the upper side barely moves x
    hw = 0.5 * (report["x"].upper95 - report["x"].lower95)
    sens = assumption_sensitivity(residuals, [x], [narrow], report, mark=False)
    off = assumption_sensitivity(residuals, [x], [narrow], report, mark=False, rule_out=False)
    (shift,), (whole,) = sens.shifts, off.shifts
    assert whole.shift_lower > hw and whole.dominated                  # the whole range would dominate
    assert not shift.dominated and shift.largest < hw
    # no bisection point below 1 is allowed: the allowed end is the assumed value itself, no move
    assert shift.allowed_lower == 1.0 and shift.allowed_shift_lower == 0.0
    assert report["x"].status == "ok"
    assumption_sensitivity(residuals, [x], [narrow], report)           # mark=True: not marked either
    assert report["x"].status == "ok"


def test_linearised_an_end_is_judged_by_a_refit_not_by_the_linearised_move():
    """Residuals (x + c)^3 - y_A: the refit at any c is exact (x = u* - c), but the linearised move misses it badly
    at c = 1.5 (the loss there rises 4 decades past the threshold), as at kf = 1000 on Warp's push
    (benchmarks/RESULTS.md, branch ends44).  Linearised (refit_steps 0), the end is judged by RULE_OUT_REFIT_STEPS
    LM iterations, which reach the refit: nothing is ruled out, and the moves stay the linearised ones."""
    grid = np.linspace(0.9, 1.1, 200001)
    u = float(grid[np.argmin(((grid[:, None] ** 3 - Y) ** 2).sum(1))])
    field = ti.field(ti.f64, shape=(1,))
    field[0] = u - 1.0
    x = tgs.Param(field, "x", lower=-50.0, upper=50.0, log_space=False)
    constant = {"c": 1.0}

    def residuals():
        return (field[0] + constant["c"]) ** 3 - Y

    report = tgs.fit_report(residuals, [x], noise_floor=1e-4)
    assumed = AssumedConstant("c", 1.0, 0.9, 1.5, write=lambda v: constant.update(c=v))
    sens = assumption_sensitivity(residuals, [x], [assumed], report, mark=False)
    (shift,) = sens.shifts
    assert sens.ruled_out == [] and shift.allowed_lower is None and shift.allowed_upper is None
    assert shift.moves() == [shift.shift_lower, shift.shift_upper]
    constant["c"], field[0] = 1.5, u - 1.0 + shift.shift_upper              # the linearised refit at c = 1.5
    try:
        r = residuals()
        assert 0.5 * float(r @ r) - report.loss > 1e3 * sens.threshold
    finally:
        constant["c"], field[0] = 1.0, u - 1.0
    assert sens.cost["rule_out_rollouts"] > 0                               # the judging refits ran
