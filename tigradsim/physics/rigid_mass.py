"""Closed-mesh checks and exact mass properties of a polyhedron (numpy only).

The solid bounded by a closed, outward-oriented triangle mesh is split into
signed tetrahedra (origin, a, b, c), one per face.  With A = [a b c] (columns)
each tetrahedron contributes
    volume      V_f = det(A) / 6
    first moment  V_f (a + b + c) / 4
    covariance  C_f = det(A) / 120 * A S A^T,   S = [[2,1,1],[1,2,1],[1,1,2]]
(the second moments  int x x^T dV  of the tetrahedron).  Summing gives the
exact volume, centre of mass and inertia  I = tr(C) Id - C  of the polyhedron
(divergence theorem); the parallel-axis shift moves C to the centre of mass.
"""
import numpy as np

from ..core.errors import as_array

_S = np.array([[2.0, 1.0, 1.0], [1.0, 2.0, 1.0], [1.0, 1.0, 2.0]])


def check_closed_mesh(vertices, faces, name="faces"):
    """Validate a closed, consistently oriented triangle mesh; returns (V,3) float64, (F,3) int32.

    Raises ValueError naming `vertices` or `faces` for: wrong shapes, non-finite
    coordinates, out-of-range or repeated indices, open boundaries, edges shared
    by more than two faces, inconsistently oriented neighbours.
    """
    v = as_array("vertices", vertices, shape=(None, 3))
    f = np.asarray(faces)
    if f.ndim != 2 or f.shape[1] != 3 or len(f) < 4:
        raise ValueError(f"{name}: expected shape (F, 3) with F >= 4 triangles of a closed surface, got {f.shape}")
    if not np.issubdtype(f.dtype, np.integer):
        if np.issubdtype(f.dtype, np.floating) and np.all(np.mod(f, 1) == 0):
            f = f.astype(np.int64)
        else:
            raise TypeError(f"{name}: expected integer vertex indices, got dtype {f.dtype}")
    if f.min() < 0 or f.max() >= len(v):
        bad = int(np.argwhere((f < 0) | (f >= len(v)))[0][0])
        raise IndexError(f"{name}[{bad}] = {f[bad].tolist()}: index out of range for {len(v)} vertices")
    degenerate = np.nonzero((f[:, 0] == f[:, 1]) | (f[:, 1] == f[:, 2]) | (f[:, 0] == f[:, 2]))[0]
    if len(degenerate):
        raise ValueError(f"{name}[{degenerate[0]}] = {f[degenerate[0]].tolist()}: a triangle repeats a vertex")
    directed = np.concatenate([f[:, [0, 1]], f[:, [1, 2]], f[:, [2, 0]]])
    n = len(v)
    key = directed[:, 0].astype(np.int64) * n + directed[:, 1]
    uniq, counts = np.unique(key, return_counts=True)
    if np.any(counts > 1):
        k = uniq[counts > 1][0]
        raise ValueError(f"{name}: inconsistently oriented (or non-manifold) mesh: edge ({k // n}, {k % n}) is used "
                         "twice in the same direction; neighbouring triangles must list shared edges in opposite order")
    reverse = directed[:, 1].astype(np.int64) * n + directed[:, 0]
    missing = ~np.isin(reverse, uniq)
    if np.any(missing):
        e = directed[np.argmax(missing)]
        raise ValueError(f"{name}: the mesh is not closed: edge ({e[0]}, {e[1]}) belongs to one triangle only "
                         "(a rigid body needs a closed surface)")
    return v, f.astype(np.int32)


def mass_properties(vertices, faces):
    """Exact (volume, centre of mass (3,), inertia per unit density about the centre (3,3)).

    `inertia` is int (|r|^2 Id - r r^T) dV over the solid, r from the centre
    of mass, in the mesh's axes; multiply by the density for kg m^2.
    """
    v = np.asarray(vertices, dtype=np.float64)
    f = np.asarray(faces)
    a, b, c = v[f[:, 0]], v[f[:, 1]], v[f[:, 2]]
    det = np.einsum("ij,ij->i", a, np.cross(b, c))
    volume = det.sum() / 6.0
    if not volume > 0:
        return float(volume), np.zeros(3), np.zeros((3, 3))
    com = (det[:, None] * (a + b + c)).sum(0) / 24.0 / volume
    A = np.stack([a, b, c], axis=2)                       # (F, 3, 3), columns a, b, c
    cov = np.einsum("f,fij,jk,flk->il", det / 120.0, A, _S, A)
    cov_com = cov - volume * np.outer(com, com)
    inertia = np.trace(cov_com) * np.eye(3) - cov_com
    return float(volume), com, 0.5 * (inertia + inertia.T)
