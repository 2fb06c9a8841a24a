"""Mesh files: strict readers and writers whose every error names the file (and the line).

Formats:
* OBJ (`load_obj`) and TetGen .node/.ele (`load_tetgen`): read here, line by line, so that an
  error can name the line, and strictly (a row with two coordinates, a non-numeric token, a
  header "four 3 0 0", an .ele row with 3 ids are errors, never a different mesh).  meshio
  5.3.5's readers for these two formats accept less than the formats allow (no negative OBJ
  indices, no 10-node tets, no comments between TetGen rows, consecutive node numbers only)
  and fail with bare numpy errors, so they are not used for reading these two.
* Everything else meshio reads (Gmsh .msh, VTK .vtk/.vtu, Medit .mesh, PLY, STL, OFF, ...):
  `load_mesh` reads through meshio (the `meshio` package, MIT licence) and validates the
  result (3 coordinates, finite values, triangles of 3 / tets of 4 indices in range).
* `save_mesh` writes any of meshio's formats; .obj goes through `save_obj` (%.17g: exact).
* A node / tet array pair (what other engines' scripts hold: `np.save`d arrays, or text
  tables): `load_array` reads one (.npy, or whitespace / comma separated text), and
  `tets_from_arrays` checks and orients the pair like every loader here.

Every loader returns float64 vertices (V, 3) and int32 cells, 0-based; tets are positively
oriented (det(x1 - x0, x2 - x0, x3 - x0) > 0) and validated by `meshes.validate_tets`.

`tetrahedralize` fills a closed surface with tets through fTetWild (`pytetwild`, optional
extra `tigradsim[mesh]`).
"""
from __future__ import annotations

import contextlib
import importlib
import importlib.util
import io
import math
import os

import numpy as np

from ..core.geometry import boundary_faces, orient_tets, validate_tets

__all__ = ["MeshFileError", "load_obj", "save_obj", "load_tetgen", "load_mesh", "save_mesh", "tetrahedralize",
           "load_array", "tets_from_arrays"]

# bytes sniffed to tell a binary file from a text one
_SNIFF_BYTES = 4096


class MeshFileError(ValueError):
    """A mesh file that cannot be read as a valid mesh.  `path` and `line` (1-based, or None)
    say where; the message names both."""

    def __init__(self, path, message, line=None):
        self.path = str(path)
        self.line = line
        where = f"{self.path}, line {line}" if line is not None else self.path
        super().__init__(f"{where}: {message}")


# ---------------------------------------------------------------------------
# text scanning

def _text_lines(path, what):
    """The lines of a text file, with an error naming the file for a missing, unreadable or binary one."""
    path = os.fspath(path)
    try:
        with open(path, "rb") as fh:
            data = fh.read()
    except FileNotFoundError:
        raise MeshFileError(path, f"no such {what} file") from None
    except IsADirectoryError:
        raise MeshFileError(path, f"is a directory, expected a {what} file") from None
    except OSError as exc:
        raise MeshFileError(path, f"cannot read the {what} file: {exc.strerror or exc}") from None
    if b"\x00" in data[:_SNIFF_BYTES]:
        raise MeshFileError(path, f"binary data (NUL bytes), expected a text {what} file")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[:exc.start].count(b"\n") + 1
        raise MeshFileError(path, f"bytes that are not UTF-8 text (byte {exc.start}): expected a text {what} "
                            "file (a binary file?)", line) from None
    return text.splitlines()


def _rows(path, what):
    """(line number, tokens) of the non-empty lines, comments (#...) removed."""
    for k, line in enumerate(_text_lines(path, what), start=1):
        line = line.split("#", 1)[0].strip()
        if line:
            yield k, line.split()


def _float(tok, path, line, what):
    try:
        x = float(tok)
    except ValueError:
        raise MeshFileError(path, f"{what}: {tok!r} is not a number", line) from None
    if not math.isfinite(x):
        raise MeshFileError(path, f"{what}: {tok!r} is not finite", line)
    return x


def _int(tok, path, line, what):
    try:
        return int(tok)
    except ValueError:
        raise MeshFileError(path, f"{what}: {tok!r} is not an integer", line) from None


