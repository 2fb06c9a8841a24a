"""The material-damping form as a model choice (issue 44): `damping_form_spec` (each form's coefficient an
unknown over its documented prior range) and `compare_fit_outputs` (the per-form `tigradsim fit` reports
combined: every interval kind the envelope of the equally good forms').  No new differentiable term: the
coefficient's gradient for every form is checked in tests/test_soft_mass.py (test_damping_model_gradients)."""
import numpy as np
import pytest

import tigradsim as tgs
from tigradsim.fitting.model_selection import compare_fit_outputs
from tigradsim.physics.damping import DAMPING_MODELS, DAMPING_PRIORS, DAMPING_UNITS
from tigradsim.scenes.damping_compare import DAMPING_FORMS, damping_form_spec, damping_unknown_targets
from tigradsim.scenes.scene_file import parse_scene

from test_soft_mass import soft_scene


def _spec(tmp_path, unknowns=None, rigid=False):
    v, t = tgs.meshes.tet_box(1, 1, 1, size=(0.1, 0.1, 0.1), origin=(0.0, 0.03, 0.0))
    np.save(tmp_path / "x.npy", v)
    np.save(tmp_path / "t.npy", t)
    data = soft_scene(tmp_path, {"nodes": "x.npy", "tets": "t.npy", "mass": 0.3, "params": {"mu": 3e3, "lam": 5e3}},
                      unknowns or {"cube.mu": {"init": 2e3}})
    if rigid:
        data["objects"] = {"cube": {"type": "rigid", "box": [0.1, 0.1, 0.1], "mass": 1.0, "position": [0.0, 0.05, 0.0]}}
        data["unknowns"] = {"cube.mass": {"init": 1.0}}
    return parse_scene(data, str(tmp_path / "scene.toml"))


def test_every_form_has_a_prior_range_and_unit():
    assert set(DAMPING_PRIORS) == set(DAMPING_MODELS) == set(DAMPING_UNITS) == set(DAMPING_FORMS)
    for lo, hi in DAMPING_PRIORS.values():
        assert 0 < lo and hi / lo >= 1e4          # a search range of decades, not a guess


@pytest.mark.parametrize("form", ["warp", "rayleigh_mass"])
def test_damping_form_spec_sets_the_form_and_the_coefficient_unknown(tmp_path, form):
    spec = _spec(tmp_path)
    out = damping_form_spec(spec, form)
    lo, hi = DAMPING_PRIORS[form]
    cube = out.objects["cube"]
    assert cube.damping_model == form and cube.damping == pytest.approx((lo * hi) ** 0.5)
    (u,) = [u for u in out.unknowns if u.target == "cube.damping"]
    assert (u.lower, u.upper, u.log, u.init) == (lo, hi, True, pytest.approx((lo * hi) ** 0.5))
    assert [u.target for u in out.unknowns] == ["cube.mu", "cube.damping"]
    assert spec.objects["cube"].damping_model == "deformation_rate" and len(spec.unknowns) == 1   # a copy
    assert damping_unknown_targets(spec) == ["cube.damping"]
    # an unknown the file has on the coefficient takes the form's range (another form's units mean nothing)
    given = _spec(tmp_path, {"cube.damping": {"init": 0.5, "lower": 0.01, "upper": 10.0}})
    again = damping_form_spec(given, "rayleigh_stiffness")
    (u,) = [u for u in again.unknowns if u.target == "cube.damping"]
    assert (u.lower, u.upper) == DAMPING_PRIORS["rayleigh_stiffness"] and len(again.unknowns) == 1


def test_damping_form_spec_bad_input(tmp_path):
    with pytest.raises(ValueError, match=r"form: expected one of .*'warp'.*got 'viscous'"):
        damping_form_spec(_spec(tmp_path), "viscous")
    with pytest.raises(ValueError, match="no soft object: there is no material damping to compare"):
        damping_form_spec(_spec(tmp_path, rigid=True), "warp")


