"""A slow, readable reference of the soft rasterizer in plain numpy float64.

The same model as the fast paths (projection.py, coverage.py, shading.py), written as directly as it is
stated, pixel by pixel and face by face, with none of their machinery: no tiles, no pair list, no lanes,
no kept frames, no product form of the log, no hand-written adjoints.  Its gradient is taken by central
finite differences (`reference_gradient`).  The tests (`tests/test_render_reference.py`) compare every
fast path with it in float64: images, and Tape gradients against these finite differences along random
directions.

    settings = reference_settings(ren)               # a SoftRasterizer's options and field values
    image = reference_render(verts, **settings)      # (H, W, channels)
"""
import math

import numpy as np

from ..camera import rodrigues


def _project(camera, verts, camera_delta, focal_scale, pixel_offsets):
    """(V, 3): NDC x, y and depth of the vertices under the corrected camera X' = exp([w]x)(R x + t) + dt."""
    Rw = rodrigues(camera_delta[:3])
    R = Rw @ camera.R
    t = Rw @ camera.t + camera_delta[3:]
    fx, fy = focal_scale * camera.fx, focal_scale * camera.fy
    W, H = camera.width, camera.height
    s = float(min(W, H))
    out = np.zeros((len(verts), 3))
    for v, x in enumerate(verts):
        X, Y, Z = R @ x + t
        if camera.perspective:
            zs = Z if Z > 1e-12 else 1.0
            u, w = fx * X / zs + camera.cx, fy * Y / zs + camera.cy
        else:
            u, w = fx * X + camera.cx, fy * Y + camera.cy
        if pixel_offsets is not None:
            u, w = u + pixel_offsets[v][0], w + pixel_offsets[v][1]
        out[v] = ((2.0 * u + 1.0 - W) / s, (H - 2.0 * w - 1.0) / s, Z)
    return out


def _segment_distance2(p, a, b):
    """Squared distance from point p to the segment a b (2-D)."""
    e = b - a
    t = min(max(np.dot(p - a, e) / (np.dot(e, e) + 1e-30), 0.0), 1.0)
    d = p - a - t * e
    return float(np.dot(d, d))


def _unit(n):
    return n / math.sqrt(float(np.dot(n, n)) + 1e-30)


