"""Pinhole and orthographic cameras for the soft rasterizer: look-at or calibrated (OpenCV).

Every camera is held in one form, the one the rasterizer projects with
(`renderers/softras/projection.py`):

* **Extrinsics (OpenCV convention):** camera coordinates (X, Y, Z) = R x_world + t,
  with camera **x right, y down, z forward** (Z is the positive depth in front of
  the camera).  R (3x3, orthonormal, det +1) and t (3,) map world to camera; the
  camera centre is `eye = -R^T t`.
* **Intrinsics in pixels:** fx, fy, cx, cy.  Perspective: u = fx X/Z + cx,
  v = fy Y/Z + cy; orthographic: u = fx X + cx, v = fy Y + cy (fx, fy in pixels
  per world unit).  (u, v) = (column, row) with pixel centres at integers: the
  centre of pixel [row i, col j] is (u, v) = (j, i), a centred principal point is
  cx = W/2 - 0.5, cy = H/2 - 0.5.  Skew is zero.

tigradsim's normalised device coordinates (NDC) follow PyTorch3D's scaling, but
with **+x right, +y up** (an image is not mirrored): the *shorter* image side
spans [-1, 1], s = min(W, H), and

    x_ndc = (2 u + 1 - W) / s,    y_ndc = (H - 2 v - 1) / s,

so the centre of pixel (i, j) lies at x = (2 j + 1 - W) / s, y = (H - 2 i - 1) / s
(DESIGN.md section 7).  The third coordinate the rasterizer carries is the depth Z.
The image is indexed [row, col] with row 0 at the top.

Two constructors:

* `Camera(eye, target, up, fov, width, height, ...)`: look-at.  `forward =
  normalize(target - eye)`, `right = normalize(forward x up)`, `true_up = right x
  forward`; R has rows (right, -true_up, forward), t = -R eye, fx = fy =
  (s / 2) / tan(fov / 2) (fov is the full angle across the shorter side),
  cx = (W - 1) / 2, cy = (H - 1) / 2.  Orthographic: fx = fy = (s / 2) / ortho_scale
  (`ortho_scale`: half-extent in world units seen across the shorter side).
  Equivalently, in the view coordinates (x_c, y_c, z_c) = (X, -Y, Z) (y up):
  x_ndc = x_c / (z_c tan(fov/2)), y_ndc = y_c / (z_c tan(fov/2)).
* `Camera.from_opencv(K, R, t, width, height)`: a calibrated pinhole camera
  (non-square pixels and an off-centre principal point allowed; perspective only).

`cam.to_opencv()` gives (K, R, t) for every perspective camera; a look-at camera
and `Camera.from_opencv(*cam.to_opencv(), W, H, near, far)` render bit for bit the
same images.

Triangles whose projected vertices run counter-clockwise in NDC (+x right, +y up)
face the camera (OpenGL convention); back-face culling drops the others.
"""
from __future__ import annotations

import math

import numpy as np

PROJECTIONS = ("perspective", "orthographic")

# Largest |R R^T - I| entry accepted for a calibrated rotation (files often keep 6-8 digits).
ORTHONORMAL_TOL = 1e-5

_LOOK_AT_ARGS = ("eye", "target", "up", "fov", "width", "height", "near", "far", "projection", "ortho_scale")
_OPENCV_ARGS = ("K", "R", "t", "width", "height", "near", "far")


def _vec3(name, value, who="Camera"):
    try:
        arr = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{who}: {name}={value!r} is not a 3-vector of numbers") from exc
    if arr.shape != (3,):
        raise ValueError(f"{who}: {name} must be a 3-vector, got shape {arr.shape} ({value!r})")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{who}: {name}={value!r} contains a non-finite value")
    return arr


