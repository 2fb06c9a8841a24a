"""The Taichi GGUI (Vulkan) 3D window of `tigradsim.io.viz.show`: whether it works here
(`ggui_available`), shading normals (`corner_normals`) and the player (`play_ggui`).

GGUI needs a Vulkan driver and loader, not a GPU: with ``ti.init(arch=ti.cpu)`` it runs on
Mesa's lavapipe software driver (packages ``libvulkan1`` and ``mesa-vulkan-drivers``;
checked under Xvfb).  Without the loader ``taichi._lib.core.with_vulkan()`` is False.
"""
import math
import subprocess
import sys
import time

import numpy as np
import taichi as ti

# a real (on-screen, 64 x 64, one frame) window: a driver that renders off screen but cannot
# present to this display (e.g. X forwarded over ssh) fails here, not in the demo.
# offline_cache_cleaning_policy="never": at exit Taichi trims the offline kernel cache it was
# pointed at (TI_OFFLINE_CACHE_FILE_PATH is inherited) to its default 100 MB cap, even with
# offline_cache=False; the probe compiles nothing, but it dropped 25 % of the caller's cache
# (measured: 7,034 -> 5,276 files of the test suite's 190 MB cache) and the next run recompiled them.
_GGUI_PROBE = """
import taichi as ti
ti.init(arch=ti.cpu, log_level=ti.ERROR, offline_cache_cleaning_policy="never")
w = ti.ui.Window("tigradsim probe", (64, 64), show_window=True)
w.get_canvas().set_background_color((0.5, 0.5, 0.5))
w.show()
w.destroy()
print("GGUI-OK")
"""
_ggui_state = {}


def ggui_available():
    """(ok, reason): whether a Taichi GGUI (Vulkan) window can be opened here.

    Taichi is asked first (GGUI compiled in, a Vulkan loader found); then a child
    process opens an off-screen GGUI window, so that a broken driver cannot crash
    this process.  The answer is cached for the process."""
    if "ok" in _ggui_state:
        return _ggui_state["ok"], _ggui_state["reason"]
    ok, reason = False, ""
    try:
        from taichi._lib import core
        if not getattr(core, "GGUI_AVAILABLE", False):
            reason = "this Taichi build has no GGUI"
        elif not core.with_vulkan():
            reason = "no Vulkan loader (libvulkan) found"
        else:
            res = subprocess.run([sys.executable, "-c", _GGUI_PROBE], capture_output=True, text=True, timeout=60)
            ok = res.returncode == 0 and "GGUI-OK" in res.stdout
            if not ok:
                tail = (res.stderr or res.stdout).strip().splitlines()
                reason = "opening a Vulkan window failed" + (f" ({tail[-1][:120]})" if tail else "")
    except Exception as exc:      # any failure means: use the 2D GUI
        ok, reason = False, f"{type(exc).__name__}: {exc}"
    _ggui_state.update(ok=ok, reason=reason)
    return ok, reason


def corner_normals(vertices, faces, crease_deg=40.0):
    """Shading normals per triangle corner, (F, 3, 3): smooth across edges whose faces meet at
    less than `crease_deg` (cloth, a soft ball), sharp across creases (a box's edges).

    A corner's normal is the area-weighted mean of the normals of the triangles around its
    vertex that lie within crease_deg of its own triangle's normal (the usual auto-smooth)."""
    v = np.asarray(vertices, dtype=np.float64)
    f = np.asarray(faces, dtype=np.int64)
    tri = v[f]
    area_normal = np.cross(tri[:, 1] - tri[:, 0], tri[:, 2] - tri[:, 0])     # length: twice the area
    face_n = area_normal / np.maximum(np.linalg.norm(area_normal, axis=1, keepdims=True), 1e-12)
    corner_face = np.repeat(np.arange(len(f)), 3)
    corner_vert = f.reshape(-1)
    # every (corner, triangle around the corner's vertex) pair, vectorised
    order = np.argsort(corner_vert, kind="stable")
    count = np.bincount(corner_vert, minlength=len(v))
    start = np.concatenate([[0], np.cumsum(count)[:-1]])
    deg = count[corner_vert]
    pair_corner = np.repeat(np.arange(len(corner_vert)), deg)
    within = np.arange(len(pair_corner)) - np.repeat(np.cumsum(deg) - deg, deg)
    pair_face = corner_face[order[start[corner_vert[pair_corner]] + within]]
    near = np.einsum("pd,pd->p", face_n[corner_face[pair_corner]], face_n[pair_face]) > \
        math.cos(math.radians(crease_deg))
    acc = np.zeros((len(corner_vert), 3))
    np.add.at(acc, pair_corner[near], area_normal[pair_face[near]])
    acc /= np.maximum(np.linalg.norm(acc, axis=1, keepdims=True), 1e-12)
    return acc.reshape(len(f), 3, 3)


