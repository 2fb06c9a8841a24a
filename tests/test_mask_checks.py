"""Masks checked for plausibility before a fit (issue 45, item 1): every mask empty is a
FootageError (Python API, folders, scene files, silhouette targets of VideoFit); one empty mask
mid-clip, inverted masks and a first mask far from the silhouette rendered at the initial guess
are FootageWarnings that name the frame, say "inverted?" or give the IoU.  Plausible masks pass
without a word.  Only the last test runs kernels (one rollout of a small box scene)."""
import warnings

import numpy as np
import pytest
from PIL import Image

import tigradsim as tgs
from tigradsim.core.errors import FootageError, FootageWarning
from tigradsim.io.mask_checks import check_initial_pose, check_masks

K, H, W = 8, 16, 20


def _moving_square(k_count=K):
    """(K, H, W) masks of a 5x5 square moving right, with soft (0.5-ish) edges, and RGB frames."""
    m = np.zeros((k_count, H, W))
    for k in range(k_count):
        m[k, 5:10, 2 + k:7 + k] = 1.0
        m[k, 4, 2 + k:7 + k] = 0.4
    frames = np.repeat(0.2 + 0.6 * m[..., None], 3, axis=-1)
    return frames, m


def test_plausible_masks_pass_without_a_word():
    frames, masks = _moving_square()
    with warnings.catch_warnings():
        warnings.simplefilter("error", FootageWarning)
        clip = tgs.Footage(frames, fps=30, masks=masks)
        leaving = masks.copy()
        leaving[:2] = 0.0                  # the object enters the view late and leaves early: no warning
        leaving[-1] = 0.0
        tgs.Footage(frames, fps=30, masks=leaving)
        assert check_initial_pose(masks, masks) == 1.0
    assert clip.masks.shape == (K, H, W)


def test_every_mask_empty_is_an_error_with_a_hint():
    frames, masks = _moving_square()
    with pytest.raises(FootageError, match=r"^masks: every mask is empty .* 8 frames\); every value is 0"):
        tgs.Footage(frames, fps=30, masks=np.zeros_like(masks))
    with pytest.raises(FootageError, match=r"masks stored as 0 and 1 in an 8-bit file"):
        tgs.Footage(frames, fps=30, masks=masks.astype(np.uint8))            # 0/1 in uint8 = 0 and 1/255
    with pytest.raises(FootageError, match=r"8-bit values \(or 0 and 1\) in a 16-bit file"):
        tgs.Footage(frames, fps=30, masks=(masks * 255).astype(np.uint16))
    with pytest.raises(FootageError, match=r"every mask covers the whole image.*inverted empty masks"):
        tgs.Footage(frames, fps=30, masks=np.ones_like(masks))
    # RGBA frames whose alpha serves as the masks
    rgba = np.concatenate([frames, np.zeros_like(masks)[..., None]], -1)
    rgba[0, 0, 0, 3] = 0.3                                                   # varies, but nothing above 0.5
    with pytest.raises(FootageError, match=r"^masks \(the frames' alpha\): every mask is empty"):
        tgs.Footage(rgba, fps=30)
    assert issubclass(FootageError, ValueError)


def test_every_mask_empty_in_a_folder_and_in_a_scene_file(tmp_path):
    from test_scene_file import _scene
    from tigradsim.scenes.scene_build import load_scene_footage
    from tigradsim.scenes.scene_file import SceneError, parse_scene

    for k in range(3):
        Image.fromarray(np.full((6, 5), 80, np.uint8)).save(tmp_path / f"rgb_{k}.png")
        Image.fromarray(np.zeros((6, 5), np.uint8)).save(tmp_path / f"mask_{k}.png")
    with pytest.raises(FootageError, match=r"every mask is empty"):
        tgs.load_footage(tmp_path, fps=30, pattern="rgb_*.png", masks=tmp_path, mask_pattern="mask_*.png")
    (tmp_path / "scene").mkdir()
    data = _scene(tmp_path / "scene")
    for k in range(3):
        Image.fromarray(np.zeros((8, 8), np.uint8)).save(tmp_path / "scene" / "clip" / f"mask_{k:04d}.png")
    with pytest.raises(SceneError, match=r"scene.toml: \[footage\] masks: every mask is empty"):
        load_scene_footage(parse_scene(data, str(tmp_path / "scene" / "scene.toml")))


