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


# ---------------------------------------------------------------------------- stated by the user

def test_bodies_table_and_unknown_parse():
    """[bodies] kd (a known) and [unknowns."bodies.mu"] (an unknown with the user's bounds) are the file's: no
    nuisance bodies.kd or bodies.mu beside them; the other two stay nuisance, and ground.X are untouched."""
    data = _ramp()
    data["bodies"] = {"kd": 40.0}
    data["unknowns"]["bodies.mu"] = {"init": 0.4, "lower": 0.05, "upper": 2.0}
    spec = parse_scene(data, RAMP)
    assert spec.bodies == {"kd": 40.0}
    by = {u.target: u for u in spec.unknowns}
    mu = by["bodies.mu"]
    assert not mu.nuisance and (mu.init, mu.lower, mu.upper, mu.log, mu.tie) == (0.4, 0.05, 2.0, True, None)
    assert [u.target for u in spec.unknowns].count("bodies.mu") == 1
    assert "bodies.kd" not in by and by["bodies.ke"].nuisance and by["bodies.kf"].nuisance
    assert {f"ground.{x}" for x in ("ke", "kd", "kf", "mu")} <= set(by)
    assume = copy.deepcopy(data)                  # an unknown needs no "nuisance" mode
    assume["fit"]["contact_constants"] = "assume"
    assert [u.target for u in parse_scene(assume, RAMP).unknowns] == ["ramp.mu", "box_b.mass", "bodies.mu"]


@pytest.mark.parametrize("change, message", [
    (lambda d: d.update(bodies={"kd": -1.0}), r"\[bodies\] kd: expected a number >= 0, got -1"),
    (lambda d: d.update(bodies={"kd": "10"}), r"\[bodies\] kd: expected a number, got a string \"10\""),
    (lambda d: d.update(bodies={"damping": 1.0}), r"\[bodies\] damping: unknown key .*allowed: kd, ke, kf, mu"),
    (lambda d: d.update(bodies={"kd": 3.0}) or d["unknowns"].update({"bodies.kd": {"init": 2.0}}),
     r"\[unknowns\] bodies.kd: \[bodies\] states kd = 3 too: give it either as a known"),
    (lambda d: d["unknowns"].update({"bodies.mass": {"init": 2.0}}),
     r"\[unknowns\] bodies.mass: 'bodies' has no parameter 'mass' \(parameters: ke, kd, kf, mu\)"),
    (lambda d: d["unknowns"].update({"bodies.kd": {"init": 0.0}}),
     r"\[unknowns.\"bodies.kd\"\] init: expected a positive number, got 0"),
    (lambda d: d["unknowns"].update({"bodies.kd": {"init": 2.0, "lower": 3.0}}),
     r"init: expected init within \[lower, upper\]"),
    (lambda d: d["objects"]["box_b"].update(kd=5.0) or d["unknowns"].update({"bodies.kd": {"init": 2.0}}),
     r"\[unknowns\] bodies.kd: .*needs two or more rigid objects taking it .*own kd, stated or fitted: box_b"),
    (lambda d: d["objects"].pop("box_b") and d["unknowns"].pop("box_b.mass") and d.update(bodies={"mu": 0.3}),
     r"\[bodies\] mu: .*needs two or more rigid objects .*the scene has 1 rigid object"),
])
def test_bodies_errors(change, message):
    """Bad [bodies] and "bodies.X" entries: errors naming the key, the value and what was expected."""
    data = _ramp()
    change(data)
    with pytest.raises(SceneError, match=message):
        parse_scene(data, RAMP)


