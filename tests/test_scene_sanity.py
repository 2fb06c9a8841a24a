"""Scene sanity before any kernel (issue 45, item 2): objects inside the ground, a camera below the
ground or looking away (R given camera-to-world), objects outside the view, a principal point outside
the image and non-positive image sizes; the same check functions in the Python API and the scene file
(tigradsim/core/placement.py, renderers/framing.py, renderers/camera.py, tigradsim/scenes/scene_sanity.py).
Each symptom through both paths."""
import warnings

import numpy as np
import pytest

import tigradsim as tgs
from tigradsim.io.meshes import box_surface, cloth_grid, tet_box
from tigradsim.renderers import Camera
from tigradsim.scenes.scene_file import SceneError, parse_scene
from test_scene_file import DELETE, _scene

# the box_push clip's box, ground and calibrated camera (demos/scenes/box_push.toml): the box rests
# at y = 0.073726, 1.27 mm into the ground (1.3 kg on 4 corners of ke = 2500 N/m)
BOX = (0.3, 0.15, 0.2)
REST_Y = 0.073726
K = [[150.0, 0.0, 65.0], [0.0, 150.0, 62.5], [0.0, 0.0, 1.0]]
R = np.array([[0.9946917938265512, 0.0, -0.1028991510855053],
              [0.04454243811424813, -0.9014541046931168, 0.43057690177106517],
              [-0.09275886211546595, -0.4328746898721744, -0.8966690004495041]])
T = [2.110426717447632e-17, 0.04507270523465602, 1.6387398973732317]


def _builder(y=REST_Y, x=-0.35):
    b = tgs.SceneBuilder()
    b.add_ground(ke=2500.0, kd=30.0, kf=10.0, mu=0.4)
    v, f = box_surface(BOX)
    b.add_rigid_body(v, f, mass=1.3, position=(x, y, 0.0))
    return b


def _file(tmp_path, **changes):
    """parse_scene of test_scene_file's valid scene with `changes`; returns the SceneError's text."""
    with pytest.raises(SceneError) as info:
        parse_scene(_scene(tmp_path, **changes), str(tmp_path / "scene.toml"))
    return str(info.value)


OPENCV = {"camera.eye": DELETE, "camera.target": DELETE, "camera.fov": DELETE, "camera.K": K, "camera.t": T,
          "camera.width": 128, "camera.height": 128}


def _opencv_scene(tmp_path, R_file, **changes):
    """test_scene_file's scene with box_push's box, pose and calibrated camera (128 px)."""
    from test_scene_file import _footage
    _footage(tmp_path, size=(128, 128))
    return _scene(tmp_path, **OPENCV, **{"camera.R": np.asarray(R_file).tolist(), "objects.box.box": list(BOX),
                                         "objects.box.position": [-0.35, REST_Y, 0.0]}, **changes)


# ---------------------------------------------------------------------------
# objects inside the ground

def test_box_inside_the_ground_is_an_error_in_the_python_api():
    b = _builder(y=BOX[1] / 2 - 0.37)
    with pytest.raises(ValueError, match=r"rigid body 0 starts 0.37 m inside the ground .*lift it by 0.37 m"):
        b.finalize()


def test_box_inside_the_ground_is_an_error_in_the_scene_file(tmp_path):
    msg = _file(tmp_path, **{"objects.box.position": [0.0, 0.05 - 0.37, 0.0]})
    assert msg.startswith("scene.toml: [objects.box] position: objects.box starts 0.37 m inside the ground")
    assert "lift it by 0.37 m so that it starts on the ground: position = [0.0, 0.05, 0.0]." in msg
    # a z-up file: the lift is along its z
    msg = _file(tmp_path, **{"world.up": "z", "objects.box.position": [0.0, 0.0, -0.4],
                             "camera.eye": [0.0, -1.2, 0.5], "camera.target": [0.0, 0.0, 0.05],
                             "camera.up": [0.0, 0.0, 1.0]})
    assert "[objects.box] position: objects.box starts 0.4" in msg and "position = [0.0, 0.0, 0.0" in msg


