"""A soft body's mass distribution as a model choice (issue 44 item 5): a total mass or density spread by the
tets' volumes ("volume", the default) or equally over the vertices ("equal", Warp's add_soft_grid), from the
builder and the scene file, kept by the total-mass unknown (`SoftMassParam`, FD-checked in float64 through a
rollout with contact), and compared as model variants (`scenes.mass_compare`, the ties rule of
`compare_scene_variants`)."""
import types

import numpy as np
import pytest

import tigradsim as tgs
from tigradsim import fem
from tigradsim.scenes.mass_compare import MASS_DISTRIBUTIONS, compare_mass_distributions, mass_distribution_spec
from tigradsim.scenes.scene_file import SceneError, parse_scene

from test_soft_mass import box, built, rollout, soft_scene


def test_equal_and_volume_distributions_from_the_builder(f64):
    v, t = box()
    n = len(v)
    b, h_vol = built(mass=2.7)
    by_volume = b.finalize().get("particle_mass")
    assert h_vol.mass_distribution == "volume" and np.ptp(by_volume) > 0          # corners get less
    b, h = built(mass=2.7, mass_distribution="equal")
    m = b.finalize().get("particle_mass")
    assert h.mass_distribution == "equal" and np.allclose(m, 2.7 / n, rtol=1e-14) and np.isclose(h.mass, 2.7)
    b, h = built(density=500.0, mass_distribution="equal")           # a density's total, spread equally
    assert np.allclose(b.finalize().get("particle_mass"), 500.0 * h.volume / n, rtol=1e-14)
    fixed = np.zeros(n, bool)
    fixed[:3] = True                                                 # pinned vertices keep mass 0
    b, h = built(mass=2.7, mass_distribution="equal", fixed=fixed)
    m = b.finalize().get("particle_mass")
    assert np.all(m[:3] == 0) and np.allclose(m[3:], 2.7 / n) and np.allclose(h.node_mass, 2.7 / n)
    _, h = built(node_mass=0.1)
    assert h.mass_distribution == "given"


@pytest.mark.parametrize("kwargs, match", [
    (dict(mass=1.0, mass_distribution="even"), "mass_distribution: expected one of 'volume', 'equal', got 'even'"),
    (dict(mass=1.0, mass_distribution=None), "mass_distribution: expected one of 'volume', 'equal', got None"),
    (dict(node_mass=0.1, mass_distribution="equal"), "mass_distribution: 'equal' spreads a density or a total mass"),
])
def test_bad_mass_distribution(f64, kwargs, match):
    b = tgs.SceneBuilder()
    with pytest.raises(ValueError, match=match):
        b.add_soft_mesh(box(), **kwargs)
    assert b.particle_count == 0


def test_scene_file_mass_distribution(tmp_path):
    from tigradsim.scenes.scene_unknowns import _soft_vertex_masses
    v, t = tgs.meshes.tet_box(1, 1, 1, size=(0.1, 0.1, 0.1))
    np.save(tmp_path / "x.npy", v)
    np.save(tmp_path / "t.npy", t)
    obj = {"nodes": "x.npy", "tets": "t.npy", "mass": 0.4}
    spec = parse_scene(soft_scene(tmp_path, obj), str(tmp_path / "scene.toml"))
    assert spec.objects["cube"].mass_distribution == "volume"
    assert np.ptp(_soft_vertex_masses(spec.objects["cube"])) > 0
    spec = parse_scene(soft_scene(tmp_path, dict(obj, mass_distribution="equal")), str(tmp_path / "scene.toml"))
    assert spec.objects["cube"].mass_distribution == "equal"
    assert np.allclose(_soft_vertex_masses(spec.objects["cube"]), 0.05)      # 0.4 kg over 8 vertices
    for bad, match in ((dict(obj, mass_distribution="uniform"), r"mass_distribution.*expected one of 'volume', "
                                                                r"'equal', got 'uniform'"),
                       (dict(obj, mass_distribution=1), "mass_distribution.*expected a string"),
                       ({"nodes": "x.npy", "tets": "t.npy", "node_mass": 0.05, "mass_distribution": "equal"},
                        "mass_distribution.*node_mass gives the per-vertex masses themselves")):
        with pytest.raises(SceneError, match=match):
            parse_scene(soft_scene(tmp_path, bad), str(tmp_path / "scene.toml"))


