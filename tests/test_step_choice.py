"""[simulation] substeps = "auto": the fit chooses its step by step doubling (tigradsim/scenes/step_choice.py).

The scene of tests/test_scene_horizon.py (a box thrown with spin onto the ground, 32 px, 12 frames at 30 fps),
at its unknown's initial value.  Measured (the largest estimated model error over the clip, 2x the dt-vs-dt/2
silhouette disagreement): 2.32 px at 2 steps a frame, 1.16 at 4, 0.53 at 8, 0.22 at 16: first order in dt.
With horizon_tolerance 0.8 px the check fails at 4 steps a frame and passes at 8, one doubling."""
import numpy as np
import pytest

import tigradsim as tgs
from tigradsim.scenes.fit_markdown import fit_markdown  # noqa: F401  (the report's line: test_cli.py)
from tigradsim.scenes.scene_build import Scene
from tigradsim.scenes.scene_file import SceneError, parse_scene
from tigradsim.scenes.step_choice import choose_substeps, recheck_at_estimate
from test_scene_horizon import K, RES, _footage, _scene_dict

TOLERANCE = 0.8          # px: between the errors at 4 (1.16) and 8 (0.53) steps a frame


def _auto(**simulation):
    d = _scene_dict(4)
    d["simulation"] = {"substeps": "auto", "duration": (K - 1) / 30.0, **simulation}
    d["fit"]["horizon_tolerance"] = TOLERANCE
    return d


def test_substeps_auto_keys_are_checked():
    """Parsed: "auto" keeps min_substeps as the scene's substeps until the fit chooses; bad values name the key."""
    spec = parse_scene(_auto(min_substeps=4, max_substeps=64))
    assert spec.substeps == 4 and spec.auto_substeps == (4, 64) and spec.dt is None
    spec = parse_scene(_auto())
    assert spec.substeps == 32 and spec.auto_substeps == (32, 512)          # the defaults
    assert parse_scene(_scene_dict(4)).auto_substeps is None                 # a fixed count: as before
    bad = [({"substeps": "fine"}, r"substeps: expected a whole number of steps per footage frame or \"auto\", "
                                  r"got 'fine'"),
           ({"substeps": 8, "max_substeps": 64}, r"max_substeps: only with substeps = \"auto\""),
           ({"dt": 0.001, "min_substeps": 4}, r"min_substeps: only with substeps = \"auto\""),
           ({"substeps": "auto", "min_substeps": 64, "max_substeps": 32}, r"max_substeps: expected at least "
                                                                          r"min_substeps = 64"),
           ({"substeps": "auto", "max_substeps": 0}, r"max_substeps: expected an integer >= 1, got 0"),
           ({"substeps": "auto", "min_substeps": 2.5}, r"min_substeps: expected an integer, got"),
           ({"substeps": "auto", "dt": 0.001}, r"dt / substeps: give one of")]
    for simulation, message in bad:
        d = _scene_dict(4)
        d["simulation"] = dict(simulation, duration=(K - 1) / 30.0)
        with pytest.raises(SceneError, match=r"\[simulation\] " + message):
            parse_scene(d)


@pytest.fixture(scope="module")
def blank():
    tgs.init(arch="cpu", precision="f64")
    z = np.zeros((K, RES, RES))
    return _footage(z, z)


@pytest.mark.slow
def test_the_step_is_doubled_until_every_frame_passes_and_the_cap_is_reported(blank):
    """From 4 steps a frame: fails (error > 0.8 px on the late frames), doubled to 8: passes, chosen; the
    report has both figures.  With max_substeps 7 the same check stops at 4 and says the cap was hit."""
    lines = []
    spec, step = choose_substeps(parse_scene(_auto(min_substeps=4, max_substeps=64)), blank, lines.append)
    assert spec.substeps == 8 and spec.dt is None and step["substeps"] == 8
    assert step["dt"] == pytest.approx(1.0 / (30.0 * 8))
    assert step["passed"] and not step["cap_hit"]
    first, second = step["checks"]
    assert (first["substeps"], first["passed"], second["substeps"], second["passed"]) == (4, False, 8, True)
    assert first["max_error_px"] > TOLERANCE >= second["max_error_px"]
    assert first["frames_within"] < K == second["frames_within"] == second["frames"]
    assert first["max_error_px"] == pytest.approx(2 * first["max_disagreement_px"], rel=1e-3)   # Richardson, p = 1
    assert second["max_error_px"] < 0.7 * first["max_error_px"]      # first order: measured 0.53 / 1.16
    assert "chose 8 steps a frame" in step["summary"] and "Every frame is within" in step["summary"]
    assert any("-> doubling" in line for line in lines) and lines[-1] == step["summary"]
    # the scene at the chosen step passes the fit's own check at its start values
    scene = Scene(spec, blank, requires_grad=False)
    assert scene.predictability().horizon == K
    # the re-check after a fit (here at the same values): it passes and says so
    recheck_at_estimate(step, scene)
    assert step["at_estimate"]["passed"] and step["at_estimate"]["substeps"] == 8
    assert step["at_estimate"]["max_error_px"] == pytest.approx(second["max_error_px"], rel=1e-6)
    assert "At the estimate the check still passes at 8 steps a frame" in step["summary"]

    capped, step = choose_substeps(parse_scene(_auto(min_substeps=4, max_substeps=7)), blank, lambda *a: None)
    assert capped.substeps == 4 and step["cap_hit"] and not step["passed"] and len(step["checks"]) == 1
    assert step["checks"][0]["max_error_px"] == pytest.approx(first["max_error_px"], rel=1e-9)
    assert "CAP HIT: max_substeps = 7" in step["summary"] and "cuts the frames past the predictable horizon" \
        in step["summary"]
    # an estimate where the step fails (here: ground mu 0.4, the coarse scene's own footage values)
    coarse = Scene(capped, blank, requires_grad=False)
    coarse.params[0].write(0.4)
    recheck_at_estimate(step, coarse)
    assert not step["at_estimate"]["passed"] and step["at_estimate"]["frames_within"] < K
    assert "AT THE ESTIMATE the check fails at 4 steps a frame" in step["summary"]
    assert "needs max_substeps > 7" in step["summary"] and "did not show" not in step["summary"]   # the cap

    # a fixed count: nothing runs, the spec is returned as it is
    fixed = parse_scene(_scene_dict(4))
    assert choose_substeps(fixed, blank, lambda *a: pytest.fail("printed")) == (fixed, None)


