"""The contact law as a model choice (issue 44 item 3): Warp's rigid friction among the laws compared, and the
plumbing that makes the compared fits comparable (the same frames).  No fit runs here: the fits are stood in
for by their reports (tests/test_cli.py::test_laws_compares_every_contact_law runs `tigradsim laws` for real).

* `LAWS` has friction = "warp" once per friction velocity of its documented grid, and `law_spec` writes the
  law with that velocity into the scene;
* a scene file asks for it in [ground] (and per object), and the built scene's ground law is it;
* `compare_scene_variants` fits every variant after the first on the frames the first one's "auto" horizon
  chose; coverage_laws.run_law_clip does the same through the scene files it writes ([fit] horizon = N), and
  its law table and combined rows show every law;
* a variant's fit process that dies (as a Taichi crash does) is an error naming the variant and its exit status
  (tests/test_law_processes.py fits every law in processes of their own for real)."""
import json
import re
import os
import types

import numpy as np
import pytest
from benchmark_modules import benchmark_modules

from tigradsim.physics.contact import DAMPING_LAWS, WARP_FRICTION_VELOCITIES, ContactLaw
from tigradsim.scenes.law_compare import LAWS, law_label, law_spec, parse_law_label
from tigradsim.scenes.scene_file import parse_scene


def _scene(ground=None, horizon="auto"):
    return {"world": {"up": "y", "gravity": 9.8}, "simulation": {"substeps": 16, "duration": 0.2},
            "ground": dict(ground or {}),
            "objects": {"box": {"type": "rigid", "box": [0.2, 0.1, 0.15], "mass": 1.0, "position": [0.0, 0.3, 0.0]}},
            "camera": {"eye": [0.0, 0.6, 1.0], "target": [0.0, 0.05, 0.0], "fov": 45.0, "width": 16, "height": 16},
            "unknowns": {"box.mu": {"init": 0.5, "lower": 0.05, "upper": 1.5}},
            "fit": {"horizon": horizon, "horizons": [4]}}


def test_laws_include_warp_friction_at_each_friction_velocity_of_its_grid():
    warp = {k: v for k, v in LAWS.items() if v.friction == "warp"}
    assert set(warp) == {f"{damping}+warp({d:g})" for damping in DAMPING_LAWS for d in WARP_FRICTION_VELOCITIES}
    for label, law in LAWS.items():          # labels read back as their laws
        assert parse_law_label(label) == law
    assert parse_law_label("uncapped+warp(0.02)") == ContactLaw("uncapped", "warp", 0.02)
    for bad, match in (("soft", "law 'soft': damping: expected one of"), ("capped+warp(x)", "'x' is not a number"),
                       ("capped+warp(-1)", "friction_velocity: expected a finite number > 0"),
                       ("capped+stick", "friction: expected one of")):
        with pytest.raises(ValueError, match=re.escape(match) if "(" in match else match):
            parse_law_label(bad)
    # the grid is not Warp's default friction_smoothing (1 m/s: viscous up to walking speed) nor a value
    # near zero (there "warp" is "capped"): slip speeds between
    assert all(1e-3 < d < 1.0 for d in WARP_FRICTION_VELOCITIES)
    # every law the library has (each variant is fitted in a process of its own, so the count is not capped)
    assert set(LAWS) == {"capped", "uncapped", "capped+huber", "uncapped+huber"} | set(warp)
    assert law_label(ContactLaw("uncapped", "warp", 0.02)) == "uncapped+warp(0.02)"
    assert law_label(ContactLaw("uncapped", "huber")) == "uncapped+huber" and law_label(ContactLaw()) == "capped"
    spec = law_spec(parse_scene(_scene()), LAWS["capped+warp(0.1)"])
    assert spec.ground["law"] == {"damping": "capped", "friction": "warp", "friction_velocity": 0.1}


