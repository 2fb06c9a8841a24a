"""A scene file's scene checked as a whole, before any kernel: the same checks the Python API runs
(`tigradsim.core.placement` in `SceneBuilder.finalize`, `tigradsim.renderers.framing` in
`VideoFit`), reported as `SceneError`s that name the file, the section and the key, with the
correction written in the file's own terms.

    objects inside the ground        [objects.NAME] position: ... lift it by 0.37 m: position = [...]
    camera below the ground / looking away from the objects (e.g. R given camera-to-world)
                                     [camera] R (or eye): ... probably ...: R = [[...]]
    an object outside the view at the first frame     [objects.NAME] position (an error)
    an object partly outside it                        a FramingWarning naming the same

`parse_scene` calls `check_scene` last.
"""
from __future__ import annotations

import dataclasses
import warnings

import numpy as np

from ..core.placement import Placed, ground_penetrations, round_up
from .scene_file import SceneError, SceneSpec

__all__ = ["check_scene", "scene_placed"]


def _quat_matrix(q):
    from ..physics.rigid import quat_to_matrix_np
    return quat_to_matrix_np(q)


def scene_placed(spec: SceneSpec) -> list:
    """Each object's points at t = 0 in tigradsim's y-up world (`Placed`, labelled "objects.NAME"):
    the file's position + rotation applied to its mesh, then the file's axes mapped (`spec.axes`)."""
    M = spec.axes
    out = []
    for name, o in spec.objects.items():
        x = o.position + o.vertices @ _quat_matrix(o.rotation).T
        out.append(Placed(f"objects.{name}", x @ M.T, o.contact_radius))
    return out


def _fmt(a):
    """An array as TOML text to paste into the file (6 decimals): [0.0, 0.05, 0.0]."""
    a = np.asarray(a, dtype=np.float64)
    if a.ndim == 0:
        return repr(float(np.round(a, 6)) + 0.0)
    return "[" + ", ".join(_fmt(x) for x in a) + "]"


def _camera_alternatives(spec):
    """(what was probably meant, in the file's words; that camera in the world) for a camera that
    is wrong: the usual calibration mistakes (`pose_alternatives`) of an OpenCV camera, the eye's
    height with the other sign for a look-at camera."""
    from ..renderers.framing import pose_alternatives
    from .scene_build import scene_camera

    c = spec.camera
    if c.kind == "opencv":
        changes = [(f"{what}: R = {_fmt(R)}, t = {_fmt(t)}", dict(R=R, t=t))
                   for what, R, t in pose_alternatives(c.R, c.t)]
    else:
        eye = c.eye.copy()
        eye[1 if spec.up == "y" else 2] *= -1.0
        changes = [(f"the eye's height has the wrong sign: eye = {_fmt(eye)}", dict(eye=eye))]
    out = []
    for what, change in changes:
        try:
            out.append((what, scene_camera(dataclasses.replace(spec, camera=dataclasses.replace(c, **change)), 1)))
        except ValueError:          # not a valid camera either: not what was meant
            pass
    return out


def check_scene(spec: SceneSpec) -> None:
    """Raise SceneError for an object that starts inside the ground, a camera below the ground or
    looking away from the objects, or an object outside the camera's view at the first frame
    (t = 0; skipped when the footage starts later); warn (`FramingWarning`) for an object partly
    outside it."""
    from ..renderers.framing import FramingWarning, framing_problems
    from .scene_build import scene_camera

    placed = scene_placed(spec)
    names = list(spec.objects)
    if spec.ground is not None:
        axis = 1 if spec.up == "y" else 2
        for g in ground_penetrations(placed):
            name = g.placed.label.split(".", 1)[1]
            pos = spec.objects[name].position.copy()
            pos[axis] += float(round_up(g.depth))
            raise spec.error(f"objects.{name}", "position",
                             g.message(lift_hint=f": position = {_fmt(pos)}"))
    from .scene_colliders import collider_penetrations
    for label, collider, depth in collider_penetrations(spec, placed):
        raise spec.error(label, "position", f"starts {depth:.3g} m inside [colliders.{collider}]: move the object "
                         "out of the collider (or the collider away); a start deeper than resting contact (a few "
                         "millimetres) is taken as a misplaced object")
    for view in spec.views or [None]:          # every camera ([[cameras]]: errors name it, [cameras.NAME])
        one = spec if view is None else spec.view_spec(view)
        section = spec.camera_section(view)
        try:
            camera = scene_camera(one, 1)
        except SceneError as exc:          # scene_camera names [camera]: name this camera's entry
            from .scene_views import renamed_error
            raise renamed_error(exc, spec, view) from None
        first_at_zero = one.footage is None or one.footage.start_time == 0.0
        problems = framing_problems(camera, placed, ground=spec.ground is not None,
                                    alternatives=_camera_alternatives(one))
        seen_by = "" if section == "camera" else f" (seen by camera {view.name!r})"
        for p in problems:
            if p.subject == "camera":
                raise spec.error(section, "R / t" if one.camera.kind == "opencv" else "eye / target", p.message)
            if not first_at_zero:
                continue
            name = names[[q.label for q in placed].index(p.subject)]
            if p.level == "error":
                raise spec.error(f"objects.{name}", "position", p.message + seen_by)
            warnings.warn(str(spec.error(f"objects.{name}", "position", p.message + seen_by)), FramingWarning,
                          stacklevel=3)

