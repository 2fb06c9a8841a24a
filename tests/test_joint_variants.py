"""Model choices compared jointly (issue 44): the product of several choices' options as scene variants
(`tigradsim.scenes.variant_product`, `mass_compare.compare_mass_and_damping`, benchmarks/implicit_damping_fit.py
--form all --mass-distributions volume,equal), and the suspect rule of fitting/model_selection.py: a fit with a
determined value on a prior bound cannot win alone.  No fit runs here: fits are stood in for by their reports.

* every combination is built (later choices applied to earlier ones' specs), labelled "a/b", and fitted once;
  bad choices fail before any fit;
* a suspect best yields to an equally good fit without bound hits (its values reported, the interval still
  the tied ones' envelope); with none tied, it keeps its value but the interval covers the best fit without
  a bound hit and the status is "suspect"; an undetermined value on a bound is no hit;
* the benchmark fits the 2 x 4 product, combines over all eight, and reuses a finished fit of the same file."""
import json
import os
import types

import numpy as np
import pytest
from benchmark_modules import benchmark_modules

from tigradsim.fitting.bound_hits import on_bound, output_bound_hits
from tigradsim.fitting.model_selection import compare_fit_outputs, compare_models
from tigradsim.fitting.uncertainty import Estimate, FitReport
from tigradsim.physics.damping import DAMPING_MODELS
from tigradsim.scenes.law_compare import LAWS, law_spec
from tigradsim.scenes.scene_file import parse_scene
from tigradsim.scenes.variant_product import compare_variant_product, variant_product


def _box_scene():
    return parse_scene({"world": {"up": "y", "gravity": 9.8}, "simulation": {"substeps": 16, "duration": 0.2},
                        "ground": {}, "objects": {"box": {"type": "rigid", "box": [0.2, 0.1, 0.15], "mass": 1.0,
                                                          "position": [0.0, 0.3, 0.0]}},
                        "camera": {"eye": [0.0, 0.6, 1.0], "target": [0.0, 0.05, 0.0], "fov": 45.0,
                                   "width": 16, "height": 16},
                        "unknowns": {"box.mu": {"init": 0.5, "lower": 0.05, "upper": 1.5}},
                        "fit": {"horizons": [4]}})


def _with_iterations(n):
    def apply(spec):
        import copy
        out = copy.deepcopy(spec)
        out.fit.iterations = n
        return out
    return apply


CHOICES = [("contact law", {"capped": ("law capped", lambda s: law_spec(s, LAWS["capped"])),
                            "uncapped": ("law uncapped", lambda s: law_spec(s, LAWS["uncapped"]))}),
           ("iterations", {"short": ("5 iterations", _with_iterations(5)),
                           "long": ("9 iterations", _with_iterations(9))})]


def test_variant_product_builds_every_combination_and_checks_choices():
    spec = _box_scene()
    before = (dict(spec.ground["law"]), spec.fit.iterations)
    specs = variant_product(spec, CHOICES)
    assert list(specs) == ["capped/short", "capped/long", "uncapped/short", "uncapped/long"]
    for label, (text, built) in specs.items():
        law, its = label.split("/")
        assert built.ground["law"]["damping"] == law and built.fit.iterations == (5 if its == "short" else 9)
        assert text == f"law {law}; {5 if its == 'short' else 9} iterations"
    assert (spec.ground["law"], spec.fit.iterations) == before                # the caller's spec unchanged
    bad = [([], "choices: expected a non-empty list"),
           ([("law", {})], r"choices\[0\] \(law\): expected at least one option"),
           ([("law", {"a/b": ("x", lambda s: s)})], "option label 'a/b'"),
           ([("law", {"a": ("x", "not callable")})], r"option 'a': expected \(description, transform"),
           ([("law", {"a": ("x", lambda s: s)}), ("law", {"b": ("y", lambda s: s)})], "given twice"),
           ([("law",)], r"choices\[0\]: expected \(name")]
    for choices, match in bad:
        with pytest.raises(ValueError, match=match):
            variant_product(spec, choices)


def _report(loss, mu, status="ok", kf=(100.0, "ok")):
    ests = [Estimate("box.mu", mu, 0.02, True, 0.96 * mu, 1.04 * mu, status),
            Estimate("ground.kf", kf[0], 0.1, True, *((None, None) if kf[1] == "undetermined" else (0.8 * kf[0],
                                                                                                  kf[0])), kf[1])]
    return FitReport(ests, loss, 1000, 2, 1e-4, 0.0, 1e-4, np.ones(2), [], np.eye(2), 0.0)


