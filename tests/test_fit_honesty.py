"""Honest estimates (issue 44): an assumed contact constant that moves an estimate by more than its
interval is reported and the estimate is not "ok"; a fit far above the noise floor is a misfit;
starts that tie on the search are reported; `tigradsim fit` carries it all.

The tiny scene: a 1.4 kg box (0.2 m cube) pushed by 12 N for 0.25 s on the ground, then sliding to
rest; the "footage" is its centre's x, y track every 10 steps (20 ms), with a measurement noise
floor of 1 mm.  Its friction regularisation kf makes friction viscous below mu fn / kf.
"""
import json

import numpy as np
import pytest

import tigradsim as tgs
from tigradsim import meshes
from tigradsim.physics.rigid import BodyRecorder, add_body_force

NOISE = 1e-3 ** 2           # (1 mm)^2 per coordinate
MASS, MU = 1.4, 0.4


class Push:
    """The box-push rollout with writable ground constants, its track and Params for mass and mu."""

    def __init__(self, kf=10.0, ke=1e4, kd=10.0):
        b = tgs.SceneBuilder()
        b.add_ground(ke=ke, kd=kd, kf=kf, mu=MU)
        v, f = meshes.box_surface((0.2, 0.2, 0.2))
        body = b.add_rigid_body(v, f, mass=MASS, position=(0.0, 0.1 - MASS * 9.8 / (4 * ke), 0.0))
        add_body_force(b, body, force=(12.0, 0.0, 0.0), start=0.0, end=0.25)
        self.model = b.finalize(requires_grad=True)
        self.sim = tgs.Simulator(self.model, dt=2e-3, steps=400)
        self.recorder = BodyRecorder(self.sim, every=10)
        self.mass = tgs.Param(self.model.body_mass, "mass", lower=0.3, upper=6.0, log_space=True)
        self.mu = tgs.Param(self.model.body_mu, "mu", lower=0.05, upper=1.5, log_space=True)
        self.target = None
        self.frames = None            # fit only the first `frames` recorded frames (None: all)

    def track(self):
        self.sim.run()
        pos, _ = self.recorder.numpy()
        return pos[:, 0, :2]          # (frames, 2): x, y of the centre

    def footage(self, kf):
        """The target track at the true mass and mu with this kf; kf stays set."""
        self.mass.write(np.array([MASS]))
        self.mu.write(np.array([MU]))
        self.set("kf", kf)
        self.target = self.track()

    def residuals(self):
        r = self.track() - self.target
        return (r if self.frames is None else r[:self.frames]).ravel()

    def set(self, name, value):
        getattr(self.model, f"ground_{name}")[None] = value
        self.model.set(f"body_{name}", [value])

    def assumed(self, name, value):
        lower, upper = tgs.PRIOR_RANGES[name](value)
        return tgs.AssumedConstant(f"ground.{name}", value, lower, upper, lambda c: self.set(name, c))

    def fit(self, params, start):
        for p, v in zip(params, start):
            p.write(np.array([v]))
        tgs.least_squares(self.residuals, params, iters=15, log_every=0)
        return tgs.fit_report(self.residuals, params, noise_floor=NOISE)


@pytest.fixture(scope="module")
def push(f64_module):
    return Push()


@pytest.fixture(scope="module")
def f64_module():
    tgs.init(arch="cpu", precision="f64")


def test_footage_with_kf_100_fitted_at_the_default_is_assumption_dominated(push):
    push.footage(kf=100.0)
    push.set("kf", 10.0)                   # what the user leaves at the library's default
    rep = push.fit([push.mass, push.mu], (1.2, 0.5))
    assert rep["mass"].status == "ok" and not rep["mass"].lower95 <= MASS <= rep["mass"].upper95   # today's answer
    sens = tgs.assumption_sensitivity(push.residuals, [push.mass, push.mu], [push.assumed("kf", 10.0)], rep)
    assert float(push.model.ground_kf[None]) == 10.0 and push.model.get("body_kf")[0] == 10.0   # written back
    by = {(s.estimate, s.constant): s for s in sens.shifts}
    mass = by["mass", "ground.kf"]
    assert mass.dominated and mass.largest > 5 * mass.half_width, str(sens)
    # at kf = 1000 (Coulomb above ~5 mm/s, nearer the footage's 100) the linearised refit moves mass towards the truth
    moved = rep["mass"].value * np.exp(mass.shift_upper)
    assert abs(moved - MASS) < abs(rep["mass"].value - MASS)
    assert rep["mass"].status == rep["mu"].status == "assumption-dominated"
    assert "| mass | ground.kf | [1, 1000] | 10 |" in sens.to_markdown()
    assert "mass moves" in sens.warnings()[0] and "ground.kf in [1, 1000]" in sens.warnings()[0]
    assert any("assumes ground.kf = 10" in n for n in rep.notes)
    # kf = 1000 at dt = 2 ms is past the explicit limit of the friction term: said, not hidden
    assert any(n.startswith("ground.kf = 1000: past the simulator's stability limit") for n in sens.notes), sens.notes
    json.dumps(sens.to_dict(), allow_nan=False)


