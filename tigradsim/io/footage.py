"""Footage as a fitting target: frames with times, optional masks, a background
plate, and the mapping from footage times to simulation steps.

    clip = tgs.load_footage("clip/", pattern="rgb_%04d.png", masks="clip/",
                            mask_pattern="mask_%04d.png", fps=30, start_time=0.0)
    plate = clip.estimate_background()            # median of the pixels outside the masks
    frames = render_at_times(sim, renderer, clip.times, source="rigid")
    fit = tgs.VideoFit(sim, renderer, params); fit.fit(clip)

Time matching.  Footage frame k shows the world at `times[k]` [s] (`start_time +
k / fps`, with t = 0 the simulation's initial state), which in general falls
between two steps n dt <= t < (n + 1) dt.  `frame_steps` gives n and the fraction
a = t / dt - n; `TimedVertices` then renders, per frame,

* mode="interpolate" (default): the vertex positions (1 - a) x_n + a x_{n+1}.
  The error against the simulated trajectory x(t) is at most dt^2 / 8 max|x''|
  (linear interpolation of a C2 curve; the time error is zero);
* mode="nearest": x at the nearest step round(t / dt): a time error of at most
  dt / 2, i.e. a position error up to |v| dt / 2.

Interpolation works under checkpointing: the observer at step n stashes x_n in
its own per-frame field and the observer at step n + 1 (possibly in the next
segment) blends it with x_{n+1}; both are plain assignments, so the observer is
idempotent when a segment is recomputed in the backward pass.

Choosing dt: either any dt (interpolation makes the frame times exact), or a dt
that divides the frame period, `dt_for_fps(fps, max_dt)` (the largest such dt
<= max_dt), so that every frame lands on a step (a = 0, no blending).
"""

import math
import warnings

import numpy as np
import taichi as ti

from ..core.errors import FootageError
from ..physics.rigid import body_position, body_rotation, quat_rotate
from .mask_checks import check_masks as _check_masks

MODES = ("interpolate", "nearest")
# times within this fraction of a step of a step boundary are taken to lie on it (float round-off)
_STEP_TOL = 1e-9


# ----------------------------------------------------------------------- reading
def _as_frames(src, name, pattern):
    """float64 (K, H, W, C) in [0, 1] from an array (uint8 0-255, uint16 0-65535, other
    integers 0-255, bool, float 0-1) or a path (read at the files' own depth, `load_frames`).
    Anything else raises FootageError starting with `name`."""
    if isinstance(src, (str, bytes)) or hasattr(src, "__fspath__"):
        from .video import load_frames

        try:
            arr = load_frames(src, pattern=pattern)
        except FootageError as exc:
            raise FootageError(f"{name}: {exc}") from None
    else:
        if pattern is not None:
            raise FootageError(f"{name}: pattern applies to a folder path, but {name} is an array")
        try:
            arr = np.asarray(src)
        except (TypeError, ValueError) as exc:
            raise FootageError(f"{name}: expected a (K, H, W[, C]) array or a path, got {type(src).__name__} "
                               f"({exc})") from None
    if arr.ndim == 3:
        arr = arr[..., None]
    if arr.ndim != 4 or arr.shape[-1] not in (1, 3, 4) or min(arr.shape[:3]) == 0:
        raise FootageError(f"{name}: expected frames of shape (K, H, W) or (K, H, W, C) with C in 1, 3, 4 "
                           f"and K, H, W > 0, got {arr.shape}")
    if arr.dtype == bool:
        return arr.astype(np.float64)
    if arr.dtype == np.uint16:                  # 16-bit data (e.g. imageio's read of a 16-bit PNG)
        return arr.astype(np.float64) / 65535.0
    if np.issubdtype(arr.dtype, np.integer):
        if arr.min() < 0 or arr.max() > 255:
            raise FootageError(f"{name}: integer frames must lie in 0-255 (uint8) or be uint16 (0-65535), got "
                               f"{arr.dtype} in [{arr.min()}, {arr.max()}]")
        return arr.astype(np.float64) / 255.0
    if np.issubdtype(arr.dtype, np.floating):
        arr = arr.astype(np.float64)
        if not np.all(np.isfinite(arr)):
            k = int(np.argwhere(~np.isfinite(arr))[0][0])
            raise FootageError(f"{name}: contains NaN or inf (first in frame {k})")
        if arr.max() > 1.0 + 1e-6:
            raise FootageError(f"{name}: float frames must lie in [0, 1], got a maximum of {arr.max():g}; this "
                               f"looks like 0-255; divide by 255 (or pass uint8)")
        if arr.min() < -1e-6:
            raise FootageError(f"{name}: float frames must lie in [0, 1], got a minimum of {arr.min():g}")
        return np.clip(arr, 0.0, 1.0)
    raise FootageError(f"{name}: expected a uint8, uint16, bool or float array or a path, got dtype {arr.dtype}")


