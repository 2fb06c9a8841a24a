"""Colliders' unstated contact constants in the fit's honesty report (tigradsim/scenes/assumed.py,
scene_unknowns.nuisance_unknowns): a [colliders.NAME] table that leaves ke, kd, kf or mu out took the ground's
value, an assumption reported as "NAME.X" (sensitivity over PRIOR_RANGES, its writer on the collider's entry),
or with [fit] contact_constants = "nuisance" fitted as a bounded log-space unknown on that entry."""
import numpy as np
import pytest

import tigradsim as tgs
from test_colliders import TABLE, _table_scene
from tigradsim.scenes.assumed import assumed_constants
from tigradsim.scenes.scene_file import parse_scene


def _build(tmp_path, **changes):
    from tigradsim.scenes.scene_build import Scene, load_scene_footage

    tgs.init(arch="cpu", precision="f64")
    spec = parse_scene(_table_scene(tmp_path, **{"simulation.substeps": 40, **changes}), str(tmp_path / "scene.toml"))
    return Scene(spec, load_scene_footage(spec))


def test_which_collider_constants_are_unstated(tmp_path):
    """Parsing only: the constants a collider's table leaves out and no unknown fits, at the ground's values;
    "nuisance" turns exactly those into unknowns, with or without a [ground]."""
    from tigradsim.scenes.scene_colliders import unstated_collider_constants

    spec = parse_scene(_table_scene(tmp_path, **{"ground.kf": 20.0, "unknowns": {
        "table.ke": {"init": 1e4, "lower": 1e3, "upper": 1e5}}}), str(tmp_path / "scene.toml"))
    assert unstated_collider_constants(spec) == [("table", "kd", 10.0), ("table", "kf", 20.0)]
    data = _table_scene(tmp_path, **{"fit.contact_constants": "nuisance", "unknowns": {}})
    del data["ground"]
    extra = {u.target: u for u in parse_scene(data, str(tmp_path / "scene.toml")).unknowns if u.nuisance}
    assert set(extra) == {"table.ke", "table.kd", "table.kf"}        # no ground: the library's defaults
    assert (extra["table.ke"].init, extra["table.ke"].lower, extra["table.ke"].upper) == (1e4, 1e3, 1e5)


@pytest.mark.slow
def test_unstated_collider_constants_are_assumed(tmp_path):
    """The table states mu only: its ke, kd, kf are assumed at the ground's values, each its own constant
    "table.X" (apart from "ground.X") whose writer moves the table's entry and nothing else; an unknown
    "table.kf" is not an assumption."""
    scene = _build(tmp_path, **{"ground.kd": 12.0})
    found = {c.name: c for c in assumed_constants(scene)}
    assert {"table.ke", "table.kd", "table.kf"} <= set(found) and "table.mu" not in found
    kd = found["table.kd"]
    assert kd.value == 12.0 and (kd.lower, kd.upper) == tgs.PRIOR_RANGES["kd"](12.0)
    model = scene.model
    ground_kd, body_kd = model.ground_kd[None], model.body_kd.to_numpy().copy()
    kd.write(30.0)
    assert model.collider_kd.to_numpy()[scene.colliders["table"]] == 30.0
    assert model.ground_kd[None] == ground_kd and np.array_equal(model.body_kd.to_numpy(), body_kd)
    scene = _build(tmp_path, unknowns={"table.kf": {"init": 10.0, "lower": 1.0, "upper": 100.0}})
    names = {c.name for c in assumed_constants(scene)}
    assert "table.kf" not in names and {"table.ke", "table.kd"} <= names


@pytest.mark.slow
def test_unstated_collider_constants_as_nuisance(tmp_path):
    """contact_constants = "nuisance": "table.ke", "table.kd", "table.kf" become log-space unknowns within
    PRIOR_RANGES (the stated mu does not), and the scene's Param of "table.kf" writes the table's entry."""
    scene = _build(tmp_path, **{"fit.contact_constants": "nuisance", "colliders.table.kd": 4.0})
    extra = {u.target: u for u in scene.spec.unknowns if u.nuisance}
    assert {"table.ke", "table.kf"} <= set(extra) and not {"table.kd", "table.mu"} & set(extra)
    kf = extra["table.kf"]
    assert (kf.object, kf.param, kf.init, kf.lower, kf.upper, kf.log) == ("table", "kf", 10.0, 1.0, 1000.0, True)
    param = next(p for p in scene.params if p.name == "table.kf")
    param.write(np.full(np.shape(param.value()), 250.0))
    assert abs(scene.model.collider_kf.to_numpy()[scene.colliders["table"]] - 250.0) < 1e-9
    assert not {"table.ke", "table.kf"} & {c.name for c in assumed_constants(scene)}, "fitted, not assumed"
    assert TABLE["mu"] == scene.model.collider_mu.to_numpy()[0]
