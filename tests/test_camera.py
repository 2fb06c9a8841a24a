"""Calibrated (OpenCV) cameras and the differentiable camera correction (float64).

* `Camera.from_opencv`: world points land on OpenCV's pixel u = fx X/Z + cx,
  v = fy Y/Z + cy, through `project` + `ndc_to_pixel` and through the rendered
  image; non-square pixels and an off-centre principal point; look-at ->
  `to_opencv` -> `from_opencv` renders bit for bit the same; input errors.
* `SoftRasterizer.camera_delta` / `focal_scale`: Tape gradients against central
  differences at zero and at a non-zero correction, and a small fit that
  recovers a camera placed 1 cm and 0.5 degree off.
"""
import numpy as np
import pytest
import taichi as ti

import tigradsim as tgs
from tigradsim.renderers import (Camera, ImageMSE, SoftRasterizer, box, icosphere, rodrigues,
                                  rotation_vector)

RTOL = 1e-5


@pytest.fixture(scope="module", autouse=True)
def _f64():
    tgs.init(arch="cpu", precision="f64")
    yield


def _opencv_camera(W=64, H=48):
    """Non-square pixels (fx = 1.3 fy), principal point off the centre."""
    K = np.array([[70.0, 0.0, 27.3], [0.0, 53.8, 26.1], [0.0, 0.0, 1.0]])
    R = rodrigues([0.21, -0.43, 0.12])
    t = np.array([0.15, -0.2, 3.1])
    return Camera.from_opencv(K, R, t, W, H), K, R, t


def _opencv_pixels(K, R, t, pts):
    X = pts @ R.T + t
    return np.stack([K[0, 0] * X[:, 0] / X[:, 2] + K[0, 2], K[1, 1] * X[:, 1] / X[:, 2] + K[1, 2]], axis=-1)


# ------------------------------------------------------------- projection
def test_projection_matches_opencv_formula():
    cam, K, R, t = _opencv_camera()
    rng = np.random.default_rng(0)
    eye = -R.T @ t
    pts = eye + (R.T @ np.c_[rng.uniform(-1, 1, (50, 2)), rng.uniform(1.5, 5, 50)].T).T   # in front
    want = _opencv_pixels(K, R, t, pts)
    ndc = cam.project(pts)
    got = cam.ndc_to_pixel(ndc[:, :2])
    assert np.abs(got - want).max() < 1e-9
    assert np.abs(cam.project_pixels(pts)[:, :2] - want).max() < 1e-9
    assert np.allclose(ndc[:, 2], (pts @ R.T + t)[:, 2], rtol=1e-14)
    K2, R2, t2 = cam.to_opencv()
    assert np.array_equal(K2, K) and np.array_equal(R2, R) and np.array_equal(t2, t)


def test_lookat_camera_is_the_opencv_camera_of_design_section_7():
    cam = Camera(eye=(0.7, 1.1, 2.5), target=(0.1, 0.0, -0.3), up=(0, 1, 0), fov=47.0, width=40, height=30)
    K, R, t = cam.to_opencv()
    assert np.allclose(-R.T @ t, cam.eye, atol=1e-14)
    fwd = (cam.target - cam.eye) / np.linalg.norm(cam.target - cam.eye)
    assert np.allclose(R.T @ [0, 0, 1], fwd, atol=1e-14)
    assert np.isclose(np.tan(np.radians(47.0) / 2), 15.0 / K[0, 0], rtol=1e-14) and K[0, 0] == K[1, 1]
    assert (K[0, 2], K[1, 2]) == (19.5, 14.5)
    # its projection is the look-at formula x = x_c / (z_c tan(fov/2)) of the y-up view axes
    p = np.array([[0.3, 0.2, 0.1], [-0.2, 0.4, -0.5]])
    v = cam.world_to_view(p)
    s = np.tan(np.radians(47.0) / 2)
    assert np.allclose(cam.project(p)[:, :2], v[:, :2] / (v[:, 2:] * s), rtol=1e-12, atol=1e-14)