def check_image_size(name, value, who="Camera"):
    """`value` as a positive int number of pixels (an image width or height); TypeError or ValueError
    naming `name` and the value otherwise."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{who}: {name}={value!r} must be an integer number of pixels")
    if value <= 0:
        raise ValueError(f"{who}: {name}={value} must be a positive number of pixels (got zero or negative)")
    return int(value)


def check_principal_point(cx, cy, width, height, who="Camera.from_opencv"):
    """Raise ValueError unless the principal point (cx, cy) [px] lies in the width x height image
    (pixel centres at integers: -0.5 <= cx <= W - 0.5, -0.5 <= cy <= H - 0.5).  One check for the
    Python API (`Camera.from_opencv`) and the scene file ([camera] K)."""
    if -0.5 <= cx <= width - 0.5 and -0.5 <= cy <= height - 0.5:
        return
    centre = f"; expected a point near the image centre ({0.5 * (width - 1):g}, {0.5 * (height - 1):g})"
    hint = centre + " (cx, cy are pixels of this image: column and row from the centre of the top-left pixel)"
    cal_w, cal_h = 2.0 * cx + 1.0, 2.0 * cy + 1.0
    if cx > 0 and cy > 0 and abs(cal_w / width - cal_h / height) < 0.1 * cal_w / width:
        # the same scale on both axes: K was calibrated on an image of another size
        hint = (centre + f": K looks calibrated on an image of about {cal_w:.0f}x{cal_h:.0f} px; scale fx, fy, "
                f"cx + 0.5 and cy + 0.5 by {width}/{cal_w:.0f} for this {width}x{height} image")
    raise ValueError(f"{who}: principal point ({float(cx)}, {float(cy)}) lies outside the {width}x{height} image (width, "
                     f"height): -0.5 <= cx <= {width - 0.5:g} and -0.5 <= cy <= {height - 0.5:g} [px]{hint}")


def _near_far(near, far, who="Camera"):
    try:
        near, far = float(near), float(far)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{who}: near={near!r}, far={far!r} must be numbers") from exc
    if not (near > 0.0 and far > near and math.isfinite(far)):
        raise ValueError(f"{who}: near={near}, far={far}: expected 0 < near < far < inf")
    return near, far


def _array(name, value, who):
    try:
        arr = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{who}: {name}={value!r} is not an array of numbers") from exc
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{who}: {name} contains a non-finite value: {arr.tolist()}")
    return arr


def rodrigues(omega) -> np.ndarray:
    """Rotation matrix exp([omega]_x) of a rotation vector omega (3,) [rad] (axis times
    angle; OpenCV's `cv2.Rodrigues`): R = I + sin(a)/a W + (1 - cos(a))/a^2 W^2, W = [omega]_x."""
    w = np.asarray(omega, dtype=np.float64).reshape(3)
    a2 = float(w @ w)
    W = np.array([[0.0, -w[2], w[1]], [w[2], 0.0, -w[0]], [-w[1], w[0], 0.0]])
    if a2 < 1e-16:
        sa, ca = 1.0 - a2 / 6.0, 0.5 - a2 / 24.0
    else:
        a = math.sqrt(a2)
        sa, ca = math.sin(a) / a, 2.0 * math.sin(0.5 * a) ** 2 / a2
    return np.eye(3) + sa * W + ca * (W @ W)


def rotation_vector(R) -> np.ndarray:
    """The rotation vector omega (3,) [rad] of a rotation matrix (inverse of `rodrigues`,
    angle in [0, pi])."""
    R = np.asarray(R, dtype=np.float64)
    c = np.clip(0.5 * (np.trace(R) - 1.0), -1.0, 1.0)
    a = math.acos(c)
    v = np.array([R[2, 1] - R[1, 2], R[0, 2] - R[2, 0], R[1, 0] - R[0, 1]])
    if a < 1e-6:
        return 0.5 * v
    if a > math.pi - 1e-6:                 # axis from the symmetric part (sin a ~ 0)
        B = 0.5 * (R + np.eye(3))
        k = int(np.argmax(np.diag(B)))
        axis = B[:, k] / math.sqrt(max(B[k, k], 1e-300))
        return a * axis / np.linalg.norm(axis)
    return a / (2.0 * math.sin(a)) * v


def _check_K(K, who):
    K = _array("K", K, who)
    if K.shape != (3, 3):
        raise ValueError(f"{who}: K must be a 3x3 intrinsic matrix [[fx, 0, cx], [0, fy, cy], [0, 0, 1]], "
                         f"got shape {K.shape}")
    fx, fy, cx, cy = K[0, 0], K[1, 1], K[0, 2], K[1, 2]
    if not (fx > 0.0 and fy > 0.0):
        raise ValueError(f"{who}: K has fx={fx}, fy={fy}; expected focal lengths > 0 (pixels)")
    if K[0, 1] != 0.0:
        raise ValueError(f"{who}: K[0, 1] (skew) = {K[0, 1]}; only zero skew is supported "
                         "(expected K = [[fx, 0, cx], [0, fy, cy], [0, 0, 1]])")
    if K[1, 0] != 0.0 or not np.allclose(K[2], [0.0, 0.0, 1.0], rtol=0.0, atol=1e-12):
        raise ValueError(f"{who}: K={K.tolist()} is not of the form [[fx, 0, cx], [0, fy, cy], [0, 0, 1]] "
                         f"(K[1, 0] = {K[1, 0]}, last row {K[2].tolist()})")
    return float(fx), float(fy), float(cx), float(cy)


def _check_R(R, who):
    R = _array("R", R, who)
    if R.shape in ((3,), (3, 1), (1, 3)):          # OpenCV rotation vector (rvec)
        return rodrigues(R.reshape(3))
    if R.shape != (3, 3):
        raise ValueError(f"{who}: R must be a 3x3 rotation matrix (world to camera) or a rotation vector "
                         f"of shape (3,), got shape {R.shape}")
    err = float(np.abs(R @ R.T - np.eye(3)).max())
    if err > ORTHONORMAL_TOL:
        raise ValueError(f"{who}: R is not orthonormal (max |R R^T - I| = {err:.3g} > {ORTHONORMAL_TOL:g}); "
                         f"expected a rotation matrix, got {R.tolist()}")
    det = float(np.linalg.det(R))
    if det < 0.0:
        raise ValueError(f"{who}: R has determinant {det:.6g}; expected +1 (a rotation, not a reflection)")
    return R.copy()


def _check_t(t, who):
    t = _array("t", t, who)
    if t.size != 3 or t.shape not in ((3,), (3, 1), (1, 3)):
        raise ValueError(f"{who}: t must be a translation 3-vector (shape (3,) or (3, 1)), got shape {t.shape}")
    return t.reshape(3).copy()


class Camera:
    """A perspective or orthographic camera (look-at form; see `from_opencv` for a calibrated one).

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

    Attributes (every camera): `R` (3, 3), `t` (3,) world-to-camera (OpenCV axes),
    `fx`, `fy`, `cx`, `cy` [px], `K` (3, 3), `eye` (camera centre), `rotation`
    (rows right, up, forward: the y-up view axes), `width`, `height`, `near`, `far`,
    `projection`, `kind` ("look_at" or "opencv").  Look-at cameras also keep the
    `target`, `up`, `fov` and `ortho_scale` they were made with; for an OpenCV camera
    `target` is the point 1 m ahead of the camera, `up` the camera's up direction
    (-y) and `fov` the angle across the shorter side, 2 atan((s/2) / f) with f the
    focal length along that side.
    """

    def __init__(self, eye=(0.0, 0.0, 3.0), target=(0.0, 0.0, 0.0), up=(0.0, 1.0, 0.0), fov=60.0,
                 width=64, height=64, near=0.1, far=100.0, projection="perspective", ortho_scale=1.0):
        self.eye = _vec3("eye", eye)
        self.target = _vec3("target", target)
        self.up = _vec3("up", up)
        self.width = check_image_size("width", width)
        self.height = check_image_size("height", height)
        if projection not in PROJECTIONS:
            raise ValueError(f"Camera: projection={projection!r} must be one of {PROJECTIONS}")
        self.projection = projection
        fov = float(fov)
        if not (0.0 < fov < 180.0):
            raise ValueError(f"Camera: fov={fov} degrees must lie in (0, 180)")
        self.fov = fov
        self.near, self.far = _near_far(near, far)
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
        self.kind = "look_at"
        self.R = np.stack([right, -true_up, fwd])        # OpenCV axes: x right, y down, z forward
        self.t = -self.R @ self.eye
        half = 0.5 * self.ndc_scale
        f = half / (math.tan(math.radians(self.fov) / 2.0) if self.perspective else self.ortho_scale)
        self.fx = self.fy = f
        self.cx, self.cy = 0.5 * (self.width - 1.0), 0.5 * (self.height - 1.0)

    @classmethod
    def from_opencv(cls, K, R, t, width, height, near=0.1, far=100.0) -> "Camera":
        """A calibrated pinhole camera in OpenCV's convention.

        Args:
            K: (3, 3) intrinsics [[fx, 0, cx], [0, fy, cy], [0, 0, 1]] in pixels, pixel
                centres at integer (u, v); fx, fy > 0 (they may differ), any cx, cy;
                zero skew only.
            R: (3, 3) world-to-camera rotation (orthonormal within 1e-5, det +1), or an
                OpenCV rotation vector of shape (3,) / (3, 1) (`cv2.Rodrigues`).
            t: (3,) or (3, 1) world-to-camera translation [world units]: a world point x
                has camera coordinates R x + t (x right, y down, z forward).
            width, height: image size [px].
            near, far: depth range [world units], as for the look-at camera.
        A world point projects to u = fx X/Z + cx, v = fy Y/Z + cy (column, row).
        """
        who = "Camera.from_opencv"
        fx, fy, cx, cy = _check_K(K, who)
        Rm = _check_R(R, who)
        tv = _check_t(t, who)
        cam = cls.__new__(cls)
        cam.width = check_image_size("width", width, who)
        cam.height = check_image_size("height", height, who)
        check_principal_point(cx, cy, cam.width, cam.height, who)
        cam.near, cam.far = _near_far(near, far, who)
        cam.projection = "perspective"
        cam.kind = "opencv"
        cam.R, cam.t = Rm, tv
        cam.fx, cam.fy, cam.cx, cam.cy = fx, fy, cx, cy
        cam.eye = -Rm.T @ tv
        cam.target = cam.eye + Rm[2]
        cam.up = -Rm[1].copy()
        f_short = fx if cam.width <= cam.height else fy
        cam.fov = math.degrees(2.0 * math.atan(0.5 * cam.ndc_scale / f_short))
        cam.ortho_scale = 1.0
        return cam

    def to_opencv(self):
        """(K (3, 3), R (3, 3), t (3,)): this camera in OpenCV's convention (perspective only).

        For a look-at camera: R rows (right, -up, forward), t = -R eye,
        fx = fy = (min(W, H) / 2) / tan(fov / 2), (cx, cy) = ((W - 1) / 2, (H - 1) / 2).
        """
        if not self.perspective:
            raise ValueError("Camera.to_opencv: an orthographic camera has no pinhole matrix K; "
                             "expected projection='perspective'")
        return self.K, self.R.copy(), self.t.copy()

    # ------------------------------------------------------------------ helpers
    @property
    def K(self) -> np.ndarray:
        """(3, 3) intrinsic matrix [[fx, 0, cx], [0, fy, cy], [0, 0, 1]] [px]."""
        return np.array([[self.fx, 0.0, self.cx], [0.0, self.fy, self.cy], [0.0, 0.0, 1.0]])

    @property
    def rotation(self) -> np.ndarray:
        """(3, 3) rows right, up, forward: the y-up view axes (R with its second row negated)."""
        return self.R * np.array([[1.0], [-1.0], [1.0]])

    @property
    def perspective(self) -> bool:
        return self.projection == "perspective"

    @property
    def scale(self) -> float:
        """Divisor of the (square-pixel, centred) look-at projection: tan(fov/2)
        (perspective) or ortho_scale; (s / 2) / fy for any camera."""
        return 0.5 * self.ndc_scale / self.fy

    @property
    def ndc_scale(self) -> float:
        """Pixels per NDC unit times two: s = min(W, H)."""
        return float(min(self.width, self.height))

    def world_to_camera(self, points) -> np.ndarray:
        """(N, 3) world points -> (N, 3) OpenCV camera coordinates R x + t (y down)."""
        p = np.asarray(points, dtype=np.float64).reshape(-1, 3)
        return p @ self.R.T + self.t

    def world_to_view(self, points) -> np.ndarray:
        """(N, 3) world points -> (N, 3) view coordinates (x_c, y_c, z_c) = (X, -Y, Z) (y up)."""
        return self.world_to_camera(points) * np.array([1.0, -1.0, 1.0])

    def project_pixels(self, points) -> np.ndarray:
        """(N, 3) world points -> (N, 3): pixel column u, row v (centres at integers) and depth Z.

        Perspective u = fx X/Z + cx, v = fy Y/Z + cy; orthographic u = fx X + cx, v = fy Y + cy.
        """
        c = self.world_to_camera(points)
        out = c.copy()
        if self.perspective:
            with np.errstate(divide="ignore", invalid="ignore"):
                out[:, 0] = self.fx * (c[:, 0] / c[:, 2]) + self.cx
                out[:, 1] = self.fy * (c[:, 1] / c[:, 2]) + self.cy
        else:
            out[:, 0] = self.fx * c[:, 0] + self.cx
            out[:, 1] = self.fy * c[:, 1] + self.cy
        return out

    def project(self, points) -> np.ndarray:
        """(N, 3) world points -> (N, 3): NDC x, NDC y and depth Z (the rasterizer's arithmetic)."""
        out = self.project_pixels(points)
        s = self.ndc_scale
        x = (2.0 * out[:, 0] + 1.0 - self.width) / s
        y = (self.height - 2.0 * out[:, 1] - 1.0) / s
        out[:, 0], out[:, 1] = x, y
        return out

    def pixel_centers(self) -> np.ndarray:
        """(H, W, 2) NDC coordinates of the pixel centres."""
        W, H, s = self.width, self.height, self.ndc_scale
        x = (2.0 * np.arange(W) + 1.0 - W) / s
        y = (H - 2.0 * np.arange(H) - 1.0) / s
        return np.stack(np.meshgrid(x, y, indexing="xy"), axis=-1)

    def ndc_to_pixel(self, xy) -> np.ndarray:
        """(N, 2) NDC -> (N, 2) continuous (col, row) = (u, v) pixel coordinates (centres at integers)."""
        xy = np.asarray(xy, dtype=np.float64).reshape(-1, 2)
        s = self.ndc_scale
        col = (xy[:, 0] * s + self.width - 1.0) / 2.0
        row = (self.height - 1.0 - xy[:, 1] * s) / 2.0
        return np.stack([col, row], axis=-1)

    def pixel_size(self) -> float:
        """Width of one pixel in NDC units."""
        return 2.0 / self.ndc_scale

    def replace(self, **changes) -> "Camera":
        """A copy with some arguments changed, in the form the camera was made in:
        `cam.replace(eye=(1, 2, 3))` (look-at) or `cam.replace(t=..., K=...)` (OpenCV)."""
        names = _LOOK_AT_ARGS if self.kind == "look_at" else _OPENCV_ARGS
        bad = sorted(set(changes) - set(names))
        if bad:
            form = "Camera(...)" if self.kind == "look_at" else "Camera.from_opencv(...)"
            raise TypeError(f"Camera.replace: {bad} are not arguments of this camera (made by {form}); "
                            f"expected some of {names}")
        if self.kind == "look_at":
            args = dict(eye=self.eye, target=self.target, up=self.up, fov=self.fov, width=self.width,
                        height=self.height, near=self.near, far=self.far, projection=self.projection,
                        ortho_scale=self.ortho_scale)
            args.update(changes)
            return Camera(**args)
        args = dict(K=self.K, R=self.R, t=self.t, width=self.width, height=self.height, near=self.near,
                    far=self.far)
        args.update(changes)
        return Camera.from_opencv(**args)

    def __repr__(self):
        if self.kind == "opencv":
            return (f"Camera.from_opencv(K={self.K.tolist()}, R={self.R.tolist()}, t={self.t.tolist()}, "
                    f"width={self.width}, height={self.height}, near={self.near}, far={self.far})")
        return (f"Camera(eye={tuple(self.eye)}, target={tuple(self.target)}, up={tuple(self.up)}, "
                f"fov={self.fov}, width={self.width}, height={self.height}, near={self.near}, "
                f"far={self.far}, projection={self.projection!r}, ortho_scale={self.ortho_scale})")
