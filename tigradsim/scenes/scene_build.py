"""From a validated `SceneSpec` (tigradsim.scenes.scene_file) to a runnable fit: the footage, the
model in tigradsim's y-up world, the simulator, the renderer, the unknowns as `Param`s
and a `VideoFit`.

    spec = load_scene("scene.toml")
    footage = load_scene_footage(spec)           # tgs.Footage, checked against the camera; no kernel yet
    scene = Scene(spec, footage)                 # builds model, simulator, renderer, unknowns
    video = scene.render()                       # (K, H, W, C): frame k at footage time k

Time matching (`tigradsim.io.footage`): footage frame k shows time start_time + k / fps; the
renderer draws frame k from the state at that time, interpolated linearly between the two
steps around it (`render_at_times`), so any dt works.  With `substeps` (dt = 1 / (fps
substeps)) and a start_time on a step, every frame falls on a step and nothing is blended.

Each library piece the scene needs is reached through one small function
(`scene_camera`, `Scene._make_renderer`, `unknown_params` in unknown_params.py, `fit_scene` in
scene_fit.py), so that a newer library version changes one place.  The fit engine itself is
tigradsim/fitting/'s, public to any `VideoFit` / `identify` user: horizons from step doubling
(fitting/horizons.py), the time step's and the MPM grid's bias (fitting/refined_model.py, built by
scene_refined.py), residual clusters
(fitting/residual_groups.py) and the camera correction's Params, prior and report
(fitting/camera_prior.py); `Scene` adapts the scene file to them.
"""
from __future__ import annotations

import math

import numpy as np

from ..core.aliases import alias_property
from ..fitting.camera_prior import CameraPrior
from ..fitting.horizons import INTEGRATOR_ORDER, Predictability, copy_values, predictability, \
    predictable_horizon, silhouette_disagreement
from ..fitting.residual_groups import MIN_INTERVAL_BLOCKS, frame_blocks, interval_blocks, residual_groups
from ..io.mask_checks import silhouette_iou     # re-exported (cli)
from ..io.outlines import outline_frames     # re-exported (the pictures of a fit)
from .scene_cloth import add_cloth_object
from .scene_mpm import mpm_checkpoint_every      # MPM: checkpointed by default
from .scene_refined import refined_at_current_values, refined_scene, refined_systematics
from .scene_colliders import file_axes_size
from .scene_file import SceneSpec
from .scene_footage import load_scene_footage, scene_camera       # re-exported (cli, tests)
from .scene_fit import fit_scene
from .scene_views import build_views, fit_views, on_first_camera_frames, scene_camera_params, scene_camera_report, \
    side_by_side_alpha, view_frame_counts, view_residual_groups
from .cloth_soft_constants import set_stated_cloth_soft_constants
from .pair_constants import write_stated_pair_constants
from .unknown_params import unknown_params

# [fit] edge_softness = "auto": the silhouette edge's 10-90 % width in pixels, that of a camera's box-filtered
# (area) coverage of a straight edge (`tigradsim.renderers.edge_softness_for_edge`)
EDGE_PX = 0.8
# The fit engine the Scene adapts lives in tigradsim/fitting/ (horizons, time_step_bias,
# residual_groups, camera_prior); its names stay importable from here.
__all__ = ["load_scene_footage", "Scene", "scene_camera", "unknown_params", "fit_scene", "outline_frames",
           "silhouette_iou", "CameraPrior", "Predictability", "silhouette_disagreement", "predictable_horizon",
           "frame_blocks", "crease_fraction", "INTEGRATOR_ORDER", "MIN_INTERVAL_BLOCKS"]


# ---------------------------------------------------------------------------
# the scene

