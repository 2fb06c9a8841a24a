"""The viewer and the report pictures (issue 19 items 1 and 2).

* Under a virtual X display (Xvfb): a demo's window shows the scene (screenshot of the
  screen while the window is up: the window is not uniform and the mesh colour is
  there), and the demo returns by itself with --no-wait.  Skipped only when no Xvfb
  binary exists (CI installs it: `.ci/run`).
* Without a display: `show` says so, writes the PNG frames and a GIF that plays at
  real time; `play_video` says so too.
* Panels: label bars, sizes, shorter videos held, the overlay's red outline exactly
  on the estimate's edge; VideoFit.save_report's labelled GIF and overlay.
"""
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import tigradsim as tgs
from tigradsim.io import viz, viz_ggui
from tigradsim.io.panels import labelled_strip, outline, overlay_png, silhouette_mask, trials_grid
from tigradsim.io.video import load_video

ROOT = Path(__file__).resolve().parents[1]


def _disc(h, w, cx, cy, r):
    yy, xx = np.mgrid[:h, :w]
    return ((xx - cx) ** 2 + (yy - cy) ** 2 < r * r).astype(np.float64)


# -- panels ---------------------------------------------------------------------
def test_labelled_strip_labels_sizes_and_held_frames():
    K, H, W = 6, 20, 30
    target = np.stack([_disc(H, W, 5 + 3 * k, 10, 5) for k in range(K)])        # float (K, H, W)
    short = (np.stack([_disc(H, W, 5 + k, 10, 4) for k in range(3)]) * 255).astype(np.uint8)[..., None]
    rgba = np.zeros((K, H, W, 4))
    rgba[..., 2] = 1.0
    rgba[..., 3] = target                                                        # blue disc, transparent elsewhere
    strip = labelled_strip([("target", target, "mass 1.00 kg\nmu 0.50"), ("initial guess", short, "mass 0.52 kg"),
                            ("estimate", rgba)], scale=2, gap=4)
    assert strip.dtype == np.uint8 and strip.ndim == 4 and strip.shape[-1] == 3
    assert strip.shape[0] == K                                                   # the longest video's length
    assert strip.shape[2] == 3 * 2 * W + 2 * 4
    bar = strip.shape[1] - 2 * H                                                 # title + two value lines
    assert 40 <= bar <= 70, bar
    for i in range(3):
        x0 = i * (2 * W + 4)
        label = strip[0, :bar, x0:x0 + 2 * W].astype(int)
        assert (label.sum(-1) < 200).sum() > 20, f"panel {i}: no dark title text in its label bar"
        assert (strip[:, bar:, x0:x0 + 2 * W] == strip[:, bar:, x0:x0 + 2 * W][:, :1, :1]).mean() < 1, i
    # the target's body: nearest-neighbour upscaled by 2, row 0 on top
    body = strip[:, bar:, :2 * W, 0]
    assert np.array_equal(body[:, ::2, ::2] > 127, target > 0.5)
    # the 3-frame video holds its last frame for frames 3..5
    x1 = 2 * W + 4
    second = strip[:, bar:, x1:x1 + 2 * W]
    assert not np.array_equal(second[1], second[2])
    for k in range(3, K):
        assert np.array_equal(second[k], second[2])
    # RGBA is composited over white: the disc is blue, the rest white
    third = strip[0, bar:, 2 * x1:2 * x1 + 2 * W]
    assert tuple(third[0, 0]) == (255, 255, 255)
    assert tuple(third[2 * 10, 2 * 5]) == (0, 0, 255)
    # the gaps between panels are white
    assert (strip[:, :, 2 * W:2 * W + 4] == 255).all()


