"""The gradSim loop on continuum matter: an MPM jelly cube's Young's modulus from soft-splat silhouettes alone
(tigradsim/scenes/mpm_jelly.py, the scene of demos/mpm_jelly.py), and the demo's --quick run."""
import json

import numpy as np
import pytest

import tigradsim as tgs
from tigradsim.scenes.mpm_jelly import JellyScene, fit_youngs_modulus


@pytest.mark.slow           # ~10 s of fitting once compiled, MPM kernels to compile first
def test_youngs_modulus_from_splatted_silhouettes():
    tgs.init(arch="cpu", precision="f64")
    scene = JellyScene(E=2e4, resolution=12, steps=300, res=40)
    x, target, _ = scene.run()
    assert x[-1, :, 1].mean() < x[0, :, 1].mean() - 0.1          # it fell and landed
    assert target.max() > 0.9 and target[:, 0, :].max() < 1e-6  # the cube is in view, not at the image's top
    fit = fit_youngs_modulus(scene, target, guess=4e4, iters=6, printer=lambda *a: None)
    assert fit["rel_err"] < 0.01, fit
    assert fit["loss_final"] < 1e-3 * fit["loss_initial"]


@pytest.mark.slow
def test_demo_quick(tmp_path, capsys):
    import runpy
    import sys
    argv = sys.argv
    sys.argv = ["mpm_jelly.py", "--quick", "--headless", "--out", str(tmp_path)]
    try:
        runpy.run_path("demos/mpm_jelly.py", run_name="__main__")
    finally:
        sys.argv = argv
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert out["particles"] == 216 and out["fit"]["rel_err"] < 0.02 and out["gif"]
    assert np.isfinite(out["final_height"]) and out["final_height"] < 0.3
