"""Scene files (tigradsim.scenes.scene_file): validation errors name the file, the section and the
key, before any kernel runs; meshes are welded; the z-up mapping; the unknowns' Params
(shared and tied values) have the right chain rule (f64, finite differences)."""
import os

import numpy as np
import pytest

from tigradsim.scenes.scene_file import SceneError, Z_UP_TO_Y_UP, load_scene, parse_scene

BOX = {"type": "rigid", "box": [0.2, 0.1, 0.15], "mass": 1.0, "position": [0.0, 0.05, 0.0]}


def _footage(tmp_path, n=3, size=(8, 8), masks=True):
    import imageio.v3 as iio
    (tmp_path / "clip").mkdir(exist_ok=True)
    for k in range(n):
        iio.imwrite(tmp_path / "clip" / f"rgb_{k:04d}.png", np.full(size + (3,), 60, np.uint8))
        if masks:
            iio.imwrite(tmp_path / "clip" / f"mask_{k:04d}.png", _square(size))


def _square(size):
    """A plausible mask: a white square in the middle (an empty mask is an error, FootageError)."""
    m = np.zeros(size, np.uint8)
    m[size[0] // 4:3 * size[0] // 4, size[1] // 4:3 * size[1] // 4] = 255
    return m


def _scene(tmp_path, **changes):
    """A valid scene dict (look-at camera, 3 footage frames of 8x8 px), with `changes`
    applied: {"objects.box.mass": -1} sets, a value of DELETE removes."""
    _footage(tmp_path)
    data = {
        "world": {"up": "y", "gravity": 9.8},
        "simulation": {"substeps": 4},
        "ground": {"ke": 1e4, "kd": 10.0, "kf": 10.0, "mu": 0.5},
        "objects": {"box": dict(BOX)},
        "forces": [{"object": "box", "force": [5.0, 0.0, 0.0], "start": 0.0, "end": 0.05}],
        "camera": {"eye": [0.0, 0.5, 1.2], "target": [0.0, 0.05, 0.0], "fov": 40.0, "width": 8, "height": 8},
        "footage": {"frames": "clip/rgb_%04d.png", "masks": "clip/mask_*.png", "fps": 30.0},
        "unknowns": {"box.mass": {"init": 1.5, "lower": 0.2, "upper": 5.0}},
        "fit": {"iterations": 5, "supervision": "mask"},
    }
    for path, value in changes.items():
        if "." not in path:
            data[path] = value
            continue
        keys = path.split(".")
        if keys[0] == "unknowns" and len(keys) > 2:      # "unknowns.box.mass.init": the target has a dot
            keys = ["unknowns", keys[1] + "." + keys[2]] + keys[3:]
        d = data
        for k in keys[:-1]:
            d = d[int(k)] if isinstance(d, list) else d.setdefault(k, {})
        if value is DELETE:
            del d[keys[-1]]
        else:
            d[keys[-1]] = value
    return data


DELETE = object()


def _error(tmp_path, **changes):
    with pytest.raises(SceneError) as info:
        parse_scene(_scene(tmp_path, **changes), str(tmp_path / "scene.toml"))
    return str(info.value)


def test_valid_scene_parses(tmp_path):
    spec = parse_scene(_scene(tmp_path), str(tmp_path / "scene.toml"))
    assert spec.objects["box"].mass == 1.0 and len(spec.objects["box"].faces) == 12
    assert len(spec.footage.frames) == 3 and len(spec.footage.masks) == 3
    assert spec.unknowns[0].target == "box.mass" and spec.unknowns[0].log
    assert np.allclose(spec.gravity, [0, -9.8, 0])


def test_negative_mass_names_file_section_and_key(tmp_path):
    msg = _error(tmp_path, **{"objects.box.mass": -1})
    assert msg == "scene.toml: [objects.box] mass: expected a positive number, got -1"


def test_missing_key(tmp_path):
    msg = _error(tmp_path, **{"objects.box.mass": DELETE})
    assert msg.startswith("scene.toml: [objects.box] mass / density: missing")
    msg = _error(tmp_path, **{"footage.fps": DELETE})
    assert msg.startswith("scene.toml: [footage] fps: missing")
    msg = _error(tmp_path, **{"camera.width": DELETE})
    assert msg.startswith("scene.toml: [camera] width: missing")


def test_wrong_type(tmp_path):
    msg = _error(tmp_path, **{"objects.box.mass": "heavy"})
    assert msg == 'scene.toml: [objects.box] mass: expected a number, got a string "heavy"'
    msg = _error(tmp_path, **{"objects.box.position": [0.0, 0.05]})
    assert "[objects.box] position: expected an array of 3 numbers" in msg
    msg = _error(tmp_path, **{"fit.iterations": 2.5})
    assert "[fit] iterations: expected an integer" in msg
    msg = _error(tmp_path, **{"fit.refine_focal": True})
    assert msg == "scene.toml: [fit] refine_focal: needs refine_camera = true"
    msg = _error(tmp_path, **{"fit.starts": 4, "unknowns.box.mass.upper": DELETE})
    assert "[fit] starts: a multi-start search draws starts within the bounds: give lower and upper for box.mass" in msg


def test_unknown_key_suggests(tmp_path):
    data = _scene(tmp_path)
    data["objects"]["box"]["mas"] = 2.0
    with pytest.raises(SceneError, match=r"\[objects.box\] mas: unknown key; did you mean 'mass'\?"):
        parse_scene(data, str(tmp_path / "scene.toml"))
    data = _scene(tmp_path)
    data["camara"] = data.pop("camera")
    with pytest.raises(SceneError, match=r"scene.toml: \[camara\]: unknown section; did you mean \[camera\]\?"):
        parse_scene(data, str(tmp_path / "scene.toml"))
    msg = _error(tmp_path, **{"fit.supervision": "masks"})
    assert "[fit] supervision: expected one of 'mask', 'rgb', 'both', got 'masks'; did you mean 'mask'?" in msg


def test_bad_paths(tmp_path):
    msg = _error(tmp_path, **{"objects.box.box": DELETE, "objects.box.mesh": "nope.obj"})
    assert msg.startswith("scene.toml: [objects.box] mesh: file not found: 'nope.obj'")
    msg = _error(tmp_path, **{"footage.frames": "clip/frame_%04d.png"})
    assert msg.startswith("scene.toml: [footage] frames: no files match 'clip/frame_%04d.png'")
    msg = _error(tmp_path, **{"footage.frames": "clip"})
    assert "[footage] frames: 'clip' is a folder: give a file pattern" in msg


@pytest.mark.slow
def test_inconsistent_camera(tmp_path):
    msg = _error(tmp_path, **{"camera.K": [[50.0, 0.0, 3.5], [0.0, 50.0, 3.5], [0.0, 0.0, 1.0]]})
    assert "[camera] K, eye, target, fov: inconsistent camera: give either K, R, t (OpenCV)" in msg
    opencv = {"camera.eye": DELETE, "camera.target": DELETE, "camera.fov": DELETE,
              "camera.K": [[50.0, 0.0, 3.5], [0.0, 50.0, 3.5], [0.0, 0.0, 1.0]], "camera.t": [0.0, 0.0, 1.0]}
    msg = _error(tmp_path, **opencv, **{"camera.R": [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 2.0]]})
    assert "scene.toml: [camera] R: inconsistent camera: expected a rotation matrix" in msg
    msg = _error(tmp_path, **{**opencv, "camera.R": [[1.0, 0, 0], [0, 1.0, 0], [0, 0, 1.0]],
                              "camera.K": [[50.0, 0.0, 30.0], [0.0, 50.0, 3.5], [0.0, 0.0, 1.0]]})
    assert "[camera] K: inconsistent camera: principal point (30.0, 3.5) lies outside the 8x8 image" in msg
    # the camera's image size must be the footage's (checked when the footage is read, before any kernel)
    from tigradsim.scenes.scene_build import load_scene_footage
    spec = parse_scene(_scene(tmp_path, **{"camera.width": 16}), str(tmp_path / "scene.toml"))
    with pytest.raises(SceneError, match=r"scene.toml: \[camera\] width / height: inconsistent camera: 16x8 .* "
                                         r"footage frames are 8x8"):
        load_scene_footage(spec)