def test_labelled_strip_pads_smaller_panels_and_rejects_bad_input():
    a = np.zeros((2, 10, 12))
    b = np.zeros((2, 6, 8, 3))
    strip = labelled_strip([("a", a), ("b", b)], scale=1, gap=0)
    bar = strip.shape[1] - 10
    assert strip.shape == (2, bar + 10, 20, 3)
    assert (strip[:, bar + 6:, 12:] == 255).all() and (strip[:, bar:bar + 6, 12:] == 0).all()
    with pytest.raises(ValueError, match="scale=0"):
        labelled_strip([("a", a)], scale=0)
    with pytest.raises(ValueError, match=r"panels\[1\].*'b'"):
        labelled_strip([("a", a), ("b", np.zeros((2, 4, 4, 2)))])
    with pytest.raises(ValueError, match="panels"):
        labelled_strip([])


def test_trials_grid_rows_labels_and_padding():
    s0 = np.full((4, 10, 30, 3), 40, np.uint8)
    s1 = np.full((2, 12, 20, 3), 90, np.uint8)
    grid = trials_grid([s0, s1], labels=["trial 0", "trial 1"], gap=6)
    bar = (grid.shape[1] - 10 - 12 - 6) // 2
    assert grid.shape == (4, 2 * bar + 10 + 12 + 6, 30, 3)
    row1 = grid[:, bar + 10 + 6 + bar:]
    assert (row1[:, :, :20] == 90).all()                  # held: frames 2, 3 repeat frame 1
    assert (row1[:, :, 20:] == 255).all()                 # narrower strip padded with white
    assert (grid[:, bar:bar + 10] == 40).all()
    label = grid[0, :bar].astype(int)
    assert (label.sum(-1) > 600).sum() > 10, "no light label text on the row bar"
    with pytest.raises(ValueError, match="labels"):
        trials_grid([s0, s1], labels=["only one"])


def test_overlay_outline_is_on_the_estimate_edge(tmp_path):
    H, W, s = 24, 32, 4
    target = _disc(H, W, 14, 12, 7)
    estimate = _disc(H, W, 17, 12, 7)                     # shifted 3 px right
    path = overlay_png(target, estimate, tmp_path / "sub" / "overlay.png", scale=s, thickness=2)
    img = np.asarray(__import__("PIL.Image", fromlist=["Image"]).open(path).convert("RGB")).astype(int)
    assert img.shape == (H * s, W * s, 3)
    red = (img[..., 0] == 255) & (img[..., 1] == 0) & (img[..., 2] == 0)
    big = np.repeat(np.repeat(estimate > 0.5, s, 0), s, 1)
    assert np.array_equal(red, outline(big, 2))
    assert red.sum() > 100
    # every red pixel is inside the estimate, within 2 px of its boundary; its interior is not red
    inner = big & ~outline(big, 2)
    assert not (red & ~big).any() and not (red & inner).any()
    # away from the outline the target shows through unchanged (white disc on black)
    tgt_big = np.repeat(np.repeat(target > 0.5, s, 0), s, 1)
    assert (img[~red & tgt_big] == 255).all() and (img[~red & ~tgt_big] == 0).all()
    # colour frames: the object is what differs from the border's colour
    rgb = np.ones((H, W, 3)) * 0.8
    rgb[estimate > 0.5] = (0.2, 0.3, 0.9)
    assert np.array_equal(silhouette_mask(rgb), estimate > 0.5)
    with pytest.raises(ValueError, match="estimate_frame"):
        overlay_png(target, estimate[:10], tmp_path / "x.png")


# -- animation and headless pictures -------------------------------------------
def _box_animation(frames=12, frame_dt=0.05):
    v, f = tgs.meshes.box_surface((0.5, 0.4, 0.5))
    t = np.arange(frames) * frame_dt
    verts = v[None] + np.stack([np.zeros(frames), 0.3 + 0.5 * np.abs(np.cos(4 * t)), np.zeros(frames)], 1)[:, None]
    anim = viz.Animation(frame_dt, eye=(0.5, 1.4, 3.0), target=(0.0, 0.4, 0.0), res=(160, 120))
    anim.mesh(verts, f, color=0xE06020)
    anim.particles(np.array([[0.8, 0.05, 0.0], [-0.8, 0.05, 0.3]]), radius=0.05)
    anim.segments(verts, np.array([[0, 1], [2, 3]]))
    return anim, verts, f


