"""The shapes of the paper's scenes: procedural tet meshes for the control
experiments (an extruded gear, a planar walker: a box of cells with some cells
removed) and the render demo's turntable.

The tet builders return (vertices (V, 3) float64 [m], tets (T, 4) int32),
positively oriented, conforming (neighbouring tets share whole faces), without
unused vertices.  General-purpose meshes (boxes, balls, cloth grids) are in
`tigradsim.io.meshes`; these are scene content, so they live with the scenes.
"""
import numpy as np

from ..io.meshes import _FIVE_EVEN, _FIVE_ODD, orient_tets, validate_tets

__all__ = ["tet_gear", "tet_cells", "tet_walker", "compact", "unit_mesh", "turntable"]


def compact(vertices, tets):
    """Drop vertices no tet uses; returns (vertices, tets) renumbered."""
    tets = np.asarray(tets, dtype=np.int64)
    used = np.unique(tets)
    remap = np.full(len(vertices), -1, dtype=np.int64)
    remap[used] = np.arange(len(used))
    return np.asarray(vertices, dtype=np.float64)[used], remap[tets].astype(np.int32)


def _extrude(points2d, triangles, thickness, layers, axis_offset=0.0):
    """Extrude a planar triangle mesh (in x, y) along z into prisms of 3 tets each.

    Every prism is split by the rule "the diagonal of each side quad runs from the
    lower-index bottom vertex to the higher-index top vertex" (vertices of each
    triangle sorted by index), which neighbouring prisms agree on, so the mesh is
    conforming.
    """
    P = len(points2d)
    z = np.linspace(-0.5 * thickness, 0.5 * thickness, layers + 1) + axis_offset
    verts = np.concatenate([np.c_[points2d, np.full(P, zk)] for zk in z])
    tets = []
    tri = np.sort(np.asarray(triangles, dtype=np.int64), axis=1)
    for k in range(layers):
        a, b, c = tri[:, 0] + k * P, tri[:, 1] + k * P, tri[:, 2] + k * P
        a2, b2, c2 = a + P, b + P, c + P
        tets += [np.stack([a, b, c, c2], 1), np.stack([a, b, b2, c2], 1), np.stack([a, a2, b2, c2], 1)]
    tets = np.concatenate(tets)
    return verts, orient_tets(verts, tets)