def test_tiny_triangle_renders_on_the_opencv_pixel():
    """The soft silhouette of a triangle ~1e-3 px across is a round blob (coverage
    depends on the distance to it); its centroid is the OpenCV pixel of the
    triangle's centroid, for non-square pixels and an off-centre principal point."""
    cam, K, R, t = _opencv_camera()
    eye = -R.T @ t
    centre = eye + R.T @ np.array([0.12, -0.08, 2.9])          # a point in view
    size = 2e-3 * 2.9 / K[0, 0]                                  # ~2e-3 px
    tri = centre + size * (R.T @ np.array([[1.0, 0, 0], [-0.5, 0.87, 0], [-0.5, -0.87, 0]]).T).T
    # sigma: a blob ~4 px wide (well sampled); coverage_eps: its tail cut at 1e-12
    sigma = 16.0 * (2.0 / 48) ** 2
    ren = SoftRasterizer(cam, np.array([[0, 1, 2]]), 3, sigma=sigma, coverage_eps=1e-12)
    a = ren.render_numpy(tri)[..., 0]
    rows, cols = np.mgrid[0:cam.height, 0:cam.width]
    got = np.array([(a * cols).sum(), (a * rows).sum()]) / a.sum()
    want = _opencv_pixels(K, R, t, tri.mean(0, keepdims=True))[0]
    assert a[0].max() < 1e-10 and a[-1].max() < 1e-10 and a[:, 0].max() < 1e-10 and a[:, -1].max() < 1e-10
    assert np.abs(got - want).max() < 1e-4, (got, want)


def test_non_square_pixels_and_principal_point_are_honoured():
    """A 1 m square at depth 2 m, facing the camera, under fx = 20, fy = 10: a
    10 x 5 px rectangle whose centre sits 0.25 px right/below the principal point
    (edges between pixel centres, sigma -> 0)."""
    K = np.array([[20.0, 0.0, 13.0], [0.0, 10.0, 7.0], [0.0, 0.0, 1.0]])
    cam = Camera.from_opencv(K, np.eye(3), np.zeros(3), 30, 16)
    c = np.array([0.25 * 2.0 / 20.0, 0.25 * 2.0 / 10.0, 2.0])       # projects to (13.25, 7.25)
    sq = c + np.array([[-0.5, -0.5, 0], [0.5, -0.5, 0], [0.5, 0.5, 0], [-0.5, 0.5, 0]])
    ren = SoftRasterizer(cam, np.array([[0, 1, 2], [0, 2, 3]]), 4, sigma=1e-9)
    a = ren.render_numpy(sq)[..., 0] > 0.5
    rows, cols = np.nonzero(a)
    assert (cols.min(), cols.max(), rows.min(), rows.max()) == (9, 18, 5, 9)
    assert a.sum() == 50


def test_lookat_to_opencv_round_trip_renders_identically():
    v, f = icosphere(1, 0.8)
    rng = np.random.default_rng(3)
    look = Camera(eye=(0.6, 0.4, 2.7), target=(0.05, -0.1, 0.0), fov=52, width=26, height=21)
    K, R, t = look.to_opencv()
    cv = Camera.from_opencv(K, R, t, 26, 21, near=look.near, far=look.far)
    assert np.array_equal(cv.to_opencv()[0], K) and np.array_equal(cv.R, R) and np.array_equal(cv.t, t)
    kw = dict(shading="lambert", sigma=2e-3, gamma=2e-2, vertex_colors=rng.random((len(v), 3)))
    a = SoftRasterizer(look, f, len(v), **kw).render_numpy(v)
    b = SoftRasterizer(cv, f, len(v), **kw).render_numpy(v)
    assert a[..., 3].sum() > 40 and np.array_equal(a, b)
    # replace() keeps the form a camera was made in
    moved = cv.replace(t=t + [0.1, 0, 0])
    assert moved.kind == "opencv" and np.allclose(moved.eye, look.eye - R.T @ [0.1, 0, 0])
    assert np.array_equal(moved.K, K) and moved.near == look.near
    assert look.replace(fov=30).kind == "look_at"
    with pytest.raises(TypeError, match="eye"):
        cv.replace(eye=(0, 0, 1))
    with pytest.raises(TypeError, match="K"):
        look.replace(K=K)


