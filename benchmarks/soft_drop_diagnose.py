"""Why the joint comparison (mass distribution x damping form) picks "equal" masses on Newton's soft cube (issue 44):
tigradsim run at the clip's TRUE material (no fit) under each mass distribution and damping form, with Newton's
contact constants, against Newton's own per-node trajectories and the footage's masks.  truth.json is read here for
diagnosis only; no fit reads it.

Newton's per-node positions are not stored with the clip (only the mass-weighted centroid): they are re-simulated
in Newton's venv exactly as the clip was made (benchmarks/newton_soft_sim.py through engine_sims.run_in_newton, the
clip's mesh files, pose, velocity and ENGINE_SOFT_CLIPS's constants; checked against truth.json's centroid) and
cached as OUT/newton_<steps>.npz.  Newton's venv: see benchmarks/requirements-newton.txt.  --newton-steps S also
re-simulates Newton itself at S steps a frame (how much Newton's own motion depends on its step).

The tigradsim scene is coverage_soft.py's (`make_soft_scene`: clean, --quick settings, 64 px masks, the clip's
camera) with the truth put in: cube mu, lam, damping (k_damp; the same coefficient for every form), [ground] ke, kd,
kf, mu from truth.json's contact table, and per row:

    dist         the mass distribution ("volume": a quarter of each tet's mass to its corners, Newton's rule;
                 "equal": total / vertex count)
    form         the damping form (physics/damping.py; Newton's is "warp")
    law          the ground's damping law: "capped" (the library default, what the fits use: they are given no
                 law) or "uncapped" (Newton's: kd min(vn, 0) at full strength)
    integration  [ground] damping_integration ("implicit": the fits'; Newton's step is explicit)
    steps        steps per frame (the fits: 112; Newton: 256)
    over         overrides, e.g. {"ground": {"mu": 1.0}}, {"material": {"mu": 6204, "lam": 9112, "damping": 4.06}}
    check_step   also the library's own step check at these values (`Scene.predictability`: the rollouts at dt
                 and dt / 2, the estimated silhouette error per frame [px] and the predictable horizon at the
                 [fit] horizon_tolerance 0.5 px, what [fit] horizon = "auto" would fit)
    ref_steps    the node gaps against Newton re-run at this many steps a frame (default: the clip's own 256;
                 the masks and the loss are always the footage's)

Per row: the node RMS gap to Newton's nodes per frame and over the fits' horizons (12, 24, 36 frames) [mm], the
node-mass-weighted centroid's gap to truth.json's, mean silhouette IoU, and the fit's objective 1/2 |r|^2 over the
mask residuals at the fit's resolution (the loss `tigradsim fit` reports; per frame and over 12 / 24 / 36 frames).
The row "newton" renders Newton's own nodes through the same renderer and loss: the loss floor of a perfect model
(what is left is the renderer's difference from Mitsuba).

    python3 benchmarks/soft_drop_diagnose.py [--rows ROWS_JSON] [--newton-steps 112] [--out /tmp/soft_drop_diagnose]

ROWS_JSON: a JSON list of row dicts (keys above; defaults dist volume, form warp, law uncapped, integration
implicit, steps 112, over {}); default: the grid of the module's DEFAULT_ROWS.  Each row is one process (one Scene
per Taichi runtime).  Prints one JSON line per row, a table, and a final JSON line {"rows": [...]}.
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
from _harness import child_rows  # noqa: E402

CLIP = "newton_soft_drop"
HORIZONS = (12, 24, 36)
ROW_DEFAULTS = {"dist": "volume", "form": "warp", "law": "uncapped", "integration": "implicit", "steps": 112,
                "over": {}, "ref_steps": None, "check_step": False}
DEFAULT_ROWS = [{"dist": d, "form": f, "law": law, "integration": i, "steps": s}
                for d in ("volume", "equal") for f in ("warp", "deformation_rate")
                for law, i, s in (("capped", "implicit", 112), ("uncapped", "implicit", 112),
                                  ("uncapped", "implicit", 256), ("uncapped", "explicit", 256))] + [{"newton": True}]


def newton_nodes(out, steps):
    """(positions (K, V, 3), masses (V,)) of Newton's cube at `steps` steps a frame, file axes; simulated once in
    Newton's venv (module docstring) and cached in `out`."""
    path = os.path.join(out, f"newton_{steps}.npz")
    if not os.path.exists(path):
        from engine_sims import ENGINE_SOFT_CLIPS, _quat_matrix, run_in_newton
        from footage import FOOTAGE
        from tigradsim.io.mesh_io import load_tetgen
        folder = os.path.join(FOOTAGE, CLIP)
        truth = json.load(open(os.path.join(folder, "truth.json")))
        o = truth["object"]
        rest, tets = load_tetgen(os.path.join(folder, o["mesh"]["node"]), os.path.join(folder, o["mesh"]["ele"]))
        x0 = rest @ _quat_matrix(o["initial_pose"]["quaternion_xyzw"]).T + np.asarray(o["initial_pose"]["position"])
        v0 = np.tile(np.asarray(o["initial_velocity"]["linear"], dtype=np.float64), (len(rest), 1))
        e = ENGINE_SOFT_CLIPS["newton"]["soft_drop"]
        job = {"vertices": rest.tolist(), "tets": np.asarray(tets).tolist(), "x0": x0.tolist(), "v0": v0.tolist(),
               "density": e["density"], "k_mu": e["k_mu"], "k_lambda": e["k_lambda"], "k_damp": e["k_damp"],
               "ground": e["ground"], "contact_gap": e["contact_gap"], "frames": int(truth["frame_count"]),
               "fps": truth["fps"], "substeps": int(steps)}
        res = run_in_newton("newton_soft_sim.py", job)
        os.makedirs(out, exist_ok=True)
        np.savez(path, positions=res["positions"], masses=res["masses"])
    data = np.load(path)
    return data["positions"], data["masses"]


