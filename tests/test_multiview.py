"""Several cameras in one fit (issue 47, item 5): the two-view loss's Tape gradient against central
differences, one view in a list equal to the single-renderer fit bit for bit, and clear errors
for views whose targets do not fit them."""
import numpy as np
import pytest

import tigradsim as tgs
from tigradsim.fitting.views import View
from tigradsim.io.footage import render_at_times
from tigradsim.renderers import BlurredImageMSE, Camera, SoftRasterizer

from pushed_box import body_surface, pushed_box

FRAMES = 8
SIZE = 20


def pushed_box_two_views(shading="silhouette"):
    """A box pushed along +x on the ground, filmed from the side along the push (camera "along": the
    motion is depth for it) and from above ("above"), SIZE px, FRAMES frames between steps."""
    model, sim, faces, nverts = pushed_box(steps=100, checkpoint_every=50)
    times = 0.011 + np.arange(FRAMES) / 40.0
    cams = {"along": Camera(eye=(-1.9, 0.35, 0.05), target=(0.0, 0.1, 0.0), fov=30, width=SIZE, height=SIZE),
            "above": Camera(eye=(-0.15, 1.8, 0.01), target=(-0.15, 0.1, 0.0), up=(0.0, 0.0, -1.0), fov=40,
                            width=SIZE, height=SIZE)}
    renderers = {}
    for name, cam in cams.items():
        renderers[name] = SoftRasterizer(cam, faces, nverts, frames=FRAMES, sigma=2e-3, gamma=1e-4, shading=shading)
        render_at_times(sim, renderers[name], times, source="rigid")
    return model, sim, renderers


def test_two_view_loss_gradient_matches_central_differences(f64):
    """d(sum_v w_v L_v)/d(mass, contact constants) from the Tape equals float64 central differences along
    random directions; one view weighted 0.5 (its loss goes through the scaled add) and one blurred."""
    model, sim, ren = pushed_box_two_views()
    mass = tgs.Param(model.body_mass, "mass", log_space=True)
    fit = tgs.VideoFit(sim, [View(ren["along"], name="along"), View(ren["above"], name="above", weight=0.5)], [mass])
    model.set("body_mass", [1.4])
    targets = fit.render()
    assert isinstance(targets, list) and len(targets) == 2
    model.set("body_mass", [1.0])
    fit.set_target({"along": targets[0], "above": targets[1]})
    fit.set_image_loss(BlurredImageMSE(ren["above"].image, targets[1][..., 0:1], blur_px=(0.0, 1.5)), view="above")
    fit.loss[None] = 0.0
    rep = tgs.check_gradient(fit.forward, fit.loss, [model.body_mass, model.body_ke], direction_count=3,
                             rtol=1e-5, eps=1e-5)
    rep.assert_ok()
    assert np.all(np.abs(rep.analytic) > 1e-8), rep.analytic
    # the sum is the weighted sum of the views' own losses
    losses = fit.view_losses()
    assert fit.loss_value() == pytest.approx(losses["along"] + 0.5 * losses["above"], rel=1e-12)
    # residuals: the views' in order, the weighted one scaled by sqrt(0.5); 1/2 |r|^2 per view is N_v/2 x L_v
    r = fit.residuals()
    n_along, n_above = fit.view_residual_sizes()
    assert r.size == n_along + n_above
    assert 0.5 * np.sum(r[:n_along] ** 2) == pytest.approx(0.5 * n_along * losses["along"], rel=1e-9)


def test_one_view_in_a_list_is_the_single_renderer_fit_bit_for_bit(f64):
    model, sim, ren = pushed_box_two_views()
    mass = tgs.Param(model.body_mass, "mass", log_space=True, lower=0.05, upper=50.0)
    single = tgs.VideoFit(sim, ren["above"], [mass])
    listed = tgs.VideoFit(sim, [ren["above"]], [mass])
    model.set("body_mass", [1.5])
    target = single.render()
    np.testing.assert_array_equal(listed.render()[0], target)
    runs = []
    for fit, tgt in ((single, target), (listed, [target])):
        model.set("body_mass", [0.8])
        fit.fit(tgt, iters=4, optimizer=tgs.Adam([mass], lr=0.1), log_every=0)
        fit.refine(tgt, iters=1, log_every=0)
        runs.append((list(fit.history.loss), float(model.get("body_mass")[0]), fit.residuals()))
    assert runs[0][0] == runs[1][0] and runs[0][1] == runs[1][1]
    np.testing.assert_array_equal(runs[0][2], runs[1][2])


def test_views_bad_input_names_the_camera(f64):
    model, sim, ren = pushed_box_two_views()
    params = [tgs.Param(model.body_mass, "mass", log_space=True)]
    fit = tgs.VideoFit(sim, [View(ren["along"], name="along"), View(ren["above"], name="above")], params)
    good = np.zeros((FRAMES, SIZE, SIZE))
    with pytest.raises(RuntimeError, match=r"no target yet for view\(s\) \['along', 'above'\]"):
        fit.forward()
    with pytest.raises(ValueError, match=r"view 'above': target: 5 frames but the image has 8"):
        fit.set_target([good, good[:5]])
    with pytest.raises(ValueError, match=r"3 targets for 2 views \['along', 'above'\]"):
        fit.set_target([good, good, good])
    with pytest.raises(ValueError, match=r"missing \['above'\]"):
        fit.set_target({"along": good})
    with pytest.raises(ValueError, match=r"view\(s\) \['along', 'above'\] have no target"):
        fit.set_target(None)
    with pytest.raises(ValueError, match=r"expected a list of targets"):
        fit.set_target(good)
    with pytest.raises(ValueError, match=r"duplicate camera name\(s\) \['side'\]"):
        tgs.VideoFit(sim, [View(ren["along"], name="side"), View(ren["above"], name="side")], params)
    with pytest.raises(ValueError, match=r"'view 0' and 'view 1' share one renderer"):
        tgs.VideoFit(sim, [ren["along"], ren["along"]], params)
    with pytest.raises(ValueError, match=r"weight: expected a positive finite number, got -1"):
        View(ren["along"], name="along", weight=-1)
    with pytest.raises(ValueError, match=r"weights: expected one weight per view \(2\)"):
        tgs.VideoFit(sim, [ren["along"], ren["above"]], params, weights=[1.0])
    with pytest.raises(ValueError, match=r"an empty list of views"):
        tgs.VideoFit(sim, [], params)
    # a camera looking away from the box: the view check names the view
    away = SoftRasterizer(Camera(eye=(-1.9, 0.35, 0.05), target=(-4.0, 0.35, 0.0), fov=30, width=SIZE, height=SIZE),
                          *body_surface(model), frames=FRAMES, sigma=2e-3)
    with pytest.raises(ValueError, match=r"VideoFit view 'away'"):
        tgs.VideoFit(sim, [View(ren["along"], name="along"), View(away, name="away")], params)
