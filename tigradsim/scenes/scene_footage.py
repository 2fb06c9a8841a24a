"""A scene file's footage and camera at the render resolution: `load_scene_footage` (the frames, masks and
background plate as a `tgs.Footage`, block-averaged to the [fit] resolution and checked against the camera) and
`scene_camera` (the renderer's Camera in tigradsim's y-up world).  Both raise SceneError naming the key and run
no kernel.  (Re-exported by scene_build, where `Scene` uses them.)
"""
from __future__ import annotations

import os

import numpy as np

from .scene_specs import SceneSpec


# ---------------------------------------------------------------------------
# footage

def _block_mean(a, f):
    """Mean over f x f pixel blocks of (K, H, W) or (K, H, W, C)."""
    if f == 1:
        return a
    K, H, W = a.shape[:3]
    return a.reshape((K, H // f, f, W // f, f) + a.shape[3:]).mean(axis=(2, 4))


def load_scene_footage(spec: SceneSpec, resolution=None):
    """The scene's footage as a `tgs.Footage` at the render resolution (`resolution`, default
    the file's [fit] resolution or the footage size; block means of the frames and masks),
    with the background plate where the file asks for one.  Checked against the camera;
    raises SceneError naming the key; runs no kernel."""
    from ..io.footage import Footage, load_footage
    from ..io.mask_checks import check_masks

    fs = spec.footage
    if fs is None:
        raise spec.error(None, "[footage]", "missing: render and fit need footage (frames, fps)")
    try:
        clip = load_footage(fs.folder, fs.fps, start_time=fs.start_time, pattern=fs.pattern,
                            masks=fs.masks_folder, mask_pattern=fs.masks_pattern, check_masks=False)
    except (ValueError, TypeError, FileNotFoundError) as exc:
        key = "masks" if str(exc).startswith("masks") else "frames"
        raise spec.error("footage", key, str(exc)) from None
    if len(clip) < fs.first + fs.count:
        raise spec.error("footage", "frames", f"{len(clip)} frames read, {fs.first + fs.count} expected")
    clip = clip[fs.first:fs.first + fs.count]
    if clip.masks is not None:            # the masks of the frames used, named by their files
        try:
            check_masks(clip.masks, name=None, labels=[os.path.basename(f) for f in fs.masks] if fs.masks else None)
        except ValueError as exc:
            raise spec.error("footage", "masks", str(exc)) from None
    W, H = clip.width, clip.height
    cam = spec.camera
    if (cam.width, cam.height) != (W, H):
        raise spec.error("camera", "width / height", f"inconsistent camera: {cam.width}x{cam.height} (width x "
                         f"height) but the footage frames are {W}x{H}")
    if resolution is not None:                       # given (the CLI's --resolution): 0 is an error, not "unset"
        from ..renderers.camera import check_image_size
        try:
            check_image_size("resolution", resolution, who="render width")
        except (TypeError, ValueError) as exc:
            raise spec.error("fit", "resolution", str(exc)) from None
    res = resolution or spec.fit.resolution or W
    if W % res or H % (W // res):
        raise spec.error("fit", "resolution", f"expected a width that divides the footage's {W}x{H} pixels "
                         f"(e.g. {W}, {W // 2}, {W // 4}), got {res}")
    f = W // res
    plate = None
    if fs.background is not None and fs.background != "estimate":
        from ..io.video import load_frames
        try:
            plate = load_frames(fs.background)[0]
        except ValueError as exc:
            raise spec.error("footage", "background", str(exc)) from None
        if plate.shape[:2] != (H, W):
            raise spec.error("footage", "background", f"the plate is {plate.shape[1]}x{plate.shape[0]}, the frames "
                             f"{W}x{H} (width x height)")
        plate = _block_mean(plate[None], f)[0]
    small = Footage(_block_mean(clip.frames, f), clip.fps, masks=None if clip.masks is None else
                    _block_mean(clip.masks, f), times=clip.times, check_masks=False)
    if fs.background == "estimate":
        small.estimate_background()
    elif plate is not None:
        try:
            small.set_background(plate[..., :small.channels] if plate.shape[-1] >= small.channels else plate)
        except ValueError as exc:
            raise spec.error("footage", "background", str(exc)) from None
    small.factor, small.full_size = f, (W, H)
    return small


# ---------------------------------------------------------------------------
# camera

def scene_camera(spec: SceneSpec, factor: int):
    """The renderer's Camera in the y-up world at 1/factor of the footage resolution."""
    from ..renderers import Camera

    c, M = spec.camera, spec.axes
    W, H = c.width // factor, c.height // factor
    if c.kind == "lookat":
        up = c.up if c.up is not None else (np.array([0.0, 1.0, 0.0]) if spec.up == "y" else np.array([0.0, 0.0, 1.0]))
        try:
            return Camera(eye=M @ c.eye, target=M @ c.target, up=M @ up, fov=c.fov, width=W, height=H,
                          near=c.near, far=c.far)
        except (ValueError, TypeError) as exc:
            raise spec.error("camera", "up", f"inconsistent camera: {exc}") from None
    K = c.K.copy()
    K[0, 0] /= factor
    K[1, 1] /= factor
    K[0, 2] = (K[0, 2] + 0.5) / factor - 0.5         # pixel centres at integers (OpenCV)
    K[1, 2] = (K[1, 2] + 0.5) / factor - 0.5
    R = c.R @ M.T                                    # x_cam = R x_file + t = R M^T x_world + t
    try:
        return Camera.from_opencv(K, R, c.t, W, H, near=c.near, far=c.far)
    except (ValueError, TypeError) as exc:
        raise spec.error("camera", "K / R / t", f"inconsistent camera: {exc}") from None
