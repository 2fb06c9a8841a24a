"""The MPM grid's bias as a systematic of the intervals ([fit] grid_bias; tigradsim/fitting/grid_bias.py), and
the one refined-model mechanism it shares with the time step's (tigradsim/fitting/refined_model.py,
tigradsim/scenes/scene_refined.py): bad input, labels and factors, the scene file's option, the systematic
present in an MPM scene's report and absent from a rigid one's, and a known case: footage made by the file at
the finer grid, where the linearised refit from the coarse grid's estimate must point at the truth."""
import math
import os

import numpy as np
import pytest

from tigradsim.fitting.grid_bias import GRID_ORDER, GRID_REFINEMENT, finer_resolution, grid_label, \
    grid_refinement, grid_systematics
from tigradsim.fitting.horizons import richardson_factor as step_factor
from tigradsim.fitting.refined_model import Refinement, richardson_factor
from tigradsim.fitting.time_step_bias import time_step_label, time_step_systematics
from tigradsim.scenes.scene_file import SceneError, parse_scene

try:
    import tomllib
except ModuleNotFoundError:            # pragma: no cover
    import tomli as tomllib

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
JELLY = os.path.join(ROOT, "demos", "scenes", "mpm_jelly.toml")
BOX_PUSH = os.path.join(ROOT, "demos", "scenes", "box_push.toml")


def _toml(path):
    with open(path, "rb") as fh:
        return tomllib.load(fh)


@pytest.mark.parametrize("call, words", [
    (lambda: finer_resolution(0), "resolution: expected a grid resolution"),
    (lambda: finer_resolution(24.0), "resolution: expected a grid resolution"),
    (lambda: finer_resolution(24, refinement=1.0), "refinement: expected a ratio > 1"),
    (lambda: grid_refinement(24, 20), "fine_resolution: expected more cells than the fit's resolution 24, got 20"),
    (lambda: grid_systematics(np.ones((2, 3)), 24), "refined_residuals: expected a non-empty flat (N,)"),
    (lambda: grid_systematics(np.ones(3), True), "resolution: expected a grid resolution"),
    (lambda: Refinement("", 2.0, 1), "label: expected a non-empty name"),
    (lambda: Refinement("x", 1.0, 1), "ratio: expected a refinement ratio > 1"),
    (lambda: richardson_factor(0), "order: expected a positive order"),
    (lambda: richardson_factor(1, float("nan")), "ratio: expected a refinement ratio > 1"),
    (lambda: time_step_systematics(np.ones(3), -1e-3), "dt: expected a positive time step"),
])
def test_bad_input_is_named(call, words):
    with pytest.raises(ValueError) as err:
        call()
    assert words in str(err.value), str(err.value)


def test_labels_and_richardson_factors():
    r = np.arange(5.0)
    (label, (res, factor)), = grid_systematics(r, 24).items()
    assert label == grid_label(24, 32) == "MPM grid (resolution 24 against 32)"
    assert finer_resolution(24) == 32 and finer_resolution(3) == 4 and GRID_REFINEMENT == 4.0 / 3.0
    q = 32 / 24
    assert factor == pytest.approx(q ** GRID_ORDER / (q ** GRID_ORDER - 1)) and res is r
    # a callable is one rollout of the refined model, run when asked
    assert list(grid_systematics(lambda: r, 16, 20).values())[0][1] == pytest.approx(1.25 / 0.25)
    # the time step is the same mechanism at ratio 2: its factor and label are unchanged
    (label, (_, factor)), = time_step_systematics(r, 1e-3).items()
    assert label == time_step_label(1e-3) and factor == step_factor() == 2.0 == richardson_factor(1, 2)
    assert richardson_factor(2, 2) == pytest.approx(4 / 3)


