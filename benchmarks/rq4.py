"""gradSim RQ4 as a table: how imperfect dynamics, imperfect rendering and the shading cue affect
identifying the mass of a pushed rigid body from video (the Table 1 scene, `tigradsim.scenes.rigid_push`).

Every row fits the same truths from the same initial guesses (`draw_masses` with numpy's generator
seeded by --seed, one draw per trial in order: trial k here is trial k of `mass_trials` at the same
seed with --shape fixed).  The fit's model is always the default one (`PushScene`: the paper's push,
dt 1/480 s, 64 px soft silhouettes; for the Lambert / textured rows the same scene rendered with that
shading, `AblationScene`); only the *target* video is ablated:

  * reference: the target rendered by the fit's own model (the shading-cue rows are references too).
  * imperfect dynamics: the target simulated at dt/4 (4x the substeps per frame); with the other
    contact-damping law (damping="uncapped", dflex / Warp, instead of the default capped law); with the
    known push 5% stronger than the fit assumes.
  * imperfect rendering: Gaussian pixel noise (sigma 0.02, 0.05; clipped to [0, 1], drawn per trial from
    numpy's generator seeded by (seed, trial)); Gaussian blur (sigma `BLUR_PX` px per frame); the camera
    moved 1 cm along its right axis, or turned 0.5 degree about its up axis (eye fixed); with Lambert
    shading, the albedo 10% brighter (`WRONG_COLOR`) or the light turned `WRONG_LIGHT_DEG` degrees about
    the vertical.
  * shading cues: silhouette (the default, = the reference), Lambert (albedo `COLOR`, one directional
    light + ambient, `LIGHTS`), textured (Lambert with per-vertex albedo drawn once from rng 5).

Columns: mean absolute relative error of the final mass over trials (± std over trials); the
iterations to 1%: the History index (0 = the initial guess; one index per forward + backward
rollout, Adam's steps then BFGS's, whose first evaluation repeats Adam's last point) at which the
mass is first within 1% of the truth (`iters_to_first`), and from which it stays within 1% to the end
of the fit (`iters_to_tol`), each the mean over the trials that get there ("never" when none does),
with how many did; seconds per trial (fit only, 2 shared cores).

    python benchmarks/rq4.py --trials 5            # the box table in paper_tables.md
                                                   # (defaults: 3 trials, box, 60 iterations = 45 Adam + 15 BFGS)
    python benchmarks/rq4.py --quick               # 1 trial, 8 iterations, 32 px (a test of the machinery)
    python benchmarks/rq4.py --rows reference,noise_0.02

Measured (5 trials, seed 0, 60 iterations, 64 px; mean abs. relative error of the mass, box / sphere):
reference 2.9e-7 / 6.9e-7; target at dt/4 3.9e-4 / 5.4; damping "uncapped" 2.9e-7 (the box never
touches down: its video is bit-identical) / 5.4; push +5% 4.8e-2 / 4.6; noise 0.02 1.3e-4 / 9.9e-5,
0.05 3.4e-4 / 2.8e-4; blur 1.8e-3 / 1.5e-4; camera 1 cm 0.11 / 4.5e-2, 0.5 deg 0.11 / 7.1e-2; Lambert
albedo +10% 6.9e-4 / 1.9e-4, light 15 deg 2.7e-4 / 3.8e-3; Lambert 4.3e-7 / 6.0e-7; textured 2.5e-7 /
8.9e-7.  The camera and the push bias the mass by the ablation's size or more and never settle within
1%; noise, blur, colour and light cost < 0.4%.  The 42-vertex sphere rolls over its vertices, and every
dynamics ablation changes its roll so much (tests/test_rq4.py: pixels differ by up to ~1) that the fit
runs off (estimates 0.57..27.5 kg for truths 0.54..2.15 kg).  Box 685 s wall / 431 s CPU, sphere
1236 s / 604 s, on 2 cores shared with the test suite and other jobs.

Results go to benchmarks/rq4.json, one table per --shape (--quick: rq4_quick.json, not rendered) and are rendered into
benchmarks/paper_tables.md by paper_tables.py (section "RQ4"); the last stdout line is JSON.
"""
import argparse
import datetime
import json
import os
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

