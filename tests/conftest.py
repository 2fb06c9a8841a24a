import os

import pytest
import tigradsim as tgs

# Taichi's compiled-kernel cache for the tests (and the scripts they start, which inherit it):
# one folder of its own, unless the user has chosen one.  pytest-xdist workers share it: Taichi
# locks its index while reading or merging it, and each kernel file is written once, under its
# key.  A kernel's key hashes its code with the ids of the fields it touches, which count up from
# the last `tgs.init`: see `_taichi_from_scratch_per_file`.
os.environ.setdefault("TI_OFFLINE_CACHE_FILE_PATH", os.path.join(os.path.expanduser("~"), ".cache", "tigradsim-ti"))
# Its size cap: every test file starts from a fresh init, so each compiles its own copies of the
# kernels it shares with others; the whole suite's kernels measured 0.9 GB (31,000 files), within 15 %
# of the library's 1 GiB cap, past which Taichi drops the least recently used quarter and the next
# run compiles them again (a cold run of the suite takes ~3 x a warm one).  Scripts the tests start
# inherit the variable, so they trim by the same cap: 2 GiB, the largest Taichi 1.7.4 takes (a C int).
os.environ.setdefault("TI_OFFLINE_CACHE_MAX_SIZE_OF_FILES", str(2 ** 31 - 1))

# TIGRADSIM_ARCH=cuda (or vulkan, metal, gpu, ...) runs the tests on that arch: every
# `tgs.init(...)` a test makes (the fixtures below and the tests' own calls, whatever arch
# they name) initialises Taichi on it.  Unset: the CPU, as the tests say.  Used by
# benchmarks/gpu_check.sh; tests that assume a CPU (thread counts, CPU-only determinism)
# are not meant for it.
TEST_ARCH = os.environ.get("TIGRADSIM_ARCH") or None
if TEST_ARCH is not None:
    if TEST_ARCH not in tgs.runtime._ARCHS:
        raise pytest.UsageError(f"TIGRADSIM_ARCH={TEST_ARCH!r}: expected one of {sorted(tgs.runtime._ARCHS)}")
    _init = tgs.init

    def _init_on_test_arch(arch="cpu", *args, **kwargs):
        return _init(TEST_ARCH, *args, **kwargs)

    tgs.init = _init_on_test_arch


@pytest.fixture(scope="module", autouse=True)
def _taichi_from_scratch_per_file():
    """Each test file starts on a fresh Taichi (`tgs.init()`'s defaults: CPU, f32; ~0.2 s).

    Why: a kernel's offline-cache key includes the ids of the fields it reads, and those ids
    count from the last init; a file whose first tests build fields without an init of their
    own would get keys that depend on which file ran before it on the same worker, which
    under pytest-xdist changes from run to run (a cache miss: seconds of compiling each time).
    """
    tgs.init()             # also puts kernels a validation tape left checked back (runtime.init)
    yield


@pytest.fixture
def f64():
    """Taichi reset to float64 on the CPU (gradient tests)."""
    tgs.init(arch="cpu", precision="f64")
    yield


@pytest.fixture
def f64_without_ir_passes():
    """Taichi reset to float64 on the CPU with Taichi's own IR passes off (`advanced_optimization=False`;
    LLVM still optimises), and back to the settings before it after the test: for the rollout gradient
    tests of large steps (bodies on bodies, edge on edge, implicit damping, MPM's return mappings and
    boundaries).

    Why: Taichi's store forwarding is quadratic in a kernel's size, and the reverse of such a step took
    3-5 minutes to compile with the passes on (box on box with implicit damping: 307 s from an empty
    cache, 290 s of it that one kernel) and ~30 s without.  From an empty cache the suite took 113 min
    on two cores (2026-12-08); the fifteen tests that take this fixture, 3,733 test-seconds with the
    passes and 632 without (benchmarks/RESULTS.md, "Compile time").  These
    tests check our derivatives, which the passes must not change: tests/test_ir_optimization.py
    compares the two compilations' gradients (rtol 1e-8) on small scenes (springs, FEM, cloth, a box on
    the ground), and test_body_contact's and test_box_edges' rollout gradients keep the library's
    default compilation of full body-body steps (corners, crossed edges, the ground), and
    test_mpm_grad's of MPM's steps, each against central differences."""
    before = tgs.runtime.init_settings()
    tgs.init(arch="cpu", precision="f64", advanced_optimization=False)
    yield
    tgs.init(**before)                 # {} before any init: the defaults


@pytest.fixture
def f32():
    tgs.init(arch="cpu", precision="f32")
    yield