class _FakeScene:
    """Stands in for a built Scene: its fitted Params' bounds (ground.kf in [1, 1000], log)."""
    built = []

    def __init__(self, spec, footage):
        self.spec = spec
        self.params = [types.SimpleNamespace(name="ground.kf", lower=1.0, upper=1000.0, log_space=True)]
        _FakeScene.built.append(spec)

    def render_views(self):
        return []


def test_compare_variant_product_fits_each_combination_and_applies_the_suspect_rule(monkeypatch):
    import tigradsim.scenes.scene_build as sb
    # capped/short best, but its kf sits on its upper bound 1000 (reported "misfit": only the Params' bounds
    # show the hit); uncapped/long 3 % above without a hit: the reference; the others 40 % above
    fits = {("capped", 5): _report(1.00, 0.30, "misfit", (1000.0, "misfit")), ("capped", 9): _report(1.4, 0.5),
            ("uncapped", 5): _report(1.4, 0.5), ("uncapped", 9): _report(1.03, 0.40)}

    def fake_fit(scene, printer=print, **kw):
        scene.horizon_info = {"frames_fitted": 4}
        return types.SimpleNamespace(best=fits[(scene.spec.ground["law"]["damping"], scene.spec.fit.iterations)]), None

    _FakeScene.built = []
    monkeypatch.setattr(sb, "Scene", _FakeScene)
    monkeypatch.setattr(sb, "fit_scene", fake_fit)
    printed = []
    comparison, results = compare_variant_product(_box_scene(), types.SimpleNamespace(masks=None), CHOICES,
                                                  printer=printed.append, own_process=False, shared=["box.mu"])
    assert len(_FakeScene.built) == 4 and set(results) == {"capped/short", "capped/long", "uncapped/short",
                                                           "uncapped/long"}
    assert comparison.best == "capped/short" and comparison.equally_good == ["capped/short", "uncapped/long"]
    rows = {r["label"]: r for r in comparison.rows}
    assert rows["capped/short"]["suspect"] == ["ground.kf = 1000 at its upper bound 1000"]
    assert rows["uncapped/long"]["suspect"] == []
    mu = comparison.combined["box.mu"]
    assert comparison.reference == "uncapped/long" and mu.value == 0.40            # the reference's value
    assert (mu.lower95, mu.upper95) == (pytest.approx(0.96 * 0.30), pytest.approx(1.04 * 0.40))   # both tied
    md = comparison.to_markdown()
    assert "suspect: ground.kf = 1000 at its upper bound 1000" in md and "uncapped/long's value" in md
    with pytest.raises(ValueError, match="tie_rtol"):                  # before any fit
        compare_variant_product(_box_scene(), None, CHOICES, tie_rtol=-1.0, own_process=False)


def test_suspect_rule_on_fit_reports():
    """compare_models with FitReports: an "at bound" status is a hit; an undetermined value on a bound is not."""
    reports = {"a": _report(1.00, 0.3, "at bound"), "b": _report(1.30, 0.5, kf=(1000.0, "undetermined")),
               "c": _report(1.60, 0.9)}
    c = compare_models(reports)
    assert c.equally_good == ["a"] and [r["suspect"] for r in c.rows] == [["box.mu = 0.3 at a bound"], [], []]
    # no equally good model without a hit: a keeps its value, the interval covers b (the best without), suspect
    mu = c.combined["box.mu"]
    assert c.reference == "a" and c.combined_models == ["a", "b"] and mu.value == 0.3 and mu.status == "suspect"
    assert (mu.lower95, mu.upper95) == (pytest.approx(0.96 * 0.3), pytest.approx(1.04 * 0.5))
    # every model suspect: nothing added, status suspect
    c = compare_models(reports, suspect={"a": ["x"], "b": ["y"], "c": ["z"]})
    assert c.combined_models == ["a"] and c.combined["box.mu"].status == "suspect"
    # no hit at all: the rule does nothing
    c = compare_models(reports, suspect={})
    assert c.reference == "a" and c.combined_models == ["a"] and c.suspect_note == ""
    with pytest.raises(ValueError, match=r"suspect: labels \['d'\] are not among the models compared"):
        compare_models(reports, suspect={"d": ["x"]})
    with pytest.raises(TypeError, match="suspect: expected"):
        compare_models(reports, suspect=["a"])


