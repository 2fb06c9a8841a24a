"""Finite-difference checks (float64) of the soft rasterizer's Tape gradients.

Every check renders inside `ti.ad.Tape` through `SoftRasterizer.render`, one
custom tape op per frame, with losses from renderers/losses.py.
"""
import numpy as np
import pytest
import taichi as ti

import tigradsim as tgs
from tigradsim.renderers import (BlurredImageMSE, Camera, ImageMSE, SilhouetteMSE, SoftIoU, SoftRasterizer,
                                  gaussian_blur, icosphere)
from atomic_order import assert_same_sums

RTOL = 1e-5


@pytest.fixture(scope="module", autouse=True)
def _f64():
    tgs.init(arch="cpu", precision="f64")
    yield


def _sphere_scene(shading, color_mode="vertex", projection="perspective", cull=False, frames=2, **kw):
    v, f = icosphere(1, 0.9)
    rng = np.random.default_rng(7)
    cam = Camera(eye=(0.3, 0.2, 3.0), width=24, height=20, projection=projection, ortho_scale=1.3)
    ren = SoftRasterizer(cam, f, len(v), frames=frames, shading=shading, color_mode=color_mode,
                         vertex_colors=rng.random((len(v), 3)), face_colors=rng.random((len(f), 3)),
                         sigma=3e-3, gamma=3e-2, cull_backfaces=cull, background=(0.2, 0.1, 0.3),
                         lights=[((0.3, 0.9, 1.0), (0.7, 0.6, 0.5)), ((-1.0, 0.2, 0.3), (0.2, 0.3, 0.4))], **kw)
    target = ren.render_numpy(v + 0.06 * rng.standard_normal(v.shape)).copy()
    X = ti.Vector.field(3, float, shape=(3, len(v)), needs_grad=True)
    X.from_numpy(np.stack([v, v * 0.95 + [0.05, 0.0, 0.0], v * [1.05, 0.9, 1.0]]))
    return ren, X, target


def _loss():
    return ti.field(float, shape=(), needs_grad=True)


@pytest.mark.slow
@pytest.mark.parametrize("keep_frames", [True, False])
def test_silhouette_mse_two_frames_share_scratch(keep_frames):
    """Two frames rendered in one Tape re-use the scratch buffers: the custom
    op's recompute (keep_frames=False) or the kept pairs and sums (True) keep both
    frames' gradients right."""
    ren, X, target = _sphere_scene("silhouette", keep_frames=keep_frames)
    loss = _loss()
    mse = SilhouetteMSE(ren.image, np.stack([target[..., 0], target[..., 0]]), frames=[0, 1])

    def run():
        ren.render(X, 2, 0)
        ren.render(X, 1, 1)
        mse(loss)

    tgs.check_gradient(run, loss, [X], n_dirs=3, eps=1e-6, rtol=RTOL).assert_ok()
    # the gradient reaches both slots, and not the unused one
    g = X.grad.to_numpy()
    assert np.abs(g[1]).max() > 0 and np.abs(g[2]).max() > 0 and np.abs(g[0]).max() == 0


@pytest.mark.slow
def test_soft_iou_gradient():
    ren, X, target = _sphere_scene("silhouette", frames=1)
    loss = _loss()
    iou = SoftIoU(ren.image, target[None, ..., 0])

    def run():
        ren.render(X, 1, 0)
        iou(loss)

    tgs.check_gradient(run, loss, [X], n_dirs=3, eps=1e-6, rtol=RTOL).assert_ok()


@pytest.mark.slow
def test_blurred_image_mse_matches_numpy_and_fd():
    """Two RGB target frames compared with image frames (2, 0), blurred at 0, 1.5 and 3 px."""
    img = ti.Vector.field(4, float, shape=(3, 12, 10), needs_grad=True)
    rng = np.random.default_rng(0)
    img.from_numpy(rng.uniform(0, 1, (3, 12, 10, 4)))
    target = rng.uniform(0, 1, (2, 12, 10, 3))
    blur_px = (0.0, 1.5, 3.0)
    lossobj = BlurredImageMSE(img, target, frames=[2, 0], blur_px=blur_px, weight=0.7)
    loss = _loss()
    lossobj(loss)
    a = img.to_numpy()[[2, 0]][..., :3]
    expect = 0.7 * sum(np.mean([(gaussian_blur(a[k], s) - gaussian_blur(target[k], s)) ** 2 for k in range(2)])
                       for s in blur_px)
    assert loss[None] == pytest.approx(expect, rel=1e-10)
    tgs.check_gradient(lambda: lossobj(loss), loss, [img], n_dirs=2, rtol=RTOL).assert_ok()
    # a silhouette renderer's video, target set later (VideoFit's use), through the rasterizer
    ren, X, frame = _sphere_scene("silhouette", frames=2)
    blurred = BlurredImageMSE(ren.image, blur_px=(0.0, 2.0))
    blurred.set_target(np.stack([frame, frame[::-1]]))

    def run():
        ren.render(X, 1, 0)
        ren.render(X, 2, 1)
        blurred(loss)

    tgs.check_gradient(run, loss, [X], n_dirs=3, eps=1e-6, rtol=RTOL).assert_ok()
    with pytest.raises(ValueError, match="blur_px"):
        BlurredImageMSE(img, target, frames=[2, 0], blur_px=(-1.0,))
    with pytest.raises(ValueError, match="sigmas"):       # the older name is still checked by its name
        BlurredImageMSE(img, target, frames=[2, 0], sigmas=(-1.0,))
    with pytest.raises(TypeError, match="blur_px and sigmas"):
        BlurredImageMSE(img, target, frames=[2, 0], blur_px=(0.0,), sigmas=(0.0,))
    alias = BlurredImageMSE(img, target, frames=[2, 0], sigmas=blur_px, weight=0.7)   # sigmas= names blur_px
    assert [lvl["blur_px"] for lvl in alias.levels] == list(blur_px)


