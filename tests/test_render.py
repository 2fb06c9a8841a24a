"""Renderer tests: camera conventions, coverage, symmetry, a numpy reference,
binning vs brute force, capacity growth, golden image, input errors, video helpers.

Run `TIGRADSIM_REGEN_GOLDEN=1 pytest tests/test_render.py -k golden` to rewrite
tests/data/render_golden.npz after an intended change of the renderer.
"""
import math
import os
from pathlib import Path

import numpy as np
import pytest
import taichi as ti

import tigradsim as tgs
from tigradsim.io import video
from tigradsim.renderers import Camera, RendererWarning, SoftRasterizer, icosphere, ImageMSE, SilhouetteMSE


DATA = Path(__file__).parent / "data"


@pytest.fixture(scope="module", autouse=True)
def _f64():
    tgs.init(arch="cpu", precision="f64")
    yield


# --------------------------------------------------------------------------
# A slow, plain-numpy SoftRas: an independent reference that follows the
# formulas of renderers/softras/ pixel by pixel and face by face (same
# cutoff: a pair counts when the pixel is inside or d^2 < sigma ln(1/eps - 1)).


def _seg_d2(p, a, b):
    e = b - a
    t = np.clip(np.dot(p - a, e) / (np.dot(e, e) + 1e-30), 0.0, 1.0)
    d = p - a - t * e
    return float(np.dot(d, d))


def softras_numpy(cam, verts, faces, sigma, gamma, shading="silhouette", color_mode="vertex",
                  vertex_colors=None, face_colors=None, lights=(), ambient=(0, 0, 0), background=(0, 0, 0),
                  cull_backfaces=False, coverage_eps=1e-4, depth_eps=1e-3, normals="flat", blend="coverage"):
    verts = np.asarray(verts, dtype=np.float64)
    P = cam.project(verts)
    centers = cam.pixel_centers()
    H, W = cam.height, cam.width
    r2 = sigma * math.log(1.0 / coverage_eps - 1.0)
    C = 1 if shading == "silhouette" else 4
    img = np.zeros((H, W, C))
    def lambert(n):
        s = np.array(ambient, dtype=np.float64).copy()
        for d, c in lights:
            d = np.asarray(d, dtype=np.float64)
            s += np.asarray(c) * max(float(np.dot(n, d / np.linalg.norm(d))), 0.0)
        return s

    shade = np.ones((len(faces), 3))
    vnormal = np.zeros_like(verts)
    for f, (i0, i1, i2) in enumerate(faces):
        n = np.cross(verts[i1] - verts[i0], verts[i2] - verts[i0])
        vnormal[[i0, i1, i2]] += n                   # area-weighted vertex normals
        shade[f] = lambert(n / np.linalg.norm(n))
    vnormal /= np.linalg.norm(vnormal, axis=1, keepdims=True)
    for i in range(H):
        for j in range(W):
            p = centers[i, j]
            logsum = 0.0
            terms = []
            for f, (i0, i1, i2) in enumerate(faces):
                a, b, c = P[i0], P[i1], P[i2]
                if min(a[2], b[2], c[2]) <= cam.near:
                    continue
                area = (b[0] - a[0]) * (c[1] - a[1]) - (b[1] - a[1]) * (c[0] - a[0])
                if abs(area) <= 1e-12 or (cull_backfaces and area <= 0):
                    continue
                w0 = ((c[0] - b[0]) * (p[1] - b[1]) - (c[1] - b[1]) * (p[0] - b[0])) / area
                w1 = ((a[0] - c[0]) * (p[1] - c[1]) - (a[1] - c[1]) * (p[0] - c[0])) / area
                w2 = 1.0 - w0 - w1
                inside = min(w0, w1, w2) >= 0
                d2 = min(_seg_d2(p, a[:2], b[:2]), _seg_d2(p, b[:2], c[:2]), _seg_d2(p, c[:2], a[:2]))
                if not (inside or d2 < r2):
                    continue
                bp = np.array([w0, w1, w2])
                if cam.perspective:
                    q = bp / np.array([a[2], b[2], c[2]])
                    bp = q / q.sum()
                bc = np.maximum(bp, 0.0)
                bc = bc / bc.sum()
                depth = bc @ np.array([a[2], b[2], c[2]])
                z = (cam.far - depth) / (cam.far - cam.near)
                x = (d2 if inside else -d2) / sigma
                D = 1.0 / (1.0 + math.exp(-x))
                logsum += -(max(x, 0.0) + math.log1p(math.exp(-abs(x))))
                if C > 1:
                    if color_mode == "vertex":
                        col = bc @ np.asarray(vertex_colors)[[i0, i1, i2]]
                    else:
                        col = np.asarray(face_colors)[f]
                    if shading == "lambert" and normals == "smooth":
                        n = bc @ vnormal[[i0, i1, i2]]
                        col = col * lambert(n / np.linalg.norm(n))
                    elif shading == "lambert":
                        col = col * shade[f]
                    terms.append((D, z, col))
            alpha = 1.0 - math.exp(logsum)
            if C == 1:
                img[i, j, 0] = alpha
            else:
                bg = np.asarray(background, dtype=np.float64)
                bg = bg[i, j] if bg.ndim == 3 else bg          # a plate or one colour
                if blend == "coverage":                      # A C + (1 - A) B
                    zmax = max([t[1] for t in terms], default=0.0)
                    num, den = np.zeros(3), 0.0
                    for D, z, col in terms:
                        w = D * math.exp((z - zmax) / gamma)
                        num = num + w * col
                        den += w
                    img[i, j, :3] = alpha * (num / den if terms else 0.0) + (1.0 - alpha) * bg
                else:                                        # softmax with a background term
                    zmax = max([depth_eps] + [t[1] for t in terms])
                    num = math.exp((depth_eps - zmax) / gamma) * bg
                    den = math.exp((depth_eps - zmax) / gamma)
                    for D, z, col in terms:
                        w = D * math.exp((z - zmax) / gamma)
                        num = num + w * col
                        den += w
                    img[i, j, :3] = num / den
                img[i, j, 3] = alpha
    return img


