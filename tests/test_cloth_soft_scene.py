"""The cloths' contact constants against the soft objects in scene files ([cloth_soft] and "cloth_soft.X",
tigradsim/scenes/cloth_soft_constants.py): they parse, bad values and misplaced statements are errors naming the
key, the knowns reach every row of the model's cloth_soft_X, and (float64) the Tape gradient of a loss on a cloth
landing on a soft block with respect to the unknowns matches central differences."""
import numpy as np
import pytest

import tigradsim as tgs
from tigradsim.scenes.scene_file import parse_scene
from tigradsim.scenes.scene_table import SceneError

from test_scene_cloth import _cloth_obj, vertex_loss
from test_scene_file import _scene

BLOCK = {"type": "soft", "tet_box": {"cells": [2, 1, 2], "size": [0.24, 0.18, 0.24]}, "material": "neo_hookean",
         "params": {"mu": 1e3, "lam": 2e3}, "density": 100.0, "radius": 0.005, "position": [0.0, 0.1, 0.0]}


@pytest.fixture(scope="module")
def f64():
    tgs.init(arch="cpu", precision="f64")
    yield


def _drape_scene(tmp_path, known=None, unknowns=None, cloth=None):
    """A 0.3 m cloth (3 x 3 cells, 20 g, contact radius 5 mm) thrown down from 2.4 cm above a soft block
    (0.24 x 0.18 x 0.24 m, 1 kg, contact radius 5 mm, its bottom 1 cm above the ground: it falls onto the
    ground in the rollout rather than starting on it, at the kink of the ground's damping); 0.1 s at dt 1/1200 s.
    The cloth is off the block's axes by (2, 0) cm and its heights not round, so that no vertex sits where the
    closest point changes region or reaches the contact thickness exactly at a step (kinks of the force's
    derivative that central differences would straddle)."""
    obj = {"type": "cloth", "mesh": _cloth_obj(tmp_path, height=0.2137), "params": {"mu": 30.0, "lam": 60.0},
           "damping": 0.02, "mass": 0.02, "radius": 0.005, "velocity": [0.05, -0.4, 0.02]}
    obj.update(cloth or {})
    data = _scene(tmp_path, ground={"ke": 500.0, "kd": 0.1, "kf": 0.3, "mu": 0.5},
                  objects={"cloth": obj, "block": dict(BLOCK)}, forces=[],
                  unknowns=unknowns if unknowns is not None else {},
                  **{"simulation.duration": 0.1, "simulation.substeps": 40})
    if known is not None:
        data["cloth_soft"] = known
    return data


def _parse(tmp_path, data):
    return parse_scene(data, str(tmp_path / "scene.toml"))


def test_cloth_soft_table_and_unknowns_parse(tmp_path):
    """[cloth_soft] knowns and [unknowns."cloth_soft.X"] (log space, the user's bounds) are the file's."""
    spec = _parse(tmp_path, _drape_scene(tmp_path, known={"kd": 0.02, "kf": 0.05},
                                         unknowns={"cloth_soft.ke": {"init": 80.0, "lower": 10.0, "upper": 500.0}}))
    assert spec.cloth_soft == {"kd": 0.02, "kf": 0.05}
    (u,) = spec.unknowns
    assert (u.target, u.object, u.param, u.init, u.lower, u.upper, u.log, u.tie) == \
        ("cloth_soft.ke", "cloth_soft", "ke", 80.0, 10.0, 500.0, True, None)
    assert _parse(tmp_path, _drape_scene(tmp_path)).cloth_soft == {}


