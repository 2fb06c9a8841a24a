"""Property-based test (hypothesis) of the scene-file reader (issue 45, item 9, the scene-file half).

A valid scene (test_scene_file's, written as a TOML file) is broken in one generated way: a required
key or section removed, a value (or a whole section) of the wrong type, NaN or inf, a negative mass or size, a degenerate
mesh (a flat box, zero cells, an OBJ that is not closed), a bad camera matrix (not a rotation, a
reflection, camera-to-world, skew, a principal point outside the image), a key or section name
with a typo, an object inside the ground or outside the view, or a truncated file.  Every one must
give `SceneError` naming the file (and, for a broken key, its section and key), never a raw
traceback (any other exception fails the test) nor silence.  Only `load_scene` runs: no kernel.

Bounded for CI: derandomized, no deadline, 100 examples (a few seconds).
"""
import json
import math

import numpy as np
import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from tigradsim.scenes.scene_file import SceneError, load_scene  # noqa: E402
from test_scene_file import _scene  # noqa: E402

FUZZ = settings(max_examples=100, deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])


# ---------------------------------------------------------------------------
# writing TOML (the tests' own small writer: tomllib only reads)

def _value(v):
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf") if math.isinf(v) else repr(v)
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{json.dumps(k)} = {_value(x)}" for k, x in v.items()) + "}"
    raise TypeError(type(v))


def to_toml(data, prefix=()):
    """Sections as [a."b"] tables, lists of tables as [[forces]]; scalars and arrays inline."""
    lines = []
    name = ".".join(json.dumps(p) for p in prefix)
    plain = {k: v for k, v in data.items() if not isinstance(v, dict) and not _table_list(v)}
    if prefix and (plain or not any(isinstance(v, dict) for v in data.values())):
        lines.append(f"[{name}]")
    lines += [f"{json.dumps(k)} = {_value(v)}" for k, v in plain.items()]
    for k, v in data.items():
        if isinstance(v, dict):
            lines.append(to_toml(v, prefix + (k,)))
        elif _table_list(v):
            for item in v:
                lines.append(f"[[{'.'.join(json.dumps(p) for p in prefix + (k,))}]]")
                lines += [f"{json.dumps(a)} = {_value(b)}" for a, b in item.items()]
    return "\n".join(lines)


def _table_list(v):
    return isinstance(v, list) and len(v) > 0 and all(isinstance(x, dict) for x in v)


# ---------------------------------------------------------------------------
# ways to break a scene: each returns (data, (section, key) the error must name, or None)

# (section, key) of values: what kind each is
NUMBERS = [("objects.box", "mass"), ("ground", "ke"), ("ground", "mu"), ("footage", "fps"), ("camera", "fov"),
           ("unknowns.\"box.mass\"", "init"), ("fit", "lr"), ("simulation", "dt"), ("world", "gravity")]
POSITIVE = [("objects.box", "mass"), ("footage", "fps"), ("fit", "lr"), ("simulation", "dt"), ("camera", "near")]
INTEGERS = [("camera", "width"), ("camera", "height"), ("simulation", "substeps"), ("fit", "iterations")]
VECTORS = [("objects.box", "position"), ("objects.box", "velocity"), ("objects.box", "box"), ("camera", "eye"),
           ("camera", "target"), ("forces.0", "force")]
REQUIRED = [("objects.box", "type"), ("objects.box", "mass"), ("camera", "width"), ("camera", "fov"),
            ("camera", "eye"), ("footage", "fps"), ("footage", "frames"), ("unknowns.\"box.mass\"", "init"),
            ("forces.0", "object")]
WRONG = ["heavy", True, [1.0, 2.0], {"a": 1.0}]
NONFINITE = [math.nan, math.inf, -math.inf]


def _table(data, section):
    """The dict of `section` ("objects.box", 'unknowns."box.mass"', "forces.0")."""
    if section.startswith("unknowns."):
        return data["unknowns"][section.split(".", 1)[1].strip('"')]
    d = data
    for k in section.split("."):
        d = d[int(k)] if isinstance(d, list) else d[k]
    return d


def _plain(section):
    return section.replace('"', "")