def test_unknowns_and_forces_name_their_key(tmp_path):
    data = _scene(tmp_path)
    data["unknowns"]["box.mas"] = {"init": 1.0}
    with pytest.raises(SceneError, match=r"\[unknowns\] box.mas: 'box' has no parameter 'mas'; did you mean box.'mass'"):
        parse_scene(data, str(tmp_path / "scene.toml"))
    data = _scene(tmp_path)
    data["unknowns"]["crate.mass"] = {"init": 1.0}
    with pytest.raises(SceneError, match=r"\[unknowns\] crate.mass: no object named 'crate'"):
        parse_scene(data, str(tmp_path / "scene.toml"))
    msg = _error(tmp_path, **{"unknowns.box.mass.init": 9.0})
    assert 'scene.toml: [unknowns."box.mass"] init: expected init within [lower, upper] = [0.2, 5.0], got 9.0' == msg
    msg = _error(tmp_path, **{"forces.0.object": "bx"})
    assert "scene.toml: [forces.0] object: no object named 'bx'; did you mean 'box'?" in msg
    msg = _error(tmp_path, **{"forces.0.end": 0.0})
    assert "[forces.0] end: expected end > start (0.0), got 0.0" in msg
    data = _scene(tmp_path)
    data["unknowns"]["box.ke"] = {"init": 1e4}
    data["unknowns"]["box.ke_per_mass"] = {"init": 1e4}
    with pytest.raises(SceneError, match=r"box.ke_per_mass: box.ke is an unknown too"):
        parse_scene(data, str(tmp_path / "scene.toml"))


