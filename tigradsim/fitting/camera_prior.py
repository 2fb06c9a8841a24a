"""The calibration's uncertainty as a Gaussian prior on the renderer's camera correction
(`CameraPrior`), the correction's Params within the calibration's bounds (`camera_params`) and
the corrected camera in a report (`camera_report`): used by tigradsim/scenes/scene_build.py for
[fit] refine_camera, and by any `VideoFit` / `identify` user whose renderer has a camera correction:

    params, prior = camera_params(renderer, math.radians(0.5), 0.01, frames=K)
    fit = VideoFit(sim, renderer, unknowns + params)      # forward: fit.forward(); prior(fit.loss)

Several cameras (`View`s, fitting/views.py): each view's renderer has its own correction, refined with
its own prior (`view_camera_params`, `CameraPriors`), so a camera whose calibration is off moves alone:

    params, priors = view_camera_params(fit.views, math.radians(0.5), 0.01, frames=K)
    # forward: fit.forward(); priors(fit.loss);  residuals: fit.residuals(), then
    #          priors.residuals([n / K for n in fit.view_residual_sizes()])

No `from __future__ import annotations` here: Taichi reads the kernel's annotations.
"""
import math

import numpy as np
import taichi as ti

from .optim import Param

__all__ = ["CameraPrior", "CameraPriors", "camera_params", "view_camera_params", "camera_report", "CAMERA_ROTATION_BOUND", "CAMERA_SHIFT_BOUND",
           "FOCAL_BOUND", "CAMERA_LR", "CAMERA_PRIOR_VARIANCE"]

# Bounds of the camera correction: the calibration is taken to be right to within a few degrees, a few
# centimetres and a quarter of the focal length.
CAMERA_ROTATION_BOUND = math.radians(3.0)      # rad, each rotation-vector component
CAMERA_SHIFT_BOUND = 0.05                      # world units (m), each component in camera axes
FOCAL_BOUND = 1.25                             # focal scale within [1 / 1.25, 1.25]
# Adam's step is about lr per iteration in each coordinate: the unknowns' lr (log units, a few %) would
# turn the camera by degrees per step; CAMERA_LR rad / m is the scale of a calibration error.  BFGS takes it
# as the camera's trust radius and scales its first step and curvature guess by it (optim.BFGS)
CAMERA_LR = 2e-3
CAMERA_PRIOR_VARIANCE = 2e-2                   # the default `variance` (CameraPrior's docstring says why)


@ti.kernel
def _add_prior(delta: ti.template(), w: ti.template(), loss: ti.template()):
    """loss += sum_i w_i delta_i^2 over the 6 components."""
    ti.loop_config(serialize=True)        # a fixed summation order (deterministic)
    for i in range(6):
        loss[None] += w[i] * delta[i] * delta[i]


