"""Property-based (hypothesis): malformed footage always gets one clear library error, a
FootageError (a ValueError) that names the file or the argument, never a raw traceback from
Pillow or numpy and never silence (issue 45, item 9, the footage half).

Folders: a valid clip (8-bit RGB frames and square masks, numbered rgb_%04d / mask_%04d) with
one defect drawn at random: a missing mask, a missing frame number, a frame of another size or
channel count, garbage bytes, a PNG cut inside its pixel data, text or nothing in a .png, a
32-bit integer or out-of-range / NaN float image, a two-page file, a 1-bit frame, every mask
black, a mask of another size.  Arrays: NaN or inf, wrong dtypes, out-of-range integers and
floats, wrong shapes, ragged lists, mask counts and sizes that do not match.  No kernels."""
import os
import tempfile

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from PIL import Image

import tigradsim as tgs
from tigradsim.core.errors import FootageError

FOLDER_DEFECTS = ("missing mask", "missing frame number", "frame size", "frame channels", "garbage bytes",
                  "truncated PNG", "text named .png", "empty file", "int32 image", "float image above 1",
                  "float image with NaN", "two pages", "1-bit frame", "every mask black", "mask size")
PNG_TAIL = 12 + 4 + 4          # IEND chunk, the IDAT's CRC, zlib's checksum: a cut before them loses pixels


def _tiff(path, arrays):
    images = [Image.fromarray(a) for a in arrays]
    images[0].save(path, format="TIFF", save_all=True, append_images=images[1:])


def _damage(folder, defect, k, count, size, data):
    """Apply `defect` to frame (or mask) k of the clip in `folder`; returns the file name the error
    must name, or the prefix its message must start with."""
    H, W = size
    frame, mask = os.path.join(folder, f"rgb_{k:04d}.png"), os.path.join(folder, f"mask_{k:04d}.png")
    name = os.path.basename(frame)
    if defect == "missing mask":
        os.remove(mask)
        return "masks: "
    if defect == "missing frame number":
        os.remove(frame)
        os.remove(mask)
        return "frames: "
    if defect == "frame size":
        Image.fromarray(np.zeros((H + 1, W, 3), np.uint8)).save(frame)
    elif defect == "frame channels":
        Image.fromarray(np.zeros((H, W), np.uint8)).save(frame)
    elif defect == "1-bit frame":
        Image.fromarray(np.zeros((H, W), bool)).save(frame)
    elif defect == "garbage bytes":
        with open(frame, "wb") as fh:
            fh.write(data.draw(st.binary(max_size=64), label="garbage"))
    elif defect == "truncated PNG":
        with open(frame, "rb") as fh:
            png = fh.read()
        cut = data.draw(st.integers(0, len(png) - PNG_TAIL - 1), label="cut")
        with open(frame, "wb") as fh:
            fh.write(png[:cut])
    elif defect == "text named .png":
        with open(frame, "w") as fh:
            fh.write(data.draw(st.text(max_size=40), label="text"))
    elif defect == "empty file":
        open(frame, "wb").close()
    elif defect == "int32 image":
        _tiff(frame, [np.zeros((H, W), np.int32)])
    elif defect == "float image above 1":
        _tiff(frame, [np.full((H, W), data.draw(st.floats(1.01, 1e6), label="value"), np.float32)])
    elif defect == "float image with NaN":
        _tiff(frame, [np.full((H, W), np.nan, np.float32)])
    elif defect == "two pages":
        _tiff(frame, [np.zeros((H, W, 3), np.uint8)] * 2)
    elif defect == "every mask black":
        for j in range(count):
            Image.fromarray(np.zeros((H, W), np.uint8)).save(os.path.join(folder, f"mask_{j:04d}.png"))
        return "masks: "
    elif defect == "mask size":
        Image.fromarray(np.full((H, W + 2), 255, np.uint8)).save(mask)
        return os.path.basename(mask)
    return name


@settings(max_examples=40, deadline=None)
@given(data=st.data(), defect=st.sampled_from(FOLDER_DEFECTS), count=st.integers(3, 5),
       size=st.tuples(st.integers(4, 9), st.integers(4, 9)))