def test_rotation_vector_helpers():
    rng = np.random.default_rng(1)
    for w in [np.zeros(3), 1e-9 * rng.normal(size=3), rng.normal(size=3) * 0.7, np.array([0.0, 3.1, 0.0])]:
        R = rodrigues(w)
        assert np.allclose(R @ R.T, np.eye(3), atol=1e-14) and np.isclose(np.linalg.det(R), 1.0)
        assert np.allclose(rotation_vector(R), w, atol=1e-12)
    # an OpenCV rotation vector is accepted in place of R
    K = np.diag([30.0, 30.0, 1.0])
    w = np.array([0.1, 0.2, -0.3])
    a = Camera.from_opencv(K, w.reshape(3, 1), np.array([[0.0], [0.0], [2.0]]), 10, 10)
    assert np.array_equal(a.R, rodrigues(w)) and np.array_equal(a.t, [0.0, 0.0, 2.0])


def test_opencv_input_errors():
    K = np.array([[50.0, 0.0, 10.0], [0.0, 50.0, 8.0], [0.0, 0.0, 1.0]])
    R, t = np.eye(3), np.array([0.0, 0.0, 2.0])
    ok = dict(K=K, R=R, t=t, width=20, height=16)

    def bad(match, kind=ValueError, **kw):
        with pytest.raises(kind, match=match):
            Camera.from_opencv(**{**ok, **kw})

    bad(r"K must be a 3x3", K=K[:2])
    bad(r"skew", K=K + [[0, 0.5, 0], [0, 0, 0], [0, 0, 0]])
    bad(r"fx=-50", K=K * [[-1], [1], [1]])
    bad(r"last row", K=K * [[1], [1], [2]])
    bad(r"K contains a non-finite", K=K + [[np.nan, 0, 0], [0, 0, 0], [0, 0, 0]])
    bad(r"R is not orthonormal", R=R * 1.01)
    bad(r"determinant -1", R=np.diag([1.0, 1.0, -1.0]))
    bad(r"R must be a 3x3", R=np.eye(4))
    bad(r"t must be a translation", t=[1.0, 2.0])
    bad(r"t contains a non-finite", t=[0.0, np.inf, 1.0])
    bad(r"width", kind=TypeError, width=20.5)
    bad(r"near=1.0, far=0.5", near=1.0, far=0.5)
    with pytest.raises(ValueError, match="orthographic"):
        Camera(projection="orthographic").to_opencv()


# ------------------------------------------------- differentiable camera
def _camera_scene(frames=1):
    v, f = icosphere(1, 0.7)
    v2, f2 = box((0.4, 0.3, 0.5))
    verts = np.concatenate([v, v2 + [0.5, -0.3, -0.6]])
    faces = np.concatenate([f, f2 + len(v)]).astype(np.int32)
    cam, K, R, t = _opencv_camera()             # K is for 64 x 48 px: scaled to 26 x 22 with the image
    cam = cam.replace(K=K * [[0.4], [0.4], [1]] + [[0, 0, -2], [0, 0, -1.5], [0, 0, 0]], width=26, height=22)
    rng = np.random.default_rng(4)
    plate = 0.3 + 0.4 * rng.random((22, 26, 3))
    ren = SoftRasterizer(cam, faces, len(verts), frames=frames, shading="lambert", sigma=3e-3, gamma=1e-2,
                         vertex_colors=rng.random((len(verts), 3)), background=plate)
    X = ti.Vector.field(3, float, shape=(1, len(verts)), needs_grad=True)
    X.from_numpy(verts[None] - [0.0, 0.0, 0.3])
    ren.camera_delta.from_numpy(np.array([0.01, -0.02, 0.015, 0.03, -0.02, 0.05]))
    ren.focal_scale[None] = 1.04
    target = ren.render_numpy(X.to_numpy()[0]).copy()
    ren.reset_camera_correction()
    return ren, X, target


