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

`Animation` lives in `tigradsim.io.animation` and `Viewer` in `tigradsim.io.viewer`; both are importable
from here as before.
"""
import math
import os
import re
import time

import numpy as np
import taichi as ti

from .animation import Animation
from .viewer import _PREFIX, Viewer, has_display, look_at_projection  # noqa: F401 (look_at_projection: re-export)
from .viz_ggui import corner_normals, ggui_available, play_ggui   # noqa: F401 (corner_normals: re-export)

_HINT = f"{_PREFIX} close the window or press Esc/q to continue"

_WINDOW_KINDS = ("auto", "ggui", "gui")

# GIF frame durations are stored in 1/100 s and most viewers play shorter ones slower
_GIF_MIN_FRAME_S = 0.02


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


# -- playing and writing animations ----------------------------------------------
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
