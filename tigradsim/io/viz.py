"""Showing simulations: a window that stays open, or pictures on disk.

Demos record what they want to show in an `Animation` and hand it to `show`:

    parser = argparse.ArgumentParser(); add_view_args(parser, out_default="out/my_demo")
    args = parser.parse_args()
    anim = Animation(frame_dt=0.02, eye=(0, 1.5, 4), target=(0, 0.5, 0))
    anim.mesh(vertices, faces)            # vertices (K, V, 3) [m], faces (F, 3)
    anim.particles(points, radius=0.01)   # (K, N, 3) [m]
    anim.caption(lambda k: f"t = {k * 0.02:.2f} s")
    show(anim, "my_demo", args)

With a display (and no --headless) `show` opens a window that plays the frames at
``--speed`` x real time and loops until the window is closed or Esc / q is pressed
(Space pauses); ``--no-wait`` plays once and returns (for scripts).  ``--window auto`` opens a Taichi
GGUI 3D window (orbit camera, ground, shaded meshes, particles) when Vulkan works
and the 2D `ti.GUI` otherwise; a failure to open the GGUI window falls back to the
2D GUI with a one-line message.  GGUI needs only a Vulkan driver: it also runs
with ``ti.init(arch=ti.cpu)`` (checked under Xvfb with Mesa's lavapipe software
driver, package ``mesa-vulkan-drivers``, and the loader ``libvulkan1``; without the
loader ``taichi._lib.core.with_vulkan()`` is False).  Whether GGUI works is probed once per
process in a child process (a 64 x 64 GGUI window shown for one frame; a few seconds), so that
a broken driver cannot crash the demo; ``--window gui`` skips the probe.
Without a display (or with --headless) nothing opens: the frames are drawn off
screen with the 2D renderer and written as ``OUT/<title>_0000.png ...`` and
``OUT/<title>.gif`` (playing at ``--speed`` x real time).

The GGUI window lives in `tigradsim.io.viz_ggui`.  `play_video` shows an image video
(K, H, W, 3) under the same rules (videos larger than 1600 x 950 pixels, e.g. a grid of
many trials, are shown reduced; the GIF keeps full size).  `Viewer` is the lower-level
immediate-mode 2D drawer (one frame at a time) that `show` uses.
"""
import math
import os
import re
import sys
import time

import numpy as np
import taichi as ti

from .viz_ggui import corner_normals, ggui_available, play_ggui   # noqa: F401 (corner_normals: re-export)

_PREFIX = "[tigradsim]"
_HINT = f"{_PREFIX} close the window or press Esc/q to continue"
_WINDOW_KINDS = ("auto", "ggui", "gui")
# GIF frame durations are stored in 1/100 s and most viewers play shorter ones slower
_GIF_MIN_FRAME_S = 0.02


def has_display() -> bool:
    """True when a window can be opened (an X or Wayland display is set)."""
    return bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")) or sys.platform in ("darwin", "win32")


def look_at_projection(eye, target, up=(0.0, 1.0, 0.0), fov_deg=45.0, aspect=1.0):
    """Return f(points (N,3)) -> (N,2) screen coordinates in [0, 1] (+y up).

    fov_deg is the vertical field of view; aspect = width / height of the picture in pixels.  The
    horizontal coordinate is divided by the aspect so that a pixel covers the same angle in x and y
    (square pixels: a sphere is drawn round in a 720 x 540 picture, not stretched to 4:3)."""
    aspect = float(aspect)
    if not (math.isfinite(aspect) and aspect > 0):
        raise ValueError(f"aspect={aspect}: expected the picture's width / height, a positive number")
    eye, target, up = (np.asarray(v, dtype=np.float64) for v in (eye, target, up))
    forward = target - eye
    forward /= np.linalg.norm(forward)
    right = np.cross(forward, up)
    if np.linalg.norm(right) < 1e-9:
        raise ValueError(f"up={tuple(up)} is parallel to the viewing direction {tuple(forward)}")
    right /= np.linalg.norm(right)
    true_up = np.cross(right, forward)
    focal = 1.0 / np.tan(np.radians(fov_deg) / 2)

    def project(points):
        d = np.asarray(points, dtype=np.float64) - eye
        z = np.maximum(d @ forward, 1e-3)
        x = focal * (d @ right) / (z * aspect)
        y = focal * (d @ true_up) / z
        return np.stack([0.5 + 0.5 * x, 0.5 + 0.5 * y], axis=1)

    return project