@st.composite
def broken_scenes(draw, base):
    data = json.loads(json.dumps(base))            # a deep copy
    how = draw(st.sampled_from(["missing", "type", "nonfinite", "negative", "vector", "typo", "section_typo",
                                "section_missing", "section_type", "degenerate", "camera", "placement"]))
    if how == "missing":
        section, key = draw(st.sampled_from(REQUIRED))
        del _table(data, section)[key]
        return data, (_plain(section), key)
    if how == "type":
        section, key = draw(st.sampled_from(NUMBERS + INTEGERS))
        _table(data, section)[key] = draw(st.sampled_from(WRONG if key != "gravity" else WRONG[:2]))
        return data, (_plain(section), key)
    if how == "nonfinite":
        section, key = draw(st.sampled_from(NUMBERS))
        _table(data, section)[key] = draw(st.sampled_from(NONFINITE))
        return data, (_plain(section), key)
    if how == "negative":
        section, key = draw(st.sampled_from(POSITIVE + INTEGERS))
        integer = (section, key) in INTEGERS
        _table(data, section)[key] = -draw(st.integers(1, 100)) if integer else -draw(st.floats(0.0, 1e3))
        return data, (_plain(section), key)
    if how == "vector":
        section, key = draw(st.sampled_from(VECTORS))
        n = draw(st.sampled_from([0, 1, 2, 4]))
        bad = draw(st.sampled_from(["short", "nan", "text"]))
        _table(data, section)[key] = ([1.0] * n if bad == "short" else [0.1, math.nan, 0.2] if bad == "nan"
                                      else ["a", "b", "c"])
        return data, (_plain(section), key)
    if how == "typo":
        section = draw(st.sampled_from(["objects.box", "camera", "footage", "fit", "ground", "world"]))
        table = _table(data, section)
        key = draw(st.sampled_from(sorted(table)))
        k = draw(st.integers(0, len(key) - 1))
        typo = draw(st.sampled_from([key[:k] + key[k + 1:], key[:k] + "x" + key[k:], key + "s"]))
        if typo in table or not typo:
            typo = key + "_"
        table[typo] = table.pop(key)
        return data, (_plain(section), (typo, key))        # the typo, or the key it leaves missing
    if how == "section_typo":
        name = draw(st.sampled_from(["camera", "footage", "ground", "objects", "fit", "world"]))
        data[name[:-1] + "x"] = data.pop(name) if name in data else {}
        return data, (None, f"[{name[:-1]}x]")
    if how == "section_type":
        name = draw(st.sampled_from(["world", "simulation", "ground", "objects", "forces", "camera", "footage",
                                     "unknowns", "fit"]))
        data[name] = draw(st.sampled_from(WRONG[:3] if name != "forces" else WRONG[:2] + [{"a": 1.0}]))
        return data, (None, name)
    if how == "section_missing":
        name = draw(st.sampled_from(["camera", "objects"]))
        del data[name]
        return data, (None, f"[{name}]")
    if how == "degenerate":
        box = data["objects"]["box"]
        kind = draw(st.sampled_from(["flat_box", "zero_cells", "open_mesh", "collinear_mesh"]))
        if kind == "flat_box":
            box["box"] = [0.2, 0.0, 0.1]
            return data, ("objects.box", "box")
        if kind == "zero_cells":
            data["objects"]["box"] = {"type": "soft", "tet_box": {"cells": [2, 0, 1], "size": [0.2, 0.1, 0.1]},
                                      "density": 100.0, "position": [0.0, 0.06, 0.0]}
            data["forces"], data["unknowns"] = [], {}
            return data, ("objects.box.tet_box", "cells")
        del box["box"]
        box["mesh"] = "open.obj" if kind == "open_mesh" else "line.obj"
        return data, ("objects.box", "mesh")
    if how == "camera":
        cam = data["camera"]
        for k in ("eye", "target", "fov", "up"):
            cam.pop(k, None)
        R = np.eye(3)
        cam.update(K=[[10.0, 0.0, 3.5], [0.0, 10.0, 3.5], [0.0, 0.0, 1.0]], R=R.tolist(), t=[0.0, -0.05, 1.2])
        kind = draw(st.sampled_from(["scaled_R", "reflection", "camera_to_world", "skew", "principal", "focal",
                                     "nonfinite"]))
        if kind == "nonfinite":
            which = draw(st.sampled_from(["K", "R"]))
            cam[which][draw(st.integers(0, 2))][draw(st.integers(0, 2))] = draw(st.sampled_from(NONFINITE))
            return data, ("camera", which)
        if kind == "scaled_R":
            cam["R"] = (draw(st.floats(1.01, 3.0)) * R).tolist()
            return data, ("camera", "R")
        if kind == "reflection":
            cam["R"] = np.diag([1.0, 1.0, -1.0]).tolist()
            return data, ("camera", "R")
        if kind == "camera_to_world":            # a valid camera looking down at the box, R given transposed
            a = math.radians(draw(st.floats(20.0, 60.0)))
            Rw = np.array([[1.0, 0.0, 0.0], [0.0, -math.cos(a), math.sin(a)], [0.0, -math.sin(a), -math.cos(a)]])
            eye = np.array([0.0, 1.2 * math.sin(a) + 0.05, 1.2 * math.cos(a)])
            cam["R"], cam["t"] = Rw.T.tolist(), (-Rw @ eye).tolist()
            return data, ("camera", "R / t")
        if kind == "skew":
            cam["K"][0][1] = 0.5
            return data, ("camera", "K")
        if kind == "principal":
            cam["K"][0][2] = draw(st.sampled_from([-5.0, 8.0, 500.0]))
            return data, ("camera", "K")
        cam["K"][0][0] = draw(st.sampled_from([0.0, -10.0]))
        return data, ("camera", "K")
    # placement: inside the ground, or outside the view
    box = data["objects"]["box"]
    if draw(st.booleans()):
        box["position"] = [0.0, 0.05 - draw(st.floats(0.03, 2.0)), 0.0]
    else:
        box["position"] = [draw(st.sampled_from([-1.0, 1.0])) * draw(st.floats(2.0, 50.0)), 0.05, 0.0]
    return data, ("objects.box", "position")


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    """The valid scene (test_scene_file's) with its footage and the degenerate meshes, in one folder."""
    folder = tmp_path_factory.mktemp("fuzz")
    data = _scene(folder)
    (folder / "open.obj").write_text("v 0 0 0\nv 1 0 0\nv 0 1 0\nv 0 0 1\nf 1 3 2\nf 1 2 4\nf 1 4 3\n")
    (folder / "line.obj").write_text("v 0 0 0\nv 1 0 0\nv 2 0 0\nv 3 0 0\nf 1 2 3\nf 1 3 4\nf 1 4 2\nf 2 4 3\n")
    path = folder / "scene.toml"
    path.write_text(to_toml(data))
    load_scene(path)                                 # the base is valid, through the same writer
    return folder, data


