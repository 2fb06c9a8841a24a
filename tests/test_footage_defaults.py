"""Defaults of fits to footage: the silhouette edge as sharp as a camera's (sigma "auto"), and
intervals clustered over blocks of frames with Student's t quantiles."""
import math

import numpy as np
import pytest
import taichi as ti

import tigradsim as tgs
from tigradsim.fitting.uncertainty import Z95, t95
from tigradsim.renderers import Camera, SoftRasterizer, edge_softness_for_edge, sigma_for_edge
from tigradsim.scenes.scene_build import frame_blocks


def _edge_alpha(edge_u, sigma, size=32):
    """Coverage along row size/2 of one big triangle whose left edge is the vertical line u = edge_u
    (pixel units; the triangle extends to the right), seen by an OpenCV camera with f = 1 at z = 1."""
    cam = Camera.from_opencv(np.eye(3), np.eye(3), np.zeros(3), size, size)
    verts = ti.Vector.field(3, float, shape=(1, 3))
    verts.from_numpy(np.array([[[edge_u, -10 * size, 1.0], [edge_u, 10 * size, 1.0], [20 * size, size / 2, 1.0]]]))
    ren = SoftRasterizer(cam, np.array([[0, 1, 2]]), 3, sigma=sigma)
    ren.render(verts)
    return ren.image.to_numpy()[0, size // 2, :, 0]


def test_edge_softness_for_edge_gives_the_edge_width_in_pixels(f64):
    """Coverage 10 % at 0.4 px outside and 90 % at 0.4 px inside a straight edge for edge_px = 0.8
    (pixel centres at integer u); a wider edge_px softens it as the formula says."""
    size = 32
    s = edge_softness_for_edge(0.8, size, size)
    assert sigma_for_edge is edge_softness_for_edge        # its older name
    assert math.isclose(s, (0.8 * 2 / size) ** 2 / (4 * math.log(9)), rel_tol=1e-15)
    a = _edge_alpha(10.4, s, size)            # pixel 10 is 0.4 px outside, pixel 11 0.6 px inside
    assert a[10] == pytest.approx(0.1, abs=1e-6) and a[9] < 1e-4 and a[11] > 0.99
    a = _edge_alpha(10.6, s, size)            # pixel 11 is 0.4 px inside
    assert a[11] == pytest.approx(0.9, abs=1e-6) and a[12] > 0.999
    soft = _edge_alpha(10.4, edge_softness_for_edge(3.2, size, size), size)    # 4x wider: 0.4 px is 1/4 of the way
    assert soft[10] == pytest.approx(1 / (1 + 9 ** (1 / 16)), abs=1e-6)
    assert edge_softness_for_edge(0.8, 64, 32) == pytest.approx(edge_softness_for_edge(0.8, 32, 32))   # the smaller side
    for bad in (0, -1.0, float("nan"), True):
        with pytest.raises(ValueError, match=r"edge_softness_for_edge: edge_px must be a positive number"):
            edge_softness_for_edge(bad, 32, 32)


def test_t95_table_and_series():
    assert t95(1) == 12.706 and t95(5) == 2.571 and t95(30) == 2.042
    assert t95(math.inf) == Z95
    # the series above the table joins it and approaches 1.96
    assert abs(t95(30.0000001) - 2.0423) < 2e-4 and abs(t95(60) - 2.0003) < 1e-4 and abs(t95(120) - 1.9799) < 1e-4
    assert all(t95(n) > t95(n + 1) > Z95 for n in range(1, 200))
    with pytest.raises(ValueError, match=r"t95: dof must be >= 1, got 0"):
        t95(0)


def test_frame_blocks():
    assert np.array_equal(frame_blocks(36, 6), np.repeat(np.arange(6), 6))
    assert np.array_equal(frame_blocks(7, 6), [0, 0, 1, 2, 3, 4, 5])
    assert np.array_equal(frame_blocks(3, 3), [0, 1, 2])
    with pytest.raises(ValueError, match=r"frame_blocks: expected 1 <= blocks <= frames, got blocks=7, frames=6"):
        frame_blocks(6, 7)


def test_few_cluster_intervals_use_t_quantiles_and_cover(f64):
    """y = X beta + a shared error per block of 6 blocks: the intervals are t95(5) robust std wide
    either way, and cover the truth in >= 80 % of 40 seeded repeats (with 1.96 they would not)."""
    beta = ti.field(float, shape=2, needs_grad=True)
    p = tgs.Param(beta, "beta")
    truth = np.array([1.0, 2.0])
    G, per = 6, 50
    covered = covered_z = 0
    for seed in range(40):
        rng = np.random.default_rng(seed)
        block = np.repeat(np.arange(G), per)
        x = rng.normal(size=G)[block] + 0.3 * rng.normal(size=G * per)
        X = np.stack([np.ones(G * per), x], axis=1)
        y = X @ truth + rng.normal(0.0, 0.3, G)[block] + rng.normal(0.0, 0.01, G * per)
        b = np.linalg.lstsq(X, y, rcond=None)[0]
        p.write(b)
        rep = tgs.fit_report(None, [p], noise_floor=0.0, jacobian=(X, X @ b - y), groups=block)
        for i in range(2):
            e = rep[f"beta[{i}]"]
            assert math.isclose(e.upper95 - e.value, t95(G - 1) * e.std, rel_tol=1e-12)
            covered += e.lower95 <= truth[i] <= e.upper95
            covered_z += abs(e.value - truth[i]) <= Z95 * e.std
    print(covered, covered_z)
    assert covered >= 0.8 * 80 and covered > covered_z


@pytest.mark.slow
def test_scene_edge_softness_auto_default_and_errors(tmp_path, f64):
    """A scene file without [fit] edge_softness renders with edge_softness_for_edge(0.8 px) at the
    render size; "auto" says the same; a number is used as given (also under the older key `sigma`);
    any other string names the key, and so does giving both keys."""
    from test_scene_file import _scene
    from tigradsim.scenes.scene_build import EDGE_PX, Scene, load_scene_footage
    from tigradsim.scenes.scene_file import SceneError, parse_scene

    auto = edge_softness_for_edge(EDGE_PX, 8, 8)
    for key, value, expect in (("edge_softness", None, auto), ("edge_softness", "auto", auto),
                               ("edge_softness", 2e-3, 2e-3), ("sigma", 3e-3, 3e-3)):
        data = _scene(tmp_path) if value is None else _scene(tmp_path, **{"fit." + key: value})
        spec = parse_scene(data, str(tmp_path / "scene.toml"))
        assert spec.fit.sigma == spec.fit.edge_softness
        scene = Scene(spec, load_scene_footage(spec))
        assert scene.renderer.edge_softness == pytest.approx(expect, rel=1e-12)
        assert scene.edge_softness == scene.sigma == scene.renderer.edge_softness
        assert scene.interval_blocks(3) == 3 and scene.interval_blocks(40) == 6
    with pytest.raises(SceneError, match=r"\[fit\].*sigma.*older name of edge_softness"):
        parse_scene(_scene(tmp_path, **{"fit.sigma": 1e-3, "fit.edge_softness": 1e-3}), str(tmp_path / "scene.toml"))
    with pytest.raises(SceneError, match=r"\[fit\].*edge_softness.*expected a positive number or \"auto\", got \"sharp\""):
        parse_scene(_scene(tmp_path, **{"fit.edge_softness": "sharp"}), str(tmp_path / "scene.toml"))
    with pytest.raises(SceneError, match=r"\[fit\].*sigma.*expected a positive number or \"auto\", got \"sharp\""):
        parse_scene(_scene(tmp_path, **{"fit.sigma": "sharp"}), str(tmp_path / "scene.toml"))


def test_systematics_shift_the_estimate_and_widen_the_interval(f64):
    """Linear least squares y = X beta; a refined model whose data are y + X d (its estimate is
    beta_hat + d): fit_report's systematic shift is factor * d exactly, `Estimate.bias` holds it,
    and the 95 % interval covers both beta_hat and beta_hat + factor * d; bad input is named."""
    rng = np.random.default_rng(3)
    X = np.stack([np.ones(200), rng.normal(size=200)], axis=1)
    y = X @ np.array([1.0, 2.0]) + rng.normal(0.0, 0.01, 200)
    beta = ti.field(float, shape=2, needs_grad=True)
    p = tgs.Param(beta, "beta")
    b = np.linalg.lstsq(X, y, rcond=None)[0]
    p.write(b)
    r = X @ b - y
    d = np.array([0.05, -0.02])
    plain = tgs.fit_report(None, [p], noise_floor=0.0, jacobian=(X, r))
    rep = tgs.fit_report(None, [p], noise_floor=0.0, jacobian=(X, r), systematics={"dt": (X @ b - (y + X @ d), 2.0)})
    assert np.allclose(rep.systematics["dt"], 2 * d, rtol=1e-10, atol=1e-14)
    for i in range(2):
        e, e0 = rep[f"beta[{i}]"], plain[f"beta[{i}]"]
        assert e.bias == pytest.approx(2 * d[i], rel=1e-10) and e.std == e0.std
        assert e.lower95 <= e.value + 2 * d[i] - 1.9 * e.std and e.upper95 >= e.value + 1.9 * e.std
        assert min(e.upper95 - e.value, e.value - e.lower95) == pytest.approx(Z95 * e.std, rel=1e-9)
        assert e.upper95 - e.lower95 == pytest.approx(2 * Z95 * e.std + 2 * abs(d[i]), rel=1e-9)
    assert any(n.startswith("dt: the estimates would move by beta[0] +0.1") for n in rep.notes)
    assert "model bias" in rep.to_markdown()
    with pytest.raises(ValueError, match=r"systematics\['dt'\]: expected 200 residuals \(as many as the fit's\), got 199"):
        tgs.fit_report(None, [p], noise_floor=0.0, jacobian=(X, r), systematics={"dt": (r[:-1], 2.0)})
    with pytest.raises(ValueError, match=r"systematics\['dt'\]: expected \(residuals, factor\)"):
        tgs.fit_report(None, [p], noise_floor=0.0, jacobian=(X, r), systematics={"dt": r})