@pytest.mark.parametrize("normals", ["flat", "smooth"])
def test_lambert_vertex_colors_gradients(normals):
    ren, X, target = _sphere_scene("lambert", normals=normals)
    loss = _loss()
    mse = ImageMSE(ren.image, np.stack([target, target]), frames=[1, 0])

    def run():
        ren.render(X, 1, 0)
        ren.render(X, 2, 1)
        mse(loss)

    tgs.check_gradient(run, loss, [X], n_dirs=3, eps=1e-6, rtol=RTOL).assert_ok()
    params = [ren.vertex_colors, ren.light_dir, ren.light_color, ren.ambient, ren.background]
    tgs.check_gradient(run, loss, params, n_dirs=3, eps=1e-6, rtol=RTOL).assert_ok()
    for p in params:          # every parameter field receives a gradient
        assert np.abs(p.grad.to_numpy()).max() > 0


@pytest.mark.slow
@pytest.mark.parametrize("shading", ["lambert", "silhouette"])
def test_pixel_offsets_gradients(shading):
    """`_prepare` with per-vertex `pixel_offsets` (`_pixel_offset`; the silhouette through the pixel lanes
    and the ImageMSE backward): d loss / d vertices and the camera correction against FD (f64)."""
    v, _ = icosphere(1, 0.9)
    offsets = np.random.default_rng(3).uniform(-2.0, 2.0, (len(v), 2))
    ren, X, target = _sphere_scene(shading, frames=1, pixel_offsets=offsets)
    assert ren.projector.has_pixel_offsets and (shading == "lambert" or ren.pixel_lanes)
    loss = _loss()
    mse = ImageMSE(ren.image, target[None])
    ren.camera_delta.from_numpy(np.array([0.01, -0.02, 0.015, 0.02, -0.01, 0.03]))

    def run():
        ren.render(X, 1, 0)
        mse(loss)

    rep = tgs.check_gradient(run, loss, [X, ren.camera_delta, ren.focal_scale], n_dirs=3, eps=1e-6,
                             rtol=RTOL).assert_ok()
    assert min(abs(d) for d in rep.numeric) > 1e-8          # not a vacuous 0 == 0


def test_face_colors_orthographic_culled_gradients():
    ren, X, target = _sphere_scene("color", color_mode="face", projection="orthographic", cull=True, frames=1)
    loss = _loss()
    mse = ImageMSE(ren.image, target[None])

    def run():
        ren.render(X, 1, 0)
        mse(loss)

    tgs.check_gradient(run, loss, [X, ren.face_colors], n_dirs=3, eps=1e-6, rtol=RTOL).assert_ok()


def test_overlapping_faces_near_edges():
    """Two triangles overlapping at similar depths (gamma large enough to blend
    them) and a wide sigma so that most pixels lie near an edge."""
    v = np.array([[-0.7, -0.6, 0.0], [0.6, -0.5, 0.0], [-0.1, 0.7, 0.0],
                  [-0.4, 0.5, 0.03], [-0.2, -0.7, 0.05], [0.7, 0.2, 0.02]])
    f = np.array([[0, 1, 2], [3, 4, 5]], dtype=np.int32)
    cam = Camera(eye=(0.1, 0.0, 2.5), width=16, height=16, fov=50)
    ren = SoftRasterizer(cam, f, 6, shading="lambert", sigma=2e-2, gamma=5e-3,
                         vertex_colors=np.random.default_rng(2).random((6, 3)),
                         lights=[((0.2, 0.3, 1.0), (0.8, 0.8, 0.8))])
    rng = np.random.default_rng(5)
    target = rng.random((1, 16, 16, 4))
    X = ti.Vector.field(3, float, shape=(1, 6), needs_grad=True)
    X.from_numpy(v[None])
    loss = _loss()
    mse = ImageMSE(ren.image, target)
    img = ren.render_numpy(v)
    assert 0.05 < img[..., 3].mean() < 0.95
    ren.always_recompute = True       # exercise the backward's recompute path with one frame

    def run():
        ren.render(X, 0, 0)
        mse(loss)

    tgs.check_gradient(run, loss, [X, ren.vertex_colors, ren.light_dir], n_dirs=4, eps=1e-6,
                       rtol=RTOL).assert_ok()