class Viewer:
    """A window (or a folder of frames) for a demo.

    Args:
        title: window title and file-name prefix.
        res: (width, height) in pixels.
        headless: force file output; None decides from `has_display()`.
        out_dir: folder for PNG frames and the GIF (headless), created if needed.
        eye, target, fov: the camera (fov: the vertical field of view in degrees; pixels are square).
    """

    def __init__(self, title="tigradsim", res=(512, 512), headless=None, out_dir="out", eye=(0.0, 1.5, 4.0),
                 target=(0.0, 0.5, 0.0), fov=45.0, save_every=1):
        if headless is None:
            headless = not has_display()
            if headless:
                print(f"{_PREFIX} no display found: writing frames to {out_dir}/ instead of opening a window")
        self.headless = headless
        self.out_dir = out_dir
        self.title = title
        self.eye = np.asarray(eye, dtype=np.float64)
        self.project = look_at_projection(eye, target, fov_deg=fov, aspect=res[0] / res[1])
        self.gui = ti.GUI(title, res=res, show_gui=not headless, background_color=0xF4F4F0)
        self.frames = []
        self.count = 0
        self.save_every = save_every
        if headless and out_dir is not None:
            os.makedirs(out_dir, exist_ok=True)

    @property
    def running(self) -> bool:
        return self.headless or self.gui.running

    def ground(self, extent=3.0, color=0xB0B0A8, pieces=24):
        """Draw the ground plane y = 0 as a grid of lines (pieces outside the view are dropped)."""
        ticks = np.linspace(-extent, extent, 13)
        s = np.linspace(-extent, extent, pieces + 1)
        a, b = [], []
        for t in ticks:
            a += [[t, 0, u] for u in s[:-1]] + [[u, 0, t] for u in s[:-1]]
            b += [[t, 0, u] for u in s[1:]] + [[u, 0, t] for u in s[1:]]
        pa, pb = self.project(np.array(a)), self.project(np.array(b))
        keep = np.all((pa > -0.5) & (pa < 1.5) & (pb > -0.5) & (pb < 1.5), axis=1)
        self.gui.lines(pa[keep], pb[keep], radius=1, color=color)

    def particles(self, points, radius=2.0, color=0x2060C0):
        self.gui.circles(self.project(points), radius=radius, color=color)

    def segments(self, a, b, radius=1.0, color=0x404040):
        self.gui.lines(self.project(a), self.project(b), radius=radius, color=color)

    def triangles(self, vertices, faces, color=0x60A0E0, edges=0x305070, light=(0.3, 0.8, 0.5)):
        """Flat-shaded triangles, painter-sorted back to front."""
        v = np.asarray(vertices, dtype=np.float64)
        f = np.asarray(faces)
        p = self.project(v)
        tri = v[f]
        normals = np.cross(tri[:, 1] - tri[:, 0], tri[:, 2] - tri[:, 0])
        normals /= np.maximum(np.linalg.norm(normals, axis=1, keepdims=True), 1e-12)
        shade = 0.35 + 0.65 * np.abs(normals @ (np.asarray(light) / np.linalg.norm(light)))
        base = np.array([(color >> 16) & 255, (color >> 8) & 255, color & 255], dtype=np.float64)
        rgb = np.clip(base[None] * shade[:, None], 0, 255).astype(np.int64)
        colors = (rgb[:, 0] << 16) | (rgb[:, 1] << 8) | rgb[:, 2]
        depth = np.linalg.norm(tri.mean(axis=1) - self.eye, axis=1)
        order = np.argsort(depth)[::-1]                 # farthest first
        self.gui.triangles(p[f[order, 0]], p[f[order, 1]], p[f[order, 2]], color=colors[order])
        if edges is not None:
            e = np.concatenate([f[:, [0, 1]], f[:, [1, 2]], f[:, [2, 0]]])
            self.gui.lines(p[e[:, 0]], p[e[:, 1]], radius=0.5, color=edges)

    def text(self, content, pos=(0.02, 0.97), color=0x202020, font_size=18):
        self.gui.text(content, pos, font_size=font_size, color=color)

    def grab(self):
        """The frame drawn so far as uint8 (H, W, 3), row 0 on top; clears the canvas."""
        img = self.gui.get_image()
        rgb = (np.clip(np.rot90(img[:, :, :3]), 0, 1) * 255 + 0.5).astype(np.uint8)
        self.gui.clear()
        return rgb

    def show(self):
        """Present the frame (window) or write it as PNG (headless)."""
        if self.headless:
            if self.count % self.save_every == 0:
                rgb = self.grab()
                self.frames.append(rgb)
                path = os.path.join(self.out_dir, f"{self.title}_{len(self.frames) - 1:04d}.png")
                import imageio.v2 as imageio
                imageio.imwrite(path, rgb)
            else:
                self.gui.clear()
        else:
            self.gui.show()
        self.count += 1

    def close(self, fps=30):
        """Write the GIF of all frames (headless); returns its path or None."""
        path = None
        if self.headless and self.frames:
            import imageio.v2 as imageio
            path = os.path.join(self.out_dir, f"{self.title}.gif")
            imageio.mimsave(path, self.frames, duration=1.0 / fps, loop=0)
        self.gui.close()
        return path


