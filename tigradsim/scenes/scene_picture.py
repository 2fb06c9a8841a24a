"""A picture of a scene file's scene: its objects AND its colliders (a ramp, a table, a wall), shaded, as
`tigradsim render` writes them to `scene/` beside the silhouettes it compares with the masks.

The fit's renderer (`Scene._make_renderer`) draws the objects only, as the footage's masks show them; a user
checking a scene wants to see what the objects touch.  `scene_picture` renders, after a rollout (`Scene.render`),
each footage frame once more with one more `SoftRasterizer`: the objects' surfaces at that frame's time (the
fit renderer's own `TimedVertices` frames, so the objects are exactly where the silhouettes put them) with
every collider's surface (`physics.collider_surfaces`, at the current fitted pose and size) in one mesh, so
depth hides what is behind what.  Lambert shading, the objects in their colours, colliders in `COLLIDER_RGB`,
on a light grey background.  Not differentiable (no Tape): a picture, not a loss.
"""
import numpy as np

from ..physics.collider_surfaces import COLLIDER_RGB

BACKGROUND_RGB = (0.92, 0.92, 0.92)


def scene_picture(scene):
    """(K, H, W, 4) RGBA frames of the objects and colliders at the footage's times, at the first camera (module
    docstring); None when the scene has no colliders.  Call after `scene.render()` (it reads that rollout)."""
    from ..physics.collider_surfaces import collider_surfaces
    from ..renderers import SoftRasterizer

    faces, nverts, vids, colors = scene._surface()
    frames = scene.timed.vertices.to_numpy().astype(np.float64)            # (K, V, 3) objects per frame
    objects = frames if vids is None else frames[:, vids]
    center = objects[0].mean(axis=0)
    spread = float(np.linalg.norm(objects - center, axis=-1).max())
    # planes: a square around the objects, large enough to fill the view behind them
    surfaces = collider_surfaces(scene.model, center=center, extent=max(4.0 * spread, 1.0))
    if not surfaces:
        return None
    parts_v, parts_f, start = [], [np.asarray(faces, dtype=np.int64)], nverts
    for v, f in surfaces:
        parts_v.append(v)
        parts_f.append(f + start)
        start += len(v)
    static = np.concatenate(parts_v)
    all_colors = np.concatenate([np.asarray(colors, dtype=np.float64), np.tile(COLLIDER_RGB, (len(static), 1))])
    K = len(objects)
    ren = SoftRasterizer(scene.camera, np.concatenate(parts_f).astype(np.int32), start, frames=K,
                         shading="lambert", vertex_colors=all_colors, edge_softness=scene.edge_softness,
                         background=BACKGROUND_RGB)
    for k in range(K):
        ren.render_numpy(np.concatenate([objects[k], static]), frame=k)
    return ren.image.to_numpy().copy()
