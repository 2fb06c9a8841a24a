"""Param bounds, ColumnParam / RatioParam / TiedParam chain rules (FD, f64), StopCriteria,
and the Gauss-Newton uncertainty report (tgs.fit_report): interval coverage over seeded
noisy repeats on a particle scene, and non-identifiable combinations."""
import json
import math

import numpy as np
import pytest
import taichi as ti

import tigradsim as tgs


def _scalar(value, needs_grad=True):
    f = ti.field(float, shape=(), needs_grad=needs_grad)
    f[None] = value
    return f


# -- bounds -------------------------------------------------------------------
@pytest.mark.parametrize("kwargs, message", [
    (dict(lower=2.0, upper=1.0), r"'k'.*lower must be < upper.*2.*1"),
    (dict(lower=1.0, upper=1.0), r"'k'.*lower must be < upper"),
    (dict(lower=float("nan")), r"'k'.*lower is NaN"),
    (dict(upper=float("nan")), r"'k'.*upper is NaN"),
    (dict(lower=0.0, log_space=True), r"'k'.*log_space needs lower > 0"),
    (dict(lower=-1.0, upper=10.0, log_space=True), r"'k'.*log_space needs lower > 0"),
    (dict(lower=5.0, upper=10.0), r"'k'.*initial value 1.5.*outside the bounds"),
    (dict(lower=0.0, upper=1.0), r"'k'.*initial value 1.5.*outside the bounds"),
    (dict(lower=[0.0, 1.0]), r"'k'.*lower has shape \(2,\).*value's shape \(\)"),
    (dict(lower="a"), r"'k'.*lower must be a number"),
])
def test_param_rejects_bad_bounds(f64, kwargs, message):
    with pytest.raises(ValueError, match=message):
        tgs.Param(_scalar(1.5), "k", **kwargs)


def test_param_bounds_accept_edge_values_and_f32_rounding(f32):
    p = tgs.Param(_scalar(0.1), "k", lower=0.1, upper=1.0)     # stored as float32(0.1) > 0.1
    assert p.lower == 0.1
    q = tgs.Param(_scalar(0.1), "k", lower=0.01, upper=0.1)    # upper edge too
    assert q.upper == 0.1
    with pytest.raises(ValueError, match="log_space needs values > 0"):
        tgs.Param(_scalar(-1.0), "neg", log_space=True)


def test_column_param_rejects_bad_column(f64):
    table = ti.field(float, shape=(2, 3), needs_grad=True)
    with pytest.raises(ValueError, match=r"column must be an integer in \[0, 2\], got 3"):
        tgs.ColumnParam(table, 3, "mu")
    with pytest.raises(ValueError, match="field must be a table"):
        tgs.ColumnParam(_scalar(1.0), 0, "mu")


# -- chain rules ----------------------------------------------------------------
def test_column_param_chain_rule_and_rows(f64):
    """One column (and a row subset) of a table: only those entries change; FD == chain rule."""
    rng = np.random.default_rng(0)
    table = ti.field(float, shape=(3, 3), needs_grad=True)
    t0 = rng.uniform(0.5, 2.0, (3, 3))
    table.from_numpy(t0)
    w = ti.field(float, shape=(3, 3))
    w.from_numpy(rng.uniform(-1, 1, (3, 3)))
    loss = ti.field(float, shape=(), needs_grad=True)

    @ti.kernel
    def run():
        for i, j in table:
            loss[None] += w[i, j] * table[i, j] ** 3

    p = tgs.ColumnParam(table, 1, "lam", lower=0.1, upper=10.0, log_space=True, rows=[0, 2])
    assert np.allclose(p.value(), t0[[0, 2], 1])
    p.write([3.0, 4.0])
    expect = t0.copy()
    expect[[0, 2], 1] = [3.0, 4.0]
    assert np.allclose(table.to_numpy(), expect)
    tgs.check_param_gradient(run, loss, p).assert_ok()
    tgs.check_param_gradient(run, loss, tgs.ColumnParam(table, 0, "mu")).assert_ok()


