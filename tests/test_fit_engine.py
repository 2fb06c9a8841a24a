"""The fit engine of tigradsim.fitting from plain Python on a tiny VideoFit (no scene file):
step-doubling horizons (`predictability`, `copy_values`), the time step's bias
(`time_step_systematics` into `fit_report`), residual clusters (`residual_groups`), parameter
packing (`pack`, `unpack`, `internal_bounds`) and the camera correction (`camera_params`,
`camera_report`).

The clip: a box in free flight (no ground), pushed along +x by 4 N for its first 0.1 s and
filmed at 40 fps, 24 px, silhouettes; its mass is the unknown.  Semi-implicit Euler errs by
O(dt) here, so Richardson's factor 2 makes the step-doubling estimate of the dt rollout's error
(and of the dt fit's bias) close to the error measured against a rollout at dt / 16."""
import math

import numpy as np
import pytest

import tigradsim as tgs
from tigradsim.fitting.camera_prior import CameraPrior, camera_params, camera_report
from tigradsim.fitting.horizons import copy_values, predictability, richardson_factor, silhouette_disagreement
from tigradsim.fitting.optim import internal_bounds, least_squares, pack, unpack
from tigradsim.fitting.residual_groups import frame_blocks, interval_blocks, residual_groups
from tigradsim.fitting.time_step_bias import time_step_systematics
from tigradsim.fitting.uncertainty import fit_report
from tigradsim.io.footage import render_at_times
from tigradsim.io.meshes import box_surface
from tigradsim.renderers import Camera, SoftRasterizer

FPS, RES, K = 40.0, 24, 9
DT = 1.0 / 120.0
TIMES = 0.011 + np.arange(K) / FPS
TRUE_MASS = 1.0


def _fit(dt):
    """A silhouette VideoFit of the pushed box at step dt (mass the unknown, log space, [0.2, 5] kg)."""
    v, f = box_surface((0.2, 0.2, 0.2))
    b = tgs.SceneBuilder(gravity=(0.0, -9.8, 0.0))
    body = b.add_rigid_body(v, f, mass=TRUE_MASS, position=(-0.3, 0.3, 0.0), velocity=(0.0, 1.0, 0.0),
                            angular_velocity=(0.0, 2.0, 1.0))
    b.component(tgs.rigid.RigidBodies).add_force(b, body, force=(4.0, 0.0, 0.0), start=0.0, end=0.1)
    model = b.finalize(requires_grad=True)
    sim = tgs.Simulator(model, dt=dt, steps=int(round(TIMES[-1] / dt)) + 1)
    cam = Camera(eye=(-0.1, 0.5, 1.6), target=(-0.1, 0.3, 0.0), fov=45, width=RES, height=RES)
    faces = np.concatenate([fc + model.body_vertex_start[i] for i, fc in enumerate(model.body_faces)])
    ren = SoftRasterizer(cam, faces, int(model.body_vertex_start[-1]), frames=K, sigma=2e-3, shading="silhouette")
    render_at_times(sim, ren, TIMES, source="rigid")
    mass = tgs.Param(model.body_mass, "mass", lower=0.2, upper=5.0, log_space=True)
    return tgs.VideoFit(sim, ren, [mass], check_view=False), model


@pytest.fixture(scope="module")
def fits():
    tgs.init(arch="cpu", precision="f64")
    fine, _ = _fit(DT / 16)
    truth = fine.render()[..., -1]
    fit, model = _fit(DT)
    half, half_model = _fit(DT / 2)
    for f in (fit, half):
        f.set_target(truth)
    return fit, model, half, half_model, truth


def test_packing_is_public_and_round_trips(fits):
    fit, model, *_ = fits
    model.set("body_mass", [1.3])
    x = pack(fit.params)
    assert x == pytest.approx([math.log(1.3)])
    lo, hi = internal_bounds(fit.params)
    assert lo == pytest.approx([math.log(0.2)]) and hi == pytest.approx([math.log(5.0)])
    unpack(fit.params, x + math.log(2.0))
    assert model.body_mass.to_numpy() == pytest.approx([2.6])
    unpack(fit.params, [math.log(50.0)])                 # clamped to the upper bound
    assert model.body_mass.to_numpy() == pytest.approx([5.0])
    model.set("body_mass", [TRUE_MASS])


