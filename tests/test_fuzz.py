"""Property-based fuzzing (hypothesis) of the builder, the parameter setter and the mesh readers.

For every generated input the call either succeeds on valid data (checked independently here:
nothing invalid may pass silently) or raises a clear ValueError / TypeError / IndexError /
KeyError whose message names the argument (or, for files, the path).  Any other exception
(ZeroDivisionError, AttributeError, UnicodeDecodeError, a bare numpy error, ...) fails the test.
No builder call runs a kernel (kernels run at finalize / set, on data already checked).

Bounded for CI: derandomized (the same examples on every run), no deadline, few examples per
property; the whole file runs in well under a minute.
"""
import math
import os
import tempfile

import numpy as np
import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import tigradsim as tgs  # noqa: E402
from tigradsim import meshes  # noqa: E402
from tigradsim.io.mesh_io import MeshFileError  # noqa: E402

FUZZ = settings(max_examples=60, deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
CLEAR = (ValueError, TypeError, IndexError, KeyError)

# floats a user may pass by mistake, beside ordinary ones
SPECIAL = [0.0, -0.0, 1.0, -1.0, 0.5, 1e-300, -1e-300, 1e300, -1e300, 1e30, math.nan, math.inf, -math.inf]
floats = st.one_of(st.sampled_from(SPECIAL), st.floats(-1e3, 1e3, allow_nan=False, width=64))


def arrays(shape_st, elements=floats):
    return shape_st.flatmap(lambda shape: st.lists(elements, min_size=int(np.prod(shape)),
                                                   max_size=int(np.prod(shape))).map(
        lambda xs, shape=shape: np.array(xs, dtype=np.float64).reshape(shape)))


def shapes(max_rows=5):
    return st.tuples(st.integers(0, max_rows), st.integers(1, 4))


def scalar_or_array(n):
    return st.one_of(floats, arrays(st.just((n,))), arrays(st.tuples(st.integers(0, 3))))


def _call(fn, names):
    """fn() -> (True, result) or (False, exception) for a clear error; anything else propagates.
    A clear error's message must name one of `names`."""
    try:
        return True, fn()
    except CLEAR as exc:
        msg = str(exc)
        assert any(n in msg for n in names), f"unclear {type(exc).__name__}: {msg!r} names none of {names}"
        return False, exc


def _finite(*xs):
    return all(np.all(np.isfinite(np.asarray(x, dtype=np.float64))) for x in xs)


def _ok_array(x, n):
    a = np.asarray(x, dtype=np.float64)
    return a.ndim == 0 or a.shape == (n,)


# ---------------------------------------------------------------------------
# builder

@FUZZ
@given(pos=arrays(shapes()), masses=st.data(), radius=floats)
def test_fuzz_add_particles(pos, masses, radius):
    n = pos.shape[0]
    m = masses.draw(scalar_or_array(n))
    b = tgs.SceneBuilder()
    ok, _ = _call(lambda: b.add_particles(pos, masses=m, radius=radius), ["positions", "masses", "radius"])
    valid = (pos.shape[1] == 3 and _finite(pos) and _ok_array(m, n) and _finite(m) and np.all(np.asarray(m) > 0)
             and _finite(radius) and radius >= 0)
    if n == 0 and pos.shape[1] == 3:
        return                                  # no particles: either outcome is fine
    assert ok == valid, f"{'accepted invalid' if ok else 'rejected valid'} input: {pos!r} {m!r} {radius!r}"


@FUZZ
@given(idx=st.integers(1, 3).flatmap(lambda k: st.lists(st.lists(st.integers(-2, 6), min_size=k, max_size=k),
                                                          min_size=0, max_size=4)),
       ke=floats, kd=floats, rest=st.one_of(st.none(), floats))
def test_fuzz_add_springs(idx, ke, kd, rest):
    # rows of one length: ragged lists are a known unclear error of errors.check_indices (numpy's
    # "inhomogeneous shape" ValueError, no argument name), reported to its owner
    b = tgs.SceneBuilder()
    b.add_particles(np.arange(15, dtype=float).reshape(5, 3))
    ok, _ = _call(lambda: b.add_springs(idx, ke, kd, None if rest is None else [rest] * len(idx)),
                  ["spring indices", "stiffness", "damping", "rest_length", "indices"])
    rows_ok = len(idx) > 0 and all(len(r) == 2 for r in idx)
    valid = (rows_ok and all(0 <= i < 5 for r in idx for i in r) and all(r[0] != r[1] for r in idx)
             and _finite(ke, kd) and ke >= 0 and kd >= 0 and (rest is None or (_finite(rest) and rest > 0)))
    if len(idx) == 0:
        return
    assert ok == valid, f"{'accepted invalid' if ok else 'rejected valid'}: {idx} {ke} {kd} {rest}"


@FUZZ
@given(ke=floats, kd=floats, kf=floats, mu=floats)
def test_fuzz_add_ground(ke, kd, kf, mu):
    b = tgs.SceneBuilder()
    ok, _ = _call(lambda: b.add_ground(ke=ke, kd=kd, kf=kf, mu=mu), ["ke", "kd", "kf", "mu"])
    valid = _finite(ke, kd, kf, mu) and min(ke, kd, kf, mu) >= 0
    assert ok == valid, f"{'accepted invalid' if ok else 'rejected valid'}: {(ke, kd, kf, mu)}"


BOX_V, BOX_T = meshes.tet_box(1, 1, 1, size=(0.1, 0.1, 0.1))


@FUZZ
@given(tets=st.lists(st.lists(st.integers(-1, 9), min_size=4, max_size=4), min_size=1, max_size=4),
       noise=st.sampled_from([0.0, math.nan, math.inf, 1e300]), density=floats,
       mu=floats, lam=floats)
def test_fuzz_add_soft_mesh(tets, noise, density, mu, lam):
    v = BOX_V.copy()
    v[3, 1] += noise
    b = tgs.SceneBuilder()
    ok, _ = _call(lambda: b.add_soft_mesh((v, np.array(tets)), material="neo_hookean", density=density,
                                          params={"mu": mu, "lam": lam}),
                  ["tets", "vertices", "density", "mu", "lam", "params", "vertex"])
    t = np.array(tets)
    geometry_ok = (_finite(v) and t.min() >= 0 and t.max() < len(v)
                   and (np.sort(t, axis=1)[:, 1:] != np.sort(t, axis=1)[:, :-1]).all())
    if geometry_ok:
        vol = meshes.tet_volumes(v, t)
        geometry_ok = bool((vol > 1e-12 * np.linalg.norm(v.max(0) - v.min(0)) ** 3).all())
    valid = geometry_ok and _finite(density) and density > 0 and _finite(mu, lam)
    if ok:
        assert valid, f"accepted invalid soft mesh: tets {tets} noise {noise} density {density} mu {mu} lam {lam}"
    elif valid and mu >= 0 and lam >= 0:
        pytest.fail(f"rejected a valid soft mesh: tets {tets} density {density} mu {mu} lam {lam}")


BOX_SV, BOX_SF = meshes.box_surface((0.2, 0.1, 0.3))


@FUZZ
@given(drop=st.lists(st.integers(0, 11), max_size=2, unique=True), flip=st.lists(st.integers(0, 11), max_size=2),
       split=st.booleans(), noise=st.sampled_from([0.0, 1e-9, math.nan, math.inf]), mass=floats,
       bad_index=st.sampled_from([None, -1, 8, 100]))
def test_fuzz_add_rigid_body(drop, flip, split, noise, mass, bad_index):
    f = BOX_SF.copy()
    f[flip] = f[flip][:, ::-1]
    if bad_index is not None:
        f[0, 0] = bad_index
    f = np.delete(f, drop, axis=0)
    v = BOX_SV.copy()
    if split:                                   # every triangle its own corners (welded back)
        v, f = v[np.clip(f, 0, len(v) - 1).reshape(-1)], np.arange(f.size).reshape(-1, 3)
        v = v + np.random.default_rng(0).normal(size=v.shape) * 1e-10
    v[0, 0] += noise
    b = tgs.SceneBuilder()
    ok, _ = _call(lambda: b.add_rigid_body(v, f, mass=mass), ["faces", "vertices", "mass"])
    if ok:
        from tigradsim.physics.rigid import RigidBodies
        body = b.component(RigidBodies).bodies[-1]
        assert _finite(mass) and mass > 0 and _finite(v)
        assert body["volume"] > 0 and np.isfinite(body["inertia_unit"]).all()
        # a closed box with consistent outward faces has the box's volume
        assert np.isclose(body["volume"], 0.2 * 0.1 * 0.3, rtol=1e-6), (drop, flip, bad_index)
    else:
        valid = not drop and not flip and bad_index is None and noise in (0.0, 1e-9) and _finite(mass) and mass > 0
        assert not valid, f"rejected a valid rigid body: split {split} noise {noise} mass {mass}"


# ---------------------------------------------------------------------------
# parameter setter

@pytest.fixture(scope="module")
def small_model():
    tgs.init(precision="f64")
    b = tgs.SceneBuilder()
    b.add_ground()
    b.add_particles([[0.0, 0.5, 0.0], [0.1, 0.5, 0.0], [0.0, 0.6, 0.0]], masses=[1.0, 2.0, 1.0])
    b.add_springs([[0, 1], [1, 2]], stiffness=100.0, damping=0.1)
    return b.finalize(requires_grad=False)


@FUZZ
@given(data=st.data())
def test_fuzz_model_set(small_model, data):
    model = small_model
    names = sorted(model._params) + ["no_such_param", ""]
    name = data.draw(st.sampled_from(names))
    shape = tuple(np.shape(model.get(name))) if name in model._params else (3,)
    wrong = data.draw(st.booleans())
    shp = data.draw(shapes(4)) if wrong else shape
    values = data.draw(arrays(st.just(shp)))
    before = {n: model.get(n).copy() for n in model._params}
    ok, exc = _call(lambda: model.set(name, values), [name or "''", "values", "unknown parameter"])
    if ok:
        assert _finite(values) and np.shape(values) == shape, f"accepted {name} = {values!r}"
        model.set(name, before[name])                    # restore for the next example
    else:
        for n in model._params:                          # a rejected set changes nothing
            assert np.array_equal(model.get(n), before[n], equal_nan=True), f"{name} rejected but {n} changed"


# ---------------------------------------------------------------------------
# mesh files

TOKENS = ["v", "f", "vt", "vn", "#", "0", "1", "2", "3", "-1", "0.5", "nan", "inf", "1e400", "x", "1/2/3",
          "4//1", "-0", "1e-300", "\t", "g"]
text_lines = st.lists(st.lists(st.sampled_from(TOKENS), min_size=0, max_size=6).map(" ".join), max_size=12)


_TMP = tempfile.TemporaryDirectory(prefix="tgs-fuzz-")      # removed at interpreter exit
_COUNT = [0]


def _tmpfile(name, content):
    _COUNT[0] += 1
    d = os.path.join(_TMP.name, str(_COUNT[0]))
    os.makedirs(d)
    path = os.path.join(d, name)
    mode = "wb" if isinstance(content, bytes) else "w"
    with open(path, mode) as fh:
        fh.write(content)
    return path


def _check_read(fn, path, arity):
    try:
        v, c = fn()
    except MeshFileError as exc:
        assert str(path) in str(exc)
        return None
    assert v.ndim == 2 and v.shape[1] == 3 and v.dtype == np.float64 and np.isfinite(v).all()
    assert c.ndim == 2 and c.shape[1] == arity and c.dtype == np.int32
    assert c.size == 0 or (c.min() >= 0 and c.max() < len(v))
    return v, c


VALID_OBJ = "v 0 0 0\nv 1 0 0\nv 0 1 0\nv 0 0 1\nf 1 3 2\nf 1 2 4\nf 1 4 3\nf 2 3 4\n"


@FUZZ
@given(lines=text_lines, cut=st.integers(0, len(VALID_OBJ)), garbage=st.binary(max_size=64),
       which=st.sampled_from(["text", "truncated", "bytes"]))
def test_fuzz_obj_files(lines, cut, garbage, which):
    content = {"text": "\n".join(lines), "truncated": VALID_OBJ[:cut], "bytes": garbage}[which]
    path = _tmpfile("m.obj", content)
    _check_read(lambda: meshes.load_obj(path), path, 3)
    _check_read(lambda: meshes.load_mesh(path), path, 3)


NODE = "5 3 0 0\n0 0 0 0\n1 1 0 0\n2 0 1 0\n3 0 0 1\n4 1 1 1\n"
ELE = "2 4 0\n0 0 1 2 3\n1 1 2 3 4\n"


@FUZZ
@given(node_cut=st.integers(0, len(NODE)), ele_cut=st.integers(0, len(ELE)), lines=text_lines,
       which=st.sampled_from(["truncated", "node", "ele"]))
def test_fuzz_tetgen_files(node_cut, ele_cut, lines, which):
    node, ele = NODE, ELE
    if which == "truncated":
        node, ele = NODE[:node_cut] if node_cut % 2 else NODE, ELE[:ele_cut]
    elif which == "node":
        node = "\n".join(lines)
    else:
        ele = "\n".join(lines)
    path = _tmpfile("m.node", node)
    with open(path[:-5] + ".ele", "w") as fh:
        fh.write(ele)
    got = _check_read(lambda: meshes.load_tetgen(path), path[:-5], 4)   # the error may name .node or .ele
    if got is not None:
        assert (meshes.tet_volumes(*got) > 0).all()


def _valid_file(ext):
    v, t = meshes.tet_box(1, 1, 1)
    path = _tmpfile("m" + ext, b"")
    if ext in (".stl", ".ply", ".off"):
        meshes.save_mesh(path, *meshes.box_surface())
    else:
        meshes.save_mesh(path, v, t)
    with open(path, "rb") as fh:
        return fh.read()


VALID = {ext: _valid_file(ext) for ext in (".msh", ".vtk", ".vtu", ".mesh", ".stl", ".ply", ".off")}


@settings(max_examples=40, deadline=None, derandomize=True, database=None)
@given(ext=st.sampled_from(sorted(VALID)), frac=st.floats(0.0, 1.0), garbage=st.binary(max_size=48),
       which=st.sampled_from(["truncated", "bytes", "flipped"]), pos=st.integers(0, 10 ** 6))
def test_fuzz_meshio_files(ext, frac, garbage, which, pos):
    data = VALID[ext]
    if which == "truncated":
        data = data[:int(len(data) * frac)]
    elif which == "bytes":
        data = garbage
    else:
        k = pos % len(data)
        data = data[:k] + bytes([data[k] ^ 0x55]) + data[k + 1:]
    path = _tmpfile("m" + ext, data)
    arity = 3 if ext in (".stl", ".ply", ".off") else 4
    _check_read(lambda: meshes.load_mesh(path), path, arity)


# ---------------------------------------------------------------------------
# unclear errors the fuzzer found (bare numpy messages without the argument's name), now clear

@pytest.mark.parametrize("call, name", [
    (lambda b: b.add_springs([[0], [0, 1]], 1.0), "indices"),                          # errors.check_indices
    (lambda b: b.add_soft_mesh((BOX_V, [[0, 1, 2, 3], [1, 2]])), "tets"),             # fem.TetMeshes.add
    (lambda b: b.add_ground(ke=[1.0, 2.0]), "ke"),                                    # SceneBuilder.add_ground
])
def test_known_unclear_errors(call, name):
    b = tgs.SceneBuilder()
    b.add_particles(np.arange(15, dtype=float).reshape(5, 3))
    with pytest.raises(CLEAR) as exc:
        call(b)
    assert name in str(exc.value)


def test_ragged_rigid_faces_name_the_argument():
    with pytest.raises(TypeError, match="faces"):
        tgs.SceneBuilder().add_rigid_body(BOX_SV, [[0, 1, 2], [1]])
