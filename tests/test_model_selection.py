"""tigradsim.fitting.model_selection: which models fit equally well (likelihood-ratio test), and the combined
estimate whose interval covers them; its checks."""
import numpy as np
import pytest

from tigradsim.fitting.model_selection import compare_models
from tigradsim.fitting.uncertainty import Estimate, FitReport


def _report(loss, estimates, s2=1e-4):
    ests = [Estimate(name, value, 0.1, True, lo, hi, status) for name, value, lo, hi, status in estimates]
    p = len(ests)
    return FitReport(ests, loss, 1000, p, s2, 0.0, s2, np.ones(p), [], np.eye(p), 0.0)


def test_equally_good_models_set_the_interval():
    s2 = 1e-4
    reports = {
        "capped": _report(0.0500, [("mass", 1.40, 1.38, 1.42, "ok"), ("mu", 0.40, 0.39, 0.41, "ok")], s2),
        # 2 dL / s2 = 2 (0.00015) / 1e-4 = 3.0 <= 3.84: as good; mass outside capped's interval
        "huber": _report(0.05015, [("mass", 1.46, 1.44, 1.48, "ok"), ("mu", 0.402, 0.392, 0.412, "ok")], s2),
        # 2 dL / s2 = 20: worse, left out of the combination however far its values are
        "uncapped": _report(0.0510, [("mass", 2.0, 1.9, 2.1, "ok"), ("mu", 0.1, 0.05, 0.15, "ok")], s2),
    }
    c = compare_models(reports, quality={"capped": 0.97, "huber": 0.96, "uncapped": 0.9})
    assert c.best == "capped" and c.equally_good == ["capped", "huber"]
    assert [r["label"] for r in c.rows] == ["capped", "huber", "uncapped"]
    assert c.rows[1]["delta_chi2"] == pytest.approx(3.0) and c.rows[2]["delta_chi2"] == pytest.approx(20.0)
    mass, mu = c.combined["mass"], c.combined["mu"]
    assert mass.value == 1.40 and (mass.lower95, mass.upper95) == (1.38, 1.48)
    assert mass.spread == pytest.approx(0.06) and mass.status == "law-dominated"     # 0.06 > half-width 0.02
    assert mu.status == "ok" and (mu.lower95, mu.upper95) == (0.39, 0.412)
    md = c.to_markdown()
    assert "capped (equally good)" in md and "law-dominated" in md and "| uncapped |" in md
    assert c.to_dict()["combined"]["mass"]["status"] == "law-dominated"
    # a stricter test leaves the best model alone: its own interval
    strict = compare_models(reports, tie_chi2=1.0)
    assert strict.equally_good == ["capped"] and strict.combined["mass"].status == "ok"
    assert (strict.combined["mass"].lower95, strict.combined["mass"].upper95) == (1.38, 1.42)


def test_undetermined_in_an_equally_good_model_is_undetermined():
    reports = {"a": _report(1.0, [("kd", 10.0, 9.0, 11.0, "ok")]),
               "b": _report(1.0, [("kd", 30.0, None, None, "undetermined")])}
    c = compare_models(reports)
    assert c.combined["kd"].status == "undetermined" and c.combined["kd"].lower95 is None


def test_bad_input():
    with pytest.raises(ValueError, match="reports"):
        compare_models({})
    with pytest.raises(TypeError, match=r"reports\['a'\]"):
        compare_models({"a": 1.0})
    with pytest.raises(ValueError, match="share their parameters"):
        compare_models({"a": _report(1.0, [("m", 1, 0.9, 1.1, "ok")]), "b": _report(1.0, [("k", 1, 0.9, 1.1, "ok")])})
    with pytest.raises(ValueError, match="tie_chi2"):
        compare_models({"a": _report(1.0, [("m", 1, 0.9, 1.1, "ok")])}, tie_chi2=-1)