class _FakePrediction:
    """What `Scene.predictability` returns, as far as `choose_substeps` reads it."""

    def __init__(self, substeps, horizon, frames):
        self.dt, self.horizon, self.frames = 1.0 / (30.0 * substeps), horizon, frames
        self.error = np.where(np.arange(frames) < horizon, 0.1, 3.0)
        self.disagreement = self.error / 2


def _scripted(monkeypatch, horizons, frames=45):
    """choose_substeps over scenes whose predictable horizon at each count is `horizons[count]` (no rollout)."""
    import tigradsim.scenes.scene_build as scene_build
    import tigradsim.scenes.scene_refined as scene_refined

    class Fake:
        def __init__(self, spec, footage, requires_grad=True):
            self.substeps = spec.substeps

        def predictability(self, tol):
            return _FakePrediction(self.substeps, horizons[self.substeps], frames)

    def refined(scene, kind):
        assert kind == "time_step"
        new = Fake.__new__(Fake)
        new.substeps = 2 * scene.substeps
        return new

    monkeypatch.setattr(scene_build, "Scene", Fake)
    monkeypatch.setattr(scene_refined, "refined_scene", refined)


def test_the_doubling_stops_where_the_horizon_stops_growing(monkeypatch):
    """The stall rule (no rollout: scripted horizons).  Warp's box drop at the start values had 15 frames within
    the tolerance at 64 steps a frame, 35 at 128, 19 at 256: the doubling stops at 256 and the fit runs at 128, the
    count with the longest horizon; the report says "HORIZON STALLED" with the figures.  A horizon that keeps
    growing is doubled up to the cap as before; a first count whose horizon is frame 0 alone is no stall; equal
    horizons stall and keep the cheaper count."""
    d = _auto(min_substeps=64, max_substeps=512)
    _scripted(monkeypatch, {64: 15, 128: 35, 256: 19, 512: 25})
    lines = []
    spec, step = choose_substeps(parse_scene(d), None, lines.append)
    assert spec.substeps == step["substeps"] == 128 and step["dt"] == pytest.approx(1 / (30.0 * 128))
    assert step["stalled"] and not step["cap_hit"] and not step["passed"]
    assert [c["substeps"] for c in step["checks"]] == [64, 128, 256]           # 512 never run
    assert "HORIZON STALLED: doubling from 128 to 256 steps a frame did not lengthen the predictable horizon " \
           "(35 -> 19 of 45 frames within)" in step["summary"] and "The fit runs at 128 steps a frame" in step["summary"]
    assert "Frames 35..44 are not predictable" in step["summary"]
    assert lines[-2].endswith("(the horizon stopped growing)")

    _scripted(monkeypatch, {64: 15, 128: 20, 256: 30, 512: 40})
    spec, step = choose_substeps(parse_scene(d), None, lambda *a: None)
    assert spec.substeps == 512 and step["cap_hit"] and not step["stalled"] and "CAP HIT" in step["summary"]

    _scripted(monkeypatch, {64: 1, 128: 1, 256: 45})
    spec, step = choose_substeps(parse_scene(d), None, lambda *a: None)
    assert spec.substeps == 256 and step["passed"] and not step["stalled"]

    _scripted(monkeypatch, {64: 20, 128: 20})
    spec, step = choose_substeps(parse_scene(d), None, lambda *a: None)
    assert spec.substeps == 64 and step["stalled"] and [c["substeps"] for c in step["checks"]] == [64, 128]