BLUR_PX = 1.0                                   # Gaussian blur of the blurred target [px]
CAMERA_SHIFT = 0.01                             # camera moved along its right axis [m]
CAMERA_TURN_DEG = 0.5                           # camera turned about its up axis [deg]
PUSH_FACTOR = 1.05                              # the target's push / the fit's push
DT_FACTOR = 4                                   # the target's substeps per fit step
COLOR = (0.8, 0.5, 0.3)                         # the Lambert rows' albedo
WRONG_COLOR = tuple(1.1 * c for c in COLOR)     # the target's albedo in the "wrong colour" row
LIGHTS = [((0.4, 0.8, 1.0), (0.7, 0.7, 0.7))]   # the renderer's default light (direction to it, rgb)
WRONG_LIGHT_DEG = 15.0                          # the target's light turned about the vertical [deg]
TEXTURE_SEED = 5

# name: (group, label, fit shading, how the target differs)
ROWS = {
    "reference": ("reference", "none (silhouette)", "silhouette", {}),
    "dt_fine": ("imperfect dynamics", f"target at dt/{DT_FACTOR}", "silhouette", {"dt_factor": DT_FACTOR}),
    "uncapped": ("imperfect dynamics", "target with damping=\"uncapped\"", "silhouette", {"damping": "uncapped"}),
    "push_5pct": ("imperfect dynamics", "target's push +5%", "silhouette", {"push_factor": PUSH_FACTOR}),
    "noise_0.02": ("imperfect rendering", "pixel noise sigma 0.02", "silhouette", {"noise": 0.02}),
    "noise_0.05": ("imperfect rendering", "pixel noise sigma 0.05", "silhouette", {"noise": 0.05}),
    "blur": ("imperfect rendering", f"Gaussian blur {BLUR_PX:g} px", "silhouette", {"blur": BLUR_PX}),
    "camera_1cm": ("imperfect rendering", "camera moved 1 cm", "silhouette", {"camera_shift": CAMERA_SHIFT}),
    "camera_0.5deg": ("imperfect rendering", "camera turned 0.5°", "silhouette", {"camera_turn": CAMERA_TURN_DEG}),
    "wrong_color": ("imperfect rendering", "Lambert, albedo +10%", "lambert", {"color": WRONG_COLOR}),
    "wrong_light": ("imperfect rendering", f"Lambert, light turned {WRONG_LIGHT_DEG:g}°", "lambert",
                    {"light_turn": WRONG_LIGHT_DEG}),
    "lambert": ("shading cues", "Lambert", "lambert", {}),
    "textured": ("shading cues", "textured (Lambert, per-vertex albedo)", "textured", {}),
}


def iters_to_tol(values, truth, tol=0.01):
    """The first index k of `values` (one estimate per History entry) from which every estimate is
    within `tol` (relative) of `truth`; None when the last one is not."""
    err = np.abs(np.asarray(values, dtype=np.float64).reshape(len(values), -1)[:, 0] - truth) / abs(truth)
    if not len(err) or err[-1] > tol:
        return None
    outside = np.nonzero(err > tol)[0]
    return int(outside[-1]) + 1 if len(outside) else 0


def iters_to_first(values, truth, tol=0.01):
    """The first index k of `values` (one estimate per History entry) within `tol` (relative) of
    `truth`; None when none is."""
    err = np.abs(np.asarray(values, dtype=np.float64).reshape(len(values), -1)[:, 0] - truth) / abs(truth)
    inside = np.nonzero(err <= tol)[0]
    return int(inside[0]) if len(inside) else None


