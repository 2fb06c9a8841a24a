"""benchmarks/pacnerf.py without running a fit (no kernel): the copy of a clip's scene file it fits (same
tables, absolute footage paths, its substeps), the control scene files parse, the truth formats and the
acceptance rows (coverage, friction angle in degrees, missing intervals counted as misses), the intervals
with and without the MPM grid's systematic."""
import json
import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
import pacnerf  # noqa: E402

try:
    import tomllib
except ModuleNotFoundError:            # pragma: no cover
    import tomli as tomllib


@pytest.mark.parametrize("family", sorted(pacnerf.FAMILIES))
def test_control_scene_parses_and_its_copy_keeps_every_table(family, tmp_path):
    from tigradsim.scenes.scene_file import parse_scene

    text, truth = pacnerf.control_scene(family)
    clip = tmp_path / "clip"
    clip.mkdir()
    (clip / "scene.toml").write_text(text)
    data = tomllib.loads(text)
    bare = tomllib.loads(text)                # without footage files (the clip is not made here)
    bare.pop("footage")
    for entry in bare["cameras"]:
        entry.pop("frames"), entry.pop("masks")
    bare["simulation"]["duration"] = 0.5
    spec = parse_scene(bare, str(clip / "scene.toml"))
    assert len(spec.views) == pacnerf.VIEW_COUNT and spec.objects[family].kind == "mpm"
    assert set(truth["params"]) == {u.target for u in spec.unknowns}
    copy = tomllib.load(open(pacnerf.fit_copy(str(clip / "scene.toml"), str(tmp_path / "out"), 50), "rb"))
    assert copy["simulation"] == {"substeps": 50}
    assert copy["fit"] == {**data["fit"], **pacnerf.FIT_OVERRIDES, **pacnerf.default_fit_settings(data)}
    for key in ("objects", "unknowns", "mpm_grid", "world", "footage"):
        assert copy[key] == data[key], key
    assert copy["cameras"][3]["masks"] == str(clip / "view03" / "mask_%04d.png")
    assert [c["eye"] for c in copy["cameras"]] == [c["eye"] for c in data["cameras"]]
    finer = tomllib.load(open(pacnerf.fit_copy(str(clip / "scene.toml"), str(tmp_path / "finer"), 70, 32,
                                               {"starts": 8, "local_starts": 2}), "rb"))
    assert finer["mpm_grid"] == {**data["mpm_grid"], "resolution": 32} and finer["simulation"] == {"substeps": 70}
    assert finer["fit"] == {**data["fit"], **pacnerf.FIT_OVERRIDES, **pacnerf.default_fit_settings(data), "starts": 8,
                            "local_starts": 2}


def test_truth_formats(tmp_path):
    (tmp_path / "truth.json").write_text(json.dumps({"object": "jelly", "truth": {"material": "m", "E": 1e5}}))
    assert pacnerf.read_truth(str(tmp_path)) == {"jelly.E": 1e5}
    (tmp_path / "truth.json").write_text(json.dumps({"params": {"jelly.nu": 0.3}}))
    assert pacnerf.read_truth(str(tmp_path)) == {"jelly.nu": 0.3}


