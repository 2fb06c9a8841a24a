"""The silhouette in pixel lanes (`SoftRasterizer(pixel_lanes=True)`, the CPU default for silhouettes):
the same images and Tape gradients as the (pixel, face) pair list to round-off, finite differences in
float64, and its argument checks."""
import numpy as np
import pytest
import taichi as ti

import tigradsim as tgs
from tigradsim.renderers import Camera, SilhouetteMSE, SoftRasterizer, icosphere
from atomic_order import ON_GPU

RTOL = 1e-5

pytestmark = pytest.mark.skipif(ON_GPU, reason="pixel lanes are the CPU path; GPUs render from the pair list")


@pytest.fixture(scope="module", autouse=True)
def _f64():
    tgs.init(arch="cpu", precision="f64")
    yield


def _scene(width=45, height=37, projection="perspective"):
    """A 320-face sphere in three slots: in view, across the image's top-left corner, and squashed
    across its bottom-right corner (where the tiles are cut by the border: 45 x 37 px is no multiple
    of 8)."""
    v, f = icosphere(2, 0.8)
    cam = Camera(eye=(0.3, 0.2, 3.0), width=width, height=height, projection=projection, ortho_scale=1.6)
    X = ti.Vector.field(3, float, shape=(3, len(v)), needs_grad=True)
    X.from_numpy(np.stack([v, v * 0.9 + [-1.4, 1.1, 0.0], v * [1.0, 0.8, 0.9] + [1.4, -1.0, 0.0]]))
    target = np.random.default_rng(4).random((3, height, width))
    return cam, v, f, X, target


def _render_grads(cam, f, n, X, target, always_recompute=False, **kw):
    """Three frames (slots 0, 1, 2) in one Tape under a silhouette MSE; returns the images and the
    gradients of the vertices, camera_delta and focal_scale."""
    ren = SoftRasterizer(cam, f, n, frames=3, sigma=2e-3, **kw)
    ren.camera_delta.from_numpy(np.array([0.01, -0.02, 0.015, 0.02, -0.01, 0.03]))
    ren.focal_scale[None] = 1.03
    mse = SilhouetteMSE(ren.image, target)
    loss = ti.field(float, shape=(), needs_grad=True)
    ren.always_recompute = always_recompute
    with ti.ad.Tape(loss):
        for k in range(3):
            ren.render(X, k, k)
        mse(loss)
    return ren, [ren.image.to_numpy(), X.grad.to_numpy(), ren.camera_delta.grad.to_numpy(),
                 np.array([ren.focal_scale.grad[None]])]


@pytest.mark.parametrize("kw", [dict(), dict(closed=True), dict(cull_backfaces=True), dict(tile_size=4),
                                dict(tile_size=12, keep_frames=False), dict(projection="orthographic"),
                                dict(pixel_lanes=8), dict(pixel_lanes=8, tile_size=16, closed=True, keep_frames=False)],
                         ids=["union", "closed", "cull", "tile4", "tile12-recompute", "orthographic", "lanes8",
                              "lanes8-tile16-closed-recompute"])
@pytest.mark.slow
def test_pixel_lanes_equal_the_pair_list(kw):
    """Lanes of the automatic count (4 in float64, `exec.simd.lane_count`) and of 8 (float32's on CPUs
    with AVX2): the pair list's images and gradients to round-off."""
    kw = dict(kw)
    cam, v, f, X, target = _scene(projection=kw.pop("projection", "perspective"))
    count = kw.pop("pixel_lanes", True)
    lanes, got = _render_grads(cam, f, len(v), X, target, pixel_lanes=count, **kw)
    pairs, want = _render_grads(cam, f, len(v), X, target, pixel_lanes=False, **kw)
    assert lanes.pixel_lanes and not pairs.pixel_lanes and lanes.pair_count == 0 < pairs.pair_count
    assert lanes.lane_count == (4 if count is True else count) and pairs.lane_count == 0
    img = want[0]
    assert 0.05 < img.mean() < 0.95 and img[1, 0, 0] > 0.5 and img[2, -1, -1] > 0.5     # the corners covered
    assert np.abs(got[0] - img).max() < 1e-14
    for a, b in zip(got[1:], want[1:]):
        assert np.abs(b).max() > 0
        assert np.abs(a - b).max() <= 1e-12 * np.abs(b).max()


@pytest.mark.slow
def test_pixel_lanes_kept_and_recomputed_backward_bit_identical():
    """The backward of a kept frame (projection redone, tile lists rebuilt, S copied back) and of a
    re-rendered one (always_recompute, and keep_frames=False) give the same bits."""
    cam, v, f, X, target = _scene()
    _, kept = _render_grads(cam, f, len(v), X, target, keep_frames=True)
    for other in (_render_grads(cam, f, len(v), X, target, always_recompute=True, keep_frames=True)[1],
                  _render_grads(cam, f, len(v), X, target, keep_frames=False)[1]):
        for a, b in zip(kept, other):
            np.testing.assert_array_equal(a, b)