class GGUIPlayer:
    """A Taichi GGUI (Vulkan) 3D window showing an `Animation`.

    Meshes are drawn unwelded (three vertices per triangle) with `corner_normals`: smooth
    cloth and soft bodies, sharp box edges; the ground is a checkerboard of quads.
    Left-drag orbits the camera around the target; right-drag with W/A/S/D/E flies it
    (Taichi's `Camera.track_user_inputs`)."""

    def __init__(self, anim, title):
        self.anim, self.title = anim, title
        self.window = ti.ui.Window(title, anim.res, vsync=True, fps_limit=60)
        self.canvas = self.window.get_canvas()
        self.scene = self.window.get_scene()
        self.camera = ti.ui.Camera()
        self.camera.position(*anim.eye)
        self.camera.lookat(*anim.target)
        self.camera.up(0.0, 1.0, 0.0)
        self.camera.fov(anim.fov)
        self.target = np.asarray(anim.target, dtype=np.float64)
        view = self.target - np.asarray(anim.eye, dtype=np.float64)
        left = np.cross((0.0, 1.0, 0.0), view)
        left /= max(np.linalg.norm(left), 1e-9)
        self.light = np.asarray(anim.eye) + 0.6 * np.linalg.norm(view) * left + (0.0, 3.0, 0.0)
        self.last_cursor = None
        self.fields = []
        for layer in anim.layers:
            if layer["kind"] == "mesh":
                n = 3 * len(layer["faces"])
                self.fields.append((ti.Vector.field(3, ti.f32, n), ti.Vector.field(3, ti.f32, n)))
            elif layer["kind"] == "particles":
                self.fields.append((ti.Vector.field(3, ti.f32, layer["data"].shape[1]),))
            else:
                self.fields.append((ti.Vector.field(3, ti.f32, 2 * len(layer["pairs"])),))
        self.loaded = [None] * len(anim.layers)
        self.ground = self._ground_fields() if anim.ground else None

    def _ground_fields(self, tiles=12):
        """Checkerboard quads on y = 0 (drawn a hair below it, so resting bodies do not flicker into it)."""
        e = self.anim.ground_extent
        edges = np.linspace(-e, e, tiles + 1)
        verts, cols = [], []
        for i in range(tiles):
            for j in range(tiles):
                x0, x1, z0, z1 = edges[i], edges[i + 1], edges[j], edges[j + 1]
                quad = [(x0, z0), (x1, z0), (x1, z1), (x0, z0), (x1, z1), (x0, z1)]
                verts += [(x, -1e-3, z) for x, z in quad]
                c = (0.80, 0.80, 0.76) if (i + j) % 2 else (0.68, 0.68, 0.64)
                cols += [c] * 6
        v = ti.Vector.field(3, ti.f32, len(verts))
        c = ti.Vector.field(3, ti.f32, len(verts))
        n = ti.Vector.field(3, ti.f32, len(verts))
        v.from_numpy(np.asarray(verts, dtype=np.float32))
        c.from_numpy(np.asarray(cols, dtype=np.float32))
        n.from_numpy(np.tile(np.float32([0.0, 1.0, 0.0]), (len(verts), 1)))
        return v, n, c

    def _upload(self, i, layer, k):
        key = k if layer["per_frame"] else 0
        if self.loaded[i] == key:
            return
        pts = self.anim.at(layer, k)
        if layer["kind"] == "mesh":
            faces = layer["faces"]
            tri = pts[faces]                                        # (F, 3, 3)
            self.fields[i][0].from_numpy(tri.reshape(-1, 3).astype(np.float32))
            self.fields[i][1].from_numpy(corner_normals(pts, faces).reshape(-1, 3).astype(np.float32))
        elif layer["kind"] == "particles":
            self.fields[i][0].from_numpy(pts.astype(np.float32))
        else:
            self.fields[i][0].from_numpy(pts[layer["pairs"]].reshape(-1, 3).astype(np.float32))
        self.loaded[i] = key

    def _orbit(self):
        """Left-drag: turn the camera about the target, keeping its distance."""
        cursor = np.asarray(self.window.get_cursor_pos(), dtype=np.float64)
        if self.window.is_pressed(ti.ui.LMB) and self.last_cursor is not None:
            dx, dy = cursor - self.last_cursor
            eye = np.asarray(self.camera.curr_position, dtype=np.float64)
            d = eye - self.target
            r = np.linalg.norm(d)
            yaw = math.atan2(d[0], d[2]) - 3.0 * dx
            pitch = float(np.clip(math.asin(np.clip(d[1] / r, -1, 1)) - 3.0 * dy, -1.5, 1.5))
            eye = self.target + r * np.array([math.cos(pitch) * math.sin(yaw), math.sin(pitch),
                                              math.cos(pitch) * math.cos(yaw)])
            self.camera.position(*eye)
            self.camera.lookat(*self.target)
        self.last_cursor = cursor

    def draw(self, k, hint=None):
        self._orbit()
        self.camera.track_user_inputs(self.window, movement_speed=0.03, hold_key=ti.ui.RMB)
        self.canvas.set_background_color((0.96, 0.96, 0.94))
        self.scene.set_camera(self.camera)
        self.scene.ambient_light((0.35, 0.35, 0.35))
        # a light above and to the left of the initial view: top, front and side faces get distinct shades
        self.scene.point_light(tuple(self.light), (0.85, 0.85, 0.85))
        if self.ground is not None:
            v, n, c = self.ground
            self.scene.mesh(v, normals=n, per_vertex_color=c, two_sided=True)
        for i, layer in enumerate(self.anim.layers):
            self._upload(i, layer, k)
            f = self.fields[i]
            if layer["kind"] == "mesh":
                self.scene.mesh(f[0], normals=f[1], color=layer["rgb"], two_sided=True)
            elif layer["kind"] == "particles":
                self.scene.particles(f[0], radius=layer["radius"], color=layer["rgb"])
            else:
                self.scene.lines(f[0], width=layer["width"], color=layer["rgb"])
        self.canvas.scene(self.scene)
        gui = self.window.get_gui()
        with gui.sub_window(self.title, 0.01, 0.01, 0.8, 0.13 if hint else 0.08) as w:
            w.text(self.anim.caption_at(k))
            if hint:
                w.text(hint)
        self.window.show()

    def pressed_keys(self):
        return [e.key for e in self.window.get_events(ti.ui.PRESS)]

    def close(self):
        try:
            self.window.destroy()
        except Exception:      # already gone with the closed window
            pass


