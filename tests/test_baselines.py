"""benchmarks/baselines.py: the derivative-free searches (random search, CMA-ES through pycma, the
1-D workaround, budgets, bounds) and one tiny end-to-end run of the Table 1 baselines."""
import os
import sys

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))

import baselines  # noqa: E402

pytestmark = pytest.mark.slow          # the paper's scenes under gradient-free search (benchmarks/baselines.py)


def test_random_search_keeps_the_best_finite_run():
    calls = []

    def f(x):
        calls.append(x.copy())
        return np.inf if x[0] > 5 else float(np.sum((x - 1.0) ** 2))

    cand = np.array([[0.0, 0.0], [9.0, 1.0], [1.1, 0.9], [3.0, 3.0]])
    res = baselines.random_search(f, cand)
    assert res.runs == 4 and len(calls) == 4
    np.testing.assert_array_equal(res.x, [1.1, 0.9])
    assert res.loss == pytest.approx(0.02)
    with pytest.raises(ValueError, match="candidates"):
        baselines.random_search(f, np.empty((0, 2)))


@pytest.mark.parametrize("d", [1, 3])
def test_cma_search_converges_within_budget_and_bounds(d):
    pytest.importorskip("cma")
    target = np.linspace(0.3, 0.7, d)
    seen = []

    def f(x):
        assert x.shape == (d,)                   # the 1-D padding never reaches the objective
        seen.append(x.copy())
        return float(np.sum((x - target) ** 2))

    lo, hi = np.full(d, -1.0), np.full(d, 0.5)   # the last coordinate's optimum (0.7) lies outside: clamped
    res = baselines.cma_search(f, np.zeros(d), np.full(d, 0.3), lo, hi, budget=200, seed=3)
    assert res.runs == len(seen) <= 200 and res.runs > 150
    assert np.all(np.array(seen) >= lo - 1e-12) and np.all(np.array(seen) <= hi + 1e-12)
    expected = np.minimum(target, 0.5)
    np.testing.assert_allclose(res.x, expected, atol=2e-2)
    assert res.loss == min(res.trace)
    # reproducible for a seed
    again = baselines.cma_search(f, np.zeros(d), np.full(d, 0.3), lo, hi, budget=200, seed=3)
    np.testing.assert_array_equal(again.x, res.x)


def test_cma_search_rejects_bad_input():
    pytest.importorskip("cma")
    f = lambda x: 0.0   # noqa: E731
    with pytest.raises(ValueError, match="budget"):
        baselines.cma_search(f, [0.0, 0.0], [1.0, 1.0], [-1.0, -1.0], [1.0, 1.0], budget=0, seed=1)
    with pytest.raises(ValueError, match="seed"):
        baselines.cma_search(f, [0.0, 0.0], [1.0, 1.0], [-1.0, -1.0], [1.0, 1.0], budget=10, seed=0)
    with pytest.raises(ValueError, match="stds, lower, upper"):
        baselines.cma_search(f, [0.0, 0.0], [1.0], [-1.0, -1.0], [1.0, 1.0], budget=10, seed=1)


def test_rigid_mass_baselines_tiny(tmp_path):
    """Every method on the same tiny trial (the demo's truth and guess), within the budget."""
    pytest.importorskip("cma")
    import tigradsim as tgs
    from tigradsim.scenes.rigid_push import draw_masses
    tgs.init(arch="cpu", precision="f64", seed=0)
    scene, fit = baselines.settings("rigid_mass", quick=True)
    res = baselines.run_experiment("rigid_mass", 1, 5, None, scene, fit, printer=lambda *a: None)
    rng = np.random.default_rng(5)
    for row in res["per_trial"]:
        truth, guess = draw_masses(rng)                    # the demo's draws, trial by trial
        assert row["truth"]["mass"] == truth and row["guess"]["mass"] == guess
        m = row["methods"]
        assert m["prior mean"]["runs"] == 0
        budget = m["gradient, image"]["runs"]             # the gradient-free methods' budget
        assert budget == fit["iters"] + 2                   # Adam and BFGS phases each end with one evaluation
        assert m["random search"]["runs"] == budget and 1 <= m["CMA-ES"]["runs"] <= budget
        for method in baselines.METHODS:
            assert m[method]["rel_err"]["mass"] == pytest.approx(
                abs(m[method]["estimate"]["mass"] - truth) / truth)
    # the prior mean of log-uniform [0.5, 3] kg is (3 - 0.5) / ln 6 = 1.395 kg (20000 draws: within 1 %)
    assert res["prior_mean"]["mass"] == pytest.approx(2.5 / np.log(6.0), rel=1e-2)
    lines = baselines.baseline_tables({"rigid_mass": res})
    assert sum(line.startswith("| ") for line in lines) == 1 + len(baselines.METHODS)
    with pytest.raises(ValueError, match="budget"):
        baselines.run_experiment("rigid_mass", 1, 0, 0, scene, fit)
    with pytest.raises(ValueError, match="unknown experiment"):
        baselines.run_experiment("cloth", 1, 0, None, scene, fit)