def turned(vec, axis, degrees):
    """`vec` (3,) rotated by `degrees` about the unit `axis` (3,)."""
    from tigradsim.renderers.camera import rodrigues
    axis = np.asarray(axis, dtype=np.float64)
    return rodrigues(np.radians(degrees) * axis / np.linalg.norm(axis)) @ np.asarray(vec, dtype=np.float64)


def ablated_camera(camera, shift=0.0, turn=0.0):
    """The look-at `camera` moved `shift` m along its right axis, then turned `turn` degrees about its
    up axis (eye fixed)."""
    right, up = camera.rotation[0], camera.rotation[1]
    eye = np.asarray(camera.eye, dtype=np.float64) + shift * right
    target = np.asarray(camera.target, dtype=np.float64) + shift * right
    target = eye + turned(target - eye, up, turn)
    return camera.replace(eye=tuple(eye), target=tuple(target))


def texture_colors(count):
    """The textured rows' per-vertex albedo (count, 3), fixed (rng `TEXTURE_SEED`)."""
    return np.random.default_rng(TEXTURE_SEED).uniform(0.2, 1.0, (count, 3))


def _ablation_scene_class():
    """`AblationScene` (defined lazily so that importing this module does not start Taichi)."""
    from tigradsim.sim.simulator import Simulator
    from tigradsim.fitting.optim import Param
    from tigradsim.fitting.sysid import VideoFit, render_surface
    from tigradsim.physics.rigid_observers import RigidSurface
    from tigradsim.renderers import Camera, SoftRasterizer
    from tigradsim.scenes import rigid_push as rp

    class AblationScene(rp.PushScene):
        """`PushScene` (image supervision) with the hooks RQ4's targets need: a ground with another
        damping law, and Lambert / textured shading.  Args as `PushScene`, plus
        damping: the ground's contact-damping law ("capped", the default, or "uncapped");
        shading: "silhouette", "lambert" (albedo `COLOR`, `LIGHTS`) or "textured" (Lambert, albedo
        `texture_colors`)."""

        def __init__(self, shape="box", *, push=20.0, push_time=0.05, duration=0.6, dt=1 / 480, every=12, res=64,
                     sigma=1e-3, damping="capped", shading="silhouette"):
            if shading not in ("silhouette", "lambert", "textured"):
                raise ValueError(f"shading: expected 'silhouette', 'lambert' or 'textured', got {shading!r}")
            if damping not in ("capped", "uncapped"):
                raise ValueError(f"damping: expected 'capped' or 'uncapped', got {damping!r}")
            if not (dt > 0 and duration > 0) or int(every) != every or every < 1:
                raise ValueError(f"dt, duration, every: expected positive times and a positive integer, got "
                                 f"{dt!r}, {duration!r}, {every!r}")
            self.shape = shape
            self.model = rp.push_model(shape, push=push, push_time=push_time, ground=dict(rp.GROUND, damping=damping))
            self.sim = Simulator(self.model, dt=dt, steps=int(round(duration / dt)))
            self.surface = RigidSurface(self.sim, every=every)
            cam = Camera(eye=rp.CAMERA_EYE, target=rp.CAMERA_TARGET, fov=45, width=res, height=res)
            colors = texture_colors(self.surface.vertex_count) if shading == "textured" else COLOR
            self.renderer = SoftRasterizer(cam, self.surface.faces, self.surface.vertex_count,
                                           frames=self.surface.frames, sigma=sigma, gamma=1e-4,
                                           shading="silhouette" if shading == "silhouette" else "lambert",
                                           vertex_colors=colors, lights=LIGHTS)
            render_surface(self.sim, self.renderer, self.surface, every)
            self.mass = Param(self.model.body_mass, "mass", lower=0.05, upper=50.0, log_space=True)
            self.fit = VideoFit(self.sim, self.renderer, [self.mass])

    return AblationScene