# -- command-line options -------------------------------------------------------
def add_view_args(parser, out_default="out/demo"):
    """Add the viewer's flags to an argparse parser (a flag the parser already has is left alone).

    --headless (write files, open no window), --out DIR (where pictures go), --no-wait (play
    once and return), --speed FLOAT (playback speed, 1.0 = real time), --window {auto,ggui,gui}.
    Returns the parser."""
    have = set(getattr(parser, "_option_string_actions", {}))

    def add(flag, **kw):
        if flag not in have:
            parser.add_argument(flag, **kw)

    add("--headless", action="store_true", help="write PNG frames and a GIF instead of opening a window")
    add("--out", default=out_default, help=f"folder for pictures (default {out_default})")
    add("--no-wait", dest="no_wait", action="store_true",
        help="play the animation once and return instead of looping until the window is closed")
    add("--speed", type=float, default=1.0, help="playback speed: 1.0 = real time (default), 0.25 = slow motion")
    add("--window", choices=_WINDOW_KINDS, default="auto",
        help="auto: Taichi GGUI 3D window when Vulkan works, else the 2D ti.GUI")
    return parser


class ViewOptions:
    """The viewer's settings read from parsed `args` (any object; missing attributes take defaults)."""

    def __init__(self, args=None):
        self.headless = bool(getattr(args, "headless", False))
        self.out = str(getattr(args, "out", None) or "out")
        self.no_wait = bool(getattr(args, "no_wait", False))
        self.speed = getattr(args, "speed", 1.0)
        self.window = getattr(args, "window", "auto") or "auto"
        try:
            self.speed = float(self.speed)
        except (TypeError, ValueError):
            raise ValueError(f"--speed={self.speed!r}: expected a positive number (1.0 = real time)") from None
        if not (math.isfinite(self.speed) and self.speed > 0):
            raise ValueError(f"--speed={self.speed}: expected a positive number (1.0 = real time)")
        if self.window not in _WINDOW_KINDS:
            raise ValueError(f"--window={self.window!r}: expected one of {', '.join(_WINDOW_KINDS)}")

    def no_window_reason(self):
        """None when a window may open, else why not ("--headless" or "no display found")."""
        if self.headless:
            return "--headless"
        if not has_display():
            return "no display found"
        return None


