"""The process's memory use, as the benchmarks and demos report it.

`peak_rss_mb` is the high-water resident set size of this process image.  On Linux it reads
VmHWM from /proc/self/status, not `resource.getrusage(...).ru_maxrss`: the kernel carries a
parent's peak across fork + exec into the child's ru_maxrss, so a benchmark started from a
1.5 GB pytest worker reported 1.5 GB for a 190 MB run (and failed its under-1-GB check).
"""
from __future__ import annotations

import resource
import sys


def _status_mb(key):
    """A `VmXXX:   N kB` line of /proc/self/status in MB, or None where there is no /proc."""
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith(key + ":"):
                    return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def peak_rss_mb() -> float:
    """High-water resident set size [MB] of this process since it started (or last exec'd)."""
    peak = _status_mb("VmHWM")
    if peak is not None:
        return peak
    scale = 2 ** 20 if sys.platform == "darwin" else 1024      # ru_maxrss: bytes on macOS, kB elsewhere
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / scale


def rss_mb() -> float:
    """Current resident set size [MB] (peak where the platform has no /proc)."""
    now = _status_mb("VmRSS")
    return peak_rss_mb() if now is None else now
