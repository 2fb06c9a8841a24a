"""Mesh files: every malformed OBJ / TetGen file is an error naming the file and the line;
meshio formats round-trip; welding; fTetWild tetrahedralization (skipped without pytetwild)."""
import importlib.util

import numpy as np
import pytest

from tigradsim import meshes
from tigradsim.io.mesh_io import MeshFileError


def _write(tmp_path, name, text):
    p = tmp_path / name
    if isinstance(text, bytes):
        p.write_bytes(text)
    else:
        p.write_text(text)
    return p


OBJ_OK = "v 0 0 0\nv 1 0 0\nv 0 1 0\nv 0 0 1\nf 1 3 2\nf 1 2 4\nf 1 4 3\nf 2 3 4\n"


@pytest.mark.parametrize("text, line, match", [
    ("v 0 0 0\nv 1 0 x\n", 2, "'x' is not a number"),
    ("v 0 0 0\nv 1 0\nv 0 1 0\n", 2, "2 value"),
    ("v 0 0 0\nv 1 0 0\nv 0 1 nan\n", 3, "not finite"),
    ("v 0 0 0\nv 1 0 0\nv 0 1 0\nf 1 2\n", 4, "2 corner"),
    ("v 0 0 0\nv 1 0 0\nv 0 1 0\nf 1 2 9\n", 4, "index 9 out of range"),
    ("v 0 0 0\nv 1 0 0\nv 0 1 0\nf 1 2 0\n", 4, "index 0"),
    ("v 0 0 0\nv 1 0 0\nv 0 1 0\nf 1 2 a\n", 4, "'a' is not an integer"),
    ("v 0 0 0\nv 1 0 0\nv 0 1 0\nf 1 2 -4\n", 4, "out of range"),
])
def test_obj_errors_name_file_and_line(tmp_path, text, line, match):
    p = _write(tmp_path, "bad.obj", text)
    with pytest.raises(MeshFileError, match=match) as exc:
        meshes.load_obj(p)
    assert str(p) in str(exc.value) and f"line {line}" in str(exc.value)
    assert exc.value.line == line and isinstance(exc.value, ValueError)


