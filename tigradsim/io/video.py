"""Save rendered frames as PNG files, GIFs or MP4 videos, and load them back.

Images are numpy arrays of shape (K, H, W) (grey) or (K, H, W, C) with C in
1, 3, 4; floats are taken to lie in [0, 1] (clipped), integers in [0, 255].
Row 0 is the top of the image (the layout of `SoftRasterizer.image`).

Reading: `load_frames` gives float64 in [0, 1] at the files' own depth (16-bit PNG and
TIFF exact, `tigradsim.io.image_files`), `load_video` uint8; a file that cannot be read
right raises `tigradsim.core.errors.FootageError` naming it.
"""
from __future__ import annotations

import fnmatch
import importlib.util
import re
from pathlib import Path

import numpy as np

from ..core.errors import FootageError
from .image_files import read_image

_IMAGE_EXT = (".png", ".jpg", ".jpeg", ".bmp", ".tif", ".tiff")
_MOVIE_EXT = (".mp4", ".avi", ".mov", ".mkv", ".webm")
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
    # no widened copies of the whole video: 121 frames of 720 x 540 RGB are 141 MB as uint8, 1.1 GB as int64
    if arr.dtype == np.uint8:
        return arr
    if arr.dtype == bool:
        return arr.astype(np.uint8) * np.uint8(255)
    if np.issubdtype(arr.dtype, np.integer):
        return np.clip(arr, 0, 255).astype(np.uint8)
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
    """Write an animated GIF (looping) at `fps` frames per second.

    GIF writers merge consecutive identical frames into one longer frame, and a grey
    video is stored through a palette that readers expand to RGB; so the GIF also
    carries a comment ("tigradsim frames=K fps=F channels=C") from which
    `load_video` restores every frame and the channel count.  Grey frames are written
    losslessly (256 grey levels); colour frames are quantised to a 256-colour palette.
    """
    from PIL import Image

    fps = _positive_fps(fps)
    frames = to_uint8(images)
    if frames.ndim == 4 and frames.shape[-1] == 4:
        frames = frames[..., :3]
    channels = 1 if frames.ndim == 3 else 3
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    comment = f"{_GIF_TAG} frames={len(frames)} fps={fps!r} channels={channels}".encode()
    # frames become PIL images one at a time (a generator): a list would hold a second copy of the video
    Image.fromarray(frames[0]).save(str(path), format="GIF", save_all=True,
                                    append_images=(Image.fromarray(f) for f in frames[1:]), duration=1000.0 / fps,
                                    loop=0, comment=comment)
    return str(path)


_GIF_TAG = "tigradsim"


def video_fps(path):
    """Frames per second stored in a GIF (written by `save_gif`: exact; else from the
    median frame duration) or a movie file (its metadata; needs imageio-ffmpeg); None
    for a folder of images or a file without timing.  A damaged file: FootageError."""
    p = Path(path)
    if p.is_dir() or not p.exists():
        return None
    try:
        return _stored_fps(p)
    except (FootageError, RuntimeError):
        raise
    except Exception as exc:        # Pillow's and ffmpeg's errors for a damaged file
        raise FootageError(f"{p}: cannot read its frame rate ({type(exc).__name__}: {exc})") from None


def _stored_fps(p):
    if p.suffix.lower() == ".gif":
        from PIL import Image, ImageSequence

        with Image.open(p) as im:
            comment = im.info.get("comment", b"")
            if isinstance(comment, bytes) and comment.startswith(_GIF_TAG.encode()):
                for item in comment.decode(errors="replace").split()[1:]:
                    key, _, value = item.partition("=")
                    if key == "fps":
                        return float(value)
            durations = [float(fr.info.get("duration") or 0.0) for fr in ImageSequence.Iterator(im)]
        durations = [d for d in durations if d > 0]
        return 1000.0 / float(np.median(durations)) if durations else None
    if p.suffix.lower() in _MOVIE_EXT:
        _require_ffmpeg("video_fps of a movie file")
        import imageio.v2 as iio2

        with iio2.get_reader(str(p), format="FFMPEG") as reader:
            fps = reader.get_meta_data().get("fps")
        return float(fps) if fps else None
    return None


