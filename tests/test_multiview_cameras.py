"""Each camera of a several-view fit refines its own pose (`view_camera_params`, `CameraPriors`,
tigradsim/fitting/camera_prior.py): the per-view pose corrections' Tape gradient against float64 central
differences, the priors weighed per view (Tape term and residuals agree), and, on a two-view clip whose
second camera was calibrated wrong, refinement moves that camera back and leaves the right one put."""
import math

import numpy as np
import pytest

import tigradsim as tgs
from tigradsim.fitting.camera_prior import CameraPriors, view_camera_params
from tigradsim.fitting.views import View
from tigradsim.io.footage import render_at_times
from tigradsim.renderers import Camera, SoftRasterizer

from pushed_box import pushed_box

FRAMES = 6
# the wrong calibration of camera "above": turned by ~0.9 degree and moved by ~2.3 cm (camera axes)
ABOVE_ERROR = np.array([0.012, -0.008, 0.006, 0.015, -0.012, 0.012])


def _two_views(size, sigma):
    """A box pushed along +x on the ground, seen from the side ("along") and from above ("above"),
    `size` px, FRAMES frames; returns (model, sim, {name: renderer})."""
    model, sim, faces, nverts = pushed_box(steps=80, checkpoint_every=40)
    times = 0.011 + np.arange(FRAMES) / 40.0
    cams = {"along": Camera(eye=(-1.2, 0.6, 1.1), target=(-0.2, 0.1, 0.0), fov=30, width=size, height=size),
            "above": Camera(eye=(-0.15, 1.6, 0.01), target=(-0.15, 0.1, 0.0), up=(0.0, 0.0, -1.0), fov=30,
                            width=size, height=size)}
    renderers = {}
    for name, cam in cams.items():
        renderers[name] = SoftRasterizer(cam, faces, nverts, frames=FRAMES, sigma=sigma, gamma=1e-4,
                                         shading="silhouette")
        render_at_times(sim, renderers[name], times, source="rigid")
    return model, sim, renderers


def _pixels(camera, points):
    """(N, 2) pixel positions of world points (N, 3) in a perspective numpy `Camera`."""
    x = points @ camera.R.T + camera.t
    uv = x @ camera.K.T
    return uv[:, :2] / uv[:, 2:3]


def test_per_view_pose_gradient_and_prior_weighing(f64):
    """d(sum_v w_v (L_v + prior_v)) / d(both cameras' 6 pose corrections) from the Tape equals float64
    central differences; Params are named per camera; each view's prior term on the Tape is 2 / N_v times
    1/2 |rho_v|^2 of its residuals, rho_v scaled by sqrt(w_v) (the VideoFit's per-view scaling)."""
    model, sim, ren = _two_views(16, 2e-3)
    views = [View(ren["along"], name="along"), View(ren["above"], name="above", weight=0.5)]
    params, priors = view_camera_params(views, math.radians(0.5), 0.01, frames=FRAMES)
    assert [p.name for p in params] == ["camera_pose[along]", "camera_pose[above]"]
    assert isinstance(priors, CameraPriors) and priors.size == 12
    fit = tgs.VideoFit(sim, views, params)
    fit.set_target(fit.render())
    ren["along"].camera_delta.from_numpy(np.array([0.004, -0.003, 0.002, 0.005, 0.003, -0.004]))
    ren["above"].camera_delta.from_numpy(ABOVE_ERROR * 0.5)

    def forward():
        fit.forward()
        priors(fit.loss)

    deltas = [ren["along"].camera_delta, ren["above"].camera_delta]
    rep = tgs.check_gradient(forward, fit.loss, deltas, direction_count=4, eps=1e-6, rtol=1e-5)
    rep.assert_ok()
    assert np.all(np.abs(rep.analytic) > 1e-6), rep.analytic
    # the prior as residuals: per view, weighed against that view's residual count and weight
    image_only = fit.loss_value()
    fit.loss[None] = 0.0
    forward()
    sizes = fit.view_residual_sizes()
    rho = priors.residuals([n / FRAMES for n in sizes])
    assert rho.shape == (12,)
    # (rho_v carries sqrt(w_v), as the VideoFit's residuals of view v do: its Tape loss is 2 / N_v x 1/2 |.|^2)
    expected = sum(2.0 / n * 0.5 * rho[6 * i:6 * i + 6] @ rho[6 * i:6 * i + 6] for i, n in enumerate(sizes))
    assert float(fit.loss[None]) - image_only == pytest.approx(expected, rel=1e-10)
    with pytest.raises(ValueError, match=r"residuals_per_frame: expected one count per view \(2"):
        priors.residuals([10.0])
    with pytest.raises(ValueError, match=r"views\[0\] \('x'\): renderer: expected a renderer with a camera correction"):
        view_camera_params([View(object.__new__(type("Plain", (), {"image": None})), name="x")], 0.01, 0.01)


@pytest.mark.slow           # ~60 s on 2 shared cores (40 two-view rollouts with their gradients)
def test_refinement_recovers_the_wrong_camera(f64):
    """Footage of camera "above" made with ABOVE_ERROR applied, the fit starting from the (wrong)
    calibration of both cameras: the refined "above" reprojects the clip's region to within 0.05 px of the
    true camera (0.012 px measured, from 1.65 px), and "along", right from the start, stays within 0.01 px."""
    model, sim, ren = _two_views(40, 1e-3)
    views = [View(ren["along"], name="along"), View(ren["above"], name="above")]
    # noiseless footage: the per-residual variance the prior is weighed against is tiny (the default 2e-2,
    # meant for real masks, costs more at the true correction than the images left: it held the fit at 0.24 px)
    params, priors = view_camera_params(views, math.radians(3.0), 0.05, variance=1e-5, frames=FRAMES)
    fit = tgs.VideoFit(sim, views, params)
    ren["above"].camera_delta.from_numpy(ABOVE_ERROR)
    truth = {name: r.corrected_camera() for name, r in ren.items()}
    fit.set_target(fit.render())
    for r in ren.values():
        r.reset_camera_correction()
    region = np.array([[x, y, z] for x in (-0.4, -0.1, 0.2) for y in (0.0, 0.2) for z in (-0.1, 0.1)])

    def reprojection(name):
        return np.abs(_pixels(ren[name].corrected_camera(), region) - _pixels(truth[name], region)).max()

    before = reprojection("above")

    def forward():
        fit.forward()
        priors(fit.loss)

    history = tgs.optimize(forward, fit.loss, tgs.BFGS(params, lr=4e-3), iters=40, log_every=0)
    assert history.loss[-1] < 1e-4 * history.loss[0]
    assert before > 1.0
    assert reprojection("above") < 0.05, (before, reprojection("above"), ren["above"].camera_delta.to_numpy())
    assert reprojection("along") < 0.01, reprojection("along")
