"""How closely tigradsim follows a soft clip's engine at the engine's TRUE constants, with the ground's kd and kf
stepped explicitly or implicitly (damping_integration, tigradsim.physics.contact), at the fits' 112 steps a frame
and at the engine's own step.  No fitting: a forward run per row, the centroid of the nodes (equal weights, as the
engine's equal node masses give it) against truth.json's trajectory.

The scene is coverage_soft.py's with the truth put in: the material (mu, lam, damping and its form), the ground's
contact constants and law (Warp: ke 1e4, kd 10, kf 100, mu 0.6, damping not capped: "uncapped"), and the masses
either as the engine's per-node masses (node_mass: isolates the contact) or the total spread by volume (what the
fits use: the corner vertices are then 5.5 g, a sixth of the engine's), or with --masses ...,equal the total
spread equally over the vertices (`mass_distribution = "equal"`: Warp's add_soft_grid's distribution; on Newton's
clip, whose engine lumps by volume, the wrong one).  Prints a table and one JSON line.

    python3 benchmarks/implicit_damping_truth.py [--clip warp_soft_drop] [--masses engine,volume,equal]
"""
from __future__ import annotations

import argparse
import copy
import json
import os
import sys
import time
import warnings

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from coverage_soft import make_soft_scene                    # noqa: E402
from footage import FOOTAGE, ROOT                            # noqa: E402


def truth_spec(clip, scene_dir, masses, integration, substeps):
    """The clip's scene spec at the truth (module docstring)."""
    from tigradsim.scenes.scene_file import load_scene
    truth = json.load(open(os.path.join(FOOTAGE, clip, "truth.json")))
    path, _ = make_soft_scene(clip, "clean", "assume", scene_dir, os.path.join(scene_dir, "out"), True, "warp")
    spec = copy.deepcopy(load_scene(path))
    t, c = truth["truth"], truth["contact"]
    law = {"damping_integration": integration}
    if "not capped" in c.get("law", "") or "uncapped" in c.get("law", ""):
        law["damping"] = "uncapped"
    spec.ground = {"ke": float(c["ke"]), "kd": float(c["kd"]), "kf": float(c["kf"]), "mu": float(c["mu"]), "law": law}
    obj = spec.objects["cube"]
    obj.params = {"mu": float(t["mu"]), "lam": float(t["lam"])}
    obj.damping, obj.damping_model = float(t["damping"]), t["damping_model"]
    if masses == "engine":
        obj.node_mass = np.asarray(truth["object"]["node_mass"], dtype=np.float64) \
            if isinstance(truth["object"]["node_mass"], list) else \
            np.full(len(obj.vertices), float(truth["object"]["masses"]["node_mass"]))
        obj.mass = obj.density = None
    elif masses == "equal":
        obj.mass_distribution = "equal"
    spec.substeps, spec.dt = substeps, None
    spec.unknowns = []
    return spec, truth


def run_row(clip, scene_dir, masses, integration, substeps):
    from tigradsim.scenes.scene_build import Scene, load_scene_footage
    from tigradsim.core.errors import StabilityWarning
    spec, truth = truth_spec(clip, scene_dir, masses, integration, substeps)
    footage = load_scene_footage(spec)
    t0 = time.process_time()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", StabilityWarning)
        scene = Scene(spec, footage, requires_grad=False, unknowns=False)
        report = scene.sim.stability_report()
        scene.sim.run()
    flagged = any(issubclass(w.category, StabilityWarning) for w in caught)
    x = scene.timed.vertices.to_numpy().astype(np.float64)          # (K, V, 3) in the scene's frame
    centroid = x.mean(axis=1) @ scene.M                               # back to the file's axes (y up here)
    ref = np.asarray(truth["trajectory"]["centroid"], dtype=np.float64)[:len(centroid)]
    err = np.linalg.norm(centroid - ref, axis=1) * 1e3
    worst = min(report.rows, key=lambda r: r.dt_limit)
    m = scene.model.particle_mass.to_numpy()
    return {"masses": masses, "integration": integration, "substeps": substeps, "dt": scene.dt,
            "min_vertex_mass_g": float(m[m > 0].min() * 1e3), "preflight_ok": report.ok, "warned": flagged,
            "worst_term": f"{worst.term} dt/limit {scene.dt / worst.dt_limit:.3g}",
            "centroid_err_mm_first12": float(err[:12].max()), "centroid_err_mm_max": float(err.max()),
            "centroid_err_mm_rms": float(np.sqrt(np.mean(err ** 2))), "cpu_s": round(time.process_time() - t0, 1)}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--clip", default="warp_soft_drop")
    ap.add_argument("--out", default=os.path.join(ROOT, "out", "implicit_damping_truth"))
    ap.add_argument("--masses", default=None,
                    help="comma-separated rows among engine, volume, equal (default: engine where the clip has "
                         "per-node masses, and volume)")
    a = ap.parse_args(argv)
    import tigradsim as tgs
    tgs.init(arch="cpu", precision="f32")
    truth = json.load(open(os.path.join(FOOTAGE, a.clip, "truth.json")))
    engine_substeps = int(truth["simulation"]["steps_per_frame"])
    rows = []
    # "engine": the engine's own per-node masses where they differ from a volume lumping (Warp's add_soft_grid);
    # Newton's clip lumps by volume, as tigradsim does, so "volume" is its engine's masses
    mass_rows = ("engine", "volume") if "node_mass" in truth["object"] else ("volume",)
    if a.masses:
        mass_rows = [m.strip() for m in a.masses.split(",") if m.strip()]
        bad = [m for m in mass_rows if m not in ("engine", "volume", "equal")
               or (m == "engine" and "node_mass" not in truth["object"])]
        if bad or not mass_rows:
            ap.error(f"--masses: expected engine (clips with per-node masses), volume, equal; got {a.masses!r}")
    for masses in mass_rows:
        for integration, substeps in (("explicit", 112), ("implicit", 112), ("explicit", engine_substeps),
                                      ("implicit", engine_substeps)):
            row = run_row(a.clip, os.path.join(a.out, f"{masses}_{integration}_{substeps}"), masses, integration,
                          substeps)
            rows.append(row)
            print(f"| {masses} | {integration} | {substeps} | {row['min_vertex_mass_g']:.3g} | "
                  f"{'ok' if row['preflight_ok'] else 'past safe'} ({row['worst_term']}) | "
                  f"{row['centroid_err_mm_first12']:.2f} | {row['centroid_err_mm_max']:.2f} | "
                  f"{row['centroid_err_mm_rms']:.2f} |", flush=True)
    print(json.dumps({"clip": a.clip, "rows": rows}))


if __name__ == "__main__":
    main()