def test_resting_contact_and_every_object_kind_are_judged_alike():
    """Resting contact passes (box_push's 1.3 mm; a soft mesh and a cloth with their vertices on the
    ground, radius included); the same objects 0.2 m deeper are named, pinned particles never are."""
    from tigradsim.core.placement import ground_penetrations
    b = _builder()
    v, t = tet_box(2, 2, 2, size=(0.2, 0.2, 0.2), origin=(1.0, 0.0, 0.0))
    b.add_soft_mesh((v, t), density=100.0, radius=0.01)
    cv, ct = cloth_grid(3, 3, cell=0.1, origin=(2.0, 0.0, 0.0))
    b.add_cloth(cv, ct, radius=0.005)
    b.add_particles([[3.0, 0.01, 0.0], [3.0, -1.0, 0.5]], masses=1.0, radius=0.01, fixed=[False, True])
    assert ground_penetrations(b.placed()) == []
    labels = [p.label for p in b.placed()]
    assert labels == ["rigid body 0", "soft mesh 0", "cloth 0", "particles 43..44"]     # 27 + 16 mesh vertices first
    assert len(b.placed()[3].points) == 1                                                # the pinned one left out
    deep = _builder(y=REST_Y - 0.2)
    deep.add_soft_mesh((v - [0, 0.2, 0], t), density=100.0)
    deep.add_cloth(cv - [0, 0.2, 0], ct)
    deep.add_particles([[3.0, -0.2, 0.0], [3.5, -0.2, 0.0]], masses=1.0)
    found = ground_penetrations(deep.placed())
    assert [g.placed.label.split()[0] for g in found] == ["rigid", "soft", "cloth", "particles"]
    assert all(0.2 <= g.depth <= 0.2 + 0.011 for g in found)


def test_no_ground_no_penetration_check():
    b = tgs.SceneBuilder()
    v, f = box_surface(BOX)
    b.add_rigid_body(v, f, mass=1.3, position=(0.0, -5.0, 0.0))
    b.finalize()              # a body falling in space below y = 0 is fine without a ground


# ---------------------------------------------------------------------------
# a camera given camera-to-world: below the floor, looking up

def test_camera_to_world_rotation_is_an_error_in_the_python_api():
    from tigradsim.renderers.framing import check_framing
    placed = _builder().placed()
    check_framing(Camera.from_opencv(K, R, T, 128, 128), placed)          # the clip's own camera sees the box
    wrong = Camera.from_opencv(K, R.T, T, 128, 128)
    assert wrong.eye[1] < 0 and wrong.R[2][1] > 0                       # below the floor, looking up
    with pytest.raises(ValueError, match=r"the camera is below the ground: its centre is at height -0.665 m.*"
                                         r"Probably R was given camera-to-world"):
        check_framing(wrong, placed)


def test_video_fit_checks_the_view_before_running(f64):
    """VideoFit runs the check on the renderer's camera and the model's objects (model.placed)."""
    from tigradsim.renderers import SoftRasterizer

    model = _builder().finalize(requires_grad=False)
    sim = tgs.Simulator(model, dt=1e-3, steps=1)
    faces = np.concatenate(model.body_faces).astype(np.int32)
    ren = SoftRasterizer(Camera.from_opencv(K, R.T, T, 128, 128), faces, int(model.body_vertex_start[-1]))
    with pytest.raises(ValueError, match=r"VideoFit .*the camera is below the ground.*camera-to-world"):
        tgs.VideoFit(sim, ren, [])
    tgs.VideoFit(sim, ren, [], check_view=False)          # the way out, named in the message


def test_camera_to_world_rotation_is_an_error_in_the_scene_file(tmp_path):
    parse_scene(_opencv_scene(tmp_path, R), str(tmp_path / "scene.toml"))
    with pytest.raises(SceneError) as info:
        parse_scene(_opencv_scene(tmp_path, R.T), str(tmp_path / "scene.toml"))
    msg = str(info.value)
    assert msg.startswith("scene.toml: [camera] R / t: the camera is below the ground")
    assert ("Probably R was given camera-to-world (its transpose is world-to-camera): "
            "R = [[0.994692, 0.0, -0.102899], [0.044542, -0.901454, 0.430577]") in msg


def test_look_at_camera_below_the_ground(tmp_path):
    msg = _file(tmp_path, **{"camera.eye": [0.0, -0.5, 1.2]})
    assert msg.startswith("scene.toml: [camera] eye / target: the camera is below the ground")
    assert "the eye's height has the wrong sign: eye = [0.0, 0.5, 1.2]" in msg


def test_camera_looking_away(tmp_path):
    from tigradsim.renderers.framing import check_framing
    placed = _builder(x=0.0).placed()
    away = Camera(eye=(0.0, 0.5, 1.2), target=(0.0, 0.5, 3.0), width=16, height=16)
    with pytest.raises(ValueError, match=r"the camera looks away from the scene: the centre of the objects"):
        check_framing(away, placed)
    msg = _file(tmp_path, **{"camera.target": [0.0, 0.5, 3.0]})
    assert "[camera] eye / target: the camera looks away from the scene" in msg


