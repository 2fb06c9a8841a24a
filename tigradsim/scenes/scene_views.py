"""Several cameras of a scene file ([[cameras]], tigradsim/scenes/scene_camera.py): each camera's
footage at the render resolution, its renderer observing the one simulator, and the `View`s of
the scene's `VideoFit` (tigradsim/fitting/views.py).

    spec = load_scene("two_cameras.toml")
    clips = load_views_footage(spec)             # one tgs.Footage per camera, checked against it
    scene = Scene(spec, clips)                   # one renderer per camera; the fit sums their losses
    scene.render_views()                         # [(K, H, W, C) per camera]

A file with one [camera] is one view named "camera" and builds exactly what it built before.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .scene_table import SceneError

__all__ = ["SceneView", "renamed_error", "load_views_footage", "build_views", "fit_views", "scene_camera_params",
           "scene_camera_report", "camera_summary", "camera_lines",
           "view_frame_counts", "view_residual_groups", "on_first_camera_frames", "view_iou", "views_iou", "mean_iou", "side_by_side_alpha"]


@dataclass
class SceneView:
    """One camera of a `Scene`: name, its ViewSpec (file axes), the renderer's Camera (y-up world,
    render resolution), its Footage (render resolution), renderer, the `TimedVertices` observer that
    draws its frames, and its background plate (RGB supervision; None for masks)."""
    name: str
    spec: Any
    camera: Any
    footage: Any
    renderer: Any
    timed: Any
    plate: Any = None


def renamed_error(exc: SceneError, spec, view) -> SceneError:
    """A single-camera function's error about [camera] / [footage] moved to the camera's [cameras.NAME]."""
    if exc.section not in ("camera", "footage") or not spec.several_cameras:
        return exc
    head = f"{exc.file}: [{exc.section}] " + (f"{exc.key}: " if exc.key else "")
    text = str(exc)
    message = text[len(head):] if text.startswith(head) else text
    shared = exc.key in ("fps", "start_time", "first", "count") and exc.key not in getattr(view, "own_timing", ())
    section = "footage" if shared else spec.camera_section(view)
    return SceneError(exc.file, section, exc.key, message)


def load_views_footage(spec, resolution=None) -> list:
    """Each camera's footage (`load_scene_footage` per camera: frames and masks at the render
    resolution, checked against that camera); errors name the camera ([cameras.NAME])."""
    from .scene_build import load_scene_footage

    out = []
    for view in spec.views or [None]:
        one = spec if view is None else spec.view_spec(view)
        try:
            out.append(load_scene_footage(one, resolution))
        except SceneError as exc:
            raise renamed_error(exc, spec, view) from None
    return out


def build_views(scene, footages) -> list:
    """The scene's views: the first is the one `Scene` built (scene.camera, footage, renderer, timed,
    plate); each further camera gets its Camera (`scene_camera`) and a renderer made by the scene's
    own `_make_renderer` (the same shading, edge softness rule, colours and time matching), drawing
    its frames from the same rollout."""
    from .scene_build import scene_camera

    spec = scene.spec
    views = spec.views or [None]
    if len(footages) != len(views):
        raise ValueError(f"footage: {len(footages)} clips for {len(views)} cameras "
                         f"{[v.name for v in views if v is not None]}: expected one per camera (load_views_footage)")
    first = SceneView(views[0].name if views[0] is not None else "camera", views[0], scene.camera, scene.footage,
                      scene.renderer, scene.timed, scene.plate)
    out = [first]
    # _make_renderer reads the scene's camera and footage and sets its timed, plate and edge softness:
    # give it each further camera's, then put the first camera's back
    kept = (scene.camera, scene.footage, scene.timed, scene.plate, scene.edge_softness)
    try:
        for view, footage in zip(views[1:], footages[1:]):
            try:
                camera = scene_camera(spec.view_spec(view), footage.factor)
            except SceneError as exc:
                raise renamed_error(exc, spec, view) from None
            scene.camera, scene.footage = camera, footage
            try:
                renderer = scene._make_renderer()
            except SceneError as exc:
                raise renamed_error(exc, spec, view) from None
            out.append(SceneView(view.name, view, camera, footage, renderer, scene.timed, scene.plate))
    finally:
        scene.camera, scene.footage, scene.timed, scene.plate, scene.edge_softness = kept
    return out


def fit_views(scene):
    """What the scene's VideoFit takes: its renderer (one [camera]: the fit as it always was) or a
    list of `View`s named by the cameras ([[cameras]])."""
    from ..fitting.views import View

    if not scene.spec.several_cameras:
        return scene.renderer
    return [View(v.renderer, name=v.name) for v in scene.views]


def scene_camera_params(scene):
    """[fit] refine_camera: (Params, prior) of the scene's camera correction(s), or ([], None).

    One camera: its renderer's pose correction (rotation vector, translation in camera axes) and,
    with refine_focal, its focal-length scale, under a Gaussian prior on the pose (`CameraPrior`,
    `tigradsim.fitting.camera_params`: the calibration's uncertainty, [fit] camera_sigma_rotation_deg
    / camera_sigma_translation_m / camera_prior_variance).  Several cameras: each camera's own
    correction ("camera_pose[NAME]") and prior (`view_camera_params`, `CameraPriors`): one badly
    calibrated camera moves alone, the others stay held by their priors and their footage."""
    import math

    from ..fitting.camera_prior import camera_params, view_camera_params

    fit = scene.spec.fit
    if not fit.refine_camera:
        return [], None
    if not all(hasattr(v.renderer, "camera_delta") for v in scene.views):
        raise scene.spec.error("fit", "refine_camera", "this tigradsim's renderer has no camera correction")
    args = (math.radians(fit.camera_sigma_rotation_deg), fit.camera_sigma_translation_m, fit.camera_prior_variance)
    if len(scene.views) > 1:         # each prior counts its own camera's frames (cameras of other frame rates)
        return view_camera_params(fit_views(scene), *args, frames=view_frame_counts(scene, scene.frames_used),
                                  refine_focal=fit.refine_focal)
    return camera_params(scene.renderer, *args, frames=scene.frames_used, refine_focal=fit.refine_focal)


def scene_camera_report(scene) -> dict:
    """The fitted camera correction and the corrected camera in the file's axes (OpenCV K, R, t,
    `camera_report`); with several cameras {camera name: that}; {} without refine_camera."""
    from ..fitting.camera_prior import camera_report

    if not scene.camera_params:
        return {}
    if len(scene.views) > 1:
        return {v.name: camera_report(v.renderer, v.camera, factor=v.footage.factor, axes=scene.M)
                for v in scene.views}
    return camera_report(scene.renderer, scene.camera, factor=scene.footage.factor, axes=scene.M)


def camera_summary(report) -> "dict | None":
    """A `scene_camera_report` without its K, R, t (the summary line's "camera"), per camera with several;
    None when empty."""
    if not report:
        return None
    strip = lambda r: {k: v for k, v in r.items() if k not in ("K", "R", "t")}
    return strip(report) if "rotation_deg" in report else {name: strip(r) for name, r in report.items()}


def camera_lines(report) -> list:
    """One sentence per fitted camera correction (`scene_camera_report`), for the fit's markdown report."""
    if not report:
        return []
    cams = [(None, report)] if "rotation_deg" in report else list(report.items())
    return [f"Camera correction{'' if name is None else f' of {name!r}'} (fitted with the unknowns): turned by "
            f"{cam['rotation_deg']:.3f} degrees, centre moved by {cam['camera_centre_moved_by'] * 1000:.1f} mm, focal "
            f"x {cam['focal_scale']:.4f}; the corrected calibration (file axes) is in estimates.json under \"camera\"."
            for name, cam in cams]


def view_frame_counts(scene, k) -> list:
    """The frames each camera fits while the first camera fits its first k (horizons count the first
    camera's frames): every frame of every camera when k is all of the first's; otherwise each further
    camera's frames shown up to the first camera's frame k - 1 (at least one).  Synchronised cameras:
    k each."""
    first = scene.views[0].footage.times
    k = int(k)
    if k >= len(first):
        return [len(v.footage) for v in scene.views]
    end = float(first[k - 1]) + 1e-9
    return [k] + [max(1, int(np.searchsorted(v.footage.times, end, side="right"))) for v in scene.views[1:]]


def _nearest_first_frames(scene, view, count):
    """For a camera's first `count` frames, the index of the first camera's frame nearest in time."""
    first = np.asarray(scene.views[0].footage.times, dtype=np.float64)
    times = np.asarray(view.footage.times[:count], dtype=np.float64)
    return np.abs(times[:, None] - first[None, :]).argmin(axis=1)


def view_residual_groups(scene, k, blocks, part_sizes, part_views, extra=0, count=None) -> np.ndarray:
    """`residual_groups` for cameras of their own frame times: the residuals are parts (sizes
    `part_sizes`, each of camera `part_views[i]`, frame-major over that camera's fitted frames,
    `view_frame_counts`); a frame's label is the block (`frame_blocks(k, blocks)`) of the first camera's
    frame nearest it in time (synchronised cameras: exactly `residual_groups`' labels); then `extra`
    residuals (the camera priors') form one more cluster, label `blocks`."""
    from ..fitting.residual_groups import residual_groups

    counts = view_frame_counts(scene, k)
    part_frames = [_nearest_first_frames(scene, scene.views[v], counts[v]) for v in part_views]
    return residual_groups(part_sizes, k, blocks, extra=extra, count=count, part_frames=part_frames)


def on_first_camera_frames(scene, videos) -> list:
    """Each camera's video (K_v, H, W, C) at the first camera's frame times (its frame nearest in time to
    each): videos of one length, for measures taken frame by frame over every camera."""
    first = np.asarray(scene.views[0].footage.times, dtype=np.float64)
    out = []
    for view, video in zip(scene.views, videos):
        times = np.asarray(view.footage.times, dtype=np.float64)
        out.append(np.asarray(video)[np.abs(first[:, None] - times[None, :]).argmin(axis=1)])
    return out


def view_iou(footage, alpha):
    """Per-frame silhouette IoU of a render's alpha (K, H, W) with a view's masks, summarised
    ({mean, min, first, last, per_frame}); None without masks."""
    from ..io.mask_checks import silhouette_iou
    if footage.masks is None:
        return None
    iou = silhouette_iou(alpha, footage.masks)
    return {"mean": float(iou.mean()), "min": float(iou.min()), "first": float(iou[0]), "last": float(iou[-1]),
            "per_frame": [round(float(v), 4) for v in iou]}


def views_iou(scene, videos, before=None) -> dict:
    """{camera name: {"iou": mean IoU, "iou_per_frame": [...]}} of every camera's render (`videos`, in
    view order) with its masks (None without masks); `before`: an earlier answer, whose IoUs become
    each camera's "iou_initial"."""
    report = {}
    for view, video in zip(scene.views, videos):
        iou = view_iou(view.footage, video[..., -1])
        report[view.name] = {"iou": iou and iou["mean"], "iou_per_frame": iou and iou["per_frame"]}
        if before is not None:
            report[view.name]["iou_initial"] = before[view.name]["iou"]
    return report


def mean_iou(views, frames=None) -> "float | None":
    """The mean over cameras of their mean IoU (`views_iou`), over their first `frames` frames when given; None
    when a camera has no masks."""
    values = [v["iou"] if v["iou"] is None or frames is None else float(np.mean(v["iou_per_frame"][:frames]))
              for v in views.values()]
    return None if not values or any(v is None for v in values) else float(np.mean(values))


def side_by_side_alpha(videos) -> np.ndarray:
    """Several views' renders (each (K, H_v, W_v, C)) as one (K, max H, sum W) alpha video, for
    measures over every camera at once (the predictable horizon's silhouette disagreement)."""
    alphas = [np.asarray(v)[..., -1] for v in videos]
    H = max(a.shape[1] for a in alphas)
    return np.concatenate([np.pad(a, ((0, 0), (0, H - a.shape[1]), (0, 0))) for a in alphas], axis=2)
