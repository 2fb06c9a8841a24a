"""Image-loss targets: error messages, frames selected after construction, colour
composited over a background plate (FD-checked, also through a rigid rollout w.r.t.
mass), Footage targets in VideoFit, bit-reproducible sums, and no TaichiWarnings."""
import warnings

import numpy as np
import pytest
import taichi as ti

import tigradsim as tgs
from tigradsim.io.footage import render_at_times
from tigradsim.renderers import (BlurredImageMSE, Camera, ImageMSE, SilhouetteMSE, SoftIoU, SoftRasterizer,
                                  gaussian_blur, icosphere)
from tigradsim.renderers.losses import to_silhouette

from pushed_box import body_surface, pushed_box

RTOL = 1e-6


def _image(frames=4, H=6, W=5, C=4, seed=0):
    img = ti.Vector.field(C, float, shape=(frames, H, W), needs_grad=True)
    img.from_numpy(np.random.default_rng(seed).uniform(0.05, 0.95, (frames, H, W, C)))
    return img


def _loss():
    return ti.field(float, shape=(), needs_grad=True)


def test_target_errors(f64):
    img, sil = _image(), _image(C=1)
    rng = np.random.default_rng(1)
    with pytest.raises(ValueError, match=r"frames are 6x4 \(HxW\) but the image is 6x5"):
        ImageMSE(img, rng.random((4, 6, 4, 3)))
    with pytest.raises(ValueError, match=r"target: 2 frames but the image has 4.*pass frames="):
        ImageMSE(img, rng.random((2, 6, 5, 3)))                 # never a silent fit of the first 2
    with pytest.raises(ValueError, match=r"target: 6 frames but the image has only 4: render 6 frames"):
        ImageMSE(img, rng.random((6, 6, 5, 3)))
    with pytest.raises(ValueError, match=r"looks like 0-255; divide by 255"):
        ImageMSE(img, rng.random((4, 6, 5, 3)) * 255)
    with pytest.raises(ValueError, match=r"integer values must lie in \[0, 255\]"):
        ImageMSE(img, np.full((4, 6, 5, 3), 300))
    with pytest.raises(ValueError, match=r"frames: 3 frame indices for a target with 2 frames"):
        ImageMSE(img, rng.random((2, 6, 5, 3)), frames=[0, 1, 2])
    with pytest.raises(ValueError, match=r"target: 5 frames, more than the image's 4"):
        ImageMSE(img, rng.random((5, 6, 5, 3)), frames=[0, 1, 2, 3, 0])
    with pytest.raises(ValueError, match=r"frames=\[0, 7\] out of range: the image has 4 frames"):
        ImageMSE(img, rng.random((2, 6, 5, 3)), frames=[0, 7])
    # RGB footage against a silhouette renderer: explained, not "channels=None: expected 3 ... in [0, 0]"
    with pytest.raises(ValueError, match=r"has 1 \(a silhouette renderer.*SilhouetteMSE"):
        ImageMSE(sil, rng.random((4, 6, 5, 3)))
    with pytest.raises(ValueError, match=r"RGB colour video.*pass mask frames"):
        to_silhouette(rng.random((4, 6, 5, 3)))                  # VideoFit's rule for RGB vs a silhouette
    colour = rng.random((4, 6, 5, 3))                               # asked for explicitly: the channel mean
    np.testing.assert_allclose(SilhouetteMSE(sil, colour).target.to_numpy()[..., 0], colour.mean(-1))
    grey = rng.random((4, 6, 5))
    ok = SilhouetteMSE(sil, np.repeat(grey[..., None], 3, -1))    # a silhouette stored as RGB: its grey value
    np.testing.assert_allclose(ok.target.to_numpy()[..., 0], grey)
    np.testing.assert_allclose(to_silhouette(np.concatenate([np.zeros((1, 2, 2, 3)), np.ones((1, 2, 2, 1))], -1)),
                               np.ones((1, 2, 2, 1)))
    with pytest.raises(ValueError, match=r"target: 2 frames, but 4 are compared.*set_frames"):
        ok.set_target(grey[:2])
    with pytest.raises(ValueError, match=r"background: compositing over a plate needs an RGBA image"):
        ImageMSE(sil, grey, background=np.zeros((6, 5, 1)))
    with pytest.raises(ValueError, match=r"background: expected shape \(6, 5, 3\)"):
        ImageMSE(img, rng.random((4, 6, 5, 3)), background=np.zeros((5, 5, 3)))
    with pytest.raises(ValueError, match=r"background: values must be finite and lie in \[0, 1\]"):
        ImageMSE(img, rng.random((4, 6, 5, 3)), background=np.full((6, 5, 3), 200.0))


