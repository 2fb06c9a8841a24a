"""Footage files read at their own depth, or refused with one FootageError naming the file
(issue 45, item 1): 16-bit PNG and TIFF frames and masks come back to their last bit through
`tgs.Footage` / `load_footage`, the scene file's footage (`tigradsim fit` / `render`) and image
targets; a truncated PNG, a text file named .png, a 32-bit integer image, a float image outside
[0, 1], frames of different sizes and a gap in the frame numbers are errors.  No kernels."""
import numpy as np
import pytest
from PIL import Image

import tigradsim as tgs
from image_writers import png_bytes, tiff_bytes, write
from tigradsim.core.errors import FootageError
from tigradsim.io import video
from tigradsim.renderers.losses import load_target

K, H, W = 3, 4, 300
LSB = 1.0 / 65535.0


def _ramp():
    """(K, H, W) 0-1 ramps along x, shifted per frame, as uint16 and as the exact values."""
    x = (np.arange(W)[None, None, :] + 17 * np.arange(K)[:, None, None]) % W / (W - 1.0)
    exact = np.broadcast_to(x, (K, H, W))
    return np.round(exact * 65535).astype(np.uint16), exact


def _soft_disc(size=24):
    """(K, size, size) antialiased discs (soft edges, values across (0, 1)) as uint16."""
    y, x = np.mgrid[:size, :size] + 0.5
    discs = [np.clip(6.0 - np.hypot(x - 9 - 2 * k, y - 12), 0.0, 1.0) for k in range(K)]
    return np.round(np.stack(discs) * 65535).astype(np.uint16)


def test_16bit_grey_png_ramp_and_soft_masks_through_footage(tmp_path):
    """A 0-1 ramp saved as a 16-bit PNG (Pillow, as a user saves one) is the ramp, not its
    value modulo 256 (a sawtooth); antialiased 16-bit mask edges are exact."""
    ramp16, exact = _ramp()
    masks16 = _soft_disc()
    for k in range(K):
        Image.fromarray(ramp16[k]).save(tmp_path / f"rgb_{k:04d}.png")
        Image.fromarray(masks16[k]).save(tmp_path / f"mask_{k:04d}.png")
    clip = tgs.load_footage(tmp_path, fps=30, pattern="rgb_%04d.png")
    assert clip.frames.shape == (K, H, W, 1)
    assert np.abs(clip.frames[..., 0] - exact).max() <= 0.5 * LSB + 1e-12
    assert np.corrcoef(clip.frames.ravel(), exact.ravel())[0, 1] > 0.999999
    soft_dir = tmp_path / "soft"
    soft_dir.mkdir()
    for k in range(K):
        Image.fromarray(masks16[k]).save(soft_dir / f"m_{k:02d}.png")
        Image.fromarray(np.full((24, 24), 40000, np.uint16)).save(soft_dir / f"f_{k:02d}.png")
    soft = tgs.Footage(soft_dir, fps=30, pattern="f_*.png", masks=soft_dir, mask_pattern="m_*.png")
    np.testing.assert_array_equal(soft.masks, masks16 / 65535.0)
    edge = (masks16 > 0) & (masks16 < 65535)
    assert edge.sum() > 20                                          # the antialiased edge is there
    np.testing.assert_allclose(soft.frames, 40000 / 65535.0)
    # a uint16 array (what imageio returns for a 16-bit PNG) is 0-65535, not an error
    np.testing.assert_array_equal(tgs.Footage(ramp16, fps=30).frames[..., 0], ramp16 / 65535.0)


@pytest.mark.parametrize("channels", [1, 2, 3, 4])
def test_16bit_png_every_colour_type_to_the_last_bit(tmp_path, channels):
    """Grey, grey + alpha, RGB and RGBA 16-bit PNGs, with every PNG row filter: every sample
    exact (Pillow alone reads colour types to 8 bits)."""
    rng = np.random.default_rng(channels)
    pages = rng.integers(0, 65536, (K, 7, 9, channels)).astype(np.uint16)
    for k in range(K):
        write(tmp_path / f"f_{k}.png", png_bytes(pages[k], 16, filters=[0, 1, 2, 3, 4]))
    want = pages if channels != 2 else np.concatenate([pages[..., :1]] * 3 + [pages[..., 1:]], -1)
    np.testing.assert_array_equal(load_target(tmp_path) * 65535.0, want.astype(np.float64))   # image-loss targets
    np.testing.assert_array_equal(video.load_frames(tmp_path) * 65535.0, want.astype(np.float64))
    # load_video: uint8, rounded (not the low byte)
    np.testing.assert_array_equal(video.load_video(tmp_path), (want / 65535.0 * 255.0 + 0.5).astype(np.uint8))


