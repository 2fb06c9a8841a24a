"""Mesh builders, loaders and checks (numpy; files through tigradsim.io.mesh_io, checks from tigradsim.core.geometry).

Every function returns vertices as float64 arrays of shape (V, 3) and index
arrays as int32: tetrahedra (T, 4), triangles (F, 3).  Tetrahedra are
positively oriented: det(x1 - x0, x2 - x0, x3 - x0) > 0.  Surface triangles
are counter-clockwise seen from outside (normal (x1 - x0) x (x2 - x0) points out).
The y axis is up.
"""
import numpy as np

# the checks live in the core (the physics uses them); re-exported here as tgs.meshes.*
from ..core.geometry import (boundary_faces, index_rows, orient_tets, surface_volume, tet_volumes,  # noqa: F401
                             unpaired_edge, validate_tets, validate_triangles, weld_vertices)

__all__ = [
    "tet_volumes", "validate_tets", "validate_triangles", "orient_tets", "tet_box", "tet_ball",
    "icosphere", "box_surface", "cylinder_surface", "cone_surface", "cloth_grid",
    "boundary_faces", "unpaired_edge", "surface_volume", "load_tetgen", "load_obj", "save_obj", "load_mesh", "save_mesh",
    "tetrahedralize", "MeshFileError", "weld_vertices",
]


def _verts(v):
    return np.ascontiguousarray(np.asarray(v, dtype=np.float64).reshape(-1, 3))


# ---------------------------------------------------------------------------
# tetrahedral meshes

# Five-tet split of a unit cell, corners numbered c = a + 2 b + 4 c for local (a, b, c).
# Even cells take the central tet on the even corners (0, 3, 5, 6); odd cells the mirror
# image, so every shared face is split along the same diagonal (between the corners
# of even global parity).
_FIVE_EVEN = [(0, 3, 5, 6), (1, 0, 3, 5), (2, 0, 3, 6), (4, 0, 5, 6), (7, 3, 5, 6)]
_FIVE_ODD = [(1, 2, 4, 7), (0, 1, 2, 4), (3, 1, 2, 7), (5, 1, 4, 7), (6, 2, 4, 7)]
# Six-tet (Kuhn) split along the diagonal 0-7: paths 0 -> e_i -> e_i + e_j -> 7.
_SIX = [(0, 1, 3, 7), (0, 1, 5, 7), (0, 2, 3, 7), (0, 2, 6, 7), (0, 4, 5, 7), (0, 4, 6, 7)]


def tet_box(nx: int, ny: int, nz: int, size=(1.0, 1.0, 1.0), origin=(0.0, 0.0, 0.0), tets_per_cell: int = 5):
    """A box [origin, origin + size] split into nx*ny*nz cells of 5 or 6 tets each.

    Returns (vertices (V, 3) float64, tets (T, 4) int32), V = (nx+1)(ny+1)(nz+1),
    T = tets_per_cell * nx*ny*nz; vertex (i, j, k) has index (i*(ny+1) + j)*(nz+1) + k.
    With 5 tets per cell the split alternates with the cell parity so faces match;
    6 tets per cell is the Kuhn split along each cell's main diagonal.
    """
    nx, ny, nz = int(nx), int(ny), int(nz)
    if min(nx, ny, nz) < 1:
        raise ValueError(f"tet_box: need nx, ny, nz >= 1, got {(nx, ny, nz)}")
    if tets_per_cell not in (5, 6):
        raise ValueError(f"tet_box: tets_per_cell must be 5 or 6, got {tets_per_cell}")
    size = np.broadcast_to(np.asarray(size, dtype=np.float64), (3,))
    origin = np.asarray(origin, dtype=np.float64).reshape(3)
    if np.any(size <= 0):
        raise ValueError(f"tet_box: size must be positive, got {size.tolist()}")
    g = np.stack(np.meshgrid(np.arange(nx + 1), np.arange(ny + 1), np.arange(nz + 1), indexing="ij"), -1)
    vertices = origin + g.reshape(-1, 3) * (size / (nx, ny, nz))

    def vid(i, j, k):
        return (i * (ny + 1) + j) * (nz + 1) + k

    ci, cj, ck = (a.ravel() for a in np.meshgrid(np.arange(nx), np.arange(ny), np.arange(nz), indexing="ij"))
    corners = np.stack([vid(ci + (c & 1), cj + ((c >> 1) & 1), ck + ((c >> 2) & 1)) for c in range(8)], -1)
    if tets_per_cell == 6:
        tets = corners[:, _SIX].reshape(-1, 4)
    else:
        odd = ((ci + cj + ck) % 2).astype(bool)
        tets = np.where(odd[:, None, None], corners[:, _FIVE_ODD], corners[:, _FIVE_EVEN]).reshape(-1, 4)
    tets = orient_tets(vertices, tets)
    return _verts(vertices), index_rows(tets, 4)