def test_step_doubling_estimates_the_rollout_error(fits):
    """predictability's error (2 x the dt / dt/2 disagreement) is the dt rollout's distance from
    the dt/16 one within 25 % (Richardson for a first-order integrator), and the horizon is the
    leading frames within the tolerance."""
    fit, model, half, half_model, truth = fits
    model.set("body_mass", [0.8])
    copy_values(fit.params, half.params)
    assert half_model.body_mass.to_numpy() == pytest.approx([0.8])
    model.set("body_mass", [TRUE_MASS])
    copy_values(fit.params, half.params)
    pred = predictability(fit.render, half.render, tolerance=10.0, dt=DT)
    assert pred.frames == K and pred.horizon == K and pred.dt == DT
    measured = silhouette_disagreement(fit.render()[..., -1], truth)
    assert richardson_factor() == 2.0
    np.testing.assert_allclose(pred.error, 2.0 * pred.disagreement)
    late = slice(K // 2, K)                    # where the error has grown past the edge's round-off
    assert measured[late].min() > 0.05
    np.testing.assert_allclose(pred.error[late], measured[late], rtol=0.25)
    tol = 0.5 * (pred.error[K - 2] + pred.error[K - 1])        # the error grows: only the last frame past it
    assert pred.error[K - 1] > pred.error[K - 2]
    short = predictability(fit.render, half.render, tolerance=tol, dt=DT)
    assert short.horizon == K - 1 and "from frame 8 on" in short.reason()
    with pytest.raises(ValueError, match=r"tolerance: expected a positive number of pixels, got -1"):
        predictability(fit.render, half.render, tolerance=-1, dt=DT)
    with pytest.raises(ValueError, match=r"target: expected 1 Params to match source, got 0"):
        copy_values(fit.params, [])


def test_time_step_bias_moves_the_dt_estimate_towards_the_exact_one(fits):
    """Fitting the mass at dt to the dt/16 clip is off by the time step's bias; fit_report's
    systematic from `time_step_systematics` (the dt/2 fit's residuals, factor 2) predicts that
    shift: the estimate moved by it is closer to the truth than the dt estimate, by 3x or more."""
    fit, model, half, _, _ = fits
    model.set("body_mass", [1.2])
    least_squares(fit.residuals, fit.params, iters=8, log_every=0)
    estimate = float(model.body_mass.to_numpy()[0])
    copy_values(fit.params, half.params)
    systematics = time_step_systematics(half.residuals, DT)
    (label, (r_half, factor)), = systematics.items()
    assert label == "time step (dt 0.008333 s against dt / 2)" and factor == 2.0 and r_half.shape == (K * RES * RES,)
    groups = residual_groups([r_half.size], K, interval_blocks(K, 1))
    assert groups.shape == r_half.shape and np.array_equal(np.unique(groups), np.arange(6))
    report = fit_report(fit.residuals, fit.params, noise_floor=0.0, groups=groups, systematics=systematics)
    shift = report.systematics[label][0]
    corrected = math.exp(math.log(estimate) + shift)
    assert abs(math.log(estimate / TRUE_MASS)) > 1e-3, estimate        # the dt fit is measurably off
    assert abs(math.log(corrected / TRUE_MASS)) < abs(math.log(estimate / TRUE_MASS)) / 3, (estimate, corrected)
    model.set("body_mass", [TRUE_MASS])
    with pytest.raises(ValueError, match=r"dt: expected a positive time step in seconds, got 0"):
        time_step_systematics(r_half, 0)


def test_residual_groups_label_frame_blocks_per_part_and_a_prior_cluster():
    labels = residual_groups([12, 24], frames=6, blocks=3, extra=6, count=42)
    block = frame_blocks(6, 3)
    np.testing.assert_array_equal(labels[:12], np.repeat(block, 2))
    np.testing.assert_array_equal(labels[12:36], np.repeat(block, 4))
    np.testing.assert_array_equal(labels[36:], [3] * 6)
    assert interval_blocks(30, 1) == 6 and interval_blocks(30, 5) == 10 and interval_blocks(4, 5) == 4
    with pytest.raises(ValueError, match=r"residual_groups: 42 labels for 40 residuals"):
        residual_groups([12, 24], frames=6, blocks=3, extra=6, count=40)
    with pytest.raises(ValueError, match=r"part_sizes: .* got 13 residuals for 6 frames"):
        residual_groups([13], frames=6, blocks=3)


def test_camera_params_and_report_on_a_videofit_renderer(fits):
    fit, *_ = fits
    ren = fit.renderer
    params, prior = camera_params(ren, math.radians(0.5), 0.01, frames=K, refine_focal=True)
    assert [p.name for p in params] == ["camera_pose", "camera_focal"] and isinstance(prior, CameraPrior)
    assert prior.frames == K
    rep = camera_report(ren, ren.camera)
    assert rep["rotation_deg"] == 0.0 and rep["camera_centre_moved_by"] == pytest.approx(0.0, abs=1e-12)
    np.testing.assert_allclose(rep["R"], ren.camera.R, atol=1e-12)
    with pytest.raises(ValueError, match=r"renderer: expected a renderer with a camera correction"):
        camera_params(object(), 0.01, 0.01)
