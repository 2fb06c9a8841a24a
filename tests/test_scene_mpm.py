"""Scene files with MPM matter ([objects.NAME] type = "mpm", [mpm_grid]; tigradsim/scenes/scene_mpm.py):
the parser's validation errors (no kernel runs), each material family's unknowns, and `tigradsim fit` on the
own-model jelly clip (demos/scenes/mpm_jelly.toml) recovering E."""
import copy
import json
import os

import pytest

from tigradsim.scenes.scene_file import SceneError, parse_scene

try:
    import tomllib
except ModuleNotFoundError:            # pragma: no cover
    import tomli as tomllib

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
JELLY = os.path.join(ROOT, "demos", "scenes", "mpm_jelly.toml")


def _jelly():
    with open(JELLY, "rb") as fh:
        return tomllib.load(fh)


def _parse(data):
    return parse_scene(data, JELLY)


def test_jelly_file_parses():
    spec = _parse(_jelly())
    obj = spec.objects["jelly"]
    assert obj.kind == "mpm" and obj.material == "mpm_neo_hookean" and obj.params == {"E": 2e4, "nu": 0.3}
    assert obj.box_size.tolist() == [0.25, 0.25, 0.25] and obj.particles_per_cell == 8
    assert spec.mpm_grid["resolution"] == 16 and spec.mpm_grid["mu"] == 0.5
    assert [u.target for u in spec.unknowns] == ["jelly.E"]


def _edit(change):
    data = _jelly()
    change(data)
    return data


@pytest.mark.parametrize("change, where, words", [
    (lambda d: d.pop("mpm_grid"), "[mpm_grid]", "missing"),
    (lambda d: d["mpm_grid"].pop("resolution"), "resolution", "missing"),
    (lambda d: d["mpm_grid"].update(resolution=2), "resolution", ">= 4"),
    (lambda d: d["mpm_grid"].update(upper=[1.0, -1.0, 1.0]), "upper", "exceed lower"),
    (lambda d: d["mpm_grid"].update(boundary="glue"), "boundary", "glue"),
    (lambda d: d["mpm_grid"].update(ground=True), "ground", "inside the domain"),
    (lambda d: d["mpm_grid"].update(cells=4), "cells", "unknown"),
    (lambda d: d["objects"]["jelly"].update(material="neo_hookean"), "material", "mpm_neo_hookean"),
    (lambda d: d["objects"]["jelly"].update(params={"E": 2e4, "mu": 1.0}), "mu", "unknown"),
    (lambda d: d["objects"]["jelly"].update(params={"E": 2e4, "nu": 0.6}), "params", "nu"),
    (lambda d: d["objects"]["jelly"].pop("density"), "density", "missing"),
    (lambda d: d["objects"]["jelly"].update(particles_per_cell=6), "particles_per_cell", "cube number"),
    (lambda d: d["objects"]["jelly"].update(mesh="blob.obj"), "box / mesh", "only one"),
    (lambda d: d["objects"]["jelly"].update(angular_velocity=[0, 1, 0]), "angular_velocity", "unknown"),
    (lambda d: d["objects"].update(box={"type": "rigid", "box": [0.1, 0.1, 0.1], "mass": 1.0,
                                        "position": [0.2, 0.5, 0.5]}), "type", "MPM objects only"),
    (lambda d: d.update(ground={"mu": 0.5}), "[ground]", "remove [ground]"),
    (lambda d: d["unknowns"].update({"jelly.yield_stress": {"init": 1e3}}), "jelly.yield_stress",
     "parameters: E, nu, density"),
    (lambda d: d["objects"]["jelly"].update(type="mpmm"), "type", "mpm"),
])
def test_parser_errors_name_the_key(change, where, words):
    with pytest.raises(SceneError) as err:
        _parse(_edit(change))
    msg = str(err.value)
    assert msg.startswith("mpm_jelly.toml") and where in msg and words in msg, msg