def _output(loss, mu, lam, iou=0.9, s2=1e-4, count=1000, damping=(1.0, "ok")):
    """An estimates.json-like dict: unknowns with (estimate, ci95, with assumptions, with discrepancy)."""
    def unknown(v):
        est, ci, wide, disc = v
        return {"estimate": est, "status": "ok" if ci else "undetermined", "ci95": ci,
                "ci95_with_assumptions": wide, "ci95_with_discrepancy": disc}
    return {"iou_final": iou,
            "identification": {"minima": [{"report": {"loss": loss, "s2": s2, "residual_count": count}}]},
            "unknowns": {"cube.mu": unknown(mu), "cube.lam": unknown(lam),
                         "cube.damping": {"estimate": damping[0], "status": damping[1], "ci95": None,
                                          "ci95_with_assumptions": None, "ci95_with_discrepancy": None}}}


def test_compare_fit_outputs_envelopes_every_interval_kind():
    outputs = {
        "warp": _output(0.0500, (4000, [3950, 4050], [3900, 4080], [3800, 4200]),
                        (9000, [8900, 9100], [8800, 9150], [8500, 9500])),
        # 2 dL / s2 = 3.0: as good; its lam intervals lie above warp's
        "deformation_rate": _output(0.05015, (3990, [3940, 4040], [3930, 4050], [3700, 4100]),
                                    (9600, [9500, 9700], [9450, 9800], [9200, 9900])),
        # 20 % above the best (2 dL / s2 = 200): worse, not combined however far off
        "rayleigh_mass": _output(0.0600, (2000, [1900, 2100], [1800, 2200], [1500, 2500]),
                                 (20000, [19000, 21000], [18000, 22000], [15000, 25000])),
    }
    c = compare_fit_outputs(outputs, shared=["cube.mu", "cube.lam"])
    assert c["best"] == "warp" and c["equally_good"] == ["warp", "deformation_rate"]
    assert [r["label"] for r in c["rows"]] == ["warp", "deformation_rate", "rayleigh_mass"]
    assert c["rows"][1]["delta_chi2"] == pytest.approx(3.0) and c["rows"][2]["delta_chi2"] == pytest.approx(200.0)
    assert c["rows"][2]["loss_excess"] == pytest.approx(0.2) and c["tie_rtol"] == 0.05
    assert c["rows"][0]["iou"] == 0.9 and c["rows"][2]["unknowns"]["cube.damping"]["estimate"] == 1.0
    mu, lam = c["combined"]["cube.mu"], c["combined"]["cube.lam"]
    assert mu["estimate"] == 4000 and mu["ci95"] == [3940, 4050] and mu["ci95_with_assumptions"] == [3900, 4080]
    assert mu["ci95_with_discrepancy"] == [3700, 4200] and mu["status"] == "ok"
    assert lam["ci95"] == [8900, 9700] and lam["ci95_with_discrepancy"] == [8500, 9900]
    assert lam["spread"] == 600 and lam["status"] == "model-dominated"         # 600 > half-width 100
    assert set(c["combined"]) == {"cube.mu", "cube.lam"}       # the coefficient: per form only
    # a stricter rule (no relative tie, the likelihood-ratio test at 1.0) keeps the best form alone: its own intervals
    strict = compare_fit_outputs(outputs, shared=["cube.mu", "cube.lam"], tie_chi2=1.0, tie_rtol=0.0)
    assert strict["equally_good"] == ["warp"] and strict["combined"]["cube.lam"]["ci95"] == [8900, 9100]
    # the best form's misfit is the combination's
    outputs["warp"]["unknowns"]["cube.mu"]["status"] = "misfit"
    assert compare_fit_outputs(outputs, shared=["cube.mu"])["combined"]["cube.mu"]["status"] == "misfit"
    outputs["warp"]["unknowns"]["cube.mu"]["status"] = "ok"
    # an equally good form without an interval makes the combination undetermined
    outputs["deformation_rate"]["unknowns"]["cube.mu"]["ci95"] = None
    assert compare_fit_outputs(outputs, shared=["cube.mu"])["combined"]["cube.mu"]["status"] == "undetermined"