def test_footage_masks_must_match_frames(tmp_path):
    _footage(tmp_path)
    os.remove(tmp_path / "clip" / "mask_0002.png")
    data = _scene(tmp_path)
    os.remove(tmp_path / "clip" / "mask_0002.png")
    with pytest.raises(SceneError, match=r"\[footage\] masks: 2 mask files match 'clip/mask_\*.png' but 3 frames"):
        parse_scene(data, str(tmp_path / "scene.toml"))


def test_toml_file_errors(tmp_path):
    p = tmp_path / "broken.toml"
    p.write_text("[objects.box\ntype = 'rigid'\n")
    with pytest.raises(SceneError, match=r"^broken.toml: not valid TOML"):
        load_scene(p)
    with pytest.raises(SceneError, match=r"missing.toml: scene file not found"):
        load_scene(tmp_path / "missing.toml")


def test_weld_unshared_obj_box(tmp_path):
    """An OBJ box written with one vertex per face corner (24 vertices) is welded to 8 and loads."""
    from tigradsim.io.meshes import box_surface
    v, f = box_surface((0.2, 0.1, 0.15))
    v24, f24 = v[f.reshape(-1)], np.arange(len(f) * 3).reshape(-1, 3)
    with open(tmp_path / "box.obj", "w") as fh:
        fh.writelines(f"v {x:.17g} {y:.17g} {z:.17g}\n" for x, y, z in v24)
        fh.writelines(f"f {a + 1} {b + 1} {c + 1}\n" for a, b, c in f24)
    spec = parse_scene(_scene(tmp_path, **{"objects.box.box": DELETE, "objects.box.mesh": "box.obj"}),
                       str(tmp_path / "scene.toml"))
    assert spec.objects["box"].vertices.shape == (8, 3)


def test_z_up_rotation():
    M = Z_UP_TO_Y_UP
    assert np.allclose(M @ [0, 0, 1], [0, 1, 0]) and np.allclose(M @ M.T, np.eye(3))
    assert np.isclose(np.linalg.det(M), 1.0)


