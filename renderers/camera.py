"""Pinhole and orthographic cameras for the soft rasterizer.

Conventions (used everywhere in tigradsim.renderers):

* World space is right-handed; `up` is usually +y.
* View space: the camera sits at `eye` and looks along `forward =
  normalize(target - eye)`; `right = normalize(forward x up)`, `true_up =
  right x forward`.  A point's view coordinates are (x_c, y_c, z_c) =
  (dot(p - eye, right), dot(p - eye, true_up), dot(p - eye, forward)), so
  `z_c` is the (positive) depth in front of the camera.
* NDC (normalised device coordinates) follow PyTorch3D's scaling: the
  *shorter* image side spans [-1, 1], the longer one proportionally more, so
  pixels are square.  Unlike PyTorch3D (+x left) we use **+x right, +y up**
  (an image is not mirrored), and the third NDC coordinate we carry is the view
  depth z_c.  Perspective: x = x_c / (z_c tan(fov/2)), y = y_c / (z_c
  tan(fov/2)), with `fov` the full angle across the shorter side.
  Orthographic: x = x_c / ortho_scale, y = y_c / ortho_scale (`ortho_scale` is
  the half-extent, in world units, seen across the shorter side).
* Pixels: the image is indexed [row, col] with row 0 at the top.  The centre of
  pixel (i, j) lies at x = (2 j + 1 - W) / s, y = (H - 2 i - 1) / s, with
  s = min(W, H).
* Triangles whose projected vertices run counter-clockwise in NDC (+x right,
  +y up) face the camera (OpenGL convention); back-face culling drops the others.
"""
from __future__ import annotations

import math

import numpy as np

PROJECTIONS = ("perspective", "orthographic")


def _vec3(name, value):
    try:
        arr = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"Camera: {name}={value!r} is not a 3-vector of numbers") from exc
    if arr.shape != (3,):
        raise ValueError(f"Camera: {name} must be a 3-vector, got shape {arr.shape} ({value!r})")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"Camera: {name}={value!r} contains a non-finite value")
    return arr


def _positive_int(name, value):
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"Camera: {name}={value!r} must be an integer number of pixels")
    if value <= 0:
        raise ValueError(f"Camera: {name}={value} must be a positive number of pixels (got zero or negative)")
    return int(value)