def _mask_channel(arr):
    """(K, H, W, C) -> (K, H, W): grey as is; RGB its mean; RGBA its alpha where the alpha
    varies (a cut-out), else the mean of RGB (an opaque picture of a mask)."""
    C = arr.shape[-1]
    if C == 1:
        return arr[..., 0]
    if C == 4 and np.ptp(arr[..., 3]) > 0:
        return arr[..., 3]
    return arr[..., :3].mean(axis=-1)


class Footage:
    """A clip to fit: frames, their times, optional masks and a background plate.

    Args:
        frames: (K, H, W[, C]) array (uint8 0-255, uint16 0-65535, or float in [0, 1]; C = 1
            grey, 3 RGB, 4 RGBA) or a path: a folder of PNG / TIFF / JPEG files (with
            `pattern`), a GIF, an MP4 (needs the `video` extra, imageio-ffmpeg), or
            "folder/rgb_%04d.png".
        fps: frames per second (> 0); None: read from a GIF or movie file (else an error).
        start_time: time [s] of frame 0, relative to the simulation's t = 0.
        masks: optional silhouettes, same kinds as `frames` (binary or soft; grey, RGB or
            RGBA -> one channel in [0, 1]), one per frame, same size.  Without masks, the
            alpha of RGBA frames (when it varies) serves as the masks.
        pattern, mask_pattern: file patterns (glob "frame_*.png" or printf "rgb_%04d.png")
            when `frames` / `masks` are folders, so one folder can hold both.
        times: explicit frame times [s] (K,), strictly increasing, instead of
            start_time + k / fps (what `subset` produces).
        check_masks: check the masks before any fit (`tigradsim.io.mask_checks.check_masks`):
            every mask empty (or full) is a FootageError; an empty mask between frames that
            have one, or masks that look inverted, a FootageWarning.  False: no check (for
            footage derived from checked footage).
    Paths are read at the files' own depth (16-bit PNG and TIFF exact); a file that cannot
    be read right, and frames or masks of the wrong shape, type or range, raise
    FootageError (a ValueError) naming the file or the argument.
    Attributes:
        frames: float64 (K, H, W, C) in [0, 1], C in (1, 3).
        masks: float64 (K, H, W) in [0, 1], or None.
        times: (K,) [s].  fps, start_time, height, width, channels.
        background: (H, W, C) plate or None (`estimate_background`, `set_background`).
    """

    def __init__(self, frames, fps=None, start_time=0.0, masks=None, pattern=None, mask_pattern=None, times=None,
                 check_masks=True):
        if fps is None and times is None:
            from .video import video_fps

            is_path = isinstance(frames, (str, bytes)) or hasattr(frames, "__fspath__")
            fps = video_fps(frames) if is_path else None
            if fps is None:
                raise ValueError("fps: needed (frames per second of the footage); only a GIF or a movie file "
                                 "stores its own frame rate")
        elif fps is None:
            steps = np.diff(np.asarray(times, dtype=np.float64))
            fps = 1.0 / float(np.median(steps)) if steps.size and np.median(steps) > 0 else 1.0
        try:
            fps = float(fps)
        except (TypeError, ValueError):
            raise TypeError(f"fps: expected a number of frames per second, got {fps!r}") from None
        if not (math.isfinite(fps) and fps > 0):
            raise ValueError(f"fps: must be a finite number > 0 (frames per second), got {fps!r}")
        try:
            start_time = float(start_time)
        except (TypeError, ValueError):
            raise TypeError(f"start_time: expected a time in seconds, got {start_time!r}") from None
        if not math.isfinite(start_time):
            raise ValueError(f"start_time: must be finite (seconds), got {start_time!r}")
        arr = _as_frames(frames, "frames", pattern)
        alpha = None
        if arr.shape[-1] == 4:
            alpha = arr[..., 3] if np.ptp(arr[..., 3]) > 0 else None
            arr = arr[..., :3]
        self.frames = np.ascontiguousarray(arr)
        K, H, W, C = self.frames.shape
        if masks is not None:
            m = _mask_channel(_as_frames(masks, "masks", mask_pattern))
            if m.shape[0] != K:
                raise FootageError(f"masks: {m.shape[0]} mask frames for {K} frames (one mask per frame is needed)")
            if m.shape[1:] != (H, W):
                raise FootageError(f"masks: mask frames are {m.shape[1]}x{m.shape[2]} (HxW) but the frames are "
                                   f"{H}x{W}")
            self.masks = np.ascontiguousarray(m)
        else:
            self.masks = alpha
        if check_masks and self.masks is not None:
            _check_masks(self.masks, name="masks" if masks is not None else "masks (the frames' alpha)")
        self.fps = fps
        if times is None:
            self.times = start_time + np.arange(K) / fps
        else:
            t = np.asarray(times, dtype=np.float64)
            if t.shape != (K,) or not np.all(np.isfinite(t)) or np.any(np.diff(t) <= 0):
                raise ValueError(f"times: expected {K} finite, strictly increasing times [s], got {times!r}")
            self.times = t
        self.start_time = float(self.times[0])
        self.height, self.width, self.channels = H, W, C
        self.background = None
        self.unseen_fraction = None

    def __len__(self):
        return len(self.times)

    def __getitem__(self, index):
        """`footage[2:10]`, `footage[::2]`, `footage[[0, 3, 5]]`: a `subset`."""
        return self.subset(np.arange(len(self))[index])

    def __repr__(self):
        return (f"Footage({len(self)} frames {self.height}x{self.width}x{self.channels}, fps {self.fps:g}, "
                f"t = {self.times[0]:g}..{self.times[-1]:g} s, masks: {self.masks is not None})")

    def subset(self, frames) -> "Footage":
        """The frames `frames` (indices, in increasing order) with their times, masks and
        background: e.g. the first half of the clip for coarse-to-fine fitting in time."""
        idx = np.atleast_1d(np.asarray(frames))
        if idx.ndim != 1 or idx.size == 0 or not np.issubdtype(idx.dtype, np.integer):
            raise ValueError(f"frames: expected a non-empty list of frame indices, got {frames!r}")
        if idx.min() < -len(self) or idx.max() >= len(self):
            raise ValueError(f"frames: indices must lie in [0, {len(self) - 1}], got {idx.tolist()}")
        idx = idx % len(self)
        if np.any(np.diff(idx) <= 0):
            raise ValueError(f"frames: indices must be strictly increasing (frames in time order), got {idx.tolist()}")
        out = Footage(self.frames[idx], self.fps, masks=None if self.masks is None else self.masks[idx],
                      times=self.times[idx], check_masks=False)
        out.background, out.unseen_fraction = self.background, self.unseen_fraction
        return out

    def set_background(self, plate):
        """Use `plate` ((H, W, C), or (H, W) grey, uint8 or float in [0, 1]) as the background."""
        arr = _as_frames(np.asarray(plate)[None], "plate", None)[0]
        if arr.shape[:2] != (self.height, self.width):
            raise ValueError(f"plate: {arr.shape[0]}x{arr.shape[1]} (HxW) but the footage is "
                             f"{self.height}x{self.width}")
        if arr.shape[-1] == 1 and self.channels == 3:
            arr = np.repeat(arr, 3, axis=-1)
        if arr.shape[-1] != self.channels:
            raise ValueError(f"plate: {arr.shape[-1]} channels but the footage has {self.channels}")
        self.background = arr
        return arr

    def estimate_background(self, threshold=0.02, dilate=2, return_fraction=False):
        """A background plate (H, W, C): per pixel, the median over the frames in which
        the pixel is background, i.e. outside the masks (mask > `threshold`, grown by
        `dilate` pixels so soft edges and mask errors stay out).  Without masks: the
        median over all frames (right where the object covers a pixel in less than half
        of the frames).  Pixels that are never background are filled from their
        neighbours (repeated averaging of known 4-neighbours); their fraction is kept in
        `unseen_fraction` (and returned with `return_fraction=True`) and a warning says
        so when it is above 1%.  The plate is stored as `self.background`."""
        if not (0 <= float(threshold) < 1):
            raise ValueError(f"threshold: expected a mask value in [0, 1), got {threshold!r}")
        if not (isinstance(dilate, (int, np.integer)) and dilate >= 0):
            raise ValueError(f"dilate: expected an integer number of pixels >= 0, got {dilate!r}")
        if self.masks is None:
            bg = np.ones(self.frames.shape[:3], bool)
        else:
            obj = self.masks > float(threshold)
            for _ in range(int(dilate)):
                grown = obj.copy()
                grown[:, 1:] |= obj[:, :-1]
                grown[:, :-1] |= obj[:, 1:]
                grown[:, :, 1:] |= obj[:, :, :-1]
                grown[:, :, :-1] |= obj[:, :, 1:]
                obj = grown
            bg = ~obj
        seen = bg.any(axis=0)
        if not seen.any():
            raise ValueError("estimate_background: no pixel is outside the masks in any frame; pass a plate with "
                             "set_background(plate)")
        data = np.where(bg[..., None], self.frames, np.nan)
        plate = np.zeros(self.frames.shape[1:])
        plate[seen] = np.nanmedian(data[:, seen], axis=0)
        plate = _fill_unseen(plate, seen)
        self.unseen_fraction = float(1.0 - seen.mean())
        if self.unseen_fraction > 0.01:
            warnings.warn(f"estimate_background: {self.unseen_fraction:.1%} of the pixels are never background; "
                          f"they were filled from their neighbours", stacklevel=2)
        self.background = plate
        return (plate, self.unseen_fraction) if return_fraction else plate