def render_target(fit_scene, truth, scene_kw, ablation, rng_noise, target_scenes):
    """The target video (K, H, W, C) at mass `truth` for one row's `ablation` (see `ROWS`).

    Dynamics ablations roll out a separate target scene (cached in `target_scenes`); rendering
    ablations render with `fit_scene` itself, its camera / albedo / light changed for the target and
    restored after, then noise and blur act on the pixels.  rng_noise: the trial's generator of noise."""
    AblationScene = _ablation_scene_class()
    dyn = {k: ablation[k] for k in ("dt_factor", "damping", "push_factor") if k in ablation}
    if dyn:
        key = tuple(sorted(dyn.items()))
        if key not in target_scenes:
            kw = dict(scene_kw)
            f = dyn.get("dt_factor", 1)
            kw["dt"] = kw.get("dt", 1 / 480) / f
            kw["every"] = kw.get("every", 12) * f
            kw["push"] = kw.get("push", 20.0) * dyn.get("push_factor", 1.0)
            target_scenes[key] = AblationScene(damping=dyn.get("damping", "capped"), **kw)
        sc = target_scenes[key]
        sc.set_mass(truth)
        video = sc.fit.render()
    else:
        r = fit_scene.renderer
        saved = (r.camera, r.vertex_colors.to_numpy(), r.light_dir.to_numpy())
        try:
            if "camera_shift" in ablation or "camera_turn" in ablation:
                r.set_camera(ablated_camera(r.camera, ablation.get("camera_shift", 0.0), ablation.get("camera_turn", 0.0)))
            if "color" in ablation:
                r.vertex_colors.from_numpy(np.tile(np.asarray(ablation["color"], saved[1].dtype), (len(saved[1]), 1)))
            if "light_turn" in ablation:
                r.light_dir.from_numpy(np.stack([turned(d, (0.0, 1.0, 0.0), ablation["light_turn"])
                                                 for d in saved[2]]).astype(saved[2].dtype))
            fit_scene.set_mass(truth)
            video = fit_scene.fit.render()
        finally:
            r.set_camera(saved[0])
            r.vertex_colors.from_numpy(saved[1])
            r.light_dir.from_numpy(saved[2])
    if "blur" in ablation:
        from scipy.ndimage import gaussian_filter
        video = gaussian_filter(video, sigma=(0, ablation["blur"], ablation["blur"], 0), mode="nearest")
    if "noise" in ablation:
        # clipped to [0, 1] as any recorded frame is (and as VideoFit requires)
        video = np.clip(video + ablation["noise"] * rng_noise.standard_normal(video.shape).astype(video.dtype), 0, 1)
    return video


