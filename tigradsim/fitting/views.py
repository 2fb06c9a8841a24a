"""Several calibrated cameras in one fit: a `View` pairs a renderer (its Camera, its `image` of one
frame per observation) with its target, a name and a weight; `VideoFit(sim, [view_a, view_b], params)`
sums the views' image losses and concatenates their residuals.

    side = SoftRasterizer(cam_side, faces, V, frames=K)
    top = SoftRasterizer(cam_top, faces, V, frames=K)
    render_at_times(sim, side, clip_side, source="rigid")        # each renderer observes the one Simulator
    render_at_times(sim, top, clip_top, source="rigid")
    fit = VideoFit(sim, [View(side, clip_side, name="side"), View(top, clip_top, name="top")], params)
    fit.fit(None, iters=100)             # or fit.fit([clip_side, clip_top]) / fit.fit({"side": ..., "top": ...})

Why a sum: the views see one rollout, so each view's image loss is a function of the same
parameters; with independent pixel noise the joint likelihood is the product over views, i.e. the
sum of their squared residuals.  Loss = sum_v w_v L_v (L_v: the view's image loss, a mean over its
compared pixels); residuals = [sqrt(w_v) r_v for each view], view after view, each frame-major.
A view of weight 1 adds its loss straight into the fit's loss field (one renderer gives exactly
the single-camera fit); another weight goes through a 0-D field of its own and one scaled add,
which the Tape differentiates like any kernel.

Intervals over every view: `tgs.fit_report(fit.residuals, params, groups=residual_groups(
fit.view_residual_sizes(), frames=K, blocks=...))` (views of K frames each: a frame's residuals in
every view share its cluster).  Scene files: [[cameras]] (tigradsim/scenes/scene_views.py).

Each view's camera is refinable on its own: `view_camera_params(fit.views, sigma_rotation, sigma_translation)`
(fitting/camera_prior.py) gives one pose Param per view ("camera_pose[NAME]") and `CameraPriors`, one prior
per view weighed against that view's residuals (forward: fit.forward(); priors(fit.loss)).
"""

import math

import numpy as np
import taichi as ti

__all__ = ["View", "as_views", "view_targets"]


class View:
    """One camera of a `VideoFit`.

    renderer: a SoftRasterizer (anything with an `image` field of (frames, H, W) vectors) that
        observes the fit's Simulator (`render_at_times`, `render_surface`, `sim.observe`).
    target: its footage (`tgs.Footage`, a (K, H, W[, C]) array or a path), or None when the
        targets are given to `VideoFit.fit` / `set_target` instead.
    name: how errors and reports name the view (default "view I").
    weight: the factor on this view's image loss (> 0; residuals are scaled by sqrt(weight)).
    """

    def __init__(self, renderer, target=None, name=None, weight=1.0):
        if renderer is not None and not hasattr(renderer, "image"):       # None: a state-supervised fit's
            raise ValueError(f"renderer: expected a renderer with an `image` field (e.g. SoftRasterizer), got "
                             f"{type(renderer).__name__}")
        w = float(weight) if isinstance(weight, (int, float, np.integer, np.floating)) else math.nan
        if not (math.isfinite(w) and w > 0):
            raise ValueError(f"weight: expected a positive finite number, got {weight!r}"
                             + (f" (view {name!r})" if name is not None else ""))
        if name is not None and not (isinstance(name, str) and name):
            raise ValueError(f"name: expected a non-empty string, got {name!r}")
        self.renderer, self.target, self.name, self.weight = renderer, target, name, w
        self.image_loss = None       # the loss of the image against the target (set_target / set_image_loss)
        self.default_loss = None     # ((kind, plain), loss) when set_target built the image loss
        self.target_masks = None     # set_target's (masks (K, H, W), rendered frame of mask 0, checked?)
        self._scratch = None         # this view's 0-D loss field when weight != 1

    @property
    def camera(self):
        return getattr(self.renderer, "camera", None)

    @property
    def frames(self) -> int:
        """The renderer's frame count."""
        return int(self.renderer.image.shape[0])

    def image(self) -> np.ndarray:
        """The renderer's frames as they are now, (K, H, W, C)."""
        return self.renderer.image.to_numpy().copy()

    def _own_loss(self):
        """This view's 0-D loss field, zeroed, holding its image loss (unweighted) of the images as they are."""
        if self._scratch is None:
            self._scratch = ti.field(float, shape=(), needs_grad=True)
        self._scratch[None] = 0.0
        self.image_loss(self._scratch)
        return self._scratch

    def add_loss(self, loss):
        """Add weight x this view's image loss into the 0-D field `loss` (on the Tape when one records)."""
        if self.weight == 1.0:
            self.image_loss(loss)
            return
        _add_scaled(loss, self._own_loss(), self.weight)

    def loss_value(self) -> float:
        """This view's image loss (unweighted) of the images as they are now (no rollout, no gradient)."""
        return float(self._own_loss()[None])

    def scale_residuals(self, r: np.ndarray) -> np.ndarray:
        """Residuals r of this view times sqrt(weight) (unchanged for weight 1)."""
        return r if self.weight == 1.0 else np.asarray(r) * math.sqrt(self.weight)

    def __repr__(self):
        frames = "-" if self.renderer is None else self.frames
        return f"View({self.name!r}, weight={self.weight:g}, frames={frames})"


