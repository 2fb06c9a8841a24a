"""Triangle surfaces of a model's static colliders, for pictures (the scene renders of `tigradsim render`, the
viewer's collider layers, `Animation.colliders`); the contact itself never reads them (it asks `shapes.ShapeTable.distance`).

`collider_surfaces(model, center, extent)` gives one (vertices (V, 3) [m], faces (F, 3)) per collider, in the
world at the collider's CURRENT pose and size (`collider_pose`, `collider_size`: fitted values included):

    plane    a square of half side `extent` in the plane, centred on the foot of `center` (e.g. the objects'
             centre) on it (a plane is infinite; the picture shows the part around the objects)
    sphere   an icosphere (2 subdivisions) of its radius
    box      its 8 corners and 12 triangles
    capsule  an icosphere of its radius whose upper half is moved up and lower half down by the half length
             (the triangles that cross its equator form the cylinder)
    mesh     its own mesh (`add_collider(mesh=...)`) times its scale
"""
import numpy as np

from ..io.meshes import box_surface, icosphere
from .rigid_pose import quat_to_matrix_np
from .shapes import BOX, CAPSULE, MESH, PLANE, SPHERE

# the colour colliders are drawn in (r, g, b in [0, 1]): the scene renders (`scenes.scene_picture`) and the
# viewer's collider layers (`io.animation.Animation.colliders`)
COLLIDER_RGB = (0.69, 0.53, 0.31)


def local_surface(kind, size, mesh=None, center_local=(0.0, 0.0, 0.0), extent=1.0):
    """(vertices, faces) of one shape in its own frame (module docstring); `center_local` and `extent` only
    for a plane."""
    size = np.asarray(size, dtype=np.float64)
    if kind == PLANE:
        c = np.asarray(center_local, dtype=np.float64)
        e = float(extent)
        v = np.array([[c[0] - e, 0.0, c[2] - e], [c[0] + e, 0.0, c[2] - e], [c[0] + e, 0.0, c[2] + e],
                      [c[0] - e, 0.0, c[2] + e]])
        return v, np.array([[0, 2, 1], [0, 3, 2]])           # counter-clockwise seen from +y (its outside)
    if kind == SPHERE:
        return icosphere(2, radius=float(size[0]))
    if kind == BOX:
        return box_surface(2.0 * size[:3])
    if kind == CAPSULE:
        v, f = icosphere(2, radius=float(size[0]))
        v = np.asarray(v, dtype=np.float64).copy()
        v[:, 1] += np.sign(v[:, 1]) * float(size[1])
        return v, f
    if kind == MESH:
        if mesh is None:
            raise ValueError("mesh: a mesh collider's surface needs its mesh (add_collider(mesh=...))")
        return np.asarray(mesh[0], dtype=np.float64) * float(size[0]), np.asarray(mesh[1])
    raise ValueError(f"kind: unknown shape kind {kind!r}")


def collider_surfaces(model, center=(0.0, 0.0, 0.0), extent=1.0) -> list:
    """[(vertices (V, 3) world [m], faces (F, 3) int)] of every collider of `model` (module docstring); []
    without colliders."""
    count = getattr(model, "collider_count", 0)
    if not count:
        return []
    poses = model.collider_pose.to_numpy().astype(np.float64)
    sizes = model.collider_size.to_numpy().astype(np.float64)
    kinds = model.collider_table.kinds
    meshes = getattr(model, "collider_meshes", [None] * count)
    out = []
    for c in range(count):
        q = poses[c, 3:] / np.linalg.norm(poses[c, 3:])
        R = quat_to_matrix_np(q)
        center_local = (np.asarray(center, dtype=np.float64) - poses[c, :3]) @ R
        v, f = local_surface(kinds[c], sizes[c], meshes[c], center_local, extent)
        out.append((np.asarray(v, dtype=np.float64) @ R.T + poses[c, :3], np.asarray(f, dtype=np.int64)))
    return out