@pytest.mark.slow
def test_pixel_lanes_consume_the_image_gradient():
    """After the backward pass image.grad is 0 everywhere (consumed, as Taichi's reverse of the image store
    leaves it, so a frame rendered twice in one Tape passes its gradient on once), in tiles no face reaches
    too (the target is nonzero there, so the loss gave them a gradient); the pair list the same."""
    cam, v, f, X, target = _scene()
    for lanes in (True, False):
        ren, _ = _render_grads(cam, f, len(v), X, target, pixel_lanes=lanes)
        empty = ren.image.to_numpy()[..., 0] == 0.0
        assert empty.sum() > 64 and np.all(target[empty] > 0.0)
        np.testing.assert_array_equal(ren.image.grad.to_numpy(), 0.0)


@pytest.mark.parametrize("closed, lanes, keep", [(False, None, True), (True, None, True), (False, 8, True),
                                                 (False, None, False)])
@pytest.mark.slow
def test_pixel_lanes_gradient_matches_finite_differences(closed, lanes, keep):
    """Central differences in f64.  keep=False: one slot for the sums, so the backward pass bins frames 1
    and 0 again (into that slot) before their gradients."""
    cam, v, f, X, target = _scene()
    ren = SoftRasterizer(cam, f, len(v), frames=3, sigma=2e-3, closed=closed, pixel_lanes=lanes, keep_frames=keep)
    assert ren.pixel_lanes and ren.lane_count == (lanes or 4) and ren.keep_frames == keep
    assert ren.kept_log.shape[0] == (3 if keep else 1)
    mse = SilhouetteMSE(ren.image, target)
    loss = ti.field(float, shape=(), needs_grad=True)
    ren.camera_delta.from_numpy(np.array([0.01, -0.02, 0.015, 0.02, -0.01, 0.03]))

    def run():
        for k in range(3):
            ren.render(X, k, k)
        mse(loss)

    tgs.check_gradient(run, loss, [X, ren.camera_delta, ren.focal_scale], n_dirs=3, eps=1e-6,
                       rtol=RTOL).assert_ok()


def test_pixel_lanes_choice_and_argument_checks():
    cam, v, f, _, _ = _scene()
    assert SoftRasterizer(cam, f, len(v)).pixel_lanes                      # CPU silhouette: lanes
    for kw in (dict(shading="color"), dict(tile_size=6), dict(binning=False)):
        assert not SoftRasterizer(cam, f, len(v), **kw).pixel_lanes
        with pytest.raises(ValueError, match="pixel_lanes=True needs shading='silhouette', binning=True and a "
                                             "tile_size divisible by 4"):
            SoftRasterizer(cam, f, len(v), pixel_lanes=True, **kw)
    with pytest.raises(TypeError, match="pixel_lanes='yes' must be True, False, None"):
        SoftRasterizer(cam, f, len(v), pixel_lanes="yes")
    for count, kw in ((3, {}), (0, {}), (-4, {}), (16, {}), (4, dict(shading="color")), (4, dict(binning=False))):
        with pytest.raises(ValueError, match=f"pixel_lanes={count} needs shading='silhouette', binning=True and a "
                                             "positive divisor of tile_size"):
            SoftRasterizer(cam, f, len(v), pixel_lanes=count, **kw)
    assert SoftRasterizer(cam, f, len(v), pixel_lanes=2).lane_count == 2
    assert SoftRasterizer(cam, f, len(v), pixel_lanes=True, tile_size=12).lane_count == 4


def test_simd_lane_counts(monkeypatch):
    """Lanes of one register's worth: 32-byte registers where LLVM 15 vectorizes with AVX2 (not on an AMD
    family it does not name), else 16 bytes; at least 4 lanes; the environment's override checked."""
    from tigradsim.exec import simd
    assert simd.simd_bytes_for(("GenuineIntel", 6, {"sse2", "avx", "avx2", "avx512f"})) == 32
    assert simd.simd_bytes_for(("AuthenticAMD", 25, {"sse2", "avx2"})) == 32
    assert simd.simd_bytes_for(("AuthenticAMD", 26, {"sse2", "avx2", "avx512f"})) == 16
    assert simd.simd_bytes_for(("GenuineIntel", 6, {"sse2", "avx"})) == 16
    assert simd.simd_bytes_for(None) == 16
    info = simd._cpu_info()
    assert info is None or (isinstance(info[1], int) and "sse2" in info[2])
    for env, f32, f64 in (("32", 8, 4), ("16", 4, 4), ("64", 16, 8)):
        monkeypatch.setenv(simd.SIMD_BYTES_ENV, env)
        simd.simd_bytes.cache_clear()
        assert (simd.lane_count(4), simd.lane_count(8)) == (f32, f64)
    monkeypatch.setenv(simd.SIMD_BYTES_ENV, "48")
    simd.simd_bytes.cache_clear()
    with pytest.raises(ValueError, match="TIGRADSIM_SIMD_BYTES='48': expected one of"):
        simd.simd_bytes()
    monkeypatch.delenv(simd.SIMD_BYTES_ENV)
    simd.simd_bytes.cache_clear()
    with pytest.raises(ValueError, match="float_bytes: expected 4 or 8, got 2"):
        simd.lane_count(2)