def _composite(img, fid, plate):
    a = img[fid][..., 3:4]
    return a * img[fid][..., :3] + (1 - a) * plate[None]


def test_frames_after_construction_and_composited_colour(f64):
    """set_frames grows the compared clip (2 then 4 frames) in the same object; the plate
    composite A rgb + (1 - A) B; values against numpy, gradients against FD."""
    img = _image()
    rng = np.random.default_rng(2)
    plate = rng.random((6, 5, 3))
    blur_px = (0.0, 1.5)
    lossobj = BlurredImageMSE(img, blur_px=blur_px, background=plate, weight=0.5)
    loss = _loss()
    a = img.to_numpy()
    for fid in ([3, 1], [0, 1, 2, 3]):
        target = rng.random((len(fid), 6, 5, 3))
        lossobj.set_frames(fid, target)
        assert lossobj.shape == (len(fid), 6, 5) and lossobj.count == len(fid)
        assert lossobj.frame_count == lossobj.nframes == 4          # nframes: frame_count's older name
        loss[None] = 0
        lossobj(loss)
        comp = _composite(a, fid, plate)
        expect = 0.5 * sum(np.mean([(gaussian_blur(comp[k], s) - gaussian_blur(target[k], s)) ** 2
                                    for k in range(len(fid))]) for s in blur_px)
        assert loss[None] == pytest.approx(expect, rel=1e-12)
        # the residuals of every blur level (for least squares): their mean square x levels is the loss
        np.testing.assert_allclose(lossobj.residuals(), comp - target, atol=1e-14)
        res = lossobj.level_residuals()
        assert res.shape == (len(blur_px), len(fid), 6, 5, 3)
        np.testing.assert_allclose(res[0], np.sqrt(0.5) * (comp - target), atol=1e-14)
        np.testing.assert_allclose(res[1, 0], np.sqrt(0.5) * gaussian_blur(comp[0] - target[0], blur_px[1]), atol=1e-14)
        assert np.mean(res ** 2) * len(blur_px) == pytest.approx(loss[None], rel=1e-12)
    tgs.check_gradient(lambda: lossobj(loss), loss, [img], n_dirs=3, rtol=RTOL).assert_ok()
    # ImageMSE's written-out backward (`_mse_rows_grad`), with a frame compared twice (its image
    # gradient is the sum of both terms') and over the plate
    mse = ImageMSE(img, rng.random((3, 6, 5, 3)), frames=[2, 0, 2], background=plate)
    rep = tgs.check_gradient(lambda: mse(loss), loss, [img], n_dirs=3, rtol=RTOL).assert_ok()
    assert min(abs(d) for d in rep.numeric) > 1e-6          # not a vacuous 0 == 0