def _ortho_cam(w=32, h=32, **kw):
    return Camera(eye=(0, 0, 5), target=(0, 0, 0), up=(0, 1, 0), width=w, height=h,
                  projection="orthographic", ortho_scale=1.0, **kw)


def _two_triangles():
    """Two overlapping triangles at different depths (the nearer one is the second)."""
    v = np.array([[-0.7, -0.6, 0.0], [0.6, -0.5, 0.0], [-0.1, 0.7, 0.0],
                  [-0.4, 0.5, 0.3], [-0.2, -0.7, 0.35], [0.7, 0.2, 0.3]])
    f = np.array([[0, 1, 2], [3, 4, 5]], dtype=np.int32)
    return v, f


# ------------------------------------------------------------------ camera
def test_camera_conventions():
    cam = _ortho_cam(w=40, h=20)
    ndc = cam.project([[0.5, 0.25, 0.0]])
    assert np.allclose(ndc[0], [0.5, 0.25, 5.0])
    # shorter side (height 20) spans [-1, 1]; +x right, +y up, row 0 at the top
    c = cam.pixel_centers()
    assert c.shape == (20, 40, 2)
    assert np.isclose(c[0, 0, 0], -2 + 1 / 20) and np.isclose(c[0, 0, 1], 1 - 1 / 20)
    col, row = cam.ndc_to_pixel(c[3, 7])[0]
    assert np.isclose(col, 7) and np.isclose(row, 3)
    pcam = Camera(eye=(0, 0, 3), fov=90, width=8, height=8)
    assert np.allclose(pcam.project([[1.0, -0.5, 1.0]]), [[0.5, -0.25, 2.0]])


def test_image_orientation():
    """A triangle in the upper-right quadrant of the world appears top-right in image[row, col]."""
    v = np.array([[0.2, 0.2, 0.0], [0.9, 0.2, 0.0], [0.2, 0.9, 0.0]])
    ren = SoftRasterizer(_ortho_cam(16, 16), np.array([[0, 1, 2]]), 3, sigma=1e-6)
    a = ren.render_numpy(v)[..., 0]
    assert a[:8, 8:].sum() >= 8 and a[8:, :].sum() == 0 and a[:, :8].sum() == 0


