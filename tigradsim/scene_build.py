"""From a validated `SceneSpec` (tigradsim.scene_file) to a runnable fit: footage arrays,
the model in tigradsim's y-up world, the simulator, the renderer, the unknowns as `Param`s
and a `VideoFit`.

    spec = load_scene("scene.toml")
    footage = load_scene_footage(spec)           # checked against the camera; no kernel yet
    scene = Scene(spec, footage)                 # builds model, simulator, renderer, unknowns
    video = scene.render()                       # (K, H, W, C) at the footage's frame times

Time matching: footage frame k is at simulation time start_time + k / fps.  The step is
dt = 1 / (fps substeps) (or the file's dt, which must divide 1 / fps); the renderer
records every `substeps` steps from t = 0, and footage frame k is compared with rendered
frame round(start_time fps) + k, so start_time must be a whole number of frame intervals.

Each of the library pieces the scene needs is reached through one small function here
(`_camera`, `_load_images`, `Scene._make_renderer`, `_entry_param`, `multi_start`,
`uncertainty`), so that a better library version replaces one place.
"""
from __future__ import annotations

import inspect
import math
from dataclasses import dataclass
from typing import Optional

import numpy as np

from .optim import Param
from .scene_file import SceneSpec

__all__ = ["FootageData", "load_scene_footage", "Scene", "outline_frames", "silhouette_iou"]


# ---------------------------------------------------------------------------
# footage

@dataclass
class FootageData:
    """Footage at the render resolution.  frames (K, H, W, 3) float in [0, 1]; masks (K, H, W)
    in [0, 1] or None; background (H, W, 3) or None; factor: footage pixels per render pixel."""
    frames: np.ndarray
    masks: Optional[np.ndarray]
    background: Optional[np.ndarray]
    fps: float
    start_time: float
    factor: int
    full_size: tuple                      # (width, height) of the footage files


def _load_images(paths) -> np.ndarray:
    import imageio.v3 as iio
    return [np.asarray(iio.imread(p)) for p in paths]


def _to_float_rgb(img):
    a = img.astype(np.float64) / (65535.0 if img.dtype == np.uint16 else 255.0 if img.dtype != np.float64 else 1.0)
    if a.ndim == 2:
        a = np.repeat(a[..., None], 3, axis=-1)
    return a[..., :3]


def _to_float_grey(img):
    a = img.astype(np.float64) / (65535.0 if img.dtype == np.uint16 else 255.0)
    if a.ndim == 3:
        a = a[..., 3] if a.shape[-1] == 4 and np.ptp(a[..., 3]) > 0 else a[..., :3].mean(-1)
    return a


