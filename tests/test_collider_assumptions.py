"""Colliders' unstated contact constants in the fit's honesty report (tigradsim/scenes/assumed.py,
scene_unknowns.nuisance_unknowns).  A [colliders.NAME] table that leaves ke, kd, kf or mu out takes the
[ground]'s value and moves with the assumed (or nuisance) "ground.X"; in a scene without a [ground] it took the
library's default, an assumption reported as "NAME.X" (sensitivity over PRIOR_RANGES, its writer on the
collider's entry), or with [fit] contact_constants = "nuisance" fitted as a bounded log-space unknown there."""
import numpy as np
import pytest

import tigradsim as tgs
from test_colliders import TABLE, _table_scene
from tigradsim.scenes.assumed import assumed_constants
from tigradsim.scenes.scene_file import parse_scene


def _build(tmp_path, ground=True, unstated=(), **changes):
    """The table scene built; without a [ground] table, or with its `unstated` constants left out."""
    from tigradsim.scenes.scene_build import Scene, load_scene_footage

    tgs.init(arch="cpu", precision="f64")
    data = _table_scene(tmp_path, **{"simulation.substeps": 40, **changes})
    if not ground:
        del data["ground"]
    for x in unstated:
        del data["ground"][x]
    spec = parse_scene(data, str(tmp_path / "scene.toml"))
    return Scene(spec, load_scene_footage(spec))


def test_which_collider_constants_are_unstated(tmp_path):
    """Parsing only.  With a [ground]: the constants a collider's table leaves out and no unknown fits follow
    the ground's ("ground_takers"), none is its own; without one they are "NAME.X", and "nuisance" turns
    exactly those into unknowns."""
    from tigradsim.scenes.scene_colliders import ground_takers, unstated_collider_constants

    spec = parse_scene(_table_scene(tmp_path, **{"ground.kf": 20.0, "unknowns": {
        "table.ke": {"init": 1e4, "lower": 1e3, "upper": 1e5}}}), str(tmp_path / "scene.toml"))
    fitted = {(u.object, u.tie or u.param) for u in spec.unknowns}
    assert unstated_collider_constants(spec) == []
    assert [x for x in ("ke", "kd", "kf", "mu") if ground_takers(spec, x, fitted)] == ["kd", "kf"]
    assert spec.colliders["table"].contact["kf"] == 20.0, "the ground's value"
    data = _table_scene(tmp_path, unknowns={})
    del data["ground"]
    spec = parse_scene(data, str(tmp_path / "scene.toml"))
    assert [(n, x) for n, x, _ in unstated_collider_constants(spec)] == [("table", "ke"), ("table", "kd"),
                                                                          ("table", "kf")]
    data = _table_scene(tmp_path, **{"fit.contact_constants": "nuisance", "unknowns": {}})
    del data["ground"]
    extra = {u.target: u for u in parse_scene(data, str(tmp_path / "scene.toml")).unknowns if u.nuisance}
    assert set(extra) == {"table.ke", "table.kd", "table.kf"}        # no ground: the library's defaults
    assert (extra["table.ke"].init, extra["table.ke"].lower, extra["table.ke"].upper) == (1e4, 1e3, 1e5)


@pytest.mark.slow
def test_unstated_collider_constants_are_assumed(tmp_path):
    """The table states mu only.  With a [ground] that leaves kd out, "ground.kd" is assumed and its writer moves the table's kd
    with the ground's (no "table.X" of its own); without one, "table.ke", "table.kd", "table.kf" are assumed,
    each writer moving the table's entry and nothing else; an unknown "table.kf" is not an assumption."""
    scene = _build(tmp_path, unstated=("kd",))
    found = {c.name: c for c in assumed_constants(scene)}
    assert set(found) == {"ground.kd"}
    found["ground.kd"].write(30.0)
    assert scene.model.collider_kd.to_numpy()[scene.colliders["table"]] == 30.0 == scene.model.ground_kd[None]
    scene = _build(tmp_path, ground=False)
    found = {c.name: c for c in assumed_constants(scene)}
    assert {"table.ke", "table.kd", "table.kf"} == set(found)
    kd = found["table.kd"]
    assert (kd.lower, kd.upper) == tgs.PRIOR_RANGES["kd"](kd.value)
    model = scene.model
    body_kd = model.body_kd.to_numpy().copy()
    kd.write(30.0)
    assert model.collider_kd.to_numpy()[scene.colliders["table"]] == 30.0
    assert np.array_equal(model.body_kd.to_numpy(), body_kd)
    scene = _build(tmp_path, ground=False, unknowns={"table.kf": {"init": 10.0, "lower": 1.0, "upper": 100.0}})
    names = {c.name for c in assumed_constants(scene)}
    assert "table.kf" not in names and {"table.ke", "table.kd"} <= names


@pytest.mark.slow
def test_unstated_collider_constants_as_nuisance(tmp_path):
    """No [ground], contact_constants = "nuisance": "table.ke", "table.kf" become log-space unknowns within
    PRIOR_RANGES (the stated kd and mu do not), and the scene's Param of "table.kf" writes the table's entry."""
    scene = _build(tmp_path, ground=False, **{"fit.contact_constants": "nuisance", "colliders.table.kd": 4.0})
    extra = {u.target: u for u in scene.spec.unknowns if u.nuisance}
    assert {"table.ke", "table.kf"} == set(extra)
    kf = extra["table.kf"]
    assert (kf.object, kf.param, kf.log) == ("table", "kf", True)
    assert (kf.lower, kf.upper) == tgs.PRIOR_RANGES["kf"](kf.init)
    param = next(p for p in scene.params if p.name == "table.kf")
    param.write(np.full(np.shape(param.value()), 250.0))
    assert abs(scene.model.collider_kf.to_numpy()[scene.colliders["table"]] - 250.0) < 1e-9
    assert not {"table.ke", "table.kf"} & {c.name for c in assumed_constants(scene)}, "fitted, not assumed"
    assert TABLE["mu"] == scene.model.collider_mu.to_numpy()[0]
