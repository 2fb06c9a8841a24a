"""`tgs.BFGS` with a Param of its own step scale (`Param.lr`, as a camera correction's CAMERA_LR): the first
gradient step, the first curvature guess and the trust radius are taken in coordinates scaled by p.lr / lr.
Without the scaling the first step went wholly into the coordinate of the largest gradient (a camera turn by the
whole trust radius, 3 degrees) and the first curvature guess, set by that coordinate, kept every other step tiny
(benchmarks/RESULTS.md, branch cam44b).  The quadratic's Tape loss is test_coarse_stage's fixture, whose gradient
is checked there against float64 central differences."""
import numpy as np
import pytest

import tigradsim as tgs

from test_coarse_stage import _quadratic

# "camera" a (rad): its own step scale 2e-3, its curvature 625 = 1 / (2e-3 / 0.05)^2 times the "physics"
# coordinate b's (log units): the same curvature once each is measured in its own step scale.  The camera
# starts 1 mrad off its minimum, the physics 0.2 (log) off; they are correlated 0.3.
A = np.array([[625.0, 7.5], [7.5, 1.0]])
MINIMUM = np.array([0.0, 0.2])
START = (1e-3, 0.0)
CAMERA_LR, LR = 2e-3, 0.05


def _scaled_quadratic():
    params, forward, loss = _quadratic(A, MINIMUM, START)
    params[0].lr = CAMERA_LR
    return params, forward, loss


def _values(params):
    return np.array([p.value() for p in params], dtype=np.float64).ravel()


def test_the_first_step_keeps_each_coordinate_within_its_own_trust_radius(f64):
    """The camera's gradient is 0.6 against the physics' 0.19 here; the old first step moved the camera by the
    whole trust radius lr = 0.05 (50 x its step scale) and the physics by a third of it."""
    params, forward, loss = _scaled_quadratic()
    tgs.optimize(forward, loss, tgs.BFGS(params, lr=LR), iters=1, log_every=0)
    step = _values(params) - np.array(START)
    assert abs(step[0]) <= CAMERA_LR * (1 + 1e-9), step
    assert abs(step[1]) == pytest.approx(LR, rel=1e-9), step      # the physics takes the whole radius


def test_the_physics_is_not_held_back_by_the_camera_curvature(f64):
    """Every step lowers the loss, and four steps take it below 1e-3 of its start: the first curvature guess is
    the scaled one.  (Before: the first step raised the loss 40-fold, and the guess sy / yy I, the camera's
    curvature, 1 / 625 in the physics' direction, left the next two steps within 1 % of it: after four steps the
    loss was still half its start.)"""
    params, forward, loss = _scaled_quadratic()
    hist = tgs.optimize(forward, loss, tgs.BFGS(params, lr=LR), iters=10, log_every=0)
    assert all(b < a for a, b in zip(hist.loss[:6], hist.loss[1:6])), hist.loss
    assert hist.loss[4] < 1e-3 * hist.loss[0], hist.loss
    assert np.abs(_values(params) - MINIMUM).max() < 1e-6, _values(params)


def test_without_own_step_scales_the_steps_are_unchanged(f64):
    """Params without lr (or with lr equal to the optimizer's): scale 1, the plain BFGS of before (first step a
    gradient step of the whole radius along the largest gradient)."""
    for own in (None, LR):
        params, forward, loss = _quadratic(A, MINIMUM, START)
        params[0].lr = own
        tgs.optimize(forward, loss, tgs.BFGS(params, lr=LR), iters=1, log_every=0)
        g = A @ (np.array(START) - MINIMUM)
        assert _values(params) - np.array(START) == pytest.approx(-LR * g / np.abs(g).max(), rel=1e-9)
