"""Small mesh helpers private to the renderer (demos, tests, benchmarks).

`icosphere` prefers `tigradsim.meshes.icosphere` when that module exists; the
local version gives the same kind of output: (vertices (V, 3) float64, faces
(F, 3) int32), counter-clockwise seen from outside.
"""
from __future__ import annotations

import numpy as np


def _local_icosphere(subdivisions=2, radius=1.0):
    t = (1.0 + 5.0 ** 0.5) / 2.0
    verts = [(-1, t, 0), (1, t, 0), (-1, -t, 0), (1, -t, 0), (0, -1, t), (0, 1, t), (0, -1, -t), (0, 1, -t),
             (t, 0, -1), (t, 0, 1), (-t, 0, -1), (-t, 0, 1)]
    faces = [(0, 11, 5), (0, 5, 1), (0, 1, 7), (0, 7, 10), (0, 10, 11), (1, 5, 9), (5, 11, 4), (11, 10, 2),
             (10, 7, 6), (7, 1, 8), (3, 9, 4), (3, 4, 2), (3, 2, 6), (3, 6, 8), (3, 8, 9), (4, 9, 5),
             (2, 4, 11), (6, 2, 10), (8, 6, 7), (9, 8, 1)]
    verts = [np.array(v, dtype=np.float64) / np.linalg.norm(v) for v in verts]
    for _ in range(int(subdivisions)):
        cache = {}
        new_faces = []

        def mid(a, b):
            key = (min(a, b), max(a, b))
            if key not in cache:
                m = verts[a] + verts[b]
                verts.append(m / np.linalg.norm(m))
                cache[key] = len(verts) - 1
            return cache[key]

        for a, b, c in faces:
            ab, bc, ca = mid(a, b), mid(b, c), mid(c, a)
            new_faces += [(a, ab, ca), (b, bc, ab), (c, ca, bc), (ab, bc, ca)]
        faces = new_faces
    return np.array(verts) * float(radius), np.array(faces, dtype=np.int32)


def icosphere(subdivisions=2, radius=1.0):
    """Icosphere: 20 * 4**subdivisions faces (3 -> 1280 faces, 642 vertices)."""
    try:  # the shared implementation, once it exists
        from tigradsim import meshes  # noqa: WPS433
        fn = getattr(meshes, "icosphere", None)
    except Exception:  # pragma: no cover - module missing or broken
        fn = None
    if fn is not None:
        try:
            v, f = fn(subdivisions, radius)
            return np.asarray(v, dtype=np.float64), np.asarray(f, dtype=np.int32)
        except Exception:  # pragma: no cover
            pass
    return _local_icosphere(subdivisions, radius)


def box(size=(1.0, 1.0, 1.0)):
    """Axis-aligned box centred at the origin, 8 vertices, 12 outward CCW faces."""
    sx, sy, sz = (np.asarray(size, dtype=np.float64) / 2.0)
    v = np.array([[x, y, z] for x in (-sx, sx) for y in (-sy, sy) for z in (-sz, sz)])
    # vertex index = 4*ix + 2*iy + iz
    quads = [(0, 1, 3, 2), (4, 6, 7, 5), (0, 4, 5, 1), (2, 3, 7, 6), (0, 2, 6, 4), (1, 5, 7, 3)]
    f = []
    for a, b, c, d in quads:
        f += [(a, b, c), (a, c, d)]
    f = np.array(f, dtype=np.int32)
    # orient outward
    for k, (a, b, c) in enumerate(f):
        n = np.cross(v[b] - v[a], v[c] - v[a])
        if np.dot(n, v[a] + v[b] + v[c]) < 0:
            f[k] = (a, c, b)
    return v, f


def load_obj(path):
    """Vertices and triangulated faces of a Wavefront OBJ file (fan triangulation)."""
    verts, faces = [], []
    with open(path, "r", encoding="utf-8", errors="replace") as fh:
        for line in fh:
            parts = line.split()
            if not parts:
                continue
            if parts[0] == "v":
                verts.append([float(x) for x in parts[1:4]])
            elif parts[0] == "f":
                idx = []
                for tok in parts[1:]:
                    i = int(tok.split("/")[0])
                    idx.append(i - 1 if i > 0 else len(verts) + i)
                for k in range(1, len(idx) - 1):
                    faces.append((idx[0], idx[k], idx[k + 1]))
    if not verts or not faces:
        raise ValueError(f"load_obj: path={path!r} has no vertices or no faces")
    return np.array(verts, dtype=np.float64), np.array(faces, dtype=np.int32)
