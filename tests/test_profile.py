"""Profile-likelihood intervals (tigradsim/fitting/profile.py): a value the data leave flat beyond
the local curvature is reported undetermined (the Laplace interval alone is finite and narrow), a
well-determined one gets the Laplace interval back, bad input fails before any rollout."""
import json
import math

import numpy as np
import pytest
import taichi as ti

import tigradsim as tgs
from tigradsim.fitting.profile import AutoProfile, profile_intervals, profile_threshold, profile_targets
from tigradsim.fitting.uncertainty import fit_report

SIGMA = 0.01


def _problem(kind, n=20, seed=0):
    """Two unknowns, a Tape loss 1/2 |r|^2 and the residual function.

    "flat": r = [b t_j - y_j ; b A tanh(K log a) s_j - z_j] (truth b = 2, a = 1, noise SIGMA): b is
        fixed by the first block; a shows only through a saturating term whose whole range moves the
        loss by 1/2 (b A |s|)^2 = 1/2 SIGMA^2, inside the noise, while its slope at a = 1 (A K) gives
        Gauss-Newton a narrow interval (std ~ 1 / K in log a).
    "linear": r = b t_j + c - y_j (truth b = 2, c = 0.5): the loss is exactly quadratic.
    """
    rng = np.random.default_rng(seed)
    t_np = np.linspace(0.1, 1.0, n)
    s_np = np.cos(np.linspace(0.0, 3.0, n))
    K = 20.0
    if kind == "flat":
        A = SIGMA / (2.0 * np.linalg.norm(s_np))
        # noise on the first block only: the estimate of a then sits at 1, where its slope is largest
        rhs = np.concatenate([2.0 * t_np + rng.normal(0.0, SIGMA, n), np.zeros(n)])
    else:
        A = 0.0
        rhs = 2.0 * t_np + 0.5 + rng.normal(0.0, SIGMA, n)
    m = rhs.size
    a = ti.field(float, shape=(), needs_grad=True)
    b = ti.field(float, shape=(), needs_grad=True)
    t, s, y = (ti.field(float, shape=n) for _ in range(3))
    rhs_f = ti.field(float, shape=m)
    t.from_numpy(t_np)
    s.from_numpy(s_np)
    rhs_f.from_numpy(rhs)
    loss = ti.field(float, shape=(), needs_grad=True)
    flat = kind == "flat"

    @ti.kernel
    def forward():
        for j in t:
            if ti.static(flat):
                loss[None] += 0.5 * (b[None] * t[j] - rhs_f[j]) ** 2
                loss[None] += 0.5 * (b[None] * A * ti.tanh(K * ti.log(a[None])) * s[j] - rhs_f[n + j]) ** 2
            else:
                loss[None] += 0.5 * (b[None] * t[j] + a[None] - rhs_f[j]) ** 2

    def residuals():
        av, bv = float(a[None]), float(b[None])
        if flat:
            return np.concatenate([bv * t_np, bv * A * np.tanh(K * np.log(av)) * s_np]) - rhs
        return bv * t_np + av - rhs

    if flat:
        a[None], b[None] = 1.0, 2.0
        params = [tgs.Param(a, "a", lower=0.05, upper=20.0, log_space=True),
                  tgs.Param(b, "b", lower=0.5, upper=8.0, log_space=True)]
    else:
        a[None], b[None] = 0.5, 2.0
        params = [tgs.Param(a, "c", lower=-5.0, upper=5.0), tgs.Param(b, "b", lower=-10.0, upper=10.0)]
    return params, forward, loss, residuals


def test_a_value_flat_beyond_the_curvature_is_undetermined(f64):
    params, forward, loss, residuals = _problem("flat")
    lines = []
    res = tgs.identify(params, forward=forward, loss=loss, residuals=residuals, starts=1, local_starts=1, adam_iters=0,
                       bfgs_iters=20, bfgs_lr=0.2, noise_floor=SIGMA ** 2, profile=["a"], profile_points=4,
                       profile_iters=2, printer=lines.append)
    e = res.best["a"]
    # what the Laplace interval said (kept as the profile's `laplace`): finite and narrow, as on the Bingham clip
    lap = res.best.profiles["a"].laplace
    assert lap[0] is not None and lap[1] / lap[0] < 2.0
    prof = res.best.profiles["a"]
    assert prof.undetermined and prof.lower.reason == prof.upper.reason == "bound"
    assert e.status == "undetermined" and (e.lower95, e.upper95) == pytest.approx((0.05, 20.0))
    assert res.best["b"].status == "ok" and res.best["b"].lower95 < 2.0 < res.best["b"].upper95
    assert any("a is not determined" in d.text for d in res.best.undetermined)
    assert "undetermined" in str(e) and "20" in str(e)
    assert all(abs(r) <= prof.threshold for _v, r in prof.points)
    assert sum(line.startswith("profile a = ") for line in lines) == len(prof.points)
    json.dumps(res.to_dict(), allow_nan=False)