def _bounce_scene(kd=1.0, spring=True, steps=240, dt=2e-3, every=8):
    """Two particles joined by a spring (known stiffness), dropped onto the ground (f64 scenes)."""
    b = tgs.SceneBuilder(gravity=(0.0, -9.8, 0.0))
    b.add_ground(ke=1e3, kd=kd, kf=0.0, mu=0.5)   # contact ~10 steps: a smooth loss in ke
    if spring:
        b.add_particles([[0.0, 0.25, 0.0], [0.12, 0.3, 0.0]], velocities=[[0.5, 0.0, 0.0], [-0.3, 1.0, 0.0]],
                        masses=0.1)
        b.add_spring(0, 1, stiffness=40.0, damping=0.0)
    else:
        b.add_particles([[0.0, 0.25, 0.0]], masses=0.1)
    model = b.finalize(requires_grad=True)
    sim = tgs.Simulator(model, dt=dt, steps=steps)
    rec = tgs.ParticleRecorder(sim, every=every)
    sim.run()                                        # rec.values: the true trajectory
    return model, sim, rec


def test_ratio_and_tied_param_chain_rules_on_particles(f64):
    """mass (TiedParam: one number written to every particle's mass) and ground ke per
    unit mass (RatioParam over it): writing the mass keeps ke/m; the mass's gradient at
    fixed ke/m includes the ke term; both chain rules agree with central differences."""
    model, sim, rec = _bounce_scene()
    target = rec.values.to_numpy()
    loss = tgs.MSELoss(rec.values, target * 0.9)

    def run():
        sim.run()
        loss()

    mass = tgs.TiedParam([(model.particle_mass, lambda t: np.full(2, t), lambda t, g: g.sum())], value=0.12,
                         name="mass", lower=0.01, upper=1.0, log_space=True)
    assert np.allclose(model.particle_mass.to_numpy(), 0.12)
    ke_m = tgs.RatioParam(model.ground_ke, mass, "ke/m", lower=1e3, upper=1e6, log_space=True)
    assert ke_m.value() == pytest.approx(1e3 / 0.12)
    mass.write(0.2)                                  # ke follows: ke / m unchanged
    assert model.ground_ke[None] == pytest.approx(1e3 / 0.12 * 0.2)
    assert ke_m.value() == pytest.approx(1e3 / 0.12)
    ke_m.write(1e4)
    assert model.ground_ke[None] == pytest.approx(1e4 * 0.2)
    tgs.check_param_gradient(run, loss.value, ke_m, n_dirs=1, eps=1e-6, rtol=1e-5).assert_ok()
    tgs.check_param_gradient(run, loss.value, mass, n_dirs=1, eps=1e-6, rtol=1e-5).assert_ok()
    # a plain field as the denominator (no tie back); shapes must broadcast
    m1 = ti.field(float, shape=1)
    m1[0] = 0.25
    kd_m = tgs.RatioParam(model.ground_kd, m1, "kd/m")
    assert np.allclose(kd_m.value(), 1.0 / 0.25)
    with pytest.raises(ValueError, match=r"'kd/m'.*denominator's shape \(2,\) does not broadcast.*\(\)"):
        tgs.RatioParam(model.ground_kd, model.particle_mass, "kd/m")
    with pytest.raises(ValueError, match="forward returned shape"):
        tgs.TiedParam([(model.particle_mass, lambda t: np.ones(3), lambda t, g: g.sum())], value=1.0)


# -- stop criteria ---------------------------------------------------------------
def test_optimize_stop_criteria(f64):
    x = _scalar(3.0)
    loss = ti.field(float, shape=(), needs_grad=True)

    @ti.kernel
    def run():
        loss[None] += (x[None] - 1.0) ** 2

    p = tgs.Param(x, "x")
    h = tgs.optimize(run, loss, tgs.BFGS([p], lr=1.0), iters=100, log_every=0,
                     stop=tgs.StopCriteria(loss_tol=1e-20))
    assert h.stop_reason.startswith("loss") and len(h.loss) < 20 and h.loss[-1] <= 1e-20
    x[None] = 3.0
    h = tgs.optimize(run, loss, tgs.Adam([p], lr=1e-4), iters=200, log_every=0,
                     stop=tgs.StopCriteria(rtol=1e-2, window=5))
    assert "rtol" in h.stop_reason and len(h.loss) < 200
    x[None] = 3.0
    h = tgs.optimize(run, loss, tgs.SGD([p], lr=0.4), iters=200, log_every=0, stop=tgs.StopCriteria(gtol=1e-6))
    assert "gtol" in h.stop_reason and abs(x[None] - 1.0) < 1e-6
    h = tgs.optimize(run, loss, tgs.SGD([p], lr=0.4), iters=5, log_every=0)
    assert h.stop_reason == "iters" and len(h.loss) == 6
    with pytest.raises(ValueError, match="StopCriteria.rtol"):
        tgs.StopCriteria(rtol=-1)