def _file_stem(title):
    """`title` as a file name: runs of characters other than letters, digits, '.', '-', '_' become '_'."""
    stem = re.sub(r"[^A-Za-z0-9_.-]+", "_", str(title)).strip("_.")
    return stem or "tigradsim"


# -- animations ----------------------------------------------------------------
def _color_rgb(color, name):
    """0xRRGGBB int or (r, g, b) floats in [0, 1] -> (0xRRGGBB, (r, g, b))."""
    if isinstance(color, (int, np.integer)) and 0 <= int(color) <= 0xFFFFFF:
        c = int(color)
        return c, ((c >> 16 & 255) / 255.0, (c >> 8 & 255) / 255.0, (c & 255) / 255.0)
    arr = np.asarray(color, dtype=np.float64) if not isinstance(color, str) else None
    if arr is None or arr.shape != (3,) or not np.all((arr >= 0) & (arr <= 1)):
        raise ValueError(f"{name}={color!r}: expected a 0xRRGGBB integer or three floats in [0, 1]")
    r, g, b = (int(round(v * 255)) for v in arr)
    return (r << 16) | (g << 8) | b, tuple(float(v) for v in arr)


def _points(arr, name):
    """(K, N, 3) or (N, 3) finite positions -> float64 (K or 1, N, 3) and whether they vary per frame."""
    a = np.asarray(arr, dtype=np.float64)
    if a.ndim == 2:
        a, per_frame = a[None], False
    else:
        per_frame = True
    if a.ndim != 3 or a.shape[-1] != 3 or a.shape[0] == 0 or a.shape[1] == 0:
        raise ValueError(f"{name}: expected shape (K, N, 3) per frame or (N, 3) static, got {np.shape(arr)}")
    if not np.all(np.isfinite(a)):
        raise ValueError(f"{name}: contains NaN or inf (a diverged simulation?)")
    return a, per_frame


def _indices(arr, cols, count, name):
    a = np.asarray(arr)
    if a.ndim != 2 or a.shape[1] != cols or a.shape[0] == 0 or not np.issubdtype(a.dtype, np.integer):
        raise ValueError(f"{name}: expected an integer array of shape (M, {cols}), got shape {a.shape} "
                         f"dtype {a.dtype}")
    if a.min() < 0 or a.max() >= count:
        raise ValueError(f"{name}: indices must lie in [0, {count}), got [{a.min()}, {a.max()}]")
    return a.astype(np.int64)


