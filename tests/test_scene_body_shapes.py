"""Rigid objects' collision shapes in scene files ([objects.NAME] shape = ..., tigradsim/scenes/scene_objects.py):
a rigid-rigid scene written as a TOML file builds with each body's shape kind and size (a box's half extents
follow a z-up file's axes), and bad shape entries are errors naming the file, the section and the key."""
import numpy as np
import pytest

from test_scene_file import _footage, _scene
from tigradsim.physics.shapes import BOX, CAPSULE, MESH, SPHERE
from tigradsim.scenes.scene_file import SceneError, load_scene, parse_scene

SCENE = """
[world]
up = "z"

[simulation]
substeps = 80

[ground]
ke = 1e4
kd = 10.0
kf = 10.0
mu = 0.5

[objects.crate]                       # a long box, its own box shape given in the file's axes
type = "rigid"
box = [0.4, 0.2, 0.1]
mass = 2.0
position = [0.0, 0.0, 0.05]
shape = {kind = "box", half_extents = [0.2, 0.1, 0.05]}

[objects.ball]                        # a cube that rolls: a sphere shape of radius 0.06 m
type = "rigid"
box = [0.1, 0.1, 0.1]
mass = 0.5
position = [0.0, 0.0, 0.2]
shape = {kind = "sphere", radius = 0.06}

[objects.can]                         # a capsule enclosing its mesh (the default size)
type = "rigid"
box = [0.1, 0.1, 0.3]
mass = 0.3
position = [0.5, 0.0, 0.2]
shape = "capsule"

[objects.block]                       # its own mesh's signed-distance grid
type = "rigid"
box = [0.1, 0.1, 0.1]
mass = 0.3
position = [-0.5, 0.0, 0.1]
shape = {kind = "mesh", resolution = 8}

[camera]
eye = [0.0, -2.0, 0.6]
target = [0.0, 0.0, 0.1]
up = [0.0, 0.0, 1.0]
fov = 50.0
width = 8
height = 8

[footage]
frames = "clip/rgb_%04d.png"
masks = "clip/mask_*.png"
fps = 30.0
"""


def test_rigid_rigid_scene_file_builds_body_shapes(tmp_path):
    import tigradsim as tgs
    from tigradsim.scenes.scene_build import Scene, load_scene_footage

    tgs.init(arch="cpu", precision="f64")
    _footage(tmp_path)
    path = tmp_path / "scene.toml"
    path.write_text(SCENE)
    spec = load_scene(str(path))
    assert spec.objects["ball"].shape == {"shape": "sphere", "shape_size": [0.06], "shape_resolution": None}
    scene = Scene(spec, load_scene_footage(spec))
    model = scene.model
    assert model.body_shape_kind.to_numpy().tolist() == [BOX, SPHERE, CAPSULE, MESH]
    size = model.body_shape_size.to_numpy()
    np.testing.assert_allclose(size[0], [0.2, 0.05, 0.1])        # z-up half extents (0.2, 0.1, 0.05) -> y-up
    np.testing.assert_allclose(size[1, 0], 0.06)
    # the capsule's axis is the file's up (tigradsim's y): radius = the corners' distance from it, then the rest
    r = np.hypot(0.05, 0.05)
    np.testing.assert_allclose(size[2, :2], [r, 0.15 - r])
    assert size[3, 0] == 1.0
    assert "BodyBodyContact" in [type(t).__name__ for t in model.force_terms]


@pytest.mark.parametrize("shape, match", [
    ("cone", r"\[objects.box\] shape: expected one of 'box', 'sphere', 'capsule', 'mesh', got 'cone'"),
    ({"radius": 0.1}, r"\[objects.box\] shape: missing kind"),
    ({"kind": "cone"}, r"\[objects.box\] shape: kind: expected one of box, sphere, capsule, mesh, got \"cone\""),
    ({"kind": "sphere", "radius": -0.1}, r"\[objects.box.shape\] radius: expected a positive number, got -0.1"),
    ({"kind": "box", "half_extents": [0.1, 0.1]}, r"\[objects.box.shape\] half_extents: expected an array of 3"),
    ({"kind": "box", "radius": 0.1}, r"\[objects.box.shape\] radius: unknown key"),
    ({"kind": "capsule", "radius": 0.1}, r"\[objects.box.shape\] half_length: missing \(required\)"),
    ({"kind": "mesh", "resolution": 2}, r"\[objects.box.shape\] resolution: expected an integer >= 4, got 2"),
    (3, r"\[objects.box\] shape: expected a table"),
])
def test_bad_body_shapes_name_their_key(tmp_path, shape, match):
    with pytest.raises(SceneError, match=match):
        parse_scene(_scene(tmp_path, **{"objects.box.shape": shape}), str(tmp_path / "scene.toml"))