def test_total_mass_unknown_keeps_the_equal_distribution_gradient(f64):
    """The total mass as one unknown of a mesh spread equally: written as total / V on every free vertex (the
    equal shares kept), its Tape gradient through a rollout with ground contact = central differences."""
    v, t = box()
    rng = np.random.default_rng(3)
    vel = np.array([0.5, -1.2, 0.3]) + rng.normal(size=(len(v), 3)) * 0.3
    fixed = np.zeros(len(v), bool)
    fixed[0] = True                                  # a pinned vertex stays at mass 0 under the unknown too
    b = tgs.SceneBuilder()
    b.add_ground(ke=2e3, kd=5.0, kf=50.0, mu=0.4)
    h = b.add_soft_mesh((v, t), params={"mu": 5e3, "lam": 8e3}, damping=3.0, velocity=vel, radius=0.02,
                        mass=6.0, mass_distribution="equal", fixed=fixed)
    model = b.finalize(requires_grad=True)
    sim, run, loss = rollout(model)
    assert sim.state.particle_q.to_numpy()[:, :, 1].min() < 0.02, "the box must touch the ground"
    p = tgs.SoftMassParam(model, h, quantity="mass", lower=1e-3)
    assert np.isclose(p.value()[0], 6.0)
    p.write([9.0])
    m = model.get("particle_mass")
    assert m[0] == 0 and np.allclose(m[1:], 9.0 / len(v), rtol=1e-14)
    p.write([6.0])
    report = tgs.check_param_gradient(run, loss, p, n_dirs=1, eps=1e-6, rtol=1e-5)
    assert report.ok, str(report)
    assert abs(report.analytic[0]) > 1e-9, "zero gradient"


def test_scene_total_mass_unknown_keeps_the_equal_shares(tmp_path, f64):
    """[unknowns."cube.mass"] on a soft object with mass_distribution = "equal": the scene's SoftMassParam
    writes its value as equal vertex masses."""
    from tigradsim.scenes.scene_build import Scene, load_scene_footage
    v, t = box()
    np.save(tmp_path / "x.npy", v - [0.05, 0.0, 0.05])
    np.save(tmp_path / "t.npy", t)
    data = soft_scene(tmp_path, {"nodes": "x.npy", "tets": "t.npy", "mass": 0.3, "mass_distribution": "equal",
                                 "params": {"mu": 3e3, "lam": 5e3}},
                      {"cube.mass": {"init": 0.5, "lower": 0.05, "upper": 5.0}})
    data["simulation"] = {"substeps": 40, "duration": 0.07}
    spec = parse_scene(data, str(tmp_path / "scene.toml"))
    scene = Scene(spec, load_scene_footage(spec))
    assert np.allclose(scene.model.get("particle_mass"), 0.5 / len(v), rtol=1e-14)
    scene.params[0].write([1.5])
    assert np.allclose(scene.model.get("particle_mass"), 1.5 / len(v), rtol=1e-14)


def _spec(tmp_path, obj=None, substeps=4, mu_init=2e3):
    v, t = tgs.meshes.tet_box(1, 1, 1, size=(0.1, 0.1, 0.1), origin=(0.0, 0.03, 0.0))
    np.save(tmp_path / "x.npy", v)
    np.save(tmp_path / "t.npy", t)
    data = soft_scene(tmp_path, obj or {"nodes": "x.npy", "tets": "t.npy", "mass": 0.3, "params": {"mu": 3e3, "lam": 5e3}},
                      {"cube.mu": {"init": mu_init}})
    data["simulation"] = {"substeps": substeps}
    return parse_scene(data, str(tmp_path / "scene.toml"))


def test_mass_distribution_spec(tmp_path):
    spec = _spec(tmp_path)
    out = mass_distribution_spec(spec, "equal")
    assert out.objects["cube"].mass_distribution == "equal" and spec.objects["cube"].mass_distribution == "volume"
    assert [u.target for u in out.unknowns] == [u.target for u in spec.unknowns]
    with pytest.raises(ValueError, match="mass_distribution: expected one of 'volume', 'equal', got 'lumped'"):
        mass_distribution_spec(spec, "lumped")
    given = _spec(tmp_path, {"nodes": "x.npy", "tets": "t.npy", "node_mass": 0.04})
    with pytest.raises(ValueError, match="every soft object has node_mass"):
        mass_distribution_spec(given, "equal")
    with pytest.raises(ValueError, match="distributions: expected at least one"):
        compare_mass_distributions(spec, None, distributions=[])


