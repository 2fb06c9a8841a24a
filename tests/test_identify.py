"""tgs.identify: multi-start search, gradient / least-squares fits, coarse-to-fine in
time, ambiguous minima, and its argument checks."""
import json

import numpy as np
import pytest
import taichi as ti

import tigradsim as tgs


def _symmetric_problem(asymmetry=0.0, noise=0.01):
    """r_j = a^2 t_j - y_j (y from a = 1 plus noise): minima at a = +1 and a = -1 that fit
    exactly equally well; `asymmetry` adds a residual asymmetry * (a - 1), which makes
    a = -1 worse.  Returns the Param, a Tape forward / loss, and the residual function."""
    t_np = np.linspace(0.1, 1.0, 30)
    y_np = t_np + np.random.default_rng(0).normal(0.0, noise, t_np.size)
    a = ti.field(float, shape=(), needs_grad=True)
    a[None] = 0.3
    t, y = ti.field(float, shape=t_np.size), ti.field(float, shape=t_np.size)
    t.from_numpy(t_np)
    y.from_numpy(y_np)
    loss = ti.field(float, shape=(), needs_grad=True)

    @ti.kernel
    def forward():
        for j in t:
            loss[None] += 0.5 * (a[None] ** 2 * t[j] - y[j]) ** 2
        for _ in range(1):
            loss[None] += 0.5 * (asymmetry * (a[None] - 1.0)) ** 2

    def residuals():
        v = a[None]
        return np.concatenate([v * v * t_np - y_np, [asymmetry * (v - 1.0)]])

    return tgs.Param(a, "a", lower=-2.0, upper=2.0), forward, loss, residuals


def test_two_equally_good_minima_are_reported_as_ambiguous(f64):
    p, forward, loss, residuals = _symmetric_problem()
    lines = []
    res = tgs.identify([p], forward=forward, loss=loss, residuals=residuals, starts=8, local_starts=4, seed=1,
                       adam_iters=20, adam_lr=0.1, bfgs_iters=40, bfgs_lr=0.1,
                       stop=tgs.StopCriteria(gtol=1e-10), noise_floor=0.0, printer=lines.append)
    assert res.ambiguous and len(res.tied) == 2
    found = sorted(res.minima[i].values["a"] for i in res.tied)
    assert found == pytest.approx([-1.0, 1.0], abs=0.02)
    for i in res.tied:                      # each minimum has its own interval, which excludes the other
        e = res.minima[i].report["a"]
        assert e.status == "ok" and e.upper95 - e.lower95 < 0.1
    assert len(res.search) == 8 and len(res.runs) == 4
    assert "ambiguous" in str(res) and "ambiguous" in res.to_markdown()
    assert any(line.startswith("search") for line in lines) and any(line.startswith("iter") for line in lines)
    json.dumps(res.to_dict(), allow_nan=False)


def test_without_residuals_ties_are_judged_by_relative_loss(f64):
    """A Tape loss only: no uncertainty (said in the notes); minima are told apart by
    distance (same_tol) and tied when their losses are within tie_rtol."""
    p, forward, loss, _ = _symmetric_problem()
    res = tgs.identify([p], forward=forward, loss=loss, starts=6, local_starts=4, seed=2, adam_iters=20,
                       adam_lr=0.1, bfgs_iters=40, bfgs_lr=0.1, stop=tgs.StopCriteria(gtol=1e-12), log_every=0)
    assert res.ambiguous and res.best is None
    assert sorted(res.minima[i].values["a"] for i in res.tied) == pytest.approx([-1.0, 1.0], abs=0.02)
    assert any("no residuals" in n for n in res.notes) and "no uncertainty" in str(res)


def test_a_worse_minimum_is_listed_not_tied(f64):
    """The same problem with a = -1 made worse (least-squares fits only: no Tape loss)."""
    p, _, _, residuals = _symmetric_problem(asymmetry=0.2)
    res = tgs.identify([p], residuals=residuals, starts=8, local_starts=4, seed=1, noise_floor=0.0, log_every=0)
    assert not res.ambiguous and res.tied == [0]
    assert res.values["a"] == pytest.approx(1.0, abs=0.02) and p.value() == pytest.approx(res.values["a"])
    assert len(res.minima) == 2 and res.minima[1].values["a"] == pytest.approx(-1.0, abs=0.05)
    assert res.best["a"].lower95 < 1.0 < res.best["a"].upper95 + 0.02
    assert "Other (worse) minima" in res.to_markdown()


