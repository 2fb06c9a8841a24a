"""Which contact makes the ramp fit's rippled loss, and are its wrong-ratio minima the time step's?  (issue 46;
RESULTS.md, "The ramp fit's stuck point ..." (grad46) and the section of branch ripple46.)

Single forward rollouts of the 30-frame objective of `benchmarks/footage/warp_ramp_boxes/scene.toml`, built as
`tigradsim fit` builds it (f64; `Scene(spec, footage, unknowns=True)`, `use_frames`, `loss_value`), at a chosen
substep count, with chosen contact terms of the step removed (`--drop RigidColliderContact,BoxEdgeContact`: the
step's force terms are RigidColliderContact (box-ramp), RigidGroundContact (box-ground), BodyBodyContact (box-box
corners), BoxEdgeContact (box-box crossed edges)):

  --points P,...    evaluate the loss at named points (below) and print it;
  --scan-axis NAME  scan the loss along one unknown's internal (log) axis over +-scan-half at --scan-points
                    points around the first point, and report the ripple: the largest jump between neighbours
                    and the rms residual of a quadratic fitted to the scan, both relative to the loss;
  --bisect          within the scan's largest jump, bisect to a 1e-9-wide interval and compare the two
                    rollouts' body states step by step: the first step where they part by more than a smooth
                    dependence allows is the jump's step; print which contact terms act on which body there.

`--onsets DUMP.npz` alone: count the corner onsets per contact pair in windows of frames from a --dump.

Points: "grad46" (the stuck point, read to the bit from fall46 seed 0's journal as ramp_descent_check.py does),
"s0", "s3" (the fall46 seeds' final estimates, every unknown incl. the nuisance contact constants, from their
estimates.json), "warp" (DIAGNOSIS ONLY, never a fit's input: mu 0.25, ratio 1.2 and the generating engine's own
contact constants from truth.json: ke 2e4, kd 30, kf 200, box-box and ground mu 0.3), "s0@truth" / "s3@truth" /
"grad46@truth" (that point with only ramp.mu = 0.25 and box_b.mass = 1.2), "lm:PATH" (the end point of an
earlier --lm run, from its --json file).
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)
sys.path.insert(0, HERE)
SCENE = os.path.join(HERE, "footage", "warp_ramp_boxes", "scene.toml")
FALL46 = "/tmp/fall46"
DUMP = None
OVERRIDES = {}
NAMES = ["ramp.mu", "box_b.mass", "bodies.ke", "bodies.kd", "bodies.kf", "bodies.mu",
         "ground.ke", "ground.kd", "ground.kf", "ground.mu"]
# the generating engine's (Warp's) constants, truth.json "contact" (diagnosis only)
WARP = dict(zip(NAMES, [0.25, 1.2, 2e4, 30.0, 200.0, 0.3, 2e4, 30.0, 200.0, 0.3]))


def named_point(name):
    base, _, at_truth = name.partition("@")
    if base.startswith("lm:"):                 # the end point of an earlier --lm run's json
        vals = dict(json.load(open(base[3:]))["lm"]["values"])
    elif base == "warp":
        vals = dict(WARP)
    elif base == "grad46":
        from ramp_descent_check import journal_point
        v, _, _ = journal_point(f"{FALL46}/fall46_s0/warp_ramp_boxes/fit_journal.bin", 8.473491e-4, 30)
        vals = dict(zip(NAMES, [float(np.ravel(x)[0]) for x in v]))
    elif base in ("s0", "s3"):
        e = json.load(open(f"{FALL46}/fall46_{base}/warp_ramp_boxes/estimates.json"))
        vals = {k: float(e["unknowns"][k]["estimate"]) for k in NAMES}
    else:
        raise SystemExit(f"unknown point {name!r}")
    if at_truth:
        vals.update({"ramp.mu": 0.25, "box_b.mass": 1.2})
    vals.update(OVERRIDES)
    return vals


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--scene", default=SCENE, help="another scene file of the same clip (e.g. another contact law)")
    ap.add_argument("--substeps", type=int, default=32)
    ap.add_argument("--drop", default="", help="force terms to remove from the step (class names, comma-separated)")
    ap.add_argument("--points", default="grad46")
    ap.add_argument("--scan-axis", default=None)
    ap.add_argument("--scan-half", type=float, default=1e-3)
    ap.add_argument("--scan-points", type=int, default=21)
    ap.add_argument("--bisect", action="store_true")
    ap.add_argument("--frames", type=int, default=30)
    ap.add_argument("--set", action="append", default=[], help="NAME=VALUE: override one unknown at every point")
    ap.add_argument("--lm", type=int, default=0, help="iterations of the library's Levenberg-Marquardt from the "
                    "first point (fitting.levenberg_marquardt.least_squares, as identify's polish runs it)")
    ap.add_argument("--lm-fd", type=float, default=1e-4, help="its finite-difference step (the library's default)")
    ap.add_argument("--lm-fix", default="", help="unknowns the LM leaves at the point (comma-separated)")
    ap.add_argument("--json", default=None)
    ap.add_argument("--dump", default=None, help="--bisect: save both rollouts' body states (npz) here")
    args = ap.parse_args(argv)
    global DUMP
    DUMP = args.dump

    import tigradsim as tgs
    from tigradsim.fitting.params import pack, unpack
    from tigradsim.scenes.scene_build import Scene, load_scene_footage
    from tigradsim.scenes.scene_file import load_scene

    spec = load_scene(args.scene)
    spec = dataclasses.replace(spec, substeps=args.substeps)
    footage = load_scene_footage(spec, None)
    tgs.init(arch="cpu", precision="f64")
    scene = Scene(spec, footage, requires_grad=False, unknowns=True)
    scene.use_frames(args.frames)
    drop = [d for d in args.drop.split(",") if d]
    terms = [type(t).__name__ for t in scene.sim.force_terms]
    for d in drop:
        if d not in terms:
            raise SystemExit(f"--drop: no force term {d!r}; the step has {terms}")
    scene.sim.force_terms = [t for t in scene.sim.force_terms if type(t).__name__ not in drop]
    params = list(scene.params)
    names = [p.name for p in params]
    assert names == NAMES, names
    print(f"substeps {args.substeps} (dt {scene.dt:.6g} s, {scene.steps} steps); terms "
          f"{[type(t).__name__ for t in scene.sim.force_terms]}", flush=True)
    cpu0 = time.process_time()
    out = dict(substeps=args.substeps, dropped=drop, points={}, scan=None)

    def loss_x(x):
        unpack(params, x)
        return scene.loss_value()

    def internal(vals):
        for p in params:
            p.write(np.full(np.shape(p.value()), vals[p.name]))
        return pack(params)

    points = [s for s in args.points.split(",") if s]
    overrides = {k: float(v) for k, v in (kv.split("=") for kv in args.set)}
    global OVERRIDES
    OVERRIDES = overrides
    for name in points:
        vals = named_point(name)
        f = loss_x(internal(vals))
        out["points"][name] = dict(values=vals, loss=f)
        print(f"{name}: loss {f:.6e}  at " + ", ".join(f"{k}={v:.6g}" for k, v in vals.items()), flush=True)

    if args.scan_axis:
        x0 = internal(named_point(points[0]))
        i = names.index(args.scan_axis)
        ts = np.linspace(-args.scan_half, args.scan_half, args.scan_points)
        fs = []
        for t in ts:
            x = x0.copy()
            x[i] += t
            fs.append(loss_x(x))
        fs = np.array(fs)
        jumps = np.abs(np.diff(fs))
        quad = np.polyval(np.polyfit(ts, fs, 2), ts)
        f0 = fs[len(fs) // 2]
        k = int(np.argmax(jumps))
        out["scan"] = dict(axis=args.scan_axis, t=ts.tolist(), loss=fs.tolist(), max_jump=float(jumps[k]),
                           max_jump_rel=float(jumps[k] / f0), rms_quad_rel=float(np.std(fs - quad) / f0),
                           jump_at=[float(ts[k]), float(ts[k + 1])])
        print(f"scan {args.scan_axis} +-{args.scan_half:g}: loss at centre {f0:.6e}; largest neighbour jump "
              f"{jumps[k]:.3e} ({100 * jumps[k] / f0:.3f} %) between t {ts[k]:+.1e} and {ts[k + 1]:+.1e}; "
              f"rms about a quadratic {100 * np.std(fs - quad) / f0:.3f} %; range {100 * np.ptp(fs) / f0:.2f} %",
              flush=True)
        print("  loss - centre (x1e-6): " + " ".join(f"{1e6 * (f - f0):+.2f}" for f in fs), flush=True)
        if args.bisect:
            out["bisect"] = bisect(scene, params, loss_x, x0, i, ts[k], ts[k + 1], fs[k], fs[k + 1])
    if args.lm:
        from tigradsim.fitting.levenberg_marquardt import least_squares
        internal(named_point(points[0]))
        free = [p for p in params if p.name not in args.lm_fix.split(",")]
        hist = least_squares(scene.residuals, free, iters=args.lm, fd_step=args.lm_fd, printer=print)
        f = loss_x(pack(params))
        out["lm"] = dict(values={p.name: float(np.ravel(p.value())[0]) for p in params}, loss=f,
                         fd_step=args.lm_fd, fixed=args.lm_fix)
        print(f"LM end: loss {f:.6e} at " + ", ".join(f"{k}={v:.6g}" for k, v in out["lm"]["values"].items()),
              flush=True)
    out["cpu_s"] = time.process_time() - cpu0
    print(f"CPU {out['cpu_s']:.0f} s", flush=True)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(out, fh, indent=1, default=float)


def states(scene):
    """(steps + 1, bodies, 13) position, quaternion, velocity, angular velocity of every body at every step
    (the Simulator keeps every step when not checkpointing)."""
    st = scene.sim.state
    names = [k.name for k in st.kinds]
    q = getattr(st, "body_q").to_numpy() if "body_q" in names else None
    qd = getattr(st, "body_qd").to_numpy() if "body_qd" in names else None
    return np.concatenate([q.reshape(q.shape[0], q.shape[1], -1), qd.reshape(qd.shape[0], qd.shape[1], -1)], axis=2)


def bisect(scene, params, loss_x, x0, i, ta, tb, fa, fb, width=1e-9):
    """Narrow [ta, tb] (loss fa, fb) to the sub-interval of the largest jump, then compare the rollouts."""
    while tb - ta > width:
        tm = 0.5 * (ta + tb)
        x = x0.copy()
        x[i] += tm
        fm = loss_x(x)
        if abs(fm - fa) >= abs(fb - fm):
            tb, fb = tm, fm
        else:
            ta, fa = tm, fm
    print(f"bisected: t in [{ta:+.10e}, {tb:+.10e}] (width {tb - ta:.1e}): loss {fa:.9e} -> {fb:.9e} "
          f"(jump {fb - fa:+.3e}, {100 * (fb - fa) / fa:+.3f} %)", flush=True)
    runs = []
    for t in (ta, tb):
        x = x0.copy()
        x[i] += t
        loss_x(x)
        runs.append(states(scene))
    d = np.abs(runs[1] - runs[0]).max(axis=(1, 2))
    if DUMP:
        np.savez(DUMP, a=runs[0], b=runs[1], t=[ta, tb], dt=scene.dt)
    first = int(np.argmax(d > 1e-6 * max(d.max(), 1e-300) + 1e-12))
    big = int(np.argmax(d > 0.1 * d.max()))
    print(f"max state difference {d.max():.3e}; first step with a difference > 1e-12: {first} "
          f"(t = {first * scene.dt:.5f} s, frame {first * scene.dt * 30:.2f}); first > 10 % of the max: {big} "
          f"(t = {big * scene.dt:.5f} s)", flush=True)
    lo = max(first - 3, 0)
    for s in range(lo, min(first + 6, len(d))):
        per_body = np.abs(runs[1][s] - runs[0][s]).max(axis=1)
        print(f"  step {s}: |dstate| {d[s]:.3e}; per body {per_body}; A pos {runs[0][s][0][:3]}, "
              f"B pos {runs[0][s][1][:3]}", flush=True)
    return dict(t=[ta, tb], loss=[fa, fb], first_step=first, big_step=big, dmax=float(d.max()),
                diff=d.tolist(), state_a=runs[0][max(first - 1, 0)].tolist())


def corner_onsets(dump, windows=((0, 12), (12, 16), (16, 20), (20, 24), (24, 30))):
    """Per window of frames: how many box corners start touching (a corner's depth turns negative) against the
    ground (y = 0), the ramp plane and the other box, from a --dump of body states.  The boxes' half extents
    are read from the scene's meshes (user-side geometry)."""
    from tigradsim.physics.rigid_pose import quat_to_matrix_np
    from tigradsim.scenes.scene_file import load_scene
    spec = load_scene(SCENE)
    half = [np.abs(np.asarray(o.vertices)).max(axis=0) for o in spec.objects.values()]
    normal = np.asarray(spec.colliders["ramp"].normal, dtype=np.float64)
    normal = normal / np.linalg.norm(normal)
    z = np.load(dump)
    a, dt = z["a"], float(z["dt"])
    signs = np.array([[x, y, w] for x in (-1, 1) for y in (-1, 1) for w in (-1, 1)], dtype=np.float64)

    def touching(s):
        row = []
        for k in (0, 1):
            R = quat_to_matrix_np(s[k, 3:7])
            c = s[k, :3] + (signs * half[k]) @ R.T
            Ro = quat_to_matrix_np(s[1 - k, 3:7])
            local = (c - s[1 - k, :3]) @ Ro
            row += [(c[:, 1] < 0).sum(), (c @ normal < 0).sum(), np.all(np.abs(local) < half[1 - k], axis=1).sum()]
        return row

    acts = np.array([touching(s) for s in a])
    labels = ["A-ground", "A-ramp", "A corners in B", "B-ground", "B-ramp", "B corners in A"]
    for f0, f1 in windows:
        s0, s1 = int(round(f0 / (30 * dt))), min(int(round(f1 / (30 * dt))), len(a) - 1)
        ons = np.maximum(np.diff(acts[s0:s1 + 1], axis=0), 0).sum(axis=0)
        print(f"frames {f0}-{f1}: corner onsets " + ", ".join(f"{l} {n}" for l, n in zip(labels, ons)), flush=True)


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--onsets":
        corner_onsets(sys.argv[2])
        sys.exit()
    main()
