"""Does the camera see the scene at the first frame?  Checks run before any kernel, by both ways
of making a fit: `VideoFit` (the Python API) and the scene file (`tigradsim.scenes.scene_sanity`).

* the camera below the ground (its centre at height <= 0 over a scene with a ground);
* the camera looking away from the scene (the centre of the objects' bounding box behind it);
* an object outside the view: none of its points in the image (an error) or more than
  `PARTLY_OUTSIDE` of them outside it (a warning: it may be meant to enter or leave the view; a few
  vertices just past the edge of a tightly framed clip are not worth one).

For a calibrated camera that is wrong in one of these ways, the usual mistakes are tried
(`pose_alternatives`: R given camera-to-world, t given as the camera's centre) and the one under
which the camera sees every object is named as what was probably meant.

Objects are `tigradsim.core.placement.Placed` (label, points (N, 3) at t = 0 in the y-up world).
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np

__all__ = ["FramingProblem", "framing_problems", "pose_alternatives", "check_framing", "FramingWarning",
           "PARTLY_OUTSIDE"]

# An object with more than this fraction of its points outside the image at the first frame gets a warning.
PARTLY_OUTSIDE = 0.1


class FramingWarning(UserWarning):
    """An object is partly outside the camera's view at the first frame."""


@dataclass
class FramingProblem:
    """level: "error" or "warning"; subject: "camera" or the object's label; message: what is
    wrong (and, for the camera, what was probably meant)."""
    level: str
    subject: str
    message: str


def pose_alternatives(R, t):
    """The world-to-camera poses a calibration (R (3, 3), t (3,)) is often mistaken for, as
    (what the mistake was, R', t'): R given camera-to-world; R and t given as the camera's pose
    (camera-to-world rotation, camera centre); t given as the camera's centre."""
    R, t = np.asarray(R, dtype=np.float64), np.asarray(t, dtype=np.float64).reshape(3)
    return [("R was given camera-to-world (its transpose is world-to-camera)", R.T.copy(), t.copy()),
            ("R and t were given as the camera's pose (camera-to-world rotation, camera centre)", R.T.copy(),
             -R.T @ t),
            ("t was given as the camera's centre (t = -R centre)", R.copy(), -R @ t)]


def _in_view(camera, points):
    """(N,) bool: in front of the camera (near < Z < far) and inside the image."""
    p = camera.project_pixels(points)
    W, H = camera.width, camera.height
    with np.errstate(invalid="ignore"):
        return ((p[:, 2] > camera.near) & (p[:, 2] < camera.far) & (p[:, 0] >= -0.5) & (p[:, 0] <= W - 0.5)
                & (p[:, 1] >= -0.5) & (p[:, 1] <= H - 0.5))


def _points(objects):
    return [np.asarray(o.points, dtype=np.float64).reshape(-1, 3) for o in objects]


def _camera_problems(camera, centre, ground):
    out = []
    if ground and camera.eye[1] < 0.0:
        out.append(f"the camera is below the ground: its centre is at height {camera.eye[1]:.3g} m (the ground is "
                   "the plane at 0, objects stand on it)")
    depth = float(camera.world_to_camera(centre)[0, 2])
    if depth <= camera.near:
        out.append(f"the camera looks away from the scene: the centre of the objects, {np.round(centre, 3).tolist()}, "
                   f"is {'behind the camera' if depth <= 0 else 'nearer than near'} (depth {depth:.3g} m along its "
                   f"view direction {np.round(camera.R[2], 3).tolist()})")
    return out


def _sees_all(camera, pts, centre, ground) -> bool:
    return not _camera_problems(camera, centre, ground) and all(_in_view(camera, p).any() for p in pts if len(p))


def framing_problems(camera, objects, ground=True, alternatives=()):
    """The problems of `camera` (a `tigradsim.renderers.Camera`) with `objects` (`Placed`) at the
    first frame, as `FramingProblem`s (errors first).  ground: the scene has the ground plane y = 0.
    alternatives: (what, Camera) pairs tried when the camera is wrong (e.g. from `pose_alternatives`);
    the first that sees every object is named as what was probably meant."""
    objects = [o for o in objects if len(np.asarray(o.points).reshape(-1, 3))]
    pts = _points(objects)
    if not pts:
        return []
    allp = np.concatenate(pts)
    centre = 0.5 * (allp.min(axis=0) + allp.max(axis=0))
    cam = _camera_problems(camera, centre, ground)
    if cam:
        hint = next((what for what, alt in alternatives if _sees_all(alt, pts, centre, ground)), None)
        if hint is None and camera.kind == "opencv":
            hint = next((what for what, R, t in pose_alternatives(camera.R, camera.t)
                         if _sees_all(camera.replace(R=R, t=t), pts, centre, ground)), None)
        text = "; ".join(cam) + (f".  Probably {hint}" if hint else
                                 ".  Expected a camera above the ground that looks at the objects")
        return [FramingProblem("error", "camera", text)]
    out = []
    for o, p in zip(objects, pts):
        seen = _in_view(camera, p)
        if seen.any() and (~seen).mean() <= PARTLY_OUTSIDE:
            continue
        uv = camera.project_pixels(p)
        where = (f"its points project to columns {uv[:, 0].min():.4g}..{uv[:, 0].max():.4g}, rows "
                 f"{uv[:, 1].min():.4g}..{uv[:, 1].max():.4g}, depths {uv[:, 2].min():.3g}..{uv[:, 2].max():.3g} m "
                 f"on the {camera.width}x{camera.height} image (near {camera.near:g}, far {camera.far:g})")
        if not seen.any():
            out.insert(0, FramingProblem("error", o.label, f"{o.label} is outside the camera's view at the first "
                                         f"frame: {where}; expected the object in the picture"))
        else:
            out.append(FramingProblem("warning", o.label, f"{o.label} is partly outside the camera's view at the "
                                      f"first frame ({int((~seen).sum())} of its {len(p)} points): {where}"))
    return out


def check_framing(camera, objects, ground=True, who="camera") -> None:
    """`framing_problems` in the Python API's form: ValueError naming every error (the camera, or
    each object outside the view), a `FramingWarning` for each object partly outside it."""
    found = framing_problems(camera, objects, ground)
    errors = [p.message for p in found if p.level == "error"]
    if errors:
        raise ValueError(f"{who}: " + "; ".join(errors))
    for p in found:
        warnings.warn(f"{who}: {p.message}", FramingWarning, stacklevel=3)
