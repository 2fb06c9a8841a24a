"""Footage as a target: reading frames and masks, GIF round trips, background plates,
and frames at footage times (steps, interpolation, checkpointing, gradients)."""
import numpy as np
import pytest
import taichi as ti

import tigradsim as tgs
from tigradsim.io import video
from tigradsim.io.footage import Footage, TimedVertices, dt_for_fps, frame_steps


# ------------------------------------------------------------------ files
def test_gif_round_trip_keeps_every_frame_and_grey(tmp_path):
    """Pillow merges identical consecutive frames (25 came back as 15) and expands grey to RGB."""
    grey = np.zeros((25, 9, 7), np.uint8)
    for k in range(25):
        grey[k] = (k // 3) * 20          # runs of three identical frames
    grey[:, 4, 2] = 255
    back = video.load_video(video.save_gif(grey, tmp_path / "g.gif", fps=15))
    assert back.shape == (25, 9, 7, 1)
    np.testing.assert_array_equal(back[..., 0], grey)
    rgb = np.zeros((6, 5, 4, 3), np.uint8)
    rgb[:, :, :2] = (255, 0, 0)
    rgb[3:, :, 2:] = (0, 0, 255)
    back = video.load_video(video.save_gif(rgb, tmp_path / "c.gif", fps=24))
    assert back.shape == (6, 5, 4, 3)
    np.testing.assert_array_equal(back, rgb)          # two colours: exact after palette quantisation


def test_frame_folder_patterns(tmp_path):
    frames = np.random.default_rng(0).integers(0, 255, (12, 6, 5, 3)).astype(np.uint8)
    masks = (np.random.default_rng(1).random((12, 6, 5)) > 0.5).astype(np.uint8) * 255
    video.save_frames(frames, tmp_path, prefix="rgb")
    video.save_frames(masks, tmp_path, prefix="mask")
    with pytest.raises(ValueError, match="several kinds.*pattern="):
        video.load_video(tmp_path)
    np.testing.assert_array_equal(video.load_video(tmp_path, pattern="rgb_%04d.png"), frames)
    np.testing.assert_array_equal(video.load_video(tmp_path / "mask_*.png")[..., 0], masks)
    with pytest.raises(ValueError, match="matches no image"):
        video.load_video(tmp_path, pattern="depth_*.png")
    with pytest.raises(ValueError, match="exactly one integer field"):
        video.load_video(tmp_path, pattern="rgb_%04d_%d.png")
    # natural order: f_2 before f_10
    for k in (10, 2, 1):
        video.save_frames(np.full((1, 2, 2), k, np.uint8), tmp_path / "nat", prefix=f"f_{k}")
    assert video.load_video(tmp_path / "nat")[:, 0, 0, 0].tolist() == [1, 2, 10]
    clip = tgs.load_footage(tmp_path, fps=30, start_time=0.1, pattern="rgb_%04d.png", masks=tmp_path,
                            mask_pattern="mask_*.png")
    assert len(clip) == 12 and clip.masks.shape == (12, 6, 5)
    np.testing.assert_allclose(clip.frames, frames / 255.0)
    np.testing.assert_allclose(clip.times, 0.1 + np.arange(12) / 30)


# ------------------------------------------------------------------ Footage
def test_footage_checks_and_conversions():
    rng = np.random.default_rng(0)
    f = rng.random((4, 6, 5, 3))
    with pytest.raises(ValueError, match="looks like 0-255; divide by 255"):
        Footage(f * 255, fps=30)
    with pytest.raises(ValueError, match="fps"):
        Footage(f, fps=0)
    with pytest.raises(ValueError, match="fps: needed"):
        Footage(f)
    with pytest.raises(ValueError, match="3 mask frames for 4 frames"):
        Footage(f, fps=30, masks=np.ones((3, 6, 5)))
    with pytest.raises(ValueError, match="mask frames are 6x4"):
        Footage(f, fps=30, masks=np.ones((4, 6, 4)))
    with pytest.raises(ValueError, match="integer frames must lie in 0-255"):
        Footage(np.full((2, 3, 3), 300), fps=30)
    soft = rng.random((4, 6, 5))
    rgba_mask = np.concatenate([np.ones((4, 6, 5, 3)), soft[..., None]], -1)
    np.testing.assert_allclose(Footage(f, 30, masks=rgba_mask).masks, soft)            # RGBA: the alpha
    np.testing.assert_allclose(Footage(f, 30, masks=np.repeat(soft[..., None], 3, -1)).masks, soft)  # RGB grey
    np.testing.assert_allclose(Footage((soft > 0.5).astype(np.uint8) * 255, 30).frames[..., 0],
                               (soft > 0.5).astype(float))
    cut = Footage(np.concatenate([f, soft[..., None]], -1), 30)                      # RGBA frames: alpha = masks
    assert cut.channels == 3 and np.allclose(cut.masks, soft)
    clip = Footage(f, fps=20, start_time=0.05, masks=soft)
    half = clip[::2]
    assert isinstance(half, Footage) and len(half) == 2
    np.testing.assert_allclose(half.times, [0.05, 0.15])
    np.testing.assert_allclose(half.masks, soft[::2])
    with pytest.raises(ValueError, match="strictly increasing"):
        clip.subset([2, 1])


def test_estimate_background_outside_masks():
    rng = np.random.default_rng(3)
    H, W, K = 12, 14, 7
    plate = rng.random((H, W, 3))
    frames = np.repeat(plate[None], K, 0) + rng.normal(0, 0.01, (K, H, W, 3))
    masks = np.zeros((K, H, W))
    for k in range(K):                      # a 3x3 square moving right, coloured unlike the plate
        masks[k, 4:7, 1 + 2 * k:4 + 2 * k] = 1.0
        frames[k, 4:7, 1 + 2 * k:4 + 2 * k] = (1.0, 0.0, 1.0)
    frames = np.clip(frames, 0, 1)
    est, frac = Footage(frames, 30, masks=masks).estimate_background(dilate=1, return_fraction=True)
    assert frac == 0.0 and est.shape == (H, W, 3)
    assert np.abs(est - plate).max() < 0.04            # median of noisy background samples
    # a square that never moves: its pixels are never background -> filled from neighbours, reported
    still = np.repeat(masks[:1], K, 0)
    clip = Footage(frames, 30, masks=still)
    with pytest.warns(UserWarning, match="never background"):
        est2 = clip.estimate_background(dilate=1)
    assert clip.unseen_fraction == pytest.approx((9 + 4 * 3) / (H * W))    # 3x3 grown by 1 px (4-neighbours)
    assert np.all(np.isfinite(est2)) and est2.min() >= 0 and est2.max() <= 1
    assert clip.background is est2


# ------------------------------------------------------------------ time matching
def test_frame_steps_and_dt_for_fps():
    n, a = frame_steps([0.0, 0.025, 0.05, 0.1 * (1 - 1e-14)], 0.01)     # round-off below a step
    assert n.tolist() == [0, 2, 5, 10] and np.allclose(a, [0, 0.5, 0, 0])
    n, a = frame_steps([0.026, 0.034], 0.01, mode="nearest")
    assert n.tolist() == [3, 3] and np.all(a == 0)
    with pytest.raises(ValueError, match="before the simulation starts"):
        frame_steps([-0.01, 0.0], 0.01)
    with pytest.raises(ValueError, match=r"needs step 11.*10 steps"):
        frame_steps([0.05, 0.105], 0.01, max_step=10)
    with pytest.raises(ValueError, match="mode"):
        frame_steps([0.0], 0.01, mode="cubic")
    dt = dt_for_fps(30, 1e-3)
    assert dt <= 1e-3 and (1 / 30) / dt == pytest.approx(round((1 / 30) / dt), abs=1e-9)
    assert dt == pytest.approx(1 / 30 / 34)
    assert dt_for_fps(25, 0.04) == pytest.approx(0.04)


def test_observe_explicit_steps(f64):
    b = tgs.SceneBuilder(gravity=(0, -10, 0))
    b.add_particle((0, 1, 0))
    sim = tgs.Simulator(b.finalize(requires_grad=False), dt=0.01, steps=20)
    seen = []
    assert sim.observe(lambda st, slot, frame: seen.append((slot, frame)), steps=[0, 3, 7, 20]) == 4
    sim.run()
    assert seen == [(0, 0), (3, 1), (7, 2), (20, 3)]
    with pytest.raises(ValueError, match="strictly increasing"):
        sim.observe(lambda *a: None, steps=[0, 5, 5])
    with pytest.raises(ValueError, match=r"in \[0, 20\]"):
        sim.observe(lambda *a: None, steps=[0, 21])
    with pytest.raises(ValueError, match="exactly one of every= .* and steps="):
        sim.observe(lambda *a: None, every=2, steps=[1])
    with pytest.raises(ValueError, match="every"):
        sim.observe(lambda *a: None, every=0)
    with pytest.raises(ValueError, match="every: must be an integer >= 1"):     # was a ZeroDivisionError
        tgs.CenterOfMassRecorder(sim, every=0)


def _falling(checkpoint_every, grad=False):
    b = tgs.SceneBuilder(gravity=(0, -9.8, 0))
    v0 = np.array([[0.7, 2.0, -0.3], [-0.2, 0.5, 0.4]])
    b.add_particles([[0.0, 1.0, 0.0], [0.3, 2.0, 0.1]], velocities=v0)
    model = b.finalize(requires_grad=grad)
    sim = tgs.Simulator(model, dt=0.004, steps=100, checkpoint_every=checkpoint_every)
    return model, sim, v0


@pytest.mark.parametrize("checkpoint_every", [None, 7])
def test_frames_at_footage_times_free_fall(f64, checkpoint_every):
    """Frames at 30 fps (1/30 s is not a multiple of dt = 4 ms) land at the right times."""
    model, sim, v0 = _falling(checkpoint_every)
    times = 0.013 + np.arange(11) / 30.0
    interp = TimedVertices(sim, times, mode="interpolate")
    near = TimedVertices(sim, times, mode="nearest")
    full = tgs.ParticleRecorder(sim, every=1) if checkpoint_every is None else None
    sim.run()
    x0, g, dt = model.particle_q0.to_numpy(), np.array([0, -9.8, 0]), sim.dt
    t = times[:, None, None]
    exact = x0 + v0 * t + 0.5 * g * t ** 2                    # the continuous trajectory
    # semi-implicit Euler: x_n = x0 + v0 n dt + g dt^2 n (n + 1) / 2, i.e. exact + g dt t / 2
    discrete = exact + 0.5 * g * dt * t
    np.testing.assert_allclose(interp.numpy(), discrete, atol=1e-12 + 0.125 * 9.8 * dt ** 2)
    integrator = 0.5 * 9.8 * dt * times.max() + 0.125 * 9.8 * dt ** 2 + 1e-12   # O(dt) from the integrator
    assert np.abs(interp.numpy() - exact).max() <= integrator
    # nearest: time error <= dt / 2, so position error <= |v| dt / 2 (plus the integrator's)
    speed = np.linalg.norm(v0[None] + g * t, axis=-1).max()
    assert near.max_time_error <= dt / 2 + 1e-12
    assert np.abs(near.numpy() - exact).max() <= speed * dt / 2 + integrator
    assert np.abs(near.numpy() - exact).max() > np.abs(interp.numpy() - exact).max()
    if full is not None:                # interpolation is exactly the blend of the stored steps
        n, a = frame_steps(times, dt)
        xs = full.numpy()
        np.testing.assert_allclose(interp.numpy(), (1 - a)[:, None, None] * xs[n] + a[:, None, None] * xs[n + 1],
                                   rtol=0, atol=1e-14)


def test_timed_vertices_gradient_with_checkpoints(f64):
    """FD check of the interpolating observer; frames straddle segment boundaries (steps 6|7, 13|14, ...)."""
    results = []
    for ck in (None, 7):
        model, sim, _ = _falling(ck, grad=True)
        times = np.array([0.0, 0.026, 0.0281, 0.09, 0.2, 0.3999])
        timed = TimedVertices(sim, times)
        assert timed.steps.tolist()[1:3] == [6, 7]
        target = np.random.default_rng(0).normal(0, 0.05, (len(times), 2, 3))
        sim.run()
        mse = tgs.MSELoss(timed.vertices, timed.numpy() + target)

        def run():
            mse.value[None] = 0
            sim.run()
            mse()

        tgs.check_gradient(run, mse.value, [model.particle_qd0, model.particle_q0], n_dirs=3,
                           rtol=1e-6).assert_ok()
        with ti.ad.Tape(mse.value):
            run()
        results.append(model.particle_qd0.grad.to_numpy().copy())
    np.testing.assert_allclose(results[1], results[0], rtol=1e-12, atol=1e-15)


def test_rigid_vertices_at_times(f64):
    """source='rigid' records RigidSurface's vertex layout; on exact steps it equals it."""
    from tigradsim.physics.rigid import RigidSurface
    from tigradsim.renderers import box
    v, f = box((0.2, 0.1, 0.15))
    b = tgs.SceneBuilder(gravity=(0, -9.8, 0))
    b.add_rigid_body(v, f, mass=1.0, position=(0, 1, 0), velocity=(0.5, 0.0, 0.0), angular_velocity=(1, 2, 0))
    sim = tgs.Simulator(b.finalize(requires_grad=False), dt=0.01, steps=30)
    surf = RigidSurface(sim, every=10)
    timed = TimedVertices(sim, [0.0, 0.1, 0.15, 0.2, 0.3], source="rigid")
    sim.run()
    np.testing.assert_allclose(timed.numpy()[[0, 1, 3, 4]], surf.numpy(), atol=1e-13)
    mid = timed.numpy()[2]
    assert np.abs(mid - 0.5 * (surf.numpy()[1] + surf.numpy()[2])).max() < 0.02   # between steps 10 and 20


def test_footage_from_mp4_and_gif(tmp_path):
    """Movie files as footage (MP4 needs the `video` extra: imageio-ffmpeg)."""
    import importlib.util
    rng = np.random.default_rng(0)
    frames = np.zeros((8, 16, 16, 3))
    for k in range(8):                          # a bright square moving on a dark plate
        frames[k, 4:10, k:k + 6] = (0.9, 0.8, 0.2)
    masks = np.zeros((8, 16, 16))
    masks[np.any(frames > 0, axis=-1)] = 1.0
    gif = tgs.load_footage(video.save_gif(frames, tmp_path / "a.gif", fps=12.5), masks=masks)   # fps from the file
    assert gif.fps == 12.5 and len(gif) == 8 and gif.channels == 3 and np.abs(gif.frames - frames).max() < 0.02
    if importlib.util.find_spec("imageio_ffmpeg") is None:
        pytest.skip("imageio-ffmpeg (the `video` extra) is not installed")
    clip = tgs.load_footage(video.save_mp4(frames + rng.uniform(0, 0.02, frames.shape), tmp_path / "a.mp4", fps=10),
                            masks=masks)
    assert clip.fps == pytest.approx(10) and len(clip) == 8 and clip.frames.shape == (8, 16, 16, 3)
    assert np.abs(clip.frames - frames).mean() < 0.05           # lossy H.264
    with pytest.warns(UserWarning, match="never background"):     # column 6 is covered in every frame
        plate = clip.estimate_background(dilate=1)
    assert np.abs(plate).max() < 0.1