@pytest.mark.parametrize("byte_order", ["<", ">"])
def test_16bit_tiff_grey_and_colour(tmp_path, byte_order):
    rng = np.random.default_rng(7)
    for channels, deflate in ((1, False), (3, False), (4, False), (1, True), (3, True), (4, True)):
        pages = rng.integers(0, 65536, (K, 5, 6, channels)).astype(np.uint16)
        folder = tmp_path / f"c{channels}{'z' if deflate else ''}"
        folder.mkdir()
        for k in range(K):
            write(folder / f"f_{k}.tif", tiff_bytes(pages[k], byte_order, deflate=deflate))
        np.testing.assert_array_equal(load_target(folder) * 65535.0, pages.astype(np.float64))
        np.testing.assert_array_equal(video.load_frames(folder) * 65535.0, pages.astype(np.float64))
    ramp16, exact = _ramp()
    Image.fromarray(ramp16[0]).save(tmp_path / "pillow.tif")                  # Pillow's own 16-bit TIFF
    assert np.abs(video.load_frames(tmp_path / "pillow.tif")[0, ..., 0] - exact[0]).max() <= 0.5 * LSB + 1e-12
    Image.fromarray(exact[0].astype(np.float32)).save(tmp_path / "float.tif")  # 32-bit float, values in [0, 1]
    np.testing.assert_allclose(video.load_frames(tmp_path / "float.tif")[0, ..., 0], exact[0], atol=1e-7)


def test_16bit_scene_footage_masks_plate_and_image_targets(tmp_path):
    """The scene file's footage (what `tigradsim fit` and `render` read) and image-loss targets
    given as paths read 16-bit files at full depth too."""
    from test_scene_file import _scene
    from tigradsim.scenes.scene_build import load_scene_footage
    from tigradsim.scenes.scene_file import parse_scene

    data = _scene(tmp_path, **{"footage.background": "clip/plate.png"})
    rng = np.random.default_rng(3)
    frames = rng.integers(0, 65536, (3, 8, 8, 3)).astype(np.uint16)
    y, x = np.mgrid[:8, :8] + 0.5
    masks = np.stack([np.round(np.clip(2.6 - np.hypot(x - 4 - 0.3 * k, y - 4), 0, 1) * 65535) for k in range(3)])
    masks = masks.astype(np.uint16)
    plate = rng.integers(0, 65536, (8, 8, 3)).astype(np.uint16)
    for k in range(3):
        write(tmp_path / "clip" / f"rgb_{k:04d}.png", png_bytes(frames[k]))
        Image.fromarray(masks[k]).save(tmp_path / "clip" / f"mask_{k:04d}.png")
    write(tmp_path / "clip" / "plate.png", png_bytes(plate))
    footage = load_scene_footage(parse_scene(data, str(tmp_path / "scene.toml")))
    np.testing.assert_array_equal(footage.frames * 65535.0, frames.astype(np.float64))
    np.testing.assert_array_equal(footage.masks * 65535.0, masks.astype(np.float64))
    np.testing.assert_array_equal(footage.background * 65535.0, plate.astype(np.float64))
    np.testing.assert_array_equal(load_target(tmp_path / "clip" / "mask_*.png")[..., 0] * 65535.0,
                                  masks.astype(np.float64))


def _folder_with(tmp_path, bad_name, bad_bytes):
    for k in range(3):
        Image.fromarray(np.full((6, 5, 3), 90, np.uint8)).save(tmp_path / f"rgb_{k:04d}.png")
    good = (tmp_path / bad_name).read_bytes() if (tmp_path / bad_name).exists() else b""
    write(tmp_path / bad_name, bad_bytes(good))
    return tmp_path


