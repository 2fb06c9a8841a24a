"""Pictures that explain themselves: labelled video panels, a grid of trials, an outline overlay.

    strip = labelled_strip([("target", target, "mass 1.00 kg"),
                            ("initial guess", initial, "mass 0.52 kg"),
                            ("estimate", final, "mass 0.99 kg")], scale=2)
    grid = trials_grid([strip_0, strip_1], labels=["trial 0", "trial 1"])
    overlay_png(target[-1], final[-1], "out/overlay.png")

Videos are (K, H, W) or (K, H, W, C) with C in 1, 3, 4; floats in [0, 1], integers
in [0, 255] (the conventions of `tigradsim.io.video`).  Results are uint8 RGB videos
(K, H', W', 3) with row 0 on top, ready for `tigradsim.io.video.save_gif` or
`tigradsim.io.viz.play_video`.
"""
import os

import numpy as np

from .video import to_uint8

_WHITE = 255
_TITLE_COLOR = (20, 20, 20)
_VALUES_COLOR = (90, 90, 90)
_LABEL_BG = (236, 236, 230)
_ROW_BG = (60, 70, 90)          # trial rows: a dark bar, so rows stand apart from the panel labels
_ROW_TEXT = (250, 250, 250)


def _rgb_video(frames, name):
    """Any accepted video -> uint8 (K, H, W, 3); alpha (RGBA) is composited over white."""
    try:
        v = to_uint8(frames)
    except (ValueError, TypeError) as exc:
        raise ValueError(f"{name}: {exc}") from None
    if v.ndim == 3:
        return np.repeat(v[..., None], 3, axis=-1)
    if v.shape[-1] == 4:
        a = v[..., 3:].astype(np.float64) / 255.0
        return (v[..., :3] * a + _WHITE * (1.0 - a) + 0.5).astype(np.uint8)
    return v


def _font(size):
    from PIL import ImageFont
    try:
        return ImageFont.load_default(size=size)     # scalable (Pillow >= 10.1 with FreeType)
    except (TypeError, OSError, AttributeError):
        return ImageFont.load_default()


def _fit_text(draw, text, font, width):
    """`text`, cut with '...' so that it fits `width` pixels."""
    if draw.textlength(text, font=font) <= width:
        return text
    while text and draw.textlength(text + "...", font=font) > width:
        text = text[:-1]
    return text + "..."


def _label_bar(width, lines, size=13, background=_LABEL_BG, colors=(_TITLE_COLOR, _VALUES_COLOR)):
    """uint8 (h, width, 3): the lines of text (the first in colors[0], the others in colors[1])."""
    from PIL import Image, ImageDraw
    font = _font(size)
    line_h = size + 4
    h = 6 + line_h * len(lines)
    img = Image.new("RGB", (width, h), background)
    draw = ImageDraw.Draw(img)
    for i, line in enumerate(lines):
        draw.text((4, 3 + i * line_h), _fit_text(draw, line, font, width - 8), font=font,
                  fill=colors[0] if i == 0 else colors[1])
    return np.asarray(img, dtype=np.uint8)


def _hold(video, count):
    """(K, ...) -> (count, ...), the last frame held."""
    if len(video) >= count:
        return video[:count]
    return np.concatenate([video, np.repeat(video[-1:], count - len(video), axis=0)])


def _pad(video, height, width):
    """Pad (K, H, W, 3) on the bottom and right with white to (K, height, width, 3)."""
    k, h, w, _ = video.shape
    out = np.full((k, height, width, 3), _WHITE, dtype=np.uint8)
    out[:, :h, :w] = video
    return out


def labelled_strip(panels, scale=2, gap=4) -> np.ndarray:
    """Videos side by side, each with a label bar above it: uint8 (K, H', W', 3).

    panels: list of (title, frames) or (title, frames, values), values a str (e.g.
    "mass 1.00 kg", one label line per newline-separated part) or None.  Each video is
    upscaled by the integer `scale` (nearest pixel); a shorter video holds its last
    frame until the longest ends; panels of different sizes are padded with white.
    gap: white pixels between panels."""
    if not isinstance(panels, (list, tuple)) or not panels:
        raise ValueError(f"panels: expected a non-empty list of (title, frames[, values]), got {str(panels)[:80]}")
    if int(scale) != scale or scale < 1:
        raise ValueError(f"scale={scale}: expected a positive integer upscaling factor")
    if int(gap) != gap or gap < 0:
        raise ValueError(f"gap={gap}: expected a non-negative number of pixels")
    scale, gap = int(scale), int(gap)
    titles, videos, values = [], [], []
    for i, panel in enumerate(panels):
        if not isinstance(panel, (list, tuple)) or len(panel) not in (2, 3):
            raise ValueError(f"panels[{i}]: expected (title, frames) or (title, frames, values), got "
                             f"{type(panel).__name__}")
        titles.append(str(panel[0]))
        videos.append(_rgb_video(panel[1], f"panels[{i}] ({panel[0]!r}) frames"))
        values.append(None if len(panel) == 2 or panel[2] is None else str(panel[2]))
    count = max(len(v) for v in videos)
    videos = [np.repeat(np.repeat(_hold(v, count), scale, axis=1), scale, axis=2) for v in videos]
    height = max(v.shape[1] for v in videos)
    value_lines = [v.split("\n") if v else [] for v in values]
    lines = max(len(v) for v in value_lines)
    columns = []
    for title, video, value in zip(titles, videos, value_lines):
        bar = _label_bar(video.shape[2], [title] + value + [""] * (lines - len(value)))
        body = _pad(video, height, video.shape[2])
        columns.append(np.concatenate([np.broadcast_to(bar, (count,) + bar.shape), body], axis=1))
        columns.append(np.full((count, bar.shape[0] + height, gap, 3), _WHITE, dtype=np.uint8))
    return np.ascontiguousarray(np.concatenate(columns[:-1], axis=2))


