"""Why the interacting footage fits miss (issue 46, item 6): tigradsim run at Warp's TRUTH against Warp's own
motion and against the footage's masks, under each contact-law option, and profiles along the unknowns.

For the clips of benchmarks/interacting_footage.py (scene files in benchmarks/footage/<clip>/scene.toml), the
scene is built with every unknown and contact constant at the value Warp used (truth.json: ke, kd, kf, the
Coulomb-equivalent mu of each pair, the masses, the ball's material), no fit.  Reported per law option:

    traj   the RMS gap [mm] between tigradsim's and Warp's positions at the frame times (ramp: both boxes'
           centres; ball: the ball's 205 vertices and the box's centre), and box B's final x [mm] (ramp)
    IoU    mean silhouette IoU of tigradsim's render against the footage masks (what the fit sees)
    loss   the scene's image loss (the fit's objective, [fit] blur and frames)

Then a profile along one unknown (ramp: box B's mass m_B / m_A; ball: lam) with everything else at the truth:
the value whose trajectory (or mask loss) is closest to Warp's says where a perfect fit under that law would
land; a minimum away from the truth is model discrepancy, not the optimiser.

    python3 benchmarks/interacting_diagnose.py [--clip warp_ramp_boxes|warp_ball_box] [--laws capped,uncapped,...]
        [--friction-velocity D] [--no-edges] [--frames K] [--over JSON] [--profile V1,V2,... --profile-law LAW]

--over sets truth_spec's overrides: ratio, ramp_mu, box_ke, box_kd, box_mu (ramp); mu, lam, damping, kf, assumed
(ball: "assumed": the contact constants the first fits held; ke, kd, kf, contact_mu: one constant of every
pair, e.g. a fit's nuisance estimates), masses ("volume" | "equal": the ball's
mass_distribution; Warp's clip lumps by volume), radius (the ball vertices' contact radius [m]: Warp's 0, the
scene file's default 0.01); integration ("explicit" | "implicit": the contact law's
damping_integration, every pair); substeps (steps per frame).  Each run is its own
process (a second Scene in one Taichi runtime may fail to compile).  Prints one JSON line per run and a JSON line
of every row at the end.  The measurements and what they show: benchmarks/RESULTS.md, "Interacting scenes from
Warp footage", the subsection "why the ratio and lam miss".
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
sys.path.insert(0, ROOT)

# (damping, friction, friction_velocity or None) options of tigradsim's contact law
LAW_OPTIONS = {"capped": ("capped", "capped", None), "uncapped": ("uncapped", "capped", None),
               "capped+huber": ("capped", "huber", None), "uncapped+huber": ("uncapped", "huber", None),
               "uncapped+warp": ("uncapped", "warp", None), "capped+warp": ("capped", "warp", None)}


def _law(name, friction_velocity=None):
    damping, friction, _ = LAW_OPTIONS[name]
    out = {"damping": damping, "friction": friction}
    if friction != "capped" and friction_velocity is not None:
        out["friction_velocity"] = friction_velocity
    return out


def truth_spec(clip, law, edges=True, **over):
    """The clip's scene spec with every constant at Warp's value, contact law `law` (a dict) everywhere."""
    if "integration" in over:       # kd, kf stepped explicitly or by local backward Euler (physics/contact.py)
        law = dict(law, damping_integration=over["integration"])
    from tigradsim.scenes.scene_file import load_scene

    folder = os.path.join(HERE, "footage", clip)
    truth = json.load(open(os.path.join(folder, "truth.json")))
    spec = load_scene(os.path.join(folder, "scene.toml"))
    spec.unknowns = []
    c = truth["contact"]
    if clip == "warp_ramp_boxes":
        mu = c["mu_coulomb_equivalent_pairs"]
        spec.ground.update(ke=c["ke"], kd=c["kd"], kf=c["kf"], mu=mu["box-ground"])
        spec.ground["law"] = dict(law)
        ramp = spec.colliders["ramp"]
        ramp.contact = dict(ke=c["ke"], kd=c["kd"], kf=c["kf"], mu=over.get("ramp_mu", mu["box-ramp"]))
        ramp.law = dict(law)
        m_a = truth["truth"]["box_a.mass"]       # Warp's masses: its contact constants are per kg of these
        spec.objects["box_a"].mass = m_a
        spec.objects["box_b"].mass = m_a * over.get("ratio", truth["truth"]["mass_ratio_b_over_a"])
        for o in spec.objects.values():
            o.contact = dict(ke=over.get("box_ke", c["ke"]), kd=over.get("box_kd", c["kd"]), kf=c["kf"],
                             mu=over.get("box_mu", mu["box-box"]))
            o.law = dict(law)
    else:
        # "assumed": the library's defaults that the fits of 2026-12-06 held ([fit] contact_constants = "assume")
        k = dict(ke=1e4, kd=10.0, kf=10.0, mu=0.5) if over.get("assumed") else \
            dict(ke=c["ke"], kd=c["kd"], kf=c["kf"], mu=c["mu"])
        for key in ("ke", "kd", "kf"):      # one contact constant of every pair (ball-ground, ball-box, box-ground)
            if key in over:
                k[key] = float(over[key])
        if "contact_mu" in over:
            k["mu"] = float(over["contact_mu"])
        spec.ground.update(k)
        spec.ground["law"] = dict(law)
        ball, box = spec.objects["ball"], spec.objects["box"]
        t = truth["truth"]
        ball.params = {"mu": over.get("mu", t["ball.mu"]), "lam": over.get("lam", t["ball.lam"])}
        ball.damping = over.get("damping", t["ball.damping"])
        if "radius" in over:        # the vertices' contact radius [m] (Warp's clip: 0; the scene file's default 0.01)
            ball.contact_radius = float(over["radius"])
        if "masses" in over:        # the ball's node masses: by volume (Warp's clip, the default) or equal shares
            ball.mass_distribution = over["masses"]
        box.contact = dict(k)
        box.law = dict(law)
    return spec, truth


def run(clip, law, edges=True, frames=None, **over):
    """(trajectory gap [mm], extra numbers, IoU mean, loss) of tigradsim at the truth (module docstring)."""
    import warnings

    from tigradsim.io.mask_checks import silhouette_iou
    from tigradsim.scenes.scene_build import Scene, load_scene_footage

    spec, truth = truth_spec(clip, law, edges, **over)
    if "substeps" in over:          # steps per frame (Warp's clips: 256)
        spec.substeps = int(over["substeps"])
    if frames is not None:
        spec.footage.count = frames
    footage = load_scene_footage(spec)
    from tigradsim.physics import coupling
    keep = coupling.box_pairs
    if not edges:      # corner contact only (as when the fits of 2026-12-06 ran): no box pair gets the edge term
        coupling.box_pairs = lambda *a: {}
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            scene = Scene(spec, footage, requires_grad=False, unknowns=False)
    finally:
        coupling.box_pairs = keep
    extra_terms = [type(t).__name__ for t in scene.sim.force_terms]
    alpha = scene.render()[..., -1]
    loss = scene.loss_value()
    iou = float(np.mean(silhouette_iou(alpha, footage.masks)))
    x = scene.timed.vertices.to_numpy()             # (K, V, 3) at the footage's frame times, world (y up)
    K = x.shape[0]
    tr = truth["trajectory"]
    extra = {"terms": extra_terms}
    if clip == "warp_ramp_boxes":
        start = scene.model.body_vertex_start
        ours = np.stack([x[:, start[b]:start[b + 1]].mean(axis=1) for b in range(2)], axis=1)   # (K, 2, 3)
        warp = np.asarray(tr["position"])[:K]
        gap = float(np.sqrt(np.mean(np.sum((ours - warp) ** 2, axis=-1))) * 1e3)
        extra.update({"B_final_x_mm": float(ours[-1, 1, 0] * 1e3), "warp_B_final_x_mm": float(warp[-1, 1, 0] * 1e3),
                 "A_final_x_mm": float(ours[-1, 0, 0] * 1e3), "warp_A_final_x_mm": float(warp[-1, 0, 0] * 1e3)})
    else:
        nr = int(scene.model.body_vertex_start[-1])
        ball = x[:, nr:]
        warp = np.load(os.path.join(HERE, "footage", clip, "ball_vertices.npz"))["x"][:K]
        gap = float(np.sqrt(np.mean(np.sum((ball - warp) ** 2, axis=-1))) * 1e3)
        box = x[:, :nr].mean(axis=1)
        wbox = np.asarray(tr["box_position"])[:K]
        extra.update({"box_gap_mm": float(np.sqrt(np.mean(np.sum((box - wbox) ** 2, axis=-1))) * 1e3),
                 "ball_min_height_mm": float(ball[..., 1].max(axis=1).min() - ball[..., 1].min(axis=1).max()) * 1e3,
                 "warp_ball_min_height_mm": float(warp[..., 1].max(axis=1).min() - warp[..., 1].min(axis=1).max()) * 1e3})
    return gap, extra, iou, loss


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--clip", default="warp_ramp_boxes")
    p.add_argument("--laws", default=",".join(LAW_OPTIONS))
    p.add_argument("--friction-velocity", type=float, default=None, help="huber's v_s or warp's delta [m/s]")
    p.add_argument("--no-edges", action="store_true", help="also run without the edge-edge box term")
    p.add_argument("--profile", default=None, help="comma-separated values of the ratio (ramp) or lam (ball)")
    p.add_argument("--profile-law", default="uncapped")
    p.add_argument("--frames", type=int, default=None)
    p.add_argument("--over", default="{}", help="JSON of truth_spec overrides (ratio, ramp_mu, mu, lam, damping)")
    p.add_argument("--one", action="store_true", help=argparse.SUPPRESS)      # one run in this process
    args = p.parse_args(argv)
    if args.one:            # one Scene per process: a second Scene in one Taichi runtime may fail to compile
        import tigradsim as tgs
        tgs.init()
        t0 = time.process_time()
        over = json.loads(args.over)
        edges = not args.no_edges
        gap, extra, iou, loss = run(args.clip, _law(args.laws, args.friction_velocity), edges, args.frames, **over)
        print("ROW " + json.dumps(dict(clip=args.clip, law=args.laws, edges=edges, **over, traj_mm=gap, iou=iou,
                                       loss=loss, cpu_s=time.process_time() - t0, **extra)), flush=True)
        return
    sys.path.insert(0, HERE)
    from _harness import child_rows
    jobs = [(name, edges, args.over) for name in args.laws.split(",")
            for edges in ((True, False) if args.no_edges else (True,))]
    if args.profile:
        key = "ratio" if args.clip == "warp_ramp_boxes" else "lam"
        jobs += [(args.profile_law, True, json.dumps(dict(json.loads(args.over), **{key: float(v)})))
                 for v in args.profile.split(",")]
    commands = []
    for name, edges, over in jobs:
        cmd = [sys.executable, os.path.abspath(__file__), "--one", "--clip", args.clip, "--laws", name, "--over", over]
        cmd += [] if edges else ["--no-edges"]
        cmd += [] if args.frames is None else ["--frames", str(args.frames)]
        cmd += [] if args.friction_velocity is None else ["--friction-velocity", str(args.friction_velocity)]
        commands.append((cmd, f"{name} {over}"))
    rows = child_rows(commands, tail=2000)
    print(json.dumps({"rows": rows}))


if __name__ == "__main__":
    main()