# ---------------------------------------------------------------------------
# OBJ

def load_obj(path):
    """Load an OBJ file's vertices and faces.

    Polygons are fan-triangulated; texture coordinates, normals, groups, materials and
    other statements are ignored; face indices may be negative (relative to the vertices
    read so far) and carry /vt/vn parts.  A vertex row must have 3 coordinates (a 4th, w,
    or 3 more, vertex colours, are accepted and ignored).
    Returns (vertices (V, 3) float64, faces (F, 3) int32, 0-based).
    Raises MeshFileError (a ValueError) naming the file and line for: a missing or binary
    file, a vertex with 2 or 5+ coordinates, a non-numeric or non-finite coordinate, a face
    with fewer than 3 corners, a non-integer, zero or out-of-range index.
    """
    verts, faces = [], []
    for line, row in _rows(path, "OBJ"):
        key = row[0]
        if key == "v":
            n = len(row) - 1
            if n not in (3, 4, 6):
                raise MeshFileError(path, f"vertex with {n} value(s) {row[1:]}: expected x y z "
                                    "(optionally w, or r g b)", line)
            verts.append([_float(t, path, line, "vertex coordinate") for t in row[1:4]])
        elif key == "f":
            if len(row) < 4:
                raise MeshFileError(path, f"face with {len(row) - 1} corner(s): expected at least 3", line)
            idx = []
            for tok in row[1:]:
                i = _int(tok.split("/")[0], path, line, "face index")
                if i == 0:
                    raise MeshFileError(path, "face index 0: OBJ indices start at 1 (or count back from -1)", line)
                k = i - 1 if i > 0 else len(verts) + i
                if not 0 <= k < len(verts):
                    raise MeshFileError(path, f"face index {i} out of range: {len(verts)} vertices defined "
                                        "before this line", line)
                idx.append(k)
            for k in range(1, len(idx) - 1):
                faces.append((idx[0], idx[k], idx[k + 1]))
    v = np.asarray(verts, dtype=np.float64).reshape(-1, 3)
    f = np.asarray(faces, dtype=np.int32).reshape(-1, 3)
    return np.ascontiguousarray(v), np.ascontiguousarray(f)


def save_obj(path, vertices, faces):
    """Write vertices (V, 3) and triangles (or polygons of one size) (F, k) to an OBJ file
    (1-based, %.17g so that a float64 round trip is exact)."""
    v = np.asarray(vertices, dtype=np.float64)
    f = np.asarray(faces)
    if v.ndim != 2 or v.shape[1] != 3:
        raise ValueError(f"save_obj: vertices must have shape (V, 3), got {v.shape}")
    if f.ndim != 2 or f.shape[1] < 3 or (f.size and not np.issubdtype(f.dtype, np.integer)):
        raise ValueError(f"save_obj: faces must be integer indices of shape (F, k>=3), got {f.shape} {f.dtype}")
    if f.size and (f.min() < 0 or f.max() >= len(v)):
        raise ValueError(f"save_obj: face index out of range [0, {len(v)}): min {f.min()}, max {f.max()}")
    with open(path, "w") as fh:
        fh.write("# written by tigradsim\n")
        for p in v:
            fh.write("v %.17g %.17g %.17g\n" % tuple(p))
        for row in f.astype(np.int64):
            fh.write("f " + " ".join(str(int(i) + 1) for i in row) + "\n")


# ---------------------------------------------------------------------------
# TetGen

def _tetgen_header(path, rows, what, names):
    try:
        line, head = next(rows)
    except StopIteration:
        raise MeshFileError(path, f"empty {what} file (no header line)") from None
    if len(head) < 2:
        raise MeshFileError(path, f"header {' '.join(head)!r} has {len(head)} number(s): expected "
                            f"{' '.join(names)}", line)
    return line, [_int(t, path, line, f"header field '{n}'") for t, n in zip(head, names)]