@pytest.mark.slow
def test_compare_mass_distributions_fits_both_and_combines(tmp_path, f64):
    """A soft cube dropped with equal node masses (its footage rendered by tigradsim at the truth), fitted
    from the true mu under both distributions: one row each; the equal one, the model that made the footage,
    stays at the truth with a loss near zero and is the best; the volume-lumped one cannot reach that loss (so
    the distribution did reach each variant's model); the combined mu is the best row's, its interval the
    envelope of the equally good rows'."""
    from tigradsim.scenes.scene_build import Scene
    from tigradsim.io.footage import Footage
    truth_mu = 3e3
    obj = {"nodes": "x.npy", "tets": "t.npy", "mass": 0.3, "mass_distribution": "equal",
           "params": {"mu": truth_mu, "lam": 5e3}, "velocity": [0.0, -1.0, 0.0]}
    spec = _spec(tmp_path, obj, substeps=40, mu_init=truth_mu)
    spec.objects["cube"].vertices = spec.objects["cube"].vertices.copy()
    spec.camera.width = spec.camera.height = 16
    frames = np.zeros((6, 16, 16))
    clip = Footage(frames, 30.0, masks=frames, check_masks=False)
    clip.factor, clip.full_size = 1, (16, 16)
    scene = Scene(spec, clip, requires_grad=False, unknowns=False)
    masks = scene.render_views()[0][..., -1]
    footage = Footage(np.repeat(masks[..., None], 3, axis=-1), 30.0, masks=masks, check_masks=False)
    footage.factor, footage.full_size = 1, (16, 16)
    comparison, fits = compare_mass_distributions(spec, footage, printer=lambda *a, **k: None, iterations=6,
                                                  starts=1, local_starts=1, refine=0, horizons=None)
    assert set(fits) == set(MASS_DISTRIBUTIONS) and {r["label"] for r in comparison.rows} == set(MASS_DISTRIBUTIONS)
    assert comparison.best == "equal", comparison.to_markdown()
    losses = {r["label"]: r["loss"] for r in comparison.rows}
    assert losses["equal"] < 1e-3 * losses["volume"], losses
    mu = comparison.combined["cube.mu"]
    best_row = comparison.rows[0]["estimates"]["cube.mu"]
    assert mu.value == best_row[0] and abs(mu.value / truth_mu - 1) < 0.05
    good = [r for r in comparison.rows if r["equally_good"]]
    if mu.lower95 is not None:
        assert mu.lower95 == min(r["estimates"]["cube.mu"][1] for r in good)
        assert mu.upper95 == max(r["estimates"]["cube.mu"][2] for r in good)


def test_benchmark_combines_the_distributions_fits(monkeypatch):
    """benchmarks/implicit_damping_fit.py --mass-distributions: one fit per distribution (stood in for by its
    report here), compared by the ties rule; the combined rows are scored against the truth."""
    import os
    import sys
    bench = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "benchmarks")
    sys.path.insert(0, bench)
    try:
        import implicit_damping_fit as idf
    finally:
        sys.path.remove(bench)

    def report(loss, mu, lam):
        unknown = lambda v: {"estimate": v, "status": "ok", "ci95": [0.98 * v, 1.02 * v],
                             "ci95_with_assumptions": [0.97 * v, 1.03 * v], "ci95_with_discrepancy": [0.9 * v, 1.1 * v]}
        return {"unknowns": {"cube.mu": unknown(mu), "cube.lam": unknown(lam)}, "iou_final": 0.9,
                "identification": {"minima": [{"report": {"loss": loss, "s2": 1e-3, "residual_count": 500}}]}}

    fits = {"volume": report(309.0, 2368.0, 9226.0), "equal": report(108.0, 3981.0, 9320.0)}
    truths = {"cube.mu": 4000.0, "cube.lam": 9000.0}
    monkeypatch.setattr(idf, "fit_one", lambda a, d, dist: ({"rc": 0, "cpu_s": 80.0}, fits[dist], truths))
    a = types.SimpleNamespace(clip="warp_soft_drop", variant="clean", form="warp", integration="implicit")
    res = idf.compare_distributions(a, "unused", ["volume", "equal"])
    assert res["best"] == "equal" and res["equally_good"] == ["equal"] and res["cpu_s"] == 160.0
    assert res["distributions"]["volume"]["loss_excess"] == pytest.approx(309.0 / 108.0 - 1.0)
    rows = {r["unknown"]: r for r in res["rows"]}
    assert rows["cube.mu"]["estimate"] == 3981.0 and rows["cube.mu"]["in_ci95"] is True
    assert rows["cube.lam"]["ci95"] == [0.98 * 9320.0, 1.02 * 9320.0] and rows["cube.lam"]["in_ci95"] is False
    fits["volume"] = report(110.0, 2368.0, 9226.0)              # within 5 % of the best: both combined
    res = idf.compare_distributions(a, "unused", ["volume", "equal"])
    assert res["equally_good"] == ["equal", "volume"]
    assert {r["unknown"]: r for r in res["rows"]}["cube.mu"]["ci95"] == [0.98 * 2368.0, 1.02 * 3981.0]
