import os

import pytest
import tigradsim as tgs

# Keep Taichi's compiled-kernel cache inside the test session's temp area only
# when the user has not chosen one.
os.environ.setdefault("TI_OFFLINE_CACHE_FILE_PATH", os.path.join(os.path.expanduser("~"), ".cache", "tigradsim-ti"))

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


@pytest.fixture
def f64():
    """Taichi reset to float64 on the CPU (gradient tests)."""
    tgs.init(arch="cpu", precision="f64")
    yield


@pytest.fixture
def f32():
    tgs.init(arch="cpu", precision="f32")
    yield