def test_animation_rejects_bad_input():
    v, f = tgs.meshes.box_surface((0.5, 0.4, 0.5))
    with pytest.raises(ValueError, match="frame_dt=0"):
        viz.Animation(0.0)
    anim = viz.Animation(0.1)
    with pytest.raises(ValueError, match=r"faces: indices must lie in \[0, 8\)"):
        anim.mesh(v, f + 1)
    with pytest.raises(ValueError, match="vertices: contains NaN"):
        anim.mesh(np.full((2, 8, 3), np.nan), f)
    anim.mesh(np.stack([v] * 3), f)
    with pytest.raises(ValueError, match="points: 4 frames, but earlier layers have 3"):
        anim.particles(np.zeros((4, 2, 3)))
    with pytest.raises(ValueError, match="--speed=0"):
        viz.ViewOptions(type("A", (), {"speed": 0})())


def test_playback_clock_real_time_speed_hold_and_loop(monkeypatch):
    now = [100.0]
    monkeypatch.setattr(viz.time, "perf_counter", lambda: now[0])
    clock = viz._Clock(count=10, frame_dt=0.05, speed=1.0, loop=True, hold=0.75)
    seen = []
    for wall in (0.0, 0.049, 0.051, 0.26, 0.499, 0.51, 1.2, 1.26):
        now[0] = 100.0 + wall
        seen.append(clock.frame())
    # real time: frame k at k * 0.05 s; the last frame held 0.75 s after the 0.5 s of motion, then frame 0
    assert seen == [0, 0, 1, 5, 9, 9, 9, 0]
    now[0] = 300.0
    paused = viz._Clock(count=10, frame_dt=0.05, speed=1.0, loop=True)
    now[0] = 300.12
    paused.toggle_pause()                                 # Space at frame 2
    now[0] = 310.0
    assert paused.frame() == 2                            # held while paused
    paused.toggle_pause()
    now[0] = 310.1
    assert paused.frame() == 4                            # resumes where it stopped
    now[0] = 200.0
    once = viz._Clock(count=10, frame_dt=0.05, speed=0.5, loop=False)
    times = {0.0: 0, 0.11: 1, 0.99: 9, 1.01: None}        # half speed: 1 s for 10 frames, then done
    for wall, k in times.items():
        now[0] = 200.0 + wall
        assert once.frame() == k, wall


def test_corner_normals_smooth_surfaces_sharp_creases():
    v, f = tgs.meshes.box_surface((0.5, 0.4, 0.3))
    n = viz_ggui.corner_normals(v, f)
    tri = v[f]
    face = np.cross(tri[:, 1] - tri[:, 0], tri[:, 2] - tri[:, 0])
    face /= np.linalg.norm(face, axis=1, keepdims=True)
    assert np.allclose(n, face[:, None, :])                       # box edges (90 degrees) stay sharp
    # a gently curved sheet (a 4 x 4 grid on a cylinder of radius 2): every vertex one normal
    u, w = np.meshgrid(np.linspace(-0.5, 0.5, 4), np.linspace(0, 1, 4), indexing="ij")
    pts = np.stack([2 * np.sin(u / 2), 2 * np.cos(u / 2), w], -1).reshape(-1, 3)
    q = np.arange(16).reshape(4, 4)
    faces = np.concatenate([np.stack([q[:-1, :-1], q[1:, :-1], q[1:, 1:]], -1).reshape(-1, 3),
                            np.stack([q[:-1, :-1], q[1:, 1:], q[:-1, 1:]], -1).reshape(-1, 3)])
    n = viz_ggui.corner_normals(pts, faces)
    for vid in range(16):
        at = n[faces == vid]
        assert np.allclose(at, at[0]), vid                         # shared across the vertex's triangles
    assert np.allclose(np.linalg.norm(n, axis=-1), 1.0)
    radial = pts[faces] / np.linalg.norm(pts[faces][..., :2], axis=-1, keepdims=True) * [1, 1, 0]
    assert (np.abs(np.einsum("fcd,fcd->fc", n, radial)) > 0.99).all()   # close to the true surface normal