def test_grid_without_mpm_objects_is_an_error():
    data = _edit(lambda d: d["objects"].update(jelly={"type": "rigid", "box": [0.25, 0.25, 0.25], "mass": 1.0,
                                                      "position": [0.5, 0.225, 0.5]}))
    data["unknowns"] = {}
    with pytest.raises(SceneError, match=r"\[mpm_grid\].*no \[objects.NAME\] of type = \"mpm\""):
        _parse(data)


@pytest.mark.parametrize("material, params, unknowns", [
    ("mpm_fixed_corotated", {"E": 2e4, "nu": 0.3}, ("E", "nu", "density")),
    ("mpm_von_mises", {"E": 5e4, "yield_stress": 2e3}, ("yield_stress", "E")),
    ("mpm_drucker_prager", {"friction_angle": 35.0}, ("friction_angle",)),
    ("mpm_newtonian", {"viscosity": 0.05, "bulk_modulus": 2e5}, ("viscosity", "bulk_modulus")),
    ("mpm_bingham", {"yield_stress": 10.0, "plastic_viscosity": 1.0}, ("yield_stress", "plastic_viscosity")),
])
def test_each_family_takes_its_material_unknowns(material, params, unknowns):
    data = _jelly()
    data["objects"]["jelly"].update(material=material, params=params)
    given = {"nu": {"init": 0.3, "log": False, "lower": 0.0, "upper": 0.45},      # capped: an upper bound
             "friction_angle": {"init": 30.0, "lower": 10.0, "upper": 45.0}}
    data["unknowns"] = {f"jelly.{p}": given.get(p, {"init": 1.0}) for p in unknowns}
    spec = _parse(data)
    assert [u.param for u in spec.unknowns] == list(unknowns)
    assert spec.objects["jelly"].material == material


@pytest.mark.parametrize("unknown, where, words", [
    ({"init": 0.3}, "upper", "missing: material 'mpm_neo_hookean' caps 'nu'"),       # log space, no cap
    ({"init": 0.3, "upper": 0.5}, "upper", "0.5 is outside the range"),
    ({"init": 0.3, "log": False, "upper": 0.45}, "lower", "missing"),                  # linear: -1 < nu
    ({"init": 0.55, "upper": 0.6}, "init", "outside the range"),
])
def test_capped_material_unknowns_need_bounds_inside_the_range(unknown, where, words):
    """An MPM material parameter its material caps (nu < 0.5, -1 < nu) is fitted within bounds the material
    accepts: the parser says which bound is missing or outside, naming the unknown."""
    data = _jelly()
    data["unknowns"] = {"jelly.nu": unknown}
    with pytest.raises(SceneError) as info:
        _parse(data)
    msg = str(info.value)
    assert 'unknowns."jelly.nu"' in msg and where in msg and words in msg, msg


@pytest.mark.slow
def test_cli_fit_recovers_jelly_E(tmp_path):
    """The own-model control clip (made by demos/scenes/make_mpm_footage.py at E = 2e4 Pa), fitted from
    E = 4e4 by `tigradsim fit` (5 BFGS steps): E within 10 % and the report's estimate and 95 % interval.  ~60 s on 2 cores."""
    from tigradsim import cli

    out = str(tmp_path / "fit")
    assert cli.main(["fit", JELLY, "--out", out, "--quiet", "--iterations", "5"]) == 0
    with open(os.path.join(out, "estimates.json")) as fh:
        report = json.load(fh)
    e = report["unknowns"]["jelly.E"]
    assert abs(e["estimate"] - 2e4) / 2e4 < 0.10, e
    lo, hi = e["ci95"]
    assert lo < e["estimate"] < hi and hi - lo < 0.2 * 2e4, e
    assert report["iou_final"] > report["iou_initial"]


