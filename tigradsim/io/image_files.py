"""Image files read at their own depth, or refused with an error that names the file.

    pages, full_scale = read_image("clip/mask_0007.png")    # (K, H, W, C), 255 / 65535 / 1.0

Read: PNG, TIFF, JPEG, BMP in 1-bit, 8-bit and 16-bit grey, grey + alpha, palette, RGB and
RGBA, and 32-bit float grey TIFF (values in [0, 1]); every page of a multi-page file.  The
samples come back unscaled in their own type: bool images as uint8 0/255, 8-bit as uint8
(full scale 255), 16-bit as uint16 (65535), float as float32 (1.0).  Divide by the full scale
for values in [0, 1].

16-bit colour: Pillow decodes 16-bit RGB, RGBA and grey + alpha PNGs and 16-bit RGB(A)
TIFFs to 8 bits (the high byte of each sample).  PNG filters and TIFF strips work on whole
bytes, so decoding the same data again with the byte order of the samples swapped gives the
low bytes; the two reads together are every sample's 16 bits.  Grey + alpha 16-bit PNG has
no swapped unpacker in Pillow; its four bytes per pixel are decoded as 8-bit RGBA instead
(L high, L low, A high, A low).

Refused, with `tigradsim.core.errors.FootageError` naming the file and what was expected: a
file Pillow cannot identify (a text file named .png), a truncated or corrupt one, a 32-bit
integer image (its scale is unknown), a float image with values outside [0, 1] or not finite,
and any mode or 16-bit layout this module does not know how to read at full depth.
"""
from __future__ import annotations

import contextlib
import os
import sys

import numpy as np

from ..core.errors import FootageError

# Pillow's readers tried on a footage file; formats with weak signatures (TGA, ...) could take
# garbage bytes for an image
FORMATS = ("PNG", "TIFF", "JPEG", "BMP")      # JPEG also opens MPO (phone cameras)
_SIGNATURES = ((b"\x89PNG\r\n\x1a\n", "PNG"), (b"II*\x00", "TIFF"), (b"MM\x00*", "TIFF"), (b"\xff\xd8\xff", "JPEG"),
               (b"BM", "BMP"))
READABLE = "8- or 16-bit PNG or TIFF, JPEG or BMP (grey, grey + alpha, palette, RGB or RGBA) or 32-bit float TIFF"
# Pillow modes converted to 8-bit RGB(A); "1", "L", "RGB", "RGBA", "I;16*" and "F" are read as they are
_TO_RGB = {"LA": "RGBA", "La": "RGBA", "PA": "RGBA", "RGBa": "RGBA", "RGBX": "RGB", "CMYK": "RGB",
           "YCbCr": "RGB", "LAB": "RGB", "HSV": "RGB"}
_UINT16_MODES = ("I;16", "I;16L", "I;16B", "I;16N")


def _rawmode(tile):
    """The raw mode of a Pillow tile (its args are the raw mode, or a tuple that starts with it)."""
    args = tile[3]
    return args if isinstance(args, str) else (args[0] if args else "")


def _with_rawmode(tile, rawmode):
    args = tile[3]
    args = rawmode if isinstance(args, str) else (rawmode,) + tuple(args[1:])
    return tile._replace(args=args) if hasattr(tile, "_replace") else (tile[0], tile[1], tile[2], args)


def _swapped(rawmode):
    """The raw mode that reads the other byte of each 16-bit sample ('RGB;16B' <-> 'RGB;16L'),
    or 'RGBA' for 16-bit grey + alpha (all four bytes of a pixel), or None."""
    if rawmode == "LA;16B":
        return "RGBA"
    native_swapped = ";16B" if sys.byteorder == "little" else ";16L"     # libtiff decodes to native order
    for a, b in ((";16B", ";16L"), (";16L", ";16B"), (";16N", native_swapped)):
        if rawmode.endswith(a) and rawmode.split(";")[0] in ("RGB", "RGBA"):
            return rawmode[: -len(a)] + b
    return None


def _fail(path, what):
    raise FootageError(f"{path}: {what} (footage images must be {READABLE})")


@contextlib.contextmanager
def _decoded(path, page, rawmode=None):
    """(mode, raw mode, loaded PIL image) of page `page`, decoded with `rawmode` when given."""
    from PIL import Image

    with Image.open(path, formats=FORMATS) as im:
        if page:
            im.seek(page)
        tiles = list(im.tile)
        raw = _rawmode(tiles[0]) if tiles else ""
        if rawmode is not None:
            im.tile = [_with_rawmode(t, rawmode) for t in tiles]
        im.load()
        yield im.mode, raw, im


def _is_16bit(raw):
    """Whether a raw mode holds 16 bits per sample that Pillow cuts to 8 (BMP's 'BGR;16' is 5-6-5)."""
    return raw.endswith((";16B", ";16L", ";16N"))