@ti.kernel
def _add_scaled(dst: ti.template(), src: ti.template(), weight: float):
    dst[None] += weight * src[None]


def as_views(renderer, weights=None) -> tuple:
    """(views, several): `renderer` as a list of `View`s, and whether it was given as views (a list,
    tuple or View: targets then come one per view) rather than one bare renderer.

    A list may mix renderers and Views; unnamed views are called "view I" (I: the position);
    weights: one per view (overrides the Views' own).  Errors name the view: an empty list, a
    renderer given twice, two views of one name."""
    if isinstance(renderer, View):
        items, several = [renderer], True
    elif isinstance(renderer, (list, tuple)):
        items, several = list(renderer), True
        if not items:
            raise ValueError("renderer: an empty list of views (give at least one renderer or View)")
    else:
        return [View(renderer, name="camera")], False
    views = []
    for i, item in enumerate(items):
        try:
            if item is None or (isinstance(item, View) and item.renderer is None):
                raise ValueError("renderer: expected a renderer (e.g. SoftRasterizer), got None")
            view = item if isinstance(item, View) else View(item)
        except ValueError as exc:
            raise ValueError(f"views[{i}]: {exc}") from None
        if view.name is None:
            view.name = f"view {i}"
        views.append(view)
    if weights is not None:
        w = list(weights) if isinstance(weights, (list, tuple, np.ndarray)) else None
        if w is None or len(w) != len(views):
            raise ValueError(f"weights: expected one weight per view ({len(views)}), got {weights!r}")
        for view, wi in zip(views, w):
            View(view.renderer, weight=wi, name=view.name)      # the same checks as a View's own weight
            view.weight = float(wi)
    names = [v.name for v in views]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise ValueError(f"views: duplicate camera name(s) {dup} (names: {names}); every view needs its own name")
    for i, v in enumerate(views):
        for j in range(i):
            if views[j].renderer is v.renderer:
                raise ValueError(f"views: {views[j].name!r} and {v.name!r} share one renderer; each view needs "
                                 "its own (its own camera and image)")
    return views, several


def view_targets(views, target) -> list:
    """One target per view from what `VideoFit.set_target` was given with several views: a list or
    tuple (in view order), a dict {name: target}, or None (each View's own `target`)."""
    names = [v.name for v in views]
    if target is None:
        missing = [v.name for v in views if v.target is None]
        if missing:
            raise ValueError(f"target: none given and view(s) {missing} have no target of their own (View(renderer, "
                             "target, name=...)); pass one target per view")
        return [v.target for v in views]
    if isinstance(target, dict):
        unknown = [k for k in target if k not in names]
        missing = [n for n in names if n not in target]
        if unknown or missing:
            raise ValueError(f"target: a dict of targets needs exactly the views' names {names}; "
                             + (f"unknown {unknown}" if unknown else "") + ("; " if unknown and missing else "")
                             + (f"missing {missing}" if missing else ""))
        return [target[n] for n in names]
    if isinstance(target, (list, tuple)):
        if len(target) != len(views):
            raise ValueError(f"target: {len(target)} targets for {len(views)} views {names}: expected one per view")
        return list(target)
    raise ValueError(f"target: with several views, expected a list of targets (one per view, in order {names}), a "
                     f"dict {{name: target}} or None (the Views' own targets), got {type(target).__name__}")