class CameraPrior:
    """Gaussian prior on the 6-DoF camera correction `delta` = renderer.camera_delta
    (rotation vector [rad], translation [world units, m], renderers/softras/projection.py), zero mean, std
    `sigmas` (6,) per component: a calibrated camera is right to within its calibration's
    uncertainty, and without the prior a mask-only fit trades a turn for a shift and lets
    the camera absorb model mismatch (issue 15: 3.2 degrees / 86 mm for a 0.5 degree /
    1 cm error).

    One objective for every consumer (least squares, Adam / BFGS, fit_report):

        residuals:  the image residuals r (N values, G frames), then
                    rho_i = delta_i / sigma_i * sqrt(variance * N / G)        (6 values)
        Tape loss:  the image loss, plus  (variance / G) * sum_i (delta_i / sigma_i)^2

    The image loss is a mean over the N = G * (residuals per frame) values, i.e. 2 / N
    times 1/2 |r|^2 (for its unblurred level), so the Tape term is exactly 2 / N times
    1/2 |rho|^2.  (With mask + RGB supervision the Tape loss is the mean of each part, so
    it weighs the mask residuals 3x against 1/2 |r|^2 and the two objectives differ by that
    weighting of the image parts; the prior is scaled by the total N / G.)  `variance` ([fit] camera_prior_variance) is the per-residual variance
    the prior is weighed against.  In the 1/2 |r|^2 units a correction of one sigma costs
    as much as one frame's residuals (N / G values) of that variance: the data move the
    camera by several sigma only when that removes more than a few frames' worth of
    mismatch.  Pixels of a frame are not independent (their errors move together with
    a silhouette edge), so weighing the prior against the iid pixel noise would make it
    ~N / G times too weak.  Weighed so, the prior is the Bayesian one for G independent
    frames whose residual norm |r_g|^2 is P x `variance` (P residuals per frame).
    Default 2e-2 ([fit] camera_prior_variance), measured on the footage benchmark's box
    clip (camera moved 1 cm, turned 0.5 degree; masks at 128 px with the camera-sharp
    silhouette edge, [fit] edge_softness "auto"): variance 3e-3 let the correction trade with the
    physics (mass +3.3 %, mu -6.0 %); 1e-2: 0.34 degree / 4.6 mm recovered, mass -0.24 %,
    mu +0.12 %; 2e-2: mass +0.03 %, mu -0.22 %; 3e-2: 0.30 degree / 4.0 mm, mass +0.20 %,
    mu -0.44 % (stiffer: more of the camera error goes into mu).  The default sits inside
    the plateau 1e-2 - 3e-2 rather than at its edge.  (With the softer edge the benchmark
    used before, edge softness 3e-4, the plateau sat lower, around 3e-3: the weight is relative to
    the image loss's curvature, which a sharper edge raises.)  One clip: treat it as a
    starting point and check the correction the report prints against your calibration.
    """

    def __init__(self, delta, sigmas, variance):
        sig = np.asarray(sigmas, dtype=np.float64).reshape(-1)
        if sig.shape != (6,) or not np.all(np.isfinite(sig) & (sig > 0)):
            raise ValueError(f"sigmas: expected 6 positive finite prior stds (3 rotation [rad], 3 translation "
                             f"[m]), got {np.asarray(sigmas).tolist()}")
        if not (np.isfinite(variance) and variance > 0):
            raise ValueError(f"variance: expected a positive finite per-residual variance, got {variance!r}")
        if tuple(delta.shape) != (6,):
            raise ValueError(f"delta: expected the (6,) camera_delta field, got shape {tuple(delta.shape)}")
        self.delta, self.sigmas, self.variance = delta, sig, float(variance)
        self.weights = ti.field(delta.dtype, shape=6)        # variance / (G sigma_i^2), set by set_frames
        self.frames = None
        self.set_frames(1)

    def set_frames(self, frames):
        """G, the number of footage frames the image loss compares now."""
        self.frames = int(frames)
        if self.frames < 1:
            raise ValueError(f"frames: expected a frame count >= 1, got {frames!r}")
        self.weights.from_numpy(self.variance / (self.frames * self.sigmas ** 2))

    def __call__(self, loss):
        """loss += (variance / G) sum (delta_i / sigma_i)^2 (on the Tape)."""
        self._add(self.delta, self.weights, loss)

    def _add(self, delta, w, loss):
        _add_prior(delta, w, loss)

    def residuals(self, residuals_per_frame):
        """rho (6,): delta_i / sigma_i * sqrt(variance * residuals_per_frame)."""
        d = self.delta.to_numpy().astype(np.float64)
        return d / self.sigmas * math.sqrt(self.variance * residuals_per_frame)


def camera_params(renderer, sigma_rotation, sigma_translation, variance=CAMERA_PRIOR_VARIANCE, frames=1,
                  refine_focal=False):
    """The renderer's camera correction as Params to fit with the unknowns, and its prior.

    Returns ([pose Param (6,): rotation vector [rad] and translation in camera axes [m] within
    +-CAMERA_ROTATION_BOUND / +-CAMERA_SHIFT_BOUND, Adam lr CAMERA_LR] + [focal-scale Param in
    [1 / FOCAL_BOUND, FOCAL_BOUND], log space, when refine_focal], CameraPrior on the pose with
    stds sigma_rotation [rad] (each rotation component) and sigma_translation [m], the per-residual
    `variance`, set to `frames` footage frames).  The prior belongs in every objective the fit
    uses: `prior(loss)` after the image loss on the Tape, `prior.residuals(N / frames)` after the
    image residuals (N of them)."""
    if not (hasattr(renderer, "camera_delta") and hasattr(renderer, "focal_scale")):
        raise ValueError(f"renderer: expected a renderer with a camera correction (camera_delta, focal_scale), "
                         f"got {type(renderer).__name__}")
    r, d = CAMERA_ROTATION_BOUND, CAMERA_SHIFT_BOUND
    out = [Param(renderer.camera_delta, "camera_pose", lower=np.array([-r] * 3 + [-d] * 3),
                 upper=np.array([r] * 3 + [d] * 3), lr=CAMERA_LR)]
    prior = CameraPrior(renderer.camera_delta, [sigma_rotation] * 3 + [sigma_translation] * 3, variance)
    prior.set_frames(frames)
    if refine_focal:
        out.append(Param(renderer.focal_scale, "camera_focal", lower=1 / FOCAL_BOUND, upper=FOCAL_BOUND,
                         log_space=True))
    return out, prior


