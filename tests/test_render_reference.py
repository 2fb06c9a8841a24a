"""Every fast path of the soft rasterizer against the slow numpy reference (renderers/softras/reference.py),
in float64: images, and Tape gradients against the reference's central finite differences along random
directions of every differentiable input (vertices, colours, lights, background, camera correction).

The paths: pixel lanes and the pair list for silhouettes, kept and recomputed frames, brute force without
binning, closed surfaces, pixel offsets; colour with vertex and face colours, coverage and softmax blending;
flat and smooth Lambert, culling, an orthographic camera, small tiles.  Tiny scenes (a tetrahedron and a
triangle, 16 x 16 pixels, two frames) so that the reference, a Python loop over pixels and faces, is quick.
"""
import numpy as np
import pytest
import taichi as ti

import tigradsim as tgs
from tigradsim.renderers import Camera, SoftRasterizer
from tigradsim.renderers.softras.reference import reference_gradient, reference_render, reference_settings

IMAGE_ATOL = 1e-10
GRAD_RTOL = 1e-6
PARAMS = ("verts", "vertex_colors", "face_colors", "light_dirs", "light_colors", "ambient", "background",
          "camera_delta", "focal_scale")


@pytest.fixture(scope="module", autouse=True)
def _f64():
    tgs.init(arch="cpu", precision="f64")
    yield


def _mesh(with_triangle):
    """A tetrahedron (closed, outward counter-clockwise faces) and, optionally, a triangle behind it."""
    v = np.array([[0.05, 0.05, 0.55], [0.55, -0.35, -0.2], [-0.5, -0.4, -0.1], [0.0, 0.6, -0.25]])
    f = np.array([[0, 1, 2], [0, 2, 3], [0, 3, 1], [1, 3, 2]])
    centre = v.mean(axis=0)
    for k, (a, b, c) in enumerate(f):
        if np.dot(np.cross(v[b] - v[a], v[c] - v[a]), v[[a, b, c]].mean(axis=0) - centre) < 0:
            f[k] = (a, c, b)
    if with_triangle:
        v = np.vstack([v, [[-0.7, -0.6, -0.6], [0.7, -0.5, -0.7], [0.1, 0.8, -0.65]]])
        f = np.vstack([f, [[4, 5, 6]]])
    return v, f


CASES = {
    "silhouette lanes, kept": dict(),
    "silhouette lanes, recomputed": dict(keep_frames=False),
    "silhouette pair list, kept": dict(pixel_lanes=False),
    "silhouette pair list, recomputed": dict(pixel_lanes=False, keep_frames=False),
    "silhouette without binning": dict(binning=False),
    "silhouette closed": dict(closed=True),
    "silhouette pixel offsets, 4 lanes": dict(pixel_offsets="shift", pixel_lanes=4),
    "colour, vertex colours, coverage blend": dict(shading="color", background=(0.2, 0.1, 0.3)),
    "colour, face colours, softmax blend, recomputed": dict(shading="color", color_mode="face", blend="softmax",
                                                             gamma=0.1, keep_frames=False),
    "colour without binning": dict(shading="color", binning=False),
    "lambert flat": dict(shading="lambert", background=(0.1, 0.2, 0.1)),
    "lambert smooth, recomputed": dict(shading="lambert", normals="smooth", keep_frames=False),
    "lambert culled, orthographic, tiles of 4": dict(shading="lambert", cull_backfaces=True, tile_size=4,
                                                      projection="orthographic"),
}


