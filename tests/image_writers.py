"""Writers of image files Pillow cannot make, for the footage tests: 16-bit colour PNG (RGB,
RGBA, grey + alpha) and 16-bit TIFF in either byte order, uncompressed or deflated, written to
the specifications (PNG: IHDR + one zlib IDAT with the chosen row filters; TIFF 6.0, one strip)."""
import struct
import zlib

import numpy as np


def png_bytes(arr, bit_depth=16, filters=None):
    """A PNG of (H, W) or (H, W, C) unsigned integers, C = 1, 2, 3, 4 (grey, grey + alpha, RGB,
    RGBA).  `filters`: per-row filter types (0 none, 1 sub, 2 up, 3 average, 4 Paeth), cycled;
    default all 0."""
    a = np.asarray(arr)
    a = a[..., None] if a.ndim == 2 else a
    H, W, C = a.shape
    colour_type = {1: 0, 2: 4, 3: 2, 4: 6}[C]
    rows = a.astype(">u2" if bit_depth == 16 else "u1").reshape(H, -1).view(np.uint8).reshape(H, -1)
    bpp = C * bit_depth // 8
    raw = b""
    for y in range(H):
        f = 0 if filters is None else filters[y % len(filters)]
        row = rows[y].astype(np.int64)
        up = rows[y - 1].astype(np.int64) if y else np.zeros_like(row)
        left = np.concatenate([np.zeros(bpp, np.int64), row[:-bpp]])
        up_left = np.concatenate([np.zeros(bpp, np.int64), up[:-bpp]])
        predictor = {0: 0, 1: left, 2: up, 3: (left + up) // 2, 4: _paeth(left, up, up_left)}[f]
        raw += bytes([f]) + ((row - predictor) % 256).astype(np.uint8).tobytes()

    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    header = struct.pack(">IIBBBBB", W, H, bit_depth, colour_type, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b"")


def _paeth(a, b, c):
    p = a + b - c
    pa, pb, pc = np.abs(p - a), np.abs(p - b), np.abs(p - c)
    return np.where((pa <= pb) & (pa <= pc), a, np.where(pb <= pc, b, c))


def tiff_bytes(arr, byte_order="<", deflate=False):
    """A one-strip TIFF of (H, W) or (H, W, C) uint8 / uint16, C = 1, 3, 4; uncompressed, or
    with `deflate` Adobe Deflate (zlib; Pillow decodes it with libtiff)."""
    a = np.asarray(arr)
    a = a[..., None] if a.ndim == 2 else a
    H, W, C = a.shape
    bits = a.dtype.itemsize * 8
    data = a.astype(byte_order + ("u2" if bits == 16 else "u1")).tobytes()
    data = zlib.compress(data) if deflate else data
    bits_array = struct.pack(byte_order + "H" * C, *([bits] * C)) if C > 1 else b""
    data_at = 8 + len(bits_array)
    ifd_at = data_at + len(data) + (data_at + len(data)) % 2
    entries = [(256, 3, 1, W), (257, 3, 1, H), (258, 3, C, 8 if C > 1 else bits), (259, 3, 1, 8 if deflate else 1),
               (262, 3, 1, 2 if C >= 3 else 1), (273, 4, 1, data_at), (277, 3, 1, C), (278, 3, 1, H),
               (279, 4, 1, len(data)), (284, 3, 1, 1)]
    if C == 4:
        entries.append((338, 3, 1, 2))                   # extra sample: unassociated alpha
    out = (b"II" if byte_order == "<" else b"MM") + struct.pack(byte_order + "HI", 42, ifd_at) + bits_array + data
    out += b"\0" * (ifd_at - len(out))
    out += struct.pack(byte_order + "H", len(entries))
    for tag, kind, count, value in entries:
        if kind == 3 and count == 1:
            out += struct.pack(byte_order + "HHIHH", tag, kind, count, value, 0)
        else:
            out += struct.pack(byte_order + "HHII", tag, kind, count, value)
    return out + struct.pack(byte_order + "I", 0)


def write(path, data):
    with open(path, "wb") as fh:
        fh.write(data)
    return path
