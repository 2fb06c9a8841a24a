"""`tgs.init` makes a program's compiled kernels reach Taichi's offline cache when it exits (Taichi 1.7.4
writes the cache only at a reset), so the next run of a script loads them instead of compiling again."""
import subprocess
import sys

import pytest

pytestmark = pytest.mark.slow          # runs a script twice in subprocesses

SCRIPT = '''
import sys
import taichi as ti
import tigradsim as tgs
tgs.init(arch="cpu", precision="f64", offline_cache_file_path=sys.argv[1], log_level=ti.DEBUG)
x = ti.field(float, 8)


@ti.kernel
def twice():
    for i in x:
        x[i] = 2.0 * i


twice()
assert x[3] == 6.0
'''


def test_kernels_reach_the_offline_cache_at_exit(tmp_path):
    script = tmp_path / "twice.py"
    script.write_text(SCRIPT)
    cache = tmp_path / "cache"
    logs = []
    for _ in range(2):
        run = subprocess.run([sys.executable, str(script), str(cache)], capture_output=True, text=True, timeout=300)
        assert run.returncode == 0, run.stderr[-2000:]
        logs.append(run.stdout + run.stderr)
    compiled = [line for line in logs[0].splitlines() if "Cache kernel 'twice_" in line]
    loaded = [line for line in logs[1].splitlines() if "kernel 'twice_" in line]
    assert compiled, logs[0][-2000:]
    assert loaded and all("from cache" in line for line in loaded), "\n".join(loaded) or logs[1][-2000:]
    assert list(cache.glob("*.tic"))


@pytest.mark.parametrize("env_value", [None, "123456789"])
def test_the_cache_size_cap_is_taichis_variable_where_set(monkeypatch, env_value):
    """The library's cap (1 GiB) unless TI_OFFLINE_CACHE_MAX_SIZE_OF_FILES is set (conftest sets 2 GiB for the
    suite's own cache): a ti.init keyword would silently override the variable."""
    import tigradsim as tgs
    from taichi.lang import impl
    if env_value is None:
        monkeypatch.delenv("TI_OFFLINE_CACHE_MAX_SIZE_OF_FILES", raising=False)
    else:
        monkeypatch.setenv("TI_OFFLINE_CACHE_MAX_SIZE_OF_FILES", env_value)
    tgs.init()
    expected = tgs.runtime.OFFLINE_CACHE_BYTES if env_value is None else int(env_value)
    assert impl.current_cfg().offline_cache_max_size_of_files == expected