def load_tetgen(node_path, ele_path=None, fix_orientation: bool = True):
    """Load a TetGen mesh from `.node` and `.ele` files (0- or 1-based, any node numbering).

    `ele_path` defaults to node_path with the suffix .ele.  Headers: .node
    "<points> 3 [<attributes> [<boundary markers>]]", .ele "<tets> <4 or 10> [<attributes>]";
    every row must have exactly the columns its header announces (index, 3 coordinates or
    4/10 node ids, attributes, markers).  Quadratic (10-node) tets keep their 4 corners.
    With fix_orientation, tets are reordered to positive orientation.
    Returns (vertices (V, 3) float64, tets (T, 4) int32), validated.
    Raises MeshFileError (a ValueError) naming the file and line for every malformed header
    or row, a repeated node number, a tet naming an undefined node, or a row count that
    disagrees with the header; `validate_tets` errors (inverted or degenerate tets) name the file.
    """
    node_path = os.fspath(node_path)
    if ele_path is None:
        ele_path = os.path.splitext(node_path)[0] + ".ele"
    ele_path = os.fspath(ele_path)

    rows = _rows(node_path, "TetGen .node")
    hline, head = _tetgen_header(node_path, rows, ".node", ("points", "dimension", "attributes", "markers"))
    n_nodes, dim = head[0], head[1]
    n_attr = head[2] if len(head) > 2 else 0
    n_mark = head[3] if len(head) > 3 else 0
    if dim != 3:
        raise MeshFileError(node_path, f"dimension {dim} in the header: expected 3 (3D points)", hline)
    if n_nodes < 0 or n_attr < 0 or n_mark not in (0, 1):
        raise MeshFileError(node_path, f"header {head}: expected points >= 0, attributes >= 0, markers 0 or 1", hline)
    width = 4 + n_attr + n_mark
    ids, verts, lookup = [], [], {}
    for line, row in rows:
        if len(ids) == n_nodes:
            raise MeshFileError(node_path, f"more rows than the {n_nodes} points the header announces", line)
        if len(row) != width:
            raise MeshFileError(node_path, f"point row with {len(row)} values: the header announces "
                                f"{width} (index, x y z, {n_attr} attribute(s), {n_mark} marker(s))", line)
        nid = _int(row[0], node_path, line, "point index")
        if nid in lookup:
            raise MeshFileError(node_path, f"point index {nid} defined twice", line)
        lookup[nid] = len(ids)
        ids.append(nid)
        verts.append([_float(t, node_path, line, "coordinate") for t in row[1:4]])
    if len(ids) != n_nodes:
        raise MeshFileError(node_path, f"header says {n_nodes} points, found {len(ids)}")

    rows = _rows(ele_path, "TetGen .ele")
    hline, head = _tetgen_header(ele_path, rows, ".ele", ("tetrahedra", "nodes per tet", "attributes"))
    n_tets, per = head[0], head[1]
    n_attr = head[2] if len(head) > 2 else 0
    if per not in (4, 10):
        raise MeshFileError(ele_path, f"{per} nodes per tet in the header: expected 4 or 10", hline)
    if n_tets < 0 or n_attr < 0:
        raise MeshFileError(ele_path, f"header {head}: expected tetrahedra >= 0, attributes >= 0", hline)
    width = 1 + per + n_attr
    tets = []
    for line, row in rows:
        if len(tets) == n_tets:
            raise MeshFileError(ele_path, f"more rows than the {n_tets} tetrahedra the header announces", line)
        if len(row) != width:
            raise MeshFileError(ele_path, f"tet row with {len(row)} values: the header announces {width} "
                                f"(index, {per} node ids, {n_attr} attribute(s))", line)
        corner = []
        for tok in row[1:5]:
            nid = _int(tok, ele_path, line, "node id")
            if nid not in lookup:
                raise MeshFileError(ele_path, f"tet {row[0]} refers to node {nid}, which {node_path} does not "
                                    "define", line)
            corner.append(lookup[nid])
        tets.append(corner)
    if len(tets) != n_tets:
        raise MeshFileError(ele_path, f"header says {n_tets} tetrahedra, found {len(tets)}")
    return _finish_tets(np.asarray(verts, dtype=np.float64).reshape(-1, 3),
                        np.asarray(tets, dtype=np.int64).reshape(-1, 4), fix_orientation, ele_path)


