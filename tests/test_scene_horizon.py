"""[fit] horizon = "auto": the predictability check by step doubling (`Scene.predictability`,
`silhouette_disagreement`) and the clamp of the coarse-to-fine horizons in `fit_scene`.

A tiny scene (32 px, 12 frames at 30 fps): a box thrown with spin onto the ground.  At 32
substeps per frame the rollouts at dt and dt/2 agree to a few hundredths of a pixel over the
whole clip; at 4 substeps the bounce is resolved by a handful of steps and they part after it.
The footage is the 32-substep rollout's own silhouettes, fitted at 4 substeps."""
import math

import numpy as np
import pytest

import tigradsim as tgs
from tigradsim.io.footage import Footage
from tigradsim.scenes.scene_build import (Scene, fit_scene, predictable_horizon, silhouette_disagreement)
from tigradsim.scenes.scene_file import SceneError, parse_scene

pytestmark = pytest.mark.slow          # fits footage scenes

FPS, RES, K = 30.0, 32, 12
FINE, COARSE = 32, 4
TRUE_MU = 0.4


def _scene_dict(substeps, horizon="auto", mu=TRUE_MU):
    return {"world": {"up": "y", "gravity": 9.8},
            "simulation": {"substeps": substeps, "duration": (K - 1) / FPS},
            "ground": {"ke": 3000.0, "kd": 10.0, "kf": 10.0, "mu": mu},
            "objects": {"box": {"type": "rigid", "box": [0.2, 0.1, 0.15], "mass": 1.0, "position": [0.0, 0.3, 0.0],
                                "rotation": [0.2, 0.1, 0.0, math.sqrt(0.95)], "velocity": [0.3, 0.0, 0.0],
                                "angular_velocity": [2.0, -1.0, 3.0]}},
            "camera": {"eye": [0.0, 0.6, 1.0], "target": [0.0, 0.05, 0.0], "fov": 45.0, "width": RES,
                       "height": RES},
            "unknowns": {"ground.mu": {"init": 0.5, "lower": 0.05, "upper": 1.5}},
            "fit": {"horizon": horizon, "sigma": 1e-4, "blur": [0.0, 1.0], "starts": 1, "iterations": 2,
                    "optimizer": "bfgs", "horizons": [4]}}


def _footage(frames, masks):
    fo = Footage(frames, FPS, masks=masks, check_masks=False)     # blank placeholders too
    fo.factor, fo.full_size = 1, (RES, RES)
    return fo


@pytest.fixture(scope="module")
def fine():
    """The 32-substep scene at the file's values (mu = 0.4) and its silhouettes as footage."""
    tgs.init(arch="cpu", precision="f64")
    blank = np.zeros((K, RES, RES))
    scene = Scene(parse_scene(_scene_dict(FINE)), _footage(blank, blank), requires_grad=False, unknowns=False)
    alpha = scene.render()[..., -1]
    return scene, _footage(alpha, alpha)


@pytest.fixture(scope="module")
def coarse(fine):
    """The 4-substep scene fitted to the fine footage (ground.mu unknown, initial 0.5)."""
    with pytest.warns(tgs.StabilityWarning):          # dt = 1/120 s: past the 'safe' half of the limit
        return Scene(parse_scene(_scene_dict(COARSE)), fine[1])


def test_silhouette_disagreement_is_the_mean_edge_displacement():
    """A half-plane edge moved by 0.3 px: 0.3 px; a disc moved by 0.5 px: 2 * 0.5 / pi
    (the mean |normal displacement| around it); identical silhouettes: 0."""
    H = W = 64
    y, x = np.mgrid[0:H, 0:W] + 0.5

    def coverage(signed):                    # area coverage of a pixel by {signed < 0}, linear ramp
        return np.clip(0.5 - signed, 0.0, 1.0)

    edge = np.stack([coverage(x - 30.0), coverage(x - 30.3)])
    d = silhouette_disagreement(edge[:1], edge[1:])
    assert d[0] == pytest.approx(0.3, rel=0.02)
    disc = lambda cx: coverage(np.hypot(x - cx, y - 32.0) - 15.0)
    d = silhouette_disagreement(disc(32.0)[None], disc(32.5)[None])
    assert d[0] == pytest.approx(2 * 0.5 / math.pi, rel=0.05)
    assert silhouette_disagreement(disc(32.0)[None], disc(32.0)[None])[0] == 0.0
    with pytest.raises(ValueError, match="alpha_a, alpha_b"):
        silhouette_disagreement(edge, edge[:1])
    assert predictable_horizon([0.1, 0.2, 0.6, 0.1], 0.5) == 2
    assert predictable_horizon([0.1, 0.2], 0.5) == 2
    assert predictable_horizon([0.1, float("nan")], 0.5) == 1