def _fill_unseen(plate, seen):
    """Fill pixels where `seen` is False by repeated averaging of known 4-neighbours."""
    plate, known = plate.copy(), seen.copy()
    H, W = known.shape
    while not known.all():
        total = np.zeros_like(plate)
        count = np.zeros((H, W))
        for sl_dst, sl_src in (((slice(1, None), slice(None)), (slice(None, -1), slice(None))),
                               ((slice(None, -1), slice(None)), (slice(1, None), slice(None))),
                               ((slice(None), slice(1, None)), (slice(None), slice(None, -1))),
                               ((slice(None), slice(None, -1)), (slice(None), slice(1, None)))):
            k = known[sl_src]
            total[sl_dst] += plate[sl_src] * k[..., None]
            count[sl_dst] += k
        new = (~known) & (count > 0)
        plate[new] = total[new] / count[new][:, None]
        known = known | new
    return plate


def load_footage(frames, fps=None, start_time=0.0, masks=None, pattern=None, mask_pattern=None,
                 check_masks=True) -> Footage:
    """`Footage(frames, fps, start_time, masks, pattern, mask_pattern, check_masks=check_masks)` (see `Footage`)."""
    return Footage(frames, fps, start_time=start_time, masks=masks, pattern=pattern, mask_pattern=mask_pattern,
                   check_masks=check_masks)


