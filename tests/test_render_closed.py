"""`SoftRasterizer(closed=True)`: solids' silhouettes without the doubled edge halo.

A closed surface's silhouette edge is shared by a front and a back face; SoftRas's union
1 - prod(1 - D_j) adds both halos there, so the rendered silhouette comes out larger than
the projected solid.  With `closed=True` each face counts half and the edge has one face's
(symmetric) profile: the rendered area matches the exact projected area.  Exact for flat
faces of a few triangles (a box); a finely tessellated surface gets seams where the inner
edges of its front and back layers cross (measured: a 4x4x4 tet box's surface -0.49 px,
union +0.14 px), so footage scenes use it for low-poly solids only (`crease_fraction`).
"""
import numpy as np
import pytest
import taichi as ti

import tigradsim as tgs
from tigradsim.io.meshes import box_surface, boundary_faces, cloth_grid, icosphere, tet_box, unpaired_edge
from tigradsim.renderers import Camera, SilhouetteMSE, SoftRasterizer, sigma_for_edge
from tigradsim.scenes.scene_build import crease_fraction


@pytest.fixture(scope="module", autouse=True)
def _f64():
    tgs.init(arch="cpu", precision="f64")
    yield


def _cross2(a, b):
    return a[0] * b[1] - a[1] * b[0]


def _hull_area(p):
    """(area, perimeter) of the convex hull of 2-D points (monotone chain, shoelace formula)."""
    pts = sorted(map(tuple, np.round(p, 12)))

    def half(points):
        h = []
        for q in points:
            while len(h) >= 2 and _cross2(np.subtract(h[-1], h[-2]), np.subtract(q, h[-2])) <= 0:
                h.pop()
            h.append(q)
        return h[:-1]

    hull = np.array(half(pts) + half(pts[::-1]))
    x, y = hull[:, 0], hull[:, 1]
    area = 0.5 * abs(np.dot(x, np.roll(y, -1)) - np.dot(y, np.roll(x, -1)))
    return area, float(np.linalg.norm(hull - np.roll(hull, -1, axis=0), axis=1).sum())


def _tilted_box():
    v, f = box_surface((0.9, 0.5, 0.7))
    a, b = 0.5, 0.35
    Ry = np.array([[np.cos(a), 0, np.sin(a)], [0, 1, 0], [-np.sin(a), 0, np.cos(a)]])
    Rx = np.array([[1, 0, 0], [0, np.cos(b), -np.sin(b)], [0, np.sin(b), np.cos(b)]])
    return v @ (Rx @ Ry).T + [0.05, -0.03, 0.0], f


def test_unpaired_edge():
    v, f = box_surface((1.0, 1.0, 1.0))
    assert unpaired_edge(f) is None
    assert unpaired_edge(np.concatenate([f, f + len(v)])) is None      # two closed bodies
    assert unpaired_edge(f[1:]) is not None                            # a hole
    _, cf = cloth_grid(2, 2)
    assert unpaired_edge(cf) is not None                               # an open sheet


def test_crease_fraction():
    """Footage scenes use closed coverage for low-poly solids only (crease_fraction >= 1/2)."""
    v, f = box_surface((1.0, 2.0, 0.5))
    assert crease_fraction(v, f) == pytest.approx(2.0 / 3.0)          # 12 creases, 6 flat diagonals
    v, t = tet_box(4, 4, 4)
    assert crease_fraction(v, boundary_faces(t)) == pytest.approx(12.0 / 72.0)
    v, f = icosphere(2)
    assert crease_fraction(v, f) == 0.0 and crease_fraction(*icosphere(0)) == 1.0
    assert crease_fraction(v, f, angle_deg=1.0) == 1.0
    _, cf = cloth_grid(1, 1)
    assert crease_fraction(np.eye(4, 3)[[0, 1, 2, 3]], cf[:1]) == 0.0     # no shared edge


@pytest.mark.parametrize("size", [48, 96])
def test_closed_silhouette_area_matches_projection(size):
    """At the footage-like edge (sigma_for_edge(0.8)) the union moves a box's silhouette edge
    out by ~0.15 px on average ((rendered - exact projected area) / perimeter); closed=True
    keeps it within 0.05 px (the rest: rounded convex corners)."""
    v, f = _tilted_box()
    cam = Camera(eye=(0.4, 0.6, 3.2), target=(0.0, 0.0, 0.0), fov=30.0, width=size, height=size)
    sigma = sigma_for_edge(0.8, size, size)
    exact, perimeter = _hull_area(cam.project_pixels(v)[:, :2])          # px^2, px
    shift = {}
    for closed in (False, True):
        ren = SoftRasterizer(cam, f, len(v), sigma=sigma, closed=closed)
        shift[closed] = (float(ren.render_numpy(v)[..., 0].sum()) - exact) / perimeter
    assert abs(shift[True]) < 0.05, shift
    assert shift[False] > 0.1, shift            # what closed=True removes


def test_closed_silhouette_gradient_matches_finite_differences():
    """Tape gradient of a silhouette MSE w.r.t. the vertices of a closed box and a sphere
    (two bodies, one renderer), against central differences in f64 along random directions."""
    bv, bf = _tilted_box()
    sv, sf = icosphere(1, 0.3)
    sv = sv + [0.55, 0.35, 0.2]
    v = np.concatenate([bv, sv])
    f = np.concatenate([bf, sf + len(bv)])
    cam = Camera(eye=(0.4, 0.6, 3.2), target=(0.0, 0.0, 0.0), fov=35.0, width=28, height=24)
    ren = SoftRasterizer(cam, f, len(v), frames=1, sigma=3e-3, closed=True)
    rng = np.random.default_rng(3)
    target = ren.render_numpy(v + 0.03 * rng.standard_normal(v.shape)).copy()
    X = ti.Vector.field(3, float, shape=(1, len(v)), needs_grad=True)
    X.from_numpy(v[None])
    loss = ti.field(float, shape=(), needs_grad=True)
    mse = SilhouetteMSE(ren.image, target[None, ..., 0], frames=[0])

    def run():
        ren.render(X, 0, 0)
        mse(loss)

    tgs.check_gradient(run, loss, [X], n_dirs=4, eps=1e-6, rtol=1e-5).assert_ok()
    assert np.abs(X.grad.to_numpy()).max() > 1e-6


def test_closed_bad_input():
    v, f = box_surface((1.0, 1.0, 1.0))
    cam = Camera(eye=(0.0, 0.0, 3.0), width=16, height=16)
    with pytest.raises(ValueError, match=r"closed=True but the faces are not closed surfaces: edge"):
        SoftRasterizer(cam, f[1:], len(v), closed=True)
    with pytest.raises(ValueError, match="cull_backfaces"):
        SoftRasterizer(cam, f, len(v), closed=True, cull_backfaces=True)
    with pytest.raises(TypeError, match="closed='yes'"):
        SoftRasterizer(cam, f, len(v), closed="yes")