def reference_render(verts, camera, faces, sigma, gamma=1e-4, coverage_eps=1e-4, closed=False,
                     cull_backfaces=False, shading="silhouette", color_mode="vertex", vertex_colors=None,
                     face_colors=None, light_dirs=(), light_colors=(), ambient=(0.0, 0.0, 0.0), normals="flat",
                     blend="coverage", depth_eps=1e-3, background=(0.0, 0.0, 0.0), background_image=None,
                     camera_delta=None, focal_scale=1.0, pixel_offsets=None):
    """The image (H, W, 1) of a silhouette, (H, W, 4) RGBA otherwise, of surface vertices `verts` (V, 3).

    Per pixel p and drawn face j (all corners beyond `near`, not degenerate, front-facing if culled):
    d^2 the squared NDC distance to the face's edges, inside the projected triangle or not, and the pair
    counts when inside or D = sigmoid(-d^2 / sigma) > coverage_eps.  Then
    S = sum_j log(1 - D_j), D_j = sigmoid(+-d_j^2 / sigma); A = 1 - exp(c S), c = 1/2 if closed else 1;
    colour: C_j the albedo (vertex colours at the clipped perspective-correct barycentrics, or the face's),
    Lambert-shaded with the flat face normal or the interpolated area-weighted vertex normals;
    w_j = D_j exp(z_j / gamma), z the normalised inverse depth; B = background + background_image[p];
    blend "coverage": I = A sum w C / sum w + (1 - A) B; "softmax": I = (sum w C + e B) / (sum w + e),
    e = exp(depth_eps / gamma).
    """
    verts = np.asarray(verts, dtype=np.float64)
    faces = np.asarray(faces)
    W, H = camera.width, camera.height
    s = float(min(W, H))
    near, far = camera.near, camera.far
    delta = np.zeros(6) if camera_delta is None else np.asarray(camera_delta, dtype=np.float64)
    proj = _project(camera, verts, delta, float(focal_scale), pixel_offsets)
    r2 = sigma * math.log(1.0 / coverage_eps - 1.0)
    power = 0.5 if closed else 1.0
    colour = shading != "silhouette"
    light_dirs = [_unit(np.asarray(d, dtype=np.float64)) for d in light_dirs]
    ambient = np.asarray(ambient, dtype=np.float64)

    def lambert(n):
        return ambient + sum((np.asarray(c) * max(float(np.dot(n, d)), 0.0) for d, c in zip(light_dirs, light_colors)),
                             np.zeros(3))

    face_normals = [np.cross(verts[b] - verts[a], verts[c] - verts[a]) for a, b, c in faces]
    vertex_normals = np.zeros_like(verts)
    for (a, b, c), n in zip(faces, face_normals):
        for k in (a, b, c):
            vertex_normals[k] += n
    vertex_normals = np.array([_unit(n) for n in vertex_normals])

    drawn = []
    for f, (ia, ib, ic) in enumerate(faces):
        a, b, c = proj[ia], proj[ib], proj[ic]
        area = (b[0] - a[0]) * (c[1] - a[1]) - (b[1] - a[1]) * (c[0] - a[0])
        if min(a[2], b[2], c[2]) > near and abs(area) > 1e-12 and (area > 0.0 or not cull_backfaces):
            drawn.append((f, a, b, c, area))

    image = np.zeros((H, W, 4 if colour else 1))
    for i in range(H):
        for j in range(W):
            p = np.array([(2.0 * j + 1.0 - W) / s, (H - 2.0 * i - 1.0) / s])
            S = 0.0
            terms = []                                   # (D, z, C) of the faces that count
            for f, a, b, c, area in drawn:
                w = np.array([(c[0] - b[0]) * (p[1] - b[1]) - (c[1] - b[1]) * (p[0] - b[0]),
                              (a[0] - c[0]) * (p[1] - c[1]) - (a[1] - c[1]) * (p[0] - c[0]),
                              (b[0] - a[0]) * (p[1] - a[1]) - (b[1] - a[1]) * (p[0] - a[0])]) / area
                inside = w.min() >= 0.0
                d2 = min(_segment_distance2(p, a[:2], b[:2]), _segment_distance2(p, b[:2], c[:2]),
                         _segment_distance2(p, c[:2], a[:2]))
                if not (inside or d2 < r2):
                    continue
                x = (d2 if inside else -d2) / sigma
                D = 1.0 / (1.0 + math.exp(-x))
                S += -(max(x, 0.0) + math.log1p(math.exp(-abs(x))))     # log(1 - D) = -softplus(x), stably
                if colour:
                    depths = np.array([a[2], b[2], c[2]])
                    q = w / depths if camera.perspective else w
                    bc = q / q.sum()
                    bc = np.maximum(bc, 0.0)
                    bc = bc / max(bc.sum(), 1e-20)
                    z = (far - float(bc @ depths)) / (far - near)
                    corner = faces[f]
                    albedo = bc @ vertex_colors[corner] if color_mode == "vertex" else face_colors[f]
                    if shading == "color":
                        C = albedo
                    elif normals == "smooth":
                        C = albedo * lambert(_unit(bc @ vertex_normals[corner]))
                    else:
                        C = albedo * lambert(_unit(face_normals[f]))
                    terms.append((D, z, C))
            A = 1.0 - math.exp(power * S)
            if not colour:
                image[i, j, 0] = A
                continue
            bg = np.asarray(background, dtype=np.float64) + (0.0 if background_image is None else background_image[i, j])
            zmax = max([z for _, z, _ in terms] + ([depth_eps] if blend == "softmax" else []), default=0.0)
            sw = sum(D * math.exp((z - zmax) / gamma) for D, z, _ in terms)
            sc = sum((D * math.exp((z - zmax) / gamma) * C for D, z, C in terms), np.zeros(3))
            if blend == "coverage":
                rgb = A * sc / sw + (1.0 - A) * bg if terms else bg
            else:
                e = math.exp((depth_eps - zmax) / gamma)
                rgb = (sc + e * bg) / (sw + e)
            image[i, j] = (*rgb, A)
    return image


def reference_settings(ren):
    """A `SoftRasterizer`'s options and current field values (colours, lights, background, camera
    correction) as keywords of `reference_render`."""
    cov, surf, blending, vmap = (ren.options[k] for k in ("coverage", "surface", "blending", "vertex_map"))
    return dict(camera=ren.camera, faces=ren.faces.to_numpy(), sigma=ren.sigma, gamma=ren.gamma,
                coverage_eps=ren.coverage_eps, closed=ren.closed, cull_backfaces=ren.cull_backfaces,
                shading=ren.shading, color_mode=ren.color_mode, vertex_colors=ren.vertex_colors.to_numpy(),
                face_colors=ren.face_colors.to_numpy(), light_dirs=list(ren.light_dir.to_numpy()),
                light_colors=list(ren.light_color.to_numpy()), ambient=ren.ambient.to_numpy(),
                normals=ren.normals, blend=ren.blend, depth_eps=ren.depth_eps,
                background=ren.background.to_numpy(), background_image=ren.background_image.to_numpy(),
                camera_delta=ren.camera_delta.to_numpy(), focal_scale=float(ren.focal_scale[None]),
                pixel_offsets=None if vmap.pixel_offsets is None else np.asarray(vmap.pixel_offsets, dtype=np.float64))


def reference_gradient(loss_of, params, direction, eps=1e-6):
    """Central finite difference (L(params + eps d) - L(params - eps d)) / (2 eps) of `loss_of(params)`
    along `direction`; params and direction: dicts of arrays of the same shapes."""
    plus = {k: v + eps * direction[k] for k, v in params.items()}
    minus = {k: v - eps * direction[k] for k, v in params.items()}
    return (loss_of(plus) - loss_of(minus)) / (2.0 * eps)
