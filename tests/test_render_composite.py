"""Coverage blending (I = A C + (1 - A) B over a background plate): colour carries
geometry gradients at the default gamma (1e-4), where SoftRas's softmax blending
gives none (DESIGN.md section 7).  Float64, Tape against central differences.
"""
import numpy as np
import pytest
import taichi as ti

import tigradsim as tgs
from tigradsim import meshes
from tigradsim.renderers import Camera, ImageMSE, RendererWarning, SoftRasterizer, icosphere
from tigradsim.physics.rigid import RigidSurface, add_body_force
from tigradsim.fitting.sysid import render_surface

RTOL = 1e-5


@pytest.fixture(scope="module", autouse=True)
def _f64():
    tgs.init(arch="cpu", precision="f64")
    yield


def _plate(H, W, seed=0):
    """A smooth, non-constant background plate in [0.1, 0.9]."""
    rows, cols = np.mgrid[0:H, 0:W] / max(H, W)
    rng = np.random.default_rng(seed)
    plate = np.stack([0.5 + 0.3 * np.sin(5 * cols + 2 * rows + k) for k in range(3)], axis=-1)
    return np.clip(plate + 0.05 * rng.random((H, W, 3)), 0.1, 0.9)


def _vertex_image_loss(ren, v, target):
    """(X, loss, run): a vertex field holding `v`, and `run()` rendering it into frame 0 and
    adding its ImageMSE against `target` (H, W, C) to `loss`."""
    X = ti.Vector.field(3, float, shape=(1, len(v)), needs_grad=True)
    X.from_numpy(v[None])
    loss = ti.field(float, shape=(), needs_grad=True)
    mse = ImageMSE(ren.image, target[None])

    def run():
        ren.render(X, 0, 0)
        mse(loss)

    return X, loss, run


def _rgb_grad(blend, shading="color"):
    """Tape gradient of an RGB-only ImageMSE w.r.t. the vertices of a uniformly coloured
    sphere (unlit: colour is constant inside the object), at gamma 1e-4, and the FD check."""
    v, f = icosphere(1, 0.8)
    W, H = 24, 20
    cam = Camera(eye=(0.3, 0.2, 3.0), width=W, height=H)
    kw = dict(shading=shading, sigma=1e-3, gamma=1e-4, vertex_colors=(0.9, 0.6, 0.2), background=_plate(H, W),
              blend=blend)
    if blend == "softmax":
        with pytest.warns(RendererWarning, match="no gradient"):
            ren = SoftRasterizer(cam, f, len(v), **kw)
    else:
        ren = SoftRasterizer(cam, f, len(v), **kw)
    target = ren.render_numpy(v * [1.06, 0.95, 1.0] + [0.05, 0.0, 0.0])[..., :3].copy()   # RGB only
    X, loss, run = _vertex_image_loss(ren, v, target)
    report = tgs.check_gradient(run, loss, [X], n_dirs=3, eps=1e-6, rtol=RTOL, atol=1e-14)
    return report, X.grad.to_numpy(), ren


@pytest.mark.slow
def test_coverage_rgb_gradient_wrt_vertices_at_default_gamma():
    report, g, ren = _rgb_grad("coverage")
    assert ren.blend == "coverage" and ren.gamma == 1e-4
    report.assert_ok()
    assert np.abs(report.numeric).min() > 1e-6 and np.linalg.norm(g) > 1e-3
    # the same loss through SoftRas's softmax blending: colour is piecewise constant
    # in the vertices (Tape and finite differences agree that it is ~0)
    report_s, g_s, ren_s = _rgb_grad("softmax")
    assert np.linalg.norm(g_s) < 1e-9 * np.linalg.norm(g)
    assert np.abs(report_s.numeric).max() < 1e-9 * np.abs(report.numeric).max()