def run_rows(rows, trials, seed, shape, scene_kw, fit_kw, printer=print, on_row=None):
    """Fit every (row, trial); returns {row: {group, label, rel_err, ..., per_trial}}; on_row(results so
    far) after each row."""
    from tigradsim.fitting.sysid import relative_error
    from tigradsim.scenes.rigid_push import PushScene, draw_masses
    AblationScene = _ablation_scene_class()
    rng = np.random.default_rng(seed)
    draws = [draw_masses(rng) for _ in range(trials)]
    fit_scenes, target_scenes, out = {}, {}, {}
    for name in rows:
        group, label, shading, ablation = ROWS[name]
        if shading not in fit_scenes:
            # the silhouette fit is the Table 1 scene itself; Lambert / textured: the same with that shading
            fit_scenes[shading] = (PushScene(shape, **scene_kw) if shading == "silhouette"
                                   else AblationScene(shape, shading=shading, **scene_kw))
        sc = fit_scenes[shading]
        per = []
        for k, (truth, guess) in enumerate(draws):
            target = render_target(sc, truth, scene_kw, ablation, np.random.default_rng([seed, k]), target_scenes)
            sc.set_mass(guess)
            t0 = time.perf_counter()
            estimate = sc.fit_mass(target, **fit_kw)
            seconds = time.perf_counter() - t0
            masses = sc.fit.history.params["mass"]
            per.append({"true": truth, "initial": guess, "estimate": estimate,
                        "rel_err": relative_error(estimate, truth),
                        "iters_to_1pct": iters_to_tol(masses, truth), "first_1pct": iters_to_first(masses, truth),
                        "masses": [float(np.ravel(m)[0]) for m in masses],
                        "seconds": seconds})
            printer(f"{name} trial {k}: true {truth:.4f} guess {guess:.4f} -> {estimate:.6f} "
                    f"(rel. err {per[-1]['rel_err']:.3g}, 1% at {per[-1]['iters_to_1pct']}, {seconds:.1f} s)")
        errs = np.array([p["rel_err"] for p in per])
        hits = [p["iters_to_1pct"] for p in per if p["iters_to_1pct"] is not None]
        firsts = [p["first_1pct"] for p in per if p["first_1pct"] is not None]
        out[name] = {"group": group, "label": label, "fit_shading": shading,
                     "rel_err": float(errs.mean()), "rel_err_std": float(errs.std()),
                     "iters_to_1pct": float(np.mean(hits)) if hits else None, "reached_1pct": len(hits),
                     "first_1pct": float(np.mean(firsts)) if firsts else None, "touched_1pct": len(firsts),
                     "seconds": float(np.mean([p["seconds"] for p in per])), "per_trial": per}
        if on_row:
            on_row(out)
    return out


def _fmt(x):
    return "—" if x is None else f"{x:.2g}" if abs(x) < 1e-2 or abs(x) >= 1e4 else f"{x:.3g}"


def rq4_tables(results):
    """Markdown lines: one RQ4 table per shape in `results` (rq4.json); paper_tables.py renders these."""
    return [line for shape in sorted(results.get("tables", {})) for line in rq4_table(results["tables"][shape]) + [""]]


def rq4_table(res):
    """Markdown lines of the RQ4 table of one shape ({"settings", "rows"} of rq4.json)."""
    s = res["settings"]
    lines = [f"### Rigid mass (Table 1 scene, {s['shape']}): {s['trials']} trials, seed {s['seed']}, "
             f"{s['iters']} iterations ({s['iters'] - s['polish']} Adam + {s['polish']} BFGS), res {s['res']}"
             + (" (quick settings)" if s.get("quick") else ""), "",
             "| group | target ablation (the fit's model is the default) | final abs. rel. error (mean ± std) "
             "| iterations to first within 1% (trials) | iterations to stay within 1% (trials) | seconds per trial |",
             "|---|---|---|---|---|---|"]
    for name in ROWS:
        r = res["rows"].get(name)
        if not r:
            continue
        first = "never" if r["first_1pct"] is None else f"{r['first_1pct']:.3g}"
        stay = "never" if r["iters_to_1pct"] is None else f"{r['iters_to_1pct']:.3g}"
        lines.append(f"| {r['group']} | {r['label']} | {_fmt(r['rel_err'])} ± {_fmt(r['rel_err_std'])} | "
                     f"{first} ({r['touched_1pct']}/{s['trials']}) | {stay} ({r['reached_1pct']}/{s['trials']}) | "
                     f"{r['seconds']:.3g} |")
    return lines + ["", f"Command: `{s['command']}`; {s['seconds']:.0f} s wall, {s['cpu_seconds']:.0f} s CPU, "
                        f"{s['date']}."]


