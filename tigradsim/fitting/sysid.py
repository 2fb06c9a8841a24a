"""System identification from video: render a rollout, compare it with a
target video in image space, and fit physical parameters by gradient descent
through the renderer and the physics in one Tape.

    exp = VideoFit(sim, renderer, params, every=K)      # renders every K steps
    target = exp.render()                                # or load_video(path)
    ... change the parameters to an initial guess ...
    history = exp.fit(target, iters=100, lr=0.05)
    exp.save_report(out_dir, target, initial_video, truth={...})

Footage that tigradsim did not render (`tigradsim.io.footage`): frames at the clip's
own times (interpolated between steps when dt does not divide 1/fps), masks for a
silhouette renderer, RGB over the clip's background plate for a colour one:

    clip = tgs.load_footage("clip.mp4", masks="masks/")          # fps from the file
    renderer = SoftRasterizer(cam, faces, V, frames=len(clip), shading="color")
    tgs.footage.render_at_times(sim, renderer, clip, source="rigid")
    exp = VideoFit(sim, renderer, params)
    history = exp.fit(clip, iters=100)               # or exp.fit(clip[:10], frames=range(10))

`supervision="state"` fits recorded 3D positions instead of pixels (the paper's
3D-supervised baseline).  Parameters live in `Param`s: bounds are clamped,
`log_space=True` optimises log(value) (masses, stiffnesses: they must stay
positive and span decades, and a relative step suits them).
"""
import copy
import os
import pickle
from typing import Optional, Sequence

import numpy as np
import taichi as ti

from .losses import MSELoss
from .optim import Adam, History, Param, least_squares, optimize
from .views import View, as_views, view_targets
from ..io.mask_checks import check_initial_pose, check_masks
from ..io.plots import plot_loss, plot_params



def render_particles(sim, renderer, every):
    """Render `sim.state.particle_q` (through the renderer's vertex_ids) every `every` steps."""
    return sim.observe(lambda state, slot, frame: renderer.render(state.particle_q, slot, frame), every)


def render_surface(sim, renderer, surface, every):
    """Render an observer's per-frame vertices (e.g. `RigidSurface`) every `every` steps.

    `surface` must have been registered with the same `every` before this call.
    """
    return sim.observe(lambda state, slot, frame: renderer.render(surface.vertices, frame, frame), every)


# What `VideoFit.save_state` writes: a pickled dict with this header (see `_read_checkpoint`).
CHECKPOINT_FORMAT = "tigradsim.VideoFit checkpoint"
CHECKPOINT_VERSION = 1
_CHECKPOINT_KEYS = ("params", "optimizer", "values", "optimizer_state", "history")


def _read_checkpoint(path):
    """The checkpoint dict at `path`, its header checked; errors name the path and the problem."""
    path = os.fspath(path)
    with open(path, "rb") as fh:
        data = fh.read()
    if not data:
        raise ValueError(f"{path}: empty file, not a VideoFit checkpoint (an interrupted first save?); delete it")
    if data[:1] != b"\x80":       # every pickle of protocol 2+ starts with the PROTO opcode
        raise ValueError(f"{path}: not a VideoFit checkpoint (not a pickle file; starts with {data[:16]!r})")
    try:
        state = pickle.loads(data)
    except (EOFError, pickle.UnpicklingError) as exc:
        raise ValueError(f"{path}: truncated or corrupt checkpoint ({len(data)} bytes; {type(exc).__name__}: "
                         f"{exc}); delete it to start the fit afresh") from None
    except Exception as exc:      # a pickle of classes this program lacks, or damaged data
        raise ValueError(f"{path}: unreadable checkpoint ({type(exc).__name__}: {exc})") from None
    if not isinstance(state, dict) or state.get("format") != CHECKPOINT_FORMAT:
        what = f"a dict with keys {sorted(map(str, state))[:8]}" if isinstance(state, dict) else type(state).__name__
        raise ValueError(f"{path}: not a VideoFit checkpoint (a pickle of {what}, without the header "
                         f"format={CHECKPOINT_FORMAT!r}; checkpoints of tigradsim before version 1 of the format "
                         "cannot be resumed: delete the file)")
    if state.get("version") != CHECKPOINT_VERSION:
        raise ValueError(f"{path}: checkpoint format version {state.get('version')!r}, this tigradsim reads "
                         f"version {CHECKPOINT_VERSION}")
    missing = [k for k in _CHECKPOINT_KEYS if k not in state]
    if missing:
        raise ValueError(f"{path}: corrupt checkpoint: missing {missing}")
    return state


