"""Reproducibility of rendering (issue 16 item 8): with `tigradsim.core.runtime.deterministic()`
(the CPU default) frames and every renderer gradient are bit-identical between two
runs in one process and across processes.

The scene makes every shared reduction matter: a 320-face sphere, smooth Lambert
normals (shared vertex-normal sums), two frames in one Tape (recompute path), a
camera correction, a background plate, and losses whose adjoints reach every
vertex, colour, light, camera and background field.
"""
import json
import os
import subprocess
import sys

import numpy as np
import pytest
import taichi as ti

import tigradsim as tgs
from tigradsim.renderers import Camera, ImageMSE, SilhouetteMSE, SoftRasterizer, icosphere

GRADS = ("X", "vertex_colors", "light_dir", "light_color", "ambient", "background", "background_image",
         "camera_delta", "focal_scale")


def build(size=32):
    v, f = icosphere(2, 0.9)
    rng = np.random.default_rng(0)
    cam = Camera(eye=(0.3, 0.4, 2.8), width=size, height=size)
    ren = SoftRasterizer(cam, f, len(v), frames=2, shading="lambert", normals="smooth", sigma=1e-3, gamma=1e-2,
                         vertex_colors=rng.random((len(v), 3)), background=rng.uniform(0.2, 0.8, (size, size, 3)))
    ren.camera_delta.from_numpy(np.array([0.01, -0.02, 0.005, 0.02, 0.01, -0.03]))
    ren.focal_scale[None] = 1.02
    X = ti.Vector.field(3, float, shape=(2, len(v)), needs_grad=True)
    X.from_numpy(np.stack([v, v * [1.05, 0.95, 1.0] + [0.05, 0.02, 0.0]]))
    target = rng.random((2, size, size, 3))
    loss = ti.field(float, shape=(), needs_grad=True)
    mse = ImageMSE(ren.image, target)
    return ren, X, loss, mse


def render_and_grads(ren, X, loss, mse):
    with ti.ad.Tape(loss):
        ren.render(X, 0, 0)
        ren.render(X, 1, 1)
        mse(loss)
    out = {"image": ren.image.to_numpy(), "loss": np.array(loss[None])}
    for name in GRADS:
        field = X if name == "X" else getattr(ren, name)
        out[name] = field.grad.to_numpy()
    return out


def main(path):
    tgs.init(arch="cpu", precision="f64")
    np.savez(path, **render_and_grads(*build()))


def _assert_identical(a, b):
    for k in a:
        assert np.array_equal(a[k], b[k]), f"{k} differs (max {np.abs(a[k] - b[k]).max():.3g})"


@pytest.fixture(scope="module")
def first():
    tgs.init(arch="cpu", precision="f64")
    assert tgs.deterministic()
    scene = build()
    return scene, render_and_grads(*scene)


def test_render_and_gradients_bit_identical_in_process(first):
    scene, a = first
    for name in GRADS:
        assert np.abs(a[name]).max() > 0, f"{name} has no gradient"
    b = render_and_grads(*scene)
    _assert_identical(a, b)
    c = render_and_grads(*build())                   # a new renderer, same process
    _assert_identical(a, c)


@pytest.mark.slow
def test_render_and_gradients_bit_identical_across_processes(first, tmp_path):
    _, a = first
    path = tmp_path / "run.npz"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.path.dirname(__file__)] + sys.path))
    subprocess.run([sys.executable, "-c", f"import test_render_repro as t; t.main({str(path)!r})"], check=True,
                   env=env, timeout=600, capture_output=True)
    b = dict(np.load(path))
    _assert_identical(a, b)


def silhouette_build(size=32):
    """Two frames of a 320-face sphere's silhouette with a loss on them (the silhouette path's own
    loops: coverage sums while binning, the written-out backward)."""
    v, f = icosphere(2, 0.9)
    cam = Camera(eye=(0.3, 0.4, 2.8), width=size, height=size)
    ren = SoftRasterizer(cam, f, len(v), frames=2, sigma=1e-3)
    X = ti.Vector.field(3, float, shape=(2, len(v)), needs_grad=True)
    X.from_numpy(np.stack([v, v * [1.05, 0.95, 1.0] + [0.05, 0.02, 0.0]]))
    target = np.random.default_rng(1).random((2, size, size))
    return ren, X, ti.field(float, shape=(), needs_grad=True), SilhouetteMSE(ren.image, target)


@pytest.mark.slow
@pytest.mark.parametrize("scene", [build, silhouette_build])
def test_small_loops_serial_or_parallel_bit_identical(first, monkeypatch, scene):
    """The renderer's bookkeeping loops run on one thread below `runtime.SERIAL_LOOP_MAX` entries
    (times a cost); on either side of the limit frames and gradients are bit-identical."""
    outs = []
    for limit in (10 ** 9, 0):           # every such loop serial, then every one parallel
        monkeypatch.setattr(tgs.runtime, "SERIAL_LOOP_MAX", limit)
        ren, X, loss, mse = scene()
        with ti.ad.Tape(loss):
            ren.render(X, 0, 0)
            ren.render(X, 1, 1)
            mse(loss)
        outs.append({"image": ren.image.to_numpy(), "loss": np.array(loss[None]), "X": X.grad.to_numpy()})
    assert np.abs(outs[0]["X"]).max() > 0
    _assert_identical(*outs)


if __name__ == "__main__":
    main(sys.argv[1])
