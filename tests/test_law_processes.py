"""Every contact law of the library fitted in one call (issue 44): `compare_scene_variants` fits each variant in
a process of its own (tigradsim/scenes/variant_process.py), because Taichi 1.7.4 never frees a field and its
LLVM runtime holds 512 SNode trees: in one process the 7th law of `tigradsim laws` on tests/test_cli.py's box
ended in a segmentation fault (78 trees per fit, measured).

On a tiny clip (a 16 px box sliding to rest, 6 frames, rendered here by tigradsim at mu = 0.3):
* all 8 laws of `LAWS` (more than the 6 that fitted in one process) fit and are tabled, with a combined mu;
* a variant's result in its own process is the one an in-process fit of it gives (same estimate and loss to
  the last bits: the fits are seeded and the child runs `tgs.init` with the caller's settings);
* the caller's own Taichi program and fields are untouched (a field written before reads the same after);
* the child's progress lines reach the caller's printer;
* an error in the child's fit is raised in the caller, with its type and message."""
import numpy as np
import pytest
import taichi as ti

import tigradsim as tgs
from tigradsim.scenes.law_compare import LAWS, compare_contact_laws, compare_scene_variants, fit_variant, law_spec
from tigradsim.scenes.scene_file import parse_scene

pytestmark = pytest.mark.slow          # 8 fits, each in a fresh Python process

TRUE_MU = 0.3
FIT = dict(starts=1, local_starts=1, refine=0, horizons=None, iterations=10)


def _scene(mu):
    return {"world": {"up": "y", "gravity": 9.8}, "simulation": {"substeps": 16, "duration": 0.2},
            "ground": {"ke": 1e4, "kd": 10.0, "kf": 10.0, "mu": 0.4},
            "objects": {"box": {"type": "rigid", "box": [0.2, 0.1, 0.15], "mass": 1.0, "position": [0.0, 0.05, 0.0],
                                "velocity": [1.5, 0.0, 0.0]}},
            "camera": {"eye": [0.1, 0.6, 1.0], "target": [0.1, 0.05, 0.0], "fov": 45.0, "width": 16, "height": 16},
            "unknowns": {"box.mu": {"init": mu, "lower": 0.05, "upper": 1.5}},
            "fit": {"optimizer": "bfgs", "sigma": 1e-4}}


def _footage(alpha, check=True):
    """A 16 px clip at the render resolution, as `load_scene_footage` makes one (factor 1)."""
    clip = tgs.Footage(alpha, fps=30.0, masks=alpha, check_masks=check)
    clip.factor, clip.full_size = 1, (16, 16)
    return clip


@pytest.fixture(scope="module")
def clip():
    """(spec to fit, footage): the frames rendered at mu = TRUE_MU, the fit started at 0.5."""
    from tigradsim.scenes.scene_build import Scene

    tgs.init(arch="cpu", precision="f64")
    truth = parse_scene(_scene(TRUE_MU))
    blank = _footage(np.zeros((7, 16, 16)), check=False)
    alpha = Scene(truth, blank).render_views()[0][..., -1]
    return parse_scene(_scene(0.5)), _footage(alpha)


def test_every_contact_law_fits_in_one_call(clip):
    spec, footage = clip
    assert len(LAWS) >= 7                     # past what one Taichi program held
    mine = ti.field(ti.f64, shape=3)           # the caller's own field: untouched by the variants' processes
    mine.from_numpy(np.array([1.0, 2.0, 3.0]))
    printed = []
    comparison, results = compare_contact_laws(spec, footage, printer=printed.append, **FIT)
    assert sorted(results) == sorted(LAWS) and sorted(r["label"] for r in comparison.rows) == sorted(LAWS)
    assert all(results[k][0].best is not None and 0.5 < results[k][1] <= 1.0 for k in LAWS)     # a fit, an IoU
    assert abs(comparison.combined["box.mu"].value - TRUE_MU) < 0.05         # from 0.5
    assert np.array_equal(mine.to_numpy(), [1.0, 2.0, 3.0])
    assert any("contact law uncapped+warp(0.1)" in str(p) for p in printed)
    assert sum("iter" in str(p) for p in printed) >= len(LAWS)       # the children's progress, printed here

    # one law in this process: the same estimate and loss as its own process gave
    label = "uncapped+warp(0.01)"
    result, iou, _, _ = fit_variant(law_spec(spec, LAWS[label]), footage, lambda *a, **k: None, FIT)
    theirs = results[label][0].best
    assert result.best.estimates[0].value == theirs.estimates[0].value and result.best.loss == theirs.loss
    assert iou == results[label][1]


def test_an_error_in_a_variants_process_is_raised_in_the_caller(clip):
    spec, footage = clip
    specs = {"capped": ("capped", law_spec(spec, LAWS["capped"]))}
    with pytest.raises(TypeError, match="bogus"):         # fit_scene's own error, raised in the child
        compare_scene_variants(specs, footage, "t", printer=lambda *a, **k: None, bogus=1)