def test_show_without_display_writes_pictures(tmp_path, monkeypatch, capsys, f32):
    monkeypatch.delenv("DISPLAY", raising=False)
    monkeypatch.delenv("WAYLAND_DISPLAY", raising=False)
    import argparse
    args = viz.add_view_args(argparse.ArgumentParser(), out_default=str(tmp_path / "out")).parse_args([])
    anim, verts, _ = _box_animation(frames=12, frame_dt=0.05)
    res = viz.show(anim, "box test", args)
    said = capsys.readouterr().out
    assert f"[tigradsim] no display found: writing pictures to {tmp_path / 'out'}" in said
    assert res["window"] is None and res["frames"] == 12
    assert res["gif"] == str(tmp_path / "out" / "box_test.gif") and os.path.exists(res["gif"])
    assert len(list((tmp_path / "out").glob("box_test_0*.png"))) == 12
    from PIL import Image
    with Image.open(res["gif"]) as im:
        assert im.n_frames == 12 and im.size == (160, 120)
        assert im.info["duration"] == pytest.approx(50, abs=1)        # 0.05 s per frame: real time
    frames = load_video(res["gif"])
    orange = (frames[..., 0] > 150) & (frames[..., 2] < 100)
    assert orange[0].sum() > 50                                      # the box is drawn
    # the box moves: its picture differs between frames
    assert not np.array_equal(orange[0], orange[3])
    # --headless says so even with a display; at --speed 5 a frame would last 0.01 s, shorter than
    # GIF players honour: every second frame is kept, each shown 0.02 s (still 5 x real time)
    monkeypatch.setenv("DISPLAY", ":12345")
    args = viz.add_view_args(argparse.ArgumentParser()).parse_args(
        ["--headless", "--out", str(tmp_path / "h"), "--speed", "5"])
    res = viz.show(anim, "box", args)
    assert f"[tigradsim] --headless: writing pictures to {tmp_path / 'h'}" in capsys.readouterr().out
    with Image.open(res["gif"]) as im:
        assert im.n_frames == 6 and im.info["duration"] == pytest.approx(20, abs=1)


def test_round_ball_is_drawn_round_in_a_4_3_picture(f32):
    """Square pixels (issue 45 item 6): a ball at the centre of the view of a 720 x 540 headless
    picture is as wide as it is tall (it was 200 x 146 px: x stretched by the 4:3 aspect), and its
    height matches the pinhole projection through the vertical field of view."""
    radius, eye, target, fov = 0.3, (0.0, 0.5, 3.0), (0.0, 0.5, 0.0), 45.0
    verts, faces = tgs.meshes.icosphere(4, radius=radius, center=target)
    for res in [(720, 540), (540, 720), (400, 400)]:
        anim = viz.Animation(frame_dt=0.05, eye=eye, target=target, fov=fov, ground=False, res=res)
        anim.mesh(verts, faces, color=0x60A0E0)
        image = anim.render_frames()[0].astype(np.int64)
        assert image.shape == (res[1], res[0], 3)
        ball = image[..., 2] - image[..., 0] > 40               # the blue ball (not the grey caption)
        rows, cols = np.nonzero(ball)
        height, width = rows.max() - rows.min() + 1, cols.max() - cols.min() + 1
        # the silhouette of a sphere at distance d: half-angle asin(r / d); focal = (H / 2) / tan(fov / 2)
        expected = 2 * (res[1] / 2) / np.tan(np.radians(fov / 2)) * np.tan(np.arcsin(radius / 3.0))
        assert abs(width - height) <= 2, (res, width, height)
        assert height == pytest.approx(expected, abs=3), (res, height, expected)