# ---------------------------------------------------------------- coverage
def test_square_coverage_analytic_and_half_on_edge():
    # rectangle [-0.53, 0.53] x [-0.5, 0.55] (two triangles): pixel centres lie at
    # +-0.03125 + 0.0625 k, so 16 columns x 17 rows are inside; every centre is
    # >= 0.011 from the diagonal and the outline, so with sigma -> 0 coverage is 0 or 1.
    v = np.array([[-0.53, -0.5, 0], [0.53, -0.5, 0], [0.53, 0.55, 0], [-0.53, 0.55, 0]], dtype=np.float64)
    f = np.array([[0, 1, 2], [0, 2, 3]], dtype=np.int32)
    ren = SoftRasterizer(_ortho_cam(), f, 4, sigma=1e-8, cull_backfaces=True)
    a = ren.render_numpy(v)[..., 0]
    assert abs(a.sum() - 272.0) < 1e-6 and ((a > 0.5).sum() == 272)
    # the left edge exactly through the centres of column 15 (x = -0.03125)
    v2 = np.array([[-0.03125, -0.9, 0], [0.9, -0.9, 0], [-0.03125, 0.9, 0]])
    ren2 = SoftRasterizer(_ortho_cam(), np.array([[0, 1, 2]]), 3, sigma=1e-4)
    a2 = ren2.render_numpy(v2)[..., 0]
    rows = slice(8, 24)   # well away from the corners and the hypotenuse
    assert np.allclose(a2[rows, 15], 0.5, atol=1e-12)
    assert np.all(a2[rows, 16] > 0.5) and np.all(a2[rows, 14] < 0.5)


def test_symmetric_scene_gives_symmetric_image():
    v, f = icosphere(2, 0.8)
    cam = Camera(eye=(0, 0, 3), width=24, height=24)
    ren = SoftRasterizer(cam, f, len(v), shading="lambert", sigma=1e-4, gamma=1e-3,
                         lights=[((0, 0, 1), (0.7, 0.7, 0.7))], vertex_colors=(0.8, 0.5, 0.3))
    img = ren.render_numpy(v)
    assert img[..., 3].sum() > 50
    assert np.allclose(img, img[:, ::-1], atol=1e-9)
    assert np.allclose(img, img[::-1, :], atol=1e-9)


# ----------------------------------------------------- numpy reference check
@pytest.mark.parametrize("shading,color_mode,projection,cull,normals,blend", [
    ("silhouette", "vertex", "perspective", False, "flat", "coverage"),
    ("lambert", "vertex", "perspective", False, "flat", "coverage"),
    ("lambert", "vertex", "perspective", False, "flat", "softmax"),
    ("lambert", "face", "perspective", True, "smooth", "coverage"),
    ("color", "face", "orthographic", True, "flat", "softmax"),
    ("color", "face", "orthographic", True, "flat", "plate"),
])
def test_matches_numpy_reference(shading, color_mode, projection, cull, normals, blend):
    v, f = icosphere(1, 0.9)
    v = v + np.array([0.1, -0.05, 0.0])
    rng = np.random.default_rng(1)
    vc, fc = rng.random((len(v), 3)), rng.random((len(f), 3))
    cam = Camera(eye=(0.4, 0.3, 3.0), width=14, height=11, projection=projection, ortho_scale=1.2)
    kw = dict(sigma=2e-3, gamma=2e-2, shading=shading, color_mode=color_mode, vertex_colors=vc,
              face_colors=fc, lights=[((0.3, 1.0, 0.8), (0.6, 0.5, 0.4)), ((-1, 0, 0.2), (0.2, 0.3, 0.1))],
              ambient=(0.2, 0.25, 0.3), background=(0.1, 0.2, 0.3), cull_backfaces=cull, normals=normals,
              blend=blend)
    if blend == "plate":           # coverage blending over a per-pixel background plate
        kw.update(blend="coverage", background=rng.random((11, 14, 3)))
    ren = SoftRasterizer(cam, f, len(v), **kw)
    got = ren.render_numpy(v)
    want = softras_numpy(cam, v, f, **kw)
    assert np.abs(got - want).max() < 1e-9


