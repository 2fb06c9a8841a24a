"""Nuisance contact constants (issue 44, item 2): a constant nobody measured is fitted jointly within its
prior range, so the intervals of the values of interest are marginal over it; one the data cannot
determine is profiled over its range (`nuisance_sensitivity`) and widens them
(`intervals_with_assumptions`); scene files ask for it with [fit] contact_constants = "nuisance".

The tiny clip is test_fit_honesty's: a 1.4 kg box pushed by 12 N for 0.25 s, its centre's x, y track
every 20 ms (state space, no renderer), made with kf = 100 while the library's default is kf = 10.
"""
import json
import math

import numpy as np
import pytest

import tigradsim as tgs
from test_fit_honesty import MASS, MU, NOISE, Push


def _ground_param(push, name, value):
    """ground_X and the box's body_X as one log-space Param within PRIOR_RANGES[X] around `value`."""
    lower, upper = tgs.PRIOR_RANGES[name](value)
    ground, body = getattr(push.model, f"ground_{name}"), getattr(push.model, f"body_{name}")
    ties = [(ground, lambda t: t[0], lambda t, g: g),
            (body, lambda t: np.full(body.shape, t[0]), lambda t, g: g.sum())]
    return tgs.TiedParam(ties, value=[value], name=f"ground.{name}", lower=lower, upper=upper, log_space=True)


@pytest.fixture(scope="module")
def push():
    tgs.init(arch="cpu", precision="f64")
    p = Push()
    p.footage(kf=100.0)
    return p


def test_kf_fitted_as_nuisance_gives_intervals_that_hold(push):
    """At the assumed default kf = 10 the mass interval excludes the truth (test_fit_honesty); with kf a
    nuisance in [1, 1000] the joint fit finds the footage's friction and the marginal intervals of
    mass and mu contain the truth."""
    kf = _ground_param(push, "kf", 10.0)
    try:
        rep = push.fit([push.mass, push.mu, kf], (1.2, 0.5, 10.0))
        for name, truth in (("mass", MASS), ("mu", MU)):
            e = rep[name]
            assert e.status == "ok" and e.lower95 <= truth <= e.upper95, (name, e)
            assert abs(e.value / truth - 1) < 0.01, (name, e.value)
        sens = tgs.nuisance_sensitivity(push.residuals, [push.mass, push.mu, kf], ["ground.kf"], rep)
        if rep["ground.kf"].status == "ok":       # determined: already in the marginal, nothing to profile
            assert sens.shifts == [] and sens.constants == []
            wide = tgs.intervals_with_assumptions(rep, sens)
            assert wide["mass"] == (rep["mass"].lower95, rep["mass"].upper95)
    finally:
        push.set("kf", 10.0)


def test_an_undetermined_nuisance_widens_the_intervals(push):
    """kd barely touches a sliding box's track: as a nuisance it is undetermined (or sits on a bound),
    so it is profiled over [1, 100]: shifts for mass and mu only (not for the nuisance itself), the
    widened interval contains the conditional one, and kd is written back afterwards."""
    push.set("kf", 100.0)                        # the footage's kf, so that only kd is in question
    kd = _ground_param(push, "kd", 10.0)
    try:
        params = [push.mass, push.mu, kd]
        rep = push.fit(params, (1.2, 0.5, 10.0))
        assert rep["ground.kd"].status in ("undetermined", "at bound"), rep["ground.kd"]
        kd_at = float(kd.value()[0])
        sens = tgs.nuisance_sensitivity(push.residuals, params, ["ground.kd"], rep)
        assert float(push.model.ground_kd[None]) == pytest.approx(kd_at)      # written back
        assert {s.estimate for s in sens.shifts} == {"mass", "mu"} and [c.name for c in sens.constants] == ["ground.kd"]
        assert all(s.shift_lower is not None and s.shift_upper is not None for s in sens.shifts)
        wide = tgs.intervals_with_assumptions(rep, sens)
        for name in ("mass", "mu"):
            lo, hi = wide[name]
            e = rep[name]
            assert lo <= e.lower95 and hi >= e.upper95
            by = {s.estimate: s for s in sens.shifts}[name]
            grow = math.log(hi / lo) - math.log(e.upper95 / e.lower95)
            expected = max(0.0, by.shift_lower, by.shift_upper) - min(0.0, by.shift_lower, by.shift_upper)
            assert grow == pytest.approx(expected, rel=1e-9, abs=1e-15)
        with pytest.raises(ValueError, match="nuisance"):
            tgs.nuisance_sensitivity(push.residuals, params, ["ground.ke"], rep)
    finally:
        push.set("kf", 10.0)
        push.set("kd", 10.0)