def test_a_self_consistent_fit_stays_ok_with_small_sensitivity(push):
    push.footage(kf=10.0)                  # footage made with every constant the fit uses
    rep = push.fit([push.mass, push.mu], (1.2, 0.5))
    for name, truth in (("mass", MASS), ("mu", MU)):
        assert rep[name].lower95 <= truth <= rep[name].upper95
    sens = tgs.assumption_sensitivity(push.residuals, [push.mass, push.mu], [push.assumed("kd", 10.0)], rep)
    assert not sens.dominated and all(s.largest < 0.5 * s.half_width for s in sens.shifts), str(sens)
    quality = tgs.fit_quality(rep, noise_floor=NOISE)
    assert not quality.misfit and quality.ratio < 1.0
    assert [e.status for e in rep.estimates] == ["ok", "ok"]


def test_a_misfit_model_is_flagged(push):
    push.footage(kf=10.0)
    push.mass.write(np.array([0.7]))       # half the true mass, held fixed: mu alone cannot follow the track
    rep = push.fit([push.mu], (0.5,))
    quality = tgs.fit_quality(rep, noise_floor=NOISE)
    assert quality.misfit and quality.ratio > 10 and "misfit: residual" in quality.text
    assert rep["mu"].status == "misfit" and quality.text in rep.notes
    push.mass.write(np.array([MASS]))
    # a low silhouette IoU alone makes a misfit too
    clean = push.fit([push.mu], (0.5,))
    assert not tgs.fit_quality(clean, noise_floor=NOISE, iou=0.97).misfit
    low = tgs.fit_quality(clean, noise_floor=NOISE, iou=0.6)
    assert low.misfit and "IoU 0.600" in low.text and clean["mu"].status == "misfit"
    with pytest.raises(ValueError, match="noise_floor"):
        tgs.fit_quality(clean, noise_floor=0.0)


def test_starts_tied_on_the_search_are_reported(push):
    push.footage(kf=10.0)

    def set_horizon(k):
        push.frames = k

    lines = []
    try:
        res = tgs.identify([push.mass, push.mu], residuals=push.residuals, starts=4, local_starts=1, lm_iters=4,
                           horizons=[1], set_horizon=set_horizon, noise_floor=NOISE, printer=lines.append)
    finally:
        push.frames = None
    # on the first frame (t = 0) every start scores the same, and there is no later horizon to rank them on
    assert len(res.search_tied) == 4 and res.search_fitted == [res.search_tied[0]] and len(res.untried_ties) == 3
    assert "3 of them were not fitted" in res.summary() and "one best minimum" in res.summary()
    assert any("4 of 4 starts tie on the search on the first 1 frames" in n for n in res.notes)
    assert "tie on the search" in res.to_markdown()
    # a search that ranks its starts says nothing of the kind
    res = tgs.identify([push.mass, push.mu], residuals=push.residuals, starts=4, local_starts=1, lm_iters=4,
                       noise_floor=NOISE, log_every=0)
    assert res.search_tied == res.search_fitted and res.summary() == "one best minimum"


def test_starts_tied_on_the_first_horizon_are_scored_on_the_next(push):
    """The same tie on frame 0, with a second horizon: the tied starts are scored again on 40 frames, where
    they differ, and the local fit runs from the best of them there (not from the first of the tie)."""
    push.footage(kf=10.0)

    def set_horizon(k):
        push.frames = k

    lines = []
    try:
        res = tgs.identify([push.mass, push.mu], residuals=push.residuals, starts=4, local_starts=1, lm_iters=4,
                           horizons=[1, 40], set_horizon=set_horizon, noise_floor=NOISE, printer=lines.append)
        rescored = res.search_rescored
        assert [r["frames"] for r in rescored] == [40] and sorted(rescored[0]["scores"]) == [0, 1, 2, 3]
        scores = rescored[0]["scores"]
        assert len(set(scores.values())) == 4                   # they differ on 40 frames
        assert res.search_fitted == [min(scores, key=scores.get)]
        assert res.untried_ties == [] and res.summary() == "one best minimum"
        assert any("scored again on 40 frames, where they differ" in n for n in res.notes)
        assert any("scored again on 40 frames" in line for line in lines)
    finally:
        push.frames = None