@pytest.mark.slow
def test_stated_pair_constants_are_written_and_ground_leaves_them():
    """Built (about 10 s): [bodies] kd = 40 is both boxes' body_pair_kd (body_kd stays the ground's), the
    nuisance "ground.kd" then moves body_kd only; the user's "bodies.mu" writes body_pair_mu only; with
    contact_constants = "assume" neither is an assumed constant, and "ground.kd" / "ground.mu" leave the pair's."""
    import numpy as np

    import tigradsim as tgs
    from tigradsim.scenes.assumed import assumed_constants
    from tigradsim.scenes.scene_build import Scene, load_scene_footage

    tgs.init(arch="cpu", precision="f64")
    data = _ramp()
    data["bodies"] = {"kd": 40.0}
    data["unknowns"]["bodies.mu"] = {"init": 0.4, "lower": 0.05, "upper": 2.0}
    spec = parse_scene(data, RAMP)
    scene = Scene(spec, load_scene_footage(spec))
    params, m = {p.name: p for p in scene.params}, scene.model
    assert np.allclose(m.body_pair_kd.to_numpy(), 40.0) and np.allclose(m.body_kd.to_numpy(), 10.0)
    assert np.allclose(m.body_pair_mu.to_numpy(), 0.4) and np.allclose(m.body_mu.to_numpy(), 0.5)
    params["ground.kd"].write([3.0])
    params["ground.mu"].write([0.2])
    assert np.allclose(m.body_kd.to_numpy(), 3.0) and np.allclose(m.body_pair_kd.to_numpy(), 40.0)
    assert np.allclose(m.body_mu.to_numpy(), 0.2) and np.allclose(m.body_pair_mu.to_numpy(), 0.4)
    params["bodies.mu"].write([0.9])
    assert np.allclose(m.body_pair_mu.to_numpy(), 0.9) and np.allclose(m.body_mu.to_numpy(), 0.2)
    data["fit"]["contact_constants"] = "assume"
    spec = parse_scene(data, RAMP)
    scene = Scene(spec, load_scene_footage(spec))
    found = {c.name: c for c in assumed_constants(scene)}
    assert set(found) == {f"ground.{x}" for x in ("ke", "kd", "kf", "mu")} | {"bodies.ke", "bodies.kf"}
    found["ground.kd"].write(2.0)
    found["ground.mu"].write(0.7)
    assert np.allclose(scene.model.body_pair_kd.to_numpy(), 40.0) and np.allclose(scene.model.body_kd.to_numpy(), 2.0)
    assert np.allclose(scene.model.body_pair_mu.to_numpy(), 0.4) and np.allclose(scene.model.body_mu.to_numpy(), 0.7)


@pytest.mark.slow
def test_bodies_unknowns_gradient_through_a_box_on_box_rollout(tmp_path, f64_without_ir_passes):
    """The scene path end to end (f64): a box dropped, sliding, onto a box resting on the ground, with
    "bodies.ke", "bodies.kd", "bodies.mu" as [unknowns] and [bodies] kf known; the Tape gradient of a loss on
    both boxes' positions with respect to each matches central differences, and the contact happens (the
    loss moves with bodies.kd)."""
    import imageio.v3 as iio
    import numpy as np

    import tigradsim as tgs
    from tigradsim.scenes.scene_build import Scene, load_scene_footage

    (tmp_path / "clip").mkdir()
    mask = np.zeros((8, 8), np.uint8)
    mask[2:6, 2:6] = 255
    for k in range(3):
        iio.imwrite(tmp_path / "clip" / f"rgb_{k:04d}.png", np.full((8, 8, 3), 60, np.uint8))
        iio.imwrite(tmp_path / "clip" / f"mask_{k:04d}.png", mask)
    box = {"type": "rigid", "box": [0.2, 0.1, 0.15], "mass": 1.0}
    data = {
        "simulation": {"substeps": 40, "duration": 0.1},
        "ground": {"ke": 1e4, "kd": 10.0, "kf": 10.0, "mu": 0.5},
        "bodies": {"kf": 20.0},
        "objects": {"below": dict(box, position=[0.0, 0.05, 0.0]),
                    "above": dict(box, mass=0.6, position=[0.03, 0.16, 0.01], velocity=[0.6, -0.8, 0.1],
                                  angular_velocity=[0.0, 1.0, 0.0])},
        "camera": {"eye": [0.0, 0.5, 1.2], "target": [0.0, 0.05, 0.0], "fov": 40.0, "width": 8, "height": 8},
        "footage": {"frames": "clip/rgb_%04d.png", "masks": "clip/mask_*.png", "fps": 30.0},
        "unknowns": {"bodies.ke": {"init": 8e3}, "bodies.kd": {"init": 15.0}, "bodies.mu": {"init": 0.4}},
    }
    spec = parse_scene(data, str(tmp_path / "scene.toml"))
    scene = Scene(spec, load_scene_footage(spec))
    m = scene.model
    assert np.allclose(m.get("body_pair_kf"), 20.0) and np.allclose(m.get("body_kf"), 10.0)
    assert np.allclose(m.get("body_pair_kd"), 15.0) and np.allclose(m.get("body_kd"), 10.0)
    rec = tgs.BodyRecorder(scene.sim, every=20)
    loss = tgs.MSELoss(rec.positions, np.zeros((rec.frames, rec.count, 3)) + [0.1, 0.02, 0.05])

    def run():
        loss.value[None] = 0.0
        scene.sim.run()
        loss._accumulate()

    values = []
    for kd in (15.0, 60.0):
        scene.set_values({"bodies.kd": kd})
        run()
        values.append(float(loss.value[None]))
    assert abs(values[1] - values[0]) > 1e-6 * abs(values[0]), values       # the boxes touch
    scene.set_values({"bodies.kd": 15.0})
    for p in scene.params:
        report = tgs.check_param_gradient(run, loss.value, p, n_dirs=1, eps=1e-6, rtol=1e-5)   # scalar: +-1
        assert report.ok, (p.name, str(report))
