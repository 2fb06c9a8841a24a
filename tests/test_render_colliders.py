"""Colliders in pictures: `physics.collider_surfaces` puts every collider's triangle surface on the collider (at
its current pose and size), and `tigradsim render` of a scene file with a box collider (a table) writes scene
frames in which the table's pixels show, while the silhouettes it compares with the masks stay the object's."""
import json
import os

import numpy as np
import pytest

import tigradsim as tgs
from tigradsim.physics.collider_surfaces import collider_surfaces
from tigradsim.physics.rigid_pose import quat_to_matrix_np
from tigradsim.physics.shapes import shape_distance_np


def test_collider_surfaces_lie_on_the_colliders():
    tgs.init(arch="cpu", precision="f64")
    b = tgs.SceneBuilder()
    tilt = tgs.quat_from_axis_angle((0, 0, 1), 0.3)
    b.add_collider("plane", position=(0.0, 0.2, 0.0), rotation=tilt)
    b.add_collider("sphere", 0.3, position=(1.0, 0.5, 0.0))
    b.add_collider("box", (0.2, 0.1, 0.3), position=(-1.0, 0.5, 0.0), rotation=tilt)
    b.add_collider("capsule", (0.1, 0.25), position=(0.0, 0.5, 1.0), rotation=tilt)
    v, f = tgs.meshes.box_surface((0.4, 0.4, 0.4))
    b.add_collider("mesh", 1.5, position=(0.0, 0.5, -1.0), mesh=(v, f), resolution=8)
    model = b.finalize(requires_grad=False)
    model.collider_size.from_numpy(model.collider_size.to_numpy() * 1.1)     # a fitted size is drawn
    surfaces = collider_surfaces(model, center=(0.0, 1.0, 0.0), extent=2.0)
    assert len(surfaces) == 5
    poses, sizes = model.collider_pose.to_numpy(), model.collider_size.to_numpy()
    for c, (verts, faces) in enumerate(surfaces):
        assert faces.min() >= 0 and faces.max() < len(verts)
        local = (verts - poses[c, :3]) @ quat_to_matrix_np(poses[c, 3:])
        kind = model.collider_table.kinds[c]
        if kind == 4:                                   # the mesh: its own corners at the fitted scale
            np.testing.assert_allclose(np.abs(local), 0.2 * 1.5 * 1.1, atol=1e-12)
            continue
        d, _ = shape_distance_np(kind, sizes[c], local)
        np.testing.assert_allclose(d, 0.0, atol=1e-9, err_msg=f"collider {c}")
    plane = surfaces[0][0]
    foot = plane.mean(axis=0)                          # the square is centred on the foot of `center`
    n = quat_to_matrix_np(poses[0, 3:])[:, 1]
    np.testing.assert_allclose(np.cross(foot - np.array([0.0, 1.0, 0.0]), n), 0.0, atol=1e-12)


@pytest.mark.slow
def test_render_draws_a_box_collider(tmp_path, capsys):
    import imageio.v3 as iio

    from test_scene_file import _footage, _scene
    from test_cli import _toml
    from tigradsim import cli

    table = {"kind": "box", "half_extents": [0.5, 0.05, 0.5], "position": [0.0, 0.3, 0.0]}
    box = {"type": "rigid", "box": [0.2, 0.1, 0.15], "mass": 1.0, "position": [0.0, 0.4, 0.0]}
    data = _scene(tmp_path, objects={"box": box}, colliders={"table": table}, forces=[],
                  **{"simulation.substeps": 40, "camera.target": [0.0, 0.35, 0.0], "camera.eye": [0.0, 1.0, 1.5],
                     "camera.width": 32, "camera.height": 32})
    _footage(tmp_path, size=(32, 32))              # over the 8 x 8 frames _scene writes
    (tmp_path / "scene.toml").write_text(_toml(data))
    code = cli.main(["render", str(tmp_path / "scene.toml"), "--out", str(tmp_path / "out")])
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert code == 0 and summary["ok"], summary
    scene_dir, masks_dir = summary["files"]["scene_frames"], summary["files"]["frames"]
    assert len(os.listdir(scene_dir)) == summary["frames"]
    picture = iio.imread(os.path.join(scene_dir, "frame_0000.png")).astype(np.float64) / 255
    silhouette = iio.imread(os.path.join(masks_dir, "frame_0000.png")).astype(np.float64) / 255
    silhouette = silhouette if silhouette.ndim == 2 else silhouette[..., 0]
    tan = picture[..., 0] - picture[..., 2] > 0.08       # the collider's colour (the object is grey here)
    assert tan.mean() > 0.1, "the table should cover a good part of the picture"
    assert silhouette[tan].max() < 0.5, "the silhouettes show the object only, not the table"
    assert (silhouette > 0.5).sum() > 10, "and the object is in them"
