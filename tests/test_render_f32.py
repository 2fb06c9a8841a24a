"""The renderer in float32 (benchmarks, demos) agrees with float64."""
import numpy as np
import pytest
import taichi as ti

import tigradsim as tgs
from tigradsim.renderers import Camera, ImageMSE, SoftRasterizer, icosphere


def _image_and_grads():
    v, f = icosphere(2, 0.9)
    cam = Camera(eye=(0.4, 0.3, 3.0), width=24, height=24)
    ren = SoftRasterizer(cam, f, len(v), shading="lambert", sigma=1e-4, gamma=1e-4,
                         vertex_colors=0.5 + 0.5 * v / 0.9)
    rng = np.random.default_rng(0)
    target = rng.random((1, 24, 24, 4))
    X = ti.Vector.field(3, float, shape=(1, len(v)), needs_grad=True)
    X.from_numpy((v * [1.1, 0.9, 1.0])[None].astype(tgs.runtime.np_float()))
    loss = ti.field(float, shape=(), needs_grad=True)
    mse = ImageMSE(ren.image, target)
    with ti.ad.Tape(loss):
        ren.render(X, 0, 0)
        mse(loss)
    return (ren.image.to_numpy().astype(np.float64), X.grad.to_numpy().astype(np.float64),
            ren.light_dir.grad.to_numpy().astype(np.float64))


@pytest.mark.slow
def test_float32_matches_float64():
    try:
        tgs.init(arch="cpu", precision="f64")
        img64, g64, l64 = _image_and_grads()
        tgs.init(arch="cpu", precision="f32")
        img32, g32, l32 = _image_and_grads()
    finally:
        tgs.init(arch="cpu", precision="f64")
    assert np.abs(img32 - img64).max() < 2e-4
    assert np.linalg.norm(g32 - g64) < 1e-3 * np.linalg.norm(g64)
    assert np.linalg.norm(l32 - l64) < 1e-3 * np.linalg.norm(l64)