def _icosphere_levels(subdivisions: int):
    """Unit icospheres of levels 0..subdivisions; level s+1 keeps level s's vertices first.
    Returns (vertices of the finest level, [faces per level], [midpoint dict per step])."""
    t = (1.0 + 5 ** 0.5) / 2.0
    v = [(-1, t, 0), (1, t, 0), (-1, -t, 0), (1, -t, 0), (0, -1, t), (0, 1, t), (0, -1, -t), (0, 1, -t),
         (t, 0, -1), (t, 0, 1), (-t, 0, -1), (-t, 0, 1)]
    verts = [np.array(p, dtype=np.float64) / np.linalg.norm(p) for p in v]
    faces = [(0, 11, 5), (0, 5, 1), (0, 1, 7), (0, 7, 10), (0, 10, 11), (1, 5, 9), (5, 11, 4), (11, 10, 2),
             (10, 7, 6), (7, 1, 8), (3, 9, 4), (3, 4, 2), (3, 2, 6), (3, 6, 8), (3, 8, 9), (4, 9, 5),
             (2, 4, 11), (6, 2, 10), (8, 6, 7), (9, 8, 1)]
    levels, mids = [np.array(faces)], []
    for _ in range(subdivisions):
        mid = {}

        def m(a, b):
            key = (min(a, b), max(a, b))
            if key not in mid:
                p = verts[a] + verts[b]
                verts.append(p / np.linalg.norm(p))
                mid[key] = len(verts) - 1
            return mid[key]

        new = []
        for a, b, c in faces:
            ab, bc, ca = m(a, b), m(b, c), m(c, a)
            new += [(a, ab, ca), (b, bc, ab), (c, ca, bc), (ab, bc, ca)]
        faces = new
        levels.append(np.array(faces))
        mids.append(mid)
    return np.array(verts), levels, mids


def icosphere(subdivisions: int = 2, radius: float = 1.0, center=(0.0, 0.0, 0.0)):
    """Icosphere surface: (vertices (10*4^s + 2, 3), faces (20*4^s, 3)), outward oriented."""
    if subdivisions < 0:
        raise ValueError(f"icosphere: subdivisions must be >= 0, got {subdivisions}")
    v, levels, _ = _icosphere_levels(int(subdivisions))
    f = levels[-1]
    n = np.cross(v[f[:, 1]] - v[f[:, 0]], v[f[:, 2]] - v[f[:, 0]])
    flip = np.einsum("ij,ij->i", n, v[f].mean(axis=1)) < 0
    f[flip] = f[flip][:, ::-1]
    return _verts(v * radius + np.asarray(center, dtype=np.float64)), index_rows(f, 3)