def _finish_tets(v, t, fix_orientation, path):
    out = (t < 0) | (t >= len(v))
    if out.any():            # before orienting, which indexes the vertices
        k, j = np.argwhere(out)[0]
        raise MeshFileError(path, f"tet {k} has vertex index {int(t[k, j])} out of range [0, {len(v)})")
    if len(t) and fix_orientation:
        t = orient_tets(v, t)
    try:
        validate_tets(v, t)
    except ValueError as exc:
        raise MeshFileError(path, str(exc)) from None
    return np.ascontiguousarray(v), np.ascontiguousarray(t.astype(np.int32))


# ---------------------------------------------------------------------------
# node / tet arrays

def load_array(path):
    """One numeric table from a .npy file (`np.save`) or a text file (.txt, .csv, ...: rows of numbers
    separated by whitespace or commas, # comments).  Raises MeshFileError naming the file."""
    spath = os.fspath(path)
    if not os.path.isfile(spath):
        raise MeshFileError(spath, "no such array file")
    try:
        if spath.lower().endswith(".npy"):
            return np.load(spath, allow_pickle=False)
        with open(spath) as fh:
            text = fh.read().replace(",", " ")
        return np.loadtxt(io.StringIO(text), ndmin=2)
    except (ValueError, OSError, UnicodeDecodeError) as exc:
        raise MeshFileError(spath, f"cannot read a numeric array: {exc}") from None


def tets_from_arrays(vertices, tets, fix_orientation: bool = True, source: str = "arrays"):
    """A tet mesh from a node array (V, 3) and a tet array (T, 4) of 0-based indices (integers,
    or floats holding integers, as text tables load).  `source` names them in errors.
    Returns (vertices (V, 3) float64, tets (T, 4) int32), oriented (fix_orientation) and validated
    as the file loaders' are.  Raises MeshFileError (a ValueError) for a wrong shape, a non-integer
    or out-of-range index, a non-finite node, an empty tet array, a degenerate tet."""
    try:
        v = np.asarray(vertices, dtype=np.float64)
    except (TypeError, ValueError):
        raise MeshFileError(source, f"nodes: expected numbers, got {vertices!r}") from None
    if v.ndim != 2 or v.shape[1] != 3:
        raise MeshFileError(source, f"nodes: expected shape (V, 3), got {v.shape}")
    bad = np.nonzero(~np.isfinite(v).all(axis=1))[0]
    if bad.size:
        raise MeshFileError(source, f"node {int(bad[0])} is not finite: {v[bad[0]].tolist()}")
    try:
        t = np.asarray(tets)
    except (TypeError, ValueError):
        raise MeshFileError(source, "tets: expected a rectangular integer array") from None
    if t.ndim != 2 or t.shape[1] != 4 or len(t) == 0:
        raise MeshFileError(source, f"tets: expected shape (T, 4) with T >= 1, got {t.shape}")
    if not np.issubdtype(t.dtype, np.integer):
        if not (np.issubdtype(t.dtype, np.floating) and np.all(np.isfinite(t)) and np.all(np.mod(t, 1) == 0)):
            raise MeshFileError(source, f"tets: expected integer vertex indices, got dtype {t.dtype}")
    return _finish_tets(v, t.astype(np.int64), fix_orientation, source)


# ---------------------------------------------------------------------------
# everything else: meshio

_TEXT_OWN = {".obj": "obj", ".node": "tetgen", ".ele": "tetgen"}


def _meshio():
    try:
        return importlib.import_module("meshio")
    except ImportError:  # pragma: no cover (a core dependency)
        raise ImportError("reading this mesh format needs meshio: pip install meshio") from None


