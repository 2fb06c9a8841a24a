"""Particles for MPM matter: a regular lattice of `particles_per_cell` points per grid cell, kept
inside a box or inside a closed triangle mesh (numpy, at build time).

The lattice is aligned with the MPM grid: spacing h = dx / k with k^3 = particles_per_cell, points at
the centres of the h-cells (origin + (i + 1/2) h), so that neighbouring objects sampled on the same
grid never overlap and every particle stands for the volume h^3 it samples.
"""
import math

import numpy as np

from ..core.errors import as_array


def lattice_per_axis(particles_per_cell) -> int:
    """k with k^3 = particles_per_cell (1, 8, 27, 64, ...); ValueError naming the argument otherwise."""
    n = particles_per_cell
    k = round(n ** (1.0 / 3.0)) if isinstance(n, (int, np.integer)) and not isinstance(n, bool) and n > 0 else 0
    if k < 1 or k ** 3 != n:
        raise ValueError(f"particles_per_cell: expected a cube number (1, 8, 27, 64: k per axis of a cell), got {n!r}")
    return int(k)


def lattice_points(origin, spacing, lower, upper) -> np.ndarray:
    """Lattice centres origin + (i + 1/2) spacing that lie in the box [lower, upper], (N, 3) [m]."""
    axes = []
    for d in range(3):
        first = math.ceil((lower[d] - origin[d]) / spacing - 0.5 - 1e-9)
        last = math.floor((upper[d] - origin[d]) / spacing - 0.5 + 1e-9)
        axes.append(origin[d] + (np.arange(first, last + 1) + 0.5) * spacing)
    grid = np.meshgrid(*axes, indexing="ij")
    return np.stack([g.ravel() for g in grid], axis=1)


def sample_box(lower, upper, origin, spacing):
    """Lattice points inside the box [lower, upper] (each (3,) [m]); (N, 3)."""
    lo = as_array("box lower", lower, shape=(3,))
    hi = as_array("box upper", upper, shape=(3,))
    if np.any(hi <= lo):
        d = int(np.argmax(hi <= lo))
        raise ValueError(f"box: upper must exceed lower on every axis, got lower={lo.tolist()}, upper={hi.tolist()} "
                         f"(axis {d})")
    return lattice_points(origin, spacing, lo, hi)


def inside_mesh(points, vertices, faces, chunk=4096) -> np.ndarray:
    """Which points lie inside the closed triangle mesh (vertices (V, 3), faces (F, 3)): the parity of
    the crossings of a ray from each point (a fixed direction off every axis, so that rays through a
    lattice of points hit no edge or vertex of an axis-aligned mesh).  (N,) bool."""
    direction = np.array([0.8764571, 0.3409813, 0.3400397])
    direction /= np.linalg.norm(direction)
    tri = vertices[faces]
    v0, e1, e2 = tri[:, 0], tri[:, 1] - tri[:, 0], tri[:, 2] - tri[:, 0]
    pvec = np.cross(direction, e2)
    det = np.einsum("fi,fi->f", e1, pvec)
    ok = np.abs(det) > 1e-300
    inv = np.where(ok, 1.0 / np.where(ok, det, 1.0), 0.0)
    out = np.zeros(len(points), dtype=bool)
    for a in range(0, len(points), chunk):
        p = points[a:a + chunk]
        tvec = p[:, None, :] - v0[None]
        u = np.einsum("nfi,fi->nf", tvec, pvec) * inv
        qvec = np.cross(tvec, e1[None])
        v = np.einsum("i,nfi->nf", direction, qvec) * inv
        t = np.einsum("fi,nfi->nf", e2, qvec) * inv
        hit = ok & (u >= 0) & (v >= 0) & (u + v <= 1) & (t > 0)
        out[a:a + chunk] = (hit.sum(axis=1) % 2) == 1
    return out


def sample_mesh(vertices, faces, origin, spacing):
    """Lattice points inside a closed triangle mesh ((V, 3) [m], (F, 3) indices); (N, 3)."""
    from .rigid_mass import check_closed_mesh
    v, f = check_closed_mesh(vertices, faces)
    pts = lattice_points(origin, spacing, v.min(axis=0), v.max(axis=0))
    return pts[inside_mesh(pts, v, f)]
