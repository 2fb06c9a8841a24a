"""benchmarks/implicit_damping_fit.py --form all (issue 44): the damping-form comparison of coverage_soft.py with the
ground's kd, kf stepped implicitly.  No fit runs here: `run_fit` stands in for `tigradsim fit` with reports.

* every form's scene is written with [ground] damping_integration = "implicit" (the option given), once per form
  of physics/damping.py DAMPING_MODELS, under OUT/forms_implicit/;
* the four reports are compared and combined: the forms within the tie rule are equally good, and the combined
  rows score the best form's estimate with the envelope of the tied forms' intervals."""
import json
import os

import pytest
from benchmark_modules import benchmark_modules

from tigradsim.physics.damping import DAMPING_MODELS


def _report(loss, mu, lam):
    unknowns = {"cube.mu": {"estimate": mu, "status": "ok", "ci95": [0.95 * mu, 1.05 * mu]},
                "cube.lam": {"estimate": lam, "status": "ok", "ci95": [0.9 * lam, 1.1 * lam]},
                "cube.damping": {"estimate": 1.0, "status": "ok", "ci95": [0.9, 1.1]},
                "ground.kf": {"estimate": 100.0, "status": "undetermined", "ci95": None, "nuisance": True}}
    return {"unknowns": unknowns, "iou_final": 0.9,
            "identification": {"minima": [{"report": {"loss": loss, "s2": 0.01, "residual_count": 10000}}]}}


def test_form_all_fits_every_damping_form_with_the_ground_given(tmp_path, monkeypatch, capsys):
    coverage_soft, implicit_damping_fit = benchmark_modules("coverage_soft", "implicit_damping_fit")
    # loss, mu, lam per form: warp best, deformation_rate 2 % above (tied), the Rayleigh forms 30 % (not)
    fits = {"deformation_rate": (102.0, 3400.0, 12500.0), "warp": (100.0, 3600.0, 11500.0),
            "rayleigh_stiffness": (130.0, 6000.0, 6400.0), "rayleigh_mass": (131.0, 4300.0, 11800.0)}
    scenes = []

    def make_scene(clip, variant, contact, scene_dir, out, quick, form, ground=None):
        scenes.append((form, ground, os.path.relpath(scene_dir, str(tmp_path))))
        os.makedirs(scene_dir, exist_ok=True)
        return os.path.join(scene_dir, "scene.toml"), {"cube.mu": 3500.0, "cube.lam": 12000.0}

    def run_fit(scene, fit_out, timeout, quick):
        os.makedirs(fit_out, exist_ok=True)
        with open(os.path.join(fit_out, "estimates.json"), "w") as fh:
            json.dump(_report(*fits[os.path.basename(os.path.dirname(fit_out))]), fh)
        return 0, 1.0, 2.0, None, None, []

    monkeypatch.setattr(coverage_soft, "make_soft_scene", make_scene)
    monkeypatch.setattr(coverage_soft, "run_fit", run_fit)
    code = implicit_damping_fit.main(["--clip", "newton_soft_drop", "--form", "all", "--out", str(tmp_path)])
    res = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert code == 0 and res["integration"] == "implicit"
    assert [s[0] for s in scenes] == list(DAMPING_MODELS)
    assert all(s[1] == {"damping_integration": "implicit"} for s in scenes)
    assert all(s[2].startswith(os.path.join("forms_implicit", "newton_soft_drop_clean_nuisance")) for s in scenes)
    assert res["comparison"]["best"] == "warp"
    assert sorted(res["comparison"]["equally_good"]) == ["deformation_rate", "warp"]
    rows = {r["unknown"]: r for r in res["rows"]}
    assert rows["cube.mu"]["estimate"] == 3600.0                 # the best form's value
    assert rows["cube.mu"]["ci95"] == pytest.approx([0.95 * 3400.0, 1.05 * 3600.0])   # the tied forms' envelope
    assert rows["cube.mu"]["in_ci95"] and rows["cube.lam"]["in_ci95"]
    with pytest.raises(SystemExit):                              # a form the library does not have
        implicit_damping_fit.main(["--form", "viscous"])