# -- uncertainty -------------------------------------------------------------------
def test_intervals_cover_the_truth_in_noisy_repeats(f64):
    """Mass and ground ke of a spring-joined pair bouncing on the ground, from positions
    with Gaussian noise (sigma 2 mm), 20 seeded repeats: each 95% interval contains the
    truth in >= 80% of the repeats (measured: mass 20/20, ke 18/20; std of the log
    estimates 0.008 / 0.014 against reported std 0.010 / 0.014), the std matches the scatter of the estimates, and
    s^2 estimates the noise variance."""
    model, sim, rec = _bounce_scene()
    truth = {"mass": 0.1, "ground_ke": 1e3}
    clean = rec.values.to_numpy().astype(np.float64)
    mass = tgs.TiedParam([(model.particle_mass, lambda t: np.full(2, t), lambda t, g: g.sum())], value=0.1,
                         name="mass", lower=0.01, upper=1.0, log_space=True)
    ke = tgs.Param(model.ground_ke, "ground_ke", lower=1e2, upper=1e5, log_space=True)
    sigma = 2e-3
    target = {}

    def residuals():
        sim.run()
        return (rec.values.to_numpy() - target["y"]).ravel()

    covered = {n: 0 for n in truth}
    errors, stds, s2 = {n: [] for n in truth}, {n: [] for n in truth}, []
    repeats = 20
    for seed in range(repeats):
        target["y"] = clean + np.random.default_rng(seed).normal(0.0, sigma, clean.shape)
        mass.write(0.12)
        ke.write(0.8e3)
        tgs.least_squares(residuals, [mass, ke], iters=10, log_every=0)
        rep = tgs.fit_report(residuals, [mass, ke], noise_floor=0.0)
        s2.append(rep.s2)
        for n in truth:
            e = rep[n]
            assert e.status == "ok" and e.log_space
            covered[n] += e.lower95 <= truth[n] <= e.upper95
            errors[n].append(math.log(e.value / truth[n]))
            stds[n].append(e.std)
    print(covered, {n: (np.std(errors[n]), np.mean(stds[n])) for n in truth}, np.mean(s2) / sigma ** 2)
    for n in truth:
        assert covered[n] >= 0.8 * repeats, (n, covered)
        # the reported std is the scatter of the estimates (within sampling error of 20 repeats)
        assert 0.6 < np.std(errors[n]) / np.mean(stds[n]) < 1.6, (n, np.std(errors[n]), np.mean(stds[n]))
    assert 0.8 < np.mean(s2) / sigma ** 2 < 1.2


@pytest.mark.parametrize("precision", ["f64", "f32"])
def test_mass_and_contact_stiffness_without_a_known_force_are_undetermined(precision):
    """One particle bouncing on a frictionless, undamped ground: the motion depends on
    ke / m only, so mass and ke are undetermined and the report names the pair as
    scaling together (noise-free target: the 8-bit floor keeps the intervals finite);
    in float32 too (larger FD step and eigenvalue tolerance chosen from the residuals' dtype)."""
    tgs.init(arch="cpu", precision=precision)
    model, sim, rec = _bounce_scene(kd=0.0, spring=False)
    y = rec.values.to_numpy().astype(np.float64)

    def residuals():
        sim.run()
        return (rec.values.to_numpy() - y).ravel()

    params = [tgs.Param(model.particle_mass, "mass", lower=1e-3, upper=10.0, log_space=True),
              tgs.Param(model.ground_ke, "ke", lower=10.0, upper=1e6, log_space=True)]
    rep = tgs.fit_report(residuals, params)
    assert rep.s2 == tgs.PIXEL_8BIT_VARIANCE and rep.s2_fit == 0.0
    assert [e.status for e in rep.estimates] == ["undetermined", "undetermined"]
    assert len(rep.undetermined) == 1
    d = rep.undetermined[0]
    assert set(d.coefficients) == {"mass", "ke"} and "scale together" in d.text
    assert d.coefficients == pytest.approx({"mass": 1.0, "ke": 1.0}, abs=2e-2)
    text = rep.to_markdown()
    assert "undetermined" in text and "scale together" in text and "| mass |" in text
    # with the mass known, ke alone is determined (std at the floor's 1.1 mm: 0.013)
    rep_ke = tgs.fit_report(residuals, params[1:])
    assert rep_ke["ke"].status == "ok" and rep_ke["ke"].std < 0.05 and not rep_ke.undetermined