def _read_gif(p) -> np.ndarray:
    """Every frame of a GIF as uint8 (K, H, W, C): frames a writer merged (one frame shown
    for n frame durations) are repeated n times; C = 1 for a GIF written by `save_gif`
    from grey frames, else 3 (RGB) or 4 (with transparency)."""
    from PIL import Image, ImageSequence

    with Image.open(p) as im:
        meta = {}
        comment = im.info.get("comment", b"")
        if isinstance(comment, bytes) and comment.startswith(_GIF_TAG.encode()):
            for item in comment.decode(errors="replace").split()[1:]:
                key, _, value = item.partition("=")
                meta[key] = value
        frames, durations = [], []
        for fr in ImageSequence.Iterator(im):
            mode = "RGBA" if fr.mode in ("RGBA", "PA") or "transparency" in fr.info else "RGB"
            frames.append(np.asarray(fr.convert(mode)))
            durations.append(float(fr.info.get("duration") or 0.0))
    durations = np.asarray(durations)
    try:
        base = 1000.0 / float(meta["fps"])
    except (KeyError, ValueError, ZeroDivisionError):
        positive = durations[durations > 0]
        base = positive.min() if positive.size else 0.0
    repeats = np.maximum(1, np.round(durations / base).astype(int)) if base > 0 else np.ones(len(frames), int)
    try:
        expected = int(meta["frames"])
    except (KeyError, ValueError):
        expected = None
    if expected is not None and repeats.sum() != expected:
        # GIF stores durations in 1/100 s: fix the rounding on the frames that absorbed the most
        diff = expected - int(repeats.sum())
        order = np.argsort(-(durations / base - repeats) * np.sign(diff)) if base > 0 else np.arange(len(frames))
        for k in order[:abs(diff)]:
            repeats[k] = max(1, repeats[k] + int(np.sign(diff)))
    out = np.stack([f for f, n in zip(frames, repeats) for _ in range(n)])
    if meta.get("channels") == "1":
        out = out[..., :1]
    return out


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


def _natural_key(name):
    """Sort key that orders 'f_2' before 'f_10' (numbers compared as numbers)."""
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", name)]


def _pattern_regex(pattern):
    """A compiled regex for a glob ("frame_*.png") or printf ("rgb_%04d.png") file pattern."""
    if "%" in pattern:
        parts = re.split(r"(%0?\d*d)", pattern)
        if len(parts) != 3:
            raise FootageError(f"pattern={pattern!r}: a printf pattern needs exactly one integer field like %04d")
        return re.compile(re.escape(parts[0]) + r"(\d+)" + re.escape(parts[2]) + r"\Z")
    return re.compile(fnmatch.translate(pattern))


def list_frames(folder, pattern=None) -> list:
    """Image files of a frame folder, in frame order.

    pattern: a glob ("frame_*.png") or a printf pattern ("rgb_%04d.png"; frames ordered
    by their number) matched against file names, so a folder that holds frames and
    masks reads only one of them.  None: every image file, which must then share one
    name stem (a folder with 'rgb_0000.png' and 'mask_0000.png' raises an error that
    lists the stems and asks for `pattern`).  Natural order ('f_2' before 'f_10').
    """
    p = Path(folder)
    if not p.is_dir():
        raise FootageError(f"folder={str(p)!r} is not a folder")
    images = [f for f in p.iterdir() if f.is_file() and f.suffix.lower() in _IMAGE_EXT]
    if pattern is not None:
        if not isinstance(pattern, str) or not pattern:
            raise FootageError(f"pattern={pattern!r}: expected a glob like 'frame_*.png' or a printf pattern "
                               f"like 'rgb_%04d.png'")
        rx = _pattern_regex(pattern)
        files = [f for f in images if rx.match(f.name)]
        if not files:
            raise FootageError(f"pattern={pattern!r} matches no image file in {str(p)!r} "
                               f"(it holds {len(images)} image files, e.g. {sorted(f.name for f in images)[:3]})")
        return _in_sequence(sorted(files, key=lambda f: _natural_key(f.name)))
    if not images:
        raise FootageError(f"folder={str(p)!r} contains no image files {_IMAGE_EXT}")
    stems = {}
    for f in images:
        stems.setdefault(re.sub(r"\d+", "*", f.name), []).append(f)
    if len(stems) > 1:
        groups = ", ".join(f"{k!r} ({len(v)} files)" for k, v in sorted(stems.items()))
        raise FootageError(f"folder={str(p)!r} holds images of several kinds: {groups}; pass pattern= "
                           f"(a glob like 'frame_*.png' or a printf pattern like 'rgb_%04d.png') to choose one")
    return _in_sequence(sorted(images, key=lambda f: _natural_key(f.name)))


def _in_sequence(files):
    """`files` (in frame order), checked for a missing or doubled frame: when every name holds
    one number, the numbers must step evenly (0, 1, 2, ... or 0, 2, 4, ...): a missing file would
    shift every later frame in time without a word."""
    numbers = [re.findall(r"\d+", f.name) for f in files]
    if len(files) < 3 or any(len(n) != 1 for n in numbers):
        return files
    values = np.array([int(n[0]) for n in numbers])
    steps = np.diff(values)
    if steps.min() == 0:
        k = int(np.argmin(steps))
        raise FootageError(f"{files[k].name} and {files[k + 1].name} have the same frame number {values[k]}")
    if np.any(steps != steps.min()):
        k = int(np.argmax(steps != steps.min()))
        raise FootageError(f"frame numbers step by {steps.min()} but jump from {values[k]} ({files[k].name}) to "
                           f"{values[k + 1]} ({files[k + 1].name}) in {str(files[0].parent)!r}: a missing frame would "
                           f"shift every later frame in time; restore it, or read the frames before the gap "
                           f"(scene files: [footage] count)")
    return files


