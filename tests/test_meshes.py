"""Mesh builders, loaders and checks (numpy only, no Taichi)."""
from pathlib import Path

import numpy as np
import pytest

from tigradsim import meshes

DATA = Path(__file__).parent / "data" / "meshes"


def _closed_and_outward(v, f, volume):
    """Every edge shared by exactly two faces in opposite directions; divergence theorem."""
    e = np.concatenate([f[:, [0, 1]], f[:, [1, 2]], f[:, [2, 0]]])
    directed = {tuple(x) for x in e.tolist()}
    assert len(directed) == len(e), "an edge is used twice in the same direction"
    assert all((b, a) in directed for a, b in directed), "open boundary"
    x = v[f]
    n = np.cross(x[:, 1] - x[:, 0], x[:, 2] - x[:, 0])  # 2 * area * normal
    div = float(np.einsum("ij,ij->i", n / 2, x.mean(axis=1)).sum() / 3.0)
    assert np.isclose(div, volume, rtol=1e-10), (div, volume)


def _connected(n_vertices, elems):
    parent = np.arange(n_vertices)

    def find(i):
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for el in elems:
        r = find(el[0])
        for j in el[1:]:
            parent[find(j)] = r
    return len({find(i) for i in range(n_vertices)}) == 1


@pytest.mark.parametrize("per_cell", [5, 6])
def test_tet_box(per_cell):
    nx, ny, nz, size, origin = 3, 2, 4, (1.0, 2.0, 0.5), (-1.0, 0.5, 2.0)
    v, t = meshes.tet_box(nx, ny, nz, size=size, origin=origin, tets_per_cell=per_cell)
    assert v.dtype == np.float64 and t.dtype == np.int32
    assert v.shape == ((nx + 1) * (ny + 1) * (nz + 1), 3) and t.shape == (per_cell * nx * ny * nz, 4)
    vol = meshes.validate_tets(v, t)
    assert np.all(vol > 0) and np.isclose(vol.sum(), np.prod(size))
    assert np.allclose(v.min(axis=0), origin) and np.allclose(v.max(axis=0), np.add(origin, size))
    # conforming: every interior face shared by exactly two tets, boundary = box surface
    b = meshes.boundary_faces(t)
    assert len(b) == 2 * 2 * (nx * ny + ny * nz + nx * nz)
    _closed_and_outward(v, b, np.prod(size))
    assert np.array_equal(np.sort(meshes.boundary_faces(t, v), axis=1), np.sort(b, axis=1))
    on_boundary = np.isclose(v[b], origin).any(axis=2) | np.isclose(v[b], np.add(origin, size)).any(axis=2)
    assert on_boundary.all()


def test_tet_box_arguments():
    with pytest.raises(ValueError):
        meshes.tet_box(1, 1, 1, tets_per_cell=4)
    with pytest.raises(ValueError):
        meshes.tet_box(0, 1, 1)
    v, t = meshes.tet_box(1, 1, 1, size=2.0)
    assert len(t) == 5 and np.isclose(meshes.tet_volumes(v, t).sum(), 8.0)


def test_tet_ball():
    v, t = meshes.tet_ball(radius=2.0)
    assert v.dtype == np.float64 and t.dtype == np.int32
    assert 150 <= len(v) <= 260 and 400 <= len(t) <= 700, (len(v), len(t))
    vol = meshes.validate_tets(v, t)
    assert np.isclose(vol.sum(), 4 / 3 * np.pi * 8, rtol=0.05)
    # shape quality 6 sqrt(2) V / l_rms^3 (1 for a regular tet): no slivers
    x = v[t]
    l2 = sum(((x[:, i] - x[:, j]) ** 2).sum(1) for i, j in [(0, 1), (0, 2), (0, 3), (1, 2), (1, 3), (2, 3)]) / 6
    assert (6 * np.sqrt(2) * vol / l2 ** 1.5).min() > 0.5
    assert vol.min() / vol.mean() > 0.1
    assert _connected(len(v), t) and len(np.unique(t)) == len(v)
    b = meshes.boundary_faces(t)
    assert len(b) == 320
    assert np.allclose(np.linalg.norm(v[np.unique(b)], axis=1), 2.0)
    _closed_and_outward(v, b, vol.sum())
    for res in (1, 3):
        v, t = meshes.tet_ball(resolution=res)
        meshes.validate_tets(v, t)
        assert len(meshes.boundary_faces(t)) == 20 * 4 ** res