def test_one_empty_mask_mid_clip_is_named():
    frames, masks = _moving_square()
    masks[3] = 0.0
    with pytest.warns(FootageWarning, match=r"^masks: the mask of frame 3 is empty .* earlier and later frames"):
        tgs.Footage(frames, fps=30, masks=masks)
    masks[5] = 0.0
    with pytest.warns(FootageWarning, match=r"the mask of frames 3, 5 is empty"):
        check_masks(masks)
    with pytest.warns(FootageWarning, match=r"frames 3 \(m3.png\), 5 \(m5.png\)"):
        check_masks(masks, labels=[f"m{k}.png" for k in range(K)])


def test_one_empty_mask_mid_clip_in_a_scene_file_names_the_file(tmp_path):
    from test_scene_file import _scene
    from tigradsim.scenes.scene_build import load_scene_footage
    from tigradsim.scenes.scene_file import parse_scene

    data = _scene(tmp_path)                    # 3 frames with a square mask each
    Image.fromarray(np.zeros((8, 8), np.uint8)).save(tmp_path / "clip" / "mask_0001.png")
    with pytest.warns(FootageWarning, match=r"the mask of frame 1 \(mask_0001.png\) is empty"):
        load_scene_footage(parse_scene(data, str(tmp_path / "scene.toml")))


def test_inverted_masks_are_asked_about():
    frames, masks = _moving_square()
    with pytest.warns(FootageWarning, match=r"^masks: inverted\? In 8 of the 8 frames the masks cover .* border"):
        tgs.Footage(frames, fps=30, masks=1.0 - masks)
    with pytest.warns(FootageWarning, match=r"inverted\?"):
        tgs.Footage((frames * 255).astype(np.uint8), fps=30, masks=(255 - masks * 255).astype(np.uint8))
    # a big object close to the camera covers much of the image but leaves the border: no warning
    big = np.zeros((K, H, W))
    big[:, 2:-2, 2:-2] = 1.0
    with warnings.catch_warnings():
        warnings.simplefilter("error", FootageWarning)
        tgs.Footage(frames, fps=30, masks=big)


def test_first_mask_far_from_the_initial_pose_names_the_iou():
    _, masks = _moving_square()
    far = np.roll(masks, 9, axis=2)
    with pytest.warns(FootageWarning, match=r"far from the silhouette rendered at the initial guess: IoU 0.000 < 0.5 "
                                            r"\(mask 25 px, render 25 px\)"):
        assert check_initial_pose(far, masks) == 0.0
    near = np.roll(masks, 1, axis=2)                     # one pixel off: IoU 20/30
    with warnings.catch_warnings():
        warnings.simplefilter("error", FootageWarning)
        assert check_initial_pose(near, masks) == pytest.approx(20 / 30)
    with pytest.warns(FootageWarning, match=r"the render is empty: the object is outside the view"):
        check_initial_pose(masks, np.zeros_like(masks))


