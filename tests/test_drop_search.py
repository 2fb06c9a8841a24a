"""The drop search through the scene fit (issue 44 item 4): starts that tie on a free-fall horizon are ranked
on the first horizon that covers the contact, the local fits begin there, and `keep` candidates go on.

A tiny own-model drop (32 px, 12 frames at 30 fps): a box falling from 0.3 m with spin lands at frame 7.
The footage is the scene's own silhouettes at mu = 0.4; the fit starts mu at 0.9 with 4 starts.
Slow: ~20 s CPU (a scene fit: 4 starts, 3 candidates, 2 horizons)."""
import math

import numpy as np
import pytest

import tigradsim as tgs
from tigradsim.io.footage import Footage
from tigradsim.scenes.scene_build import Scene, fit_scene
from tigradsim.scenes.scene_file import SceneError, parse_scene

FPS, RES, K = 30.0, 32, 12
TRUE_MU = 0.4


def _scene_dict(mu, fit=None):
    return {"world": {"up": "y", "gravity": 9.8},
            "simulation": {"substeps": 16, "duration": (K - 1) / FPS},
            "ground": {"ke": 3000.0, "kd": 10.0, "kf": 10.0, "mu": mu},
            "objects": {"box": {"type": "rigid", "box": [0.2, 0.1, 0.15], "mass": 1.0, "position": [0.0, 0.3, 0.0],
                                "rotation": [0.2, 0.1, 0.0, math.sqrt(0.95)], "velocity": [0.6, 0.0, 0.0],
                                "angular_velocity": [2.0, -1.0, 3.0]}},
            "camera": {"eye": [0.0, 0.6, 1.0], "target": [0.0, 0.05, 0.0], "fov": 45.0, "width": RES,
                       "height": RES},
            "unknowns": {"ground.mu": {"init": 0.9, "lower": 0.05, "upper": 1.5}},
            "fit": {"sigma": 1e-4, "blur": [0.0], "starts": 4, "local_starts": 3, "keep": 1, "iterations": 3,
                    "optimizer": "bfgs", "refine": 3, "horizons": [3, 8], "time_step_bias": False, **(fit or {})}}


def _footage(frames):
    fo = Footage(frames, FPS, masks=frames, check_masks=False)
    fo.factor, fo.full_size = 1, (RES, RES)
    return fo


@pytest.mark.slow
def test_a_drop_is_searched_where_the_starts_differ_and_keep_candidates_go_on(f64):
    blank = np.zeros((K, RES, RES))
    truth = Scene(parse_scene(_scene_dict(TRUE_MU)), _footage(blank), requires_grad=False, unknowns=False)
    alpha = truth.render()[..., -1]
    scene = Scene(parse_scene(_scene_dict(0.9)), _footage(alpha))
    lines = []
    result, _history = fit_scene(scene, printer=lines.append)
    # every start ties on the free fall (3 frames); scored again on 8, where they differ, the fits begin there
    assert [r["frames"] for r in result.search_rescored] == [8]
    assert len(set(result.search_rescored[0]["scores"].values())) == 4
    assert [s["asked"] for s in scene.horizons_used] == [3, 8, 8, K]
    assert any("the local fits begin at the 8-frame horizon" in n for n in result.notes)
    stage = result.stages[0]
    assert stage.frames == 8 and len(stage.objectives) == 3 and len(stage.kept) == 1
    assert stage.kept[0] == min(stage.objectives, key=stage.objectives.get)
    assert sum(1 for r in result.runs if "dropped after the 8-frame horizon" in r.stop_reason) == 2
    assert result.values["ground.mu"] == pytest.approx(TRUE_MU, rel=0.02)
    assert result.best["ground.mu"].lower95 <= TRUE_MU <= result.best["ground.mu"].upper95


def test_keep_and_drop_ratio_keys_are_checked():
    with pytest.raises(SceneError, match=r"keep.*expected an integer >= 1, got 0"):
        parse_scene(_scene_dict(0.5, {"keep": 0}))
    with pytest.raises(SceneError, match=r"drop_ratio.*expected a number > 1"):
        parse_scene(_scene_dict(0.5, {"drop_ratio": 1.0}))
    spec = parse_scene(_scene_dict(0.5, {"drop_ratio": 3.0}))
    assert spec.fit.keep == 1 and spec.fit.drop_ratio == 3.0
