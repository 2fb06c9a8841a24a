"""Save rendered frames as PNG files, GIFs or MP4 videos, and load them back.

Images are numpy arrays of shape (K, H, W) (grey) or (K, H, W, C) with C in
1, 3, 4; floats are taken to lie in [0, 1] (clipped), integers in [0, 255].
Row 0 is the top of the image (the layout of `SoftRasterizer.image`).
"""
from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np

_IMAGE_EXT = (".png", ".jpg", ".jpeg", ".bmp", ".tif", ".tiff")
_FFMPEG_HINT = "pip install imageio-ffmpeg"


def to_uint8(images) -> np.ndarray:
    """(K, H, W[, C]) floats in [0, 1] or integers -> uint8 (K, H, W) or (K, H, W, C) with C in 3, 4."""
    arr = np.asarray(images)
    if arr.ndim == 2:
        arr = arr[None]
    if arr.ndim not in (3, 4):
        raise ValueError(f"images: expected shape (K, H, W) or (K, H, W, C), got {arr.shape}")
    if arr.ndim == 4:
        if arr.shape[-1] == 1:
            arr = arr[..., 0]
        elif arr.shape[-1] == 2 or arr.shape[-1] > 4:
            raise ValueError(f"images: expected 1, 3 or 4 channels, got shape {arr.shape}")
    if arr.shape[0] == 0 or arr.shape[1] == 0 or arr.shape[2] == 0:
        raise ValueError(f"images: expected at least one non-empty frame, got shape {arr.shape}")
    if np.issubdtype(arr.dtype, np.floating):
        if not np.all(np.isfinite(arr)):
            raise ValueError("images: contains NaN or inf")
        return (np.clip(arr, 0.0, 1.0) * 255.0 + 0.5).astype(np.uint8)
    if np.issubdtype(arr.dtype, np.integer) or arr.dtype == bool:
        return np.clip(arr.astype(np.int64) * (255 if arr.dtype == bool else 1), 0, 255).astype(np.uint8)
    raise TypeError(f"images: expected a float or integer array, got dtype {arr.dtype}")


def save_frames(images, out_dir, prefix="frame") -> list:
    """Write each frame as `out_dir/prefix_0000.png`, ...; returns the paths."""
    import imageio.v3 as iio

    frames = to_uint8(images)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for k, frame in enumerate(frames):
        p = out / f"{prefix}_{k:04d}.png"
        iio.imwrite(p, frame)
        paths.append(str(p))
    return paths


def _positive_fps(fps):
    fps = float(fps)
    if not fps > 0:
        raise ValueError(f"fps={fps} must be positive")
    return fps


def save_gif(images, path, fps=20.0) -> str:
    """Write an animated GIF (looping) at `fps` frames per second."""
    import imageio.v3 as iio

    fps = _positive_fps(fps)
    frames = to_uint8(images)
    if frames.ndim == 4 and frames.shape[-1] == 4:
        frames = frames[..., :3]
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    iio.imwrite(path, frames, extension=".gif", duration=1000.0 / fps, loop=0)
    return str(path)


def _require_ffmpeg(what):
    if importlib.util.find_spec("imageio_ffmpeg") is None:
        raise RuntimeError(f"{what} needs the imageio-ffmpeg package, which is not installed: "
                           f"run `{_FFMPEG_HINT}` (or save PNG frames / a GIF instead)")


def save_mp4(images, path, fps=30.0) -> str:
    """Write an H.264 MP4 (needs `pip install imageio-ffmpeg`)."""
    _require_ffmpeg("save_mp4")
    import imageio.v2 as iio2

    fps = _positive_fps(fps)
    frames = to_uint8(images)
    if frames.ndim == 3:
        frames = np.repeat(frames[..., None], 3, axis=-1)
    frames = frames[..., :3]
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    with iio2.get_writer(str(path), format="FFMPEG", mode="I", fps=fps, codec="libx264",
                         macro_block_size=1) as writer:
        for frame in frames:
            writer.append_data(frame)
    return str(path)


def load_video(path_or_dir) -> np.ndarray:
    """Load frames as uint8 (K, H, W, C) from a folder of images (sorted by
    name), a GIF, an MP4 (needs imageio-ffmpeg) or a single image file."""
    import imageio.v3 as iio

    p = Path(path_or_dir)
    if not p.exists():
        raise FileNotFoundError(f"load_video: path_or_dir={str(p)!r} does not exist")
    if p.is_dir():
        files = sorted(f for f in p.iterdir() if f.suffix.lower() in _IMAGE_EXT)
        if not files:
            raise ValueError(f"load_video: path_or_dir={str(p)!r} contains no image files {_IMAGE_EXT}")
        frames = [np.asarray(iio.imread(f)) for f in files]
        shapes = {f.shape for f in frames}
        if len(shapes) != 1:
            raise ValueError(f"load_video: images in {str(p)!r} differ in shape: {sorted(shapes)}")
        out = np.stack(frames)
    elif p.suffix.lower() == ".gif":
        out = np.asarray(iio.imread(p, index=None))
        if out.ndim == 3 and out.shape[-1] not in (3, 4):   # one grey frame
            out = out[None]
    elif p.suffix.lower() in (".mp4", ".avi", ".mov", ".mkv", ".webm"):
        _require_ffmpeg("load_video of a movie file")
        import imageio.v2 as iio2

        with iio2.get_reader(str(p), format="FFMPEG") as reader:
            out = np.stack([np.asarray(fr) for fr in reader])
    elif p.suffix.lower() in _IMAGE_EXT:
        out = np.asarray(iio.imread(p))[None]
    else:
        raise ValueError(f"load_video: path_or_dir={str(p)!r}: unknown format (expected a folder, "
                         f".gif, .mp4 or an image file)")
    if out.ndim == 3:
        out = out[..., None]
    return np.ascontiguousarray(out.astype(np.uint8, copy=False))


__all__ = ["to_uint8", "save_frames", "save_gif", "save_mp4", "load_video"]