def truth_spec(row, scene_dir):
    """The clip's soft scene (coverage_soft.make_soft_scene, clean, --quick) at the truth under `row`."""
    from coverage_soft import make_soft_scene
    from footage import FOOTAGE
    from tigradsim.scenes.scene_file import load_scene

    ground = {"damping_integration": row["integration"], "damping": row["law"]}
    path, _ = make_soft_scene(CLIP, "clean", "assume", scene_dir, os.path.join(scene_dir, "out"), True, row["form"],
                              ground=ground, mass_distribution=row["dist"])
    spec = copy.deepcopy(load_scene(path))
    truth = json.load(open(os.path.join(FOOTAGE, CLIP, "truth.json")))
    t, c, over = truth["truth"], truth["contact"], row["over"]
    for k in ("ke", "kd", "kf", "mu"):
        spec.ground[k] = float(over.get("ground", {}).get(k, c[k]))
    obj = spec.objects["cube"]
    m = over.get("material", {})
    obj.params = {"mu": float(m.get("mu", t["mu"])), "lam": float(m.get("lam", t["lam"]))}
    obj.damping = float(m.get("damping", t["damping"]))
    spec.substeps, spec.dt = int(row["steps"]), None
    spec.unknowns = []
    return spec, truth


def _per_frame_loss(scene, K):
    """1/2 |r|^2 per frame of the scene's mask residuals as they are now (the fit's objective, frame by frame)."""
    r = np.asarray(scene.fit._view_residuals(scene.fit.views[0], False), dtype=np.float64)
    return 0.5 * np.sum(r.reshape(K, -1) ** 2, axis=1)


def run_row(row, out):
    """One rollout (or Newton's nodes rendered): the row of the module docstring."""
    from tigradsim.core.errors import StabilityWarning
    from tigradsim.io.mask_checks import silhouette_iou
    from tigradsim.scenes.scene_build import Scene, load_scene_footage

    newton = bool(row.get("newton"))
    row = dict(ROW_DEFAULTS, **{k: v for k, v in row.items() if k != "newton"})
    scene_dir = os.path.join(out, "scenes", "newton" if newton else
                             f"{row['dist']}_{row['form']}_{row['law']}_{row['integration']}_{row['steps']}")
    spec, truth = truth_spec(row, scene_dir)
    footage = load_scene_footage(spec)
    ref, ref_mass = newton_nodes(out, int(row["ref_steps"] or truth["simulation"]["steps_per_frame"]))
    t0 = time.process_time()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", StabilityWarning)
        scene = Scene(spec, footage, requires_grad=False, unknowns=False)
        preflight = scene.sim.stability_report()
        alpha = scene.render()[..., -1]
    M = np.asarray(scene.M, dtype=np.float64)
    K = alpha.shape[0]
    if newton:          # Newton's own nodes through the same renderer: the loss floor of a perfect model
        scene.timed.vertices.from_numpy((ref[:K] @ M.T).astype(scene.timed.vertices.to_numpy().dtype))
        ren = scene.fit.views[0].renderer
        for k in range(K):
            ren.render(scene.timed.vertices, k, k)
        alpha = ren.image.to_numpy()[..., -1]
    x = scene.timed.vertices.to_numpy().astype(np.float64) @ M          # (K, V, 3), file axes
    mass = scene.model.particle_mass.to_numpy().astype(np.float64)
    if x.shape[1] != ref.shape[1]:
        raise RuntimeError(f"tigradsim has {x.shape[1]} nodes, Newton {ref.shape[1]}: not the same mesh")
    gap = np.linalg.norm(x - ref[:K], axis=-1) * 1e3                   # (K, V) mm
    node_rms = np.sqrt(np.mean(gap ** 2, axis=1))
    centroid = (x * mass[None, :, None]).sum(1) / mass.sum()
    cgap = np.linalg.norm(centroid - np.asarray(truth["trajectory"]["centroid"])[:K], axis=-1) * 1e3
    loss = _per_frame_loss(scene, K)
    iou = np.asarray(silhouette_iou(alpha, footage.masks), dtype=np.float64)
    step = None
    if row["check_step"] and not newton:
        pred = scene.predictability()
        step = {"horizon": int(pred.horizon), "tolerance_px": float(pred.tolerance),
                "error_px": [round(float(v), 2) for v in pred.error]}
    worst = min(preflight.rows, key=lambda r: r.dt_limit) if preflight.rows else None
    return {"row": "newton" if newton else row, "dt": scene.dt,
            "mass_vs_newton_max_rel": float(np.max(np.abs(mass - ref_mass) / ref_mass)),
            "lightest_vertex_g": float(mass.min() * 1e3), "preflight_ok": bool(preflight.ok),
            "worst_term": f"{worst.term} dt/limit {scene.dt / worst.dt_limit:.3g}" if worst else None,
            "stability_warned": any(issubclass(w.category, StabilityWarning) for w in caught),
            "node_rms_mm": {h: float(np.sqrt(np.mean(node_rms[:h] ** 2))) for h in HORIZONS},
            "node_max_mm": float(gap.max()), "centroid_rms_mm": float(np.sqrt(np.mean(cgap ** 2))),
            "loss": {h: float(loss[:h].sum()) for h in HORIZONS}, "iou": float(iou.mean()),
            "node_rms_per_frame_mm": [round(float(v), 2) for v in node_rms],
            "loss_per_frame": [round(float(v), 3) for v in loss],
            "iou_per_frame": [round(float(v), 4) for v in iou], "step_check": step, "cpu_s": round(time.process_time() - t0, 1)}


