"""`Animation`: what a demo records to hand to `show` (meshes, particles, segments and a caption per frame),
checked as it is recorded, and drawn frame by frame with the 2D `Viewer`."""
import math

import numpy as np

from .viewer import Viewer


# colliders' triangles are cut until no edge is longer than this fraction of the drawn ground's half side
REFINE_FRACTION = 0.1
_REFINE_LEVELS = 6


def refine_triangles(vertices, faces, max_edge):
    """(vertices, faces) of the same surface with every triangle cut in four (at its edges' midpoints) until no
    edge is longer than `max_edge` [m] (at most 6 times); for the painter sort of the 2D viewer."""
    v = np.asarray(vertices, dtype=np.float64)
    tri = v[np.asarray(faces, dtype=np.int64)]                    # (F, 3, 3)
    for _ in range(_REFINE_LEVELS):
        length = np.linalg.norm(tri - np.roll(tri, 1, axis=1), axis=2).max(axis=1)
        cut = length > max_edge
        if not cut.any():
            break
        a, b, c = tri[cut, 0], tri[cut, 1], tri[cut, 2]
        ab, bc, ca = (a + b) / 2, (b + c) / 2, (c + a) / 2
        pieces = np.stack([np.stack(t, axis=1) for t in ((a, ab, ca), (ab, b, bc), (ca, bc, c), (ab, bc, ca))], 1)
        tri = np.concatenate([tri[~cut], pieces.reshape(-1, 3, 3)])
    return tri.reshape(-1, 3), np.arange(3 * len(tri), dtype=np.int64).reshape(-1, 3)


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
                                rgb=rgb, edges=edges, collider=False))
        return self

    def colliders(self, model, color=None, center=None, extent=None, edges=None):
        """Every static collider of `model` (`SceneBuilder.add_collider`, a scene file's [colliders]) as a static
        mesh layer, with the surfaces `tigradsim render` draws (`physics.collider_surfaces`): each at its current
        pose and size (fitted values included); a sphere, box, capsule or mesh as itself, a plane (infinite) as a
        square of half side `extent` [m] (default: `ground_extent`) centred on the foot of `center` [m] (default:
        the camera's target) on the plane.  With the ground drawn, the pieces wholly under it are left out.  The 2D
        viewer draws the colliders behind the objects (`draw_2d`).  color: 0xRRGGBB or (r, g, b) (default: the scene renders' collider
        colour, `COLLIDER_RGB`); edges as in `mesh`.  A model without colliders adds nothing.  Returns self."""
        from ..physics.collider_surfaces import COLLIDER_RGB, collider_surfaces
        if not hasattr(model, "force_terms"):
            raise TypeError(f"model: expected a tigradsim Model (SceneBuilder.finalize()), got {type(model).__name__}")
        center = self.target if center is None else center
        c = np.asarray(center, dtype=np.float64)
        if c.shape != (3,) or not np.all(np.isfinite(c)):
            raise ValueError(f"center={center!r}: expected a finite point (x, y, z) in metres")
        extent = self.ground_extent if extent is None else extent
        if not (isinstance(extent, (int, float, np.number)) and math.isfinite(extent) and extent > 0):
            raise ValueError(f"extent={extent!r}: expected a positive half side in metres (a plane's drawn square)")
        for vertices, faces in collider_surfaces(model, center=c, extent=float(extent)):
            # the 2D viewer sorts triangles by their centres: a plane's two triangles or a wall's big faces would
            # sort as one piece against the other colliders, so they are cut into pieces first
            vertices, faces = refine_triangles(vertices, faces, REFINE_FRACTION * float(extent))
            if self.ground:     # the ground hides what lies under it (a wall's square reaches below y = 0)
                faces = faces[(vertices[faces][:, :, 1] > -1e-9).any(axis=1)]
                if not len(faces):
                    continue
            self.mesh(vertices, faces, color=COLLIDER_RGB if color is None else color, edges=edges)
            self.layers[-1]["collider"] = True
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
        # the colliders first, then the objects, each in one painter sort over its meshes: the sort orders triangles
        # by their centres, and a cloth or a box lying on a collider's surface would poke through it in one sort
        # with the collider (an object behind a collider is drawn over it: the 3D window has a depth buffer)
        for colliders in (True, False):
            meshes = [layer for layer in self.layers if layer["kind"] == "mesh" and layer["collider"] == colliders]
            if not meshes:
                continue
            points, faces, colors, start = [], [], [], 0
            for layer in meshes:
                pts = self.at(layer, k)
                points.append(pts)
                faces.append(layer["faces"] + start)
                colors.append(np.full(len(layer["faces"]), layer["color"], dtype=np.int64))
                start += len(pts)
            viewer.triangles(np.concatenate(points), np.concatenate(faces), color=np.concatenate(colors), edges=None)
            for layer in meshes:
                if layer["edges"] is not None:
                    viewer.edges(self.at(layer, k), layer["faces"], color=layer["edges"])
        for layer in self.layers:
            pts = self.at(layer, k)
            if layer["kind"] == "mesh":
                continue
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
