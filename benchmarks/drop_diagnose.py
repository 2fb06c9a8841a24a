"""Why a rigid drop fit misses mu (issue 44, acceptance row "box drop mu within 5 %"): tigradsim run at the clip
engine's TRUE constants against the engine's own motion and the footage's masks, no fit, under a contact law and
rigid damping integration (explicit / implicit), then the fit's objective along mu through the truth with every
other constant at the truth.  truth.json is read here for diagnosis only; no fit reads it.

The scene is coverage.py's (`make_scene`: the --quick settings, 64 px, 64 steps a frame, the clip's camera and
masks, clean variant) with the truth put in: the box's mass and mu (Warp: the Coulomb-equivalent mu), [ground]'s ke,
kd, kf from truth.json's contact table and the law given (e.g. "uncapped+warp(0.02)", Warp's own law and delta;
tigradsim.scenes.law_compare.parse_law_label), damping_integration as given.  Per row:

    traj  RMS over frames and the box's vertices of |x - x_engine| [mm] (the engine's vertices: its pose applied to
          tigradsim's frame-0 vertices about their centre), the centre's RMS gap [mm], the largest rotation gap [deg]
    IoU   mean silhouette IoU against the footage masks, over all frames / over the first --fitted frames
    loss  the fit's image loss (mean squared residual of the [fit] settings) over all frames / the first --fitted

--mu V1,V2,...: the same rows with the box's mu at each value (mass, ke, kd, kf at the truth): where the loss is
least says where a perfect search under that law would put mu; a minimum at the truth means a miss is the search's,
away from it the model's.

    python3 benchmarks/drop_diagnose.py [--clip warp_box_drop] [--laws 'uncapped+warp(0.02)'] \
        [--integrations explicit,implicit] [--mu 0.3,0.45,0.6,0.75,0.9] [--fitted 26] [--over JSON]

--over: {"ke": .., "kd": .., "kf": .., "mass": ..} overrides of the truth, "substeps": steps per frame,
"split": the body's contact-point count P that implicit damping splits its mass over (body_effective_mass.py;
the model's is the box's 8 corners), written after the build: what k_eff = k / (1 + dt k P w) would be with
fewer points sharing the body (diagnosis of the split's price; no scene option sets it).  Each row is one process (one Scene per
Taichi runtime; kernels from the offline cache after the first).  Prints one JSON line per row and a table.
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
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
from _harness import child_rows  # noqa: E402


def truth_spec(clip, label, integration, scene_dir, mu=None, over=None):
    """The clip's coverage scene (clean, --quick) at the engine's truth under law `label` (module docstring)."""
    from coverage import make_scene
    from footage import FOOTAGE
    from tigradsim.scenes.law_compare import parse_law_label
    from tigradsim.scenes.scene_file import load_scene

    law = parse_law_label(label)
    keys = {"damping": law.damping, "friction": law.friction, "damping_integration": integration}
    if law.friction in ("huber", "warp"):
        keys["friction_velocity"] = law.friction_velocity
    path, _ = make_scene(clip, "clean", "assume", scene_dir, os.path.join(scene_dir, "out"), True, law=keys)
    spec = copy.deepcopy(load_scene(path))
    truth = json.load(open(os.path.join(FOOTAGE, clip, "truth.json")))
    c, over = truth["contact"], dict(over or {})
    missing = [k for k in ("ke", "kd", "kf") if k not in c and k not in over]
    if missing:
        raise ValueError(f"{clip}: truth.json's contact has no {missing} in tigradsim's sense; give them with --over")
    for k in ("ke", "kd", "kf"):
        spec.ground[k] = float(over.get(k, c.get(k, 0.0)))
    mu_true = float(c.get("mu_coulomb_equivalent", truth["truth"]["mu"]))
    spec.ground["mu"] = mu_true
    box = spec.objects["box"]
    box.mass = float(over.get("mass", truth["truth"]["mass"]))
    box.contact["mu"] = float(mu if mu is not None else mu_true)
    if "substeps" in over:                      # steps per frame (the fits: 64; Warp's clip: 256)
        spec.substeps, spec.dt = int(over["substeps"]), None
    spec.unknowns = []
    return spec, truth, mu_true


def _rotation_angle_deg(R):
    return float(np.degrees(np.arccos(np.clip((np.trace(R) - 1.0) / 2.0, -1.0, 1.0))))


def _quat_matrix(q):
    x, y, z, w = q
    return np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
                     [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
                     [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)]])


def run_one(clip, label, integration, scene_dir, fitted, mu=None, over=None):
    """One rollout at the truth: the row of the module docstring."""
    import warnings

    from tigradsim.io.mask_checks import silhouette_iou
    from tigradsim.scenes.scene_build import Scene, load_scene_footage

    spec, truth, mu_true = truth_spec(clip, label, integration, scene_dir, mu, over)
    footage = load_scene_footage(spec)
    t0 = time.process_time()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        scene = Scene(spec, footage, requires_grad=False, unknowns=False)
        preflight = scene.sim.stability_report()
    if "split" in (over or {}):      # implicit damping's mass split P (body_effective_mass.py): diagnosis only
        scene.model.body_contact_point_count.fill(float(over["split"]))
    alpha = scene.render()[..., -1]
    r = np.asarray(scene.residuals(), dtype=np.float64)
    K = alpha.shape[0]
    per_frame = np.mean(r.reshape(K, -1) ** 2, axis=1)
    iou = np.asarray(silhouette_iou(alpha, footage.masks), dtype=np.float64)
    x = scene.timed.vertices.to_numpy().astype(np.float64) @ np.asarray(scene.M)      # (K, V, 3), file axes
    tr = truth["trajectory"]
    pos = np.asarray(tr["position"], dtype=np.float64)[:K]
    rot = [_quat_matrix(q) for q in np.asarray(tr["quaternion_xyzw"], dtype=np.float64)[:K]]
    body = x[0] - x[0].mean(axis=0)                      # frame 0: both engines start at the same pose
    ref = np.stack([(rot[k] @ rot[0].T @ body.T).T + pos[k] for k in range(K)])
    gap = np.linalg.norm(x - ref, axis=-1) * 1e3
    centre = np.linalg.norm(x.mean(axis=1) - pos, axis=-1) * 1e3
    angle = []
    for k in range(K):                                   # tigradsim's rotation since frame 0 (Kabsch)
        H = body.T @ (x[k] - x[k].mean(axis=0))
        U, _, Vt = np.linalg.svd(H)
        D = np.diag([1.0, 1.0, np.sign(np.linalg.det(Vt.T @ U.T))])
        Rt = Vt.T @ D @ U.T
        angle.append(_rotation_angle_deg(Rt @ (rot[k] @ rot[0].T).T))
    f = min(int(fitted), K)
    return {"clip": clip, "law": label, "integration": integration, "mu": float(mu if mu is not None else mu_true),
            "mu_true": mu_true, "over": over or {}, "ke": spec.ground["ke"], "kd": spec.ground["kd"],
            "kf": spec.ground["kf"], "mass": spec.objects["box"].mass,
            "preflight_ok": bool(preflight.ok), "warnings": sorted({str(w.category.__name__) for w in caught}),
            "traj_rms_mm": float(np.sqrt(np.mean(gap ** 2))), "traj_rms_fitted_mm": float(np.sqrt(np.mean(gap[:f] ** 2))),
            "centre_rms_mm": float(np.sqrt(np.mean(centre ** 2))), "centre_max_mm": float(centre.max()),
            "rot_max_deg": float(max(angle)), "rot_max_fitted_deg": float(max(angle[:f])),
            "iou_all": float(iou.mean()), "iou_fitted": float(iou[:f].mean()),
            "loss_all": float(per_frame.mean()), "loss_fitted": float(per_frame[:f].mean()), "fitted": f,
            "centre_gap_per_frame_mm": [round(float(v), 2) for v in centre],
            "cpu_s": round(time.process_time() - t0, 1)}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--clip", default="warp_box_drop")
    p.add_argument("--laws", default="uncapped+warp(0.02)", help="comma-separated law labels (parse_law_label)")
    p.add_argument("--integrations", default="explicit,implicit")
    p.add_argument("--mu", default=None, help="comma-separated mu values: the profile (every law and integration)")
    p.add_argument("--fitted", type=int, default=26, help="frames of the fits' horizon (the 'fitted' columns)")
    p.add_argument("--over", default="{}", help="JSON overrides of the truth: ke, kd, kf, mass; substeps; split")
    p.add_argument("--out", default="/tmp/drop_diagnose")
    p.add_argument("--one", default=None, help=argparse.SUPPRESS)      # one row's JSON spec, run in this process
    a = p.parse_args(argv)
    if a.one:
        import tigradsim as tgs
        tgs.init(arch="cpu", precision="f32")
        job = json.loads(a.one)
        row = run_one(a.clip, job["law"], job["integration"], job["dir"], a.fitted, job.get("mu"), json.loads(a.over))
        print("ROW " + json.dumps(row), flush=True)
        return 0
    mus = [None] + ([float(v) for v in a.mu.split(",")] if a.mu else [])
    jobs = []
    for label in [x.strip() for x in a.laws.split(",") if x.strip()]:
        for integration in a.integrations.split(","):
            for mu in mus:
                job = {"law": label, "integration": integration, "mu": mu,
                       "dir": os.path.join(a.out, f"{label}_{integration}_{mu}".replace("(", "_").replace(")", ""))}
                jobs.append(([sys.executable, os.path.abspath(__file__), "--clip", a.clip, "--fitted", str(a.fitted),
                              "--over", a.over, "--one", json.dumps(job)], f"{label} {integration} mu {mu}"))
    rows = child_rows(jobs)
    print("| law | integration | mu | traj RMS mm (all / fitted) | centre RMS / max mm | rot max deg (all / fitted) | "
          "IoU all / fitted | loss all / fitted | pre-flight |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['law']}{' ' + json.dumps(r['over']) if r['over'] else ''} | {r['integration']} | {r['mu']:.3g} | {r['traj_rms_mm']:.1f} / {r['traj_rms_fitted_mm']:.1f} | "
              f"{r['centre_rms_mm']:.1f} / {r['centre_max_mm']:.1f} | {r['rot_max_deg']:.1f} / {r['rot_max_fitted_deg']:.1f} | "
              f"{r['iou_all']:.3f} / {r['iou_fitted']:.3f} | {r['loss_all']:.4g} / {r['loss_fitted']:.4g} | "
              f"{'ok' if r['preflight_ok'] else 'flagged'} |")
    print(json.dumps({"rows": rows}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
