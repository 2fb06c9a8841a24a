"""The pictures and figures `tigradsim render` and `tigradsim fit` write beside a scene's silhouettes: the outline
video of rendered silhouettes over the footage's masks (`write_outline`), the IoU per frame (`iou_summary`), and
with [[cameras]] the same for every camera after the first (`views_outlines`).
"""
import math
import os

import numpy as np


def write_outline(path_gif, path_png, footage, alpha, fps):
    """The outline video (GIF) and a PNG of its first, middle and last frames side by side."""
    import imageio.v3 as iio
    from ..io.outlines import outline_frames
    from ..io.video import save_gif

    rgb = footage.frames if footage.channels == 3 else np.repeat(footage.frames, 3, axis=-1)
    up = max(1, int(math.ceil(256 / footage.height)))      # small renders are hard to judge: show >= 256 px
    frames = outline_frames(rgb, alpha, footage.masks, upscale=up)
    save_gif(frames, path_gif, fps=min(fps, 30.0))
    K = len(frames)
    picks = sorted({0, K // 2, K - 1})
    gap = np.full((frames.shape[1], 4, 3), 255, np.uint8)
    row = [x for k in picks for x in (frames[k], gap)][:-1]
    iio.imwrite(path_png, np.concatenate(row, axis=1))
    return picks


def iou_summary(footage, alpha):
    """The silhouette IoU of `alpha` (K, H, W) against the footage's masks: mean, min, first, last and per frame;
    None without masks."""
    from .scene_build import silhouette_iou
    if footage.masks is None:
        return None
    iou = silhouette_iou(alpha, footage.masks)
    return {"mean": float(iou.mean()), "min": float(iou.min()), "first": float(iou[0]), "last": float(iou[-1]),
            "per_frame": [round(float(v), 4) for v in iou]}


def fitted_iou(iou, views, frames):
    """The fit's mean silhouette IoU over the first `frames` frames (those fitted: the horizon rule leaves out the
    frames the model cannot predict, so they say nothing of whether the fit reached the data): from one camera's
    `iou_summary` `iou`, or over every camera of `views` (`views_iou`) when there are several; None without
    masks."""
    from .scene_views import mean_iou
    if views:
        return mean_iou(views, frames)
    return None if iou is None else float(np.mean(iou["per_frame"][:frames]))


def views_outlines(scene, out, prefix, before=None):
    """[[cameras]]: every camera's IoU (`views_iou`; {} for one [camera]) at the current values, and
    the outline video and PNG of each camera after the first (`{prefix}_outline_{name}.gif`) in `out`."""
    from .scene_views import views_iou
    if not scene.spec.several_cameras:
        return {}
    videos = scene.render_views()
    for view, video in list(zip(scene.views, videos))[1:]:
        fo = view.footage
        write_outline(os.path.join(out, f"{prefix}_outline_{view.name}.gif"),
                       os.path.join(out, f"{prefix}_outline_{view.name}.png"), fo, video[..., -1], fo.fps)
    return views_iou(scene, videos, before)