def trials_grid(strips, labels=None, gap=6) -> np.ndarray:
    """One row per trial: uint8 video (K, H', W', 3), each row under a label bar.

    strips: list of videos (e.g. `labelled_strip` results or `VideoFit.report_strip`);
    shorter ones hold their last frame, narrower ones are padded on the right with
    white.  labels: one str per strip (None: "trial 0", "trial 1", ...)."""
    if not isinstance(strips, (list, tuple)) or not strips:
        raise ValueError("strips: expected a non-empty list of videos (one per trial)")
    if labels is None:
        labels = [f"trial {i}" for i in range(len(strips))]
    if len(labels) != len(strips):
        raise ValueError(f"labels: {len(labels)} labels for {len(strips)} strips; give one label per strip")
    videos = [_rgb_video(s, f"strips[{i}]") for i, s in enumerate(strips)]
    count = max(len(v) for v in videos)
    width = max(v.shape[2] for v in videos)
    rows = []
    for label, video in zip(labels, videos):
        bar = _label_bar(width, [str(label)], size=14, background=_ROW_BG, colors=(_ROW_TEXT, _ROW_TEXT))
        rows.append(np.broadcast_to(bar, (count,) + bar.shape))
        rows.append(_pad(_hold(video, count), video.shape[1], width))
        rows.append(np.full((count, gap, width, 3), _WHITE, dtype=np.uint8))
    return np.ascontiguousarray(np.concatenate(rows[:-1], axis=1))


def silhouette_mask(frame) -> np.ndarray:
    """Where an object is in one frame: bool (H, W).

    Grey frames (H, W) or (H, W, 1) are silhouettes (> 0.5); RGBA uses alpha > 0.5; RGB
    marks pixels that differ by more than 0.1 (in [0, 1]) from the background colour,
    taken as the median of the frame's border pixels."""
    f = np.asarray(frame)
    if f.ndim == 3 and f.shape[-1] == 1:
        f = f[..., 0]
    g = to_uint8(f[None])[0].astype(np.float64) / 255.0
    if g.ndim == 2:
        return g > 0.5
    if g.shape[-1] == 4:
        return g[..., 3] > 0.5
    border = np.concatenate([g[0], g[-1], g[:, 0], g[:, -1]])
    background = np.median(border, axis=0)
    return np.abs(g - background).max(axis=-1) > 0.1


def outline(mask, thickness=1) -> np.ndarray:
    """The inner boundary of a bool mask (H, W): mask pixels within `thickness` 4-neighbour
    steps of a pixel outside it (the image border counts as outside)."""
    m = np.asarray(mask, dtype=bool)
    interior = m
    for _ in range(int(thickness)):
        p = np.pad(interior, 1, constant_values=False)
        interior = interior & p[:-2, 1:-1] & p[2:, 1:-1] & p[1:-1, :-2] & p[1:-1, 2:]
    return m & ~interior


def overlay_png(target_frame, estimate_frame, path, scale=None, color=(255, 0, 0), thickness=2) -> str:
    """Write the target frame with the estimate's outline drawn over it in red; returns `path`.

    target_frame, estimate_frame: (H, W) or (H, W, C) images of the same H, W (e.g. the
    last frames of the target and of the fitted video).  Both are upscaled by the
    integer `scale` (None: to at least 256 pixels) first, so the outline (`thickness` pixels, inside the estimate's
    silhouette) is thin next to the object and the target shows through; where the
    outline follows the target's own edge, the fit is right."""
    t = np.asarray(target_frame)
    e = np.asarray(estimate_frame)
    if t.ndim not in (2, 3) or e.ndim not in (2, 3):
        raise ValueError(f"target_frame, estimate_frame: expected single images (H, W[, C]), got shapes "
                         f"{t.shape} and {e.shape}")
    if t.shape[:2] != e.shape[:2]:
        raise ValueError(f"estimate_frame: size {e.shape[:2]} differs from target_frame's {t.shape[:2]}")
    if scale is None:
        scale = max(1, -(-256 // max(t.shape[:2])))
    if int(scale) != scale or scale < 1:
        raise ValueError(f"scale={scale}: expected a positive integer upscaling factor")
    if int(thickness) != thickness or thickness < 1:
        raise ValueError(f"thickness={thickness}: expected a positive number of pixels")
    scale = int(scale)
    rgb = _rgb_video(t[None], "target_frame")[0]
    rgb = np.repeat(np.repeat(rgb, scale, axis=0), scale, axis=1).copy()
    mask = silhouette_mask(e)
    mask = np.repeat(np.repeat(mask, scale, axis=0), scale, axis=1)
    rgb[outline(mask, thickness)] = np.asarray(color, dtype=np.uint8)
    from PIL import Image
    parent = os.path.dirname(os.fspath(path))
    if parent:
        os.makedirs(parent, exist_ok=True)
    Image.fromarray(rgb).save(os.fspath(path))
    return os.fspath(path)
