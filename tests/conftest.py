import os

import pytest
import tigradsim as tgs

# Keep Taichi's compiled-kernel cache inside the test session's temp area only
# when the user has not chosen one.
os.environ.setdefault("TI_OFFLINE_CACHE_FILE_PATH", os.path.join(os.path.expanduser("~"), ".cache", "tigradsim-ti"))


@pytest.fixture
def f64():
    """Taichi reset to float64 on the CPU (gradient tests)."""
    tgs.init(arch="cpu", precision="f64")
    yield


@pytest.fixture
def f32():
    tgs.init(arch="cpu", precision="f32")
    yield