@pytest.mark.slow
def test_scene_loss_gradient_in_E_nu_density_matches_finite_differences():
    """The whole scene-file path: MPM rollout, `TimedVertices(source="mpm")` (frames between steps blended:
    the footage starts off a step), ParticleSplatter, mask loss; the Tape's d loss / d (log E, nu, log density)
    against central differences in float64.  A jelly resting on the floor (E shows in its sag), 4 frames.
    ~15 s of CPU (2 cores)."""
    import numpy as np

    import tigradsim as tgs

    tgs.init(arch="cpu", precision="f64")
    data = _jelly()
    data.pop("footage")
    data["objects"]["jelly"]["position"] = [0.5, 0.126, 0.5]
    data["unknowns"] = {"jelly.E": {"init": 2.5e4}, "jelly.nu": {"init": 0.3, "log": False, "lower": 0.0,
                                                                 "upper": 0.45},
                        "jelly.density": {"init": 500.0}}
    data["simulation"]["duration"] = 0.072
    scene = _scene_on_noisy_box(_parse(data), (slice(30, 52), slice(20, 44)), seed=1)
    assert np.count_nonzero(scene.timed.alphas) == 4           # every frame between two steps: blended
    _assert_param_gradients(scene)


def _scene_on_noisy_box(spec, box, seed):
    """A Scene of `spec` against 4 frames (50 fps, from t = 10.5 ms: between steps) of 64 px masks: the pixel
    block `box` (rows, cols) set, plus 10 % uniform noise from numpy seed `seed`."""
    import numpy as np

    from tigradsim.io.footage import Footage
    from tigradsim.scenes.scene_build import Scene

    rng = np.random.default_rng(seed)
    masks = np.zeros((4, 64, 64))
    masks[(slice(None),) + tuple(box)] = 1.0
    masks = np.clip(masks + 0.1 * rng.random(masks.shape), 0, 1)
    footage = Footage(np.repeat(masks[..., None], 3, -1), 50.0, masks=masks, start_time=0.0105, check_masks=False)
    footage.factor, footage.full_size = 1, (64, 64)
    return Scene(spec, footage)


def _assert_param_gradients(scene):
    """Each of the scene's Params: the Tape gradient of its fit loss against float64 central differences
    along one random direction, and not zero."""
    import tigradsim as tgs

    for p in scene.params:
        def run():
            scene.fit.loss[None] = 0.0
            scene.fit.forward()

        report = tgs.check_param_gradient(run, scene.fit.loss, p, n_dirs=1)
        assert report.ok and abs(report.analytic[0]) > 1e-8, (p.name, str(report))


def _built(data, unknowns=False):
    import numpy as np

    from tigradsim.io.footage import Footage
    from tigradsim.scenes.scene_build import Scene

    data.pop("footage")
    data["simulation"]["duration"] = 0.04
    spec = _parse(data)
    blank = np.zeros((3, 64, 64))
    footage = Footage(blank, 50.0, masks=blank, check_masks=False)
    footage.factor, footage.full_size = 1, (64, 64)
    return Scene(spec, footage, requires_grad=False, unknowns=unknowns)


def test_z_up_file_builds_the_same_matter():
    """The jelly written with up = "z" (every vector turned by Z_UP_TO_Y_UP^T) samples the same particles,
    with the same velocity, in the same grid, and is seen by the same camera."""
    import numpy as np

    import tigradsim as tgs

    tgs.init(arch="cpu", precision="f64")
    ref = _built(_edit(lambda d: d["objects"]["jelly"].update(velocity=[0.1, -0.5, 0.2])))
    z = _jelly()
    z["world"]["up"] = "z"
    z["mpm_grid"].update(lower=[0.0, -1.0, 0.0], upper=[1.0, 0.0, 1.0])
    z["objects"]["jelly"].update(position=[0.5, -0.5, 0.225], velocity=[0.1, -0.2, -0.5])
    z["camera"].update(eye=[0.5, -2.0, 0.55], target=[0.5, -0.5, 0.3], up=[0.0, 0.0, 1.0])
    got = _built(z)
    for name in ("mpm_x0", "mpm_v0"):
        a, b = ref.model.get(name), got.model.get(name)
        order_a, order_b = np.lexsort(ref.model.get("mpm_x0").T), np.lexsort(got.model.get("mpm_x0").T)
        np.testing.assert_allclose(b[order_b], a[order_a], atol=1e-12, err_msg=name)
    np.testing.assert_allclose(got.mpm_grid.origin, ref.mpm_grid.origin, atol=1e-12)
    assert got.mpm_grid.res == ref.mpm_grid.res
    np.testing.assert_allclose(got.camera.R, ref.camera.R, atol=1e-12)
    assert got.splat_radius == ref.splat_radius == 1.0 / 16 / 4