class _TaichiErrorsOnly:
    """Taichi's log at 'error' level inside the block (then as before).

    The first GGUI frame compiles Taichi's own staging kernels, which warn "Assign may lose
    precision: f32 <- f64" under ti.init(default_fp=ti.f64): not ours to fix, nor the user's."""
    _LEVELS = ("trace", "debug", "info", "warn", "error", "critical")

    def __enter__(self):
        self.level = next((lv for lv in self._LEVELS if ti.is_logging_effective(lv)), "warn")
        ti.set_logging_level("error")

    def __exit__(self, *exc):
        ti.set_logging_level(self.level)


def play_ggui(anim, title, clock, handle_keys, hint=None):
    """Play `anim` (a `tigradsim.io.viz.Animation`) in a GGUI window, frame by `clock.frame()`
    (None ends), until the window closes or `handle_keys(keys pressed)` returns True."""
    if ti.lang.impl.get_runtime().prog is None:     # GGUI's fields need a Taichi runtime (a picture-only script)
        from ..core.runtime import ensure_init
        ensure_init()
    player = GGUIPlayer(anim, title)
    try:
        with _TaichiErrorsOnly():
            player.draw(0, hint=hint)
        clock.start = time.perf_counter()      # the first frame compiled kernels: start the clock after it
        while player.window.running:
            k = clock.frame()
            if k is None:
                break
            player.draw(k, hint=hint)
            if handle_keys(player.pressed_keys()):
                break
    finally:
        player.close()