class Camera:
    """A look-at camera with a perspective or orthographic projection.

    Args:
        eye, target, up: 3-vectors in world space (the camera must not look
            along `up`).
        fov: full field of view in degrees across the shorter image side
            (perspective only), in (0, 180).
        width, height: image size in pixels.
        near, far: depth range in world units, 0 < near < far.  Faces with a
            vertex at a depth <= `near` are dropped (no clipping); `near` and
            `far` also normalise depth for the soft z-buffer.
        projection: "perspective" or "orthographic".
        ortho_scale: half-extent (world units) seen across the shorter side in
            orthographic mode.
    """

    def __init__(self, eye=(0.0, 0.0, 3.0), target=(0.0, 0.0, 0.0), up=(0.0, 1.0, 0.0), fov=60.0,
                 width=64, height=64, near=0.1, far=100.0, projection="perspective", ortho_scale=1.0):
        self.eye = _vec3("eye", eye)
        self.target = _vec3("target", target)
        self.up = _vec3("up", up)
        self.width = _positive_int("width", width)
        self.height = _positive_int("height", height)
        if projection not in PROJECTIONS:
            raise ValueError(f"Camera: projection={projection!r} must be one of {PROJECTIONS}")
        self.projection = projection
        fov = float(fov)
        if not (0.0 < fov < 180.0):
            raise ValueError(f"Camera: fov={fov} degrees must lie in (0, 180)")
        self.fov = fov
        near, far = float(near), float(far)
        if not (near > 0.0 and far > near and math.isfinite(far)):
            raise ValueError(f"Camera: near={near}, far={far}: expected 0 < near < far < inf")
        self.near, self.far = near, far
        ortho_scale = float(ortho_scale)
        if not (ortho_scale > 0.0 and math.isfinite(ortho_scale)):
            raise ValueError(f"Camera: ortho_scale={ortho_scale} must be positive and finite")
        self.ortho_scale = ortho_scale

        fwd = self.target - self.eye
        n = np.linalg.norm(fwd)
        if n < 1e-12:
            raise ValueError(f"Camera: eye={tuple(self.eye)} and target={tuple(self.target)} coincide; "
                             "expected distinct points")
        fwd = fwd / n
        upn = np.linalg.norm(self.up)
        if upn < 1e-12:
            raise ValueError(f"Camera: up={tuple(self.up)} is the zero vector; expected a direction")
        right = np.cross(fwd, self.up / upn)
        rn = np.linalg.norm(right)
        if rn < 1e-6:
            raise ValueError(f"Camera: up={tuple(self.up)} is parallel to the viewing direction "
                             f"{tuple(np.round(fwd, 6))} (target - eye); expected an up vector not along the view")
        right = right / rn
        true_up = np.cross(right, fwd)
        self.rotation = np.stack([right, true_up, fwd])  # rows: right, up, forward

    # ------------------------------------------------------------------ helpers
    @property
    def perspective(self) -> bool:
        return self.projection == "perspective"

    @property
    def scale(self) -> float:
        """Divisor of the projection: tan(fov/2) (perspective) or ortho_scale."""
        return math.tan(math.radians(self.fov) / 2.0) if self.perspective else self.ortho_scale

    @property
    def ndc_scale(self) -> float:
        """Pixels per NDC unit times two: s = min(W, H)."""
        return float(min(self.width, self.height))

    def world_to_view(self, points) -> np.ndarray:
        """(N, 3) world points -> (N, 3) view coordinates (x_c, y_c, z_c)."""
        p = np.asarray(points, dtype=np.float64).reshape(-1, 3)
        return (p - self.eye) @ self.rotation.T

    def project(self, points) -> np.ndarray:
        """(N, 3) world points -> (N, 3): NDC x, NDC y and view depth z_c."""
        v = self.world_to_view(points)
        out = v.copy()
        if self.perspective:
            d = v[:, 2] * self.scale
            with np.errstate(divide="ignore", invalid="ignore"):
                out[:, 0] = v[:, 0] / d
                out[:, 1] = v[:, 1] / d
        else:
            out[:, :2] = v[:, :2] / self.scale
        return out

    def pixel_centers(self) -> np.ndarray:
        """(H, W, 2) NDC coordinates of the pixel centres."""
        W, H, s = self.width, self.height, self.ndc_scale
        x = (2.0 * np.arange(W) + 1.0 - W) / s
        y = (H - 2.0 * np.arange(H) - 1.0) / s
        return np.stack(np.meshgrid(x, y, indexing="xy"), axis=-1)

    def ndc_to_pixel(self, xy) -> np.ndarray:
        """(N, 2) NDC -> (N, 2) continuous (col, row) pixel coordinates (centres at integers)."""
        xy = np.asarray(xy, dtype=np.float64).reshape(-1, 2)
        s = self.ndc_scale
        col = (xy[:, 0] * s + self.width - 1.0) / 2.0
        row = (self.height - 1.0 - xy[:, 1] * s) / 2.0
        return np.stack([col, row], axis=-1)

    def pixel_size(self) -> float:
        """Width of one pixel in NDC units."""
        return 2.0 / self.ndc_scale

    def replace(self, **changes) -> "Camera":
        """A copy with some arguments changed (e.g. `cam.replace(eye=(1, 2, 3))`)."""
        args = dict(eye=self.eye, target=self.target, up=self.up, fov=self.fov, width=self.width,
                    height=self.height, near=self.near, far=self.far, projection=self.projection,
                    ortho_scale=self.ortho_scale)
        args.update(changes)
        return Camera(**args)

    def __repr__(self):
        return (f"Camera(eye={tuple(self.eye)}, target={tuple(self.target)}, up={tuple(self.up)}, "
                f"fov={self.fov}, width={self.width}, height={self.height}, near={self.near}, "
                f"far={self.far}, projection={self.projection!r}, ortho_scale={self.ortho_scale})")