def test_obj_binary_and_missing_files(tmp_path):
    p = _write(tmp_path, "bin.obj", b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
    with pytest.raises(MeshFileError, match="binary") as exc:
        meshes.load_obj(p)
    assert str(p) in str(exc.value)
    p = _write(tmp_path, "latin.obj", b"v 0 0 0\nv 1 0 0 \xff\xfe\n")
    with pytest.raises(MeshFileError, match="line 2.*not UTF-8"):
        meshes.load_obj(p)
    with pytest.raises(MeshFileError, match="no such"):
        meshes.load_obj(tmp_path / "missing.obj")
    with pytest.raises(MeshFileError, match="directory"):
        meshes.load_obj(tmp_path)


def test_obj_accepts_w_and_vertex_colours(tmp_path):
    p = _write(tmp_path, "ok.obj", "v 0 0 0 1\nv 1 0 0 0.5 0.5 0.5\nv 0 1 0\nvt 0 0\nf 1/1 2/1 3/1\n")
    v, f = meshes.load_obj(p)
    assert v.shape == (3, 3) and f.tolist() == [[0, 1, 2]]


NODE = "# cube\n8 3 0 1\n" + "".join(
    f"{i + 1} {x} {y} {z} 1\n" for i, (x, y, z) in enumerate(
        [(0, 0, 0), (1, 0, 0), (0, 1, 0), (1, 1, 0), (0, 0, 1), (1, 0, 1), (0, 1, 1), (1, 1, 1)]))
ELE = "2 4 0\n1 1 2 3 5\n2 2 4 3 8\n"


@pytest.mark.parametrize("node, ele, bad, line, match", [
    ("8 3 0 1\n1 0 0 1\n", ELE, "node", 2, "4 values: the header announces 5"),        # 2 coordinates
    ("four 3 0 0\n", ELE, "node", 1, "'four' is not an integer"),
    ("8\n", ELE, "node", 1, "1 number"),
    ("8 2 0 0\n", ELE, "node", 1, "dimension 2"),
    (NODE, "2 4 0\n1 1 2 3\n", "ele", 2, "4 values: the header announces 5"),            # 3 ids
    (NODE, "2 4 0\n1 1 2 3 5\n2 2 4 3 99\n", "ele", 3, "node 99"),
    (NODE, "1 4 0\n1 1 2 3 5\n2 2 4 3 8\n", "ele", 3, "more rows"),
    (NODE, "2 5 0\n", "ele", 1, "5 nodes per tet"),
    (NODE.replace("2 1 0 0 1", "1 1 0 0 1"), ELE, "node", 4, "defined twice"),
    (NODE.replace("3 0 1 0 1", "3 0 1 inf 1"), ELE, "node", 5, "not finite"),
])
def test_tetgen_errors_name_file_and_line(tmp_path, node, ele, bad, line, match):
    n = _write(tmp_path, "m.node", node)
    e = _write(tmp_path, "m.ele", ele)
    with pytest.raises(MeshFileError, match=match) as exc:
        meshes.load_tetgen(n)
    path = n if bad == "node" else e
    assert str(exc.value).startswith(f"{path}, line {line}:")


def test_tetgen_count_and_degenerate_errors_name_file(tmp_path):
    n = _write(tmp_path, "m.node", "3 3 0 0\n0 0 0 0\n1 1 0 0\n")
    _write(tmp_path, "m.ele", ELE)
    with pytest.raises(MeshFileError, match="header says 3 points, found 2") as exc:
        meshes.load_tetgen(n)
    assert str(n) in str(exc.value)
    n = _write(tmp_path, "m.node", NODE)
    e = _write(tmp_path, "m.ele", "1 4 0\n1 1 2 3 4\n")       # four coplanar corners
    with pytest.raises(MeshFileError, match="degenerate") as exc:
        meshes.load_tetgen(n)
    assert str(e) in str(exc.value)


@pytest.mark.parametrize("ext", [".msh", ".vtk", ".vtu", ".mesh", ".node"])
def test_tets_round_trip_through_meshio_formats(tmp_path, ext):
    v, t = meshes.tet_box(2, 1, 1, size=(0.2, 0.1, 0.1))
    path = tmp_path / ("box" + ext)
    meshes.save_mesh(path, v, t)
    v2, t2 = meshes.load_mesh(path)
    assert v2.dtype == np.float64 and t2.dtype == np.int32
    assert np.allclose(v2, v, atol=1e-12)
    assert np.array_equal(np.sort(t2, axis=1), np.sort(t, axis=1))
    assert (meshes.tet_volumes(v2, t2) > 0).all()
    fv, ff = meshes.load_mesh(path, cells="triangle")          # the volume mesh's outward boundary
    assert len(ff) == len(meshes.boundary_faces(t)) and np.isclose(meshes.surface_volume(fv, ff), 0.002)


@pytest.mark.parametrize("ext", [".obj", ".stl", ".ply", ".off", ".vtk"])
def test_surfaces_round_trip(tmp_path, ext):
    v, f = meshes.icosphere(1)
    path = tmp_path / ("ball" + ext)
    meshes.save_mesh(path, v, f)
    v2, f2 = meshes.load_mesh(path)
    assert f2.shape[1] == 3
    if ext != ".stl":                 # STL stores corners per triangle in float32
        assert np.allclose(v2, v, atol=1e-6) and np.array_equal(f2, f)
    else:
        assert np.isclose(meshes.surface_volume(v2, f2), meshes.surface_volume(v, f), rtol=1e-5)


def test_load_mesh_errors(tmp_path):
    p = _write(tmp_path, "junk.msh", "this is not gmsh\n")
    with pytest.raises(MeshFileError) as exc:
        meshes.load_mesh(p)
    assert str(p) in str(exc.value)
    p = _write(tmp_path, "x.unknownext", "v 0 0 0\n")
    with pytest.raises(MeshFileError, match="x.unknownext"):
        meshes.load_mesh(p)
    v, f = meshes.icosphere(0)
    path = tmp_path / "s.vtk"
    meshes.save_mesh(path, v, f)
    with pytest.raises(MeshFileError, match="no tetrahedra"):
        meshes.load_mesh(path, cells="tetra")
    with pytest.raises(ValueError, match="cells"):
        meshes.load_mesh(path, cells="hex")
    with pytest.raises(ValueError, match="out of range"):
        meshes.save_mesh(tmp_path / "bad.vtk", v, f + 100)
    with pytest.raises(ValueError, match="finite"):
        meshes.save_mesh(tmp_path / "bad.vtk", v * np.nan, f)


def test_load_mesh_rejects_2d_and_nan_points(tmp_path):
    import meshio
    p = _write(tmp_path, "flat.mesh", "MeshVersionFormatted 1\nDimension 2\nVertices\n3\n0 0 0\n1 0 0\n0 1 0\n"
               "Triangles\n1\n1 2 3 0\nEnd\n")
    with pytest.raises(MeshFileError, match="2D points"):
        meshes.load_mesh(p)
    p = tmp_path / "nan.vtu"
    meshio.write(p, meshio.Mesh(np.array([[0.0, 0, 0], [1, 0, np.nan], [0, 1, 0]]), [("triangle", np.array([[0, 1, 2]]))]))
    with pytest.raises(MeshFileError, match="point 1 is not finite"):
        meshes.load_mesh(p)


def test_weld_vertices_merges_per_face_corners():
    v, f = meshes.box_surface((1.0, 2.0, 3.0))
    # every triangle its own three corners (36 vertices), with 1e-9 noise
    sv = v[f.reshape(-1)] + np.random.default_rng(0).normal(size=(len(f) * 3, 3)) * 1e-9
    sf = np.arange(len(sv)).reshape(-1, 3)
    wv, wf, index = meshes.weld_vertices(sv, sf, 1e-6)
    assert wv.shape == (8, 3) and wf.shape == (12, 3)
    assert np.allclose(wv[wf], sv[sf]) and np.array_equal(index[sf], wf)
    assert np.isclose(meshes.surface_volume(wv, wf), 6.0)
    # tol 0 merges exact duplicates only; a collapsed triangle is dropped
    wv, wf, _ = meshes.weld_vertices(np.array([[0, 0, 0], [0, 0, 0], [1, 0, 0], [0, 1, 0.0]]),
                                     np.array([[0, 2, 3], [0, 1, 2]]), 0.0)
    assert len(wv) == 3 and wf.tolist() == [[0, 1, 2]]
    with pytest.raises(ValueError, match="tol"):
        meshes.weld_vertices(v, f, -1.0)


HAVE_TETWILD = importlib.util.find_spec("pytetwild") is not None


@pytest.mark.skipif(not HAVE_TETWILD, reason="pytetwild (extra tigradsim[mesh]) not installed")
def test_tetrahedralize_closed_surface_for_soft_body():
    v, f = meshes.icosphere(2, radius=0.1)
    tv, tt = meshes.tetrahedralize(v, f, edge_length=0.2)
    vol = meshes.validate_tets(tv, tt)
    assert (vol > 0).all() and tv.dtype == np.float64 and tt.dtype == np.int32
    assert np.isclose(vol.sum(), meshes.surface_volume(v, f), rtol=0.02)
    assert len(np.unique(tt)) == len(tv)                      # no unreferenced vertices
    tv2, tt2 = meshes.tetrahedralize(v, f, edge_length=0.2)   # one thread: the same mesh again
    assert np.array_equal(tv, tv2) and np.array_equal(tt, tt2)
    import tigradsim as tgs
    h = tgs.SceneBuilder().add_soft_mesh((tv, tt), density=100.0)   # ready for a soft body as it is
    assert h.tet_count == len(tt)


def test_tetrahedralize_rejects_bad_input_before_running():
    v, f = meshes.icosphere(1)
    with pytest.raises(ValueError, match="edge_length"):
        meshes.tetrahedralize(v, f, edge_length=0)
    with pytest.raises(ValueError, match="out of range"):
        meshes.tetrahedralize(v, f + 1000)
    with pytest.raises(ValueError, match="finite"):
        meshes.tetrahedralize(v * np.inf, f)
    with pytest.raises(ValueError, match="faces"):
        meshes.tetrahedralize(v, f[:, :2])


def test_rigid_body_from_obj_box_with_unshared_corners(tmp_path):
    """An OBJ box exported per face (24 corners, 4 per face, printed to 6 digits) is welded into one
    closed surface: same mass properties and 8 contact points, as the shared-corner box."""
    import tigradsim as tgs
    v, f = meshes.box_surface((0.2, 0.1, 0.3))
    quads = f.reshape(6, 2, 3)                                 # box_surface: two triangles per face
    lines, k = [], 0
    for q in quads:
        corners = [q[0, 0], q[0, 1], q[0, 2], q[1, 2]]
        lines += ["v %.6f %.6f %.6f" % tuple(v[c] + 1e-7) for c in corners]
        lines.append(f"f {k + 1} {k + 2} {k + 3} {k + 4}")
        k += 4
    path = _write(tmp_path, "box24.obj", "\n".join(lines) + "\n")
    sv, sf = meshes.load_obj(path)
    assert sv.shape == (24, 3)
    b = tgs.SceneBuilder()
    with pytest.raises(ValueError, match="not closed"):
        b.add_rigid_body(sv, sf, mass=2.0, weld_tol=None)
    i = b.add_rigid_body(sv, sf, mass=2.0)
    j = b.add_rigid_body(v, f, mass=2.0)
    from tigradsim.physics.rigid import RigidBodies
    bodies = b.component(RigidBodies).bodies
    assert len(bodies[i]["points"]) == 8 and len(bodies[i]["faces"]) == 12
    assert np.isclose(bodies[i]["volume"], bodies[j]["volume"], rtol=1e-5)
    assert np.allclose(bodies[i]["inertia_unit"], bodies[j]["inertia_unit"], rtol=1e-4)
    with pytest.raises(ValueError, match="weld_tol"):
        b.add_rigid_body(sv, sf, mass=2.0, weld_tol=-1)