def test_predictability_full_when_smooth_clamped_at_a_coarse_bounce(fine, coarse):
    assert fine[0].renderer.closed        # a box: low-poly solid, single-halo silhouette edges
    smooth = fine[0].predictability()
    assert smooth.horizon == K, smooth.reason()
    assert smooth.error.max() < 0.5 and np.allclose(smooth.error, 2 * smooth.disagreement)
    rough = coarse.predictability()
    assert 1 < rough.horizon < K, rough.reason()
    assert rough.error[rough.horizon] > 0.5 and np.all(rough.error[:rough.horizon] <= 0.5)
    assert rough.disagreement[-1] > 5 * smooth.disagreement[-1]       # measured 6.7x (0.58 / 0.086 px)
    assert f"from frame {rough.horizon} on" in rough.reason() and "dt/2" in rough.reason()
    # a looser tolerance reaches further (the check is not a fixed frame count)
    assert coarse.predictability(tolerance=100.0).horizon == K
    with pytest.raises(ValueError, match="tolerance"):
        coarse.predictability(tolerance=-1.0)


def test_fit_scene_never_fits_past_the_predictable_horizon(coarse):
    result, history = fit_scene(coarse, printer=lambda *a, **k: None)
    info = coarse.horizon_info
    n = info["frames_fitted"]
    assert info["frames_total"] == K and 1 < n < K
    stages = coarse.horizons_used
    # the search's and the local fit's stages: [4, 12] asked; each clamped to the horizon at its start
    assert [s["asked"] for s in stages] == [4, 4, K]
    for s in stages:
        assert s["used"] == max(1, min(s["asked"], s["predictable"]))
    assert stages[-1]["used"] == n
    assert f"fitted frames 0..{n - 1} of {K}" in info["horizon_reason"]
    assert info["predictability_at_estimate"]["frames"] == K
    # identify's objective is the loss over the n fitted frames at the estimate, not over all K
    assert coarse.frames_used == K                    # the scene is back on every frame
    coarse.use_frames(n)
    on_fitted = coarse.loss_value()
    coarse.use_frames(K)
    assert result.minima[0].objective == pytest.approx(on_fitted, rel=1e-9)
    assert abs(coarse.loss_value() - on_fitted) > 1e-3 * on_fitted
    # horizon = "all": the same schedule fits every frame
    coarse.spec.fit.horizon = "all"
    try:
        fit_scene(coarse, iterations=1, printer=lambda *a, **k: None)
        assert coarse.horizon_info["frames_fitted"] == K
    finally:
        coarse.spec.fit.horizon = "auto"
    # horizon = N (a model comparison's later models: the frames the first one's "auto" chose): the schedule
    # ends at N frames, whatever the predictable horizon
    coarse.spec.fit.horizon = 7
    try:
        fit_scene(coarse, iterations=1, printer=lambda *a, **k: None)
        assert coarse.horizon_info["frames_fitted"] == 7 and coarse.frames_used == K
        assert [s["asked"] for s in coarse.horizons_used[-2:]] == [4, 7]
        assert "fitted frames 0..6 of 12 ([fit] horizon = 7)" == coarse.horizon_info["horizon_reason"]
        coarse.spec.fit.horizon = K + 1
        with pytest.raises(SceneError, match=r"\[fit\] horizon: expected a frame count of at most the footage's 12"):
            fit_scene(coarse, iterations=1, printer=lambda *a, **k: None)
    finally:
        coarse.spec.fit.horizon = "auto"


def test_horizon_keys_are_checked():
    for key, value, expected in (("horizon", "sometimes", "[fit] horizon"),
                                 ("horizon", 0, "[fit] horizon: expected an integer >= 1, got 0"),
                                 ("horizon", 2.5, "[fit] horizon: expected an integer"),
                                 ("horizon_tolerance", -0.5, "[fit] horizon_tolerance")):
        data = _scene_dict(FINE)
        data["fit"][key] = value
        with pytest.raises(SceneError) as info:
            parse_scene(data)
        assert expected in str(info.value)
    assert parse_scene(_scene_dict(FINE)).fit.horizon_tolerance == 0.5
    assert parse_scene(_scene_dict(FINE, horizon=7)).fit.horizon == 7