def _spring_pair(every=8, steps=240):
    b = tgs.SceneBuilder(gravity=(0.0, -9.8, 0.0))
    b.add_ground(ke=1e3, kd=1.0, kf=0.0, mu=0.5)
    b.add_particles([[0.0, 0.25, 0.0], [0.12, 0.3, 0.0]], velocities=[[0.5, 0.0, 0.0], [-0.3, 1.0, 0.0]],
                    masses=0.1)
    b.add_spring(0, 1, stiffness=40.0, damping=0.0)
    model = b.finalize(requires_grad=True)
    sim = tgs.Simulator(model, dt=2e-3, steps=steps)
    rec = tgs.ParticleRecorder(sim, every=every)
    sim.run()
    return model, sim, rec


def test_coarse_to_fine_multistart_recovers_mass_and_ke(f64):
    """Two particles on a spring bounce on the ground (contact from frame ~17 of 31).
    Unknowns: one mass for both (TiedParam) and the ground ke, from noisy particle tracks
    (sigma 2 mm).  Search over [0.02, 0.5] kg x [1e2, 1e4] N/m at the first horizon (12
    frames: before contact, so only the mass is seen), then Adam + BFGS through horizons
    12, 22, 31 (MSELoss frame weights); the 95% intervals at the end contain the truth."""
    model, sim, rec = _spring_pair()
    frames = rec.frames
    rng = np.random.default_rng(5)
    target = rec.values.to_numpy() + rng.normal(0.0, 2e-3, (frames, 2, 3))
    mse = tgs.MSELoss(rec.values, target)
    horizon = {"k": frames}
    calls = []

    def set_horizon(k):
        calls.append(k)
        horizon["k"] = k
        w = np.zeros(frames)
        w[:k] = 1.0 / (k * 2)
        mse.weights.from_numpy(w)

    def forward():
        sim.run()
        mse()

    def residuals():
        sim.run()
        return (rec.values.to_numpy() - target)[:horizon["k"]].ravel()

    mass = tgs.TiedParam([(model.particle_mass, lambda t: np.full(2, t), lambda t, g: g.sum())], value=0.3,
                         name="mass", lower=0.02, upper=0.5, log_space=True)
    ke = tgs.Param(model.ground_ke, "ke", lower=1e2, upper=1e4, log_space=True)
    model.set("ground_ke", 3e3)
    res = tgs.identify([mass, ke], forward=forward, loss=mse.value, residuals=residuals, starts=5, local_starts=2,
                       seed=0, adam_iters=8, adam_lr=0.1, bfgs_iters=15, bfgs_lr=0.1,
                       stop=tgs.StopCriteria(rtol=1e-9, window=5), horizons=[12, 22, frames],
                       set_horizon=set_horizon, noise_floor=0.0, log_every=0)
    assert calls[0] == 12 and calls[-1] == frames and calls[1:4] == [12, 22, frames]
    assert not res.ambiguous
    best = res.best
    assert best.residual_count == frames * 6
    for name, truth in (("mass", 0.1), ("ke", 1e3)):
        e = best[name]
        assert e.status == "ok" and e.lower95 <= truth <= e.upper95, str(best)
        assert abs(np.log(e.value / truth)) < 0.05
    assert model.ground_ke[None] == pytest.approx(best["ke"].value)


def test_tied_starts_are_ranked_where_they_differ(f64):
    """A parameter that shows only after frame 5 (as a contact parameter after a free fall) with two basins:
    the global one at a = 1 (zero residual) and a worse one near a = 3, where the user's guess lies.  Every
    start scores 0 on the first 5 frames.  The tied starts are scored again on all 10 frames and the one local
    fit runs from the start nearest the global basin (the first of the tie, the user's guess, would end in the
    other basin, as the second call shows)."""
    a = ti.field(float, shape=(), needs_grad=True)
    a[None] = 3.4
    frames = {"k": 10}

    def residuals():
        v = a[None]
        late = np.array([(v - 1.0) * (v - 3.0), 0.5 * (v - 1.0)])
        return np.concatenate([np.zeros(5), np.tile(late, 5)[: 2 * max(frames["k"] - 5, 0)]])

    def set_horizon(k):
        frames["k"] = k

    p = tgs.Param(a, "a", lower=0.0, upper=4.0)
    res = tgs.identify([p], residuals=residuals, starts=8, local_starts=1, seed=3, lm_iters=30,
                       horizons=[5, 10], set_horizon=set_horizon, noise_floor=0.0, log_every=0)
    assert res.values["a"] == pytest.approx(1.0, abs=1e-4)
    assert res.search_rescored[0]["frames"] == 10 and len(res.search_rescored[0]["scores"]) == 8
    assert res.search_fitted != [0]
    # the same fit from the user's guess alone ends in the other basin: the ranking is what found the truth
    a[None] = 3.4
    alone = tgs.identify([p], residuals=residuals, starts=1, local_starts=1, lm_iters=30, horizons=[5, 10],
                         set_horizon=set_horizon, noise_floor=0.0, log_every=0)
    assert abs(alone.values["a"] - 1.0) > 1.0