def test_product_pair_is_undetermined_other_value_is_not(f64):
    """r = a * b * t + c * t^2 - y: a and b enter only as a product (reported as such,
    both undetermined); c keeps a finite std; JSON, markdown and str forms."""
    a, b, c = _scalar(2.0), _scalar(3.0), _scalar(0.5)
    t = np.linspace(0.0, 1.0, 50)
    y = 6.0 * t + 0.5 * t ** 2 + np.random.default_rng(1).normal(0.0, 0.01, t.size)
    params = [tgs.Param(a, "a", lower=0.1, upper=10.0, log_space=True),
              tgs.Param(b, "b", lower=0.1, upper=10.0, log_space=True), tgs.Param(c, "c", lower=-5.0, upper=5.0)]

    def residuals():
        return a[None] * b[None] * t + c[None] * t ** 2 - y

    tgs.least_squares(residuals, params, iters=10, log_every=0)
    rep = tgs.fit_report(residuals, params, noise_floor=0.0)
    assert rep["a"].status == rep["b"].status == "undetermined"
    assert rep["c"].status == "ok" and rep["c"].lower95 <= 0.5 <= rep["c"].upper95
    assert rep["c"].std == pytest.approx(0.01 * np.sqrt(np.linalg.inv(np.array(
        [[t @ t, t @ t ** 2], [t @ t ** 2, t ** 2 @ t ** 2]]))[1, 1]), rel=0.3)
    assert len(rep.undetermined) == 1 and "only the product a * b is determined" in rep.undetermined[0].text
    d = json.loads(json.dumps(rep.to_dict(), allow_nan=False))
    assert d["estimates"][0]["std"] is None and d["estimates"][2]["status"] == "ok"
    assert "undetermined" in str(rep) and "| c |" in rep.to_markdown()


def test_linear_fit_matches_textbook_standard_errors(f64):
    """y = p0 + p1 t with noise: fit_report's std equals the OLS formula s^2 (X^T X)^-1,
    and a value at its bound is flagged."""
    p0, p1 = _scalar(0.0), _scalar(0.0)
    t = np.linspace(0.0, 2.0, 40)
    y = 1.0 + 0.5 * t + np.random.default_rng(2).normal(0.0, 0.1, t.size)
    params = [tgs.Param(p0, "p0", lower=-10.0, upper=10.0), tgs.Param(p1, "p1", lower=-10.0, upper=10.0)]

    def residuals():
        return p0[None] + p1[None] * t - y

    tgs.least_squares(residuals, params, iters=5, log_every=0)
    rep = tgs.fit_report(residuals, params, noise_floor=0.0)
    X = np.stack([np.ones_like(t), t], 1)
    beta, res, *_ = np.linalg.lstsq(X, y, rcond=None)
    s2 = float(res[0]) / (t.size - 2)
    std = np.sqrt(s2 * np.diag(np.linalg.inv(X.T @ X)))
    assert rep.s2_fit == pytest.approx(s2, rel=1e-6)
    assert [e.value for e in rep.estimates] == pytest.approx(beta, rel=1e-6)
    assert [e.std for e in rep.estimates] == pytest.approx(std, rel=1e-4)
    assert rep["p1"].upper95 - rep["p1"].value == pytest.approx(1.96 * std[1], rel=1e-3)
    assert rep.step_over_std < 1e-3
    # pin p1 at a bound: the status says so, the interval stops at the bound
    params[1] = tgs.Param(p1, "p1", lower=-10.0, upper=float(p1[None]))
    rep = tgs.fit_report(residuals, params, noise_floor=0.0)
    assert rep["p1"].status == "at bound" and rep["p1"].upper95 == pytest.approx(beta[1])
    assert rep["p1"].std == pytest.approx(std[1], rel=1e-3)       # one-sided difference at the bound
    # a fit that never reached the data (here: a noise floor far below its residual) says nothing about
    # the bound either: the estimate at the bound is reported a misfit, not "at bound"
    quality = tgs.fit_quality(rep, noise_floor=1e-6 * rep.s2_fit)
    assert quality.misfit and rep["p1"].status == "misfit" and rep["p0"].status == "misfit"