def test_grid_bias_option_in_scene_files():
    jelly, box = _toml(JELLY), _toml(BOX_PUSH)
    assert jelly["fit"].pop("grid_bias") is False                     # the demo: a clip made at its own grid
    assert parse_scene(jelly, JELLY).fit.grid_bias is True            # on by default with MPM matter
    jelly["fit"]["grid_bias"] = False
    assert parse_scene(jelly, JELLY).fit.grid_bias is False
    assert parse_scene(box, BOX_PUSH).fit.grid_bias is False          # no grid: off
    box["fit"]["grid_bias"] = True
    with pytest.raises(SceneError) as err:
        parse_scene(box, BOX_PUSH)
    assert "grid_bias" in str(err.value) and "no MPM grid" in str(err.value), str(err.value)
    jelly["fit"]["grid_bias"] = "yes"
    with pytest.raises(SceneError) as err:
        parse_scene(jelly, JELLY)
    assert "grid_bias" in str(err.value) and "true or false" in str(err.value), str(err.value)


def _footage(masks, fps):
    from tigradsim.io.footage import Footage

    footage = Footage(np.repeat(masks[..., None], 3, -1), fps, masks=masks, check_masks=False)
    footage.factor, footage.full_size = 1, masks.shape[1:]
    return footage


def _jelly_data(resolution, E):
    """The jelly file as a drop onto the floor at `resolution`, E = `E` [Pa], 6 frames at 25 fps."""
    data = _toml(JELLY)
    data.pop("footage")
    data["mpm_grid"]["resolution"] = resolution
    data["objects"]["jelly"].update(position=[0.5, 0.3, 0.5], params={"E": E, "nu": 0.3}, velocity=[0.0, -1.0, 0.0])
    data["simulation"] = {"substeps": 40, "duration": 6 / 25.0}
    data["unknowns"] = {"jelly.E": {"init": E, "lower": 2e3, "upper": 1e5}}
    data["fit"] = {"optimizer": "bfgs", "iterations": 4}
    return data


@pytest.mark.slow
def test_mpm_report_has_the_grid_systematic_and_it_points_at_the_truth(f64):
    """Footage made by the jelly file at the finer grid (resolution 16, E = 2e4 Pa) and fitted at 12.  The
    refined scene the mechanism builds is that file (its residuals at the truth are zero: particles resampled
    at the finer cells, splats of the finer lattice); at the coarse grid's own estimate of E (a scan of the
    coarse loss) the report carries both systematics, and the grid's shift without its Richardson factor, the
    linearised refit onto the finer model, takes log E from the coarse estimate at least half the way to the
    truth and not far past it; the 95 % interval covers the estimate moved by it (factor included).  ~40 s of CPU (2 cores)."""
    from tigradsim.fitting.uncertainty import fit_report
    from tigradsim.scenes.scene_build import Scene

    truth = 2e4
    fine = Scene(parse_scene(_jelly_data(16, truth), JELLY), _footage(np.zeros((6, 64, 64)), 25.0),
                 requires_grad=False)
    masks = fine.render()[..., -1].astype(np.float64)
    assert masks.sum() > 50 * 6
    scene = Scene(parse_scene(_jelly_data(12, truth), JELLY), _footage(masks, 25.0), requires_grad=False)
    label = grid_label(12, 16)

    systematics = scene.model_systematics()
    assert set(systematics) == {label, time_step_label(scene.dt)}
    r_fine, factor = systematics[label]
    assert np.abs(r_fine).max() < 1e-6 and factor == pytest.approx(4.0)
    assert scene.finer_grid_scene().model.mpm_particle_count > 2 * scene.model.mpm_particle_count

    def loss(log_e):
        scene.set_values({"jelly.E": math.exp(log_e)})
        r = scene.residuals()
        return float(r @ r)

    grid = np.log(truth) + np.linspace(-0.6, 0.6, 13)
    losses = [loss(g) for g in grid]
    k = int(np.argmin(losses))
    assert 0 < k < len(grid) - 1, losses
    a, b, c = losses[k - 1:k + 2]                         # the parabola through the scan's minimum
    h = grid[1] - grid[0]
    estimate = grid[k] + 0.5 * h * (a - c) / (a - 2 * b + c)
    error = np.log(truth) - estimate
    assert abs(error) > 0.02, (error, "the coarse grid must be measurably biased for this test to say anything")
    scene.set_values({"jelly.E": math.exp(estimate)})
    report = fit_report(scene.residuals, scene.params, systematics=scene.grid_systematics())
    shift = report.systematics[label][0] / factor        # the refit onto the finer model, log E
    assert 0.5 < shift / error < 1.2, (shift, error)      # measured: 0.261 / 0.374 (E 13.8e3 at 12, f64)
    e = report.estimates[0]
    assert e.bias == pytest.approx(report.systematics[label][0])
    assert e.lower95 <= math.exp(estimate + min(0.0, e.bias)) and e.upper95 >= math.exp(estimate + max(0.0, e.bias))