def _check_view(sim, renderer, name=None):
    """VideoFit's view check: the renderer's camera against the objects of the simulator's model
    (`model.placed`, set by SceneBuilder.finalize); nothing when either is not there.  name: the
    view's, in the messages of a fit with several views."""
    from ..renderers.camera import Camera
    from ..renderers.framing import check_framing

    camera, placed = getattr(renderer, "camera", None), getattr(getattr(sim, "model", None), "placed", None)
    if isinstance(camera, Camera) and placed:
        check_framing(camera, placed, ground=bool(getattr(sim.model, "has_ground", False)),
                      who="VideoFit" + (f" view {name!r}" if name is not None else "")
                      + " (check_view=False skips this check)")


class VideoFit:
    """Fit parameters of a simulation to a video.

    Args:
        sim: the Simulator (its observers must render into `renderer.image`).
        renderer: the SoftRasterizer whose `image` holds one frame per observation; or several
            cameras: a list of renderers and/or `View`s (tigradsim/fitting/views.py), each
            observing `sim`.  The loss is then the weighted sum of the views' image losses, the
            residuals their concatenation, and targets come one per view (a list, a dict by name,
            or the Views' own); `render()` returns a list of videos.
        params: the `Param`s to estimate.
        supervision: "image" (pixel MSE) or "state" (MSE of `state_source`).
        state_source: with "state", a recorder field (frames, M) or (frames,) of vec3.
        check_view: with "image", check before anything runs that the renderer's camera sees the
            model's objects where they start (`tigradsim.renderers.framing`): ValueError for a
            camera below the ground or looking away from them (e.g. R given camera-to-world) or an
            object outside the view, a FramingWarning for one partly outside it.  False: no check
            (an object meant to enter the view later, or one the renderer does not draw).
        weights: with several views, one weight per view (default: the Views' own, 1).
    """

    def __init__(self, sim, renderer, params: Sequence[Param], supervision="image", state_source=None,
                 check_view=True, weights=None):
        if supervision not in ("image", "state"):
            raise ValueError(f"supervision: expected 'image' or 'state', got {supervision!r}")
        if supervision == "state" and state_source is None:
            raise ValueError("state_source: needed with supervision='state' (a recorder's values field)")
        self.views, self.several_views = as_views(renderer, weights)
        if check_view and supervision == "image":
            for view in self.views:
                _check_view(sim, view.renderer, view.name if self.several_views else None)
        self.sim = sim
        self.renderer = self.views[0].renderer      # the first (or only) view's
        self.params = list(params)
        self.supervision = supervision
        self.state_source = state_source
        self.loss = ti.field(float, shape=(), needs_grad=True)
        self._state_loss = None
        self.history = History()
        self.optimizer = None

    # the first view's image loss and target masks (the only view's, with one renderer)
    _image_loss = property(lambda self: self.views[0].image_loss,
                           lambda self, loss: setattr(self.views[0], "image_loss", loss))
    _default_loss = property(lambda self: self.views[0].default_loss,
                             lambda self, loss: setattr(self.views[0], "default_loss", loss))
    _target_masks = property(lambda self: self.views[0].target_masks,
                             lambda self, m: setattr(self.views[0], "target_masks", m))

    def _view(self, view) -> View:
        """A view by index or name."""
        if isinstance(view, str):
            names = [v.name for v in self.views]
            if view not in names:
                raise ValueError(f"view: no view named {view!r} (views: {names})")
            return self.views[names.index(view)]
        if not isinstance(view, (int, np.integer)) or not -len(self.views) <= view < len(self.views):
            raise ValueError(f"view: expected an index in [0, {len(self.views)}) or a name, got {view!r}")
        return self.views[view]

    def _who(self, view, what="target") -> str:
        """How messages name a view's target: "target", or "target of view 'top'" with several views."""
        return f"{what} of view {view.name!r}" if self.several_views else what

    # -- videos ------------------------------------------------------------
    def render(self):
        """Run the rollout at the current parameters; returns the frames (K, H, W, C), or with
        several views a list of each view's frames."""
        self.sim.run()
        if self.several_views:
            return [view.image() for view in self.views]
        return self.renderer.image.to_numpy().copy()

    def record_state(self) -> np.ndarray:
        """Run the rollout; returns the state source's values (for state supervision)."""
        self.sim.run()
        return self.state_source.to_numpy().copy()

    # -- fitting -------------------------------------------------------------
    def set_target(self, target, frames=None):
        """The target: a `tigradsim.Footage`, a video (K, H, W[, C]) array (uint8, or floats
        in [0, 1]) or a path (PNG folder, GIF, MP4); or, with state supervision, the
        target state array.

        What is compared (see `image_target`): a silhouette renderer compares
        silhouettes (the footage's masks; a grey video; the alpha of RGBA); a colour
        renderer compares RGB composited over the footage's background plate
        (`footage.background`, else estimated from the frames outside the masks) with
        a footage target, RGB or RGBA as given with an array, and silhouettes with a
        one-channel target.
        frames: the rendered frame compared with each target frame (default: every
        rendered frame, and then the target must have exactly one frame per rendered
        frame: a different count is an error, never a fit of some of the frames).
        With several views: one target per view (a list in view order, a dict {name: target},
        or None for the Views' own), each compared with its view's renderer; `frames` applies
        to every view; an error names the view.
        """
        if self.supervision != "image":
            self._state_loss = MSELoss(self.state_source, target)
            return
        if not self.several_views:
            self._set_view_target(self.views[0], target, frames)
            return
        for view, t in zip(self.views, view_targets(self.views, target)):
            try:
                self._set_view_target(view, t, frames)
            except ValueError as exc:
                raise ValueError(f"view {view.name!r}: {exc}") from None

    def _set_view_target(self, view, target, frames):
        """set_target for one view (its renderer, image loss and masks)."""
        from ..renderers import losses as L          # noqa: deferred so the core imports without renderers
        from ..io.footage import Footage
        renderer = view.renderer
        kind, arr, plate = image_target(target, renderer)
        masks = arr if kind == "silhouette" else getattr(target, "masks", None)
        first = 0 if frames is None else int(np.asarray(frames)[0])
        # a Footage checked its masks when it was made; other silhouette targets are checked by fit / refine
        checked = isinstance(target, Footage) and target.masks is not None
        view.target_masks = None if masks is None else (masks, first, checked)
        coverage = getattr(renderer, "blend", None) == "coverage"
        if plate is not None and coverage:
            renderer.set_background(plate)     # the renderer composites; the loss compares its RGB
            plate = None
        loss = view.image_loss
        if loss is None or (view.default_loss is not None and view.default_loss[0] != (kind, plate is None)):
            img, C = renderer.image, renderer.image.n
            if kind == "silhouette":
                loss = L.SilhouetteMSE(img, arr, frames=frames)
            else:
                loss = L.ImageMSE(img, arr, frames=frames, channels=list(range(arr.shape[-1])), background=plate)
            view.image_loss, view.default_loss = loss, ((kind, plate is None), loss)
            return
        if plate is not None:
            if not getattr(loss, "composite", False):
                raise ValueError("set_target: RGB footage is compared over a background plate, but the image loss "
                                 "given to set_image_loss compares raw colour: build it with background= (e.g. "
                                 "BlurredImageMSE(renderer.image, channels=[0, 1, 2], background=footage.background)) "
                                 "or render with SoftRasterizer(..., blend='coverage')")
            loss.set_background(plate)
        if hasattr(loss, "set_frames"):
            loss.set_frames(frames, arr)
        elif frames is not None:
            raise ValueError(f"frames={frames!r}: the image loss {type(loss).__name__} has no set_frames")
        else:
            loss.set_target(arr)

    def _check_target_masks(self):
        """Check set_target's masks (`check_masks`) unless a Footage did; returns, per view, (first
        mask (H, W), the rendered frame compared with it) for the initial-pose check, or None
        without masks."""
        out = []
        for view in self.views:
            if view.target_masks is None:
                out.append(None)
                continue
            masks, first, checked = view.target_masks
            if not checked:
                check_masks(masks, name=self._who(view))
                view.target_masks = (masks, first, True)
            out.append((masks[0], first))
        return out

    def set_image_loss(self, loss, view=0):
        """Use `loss` (an object with `set_target(target)` and `__call__(loss_field)`,
        e.g. `tigradsim.renderers.BlurredImageMSE(renderer.image, blur_px=(0, 2, 4))`) as the
        image loss of `view` (index or name; the only one with one renderer); None: the default
        pixel MSE."""
        v = self._view(view)
        v.image_loss = loss
        v.default_loss = None

    def forward(self):
        """One rollout and its loss added into `self.loss` (on the Tape when one records; the caller
        zeroes `loss` first): the `forward` that `optimize` and `identify` call.  With several
        views: sum_v weight_v x view v's image loss."""
        self.sim.run()
        if self.supervision == "image":
            missing = [v.name for v in self.views if v.image_loss is None]
            if missing:
                raise RuntimeError(f"forward: no target yet for view(s) {missing} (call set_target or fit)")
            for view in self.views:
                view.add_loss(self.loss)
        else:
            self._state_loss._accumulate()
            _add_into(self.loss, self._state_loss.value)

    def _forward(self):
        """The old private name of `forward` (callers that still use it)."""
        self.forward()

    def loss_value(self) -> float:
        """The loss at the current parameters (no gradient)."""
        self.loss[None] = 0.0
        if self._state_loss is not None:
            self._state_loss.value[None] = 0.0
        self.forward()
        return float(self.loss[None])

    def fit(self, target, iters=100, lr=0.05, optimizer=None, log_every=10, printer=print, resume=None,
            save_every=10, frames=None):
        """Gradient descent for `iters` iterations (Adam by default); returns the History.

        resume: a path; when the file exists the fit continues from it (parameters,
        optimiser state and history), and it is rewritten every `save_every`
        iterations, so an interrupted fit can be resumed.
        frames: the rendered frame of each target frame (see `set_target`).
        With masks (a Footage's, or a silhouette target), the first rollout's render of the
        first target frame is compared with its mask before the first step
        (`tigradsim.io.mask_checks.check_initial_pose`: a FootageWarning naming the IoU when
        the mask is far from the initial pose).
        """
        self.set_target(target, frames=frames)
        first_masks = self._check_target_masks()
        self.optimizer = optimizer or Adam(self.params, lr=lr)
        if resume and os.path.exists(resume):
            self.load_state(resume)
            printer(f"resumed from {resume} at iteration {self.optimizer.iteration}")

        def forward():
            if self._state_loss is not None:
                self._state_loss.value[None] = 0.0
            self.forward()

        def callback(it, value):
            nonlocal first_masks
            if first_masks is not None:           # the images hold the renders at the initial values
                for view, first in zip(self.views, first_masks):
                    if first is not None:
                        mask, k = first
                        image = view.renderer.image.to_numpy()[k]
                        check_initial_pose(mask, image[..., -1] if image.ndim == 3 else image, name=self._who(view))
                first_masks = None
            if resume and (it % save_every == 0 or it >= iters):
                self.save_state(resume)

        self.history = optimize(forward, self.loss, self.optimizer, iters=iters, log_every=log_every,
                                printer=printer, history=self.history, callback=callback)
        if resume:
            self.save_state(resume)
        return self.history

    def residuals(self, levels=False) -> np.ndarray:
        """Run the rollout at the current parameters; rendered (or recorded) minus
        target values, flattened (call `set_target` or `fit` first).  levels: with a
        multi-scale image loss (`BlurredImageMSE`), the residuals of every blur level,
        whose squares sum to the loss, rather than the plain pixel residuals.
        With several views: each view's residuals times sqrt(its weight), view after view
        (`view_residual_sizes` gives each view's count)."""
        self.sim.run()
        if self.supervision == "image":
            parts = [view.scale_residuals(self._view_residuals(view, levels)) for view in self.views]
            return parts[0] if len(parts) == 1 else np.concatenate(parts)
        if self._state_loss is None:
            raise RuntimeError("residuals: no target yet (call set_target)")
        return (self.state_source.to_numpy() - self._state_loss.target.to_numpy()).ravel()

    def _view_residuals(self, view, levels) -> np.ndarray:
        """One view's rendered minus target values, flattened (the images as they are now)."""
        tl = view.image_loss
        if tl is None:
            raise RuntimeError("residuals: no target yet (call set_target)" + (
                f" for view {view.name!r}" if self.several_views else ""))
        if levels and hasattr(tl, "level_residuals"):
            return tl.level_residuals().ravel()
        if hasattr(tl, "residuals"):
            return tl.residuals().ravel()
        image = view.renderer.image.to_numpy()
        if image.ndim == 3:
            image = image[..., None]
        return (image[tl.fid.to_numpy()][..., list(tl.channels)] - tl.target.to_numpy()).ravel()

    def view_residual_sizes(self, levels=False) -> list:
        """The residual count of each view, in the order `residuals` concatenates them (from the
        images as they are now: no rollout)."""
        return [int(self._view_residuals(view, levels).size) for view in self.views]

    def view_losses(self) -> dict:
        """{view name: its image loss, unweighted} at the current parameters (one rollout, no
        gradient): how well each camera is fitted."""
        self.sim.run()
        return {view.name: view.loss_value() for view in self.views}

    def refine(self, target, iters=10, fd_step=1e-4, damping=1e-3, log_every=1, printer=print, frames=None,
               levels=False):
        """Polish the fit with Levenberg-Marquardt on the residuals (`tgs.least_squares`:
        finite-difference Jacobian, 2 n + 1 rollouts per iteration for n parameter
        values; `levels`: as for `residuals`); appends to `self.history` and returns it."""
        self.set_target(target, frames=frames)
        self._check_target_masks()
        self.history = least_squares(lambda: self.residuals(levels), self.params, iters=iters, fd_step=fd_step,
                                     damping=damping, log_every=log_every, printer=printer, history=self.history)
        return self.history

    # -- resume ----------------------------------------------------------------
    def save_state(self, path):
        """Parameters, optimiser state and history, pickled to `path` (written to path + ".tmp"
        first and renamed, so an interrupted write never leaves a half checkpoint).

        The pickle is a dict with a header: `format` (CHECKPOINT_FORMAT), `version`
        (CHECKPOINT_VERSION), `params` ([(name, shape), ...] in this fit's order) and
        `optimizer` (the optimiser's class name); `load_state` checks them."""
        state = {"format": CHECKPOINT_FORMAT, "version": CHECKPOINT_VERSION,
                 "params": [(p.name, tuple(np.shape(p.value()))) for p in self.params],
                 "optimizer": type(self.optimizer).__name__,
                 "values": [p.value() for p in self.params],
                 "optimizer_state": copy.deepcopy(self.optimizer.state_dict()), "history": self.history}
        path = os.fspath(path)
        tmp = path + ".tmp"
        with open(tmp, "wb") as fh:
            pickle.dump(state, fh)
        os.replace(tmp, path)

    def load_state(self, path):
        """Continue from a checkpoint written by `save_state` of a fit with the same parameters
        (names and shapes, in order) and the same optimiser class.

        Raises ValueError naming `path` and what is wrong, before anything is changed, for a
        file that is not a pickle, a truncated one, a pickle that is not a VideoFit
        checkpoint, another format version, or a checkpoint of another fit (other
        parameters or shapes, another optimiser); FileNotFoundError for a missing file.
        """
        state = _read_checkpoint(path)
        mine = [(p.name, tuple(np.shape(p.value()))) for p in self.params]
        theirs = [(str(n), tuple(sh)) for n, sh in state["params"]]
        if theirs != mine:
            raise ValueError(f"{path}: checkpoint of another fit: its parameters (name, shape) are {theirs}, "
                             f"this fit's are {mine}; delete the file or pass another resume path")
        opt = type(self.optimizer).__name__
        if state["optimizer"] != opt:
            raise ValueError(f"{path}: checkpoint written with optimiser {state['optimizer']}, this fit uses {opt}; "
                             "delete the file or pass another resume path")
        values = [np.asarray(v) for v in state["values"]]
        if [tuple(v.shape) for v in values] != [sh for _, sh in mine] or not all(np.isfinite(v).all() for v in values):
            raise ValueError(f"{path}: corrupt checkpoint: parameter values of shapes "
                             f"{[tuple(v.shape) for v in values]} (finite: {[bool(np.isfinite(v).all()) for v in values]})"
                             f" do not match its header {mine}")
        for p, v in zip(self.params, values):
            p.write(v)
        self.optimizer.load_state_dict(state["optimizer_state"])
        self.history = state["history"]
        # the history's last entry is re-evaluated by the next iteration
        if self.history.loss:
            self.history.loss.pop()
            for values in self.history.params.values():
                values.pop()
            self.history.seconds.pop()

    # -- pictures --------------------------------------------------------------
    def _param_lines(self, values):
        """'name value' per parameter (one label line each) from {name: value}; '' where values is None."""
        if values is None:
            return None
        lines = []
        for i, p in enumerate(self.params):
            name = p.name or f"param {i}"
            if p.name in values:
                v = np.asarray(values[p.name], dtype=np.float64).reshape(-1)
                text = (", ".join(f"{x:.4g}" for x in v) if v.size <= 3 else f"mean {v.mean():.4g}")
                lines.append(f"{name} {text}")
        return "\n".join(lines) if lines else None

    def report_strip(self, target_video, initial_video, truth=None, final_video=None, scale=None):
        """The labelled video target | initial guess | estimate: uint8 (K, H', W', 3).

        Each panel's label gives its parameter values: `truth` ({name: value}; None: no
        values under "target"), the first values of the fit's History, and the current
        parameters (those `render()` uses).  final_video: the estimate's frames (None:
        rendered now).  scale: integer upscaling (None: panels at least 192 pixels wide,
        so the labels fit).  Pass several trials' strips to `panels.trials_grid`."""
        from ..io.panels import labelled_strip
        if final_video is None:
            final_video = self.render()
        if self.several_views:        # one strip per view: lists of videos in view order
            return [self.report_strip(t, i, truth, f, scale) for t, i, f in
                    zip(_per_view(self, target_video), _per_view(self, initial_video), final_video)]
        initial = {name: vals[0] for name, vals in self.history.params.items() if vals} if self.history else None
        final = {p.name: p.value() for p in self.params}
        if scale is None:
            scale = max(2, -(-192 // np.shape(final_video)[2]))
        return labelled_strip([("target", target_video, self._param_lines(truth)),
                               ("initial guess", initial_video, self._param_lines(initial)),
                               ("estimate", final_video, self._param_lines(final))], scale=scale)

    def save_report(self, out_dir, target_video, initial_video, truth=None, title="system identification",
                    show=False):
        """Loss curve, parameter traces, the labelled GIF target | initial guess | estimate
        (`report_strip`) and overlay.png (the estimate's last-frame outline in red over the
        target's last frame).  Returns {"loss_plot", "param_plot", "gif", "overlay": path}.

        show: also play the labelled video in a window when a display exists: True, or the
        parsed `tigradsim.io.viz.add_view_args` flags (--no-wait, --speed, --headless)."""
        from ..io.panels import overlay_png
        from ..io.video import save_gif
        from ..io.viz import play_video
        os.makedirs(out_dir, exist_ok=True)
        final_video = self.render()
        paths = {
            "loss_plot": plot_loss(self.history, os.path.join(out_dir, "loss.png"), title=f"{title}: loss"),
            "param_plot": plot_params(self.history, os.path.join(out_dir, "params.png"), truth=truth, title=title),
        }
        strip = self.report_strip(target_video, initial_video, truth=truth, final_video=final_video)
        if self.several_views:        # a GIF and an overlay per view, named by the view
            targets = _per_view(self, target_video)
            for view, s, t, f in zip(self.views, strip, targets, final_video):
                tag = "".join(c if c.isalnum() or c in "-_" else "_" for c in view.name)
                paths[f"gif_{view.name}"] = os.path.join(out_dir, f"target_initial_estimate_{tag}.gif")
                save_gif(s, paths[f"gif_{view.name}"], fps=15)
                paths[f"overlay_{view.name}"] = overlay_png(np.asarray(t)[-1], f[-1],
                                                            os.path.join(out_dir, f"overlay_{tag}.png"))
            paths["gif"], paths["overlay"] = paths[f"gif_{self.views[0].name}"], paths[f"overlay_{self.views[0].name}"]
            strip = strip[0]
        else:
            paths["gif"] = os.path.join(out_dir, "target_initial_estimate.gif")
            save_gif(strip, paths["gif"], fps=15)
            paths["overlay"] = overlay_png(np.asarray(target_video)[-1], final_video[-1],
                                           os.path.join(out_dir, "overlay.png"))
        if show:
            play_video(strip, title, None if show is True else show, saved_at=paths["gif"])
        return paths


def _per_view(fit, videos) -> list:
    """One video per view of `fit` from a list, a dict by name or None (the Views' own targets)."""
    return view_targets(fit.views, videos)


def side_by_side(videos, gap=2):
    """Frames of several videos (each (K, H, W[, C])) placed left to right, as uint8 RGB."""
    out = []
    for frames in zip(*videos):
        row = []
        for f in frames:
            f = np.asarray(f, dtype=np.float64)
            if f.ndim == 2:
                f = f[..., None]
            f = np.repeat(f, 3, axis=-1) if f.shape[-1] == 1 else f[..., :3]
            row.append(np.clip(f, 0, 1))
            row.append(np.ones((f.shape[0], gap, 3)))
        out.append((np.concatenate(row[:-1], axis=1) * 255).astype(np.uint8))
    return np.stack(out)


def image_target(target, renderer):
    """What a `VideoFit` compares for `target` with `renderer`: (kind, array, plate).

    kind "silhouette": array (K, H, W) in [0, 1], compared with the image's alpha;
    kind "color": array (K, H, W, 3), compared with the image's RGB, composited over
    `plate` (H, W, 3) when that is not None; kind "image": array (K, H, W, C),
    compared with image channels 0..C-1.
    Footage: masks (or grey frames) for a silhouette renderer; RGB over the footage's
    background plate (`footage.background`, else `estimate_background()` when it has
    masks) for a colour renderer.  Arrays and paths: a silhouette renderer takes a
    silhouette (`renderers.losses.to_silhouette`); a colour renderer compares a
    one-channel target as a silhouette, RGB as RGB (no plate) and RGBA as RGBA.
    """
    from ..io.footage import Footage
    from ..renderers.losses import load_target, to_silhouette

    C = renderer.image.n
    if isinstance(target, Footage):
        if C == 1 or target.channels == 1:
            if target.masks is not None:
                return "silhouette", target.masks, None
            if target.channels == 1:
                return "silhouette", target.frames[..., 0], None
            raise ValueError("target: RGB footage without masks cannot be compared with a silhouette renderer "
                             "(shading='silhouette'): pass masks (Footage(frames, fps, masks=...)) or render in "
                             "colour (shading='color' or 'lambert')")
        plate = target.background
        if plate is None:
            if target.masks is None:
                raise ValueError("target: RGB footage is compared over a background plate, and this footage has "
                                 "neither masks nor a plate: pass masks= to Footage, or set one with "
                                 "footage.set_background(plate) or footage.estimate_background() (a median "
                                 "over all frames, right when the object moves)")
            plate = target.estimate_background()
        return "color", target.frames, plate
    arr = load_target(target)
    if C == 1 or arr.shape[-1] == 1:
        return "silhouette", to_silhouette(arr)[..., 0], None
    if arr.shape[-1] == 3:
        return "color", arr, None
    return "image", arr[..., :C], None


@ti.kernel
def _add_into(dst: ti.template(), src: ti.template()):
    dst[None] += src[None]


def relative_error(estimate, truth) -> float:
    """Mean absolute relative error |estimate - truth| / |truth|."""
    estimate, truth = np.asarray(estimate, dtype=np.float64), np.asarray(truth, dtype=np.float64)
    return float(np.mean(np.abs(estimate - truth) / np.abs(truth)))