def test_the_last_jacobian_is_reused_only_for_the_same_residuals_at_the_same_point(f64):
    """`residual_jacobian` at the point, bounds and step of its last call, with bitwise the same residuals, costs
    one rollout and returns the same J (a scene fit's report and its sensitivity both take it at the estimate);
    a moved point, another model (same point, other residuals), other bounds or step take it anew, and each
    J is the model's own (the analytic derivative of c a exp(b t) - 1)."""
    a, b = _scalar(1.5), _scalar(-0.7)
    t = np.linspace(0.0, 1.0, 9)
    model = {"c": 1.0, "calls": 0}

    def residuals():
        model["calls"] += 1
        return model["c"] * a[None] * np.exp(b[None] * t) - 1.0

    params = [tgs.Param(a, "a", lower=0.1, upper=10.0, log_space=True), tgs.Param(b, "b", lower=-5.0, upper=5.0)]

    def jac(**kw):
        model["calls"] = 0
        J, r = tgs.residual_jacobian(residuals, params, **kw)
        return J, model["calls"]

    def expected():
        e = model["c"] * np.exp(b[None] * t)
        return np.stack([e * a[None], a[None] * t * e], 1)              # d/d log a, d/d b

    J1, n1 = jac()
    assert n1 == 5 and np.allclose(J1, expected(), rtol=1e-5)
    J2, n2 = jac()
    assert n2 == 1 and np.array_equal(J2, J1)                           # the same residuals at the same point
    J2[:] = 0.0
    assert np.array_equal(jac()[0], J1)                                 # a copy: the caller's edits stay its own
    model["c"] = 2.0                                                    # another model at the same point
    J3, n3 = jac()
    assert n3 == 5 and np.allclose(J3, expected(), rtol=1e-5)
    a[None] = 1.6                                                       # another point
    J4, n4 = jac()
    assert n4 == 5 and np.allclose(J4, expected(), rtol=1e-5)
    assert jac(fd_step=1e-4)[1] == 5                                    # another step
    params[1] = tgs.Param(b, "b", lower=-5.0, upper=float(b[None]))     # another bound (one-sided difference)
    J5, n5 = jac(fd_step=1e-4)
    assert n5 == 4 and np.allclose(J5, expected(), rtol=1e-3)


def test_rigid_box_without_known_force_mass_undetermined_ratios_determined(f64):
    """A box thrown spinning onto the ground, no known force (issue 15's 'box drop'):
    with the contact parameters per unit mass (RatioParam over the mass Param) the
    motion does not change with the mass at all, so the report says mass is
    undetermined (a numerically zero eigenvalue: 7e-24 against 14) while ke/m, kd/m,
    kf/m and mu get finite intervals that contain the truth; kd/m's chain rule on
    the rigid scene agrees with central differences."""
    from tigradsim import meshes
    from tigradsim.physics.rigid import BodyRecorder
    b = tgs.SceneBuilder(gravity=(0.0, -9.8, 0.0))
    b.add_ground()
    v, f = meshes.box_surface((0.3, 0.2, 0.25))
    q = np.array([0.15, 0.1, -0.2, 1.0])
    b.add_rigid_body(v, f, mass=1.0, position=(0.0, 0.25, 0.0), rotation=q / np.linalg.norm(q),
                     velocity=(1.0, -0.5, 0.3), angular_velocity=(1.0, 4.0, -2.0), ke=2e3, kd=10.0, kf=20.0, mu=0.4)
    model = b.finalize()
    sim = tgs.Simulator(model, dt=2e-3, steps=250)
    rec = BodyRecorder(sim, 10)
    sim.run()

    def observed():
        return np.concatenate([rec.positions.to_numpy().ravel(), rec.rotations.to_numpy().ravel()])

    y = observed()

    def residuals():
        sim.run()
        return observed() - y

    mass = tgs.Param(model.body_mass, "mass", lower=0.1, upper=10.0, log_space=True)
    ratios = [tgs.RatioParam(getattr(model, f"body_{n}"), mass, f"{n}/m", log_space=True) for n in ("ke", "kd", "kf")]
    params = [mass] + ratios + [tgs.Param(model.body_mu, "mu", lower=0.05, upper=2.0, log_space=True)]
    rep = tgs.fit_report(residuals, params)
    assert rep["mass"].status == "undetermined"
    assert [d.coefficients for d in rep.undetermined] == [{"mass": 1.0}]
    assert "mass is not determined" in rep.undetermined[0].text
    for name, truth in (("ke/m", 2e3), ("kd/m", 10.0), ("kf/m", 20.0), ("mu", 0.4)):
        e = rep[name]
        assert e.status == "ok" and e.std < 0.05 and e.lower95 < truth < e.upper95, str(rep)
    loss = tgs.MSELoss(rec.positions, rec.positions.to_numpy() * 1.01)

    def run():
        sim.run()
        loss()

    tgs.check_param_gradient(run, loss.value, ratios[1], n_dirs=1).assert_ok()