@pytest.mark.parametrize("change, message", [
    (lambda d: d.update(cloth_soft={"ke": 0.0}), r"\[cloth_soft\] ke: expected a positive number, got 0"),
    (lambda d: d.update(cloth_soft={"kd": -1.0}), r"\[cloth_soft\] kd: expected a number >= 0, got -1"),
    (lambda d: d.update(cloth_soft={"mu": "0.3"}), r"\[cloth_soft\] mu: expected a number, got a string \"0.3\""),
    (lambda d: d.update(cloth_soft={"thickness": 0.01}),
     r"\[cloth_soft\] thickness: unknown key .*allowed: kd, ke, kf, mu"),
    (lambda d: d.update(cloth_soft={"mu": 0.3}) or d["unknowns"].update({"cloth_soft.mu": {"init": 0.2}}),
     r"\[unknowns\] cloth_soft.mu: \[cloth_soft\] states mu = 0.3 too: give it either as a known"),
    (lambda d: d["unknowns"].update({"cloth_soft.radius": {"init": 0.01}}),
     r"\[unknowns\] cloth_soft.radius: 'cloth_soft' has no parameter 'radius' \(parameters: ke, kd, kf, mu\)"),
    (lambda d: d["unknowns"].update({"cloth_soft.ke": {"init": -5.0}}),
     r"\[unknowns.\"cloth_soft.ke\"\] init: expected a positive number, got -5"),
    (lambda d: d["objects"].pop("block") and d.update(cloth_soft={"kd": 0.1}),
     r"\[cloth_soft\] kd: .*need a cloth and a soft object in the scene; it has no soft object"),
    (lambda d: d["objects"].pop("cloth") and d["unknowns"].update({"cloth_soft.ke": {"init": 50.0}}),
     r"\[unknowns\] cloth_soft.ke: .*need a cloth and a soft object in the scene; it has no cloth object"),
    (lambda d: d["objects"].update(cloth_soft=d["objects"].pop("block")) or d.update(cloth_soft={"kd": 0.1}),
     r"\[objects\] cloth_soft: the name 'cloth_soft' is reserved"),
])
def test_cloth_soft_errors(tmp_path, change, message):
    """Bad [cloth_soft] and "cloth_soft.X" entries: errors naming the key, the value and what was expected, before
    anything is built."""
    data = _drape_scene(tmp_path)
    change(data)
    with pytest.raises(SceneError, match=message):
        _parse(tmp_path, data)


@pytest.mark.slow          # ~100 s cold on the shared 2-core VM (a cloth, a soft block, both contact terms, the Tape)
def test_cloth_soft_unknowns_gradient_through_a_landing(tmp_path, f64):
    """The scene path end to end (f64): [cloth_soft] kd, kf known (written to the model's cloth_soft_kd, kf), ke and
    mu as [unknowns]; the cloth lands on the block and stays on it; the Tape gradient of a loss on the recorded
    vertices with respect to each unknown matches central differences, and the loss moves with each (the contact
    happens, with sliding)."""
    from tigradsim.scenes.scene_build import Scene, load_scene_footage

    unknowns = {"cloth_soft.ke": {"init": 60.0, "lower": 5.0, "upper": 500.0},
                "cloth_soft.mu": {"init": 0.3, "lower": 0.05, "upper": 1.0}}
    spec = _parse(tmp_path, _drape_scene(tmp_path, known={"kd": 0.02, "kf": 0.5}, unknowns=unknowns))
    scene = Scene(spec, load_scene_footage(spec))
    m = scene.model
    assert np.allclose(m.get("cloth_soft_kd"), 0.02) and np.allclose(m.get("cloth_soft_kf"), 0.5)
    assert np.allclose(m.get("cloth_soft_ke"), 60.0) and np.allclose(m.get("cloth_soft_mu"), 0.3)
    scene.sim.run()
    q = scene.sim.state.particle_q.to_numpy()
    cloth = np.nonzero(m.cloth_soft_cloth.to_numpy() >= 0)[0]
    block = np.nonzero(m.cloth_soft_mesh.to_numpy() >= 0)[0]
    top = q[:, block, 1].max(axis=1)
    assert q[-1, cloth, 1].max() < q[0, cloth, 1].min() - 0.005, "the cloth should have come down"
    assert np.all(q[:, cloth, 1].min(axis=1) > top - 0.01), "the cloth should land on the block, not pass through"
    loss, run = vertex_loss(scene, seed=5)
    for name, moved in (("cloth_soft.ke", 120.0), ("cloth_soft.mu", 0.8)):
        values = []
        for value in (unknowns[name]["init"], moved):
            scene.set_values({name: value})
            run()
            values.append(float(loss.value[None]))
        scene.set_values({name: unknowns[name]["init"]})
        assert abs(values[1] - values[0]) > 1e-4 * abs(values[0]), (name, values)
    for p in scene.params:
        report = tgs.check_param_gradient(run, loss.value, p, n_dirs=1, eps=1e-6, rtol=1e-5)
        assert report.ok, f"{p.name}: {report}"
        assert max(abs(a) for a in report.analytic) > 1e-12, f"{p.name}: gradient should not vanish here"


