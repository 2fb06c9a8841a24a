"""How wide the float SIMD registers are that Taichi's JIT compiles for on this CPU, and so how many
lanes a loop written "in lanes" (`tigradsim.exec.lanes`, the renderer's pixel lanes) should carry.

Taichi 1.7.4 compiles CPU kernels with LLVM 15 for the host CPU as LLVM 15 names it.  Its vectorizer
packs a lanes loop's adjacent operations into registers of that CPU's preferred width: 32 bytes on a
CPU with AVX2 (AVX-512 CPUs included: LLVM prefers 256-bit vectors there), 16 bytes (SSE2) on one LLVM
15 does not know, which it compiles for generic x86-64.  Measured in Taichi's optimized IR: `<8 x
float>` operations on an Intel Xeon (family 6, model 207, AVX-512), at most `<2 x double>` / `<4 x
float>` on an AMD family 26 CPU (Zen 5, newer than LLVM 15: "generic").

Lanes of 4 fill a 32-byte register in float64 but only half of it in float32, so float32 gets lanes of 8
where the registers are 32 bytes (the silhouette lanes on that Xeon, bench_batch's atlas, per frame:
binning 0.99 -> 0.65 ms, backward 1.15 -> 0.89 ms; float64 lanes of 8 there: backward 1.33 -> 1.66 ms,
slower).  Fewer than 4 lanes measured no faster anywhere (the per-group overhead doubles), so 4 is the
least.

`TIGRADSIM_SIMD_BYTES` (16, 32 or 64) overrides the detection, e.g. where /proc/cpuinfo is not readable;
64 (whole AVX-512 registers, which LLVM 15 does not use by default) gives float64 lanes of 8, for trying
them; the renderer also takes a lane count of its own (`SoftRasterizer(pixel_lanes=8)`, as the tests do).
"""
from __future__ import annotations

import functools
import os

SIMD_BYTES_ENV = "TIGRADSIM_SIMD_BYTES"
SIMD_BYTES = (16, 32, 64)
# The newest AMD family LLVM 15 names (Zen 3, 19h); a later one gets generic x86-64 code (SSE2).
LLVM15_LAST_AMD_FAMILY = 25


def _cpu_info(path: str = "/proc/cpuinfo"):
    """(vendor, family, flags) of the first CPU listed in `path`, or None where it cannot be read."""
    try:
        with open(path) as f:
            text = f.read(1 << 16)
    except OSError:
        return None
    fields = {}
    for line in text.split("\n\n")[0].splitlines():
        key, sep, value = line.partition(":")
        if sep:
            fields[key.strip()] = value.strip()
    try:
        family = int(fields.get("cpu family", ""))
    except ValueError:
        return None
    return fields.get("vendor_id", ""), family, set(fields.get("flags", "").split())


def simd_bytes_for(info) -> int:
    """The register width [bytes] LLVM 15 vectorizes for on a CPU of `info` ((vendor, family, flags) as
    `_cpu_info` reads it, or None): 32 with AVX2 on a CPU LLVM 15 names, else 16."""
    if info is None:
        return 16
    vendor, family, flags = info
    if "avx2" not in flags:
        return 16
    if vendor == "AuthenticAMD" and family > LLVM15_LAST_AMD_FAMILY:
        return 16
    return 32


@functools.lru_cache(maxsize=None)
def simd_bytes() -> int:
    """This CPU's float SIMD register width in bytes as Taichi's JIT uses it: 16 or 32 (see the module
    docstring; `TIGRADSIM_SIMD_BYTES` overrides, 64 too)."""
    env = os.environ.get(SIMD_BYTES_ENV, "").strip()
    if env:
        if env not in {str(b) for b in SIMD_BYTES}:
            raise ValueError(f"{SIMD_BYTES_ENV}={env!r}: expected one of {SIMD_BYTES}")
        return int(env)
    return simd_bytes_for(_cpu_info())


def lane_count(float_bytes: int) -> int:
    """Elements per loop iteration for a lanes loop over floats of `float_bytes` bytes (4 or 8): one
    SIMD register's worth, at least 4."""
    if float_bytes not in (4, 8):
        raise ValueError(f"float_bytes: expected 4 or 8, got {float_bytes!r}")
    return max(4, simd_bytes() // float_bytes)