@pytest.mark.parametrize("at", ["zero", "nonzero"])
def test_camera_correction_gradients(at):
    ren, X, target = _camera_scene()
    img0 = ren.render_numpy(X.to_numpy()[0])
    assert 20 < img0[..., 3].sum() < 0.8 * img0[..., 3].size and np.abs(img0 - target).max() > 0.1
    if at == "nonzero":
        ren.camera_delta.from_numpy(np.array([-0.02, 0.01, 0.03, -0.04, 0.02, -0.03]))
        ren.focal_scale[None] = 0.97
    loss = ti.field(float, shape=(), needs_grad=True)
    mse = ImageMSE(ren.image, target[None])

    def run():
        ren.render(X, 0, 0)
        mse(loss)

    tgs.check_gradient(run, loss, [ren.camera_delta], n_dirs=3, eps=1e-6, rtol=RTOL).assert_ok()
    tgs.check_gradient(run, loss, [ren.focal_scale], n_dirs=1, eps=1e-6, rtol=RTOL).assert_ok()
    tgs.check_gradient(run, loss, [ren.camera_delta, ren.focal_scale, X], n_dirs=2, eps=1e-6,
                       rtol=RTOL).assert_ok()
    assert np.all(np.abs(ren.camera_delta.grad.to_numpy()) > 0) and ren.focal_scale.grad[None] != 0


def test_corrected_camera_renders_like_the_correction():
    ren, X, target = _camera_scene()
    omega, dt, k = np.array([0.02, -0.03, 0.01]), np.array([0.05, -0.02, 0.04]), 1.05
    ren.camera_delta.from_numpy(np.concatenate([omega, dt]))
    ren.focal_scale[None] = k
    a = ren.render_numpy(X.to_numpy()[0]).copy()
    cam = ren.corrected_camera()
    base = ren.camera
    assert np.allclose(cam.R, rodrigues(omega) @ base.R, atol=1e-15)
    assert np.allclose(cam.t, rodrigues(omega) @ base.t + dt, atol=1e-15)
    assert np.allclose([cam.fx, cam.fy], [k * base.fx, k * base.fy]) and (cam.cx, cam.cy) == (base.cx, base.cy)
    ren.reset_camera_correction()
    ren.set_camera(cam)
    b = ren.render_numpy(X.to_numpy()[0])
    assert np.abs(a - b).max() < 1e-9
    assert ren.camera_correction()[2] == 1.0 and not ren.camera_delta.to_numpy().any()