def _downsample(a, f, channels):
    """Block mean over f x f pixels of (K, H, W, C) (channels=True) or (K, H, W) arrays."""
    if f == 1:
        return a
    if channels:
        K, H, W, C = a.shape
        return a.reshape(K, H // f, f, W // f, f, C).mean(axis=(2, 4))
    K, H, W = a.shape
    return a.reshape(K, H // f, f, W // f, f).mean(axis=(2, 4))


def _estimate_background(frames, masks):
    """Per-pixel median over the frames where the pixel is outside the mask (all frames
    where it is always covered)."""
    if masks is None:
        return np.median(frames, axis=0)
    out = np.median(frames, axis=0)
    free = masks < 0.5
    stack = np.where(free[..., None], frames, np.nan)
    with np.errstate(all="ignore"):
        med = np.nanmedian(stack, axis=0)
    return np.where(np.isfinite(med), med, out)


def load_scene_footage(spec: SceneSpec, resolution=None) -> FootageData:
    """Read the footage files of a scene, check them against the camera, and average them
    down to the render resolution (`resolution`, default the file's [fit] resolution or the
    footage size).  Raises SceneError naming the key; runs no kernel."""
    fs = spec.footage
    if fs is None:
        raise spec.error(None, "[footage]", "missing: render and fit need footage (frames, fps)")
    frames = _load_images(fs.frames)
    shapes = {f.shape[:2] for f in frames}
    if len(shapes) != 1:
        raise spec.error("footage", "frames", f"frames differ in size: {sorted(shapes)} (height, width)")
    H, W = frames[0].shape[:2]
    cam = spec.camera
    if (cam.width, cam.height) != (W, H):
        raise spec.error("camera", "width / height", f"inconsistent camera: {cam.width}x{cam.height} (width x "
                         f"height) but the footage frames are {W}x{H}")
    masks = None
    if fs.masks is not None:
        ms = _load_images(fs.masks)
        mshape = {m.shape[:2] for m in ms}
        if mshape != {(H, W)}:
            raise spec.error("footage", "masks", f"mask size {sorted(mshape)} (height, width) differs from the "
                             f"frames' {(H, W)}")
        masks = np.stack([_to_float_grey(m) for m in ms])
    rgb = np.stack([_to_float_rgb(f) for f in frames])
    res = resolution or spec.fit.resolution or W
    if W % res or H % (W // res):
        raise spec.error("fit", "resolution", f"expected a width that divides the footage's {W}x{H} pixels "
                         f"(e.g. {W}, {W // 2}, {W // 4}), got {res}")
    f = W // res
    background = None
    if fs.background == "estimate":
        background = _estimate_background(rgb, masks)
    elif fs.background is not None:
        plate = _load_images([fs.background])[0]
        if plate.shape[:2] != (H, W):
            raise spec.error("footage", "background", f"the plate is {plate.shape[1]}x{plate.shape[0]}, the frames "
                             f"{W}x{H} (width x height)")
        background = _to_float_rgb(plate)
    return FootageData(frames=_downsample(rgb, f, True), masks=None if masks is None else _downsample(masks, f, False),
                       background=None if background is None else _downsample(background[None], f, True)[0],
                       fps=fs.fps,
                       start_time=fs.start_time, factor=f, full_size=(W, H))


# ---------------------------------------------------------------------------
# camera

def _camera(spec: SceneSpec, factor: int):
    """The renderer's Camera in the y-up world at 1/factor of the footage resolution."""
    from .renderers import Camera

    c, M = spec.camera, spec.axes
    W, H = c.width // factor, c.height // factor
    if c.kind == "lookat":
        up = c.up if c.up is not None else (np.array([0.0, 1.0, 0.0]) if spec.up == "y" else np.array([0.0, 0.0, 1.0]))
        try:
            return Camera(eye=M @ c.eye, target=M @ c.target, up=M @ up, fov=c.fov, width=W, height=H,
                          near=c.near, far=c.far)
        except (ValueError, TypeError) as exc:
            raise spec.error("camera", "up", f"inconsistent camera: {exc}") from None
    K = c.K.copy()
    K[0, 0] /= factor
    K[1, 1] /= factor
    K[0, 2] = (K[0, 2] + 0.5) / factor - 0.5         # pixel centres at integers (OpenCV)
    K[1, 2] = (K[1, 2] + 0.5) / factor - 0.5
    R = c.R @ M.T                                    # x_cam = R x_file + t = R M^T x_world + t
    if hasattr(Camera, "from_opencv"):
        try:
            return Camera.from_opencv(K, R, c.t, W, H, near=c.near, far=c.far)
        except (ValueError, TypeError) as exc:
            raise spec.error("camera", "K / R / t", f"inconsistent camera: {exc}") from None
    # Before Camera.from_opencv: a square-pixel, centred K is a look-at camera (DESIGN.md section 7).
    if abs(K[0, 0] - K[1, 1]) > 1e-9 * K[0, 0] or abs(K[0, 2] - (W / 2 - 0.5)) > 1e-6 or \
            abs(K[1, 2] - (H / 2 - 0.5)) > 1e-6:
        raise spec.error("camera", "K", "this tigradsim has no Camera.from_opencv: only square pixels (fx = fy) "
                         "and a centred principal point (cx = W/2 - 0.5, cy = H/2 - 0.5) are supported")
    eye = -R.T @ c.t
    fwd, up = R.T @ np.array([0.0, 0.0, 1.0]), -R.T @ np.array([0.0, 1.0, 0.0])
    fov = 2.0 * math.degrees(math.atan((min(W, H) / 2.0) / K[0, 0]))
    return Camera(eye=eye, target=eye + fwd, up=up, fov=fov, width=W, height=H, near=c.near, far=c.far)


# ---------------------------------------------------------------------------
# unknowns as Params

class EntryParam(Param):
    """One scalar unknown x written to `entries` [(field, index)] as x * scale() (a tie:
    scale() is another quantity, e.g. a body's mass for a stiffness per unit mass).
    Its gradient sums the entries' gradients (the chain rule of a shared value), and a
    Param whose value scales other Params' entries (`scales`: ties to this mass) adds
    their share.  index None: a 0-D field."""

    def __init__(self, name, entries, lower=None, upper=None, log_space=False, scale=None):
        self.entries = list(entries)
        self.scale = scale or (lambda: 1.0)
        self.scales = []
        f, i = self.entries[0]
        self._x = float(f[i]) / self.scale()
        super().__init__(f, name, lower, upper, log_space)

    def __post_init__(self):
        if self.log_space and not self._x > 0:
            raise ValueError(f"Param {self.name!r}: log_space needs a value > 0, got {self._x}")

    def value(self):
        return np.array([self._x])

    def write(self, value):
        self._x = float(np.ravel(value)[0])
        s = self.scale()
        for f, i in self.entries:
            f[i] = self._x * s
        for tied in self.scales:
            tied.write(tied.value())

    def internal_grad(self):
        g = sum(float(f.grad[i]) for f, i in self.entries) * self.scale()
        for tied in self.scales:
            g += sum(float(f.grad[i]) for f, i in tied.entries) * tied._x
        g = np.array([g])
        return g * self._x if self.log_space else g


def _entry_param(name, entries, lower, upper, log_space, scale=None):
    """A scalar unknown written into several field entries (swap point for the library's
    tied / column Params)."""
    return EntryParam(name, entries, lower, upper, log_space, scale)


# ---------------------------------------------------------------------------
# the scene

class Scene:
    """Model, simulator, renderer, unknowns and `VideoFit` of a scene file.

    Attributes: spec, footage (FootageData), model, sim, renderer, camera, params (one
    Param per unknown, in file order), fit (VideoFit), frame_ids (rendered frame of each
    footage frame), dt, steps, every, handles (object name -> body index or SoftMesh).
    """

    def __init__(self, spec: SceneSpec, footage: FootageData, requires_grad=True):
        import tigradsim as tgs
        from .sysid import VideoFit

        self.spec, self.footage = spec, footage
        self.M = spec.axes
        K = footage.frames.shape[0]
        self.dt, self.steps, self.every, self.frame_ids = self._schedule(K)
        b = tgs.SceneBuilder(gravity=self.M @ spec.gravity)
        if spec.ground is not None:
            self._add_ground(b)
        self.handles = {}
        for name, obj in spec.objects.items():
            self.handles[name] = self._add_object(b, obj)
        for fs in spec.forces:
            self._add_force(b, fs)
        self.kind = next(iter(spec.objects.values())).kind
        self.model = b.finalize(requires_grad=requires_grad)
        self.sim = tgs.Simulator(self.model, dt=self.dt, steps=self.steps, checkpoint_every=spec.checkpoint_every)
        self.camera = _camera(spec, footage.factor)
        self.renderer = self._make_renderer()
        self.params = self._make_params()
        self.fit = VideoFit(self.sim, self.renderer, self.params)
        self.loss_fn = None

    # -- time -------------------------------------------------------------------
    def _schedule(self, K):
        spec, fps = self.spec, self.footage.fps
        if spec.dt is not None:
            every = int(round(1.0 / (fps * spec.dt)))
            dt = spec.dt
        else:
            every = spec.substeps
            dt = 1.0 / (fps * every)
        j0f = self.footage.start_time * fps
        if abs(j0f - round(j0f)) > 1e-6:
            raise spec.error("footage", "start_time", f"start_time x fps = {j0f:.6g}: expected a whole number of "
                             "frame intervals (rendered frames lie at multiples of 1/fps from t = 0)")
        j0 = int(round(j0f))
        last = j0 + K - 1
        duration = spec.duration if spec.duration is not None else last / fps
        steps = int(round(duration / dt))
        if steps < last * every or steps < 1:
            raise spec.error("simulation", "duration", f"{duration:g} s ends before the last footage frame "
                             f"(t = {last / fps:g} s)")
        return dt, steps, every, np.arange(j0, j0 + K, dtype=np.int64)

    # -- building ---------------------------------------------------------------
    def _add_ground(self, b):
        g = dict(self.spec.ground)
        law = g.pop("law", {})
        if law and "damping" not in inspect.signature(b.add_ground).parameters:
            raise self.spec.error("ground", ", ".join(law), "this tigradsim has no contact law options")
        b.add_ground(**g, **law)

    def _add_object(self, b, obj):
        M, spec = self.M, self.spec
        R = _quat_matrix(obj.rotation)
        try:
            if obj.kind == "rigid":
                q = np.concatenate([M @ obj.rotation[:3], obj.rotation[3:]])       # M R M^T
                return b.add_rigid_body(obj.vertices @ M.T, obj.faces, mass=obj.mass, density=obj.density,
                                        position=M @ obj.position, rotation=q, velocity=M @ obj.velocity,
                                        angular_velocity=M @ obj.angular_velocity,
                                        contact_radius=obj.contact_radius, **obj.contact)
            x = obj.position + obj.vertices @ R.T                 # file axes, world positions
            com = _tet_centroid(x, obj.tets)
            vel = obj.velocity + np.cross(obj.angular_velocity, x - com)
            return b.add_soft_mesh((x @ M.T, obj.tets), material=obj.material, params=obj.params,
                                   density=obj.density, damping=obj.damping, velocity=vel @ M.T,
                                   radius=obj.contact_radius)
        except (ValueError, TypeError, IndexError, KeyError) as exc:
            raise spec.error(f"objects.{obj.name}", obj.source or "mesh", str(exc)) from None

    def _add_force(self, b, fs):
        from .rigid import add_body_force
        M = self.M
        try:
            add_body_force(b, self.handles[fs.object], force=M @ fs.force,
                           point=None if fs.point is None else M @ (fs.point * 1.0), torque=M @ fs.torque,
                           start=fs.start, end=fs.end)
        except (ValueError, TypeError, IndexError) as exc:
            raise self.spec.error(f"forces.{fs.index}", "force", str(exc)) from None

    def _make_renderer(self):
        """Silhouette renderer for mask supervision; coverage-blended colour for RGB."""
        from .renderers import SoftRasterizer
        from .sysid import render_particles, render_surface

        spec, fit = self.spec, self.spec.fit
        if self.kind == "rigid":
            from .rigid import RigidSurface
            self.surface = RigidSurface(self.sim, every=self.every)
            faces, nverts, vids = self.surface.faces, self.surface.vertex_count, None
            colors = np.concatenate([np.tile(o.color, (len(o.vertices), 1)) for o in spec.objects.values()])
        else:
            self.surface = None
            allf = np.concatenate([h.faces for h in self.handles.values()])
            vids = np.unique(allf)
            faces, nverts = np.searchsorted(vids, allf).astype(np.int32), len(vids)
            owner = np.zeros(self.model.particle_count, dtype=np.int64)
            for k, h in enumerate(self.handles.values()):
                owner[h.particle_start:h.particle_start + h.particle_count] = k
            colors = np.array([o.color for o in spec.objects.values()])[owner[vids]]
        kwargs = dict(frames=self.sim.frame_count(self.every), sigma=fit.sigma, gamma=fit.gamma)
        if vids is not None:
            kwargs["vertex_ids"] = vids
        if fit.supervision == "mask":
            kwargs["shading"] = "silhouette"
        else:
            if "blend" not in inspect.signature(SoftRasterizer.__init__).parameters:
                raise spec.error("fit", "supervision", f"{fit.supervision!r} needs the coverage-blended colour "
                                 "renderer (SoftRasterizer(blend=\"coverage\")), which this tigradsim lacks; "
                                 "use supervision = \"mask\"")
            kwargs.update(shading="lambert", blend="coverage", vertex_colors=colors)
        ren = SoftRasterizer(self.camera, faces, nverts, **kwargs)
        if fit.supervision != "mask" and self.footage.background is not None:
            ren.set_background(self.footage.background)
        if self.kind == "rigid":
            render_surface(self.sim, ren, self.surface, self.every)
        else:
            render_particles(self.sim, ren, self.every)
        return ren

    def _make_params(self):
        spec, m = self.spec, self.model
        params, by_target = [], {}
        rigid_names = [n for n, o in spec.objects.items() if o.kind == "rigid"]
        for u in spec.unknowns:
            entries, scale = [], None
            if u.object == "ground":
                entries.append((getattr(m, f"ground_{u.param}"), None))
                for n in rigid_names:
                    if u.param not in spec.objects[n].contact:
                        entries.append((getattr(m, f"body_{u.param}"), self.handles[n]))
            elif spec.objects[u.object].kind == "rigid":
                b = self.handles[u.object]
                if u.tie is not None:
                    entries.append((getattr(m, f"body_{u.tie}"), b))
                    scale = (lambda b=b: float(m.body_mass[b]))
                else:
                    entries.append((getattr(m, f"body_{u.param}"), b))
            else:
                from .fem import _column
                h = self.handles[u.object]
                col = _column(m, h, u.param)
                entries += [(m.tet_params, (r, col)) for r in h.param_rows]
            if scale is not None:                   # the file's initial value is the tie's
                f, i = entries[0]
                f[i] = u.init * scale()
            else:
                for f, i in entries:
                    f[i] = u.init
            p = _entry_param(u.target, entries, u.lower, u.upper, u.log, scale)
            params.append(p)
            by_target[u.target] = p
        for u in spec.unknowns:                     # a tie follows its body's mass when the mass is fitted too
            mass = by_target.get(f"{u.object}.mass")
            if u.tie is not None and mass is not None:
                mass.scales.append(by_target[u.target])
        return params

    # -- running ---------------------------------------------------------------
    def set_values(self, values):
        """Write unknowns (target -> value) into the model."""
        for p in self.params:
            if p.name in values:
                p.write([values[p.name]])

    def values(self) -> dict:
        return {p.name: float(p.value()[0]) for p in self.params}

    def render(self) -> np.ndarray:
        """Run the rollout at the current values; the rendered frames at the footage's times,
        (K, H, W, C) (C = 1 silhouette, or RGBA)."""
        return self.fit.render()[self.frame_ids]

    def target(self) -> np.ndarray:
        """What the image loss compares with: masks (K, H, W, 1) or RGB(A) frames."""
        fo = self.footage
        sup = self.spec.fit.supervision
        if sup == "mask":
            return fo.masks[..., None]
        if sup == "rgb":
            return fo.frames
        return np.concatenate([fo.frames, fo.masks[..., None]], axis=-1)

    def make_loss(self):
        """The image loss (BlurredImageMSE over the footage frames' rendered frames) on the VideoFit."""
        from .renderers import BlurredImageMSE, ImageMSE

        blur = self.spec.fit.blur
        target = self.target()
        channels = list(range(target.shape[-1])) if target.shape[-1] > 1 else None
        if all(s == 0 for s in blur):
            loss = ImageMSE(self.renderer.image, target, frames=self.frame_ids, channels=channels)
        else:
            loss = BlurredImageMSE(self.renderer.image, target, frames=self.frame_ids, channels=channels,
                                   sigmas=blur)
        self.fit.set_image_loss(loss)
        self.loss_fn = loss
        return loss

    def loss_value(self) -> float:
        if self.loss_fn is None:
            self.make_loss()
        return self.fit.loss_value()


# ---------------------------------------------------------------------------
# fitting (one place per library piece)

def multi_start(scene: Scene, starts: int, seed: int, printer=print) -> dict:
    """Scores the file's initial values and starts - 1 draws (log-uniform within the bounds,
    or within a factor 3 of the initial value where a bound is missing) by the loss; writes
    and returns the best."""
    rng = np.random.default_rng(seed)
    init = scene.values()
    candidates = [init]
    for _ in range(starts - 1):
        c = {}
        for u in scene.spec.unknowns:
            lo = u.lower if u.lower is not None else (u.init / 3 if u.log else u.init - 3 * abs(u.init) - 1)
            hi = u.upper if u.upper is not None else (u.init * 3 if u.log else u.init + 3 * abs(u.init) + 1)
            c[u.target] = float(np.exp(rng.uniform(np.log(lo), np.log(hi)))) if u.log else float(rng.uniform(lo, hi))
        candidates.append(c)
    scores = []
    for k, c in enumerate(candidates):
        scene.set_values(c)
        try:
            scores.append(scene.loss_value())
        except Exception as exc:                       # a start that blows up scores +inf
            from .errors import SimulationError
            if not isinstance(exc, SimulationError):
                raise
            scores.append(math.inf)
        printer(f"start {k}: loss {scores[-1]:.6e}  " + "  ".join(f"{n}={v:.5g}" for n, v in c.items()))
    best = int(np.argmin(scores))
    scene.set_values(candidates[best])
    return {"best": best, "losses": scores, "values": candidates}


def run_fit(scene: Scene, iterations: int, printer=print, log_every=1):
    """Gradient fit of the unknowns (the file's optimizer), then `refine` Levenberg-Marquardt
    iterations; returns the History."""
    from .optim import Adam, BFGS

    f = scene.spec.fit
    target = scene.target()
    if scene.loss_fn is None:
        scene.make_loss()
    if f.optimizer == "adam":
        plan = [("adam", iterations)]
    elif f.optimizer == "bfgs":
        plan = [("bfgs", iterations)]
    else:
        polish = f.polish if f.polish is not None else iterations // 2
        polish = min(polish, iterations)
        plan = [("adam", iterations - polish), ("bfgs", polish)]
    plan = [(name, n) for name, n in plan if n > 0]
    for k, (name, n) in enumerate(plan):
        h = scene.fit.history
        if k > 0 and h.loss:        # the next stage re-evaluates the last point: keep it once
            h.loss.pop(), h.seconds.pop()
            for values in h.params.values():
                values.pop()
        opt = Adam(scene.params, lr=f.lr, lr_decay=f.lr_decay) if name == "adam" else BFGS(scene.params, lr=f.polish_lr)
        printer(f"{name}: {n} iterations")
        scene.fit.fit(target, iters=n, optimizer=opt, log_every=log_every, printer=printer)
    if f.refine > 0:
        scene.fit.refine(target, iters=f.refine, printer=printer)
    return scene.fit.history


def uncertainty(scene: Scene, fd_step=1e-4) -> dict:
    """Gauss-Newton uncertainty at the current values (DESIGN.md section 7): J = d residual /
    d internal coordinate (log where the unknown is log-space) by central differences,
    cov = s^2 (J^T J)^-1 with s^2 = |r|^2 / (N - p); std and an approximate 95 % interval per
    unknown; near-null directions of J^T J (relative eigenvalue < 1e-8) reported as
    combinations the clip does not determine."""
    from .optim import _internal_vector, _write_internal_vector

    params = scene.params
    x0 = _internal_vector(params)
    r0 = np.ravel(scene.fit.residuals())
    J = np.empty((r0.size, x0.size))
    for i in range(x0.size):
        cols = []
        for sgn in (1.0, -1.0):
            x = x0.copy()
            x[i] += sgn * fd_step
            _write_internal_vector(params, x)
            cols.append(np.ravel(scene.fit.residuals()))
        J[:, i] = (cols[0] - cols[1]) / (2 * fd_step)
    _write_internal_vector(params, x0)
    n, p = r0.size, x0.size
    s2 = float(r0 @ r0) / max(n - p, 1)
    A = J.T @ J
    evals, evecs = np.linalg.eigh(A)
    top = float(evals.max()) if evals.size else 0.0
    null = [k for k in range(p) if not evals[k] > 1e-8 * top] if top > 0 else list(range(p))
    cov = s2 * np.linalg.pinv(A, rcond=1e-8, hermitian=True)
    std_int = np.sqrt(np.maximum(np.diag(cov), 0.0))
    out = {"method": "Gauss-Newton (finite-difference Jacobian of the pixel residuals)", "residual_variance": s2,
           "residuals": n, "parameters": {}, "undetermined": []}
    for k, (prm, u) in enumerate(zip(params, scene.spec.unknowns)):
        v = float(prm.value()[0])
        undet = any(abs(evecs[k, j]) > 0.1 for j in null)
        if u.log:
            lo, hi, std = v * math.exp(-1.96 * std_int[k]), v * math.exp(1.96 * std_int[k]), v * std_int[k]
        else:
            lo, hi, std = v - 1.96 * std_int[k], v + 1.96 * std_int[k], std_int[k]
        out["parameters"][prm.name] = {"estimate": v, "std": None if undet else std,
                                       "ci95": None if undet else [lo, hi], "determined": not undet}
    for j in null:
        combo = {params[k].name: round(float(evecs[k, j]), 4) for k in range(p) if abs(evecs[k, j]) > 0.1}
        out["undetermined"].append({"combination": combo, "space": "log" if all(u.log for u in scene.spec.unknowns)
                                    else "internal", "relative_eigenvalue": float(evals[j] / top) if top else 0.0})
    return out


# ---------------------------------------------------------------------------
# pictures

def _edges(mask):
    """Boolean (K, H, W): pixels of `mask` that have a 4-neighbour outside it."""
    m = np.pad(mask, ((0, 0), (1, 1), (1, 1)), mode="edge")
    inner = m[:, 1:-1, 1:-1]
    nb = m[:, :-2, 1:-1] & m[:, 2:, 1:-1] & m[:, 1:-1, :-2] & m[:, 1:-1, 2:]
    return inner & ~nb


def outline_frames(frames, alpha, masks=None, upscale=1):
    """Footage frames (K, H, W, 3) in [0, 1] with the render's outline (alpha > 0.5) in red
    and, when given, the masks' outline in green; uint8 (K, H u, W u, 3), u = upscale."""
    f = np.asarray(frames, dtype=np.float64)
    a = np.asarray(alpha, dtype=np.float64)
    if upscale > 1:
        f = f.repeat(upscale, 1).repeat(upscale, 2)
        a = a.repeat(upscale, 1).repeat(upscale, 2)
        masks = None if masks is None else np.asarray(masks).repeat(upscale, 1).repeat(upscale, 2)
    out = f.copy()
    if masks is not None:
        out[_edges(np.asarray(masks) > 0.5)] = (0.1, 0.9, 0.1)
    out[_edges(a > 0.5)] = (1.0, 0.1, 0.1)
    return (np.clip(out, 0, 1) * 255 + 0.5).astype(np.uint8)


def silhouette_iou(alpha, masks) -> np.ndarray:
    """Per-frame IoU of alpha > 0.5 and masks > 0.5 (K,)."""
    a, m = np.asarray(alpha) > 0.5, np.asarray(masks) > 0.5
    inter = (a & m).sum(axis=(1, 2))
    union = (a | m).sum(axis=(1, 2))
    return np.where(union > 0, inter / np.maximum(union, 1), 1.0)


# ---------------------------------------------------------------------------
# small helpers

def _quat_matrix(q):
    from .rigid import quat_to_matrix_np
    return quat_to_matrix_np(q)


def _tet_centroid(x, tets):
    t = np.asarray(tets)
    a, b, c, d = (x[t[:, k]] for k in range(4))
    vol = np.abs(np.einsum("ij,ij->i", b - a, np.cross(c - a, d - a))) / 6.0
    return (vol[:, None] * (a + b + c + d) / 4.0).sum(0) / vol.sum()