def test_an_exact_degeneracy_is_undetermined_on_the_residual_path(f64):
    """Least-squares refits (no Tape loss): the ratio-only problem r = (b / a) t - y leaves a (and b)
    free along a line; Gauss-Newton flags it too, and the profile reaches both bounds."""
    t_np = np.linspace(0.1, 1.0, 10)
    y_np = 2.0 * t_np + np.random.default_rng(1).normal(0.0, SIGMA, t_np.size)
    a = ti.field(float, shape=(), needs_grad=True)
    b = ti.field(float, shape=(), needs_grad=True)
    a[None], b[None] = 1.0, 2.0
    params = [tgs.Param(a, "a", lower=0.2, upper=5.0, log_space=True),
              tgs.Param(b, "b", lower=0.1, upper=50.0, log_space=True)]

    def residuals():
        return float(b[None]) / float(a[None]) * t_np - y_np

    report = fit_report(residuals, params, noise_floor=SIGMA ** 2)
    prof = profile_intervals(params, report, ["a"], residuals=residuals, points=3, iters=3, printer=lambda s: None)["a"]
    assert prof.undetermined and (prof.lower.end, prof.upper.end) == pytest.approx((0.2, 5.0))
    assert float(a[None]) == pytest.approx(1.0)        # back at the estimate


def test_a_well_determined_value_gets_the_laplace_interval_back(f64):
    params, forward, loss, residuals = _problem("linear")
    res = tgs.identify(params, forward=forward, loss=loss, residuals=residuals, starts=1, local_starts=1, adam_iters=0,
                       bfgs_iters=30, bfgs_lr=0.5, noise_floor=SIGMA ** 2, profile=True, profile_points=6,
                       profile_iters=4, log_every=0)
    for name in ("b", "c"):
        prof = res.best.profiles[name]
        lo, hi = prof.laplace
        assert not prof.undetermined and prof.lower.reason == prof.upper.reason == "threshold"
        # a quadratic loss: the profile's half-widths equal Laplace's (the threshold is the one it implies)
        x = res.best[name].value
        for got, want in ((x - prof.lower.end, x - lo), (prof.upper.end - x, hi - x)):
            assert 0.8 < got / want < 1.25, (name, got, want)
        # and it is the Laplace threshold, the tie rule's 5 % of the loss being smaller here
        thr, lap, tie = profile_threshold(res.best, [e.name for e in res.best.estimates].index(name))
        assert thr == lap > tie and lap == pytest.approx(0.5 * res.best.s2 * 1.959964 ** 2, rel=1e-5)
        assert res.best[name].status == "ok"


def test_profile_checks_its_arguments(f64):
    params, forward, loss, residuals = _problem("linear", n=5)
    calls = []

    def counted():
        calls.append(1)
        forward()

    with pytest.raises(ValueError, match="profile: 'mass' is not a scalar parameter"):
        tgs.identify(params, forward=counted, loss=loss, residuals=residuals, starts=1, local_starts=1,
                     profile=["mass"])
    with pytest.raises(ValueError, match='profile: expected true, false, "auto" or a list'):
        tgs.identify(params, forward=counted, loss=loss, starts=1, local_starts=1, profile=3)
    with pytest.raises(ValueError, match="profile_lr: expected a finite number > 0"):
        tgs.identify(params, forward=counted, loss=loss, starts=1, local_starts=1, profile=True, profile_lr=0.0)
    with pytest.raises(ValueError, match="profile_points: expected an integer >= 1, got 0"):
        tgs.identify(params, forward=counted, loss=loss, starts=1, local_starts=1, profile=True, profile_points=0)
    assert not calls                           # before any rollout
    assert profile_targets(True, params) == ["c", "b"] and profile_targets(None, params) == []
    report = fit_report(residuals, params, noise_floor=SIGMA ** 2)
    with pytest.raises(ValueError, match="profile_points: expected an integer >= 1, got 0"):
        profile_intervals(params, report, ["b"], residuals=residuals, points=0)
    with pytest.raises(ValueError, match="profile_iters: expected an integer >= 0, got -1"):
        profile_intervals(params, report, ["b"], residuals=residuals, iters=-1)
    with pytest.raises(ValueError, match="tie_rtol"):
        profile_intervals(params, report, ["b"], residuals=residuals, tie_rtol=math.nan)
    with pytest.raises(ValueError, match="give forward and loss"):
        profile_intervals(params, report, ["b"])