def _output(loss, mu, hits=()):
    """An estimates.json-like dict whose ground.mu (in [0.1, 1]) sits on its upper bound if "mu" in hits."""
    unknown = lambda v: {"estimate": v, "status": "ok", "ci95": [0.98 * v, 1.02 * v],          # noqa: E731
                         "ci95_with_assumptions": [0.97 * v, 1.03 * v], "ci95_with_discrepancy": [0.9 * v, 1.1 * v]}
    ground = {"estimate": 1.0 if "mu" in hits else 0.6, "status": "at bound" if "mu" in hits else "ok",
              "ci95": [0.4, 1.0], "lower": 0.1, "upper": 1.0, "std_space": "log", "nuisance": True}
    kf = {"estimate": 999.9999999999998, "status": "undetermined", "ci95": None, "lower": 1.0, "upper": 1000.0,
          "std_space": "log", "nuisance": True}                      # on its bound, undetermined: no hit
    return {"unknowns": {"cube.mu": unknown(mu), "cube.lam": unknown(2 * mu), "cube.damping": unknown(0.8),
                         "ground.mu": ground, "ground.kf": kf},
            "iou_final": 0.9,
            "identification": {"minima": [{"report": {"loss": loss, "s2": 1e-3, "residual_count": 500}}]}}


def test_suspect_rule_on_fit_outputs():
    assert on_bound(999.9999999999998, 1.0, 1000.0, True) == "upper" and on_bound(0.1, 0.1, 1.0, True) == "lower"
    assert on_bound(297.3, 1.0, 300.0, True) is None and on_bound(5.0, None, float("inf"), False) is None
    # closer to the bound than its standard error (log coordinate): the Warp drop's capped-law mu, measured
    assert on_bound(1.499881601226942, 0.05, 1.5, True, std=0.0049209) == "upper"
    assert on_bound(1.499881601226942, 0.05, 1.5, True, std=1e-5) is None          # a tighter value is inside
    assert on_bound(1.2, 0.05, 1.5, True, std=0.0049209) is None
    assert on_bound(0.93, 0.0, 1.0, False, std=0.1) == "upper" and on_bound(0.93, 0.0, 1.0, False, std=0.05) is None
    near = {"estimate": 1.4998816, "std": 0.0049209, "status": "ok", "lower": 0.05, "upper": 1.5, "std_space": "log"}
    assert output_bound_hits({"box.mu": near}) == ["box.mu = 1.5 at its upper bound 1.5"]
    assert output_bound_hits(_output(1, 1, ["mu"])["unknowns"]) == ["ground.mu = 1 at its upper bound 1"]
    # Newton's clean clip, measured: the wrong distribution 26 % better with ground mu at its bound 1.0
    outs = {"equal": _output(156.3, 6204.0, ["mu"]), "volume": _output(196.4, 3618.0)}
    c = compare_fit_outputs(outs, shared=["cube.mu", "cube.lam"])
    assert c["best"] == "equal" and c["equally_good"] == ["equal"] and c["reference"] == "equal"
    mu = c["combined"]["cube.mu"]
    assert mu["estimate"] == 6204.0 and mu["status"] == "suspect" and c["combined_models"] == ["equal", "volume"]
    assert mu["ci95"] == [0.98 * 3618.0, 1.02 * 6204.0] and mu["ci95_with_discrepancy"] == [0.9 * 3618, 1.1 * 6204]
    assert [r["suspect"] for r in c["rows"]] == [["ground.mu = 1 at its upper bound 1"], []]
    # within the tie: the fit without a hit is the reference, the interval both
    outs["volume"] = _output(160.0, 3618.0)
    c = compare_fit_outputs(outs, shared=["cube.mu"])
    assert c["reference"] == "volume" and c["combined"]["cube.mu"]["estimate"] == 3618.0
    assert c["combined"]["cube.mu"]["ci95"] == [0.98 * 3618.0, 1.02 * 6204.0]
    assert c["combined"]["cube.mu"]["status"] == "model-dominated"
    # the caller's own verdict replaces the bounds'
    c = compare_fit_outputs(outs, shared=["cube.mu"], suspect={"volume": ["lam at 100"]})
    assert c["reference"] == "equal" and c["combined_models"] == ["equal", "volume"]
    with pytest.raises(ValueError, match=r"suspect: labels \['x'\]"):
        compare_fit_outputs(outs, suspect={"x": []})


