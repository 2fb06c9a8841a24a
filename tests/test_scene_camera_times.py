"""Cameras of their own frame rate and start time ([[cameras]] entries with fps / start_time, issue 47):
each camera's frames are drawn at its own times, horizons count the first camera's frames (the others
fit theirs up to that time), residual clusters follow time, and each camera refines its own pose
(refine_camera with several cameras) with the loss's gradient matching float64 central differences."""
import os

import numpy as np
import pytest

import tigradsim as tgs
from tigradsim.scenes.scene_file import SceneError, parse_scene
from test_scene_cameras import CAMERAS, DURATION, FINE_SUBSTEPS, FPS, PUSH, RES, SIZE, START, TRUE_MASS, _scene

# camera "above" films at 20 fps from t = 0.025 s (8 frames, to 0.375 s); "along" at 30 fps from 0 (13)
ABOVE_FPS, ABOVE_START, ABOVE_FRAMES = 20.0, 0.025, 8


def _times(name):
    if name == "above":
        return ABOVE_START + np.arange(ABOVE_FRAMES) / ABOVE_FPS
    return np.arange(int(round(DURATION * FPS)) + 1) / FPS


def _write_timed_clips(folder):
    """The truth (dt = 1/(30 x 32) s) rendered by each camera at its own frame times, as 8-bit masks."""
    from tigradsim.io.footage import render_at_times
    from tigradsim.io.video import save_frames
    from tigradsim.renderers import Camera, SoftRasterizer

    tgs.init(arch="cpu", precision="f64")
    b = tgs.SceneBuilder(gravity=(0.0, -9.8, 0.0))
    b.add_ground(ke=1e4, kd=10.0, kf=10.0, mu=0.4)
    v, f = tgs.meshes.box_surface(SIZE)
    body = b.add_rigid_body(v, f, mass=TRUE_MASS, position=START)
    tgs.add_body_force(b, body, **PUSH)
    model = b.finalize(requires_grad=False)
    start = model.body_vertex_start
    faces = np.concatenate([fc + start[i] for i, fc in enumerate(model.body_faces)])
    dt = 1.0 / (FPS * FINE_SUBSTEPS)
    sim = tgs.Simulator(model, dt=dt, steps=int(round(DURATION / dt)))
    renderers = {}
    for name, cam in CAMERAS.items():
        renderers[name] = SoftRasterizer(Camera(width=RES, height=RES, **cam), faces, int(start[-1]),
                                         frames=len(_times(name)),
                                         sigma=1e-5, shading="silhouette")
        render_at_times(sim, renderers[name], _times(name), source="rigid")
    sim.run()
    for name, ren in renderers.items():
        alpha = ren.image.to_numpy()[..., 0]
        save_frames(alpha, os.path.join(folder, name, "masks"), prefix="mask")
        save_frames(0.25 + 0.6 * alpha[..., None] * np.array([1.0, 0.8, 0.6]), os.path.join(folder, name, "frames"),
                    prefix="frame")


@pytest.fixture(scope="module")
def timed_clips(tmp_path_factory):
    folder = tmp_path_factory.mktemp("timed_cameras")
    _write_timed_clips(str(folder))
    return folder


def _timed_scene(**fit):
    data = _scene(supervision="mask", blur=[0.0], **fit)
    data["cameras"][1].update(fps=ABOVE_FPS, start_time=ABOVE_START)
    return data


def test_camera_timing_parses_and_errors_name_the_camera(timed_clips):
    spec = parse_scene(_timed_scene(), str(timed_clips / "scene.toml"))
    along, above = (v.footage for v in spec.views)
    assert (along.fps, along.start_time, along.count) == (FPS, 0.0, len(_times("along")))
    assert (above.fps, above.start_time, above.count) == (ABOVE_FPS, ABOVE_START, ABOVE_FRAMES)
    assert spec.views[1].own_timing == ("fps", "start_time") and spec.views[0].own_timing == ()
    data = _timed_scene()
    data["cameras"][1]["fps"] = -5.0
    with pytest.raises(SceneError, match=r"\[cameras\.above\] fps: expected a positive number, got -5"):
        parse_scene(data, str(timed_clips / "scene.toml"))
    data = _timed_scene()
    del data["footage"]
    with pytest.raises(SceneError, match=r"\[cameras\.along\] fps: missing: camera 'along' has frames; give their "
                                         r"fps here or in \[footage\]"):
        parse_scene(data, str(timed_clips / "scene.toml"))
    data["cameras"][0]["fps"] = FPS                  # every camera with its own rate: no [footage] needed
    assert parse_scene(data, str(timed_clips / "scene.toml")).views[0].footage.fps == FPS
    data = _timed_scene()
    for key in ("frames", "masks"):
        del data["cameras"][1][key]
    with pytest.raises(SceneError, match=r"\[cameras\.above\] fps: footage timing without frames"):
        parse_scene(data, str(timed_clips / "scene.toml"))