def test_unstated_cloth_soft_constants_are_nuisances_or_assumed(tmp_path):
    """A cloth-soft constant the file states nowhere is not silently the library's (issue 44 item 2): with [fit]
    contact_constants = "nuisance" it is a log-space nuisance unknown "cloth_soft.X" started at the library's value;
    otherwise an assumed constant of the report, its writer on every row of cloth_soft_X.  Ranges: PRIOR_RANGES for
    ke, kd, mu; kf from the slip speeds 1 m/s .. 1 mm/s at a cloth vertex's mean weight (20 g over 16 vertices);
    ke, kd, kf at most what the step integrates on the lightest cloth-soft pair.  Stated constants (known or
    unknown) are neither."""
    from tigradsim.physics.cloth_soft_contact import DEFAULT_PARAMS
    from tigradsim.scenes.assumed import assumed_constants
    from tigradsim.scenes.cloth_soft_constants import cloth_soft_caps, cloth_soft_prior_range
    from tigradsim.scenes.scene_build import Scene, load_scene_footage

    tgs.init(arch="cpu", precision="f64")
    unknowns = {"cloth_soft.ke": {"init": 60.0, "lower": 5.0, "upper": 500.0}}
    data = _drape_scene(tmp_path, known={"kd": 0.02}, unknowns=unknowns)
    data["fit"]["contact_constants"] = "nuisance"
    spec = _parse(tmp_path, data)
    nuisance = {u.param: u for u in spec.unknowns if u.nuisance and u.object == "cloth_soft"}
    assert sorted(nuisance) == ["kf", "mu"]                       # ke is an unknown, kd a known
    caps = cloth_soft_caps(spec)
    assert set(caps) == {"ke", "kd", "kf"} and all(c > 0 for c in caps.values())
    weight = 9.8 * 0.02 / 16
    kf = nuisance["kf"]
    expected = (DEFAULT_PARAMS["mu"] * weight, min(DEFAULT_PARAMS["mu"] * weight * 1e3, caps["kf"]))
    assert np.allclose((kf.lower, kf.upper), expected, rtol=1e-6) and kf.log
    assert kf.lower <= kf.init == DEFAULT_PARAMS["kf"] <= kf.upper
    assert (nuisance["mu"].lower, nuisance["mu"].upper, nuisance["mu"].init) == (0.1, 1.0, DEFAULT_PARAMS["mu"])
    scene = Scene(spec, load_scene_footage(spec))
    assert [p.name for p in scene.params if p.name.startswith("cloth_soft")] == \
        ["cloth_soft.ke", "cloth_soft.kf", "cloth_soft.mu"]
    assert not [c for c in assumed_constants(scene) if c.name.startswith("cloth_soft")]

    spec = _parse(tmp_path, _drape_scene(tmp_path, known={"kd": 0.02}))          # contact_constants "assume"
    scene = Scene(spec, load_scene_footage(spec))
    assumed = {c.name: c for c in assumed_constants(scene) if c.name.startswith("cloth_soft")}
    assert sorted(assumed) == ["cloth_soft.ke", "cloth_soft.kf", "cloth_soft.mu"]
    ke = assumed["cloth_soft.ke"]
    assert ke.value == DEFAULT_PARAMS["ke"] and (ke.lower, ke.upper) == cloth_soft_prior_range(spec, "ke", 100.0)
    assert ke.upper == min(1000.0, caps["ke"]) and "cloth" in ke.reason
    ke.write(250.0)
    assert np.allclose(scene.model.get("cloth_soft_ke"), 250.0)
    assert np.allclose(scene.model.get("cloth_soft_kd"), 0.02)

    stated = _drape_scene(tmp_path, known={"kd": 0.02, "kf": 0.5, "mu": 0.4}, unknowns=unknowns)
    stated["fit"]["contact_constants"] = "nuisance"
    spec = _parse(tmp_path, stated)
    assert not [u for u in spec.unknowns if u.nuisance and u.object == "cloth_soft"]


def test_cloth_soft_nuisances_need_the_name(tmp_path):
    """An object named "cloth_soft" in a scene whose cloth-soft constants become nuisance unknowns: the error names
    the object before anything is built."""
    data = _drape_scene(tmp_path, unknowns={})
    data["objects"]["cloth_soft"] = data["objects"].pop("block")
    data["fit"]["contact_constants"] = "nuisance"
    with pytest.raises(SceneError, match=r"\[objects\] cloth_soft: the name 'cloth_soft' is reserved"):
        _parse(tmp_path, data)