def _bench():
    return benchmark_modules("implicit_damping_fit")


def test_benchmark_fits_the_product_of_distributions_and_forms(monkeypatch, capsys, tmp_path):
    idf = _bench()
    truths = {"cube.mu": 4000.0, "cube.lam": 8000.0}
    called = []

    def fit_one(a, scene_dir, dist):
        called.append((a.form, dist, os.path.relpath(scene_dir, str(tmp_path))))
        loss = 100.0 if (dist, a.form) == ("equal", "warp") else 103.0 if dist == "equal" else 150.0
        hits = ["mu"] if (dist, a.form) == ("equal", "warp") else []
        return {"rc": 0, "cpu_s": 90.0}, _output(loss, 4000.0 if dist == "equal" else 2500.0, hits), truths

    monkeypatch.setattr(idf, "fit_one", fit_one)
    code = idf.main(["--clip", "warp_soft_drop", "--form", "all", "--mass-distributions", "volume,equal",
                     "--out", str(tmp_path)])
    res = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert code == 0 and len(called) == 2 * len(DAMPING_MODELS) and res["cpu_s"] == 90.0 * len(called)
    assert called[0] == ("deformation_rate", "volume",
                         os.path.join("warp_soft_drop_clean_deformation_rate_implicit", "volume"))
    assert set(res["variants"]) == {f"{d}/{f}" for d in ("volume", "equal") for f in DAMPING_MODELS}
    assert res["best"] == "equal/warp" and res["variants"]["equal/warp"]["suspect"]
    assert res["reference"] != "equal/warp" and res["reference"].startswith("equal/")   # tied, no bound hit
    rows = {r["unknown"]: r for r in res["rows"]}
    assert rows["cube.mu"]["estimate"] == 4000.0 and rows["cube.mu"]["in_ci95"]
    for argv in (["--form", "all", "--mass-distributions", "volume,volume"],
                 ["--form", "all", "--mass-distributions", "volume,lumped"]):
        with pytest.raises(SystemExit):
            idf.main(argv)


def test_benchmark_reuses_a_finished_fit_of_the_same_scene_file(monkeypatch, tmp_path):
    idf = _bench()
    text = {"now": "scene A"}
    fitted = []

    def make_scene(clip, variant, contact, scene_dir, out, quick, form, ground=None, mass_distribution="volume"):
        os.makedirs(scene_dir, exist_ok=True)
        path = os.path.join(scene_dir, "scene.toml")
        with open(path, "w") as fh:
            fh.write(text["now"])
        return path, {"cube.mu": 4000.0, "cube.lam": 8000.0}

    def run_fit(scene, fit_out, timeout, quick):
        fitted.append(scene)
        os.makedirs(fit_out, exist_ok=True)
        with open(os.path.join(fit_out, "estimates.json"), "w") as fh:
            json.dump(_output(1.0, 4000.0), fh)
        return 0, 3.0, 2.0, None, None, []

    monkeypatch.setattr(idf, "make_soft_scene", make_scene)
    monkeypatch.setattr(idf, "run_fit", run_fit)
    a = types.SimpleNamespace(clip="c", variant="clean", out=str(tmp_path), form="warp", integration="implicit",
                              timeout=10.0, reuse=True)
    first, _, _ = idf.fit_one(a, str(tmp_path / "d"), "equal")
    again, report, _ = idf.fit_one(a, str(tmp_path / "d"), "equal")
    assert len(fitted) == 1 and again["reused"] and again["cpu_s"] == first["cpu_s"] == 2.0
    assert report["unknowns"]["cube.mu"]["estimate"] == 4000.0
    text["now"] = "scene B"                                   # another scene file: fitted again
    idf.fit_one(a, str(tmp_path / "d"), "equal")
    assert len(fitted) == 2
    a.reuse = False
    idf.fit_one(a, str(tmp_path / "d"), "equal")
    assert len(fitted) == 3