def tet_ball(radius: float = 1.0, resolution: int = 2, shell_ratio=None, center=(0.0, 0.0, 0.0), prism_layers: int = 0):
    """A tetrahedralised ball with an icosphere surface, built from concentric shells.

    The surface is an icosphere of level `resolution` (>= 1).  Inside it lie
    icospheres of levels resolution-1, ..., 1 at radii shrinking by `shell_ratio`
    (default: per level, 1 - 1.25 x the level's mean edge length, so each layer is
    about one edge thick);
    each pair of neighbouring shells is joined by 7 tets per inner triangle (the
    outer edge midpoints fan to the inner edges, so shared faces match), and a cone
    of tets joins the innermost shell (level 1, or level 0 when resolution is 1) to
    the centre.  Default (resolution 2): 205 vertices, 640 tets, 320 boundary
    triangles, all tets of quality 6 sqrt(2) V / l_rms^3 >= 0.65 (the paper's
    TetGen'd icosphere had about 160 vertices / 430 tets; resolution 1 gives 55 / 160).
    prism_layers: that many more shells of level resolution-1 under the first one, each joined to the
    next by 3 tets per triangle (a prism per triangle, cut along the diagonal from each side's lower vertex
    index, so neighbouring prisms share their cuts): sizes between the levels' (resolution 3: 2,880 tets; with
    2 prism layers 4,800).
    Returns (vertices, tets), positively oriented.
    """
    s = int(resolution)
    if s < 1:
        raise ValueError(f"tet_ball: resolution must be >= 1, got {resolution}")
    if isinstance(prism_layers, bool) or not isinstance(prism_layers, (int, np.integer)) or prism_layers < 0:
        raise ValueError(f"tet_ball: prism_layers must be a whole number >= 0, got {prism_layers!r}")
    if shell_ratio is not None and not 0.2 < shell_ratio < 0.95:
        raise ValueError(f"tet_ball: shell_ratio must lie in (0.2, 0.95), got {shell_ratio}")
    unit, levels, mids = _icosphere_levels(s)
    shell_levels = list(range(s, 0, -1)) if s > 1 else [1, 0]
    shell_levels[1:1] = [shell_levels[1]] * int(prism_layers)
    offsets, parts, off, r = [], [], 0, 1.0
    for k in shell_levels:                       # level k: its first 10*4^k + 2 unit vertices
        n = 10 * 4 ** k + 2
        offsets.append(off)
        parts.append(unit[:n] * r)
        off += n
        if shell_ratio is None:
            f = levels[k]
            edge = np.linalg.norm(unit[f[:, 0]] - unit[f[:, 1]], axis=1).mean()
            r *= float(np.clip(1.0 - 1.25 * edge, 0.4, 0.9))
        else:
            r *= shell_ratio
    c0 = off
    vertices = np.concatenate(parts + [np.zeros((1, 3))])
    tets = []
    for j in range(len(shell_levels) - 1):
        k = shell_levels[j]
        if shell_levels[j + 1] == k:             # two shells of one level: a prism per triangle
            Oo, Oi = offsets[j], offsets[j + 1]
            for A, B, C in np.sort(levels[k], axis=1):
                tets += [(Oi + A, Oi + B, Oi + C, Oo + C), (Oi + A, Oi + B, Oo + B, Oo + C),
                         (Oi + A, Oo + A, Oo + B, Oo + C)]
            continue
        mid, Oo, Oi = mids[k - 1], offsets[j], offsets[j + 1]
        for A, B, C in levels[k - 1]:
            a, b, c = Oi + A, Oi + B, Oi + C
            mAB = Oo + mid[(min(A, B), max(A, B))]
            mBC = Oo + mid[(min(B, C), max(B, C))]
            mCA = Oo + mid[(min(C, A), max(C, A))]
            A_, B_, C_ = Oo + A, Oo + B, Oo + C
            tets += [(a, A_, mAB, mCA), (b, B_, mBC, mAB), (c, C_, mCA, mBC)]                    # corners
            tets += [(a, mBC, b, c), (a, mBC, c, mCA), (a, mBC, mCA, mAB), (a, mBC, mAB, b)]  # octahedron
    for A, B, C in levels[shell_levels[-1]]:
        tets.append((c0, offsets[-1] + A, offsets[-1] + B, offsets[-1] + C))                  # core
    vertices = vertices * radius + np.asarray(center, dtype=np.float64)
    tets = orient_tets(vertices, np.array(tets))
    validate_tets(vertices, tets)
    return _verts(vertices), index_rows(tets, 4)


# ---------------------------------------------------------------------------
# surfaces

def box_surface(size=(1.0, 1.0, 1.0), center=(0.0, 0.0, 0.0)):
    """Closed box surface centred at `center`: (8 vertices, 12 outward triangles)."""
    h = 0.5 * np.broadcast_to(np.asarray(size, dtype=np.float64), (3,))
    v = np.array([[(i * 2 - 1), (j * 2 - 1), (k * 2 - 1)] for i in (0, 1) for j in (0, 1) for k in (0, 1)], float)
    v = v * h + np.asarray(center, dtype=np.float64)
    # corner index = 4 i + 2 j + k
    quads = [(0, 1, 3, 2), (4, 6, 7, 5), (0, 4, 5, 1), (2, 3, 7, 6), (0, 2, 6, 4), (1, 5, 7, 3)]
    f = []
    for a, b, c, d in quads:
        f += [(a, b, c), (a, c, d)]
    return _orient_outward(_verts(v), np.array(f))


def _orient_outward(v, f):
    """Flip triangles of a star-shaped closed surface whose normal points to its centroid."""
    f = np.array(f, dtype=np.int64)
    centre = v.mean(axis=0)
    n = np.cross(v[f[:, 1]] - v[f[:, 0]], v[f[:, 2]] - v[f[:, 0]])
    flip = np.einsum("ij,ij->i", n, v[f].mean(axis=1) - centre) < 0
    f[flip] = f[flip][:, ::-1]
    return _verts(v), index_rows(f, 3)


