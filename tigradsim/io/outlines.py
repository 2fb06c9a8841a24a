"""The footage with the fit's outlines drawn on it: what `tigradsim fit` and `render` write as
pictures (render's silhouette in red, the footage's masks in green)."""
import numpy as np

__all__ = ["outline_frames"]


def _edges(mask):
    """Boolean (K, H, W): pixels of `mask` that have a 4-neighbour outside it."""
    m = np.pad(mask, ((0, 0), (1, 1), (1, 1)), mode="edge")
    inner = m[:, 1:-1, 1:-1]
    nb = m[:, :-2, 1:-1] & m[:, 2:, 1:-1] & m[:, 1:-1, :-2] & m[:, 1:-1, 2:]
    return inner & ~nb


def outline_frames(frames, alpha, masks=None, upscale=1):
    """Footage frames (K, H, W, 3) in [0, 1] with the render's outline (alpha > 0.5) in red
    and, when given, the masks' outline in green; uint8 (K, H u, W u, 3), u = upscale."""
    f = np.asarray(frames, dtype=np.float64)
    a = np.asarray(alpha, dtype=np.float64)
    if upscale > 1:
        f = f.repeat(upscale, 1).repeat(upscale, 2)
        a = a.repeat(upscale, 1).repeat(upscale, 2)
        masks = None if masks is None else np.asarray(masks).repeat(upscale, 1).repeat(upscale, 2)
    out = f.copy()
    if masks is not None:
        out[_edges(np.asarray(masks) > 0.5)] = (0.1, 0.9, 0.1)
    out[_edges(a > 0.5)] = (1.0, 0.1, 0.1)
    return (np.clip(out, 0, 1) * 255 + 0.5).astype(np.uint8)
