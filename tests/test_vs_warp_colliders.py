"""Trajectories against NVIDIA Warp 1.9.1 where a static collider acts (issue 46 item 7): vs_warp.py's
cloth64_sphere (a cloth dropped over a sphere collider) at 16 x 16 cells and ball3k_box (a tet ball dropped on
a box collider) at resolution 1 (160 tets), 200 steps of 1 ms each, built by vs_warp.py from the same arrays
(same mesh, masses, contact radius, ke, kd, kf, mu), f32 both.  The laws differ in one place only, the
friction cap while a contact compresses (Warp mu ke |c|, tigradsim mu (ke |c| + kd max(-vn, 0)): vs_warp.py's
docstring), so the trajectories agree closely but not to round-off (measured: the cloth's mean height 0.05 mm
apart at worst, any particle 0.35 mm; the ball's centre 0.02 mm): the cloth's mean height at every step and the
ball's centre are compared within 0.5 mm, every cloth particle within 2.5 mm (the cloth's mean height falls 0.32 m;
the ball lands and slides), with contact from about step 40 (checked: the cloth rests on the sphere's top, the ball sits on the box).  The last
test runs the two scenes' tigradsim side alone (no Warp needed)."""
import os
import sys

import numpy as np
import pytest

import tigradsim as tgs
from benchmark_modules import benchmark_modules

pytestmark = pytest.mark.slow          # Warp's and tigradsim's kernels compile (about a minute on 2 cores)
TOL_M = 5e-4

BENCH = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "benchmarks")


def _rollouts(scene, **sizes):
    """(tigradsim trajectory, Warp trajectory) (steps + 1, N, 3) [m] of one forward rollout each."""
    wp = pytest.importorskip("warp")
    vs_warp = benchmark_modules("vs_warp")
    tgs.init(arch="cpu", precision="f32")
    wp.config.quiet = True
    wp.init()
    spec = dict(vs_warp.scene_spec(scene), **sizes)
    ours = vs_warp.TigradsimCase(spec, "cpu")
    theirs = vs_warp.WarpCase(spec, ours, "cpu")
    ours.forward()
    theirs.forward()
    return ours.trajectory(), theirs.trajectory(), vs_warp


def test_cloth_over_a_sphere_matches_warp():
    a, b, vs_warp = _rollouts("cloth64_sphere", n=16)
    c = vs_warp.CLOTH_SPHERE
    assert np.all(np.isfinite(a)) and np.all(np.isfinite(b))
    mean_a, mean_b = a[..., 1].mean(1), b[..., 1].mean(1)
    assert mean_a[0] - mean_a[-1] > 0.2                     # it fell ...
    centre = np.argmin(np.linalg.norm(a[0, :, [0, 2]].T, axis=1))
    top = c["centre"][1] + c["radius"]
    assert abs(a[-1, centre, 1] - top) < 0.02, a[-1, centre]   # ... onto the sphere's top and rests there
    assert np.abs(mean_a - mean_b).max() < TOL_M, np.abs(mean_a - mean_b).max()
    assert np.abs(a[-1].mean(0) - b[-1].mean(0)).max() < TOL_M
    assert np.abs(a - b).max() < 5 * TOL_M                  # every particle, every step


def test_ball_on_a_box_matches_warp():
    a, b, vs_warp = _rollouts("ball3k_box", resolution=1)
    c = vs_warp.BALL_BOX
    assert np.all(np.isfinite(a)) and np.all(np.isfinite(b))
    box_top = c["box_centre"][1] + c["half"][1]
    assert a[-1, :, 1].min() < box_top + 0.01               # it landed on the box
    centre_a, centre_b = a.mean(1), b.mean(1)               # the mean of its nodes, every step
    assert np.abs(centre_a - centre_b).max() < TOL_M, np.abs(centre_a - centre_b).max()


def test_collider_scenes_run_without_warp():
    """vs_warp.py's collider scenes, tigradsim's side alone at toy size (what runs where warp-lang is missing)."""
    import json
    import subprocess
    root = os.path.dirname(BENCH)
    out = subprocess.run([sys.executable, os.path.join(BENCH, "vs_warp.py"), "--tiny", "--in-process", "--repeat", "1",
                          "--libraries", "tigradsim", "--scenes", "cloth64_sphere,ball3k_box"], cwd=root,
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    res = json.loads(out.stdout.strip().splitlines()[-1])
    assert [s["scene"] for s in res["scenes"]] == ["cloth64_sphere", "ball3k_box"]
    for s in res["scenes"]:
        assert all(t > 0 for t in s["tigradsim_us"]) and s["tigradsim_gradient_finite"], s
        assert s["warp_us"] is None and s["max_position_diff_m"] is None
    assert res["scenes"][0]["triangles"] == 2 * 4 * 4 and res["scenes"][1]["tets"] == 160