def test_assumed_constant_widens_the_interval_to_cover_the_truth(push):
    """The default kf = 10 held fixed (not a nuisance): the conditional interval misses the truth, the
    interval widened by kf's sensitivity over [1, 1000] contains it."""
    push.set("kf", 10.0)
    rep = push.fit([push.mass, push.mu], (1.2, 0.5))
    assert not rep["mass"].lower95 <= MASS <= rep["mass"].upper95
    sens = tgs.assumption_sensitivity(push.residuals, [push.mass, push.mu], [push.assumed("kf", 10.0)], rep)
    wide = tgs.intervals_with_assumptions(rep, sens)
    assert wide["mass"][0] <= MASS <= wide["mass"][1], (wide, rep["mass"])


def test_scene_file_contact_constants_nuisance_adds_bounded_unknowns():
    """contact_constants = "nuisance": every contact constant [ground] leaves out (and no unknown fits)
    becomes a log-space "ground.X" unknown within PRIOR_RANGES, marked nuisance; stated ones do not;
    a wrong value is an error naming the key."""
    from tigradsim.scenes.scene_file import parse_scene
    from tigradsim.scenes.scene_table import SceneError

    def scene(**fit):
        return {"ground": {"mu": 0.4, "kd": 5.0},
                "objects": {"box": {"type": "rigid", "box": [0.2, 0.2, 0.2], "mass": 1.0,
                                    "position": [0.0, 0.1, 0.0]}},
                "camera": {"eye": [0.0, 1.0, 3.0], "target": [0.0, 0.1, 0.0], "fov": 40.0,
                           "width": 32, "height": 32},
                "simulation": {"duration": 0.5, "dt": 0.002},
                "unknowns": {"box.mass": {"init": 1.0, "lower": 0.1, "upper": 10.0}}, "fit": fit}

    spec = parse_scene(scene(contact_constants="nuisance"))
    extra = {u.target: u for u in spec.unknowns if u.nuisance}
    # the box's mass is an unknown: its stiffnesses are fitted per unit mass (kd and mu are stated)
    assert set(extra) == {"box.ke_per_mass", "box.kf_per_mass"}
    kf = extra["box.kf_per_mass"]
    assert (kf.lower, kf.upper, kf.tie, kf.log) == (1.0, 1000.0, "kf", True)       # initial mass 1 kg
    assert (extra["box.ke_per_mass"].init, extra["box.ke_per_mass"].lower) == (1e4, 1e3)
    assert [u.target for u in parse_scene(scene()).unknowns] == ["box.mass"]     # default: "assume"
    # with the mass known, the absolute constants of the ground
    data = scene(contact_constants="nuisance")
    data["unknowns"] = {"box.mu": {"init": 0.4, "lower": 0.05, "upper": 1.5}}
    del data["ground"]["mu"]
    extra = {u.target: u for u in parse_scene(data).unknowns if u.nuisance}
    assert set(extra) == {"ground.ke", "ground.kf"}            # mu is fitted on the box, kd stated
    assert (extra["ground.kf"].lower, extra["ground.kf"].upper) == (1.0, 1000.0) and extra["ground.kf"].log
    assert (extra["ground.ke"].init, extra["ground.ke"].lower, extra["ground.ke"].upper) == (1e4, 1e3, 1e5)
    with pytest.raises(SceneError, match="contact_constants"):
        parse_scene(scene(contact_constants="guess"))


