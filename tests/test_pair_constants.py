"""The rigid bodies' contact constants against each other ("bodies.X", tigradsim/scenes/pair_constants.py):
with [fit] contact_constants = "nuisance", a scene with two rigid objects that take the shared constants gets
them as unknowns of their own, apart from "ground.X"; a scene with one rigid object does not."""
import copy
import os
import tomllib

import pytest

from tigradsim.scenes.scene_file import parse_scene
from tigradsim.scenes.scene_table import SceneError

RAMP = os.path.join(os.path.dirname(__file__), "..", "benchmarks", "footage", "warp_ramp_boxes", "scene.toml")


def _ramp():
    with open(RAMP, "rb") as f:
        return tomllib.load(f)


def _nuisance(data):
    return {u.target: u for u in parse_scene(data, RAMP).unknowns if u.nuisance}


def test_two_boxes_get_body_body_nuisance_constants():
    """Warp's ramp clip (two boxes, a [ground] and a ramp stating no constant): ground.X for the ground and the
    ramp, bodies.X for the boxes against each other, both in log space within PRIOR_RANGES of the same value."""
    from tigradsim.fitting.sensitivity import PRIOR_RANGES

    extra = _nuisance(_ramp())
    assert set(extra) == {f"{o}.{x}" for o in ("ground", "bodies") for x in ("ke", "kd", "kf", "mu")}
    for x in ("ke", "kd", "kf", "mu"):
        u, g = extra[f"bodies.{x}"], extra[f"ground.{x}"]
        assert u.log and u.tie is None and u.init == g.init
        assert (u.lower, u.upper) == PRIOR_RANGES[x](u.init)


def test_one_box_or_stated_constants_get_none():
    """One box: no pair, no bodies.X.  Two boxes where one states its own kd, or [ground] states mu: those two
    constants are the file's, so neither is a bodies.X."""
    data = _ramp()
    one = copy.deepcopy(data)
    del one["objects"]["box_b"], one["unknowns"]["box_b.mass"]
    assert not [t for t in _nuisance(one) if t.startswith("bodies.")]
    two = copy.deepcopy(data)
    two["objects"]["box_b"]["kd"] = 20.0
    two["ground"]["mu"] = 0.5
    pair = {t for t in _nuisance(two) if t.startswith("bodies.")}
    assert pair == {"bodies.ke", "bodies.kf"}
    assume = copy.deepcopy(data)
    assume["fit"]["contact_constants"] = "assume"
    assert not _nuisance(assume)


def test_reserved_name():
    data = _ramp()
    data["objects"]["bodies"] = data["objects"].pop("box_b")
    data["unknowns"]["bodies.mass"] = data["unknowns"].pop("box_b.mass")
    with pytest.raises(SceneError, match="reserved"):
        parse_scene(data, RAMP)


@pytest.mark.slow
def test_pair_constants_move_the_pair_fields_only():
    """Built (about 10 s): the nuisance "bodies.ke" writes body_pair_ke of both boxes (the pair means'
    field, `body_contact`) and not their body_ke; "ground.ke" writes ground_ke, the ramp's and the boxes' body_ke
    and not body_pair_ke.  With contact_constants = "assume" the same two are separate assumed constants."""
    import numpy as np

    import tigradsim as tgs
    from tigradsim.scenes.assumed import assumed_constants
    from tigradsim.scenes.scene_build import Scene, load_scene_footage

    tgs.init(arch="cpu", precision="f64")
    spec = parse_scene(_ramp(), RAMP)
    scene = Scene(spec, load_scene_footage(spec))
    params, m = {p.name: p for p in scene.params}, scene.model
    params["bodies.ke"].write([2e4])
    assert np.allclose(m.body_pair_ke.to_numpy(), 2e4) and np.allclose(m.body_ke.to_numpy(), 1e4)
    params["ground.ke"].write([3e3])
    assert np.allclose(m.body_ke.to_numpy(), 3e3) and np.allclose(m.body_pair_ke.to_numpy(), 2e4)
    assert float(m.ground_ke[None]) == 3e3 and np.allclose(m.collider_ke.to_numpy(), 3e3)
    data = _ramp()
    data["fit"]["contact_constants"] = "assume"
    spec = parse_scene(data, RAMP)
    scene = Scene(spec, load_scene_footage(spec))
    found = {c.name: c for c in assumed_constants(scene)}
    assert set(found) == {f"{o}.{x}" for o in ("ground", "bodies") for x in ("ke", "kd", "kf", "mu")}
    found["bodies.mu"].write(0.9)
    assert np.allclose(scene.model.body_pair_mu.to_numpy(), 0.9) and np.allclose(scene.model.body_mu.to_numpy(), 0.5)
    found["ground.mu"].write(0.2)
    assert np.allclose(scene.model.body_mu.to_numpy(), 0.2) and np.allclose(scene.model.body_pair_mu.to_numpy(), 0.9)
