"""Coarse to fine in the model ([fit] coarse; tigradsim/scenes/scene_coarse.py) and the curvature it hands on
(`tgs.BFGS`'s inverse_hessian, `tgs.identify`'s bfgs_inverse_hessian, `Run.inverse_hessian`): bad input, the
quasi-Newton first step, the scene file's option, and an MPM fit whose search runs on the coarser model."""
import math

import numpy as np
import pytest
import taichi as ti

import tigradsim as tgs
from tigradsim.scenes.scene_file import SceneError, parse_scene

from test_grid_bias import BOX_PUSH, JELLY, _footage, _toml
from test_grid_bias import _jelly_data as _jelly_drop


def _quadratic(hessian, minimum, start):
    """loss = 1/2 (x - m)^T A (x - m) over two linear Params: the Params, the Tape forward and the loss field."""
    a, b = (ti.field(float, shape=(), needs_grad=True) for _ in range(2))
    a[None], b[None] = start
    loss = ti.field(float, shape=(), needs_grad=True)
    A = [[float(v) for v in row] for row in hessian]
    m = [float(v) for v in minimum]

    @ti.kernel
    def forward():
        for _ in range(1):
            u, v = a[None] - m[0], b[None] - m[1]
            loss[None] += 0.5 * (A[0][0] * u * u + 2.0 * A[0][1] * u * v + A[1][1] * v * v)

    params = [tgs.Param(a, "a", lower=-10.0, upper=10.0, log_space=False),
              tgs.Param(b, "b", lower=-10.0, upper=10.0, log_space=False)]
    return params, forward, loss


def test_quadratic_loss_gradient_matches_finite_differences(f64):
    """The fixture's Tape loss (the kernel above): its float64 gradient along random directions of each Param
    against central differences, so the BFGS tests below read a true gradient."""
    params, forward, loss = _quadratic(np.array([[100.0, 30.0], [30.0, 10.0]]), (0.4, -0.2), (0.45, -0.3))
    for p in params:
        report = tgs.check_param_gradient(forward, loss, p, direction_count=3, eps=1e-6, rtol=1e-6)
        assert report.ok, f"{p.name}: {report}"
        assert max(abs(g) for g in report.analytic) > 1e-3, f"{p.name}: the gradient should not vanish here"


@pytest.mark.parametrize("H, words", [
    (np.eye(3), "expected a finite symmetric (2, 2) matrix"),
    (np.array([[1.0, 2.0], [0.0, 1.0]]), "expected a finite symmetric (2, 2) matrix"),
    (np.array([[1.0, np.nan], [np.nan, 1.0]]), "expected a finite symmetric (2, 2) matrix"),
    (np.array([[1.0, 2.0], [2.0, 1.0]]), "expected a positive definite matrix"),
])
def test_bad_inverse_hessian_is_named(f64, H, words):
    params, forward, loss = _quadratic(np.eye(2), (0.0, 0.0), (1.0, 1.0))
    for call in (lambda: tgs.BFGS(params, lr=0.5, inverse_hessian=H),
                 lambda: tgs.identify(params, forward=forward, loss=loss, starts=1, local_starts=1, adam_iters=0,
                                      bfgs_iters=2, bfgs_lr=0.5, log_every=0, bfgs_inverse_hessian=H)):
        with pytest.raises(ValueError) as err:
            call()
        assert "inverse_hessian" in str(err.value) and words in str(err.value), str(err.value)


def test_given_curvature_makes_the_first_step_newton(f64):
    """On an ill-conditioned quadratic the first BFGS step is a gradient step of the whole trust radius (it leaves
    a start near the minimum); from the exact inverse Hessian it is the Newton step, onto the minimum.  identify
    hands the curvature to its BFGS stage and returns the one its run ended with."""
    A, m = np.array([[100.0, 30.0], [30.0, 10.0]]), np.array([0.4, -0.2])
    start = (0.45, -0.3)
    for H0, lands in ((None, False), (np.linalg.inv(A), True)):
        params, forward, loss = _quadratic(A, m, start)
        hist = tgs.optimize(forward, loss, tgs.BFGS(params, lr=0.5, inverse_hessian=H0), iters=1, log_every=0)
        x = np.array([p.value() for p in params], dtype=np.float64).ravel()
        assert (np.abs(x - m).max() < 1e-9) == lands, (H0, x)
        assert hist.loss[0] > 0
    params, forward, loss = _quadratic(A, m, start)
    res = tgs.identify(params, forward=forward, loss=loss, starts=1, local_starts=1, adam_iters=0, bfgs_iters=3,
                       bfgs_lr=0.5, log_every=0, bfgs_inverse_hessian=np.linalg.inv(A))
    assert [res.values["a"], res.values["b"]] == pytest.approx(m, abs=1e-9)
    H = res.runs[0].inverse_hessian
    assert H is not None and H.shape == (2, 2) and np.all(np.linalg.eigvalsh(H) > 0)
    assert "inverse_hessian" not in res.runs[0].to_dict()          # not in the JSON report