@pytest.mark.slow           # ~60 s on 2 shared cores (a rigid scene, two renderers, 2 gradient checks)
def test_frames_drawn_at_each_cameras_times(timed_clips):
    """Each camera's renderer draws its frames at its own times, and at the true mass matches its own clip
    (mean IoU > 0.97, every frame > 0.9); use_frames(k) fits "above"'s frames up to "along"'s
    frame k - 1; residuals, clusters and the per-camera priors follow; the gradient w.r.t. the mass and
    both cameras' pose corrections matches float64 central differences."""
    from tigradsim.scenes.scene_build import Scene
    from tigradsim.scenes.scene_views import load_views_footage, view_frame_counts, views_iou

    spec = parse_scene(_timed_scene(refine_camera=True), str(timed_clips / "scene.toml"))
    tgs.init(arch="cpu", precision="f64")
    clips = load_views_footage(spec)
    assert np.allclose(clips[1].times, _times("above"))
    scene = Scene(spec, clips)
    assert [p.frames for p in scene.camera_prior.priors] == [len(_times("along")), ABOVE_FRAMES]
    for view, name in zip(scene.views, ("along", "above")):
        drawn_at = (view.timed.steps + view.timed.alphas) * scene.dt       # step n, blended a of the way to n + 1
        assert np.allclose(drawn_at, _times(name), atol=1e-9) and view.renderer.image.shape[0] == len(_times(name))
    scene.set_values({"box.mass": TRUE_MASS})
    videos = scene.render_views()
    assert [len(v) for v in videos] == [len(_times("along")), ABOVE_FRAMES]
    iou = views_iou(scene, videos)
    # (measured: along 1.0 every frame; above 0.98 on average, 0.94 at worst: a row of pixels whose centre
    # the edge crosses by the dt of the clip, 1/960 s, against the scene's 1/360 s)
    assert all(v["iou"] > 0.97 and min(v["iou_per_frame"]) > 0.9 for v in iou.values()), iou
    # horizons: along's first 6 frames (to t = 1/6 s) and above's frames up to then (0.025, 0.075, 0.125)
    assert view_frame_counts(scene, 6) == [6, 3]
    assert view_frame_counts(scene, len(_times("along"))) == [len(_times("along")), ABOVE_FRAMES]
    scene.use_frames(6)
    r = scene.residuals()
    assert r.size == (6 + 3) * RES * RES + 12
    labels = scene.residual_groups(count=r.size)
    blocks = scene.interval_blocks(6)
    assert labels.max() == blocks and np.array_equal(labels[-12:], np.full(12, blocks))
    # above's frame 2 (t = 0.125) is nearest along's frame 4 (t = 0.133): it shares that frame's cluster
    along_labels = labels[:6 * RES * RES].reshape(6, -1)[:, 0]
    above_labels = labels[6 * RES * RES:9 * RES * RES].reshape(3, -1)[:, 0]
    assert above_labels[2] == along_labels[4] and above_labels[0] == along_labels[1]
    assert np.allclose([p.frames for p in scene.camera_prior.priors], [6, 3])
    # the gradient of the loss (images and priors) in the mass and both pose corrections
    scene.use_frames(len(_times("along")))
    scene.set_values({"box.mass": 1.3})
    scene.views[1].renderer.camera_delta.from_numpy(np.array([0.004, -0.002, 0.003, 0.004, 0.002, -0.003]))
    fields = [scene.params[0].field] + [v.renderer.camera_delta for v in scene.views]
    scene.fit.loss[None] = 0.0
    rep = tgs.check_gradient(scene.forward, scene.fit.loss, fields, direction_count=2, rtol=1e-5, eps=1e-6)
    rep.assert_ok()
    assert np.all(np.abs(rep.analytic) > 1e-8), rep.analytic
    assert [p.name for p in scene.camera_params] == ["camera_pose[along]", "camera_pose[above]"]