CAPTION = ("Each row fits the default model (the silhouette scene; for the Lambert rows the same scene rendered "
           "Lambert-shaded) to a target video that differs from it as the row says, from the same truths and "
           "initial guesses (`draw_masses`, the Table 1 demo's draws at the same seed).  Iterations: History "
           "indices (0 = the initial guess; one forward + backward rollout each; Adam's 45 steps, then BFGS, whose "
           "first entry re-evaluates Adam's last point) at which the mass is first within 1% of the truth, and "
           "from which it stays within 1% to the end; mean over the trials that get there.  Noise is clipped to [0, 1] (so it also brightens the black background on average); blur and camera, colour and light offsets as in "
           "`benchmarks/rq4.py`'s docstring.  Seconds: the fit per trial on 2 cores shared with other jobs; the "
           "first row fitted on each scene includes compiling its kernels.")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trials", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--shape", default="box")
    ap.add_argument("--iters", type=int, default=60)
    ap.add_argument("--polish", type=int, default=15)
    ap.add_argument("--res", type=int, default=64)
    ap.add_argument("--rows", default=",".join(ROWS), help="comma-separated subset of " + ", ".join(ROWS))
    ap.add_argument("--quick", action="store_true", help="1 trial, 8 iterations (2 BFGS), 32 px; rq4_quick.json")
    ap.add_argument("--out", default=None, help="JSON file (default benchmarks/rq4.json, --quick rq4_quick.json)")
    args = ap.parse_args(argv)
    if args.quick:
        args.trials, args.iters, args.polish, args.res = 1, 8, 2, 32
    rows = [r for r in args.rows.split(",") if r]
    bad = [r for r in rows if r not in ROWS]
    if bad:
        ap.error(f"--rows: unknown rows {bad}; choose from {list(ROWS)}")
    if args.trials < 1 or args.iters < 1 or not 0 <= args.polish <= args.iters or args.res < 8:
        ap.error(f"--trials {args.trials}, --iters {args.iters}, --polish {args.polish}, --res {args.res}: expected "
                 "trials >= 1, iters >= 1, 0 <= polish <= iters, res >= 8")
    from tigradsim.scenes.rigid_push import SHAPES
    if args.shape not in SHAPES:
        ap.error(f"--shape: unknown shape {args.shape!r}; choose from {SHAPES}")
    import tigradsim as tgs
    tgs.init()
    wall, cpu = time.perf_counter(), time.process_time()
    out = args.out or os.path.join(ROOT, "benchmarks", "rq4_quick.json" if args.quick else "rq4.json")
    old = {}
    if os.path.exists(out):
        with open(out) as fh:
            old = json.load(fh)
    tables = old.get("tables", {})      # one table per shape: {shape: {"settings": ..., "rows": ...}}
    merged = {}

    def save(results):          # after every row, so that an interrupted run keeps the rows it finished
        settings = {"trials": args.trials, "seed": args.seed, "shape": args.shape, "iters": args.iters,
                    "polish": args.polish, "res": args.res, "quick": args.quick,
                    "command": "python benchmarks/rq4.py " + " ".join(argv if argv is not None else sys.argv[1:]),
                    "seconds": round(time.perf_counter() - wall, 1), "cpu_seconds": round(time.process_time() - cpu, 1),
                    "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")}
        same = ("trials", "seed", "shape", "iters", "polish", "res")
        prev = tables.get(args.shape, {})
        kept = prev.get("rows", {}) if all(prev.get("settings", {}).get(k) == settings[k] for k in same) else {}
        merged.clear()
        merged.update(settings=settings, rows={**kept, **results})   # a run of some rows replaces only those
        tables[args.shape] = merged
        with open(out, "w") as fh:
            json.dump({"tables": tables}, fh, indent=1)

    run_rows(rows, args.trials, args.seed, args.shape, {"res": args.res},
             {"iters": args.iters, "polish": args.polish}, on_row=save)
    settings = merged["settings"]
    print("\n".join(rq4_table(merged)))
    print(json.dumps({k: {"rel_err": v["rel_err"], "iters_to_1pct": v["iters_to_1pct"],
                          "reached_1pct": v["reached_1pct"], "seconds": v["seconds"]} for k, v in merged["rows"].items()}
                     | {"settings": settings}))


if __name__ == "__main__":
    main()