@pytest.mark.parametrize("case, damage, message", [
    ("truncated PNG", lambda good: good[:len(good) // 2], "truncated or corrupt"),
    ("text named .png", lambda good: b"frame 1: see the next file\n", "not an image file"),
    ("empty file", lambda good: b"", "not an image file"),
    ("PNG signature, then garbage", lambda good: good[:16] + bytes(range(40)), "truncated or corrupt"),
])
def test_unreadable_frame_is_one_footage_error_naming_the_file(tmp_path, case, damage, message):
    folder = _folder_with(tmp_path, "rgb_0001.png", damage)
    for read in (lambda: tgs.load_footage(folder, fps=30), lambda: video.load_video(folder),
                 lambda: tgs.Footage(np.zeros((3, 6, 5)), 30, masks=folder)):
        with pytest.raises(FootageError, match=message) as info:
            read()
        assert "rgb_0001.png" in str(info.value) and isinstance(info.value, ValueError)
    with pytest.raises(FootageError, match=r"^masks: .*rgb_0001.png"):
        tgs.Footage(np.zeros((3, 6, 5)), 30, masks=folder)


def test_unreadable_footage_in_a_scene_file_names_the_key_and_the_file(tmp_path):
    from test_scene_file import _scene
    from tigradsim.scenes.scene_build import load_scene_footage
    from tigradsim.scenes.scene_file import SceneError, parse_scene

    data = _scene(tmp_path)
    write(tmp_path / "clip" / "mask_0002.png", b"not a mask\n")
    with pytest.raises(SceneError, match=r"scene.toml: \[footage\] masks: .*mask_0002.png: not an image file"):
        load_scene_footage(parse_scene(data, str(tmp_path / "scene.toml")))
    png = (tmp_path / "clip" / "rgb_0001.png").read_bytes()
    write(tmp_path / "clip" / "rgb_0001.png", png[:len(png) - 30])
    with pytest.raises(SceneError, match=r"scene.toml: \[footage\] frames: .*rgb_0001.png: truncated"):
        load_scene_footage(parse_scene(data, str(tmp_path / "scene.toml")))


def test_modes_without_a_full_scale_and_inconsistent_folders(tmp_path):
    Image.fromarray(np.arange(20, dtype=np.int32).reshape(4, 5)).save(tmp_path / "int.tif")
    with pytest.raises(FootageError, match=r"int.tif: a 32-bit integer image"):
        video.load_frames(tmp_path / "int.tif")
    Image.fromarray(np.linspace(0, 3, 20, dtype=np.float32).reshape(4, 5)).save(tmp_path / "hdr.tif")
    with pytest.raises(FootageError, match=r"hdr.tif: a float image with values in \[0, 3\], not in \[0, 1\]"):
        video.load_frames(tmp_path / "hdr.tif")
    sizes = tmp_path / "sizes"
    sizes.mkdir()
    for k, shape in enumerate([(6, 5, 3), (6, 5, 3), (6, 4, 3)]):
        Image.fromarray(np.zeros(shape, np.uint8)).save(sizes / f"f_{k}.png")
    with pytest.raises(FootageError, match=r"f_2.png: 4x6 px with 3 channels, but .*f_0.png is 5x6 px"):
        tgs.load_footage(sizes, fps=30)
    gap = tmp_path / "gap"
    gap.mkdir()
    for k in (0, 1, 2, 4, 5):
        Image.fromarray(np.zeros((3, 3), np.uint8)).save(gap / f"rgb_{k:04d}.png")
    with pytest.raises(FootageError, match=r"jump from 2 \(rgb_0002.png\) to 4 \(rgb_0004.png\)"):
        tgs.load_footage(gap, fps=30)
    stride = tmp_path / "stride"                  # every other frame, numbered so: an even step is fine
    stride.mkdir()
    for k in (0, 2, 4, 6):
        Image.fromarray(np.zeros((3, 3), np.uint8)).save(stride / f"rgb_{k:04d}.png")
    assert len(tgs.load_footage(stride, fps=15)) == 4