class CameraPriors:
    """The priors of several views' camera corrections (one `CameraPrior` each), used as one.

    Why per view with the view's weight w_v in its variance: a VideoFit's Tape loss is
    sum_v w_v L_v and its residuals [sqrt(w_v) r_v], so each camera's prior is weighed against
    its own view's residuals exactly as a single camera's is (`CameraPrior`), scaled like them:
    Tape term w_v (variance / G) sum_i (delta_v,i / sigma_i)^2, residuals sqrt(w_v) rho_v."""

    def __init__(self, priors, names):
        self.priors, self.names = list(priors), list(names)

    def set_frames(self, frames):
        """G: the footage frames each view's image loss compares now (one count for all, or one per view)."""
        counts = list(np.atleast_1d(frames))
        if len(counts) == 1:
            counts = counts * len(self.priors)
        if len(counts) != len(self.priors):
            raise ValueError(f"frames: expected one frame count, or one per view ({len(self.priors)}: {self.names}), "
                             f"got {len(counts)}")
        for prior, g in zip(self.priors, counts):
            prior.set_frames(int(g))

    def __call__(self, loss):
        for prior in self.priors:
            prior(loss)

    @property
    def size(self) -> int:
        """The number of prior residuals: 6 per view."""
        return 6 * len(self.priors)

    def residuals(self, residuals_per_frame):
        """rho (6 V,): each view's 6 (`CameraPrior.residuals`), in view order; residuals_per_frame: one
        count per view (its residuals / G, e.g. `VideoFit.view_residual_sizes()` / G)."""
        counts = list(np.atleast_1d(residuals_per_frame))
        if len(counts) != len(self.priors):
            raise ValueError(f"residuals_per_frame: expected one count per view ({len(self.priors)}: "
                             f"{self.names}), got {len(counts)}")
        return np.concatenate([p.residuals(n) for p, n in zip(self.priors, counts)])


def view_camera_params(views, sigma_rotation, sigma_translation, variance=CAMERA_PRIOR_VARIANCE, frames=1,
                       refine_focal=False):
    """Every view's camera correction as Params (`camera_params` per view, named "camera_pose[NAME]",
    "camera_focal[NAME]"), and their priors as one `CameraPriors` (each view's variance times its
    weight).  views: `View`s (a VideoFit's `views`), each with its own renderer; frames: the footage frames
    G each view's image loss compares (one count for all, or one per view)."""
    views = list(views)
    if not views:
        raise ValueError("views: expected at least one View, got none")
    counts = list(np.atleast_1d(frames))
    counts = counts * len(views) if len(counts) == 1 else counts
    if len(counts) != len(views):
        raise ValueError(f"frames: expected one frame count, or one per view ({len(views)}), got {frames!r}")
    params, priors = [], []
    for i, view in enumerate(views):
        name = view.name if view.name is not None else f"view {i}"
        try:
            out, prior = camera_params(view.renderer, sigma_rotation, sigma_translation,
                                       variance * view.weight, int(counts[i]), refine_focal)
        except ValueError as exc:
            raise ValueError(f"views[{i}] ({name!r}): {exc}") from None
        for p in out:
            p.name = f"{p.name}[{name}]"
        params += out
        priors.append(prior)
    return params, CameraPriors(priors, [v.name for v in views])


def camera_report(renderer, camera, factor=1, axes=None) -> dict:
    """The fitted camera correction of `renderer` and the corrected camera as OpenCV K, R, t.

    camera: the calibrated `Camera` the correction starts from; factor: footage pixels per render
    pixel (K is given in the footage's pixels); axes: the (3, 3) matrix M from the caller's axes to
    the world's (x_world = M x_file), so that R maps the caller's axes (identity: the world's)."""
    omega, shift, k = renderer.camera_correction()
    cam = renderer.corrected_camera()
    M = np.eye(3) if axes is None else np.asarray(axes, dtype=np.float64)
    K = cam.K.copy()                       # back to the footage's pixels
    K[:2, :2] *= factor
    K[0, 2] = (K[0, 2] + 0.5) * factor - 0.5
    K[1, 2] = (K[1, 2] + 0.5) * factor - 0.5
    R_file = cam.R @ M                     # x_cam = R' x_world + t = R' M x_file + t
    return {"rotation_vector_rad": omega.tolist(), "rotation_deg": float(np.degrees(np.linalg.norm(omega))),
            "translation_camera_axes": shift.tolist(), "focal_scale": k,
            "camera_centre_moved_by": float(np.linalg.norm(cam.R.T @ cam.t - camera.R.T @ camera.t)),
            "K": K.tolist(), "R": R_file.tolist(), "t": cam.t.tolist()}