def test_malformed_footage_folders_get_a_footage_error(data, defect, count, size):
    H, W = size
    rng = np.random.default_rng(count * 100 + H * 10 + W)
    if defect == "missing frame number":      # 0, 2 alone could be every other frame (an even step is allowed)
        count = max(count, 4)
    k = data.draw(st.integers(1, count - 2) if defect == "missing frame number" else st.integers(0, count - 1),
                  label="frame")
    with tempfile.TemporaryDirectory() as folder:
        for j in range(count):
            Image.fromarray(rng.integers(0, 256, (H, W, 3)).astype(np.uint8)).save(
                os.path.join(folder, f"rgb_{j:04d}.png"))
            square = np.zeros((H, W), np.uint8)
            square[1:H - 1, 1:W - 1] = 255
            Image.fromarray(square).save(os.path.join(folder, f"mask_{j:04d}.png"))
        named = _damage(folder, defect, k, count, size, data)
        with pytest.raises(FootageError) as info:
            tgs.load_footage(folder, fps=30, pattern="rgb_%04d.png", masks=folder, mask_pattern="mask_%04d.png")
    message = str(info.value)
    assert isinstance(info.value, ValueError)
    assert message.startswith(named) if named.endswith(": ") else named in message, (defect, message)
    assert message.startswith(("frames: ", "masks: ")), message


ARRAY_DEFECTS = ("nan", "inf", "complex dtype", "string dtype", "object dtype", "datetime dtype",
                 "int above 255", "negative int", "float above 1", "negative float", "2-D", "5-D", "2 channels",
                 "5 channels", "no frames", "ragged list", "mask count", "mask size")


def _with_defect(base, defect, data, rng):
    """`base` ((K, H, W, 3) frames or (K, H, W) masks in [0, 1]) with one defect."""
    K, H, W = base.shape[:3]
    index = tuple(data.draw(st.integers(0, n - 1), label="index") for n in base.shape)
    bad = base.copy()
    if defect == "nan":
        bad[index] = np.nan
    elif defect == "inf":
        bad[index] = data.draw(st.sampled_from([np.inf, -np.inf]), label="inf")
    elif defect == "complex dtype":
        bad = base.astype(np.complex128)
    elif defect == "string dtype":
        bad = base.astype(str)
    elif defect == "object dtype":
        bad = base.astype(object)
    elif defect == "datetime dtype":
        bad = np.zeros(base.shape, "datetime64[s]")
    elif defect == "int above 255":
        bad = (base * 255).astype(np.int64)
        bad[index] = data.draw(st.integers(256, 2 ** 40), label="value")
    elif defect == "negative int":
        bad = (base * 255).astype(np.int32)
        bad[index] = data.draw(st.integers(-(2 ** 31), -1), label="value")
    elif defect == "float above 1":
        bad[index] = data.draw(st.floats(1.001, 1e30), label="value")
    elif defect == "negative float":
        bad[index] = data.draw(st.floats(-1e30, -0.001), label="value")
    elif defect == "2-D":
        bad = np.zeros((H, W))
    elif defect == "5-D":
        bad = base[None] if base.ndim == 4 else base[None, ..., None]
    elif defect in ("2 channels", "5 channels"):
        bad = rng.random((K, H, W, int(defect[0])))
    elif defect == "no frames":
        bad = base[:0]
    elif defect == "ragged list":
        bad = [base[0].tolist(), base[0][:-1].tolist()]
    elif defect == "mask count":
        bad = np.concatenate([base, base[:1]])
    elif defect == "mask size":
        bad = base[:, :, :-1]
    return bad


@settings(max_examples=60, deadline=None)
@given(data=st.data(), defect=st.sampled_from(ARRAY_DEFECTS), K=st.integers(1, 4), H=st.integers(2, 6),
       W=st.integers(2, 6), in_masks=st.booleans())
def test_malformed_footage_arrays_get_a_footage_error(data, defect, K, H, W, in_masks):
    rng = np.random.default_rng(K * 100 + H * 10 + W)
    frames = rng.random((K, H, W, 3))
    masks = np.zeros((K, H, W))
    masks[:, : max(1, H // 2), : max(1, W // 2)] = 1.0
    target = "masks" if in_masks or defect.startswith("mask") else "frames"
    if target == "masks":
        masks = _with_defect(masks, defect, data, rng)
    else:
        frames = _with_defect(frames, defect, data, rng)
    with pytest.raises(FootageError) as info:
        tgs.Footage(frames, fps=30, masks=masks)
    assert str(info.value).startswith(f"{target}: "), (defect, str(info.value))
