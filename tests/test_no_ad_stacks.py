"""The reverse kernels of the built-in terms keep no local on an AD stack.

Taichi's reverse mode moves a local that is stored more than once under a branch onto an AD stack,
pushed and popped per iteration (`f += x` inside an `if`; Python's `or`, which compiles to such a
branch).  The cloth membrane's `damped = kd != 0.0 or ...` did that for every triangle: 615 stack
allocations in the printed IR of a cloth step and 3-7 % of its forward + backward time.  This runs
tests/ad_stack_probe.py (a taped rollout of a small scene on the serial path, Taichi printing the IR
of every kernel it compiles) and counts them.  The parts path's per-particle sum (`parts.PartGather`)
keeps one: a select-based sum without it measured slower (fem32: +30 µs forward, -15 µs backward).
"""
import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.slow          # compiles and runs scripts in subprocesses

PROBE = os.path.join(os.path.dirname(__file__), "ad_stack_probe.py")


def _stack_count(scene):
    """AD stack allocations in the IR Taichi prints for the probe's `scene`."""
    proc = subprocess.Popen([sys.executable, PROBE, scene], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, errors="replace")
    stacks, finished, tail = 0, False, []
    for line in proc.stdout:             # ~10^6 lines of IR: streamed, not kept
        if "stack alloc" in line:
            stacks += 1
        if line.startswith("probe finished"):
            finished = True
        if "Error" in line or "Traceback" in line or tail:
            tail.append(line)
    assert proc.wait() == 0 and finished, "the probe failed:\n" + "".join(tail[-30:])
    return stacks


def test_the_probe_sees_an_ad_stack():
    """Positive control: a kernel adding to a local under a branch shows stacks in the printed IR (so
    a zero below means no stack, not a Taichi that prints its IR differently)."""
    assert _stack_count("control") > 0


@pytest.mark.parametrize("scene", ["cloth", "fem", "rigid", "springs", "render"])
def test_reverse_kernels_use_no_ad_stack(scene):
    stacks = _stack_count(scene)
    assert stacks == 0, f"{scene}: {stacks} AD stack allocations in the printed IR"