@FUZZ
@given(data=st.data())
def test_malformed_scene_files_get_a_scene_error(base, data):
    folder, valid = base
    broken, (section, key) = data.draw(broken_scenes(valid))
    path = folder / "scene.toml"
    text = to_toml(broken)
    path.write_text(text)
    with pytest.raises(SceneError) as info:          # any other exception (a traceback) fails the test
        load_scene(path)
    err = info.value
    assert str(err).startswith("scene.toml: "), str(err)
    keys = key if isinstance(key, tuple) else (key,)
    if section is not None:
        assert err.section is not None and _plain(err.section).startswith(section), (section, key, str(err))
        assert err.key is not None and any(k in err.key for k in keys), (section, key, str(err))
    else:
        assert err.key is not None and any(k in err.key for k in keys), (key, str(err))


@FUZZ
@given(cut=st.floats(0.0, 1.0, exclude_max=True))
def test_truncated_scene_files_get_a_scene_error(base, cut):
    """A file cut short anywhere before its last required key (the footage's fps): invalid TOML or a
    scene missing a required key; a SceneError either way."""
    folder, valid = base
    text = to_toml(valid)
    cut = int(cut * text.index('"fps"'))
    path = folder / "cut.toml"
    path.write_text(text[:cut])
    with pytest.raises(SceneError) as info:
        load_scene(path)
    assert str(info.value).startswith("cut.toml: ")