def test_play_video_without_display(tmp_path, monkeypatch, capsys, f32):
    monkeypatch.delenv("DISPLAY", raising=False)
    monkeypatch.delenv("WAYLAND_DISPLAY", raising=False)
    video = np.zeros((5, 8, 10, 3), np.uint8)
    assert viz.play_video(video, "clip", saved_at="somewhere.gif") is False
    assert "no display found: not opening a window; the video is in somewhere.gif" in capsys.readouterr().out
    assert viz.play_video(video, "clip", "old-style.gif") is False              # pre-args signature
    assert "old-style.gif" in capsys.readouterr().out
    args = type("Args", (), {"out": str(tmp_path), "headless": True})()
    assert viz.play_video(video, "my clip", args) is False
    assert (tmp_path / "my_clip.gif").exists()
    assert "--headless: not opening a window" in capsys.readouterr().out


@pytest.mark.slow
def test_sysid_save_report_labels_and_overlay(tmp_path, monkeypatch):
    monkeypatch.delenv("DISPLAY", raising=False)
    from tigradsim.scenes.rigid_push import PushScene
    tgs.init(precision="f64")
    sc = PushScene("box", push=20.0, duration=0.1, dt=1 / 480, every=24, res=16, sigma=1e-3)
    sc.set_mass(1.5)
    target = sc.target()
    sc.set_mass(0.8)
    initial = sc.fit.render()
    sc.fit.optimizer = tgs.Adam(sc.fit.params, lr=0.1)
    sc.fit.fit(target, iters=2, log_every=0)
    paths = sc.fit.save_report(str(tmp_path), target, initial, truth={"mass": 1.5}, show=True)
    assert set(paths) == {"loss_plot", "param_plot", "gif", "overlay"}
    strip = load_video(paths["gif"])
    assert strip.shape[0] == len(target)
    assert strip.shape[2] >= 3 * 192                     # panels upscaled so their labels fit
    assert os.path.exists(paths["overlay"])
    from PIL import Image
    ov = np.asarray(Image.open(paths["overlay"]).convert("RGB")).astype(int)
    assert ((ov[..., 0] == 255) & (ov[..., 1] == 0) & (ov[..., 2] == 0)).sum() > 20
    name = sc.fit.params[0].name
    assert name and sc.fit._param_lines({name: 1.5}) == f"{name} 1.5"


def test_control_save_report_labels_and_overlay(tmp_path):
    from tigradsim import control
    H = W = 24
    target = _disc(H, W, 15, 12, 5)
    video = np.stack([_disc(H, W, 5 + k, 12, 5) for k in range(8)])[..., None]
    paths = control.save_report(str(tmp_path), [[1.0, 0.4, 0.1]], target, video, "control")
    assert set(paths) == {"loss_plot", "gif", "overlay"}
    gif = load_video(paths["gif"])
    assert gif.shape[0] == 8 and gif.shape[2] == 2 * 7 * W + 4          # two panels upscaled to >= 160 px
    bar = gif.shape[1] - 7 * H
    assert bar > 10 and (gif[0, :bar, :7 * W].astype(int).sum(-1) < 200).sum() > 10   # "target" label
    assert (gif[:, bar:, :7 * W] == gif[:1, bar:, :7 * W]).all()            # the target image is held
    from PIL import Image
    ov = np.asarray(Image.open(paths["overlay"]).convert("RGB")).astype(int)
    red = (ov[..., 0] == 255) & (ov[..., 1] == 0) & (ov[..., 2] == 0)
    scale = ov.shape[0] // H
    big = np.repeat(np.repeat(video[-1, ..., 0] > 0.5, scale, 0), scale, 1)
    assert np.array_equal(red, outline(big, 2))                            # the final frame's outline