# -------------------------------------------------------- binning vs brute
@pytest.mark.slow
def test_binning_matches_brute_force_image_and_gradient():
    v, f = icosphere(1, 0.8)
    v2, f2 = _two_triangles()
    verts = np.concatenate([v, v2 * 1.2 + [0, 0, 0.2]])
    faces = np.concatenate([f, f2 + len(v)])
    cam = Camera(eye=(0.2, 0.1, 3), width=20, height=18)
    rng = np.random.default_rng(3)
    X = ti.Vector.field(3, float, shape=(1, len(verts)), needs_grad=True)
    X.from_numpy(verts[None])
    loss = ti.field(float, shape=(), needs_grad=True)
    results = []
    tgt = rng.random((1, 18, 20, 3))
    for binning in (True, False):
        ren = SoftRasterizer(cam, faces, len(verts), shading="lambert", sigma=3e-3, gamma=3e-2, binning=binning,
                             vertex_colors=rng.random((len(verts), 3)) * 0 + 0.7, tile_size=4)
        mse = ImageMSE(ren.image, tgt)
        with ti.ad.Tape(loss):
            ren.render(X, 0, 0)
            mse(loss)
        results.append((ren.image.to_numpy(), X.grad.to_numpy(), ren.light_dir.grad.to_numpy(), ren.pair_count))
    (i1, g1, l1, n1), (i2, g2, l2, n2) = results
    assert n1 == n2 and n1 < 18 * 20 * len(faces) / 4
    assert np.allclose(i1, i2, atol=1e-12)
    assert np.allclose(g1, g2, rtol=1e-9, atol=1e-12)
    assert np.allclose(l1, l2, rtol=1e-9, atol=1e-12)
    assert np.abs(g1).max() > 0


def test_capacities_grow_and_memory_is_sparse():
    v, f = icosphere(3, 1.0)                     # 1280 faces: tiles hold more than the initial 64
    cam = Camera(eye=(0, 0, 3), width=16, height=16)
    ren = SoftRasterizer(cam, f, len(v), sigma=1e-4, tile_size=8, pixel_lanes=False)   # the pair list
    assert ren.tile_capacity == 64
    a = ren.render_numpy(v)
    assert ren.regrows >= 1 and ren.tile_capacity > 64
    ref = SoftRasterizer(cam, f, len(v), sigma=1e-4, binning=False)
    assert np.allclose(ref.render_numpy(v), a, atol=1e-12)
    assert ren.pair_count < 16 * 16 * len(f) / 20    # O(pixels x faces near a pixel)


# ------------------------------------------------------------------ golden
def _golden_scene():
    """The golden image was made with SoftRas's softmax blending (the default before
    blend="coverage"); gamma 1e-4 with it triggers the no-colour-gradient warning."""
    v, f = icosphere(2, 0.9)
    cam = Camera(eye=(0.5, 0.8, 2.8), target=(0, 0.05, 0), width=24, height=20, fov=55)
    with pytest.warns(RendererWarning, match="blend='coverage'"):
        ren = SoftRasterizer(cam, f, len(v), frames=2, shading="lambert", sigma=1e-4, gamma=1e-4,
                             vertex_colors=0.5 + 0.5 * v / 0.9, background=(0.1, 0.1, 0.15),
                             lights=[((0.5, 1.0, 0.6), (0.8, 0.8, 0.7))], ambient=(0.25, 0.25, 0.3),
                             blend="softmax")
    X = ti.Vector.field(3, float, shape=(2, len(v)))
    X.from_numpy(np.stack([v, v * [1.2, 0.8, 1.0] + [0.1, 0, 0]]))
    ren.render(X, 0, 0)
    ren.render(X, 1, 1)
    return ren.image.to_numpy()


def test_golden_image():
    img = _golden_scene()
    path = DATA / "render_golden.npz"
    if os.environ.get("TIGRADSIM_REGEN_GOLDEN"):
        DATA.mkdir(exist_ok=True)
        np.savez_compressed(path, image=img)
    want = np.load(path)["image"]
    assert img.shape == want.shape
    assert np.abs(img - want).max() < 1e-6