# ----------------------------------------------------------------------- time matching
def dt_for_fps(fps, max_dt) -> float:
    """The largest time step dt <= max_dt [s] that divides the frame period 1 / fps, so
    that every frame falls on a step (steps per frame: round(1 / (fps dt)))."""
    fps, max_dt = float(fps), float(max_dt)
    if not (math.isfinite(fps) and fps > 0):
        raise ValueError(f"fps: must be a finite number > 0, got {fps!r}")
    if not (math.isfinite(max_dt) and max_dt > 0):
        raise ValueError(f"max_dt: must be a finite number > 0 (seconds), got {max_dt!r}")
    n = max(1, math.ceil((1.0 / fps) / max_dt * (1 - 1e-12)))
    return 1.0 / (fps * n)


def frame_steps(times, dt, mode="interpolate", max_step=None):
    """Steps and blend fractions of frame times.

    Args:
        times: (K,) frame times [s] >= 0 (relative to the simulation's t = 0).
        dt: the simulator's time step [s].
        mode: "interpolate": n = floor(t / dt), a = t / dt - n in [0, 1) (render
            (1 - a) x_n + a x_{n+1}; exact in time); "nearest": n = round(t / dt), a = 0
            (time error <= dt / 2).  Times within 1e-9 steps of a step count as on it.
        max_step: the rollout's step count; an error names the first frame past it.
    Returns:
        (n (K,) int64, a (K,) float64).
    """
    if mode not in MODES:
        raise ValueError(f"mode: expected one of {MODES}, got {mode!r}")
    t = np.atleast_1d(np.asarray(times, dtype=np.float64))
    dt = float(dt)
    if not (math.isfinite(dt) and dt > 0):
        raise ValueError(f"dt: must be a finite number > 0 (seconds), got {dt!r}")
    if t.ndim != 1 or not np.all(np.isfinite(t)):
        raise ValueError(f"times: expected a 1-D array of finite times [s], got {times!r}")
    if t.size and t.min() < 0:
        k = int(np.argmin(t))
        raise ValueError(f"times: frame {k} is at t = {t[k]:g} s, before the simulation starts (t = 0); drop it "
                         f"(footage[{k + 1}:]) or change start_time")
    u = t / dt
    if mode == "nearest":
        n = np.floor(u + 0.5).astype(np.int64)
        a = np.zeros_like(u)
    else:
        n = np.floor(u + _STEP_TOL).astype(np.int64)
        a = np.clip(u - n, 0.0, 1.0)
        a[a < _STEP_TOL] = 0.0
    if max_step is not None:
        last = n + (a > 0)
        if last.size and last.max() > max_step:
            k = int(np.argmax(last > max_step))
            raise ValueError(f"times: frame {k} at t = {t[k]:g} s needs step {int(last[k])}, but the rollout has "
                             f"{max_step} steps of {dt:g} s (t <= {max_step * dt:g} s): simulate longer or "
                             f"drop the late frames (footage[:{k}])")
    return n, a