def test_orthographic_camera_correction():
    """The correction applies to orthographic cameras too (focal_scale zooms:
    ortho_scale / focal_scale); gradients and `corrected_camera` agree."""
    v, f = icosphere(1, 0.8)
    cam = Camera(eye=(0.4, 0.3, 3.0), width=20, height=16, projection="orthographic", ortho_scale=1.3)
    rng = np.random.default_rng(6)
    ren = SoftRasterizer(cam, f, len(v), shading="color", sigma=3e-3, gamma=1e-2,
                         vertex_colors=rng.random((len(v), 3)), background=(0.2, 0.4, 0.3))
    target = ren.render_numpy(v * 1.1 + [0.05, 0.0, 0.0])[None, ..., :3].copy()
    ren.camera_delta.from_numpy(np.array([0.03, -0.01, 0.02, 0.04, -0.03, 0.1]))
    ren.focal_scale[None] = 1.1
    a = ren.render_numpy(v).copy()
    corrected = ren.corrected_camera()
    assert corrected.projection == "orthographic" and np.isclose(corrected.ortho_scale, 1.3 / 1.1)
    plain = SoftRasterizer(corrected, f, len(v), shading="color", sigma=3e-3, gamma=1e-2,
                           vertex_colors=ren.vertex_colors.to_numpy(), background=(0.2, 0.4, 0.3))
    assert np.abs(plain.render_numpy(v) - a).max() < 1e-9
    X = ti.Vector.field(3, float, shape=(1, len(v)), needs_grad=True)
    X.from_numpy(v[None])
    loss = ti.field(float, shape=(), needs_grad=True)
    mse = ImageMSE(ren.image, target)

    def run():
        ren.render(X, 0, 0)
        mse(loss)

    tgs.check_gradient(run, loss, [ren.camera_delta, ren.focal_scale], n_dirs=3, eps=1e-6, rtol=RTOL).assert_ok()


def test_fit_recovers_camera_offset_of_1cm_and_half_a_degree():
    """A static scene of three coloured solids at different depths, rendered from
    the true camera; the renderer starts from a camera 1 cm and 0.5 degree off
    (in arbitrary directions); Adam then BFGS on `tgs.Param(camera_delta)` find it."""
    parts = [(icosphere(1, 0.35), [-0.5, 0.1, 0.3]), (box((0.5, 0.4, 0.3)), [0.45, -0.1, -0.4]),
             (icosphere(0, 0.25), [0.05, 0.45, -0.9])]
    verts, faces, n = [], [], 0
    for (v, f), shift in parts:
        verts.append(v + shift)
        faces.append(f + n)
        n += len(v)
    verts, faces = np.concatenate(verts), np.concatenate(faces).astype(np.int32)
    rng = np.random.default_rng(0)
    W, H = 48, 40
    K = np.array([[50.0, 0.0, 23.0], [0.0, 46.0, 20.5], [0.0, 0.0, 1.0]])
    _, R_true, t_true = Camera(eye=(0.4, 0.5, 2.6), target=(0, 0, -0.2), width=W, height=H).to_opencv()
    truth = Camera.from_opencv(K, R_true, t_true, W, H)
    axis = np.array([0.3, -0.8, 0.5])
    R_off = rodrigues(np.radians(0.5) * axis / np.linalg.norm(axis)) @ R_true
    shift = np.array([0.6, 0.2, -0.77])
    eye_off = truth.eye + 0.01 * shift / np.linalg.norm(shift)
    start = Camera.from_opencv(K, R_off, -R_off @ eye_off, W, H)
    ren = SoftRasterizer(truth, faces, len(verts), shading="lambert", sigma=2e-3, gamma=1e-2,
                         vertex_colors=rng.random((len(verts), 3)), background=0.35 + 0.3 * rng.random((H, W, 3)))
    target = ren.render_numpy(verts).copy()
    ren.set_camera(start)
    X = ti.Vector.field(3, float, shape=(1, len(verts)))
    X.from_numpy(verts[None])
    loss = ti.field(float, shape=(), needs_grad=True)
    mse = ImageMSE(ren.image, target[None])

    def forward():
        ren.render(X, 0, 0)
        mse(loss)

    def errors():
        cam = ren.corrected_camera()
        return (np.linalg.norm(cam.eye - truth.eye),
                np.degrees(np.linalg.norm(rotation_vector(cam.R @ truth.R.T))))

    assert np.allclose(errors(), (0.01, 0.5))
    pose = tgs.Param(ren.camera_delta, "camera_pose")
    tgs.optimize(forward, loss, tgs.Adam([pose], lr=2e-3), iters=30, log_every=0)
    tgs.optimize(forward, loss, tgs.BFGS([pose], lr=2e-3), iters=30, log_every=0)
    de, da = errors()
    assert de < 5e-4 and da < 0.01, (de, da)
