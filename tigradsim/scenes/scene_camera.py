"""The [camera] and [footage] sections of a scene file: the camera's pose and lens, and the frames (images,
masks) and their rate; or several cameras, [[cameras]], each with its own frames and masks."""
from __future__ import annotations

import os
import re

import numpy as np

from .scene_specs import CameraSpec, FootageSpec, ViewSpec
from .scene_table import SceneError, _Table, _typename


def _is_rotation(R, tol=1e-6):
    return np.allclose(R @ R.T, np.eye(3), atol=tol) and abs(np.linalg.det(R) - 1.0) < tol



CAMERA_KEYS = ("K", "R", "t", "eye", "target", "up", "fov", "width", "height", "near", "far")


def _parse_camera(file, data, section="camera", extra=()):
    """A camera table (`section`: "camera", or "cameras.NAME" for an entry of [[cameras]], which
    may also hold the keys `extra`)."""
    t = _Table(file, section, data, CAMERA_KEYS + tuple(extra))
    opencv = [k for k in ("K", "R", "t") if t.has(k)]
    lookat = [k for k in ("eye", "target", "up", "fov") if t.has(k)]
    if opencv and lookat:
        t.fail(", ".join(opencv + lookat), "inconsistent camera: give either K, R, t (OpenCV) or eye, target, up, "
                                            "fov (look-at), not keys of both")
    if not opencv and not lookat:
        t.fail("K / eye", "missing: give K, R, t (OpenCV calibration) or eye, target, fov (look-at)")
    cam = CameraSpec(kind="opencv" if opencv else "lookat", width=t.integer("width", minimum=1),
                     height=t.integer("height", minimum=1))
    cam.near = t.number("near", 0.01, positive=True)
    cam.far = t.number("far", 100.0, positive=True)
    if not cam.far > cam.near:
        t.fail("far", f"expected far > near ({cam.near}), got {cam.far}")
    if opencv:
        K = t.array("K", (3, 3))
        R = t.array("R", (3, 3))
        cam.t = t.array("t", (3,))
        if not np.allclose(K[2], [0.0, 0.0, 1.0]) or K[1, 0] != 0 or K[0, 1] != 0:
            t.fail("K", f"inconsistent camera: expected [[fx, 0, cx], [0, fy, cy], [0, 0, 1]] (no skew), got {K.tolist()}")
        if not (K[0, 0] > 0 and K[1, 1] > 0):
            t.fail("K", f"inconsistent camera: expected positive focal lengths fx, fy, got {K[0, 0]}, {K[1, 1]}")
        if not _is_rotation(R):
            t.fail("R", "inconsistent camera: expected a rotation matrix (R R^T = I, det R = 1), got "
                        f"{np.round(R, 6).tolist()} (det {np.linalg.det(R):.6g})")
        from ..renderers.camera import check_principal_point
        try:
            check_principal_point(K[0, 2], K[1, 2], cam.width, cam.height, who="inconsistent camera")
        except ValueError as exc:
            t.fail("K", str(exc))
        cam.K, cam.R = K, R
    else:
        cam.eye = t.array("eye", (3,))
        cam.target = t.array("target", (3,))
        cam.up = t.array("up", (3,), default=None)
        cam.fov = t.number("fov", lo=1e-3, hi=179.0)
        if np.linalg.norm(cam.target - cam.eye) < 1e-12:
            t.fail("target", f"inconsistent camera: eye and target coincide ({cam.eye.tolist()})")
    return cam



def _expand_pattern(t, key, base):
    """The files of a frame pattern, in frame order: a printf ("frames/frame_%04d.png", by
    number) or glob ("frames/*.png", natural order) pattern on the file name, or one file.
    Returns (files, folder, file-name pattern or None)."""
    from ..io.video import list_frames

    pattern = t.string(key)
    full = os.path.normpath(os.path.join(base, os.path.expanduser(pattern)))
    folder, name = os.path.split(full)
    if os.path.isdir(full):
        t.fail(key, f"{pattern!r} is a folder: give a file pattern, e.g. {os.path.join(pattern, 'frame_%04d.png')!r} "
                    f"or {os.path.join(pattern, '*.png')!r}, so that frames and masks are not mixed")
    if re.search(r"%0?\d*d", folder) or any(c in folder for c in "*?["):
        t.fail(key, f"{pattern!r}: only the file name may hold a pattern (%04d or *), not the folder")
    if "%" in name or any(c in name for c in "*?["):
        if not os.path.isdir(folder):
            t.fail(key, f"no files match {pattern!r}: folder {folder} not found")
        try:
            files = [str(f) for f in list_frames(folder, name)]
        except ValueError as exc:
            t.fail(key, f"no files match {pattern!r} ({exc})")
        return files, folder, name
    if not os.path.exists(full):
        t.fail(key, f"no files match {pattern!r} (resolved to {full})")
    return [full], full, None