SOURCES = ("particles", "rigid", "both", "mpm")


@ti.data_oriented
class TimedVertices:
    """Vertex positions at given times, for rendering footage frames (see the module docstring).

    Args:
        sim: the Simulator (its dt, steps; the observer is registered on it).
        times: (K,) frame times [s], or a `Footage` (its `times`).
        source: "particles" (every particle's position; render with the renderer's
            vertex_ids), "rigid" (every rigid body's world-space mesh vertices, the
            layout of `RigidSurface`) or "both" (a scene of rigid bodies and particles, e.g.
            a soft ball on a box: the rigid layout first, then every particle, particle i
            at index rigid vertex count + i) or "mpm" (every MPM particle's position, `mpm_x`:
            render with `renderers.ParticleSplatter`).
        mode: "interpolate" or "nearest" (`frame_steps`).
        on_frame: called as `on_frame(k)` once frame k's vertices are complete (e.g.
            `lambda k: renderer.render(timed.vertices, k, k)`).
    Attributes:
        vertices: field (K, V) vec3 [m], differentiable; steps, alphas: (K,) numpy;
        faces: with source="rigid" or "both", (F, 3) int32 indices into `vertices` of the
            bodies' meshes (else None); rigid_vertex_count (0 with source="particles");
        frames = K; max_time_error [s] (0 when interpolating).
    """

    def __init__(self, sim, times, source="particles", mode="interpolate", on_frame=None):
        if source not in SOURCES:
            raise ValueError(f"source: expected one of {', '.join(map(repr, SOURCES))}, got {source!r}")
        if hasattr(times, "times"):
            times = times.times
        model = sim.model
        self.model = model
        self.source = source
        self.rigid = source == "rigid"
        self.rigid_vertex_count, self.faces = 0, None
        if source in ("rigid", "both"):
            if getattr(model, "body_count", 0) == 0:
                raise ValueError(f"source={source!r}: the model has no rigid bodies (use SceneBuilder.add_rigid_body)")
            self.rigid_vertex_count = int(model.body_vertex_start[-1])
            start = model.body_vertex_start      # RigidSurface's layout: every body's mesh, concatenated
            self.faces = np.concatenate([f + start[b] for b, f in enumerate(model.body_faces)]).astype(np.int32)
        if source in ("particles", "both") and model.particle_count == 0:
            raise ValueError(f"source={source!r}: the model has no particles")
        if source == "mpm" and getattr(model, "mpm_particle_count", 0) == 0:
            raise ValueError("source='mpm': the model has no MPM particles (use SceneBuilder.add_mpm)")
        self.vertex_count = model.mpm_particle_count if source == "mpm" else \
            self.rigid_vertex_count + (model.particle_count if source != "rigid" else 0)
        self.steps, self.alphas = frame_steps(times, sim.dt, mode, max_step=sim.steps)
        t = np.atleast_1d(np.asarray(times, dtype=np.float64))
        self.max_time_error = float(np.max(np.abs(self.steps * sim.dt - t))) if mode == "nearest" else 0.0
        self.frames = K = len(self.steps)
        self.on_frame = on_frame
        grad = model.requires_grad
        self.vertices = ti.Vector.field(3, float, shape=(K, self.vertex_count), needs_grad=grad)
        self.stash = ti.Vector.field(3, float, shape=(K, self.vertex_count), needs_grad=grad)
        # per step: the frames that take step n (stash, or the whole frame when a = 0) and
        # the frames completed by a blend at step n + 1
        events = {}
        for k, (n, a) in enumerate(zip(self.steps.tolist(), self.alphas.tolist())):
            events.setdefault(n, []).append((k, "stash" if a > 0 else "direct"))
            if a > 0:
                events.setdefault(n + 1, []).append((k, "blend"))
        self._obs_steps = sorted(events)
        self._events = events
        sim.observe(self, steps=self._obs_steps)

    def __call__(self, state, slot, index):
        # the two state fields the vertices come from (one of them is not read, by a static branch)
        if self.source == "mpm":               # MPM particles are read like particles, from mpm_x
            bq = pq = state.mpm_x
        else:
            bq = state.body_q if self.source != "particles" else state.particle_q
            pq = state.particle_q if self.source != "rigid" else state.body_q
        for k, kind in self._events[self._obs_steps[index]]:
            if kind == "stash":
                self._gather(bq, pq, slot, self.stash, k)
            elif kind == "direct":
                self._gather(bq, pq, slot, self.vertices, k)
            else:
                self._blend(bq, pq, slot, k, float(self.alphas[k]))
            if kind != "stash" and self.on_frame is not None:
                self.on_frame(k)

    @ti.func
    def _point(self, bq: ti.template(), pq: ti.template(), slot, v):
        p = ti.Vector.zero(float, 3)
        if ti.static(self.source == "rigid"):
            b = bq[slot, self.model.vertex_body[v]]
            p = body_position(b) + quat_rotate(body_rotation(b), self.model.body_vertex[v])
        elif ti.static(self.source in ("particles", "mpm")):
            p = pq[slot, v]
        else:
            if v < self.rigid_vertex_count:
                b = bq[slot, self.model.vertex_body[v]]
                p = body_position(b) + quat_rotate(body_rotation(b), self.model.body_vertex[v])
            else:
                p = pq[slot, v - self.rigid_vertex_count]
        return p

    @ti.kernel
    def _gather(self, bq: ti.template(), pq: ti.template(), slot: ti.i32, dst: ti.template(), k: ti.i32):
        for v in range(self.vertex_count):
            dst[k, v] = self._point(bq, pq, slot, v)

    @ti.kernel
    def _blend(self, bq: ti.template(), pq: ti.template(), slot: ti.i32, k: ti.i32, a: float):
        for v in range(self.vertex_count):
            self.vertices[k, v] = (1.0 - a) * self.stash[k, v] + a * self._point(bq, pq, slot, v)

    def numpy(self):
        """Vertex positions (K, V, 3) [m]."""
        return self.vertices.to_numpy()


def render_at_times(sim, renderer, times, source="particles", mode="interpolate") -> TimedVertices:
    """Render frame k of `renderer.image` at time times[k] [s] (or a `Footage`'s times):
    registers a `TimedVertices` observer whose frames are rendered as soon as they are
    complete.  The renderer needs at least K frames."""
    K = len(times.times if hasattr(times, "times") else np.atleast_1d(times))
    if renderer.frames < K:
        raise ValueError(f"renderer: {renderer.frames} frames, but {K} frame times were given "
                         f"(build the SoftRasterizer with frames={K})")
    timed = TimedVertices(sim, times, source=source, mode=mode)
    timed.on_frame = lambda k: renderer.render(timed.vertices, k, k)
    return timed


__all__ = ["Footage", "load_footage", "dt_for_fps", "frame_steps", "TimedVertices", "render_at_times", "MODES"]
