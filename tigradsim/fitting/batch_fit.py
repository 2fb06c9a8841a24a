"""BatchFit: fit each copy of a batched scene (`tgs.batched`) to its own video or 3D track, every
copy in the same rollout, rendering and Tape.

    batch = tgs.batched(build, copies=16)                     # one rigid body (+ its push) per copy
    sim = tgs.Simulator(batch.model, dt=1/480, steps=288)
    masses = batch.params("body_mass", "mass", lower=0.05, upper=50, log_space=True)
    fit = tgs.BatchFit(batch, sim, masses, camera=cam, every=12, edge_softness=1e-3)
    batch.set("body_mass", truths); videos = fit.render()     # (B, K, H, W, 1): one video per copy
    batch.set("body_mass", guesses)
    fit.fit(videos, iters=45, optimizer=lambda p: tgs.Adam(p, lr=0.15, lr_decay=0.93))
    fit.fit(videos, iters=15, optimizer=lambda p: tgs.BFGS(p, lr=0.05))   # per copy: exact

The loss is the sum of the copies' losses, each exactly the loss `VideoFit` gives that copy alone
(the silhouette MSE over its frames and pixels, or the state MSE over its frames and items), and each
copy's parameters are stepped by their own optimizer (`tigradsim.fitting.batch.PerCopy`), so a batched
fit ends where the B sequential fits end (to round-off; tests/test_batch.py).  Rendering: the copies
are tiles of one atlas image (`tigradsim.fitting.batch_render.AtlasRenderer`), silhouettes only.
Scenes: rigid bodies (their mesh surfaces are rendered; state targets "com" or "vertices").
"""

from typing import Callable, Optional

import numpy as np
import taichi as ti
from taichi.lang import impl

from ..core.aliases import renamed_keyword
from ..core.runtime import np_float
from .batch import PerCopy, copy_params
from .losses import MSELoss
from .optim import Adam, History
from .sysid import VideoFit


@ti.data_oriented
class CopyMSELoss(MSELoss):
    """Sum over copies of each copy's `MSELoss`: loss = sum_b sum_k sum_{i in b} |x[k, i] - t[k, i]|^2 /
    (K M_b), for a source (frames, M) whose items belong to copies (`item_copy` (M,) ints, M_b items in
    copy b)."""

    def __init__(self, source, target, item_copy):
        super().__init__(source, target)
        item_copy = np.asarray(item_copy)
        counts = np.bincount(item_copy)
        w = 1.0 / (self.frames * counts[item_copy])
        self.item_weights = ti.field(float, shape=len(item_copy))
        self.item_weights.from_numpy(w.astype(np_float()))

    @ti.kernel
    def _accumulate(self):
        ti.loop_config(serialize=self._serial)      # a range-for: Taichi ignores serialize on a struct-for
        for k, i in ti.ndrange(self.frames, self.items):
            d = self.source[k, i] - self.target[k, i]
            self.value[None] += self.item_weights[i] * d.dot(d)


class _BatchVideoFit(VideoFit):
    """VideoFit over the atlas (image) or a per-copy state loss; checks that copies stay in their tiles."""

    def __init__(self, sim, renderer, params, atlas, item_copy, supervision, state_source):
        # check_view=False: the copies sit side by side in one world, each drawn in its own tile
        super().__init__(sim, renderer, params, supervision=supervision, state_source=state_source, check_view=False)
        self.atlas = atlas
        self.item_copy = item_copy

    def set_target(self, target, frames=None):
        if self.supervision == "state":
            self._state_loss = CopyMSELoss(self.state_source, target, self.item_copy)
            return
        super().set_target(target, frames=frames)

    def forward(self):
        super().forward()
        if self.atlas is not None and self.supervision == "image":
            try:
                self.atlas.check()
            except RuntimeError:
                rt = impl.get_runtime()          # no backward pass after a failed check (as Simulator does)
                if rt.target_tape is not None and hasattr(rt.target_tape, "eval_on_exit"):
                    rt.target_tape.eval_on_exit = False
                raise