def _load(path_or_dir, pattern=None):
    """Frames (K, H, W, C) in the files' own type (uint8, uint16, float32) and their full scale
    (255, 65535, 1.0); files of several depths come back as float64 in [0, 1] (scale 1)."""
    p = Path(path_or_dir)
    if pattern is None and not p.exists() and ("*" in p.name or "%" in p.name or "?" in p.name):
        p, pattern = p.parent, p.name
    if not p.exists():
        raise FootageError(f"path_or_dir={str(p)!r} does not exist")
    if pattern is not None and not p.is_dir():
        raise FootageError(f"pattern={pattern!r} needs a folder, got path_or_dir={str(p)!r}")
    if p.is_dir():
        files = list_frames(p, pattern)
        pages = []
        for f in files:
            arr, scale = read_image(f)
            if len(arr) != 1:
                raise FootageError(f"{f}: holds {len(arr)} pages; a frame folder takes one image per file")
            if pages and arr.shape != pages[0][0].shape:
                raise FootageError(f"{f}: {_describe(arr.shape[1:])}, but {files[0]} is "
                                   f"{_describe(pages[0][0].shape[1:])}: every frame must have the same size and "
                                   f"channels")
            pages.append((arr, scale))
        scales = {s for _, s in pages}
        if len(scales) == 1:
            return np.concatenate([a for a, _ in pages]), pages[0][1]
        return np.concatenate([a.astype(np.float64) / s for a, s in pages]), 1.0
    suffix = p.suffix.lower()
    if suffix == ".gif":
        try:
            return _read_gif(p), 255.0
        except Exception as exc:        # Pillow signals damaged GIFs with OSError, SyntaxError, EOFError, ...
            raise FootageError(f"{p}: not a readable GIF ({type(exc).__name__}: {exc})") from None
    if suffix in _MOVIE_EXT:
        _require_ffmpeg("load_video of a movie file")
        import imageio.v2 as iio2

        try:
            with iio2.get_reader(str(p), format="FFMPEG") as reader:
                return np.stack([np.asarray(fr) for fr in reader]), 255.0
        except Exception as exc:        # ffmpeg's errors for a damaged or unknown movie file
            raise FootageError(f"{p}: not a readable movie ({type(exc).__name__}: {exc})") from None
    if suffix in _IMAGE_EXT:
        return read_image(p)
    raise FootageError(f"path_or_dir={str(p)!r}: unknown format (expected a folder, .gif, "
                       f"{', '.join(_MOVIE_EXT)} or an image file {_IMAGE_EXT})")


def _describe(shape):
    H, W, C = shape
    return f"{W}x{H} px with {C} channel{'s' if C > 1 else ''}"


def load_frames(path_or_dir, pattern=None) -> np.ndarray:
    """Frames as float64 (K, H, W, C) in [0, 1], read at the files' own depth (16-bit PNG and
    TIFF to their last bit): a folder of images (see `list_frames` for `pattern` and the
    order), a GIF, an MP4 (needs imageio-ffmpeg), a single image file (every page of a
    multi-page TIFF), or a folder plus pattern ("clip/rgb_%04d.png", "clip/frame_*.png").
    A file that cannot be read right raises FootageError naming it
    (`tigradsim.io.image_files`)."""
    arr, scale = _load(path_or_dir, pattern)
    arr = arr.astype(np.float64)
    if scale != 1.0:
        arr /= scale
    return arr[..., None] if arr.ndim == 3 else arr


def load_video(path_or_dir, pattern=None) -> np.ndarray:
    """Frames as uint8 (K, H, W, C), from the same sources as `load_frames`: 8-bit files as
    they are, 16-bit and float ones rounded to the nearest of 256 levels (`load_frames`
    keeps their depth).  Grey GIFs written by `save_gif` keep C = 1."""
    arr, scale = _load(path_or_dir, pattern)
    if arr.ndim == 3:
        arr = arr[..., None]
    if arr.dtype == np.uint8:
        return np.ascontiguousarray(arr)
    out = to_uint8(arr.astype(np.float64) / scale)
    return out[..., None] if out.ndim == 3 else out


__all__ = ["to_uint8", "save_frames", "save_gif", "save_mp4", "load_video", "load_frames", "list_frames",
           "video_fps"]