# -- correlated residuals: the cluster-robust (sandwich) covariance -------------
def _block_problem(rng, G=20, per=30, block_sd=0.3, pixel_sd=0.01):
    """y = X beta + u_g + e: a linear model whose errors share a value per block g (the
    way a frame's pixels share a model mismatch), X varying between and within blocks."""
    block = np.repeat(np.arange(G), per)
    x = rng.normal(size=G)[block] + 0.3 * rng.normal(size=G * per)
    X = np.stack([np.ones(G * per), x], axis=1)
    y = X @ np.array([1.0, 2.0]) + rng.normal(0.0, block_sd, G)[block] + rng.normal(0.0, pixel_sd, G * per)
    return X, y, block


def test_cluster_robust_intervals_cover_the_truth_where_iid_ones_do_not(f64):
    """Linear least squares with block-correlated errors, 40 seeded repeats: the iid
    intervals (N = 600 residuals taken as independent) are far too narrow, the
    cluster-robust ones (groups = the 20 blocks) cover the truth in >= 80 % of the repeats;
    groups given as an int (equal contiguous blocks) and as labels agree."""
    beta = ti.field(float, shape=2, needs_grad=True)
    p = tgs.Param(beta, "beta")
    truth = np.array([1.0, 2.0])
    covered = {"iid": 0, "robust": 0}
    repeats = 40
    for seed in range(repeats):
        X, y, block = _block_problem(np.random.default_rng(seed))
        b = np.linalg.lstsq(X, y, rcond=None)[0]
        p.write(b)
        jac = (X, X @ b - y)
        iid = tgs.fit_report(None, [p], noise_floor=0.0, jacobian=jac)
        rob = tgs.fit_report(None, [p], noise_floor=0.0, jacobian=jac, groups=block)
        assert iid.covariance_type == "iid" and rob.covariance_type == "max(iid, cluster-robust over 20 clusters)"
        assert rob.clusters == 20 and np.all(rob.std_robust > 0)
        assert np.all(np.sqrt(np.diag(rob.covariance)) >= iid.std_iid - 1e-15)
        assert np.allclose(np.sqrt(np.diag(rob.covariance)), np.maximum(rob.std_iid, rob.std_robust))
        same = tgs.fit_report(None, [p], noise_floor=0.0, jacobian=jac, groups=20)
        assert np.allclose(same.covariance, rob.covariance)
        # the sandwich formula itself
        A = np.linalg.inv(X.T @ X)
        S = np.stack([X[block == g].T @ jac[1][block == g] for g in range(20)])
        assert np.allclose(rob.std_robust ** 2, np.diag(A @ S.T @ S @ A) * 20 / 18)
        for kind, rep in (("iid", iid), ("robust", rob)):
            e = [rep["beta[0]"], rep["beta[1]"]]
            covered[kind] += sum(a.lower95 <= t <= a.upper95 for a, t in zip(e, truth))
    print(covered)
    assert covered["robust"] >= 0.8 * 2 * repeats, covered
    assert covered["iid"] <= 0.5 * 2 * repeats, covered


def test_cluster_robust_groups_are_checked(f64):
    beta = ti.field(float, shape=2, needs_grad=True)
    p = tgs.Param(beta, "beta")
    X, y, block = _block_problem(np.random.default_rng(0), G=4, per=5)
    jac = (X, X @ np.zeros(2) - y)
    with pytest.raises(ValueError, match=r"groups: expected a number of equal blocks >= 1 that divides the 20 "
                                         r"residuals, got 3"):
        tgs.fit_report(None, [p], jacobian=jac, groups=3)
    with pytest.raises(ValueError, match=r"groups: expected an int or one label per residual, shape \(20,\), "
                                         r"got shape \(19,\)"):
        tgs.fit_report(None, [p], jacobian=jac, groups=block[:-1])
    rep = tgs.fit_report(None, [p], jacobian=jac, groups=lambda n: np.arange(n) // 10)    # 2 clusters, p = 2
    assert rep.covariance_type == "iid" and any("2 residual clusters for 2 parameters" in n for n in rep.notes)