@pytest.mark.slow
def test_rigid_report_has_no_grid_systematic():
    """A rigid scene (the box push, no MPM grid): only the time step's systematic; asking it for the grid's names
    what is missing.  ~15 s."""
    import tigradsim as tgs
    from tigradsim.scenes.scene_build import Scene, load_scene_footage

    tgs.init(arch="cpu")
    data = _toml(BOX_PUSH)
    spec = parse_scene(data, BOX_PUSH)
    scene = Scene(spec, load_scene_footage(spec))
    scene.use_frames(4)
    assert list(scene.model_systematics()) == [time_step_label(scene.dt)]
    with pytest.raises(ValueError) as err:
        scene.grid_systematics()
    assert "no [mpm_grid]" in str(err.value), str(err.value)


def test_two_systematics_of_opposite_sign_do_not_narrow_the_interval(f64):
    """Linear least squares y = X beta with two refined models (the time step's and the grid's, shifts +d and
    -2 d with factors 2 and 4): `Estimate.bias` is their sum, and the 95 % interval covers the estimate moved
    by either of them alone, not only by the sum (one bias estimate of the wrong sign must not cancel another)."""
    import taichi as ti

    import tigradsim as tgs
    from tigradsim.fitting.uncertainty import Z95

    rng = np.random.default_rng(5)
    X = np.stack([np.ones(200), rng.normal(size=200)], axis=1)
    y = X @ np.array([1.0, 2.0]) + rng.normal(0.0, 0.01, 200)
    p = tgs.Param(ti.field(float, shape=2, needs_grad=True), "beta")
    b = np.linalg.lstsq(X, y, rcond=None)[0]
    p.write(b)
    r = X @ b - y
    d = np.array([0.05, -0.02])
    systematics = {**time_step_systematics(X @ b - (y + X @ d), 1e-3),           # shift 2 d
                   **grid_systematics(X @ b - (y - X @ d / 2), 24)}              # shift 4 (-d / 2) = -2 d
    rep = tgs.fit_report(None, [p], noise_floor=0.0, jacobian=(X, r), systematics=systematics)
    for i in range(2):
        e = rep[f"beta[{i}]"]
        shifts = [v[i] for v in rep.systematics.values()]
        assert sorted(shifts) == pytest.approx(sorted([2 * d[i], -2 * d[i]]), rel=1e-9)
        assert e.bias == pytest.approx(0.0, abs=1e-12)
        assert e.lower95 == pytest.approx(e.value - 2 * abs(d[i]) - Z95 * e.std, rel=1e-9)
        assert e.upper95 == pytest.approx(e.value + 2 * abs(d[i]) + Z95 * e.std, rel=1e-9)


def test_profile_is_auto_by_default_in_mpm_scene_files():
    """[fit] profile: "auto" by default with MPM matter (the unknowns whose Laplace interval is suspect are
    profiled; fitting/profile.py), off without; a file's own setting wins."""
    jelly, box = _toml(JELLY), _toml(BOX_PUSH)
    assert "profile" not in jelly["fit"] and "profile" not in box["fit"]
    spec = parse_scene(jelly, JELLY)
    assert spec.fit.profile == "auto" and spec.fit.profile_check is False
    assert parse_scene(box, BOX_PUSH).fit.profile is False
    jelly["fit"]["profile"] = False
    assert parse_scene(jelly, JELLY).fit.profile is False
    jelly["fit"].update(profile="auto", profile_check=True)
    assert parse_scene(jelly, JELLY).fit.profile_check is True