def test_scores_and_acceptance():
    report = {"unknowns": {
        "a.E": {"initial": 2e5, "estimate": 1.04e5, "ci95": [0.9e5, 1.1e5], "ci95_with_discrepancy": [0.8e5, 1.2e5]},
        "a.nu": {"initial": 0.2, "estimate": 0.2, "ci95": [0.15, 0.25], "ci95_with_discrepancy": None},
        "s.friction_angle": {"initial": 40.0, "estimate": 37.0, "ci95": [36.0, 38.0],
                             "ci95_with_discrepancy": [30.0, 38.0]}},
        "iou_final": 0.9, "cpu_s": 100.0, "peak_rss_mb": 500.0}
    clip = pacnerf.score("x", report, {"a.E": 1e5, "nu": 0.3, "s.friction_angle": 35.0})
    rows = {r["param"]: r for r in clip["rows"]}
    assert rows["E"]["rel_error"] == pytest.approx(0.04) and rows["E"]["ci95_holds"]
    assert rows["nu"]["truth"] == 0.3 and rows["nu"]["ci95_holds"] is False and rows["nu"]["ci95_disc_holds"] is None
    assert rows["friction_angle"]["abs_error_deg"] == pytest.approx(2.0)
    accept = {a[0].split(" (")[0]: a for a in pacnerf.acceptance([clip])}
    assert accept["median relative error, E"][3] is True and accept["median relative error, nu"][3] is False
    assert accept["friction angle error [deg]"][3] is False
    assert accept["95 % intervals holding the truth"][1] == pytest.approx(1 / 3)
    held = accept["95 % intervals with discrepancy holding the truth"]
    assert held[1] == pytest.approx(1.0) and held[3] is False          # one estimate has no interval: not passed
    assert accept["CPU of one fit [s]"][3] and accept["peak RSS of one fit [MB]"][3]


def test_plastic_viscosity_counts_in_the_viscosity_row():
    """The Bingham fluid's plastic viscosity is a viscosity: its error enters the acceptance's viscosity median."""
    report = {"unknowns": {
        "b.plastic_viscosity": {"initial": 5.0, "estimate": 8.0, "ci95": [7.0, 9.0], "ci95_with_discrepancy": None},
        "f.viscosity": {"initial": 5.0, "estimate": 4.4, "ci95": [4.0, 5.0], "ci95_with_discrepancy": None}},
        "iou_final": 0.9, "cpu_s": 100.0, "peak_rss_mb": 500.0}
    clip = pacnerf.score("x", report, {"b.plastic_viscosity": 4.0, "f.viscosity": 4.0})
    accept = {a[0].split(" (")[0]: a for a in pacnerf.acceptance([clip])}
    row = accept["median relative error, viscosity"]
    assert "(2 estimates)" in row[0] and row[1] == pytest.approx((0.1 + 1.0) / 2) and row[3] is False


def test_intervals_with_and_without_the_grid_systematic_match_fit_report(f64):
    """`without_systematic` rebuilds fit_report's 95 % interval from a report's parts: with every systematic it is
    fit_report's own, without the grid's it is fit_report's given the time step's only (a linear model, no
    kernel beyond a field), and reports without a grid systematic give None."""
    import math

    import numpy as np
    import taichi as ti

    import tigradsim as tgs
    from tigradsim.fitting.grid_bias import grid_systematics
    from tigradsim.fitting.time_step_bias import time_step_systematics

    rng = np.random.default_rng(2)
    X = np.stack([np.ones(120), rng.normal(size=120)], axis=1)
    y = X @ np.array([0.5, -1.0]) + rng.normal(0.0, 0.02, 120)
    p = tgs.Param(ti.field(float, shape=2, needs_grad=True), "beta", lower=-3.0, upper=3.0)
    b = np.linalg.lstsq(X, y, rcond=None)[0]
    p.write(b)
    r = X @ b - y
    groups = np.repeat(np.arange(6), 20)
    step = time_step_systematics(X @ b - (y + X @ np.array([0.01, 0.03])), 1e-3)
    both = {**step, **grid_systematics(X @ b - (y - X @ np.array([0.02, 0.01])), 24)}
    full = tgs.fit_report(None, [p], noise_floor=0.0, jacobian=(X, r), groups=groups, systematics=both)
    alone = tgs.fit_report(None, [p], noise_floor=0.0, jacobian=(X, r), groups=groups, systematics=step)
    names = [e.name for e in full.estimates]
    report = {"identification": {"minima": [{"report": full.to_dict()}]},
              "unknowns": {n: {"lower": -3.0, "upper": 3.0} for n in names}}
    for i, n in enumerate(names):
        shift, without, with_grid = pacnerf.without_systematic(report, n)
        assert shift == pytest.approx(full.systematics[list(both)[1]][i], rel=1e-12)
        assert with_grid == pytest.approx([full.estimates[i].lower95, full.estimates[i].upper95], rel=1e-9)
        assert without == pytest.approx([alone.estimates[i].lower95, alone.estimates[i].upper95], rel=1e-9)
        assert math.isfinite(without[0]) and without[1] - without[0] < with_grid[1] - with_grid[0]
    report["identification"]["minima"][0]["report"] = alone.to_dict()
    assert pacnerf.without_systematic(report, names[0]) == (None, None, None)