# -- a window under a virtual X display ------------------------------------------
@pytest.fixture
def xvfb():
    """A private virtual X display ":N"; Xvfb picks a free N itself (-displayfd), so test runs
    side by side never share or race for a display."""
    exe = shutil.which("Xvfb")
    if exe is None:
        pytest.skip("no Xvfb binary (apt-get install xvfb): the window screenshot test needs a virtual X display")
    import select
    read_fd, write_fd = os.pipe()
    # -noreset: by default the server resets whenever its last client disconnects (each screenshot
    # here is a client), refusing connections meanwhile, so the demo's window could fail to open
    proc = subprocess.Popen([exe, "-displayfd", str(write_fd), "-screen", "0", "1024x768x24", "-nolisten", "tcp",
                             "-noreset"],
                            pass_fds=(write_fd,), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    os.close(write_fd)
    number = b""
    deadline = time.time() + 30
    while not number.endswith(b"\n") and time.time() < deadline:
        if select.select([read_fd], [], [], 0.5)[0]:
            chunk = os.read(read_fd, 16)
            if not chunk:
                break
            number += chunk
    os.close(read_fd)
    if not number.strip().isdigit():
        proc.kill()
        pytest.fail(f"Xvfb did not report a display number (exit code {proc.poll()}, got {number!r})")
    yield f":{int(number)}"
    proc.terminate()
    proc.wait(timeout=10)


def _grab(display):
    from PIL import ImageGrab
    return np.asarray(ImageGrab.grab(xdisplay=display).convert("RGB")).astype(int)


def _run_and_grab(display, argv, looks_right, timeout=300):
    """Run argv with DISPLAY set; grab the screen until `looks_right(shot)`; return (shot, stdout, rc)."""
    env = dict(os.environ, DISPLAY=display)
    proc = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    shot, start = None, time.time()
    try:
        while proc.poll() is None and time.time() - start < timeout:
            candidate = _grab(display)
            if looks_right(candidate):
                shot = candidate
                break
            time.sleep(0.2)
        out, _ = proc.communicate(timeout=max(1.0, timeout - (time.time() - start)))
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    return shot, out, proc.returncode


def _window_box(shot):
    """Bounding box (y0, y1, x0, x1) of the non-black screen area (the root window of Xvfb is black)."""
    lit = shot.sum(-1) > 0
    ys, xs = np.nonzero(lit)
    return ys.min(), ys.max() + 1, xs.min(), xs.max() + 1


def _mesh_blue(shot):
    """Pixels of the demo's box colour 0x60A0E0 under flat shading (blue clearly above red and green)."""
    r, g, b = shot[..., 0], shot[..., 1], shot[..., 2]
    return (b > 90) & (b - r > 50) & (b >= g)


@pytest.mark.slow
@pytest.mark.parametrize("window", ["gui", "ggui"])
def test_demo_window_under_xvfb_shows_the_scene(xvfb, window, tmp_path, monkeypatch):
    if window == "ggui":
        monkeypatch.setenv("DISPLAY", xvfb)            # the probe opens a window on this display
        monkeypatch.setattr(viz_ggui, "_ggui_state", {})    # and is not cached from another display
        ok, reason = viz.ggui_available()
        if not ok:
            pytest.skip(f"no GGUI 3D window here ({reason}); the 2D window is checked by the 'gui' case")
    argv = [sys.executable, "demos/rigid_bounce.py", "--steps", "400", "--every", "20", "--no-wait",
            "--speed", "0.1", "--window", window, "--out", str(tmp_path)]

    def caption_pixels(shot):
        """Dark text pixels in the top-left corner of the window (the caption; GGUI: its panel)."""
        y0, _, x0, _ = _window_box(shot)
        return int((shot[y0:y0 + 60, x0:x0 + 200].max(-1) < 80).sum())

    def looks_right(shot):       # the first GGUI frame comes before its caption panel: wait for both
        return shot.sum(-1).max() > 0 and _mesh_blue(shot).sum() > 100 and caption_pixels(shot) > 20

    shot, out, rc = _run_and_grab(xvfb, argv, looks_right)
    assert rc == 0, out[-3000:]
    assert shot is not None, f"no screenshot showed the box while the window was up; output:\n{out[-3000:]}"
    from PIL import Image
    Image.fromarray(shot.astype(np.uint8)).save(tmp_path / f"screenshot_{window}.png")
    y0, y1, x0, x1 = _window_box(shot)
    assert (y1 - y0) >= 200 and (x1 - x0) >= 200, (y0, y1, x0, x1)
    region = shot[y0:y1, x0:x1]
    colors, counts = np.unique(region.reshape(-1, 3), axis=0, return_counts=True)
    assert len(colors) > 10 and counts.max() < 0.98 * counts.sum()    # not a uniform window
    light = (region.min(-1) > 200).mean()
    assert light > 0.3, f"the light background covers only {light:.0%} of the window"
    assert _mesh_blue(region).sum() > 100
    result = json.loads(out.strip().splitlines()[-1])
    assert result["steps"] == 400
    assert "playing" in out and "--no-wait" in out                  # said it plays once, and returned


@pytest.mark.slow
def test_play_video_window_under_xvfb(xvfb, tmp_path):
    """An image video plays in a 2D window (the frame is on screen) and --no-wait returns True; a
    video taller than the largest window is shown reduced to fit (and says so)."""
    script = tmp_path / "clip.py"
    script.write_text(
        "import argparse, numpy as np, tigradsim as tgs\n"
        "from tigradsim.io.viz import add_view_args, play_video\n"
        "tgs.init(arch='cpu')\n"
        "args = add_view_args(argparse.ArgumentParser()).parse_args()\n"
        "video = np.full((12, 1200, 300, 3), 240, np.uint8)\n"
        "video[:, 100:400, 50:250] = (220, 30, 30)\n"
        "print('shown', play_video(video, 'clip', args, saved_at='clip.gif', fps=4))\n")
    argv = [sys.executable, str(script), "--no-wait", "--speed", "0.5"]

    def looks_right(shot):
        red = (shot[..., 0] > 180) & (shot[..., 1] < 80) & (shot[..., 2] < 80)
        return red.sum() > 1000

    shot, out, rc = _run_and_grab(xvfb, argv, looks_right, timeout=240)
    assert rc == 0, out[-3000:]
    assert shot is not None, f"the video never showed on screen; output:\n{out[-3000:]}"
    assert "shown True" in out
    assert "the video is 300 x 1200 pixels: shown at 79% (full size: clip.gif)" in out
    y0, y1, x0, x1 = _window_box(shot)
    assert y1 - y0 <= 950 and abs((x1 - x0) - 237) <= 2, (y0, y1, x0, x1)


# -- colliders --------------------------------------------------------------------
def _collider_model():
    """A box, a sphere, a capsule and a mesh (an icosphere) collider in a row on the ground, a wall (a plane with
    normal +z) behind them, and one particle: the model a scene file with [colliders] builds."""
    b = tgs.SceneBuilder()
    b.add_collider("box", (0.2, 0.2, 0.2), (-0.9, 0.2, 0.0))
    b.add_collider("sphere", 0.2, (-0.3, 0.2, 0.0))
    b.add_collider("capsule", (0.12, 0.12), (0.3, 0.24, 0.0))
    b.add_collider("mesh", position=(0.9, 0.2, 0.0), mesh=tgs.meshes.icosphere(1, radius=0.2))
    b.add_collider("plane", position=(0.0, 0.0, -1.0), rotation=tgs.quat_from_normal((0.0, 0.0, 1.0)))
    b.add_particles([[0.0, 1.0, 0.0]])
    return b.finalize(requires_grad=False)


def test_colliders_are_drawn_with_their_surfaces(f32):
    """`Animation.colliders` draws every collider kind where it is, in the scene renders' colour, a plane as a
    finite square; an object's mesh in front of a collider hides it though it was added first (the 2D viewer
    draws the colliders first), and so does a finer sheet lying 5 mm above a sphere collider (in one painter sort
    with the sphere's triangles, measured: 8 % of the sheet's pixels at the sphere's centre showed the sphere)."""
    model = _collider_model()
    eye, target = (0.0, 1.0, 3.0), (0.0, 0.3, 0.0)
    anim = viz.Animation(0.05, eye=eye, target=target, ground=False, ground_extent=1.5, res=(320, 240))
    front_v, front_f = tgs.meshes.box_surface((0.2, 0.2, 0.05))
    anim.mesh(front_v + [-0.3, 0.2, 0.35], front_f, color=0x3060E0)          # in front of the sphere
    anim.colliders(model)
    assert len(anim.layers) == 6
    image = anim.render_frames()[0].astype(np.int64)
    project = viz.look_at_projection(eye, target, aspect=320 / 240)

    def pixel(p):
        x, y = project(np.array([p]))[0]
        return image[int(round((1 - y) * 240)), int(round(x * 320))]

    def collider_coloured(rgb):          # COLLIDER_RGB (0.69, 0.53, 0.31) under the 2D viewer's flat shading
        r, g, b = rgb
        return r > g > b and r - b > 40

    for name, centre in (("box", (-0.9, 0.2, 0.2)), ("capsule", (0.3, 0.24, 0.12)), ("mesh", (0.9, 0.2, 0.2)),
                         ("wall", (0.0, 1.2, -1.0)), ("sphere", (-0.3, 0.35, 0.1))):
        assert collider_coloured(pixel(centre)), f"{name}: {pixel(centre)} at its surface, expected the collider colour"
    r, g, b = pixel((-0.3, 0.2, 0.375))
    assert b - r > 60, f"the blue box in front of the sphere is hidden by it: {(r, g, b)}"
    sheet_v, sheet_f = tgs.meshes.icosphere(3, radius=0.205, center=(-0.3, 0.2, 0.0))
    anim.mesh(sheet_v, sheet_f[sheet_v[sheet_f].mean(axis=1)[:, 2] > -0.3], color=0x3060E0)   # over the sphere
    image = anim.render_frames()[0].astype(np.int64)
    lit = image[:, :, 2] - image[:, :, 0] > 60
    x, y = project(np.array([[-0.3, 0.2, 0.0]]))[0]
    cx, cy = int(round(x * 320)), int(round((1 - y) * 240))
    disc = image[cy - 12:cy + 12, cx - 12:cx + 12]
    assert lit[cy - 12:cy + 12, cx - 12:cx + 12].all(), f"the sphere shows through the sheet over it: {disc}"
    # the wall is a finite square: half side ground_extent (1.5 m) about the camera's target's foot on it
    assert not collider_coloured(pixel((1.8, 0.3, -1.0)))
    assert collider_coloured(pixel((1.3, 0.3, -1.0)))


def test_colliders_bad_input_and_refined_surfaces(f32):
    anim = viz.Animation(0.05)
    with pytest.raises(TypeError, match="model: expected a tigradsim Model"):
        anim.colliders("scene.toml")
    model = _collider_model()
    with pytest.raises(ValueError, match=r"extent=0: expected a positive half side"):
        anim.colliders(model, extent=0)
    with pytest.raises(ValueError, match=r"center=\(1, 2\): expected a finite point"):
        anim.colliders(model, center=(1, 2))
    # with the ground drawn, the wall's pieces wholly under it are left out (those across y = 0 stay)
    walls = [viz.Animation(0.05, ground=g).colliders(model).layers[-1] for g in (False, True)]
    top_y = [layer["data"][0][layer["faces"]][:, :, 1].max(axis=1) for layer in walls]
    assert top_y[0].min() < -1.0 and top_y[1].min() > -1e-9 and top_y[1].max() == top_y[0].max()
    from tigradsim.io.animation import refine_triangles
    v, f = np.array([[0.0, 0.0, 0.0], [2.0, 0.0, 0.0], [0.0, 0.0, 1.0]]), np.array([[0, 1, 2]])
    rv, rf = refine_triangles(v, f, 0.3)
    tri = rv[rf]
    edges = np.linalg.norm(tri - np.roll(tri, 1, axis=1), axis=2)
    assert edges.max() <= 0.3 and len(rf) == 4 ** 3           # the longest edge, sqrt(5) m, cut 3 times
    normals = np.cross(tri[:, 1] - tri[:, 0], tri[:, 2] - tri[:, 0])
    assert np.allclose(normals[:, 1], normals[0, 1]) and normals[0, 1] < 0    # same winding as the original
    assert np.isclose(0.5 * np.linalg.norm(normals, axis=1).sum(), 1.0)      # the same area
