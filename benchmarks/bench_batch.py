"""16 rigid-mass fits (gradSim Table 1) batched in one Model against 16 fits one after another.

    python benchmarks/bench_batch.py [--fits 16] [--iters 60] [--polish 15] [--supervision image|state]
                                     [--repeats 2] [--res 64] [--precision f64|f32]

The protocol of `tigradsim.scenes.rigid_push` (`mass_trials`): trial k fits shape SHAPES[k % 5], true
mass and initial guess drawn log-uniformly from MASS_RANGE with numpy's generator seeded by --seed;
a 20 N push for 0.05 s, 0.6 s at dt 1/480, silhouettes every 12 steps at --res px (sigma 1e-3),
`iters - polish` Adam steps (lr 0.15, decay 0.93, log-mass) then `polish` BFGS (secant) steps, float64
(--precision f32: both sides in float32).
Sequential: one `PushScene` per shape (built once, reused), `fit_mass` per trial, as `mass_trials`
runs them (state supervision: the same scene without the renderer PushScene would run needlessly, and the
batched fit renders nothing either).  Batched: the same 16 bodies as the copies of one Model (`tgs.batched`; the copy's body is
built like `rigid_push.push_model` builds it), rendered as tiles of one atlas, fitted by `tgs.BatchFit`
with one Adam, then one BFGS, per copy: the same iterations, and the same final masses (printed: the
largest relative difference between the two, ~1e-12 or below).  Targets are rendered and every kernel
is compiled before the clocks start; the two are timed alternately, --repeats times each, best of each,
each run in its own process: `ti.ad.Tape` clears the gradient of every field in the process, so with
both sides built each fit also paid for the other side's fields (one sequential image fit: 2.2 s alone,
5.8 s with the batched model alive; the figures below marked "one process" were measured that way).
--compare-renderers also times the other way to render a batch: one SoftRasterizer per copy, all reading
the batched rollout (measured: the atlas 1.3-1.5x faster per iteration at 16 copies, on a loaded machine).
The last line is one JSON object: {"fits", "batched_s", "sequential_s", "speedup", ...}.

Measured on an Intel Xeon (AVX-512, 2 vCPUs; the third session of 2026-12-05), each side in its own process,
best of 2: image f64 42.65 / 7.65 s, 5.58x; f32 with the pixel lanes 8 floats wide (`exec.simd`), 37.40 /
4.64 s, 8.06x (a first run 34.87 / 4.93 s, 7.07x), against 41.16 / 7.40 s, 5.56x, for a checkout of the code
before (4 lanes), run just before it.
The same Xeon, the next session, silhouettes composited in the binning kernel (benchmarks/MEASURED.md, "The same Xeon, a
fourth session"): f64 23.87 / 4.76 s, 5.02x, against 26.96 / 6.07 s, 4.44x, for the code before, run just
before it; f32 24.10 / 4.44 s, 5.42x; f64 ratios of 3.6-5.0x in four runs that afternoon.
Measured on the shared 2-core AMD machine, each side in its own process (defaults, best of 2), 2026-12-05
(second session: the image losses' written-out backward with the rows of each image frame on a thread,
silhouettes without per-pixel log and exp where no face reaches, PerCopy's values read once per record,
the atlas placed by the renderer's pixel_offsets; benchmarks/MEASURED.md):
  image: sequential 19.41 s, batched 4.73 s: 4.11x (after the loss change); 18.85 / 4.32 s: 4.36x (and the
         per-pixel skips); 18.41 / 4.16 s: 4.43x (all of them); --precision f32 the same hour: 16.10 /
         3.45 s, 4.67x.  Final code (the lanes' backward taking each tile's dL/dS in its own iteration
         too): 18.99 / 4.25 s: 4.47x; f32 15.46 / 3.28 s: 4.72x.  With lane groups past an edge line
         skipped: 17.96 / 3.92 s: 4.58x; f32 15.97 / 2.97 s: 5.38x, again 16.46 / 3.22 s: 5.11x.  A batched
         iteration ~65 ms, ~55 in kernels, ~42 of them the lanes' binning (0.65 ms a frame) and backward
         (1.04 ms a frame, its dL/dS included); in f32 0.48 and 0.73 ms
  state: sequential 21.08 s, batched 0.78 s: 26.9x (13.9x the day before: the batched state fit was mostly
         the per-copy value reads that PerCopy.reading() now does once)
The same day, first session (silhouettes in pixel lanes, benchmarks/MEASURED.md):
  image: sequential 19.65 s, batched 6.17 s: 3.18x; a second run 20.52 / 5.87 s: 3.49x; with PerCopy's one
         table read per step 21.99 / 6.11 s: 3.60x   (the pair list, the
         same morning, one repeat: 25.03 /
         11.08 s, 2.26x); a batched iteration ~115 ms, ~80 of it in kernels (the renderer ~60, the loss ~9)
The day before (2026-12-04, after the contact, gradient-clearing and silhouette changes of benchmarks/MEASURED.md):
  image: sequential 29.1 s, batched 10.8 s: 2.70x   (the code before them, the same hour: 28.2 / 11.7 s, 2.41x)
  state: sequential 24.1 s, batched 1.73 s: 13.9x   (before them, the same hour: 25.7 / 2.09 s, 12.3x)
An earlier run of the older code on a slower day: image 61.1 / 18.9 s (3.23x; 3.89x in a quieter run),
state 30.4 / 3.6 s (8.47x): the ratio moves with the machine's state; compare figures of one hour only.
Measured before, both sides in ONE process (so each fit also cleared the other side's gradients), one
run each, load 2-4 from other jobs:
  image, before the renderer changes below: sequential 104.4 s, batched 39.1 s: 2.67x
  image, after: sequential 104.7 s, batched 25.5 s: 4.10x at load 4-5 (its second repeat alone: 3.70x;
         two runs of earlier stages of the changes: 3.01x, 3.32x): the ratio moves by +-0.5 with the load
  state (no renderer, unchanged by them): sequential 36.6 s, batched 3.3 s: 11.2x (recorded before: 9.5x)
The renderer changes (renderers/softras/): each frame's pairs and per-pixel sums are kept for the
backward pass instead of re-binning and re-compositing the frame there (keep_frames); silhouettes sum
log(1 - D) while binning (no barycentrics, no depth, no second pair loop) and have a written-out
backward whose per-pair loop runs on threads.  Both paths use the same renderer, so both gain; the
batched kernel time per iteration (Taichi's profiler, min per launch) went 353 -> 180 ms, the
sequential's per fit and iteration 26 -> 20 ms, on top of ~50 ms of launches and Python per
sequential fit-iteration, which the batch pays once for all copies.
Where the batched image fit's kernel time goes now (min-based): binning with the coverage sums 37 %,
the silhouette backward 27 %, writing the pair list 6 %, Tape gradient clearing 5 %, the loss 10 %,
restoring kept frames 3 %, compositing 3 %.  The per-pair work is the same per copy in both paths (the
16 copies' atlas has 69k pairs per frame, 9.3 per covered pixel); no pixel is saturated (A == 1 in
float64) at 64 px and sigma 1e-3, so skipping saturated pixels would save nothing here.
"""
import argparse
import json
import time