def test_tet_ball_prism_layers():
    """Two prism layers under a level-3 surface: 4,800 tets (the 5k ball of benchmarks/vs_warp.py's ball5k_box),
    conforming (the boundary is the surface's 1,280 triangles only), closed, the ball's volume, no slivers."""
    v, t = meshes.tet_ball(radius=0.2, resolution=3, prism_layers=2)
    assert len(t) == 4800 and len(v) == 1171
    vol = meshes.validate_tets(v, t)
    assert np.isclose(vol.sum(), meshes.tet_volumes(*meshes.tet_ball(radius=0.2, resolution=3)).sum(), rtol=1e-12)
    x = v[t]
    l2 = sum(((x[:, i] - x[:, j]) ** 2).sum(1) for i, j in [(0, 1), (0, 2), (0, 3), (1, 2), (1, 3), (2, 3)]) / 6
    assert (6 * np.sqrt(2) * vol / l2 ** 1.5).min() > 0.4
    b = meshes.boundary_faces(t)
    assert len(b) == 1280 and np.allclose(np.linalg.norm(v[np.unique(b)], axis=1), 0.2)
    _closed_and_outward(v, b, vol.sum())
    assert _connected(len(v), t) and len(np.unique(t)) == len(v)
    v, t = meshes.tet_ball(resolution=1, prism_layers=1)                  # a prism layer at level 0
    assert len(t) == 160 + 3 * 20 and len(meshes.boundary_faces(t)) == 80
    for bad in (-1, 1.5, True):
        with pytest.raises(ValueError, match="prism_layers must be a whole number >= 0"):
            meshes.tet_ball(prism_layers=bad)


def test_surfaces():
    v, f = meshes.icosphere(2, radius=1.5)
    assert v.shape == (162, 3) and f.shape == (320, 3) and f.dtype == np.int32
    assert np.allclose(np.linalg.norm(v, axis=1), 1.5)
    _closed_and_outward(v, f, meshes.surface_volume(v, f))
    assert np.isclose(meshes.surface_volume(v, f), 4 / 3 * np.pi * 1.5 ** 3, rtol=0.05)
    v, f = meshes.box_surface((1.0, 2.0, 3.0), center=(1, 1, 1))
    assert v.shape == (8, 3) and f.shape == (12, 3)
    _closed_and_outward(v, f, 6.0)
    n = 24
    v, f = meshes.cylinder_surface(0.5, 2.0, n)
    _closed_and_outward(v, f, 0.5 * n * 0.25 * np.sin(2 * np.pi / n) * 2.0)
    assert np.isclose(v[:, 1].min(), -1.0) and np.isclose(v[:, 1].max(), 1.0)
    v, f = meshes.cone_surface(0.5, 3.0, n)
    _closed_and_outward(v, f, 0.5 * n * 0.25 * np.sin(2 * np.pi / n) * 3.0 / 3.0)
    assert np.isclose(v[:, 1].max(), 1.5) and np.isclose(v[:, 1].min(), -1.5)


@pytest.mark.parametrize("plane,axis", [("xz", 1), ("xy", 2), ("yz", 0)])
def test_cloth_grid(plane, axis):
    nx, ny = 4, 3
    v, f = meshes.cloth_grid(nx, ny, cell=0.1, origin=(1.0, 2.0, 3.0), plane=plane)
    assert v.shape == ((nx + 1) * (ny + 1), 3) and f.shape == (2 * nx * ny, 3)
    assert v.dtype == np.float64 and f.dtype == np.int32
    area = meshes.validate_triangles(v, f)
    assert np.isclose(area.sum(), nx * ny * 0.01)
    assert np.allclose(v[:, axis], (1.0, 2.0, 3.0)[axis])
    n = np.cross(v[f[:, 1]] - v[f[:, 0]], v[f[:, 2]] - v[f[:, 0]])
    assert np.all(n[:, axis] > 0)
    assert len(np.unique(f)) == len(v)


