"""The committed PAC-NeRF-protocol clips (benchmarks/footage/pacnerf/<family>, made by
benchmarks/make_pacnerf_footage.py from Genesis's MPM and Mitsuba): each scene file parses, has 11 cameras
whose frame and mask counts match truth.json's, never names truth.json, and starts no unknown at the truth.
Fast: parsing only, no kernels."""
import json
import os

import numpy as np
import pytest
from PIL import Image

ROOT = os.path.join(os.path.dirname(__file__), "..")
PACNERF = os.path.join(ROOT, "benchmarks", "footage", "pacnerf")
FAMILIES = ("elastic", "plasticine", "sand", "newtonian", "bingham")
MATERIALS = {"elastic": "mpm_fixed_corotated", "plasticine": "mpm_von_mises", "sand": "mpm_drucker_prager",
             "newtonian": "mpm_newtonian", "bingham": "mpm_bingham"}


def committed():
    return [f for f in FAMILIES if os.path.isfile(os.path.join(PACNERF, f, "scene.toml"))]


def test_elastic_clip_is_committed():
    assert "elastic" in committed()


@pytest.mark.parametrize("family", committed())
def test_clip_is_self_consistent(family):
    from tigradsim.scenes.scene_file import load_scene

    folder = os.path.join(PACNERF, family)
    with open(os.path.join(folder, "scene.toml")) as fh:
        text = fh.read()
    assert "truth" not in text.replace("The truth is kept in a file beside this one that no fit reads", "")
    with open(os.path.join(folder, "truth.json")) as fh:
        truth = json.load(fh)
    spec = load_scene(os.path.join(folder, "scene.toml"))
    assert len(spec.views) == 11 and len({v.name for v in spec.views}) == 11
    n = truth["frame_count"]
    for view in spec.views:
        fo = view.footage
        assert len(fo.frames) == n and len(fo.masks) == n and fo.fps == truth["fps"] == 24.0
        assert view.camera.width == view.camera.height == 64
        for path, mode in ((fo.frames[0], "RGB"), (fo.masks[-1], "L")):
            img = Image.open(path)
            assert img.mode == mode and img.size == (64, 64)
    obj = spec.objects[truth["object"]]
    assert obj.kind == "mpm" and obj.material == truth["truth"]["material"] == MATERIALS[family]
    assert np.allclose(obj.velocity, 0.0)                     # released at rest at frame 0
    unknowns = {u.param: u for u in spec.unknowns}
    assert set(unknowns) == {k.split(".")[1] for k in truth["unknowns"]}
    for param, u in unknowns.items():
        assert u.init != pytest.approx(truth["truth"][param], rel=0.05), param   # never started at the truth
        assert param not in obj.params or obj.params[param] != truth["truth"][param]
