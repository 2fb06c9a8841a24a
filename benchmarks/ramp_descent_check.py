"""Is the ramp fit's stuck point a gradient bug or a step-size problem?  (issue 46; RESULTS.md, "One reserve
for failed candidates ...": start 1 reaches ratio 1.205 after the 20-frame horizon, then every Adam / BFGS
step on 30 frames raises the loss.)

The point is read, to the bit, from a fit's journal (the first Tape rollout on 30 frames with the recorded
loss, default 8.473491e-4 of /tmp/fall46/fall46_s0/warp_ramp_boxes), the scene is built from the committed
scene file exactly as `tigradsim fit` builds it (f64), and at that point, on the 30-frame objective:

  1. the Tape gradient (internal coordinates: log of every unknown) against the journal's recorded one;
  2. central finite differences along random unit directions and along each unknown's axis, at several
     steps h (the slope's dependence on h shows a kink or a non-smooth loss);
  3. the loss along the normalised negative gradient (and along Adam's first step, -lr sign(g)) at a ladder
     of step lengths: does ANY step descend?
  4. a fine scan along -grad (or --scan-axis NAME: along minus one unknown's axis) to show the loss's ripple;
  5. --descend N iterations of steepest descent with a backtracking (Armijo) line search from --t0, along the
     Tape gradient or (--smooth-h H) along central differences of step H (the slope at the ripple's scale).
Each stage is skipped by an empty list / 0.  One 30-frame rollout is ~1 CPU s (Tape ~2 s) at 32 substeps.
Measurements: benchmarks/RESULTS.md, "The ramp fit's stuck point: ... (issue 46; branch grad46)".

    PYTHONPATH=$PWD python3 benchmarks/ramp_descent_check.py [--journal PATH] [--loss 8.473491e-4]
        [--dirs 3] [--hs 1e-2,1e-3,1e-4] [--axis-hs 1e-3,1e-4] [--ladder 1e-1,...] [--json OUT]
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)
SCENE = os.path.join(HERE, "footage", "warp_ramp_boxes", "scene.toml")


def floats(text):
    return [float(t) for t in text.split(",") if t]


def journal_point(path, loss, frames):
    """(values per unknown, recorded internal gradient) of the first Tape rollout on `frames` frames whose
    loss is `loss` (relative 1e-6)."""
    from tigradsim.scenes.fit_journal import read_journal
    _, recs, _ = read_journal(path)
    for r in recs:
        if (r["kind"] == "forward" and r["key"][1] == frames and r["key"][2] == ("tape",) and r["loss"] is not None
                and abs(r["loss"] - loss) <= 1e-6 * loss):
            return [np.array(v, dtype=np.float64) for v in r["key"][3]], [np.array(c) for c in r["check"]], r["loss"]
    raise SystemExit(f"{path}: no Tape rollout on {frames} frames with loss {loss}")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--scene", default=SCENE)
    ap.add_argument("--journal", default="/tmp/fall46/fall46_s0/warp_ramp_boxes/fit_journal.bin")
    ap.add_argument("--loss", type=float, default=8.473491e-4)
    ap.add_argument("--frames", type=int, default=30)
    ap.add_argument("--dirs", type=int, default=3)
    ap.add_argument("--hs", default="1e-2,1e-3,1e-4")
    ap.add_argument("--axis-hs", default="1e-3,1e-4")
    ap.add_argument("--ladder", default="1e-1,3e-2,1e-2,3e-3,1e-3,3e-4,1e-4,1e-5")
    ap.add_argument("--adam-lr", type=float, default=0.05)
    ap.add_argument("--adam-scales", default="1,0.3,0.1,0.03,0.01,0.003")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--fine-axis", default="ramp.mu")
    ap.add_argument("--fine-hs", default="1e-5,1e-6,1e-7")
    ap.add_argument("--scan-to", type=float, default=2e-3)
    ap.add_argument("--scan-from", type=float, default=0.0)
    ap.add_argument("--scan-axis", default=None, help="scan along minus this unknown's axis, not -grad")
    ap.add_argument("--scan-points", type=int, default=20)
    ap.add_argument("--descend", type=int, default=8, help="iterations of gradient descent with backtracking")
    ap.add_argument("--t0", type=float, default=0.1, help="its first trial step (internal units)")
    ap.add_argument("--smooth-h", type=float, default=0.0,
                    help="> 0: descend along central differences of this step instead of the Tape gradient")
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)

    import tigradsim as tgs
    from tigradsim.core.tape import tape
    from tigradsim.scenes.scene_build import Scene, load_scene_footage
    from tigradsim.scenes.scene_file import load_scene

    values, recorded, jloss = journal_point(args.journal, args.loss, args.frames)
    spec = load_scene(args.scene)
    footage = load_scene_footage(spec, None)
    tgs.init(arch="cpu", precision="f64")
    scene = Scene(spec, footage, requires_grad=True, unknowns=True)
    scene.use_frames(args.frames)
    params = list(scene.params) + list(scene.camera_params)
    names = [p.name for p in params]
    assert len(params) == len(values), (names, len(values))
    for p, v in zip(params, values):
        p.write(v)
    x0 = np.concatenate([np.ravel(p.to_internal(p.value())) for p in params])
    lo = np.concatenate([np.ravel(p.internal_bounds()[0]) for p in params])
    hi = np.concatenate([np.ravel(p.internal_bounds()[1]) for p in params])
    out = {"names": names, "values": [float(np.ravel(v)[0]) for v in values], "journal_loss": jloss}
    cpu0 = time.process_time()

    def at(x):
        for p, xi in zip(params, x):
            p.write(np.full(np.shape(p.value()), p.from_internal(xi)))

    def loss(x):
        at(x)
        return scene.loss_value()

    at(x0)
    with tape(scene.fit.loss):
        scene.forward()
    f0 = float(scene.fit.loss[None])
    g = np.concatenate([np.ravel(p.internal_grad()) for p in params])
    rec = np.concatenate([np.ravel(c) for c in recorded])
    out.update(f0=f0, grad=g.tolist(), grad_recorded=rec.tolist())
    print(f"point: " + ", ".join(f"{n}={float(np.ravel(v)[0]):.6g}" for n, v in zip(names, values)), flush=True)
    print(f"loss {f0:.10e} (journal {jloss:.10e}); loss_value {loss(x0):.10e}", flush=True)
    print("internal bounds at the point: " + ", ".join(f"{n}" for n, a, b, c in zip(names, x0, lo, hi)
                                                       if abs(a - b) < 1e-12 or abs(a - c) < 1e-12) + " on a bound", flush=True)
    print("Tape grad (d loss / d log value): " + ", ".join(f"{n} {v:+.4e}" for n, v in zip(names, g)), flush=True)
    print(f"  max |Tape - journal| = {np.max(np.abs(g - rec)):.3e}", flush=True)

    def fd(d, h):
        fp, fm = loss(x0 + h * d), loss(x0 - h * d)
        return (fp - fm) / (2 * h), fp, fm

    def fd_row(label, d, hs):
        """Central-difference slopes along unit direction d at each step h, against the Tape's g @ d."""
        row = {"label": label, "tape": float(g @ d), "fd": {}}
        for h in floats(hs):
            s, fp, fm = fd(d, h)
            row["fd"][h] = (s, fp, fm)
            print(f"{label}: h {h:.0e}: FD slope {s:+.5e}  Tape {g @ d:+.5e}  rel {(s - g @ d) / abs(g @ d):+.2e}"
                  f"  (f+ - f0 {fp - f0:+.3e}, f- - f0 {fm - f0:+.3e})", flush=True)
        return row

    rng = np.random.default_rng(args.seed)
    out["directions"] = []
    for k in range(args.dirs):
        d = rng.standard_normal(x0.size)
        out["directions"].append(fd_row(f"random dir {k}", d / np.linalg.norm(d), args.hs))
    out["axes"] = [fd_row(f"axis {n:12s}", np.eye(x0.size)[i], args.axis_hs) for i, n in enumerate(names)]
    out["ladder"] = []
    u = -g / np.linalg.norm(g)
    for t in floats(args.ladder):
        f = loss(np.clip(x0 + t * u, lo, hi))
        out["ladder"].append((t, f))
        print(f"along -grad/|grad|, t {t:.0e}: loss - f0 {f - f0:+.4e} (predicted -t|g| {-t * np.linalg.norm(g):+.4e})",
              flush=True)
    out["adam"] = []
    a = -args.adam_lr * np.sign(g)             # Adam's first step (bias-corrected: lr * g / |g| per coordinate)
    for t in floats(args.adam_scales):
        f = loss(np.clip(x0 + t * a, lo, hi))
        out["adam"].append((t, f))
        print(f"along Adam's first step x {t:g} (lr {args.adam_lr * t:.2g}): loss - f0 {f - f0:+.4e} "
              f"(predicted {t * (g @ a):+.4e})", flush=True)
    out["axis_fine"] = []
    if args.fine_axis:
        i = names.index(args.fine_axis)
        d = np.zeros(x0.size)
        d[i] = 1.0
        for h in floats(args.fine_hs):
            s_, fp, fm = fd(d, h)
            out["axis_fine"].append((h, s_))
            print(f"axis {args.fine_axis}: h {h:.0e}: FD slope {s_:+.5e}  Tape {g[i]:+.5e}", flush=True)
    out["scan"] = []
    if args.scan_axis:               # scan along one unknown's axis instead of the gradient
        u = np.zeros(x0.size)
        u[names.index(args.scan_axis)] = -1.0
    for t in np.linspace(args.scan_from, args.scan_to, args.scan_points + 1)[1:]:
        f = loss(np.clip(x0 + t * u, lo, hi))
        out["scan"].append((float(t), f))
        print(f"scan along {'-' + args.scan_axis if args.scan_axis else '-grad/|grad|'}: t {t:.2e}: loss - f0 "
              f"{f - f0:+.4e} (linear {t * (g @ u):+.4e})",
              flush=True)
    out["descent"] = []
    x, fx = x0.copy(), f0
    for it in range(args.descend):
        # gradient descent with a backtracking (Armijo) line search: the step that the fit's Adam / BFGS lack
        if args.smooth_h > 0:     # the slope at the ripple's scale: central differences of step smooth_h
            gx = np.zeros(x.size)
            for i in range(x.size):
                e = np.zeros(x.size)
                e[i] = args.smooth_h
                xp, xm = np.clip(x + e, lo, hi), np.clip(x - e, lo, hi)
                gx[i] = (loss(xp) - loss(xm)) / (xp[i] - xm[i])
        else:
            at(x)
            with tape(scene.fit.loss):
                scene.forward()
            gx = np.concatenate([np.ravel(p.internal_grad()) for p in params])
        t, tries = args.t0, 0
        while True:
            tries += 1
            xn = np.clip(x - t * gx / np.linalg.norm(gx), lo, hi)
            fn = loss(xn)
            if fn <= fx - 1e-4 * np.dot(gx, x - xn) or tries >= 12:
                break
            t *= 0.5
        accepted = fn < fx
        out["descent"].append(dict(it=it, t=t, tries=tries, loss=fn, accepted=bool(accepted),
                                   values=dict(zip(names, [float(p.from_internal(v)) for p, v in zip(params, xn)]))))
        print(f"descent {it}: step {t:.3e} after {tries} tries: loss {fn:.6e} ({'accepted' if accepted else 'none lower'}); "
              f"ratio {float(params[names.index('box_b.mass')].from_internal(xn[names.index('box_b.mass')])):.5f}, "
              f"mu {float(params[names.index('ramp.mu')].from_internal(xn[names.index('ramp.mu')])):.5f}", flush=True)
        if not accepted:
            break
        x, fx = xn, fn
    out["cpu_s"] = time.process_time() - cpu0
    print(f"CPU {out['cpu_s']:.0f} s", flush=True)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(out, fh, indent=1, default=str)


if __name__ == "__main__":
    main()