class Animation:
    """A recorded animation to hand to `show`: meshes, particles, segments and a caption per frame.

    Args:
        frame_dt: simulated seconds between recorded frames (playback runs at speed x real time).
        eye, target: camera position and the point it looks at [m] (+y is up).
        fov: vertical field of view [degrees].
        ground: draw the ground plane y = 0 (a grid in 2D, a checkerboard in 3D).
        ground_extent: half size of the drawn ground [m].
        res: window / picture size (width, height) in pixels.
    """

    def __init__(self, frame_dt, eye=(0.0, 1.5, 4.0), target=(0.0, 0.5, 0.0), fov=45.0, ground=True,
                 ground_extent=3.0, res=(720, 540)):
        frame_dt = float(frame_dt)
        if not (math.isfinite(frame_dt) and frame_dt > 0):
            raise ValueError(f"frame_dt={frame_dt}: expected a positive number of simulated seconds per frame")
        self.eye = tuple(float(v) for v in np.asarray(eye, dtype=np.float64).reshape(3))
        self.target = tuple(float(v) for v in np.asarray(target, dtype=np.float64).reshape(3))
        if np.allclose(self.eye, self.target):
            raise ValueError(f"eye={self.eye} and target={self.target}: the camera must look somewhere else")
        if not 1.0 <= float(fov) <= 170.0:
            raise ValueError(f"fov={fov}: expected a vertical field of view in degrees in [1, 170]")
        if float(ground_extent) <= 0:
            raise ValueError(f"ground_extent={ground_extent}: expected a positive half size in metres")
        if len(res) != 2 or min(int(r) for r in res) < 16:
            raise ValueError(f"res={res}: expected (width, height) of at least 16 pixels each")
        self.frame_dt, self.fov, self.ground = frame_dt, float(fov), bool(ground)
        self.ground_extent, self.res = float(ground_extent), (int(res[0]), int(res[1]))
        self.layers = []           # dicts: kind, data (K|1, N, 3), per_frame, ...
        self._caption = None

    # -- recording ----------------------------------------------------------
    def _check_frames(self, name, count):
        k = self.per_frame_count()
        if k is not None and count != k:
            raise ValueError(f"{name}: {count} frames, but earlier layers have {k}; give every per-frame layer "
                             "the same number of frames (or a static (N, 3) array)")

    def per_frame_count(self):
        """K of the per-frame layers and caption list, or None when everything is static."""
        counts = [layer["data"].shape[0] for layer in self.layers if layer["per_frame"]]
        if isinstance(self._caption, list):
            counts.append(len(self._caption))
        return counts[0] if counts else None

    @property
    def frames(self) -> int:
        """Number of frames K (1 when everything is static)."""
        return self.per_frame_count() or 1

    def mesh(self, vertices, faces, color=0x60A0E0, edges=None):
        """A triangle mesh: vertices (K, V, 3) per frame or (V, 3) static [m], faces (F, 3) indices.

        edges: 0xRRGGBB colour of the triangle edges drawn by the 2D GUI (None: none)."""
        data, per_frame = _points(vertices, "vertices")
        faces = _indices(faces, 3, data.shape[1], "faces")
        if per_frame:
            self._check_frames("vertices", data.shape[0])
        hex_color, rgb = _color_rgb(color, "color")
        if edges is not None:
            edges = _color_rgb(edges, "edges")[0]
        self.layers.append(dict(kind="mesh", data=data, per_frame=per_frame, faces=faces, color=hex_color,
                                rgb=rgb, edges=edges))
        return self

    def particles(self, points, radius=0.01, color=0x2060C0):
        """Spheres at points (K, N, 3) per frame or (N, 3) static [m], of `radius` [m]."""
        data, per_frame = _points(points, "points")
        if not float(radius) > 0:
            raise ValueError(f"radius={radius}: expected a positive radius in metres")
        if per_frame:
            self._check_frames("points", data.shape[0])
        hex_color, rgb = _color_rgb(color, "color")
        self.layers.append(dict(kind="particles", data=data, per_frame=per_frame, radius=float(radius),
                                color=hex_color, rgb=rgb))
        return self

    def segments(self, points, pairs, color=0x404040, width=1.5):
        """Line segments between points (K, N, 3) per frame or (N, 3) static [m]; pairs (E, 2) indices.

        width: line width in pixels."""
        data, per_frame = _points(points, "points")
        pairs = _indices(pairs, 2, data.shape[1], "pairs")
        if per_frame:
            self._check_frames("points", data.shape[0])
        if not float(width) > 0:
            raise ValueError(f"width={width}: expected a positive line width in pixels")
        hex_color, rgb = _color_rgb(color, "color")
        self.layers.append(dict(kind="segments", data=data, per_frame=per_frame, pairs=pairs, color=hex_color,
                                rgb=rgb, width=float(width)))
        return self

    def caption(self, text):
        """The caption drawn in the corner: a callable k -> str, a list of K strings, or one string.

        Without a caption the frame's simulated time is shown."""
        if isinstance(text, (list, tuple)):
            text = [str(t) for t in text]
            if not text:
                raise ValueError("caption: expected a non-empty list of strings (one per frame)")
            self._caption = None
            self._check_frames("caption", len(text))
        elif not (callable(text) or isinstance(text, str)):
            raise ValueError(f"caption: expected a callable k -> str, a list of strings or a string, got "
                             f"{type(text).__name__}")
        self._caption = text
        return self

    # -- playback helpers -----------------------------------------------------
    def caption_at(self, k) -> str:
        c = self._caption
        if c is None:
            return f"t = {k * self.frame_dt:.2f} s"
        if callable(c):
            return str(c(k))
        if isinstance(c, list):
            return c[min(k, len(c) - 1)]
        return c

    @staticmethod
    def at(layer, k):
        """The layer's (N, 3) positions at frame k (a static layer at every frame)."""
        d = layer["data"]
        return d[min(k, d.shape[0] - 1)]

    def draw_2d(self, viewer, k, hint=None):
        """Draw frame k with a `Viewer` (the 2D ti.GUI renderer)."""
        if self.ground:
            viewer.ground(extent=self.ground_extent)
        for layer in self.layers:
            pts = self.at(layer, k)
            if layer["kind"] == "mesh":
                viewer.triangles(pts, layer["faces"], color=layer["color"], edges=layer["edges"])
            elif layer["kind"] == "particles":
                viewer.particles(pts, radius=self.pixel_radius(layer["radius"], pts), color=layer["color"])
            else:
                p = layer["pairs"]
                viewer.segments(pts[p[:, 0]], pts[p[:, 1]], radius=layer["width"] / 2, color=layer["color"])
        viewer.text(self.caption_at(k))
        if hint:
            viewer.text(hint, pos=(0.02, 0.04), font_size=14, color=0x606060)

    def pixel_radius(self, radius, points):
        """A world radius [m] as a screen radius [px] at the points' mean distance from the camera."""
        dist = max(float(np.linalg.norm(points.mean(axis=0) - np.asarray(self.eye))), 1e-3)
        focal_px = 0.5 * self.res[1] / math.tan(math.radians(self.fov) / 2)
        return float(np.clip(radius * focal_px / dist, 1.0, 40.0))

    def render_frames(self, every=1):
        """Draw frames 0, every, 2 every, ... off screen with the 2D renderer: uint8 (K', H, W, 3)."""
        viewer = Viewer("tigradsim", res=self.res, headless=True, out_dir=None, eye=self.eye, target=self.target,
                        fov=self.fov)
        out = None
        for j, k in enumerate(range(0, self.frames, every)):
            self.draw_2d(viewer, k)
            image = viewer.grab()
            if out is None:     # filled in place: a list then np.stack would hold the video twice
                out = np.empty((len(range(0, self.frames, every)),) + image.shape, dtype=image.dtype)
            out[j] = image
        viewer.gui.close()
        return out


