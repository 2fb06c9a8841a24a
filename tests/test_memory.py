"""tigradsim.core.memory: a process's own peak RSS, not its parent's."""
import subprocess
import sys

import numpy as np
import pytest

from tigradsim.core.memory import peak_rss_mb, rss_mb

pytestmark = pytest.mark.slow          # measures a benchmark's memory in a subprocess

CHILD = "from tigradsim.core.memory import peak_rss_mb, rss_mb; print(peak_rss_mb(), rss_mb())"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="fork + exec carry-over of ru_maxrss is Linux's")
def test_child_peak_is_its_own_not_the_parents():
    ballast = np.ones(80_000_000)          # 640 MB touched in this (parent) process
    assert peak_rss_mb() >= 600 and rss_mb() >= 600
    out = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, check=True)
    peak, now = map(float, out.stdout.split()[-2:])
    del ballast
    # the child imports taichi (~150 MB); the parent's 640 MB must not show up in its peak.  (On this
    # kernel the child's ru_maxrss does show it: the old benchmark reading failed exactly this way.)
    assert 0 < now <= peak < 500, (peak, now)