def test_videofit_checks_silhouette_targets_and_the_initial_pose(f64):
    """VideoFit.fit: an all-zero silhouette target is an error before any rollout; a first mask
    far from the render at the initial guess warns with the IoU after the first rollout (before
    any step); the true masks do not warn."""
    from pushed_box import body_surface
    from test_losses_targets import _pushed_box

    model, sim, ren, timed, times = _pushed_box()
    fit = tgs.VideoFit(sim, ren, [tgs.Param(model.body_mass, "mass", log_space=True)])
    rgba = fit.render()
    alpha = rgba[..., 3]
    assert (alpha[0] > 0.5).sum() > 10
    plate = np.full((24, 24, 3), 0.5)
    frames = rgba[..., 3:4] * np.clip(rgba[..., :3], 0, 1) + (1 - rgba[..., 3:4]) * plate
    sil = tgs.VideoFit(sim, tgs.renderers.SoftRasterizer(ren.camera, *body_surface(model),
                                                         frames=9, shading="silhouette"), [])
    with pytest.raises(FootageError, match=r"^target: every mask is empty"):
        sil.fit(np.zeros((9, 24, 24)), iters=0, log_every=0)
    far = tgs.Footage(frames, fps=40, start_time=0.011, masks=np.roll(alpha, 12, axis=2))
    far.set_background(plate)
    model.set("body_mass", [1.3])
    with pytest.warns(FootageWarning, match=r"^target: the first frame's mask is far .* IoU 0\.\d+ < 0.5"):
        fit.fit(far, iters=0, log_every=0)
    true = tgs.Footage(frames, fps=40, start_time=0.011, masks=alpha)
    true.set_background(plate)
    with warnings.catch_warnings():
        warnings.simplefilter("error", FootageWarning)
        fit.fit(true, iters=0, log_every=0)


@pytest.mark.parametrize("damage, message", [
    ("black masks", "[footage] masks: every mask is empty"),
    ("truncated frame", "[footage] frames: "),
    ("text mask", "[footage] masks: "),
])
def test_cli_answers_unusable_footage_with_an_error_line(tmp_path, capsys, damage, message):
    """`tigradsim render` / `fit` on black masks, a truncated PNG or a text file named .png: exit 2,
    one `error:` line naming the file's key, JSON last line; before any kernel."""
    from test_cli import _run, _toml
    from test_scene_file import _scene

    data = _scene(tmp_path)
    clip = tmp_path / "clip"
    if damage == "black masks":
        for k in range(3):
            Image.fromarray(np.zeros((8, 8), np.uint8)).save(clip / f"mask_{k:04d}.png")
    elif damage == "truncated frame":
        png = (clip / "rgb_0002.png").read_bytes()
        (clip / "rgb_0002.png").write_bytes(png[:40])
    else:
        (clip / "mask_0001.png").write_text("mask: see frame 0\n")
    scene = tmp_path / "scene.toml"
    scene.write_text(_toml(data))
    for command in ("render", "fit"):
        code, result, _, err = _run([command, scene, "--out", tmp_path / "out"], capsys)
        assert code == 2 and result["ok"] is False and message in result["error"], result
        assert err.count("error: ") == 1 and "Traceback" not in err
        if damage != "black masks":
            assert ("rgb_0002.png" if damage == "truncated frame" else "mask_0001.png") in result["error"]


def test_cli_render_warns_when_the_masks_are_far_from_the_initial_pose(tmp_path, capsys):
    """`tigradsim render` (and `fit`, through fit_scene) compare the first mask with the render at the
    file's values: masks in a corner, the box in the middle: a FootageWarning with the IoU."""
    from test_cli import _run, _toml
    from test_scene_file import _scene

    data = _scene(tmp_path, **{"camera.fov": 20.0})
    corner = np.zeros((8, 8), np.uint8)
    corner[:3, :3] = 255
    for k in range(3):
        Image.fromarray(corner).save(tmp_path / "clip" / f"mask_{k:04d}.png")
    scene = tmp_path / "scene.toml"
    scene.write_text(_toml(data))
    with pytest.warns(FootageWarning, match=r"^masks: the first frame's mask is far .* IoU 0.000 < 0.5 "
                                            r"\(mask 9 px, render [1-9]\d* px\)"):
        code, result, _, _ = _run(["render", scene, "--out", tmp_path / "out"], capsys)
    assert code == 0 and result["iou"]["first"] == 0.0