# ------------------------------------------------------------------ errors
def test_input_errors():
    v, f = icosphere(0, 1.0)
    cam = Camera(width=8, height=8)
    with pytest.raises(ValueError, match="faces.*12"):
        SoftRasterizer(cam, np.array([[0, 1, 12]]), 12)
    with pytest.raises(ValueError, match="faces.*shape"):
        SoftRasterizer(cam, np.array([[0, 1]]), 12)
    with pytest.raises(TypeError, match="faces.*integer"):
        SoftRasterizer(cam, f.astype(float), 12)
    with pytest.raises(ValueError, match="sigma"):
        SoftRasterizer(cam, f, 12, sigma=0.0)
    with pytest.raises(ValueError, match="gamma"):
        SoftRasterizer(cam, f, 12, gamma=-1e-4)
    with pytest.raises(ValueError, match="shading"):
        SoftRasterizer(cam, f, 12, shading="phong")
    with pytest.raises(ValueError, match="vertex_ids"):
        SoftRasterizer(cam, f, 12, vertex_ids=np.arange(5))
    with pytest.raises(ValueError, match=r"pixel_offsets.*\(12, 2\)"):
        SoftRasterizer(cam, f, 12, pixel_offsets=np.zeros((12, 3)))
    with pytest.raises(ValueError, match="pixel_offsets.*finite.*row 7"):
        SoftRasterizer(cam, f, 12, pixel_offsets=np.where(np.arange(24).reshape(12, 2) == 15, np.inf, 0.0))
    with pytest.raises(ValueError, match="up"):
        Camera(eye=(0, 3, 0), target=(0, 0, 0), up=(0, 1, 0))
    with pytest.raises(ValueError, match="width"):
        Camera(width=0, height=8)
    with pytest.raises(ValueError, match="height"):
        Camera(width=8, height=0)
    with pytest.raises(ValueError, match="fov"):
        Camera(fov=180)
    ren = SoftRasterizer(cam, f, 12, vertex_offset=3)
    bad = v.copy()
    bad[4, 1] = np.nan
    with pytest.raises(ValueError, match="verts.*non-finite.*vertex 4"):
        ren.render_numpy(bad)
    with pytest.raises(ValueError, match=r"verts.*\(12, 3\)"):
        ren.render_numpy(v[:5])
    X = ti.Vector.field(3, float, shape=(2, 14))
    with pytest.raises(ValueError, match="vertex_ids.*14"):
        ren.render(X, 0, 0)                      # offset 3 + 12 vertices > 14
    X2 = ti.Vector.field(2, float, shape=(2, 20))
    with pytest.raises(ValueError, match="verts"):
        ren.render(X2, 0, 0)
    X3 = ti.Vector.field(3, float, shape=(2, 20))
    with pytest.raises(IndexError, match="slot"):
        ren.render(X3, 2, 0)
    with pytest.raises(IndexError, match="frame"):
        ren.render(X3, 0, 1)
    with pytest.raises(ValueError, match="target"):
        ImageMSE(ren.image, np.zeros((1, 4, 4)))
    with pytest.raises(ValueError, match="frames"):
        SilhouetteMSE(ren.image, np.zeros((1, 8, 8)), frames=[3])
    ren.sigma = 1e-3
    with pytest.raises(ValueError, match="sigma"):
        ren.sigma = -1.0


def test_vertex_ids_and_offset_read_the_right_particles():
    v, f = icosphere(1, 0.8)
    cam = Camera(eye=(0, 0, 3), width=12, height=12)
    ids = np.random.default_rng(0).permutation(len(v) + 5)[:len(v)]
    ren = SoftRasterizer(cam, f, len(v), vertex_ids=ids)
    X = ti.Vector.field(3, float, shape=(3, len(v) + 5))
    arr = np.full((3, len(v) + 5, 3), 50.0)
    arr[2, ids] = v
    X.from_numpy(arr)
    ren.render(X, 2, 0)
    ref = SoftRasterizer(cam, f, len(v)).render_numpy(v)
    assert np.allclose(ren.image.to_numpy()[0], ref, atol=1e-12)