@pytest.mark.parametrize("argv", [["--fit", "starts"], ["--fit", "=8"], ["--fit", "starts=eight"],
                                  ["--control", "--substeps", "0", "--no-make", "--fit", "starts=8"]])
def test_bad_fit_settings_are_refused_before_any_fit(argv, capsys):
    with pytest.raises(SystemExit) as exc:
        pacnerf.main(argv)
    assert exc.value.code == 2 and "--fit" in capsys.readouterr().err


def test_multi_start_by_default_only_for_fluid_clips_with_three_unknowns(tmp_path):
    footage = os.path.join(ROOT, "benchmarks", "footage", "pacnerf")
    for family, starts in (("bingham", pacnerf.MULTI_START), ("elastic", {}), ("newtonian", {})):
        copy = tomllib.load(open(pacnerf.fit_copy(os.path.join(footage, family, "scene.toml"),
                                                  str(tmp_path / family), 50), "rb"))
        assert {k: copy["fit"][k] for k in ("starts", "local_starts") if k in copy["fit"]} == starts, family
    # the one-point profile checks: fluid clips only (profile = "auto" itself is the MPM scene files' default)
    for family, check in (("bingham", True), ("newtonian", True), ("elastic", None), ("plasticine", None)):
        copy = tomllib.load(open(pacnerf.fit_copy(os.path.join(footage, family, "scene.toml"),
                                                  str(tmp_path / ("p" + family)), 50), "rb"))
        assert copy["fit"].get("profile_check") is check and "profile" not in copy["fit"], family
        assert copy["fit"]["profile_lr"] == 0.1
    # --fit wins over the default
    one = tomllib.load(open(pacnerf.fit_copy(os.path.join(footage, "bingham", "scene.toml"), str(tmp_path / "one"),
                                             50, None, {"starts": 1, "local_starts": 1}), "rb"))
    assert one["fit"]["starts"] == 1 and one["fit"]["local_starts"] == 1


def test_substeps_file_fits_each_clip_at_its_own_files_step(tmp_path, monkeypatch):
    """`--substeps file`: the benchmark's copy (its [fit] settings, the --resolution) keeps the clip file's own
    [simulation] step (the sand clip's 100 a frame, the elastic clip's 200); anything but an integer >= 0 or "file"
    is refused before any fit."""
    seen = {}

    class Stop(Exception):
        pass

    def run_fit(scene, out, extra=()):
        seen[os.path.basename(os.path.dirname(scene))] = tomllib.load(open(scene, "rb"))
        raise Stop

    monkeypatch.setattr(pacnerf, "run_fit", run_fit)
    for family in ("sand", "elastic"):
        with pytest.raises(Stop):
            pacnerf.main(["--families", family, "--substeps", "file", "--resolution", "32", "--out", str(tmp_path)])
        clip = tomllib.load(open(os.path.join(pacnerf.FOOTAGE, family, "scene.toml"), "rb"))
        copy = seen[family]
        assert copy["simulation"] == clip["simulation"] and copy["mpm_grid"]["resolution"] == 32
        assert copy["fit"] == {**clip["fit"], **pacnerf.FIT_OVERRIDES, **pacnerf.default_fit_settings(clip)}
    assert seen["sand"]["simulation"]["substeps"] == 100 and seen["elastic"]["simulation"]["substeps"] == 200
    for bad in ("files", "-1", "1.5"):
        with pytest.raises(SystemExit) as exc:
            pacnerf.main(["--substeps", bad])
        assert exc.value.code == 2
