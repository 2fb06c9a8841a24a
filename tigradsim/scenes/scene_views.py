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

__all__ = ["SceneView", "renamed_error", "load_views_footage", "build_views", "fit_views", "view_iou", "views_iou",
           "mean_iou", "side_by_side_alpha"]


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
    section = spec.camera_section(view) if exc.key not in ("fps", "start_time") else "footage"
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
            if len(footage) != len(scene.footage) or not np.allclose(footage.times, scene.footage.times):
                raise spec.error(spec.camera_section(view), "frames", f"{len(footage)} frames, camera "
                                 f"{first.name!r} has {len(scene.footage)}: the cameras' clips must be synchronised")
            try:
                camera = scene_camera(spec.view_spec(view), footage.factor)
            except SceneError as exc:
                raise renamed_error(exc, spec, view) from None
            scene.camera, scene.footage = camera, footage
            renderer = scene._make_renderer()
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


def mean_iou(views) -> "float | None":
    """The mean over cameras of their mean IoU (`views_iou`); None when a camera has no masks."""
    values = [v["iou"] for v in views.values()]
    return None if not values or any(v is None for v in values) else float(np.mean(values))


def side_by_side_alpha(videos) -> np.ndarray:
    """Several views' renders (each (K, H_v, W_v, C)) as one (K, max H, sum W) alpha video, for
    measures over every camera at once (the predictable horizon's silhouette disagreement)."""
    alphas = [np.asarray(v)[..., -1] for v in videos]
    H = max(a.shape[1] for a in alphas)
    return np.concatenate([np.pad(a, ((0, 0), (0, H - a.shape[1]), (0, 0))) for a in alphas], axis=2)