def test_compare_mass_and_damping_fits_the_product_and_checks_names(monkeypatch, tmp_path):
    """The public call for the two soft-body choices: every (distribution, form), the damping coefficient left
    out of the combination (its units differ between forms); bad names fail before any fit."""
    import tigradsim as tgs
    import tigradsim.scenes.scene_build as sb
    from tigradsim.scenes.mass_compare import compare_mass_and_damping
    from test_soft_mass import soft_scene

    v, t = tgs.meshes.tet_box(1, 1, 1, size=(0.1, 0.1, 0.1), origin=(0.0, 0.03, 0.0))
    np.save(tmp_path / "x.npy", v)
    np.save(tmp_path / "t.npy", t)
    spec = parse_scene(soft_scene(tmp_path, {"nodes": "x.npy", "tets": "t.npy", "mass": 0.3,
                                             "params": {"mu": 3e3, "lam": 5e3}}, {"cube.mu": {"init": 2e3}}),
                       str(tmp_path / "scene.toml"))
    seen = []

    def fake_fit(scene, printer=print, **kw):
        obj = scene.spec.objects["cube"]
        seen.append((obj.mass_distribution, obj.damping_model, [u.target for u in scene.spec.unknowns]))
        loss = 1.0 if (obj.mass_distribution, obj.damping_model) == ("equal", "warp") else 2.0
        ests = [Estimate(u.target, 1.0, 0.1, True, 0.9, 1.1) for u in scene.spec.unknowns]
        best = FitReport(ests, loss, 100, len(ests), 1e-2, 0.0, 1e-2, np.ones(len(ests)), [], np.eye(len(ests)), 0.0)
        return types.SimpleNamespace(best=best), None

    monkeypatch.setattr(sb, "Scene", _FakeScene)
    monkeypatch.setattr(sb, "fit_scene", fake_fit)
    c, fits = compare_mass_and_damping(spec, types.SimpleNamespace(masks=None), forms=["warp", "rayleigh_mass"],
                                       printer=lambda *a, **k: None, own_process=False)
    assert set(fits) == {"volume/warp", "volume/rayleigh_mass", "equal/warp", "equal/rayleigh_mass"}
    assert sorted(s[:2] for s in seen) == sorted((d, f) for d in ("volume", "equal") for f in ("warp", "rayleigh_mass"))
    assert all("cube.damping" in s[2] for s in seen) and set(c.combined) == {"cube.mu"}
    assert c.best == "equal/warp" and c.reference == "equal/warp"
    n = len(seen)
    for kw, match in (({"forms": ["viscous"]}, "forms: expected names among"),
                      ({"distributions": ["lumped"]}, "mass_distribution: expected one of"),
                      ({"forms": []}, "forms: expected at least one")):
        with pytest.raises(ValueError, match=match):
            compare_mass_and_damping(spec, None, own_process=False, **kw)
    assert len(seen) == n                                   # no fit ran


def test_benchmark_reuse_ignores_where_the_clip_folder_is(tmp_path):
    idf = _bench()
    a, b = tmp_path / "a.toml", tmp_path / "b.toml"
    a.write_text('tetgen = "../../../work/wt/one/benchmarks/footage/c/cube.node"\nmass = 1.0\n')
    b.write_text('tetgen = "../../../work/wt/two/benchmarks/footage/c/cube.node"\nmass = 1.0\n')
    assert idf._read(str(a)) == idf._read(str(b))
    b.write_text('tetgen = "../../../work/wt/two/benchmarks/footage/c/cube.node"\nmass = 2.0\n')
    assert idf._read(str(a)) != idf._read(str(b)) and idf._read(str(tmp_path / "none")) is None


def test_camera_errors_give_pose_and_image_errors_of_the_scene_and_fitted_camera():
    """implicit_damping_fit.camera_errors on the "camera" variant of Newton's soft clip: the scene's camera is the
    stated 0.5 degree / 1 cm off, about 1.1 px in the 128 px image; a fitted camera equal to the truth scores 0
    both ways; a report without a camera (refine_camera off) gives the scene's only."""
    idf = _bench()
    truth = json.load(open(os.path.join(idf.FOOTAGE, "newton_soft_drop", "truth.json")))
    cam = truth["camera"]
    out = idf.camera_errors("newton_soft_drop", {"camera": {"K": cam["K"], "R": cam["R"], "t": cam["t"]}})
    assert out["scene"] == pytest.approx((0.5, 0.01), rel=1e-6)
    assert 0.5 < out["scene_px"][0] <= out["scene_px"][1] < 3.0
    assert out["fitted"] == pytest.approx((0.0, 0.0), abs=1e-6) and out["fitted_px"] == pytest.approx((0.0, 0.0), abs=1e-9)
    assert set(idf.camera_errors("newton_soft_drop", {})) == {"scene", "scene_px"}