def _renderer(case):
    kw = dict(CASES[case])
    v, f = _mesh(with_triangle=not kw.get("closed", False))
    projection = kw.pop("projection", "perspective")
    cam = Camera(eye=(0.25, 0.35, 2.6), target=(0.0, 0.0, 0.0), fov=45, width=16, height=16, projection=projection,
                 ortho_scale=0.9)
    if kw.get("pixel_offsets") == "shift":
        kw["pixel_offsets"] = np.tile([[1.5, -0.75]], (len(v), 1))
    rng = np.random.default_rng(3)
    kw.setdefault("gamma", 0.05)
    ren = SoftRasterizer(cam, f, len(v), frames=2, sigma=1e-2, vertex_colors=rng.uniform(0.2, 0.9, (len(v), 3)),
                         face_colors=rng.uniform(0.2, 0.9, (len(f), 3)),
                         lights=[((0.3, 0.8, 1.0), (0.7, 0.6, 0.5)), ((-1.0, 0.2, 0.4), (0.2, 0.3, 0.4))], **kw)
    ren.camera_delta.from_numpy(np.array([0.02, -0.03, 0.01, 0.03, -0.02, 0.05]))
    ren.focal_scale[None] = 1.05
    frames = np.stack([v, 0.9 * v + [0.08, -0.05, 0.1]])
    return ren, frames


def _fields(ren):
    return {"vertex_colors": ren.vertex_colors, "face_colors": ren.face_colors, "light_dirs": ren.light_dir,
            "light_colors": ren.light_color, "ambient": ren.ambient, "background": ren.background,
            "camera_delta": ren.camera_delta, "focal_scale": ren.focal_scale}


# the slowest cases (over ~6 s each on two cores, issue 43) run with the slow tests; the rest cover every stage
SLOW_CASES = {"lambert smooth, recomputed", "lambert culled, orthographic, tiles of 4", "silhouette pixel offsets, 4 lanes",
              "silhouette closed", "silhouette lanes, kept"}


@pytest.mark.parametrize("case", [pytest.param(c, marks=pytest.mark.slow) if c in SLOW_CASES else c for c in CASES])
def test_fast_path_matches_the_reference(case):
    ren, frames = _renderer(case)
    assert ren.pixel_lanes == (case.startswith("silhouette") and "pair list" not in case and "binning" not in case)
    rng = np.random.default_rng(11)
    weights = rng.standard_normal((2, 16, 16, ren.channels))
    X = ti.Vector.field(3, float, shape=(2, len(frames[0])), needs_grad=True)
    X.from_numpy(frames)
    w = ti.Vector.field(ren.channels, float, shape=(2, 16, 16))
    w.from_numpy(weights)
    loss = ti.field(float, shape=(), needs_grad=True)

    @ti.kernel
    def weighted_sum():
        for t, i, j in w:
            loss[None] += (ren.image[t, i, j] * w[t, i, j]).sum()

    with ti.ad.Tape(loss):
        ren.render(X, 0, 0)
        ren.render(X, 1, 1)
        weighted_sum()

    settings = reference_settings(ren)
    params = {"verts": frames.copy()}
    for name, fld in _fields(ren).items():
        params[name] = np.asarray(settings[name], dtype=np.float64)
    grads = {"verts": X.grad.to_numpy()}
    grads.update({name: fld.grad.to_numpy().reshape(params[name].shape) for name, fld in _fields(ren).items()})

    def reference_loss(p):
        s = dict(settings, **{k: p[k] for k in PARAMS if k != "verts"})
        s["light_dirs"], s["light_colors"] = list(s["light_dirs"]), list(s["light_colors"])
        return sum(float(np.sum(reference_render(p["verts"][t], **s) * weights[t])) for t in range(2))

    # images
    reference = np.stack([reference_render(frames[t], **settings) for t in range(2)])
    assert reference[..., -1].max() > 0.5 and reference[..., -1].min() < 0.01     # an object and its outline
    np.testing.assert_allclose(ren.image.to_numpy(), reference, rtol=0, atol=IMAGE_ATOL)
    # gradients along random directions of every input
    for k in range(2):
        direction = {name: rng.standard_normal(np.shape(value)) for name, value in params.items()}
        norm = np.sqrt(sum(np.sum(d * d) for d in direction.values()))
        direction = {name: d / norm for name, d in direction.items()}
        tape = sum(float(np.sum(grads[name] * direction[name])) for name in params)
        fd = reference_gradient(reference_loss, params, direction)
        assert abs(fd) > 1e-3
        assert abs(tape - fd) <= GRAD_RTOL * abs(fd), f"{case}, direction {k}: Tape {tape!r}, reference FD {fd!r}"