def test_coverage_is_the_default_for_rgb_and_lambert_gradients_hold():
    v, f = icosphere(1, 0.8)
    cam = Camera(eye=(0.3, 0.2, 3.0), width=20, height=18)
    rng = np.random.default_rng(2)
    ren = SoftRasterizer(cam, f, len(v), shading="lambert", sigma=1e-3, vertex_colors=rng.random((len(v), 3)))
    assert ren.blend == "coverage"
    plate = _plate(18, 20, 1)
    ren.set_background(plate)
    assert np.allclose(ren.background_image.to_numpy(), plate) and not ren.background.to_numpy().any()
    img = ren.render_numpy(v)
    A = img[..., 3:]
    far = A[..., 0] < 1e-12
    assert far.sum() > 50 and np.allclose(img[far][:, :3], plate[far], atol=1e-12)   # (1 - A) B off the object
    target = ren.render_numpy(v * 1.05 + [0.0, 0.04, 0.0])[..., :3].copy()
    X, loss, run = _vertex_image_loss(ren, v, target)
    tgs.check_gradient(run, loss, [X, ren.background_image, ren.vertex_colors, ren.light_dir], n_dirs=3,
                       eps=1e-6, rtol=RTOL).assert_ok()
    assert np.abs(ren.background_image.grad.to_numpy()).max() > 0
    # a constant colour again, through the same call
    ren.set_background((0.2, 0.3, 0.4))
    assert not ren.background_image.to_numpy().any()
    assert np.allclose(ren.render_numpy(v)[far][:, :3], [0.2, 0.3, 0.4], atol=1e-12)


def test_background_input_errors():
    cam = Camera(width=8, height=6)
    v, f = icosphere(0, 1.0)
    ren = SoftRasterizer(cam, f, len(v), shading="color")
    with pytest.raises(ValueError, match=r"background has shape \(6, 9, 3\).*\(6, 8, 3\)"):
        ren.set_background(np.zeros((6, 9, 3)))
    with pytest.raises(ValueError, match="0-255"):
        ren.set_background(np.full((6, 8, 3), 200.0))
    with pytest.raises(ValueError, match="non-finite"):
        ren.set_background(np.full((6, 8, 3), np.nan))
    ren.set_background(np.full((6, 8), 255, dtype=np.uint8))          # uint8 grey plate
    assert np.allclose(ren.background_image.to_numpy(), 1.0)
    with pytest.raises(ValueError, match="blend"):
        SoftRasterizer(cam, f, len(v), shading="color", blend="alpha")


def test_rgb_loss_gradient_wrt_rigid_mass_matches_fd():
    """The issue's acceptance test: a box dropped a few mm onto the ground and pushed
    sideways by a known force, rendered Lambert-shaded and blended by coverage over a
    non-trivial plate at gamma 1e-4; the RGB loss's d/d(mass) agrees with central
    differences (with softmax blending it was ~1e-18 against -1e-2)."""
    b = tgs.SceneBuilder(gravity=(0.0, -9.8, 0.0))
    b.add_ground(ke=2e3, kd=30.0, kf=10.0, mu=0.5)
    v, f = meshes.box_surface((0.3, 0.1, 0.22))
    body = b.add_rigid_body(v, f, mass=1.0, position=(-0.1, 0.053, 0.0))
    add_body_force(b, body, force=(12.0, 0.0, 0.0), point=(0.0, 0.0, 0.04), start=0.0, end=0.1)
    model = b.finalize(requires_grad=True)
    sim = tgs.Simulator(model, dt=1e-3, steps=120)
    surface = RigidSurface(sim, every=40)
    W, H = 32, 24
    cam = Camera(eye=(0.0, 0.6, 1.2), target=(0.0, 0.03, 0.0), fov=40, width=W, height=H)
    rng = np.random.default_rng(3)
    ren = SoftRasterizer(cam, surface.faces, surface.vertex_count, frames=surface.frames, shading="lambert",
                         sigma=1e-3, gamma=1e-4, face_colors=rng.uniform(0.3, 1.0, (surface.face_count, 3)),
                         color_mode="face", background=_plate(H, W, 4))
    assert ren.blend == "coverage"
    render_surface(sim, ren, surface, 40)
    sim.run()
    first = ren.image.to_numpy()[0]
    model.set("body_mass", [1.3])
    sim.run()
    target = ren.image.to_numpy()[..., :3].copy()          # RGB only
    model.set("body_mass", [1.0])
    loss = ti.field(float, shape=(), needs_grad=True)
    mse = ImageMSE(ren.image, target)

    def run():
        sim.run()
        mse(loss)

    run()
    moved = ren.image.to_numpy()[-1]
    assert first[..., 3].sum() > 20 and np.abs(moved[..., :3] - first[..., :3]).max() > 0.2   # it slides in view
    report = tgs.check_gradient(run, loss, [model.body_mass], n_dirs=1, eps=1e-6, rtol=RTOL)
    report.assert_ok()
    assert abs(report.analytic[0]) > 1e-6
