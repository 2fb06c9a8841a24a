"""tigradsim at the CONVERTED truth of the warp_cloth_sphere clip against Warp's own trajectory (issue 46, item 6):
how far apart the two engines' cloths are before any fit, so a fit's error can be read against it.

The scene is the clip's scene.toml (what a user has) with the truth written in: membrane mu = tri_ke, lam =
tri_ka, damping = tri_kd, bending k = edge_ke x (rest edge length) (benchmarks/interacting_sims.py states the
conversion), and the contact either Warp's (ke, kd, kf, mu per particle, damping "uncapped" as Warp's) or the
scene file's guess.  Variants: the time step (the scene's 64 steps a frame, Warp's 128), the bending at the axis
edges' length or the edge-length mean, membrane damping off, the guessed contact.

Per variant: the cloth's vertex RMS distance from Warp's [mm] (mean over frames, and at the worst frame), the
largest single vertex distance [mm], the silhouette IoU against the clip's masks at the fit's 64 px (mean, min),
and Warp's own masks against themselves through tigradsim's renderer (the renderer's floor: Warp's vertices drawn
by tigradsim's rasterizer vs Mitsuba's masks).

    python3 benchmarks/cloth_truth_check.py [--variants truth,steps128,...]

Prints a Markdown table and, last, a JSON line.
"""
from __future__ import annotations

import argparse
import copy
import json
import os
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
CLIP = os.path.join(HERE, "footage", "warp_cloth_sphere")


def _load():
    from tigradsim.scenes.scene_file import load_scene
    truth = json.load(open(os.path.join(CLIP, "truth.json")))
    warp_x = np.load(os.path.join(CLIP, "cloth_vertices.npz"))["x"].astype(np.float64)
    return load_scene(os.path.join(CLIP, "scene.toml")), truth, warp_x


def variant_spec(spec, truth, name):
    """The scene spec at the converted truth, changed as variant `name` says."""
    s = copy.deepcopy(spec)
    t, conv, c = truth["truth"], truth["objects"]["cloth"]["material_conversion"], truth["contact"]
    cloth = s.objects["cloth"]
    cloth.params = {"mu": t["cloth.mu"], "lam": t["cloth.lam"]}
    cloth.damping = 0.0 if name == "no_damping" else t["cloth.damping"]
    cloth.bending = conv["bending_mean_edge"] if name == "bending_mean_edge" else t["cloth.bending"]
    s.unknowns = []
    if name != "guessed_contact":
        s.ground = {k: float(c[k]) for k in ("ke", "kd", "kf", "mu")}
        s.ground["law"] = {"damping": "uncapped"}
        for col in s.colliders.values():
            col.contact = {k: float(c[k]) for k in ("ke", "kd", "kf", "mu")}
            col.law = {"damping": "uncapped"}
    if name == "steps128":
        s.substeps = 128
    return s


def run_variant(spec, truth, warp_x, name):
    from tigradsim.io.mask_checks import silhouette_iou
    from tigradsim.scenes.scene_build import Scene, load_scene_footage

    s = variant_spec(spec, truth, name)
    footage = load_scene_footage(s)
    t0 = time.process_time()
    scene = Scene(s, footage, requires_grad=False, unknowns=False)
    alpha = scene.render()[..., -1]
    cpu = time.process_time() - t0
    x = scene.timed.numpy()
    d = np.linalg.norm(x - warp_x, axis=2)                      # (T, V) [m]
    rms = np.sqrt((d ** 2).mean(axis=1))
    iou = silhouette_iou(alpha, footage.masks)
    return {"variant": name, "substeps": s.substeps, "rms_mean_mm": 1e3 * float(rms.mean()),
            "rms_worst_mm": 1e3 * float(rms.max()), "worst_frame": int(rms.argmax()),
            "max_vertex_mm": 1e3 * float(d.max()), "iou_mean": float(iou.mean()), "iou_min": float(iou.min()),
            "rms_per_frame_mm": [round(1e3 * float(v), 2) for v in rms], "cpu_s": round(cpu, 1)}, scene


def renderer_floor(scene, warp_x):
    """IoU of Warp's own vertices drawn by tigradsim's renderer (the scene's camera, 64 px) against the masks."""
    from tigradsim.io.mask_checks import silhouette_iou
    ren = scene.renderer
    ids = np.asarray(ren.vertex_ids)                            # the surface's particles (every cloth vertex)
    alpha = np.stack([ren.render_numpy(x[ids], k) for k, x in enumerate(warp_x)])[..., -1]
    iou = silhouette_iou(alpha, scene.footage.masks)
    return {"iou_mean": float(iou.mean()), "iou_min": float(iou.min())}


VARIANTS = ("truth", "steps128", "bending_mean_edge", "no_damping", "guessed_contact")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--variants", default=",".join(VARIANTS))
    args = ap.parse_args(argv)
    import tigradsim as tgs
    tgs.init(precision="f64")
    spec, truth, warp_x = _load()
    rows, floor = [], None
    for name in args.variants.split(","):
        if name not in VARIANTS:
            ap.error(f"--variants: {name!r} is not one of {VARIANTS}")
        row, scene = run_variant(spec, truth, warp_x, name)
        if floor is None:
            floor = renderer_floor(scene, warp_x)
        rows.append(row)
        print(f"# {name}: {row['rms_mean_mm']:.1f} mm, IoU {row['iou_mean']:.3f}", file=sys.stderr, flush=True)
    print("| variant | steps / frame | vertex RMS mean [mm] | worst frame RMS [mm] (frame) | max vertex [mm] | "
          "IoU mean | IoU min | CPU s |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['variant']} | {r['substeps']} | {r['rms_mean_mm']:.1f} | {r['rms_worst_mm']:.1f} "
              f"({r['worst_frame']}) | {r['max_vertex_mm']:.1f} | {r['iou_mean']:.3f} | {r['iou_min']:.3f} | "
              f"{r['cpu_s']} |")
    print(f"\nWarp's own vertices through tigradsim's renderer: IoU {json.dumps(floor)}")
    print(json.dumps({"rows": rows, "renderer_floor": floor}))


if __name__ == "__main__":
    main()