def test_compare_fit_outputs_bad_input():
    good = _output(0.05, (4000, [3950, 4050], None, None), (9000, [8900, 9100], None, None))
    with pytest.raises(ValueError, match="outputs: expected at least one"):
        compare_fit_outputs({})
    with pytest.raises(ValueError, match=r"outputs\['b'\]: expected a finished fit's report"):
        compare_fit_outputs({"a": good, "b": {"unknowns": {}, "identification": None}})
    with pytest.raises(ValueError, match="residual counts differ"):
        compare_fit_outputs({"a": good, "b": _output(0.05, (1, [0, 2], None, None), (1, [0, 2], None, None), count=900)})
    with pytest.raises(ValueError, match=r"shared: \['cube.E'\] are not unknowns of every output"):
        compare_fit_outputs({"a": good}, shared=["cube.E"])
    with pytest.raises(ValueError, match="tie_chi2"):
        compare_fit_outputs({"a": good}, tie_chi2=-2)


def test_soft_nuisance_contact_ranges_stop_at_the_steps_safe_limit(tmp_path):
    """[fit] contact_constants = "nuisance" with a soft object: ke, kd, kf's ranges end where the lightest
    vertex (a total mass spread by volume: the 1-cell box's corners hold a quarter of their tets' masses)
    is at the stability pre-flight's safe limit with all three at their ends; mu keeps its range; a step
    small enough leaves the library's ranges alone."""
    from tigradsim.core.stability import SAFETY, explicit_dt_limit
    from tigradsim.fitting.sensitivity import PRIOR_RANGES
    from tigradsim.scenes.scene_unknowns import _soft_vertex_masses, soft_contact_caps
    v, t = tgs.meshes.tet_box(1, 1, 1, size=(0.1, 0.1, 0.1), origin=(0.0, 0.03, 0.0))
    np.save(tmp_path / "x.npy", v)
    np.save(tmp_path / "t.npy", t)
    data = soft_scene(tmp_path, {"nodes": "x.npy", "tets": "t.npy", "mass": 0.3, "params": {"mu": 3e3, "lam": 5e3}},
                      {"cube.mu": {"init": 2e3}})
    data["ground"] = {}
    data["fit"]["contact_constants"] = "nuisance"
    spec = parse_scene(data, str(tmp_path / "scene.toml"))
    m = _soft_vertex_masses(spec.objects["cube"])
    # 5 tets: 4 corners in one corner tet (1/6 of the volume) only, 4 in three of them and the middle one (1/3)
    assert m.sum() == pytest.approx(0.3) and np.allclose(np.sort(m / 0.3), [1 / 24] * 4 + [5 / 24] * 4, rtol=1e-12)
    dt = 1.0 / (30.0 * 4)
    caps = soft_contact_caps(spec)
    mmin = m.min()
    assert caps == pytest.approx({"ke": 0.5 * mmin / dt ** 2, "kd": 0.5 * mmin / dt, "kf": 0.5 * mmin / dt})
    limit = explicit_dt_limit(np.sqrt(caps["ke"] / mmin), (caps["kd"] + 0 * caps["kf"]) / mmin)
    assert SAFETY * limit == pytest.approx(dt, rel=1e-12)           # exactly at the safe limit
    ranges = {u.param: (u.init, u.lower, u.upper) for u in spec.unknowns if u.nuisance}
    for x in ("ke", "kd", "kf"):
        lo, hi = PRIOR_RANGES[x](10.0 if x != "ke" else 1e4)
        init, lower, upper = ranges[x]
        assert upper == pytest.approx(min(hi, caps[x])) and lower <= init <= upper and lower < upper, x
    assert ranges["kd"][2] < PRIOR_RANGES["kd"](10.0)[1]           # this coarse step does cap kd
    assert ranges["mu"][1:] == PRIOR_RANGES["mu"](0.5)
    data["simulation"] = {"substeps": 4000}                      # a fine step: the library's ranges
    fine = {u.param: (u.lower, u.upper) for u in parse_scene(data, str(tmp_path / "scene.toml")).unknowns if u.nuisance}
    assert fine["kd"] == PRIOR_RANGES["kd"](10.0) and fine["ke"] == PRIOR_RANGES["ke"](1e4)