def test_scene_file_asks_for_warp_friction():
    """[ground] friction = "warp" with its friction velocity reaches the built model's ground law."""
    import tigradsim as tgs
    from tigradsim.scenes.scene_build import Scene
    spec = parse_scene(_scene({"friction": "warp", "friction_velocity": 0.01}))
    assert spec.ground["law"] == {"friction": "warp", "friction_velocity": 0.01}
    from tigradsim.io.footage import Footage
    tgs.init(arch="cpu", precision="f64")
    blank = np.zeros((7, 16, 16))
    footage = Footage(blank, 30.0, masks=blank, check_masks=False)
    footage.factor, footage.full_size = 1, (16, 16)
    scene = Scene(spec, footage, requires_grad=False, unknowns=False)
    laws = [t.law for t in scene.model.force_terms if type(t).__name__ == "RigidGroundContact"]
    assert laws == [ContactLaw(friction="warp", friction_velocity=0.01)]


class _FakeScene:
    """Stands in for a built Scene: records the spec; fit_scene sets horizon_info."""
    built = []

    def __init__(self, spec, footage):
        self.spec = spec
        _FakeScene.built.append(spec)

    def render_views(self):
        return []


class _FakeResult:
    best = None


def test_compare_scene_variants_fits_every_variant_on_the_first_ones_frames(monkeypatch):
    import tigradsim.scenes.scene_build as sb
    from tigradsim.fitting.uncertainty import Estimate, FitReport
    from tigradsim.scenes.law_compare import compare_scene_variants

    frames = iter([9, 12, 12])

    def fake_fit(scene, printer=print, **kw):
        scene.horizon_info = {"frames_fitted": next(frames)}
        result = _FakeResult()
        result.best = FitReport([Estimate("box.mu", 0.5, 0.02, True, 0.45, 0.55)], 1.0, 1000, 1, 0.1, 0.0, 0.1,
                                np.ones(1), [], np.eye(1), 0.0)
        return result, None

    _FakeScene.built = []
    monkeypatch.setattr(sb, "Scene", _FakeScene)
    monkeypatch.setattr(sb, "fit_scene", fake_fit)
    spec = parse_scene(_scene())
    specs = {label: (label, law_spec(spec, LAWS[label])) for label in ("capped", "capped+warp(0.01)", "uncapped")}
    printed = []
    no_masks = types.SimpleNamespace(masks=None)          # no silhouette IoU to compute
    comparison, _ = compare_scene_variants(specs, no_masks, "t", printer=printed.append, own_process=False)
    assert [s.fit.horizon for s in _FakeScene.built] == ["auto", 9, 9]
    assert [s.ground["law"]["friction"] for s in _FakeScene.built] == ["capped", "warp", "capped"]
    assert spec.fit.horizon == "auto" and specs["uncapped"][1].fit.horizon == "auto"     # callers' specs unchanged
    assert any("the 9 frames the first variant's fit chose" in str(p) for p in printed)
    assert "capped+warp(0.01)" in comparison.to_markdown()


def _report(frames, loss, mu, iou):
    unknowns = {"box.mass": {"estimate": 10.0, "status": "undetermined", "ci95": None},
                "box.mu": {"estimate": mu, "status": "ok", "ci95": [0.9 * mu, 1.1 * mu],
                           "ci95_with_assumptions": [0.9 * mu, 1.1 * mu], "ci95_with_discrepancy": [0.8 * mu, 1.2 * mu]},
                "box.kd_per_mass": {"estimate": 40.0, "status": "ok", "ci95": [38.0, 42.0], "nuisance": True}}
    return {"unknowns": unknowns, "frames_fitted": frames, "iou_final": iou,
            "identification": {"minima": [{"report": {"loss": loss, "s2": 0.01, "residual_count": 1000 * frames}}]}}