def _alpha_grads(ren, X, target, always_recompute=False):
    """Loss on the alpha of three frames (slots 2, 1, 0 of the sphere scene, in one Tape);
    returns (images, dL/dX, dL/dcamera_delta, dL/dfocal_scale) as numpy."""
    alpha = target[..., -1]
    loss = _loss()
    mse = SilhouetteMSE(ren.image, np.stack([alpha, alpha[::-1], alpha[:, ::-1]]))
    ren.always_recompute = always_recompute
    with ti.ad.Tape(loss):
        for frame, slot in enumerate((2, 1, 0)):
            ren.render(X, slot, frame)
        mse(loss)
    ren.always_recompute = False
    assert np.abs(X.grad.to_numpy()).max() > 0
    return ren.image.to_numpy(), X.grad.to_numpy(), ren.camera_delta.grad.to_numpy(), ren.focal_scale.grad[None]


@pytest.mark.slow
def test_silhouette_backward_equals_autodiff_of_the_alpha_channel():
    """The silhouette's written-out backward (`_silhouette_grad`) against Taichi's autodiff of
    the same coverage in the RGBA path (`_accumulate.grad`, shading="color"), w.r.t. vertices
    and camera: equal to round-off (wide sigma: most pixels near an edge; no culling, so
    clockwise back faces too)."""
    img_s, gx_s, gc_s, gf_s = _alpha_grads(*_sphere_scene("silhouette", frames=3))
    img_c, gx_c, gc_c, gf_c = _alpha_grads(*_sphere_scene("color", frames=3))
    assert np.abs(img_s[..., 0] - img_c[..., 3]).max() < 1e-14
    assert 0.05 < img_s.mean() < 0.95
    for a, b in ((gx_s, gx_c), (gc_s, gc_c), (np.array([gf_s]), np.array([gf_c]))):
        assert np.abs(a - b).max() <= 1e-10 * np.abs(b).max()


@pytest.mark.slow
@pytest.mark.parametrize("shading", ["silhouette", "lambert"])
def test_kept_frames_give_the_recomputed_gradient_bit_for_bit(shading):
    """keep_frames (pairs and sums of frames 0 and 1 kept for the backward pass) against
    re-binning and re-compositing them in the backward pass (always_recompute, and a renderer
    with keep_frames=False): the same frames and gradients, bit for bit (on a GPU, to rounding:
    atomic_order)."""
    scene = _sphere_scene(shading, frames=3, keep_frames=True)
    assert scene[0].keep_frames
    kept = _alpha_grads(*scene)
    for other in (_alpha_grads(*scene, always_recompute=True),
                  _alpha_grads(*_sphere_scene(shading, frames=3, keep_frames=False))):
        for a, b in zip(kept, other):
            assert_same_sums(a, b)


@pytest.mark.slow
def test_kept_pairs_growing_drops_the_kept_frames_and_stays_right():
    """(The pair list: pixel_lanes=False.)  A later frame with more pairs than the kept capacity re-allocates it inside the Tape:
    the earlier frame is re-rendered in the backward pass (gradient unchanged, and it matches
    finite differences)."""
    v, f = icosphere(1, 0.9)
    cam = Camera(eye=(0.3, 0.2, 3.0), width=48, height=40)
    X = ti.Vector.field(3, float, shape=(2, len(v)), needs_grad=True)
    X.from_numpy(np.stack([0.1 * v, v]))                   # frame 0 small, frame 1 fills the view
    plain = SoftRasterizer(cam, f, len(v), frames=2, sigma=3e-3, keep_frames=False, pixel_lanes=False)
    target = np.stack([plain.render_numpy(0.12 * v)[..., 0], plain.render_numpy(0.9 * v)[..., 0]])
    loss = _loss()
    grads = []
    for keep in (True, False):
        ren = SoftRasterizer(cam, f, len(v), frames=2, sigma=3e-3, keep_frames=True, pixel_lanes=False) if keep \
            else plain
        assert ren.keep_frames is keep
        mse = SilhouetteMSE(ren.image, target)
        allocs = []
        alloc = ren.kept.alloc
        ren.kept.alloc = lambda cap, alloc=alloc: (allocs.append(cap), alloc(cap))

        def run():
            ren.render(X, 0, 0)
            ren.render(X, 1, 1)
            mse(loss)

        with ti.ad.Tape(loss):                             # the first renders: capacities grow here
            run()
        grads.append(X.grad.to_numpy())
        if keep:
            assert len(allocs) == 2          # frame 0's capacity, then frame 1's (frame 0 dropped)
            tgs.check_gradient(run, loss, [X], n_dirs=2, eps=1e-6, rtol=RTOL).assert_ok()
    assert np.abs(grads[0][0]).max() > 0
    assert_same_sums(grads[0], grads[1])
    with pytest.raises(TypeError, match="keep_frames='yes' must be True, False or None"):
        SoftRasterizer(cam, f, len(v), keep_frames="yes")