def _parse_footage(file, base, data, section="footage"):
    t = _Table(file, section, data, ("frames", "masks", "fps", "start_time", "background", "first", "count"))
    frames, folder, fpat = _expand_pattern(t, "frames", base)
    masks, mfolder, mpat = _expand_pattern(t, "masks", base) if t.has("masks") else (None, None, None)
    first = t.integer("first", 0, minimum=0)
    count = t.integer("count", None, minimum=1)
    if masks is not None and len(masks) != len(frames):
        t.fail("masks", f"{len(masks)} mask files match {t.data['masks']!r} but {len(frames)} frames match "
                        f"{t.data['frames']!r}: expected one mask per frame")
    if first >= len(frames):
        t.fail("first", f"the footage has {len(frames)} frames, so first={first} leaves none")
    stop = len(frames) if count is None else first + count
    if stop > len(frames):
        t.fail("count", f"first={first} + count={count} exceeds the {len(frames)} frames found")
    bg = t.string("background", None)
    if bg is not None and bg != "estimate":
        bg = t.path("background", base=base)
    return FootageSpec(frames=frames[first:stop], masks=None if masks is None else masks[first:stop],
                       fps=t.number("fps", positive=True), start_time=t.number("start_time", 0.0, nonnegative=True),
                       background=bg, folder=folder, pattern=fpat, masks_folder=mfolder, masks_pattern=mpat,
                       first=first, count=stop - first)



# keys of a [[cameras]] entry besides the camera's own: its name and its footage files
VIEW_KEYS = ("name", "frames", "masks", "background")
# [footage] keys the cameras share when there are several; a camera's entry may give its own (its clip's
# frame rate, the simulation time of its first frame, the frames used), which then replace the shared ones
SHARED_FOOTAGE_KEYS = ("fps", "start_time", "first", "count")


def _parse_cameras(file, base, entries, footage_data):
    """[[cameras]]: a list of camera tables, each as [camera] plus `name` (required, unique) and its
    own `frames`, `masks` (and `background`) as in [footage]; [footage] then holds what the cameras
    share (fps, start_time, first, count), which an entry may override with its own (cameras at
    different frame rates, started at different times: each clip's frame k is drawn at that clip's
    start_time + k / fps).  Returns (views [ViewSpec], the first camera's FootageSpec or None); every
    error names the camera ([cameras.NAME])."""
    if not isinstance(entries, list) or not entries or not all(isinstance(e, dict) for e in entries):
        raise SceneError(file, None, "cameras", f"expected an array of tables [[cameras]] (at least one), got "
                         f"{_typename(entries)}")
    shared = {}
    if footage_data is not None:
        ft = _Table(file, "footage", footage_data, SHARED_FOOTAGE_KEYS + VIEW_KEYS[1:])
        own = [k for k in VIEW_KEYS[1:] if ft.has(k)]
        if own:
            ft.fail(own[0], "with [[cameras]] each camera gives its own frames, masks and background in its "
                            "[[cameras]] entry; [footage] holds only what they share (fps, start_time, first, count)")
        if ft.has("fps"):
            ft.number("fps", positive=True)
        shared = {k: footage_data[k] for k in SHARED_FOOTAGE_KEYS if k in footage_data}
    views, names = [], []
    for i, entry in enumerate(entries):
        name = entry.get("name")
        if not isinstance(name, str) or not name or not all(c.isalnum() or c in "-_" for c in name):
            raise SceneError(file, f"cameras.{i}", "name", ("missing (required): each of several cameras needs a "
                             "name" if name is None else f"expected a name of letters, digits, - and _, got {name!r}"))
        section = f"cameras.{name}"
        if name in names:
            raise SceneError(file, section, "name", f"duplicate camera name {name!r} (cameras {i} and "
                             f"{names.index(name)}): every camera needs its own name")
        names.append(name)
        keys = VIEW_KEYS[1:] + SHARED_FOOTAGE_KEYS
        camera = _parse_camera(file, {k: v for k, v in entry.items() if k != "name"}, section, extra=keys)
        given = {k: entry[k] for k in keys if k in entry}
        footage = None
        if any(k in given for k in VIEW_KEYS[1:]):
            if "frames" not in given:
                raise SceneError(file, section, "frames", "missing: masks or background without the frames")
            if "fps" not in given and "fps" not in shared:
                raise SceneError(file, section, "fps", f"missing: camera {name!r} has frames; give their fps here "
                                 "or in [footage] (shared by every camera)")
            footage = _parse_footage(file, base, {**shared, **given}, section)
        elif given:
            raise SceneError(file, section, next(iter(given)), "footage timing without frames: give the camera's "
                             "frames (and masks) too")
        views.append(ViewSpec(name=name, camera=camera, footage=footage,
                              own_timing=tuple(k for k in SHARED_FOOTAGE_KEYS if k in given)))
    with_frames = [v for v in views if v.footage is not None]
    if with_frames and len(with_frames) != len(views):
        v = next(v for v in views if v.footage is None)
        raise SceneError(file, f"cameras.{v.name}", "frames", f"missing: camera {with_frames[0].name!r} has footage, "
                         "so every camera needs its frames")
    return views, views[0].footage