class BatchFit:
    """Fit per-copy parameters of a batched rigid-body scene to per-copy videos or 3D tracks.

    Args:
        batch: the `Batch` (`tgs.batched`); sim: a Simulator of `batch.model`.
        params: per-copy Params: a sequence over copies of a Param or a list of Params
            (`batch.params(...)`, or `list(zip(masses, frictions))`).
        camera: the copy camera (every copy's video is what this camera sees of that copy alone);
            needed for supervision="image" (and for `render`).
        every: steps per rendered/recorded frame.
        supervision: "image" (silhouette MSE) or "state" (`state_target` "com": each body's centre of
            mass; "vertices": every mesh vertex).
        edge_softness, gamma, coverage_eps: the soft rasterizer's (`sigma=` is edge_softness's older
            name); gutter: pixels between atlas tiles.
    Attributes: surface (RigidSurface), atlas (AtlasRenderer or None), video_fit (the VideoFit doing the work:
    its History records the summed loss and every copy's parameter values, keyed "name[b]").
    """

    def __init__(self, batch, sim, params, camera=None, every=1, supervision="image", state_target="com",
                 edge_softness=None, gamma=1e-4, coverage_eps=1e-4, gutter=None, sigma=None):
        from ..physics.rigid_observers import BodyRecorder, RigidSurface
        from .sysid import render_surface
        edge_softness, _ = renamed_keyword("edge_softness", edge_softness, "sigma", sigma, 1e-4, "BatchFit")
        if supervision not in ("image", "state"):
            raise ValueError(f"supervision: expected 'image' or 'state', got {supervision!r}")
        if state_target not in ("com", "vertices"):
            raise ValueError(f"state_target: expected 'com' or 'vertices', got {state_target!r}")
        if sim.model is not batch.model:
            raise ValueError("sim: must simulate batch.model (tgs.Simulator(batch.model, ...))")
        if getattr(batch.model, "body_count", 0) == 0:
            raise ValueError("batch: BatchFit renders rigid bodies; the batch's model has none")
        self.params = copy_params(params)
        if len(self.params) != batch.copies:
            raise ValueError(f"params: {len(self.params)} entries, expected one per copy ({batch.copies})")
        if supervision == "image" and camera is None:
            raise ValueError("camera: needed for supervision='image' (the camera each copy's video is taken with)")
        self.batch, self.sim, self.every = batch, sim, every
        self.surface = RigidSurface(sim, every=every)
        body_copy = batch.copy_of("bodies")
        self.vertex_copy = body_copy[batch.model.vertex_body.to_numpy()]
        self.atlas = None
        renderer = None
        if camera is not None:
            from .batch_render import AtlasRenderer, TiledSilhouetteMSE
            self.atlas = AtlasRenderer(camera, self.surface.faces, self.vertex_copy, batch.copies,
                                       self.surface.frames, edge_softness=edge_softness, gamma=gamma, coverage_eps=coverage_eps,
                                       gutter=gutter)
            render_surface(sim, self.atlas, self.surface, every)
            renderer = self.atlas.renderer
        if supervision == "state":
            if state_target == "com":
                source, item_copy = BodyRecorder(sim, every=every).positions, body_copy
            else:
                source, item_copy = self.surface.vertices, self.vertex_copy
        else:
            source, item_copy = None, None
        self.item_copy = item_copy
        flat = [p for group in self.params for p in group]
        self.video_fit = _BatchVideoFit(sim, renderer, flat, self.atlas, item_copy, supervision, source)
        if supervision == "image":
            W, H = camera.width, camera.height
            frames = self.surface.frames
            blank = np.zeros((frames, renderer.image.shape[1], renderer.image.shape[2]))
            self.video_fit.set_image_loss(TiledSilhouetteMSE(renderer.image, blank, self.atlas.mask(), W * H))

    @property
    def history(self) -> History:
        """The last `fit`'s History (summed loss; each copy's values under "name[b]")."""
        return self.video_fit.history

    @property
    def supervision(self) -> str:
        return self.video_fit.supervision

    # -- rollouts --------------------------------------------------------------
    def render(self) -> np.ndarray:
        """Roll out at the current parameters: every copy's video, (B, K, H, W, 1) in [0, 1]."""
        if self.atlas is None:
            raise ValueError("render: this BatchFit has no camera")
        self.sim.run()
        self.atlas.check()
        return self.atlas.split(self.atlas.renderer.image.to_numpy())

    def record_state(self) -> list:
        """Roll out; every copy's recorded positions, a list of B arrays (K, M_b, 3) [m] (state supervision)."""
        if self.supervision != "state":
            raise ValueError("record_state: this BatchFit has supervision='image' (use render)")
        self.sim.run()
        values = self.video_fit.state_source.to_numpy()
        return [values[:, self.item_copy == b] for b in range(self.batch.copies)]

    def targets(self):
        """`render()` or `record_state()`, by supervision: what `fit` takes."""
        return self.render() if self.supervision == "image" else self.record_state()

    def _target(self, targets):
        if self.supervision == "image":
            return self.atlas.tile_targets(targets)
        if not hasattr(targets, "__len__") or len(targets) != self.batch.copies:
            raise ValueError(f"targets: expected one (K, M_b, 3) array per copy ({self.batch.copies})")
        K = self.video_fit.state_source.shape[0]
        out = np.zeros(tuple(self.video_fit.state_source.shape) + (3,))
        for b, t in enumerate(targets):
            want = (K, int(np.sum(self.item_copy == b)), 3)
            arr = np.asarray(t, dtype=np.float64)
            if arr.shape != want:
                raise ValueError(f"targets[{b}]: shape {arr.shape}, expected {want}")
            out[:, self.item_copy == b] = arr
        return out

    # -- fitting -------------------------------------------------------------------
    def fit(self, targets, iters=100, optimizer: Optional[Callable] = None, lr=0.05, log_every=10,
            printer=print) -> History:
        """Fit every copy to its target for `iters` iterations (one rollout, render and Tape each);
        returns the History (summed loss; each copy's values under "name[b]").

        targets: image: one video per copy (B, K, H, W[, C]) (a sequence or array; uint8 or floats in
            [0, 1]); state: one (K, M_b, 3) array per copy.
        optimizer: a factory params -> Optimizer called once per copy (default Adam with `lr`), e.g.
            `lambda p: tgs.BFGS(p, lr=0.05)`; each copy is stepped by its own (PerCopy).
        """
        target = self._target(targets)
        factory = optimizer or (lambda p: Adam(p, lr=lr))
        opt = PerCopy.build(factory, self.params)
        self.video_fit.history = History()
        return self.video_fit.fit(target, iters=iters, optimizer=opt, log_every=log_every, printer=printer)

    def values(self) -> list:
        """Every copy's parameter values: a list over copies of lists of arrays."""
        return [[p.value() for p in group] for group in self.params]

    def copy_losses(self, targets) -> np.ndarray:
        """(B,) each copy's own loss at the current parameters (one rollout, no gradient)."""
        target = self._target(targets)
        if self.supervision == "image":
            videos = self.render()
            want = self.atlas.split(target)
            if want.shape[-1] != videos.shape[-1]:
                from ..renderers.losses import to_silhouette
                want = np.stack([to_silhouette(w, strict=False) for w in want])
            return np.mean((videos - want) ** 2, axis=(1, 2, 3, 4))
        recorded = self.record_state()
        return np.array([np.mean(np.sum((r - target[:, self.item_copy == b]) ** 2, axis=-1))
                         for b, r in enumerate(recorded)])