@pytest.mark.slow
def test_cli_fit_with_nuisance_contact_constants(tmp_path, capsys):
    """`tigradsim fit` on test_cli's box-push clip with [ground] stating only mu and contact_constants =
    "nuisance": ke, kd, kf become unknowns "box.X_per_mass" (the mass is an unknown) marked nuisance,
    within PRIOR_RANGES over the initial mass (1.4 kg); nothing is
    assumed; every interval of interest has a ci95_with_assumptions that contains its ci95 and is printed in
    estimates.md."""
    from test_cli import _render_footage, _run, _scene, _toml

    _render_footage(str(tmp_path))
    data = _scene("y")
    data["ground"] = {"mu": data["ground"]["mu"]}
    data.setdefault("fit", {})["contact_constants"] = "nuisance"
    (tmp_path / "nuisance.toml").write_text(_toml(data))
    code, result, out, err = _run(["fit", tmp_path / "nuisance.toml", "--out", tmp_path / "fit", "--quick"], capsys)
    assert code == 0, err
    with open(result["files"]["estimates_json"]) as fh:
        report = json.load(fh)
    nuisance = {k: u for k, u in report["unknowns"].items() if u["nuisance"]}
    assert set(nuisance) == {"box.ke_per_mass", "box.kd_per_mass", "box.kf_per_mass"}
    assert nuisance["box.kf_per_mass"]["lower"] == pytest.approx(1 / 1.4)
    assert nuisance["box.kf_per_mass"]["upper"] == pytest.approx(1000 / 1.4)
    assert report["contact_constants"] == "nuisance" and report["assumptions"]["constants"] == []
    mass = report["unknowns"]["box.mass"]
    if mass["ci95"] is not None:
        wide = mass["ci95_with_assumptions"]
        assert wide[0] <= mass["ci95"][0] and wide[1] >= mass["ci95"][1]
        assert result["ci95_with_assumptions"]["box.mass"] == wide
    md = open(result["files"]["estimates_md"]).read()
    assert "with assumed constants" in md and "(nuisance)" in md and "box.kf_per_mass in [0.7143, 714.3]" in md


def test_nuisance_profile_on_a_linear_model_with_a_vector_param(push):      # push: Taichi in float64
    """An exactly solvable case: residuals (v0 + 0.5 log c - 1, v1 - 2, v0 + v1 + 0.5 log c - 3) in a
    2-vector Param v and a nuisance c that only ever appears with v0, so c is undetermined.  Profiling c
    over [0.1, 10] must refit both coordinates of v (the column mapping) and move v0 by exactly
    -0.5 (log c_end - log c0), v1 not at all; c is written back."""
    import taichi as ti

    v_field = ti.field(ti.f64, shape=2, needs_grad=True)
    c_field = ti.field(ti.f64, shape=(), needs_grad=True)
    c_field[None] = 1.0
    v_field.from_numpy(np.array([1.0, 2.0]))
    v = tgs.Param(v_field, "v")
    c = tgs.Param(c_field, "c", lower=0.1, upper=10.0, log_space=True)

    def residuals():
        v0, v1, lc = v_field[0], v_field[1], 0.5 * math.log(c_field[None])
        return np.array([v0 + lc - 1.0, v1 - 2.0, v0 + v1 + lc - 3.0])

    rep = tgs.fit_report(residuals, [v, c], noise_floor=1e-4)
    assert rep["c"].status == "undetermined"
    sens = tgs.nuisance_sensitivity(residuals, [v, c], ["c"], rep)
    assert c_field[None] == 1.0
    by = {s.estimate: s for s in sens.shifts}
    names = [e.name for e in rep.estimates]
    v0, v1 = names[0], names[1]
    assert set(by) == {v0, v1}
    assert by[v0].shift_lower == pytest.approx(-0.5 * math.log(0.1), rel=1e-5)
    assert by[v0].shift_upper == pytest.approx(-0.5 * math.log(10.0), rel=1e-5)
    assert abs(by[v1].shift_lower) < 1e-6 and abs(by[v1].shift_upper) < 1e-6
    with pytest.raises(ValueError, match="scalar"):
        tgs.nuisance_sensitivity(residuals, [v, c], ["v"], rep)