def test_a_side_whose_rollouts_blow_up_ends_at_the_last_point_inside(f64):
    """Past a stability limit (an MPM step's CFL limit) the rollout raises SimulationError: that side ends at
    the last point below the threshold and says so (the interval may reach further); the other side, flat to
    its bound, is undetermined.  Here the data do not depend on a at all (flat) and a > 2 blows up."""
    from tigradsim.core.errors import SimulationError
    y_np = np.random.default_rng(2).normal(0.0, SIGMA, 10)
    a = ti.field(float, shape=(), needs_grad=True)
    a[None] = 0.0
    params = [tgs.Param(a, "a", lower=-10.0, upper=10.0)]

    def residuals():
        if a[None] > 2.0:
            raise SimulationError("the simulation became non-finite")
        return 0.0 * float(a[None]) - y_np

    report = fit_report(residuals, params, noise_floor=SIGMA ** 2)
    prof = profile_intervals(params, report, True, residuals=residuals, points=4, printer=lambda s: None)["a"]
    assert prof.upper.reason == "failed" and prof.lower.reason == "bound" and prof.undetermined
    assert prof.upper.end == pytest.approx(max(v for v, _r in prof.points)) and 0.0 < prof.upper.end < 2.0
    assert prof.lower.end == -10.0
    assert "blew up" in prof.sentence() and "bound -10" in prof.sentence()


def test_auto_walks_on_where_the_check_at_the_laplace_end_fails(f64):
    """profile = "auto" with checks: a's Laplace interval is narrow (a factor 1.2), so it is only checked, but at
    its end the loss rose by far less than the curvature says (the saturating valley): the side walks on and a is
    reported undetermined, as with a full profile; b rises as predicted and is checked at one point a side."""
    params, forward, loss, residuals = _problem("flat")
    lines = []
    res = tgs.identify(params, forward=forward, loss=loss, residuals=residuals, starts=1, local_starts=1, adam_iters=0,
                       bfgs_iters=20, bfgs_lr=0.2, noise_floor=SIGMA ** 2, profile=AutoProfile(check=True),
                       profile_points=4, profile_iters=2, printer=lines.append)
    a, b = res.best.profiles["a"], res.best.profiles["b"]
    assert a.mode == b.mode == "check"
    assert a.undetermined and a.lower.reason == a.upper.reason == "bound" and res.best["a"].status == "undetermined"
    assert len(b.points) == 2 and {b.lower.reason, b.upper.reason} <= {"checked", "threshold"}
    lap = b.laplace
    # the Laplace end stands (the quadratic through the point crosses the threshold there)
    assert (res.best["b"].lower95, res.best["b"].upper95) == pytest.approx(lap, rel=1e-4)
    assert any(line.startswith("profile b: check:") for line in lines)
    json.dumps(res.to_dict(), allow_nan=False)


def _wide_and_narrow(seed=3):
    """r = (w t + n s) - y on 8 points, noise 0.03: w (truth 0.3, std ~0.3) has an interval wider than itself,
    n (truth 20) a narrow one; both linear-space, so the loss is exactly quadratic."""
    t_np = np.linspace(0.1, 1.0, 8)
    s_np = np.linspace(1.0, 3.0, 8) ** 2
    y_np = 0.3 * t_np + 20.0 * s_np + np.random.default_rng(seed).normal(0.0, 0.03, t_np.size)
    w = ti.field(float, shape=(), needs_grad=True)
    n = ti.field(float, shape=(), needs_grad=True)
    params = [tgs.Param(w, "w", lower=-50.0, upper=50.0), tgs.Param(n, "n", lower=0.0, upper=100.0)]

    def residuals():
        return float(w[None]) * t_np + float(n[None]) * s_np - y_np

    A = np.stack([t_np, s_np], axis=1)
    w[None], n[None] = np.linalg.lstsq(A, y_np, rcond=None)[0]
    return params, residuals