def _gif_stride(frame_dt, speed):
    """Record every n-th frame so that a GIF frame lasts at least _GIF_MIN_FRAME_S at this speed."""
    return max(1, math.ceil(_GIF_MIN_FRAME_S / (frame_dt / speed) - 1e-9))


def write_pictures(anim, title, out_dir, speed=1.0):
    """Write the animation's frames as OUT/<title>_0000.png ... and OUT/<title>.gif; returns the GIF path.

    The GIF plays at `speed` x real time (frames are skipped where a frame would be
    shorter than 1/50 s, which GIF players do not honour)."""
    from .video import save_frames, save_gif
    stride = _gif_stride(anim.frame_dt, speed)
    frames = anim.render_frames(every=stride)
    stem = _file_stem(title)
    save_frames(frames, out_dir, prefix=stem)
    return save_gif(frames, os.path.join(out_dir, f"{stem}.gif"), fps=speed / (anim.frame_dt * stride))


class _Clock:
    """Which frame to show now, playing K frames of frame_dt at `speed` x real time.

    After the last frame the picture holds for `hold` wall seconds, then the clock
    restarts (loop) or reports the end (once).  `toggle_pause` stops and resumes it."""

    def __init__(self, count, frame_dt, speed, loop, hold=0.75):
        self.count, self.frame_dt, self.speed, self.loop, self.hold = count, frame_dt, speed, loop, hold
        self.start = time.perf_counter()
        self.paused_at = None

    def toggle_pause(self):
        now = time.perf_counter()
        if self.paused_at is None:
            self.paused_at = now
        else:
            self.start += now - self.paused_at          # the paused time does not count
            self.paused_at = None

    def frame(self):
        """Frame index to show, or None when a single play is over."""
        now = time.perf_counter() if self.paused_at is None else self.paused_at
        wall = now - self.start
        k = int(wall * self.speed / self.frame_dt)
        if k < self.count:
            return k
        if wall < self.count * self.frame_dt / self.speed + (self.hold if self.loop else 0.0):
            return self.count - 1
        if not self.loop:
            return None
        self.start = time.perf_counter()
        return 0