def test_soft_object_parses(tmp_path):
    data = _scene(tmp_path, **{"objects.box": {"type": "soft", "tet_box": {"cells": [2, 1, 1], "size": [0.2, 0.1, 0.1]},
                                               "material": "neo_hookean", "params": {"mu": 1e3, "lam": 2e3},
                                               "density": 100.0, "position": [0.0, 0.06, 0.0]}},
                   **{"forces": [], "unknowns": {"box.mu": {"init": 500.0}}})
    spec = parse_scene(data, str(tmp_path / "scene.toml"))
    assert spec.objects["box"].tets.shape == (10, 4) and spec.objects["box"].params == {"mu": 1e3, "lam": 2e3}
    data["objects"]["box"]["params"]["nu"] = 0.3
    with pytest.raises(SceneError, match=r"\[objects.box.params\] nu: unknown key"):
        parse_scene(data, str(tmp_path / "scene.toml"))
    data = _scene(tmp_path, **{"objects.box": {"type": "soft", "tet_box": {"cells": [2, 1, 1], "size": [0.2, 0.1, 0.1]},
                                               "material": "neo_hokean", "density": 100.0}}, forces=[], unknowns={})
    with pytest.raises(SceneError, match=r"\[objects.box\] material: .* got 'neo_hokean'; did you mean 'neo_hookean'"):
        parse_scene(data, str(tmp_path / "scene.toml"))


@pytest.mark.slow
def test_example_scenes_parse():
    """Every example in demos/scenes/ is a valid scene (its footage, where it has one, present)."""
    here = os.path.join(os.path.dirname(__file__), "..", "demos", "scenes")
    files = sorted(f for f in os.listdir(here) if f.endswith(".toml"))
    assert files
    for f in files:
        load_scene(os.path.join(here, f))


# ---------------------------------------------------------------------------- Params (kernels)

def _param_scene(tmp_path, objects, unknowns):
    import tigradsim as tgs
    from tigradsim.scenes.scene_build import Scene, load_scene_footage

    data = _scene(tmp_path, objects=objects, forces=[], unknowns=unknowns, **{"simulation.duration": 0.12,
                                                                               "simulation.substeps": 40})
    spec = parse_scene(data, str(tmp_path / "scene.toml"))
    scene = Scene(spec, load_scene_footage(spec))
    rec = tgs.BodyRecorder(scene.sim, every=40)
    loss = tgs.MSELoss(rec.positions, np.zeros((rec.frames, rec.count, 3)) + [0.1, 0.02, 0.05])

    def run():
        loss.value[None] = 0.0
        scene.sim.run()
        loss._accumulate()

    return scene, run, loss


@pytest.mark.slow
def test_unknown_params_chain_rule(tmp_path, f64_without_ir_passes):
    """The scene's unknowns as library Params: a body's mass and kd (entries of per-body fields),
    ground.mu (shared by the ground and the bodies without their own mu), and a stiffness per
    unit mass tied to a fitted mass: written where they belong, gradients match central
    differences (f64)."""
    import tigradsim as tgs
    moving = dict(BOX, velocity=[1.0, -0.5, 0.0], position=[0.0, 0.06, 0.0])
    objects = {"a": moving, "b": dict(BOX, mass=0.7, mu=0.3, position=[0.5, 0.08, 0.0], velocity=[-0.8, -0.3, 0.2],
                                      angular_velocity=[0.0, 2.0, 0.0])}
    unknowns = {"a.mass": {"init": 1.2}, "ground.mu": {"init": 0.6}, "b.kd": {"init": 7.0}}
    scene, run, loss = _param_scene(tmp_path, objects, unknowns)
    m = scene.model
    assert np.allclose(m.get("body_mass"), [1.2, 0.7]) and np.allclose(m.get("body_kd"), [10.0, 7.0])
    assert np.allclose(m.get("body_mu"), [0.6, 0.3]) and np.isclose(m.get("ground_mu"), 0.6)   # b keeps its own mu
    for p in scene.params:
        report = tgs.check_param_gradient(run, loss.value, p, n_dirs=1, eps=1e-6, rtol=1e-5)   # scalar: +-1
        assert report.ok, (p.name, str(report))

    scene, run, loss = _param_scene(tmp_path, {"a": moving}, {"a.mass": {"init": 1.2}, "a.ke_per_mass": {"init": 2e3}})
    m = scene.model
    assert np.isclose(m.get("body_ke")[0], 2e3 * 1.2)
    scene.set_values({"a.mass": 1.5})                 # the stiffness follows the mass
    assert np.isclose(m.get("body_ke")[0], 2e3 * 1.5) and np.isclose(scene.values()["a.ke_per_mass"], 2e3)
    for p in scene.params:
        report = tgs.check_param_gradient(run, loss.value, p, n_dirs=1, eps=1e-6, rtol=1e-5)   # scalar: +-1
        assert report.ok, (p.name, str(report))


