"""`Viewer`: the immediate-mode 2D drawer (one frame at a time, in a `ti.GUI` window or off screen) that
`show` and `play_video` use, and the pinhole projection it draws with (`look_at_projection`)."""
import math
import os
import sys

import numpy as np
import taichi as ti

_PREFIX = "[tigradsim]"


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
        """Flat-shaded triangles, painter-sorted back to front.  color: one 0xRRGGBB, or (F,) one per triangle
        (several meshes sorted together: `Animation.draw_2d`)."""
        v = np.asarray(vertices, dtype=np.float64)
        f = np.asarray(faces)
        p = self.project(v)
        tri = v[f]
        normals = np.cross(tri[:, 1] - tri[:, 0], tri[:, 2] - tri[:, 0])
        normals /= np.maximum(np.linalg.norm(normals, axis=1, keepdims=True), 1e-12)
        shade = 0.35 + 0.65 * np.abs(normals @ (np.asarray(light) / np.linalg.norm(light)))
        color = np.broadcast_to(np.asarray(color, dtype=np.int64), (len(f),))
        base = np.stack([(color >> 16) & 255, (color >> 8) & 255, color & 255], axis=1).astype(np.float64)
        rgb = np.clip(base * shade[:, None], 0, 255).astype(np.int64)
        colors = (rgb[:, 0] << 16) | (rgb[:, 1] << 8) | rgb[:, 2]
        depth = np.linalg.norm(tri.mean(axis=1) - self.eye, axis=1)
        order = np.argsort(depth)[::-1]                 # farthest first
        self.gui.triangles(p[f[order, 0]], p[f[order, 1]], p[f[order, 2]], color=colors[order])
        if edges is not None:
            self.edges(vertices, faces, color=edges)

    def edges(self, vertices, faces, color=0x305070):
        """The edges of triangles (vertices (V, 3) [m], faces (F, 3)) as thin lines."""
        p = self.project(np.asarray(vertices, dtype=np.float64))
        f = np.asarray(faces)
        e = np.concatenate([f[:, [0, 1]], f[:, [1, 2]], f[:, [2, 0]]])
        self.gui.lines(p[e[:, 0]], p[e[:, 1]], radius=0.5, color=color)

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
