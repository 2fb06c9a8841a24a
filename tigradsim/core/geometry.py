"""Mesh validity checks and topology helpers (numpy), which the physics, the io and the renderers share.

Vertices are float64 arrays of shape (V, 3) and index arrays int32: tetrahedra (T, 4), triangles (F, 3).
Tetrahedra are positively oriented: det(x1 - x0, x2 - x0, x3 - x0) > 0.  Surface triangles are
counter-clockwise seen from outside (normal (x1 - x0) x (x2 - x0) points out).  The mesh builders and
files are in `tigradsim.io.meshes` (which re-exports these as `tgs.meshes.*`).
"""
import numpy as np

__all__ = ["index_rows", "tet_volumes", "validate_tets", "validate_triangles", "weld_vertices", "orient_tets",
           "boundary_faces", "unpaired_edge", "surface_volume"]


def index_rows(a, k):
    """`a` as a C-contiguous int32 array of rows of k indices (N, k)."""
    return np.ascontiguousarray(np.asarray(a, dtype=np.int64).reshape(-1, k).astype(np.int32))


def tet_volumes(vertices, tets) -> np.ndarray:
    """Signed volumes det(x1 - x0, x2 - x0, x3 - x0) / 6 of tetrahedra (T,)."""
    x = np.asarray(vertices, dtype=np.float64)
    t = np.asarray(tets, dtype=np.int64)
    a, b, c, d = (x[t[:, i]] for i in range(4))
    return np.einsum("ij,ij->i", b - a, np.cross(c - a, d - a)) / 6.0


def _checked_arrays(vertices, cells, arity, name, cell_word):
    """The shape, dtype, finiteness and index-range checks that tets and triangles share; returns
    (vertices float64 (V, 3), cells as given (N, arity)).  `name` / `cell_word` word the errors."""
    x = np.asarray(vertices, dtype=np.float64)
    c = np.asarray(cells)
    shape = f"({'T' if arity == 4 else 'F'}, {arity})"
    if x.ndim != 2 or x.shape[1] != 3:
        raise ValueError(f"vertices must have shape (V, 3), got {x.shape}")
    if c.ndim != 2 or c.shape[1] != arity:
        raise ValueError(f"{name} must have shape {shape}, got {c.shape}")
    if not np.issubdtype(c.dtype, np.integer):
        raise ValueError(f"{name} must be integer indices, got dtype {c.dtype}")
    bad = np.nonzero(~np.isfinite(x).all(axis=1))[0]
    if bad.size:
        raise ValueError(f"vertex {bad[0]} is not finite: {x[bad[0]].tolist()} ({bad.size} non-finite vertices)")
    out = (c < 0) | (c >= len(x))
    if out.any():
        k, j = np.argwhere(out)[0]
        raise ValueError(f"{cell_word} {k} has vertex index {int(c[k, j])} out of range [0, {len(x)})")
    return x, c


def validate_tets(vertices, tets, rel_tol: float = 1e-12) -> np.ndarray:
    """Check a tetrahedral mesh; return the rest volumes (T,).

    Raises ValueError with a clear message for: wrong shapes, NaN/inf vertices,
    an index out of range (names the tet and the value), or an inverted or
    degenerate tet (volume <= rel_tol * bounding-box diagonal^3).
    """
    x, t = _checked_arrays(vertices, tets, 4, "tets", "tet")
    dup = (np.sort(t, axis=1)[:, 1:] == np.sort(t, axis=1)[:, :-1]).any(axis=1)
    if dup.any():
        k = int(np.nonzero(dup)[0][0])
        raise ValueError(f"inverted or degenerate tet {k}: repeated vertex indices {t[k].tolist()}")
    vol = tet_volumes(x, t)
    diag = float(np.linalg.norm(x.max(axis=0) - x.min(axis=0))) if len(x) else 0.0
    bad = np.nonzero(vol <= rel_tol * diag ** 3)[0]
    if bad.size:
        k = int(bad[0])
        raise ValueError(f"inverted or degenerate tet {k}: volume {vol[k]:.6g} (vertices {t[k].tolist()}; "
                         f"{bad.size} bad tets in all)")
    return vol


def validate_triangles(vertices, triangles, rel_tol: float = 1e-12) -> np.ndarray:
    """Check a triangle mesh like `validate_tets` (indices, NaN, zero area); return the areas (F,)."""
    x, f = _checked_arrays(vertices, triangles, 3, "triangles", "triangle")
    area = 0.5 * np.linalg.norm(np.cross(x[f[:, 1]] - x[f[:, 0]], x[f[:, 2]] - x[f[:, 0]]), axis=1)
    diag = float(np.linalg.norm(x.max(axis=0) - x.min(axis=0))) if len(x) else 0.0
    bad = np.nonzero(area <= rel_tol * diag ** 2)[0]
    if bad.size:
        raise ValueError(f"degenerate triangle {int(bad[0])}: area {area[bad[0]]:.6g}")
    return area


# A generic unit direction: vertices within `tol` of each other lie within `tol` along it, and
# grid-aligned meshes (many vertices with one x) do not pile up in the sweep below.
_WELD_AXIS = np.array([0.5773502691896258, 0.5773502691896257, 0.5773502691896258]) + [0.1234, -0.0771, 0.0313]
_WELD_AXIS = _WELD_AXIS / np.linalg.norm(_WELD_AXIS)