def test_image_noise_floor_counts_edges():
    masks = np.zeros((2, 20, 20))
    masks[:, 5:15, 5:15] = 1.0               # a 10 px square: 40 px of edge per frame
    floor = tgs.image_noise_floor(masks, edge_px=0.5)
    assert floor == pytest.approx(tgs.PIXEL_8BIT_VARIANCE + 0.25 * 80 / 800)
    assert tgs.image_noise_floor(np.zeros((2, 20, 20))) == tgs.PIXEL_8BIT_VARIANCE
    with pytest.raises(ValueError, match="target"):
        tgs.image_noise_floor(np.zeros(5))
    with pytest.raises(ValueError, match="lower < upper"):
        tgs.AssumedConstant("ground.kf", 10.0, 1000.0, 1.0, lambda c: None)


def test_cli_fit_reports_the_constants_the_scene_left_at_defaults(tmp_path, capsys):
    """`tigradsim fit` on test_cli's box-push clip (made with kf = 10, the default): with every ground
    constant stated nothing is assumed and the mass is "ok"; without kf, ground.kf is assumed and moves
    the mass by twice its interval over [1, 1000]: estimates.json / .md, the warnings and the status
    say so."""
    from test_cli import _render_footage, _run, _scene, _toml

    _render_footage(str(tmp_path))
    runs = {}
    for name, drop in (("stated", ()), ("no_kf", ("kf",))):
        data = _scene("y")
        for k in drop:
            del data["ground"][k]
        (tmp_path / f"{name}.toml").write_text(_toml(data))
        code, result, out, err = _run(["fit", tmp_path / f"{name}.toml", "--out", tmp_path / name, "--quick"], capsys)
        assert code == 0, err
        with open(result["files"]["estimates_json"]) as fh:
            runs[name] = (result, json.load(fh), open(result["files"]["estimates_md"]).read(), err)
    result, report, md, err = runs["stated"]
    assert report["assumptions"]["constants"] == [] and not report["fit_quality"]["misfit"], report["fit_quality"]
    assert result["status"]["box.mass"] == "ok" and "assumed constant" not in err
    # the model discrepancy (refits leaving out a third of the frames): an interval containing the others
    u = report["unknowns"]["box.mass"]
    assert report["discrepancy"]["blocks"] == 3 and report["discrepancy"]["factors"]["box.mass"] >= 1.0
    assert u["ci95_with_discrepancy"][0] <= u["ci95_with_assumptions"][0] <= u["ci95"][0] <= u["estimate"]
    assert u["estimate"] <= u["ci95"][1] <= u["ci95_with_assumptions"][1] <= u["ci95_with_discrepancy"][1]
    assert result["ci95_with_discrepancy"]["box.mass"] == u["ci95_with_discrepancy"]
    assert np.shape(report["frame_statistics"]["scores"]) == (report["frames_fitted"], len(report["unknowns"]))

    result, report, md, err = runs["no_kf"]
    assert [c["name"] for c in report["assumptions"]["constants"]] == ["ground.kf"]
    (shift,) = report["assumptions"]["shifts"]
    assert shift["estimate"] == "box.mass" and shift["range"] == [1.0, 1000.0] and shift["assumed"] == 10.0
    assert "| box.mass | ground.kf | [1, 1000] | 10 |" in md and "Fit quality: residual" in md
    # measured: +2.4 % / -2.1 % at kf = 1 / 1000 against a half-width of 1.0 %
    assert shift["dominated"] and max(abs(shift["change_lower"]), abs(shift["change_upper"])) > 0.015, shift
    assert result["status"]["box.mass"] == "assumption-dominated"
    assert "warning: assumed constant dominates an estimate: box.mass moves" in err
    assert any("ground.kf" in w for w in result["warnings"])


