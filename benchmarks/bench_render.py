"""Benchmark of the soft rasterizer: forward and forward+backward time, memory.

Icosphere of 1,280 faces (642 vertices), sigma = gamma = 1e-4, float32, at
64x64 and 256x256, silhouette and Lambert-shaded (per-vertex colours,
interpolated vertex normals lit per pixel, ambient + one directional light;
PyTorch3D's shaded figure is SoftPhong, which adds a specular term).  `forward_backward_ms` is one Tape with one frame (its
backward finds the frame still in the scratch buffers);
`forward_backward_recompute_ms` forces the per-frame recompute that every frame
but the last of a multi-frame Tape pays.  On CPUs the silhouettes run twice, in pixel lanes
(the default) and from the pair list (`pixel_lanes=False`), and the lanes' cases carry the
ratios `pixel_lanes_speedup_*` (pair list time / lanes time, the same run).  Prints one JSON object.  PyTorch3D is not
installed here: its CPU figures are the ones recorded in issue #4 on 2026-12-02 (SoftSilhouette /
SoftPhong shaders, another machine of this kind), and the ratios against them are named
`speedup_vs_pytorch3d_recorded_2026_12_02_*`: a label, not a side-by-side measurement.

    python benchmarks/bench_render.py [--reps 20] [--arch cpu]
"""
import argparse
import json
import os
import platform
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import taichi as ti  # noqa: E402

import tigradsim as tgs  # noqa: E402
from tigradsim.core.memory import peak_rss_mb  # noqa: E402
from tigradsim.renderers import Camera, ImageMSE, SoftRasterizer, icosphere  # noqa: E402

# PyTorch3D on CPU, ms: (forward, forward + backward), as recorded in issue #4 on 2026-12-02
PYTORCH3D_MS_RECORDED = {
    (64, "silhouette"): (49.0, 769.0),
    (256, "silhouette"): (636.0, 9400.0),
    (256, "lambert"): (1200.0, 11100.0),   # PyTorch3D's figure is SoftPhong
}


def bench_case(size, shading, reps, verts, faces, pixel_lanes=None):
    cam = Camera(eye=(0.0, 0.3, 3.0), target=(0, 0, 0), fov=60, width=size, height=size)
    ren = SoftRasterizer(cam, faces, len(verts), shading=shading, edge_softness=1e-4, gamma=1e-4,
                         vertex_colors=0.5 + 0.5 * verts, normals="smooth", pixel_lanes=pixel_lanes)
    X = ti.Vector.field(3, float, shape=(1, len(verts)), needs_grad=True)
    X.from_numpy(verts[None].astype(np.float32))
    rng = np.random.default_rng(0)
    target = ren.render_numpy(verts + 0.02 * rng.standard_normal(verts.shape))[None].copy()
    mse = ImageMSE(ren.image, target)
    loss = ti.field(float, shape=(), needs_grad=True)

    def forward():
        ren.render(X, 0, 0)
        ti.sync()

    def forward_backward():
        with ti.ad.Tape(loss):
            ren.render(X, 0, 0)
            mse(loss)
        ti.sync()

    for _ in range(3):                       # compile and warm up
        forward()
        forward_backward()
    t_f, t_fb = [], []
    for _ in range(reps):
        t0 = time.perf_counter()
        forward()
        t_f.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        forward_backward()
        t_fb.append(time.perf_counter() - t0)
    grad = X.grad.to_numpy()
    # the same with the per-frame recompute in backward (what every frame but
    # the last one of a multi-frame Tape pays)
    ren.always_recompute = True
    forward_backward()
    grad_rc = X.grad.to_numpy()
    t_rc = []
    for _ in range(reps):
        t0 = time.perf_counter()
        forward_backward()
        t_rc.append(time.perf_counter() - t0)
    ren.always_recompute = False
    assert np.allclose(grad, grad_rc, rtol=1e-4, atol=1e-6 * np.abs(grad).max()), "recompute changed the gradient"
    assert np.all(np.isfinite(grad)) and np.abs(grad).max() > 0, "gradient is zero or not finite"
    fwd = 1e3 * statistics.median(t_f)
    fb = 1e3 * statistics.median(t_fb)
    out = {
        "size": size, "shading": shading, "faces": int(len(faces)),
        "path": "pixel lanes" if ren.pixel_lanes else "pair list",
        "pixels_per_lane_group": int(ren.lane_count),        # 0: the pair list (exec.simd for the rest)
        "forward_ms": round(fwd, 3), "forward_backward_ms": round(fb, 3),
        "forward_backward_recompute_ms": round(1e3 * statistics.median(t_rc), 3),
        "pairs": int(ren.pair_count), "tile_capacity": int(ren.tile_capacity),
        "field_bytes": int(ren.memory_bytes()),
        "coverage_pixels": float(ren.image.to_numpy()[0, ..., -1].sum()),
    }
    ref = PYTORCH3D_MS_RECORDED.get((size, shading))
    if ref is not None:
        tag = "pytorch3d_recorded_2026_12_02"
        out[f"{tag}_cpu_ms"] = {"forward": ref[0], "forward_backward": ref[1]}
        out[f"speedup_vs_{tag}_forward"] = round(ref[0] / fwd, 1)
        out[f"speedup_vs_{tag}_forward_backward"] = round(ref[1] / fb, 1)
        out[f"speedup_vs_{tag}_forward_backward_recompute"] = round(ref[1] / out["forward_backward_recompute_ms"], 1)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--arch", default="cpu")
    args = ap.parse_args()
    tgs.init(arch=args.arch, precision="f32")
    verts, faces = icosphere(3, 1.0)
    cases = [(64, "silhouette"), (64, "lambert"), (256, "silhouette"), (256, "lambert")]
    results = [bench_case(s, sh, args.reps, verts, faces) for s, sh in cases]
    # silhouettes: the pair list too (pixel_lanes=False; the CPU default is the lanes), in the same run
    for s, sh in cases:
        if sh == "silhouette" and args.arch == "cpu":
            pairs = bench_case(s, sh, args.reps, verts, faces, pixel_lanes=False)
            lanes = next(r for r in results if r["size"] == s and r["shading"] == sh)
            for key in ("forward_ms", "forward_backward_ms", "forward_backward_recompute_ms"):
                lanes[f"pixel_lanes_speedup_{key[:-3]}"] = round(pairs[key] / lanes[key], 2)
            results.append(pairs)
    print(json.dumps({
        "benchmark": "soft rasterizer", "precision": "f32", "arch": args.arch,
        "cpu_count": os.cpu_count(), "machine": platform.machine(), "taichi": ".".join(map(str, ti.__version__)),
        "peak_rss_mb": round(peak_rss_mb(), 1), "cases": results,
    }, indent=1))


if __name__ == "__main__":
    main()