def test_composited_colour_carries_geometry_gradient_at_small_gamma(f64):
    """At gamma 1e-4 the depth-softmax colour of a uniformly coloured object is piecewise
    constant in the vertices (no geometry gradient: issue 15 measured 6.8e-19 against FD -1.3e-2); over a plate the colour's gradient flows through
    the soft silhouette and matches FD."""
    v, f = icosphere(1, 0.8)
    cam = Camera(eye=(0.2, 0.1, 3.0), width=20, height=18)
    # SoftRas's softmax blend (the renderer's coverage blend, where it has one, composites itself)
    softmax = {"blend": "softmax"}
    with warnings.catch_warnings():          # the softmax blend's "no geometry gradient" warning: shown here
        warnings.simplefilter("ignore")
        ren = SoftRasterizer(cam, f, len(v), shading="color", sigma=3e-3, gamma=1e-4, color_mode="face",
                             face_colors=(0.9, 0.5, 0.2), **softmax)
    X = ti.Vector.field(3, float, shape=(1, len(v)), needs_grad=True)
    X.from_numpy((v + [0.05, -0.03, 0.0])[None])
    rgb = np.clip(ren.render_numpy(v)[..., :3], 0, 1)
    plate = np.random.default_rng(1).random((18, 20, 3))
    target = ren.render_numpy(v)[None][..., 3:4] * rgb + (1 - ren.render_numpy(v)[None][..., 3:4]) * plate
    loss = _loss()
    comp = ImageMSE(ren.image, target, background=plate)
    plain = ImageMSE(ren.image, target)

    def run(obj):
        ren.render(X, 0, 0)
        obj(loss)

    tgs.check_gradient(lambda: run(comp), loss, [X], n_dirs=3, rtol=1e-5).assert_ok()
    grads = []
    for obj in (comp, plain):
        with ti.ad.Tape(loss):
            run(obj)
        grads.append(np.abs(X.grad.to_numpy()).max())
    assert grads[0] > 1e3 * grads[1] and grads[0] > 1e-3


def test_losses_bit_reproducible(f64):
    """Loss value and image gradient identical bit for bit over repeated runs."""
    img = _image(frames=3, H=48, W=40)
    rng = np.random.default_rng(3)
    losses = [ImageMSE(img, rng.random((3, 48, 40, 3)), frames=[0, 2, 0]),      # a repeated frame
              BlurredImageMSE(img, rng.random((3, 48, 40, 3)), blur_px=(0.0, 2.0), background=rng.random((48, 40, 3))),
              SoftIoU(img, rng.random((3, 48, 40)))]
    loss = _loss()
    runs = []
    for _ in range(3):
        with ti.ad.Tape(loss):
            for obj in losses:
                obj(loss)
        runs.append((loss[None], img.grad.to_numpy().copy()))
    for value, grad in runs[1:]:
        assert value == runs[0][0]
        assert np.array_equal(grad, runs[0][1])


def test_losses_compile_without_taichi_warnings(capfd):
    """Taichi's 'Loading variable ... before anything is stored' (16.6): none from these kernels."""
    tgs.init(precision="f64", offline_cache=False)     # compile afresh, so warnings would be printed
    try:
        img = _image(frames=2, H=5, W=4)
        rng = np.random.default_rng(4)
        # every kernel of the losses: per-pixel terms (composited and not), blur rows/columns, reductions, IoU
        objs = [BlurredImageMSE(img, rng.random((2, 5, 4, 3)), blur_px=(0.0, 1.0), background=rng.random((5, 4, 3))),
                SilhouetteMSE(img, rng.random((2, 5, 4))), SoftIoU(img, rng.random((2, 5, 4)))]
        loss = _loss()
        capfd.readouterr()
        with ti.ad.Tape(loss):
            for obj in objs:
                obj(loss)
        err = capfd.readouterr().err
        assert "TaichiWarning" not in err and "before anything is stored" not in err, err
    finally:
        tgs.init(precision="f64")


