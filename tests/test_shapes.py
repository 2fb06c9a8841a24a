"""Contact shapes (tigradsim/physics/shapes.py): the Taichi signed distances and normals against the numpy
reference for every kind, the mesh grid against exact distances, and the Tape gradient of distance and normal
in the point and the size against central differences (float64)."""
import numpy as np
import pytest
import taichi as ti

import tigradsim as tgs
from tigradsim import meshes
from tigradsim.core.model import Model
from tigradsim.physics.shapes import (BOX, CAPSULE, MESH, PLANE, SPHERE, ShapeTable, check_shape,
                                     mesh_signed_distance_np, shape_distance_np)

SHAPES = [("plane", None), ("sphere", 0.3), ("box", (0.3, 0.2, 0.25)), ("capsule", (0.15, 0.2))]


@ti.data_oriented
class DistanceProbe:
    """loss = sum_i a_i d_i + b_i . n_i over points x_i of shape `k` (local frame)."""

    def __init__(self, table, x, a, b):
        n = len(x)
        self.table = table
        self.x = ti.Vector.field(3, float, n, needs_grad=True)
        self.a = ti.field(float, n)
        self.b = ti.Vector.field(3, float, n)
        self.d = ti.field(float, n)
        self.n = ti.Vector.field(3, float, n)
        self.loss = ti.field(float, (), needs_grad=True)
        self.x.from_numpy(x), self.a.from_numpy(a), self.b.from_numpy(b)

    @ti.kernel
    def run(self, k: ti.i32):
        for i in self.x:
            d, n = self.table.distance(k, self.x[i])
            self.loss[None] += self.a[i] * d + self.b[i].dot(n)

    @ti.kernel
    def values(self, k: ti.i32):
        for i in self.x:
            d, n = self.table.distance(k, self.x[i])
            self.d[i] = d
            self.n[i] = n


def _table(shapes):
    table = ShapeTable("probe")
    for kind, size in shapes:
        k, s, grid = check_shape(kind, kind, size, mesh=meshes.box_surface((0.6, 0.4, 0.5)) if kind == "mesh" else None)
        table.add(k, s, grid)
    return table.finalize(Model(True))


@pytest.fixture(scope="module")
def f64():
    tgs.init(precision="f64")
    yield


def test_distances_match_reference(f64):
    rng = np.random.default_rng(0)
    table = _table(SHAPES + [("mesh", 1.3)])
    x = rng.uniform(-0.6, 0.6, (200, 3))
    probe = DistanceProbe(table, x, np.zeros(200), np.zeros((200, 3)))
    for k in range(len(table)):
        probe.values(k)
        d_ref, n_ref = table.distance_np(k, x)
        np.testing.assert_allclose(probe.d.to_numpy(), d_ref, atol=1e-12)
        np.testing.assert_allclose(probe.n.to_numpy(), n_ref, atol=1e-9)
    # the plane's sign and the sphere/box/capsule signs on points we know
    assert shape_distance_np(SPHERE, [0.3, 0, 0], [[0, 0.1, 0]])[0][0] == pytest.approx(-0.2)
    assert shape_distance_np(BOX, [0.3, 0.2, 0.25], [[0, 0.5, 0]])[0][0] == pytest.approx(0.3)
    assert shape_distance_np(CAPSULE, [0.15, 0.2, 0], [[0, 0.5, 0]])[0][0] == pytest.approx(0.15)
    assert shape_distance_np(PLANE, [0, 0, 0], [[3, -0.1, 2]])[0][0] == pytest.approx(-0.1)


def test_mesh_grid_matches_exact_box_distance():
    """A box mesh's grid distance against the analytic box, away from edges (where trilinear smooths the
    box's ridges) within a small fraction of the cell, and its sign everywhere."""
    v, f = meshes.box_surface((0.6, 0.4, 0.5))
    k, size, grid = check_shape("mesh", "mesh", None, mesh=(v, f), resolution=32)
    rng = np.random.default_rng(1)
    x = rng.uniform(-0.45, 0.45, (400, 3))
    d_grid, _ = shape_distance_np(MESH, size, x, grid)
    d_box, _ = shape_distance_np(BOX, [0.3, 0.2, 0.25], x)
    exact = mesh_signed_distance_np(v, f, x)
    np.testing.assert_allclose(exact, d_box, atol=1e-12)
    cell = grid[2]
    assert np.max(np.abs(d_grid - d_box)) < cell
    far_from_surface = np.abs(d_box) > cell
    assert np.all(np.sign(d_grid[far_from_surface]) == np.sign(d_box[far_from_surface]))


@pytest.mark.parametrize("kind, size", SHAPES + [("mesh", 1.3)])
def test_distance_gradient_matches_finite_differences(f64, kind, size):
    rng = np.random.default_rng(2)
    table = _table([(kind, size)])
    x = rng.uniform(-0.5, 0.5, (24, 3))
    probe = DistanceProbe(table, x, rng.normal(size=24), rng.normal(size=(24, 3)))

    def loss(xv, sv):
        probe.x.from_numpy(xv)
        table.size.from_numpy(sv)
        probe.loss[None] = 0.0
        probe.run(0)
        return probe.loss[None]

    s0 = table.size.to_numpy()
    with ti.ad.Tape(probe.loss):
        probe.run(0)
    gx, gs = probe.x.grad.to_numpy(), table.size.grad.to_numpy()
    h = 1e-6
    for trial in range(3):
        dx = rng.normal(size=x.shape)
        ds = rng.normal(size=s0.shape) * (s0 != 0)
        fd = (loss(x + h * dx, s0 + h * ds) - loss(x - h * dx, s0 - h * ds)) / (2 * h)
        ad = np.sum(gx * dx) + np.sum(gs * ds)
        assert ad == pytest.approx(fd, rel=1e-5, abs=1e-8), (kind, trial, ad, fd)