# ---------------------------------------------------------------------------
# objects outside the view at the first frame

def test_object_outside_the_view(tmp_path):
    from tigradsim.renderers.framing import check_framing
    cam = Camera(eye=(0.0, 0.5, 1.2), target=(0.0, 0.05, 0.0), fov=40.0, width=8, height=8)
    b = _builder(x=0.0)
    v, f = box_surface(BOX)
    b.add_rigid_body(v, f, mass=1.0, position=(4.0, REST_Y, 0.0))
    with pytest.raises(ValueError, match=r"rigid body 1 is outside the camera's view at the first frame: its points "
                                         r"project to columns"):
        check_framing(cam, b.placed())
    msg = _file(tmp_path, **{"objects.box.position": [4.0, 0.05, 0.0], "forces": [],
                             "objects.ball": {"type": "rigid", "box": [0.1, 0.1, 0.1], "mass": 1.0,
                                              "position": [0.0, 0.05, 0.0]}})
    assert msg.startswith("scene.toml: [objects.box] position: objects.box is outside the camera's view")


def test_object_partly_outside_the_view_warns(tmp_path):
    from tigradsim.renderers.framing import FramingWarning, check_framing
    cam = Camera(eye=(0.0, 0.5, 1.2), target=(0.0, 0.05, 0.0), fov=40.0, width=8, height=8)
    with pytest.warns(FramingWarning, match=r"rigid body 0 is partly outside the camera's view .*\(4 of its 8 points\)"):
        check_framing(cam, _builder(x=0.45).placed())
    with pytest.warns(FramingWarning, match=r"scene.toml: \[objects.box\] position: objects.box is partly outside"):
        parse_scene(_scene(tmp_path, **{"objects.box.position": [0.4, 0.05, 0.0]}), str(tmp_path / "scene.toml"))
    with warnings.catch_warnings():          # the footage starts later: the view at t = 0 is not checked
        warnings.simplefilter("error")
        parse_scene(_scene(tmp_path, **{"objects.box.position": [0.4, 0.05, 0.0], "footage.start_time": 0.1}),
                    str(tmp_path / "scene.toml"))


# ---------------------------------------------------------------------------
# principal point outside the image; non-positive image sizes

def test_principal_point_outside_the_image_is_one_check_on_both_paths(tmp_path):
    K_bad = [[150.0, 0.0, 500.0], [0.0, 150.0, 63.5], [0.0, 0.0, 1.0]]
    with pytest.raises(ValueError, match=r"Camera.from_opencv: principal point \(500.0, 63.5\) lies outside the "
                                         r"128x128 image .*expected a point near the image centre \(63.5, 63.5\)"):
        Camera.from_opencv(K_bad, R, T, 128, 128)
    with pytest.raises(ValueError, match=r"K looks calibrated on an image of about 1280x1280 px; scale fx, fy, "
                                         r"cx \+ 0.5 and cy \+ 0.5 by 128/1280"):
        Camera.from_opencv([[1500.0, 0.0, 639.5], [0.0, 1500.0, 639.5], [0.0, 0.0, 1.0]], R, T, 128, 128)
    msg = _file(tmp_path, **{**OPENCV, "camera.R": R.tolist(), "camera.K": K_bad})
    assert ("scene.toml: [camera] K: inconsistent camera: principal point (500.0, 63.5) lies outside the 128x128 "
            "image") in msg


@pytest.mark.parametrize("bad", [0, -64])
def test_non_positive_image_sizes_name_the_value(tmp_path, bad):
    with pytest.raises(ValueError, match=rf"Camera: width={bad} must be a positive number of pixels"):
        Camera(width=bad)
    with pytest.raises(ValueError, match=rf"Camera.from_opencv: height={bad} must be a positive number of pixels"):
        Camera.from_opencv(K, R, T, 128, bad)
    from tigradsim.scenes.scene_build import load_scene_footage
    spec = parse_scene(_scene(tmp_path), str(tmp_path / "scene.toml"))
    with pytest.raises(SceneError, match=rf"scene.toml: \[fit\] resolution: render width: resolution={bad} must be "
                                         "a positive number of pixels"):
        load_scene_footage(spec, resolution=bad)       # --resolution 0 was taken as "not given"
    msg = _file(tmp_path, **{"camera.width": bad})
    assert "[camera] width: expected an integer >= 1" in msg