# ------------------------------------------------------------------ VideoFit and Footage
def _pushed_box(fps=40.0):
    """A box pushed along +x by a known force on the ground, filmed in colour at 40 fps
    (dt = 1/480 s: 12 steps per frame, so frames at t0 + k / fps fall between steps)."""
    model, sim, faces, nverts = pushed_box(steps=120, checkpoint_every=50)
    times = 0.011 + np.arange(9) / fps
    cam = Camera(eye=(-0.1, 0.8, 1.7), target=(-0.1, 0.1, 0.0), fov=45, width=24, height=24)
    ren = SoftRasterizer(cam, faces, nverts, frames=len(times), sigma=2e-3, gamma=1e-4, shading="color",
                         color_mode="face", face_colors=np.random.default_rng(0).uniform(0.3, 1, (len(faces), 3)))
    timed = render_at_times(sim, ren, times, source="rigid")
    return model, sim, ren, timed, times


def test_rgb_footage_gradient_wrt_rigid_mass(f64):
    """VideoFit on RGB footage (frames between steps, composited over its plate): the
    Tape gradient w.r.t. the body's mass matches finite differences (issue 15, item 3)."""
    model, sim, ren, timed, times = _pushed_box()
    fit = tgs.VideoFit(sim, ren, [tgs.Param(model.body_mass, "mass", log_space=True)])
    model.set("body_mass", [1.3])
    plate = np.random.default_rng(5).uniform(0, 1, (24, 24, 3))
    coverage = getattr(ren, "blend", None) == "coverage"      # the renderer composites over its plate itself
    if coverage:
        ren.set_background(plate)
    rgba = fit.render()
    frames = np.clip(rgba[..., :3], 0, 1) if coverage else rgba[..., 3:4] * rgba[..., :3] + (1 - rgba[..., 3:4]) * plate
    clip = tgs.Footage((frames * 255 + 0.5).astype(np.uint8), fps=40, start_time=0.011, masks=rgba[..., 3])
    clip.set_background(plate)
    model.set("body_mass", [1.0])
    fit.set_target(clip)
    assert fit._image_loss.composite != coverage and fit._image_loss.channels == (0, 1, 2)
    if coverage:
        np.testing.assert_allclose(ren.background_image.to_numpy(), clip.background, atol=1e-12)
    fit.loss[None] = 0
    rep = tgs.check_gradient(fit._forward, fit.loss, [model.body_mass], n_dirs=1, rtol=1e-5, eps=1e-5)
    rep.assert_ok()
    assert abs(rep.analytic[0]) > 1e-6
    # the first 5 frames only: frames= says which; a bare 5-frame clip is an error naming the counts
    with pytest.raises(ValueError, match=r"target: 5 frames but the image has 9.*frames="):
        fit.set_target(clip[:5])
    fit.set_target(clip[:5], frames=range(5))
    assert fit._image_loss.count == 5
    with pytest.raises(ValueError, match=r"neither masks nor a plate"):
        fit.set_target(tgs.Footage(frames, fps=40, start_time=0.011))
    # a silhouette renderer takes the masks; RGB footage without masks is explained
    sil = SoftRasterizer(ren.camera, *body_surface(model), frames=9, shading="silhouette")
    sfit = tgs.VideoFit(sim, sil, [])
    sfit.set_target(clip)
    np.testing.assert_allclose(sfit._image_loss.target.to_numpy()[..., 0], clip.masks)
    with pytest.raises(ValueError, match=r"RGB footage without masks cannot be compared with a silhouette"):
        sfit.set_target(tgs.Footage(frames, fps=40))
    with pytest.raises(ValueError, match=r"RGB colour video.*pass mask frames"):
        sfit.set_target(frames)
    with pytest.raises(ValueError, match=r"target: 12 frames but the image has only 9"):
        sfit.set_target(np.zeros((12, 24, 24)))
    # a user's blurred loss on the masks; coarse to fine in time grows its clip, same object
    blurred = BlurredImageMSE(sil.image, blur_px=(0.0, 1.0))
    sfit.set_image_loss(blurred)
    sfit.set_target(clip[:4], frames=range(4))
    assert blurred.count == 4
    sfit.set_target(clip)
    assert blurred.count == 9 and sfit._image_loss is blurred
    np.testing.assert_allclose(blurred.target.to_numpy()[..., 0], clip.masks)


