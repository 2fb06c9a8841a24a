"""Every registered material compiles and runs in float32 (the default precision)."""
import numpy as np
import pytest

import tigradsim as tgs
from tigradsim.core.registry import evaluate_energy, evaluate_stress, get_material, list_materials


@pytest.fixture(scope="module", autouse=True)
def _taichi_f32():
    tgs.init(arch="cpu", precision="f32")
    yield
    tgs.init(arch="cpu", precision="f64")


@pytest.mark.parametrize("name", list_materials())
def test_float32_runs(name):
    mat = get_material(name)
    values = {k: (1.0 if d is None else d) for k, d in mat.params.items()}
    rng = np.random.default_rng(0)
    F = np.eye(*mat.F_shape) + 0.2 * rng.standard_normal((3,) + mat.F_shape)
    P = evaluate_stress(name, F, values)
    assert P.dtype == np.float32 and np.all(np.isfinite(P))
    if mat.has_energy:
        assert np.all(np.isfinite(evaluate_energy(name, F, values)))
    assert np.abs(evaluate_stress(name, np.eye(*mat.F_shape), values)).max() < 1e-3 * max(values.values())