def test_a_shift_past_the_float_range_is_reported_not_raised():
    """A linearised shift of hundreds of log units (an undetermined nuisance constant moving an estimate along a
    flat direction; Newton's box drop with implicit rigid damping gave one) ended `tigradsim fit` with an
    OverflowError in math.expm1 while writing the report: it is now a relative change of +inf, the interval with
    the constant's effect reaches +inf, and the JSON carries None for it."""
    import types

    from tigradsim.fitting.sensitivity import AssumedConstant, Sensitivity, Shift, intervals_with_assumptions, \
        relative_change
    assert relative_change(800.0) == float("inf") and relative_change(-800.0) == -1.0
    assert relative_change(0.5) == pytest.approx(np.expm1(0.5))
    shift = Shift(estimate="box.mu", constant="box.kd_per_mass", lower=1.0, upper=300.0, value=10.0, log_space=True,
                  shift_lower=-2.0, shift_upper=800.0, half_width=0.1, dominated=True)
    assert "+inf %" in shift.text and "-86.5 %" in shift.text
    const = AssumedConstant("box.kd_per_mass", 10.0, 1.0, 300.0, write=lambda c: None)
    sens = Sensitivity([shift], [const])
    assert "| +inf % |" in sens.to_markdown()
    d = sens.to_dict()["shifts"][0]
    assert d["change_upper"] is None and d["change_lower"] == pytest.approx(np.expm1(-2.0))
    report = types.SimpleNamespace(estimates=[types.SimpleNamespace(name="box.mu", lower95=0.5, upper95=0.7,
                                                                   log_space=True)])
    lower, upper = intervals_with_assumptions(report, sens)["box.mu"]
    assert lower == pytest.approx(0.5 * np.exp(-2.0)) and upper == float("inf")


def test_the_misfit_iou_is_the_fitted_frames():
    """The fit-quality check reads the IoU over the frames the fit used: where the horizon rule left out the frames
    the model cannot predict (a tumbling box's last 19 of 45), those say nothing of whether the fit reached the
    data.  One camera (`iou_summary`'s per-frame values) or several (`views_iou`), and the text says which frames."""
    import taichi as ti

    from tigradsim.scenes.outline_outputs import fitted_iou

    summary = {"mean": 0.64, "per_frame": [1.0, 0.98, 0.95, 0.3, 0.2]}
    assert fitted_iou(summary, {}, 3) == pytest.approx(0.9767, abs=1e-4)
    assert fitted_iou(None, {}, 3) is None
    views = {"a": {"iou": 0.6, "iou_per_frame": [1.0, 0.9, 0.1]}, "b": {"iou": 0.5, "iou_per_frame": [0.8, 0.8, 0.0]}}
    assert fitted_iou(summary, views, 2) == pytest.approx(0.875)
    tgs.init(arch="cpu", precision="f64")
    field = ti.field(ti.f64, shape=(1,))
    field[0] = 1.0
    t = np.linspace(0.0, 1.0, 50)
    report = tgs.fit_report(lambda: (field[0] - 1.0) * t + 0.01 * np.sin(9 * t), [tgs.Param(field, "x")],
                            noise_floor=1e-4)
    quality = tgs.fit_quality(report, iou=0.85, iou_frames=26, mark=False)
    assert quality.misfit and "silhouette IoU over the 26 fitted frames 0.850 < 0.9" in quality.text
    assert "silhouette IoU 0.950" in tgs.fit_quality(report, iou=0.95, mark=False).text


def test_a_value_pressed_on_its_bound_makes_one_fit_suspect():
    """One fit's suspect rule (fitting/bound_hits.mark_suspect): a determined value on a bound of its prior range
    (here k, which the data want at 2, held by its bound 1: the way MuJoCo's drop pressed kd/m on 300) marks the
    fit's "ok" estimates "suspect" and says which value and bound; the value on the bound keeps "at bound"; a fit
    with no value on a bound is left alone."""
    import taichi as ti

    from tigradsim.fitting.bound_hits import mark_suspect

    tgs.init(arch="cpu", precision="f64")
    fx, fk = ti.field(ti.f64, shape=(1,)), ti.field(ti.f64, shape=(1,))
    t = np.linspace(0.0, 1.0, 60)
    y = 0.7 * t + 2.0 * t ** 2 + 0.01 * np.sin(17 * t)
    fx[0], fk[0] = 0.0, 1.0
    x, k = tgs.Param(fx, "x", lower=-5.0, upper=5.0), tgs.Param(fk, "k", lower=0.1, upper=1.0)

    def residuals():
        return fx[0] * t + fk[0] * t ** 2 - y

    # x refitted with k held at its bound 1: the least-squares x for that k
    fx[0] = float(np.dot(t, y - t ** 2) / np.dot(t, t))
    report = tgs.fit_report(residuals, [x, k], noise_floor=1e-4)
    assert [e.status for e in report.estimates] == ["ok", "at bound"]
    text = mark_suspect(report, {"x": (-5.0, 5.0, False), "k": (0.1, 1.0, False)})
    assert [e.status for e in report.estimates] == ["suspect", "at bound"]
    assert text.startswith("suspect: k = 1 at its upper bound 1: the fit reached its loss by pressing it") and \
        text in report.notes
    fk[0] = 0.6
    inside = tgs.fit_report(residuals, [x, k], noise_floor=1e-4)
    assert mark_suspect(inside, {"k": (0.1, 1.0, False)}) is None
    assert all(e.status != "suspect" for e in inside.estimates)