def test_a_candidate_the_adjoint_check_rejects_fails_alone(f64):
    """A local fit whose backward pass raises GradientError (the adjoint check: a start past the step's stability
    limit) fails like one whose rollout blew up: the other candidates go on and the fit ends at their minimum.
    When every candidate fails so, the GradientError reaches the caller (its "stopped early" report)."""
    from taichi.lang import impl

    p, kernel, loss, residuals = _symmetric_problem()
    limit = {"a": 0.0}

    def forward():          # under a Tape (the local fits' gradient), a <= limit stands for an exploding adjoint
        if impl.get_runtime().target_tape is not None and float(p.value()) <= limit["a"]:
            raise tgs.GradientError(f"adjoint exploded at a = {float(p.value()):.3g}")
        kernel()

    kw = dict(forward=forward, loss=loss, residuals=residuals, starts=8, local_starts=4, seed=1, adam_iters=20,
              adam_lr=0.1, bfgs_iters=40, bfgs_lr=0.1, stop=tgs.StopCriteria(gtol=1e-10), noise_floor=0.0,
              log_every=0)
    res = tgs.identify([p], **kw)
    failed = [r for r in res.runs if r.stop_reason.startswith("failed: adjoint exploded")]
    assert failed and len(failed) < len(res.runs)
    assert not res.ambiguous and res.values["a"] == pytest.approx(1.0, abs=0.02)
    limit["a"] = 10.0                       # every candidate's gradient rejected
    with pytest.raises(tgs.GradientError, match="adjoint exploded"):
        tgs.identify([p], **kw)


def test_identify_checks_its_arguments(f64):
    a = ti.field(float, shape=(), needs_grad=True)
    a[None] = 1.0
    free = tgs.Param(a, "a")
    bounded = tgs.Param(a, "a", lower=0.0, upper=2.0)

    def residuals():
        return np.array([a[None] - 1.0])

    with pytest.raises(ValueError, match=r"finite lower and upper bounds; missing for \['a'\]"):
        tgs.identify([free], residuals=residuals, starts=4, log_every=0)
    with pytest.raises(ValueError, match="horizons: expected an increasing list"):
        tgs.identify([bounded], residuals=residuals, horizons=[5, 3], set_horizon=print, log_every=0)
    with pytest.raises(ValueError, match="set_horizon: a function"):
        tgs.identify([bounded], residuals=residuals, horizons=[3, 5], log_every=0)
    with pytest.raises(ValueError, match="names must be unique"):
        tgs.identify([bounded, bounded], residuals=residuals, log_every=0)
    with pytest.raises(ValueError, match=r"local_starts: must be an integer in \[1, starts=2\]"):
        tgs.identify([bounded], residuals=residuals, starts=2, local_starts=3, log_every=0)
    with pytest.raises(ValueError, match="give forward and loss"):
        tgs.identify([bounded], log_every=0)
    # starts=1 fits from the current values, no bounds needed; time_budget=0 scores one start
    res = tgs.identify([free], residuals=residuals, starts=1, local_starts=1, log_every=0)
    assert res.values["a"] == pytest.approx(1.0)
    res = tgs.identify([bounded], residuals=residuals, starts=5, time_budget=0.0, log_every=0)
    assert len(res.search) == 1 and any("time budget" in n for n in res.notes)


def test_latin_hypercube_is_stratified():
    u = tgs.latin_hypercube(10, 3, np.random.default_rng(0))
    assert u.shape == (10, 3) and np.all((u >= 0) & (u < 1))
    for j in range(3):
        assert sorted(np.floor(u[:, j] * 10).astype(int)) == list(range(10))
    # n_points: point_count's older name, same draws
    np.testing.assert_array_equal(tgs.latin_hypercube(n_points=10, dim=3, rng=np.random.default_rng(0)), u)
    with pytest.raises(TypeError, match="latin_hypercube: point_count and n_points: give one"):
        tgs.latin_hypercube(10, 3, np.random.default_rng(0), n_points=10)