def _quit_keys(key):
    return key in (ti.GUI.ESCAPE, "q", "Q", ti.GUI.EXIT)


def _handle_keys(keys, clock):
    """True when a key asks to close; Space pauses / resumes the clock."""
    for key in keys:
        if _quit_keys(key):
            return True
        if key == " ":
            clock.toggle_pause()
    return False


def _play_gui(anim, title, opts):
    """Play in a 2D ti.GUI window; returns when closed, on Esc/q, or (once) at the end."""
    viewer = Viewer(title, res=anim.res, headless=False, out_dir=None, eye=anim.eye, target=anim.target,
                    fov=anim.fov)
    clock = _Clock(anim.frames, anim.frame_dt, opts.speed, loop=not opts.no_wait)
    hint = "Esc / q: close   Space: pause" if not opts.no_wait else None
    try:
        while viewer.gui.running:
            k = clock.frame()
            if k is None:
                break
            anim.draw_2d(viewer, k, hint=hint)
            viewer.gui.show()
            if _handle_keys([e.key for e in viewer.gui.get_events(ti.GUI.PRESS)], clock):
                break
            time.sleep(1.0 / 120)      # the GUI does not wait for the screen; do not spin a core
    finally:
        viewer.gui.close()


def _play_ggui(anim, title, opts):
    """Play in a GGUI 3D window (`tigradsim.io.viz_ggui`); returns when closed, on Esc/q, or (once) at the end."""
    clock = _Clock(anim.frames, anim.frame_dt, opts.speed, loop=not opts.no_wait)
    hint = None if opts.no_wait else "Esc / q: close   Space: pause   left-drag: orbit   right-drag + WASD: fly"
    play_ggui(anim, title, clock, lambda keys: _handle_keys(keys, clock), hint)


def _choose_window(opts):
    """'ggui' or 'gui' for --window, saying in one line why GGUI is not used when it was asked for."""
    if opts.window == "gui":
        return "gui"
    ok, reason = ggui_available()
    if ok:
        return "ggui"
    print(f"{_PREFIX} no GGUI 3D window ({reason}): using the 2D ti.GUI window (--window gui skips this check)")
    return "gui"


def show(anim, title, args=None) -> dict:
    """Show an `Animation` in a window, or write it as pictures (see the module docstring).

    args: parsed command line with the `add_view_args` flags (None: defaults).
    Returns {"window": "ggui" | "gui" | None, "gif": GIF path or None, "frames": K}."""
    if not isinstance(anim, Animation):
        raise TypeError(f"anim: expected a tigradsim.io.viz.Animation, got {type(anim).__name__}")
    opts = ViewOptions(args)
    reason = opts.no_window_reason()
    if reason is None:
        kind = _choose_window(opts)
        print(_HINT if not opts.no_wait else f"{_PREFIX} playing {title} once (--no-wait)", flush=True)
        try:
            if kind == "ggui":
                try:
                    _play_ggui(anim, title, opts)
                except Exception as exc:   # a driver that passed the probe may still fail on a real window
                    print(f"{_PREFIX} the GGUI 3D window failed ({type(exc).__name__}: {exc}): using the 2D ti.GUI")
                    kind = "gui"
                    _play_gui(anim, title, opts)
            else:
                _play_gui(anim, title, opts)
            return {"window": kind, "gif": None, "frames": anim.frames}
        except Exception as exc:          # no usable display after all (e.g. a stale DISPLAY)
            reason = f"cannot open a window ({type(exc).__name__}: {exc})"
    print(f"{_PREFIX} {reason}: writing pictures to {opts.out}", flush=True)
    gif = write_pictures(anim, title, opts.out, speed=opts.speed)
    print(f"{_PREFIX} wrote {gif}", flush=True)
    return {"window": None, "gif": gif, "frames": anim.frames}