def load_mesh(path, cells: str = "auto", fix_orientation: bool = True):
    """Load a surface or volume mesh from any format meshio reads, or OBJ / TetGen.

    Args:
        path: the file (.obj, .node/.ele, .msh, .vtk, .vtu, .mesh, .ply, .stl, .off, ...).
        cells: "tetra" (return tets), "triangle" (return triangles; quads and polygons
            are fan-triangulated; a file with tets only gives their outward boundary
            triangles) or "auto" (tets if the file has any, else triangles).
        fix_orientation: reorder tets to positive orientation.
    Returns (vertices (V, 3) float64, cells (C, 4 or 3) int32, 0-based).  Tets are
    validated (`validate_tets`); triangles are checked for shape, range and finite vertices.
    Raises MeshFileError (a ValueError) naming the file for an unknown format, a file
    meshio cannot parse, 2D points, non-finite coordinates, or no cells of the kind asked.
    """
    if cells not in ("auto", "tetra", "triangle"):
        raise ValueError(f"load_mesh: cells must be 'auto', 'tetra' or 'triangle', got {cells!r}")
    spath = os.fspath(path)
    ext = os.path.splitext(spath)[1].lower()
    own = _TEXT_OWN.get(ext)
    if own == "obj":
        if cells == "tetra":
            raise MeshFileError(spath, "an OBJ file holds surfaces, not tetrahedra (cells='tetra')")
        return load_obj(spath)
    if own == "tetgen":
        if cells == "triangle":
            v, t = load_tetgen(os.path.splitext(spath)[0] + ".node", os.path.splitext(spath)[0] + ".ele")
            return v, boundary_faces(t, v)
        return load_tetgen(os.path.splitext(spath)[0] + ".node", os.path.splitext(spath)[0] + ".ele",
                           fix_orientation=fix_orientation)
    if not os.path.exists(spath):
        raise MeshFileError(spath, "no such mesh file")
    meshio = _meshio()
    chatter = io.StringIO()
    try:
        # meshio prints "Error: Couldn't read file" on stdout and calls sys.exit(1) when no reader
        # of the format accepts the file: keep stdout clean and turn the exit into an error.
        with contextlib.redirect_stdout(chatter):
            m = meshio.read(spath)
    except meshio.ReadError as exc:
        raise MeshFileError(spath, f"meshio cannot read it: {exc or 'unknown or malformed format'}") from None
    except SystemExit:
        said = " ".join(chatter.getvalue().split())
        raise MeshFileError(spath, f"meshio cannot read it as {ext or 'a mesh'} ({said or 'malformed file'})") from None
    except Exception as exc:   # meshio's readers raise bare numpy / struct / Unicode errors on malformed files
        raise MeshFileError(spath, f"malformed mesh file ({type(exc).__name__}: {exc})") from None
    return _from_meshio(spath, m, cells, fix_orientation)


def _from_meshio(path, m, cells, fix_orientation):
    pts = np.asarray(m.points)
    if pts.ndim != 2 or pts.shape[1] not in (2, 3):
        raise MeshFileError(path, f"points of shape {pts.shape}: expected (V, 3)")
    if pts.shape[1] == 2:
        raise MeshFileError(path, "2D points (2 coordinates each): expected 3D points")
    if not np.issubdtype(pts.dtype, np.number):
        raise MeshFileError(path, f"points of dtype {pts.dtype}: expected numbers")
    pts = pts.astype(np.float64)
    bad = np.nonzero(~np.isfinite(pts).all(axis=1))[0]
    if bad.size:
        raise MeshFileError(path, f"point {int(bad[0])} is not finite: {pts[bad[0]].tolist()}")
    blocks = {}
    for block in m.cells:
        blocks.setdefault(block.type, []).append(np.asarray(block.data))
    want = cells
    if want == "auto":
        want = "tetra" if "tetra" in blocks or "tetra10" in blocks else "triangle"
    if want == "tetra":
        parts = [b[:, :4] for b in blocks.get("tetra", []) + blocks.get("tetra10", [])]
        if not parts:
            raise MeshFileError(path, f"no tetrahedra in the file (cell types: {sorted(blocks) or 'none'})")
        t = np.concatenate(parts).astype(np.int64)
        return _finish_tets(pts, t, fix_orientation, path)
    parts = list(blocks.get("triangle", []))
    for kind in ("quad", "polygon"):
        for b in blocks.get(kind, []):
            parts += [b[:, [0, k, k + 1]] for k in range(1, b.shape[1] - 1)]
    if not parts and ("tetra" in blocks or "tetra10" in blocks):     # a volume mesh: its boundary
        v, t = _from_meshio(path, m, "tetra", True)
        return v, boundary_faces(t, v)
    if not parts:
        raise MeshFileError(path, f"no triangles, quads or polygons in the file (cell types: {sorted(blocks) or 'none'})")
    f = np.concatenate(parts).astype(np.int64)
    out = (f < 0) | (f >= len(pts))
    if out.any():
        k, j = np.argwhere(out)[0]
        raise MeshFileError(path, f"triangle {k} has vertex index {int(f[k, j])} out of range [0, {len(pts)})")
    return np.ascontiguousarray(pts), np.ascontiguousarray(f.astype(np.int32))