@pytest.mark.parametrize("shading", ["silhouette", "lambert"])
def test_pixel_offsets_move_the_image_by_whole_pixels(shading):
    """pixel_offsets (du, dv) of every vertex: the same image moved by (du, dv) pixels (pixel centres
    land on pixel centres), shading unchanged (normals and depths are the unmoved vertices')."""
    v, f = icosphere(2, 0.5)
    cam = Camera(eye=(0.2, 0.1, 3.0), width=40, height=32)
    kw = dict(shading=shading, sigma=2e-3, color_mode="face", face_colors=(0.8, 0.6, 0.3)) \
        if shading == "lambert" else dict(sigma=2e-3)
    ref = SoftRasterizer(cam, f, len(v), **kw).render_numpy(v)
    du, dv = 7, -4
    moved = SoftRasterizer(cam, f, len(v), pixel_offsets=np.tile([du, dv], (len(v), 1)), **kw).render_numpy(v)
    expect = np.zeros_like(ref) + ref[0, 0]            # the background where nothing lands
    expect[max(dv, 0):ref.shape[0] + min(dv, 0), max(du, 0):ref.shape[1] + min(du, 0)] = \
        ref[max(-dv, 0):ref.shape[0] - max(dv, 0), max(-du, 0):ref.shape[1] - max(du, 0)]
    assert ref[..., -1].max() > 0.9 and np.abs(moved - ref).max() > 0.5       # a visible object, moved
    np.testing.assert_allclose(moved, expect, atol=1e-12)


# ------------------------------------------------------------------- video
def test_video_helpers_roundtrip(tmp_path):
    rng = np.random.default_rng(0)
    frames = rng.random((3, 10, 12, 3))
    paths = video.save_frames(frames, tmp_path / "png", prefix="f")
    assert len(paths) == 3 and paths[0].endswith("f_0000.png")
    back = video.load_video(tmp_path / "png")
    assert back.shape == (3, 10, 12, 3) and back.dtype == np.uint8
    assert np.abs(back / 255.0 - frames).max() <= 0.5 / 255 + 1e-9
    gif = video.save_gif(frames[..., 0], tmp_path / "a.gif", fps=10)
    g = video.load_video(gif)
    assert g.shape[0] == 3 and g.shape[1:3] == (10, 12)
    # a PNG folder is a valid loss target
    sil = SilhouetteMSE(SoftRasterizer(_ortho_cam(12, 10), np.array([[0, 1, 2]]), 3, frames=3).image,
                        str(tmp_path / "png"))
    assert sil.target.shape == (3, 10, 12)
    import importlib.util
    if importlib.util.find_spec("imageio_ffmpeg") is None:
        with pytest.raises(RuntimeError, match="pip install imageio-ffmpeg"):
            video.save_mp4(frames, tmp_path / "a.mp4")
    else:
        video.save_mp4(frames, tmp_path / "a.mp4")
        assert video.load_video(tmp_path / "a.mp4").shape[0] == 3


@pytest.mark.slow
def test_empty_view_and_faces_behind_the_camera():
    v, f = icosphere(1, 0.5)
    cam = Camera(eye=(0, 0, 3), width=12, height=12, near=0.5)
    ren = SoftRasterizer(cam, f, len(v), shading="color", background=(0.2, 0.3, 0.4))
    X = ti.Vector.field(3, float, shape=(1, len(v)), needs_grad=True)
    loss = ti.field(float, shape=(), needs_grad=True)
    mse = ImageMSE(ren.image, np.zeros((1, 12, 12, 4)))
    for shift, expect_pairs in (((10.0, 0, 0), False), ((0, 0, 2.8), None), ((0, 0, 0), True)):
        X.from_numpy((v + shift)[None])           # off screen / straddling the near plane / in view
        with ti.ad.Tape(loss):
            ren.render(X, 0, 0)
            mse(loss)
        img, g = ren.image.to_numpy()[0], X.grad.to_numpy()
        assert np.all(np.isfinite(img)) and np.all(np.isfinite(g))
        if expect_pairs is False:
            assert ren.pair_count == 0 and np.allclose(img[..., :3], [0.2, 0.3, 0.4]) and np.all(g == 0)
        if expect_pairs:
            assert ren.pair_count > 0 and np.abs(g).max() > 0