# the largest window play_video opens (pixels); larger videos are shown reduced
_MAX_WINDOW = (1600, 950)


def _fit_window(video, scale):
    """(upscale s, reduction r): frames are shown s times larger (nearest pixel) and then, when the
    result exceeds _MAX_WINDOW, reduced by area averaging to r (< 1) of that size."""
    h, w = video.shape[1:3]
    s = int(scale) if scale else max(1, min(8, 800 // max(h, w)))
    r = min(1.0, _MAX_WINDOW[0] / (w * s), _MAX_WINDOW[1] / (h * s))
    return s, r


def play_video(frames, title="tigradsim", args=None, saved_at=None, scale=None, fps=15, loops=None):
    """Play an image video (K, H, W[, C]) in a ti.GUI window under the `show` rules.

    args: parsed `add_view_args` flags (None: defaults: loop until closed, real speed).
    saved_at: where the video was already written (said when no window opens; without it,
    headless, the video is written to OUT/<title>.gif).  scale: integer upscaling for the
    window (None: to about 800 pixels); a video larger than 1600 x 950 pixels (a grid of
    many trials) is shown reduced to fit.  fps: the video's own frame rate; it plays at
    fps x --speed.  loops: play this many times and return (the pre-`args` behaviour).
    Returns True when a window was shown."""
    if isinstance(args, (str, os.PathLike)):          # the old signature play_video(frames, title, saved_at)
        args, saved_at = None, args
    opts = ViewOptions(args)
    if not (isinstance(fps, (int, float)) and math.isfinite(fps) and fps > 0):
        raise ValueError(f"fps={fps!r}: expected the video's positive frame rate in frames per second")
    from .video import save_gif, to_uint8
    video = to_uint8(frames)
    if video.ndim == 3:
        video = np.repeat(video[..., None], 3, axis=-1)
    video = video[..., :3]
    reason = opts.no_window_reason()
    if reason is None:
        s, r = _fit_window(video, scale)
        h, w = video.shape[1:3]
        size = (max(1, int(w * s * r)), max(1, int(h * s * r)))
        try:
            gui = ti.GUI(title, res=size)
        except Exception as exc:
            reason = f"cannot open a window ({type(exc).__name__}: {exc})"
        else:
            print(_HINT if not (opts.no_wait or loops) else f"{_PREFIX} playing {title}", flush=True)
            if r < 1:
                where = f" (full size: {saved_at})" if saved_at else ""
                print(f"{_PREFIX} the video is {w * s} x {h * s} pixels: shown at {r:.0%}{where}", flush=True)

            def image(k):
                f = np.repeat(np.repeat(video[k], s, axis=0), s, axis=1)
                if r < 1:
                    from PIL import Image
                    f = np.asarray(Image.fromarray(f).resize(size, Image.BOX))
                # ti.GUI images are indexed [x, y] with y up; frames are [row, column] with row 0 on top
                return np.ascontiguousarray(np.transpose(f[::-1], (1, 0, 2))).astype(np.float32) / 255

            clock = _Clock(len(video), 1.0 / fps, opts.speed, loop=not opts.no_wait)
            plays, last, shown = 0, -1, None
            try:
                while gui.running:
                    k = clock.frame()
                    if k is None:
                        break
                    if k < last:
                        plays += 1
                        if loops and plays >= loops:
                            break
                    if k != last:
                        shown = image(k)          # converted once per frame shown, not kept for all
                    last = k
                    gui.set_image(shown)
                    gui.show()
                    if _handle_keys([e.key for e in gui.get_events(ti.GUI.PRESS)], clock):
                        break
                    time.sleep(1.0 / 120)
            finally:
                gui.close()
            return True
    if saved_at is None and args is not None:
        saved_at = save_gif(video, os.path.join(opts.out, f"{_file_stem(title)}.gif"), fps=fps * opts.speed)
    where = f"; the video is in {saved_at}" if saved_at else ""
    print(f"{_PREFIX} {reason}: not opening a window{where}", flush=True)
    return False