# ---------------------------------------------------------------------------- camera prior

def test_camera_prior_keys(tmp_path):
    f = parse_scene(_scene(tmp_path, **{"fit.refine_camera": True}), str(tmp_path / "scene.toml")).fit
    assert (f.camera_sigma_rotation_deg, f.camera_sigma_translation_m, f.camera_prior_variance) == (0.5, 0.01, 2e-2)
    f = parse_scene(_scene(tmp_path, **{"fit.camera_sigma_rotation_deg": 1, "fit.camera_sigma_translation_m": 0.02}),
                    str(tmp_path / "scene.toml")).fit
    assert (f.camera_sigma_rotation_deg, f.camera_sigma_translation_m) == (1.0, 0.02)
    msg = _error(tmp_path, **{"fit.camera_sigma_rotation_deg": 0})
    assert msg == "scene.toml: [fit] camera_sigma_rotation_deg: expected a positive number, got 0"
    msg = _error(tmp_path, **{"fit.camera_sigma_translation_m": "1cm"})
    assert msg == 'scene.toml: [fit] camera_sigma_translation_m: expected a number, got a string "1cm"'
    msg = _error(tmp_path, **{"fit.camera_prior_variance": -1e-3})
    assert msg == "scene.toml: [fit] camera_prior_variance: expected a positive number, got -0.001"


@pytest.mark.slow
def test_camera_prior_gradient_and_scaling(f64):
    """The prior's Tape term (variance / G) sum (delta_i / sigma_i)^2: its gradient matches
    central differences (f64), and it is 2 / N times 1/2 |rho|^2 of its residuals (N = G x
    residuals per frame), the factor between the image loss and 1/2 |r|^2."""
    import taichi as ti
    import tigradsim as tgs
    from tigradsim.scenes.scene_build import CameraPrior

    delta = ti.field(float, shape=6, needs_grad=True)
    d = np.array([0.01, -0.004, 0.007, 0.012, -0.02, 0.005])
    delta.from_numpy(d)
    loss = ti.field(float, shape=(), needs_grad=True)
    sig = np.array([0.009, 0.009, 0.009, 0.01, 0.01, 0.01])
    prior = CameraPrior(delta, sig, 2e-3)
    prior.set_frames(4)
    tgs.check_gradient(lambda: prior(loss), loss, [delta], n_dirs=3).assert_ok()
    loss[None] = 0.0
    prior(loss)
    assert np.isclose(loss[None], 2e-3 / 4 * np.sum((d / sig) ** 2), rtol=1e-12)
    rho = prior.residuals(100)
    assert np.isclose(loss[None], 2.0 / 400 * 0.5 * rho @ rho, rtol=1e-12)
    with pytest.raises(ValueError, match=r"sigmas: expected 6 positive finite prior stds .* got \[0.1, 0.0"):
        CameraPrior(delta, [0.1, 0.0, 0.1, 0.1, 0.1, 0.1], 1e-3)
    with pytest.raises(ValueError, match=r"variance: expected a positive finite per-residual variance, got 0"):
        CameraPrior(delta, sig, 0)