def cylinder_surface(radius: float = 0.5, height: float = 1.0, segments: int = 16, center=(0.0, 0.0, 0.0)):
    """Closed cylinder along y, centred at `center` (y from -height/2 to height/2):
    2*segments rim vertices + 2 cap centres, 4*segments outward triangles."""
    n = int(segments)
    if n < 3:
        raise ValueError(f"cylinder_surface: segments must be >= 3, got {segments}")
    ang = 2 * np.pi * np.arange(n) / n
    ring = np.stack([radius * np.cos(ang), np.zeros(n), radius * np.sin(ang)], -1)
    v = np.concatenate([ring - [0, height / 2, 0], ring + [0, height / 2, 0], [[0, -height / 2, 0], [0, height / 2, 0]]])
    f = []
    for i in range(n):
        j = (i + 1) % n
        f += [(i, j, n + j), (i, n + j, n + i), (2 * n, j, i), (2 * n + 1, n + i, n + j)]
    return _orient_outward(v + np.asarray(center, dtype=np.float64), f)


def cone_surface(radius: float = 0.5, height: float = 1.0, segments: int = 16, center=(0.0, 0.0, 0.0)):
    """Closed cone along y: base circle at y = -height/2, apex at y = +height/2 (relative to
    `center`); segments + 2 vertices, 2*segments outward triangles."""
    n = int(segments)
    if n < 3:
        raise ValueError(f"cone_surface: segments must be >= 3, got {segments}")
    ang = 2 * np.pi * np.arange(n) / n
    ring = np.stack([radius * np.cos(ang), np.full(n, -height / 2), radius * np.sin(ang)], -1)
    v = np.concatenate([ring, [[0, -height / 2, 0], [0, height / 2, 0]]])
    f = []
    for i in range(n):
        j = (i + 1) % n
        f += [(n, j, i), (n + 1, i, j)]
    return _orient_outward(v + np.asarray(center, dtype=np.float64), f)


_PLANES = {"xy": (0, 1, 2), "xz": (0, 2, 1), "yz": (1, 2, 0)}


def cloth_grid(nx: int, ny: int, cell=0.1, origin=(0.0, 0.0, 0.0), plane: str = "xz"):
    """A triangulated nx x ny grid of cells in a coordinate plane.

    Returns (vertices ((nx+1)(ny+1), 3), triangles (2*nx*ny, 3)).  Vertex (i, j)
    (i along the plane's first axis, j along its second) has index j*(nx+1) + i.
    `cell` is a number or (du, dv).  Triangle normals point along + the third
    axis (+y for "xz", +z for "xy", +x for "yz").
    """
    if plane not in _PLANES:
        raise ValueError(f"cloth_grid: plane must be one of {sorted(_PLANES)}, got {plane!r}")
    nx, ny = int(nx), int(ny)
    if min(nx, ny) < 1:
        raise ValueError(f"cloth_grid: need nx, ny >= 1, got {(nx, ny)}")
    du, dv = np.broadcast_to(np.asarray(cell, dtype=np.float64), (2,))
    u_ax, v_ax, n_ax = _PLANES[plane]
    jj, ii = np.meshgrid(np.arange(ny + 1), np.arange(nx + 1), indexing="ij")
    v = np.zeros(((nx + 1) * (ny + 1), 3))
    v[:, u_ax] = ii.ravel() * du
    v[:, v_ax] = jj.ravel() * dv
    v += np.asarray(origin, dtype=np.float64)
    ci, cj = (a.ravel() for a in np.meshgrid(np.arange(nx), np.arange(ny), indexing="ij"))
    p00 = cj * (nx + 1) + ci
    p10, p01, p11 = p00 + 1, p00 + nx + 1, p00 + nx + 2
    f = np.concatenate([np.stack([p00, p10, p11], -1), np.stack([p00, p11, p01], -1)])
    nrm = np.cross(v[f[0, 1]] - v[f[0, 0]], v[f[0, 2]] - v[f[0, 0]])
    if nrm[n_ax] < 0:
        f = f[:, ::-1]
    return _verts(v), index_rows(f, 3)


# ---------------------------------------------------------------------------
# files: strict readers (errors name the file and line), meshio for the other formats,
# fTetWild for tetrahedralizing a surface; see tigradsim/io/mesh_io.py.

from .mesh_io import (MeshFileError, load_obj, save_obj, load_tetgen, load_mesh, save_mesh,  # noqa: E402
                      tetrahedralize)