import numpy as np

from _harness import PIN_THREADS, add_pin_threads_argument, run_child


def add_push_body(b, shape, push=20.0, push_time=0.05, ground=None):
    """One Table 1 body (as `rigid_push.push_model` builds it: mass 1 kg at rest at x = START_X, contact
    spread over a flat base, its push) added to builder `b`; returns the body index."""
    import tigradsim.scenes.rigid_push as rp
    from tigradsim.physics.rigid import add_body_force
    ground = dict(rp.GROUND if ground is None else ground)
    vertices, faces = rp.shape_mesh(shape)
    vertices = vertices - vertices.mean(0)
    b.add_ground(**ground)
    bottom = int(np.sum(vertices[:, 1] < vertices[:, 1].min() + 1e-6))
    contact = {k: ground[k] * 4.0 / max(bottom, 4) for k in ("ke", "kd", "kf")}
    if bottom < 4:
        contact["kd"] = rp.ROUND_KD
    body = b.add_rigid_body(vertices, faces, mass=1.0, position=(rp.START_X, -vertices[:, 1].min(), 0.0),
                            mu=ground["mu"], **contact)
    add_body_force(b, body, force=(push, 0.0, 0.0), start=0.0, end=push_time)
    return body


def draws(fits, seed):
    import tigradsim.scenes.rigid_push as rp
    rng = np.random.default_rng(seed)
    shapes = [rp.SHAPES[k % len(rp.SHAPES)] for k in range(fits)]
    truths, guesses = zip(*[rp.draw_masses(rng) for _ in range(fits)])
    return shapes, list(truths), list(guesses)