def test_object_outside_the_grid_is_named_when_built():
    """What needs the grid's dx (inside the domain, at least two cells across) is checked by `add_mpm` when the
    scene is built, before any kernel runs, and named [objects.NAME]."""
    import tigradsim as tgs

    tgs.init(arch="cpu", precision="f64")
    with pytest.raises(SceneError, match=r"\[objects.jelly\].*outside the MPM domain"):
        _built(_edit(lambda d: d["mpm_grid"].update(upper=[1.0, 0.3, 1.0])))
    with pytest.raises(SceneError, match=r"\[objects.jelly\].*too coarse"):
        _built(_edit(lambda d: d["mpm_grid"].update(resolution=5)))


def test_velocity_unknowns_set_the_file_axis_component():
    """"NAME.vx/vy/vz" are the object's initial velocity along the file's axes, linear by default (negative
    values allowed): in a z-up file, vz is the world's y (up) component of every particle's mpm_v0, the other
    components keep the file's velocity."""
    import numpy as np

    import tigradsim as tgs

    tgs.init(arch="cpu", precision="f64")
    z = _jelly()
    z["world"]["up"] = "z"
    z["mpm_grid"].update(lower=[0.0, -1.0, 0.0], upper=[1.0, 0.0, 1.0])
    z["objects"]["jelly"].update(position=[0.5, -0.5, 0.225], velocity=[0.1, -0.2, -0.5])
    z["camera"].update(eye=[0.5, -2.0, 0.55], target=[0.5, -0.5, 0.3], up=[0.0, 0.0, 1.0])
    z["unknowns"] = {"jelly.vz": {"init": -1.25}, "jelly.vx": {"init": 0.3, "lower": -1.0, "upper": 1.0}}
    scene = _built(z, unknowns=True)
    assert [p.name for p in scene.params] == ["jelly.vz", "jelly.vx"]
    assert not any(u.log for u in scene.spec.unknowns)
    v = scene.model.get("mpm_v0")
    np.testing.assert_allclose(v, np.tile([0.3, -1.25, 0.2], (len(v), 1)), atol=1e-12)   # file (x, -z, y) -> world
    scene.params[0].write(np.array([0.5]))
    np.testing.assert_allclose(scene.model.get("mpm_v0")[:, 1], 0.5, atol=1e-12)


@pytest.mark.slow
def test_scene_loss_gradient_in_initial_velocity_matches_finite_differences():
    """d loss / d (vx, vy) of an MPM object's initial velocity through the whole scene-file path (rollout,
    splats, mask loss) against central differences in float64: a jelly thrown sideways, falling, 4 frames."""
    import tigradsim as tgs

    tgs.init(arch="cpu", precision="f64")
    data = _jelly()
    data.pop("footage")
    data["objects"]["jelly"].update(position=[0.5, 0.4, 0.5], velocity=[0.0, 0.0, 0.1])
    data["unknowns"] = {"jelly.vx": {"init": 0.4}, "jelly.vy": {"init": -0.3}}
    data["simulation"]["duration"] = 0.072
    _assert_param_gradients(_scene_on_noisy_box(_parse(data), (slice(14, 40), slice(24, 46)), seed=2))