class Scene:
    """Model, simulator, renderer, unknowns and `VideoFit` of a scene file.

    Attributes: spec, footage (tgs.Footage at the render resolution), model, sim, renderer,
    camera, params (one Param per unknown, in file order), fit (VideoFit), timed (the
    `TimedVertices` observer: frame k at footage time k), dt, steps, edge_softness (the renderer's,
    NDC^2; `sigma` is its older name), handles (object name -> body index or SoftMesh).  unknowns=False leaves the unknowns at the values the objects
    and the ground have in the file (no Params), e.g. to render a clip's known truth.
    [[cameras]]: `footage` is a list, one Footage per camera (`load_views_footage`); `views`: every
    camera's `SceneView`; the attributes above are the first camera's; the fit sums their losses.
    """

    sigma = alias_property("edge_softness")       # the older name of the renderer's edge softness

    def __init__(self, spec: SceneSpec, footage, requires_grad=True, unknowns=True):
        from ..fitting.sysid import VideoFit
        from ..sim.builder import SceneBuilder
        from ..sim.simulator import Simulator

        footages = list(footage) if isinstance(footage, (list, tuple)) else [footage]
        self.spec, self.footage, self._footages = spec, footages[0], footages
        footage = footages[0]
        self.M = spec.axes
        self.dt, self.steps = self._schedule()
        b = SceneBuilder(gravity=self.M @ spec.gravity)
        if spec.ground is not None:
            self._add_ground(b)
        from .scene_colliders import add_scene_colliders
        self.colliders = add_scene_colliders(b, spec)          # name -> collider index
        if spec.mpm_grid is not None:                          # MPM matter: tigradsim/scenes/scene_mpm.py
            from .scene_mpm import add_mpm_grid
            self.mpm_grid = add_mpm_grid(spec, b)
        self.handles = {}
        for name, obj in spec.objects.items():
            self.handles[name] = self._add_object(b, obj)
        for fs in spec.forces:
            self._add_force(b, fs)
        # "rigid", "soft" (cloths too: drawn as particles), "mpm" (MPM objects only), or "mixed" (rigid and soft)
        kinds = {"soft" if o.kind == "cloth" else o.kind for o in spec.objects.values()}
        self.kind = kinds.pop() if len(kinds) == 1 else "mixed"
        set_stated_cloth_soft_constants(spec, b)                        # [cloth_soft]: cloths against soft objects
        self.model = b.finalize(requires_grad=requires_grad)
        write_stated_pair_constants(spec, self.model, self.handles)     # [bodies]: the bodies' X against each other
        every = mpm_checkpoint_every(spec, self.steps) if self.kind == "mpm" else spec.checkpoint_every
        self.sim = Simulator(self.model, dt=self.dt, steps=self.steps, checkpoint_every=every)
        self.camera = scene_camera(spec, footage.factor)
        self.renderer = self._make_renderer()
        self.views = build_views(self, footages)         # every camera's renderer (the first is self.renderer)
        # unknowns=False: the objects' and the ground's own values (no [unknowns] initial values)
        self.params = unknown_params(spec, self.model, self.handles) if unknowns else []
        self.frames_used = len(footage)
        # [fit] refine_camera: each camera's correction as Params, and the prior (the calibration's uncertainty)
        # that forward, loss_value and residuals include
        self.camera_params, self.camera_prior = scene_camera_params(self) if unknowns else ([], None)
        # check_view=False: parse_scene ran the same check, in the file's terms (scene_sanity)
        self.fit = VideoFit(self.sim, fit_views(self), self.params + self.camera_params, check_view=False)
        self.make_loss()
        self._with_unknowns = unknowns
        self._refined = {}            # refined models by name (scene_refined.py), built when first needed
        self.horizons_used = []       # set_horizon's record: one dict per call (asked, used, predictability)
        self.horizon_info = None      # fit_scene: the frames fitted and why

    # -- time -------------------------------------------------------------------
    def _schedule(self):
        """(dt, steps): the file's dt, or 1 / (fps substeps); steps up to the last frame (or duration)."""
        spec, fo = self.spec, self.footage
        dt = spec.dt if spec.dt is not None else 1.0 / (fo.fps * spec.substeps)
        last = max(float(f.times[-1]) for f in self._footages)       # every camera's last frame
        end = spec.duration if spec.duration is not None else last
        if end < last - 1e-9 * dt:
            raise spec.error("simulation", "duration", f"{end:g} s ends before the last footage frame "
                             f"(t = {last:g} s)")
        steps = max(1, int(math.ceil(end / dt - 1e-9)))
        return dt, steps

    # -- building ---------------------------------------------------------------
    def _add_ground(self, b):
        g = dict(self.spec.ground)
        law = g.pop("law", {})
        b.add_ground(**g, **law)

    def _add_object(self, b, obj):
        M, spec = self.M, self.spec
        try:
            if obj.kind == "mpm":
                from .scene_mpm import add_mpm_object
                return add_mpm_object(spec, b, obj)
            if obj.kind == "cloth":                 # scene_cloth.py
                return add_cloth_object(b, obj, spec, M)
            if obj.kind == "rigid":
                q = np.concatenate([M @ obj.rotation[:3], obj.rotation[3:]])       # M R M^T
                shape = obj.shape and dict(obj.shape, shape_size=file_axes_size(obj.shape["shape"],
                                                                     obj.shape["shape_size"], M))
                return b.add_rigid_body(obj.vertices @ M.T, obj.faces, mass=obj.mass, density=obj.density,
                                        position=M @ obj.position, rotation=q, velocity=M @ obj.velocity,
                                        angular_velocity=M @ obj.angular_velocity,
                                        contact_radius=obj.contact_radius, **shape, **obj.contact, **obj.law)
            x = obj.position + obj.vertices @ _quat_matrix(obj.rotation).T      # file axes, world positions
            com = _tet_centroid(x, obj.tets)
            vel = obj.velocity + np.cross(obj.angular_velocity, x - com)
            return b.add_soft_mesh((x @ M.T, obj.tets), material=obj.material, params=obj.params,
                                   density=obj.density, mass=obj.mass, node_mass=obj.node_mass,
                                   mass_distribution=obj.mass_distribution,
                                   damping=obj.damping, damping_model=obj.damping_model, velocity=vel @ M.T,
                                   radius=obj.contact_radius)
        except (ValueError, TypeError, IndexError, KeyError) as exc:
            raise spec.error(f"objects.{obj.name}", obj.source or "mesh", str(exc)) from None

    def _add_force(self, b, fs):
        from ..physics.rigid import add_body_force
        M = self.M
        try:
            add_body_force(b, self.handles[fs.object], force=M @ fs.force,
                           point=None if fs.point is None else M @ fs.point, torque=M @ fs.torque,
                           start=fs.start, end=fs.end)
        except (ValueError, TypeError, IndexError) as exc:
            raise self.spec.error(f"forces.{fs.index}", "force", str(exc)) from None

    def _surface(self):
        """(faces into the rendered vertices, vertex count, vertex_ids or None, per-vertex colours)."""
        spec, m = self.spec, self.model
        fo = self.footage
        seen = np.array([0.8, 0.8, 0.8])
        if fo.masks is not None and fo.channels == 3 and np.any(fo.masks > 0.5):
            seen = fo.frames[fo.masks > 0.5].mean(axis=0)           # the object's mean colour in the footage
        palette = [o.color if o.color is not None else seen for o in spec.objects.values()]
        if self.kind in ("rigid", "mixed"):
            start = m.body_vertex_start            # TimedVertices(source="rigid") layout, as RigidSurface
            faces = np.concatenate([f + start[b] for b, f in enumerate(m.body_faces)]).astype(np.int32)
            rigid = [(c, o) for c, o in zip(palette, spec.objects.values()) if o.kind == "rigid"]
            colors = np.concatenate([np.tile(c, (len(o.vertices), 1)) for c, o in rigid])
            if self.kind == "rigid":
                return faces, int(start[-1]), None, colors
            # source="both": the bodies' vertices, then every particle (interior ones unreferenced by faces)
            nr = int(start[-1])
            soft = [(c, o) for c, o in zip(palette, spec.objects.values()) if o.kind in ("soft", "cloth")]
            owner = np.zeros((m.particle_count, 3))
            for (c, _), h in zip(soft, [self.handles[o.name] for _, o in soft]):
                owner[h.particle_start:h.particle_start + h.particle_count] = c
            allf = np.concatenate([faces] + [self.handles[o.name].faces + nr for _, o in soft]).astype(np.int32)
            return allf, nr + m.particle_count, None, np.concatenate([colors, owner])
        allf = np.concatenate([h.faces for h in self.handles.values()])
        vids = np.unique(allf)
        owner = np.zeros(m.particle_count, dtype=np.int64)
        for k, h in enumerate(self.handles.values()):
            owner[h.particle_start:h.particle_start + h.particle_count] = k
        colors = np.array(palette)[owner[vids]]
        return np.searchsorted(vids, allf).astype(np.int32), len(vids), vids, colors

    def _low_poly_solid(self, faces, vids) -> bool:
        """Whether the rendered surface is closed and made of flat faces of a few triangles
        (most edges are creases: `crease_fraction` >= 1/2, e.g. a box), which is where
        SoftRasterizer's `closed` coverage is exact: it counts the front and the back face of a
        silhouette edge once, not twice.  On a finely tessellated surface (a soft body's tet
        surface, a smooth mesh) it leaves seams where both layers' inner edges cross, so the
        union stays there.  Measured at the true values, edge_softness "auto", 64 px: box-drop clip,
        area +5 % (union) -> -0.5 % (closed), fit mu +4.6 % -> +0.7 %; soft-cube clip (4x4x4
        tet box), +3 % (union) against -9 % (closed)."""
        from ..io.meshes import unpaired_edge

        if unpaired_edge(faces) is not None:
            return False
        if self.kind == "rigid":
            x = np.concatenate([o.vertices for o in self.spec.objects.values()])
        elif self.kind == "mixed":          # the bodies' mesh vertices (body frame: creases only matter), particles
            x = np.concatenate([np.concatenate([o.vertices for o in self.spec.objects.values() if o.kind == "rigid"]),
                                self.model.particle_q0.to_numpy()])
        else:
            x = self.model.particle_q0.to_numpy()[vids]
        return crease_fraction(x, faces) >= 0.5

    def _make_renderer(self):
        """Silhouette renderer for mask supervision; an unlit colour renderer (RGBA), blended by
        coverage over the footage's plate, for "rgb" and "both"; frame k drawn at footage time k."""
        from ..io.footage import render_at_times
        from ..renderers import SoftRasterizer, edge_softness_for_edge

        spec, fit = self.spec, self.spec.fit
        if self.kind == "mpm":
            from .scene_mpm import make_splatter
            return make_splatter(self)
        faces, nverts, vids, colors = self._surface()
        # "auto" edge softness: silhouette edges as sharp as the footage's antialiased ones (a softer
        # edge inflates the silhouette and biases the fit; edge_softness_for_edge says how much)
        self.edge_softness = fit.edge_softness if fit.edge_softness is not None else \
            edge_softness_for_edge(EDGE_PX, self.camera.width, self.camera.height)
        kwargs = dict(frames=len(self.footage), edge_softness=self.edge_softness, gamma=fit.gamma)
        if vids is not None:
            kwargs["vertex_ids"] = vids
        self.plate = None
        if fit.supervision == "mask":
            kwargs["shading"] = "silhouette"
        else:
            self.plate = self._plate()
            # unlit colour: a path-traced object's shading is not modelled; its silhouette
            # (through the coverage) carries the geometry, the colour only separates it from
            # the plate
            kwargs.update(shading="color", vertex_colors=colors, blend="coverage")
        kwargs["closed"] = self._low_poly_solid(faces, vids)
        ren = SoftRasterizer(self.camera, faces, nverts, **kwargs)
        if self.plate is not None:
            ren.set_background(self.plate)      # the renderer composites by coverage; the loss compares its RGB
        try:
            self.timed = render_at_times(self.sim, ren, self.footage, source={"rigid": "rigid", "soft": "particles",
                                                                                 "mixed": "both"}[self.kind])
        except ValueError as exc:
            raise spec.error("footage", "start_time", str(exc)) from None
        return ren

    def _plate(self):
        """The background plate for RGB supervision: the file's, or estimated from the footage."""
        fo = self.footage
        if fo.channels != 3:
            raise self.spec.error("fit", "supervision", f"{self.spec.fit.supervision!r} needs RGB footage; these "
                                  "frames are grey (use supervision = \"mask\")")
        if fo.background is None:
            try:
                fo.estimate_background()
            except ValueError as exc:
                raise self.spec.error("footage", "background", str(exc)) from None
        return fo.background

    # the fitted camera correction(s) and corrected camera(s) in the file's axes (OpenCV K, R, t)
    camera_report = scene_camera_report

    def interval_blocks(self, frames) -> int:
        """Clusters of contiguous frames for the intervals (`residual_groups`): at least 6 and
        twice the unknowns' coordinates (the sandwich covariance needs more clusters than
        coordinates, and its small-sample factor G / (G - p) stays <= 2), at most one per frame."""
        coords = sum(int(np.size(p.value())) for p in self.params + self.camera_params)
        return interval_blocks(frames, coords)

    # -- values -----------------------------------------------------------------
    def set_values(self, values):
        """Write unknowns (target -> value) into the model."""
        for p in self.params:
            if p.name in values:
                p.write(np.full(np.shape(p.value()), values[p.name]))

    def values(self) -> dict:
        return {p.name: float(np.mean(p.value())) for p in self.params}

    # -- images -----------------------------------------------------------------
    def render(self) -> np.ndarray:
        """Run the rollout at the current values; the rendered frames at the footage's times,
        (K, H, W, C) (C = 1 silhouette, or RGBA); with several cameras, the first camera's."""
        video = self.fit.render()
        return video[0] if isinstance(video, list) else video

    def render_views(self) -> list:
        """Run the rollout at the current values; every camera's frames, [(K, H, W, C)] in view order."""
        self.fit.render()
        return [v.renderer.image.to_numpy().copy() for v in self.views]

    def make_loss(self):
        """The image loss (BlurredImageMSE, or ImageMSE when every blur width is 0) on every
        footage frame, installed on the VideoFit: masks against the silhouette (alpha); RGB
        against the rendered colour composited over the plate; "both" sums the two.  With several
        cameras, one such loss per camera (on its renderer and footage); returns the first's."""
        from ..renderers import BlurredImageMSE, ImageMSE

        sup, blur = self.spec.fit.supervision, self.spec.fit.blur
        self._loss_parts, self._part_views, losses = [], [], []
        for i, view in enumerate(self.views):
            fo, image = view.footage, view.renderer.image

            def one(target, channels, image=image):
                if all(s == 0 for s in blur):
                    return ImageMSE(image, target, channels=channels)
                return BlurredImageMSE(image, target, channels=channels, blur_px=blur)

            parts = []
            if sup in ("mask", "both"):
                parts.append((one(fo.masks[..., None], [image.n - 1]), lambda k, fo=fo: fo.masks[:k, ..., None]))
            if sup in ("rgb", "both"):            # the renderer composites over the plate (coverage blending)
                parts.append((one(fo.frames, [0, 1, 2]), lambda k, fo=fo: fo.frames[:k]))
            self._loss_parts += parts         # every camera's parts, view after view (residuals' order)
            self._part_views += [i] * len(parts)
            losses.append(parts[0][0] if len(parts) == 1 else _SumLoss([p for p, _ in parts]))
            self.fit.set_image_loss(losses[-1], view=i)
        self.frames_used = len(self.footage)
        return losses[0]

    def use_frames(self, k):
        """Fit the first k footage frames only (coarse to fine in time; `set_frames` on the losses); a
        further camera of other frame times its frames up to that time (`view_frame_counts`)."""
        k = int(k)
        counts = view_frame_counts(self, k)
        for (loss, target), v in zip(self._loss_parts, self._part_views):
            loss.set_frames(np.arange(counts[v]), target(counts[v]))
        self.frames_used = k
        if self.camera_prior is not None:
            self.camera_prior.set_frames(counts if len(self.views) > 1 else k)

    # -- refined models: the time step's and the MPM grid's bias (scene_refined.py) -----------
    def half_step_scene(self) -> "Scene":
        """This scene at dt / 2 (same file, footage, camera, unknowns; no gradients), built once."""
        return refined_scene(self, "time_step")

    def finer_grid_scene(self) -> "Scene":
        """This MPM scene at a 4/3 finer grid (particles resampled at its cells: scene_refined.py)."""
        return refined_scene(self, "grid")

    def time_step_systematics(self) -> dict:
        """`fit_report`'s systematics for the time step ([fit] time_step_bias): the residuals at the
        current values, on the frames fitted now, of `half_step_scene`, with the Richardson factor
        2^p / (2^p - 1) (p = INTEGRATOR_ORDER; fitting/refined_model.py).  One rollout at dt / 2."""
        return refined_systematics(self, "time_step")

    def grid_systematics(self) -> dict:
        """The same for the MPM grid ([fit] grid_bias): at the 4/3 finer grid (`finer_grid_scene`), factor
        q^p / (q^p - 1) (fitting/grid_bias.py).  One rollout at the finer grid (2.4x the particles)."""
        return refined_systematics(self, "grid")

    def model_systematics(self) -> dict:
        """Every systematic the file's [fit] asks for (time_step_bias, grid_bias), in one dict."""
        out = {}
        if self.spec.fit.time_step_bias:
            out.update(self.time_step_systematics())
        grid = self.spec.fit.grid_bias           # None (a spec made in Python): on with MPM matter
        if grid or (grid is None and self.spec.mpm_grid is not None):
            out.update(self.grid_systematics())
        return out

    def predictability(self, tolerance=None) -> "Predictability":
        """Step doubling at the current values: the rollout at dt and the rollout at dt / 2
        (`half_step_scene`, given the same unknowns and camera correction), both rendered at the
        footage times; per frame their silhouette disagreement (`silhouette_disagreement`, mean
        edge displacement in render pixels), the estimated error of the dt model (Richardson:
        2^p / (2^p - 1) times the disagreement, p = INTEGRATOR_ORDER) and the predictable horizon:
        the leading frames whose estimated error is within `tolerance` px (default [fit]
        horizon_tolerance).  Runs two forward rollouts (no Tape)."""
        tol = self.spec.fit.horizon_tolerance if tolerance is None else tolerance
        half = refined_at_current_values(self, "time_step")
        if len(self.views) > 1:         # every camera's silhouettes side by side: the edges of all of them
            return predictability(lambda: side_by_side_alpha(on_first_camera_frames(self, self.render_views())),
                                  lambda: side_by_side_alpha(on_first_camera_frames(half, half.render_views())),
                                  tol, self.dt)
        return predictability(self.render, half.render, tol, self.dt)

    def set_horizon(self, k) -> int:
        """Coarse to fine in time (`tgs.identify`'s set_horizon): fit the first k footage frames,
        or, with [fit] horizon = "auto", the first min(k, predictable horizon at the current
        values) frames (at least 1): the fit never reaches into frames whose motion the model at
        this dt cannot follow.  Records the call in `horizons_used`; returns the frames used."""
        K = len(self.footage)
        if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or not 1 <= k <= K:
            raise ValueError(f"k: expected a frame count in [1, {K}], got {k!r}")
        entry = {"asked": int(k), "used": int(k)}
        if self.spec.fit.horizon == "auto":
            pred = self.predictability()
            entry.update(used=max(1, min(int(k), pred.horizon)), predictable=pred.horizon, reason=pred.reason(),
                         values=self.values())
        self.use_frames(entry["used"])
        self.horizons_used.append(entry)
        return entry["used"]

    def loss_value(self) -> float:
        """The fit's objective (Tape units): image loss plus the camera prior, if any."""
        self.fit.loss_value()
        if self.camera_prior is not None:
            self.camera_prior(self.fit.loss)
        return float(self.fit.loss[None])

    def forward(self):
        """The rollout, image loss and camera prior into `self.fit.loss` (for `optimize` / `identify`)."""
        self.fit.forward()
        if self.camera_prior is not None:
            self.camera_prior(self.fit.loss)

    def residuals(self) -> np.ndarray:
        """The image residuals (mask part, then RGB part, each frame-major; camera after camera), then,
        with refine_camera, the camera prior's 6 residuals (`CameraPrior`; 6 per camera, each against
        its camera's residual count): 1/2 |r|^2 is the objective whose 2 / N multiple the Tape loss is."""
        r = np.ravel(self.fit.residuals())
        if self.camera_prior is None:
            return r
        per_frame = r.size / self.frames_used if len(self.views) == 1 else \
            [n / c for n, c in zip(self.fit.view_residual_sizes(), view_frame_counts(self, self.frames_used))]
        return np.concatenate([r.astype(np.float64), self.camera_prior.residuals(per_frame)])

    def residual_groups(self, count=None, per_frame=False) -> np.ndarray:
        """One cluster label per residual of `residuals()` (`fit_report(groups=...)`): the block
        of contiguous footage frames it comes from (`interval_blocks`), the same label for a
        frame's mask and RGB residuals (the parts are concatenated, each frame-major); the camera
        prior's 6 residuals (6 per camera) form one more cluster; cameras of other frame times are
        clustered by time (`view_residual_groups`).  count: len(residuals()) as a check.

        Why blocks and not frames: a model mismatch (the time step, the edge profile, the
        contact law) moves the silhouette the same way over many neighbouring frames, so
        single frames are not independent clusters.  Blocks widen the intervals only as far as
        the mismatch varies between blocks; a bias the whole clip shares (the time step's) is
        covered by `time_step_systematics` instead (box-push clip, masks, 64 steps per frame:
        6 blocks give +-0.10 % / +-0.17 % for mass / mu against errors of +0.20 % / -0.31 %;
        with the time-step bias added the mass interval contains the truth and mu's ends
        0.005 % short).
        per_frame: one cluster per frame (the prior's is label k), for `tgs.frame_statistics`.
        """
        k = self.frames_used
        sizes = [int(np.prod(np.shape(loss.residuals()))) for loss, _ in self._loss_parts]
        blocks = k if per_frame else self.interval_blocks(k)
        return view_residual_groups(self, k, blocks, sizes, self._part_views,
                                    extra=6 * len(self.views) if self.camera_prior is not None else 0, count=count)