@pytest.mark.slow
def test_scene_residuals_groups_and_prior(tmp_path, f64):
    """A scene with mask + RGB supervision and refine_camera: residuals() is the mask part, the
    RGB part, then the prior's 6 values; residual_groups labels them by footage frame (one
    label per frame across both parts, the prior one more cluster), also after use_frames;
    the Tape loss carries the prior exactly as loss_value() reports it."""
    from tigradsim.scenes.scene_build import Scene, load_scene_footage

    data = _scene(tmp_path, **{"fit.refine_camera": True, "fit.supervision": "both", "fit.blur": [0.0],
                               "simulation.substeps": 40})
    spec = parse_scene(data, str(tmp_path / "scene.toml"))
    scene = Scene(spec, load_scene_footage(spec))
    scene.renderer.camera_delta.from_numpy(np.array([0.01, 0.0, -0.005, 0.003, 0.01, 0.0]))
    r = scene.residuals()
    P = 8 * 8 * (1 + 3)                                    # 8x8 px, mask + RGB per frame
    assert r.size == 3 * P + 6
    labels = scene.residual_groups(r.size)
    assert np.array_equal(labels[:3 * 64], np.repeat(np.arange(3), 64))                 # mask part
    assert np.array_equal(labels[3 * 64:3 * P], np.repeat(np.arange(3), 3 * 64))        # RGB part
    assert np.array_equal(labels[-6:], np.full(6, 3))
    assert np.allclose(r[-6:], scene.camera_prior.residuals(P))
    image_only = scene.fit.loss_value()
    total = scene.loss_value()
    assert np.isclose(total - image_only, 2.0 / (3 * P) * 0.5 * r[-6:] @ r[-6:], rtol=1e-10)
    scene.use_frames(2)
    r2 = scene.residuals()
    assert r2.size == 2 * P + 6 and np.allclose(r2[-6:], r[-6:])
    assert np.array_equal(scene.residual_groups(r2.size)[-6:], np.full(6, 2))
    assert np.isclose(scene.loss_value() - scene.fit.loss_value(), 2.0 / (2 * P) * 0.5 * r[-6:] @ r[-6:], rtol=1e-10)


def test_fit_profile_setting_parses_and_bad_values_name_the_key(tmp_path):
    spec = parse_scene(_scene(tmp_path, **{"fit.profile": ["box.mass"], "fit.profile_points": 3}),
                       str(tmp_path / "scene.toml"))
    assert spec.fit.profile == ("box.mass",) and spec.fit.profile_points == 3 and spec.fit.profile_iters == 3
    assert parse_scene(_scene(tmp_path), str(tmp_path / "scene.toml")).fit.profile is False
    msg = _error(tmp_path, **{"fit.profile": 3})
    assert msg == ('scene.toml: [fit] profile: expected true, false, "auto" or a list of unknowns\' names '
                   '("OBJECT.PARAM"), got 3')
    assert "got 'full'" in _error(tmp_path, **{"fit.profile": "full"})
    spec = parse_scene(_scene(tmp_path, **{"fit.profile": "auto", "fit.profile_check": True}),
                       str(tmp_path / "scene.toml"))
    assert spec.fit.profile == "auto" and spec.fit.profile_check is True
    assert "[fit] profile_check: true, but profile is False" in _error(tmp_path, **{"fit.profile_check": True})
    assert "[fit] profile_points: expected an integer >= 1" in _error(tmp_path, **{"fit.profile_points": 0})


def test_fit_assumption_rule_out_setting_reaches_both_sensitivities(tmp_path):
    """[fit] assumption_rule_out (default true) and assumption_refit_steps are the keywords both sensitivities
    of the report take (scenes/assumed.sensitivity_options); a non-bool names the key."""
    from tigradsim.scenes.assumed import sensitivity_options

    spec = parse_scene(_scene(tmp_path), str(tmp_path / "scene.toml"))
    assert sensitivity_options(spec.fit) == {"refit_steps": 0, "rule_out": True}
    spec = parse_scene(_scene(tmp_path, **{"fit.assumption_rule_out": False, "fit.assumption_refit_steps": 2}),
                       str(tmp_path / "scene.toml"))
    assert sensitivity_options(spec.fit) == {"refit_steps": 2, "rule_out": False}
    assert "[fit] assumption_rule_out: expected true or false, got" in _error(tmp_path,
                                                                             **{"fit.assumption_rule_out": "no"})
