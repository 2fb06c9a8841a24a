"""tigradsim.core.fastmath.atan2: values in every quadrant, and its Tape gradient."""
import numpy as np
import pytest
import taichi as ti

import tigradsim as tgs
from tigradsim.core.fastmath import atan2, atan2_poly


def _points(n=4001, seed=0):
    rng = np.random.default_rng(seed)
    ang = np.linspace(-np.pi, np.pi, n)
    r = np.exp(rng.uniform(-6.0, 6.0, n))        # radii over 5 decades
    y, x = r * np.sin(ang), r * np.cos(ang)
    # the axes and the diagonals exactly, where the range reduction switches
    extra = np.array([[0, 1], [0, -1], [1, 0], [-1, 0], [1, 1], [-1, 1], [1, -1], [-1, -1], [0, 0], [3e-7, 1.0]])
    return np.concatenate([y, extra[:, 0]]), np.concatenate([x, extra[:, 1]])


def _evaluate(fn, y, x):
    n = len(y)
    fy, fx, out = (ti.field(float, n) for _ in range(3))
    fy.from_numpy(y)
    fx.from_numpy(x)

    @ti.kernel
    def k():
        for i in range(n):
            out[i] = fn(fy[i], fx[i])

    k()
    return out.to_numpy()


@pytest.mark.parametrize("precision, tol", [("f64", 1e-8), ("f32", 3e-7)])
def test_atan2_poly_matches_libm_in_every_quadrant(precision, tol):
    tgs.init(precision=precision)
    y, x = _points()
    dtype = tgs.runtime.np_float()
    y, x = y.astype(dtype), x.astype(dtype)
    got = _evaluate(atan2_poly, y, x)
    want = np.arctan2(y.astype(np.float64), x.astype(np.float64))
    err = np.abs(got - want)
    assert err.max() < tol, f"max abs error {err.max():.3g} at y={y[err.argmax()]}, x={x[err.argmax()]}"


def test_atan2_is_libm_in_float64(f64):
    y, x = _points(301)
    np.testing.assert_array_equal(_evaluate(atan2, y, x), _evaluate(ti.atan2, y, x))


def test_atan2_poly_gradient_fd_and_exact(f64):
    """Tape gradient of sum_i w_i atan2_poly(y_i, x_i): FD along random directions, and the exact
    derivatives (x, -y) / (x^2 + y^2) to the polynomial's accuracy (3.3e-6)."""
    y, x = _points(401, seed=1)
    # away from the origin (d atan2 blows up) and from the branch cut y = 0, x < 0 (a 2 pi jump)
    keep = (np.hypot(y, x) > 1e-2) & (np.abs(np.arctan2(y, x)) < np.pi - 1e-2)
    y, x = y[keep], x[keep]
    n = len(y)
    fy, fx = ti.field(float, n, needs_grad=True), ti.field(float, n, needs_grad=True)
    w = ti.field(float, n)
    loss = ti.field(float, (), needs_grad=True)
    fy.from_numpy(y)
    fx.from_numpy(x)
    w.from_numpy(np.random.default_rng(2).normal(size=n))

    @ti.kernel
    def objective():
        for i in range(n):
            loss[None] += w[i] * atan2_poly(fy[i], fx[i])

    # unit scale: the default (RMS of the field) would step across the small-radius points
    tgs.check_gradient(objective, loss, [fy, fx], n_dirs=4, eps=1e-7, rtol=1e-5, scale=[1.0, 1.0]).assert_ok()
    with ti.ad.Tape(loss):
        objective()
    r2 = x * x + y * y
    wn = w.to_numpy()
    np.testing.assert_allclose(fy.grad.to_numpy(), wn * x / r2, rtol=4e-6, atol=1e-9)
    np.testing.assert_allclose(fx.grad.to_numpy(), -wn * y / r2, rtol=4e-6, atol=1e-9)


@pytest.mark.parametrize("precision, rtol", [("f64", 4e-16), ("f32", 2.5e-7)])
def test_exp_neg_matches_libm(precision, rtol):
    """exp_neg(x) = exp(-x) for x >= 0 to a few ulp (relative; x from 0 to past the clamp), and on
    Vectors (exp_neg_lanes) the same bits; beyond the clamp a tiny positive value (1 + it is 1)."""
    from tigradsim.core.fastmath import exp_neg, exp_neg_lanes
    tgs.init(precision=precision)
    dtype = tgs.runtime.np_float()
    rng = np.random.default_rng(3)
    clamp = 700.0 if precision == "f64" else 87.0
    x = np.concatenate([np.linspace(0.0, 40.0, 4001), rng.exponential(8.0, 4000), [0.0, 1e-30, 0.5 * np.log(2.0),
                        np.log(2.0), clamp - 1.0, clamp]]).astype(dtype)
    n = len(x) - len(x) % 4
    x = x[:n]
    fx, out = ti.field(float, n), ti.field(float, n)
    lanes = ti.Vector.field(4, float, n // 4)
    beyond = ti.field(float, 2)
    fx.from_numpy(x)

    @ti.kernel
    def k():
        for i in range(n):
            out[i] = exp_neg(fx[i])
        for i in range(n // 4):
            lanes[i] = exp_neg_lanes(ti.Vector([fx[4 * i + l] for l in ti.static(range(4))]))
        beyond[0] = exp_neg(clamp + 5.0)
        beyond[1] = exp_neg(1e30)

    k()
    want = np.exp(-x.astype(np.float64))
    got = out.to_numpy().astype(np.float64)
    err = np.abs(got - want) / want
    # the reference in float64 of the same (rounded) input; f32 results carry their own rounding
    assert err.max() < rtol, f"max rel error {err.max():.3g} at x={x[err.argmax()]}"
    np.testing.assert_array_equal(lanes.to_numpy().ravel(), out.to_numpy())
    b = beyond.to_numpy().astype(np.float64)
    assert np.all(b > 0.0) and np.all(b <= np.exp(-clamp) * 1.0001) and np.all(1.0 + b.astype(dtype) == 1.0)