def quiet(*_a, **_k):
    pass


class StateScene:
    """`PushScene(shape, supervision="state")` without its renderer (which a state fit never reads, but
    which PushScene runs in every rollout): `rigid_push.push_model`, a Simulator, a BodyRecorder of the
    centre of mass every 12 steps and a state-supervised VideoFit of the log-mass Param."""

    def __init__(self, shape):
        import tigradsim as tgs
        from tigradsim.scenes.rigid_push import push_model
        self.model = push_model(shape)
        sim = tgs.Simulator(self.model, dt=1 / 480, steps=int(round(0.6 * 480)))
        self.mass = tgs.Param(self.model.body_mass, "mass", lower=0.05, upper=50.0, log_space=True)
        rec = tgs.BodyRecorder(sim, every=12)
        self.fit = tgs.VideoFit(sim, None, [self.mass], supervision="state", state_source=rec.positions)

    def set_mass(self, mass):
        self.model.set("body_mass", [float(mass)])

    def get_mass(self):
        return float(self.model.get("body_mass")[0])

    def target(self):
        return self.fit.record_state()


class Sequential:
    def __init__(self, shapes, truths, args):
        from tigradsim.scenes.rigid_push import PushScene
        self.shapes, self.args = shapes, args
        make = (lambda s: PushScene(s, res=args.res)) if args.supervision == "image" else StateScene
        self.scenes = {s: make(s) for s in sorted(set(shapes))}
        self.targets = []
        for s, m in zip(shapes, truths):
            self.scenes[s].set_mass(m)
            self.targets.append(self.scenes[s].target())

    def run(self, guesses):
        out = []
        for s, target, g in zip(self.shapes, self.targets, guesses):
            sc = self.scenes[s]
            sc.set_mass(g)
            out.append(fit_quiet(sc, target, self.args))
        return np.array(out)


def fit_quiet(sc, target, args):
    """`PushScene.fit_mass` without its progress lines."""
    from tigradsim.fitting.optim import BFGS, Adam, History
    sc.fit.history = History()
    adam = args.iters - args.polish
    if adam:
        sc.fit.fit(target, iters=adam, optimizer=Adam([sc.mass], lr=0.15, lr_decay=0.93), log_every=0)
    if args.polish:
        sc.fit.fit(target, iters=args.polish, optimizer=BFGS([sc.mass], lr=0.05), log_every=0)
    return sc.get_mass()