def weld_vertices(vertices, faces, tol: float):
    """Merge vertices closer than `tol` [m] (Euclidean) and re-index the faces.

    Meshes exported per face (an OBJ box with 24 corner vertices, STL) repeat each corner
    once per face; welding makes them one closed surface.  Clusters are the connected
    components of the "closer than tol" relation; each keeps its lowest-index vertex (exact
    coordinates, first-occurrence order).  Faces that collapse (two corners welded) are dropped.
    Args: vertices (V, 3), faces (F, k) integer indices, tol >= 0 (0: exact duplicates only).
    Returns (vertices (V', 3) float64, faces (F', k) int32, index (V,) int64: old -> new vertex).
    """
    x = np.asarray(vertices, dtype=np.float64)
    f = np.asarray(faces, dtype=np.int64)
    if not (isinstance(tol, (int, float, np.floating)) and np.isfinite(tol) and tol >= 0):
        raise ValueError(f"weld_vertices: tol must be a finite number >= 0, got {tol!r}")
    n = len(x)
    label = np.arange(n)
    if n > 1:
        proj = x @ _WELD_AXIS
        order = np.argsort(proj, kind="stable")
        ps = proj[order]
        hi = np.searchsorted(ps, ps + tol, side="right")
        cnt = hi - np.arange(n) - 1
        a = np.repeat(np.arange(n), cnt)
        b = a + 1 + (np.arange(len(a)) - np.repeat(np.cumsum(cnt) - cnt, cnt))
        a, b = order[a], order[b]
        close = np.linalg.norm(x[a] - x[b], axis=1) <= tol
        a, b = a[close], b[close]
        while len(a):                      # label propagation: every cluster takes its lowest index
            m = np.minimum(label[a], label[b])
            new = label.copy()
            np.minimum.at(new, a, m)
            np.minimum.at(new, b, m)
            new = new[new]
            if np.array_equal(new, label):
                break
            label = new
    keep = np.nonzero(label == np.arange(n))[0]
    new_index = np.full(n, -1, dtype=np.int64)
    new_index[keep] = np.arange(len(keep))
    index = new_index[label]
    g = index[f] if f.size else f.reshape(-1, f.shape[1] if f.ndim == 2 else 3)
    if g.size:
        s = np.sort(g, axis=1)
        g = g[(s[:, 1:] != s[:, :-1]).all(axis=1)]
    return np.ascontiguousarray(x[keep]), np.ascontiguousarray(g.astype(np.int32)), index


def orient_tets(vertices, tets) -> np.ndarray:
    """Return tets with the last two indices swapped where the volume is negative."""
    t = np.array(tets, dtype=np.int32).reshape(-1, 4)
    neg = tet_volumes(vertices, t) < 0
    t[neg, 2], t[neg, 3] = t[neg, 3].copy(), t[neg, 2].copy()
    return t


def boundary_faces(tets, vertices=None) -> np.ndarray:
    """Boundary triangles (faces used by one tet only) of a tet mesh, outward oriented.

    Without `vertices` the tets must be positively oriented (as every builder here
    returns them); with `vertices` each face is oriented geometrically so its normal
    points away from the owning tet's fourth vertex.
    """
    t = np.asarray(tets, dtype=np.int64).reshape(-1, 4)
    # faces of a positively oriented tet (a, b, c, d), outward, and the opposite vertex
    local = np.array([(1, 2, 3), (0, 3, 2), (0, 1, 3), (0, 2, 1)])
    opposite = np.array([0, 1, 2, 3])
    faces = t[:, local].reshape(-1, 3)
    opp = t[:, opposite].reshape(-1)
    key = np.sort(faces, axis=1)
    _, inv, counts = np.unique(key, axis=0, return_inverse=True, return_counts=True)
    once = counts[inv.reshape(-1)] == 1
    faces, opp = faces[once], opp[once]
    if vertices is not None:
        x = np.asarray(vertices, dtype=np.float64)
        n = np.cross(x[faces[:, 1]] - x[faces[:, 0]], x[faces[:, 2]] - x[faces[:, 0]])
        flip = np.einsum("ij,ij->i", n, x[opp] - x[faces[:, 0]]) > 0
        faces[flip] = faces[flip][:, ::-1]
    return index_rows(faces, 3)


def unpaired_edge(faces):
    """The first undirected edge (i, j), i < j, of a triangle list that is not shared by
    exactly two of its triangles, or None when every edge is: the triangles then form
    closed 2-manifold surfaces (one or several), through which every ray that meets
    them crosses at least twice.  faces: (F, 3) integer vertex indices."""
    f = np.asarray(faces, dtype=np.int64).reshape(-1, 3)
    edges = np.sort(np.concatenate([f[:, [0, 1]], f[:, [1, 2]], f[:, [2, 0]]]), axis=1)
    uniq, counts = np.unique(edges, axis=0, return_counts=True)
    bad = np.nonzero(counts != 2)[0]
    return None if bad.size == 0 else (int(uniq[bad[0], 0]), int(uniq[bad[0], 1]))


def surface_volume(vertices, faces) -> float:
    """Volume enclosed by a closed, outward-oriented triangle surface (divergence theorem)."""
    x = np.asarray(vertices, dtype=np.float64)
    f = np.asarray(faces, dtype=np.int64)
    return float(np.einsum("ij,ij->i", x[f[:, 0]], np.cross(x[f[:, 1]], x[f[:, 2]])).sum() / 6.0)