def save_mesh(path, vertices, cells, file_format=None):
    """Write vertices (V, 3) and triangles (F, 3) or tets (T, 4) to any format meshio writes
    (chosen by the suffix, or `file_format`: "gmsh", "vtk", "vtu", "medit", "tetgen", ...);
    .obj goes through `save_obj` (exact float64 round trip)."""
    v = np.asarray(vertices, dtype=np.float64)
    c = np.asarray(cells)
    if v.ndim != 2 or v.shape[1] != 3:
        raise ValueError(f"save_mesh: vertices must have shape (V, 3), got {v.shape}")
    if not np.isfinite(v).all():
        raise ValueError("save_mesh: vertices must be finite")
    if c.ndim != 2 or c.shape[1] not in (3, 4) or (c.size and not np.issubdtype(c.dtype, np.integer)):
        raise ValueError(f"save_mesh: cells must be integer triangles (F, 3) or tets (T, 4), got {c.shape} {c.dtype}")
    if c.size and (c.min() < 0 or c.max() >= len(v)):
        raise ValueError(f"save_mesh: cell index out of range [0, {len(v)}): min {c.min()}, max {c.max()}")
    spath = os.fspath(path)
    if file_format is None and os.path.splitext(spath)[1].lower() == ".obj":
        if c.shape[1] != 3:
            raise ValueError("save_mesh: an OBJ file holds triangles, not tets")
        return save_obj(spath, v, c)
    meshio = _meshio()
    kind = "triangle" if c.shape[1] == 3 else "tetra"
    mesh = meshio.Mesh(v, [(kind, c.astype(np.int64))])
    meshio.write(spath, mesh, file_format=file_format)


# ---------------------------------------------------------------------------
# tetrahedralization

def _tetwild_backend():
    """fTetWild's compiled wrapper from `pytetwild`.  pytetwild 0.4.2's package __init__
    imports pyvista (an optional dependency of its own) unconditionally; without pyvista
    the compiled module is loaded directly from the installed package."""
    try:
        from pytetwild import PyfTetWildWrapper  # noqa: F401
        return PyfTetWildWrapper
    except ImportError as exc:
        spec = importlib.util.find_spec("pytetwild")
        if spec is None or not spec.submodule_search_locations:
            raise ImportError("tetrahedralize needs pytetwild (fTetWild): pip install 'tigradsim[mesh]'") from None
        folder = list(spec.submodule_search_locations)[0]
        names = [n for n in os.listdir(folder) if n.startswith("PyfTetWildWrapper") and n.endswith((".so", ".pyd"))]
        if not names:
            raise ImportError(f"pytetwild is installed but its compiled module is missing ({exc})") from None
        ext = importlib.util.spec_from_file_location("pytetwild.PyfTetWildWrapper", os.path.join(folder, names[0]))
        mod = importlib.util.module_from_spec(ext)
        ext.loader.exec_module(mod)
        return mod