def newton_step_row(out, steps, ref_steps):
    """Newton at `steps` steps a frame against Newton at its clip's `ref_steps`: node RMS per horizon [mm]."""
    a, _ = newton_nodes(out, steps)
    b, _ = newton_nodes(out, ref_steps)
    rms = np.sqrt(np.mean(np.sum((a - b) ** 2, axis=-1), axis=1)) * 1e3
    return {"newton_steps": steps, "against_steps": ref_steps,
            "node_rms_mm": {h: float(np.sqrt(np.mean(rms[:h] ** 2))) for h in HORIZONS},
            "node_rms_per_frame_mm": [round(float(v), 2) for v in rms]}


def label(r):
    """A row's first five table columns (masses | form | law | integration | steps, and its overrides)."""
    if r["row"] == "newton":
        return "Newton's own nodes | (Newton's) | (Newton's) | explicit | 256"
    w = r["row"]
    extra = f" {json.dumps(w['over'])}" if w.get("over") else ""
    extra += f" (nodes vs Newton at {w['ref_steps']})" if w.get("ref_steps") else ""
    return f"{w['dist']} | {w['form']} | {w['law']} | {w['integration']} | {w['steps']}{extra}"


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rows", default=None, help="JSON list of rows (module docstring); default DEFAULT_ROWS")
    p.add_argument("--newton-steps", default="", help="comma-separated: Newton itself re-run at these steps a frame")
    p.add_argument("--out", default="/tmp/soft_drop_diagnose")
    p.add_argument("--one", default=None, help=argparse.SUPPRESS)      # one row's JSON, run in this process
    a = p.parse_args(argv)
    if a.one:
        import tigradsim as tgs
        tgs.init(arch="cpu", precision="f32")
        print("ROW " + json.dumps(run_row(json.loads(a.one), a.out)), flush=True)
        return 0
    os.makedirs(a.out, exist_ok=True)
    truth_steps = int(json.load(open(os.path.join(HERE, "footage", CLIP, "truth.json")))["simulation"]["steps_per_frame"])
    newton_nodes(a.out, truth_steps)          # once, before the children (they read the cache)
    for s in [int(v) for v in a.newton_steps.split(",") if v.strip()]:
        print(json.dumps(newton_step_row(a.out, s, truth_steps)), flush=True)
    rows = child_rows([([sys.executable, os.path.abspath(__file__), "--out", a.out, "--one", json.dumps(row)],
                        json.dumps(row)) for row in (json.loads(a.rows) if a.rows else DEFAULT_ROWS)])
    print("| masses | form | ground damping law | kd, kf integration | steps/frame | node RMS mm (12 / 24 / 36 frames) "
          "| loss 1/2|r|^2 (12 / 24 / 36) | IoU | pre-flight |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        n, lo = r["node_rms_mm"], r["loss"]
        print(f"| {label(r)} | {n['12']:.1f} / {n['24']:.1f} / {n['36']:.1f} | {lo['12']:.1f} / {lo['24']:.1f} / "
              f"{lo['36']:.1f} | {r['iou']:.3f} | {'ok' if r['preflight_ok'] else 'past safe'} |")
    print(json.dumps({"rows": rows}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