def test_coverage_law_clip_hands_the_horizon_on_and_tables_every_law(tmp_path):
    cl, coverage = benchmark_modules("coverage_laws", "coverage")
    score = coverage.score
    assert "capped+warp(0.01)" in cl.DROP_LAWS and cl.DROP_LAWS[0] == "capped"
    assert cl.law_options("capped+warp(0.1)") == {"damping": "capped", "friction": "warp", "friction_velocity": 0.1}
    with pytest.raises(ValueError, match="law 'warp': damping: expected one of"):
        cl.law_options("warp")
    calls = []
    fits = {"capped": (26, 5.0, 1.05, 0.917), "capped+warp_0.01": (26, 4.0, 0.62, 0.93),
            "capped+warp_0.1": (26, 4.1, 0.7, 0.91)}      # 2.5 % above the best: equally good; capped 25 %: not

    def make_scene(clip, variant, contact, scene_dir, out, quick, law=None, horizon=None):
        calls.append((os.path.basename(scene_dir), law, horizon))
        os.makedirs(scene_dir, exist_ok=True)
        return os.path.join(scene_dir, "scene.toml"), {"box.mass": 0.85, "box.mu": 0.6}

    def run_fit(scene, fit_out, timeout, quick):
        os.makedirs(fit_out, exist_ok=True)
        with open(os.path.join(fit_out, "estimates.json"), "w") as fh:
            json.dump(_report(*fits[os.path.basename(os.path.dirname(fit_out))]), fh)
        return 0, 1.0, 2.0, None, None, []

    laws = ["capped", "capped+warp(0.01)", "capped+warp(0.1)"]
    res = cl.run_law_clip("warp_box_drop", "clean", "nuisance", str(tmp_path), True, 60, laws, make_scene, score, run_fit)
    # the first law fits its own ("auto") horizon, every other one the frames it fitted
    assert [c[2] for c in calls] == [None, 26, 26]
    assert calls[1][1] == {"damping": "capped", "friction": "warp", "friction_velocity": 0.01}
    comp = res["comparison"]
    assert comp["best"] == "capped+warp(0.01)" and comp["equally_good"] == ["capped+warp(0.01)", "capped+warp(0.1)"]
    assert comp["combined"]["box.mu"]["ci95"] == pytest.approx([0.558, 0.77])     # both laws' intervals
    mu = next(r for r in res["rows"] if r["unknown"] == "box.mu")
    assert mu["estimate"] == pytest.approx(0.62) and mu["in_ci95"]
    table = cl.laws_table([res])
    assert all(f"| {label} |" in table for label in laws)
    assert "mu 0.62 (+3.3 %)" in table and "kd_per_mass 40 ok" in table
    assert "| capped+warp(0.1) | +2.50 % (20) | yes |" in table and "| capped | +25.00 % (200) | no |" in table
    # read back without fitting: the same comparison
    again = cl.run_law_clip("warp_box_drop", "clean", "nuisance", str(tmp_path), True, 60, laws, make_scene, score,
                            lambda *a: pytest.fail("refitted"), fit=False)
    assert again["comparison"]["best"] == "capped+warp(0.01)"


def test_a_variant_whose_process_dies_is_named_with_its_exit_status(monkeypatch, tmp_path):
    """`compare_scene_variants` fits each variant in a process of its own (scenes/variant_process.py); a child
    that dies without an answer (as a Taichi crash does: the reason variants left this process) is an error
    naming the variant and the signal, not a hang or a missing row.  The child stands in for the fit here: a
    program that prints one line and kills itself with SIGSEGV."""
    import tigradsim as tgs
    from tigradsim.core.runtime import init_settings
    from tigradsim.scenes import variant_process
    from tigradsim.scenes.law_compare import compare_scene_variants

    tgs.init(precision="f64", seed=3)
    assert init_settings()["precision"] == "f64" and init_settings()["seed"] == 3     # what the child starts with
    crash = tmp_path / "crash.sh"
    crash.write_text("#!/bin/sh\necho fitting\nkill -SEGV $$\n")
    crash.chmod(0o755)
    monkeypatch.setattr(variant_process.sys, "executable", str(crash))
    spec = parse_scene(_scene())
    printed = []
    with pytest.raises(RuntimeError, match=r"variant 'uncapped': its fit process ended with exit status -11"):
        compare_scene_variants({"uncapped": ("uncapped", law_spec(spec, LAWS["uncapped"]))},
                               types.SimpleNamespace(masks=None), "t", printer=printed.append)
    assert printed == ["== uncapped", "fitting"]          # the child's lines reach the caller's printer