def _page(path, page, pages):
    """One page as (H, W, C) in its own type, and its full scale."""
    with _decoded(path, page) as (mode, raw, im):
        if mode in ("L", "RGB", "RGBA") and _is_16bit(raw):
            high = np.asarray(im, dtype=np.uint16)
        elif mode == "P":
            return np.asarray(im.convert("RGBA" if "transparency" in im.info else "RGB"), dtype=np.uint8), 255.0
        else:
            return _plain_page(path, mode, raw, im)
    # 16-bit colour, which Pillow decoded to the high bytes: decode the low bytes too
    low_mode = _swapped(raw)
    if low_mode is None or pages > 1 and not str(path).lower().endswith((".tif", ".tiff")):
        _fail(path, f"16-bit {mode} stored as {raw!r}{' in an animation' if pages > 1 else ''} cannot be read "
                    f"at its full depth")
    with _decoded(path, page, low_mode) as (_, _, im_low):
        low = np.asarray(im_low, dtype=np.uint16)
    if raw == "LA;16B":                          # bytes L_hi, L_lo, A_hi, A_lo
        grey, alpha = low[..., 0] * 256 + low[..., 1], low[..., 2] * 256 + low[..., 3]
        return np.stack([grey, grey, grey, alpha], axis=-1).astype(np.uint16), 65535.0
    if low.shape != high.shape:
        _fail(path, f"16-bit {mode} stored as {raw!r}: its two byte planes differ in shape")
    return high * np.uint16(256) + low, 65535.0


def _plain_page(path, mode, raw, im):
    """A page Pillow reads at its own depth (every mode but 16-bit colour and palettes)."""
    if mode == "1":
        return np.asarray(im, dtype=np.uint8)[..., None] * np.uint8(255), 255.0
    if mode in ("L", "RGB", "RGBA"):
        arr = np.asarray(im, dtype=np.uint8)
        return (arr[..., None] if arr.ndim == 2 else arr), 255.0
    if mode in _UINT16_MODES or (mode == "I" and ";16" in raw):
        arr = np.asarray(im)
        if arr.size and (arr.min() < 0 or arr.max() > 65535):
            _fail(path, f"a 16-bit image (raw mode {raw!r}) with values in [{arr.min()}, {arr.max()}]")
        return arr.astype(np.uint16)[..., None], 65535.0
    if mode == "I":
        _fail(path, f"a 32-bit integer image (raw mode {raw!r}) has no known full scale")
    if mode == "F":
        arr = np.asarray(im, dtype=np.float32)
        if not np.all(np.isfinite(arr)):
            _fail(path, "a float image with NaN or inf values")
        if arr.size and (arr.min() < -1e-6 or arr.max() > 1.0 + 1e-6):
            _fail(path, f"a float image with values in [{arr.min():g}, {arr.max():g}], not in [0, 1]")
        return np.clip(arr, 0.0, 1.0)[..., None], 1.0
    target = _TO_RGB.get(mode)
    if target is None:
        _fail(path, f"an image of mode {mode!r}, which tigradsim does not read")
    return np.asarray(im.convert(target), dtype=np.uint8), 255.0


def read_image(path):
    """Every page of an image file: ((K, H, W, C) array in its own type, full scale).

    C = 1 (grey), 3 (RGB) or 4 (RGBA; grey + alpha and palettes with transparency become
    RGBA).  Type and full scale: uint8 and 255 (8-bit, 1-bit, palette), uint16 and 65535
    (16-bit), float32 and 1.0 (float TIFF, values in [0, 1]).  Raises FootageError naming
    the file when it cannot be read right (see the module docstring)."""
    from PIL import Image, UnidentifiedImageError

    path = os.fspath(path)
    Image.init()             # every reader in FORMATS registered (Pillow registers a few at first)
    if not os.path.isfile(path):
        raise FootageError(f"{path}: no such file")
    try:
        with Image.open(path, formats=FORMATS) as im:
            pages = int(getattr(im, "n_frames", 1) or 1)
        out = [_page(path, k, pages) for k in range(pages)]
    except FootageError:
        raise
    except UnidentifiedImageError:
        with open(path, "rb") as fh:
            head = fh.read(16)
        size = os.path.getsize(path)
        kind = next((k for sig, k in _SIGNATURES if head.startswith(sig)), None)
        if kind is not None:            # the signature is there, the header is not (cut short or damaged)
            _fail(path, f"truncated or corrupt {kind} file ({size} bytes; its header cannot be read)")
        _fail(path, f"not an image file Pillow can identify ({size} bytes, starting with {head!r})")
    except Exception as exc:        # Pillow signals damaged data with OSError, SyntaxError, ValueError, EOFError, ...
        _fail(path, f"truncated or corrupt image ({type(exc).__name__}: {exc})")
    shapes = {a.shape for a, _ in out}
    scales = {s for _, s in out}
    if len(shapes) > 1 or len(scales) > 1:
        _fail(path, f"pages of different shapes or depths ({sorted(shapes)}, full scales {sorted(scales)})")
    return np.stack([a for a, _ in out]), out[0][1]


__all__ = ["read_image", "READABLE"]