class Batched:
    def __init__(self, shapes, truths, args):
        import tigradsim as tgs
        import tigradsim.scenes.rigid_push as rp
        from tigradsim.renderers import Camera
        self.args = args
        self.batch = tgs.batched(lambda b, copy: add_push_body(b, shapes[copy]), copies=len(shapes))
        sim = tgs.Simulator(self.batch.model, dt=1 / 480, steps=int(round(0.6 * 480)))
        cam = Camera(eye=rp.CAMERA_EYE, target=rp.CAMERA_TARGET, fov=45, width=args.res, height=args.res)
        masses = self.batch.params("body_mass", "mass", lower=0.05, upper=50.0, log_space=True)
        self.fit = tgs.BatchFit(self.batch, sim, masses, camera=cam if args.supervision == "image" else None,
                                every=12, supervision=args.supervision,
                                edge_softness=1e-3, gamma=1e-4)
        self.batch.set("body_mass", truths)
        self.targets = self.fit.targets()

    def run(self, guesses):
        import tigradsim as tgs
        self.batch.set("body_mass", guesses)
        adam = self.args.iters - self.args.polish
        if adam:
            self.fit.fit(self.targets, iters=adam, optimizer=lambda p: tgs.Adam(p, lr=0.15, lr_decay=0.93),
                         log_every=0)
        if self.args.polish:
            self.fit.fit(self.targets, iters=self.args.polish, optimizer=lambda p: tgs.BFGS(p, lr=0.05),
                         log_every=0)
        return np.array([v[0][0] for v in self.fit.values()])


def compare_renderers(shapes, truths, guesses, bat, args, repeats=2):
    """Seconds per Tape iteration of the same batched rollout rendered by B SoftRasterizers (one per copy,
    each reading its copy's vertices through vertex_ids) against the atlas (`bat`, one Adam step included)."""
    import taichi as ti
    import tigradsim as tgs
    import tigradsim.scenes.rigid_push as rp
    from tigradsim.physics.rigid import RigidSurface
    from tigradsim.renderers import Camera, SilhouetteMSE, SoftRasterizer
    batch = tgs.batched(lambda b, copy: add_push_body(b, shapes[copy]), copies=len(shapes))
    sim = tgs.Simulator(batch.model, dt=1 / 480, steps=int(round(0.6 * 480)))
    surface = RigidSurface(sim, every=12)
    cam = Camera(eye=rp.CAMERA_EYE, target=rp.CAMERA_TARGET, fov=45, width=args.res, height=args.res)
    start = batch.model.body_vertex_start
    rens = [SoftRasterizer(cam, batch.model.body_faces[c], int(start[c + 1] - start[c]), frames=surface.frames,
                           edge_softness=1e-3, gamma=1e-4, vertex_ids=np.arange(start[c], start[c + 1]))
            for c in range(len(shapes))]
    sim.observe(lambda state, slot, frame: [r.render(surface.vertices, frame, frame) for r in rens], 12)
    batch.set("body_mass", truths)
    sim.run()
    losses = [SilhouetteMSE(r.image, r.image.to_numpy()) for r in rens]
    batch.set("body_mass", guesses)
    loss = ti.field(float, shape=(), needs_grad=True)

    def many():
        with ti.ad.Tape(loss):
            sim.run()
            for lo in losses:
                lo(loss)
    one_iter = argparse.Namespace(**{**vars(args), "iters": 1, "polish": 0})
    bat.args = one_iter
    many()
    best = {"renderers": [], "atlas": []}
    for _ in range(repeats):
        t = time.perf_counter()
        many()
        best["renderers"].append(time.perf_counter() - t)
        t = time.perf_counter()
        bat.run(guesses)
        best["atlas"].append((time.perf_counter() - t) / 2)      # iters=1: two taped iterations
    bat.args = args
    r, a = min(best["renderers"]), min(best["atlas"])
    print(f"rendering {len(shapes)} copies per taped iteration: {len(shapes)} SoftRasterizers {r:.3f} s, one atlas "
          f"{a:.3f} s (incl. the optimizer step): atlas {r / a:.2f}x faster")