def test_auto_profiles_in_full_only_what_laplace_leaves_suspect(f64):
    from tigradsim.fitting.profile import suspect_reason
    params, residuals = _wide_and_narrow()
    report = fit_report(residuals, params, noise_floor=0.03 ** 2)
    assert "x the estimate wide" in suspect_reason(report, 0) and suspect_reason(report, 1) is None
    # without checks only w is profiled (n has no entry and keeps Laplace's interval)
    profs = profile_intervals(params, report, "auto", residuals=residuals, points=4, iters=2, printer=lambda s: None)
    assert list(profs) == ["w"]
    profs = profile_intervals(params, report, AutoProfile(check=True), residuals=residuals, points=4, iters=2,
                              printer=lambda s: None)
    w, n = profs["w"], profs["n"]
    assert w.mode == "full" and "wide" in w.why and w.lower.reason == w.upper.reason == "threshold"
    assert n.mode == "check" and len(n.points) == 2
    # the quadratic loss rises at the Laplace end by the Laplace threshold: checked (or just past it)
    assert {n.lower.reason, n.upper.reason} <= {"checked", "threshold"}
    assert all(r == pytest.approx(n.threshold, rel=0.05) for _v, r in n.points)
    # a tie threshold above Laplace's (tie_rtol 1: 1.6 x): one point still tells, the end is the quadratic's
    # crossing of that threshold, as a full profile's; at tie_rtol 4 (6.2 x) the first rise is under a quarter of
    # it, and the side walks on to where the full profile ends
    lap_half = n.laplace[1] - n.value
    for rtol, reason, npts in ((1.0, "checked", 2), (4.0, "threshold", 4)):
        p = profile_intervals(params, report, AutoProfile(check=True), residuals=residuals, points=4, iters=2,
                              tie_rtol=rtol, printer=lambda s: None)["n"]
        assert p.threshold == p.threshold_tie > 1.2 * p.threshold_laplace
        assert p.upper.reason == reason and len(p.points) == npts, (rtol, p.points)
        want = math.sqrt(p.threshold / p.threshold_laplace)
        assert (p.upper.end - n.value) / lap_half == pytest.approx(want, rel=0.1)
    # an exact degeneracy: Laplace cannot bound it, so "auto" profiles it in full
    a = ti.field(float, shape=(), needs_grad=True)
    a[None] = 1.0
    flat = [tgs.Param(a, "a", lower=0.2, upper=5.0, log_space=True)]
    y = np.random.default_rng(4).normal(0.0, SIGMA, 6)
    rep = fit_report(lambda: 0.0 * float(a[None]) - y, flat, noise_floor=SIGMA ** 2)
    assert "does not bound" in suspect_reason(rep, 0)


def test_profile_auto_targets_and_bad_input():
    a = ti.field(float, shape=())
    b = ti.field(float, shape=())
    params = [tgs.Param(a, "a", lower=0.0, upper=1.0), tgs.Param(b, "b", lower=0.0, upper=1.0)]
    assert profile_targets("auto", params) == ["a", "b"]
    assert profile_targets(AutoProfile(("b",)), params) == ["b"]
    with pytest.raises(ValueError, match="'c' is not a scalar parameter"):
        profile_targets(AutoProfile(("c",)), params)
    with pytest.raises(ValueError, match='expected true, false, "auto"'):
        profile_targets(3, params)


def test_a_profile_point_clearly_below_the_estimate_is_reported_with_its_values(f64):
    """The report made away from the minimum (n moved 3 std off): a profile point of w, n refitted, lies below the
    estimate's loss by more than the tie rule's 5 %, even where the Laplace part of the threshold is larger; the
    note gives every value there, so the fit can be restarted from it."""
    params, residuals = _wide_and_narrow()
    report0 = fit_report(residuals, params, noise_floor=0.03 ** 2)
    n = params[1]
    n.field[None] = float(n.field[None]) + 3.0 * report0["n"].std
    # a noise floor 100 x the residuals' makes the Laplace part of the threshold far larger than the gain
    report = fit_report(residuals, params, noise_floor=0.09)
    prof = profile_intervals(params, report, ["w"], residuals=residuals, points=3, iters=3, tie_rtol=0.05,
                             printer=lambda s: None)["w"]
    assert prof.better is not None and prof.better[1] < -0.05 * report.loss
    assert prof.threshold_laplace > -prof.better[1]          # not "better" by the Laplace threshold alone
    assert set(prof.better_values) == {"w", "n"} and prof.better_values["w"] == pytest.approx(prof.better[0])
    # the values given are that point: the loss there is the estimate's plus the (negative) rise
    held = [float(p.field[None]) for p in params]
    for p in params:
        p.field[None] = prof.better_values[p.name]
    assert 0.5 * float(np.sum(residuals() ** 2)) == pytest.approx(report.loss + prof.better[1], rel=1e-6)
    for p, v in zip(params, held):
        p.field[None] = v
    from tigradsim.fitting.profile import apply_profiles
    apply_profiles(report, {"w": prof})
    assert any("the fit had not converged" in s and "there w = " in s for s in report.notes)