def tetrahedralize(vertices, faces, edge_length: float = 0.05, epsilon: float = 1e-3, optimize: bool = True,
                   stop_energy: float = 10.0, threads: int = 1):
    """Fill a closed triangle surface with tetrahedra (fTetWild), ready for `add_soft_mesh`.

    Uses `pytetwild` (fTetWild, Hu et al. 2020; MPL-2.0), the optional extra
    `pip install 'tigradsim[mesh]'`.  fTetWild was chosen over the `tetgen` package
    because `tetgen` wraps TetGen, which is licensed under the AGPL (checked in the
    package metadata of tetgen 0.8.4: the wrapper is MIT, the bundled TetGen AGPL), which
    would bind every program that ships tigradsim with it; MPL-2.0 binds only the
    files of pytetwild themselves.  fTetWild is also robust to imperfect input (small gaps,
    self-intersections): it meshes within an envelope of the surface rather than the exact
    triangles, so the output surface is close to, not identical with, the input.

    Args:
        vertices: (V, 3) surface vertices (metres), finite.
        faces: (F, 3) integer triangles of a closed surface (orientation not needed).
        edge_length: target tet edge length as a fraction of the bounding-box diagonal (0, 1].
        epsilon: envelope: how far (as a fraction of the diagonal) the output surface may
            lie from the input (0, 0.1].
        optimize: improve tet quality (slower).
        stop_energy: quality goal (fTetWild's AMIPS energy, >= 3; lower is better, slower).
        threads: worker threads; 1 (default) gives the same mesh on every run.
    Returns (vertices (N, 3) float64, tets (T, 4) int32), positively oriented, validated,
    unreferenced vertices removed.
    Raises ValueError for bad arguments (before fTetWild runs), ImportError without pytetwild.
    """
    v = np.asarray(vertices, dtype=np.float64)
    f = np.asarray(faces)
    if v.ndim != 2 or v.shape[1] != 3 or len(v) < 4:
        raise ValueError(f"tetrahedralize: vertices must have shape (V >= 4, 3), got {v.shape}")
    if not np.isfinite(v).all():
        raise ValueError("tetrahedralize: vertices must be finite")
    if f.ndim != 2 or f.shape[1] != 3 or len(f) < 4 or not np.issubdtype(f.dtype, np.integer):
        raise ValueError(f"tetrahedralize: faces must be integer triangles of shape (F >= 4, 3), got {f.shape} {f.dtype}")
    if f.min() < 0 or f.max() >= len(v):
        raise ValueError(f"tetrahedralize: face index out of range [0, {len(v)}): min {f.min()}, max {f.max()}")
    if not (isinstance(edge_length, (int, float)) and 0 < edge_length <= 1):
        raise ValueError(f"tetrahedralize: edge_length must be in (0, 1] (fraction of the diagonal), got {edge_length!r}")
    if not (isinstance(epsilon, (int, float)) and 0 < epsilon <= 0.1):
        raise ValueError(f"tetrahedralize: epsilon must be in (0, 0.1], got {epsilon!r}")
    if not (isinstance(stop_energy, (int, float)) and stop_energy >= 3):
        raise ValueError(f"tetrahedralize: stop_energy must be >= 3, got {stop_energy!r}")
    if not (isinstance(threads, int) and threads >= 1):
        raise ValueError(f"tetrahedralize: threads must be an integer >= 1, got {threads!r}")
    backend = _tetwild_backend()
    # fTetWild writes a scratch file (__tracked_surface.stl) into the working directory: run it in a
    # temporary one so a user's folder (or a repository) is not littered
    import os
    import tempfile
    cwd = os.getcwd()
    with tempfile.TemporaryDirectory(prefix="tgs_tetwild_") as scratch:
        os.chdir(scratch)
        try:
            tv, tt = backend.tetrahedralize_mesh(
                np.ascontiguousarray(v), np.ascontiguousarray(f.astype(np.uint32)), bool(optimize), False,
                float(edge_length), 0.0, float(epsilon), float(stop_energy), False, int(threads), 80, 6, True,
                False, False, np.zeros((0, 3)), np.zeros((0, 4), np.int32), np.zeros(0))
        finally:
            os.chdir(cwd)
    tv = np.asarray(tv, dtype=np.float64).reshape(-1, 3)
    tt = np.asarray(tt, dtype=np.int64).reshape(-1, 4)
    if len(tt) == 0:
        raise ValueError("tetrahedralize: fTetWild produced no tetrahedra (is the surface closed and "
                         "of non-zero volume?)")
    used, tt = np.unique(tt, return_inverse=True)
    tv, tt = tv[used], tt.reshape(-1, 4)
    # fTetWild lists the same tets in a varying order from run to run: sort each tet's ids
    # (then orient) and the tets, so one surface always gives one array.
    tt = orient_tets(tv, np.sort(tt, axis=1))
    tt = tt[np.lexsort(tt.T[::-1])]
    validate_tets(tv, tt)
    return np.ascontiguousarray(tv), np.ascontiguousarray(tt.astype(np.int32))