def time_side(args):
    """In a child process: build one side (`--side`), compile its kernels with a short run, time one
    full run of the fits; prints one JSON line {"seconds", "masses", "setup_s"}."""
    import tigradsim as tgs
    tgs.init(arch=args.arch, precision=args.precision, seed=args.seed, pin_threads=PIN_THREADS[args.pin_threads])
    shapes, truths, guesses = draws(args.fits, args.seed)
    t0 = time.perf_counter()
    runner = (Sequential if args.side == "sequential" else Batched)(shapes, truths, args)
    runner.args = argparse.Namespace(**{**vars(args), "iters": 2, "polish": 1})
    runner.run(guesses)
    runner.args = args
    setup = time.perf_counter() - t0
    t = time.perf_counter()
    masses = runner.run(guesses)
    seconds = time.perf_counter() - t
    if args.compare_renderers and args.supervision == "image" and args.side == "batched":
        compare_renderers(shapes, truths, guesses, runner, args)       # after the timed run: its fields
    print(json.dumps({"seconds": seconds, "masses": [float(m) for m in masses], "setup_s": setup}))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--fits", type=int, default=16)
    ap.add_argument("--iters", type=int, default=60)
    ap.add_argument("--polish", type=int, default=15)
    ap.add_argument("--supervision", choices=("image", "state"), default="image")
    ap.add_argument("--res", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--arch", default="cpu")
    ap.add_argument("--precision", choices=("f64", "f32"), default="f64",
                    help="both sides' float type (f32: SIMD lanes twice as wide; masses agree to ~1e-6, not 1e-12)")
    ap.add_argument("--compare-renderers", action="store_true",
                    help="also time B renderers sharing the batched rollout against the atlas (image)")
    add_pin_threads_argument(ap)
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--side", choices=("sequential", "batched"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if not 0 <= args.polish <= args.iters:
        ap.error(f"--polish must lie in [0, --iters], got {args.polish}")
    if args.child:
        return time_side(args)
    # Each side runs in its own process, alternately: `ti.ad.Tape` clears the gradient of every
    # field in the process, so a fit with the other side's scenes alive pays for theirs too
    # (measured: one sequential image fit 2.2 s alone, 5.8 s with the batched model built).
    passed = ["--fits", args.fits, "--iters", args.iters, "--polish", args.polish, "--supervision",
              args.supervision, "--res", args.res, "--seed", args.seed, "--arch", args.arch,
              "--pin-threads", args.pin_threads, "--precision", args.precision]
    times = {"sequential": [], "batched": []}
    result = {}
    for rep in range(args.repeats):
        for name in ("sequential", "batched"):
            extra = ["--compare-renderers"] if args.compare_renderers and name == "batched" and rep == 0 else []
            out = run_child(__file__, passed + ["--side", name] + extra)
            times[name].append(out["seconds"])
            result[name] = np.array(out["masses"])
            print(f"repeat {rep}: {name:10s} {times[name][-1]:8.2f} s (setup, targets and compiling in its "
                  f"process: {out['setup_s']:.1f} s)", flush=True)
    shapes, truths, guesses = draws(args.fits, args.seed)
    s, b = min(times["sequential"]), min(times["batched"])
    truth = np.array(truths)
    rel = lambda m: np.abs(m - truth) / truth                            # noqa: E731
    diff = float(np.max(np.abs(result["batched"] - result["sequential"]) / np.abs(result["sequential"])))
    print(f"\n{args.fits} rigid-mass fits ({args.supervision} supervision, {args.iters} iterations = "
          f"{args.iters - args.polish} Adam + {args.polish} BFGS, {args.res} px, {args.precision})")
    print(f"{'':12s} {'seconds':>9s} {'s / fit':>9s} {'mean rel. err':>14s} {'max rel. err':>13s}")
    for name, sec in (("sequential", s), ("batched", b)):
        r = rel(result[name])
        print(f"{name:12s} {sec:9.2f} {sec / args.fits:9.3f} {r.mean():14.3e} {r.max():13.3e}")
    print(f"speedup (throughput, batched vs sequential): {s / b:.2f}x; batched - sequential masses: max rel. "
          f"{diff:.2e}")
    print(json.dumps({"fits": args.fits, "batched_s": round(b, 3), "sequential_s": round(s, 3),
                      "speedup": round(s / b, 3), "supervision": args.supervision, "iters": args.iters,
                      "res": args.res, "precision": args.precision, "pin_threads": args.pin_threads, "max_rel_diff_batched_vs_sequential": diff,
                      "mean_rel_err_batched": float(rel(result["batched"]).mean())}))


if __name__ == "__main__":
    main()
