"""benchmarks/rq4.py (gradSim RQ4 ablations): the iterations-to-1% counters on known histories, the
camera offsets, that every ablation really changes the target video (and the references do not), and
one tiny run of the row machinery."""
import os
import sys

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))

import rq4  # noqa: E402

pytestmark = pytest.mark.slow          # the paper's RQ4 scenes (benchmarks/rq4.py)

TINY = {"res": 16, "duration": 0.2}


def test_iters_to_1pct_on_known_histories():
    truth = 2.0
    # relative errors 0.5, 0.25, 0.005 (first inside), 0.025 (out again), 0.0075, 0, 5e-4
    values = [1.0, 1.5, 1.99, 2.05, 2.015, 2.0, 2.001]
    assert rq4.iters_to_first(values, truth) == 2
    assert rq4.iters_to_tol(values, truth) == 4
    assert rq4.iters_to_tol(values[:4], truth) is None            # ends outside: never settled
    assert rq4.iters_to_first([1.0, 1.5], truth) is None          # never inside
    assert rq4.iters_to_tol([2.01, 1.995], truth, tol=0.01) == 0  # inside from the initial guess on
    assert rq4.iters_to_tol([np.array([1.0]), np.array([2.0])], truth) == 1    # History stores (1,) arrays


def test_ablated_camera_moves_1cm_and_turns_half_a_degree():
    from tigradsim.renderers import Camera
    from tigradsim.scenes.rigid_push import CAMERA_EYE, CAMERA_TARGET
    cam = Camera(eye=CAMERA_EYE, target=CAMERA_TARGET, fov=45, width=16, height=16)
    moved = rq4.ablated_camera(cam, shift=0.01)
    assert np.allclose(np.asarray(moved.eye) - cam.eye, 0.01 * cam.rotation[0])
    assert np.allclose(moved.rotation, cam.rotation)               # a pure translation
    turned = rq4.ablated_camera(cam, turn=0.5)
    assert np.allclose(turned.eye, cam.eye)
    cos = np.clip(turned.rotation[2] @ cam.rotation[2], -1, 1)
    assert np.degrees(np.arccos(cos)) == pytest.approx(0.5, rel=1e-6)


def _targets(shape, truth=1.2):
    """{row: target video} for every row of `rq4.ROWS` on a tiny scene, plus the scene's own target."""
    from tigradsim.scenes.rigid_push import PushScene
    sc = PushScene(shape, **TINY)
    lam = rq4._ablation_scene_class()(shape, shading="lambert", **TINY)
    tex = rq4._ablation_scene_class()(shape, shading="textured", **TINY)
    scenes, cache, out = {"silhouette": sc, "lambert": lam, "textured": tex}, {}, {}
    for name, (_, _, shading, ablation) in rq4.ROWS.items():
        out[name] = rq4.render_target(scenes[shading], truth, TINY, ablation, np.random.default_rng(0), cache)
    sc.set_mass(truth)
    lam.set_mass(truth)
    return out, sc.target(), lam.fit.render()


def test_every_ablation_changes_the_target():
    import tigradsim as tgs
    tgs.init(arch="cpu", precision="f64", seed=0)
    # the sphere rolls over its vertices (touchdowns), so even the damping law shows in its video
    videos, own, own_lambert = _targets("sphere")
    assert np.array_equal(videos["reference"], own)                 # the reference is the Table 1 scene's target
    assert np.array_equal(videos["lambert"], own_lambert)
    assert videos["textured"].shape == own_lambert.shape and np.abs(videos["textured"] - own_lambert).max() > 0.05
    for name, (_, _, shading, ablation) in rq4.ROWS.items():
        if not ablation:
            continue
        base = own if shading == "silhouette" else own_lambert
        assert videos[name].shape == base.shape, name
        assert 0.0 <= videos[name].min() and videos[name].max() <= 1.0, name
        assert np.abs(videos[name] - base).max() > 0.01, f"{name}: the target did not change"
    # the noise is zero-mean before clipping and scales with sigma: same draws, 2.5x the spread
    d2, d5 = videos["noise_0.02"] - own, videos["noise_0.05"] - own
    inside = (own > 0.2) & (own < 0.8)                               # where clipping cannot act
    assert np.allclose(d5[inside], 2.5 * d2[inside], atol=1e-6)


def test_run_rows_tiny():
    import tigradsim as tgs
    from tigradsim.scenes.rigid_push import draw_masses
    tgs.init(arch="cpu", precision="f64", seed=0)
    res = rq4.run_rows(["reference", "push_5pct"], 2, 3, "box", TINY, {"iters": 4, "polish": 1},
                       printer=lambda *a: None)
    rng = np.random.default_rng(3)
    for k, (truth, guess) in enumerate(draw_masses(rng) for _ in range(2)):
        for name in res:
            t = res[name]["per_trial"][k]
            assert (t["true"], t["initial"]) == (truth, guess)       # the same draws in every row
            assert len(t["masses"]) == 4 + 2                          # each phase ends with one evaluation
            assert t["masses"][0] == pytest.approx(guess) and t["masses"][-1] == pytest.approx(t["estimate"])
            assert t["iters_to_1pct"] == rq4.iters_to_tol(t["masses"], truth)
            assert t["rel_err"] == pytest.approx(abs(t["estimate"] - truth) / truth)
    for r in res.values():
        assert r["rel_err"] == pytest.approx(np.mean([t["rel_err"] for t in r["per_trial"]]))
    lines = rq4.rq4_table({"settings": {"trials": 2, "seed": 3, "shape": "box", "iters": 4, "polish": 1, "res": 16,
                                        "command": "x", "seconds": 1.0, "cpu_seconds": 1.0, "date": "d"},
                           "rows": res})
    assert sum(line.startswith("| ") for line in lines) == 1 + 2      # header and one line per row