def tet_gear(teeth=12, outer_radius=0.5, tooth_depth=0.12, hub_radius=0.15, thickness=0.25, rings=3,
             segments_per_tooth=4, layers=2, center=(0.0, 0.0, 0.0)):
    """A gear (a toothed annulus in the xy plane) extruded along z.

    The 2D profile has `rings` rings of `teeth * segments_per_tooth` vertices
    from `hub_radius` (the hole) to the outer radius; on the outer ring half of
    each tooth period is at `outer_radius` (the tooth tips) and half at
    `outer_radius - tooth_depth` (the roots), and the rings in between are
    spaced evenly.  Tets = 3 * 2 * S * (rings - 1) * layers with S = teeth *
    segments_per_tooth: the defaults give 1,152 tets (the paper's gear size).
    The axis is z: standing on the ground (y = 0) it rolls along x.
    """
    S = int(teeth) * int(segments_per_tooth)
    if teeth < 1 or segments_per_tooth < 2 or rings < 2 or layers < 1:
        raise ValueError("tet_gear: need teeth >= 1, segments_per_tooth >= 2, rings >= 2, layers >= 1")
    if not (0 < hub_radius < outer_radius - tooth_depth and tooth_depth >= 0):
        raise ValueError("tet_gear: need 0 < hub_radius < outer_radius - tooth_depth and tooth_depth >= 0")
    theta = 2 * np.pi * np.arange(S) / S
    tip = (np.arange(S) % segments_per_tooth) < (segments_per_tooth // 2)
    r_out = np.where(tip, outer_radius, outer_radius - tooth_depth)
    pts = []
    for k in range(rings):
        s = k / (rings - 1)
        r = hub_radius + s * (r_out - hub_radius)
        pts.append(np.c_[r * np.cos(theta), r * np.sin(theta)])
    pts = np.concatenate(pts)
    tris = []
    j = np.arange(S)
    jn = (j + 1) % S
    for k in range(rings - 1):
        i0, i1 = k * S + j, k * S + jn
        o0, o1 = (k + 1) * S + j, (k + 1) * S + jn
        tris += [np.stack([i0, i1, o1], 1), np.stack([i0, o1, o0], 1)]
    tris = np.concatenate(tris)
    v, t = _extrude(pts, tris, thickness, layers)
    v = v + np.asarray(center, dtype=np.float64)
    validate_tets(v, t)
    return v, t.astype(np.int32)


def tet_cells(mask, cell=(0.1, 0.1, 0.1), origin=(0.0, 0.0, 0.0)):
    """Tets of the cells of a boolean grid `mask` (nx, ny, nz) that are True (five per
    cell, alternating split as in `meshes.tet_box`, so faces match)."""
    mask = np.asarray(mask, dtype=bool)
    if mask.ndim != 3 or not mask.any():
        raise ValueError(f"tet_cells: mask must be a 3D bool array with a True cell, got shape {mask.shape}")
    nx, ny, nz = mask.shape
    cell = np.broadcast_to(np.asarray(cell, dtype=np.float64), (3,))
    g = np.stack(np.meshgrid(np.arange(nx + 1), np.arange(ny + 1), np.arange(nz + 1), indexing="ij"), -1)
    vertices = np.asarray(origin, dtype=np.float64) + g.reshape(-1, 3) * cell

    def vid(i, j, k):
        return (i * (ny + 1) + j) * (nz + 1) + k

    ci, cj, ck = np.nonzero(mask)
    corners = np.stack([vid(ci + (c & 1), cj + ((c >> 1) & 1), ck + ((c >> 2) & 1)) for c in range(8)], -1)
    odd = ((ci + cj + ck) % 2).astype(bool)
    tets = np.where(odd[:, None, None], corners[:, _FIVE_ODD], corners[:, _FIVE_EVEN]).reshape(-1, 4)
    v, t = compact(vertices, orient_tets(vertices, tets))
    return v, orient_tets(v, t)


def tet_walker(cell=0.1, legs=2, leg_width=2, gap=2, leg_height=2, body_height=2, depth=1, origin=(0.0, 0.0, 0.0)):
    """A planar walker in the xy plane (thin along z): a body block on `legs` legs.

    Sizes are in cells of edge `cell`; the feet are at y = origin[1].
    """
    nx = legs * leg_width + (legs - 1) * gap
    ny = leg_height + body_height
    mask = np.zeros((nx, ny, depth), dtype=bool)
    mask[:, leg_height:, :] = True
    for k in range(legs):
        x0 = k * (leg_width + gap)
        mask[x0:x0 + leg_width, :leg_height, :] = True
    return tet_cells(mask, cell, origin)


def unit_mesh(path=None, subdivisions=3):
    """The render demo's mesh: the surface in the OBJ file `path`, or (no path) an icosphere of
    `subdivisions` squashed to radii (1, 0.8, 0.9) so that a turn is visible; centred on its
    bounding box and scaled so that its largest coordinate is 1.  Returns (vertices (V, 3) float64,
    faces (F, 3))."""
    from ..renderers import icosphere, load_obj
    if path:
        v, f = load_obj(path)
    else:
        v, f = icosphere(subdivisions, 1.0)
        v = v * np.array([1.0, 0.8, 0.9])
    v = np.asarray(v, dtype=np.float64)
    v = v - 0.5 * (v.max(0) + v.min(0))
    return v / np.abs(v).max(), f


def turntable(vertices, frames, tilt=0.35):
    """`frames` copies of `vertices` (V, 3) turned about y by 2 pi k / frames, k = 0 .. frames-1,
    after a tilt of `tilt` rad about x (so the top shows).  Returns (frames, V, 3)."""
    v = np.asarray(vertices, dtype=np.float64)
    if v.ndim != 2 or v.shape[1] != 3:
        raise ValueError(f"turntable: vertices must have shape (V, 3), got {v.shape}")
    if int(frames) < 1:
        raise ValueError(f"turntable: frames must be >= 1, got {frames}")
    out = np.empty((int(frames),) + v.shape)
    ct, st = np.cos(tilt), np.sin(tilt)
    tilt_m = np.array([[1, 0, 0], [0, ct, -st], [0, st, ct]])
    for k in range(int(frames)):
        a = 2 * np.pi * k / frames
        rot = np.array([[np.cos(a), 0, np.sin(a)], [0, 1, 0], [-np.sin(a), 0, np.cos(a)]])
        out[k] = v @ (tilt_m @ rot).T
    return out