def test_obj_round_trip(tmp_path):
    v, f = meshes.icosphere(1)
    path = tmp_path / "ball.obj"
    meshes.save_obj(path, v, f)
    v2, f2 = meshes.load_obj(path)
    assert np.array_equal(v, v2) and np.array_equal(f, f2)
    assert v2.dtype == np.float64 and f2.dtype == np.int32


def test_obj_polygons_normals_uvs_negative_indices():
    v, f = meshes.load_obj(DATA / "quad_cube.obj")
    assert v.shape == (8, 3) and f.shape == (12, 3)
    _closed_and_outward(v, f, 1.0)


def test_load_tetgen(tmp_path):
    # the data files: 1-based, markers, comments, mixed orientation
    v, t = meshes.load_tetgen(DATA / "unit_tet.node", DATA / "unit_tet.ele")
    assert v.shape == (8, 3) and t.shape == (5, 4) and t.dtype == np.int32
    assert np.isclose(meshes.validate_tets(v, t).sum(), 1.0)
    # written here: 0-based, attributes, a 10-node tet, .ele found from the .node path
    bv, bt = meshes.tet_box(2, 1, 1)
    node = tmp_path / "m.node"
    node.write_text(f"{len(bv)} 3 1 0\n" + "".join(f"{i} {x:.17g} {y:.17g} {z:.17g} 7.0\n"
                                                   for i, (x, y, z) in enumerate(bv)))
    (tmp_path / "m.ele").write_text(f"# comment\n{len(bt)} 10 0\n" + "".join(
        f"{k} {a} {c} {b} {d} 0 0 0 0 0 0\n" for k, (a, b, c, d) in enumerate(bt)))
    v, t = meshes.load_tetgen(node)
    assert np.allclose(v, bv) and np.isclose(meshes.tet_volumes(v, t).sum(), 1.0)
    assert np.array_equal(np.sort(t, axis=1), np.sort(bt, axis=1))
    (tmp_path / "bad.ele").write_text("1 4 0\n0 0 1 2 99\n")
    with pytest.raises(ValueError, match="99"):
        meshes.load_tetgen(node, tmp_path / "bad.ele")


def test_validate_tets_errors():
    v, t = meshes.tet_box(1, 1, 1)
    bad = t.copy()
    bad[3, 2] = 42
    with pytest.raises(ValueError, match=r"tet 3 .*42"):
        meshes.validate_tets(v, bad)
    bad = t.copy()
    bad[2, [1, 2]] = bad[2, [2, 1]]
    with pytest.raises(ValueError, match=r"inverted or degenerate tet 2: volume -"):
        meshes.validate_tets(v, bad)
    flat = v.copy()
    flat[:, 2] = 0.0
    with pytest.raises(ValueError, match="inverted or degenerate tet 0: volume 0"):
        meshes.validate_tets(flat, t)
    nan = v.copy()
    nan[5, 1] = np.nan
    with pytest.raises(ValueError, match="vertex 5 is not finite"):
        meshes.validate_tets(nan, t)
    with pytest.raises(ValueError, match="shape"):
        meshes.validate_tets(v, t[:, :3])
    with pytest.raises(ValueError, match="repeated"):
        meshes.validate_tets(v, np.array([[0, 1, 1, 2]]))


def test_boundary_faces_orientation_from_vertices():
    v, t = meshes.tet_box(2, 2, 2, tets_per_cell=6)
    flipped = t.copy()
    flipped[:, [2, 3]] = flipped[:, [3, 2]]  # negatively oriented input
    b = meshes.boundary_faces(flipped, vertices=v)
    _closed_and_outward(v, b, 1.0)
