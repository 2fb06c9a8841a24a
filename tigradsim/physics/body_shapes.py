"""Contact shapes of rigid bodies: the geometry the other bodies and the particles touch.

Every rigid body has one shape of `tigradsim.physics.shapes` in its BODY frame (origin at its centre of mass,
axes of its input mesh; `rigid.RigidBodies`), chosen by `add_rigid_body(..., shape=..., shape_size=...,
shape_resolution=...)`:

    shape=None (default)  "box" when the body's (welded) mesh is exactly the 8 corners of its bounding box (a
                          `meshes.box_surface`, an OBJ cube: `is_box_mesh`), else "mesh"
    "box"                 half extents shape_size = (hx, hy, hz) [m]; default: the mesh's largest |x|, |y|, |z|
    "sphere"              radius shape_size = r [m]; default: the mesh's largest |v|
    "capsule"             (radius, half length of the axis) along the body's y axis; default: the mesh's
                          largest distance from the y axis, and its largest |y| less that radius
    "mesh"                the signed-distance grid of the body's own closed mesh (`shapes.mesh_sdf_grid`,
                          `shape_resolution` samples along its longest side, default 32); shape_size = scale
                          (default 1)

The analytic shapes are centred at the centre of mass (for a symmetric body, its centre).  The shape is the
geometry OTHER objects touch: body b's contact points (`contact_point`, the mesh vertices by default) touch
the shapes of the other bodies, and particles touch every body's shape (`body_contact`, `coupling`).  It
does not change the mass or inertia (those come from the mesh); its size `body_shape_size` (ShapeTable
prefix "body_shape") is differentiable.  The mesh grid is computed only when the scene has something that
can touch a body shape (two bodies, or a body and particles): about a second for a 1,000-triangle mesh.
"""
from __future__ import annotations

import numpy as np

from .shapes import BOX, CAPSULE, KIND_NAMES, MESH, SPHERE, ShapeTable, check_shape, mesh_sdf_grid

BODY_SHAPES = ("box", "sphere", "capsule", "mesh")
DEFAULT_RESOLUTION = 32
# A mesh counts as a box when its 8 vertices lie on the corners of its bounding box within this fraction
# of the box's diagonal.
_BOX_TOL = 1e-6


def is_box_mesh(vertices) -> bool:
    """Whether (welded) mesh vertices (V, 3) are exactly the 8 corners of their axis-aligned bounding box."""
    v = np.asarray(vertices, dtype=np.float64)
    if v.shape != (8, 3):
        return False
    lo, hi = v.min(axis=0), v.max(axis=0)
    diag = float(np.linalg.norm(hi - lo))
    if not diag > 0:
        return False
    corners = {(i, j, k) for i in (0, 1) for j in (0, 1) for k in (0, 1)}
    seen = set()
    for p in v:
        key = []
        for a in range(3):
            if abs(p[a] - lo[a]) <= _BOX_TOL * diag:
                key.append(0)
            elif abs(p[a] - hi[a]) <= _BOX_TOL * diag:
                key.append(1)
            else:
                return False
        seen.add(tuple(key))
    return seen == corners


def check_body_shape(shape, shape_size, shape_resolution):
    """Validate `add_rigid_body`'s shape options (before any kernel); returns them as a dict."""
    if shape is not None and shape not in BODY_SHAPES:
        raise ValueError(f"shape: expected one of {BODY_SHAPES} or None (a box for a box mesh, else the mesh), "
                         f"got {shape!r}")
    if shape_size is not None and shape is None:
        raise ValueError("shape_size: give it with shape= ('box', 'sphere', 'capsule' or 'mesh'), "
                         f"got shape_size={shape_size!r} and shape=None")
    if shape_size is not None:
        _check_size(shape, shape_size)
    res = DEFAULT_RESOLUTION if shape_resolution is None else shape_resolution
    if isinstance(res, bool) or not (isinstance(res, (int, np.integer)) and res >= 4):
        raise ValueError(f"shape_resolution: expected a whole number >= 4 (grid samples along the mesh's longest "
                         f"side), got {shape_resolution!r}")
    return dict(shape=shape, size=None if shape_size is None else np.atleast_1d(np.asarray(shape_size, float)),
                resolution=int(res))


def default_size(kind: str, vertices) -> np.ndarray:
    """The default size of an analytic shape that encloses body-frame mesh vertices (module docstring)."""
    v = np.asarray(vertices, dtype=np.float64)
    if kind == "box":
        return np.abs(v).max(axis=0)
    if kind == "sphere":
        return np.array([np.linalg.norm(v, axis=1).max()])
    if kind == "capsule":
        r = float(np.linalg.norm(v[:, [0, 2]], axis=1).max())
        return np.array([r, max(float(np.abs(v[:, 1]).max()) - r, 1e-9 * max(r, 1.0))])
    return np.ones(1)


def body_shape(spec: dict, vertices, faces):
    """(kind id, size (3,), grid or None) of one body from its shape options and body-frame mesh."""
    kind = spec["shape"]
    if kind is None:
        kind = "box" if is_box_mesh(vertices) else "mesh"
    size = spec["size"] if spec["size"] is not None else default_size(kind, vertices)
    k, size3 = _check_size(kind, size)
    grid = mesh_sdf_grid(vertices, faces, resolution=spec["resolution"]) if k == MESH else None
    return k, size3, grid


def _check_size(kind, size):
    """(kind id, size (3,)) of a body shape, validated by `shapes.check_shape` (a mesh's grid is made apart)."""
    if kind == "mesh":
        scale = np.atleast_1d(np.asarray(size, dtype=np.float64))
        if scale.shape != (1,) or not (np.isfinite(scale[0]) and scale[0] > 0):
            raise ValueError(f"shape_size: a mesh takes its scale (1 number > 0), got {np.asarray(size).tolist()!r}")
        return MESH, np.array([scale[0], 0.0, 0.0])
    k, size3, _ = check_shape("shape_size", kind, size)
    return k, size3


def body_shape_table(bodies) -> ShapeTable:
    """The ShapeTable (prefix "body_shape") of every body, in body order (not finalized).  `bodies` are
    `RigidBodies.bodies` dicts (keys vertices, faces, shape)."""
    table = ShapeTable("body_shape")
    for b in bodies:
        if "table_entry" not in b:        # cached: the overlap check at prepare and finalize share it
            b["table_entry"] = body_shape(b["shape"], b["vertices"], b["faces"])
        table.add(*b["table_entry"])
    return table


__all__ = ["BODY_SHAPES", "is_box_mesh", "check_body_shape", "default_size", "body_shape", "body_shape_table",
           "BOX", "SPHERE", "CAPSULE", "MESH", "KIND_NAMES"]