def test_coarse_option_in_scene_files():
    from tigradsim.scenes.scene_coarse import coarse_spec

    jelly = _toml(JELLY)
    assert parse_scene(jelly, JELLY).fit.coarse is None
    jelly["fit"]["coarse"] = {"resolution": 12, "substeps": 10, "iterations": 5}
    spec = parse_scene(jelly, JELLY)
    assert spec.fit.coarse == {"resolution": 12, "substeps": 10, "iterations": 5}
    coarse = coarse_spec(spec)
    assert coarse.mpm_grid["resolution"] == 12 and coarse.substeps == 10 and coarse.dt is None
    assert coarse.fit.coarse is None and spec.mpm_grid["resolution"] == 16 and spec.substeps == 20
    given = coarse_spec(spec, {"substeps": 5})                     # fit_scene(coarse=...) over the file's
    assert given.substeps == 5 and given.mpm_grid["resolution"] == 16
    for bad, words in (([12], "expected a table"), ({}, "expected substeps and/or resolution"),
                       ({"iterations": 3}, "expected substeps and/or resolution"),
                       ({"resolution": 12, "grid": 3}, "unknown key(s) ['grid']"),
                       ({"substeps": 0}, "substeps: expected an integer >= 1, got 0"),
                       ({"resolution": 12.0}, "resolution: expected an integer >= 4, got 12.0")):
        jelly["fit"]["coarse"] = bad
        with pytest.raises(SceneError) as err:
            parse_scene(jelly, JELLY)
        assert "coarse" in str(err.value) and words in str(err.value), str(err.value)
    box = _toml(BOX_PUSH)
    box["fit"]["coarse"] = {"resolution": 12}
    with pytest.raises(SceneError) as err:
        coarse_spec(parse_scene(box, BOX_PUSH))
    assert "coarse" in str(err.value) and "no [mpm_grid]" in str(err.value), str(err.value)


def _jelly_data(E, fit):
    """The jelly file as a drop onto the floor (test_grid_bias's, at the file's grid 16), E = `E` [Pa], 6 frames at
    25 fps, the fit starting at E = 6e4, [fit] = fit."""
    data = _jelly_drop(16, E)
    data["unknowns"]["jelly.E"]["init"] = 6e4
    data["fit"] = fit
    return data


@pytest.mark.slow
def test_mpm_fit_searches_on_the_coarse_model_and_refines_on_the_file(f64):
    """Footage made by the jelly file (grid 16, 40 substeps, E = 2e4 Pa); the fit searches 3 starts and fits one at
    grid 12 / 20 substeps, then refines on the file's model from there: the estimate is the file's model's (near the
    truth), the report notes the coarse stage, the History holds both stages' rollouts, and asking for a finer
    "coarse" model is refused.  ~60 s of CPU (2 cores)."""
    from tigradsim.scenes.scene_build import Scene
    from tigradsim.scenes.scene_fit import fit_scene

    truth = 2e4
    maker = Scene(parse_scene(_jelly_data(truth, {}), JELLY), _footage(np.zeros((6, 64, 64)), 25.0),
                  requires_grad=False, unknowns=False)
    masks = maker.render()[..., -1].astype(np.float64)
    fit = {"optimizer": "bfgs", "iterations": 3, "polish_lr": 0.5, "starts": 3, "local_starts": 1,
           "grid_bias": False, "time_step_bias": False,
           "coarse": {"resolution": 12, "substeps": 20, "iterations": 6}}
    scene = Scene(parse_scene(_jelly_data(truth, fit), JELLY), _footage(masks, 25.0))
    lines = []
    result, history = fit_scene(scene, printer=lines.append)
    note = result.notes[0]
    assert note.startswith("coarse stage ([fit] coarse: resolution 12, substeps 20): 3 starts scored, 1 fitted"), note
    assert "from its BFGS curvature" in note
    assert any(line.startswith("coarse stage (resolution 12, substeps 20") for line in lines)
    # the refinement: one start (the coarse minimum), its own search rollout and at most 3 BFGS steps
    assert len(result.search) == 1 and len(result.runs) == 1
    coarse_e = float(note.split("jelly.E=")[1].split(")")[0])
    assert result.search[0][0]["jelly.E"] == pytest.approx(coarse_e, rel=1e-4)
    assert abs(math.log(result.values["jelly.E"] / truth)) < 0.05, result.values
    assert result.minima[0].report is not None                     # the intervals are the file's model's
    assert len(history.loss) >= 3 + 2 + 1 + 2                      # coarse search + fit, fine search + fit
    stage = result.to_dict()["coarse_stage"]                        # the coarse search in the JSON report
    assert len(stage["search"]) == 3 and stage["minima"][0]["values"]["jelly.E"] == pytest.approx(coarse_e, rel=1e-4)
    scene.spec.fit.coarse = {"resolution": 20}
    with pytest.raises(SceneError) as err:
        fit_scene(scene, printer=lines.append)
    assert "finer than the file's MPM grid (16)" in str(err.value), str(err.value)