def crease_fraction(vertices, faces, angle_deg: float = 30.0) -> float:
    """The fraction of a surface's edges (shared by two triangles) at which the triangles'
    normals turn by more than `angle_deg`: 2/3 for a box of 12 triangles (the 6 quad
    diagonals are flat), near 0 for a finely tessellated or smooth surface (a subdivided
    cube's grid, an icosphere).  0.0 when no edge is shared.  vertices: (N, 3); faces: (F, 3)."""
    from ..physics.cloth import dihedral_angles, interior_edges

    quads = interior_edges(faces)
    if len(quads) == 0:
        return 0.0
    return float(np.mean(np.abs(dihedral_angles(vertices, quads)) > math.radians(angle_deg)))


class _SumLoss:
    """Several image losses added into one loss field ("both": silhouette + colour)."""

    def __init__(self, losses):
        self.losses = list(losses)

    def __call__(self, loss):
        for part in self.losses:
            part(loss)

    def residuals(self):
        return np.concatenate([np.ravel(part.residuals()) for part in self.losses])


# ---------------------------------------------------------------------------
# small helpers

def _quat_matrix(q):
    from ..physics.rigid import quat_to_matrix_np
    return quat_to_matrix_np(q)


def _tet_centroid(x, tets):
    t = np.asarray(tets)
    a, b, c, d = (x[t[:, k]] for k in range(4))
    vol = np.abs(np.einsum("ij,ij->i", b - a, np.cross(c - a, d - a))) / 6.0
    return (vol[:, None] * (a + b + c + d) / 4.0).sum(0) / vol.sum()

