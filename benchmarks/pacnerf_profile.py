"""Where a PAC-NeRF fit's CPU goes: one of each rollout the fit runs, at the benchmark's settings, timed in CPU
seconds of this process (all threads) and broken down by function (cProfile on the process clock).

    python benchmarks/pacnerf_profile.py --family elastic --resolution 32 --substeps 200
    python benchmarks/pacnerf_profile.py --family elastic --resolution 32 --substeps 200 --only gradient

The scene is the clip's file as benchmarks/pacnerf.py fits it (`pacnerf.fit_copy`: its substeps, grid and [fit]),
built as `tigradsim fit` builds it (f64, gradients on).  Parts, each timed on its own (--only: some of them):
    forward       one rollout and its loss (no Tape): what the line search and the fit's scoring rollouts cost
    gradient      one rollout under the Tape and its backward pass (checkpoint recomputation included)
The fit's other rollouts are forwards: the bias checks' ([fit] time_step_bias: one at dt / 2, twice the steps;
[fit] grid_bias: one at the 4/3 finer grid, ~2.4x the particles), the intervals' finite differences, the renders.
The renders (the observers, 11 views per frame) show in each part's breakdown as `Simulator._notify`.
The gradient part prints the loss and gradient at the start to the last bit (hex): a change meant to keep
results exact is checked by running this before and after it.
Prints CPU seconds per part and the functions taking most of each (cumulative, process clock), and with --json
writes them.  Run it alone on a quiet machine for the breakdown; the CPU seconds hold on a shared one too.
"""
from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pstats
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
PARTS = ("forward", "gradient")


def top_functions(profile, count=14) -> list:
    """[(cumulative CPU s, calls, 'file:line(function)')] of the `count` functions of largest cumulative time,
    leaving out the profiler's own and the script's frames."""
    stats = pstats.Stats(profile, stream=io.StringIO())
    rows = []
    for (path, line, name), (_, calls, _, cum, _) in stats.stats.items():
        short = f"{os.path.relpath(path, os.path.dirname(HERE)) if path.startswith('/') else path}:{line}({name})"
        if "pacnerf_profile" in short or name in ("<module>", "exec"):
            continue
        rows.append((cum, calls, short))
    rows.sort(reverse=True)
    return rows[:count]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--family", default="elastic", help="a clip folder under benchmarks/footage/pacnerf/")
    parser.add_argument("--resolution", type=int, default=32, help="the fit's MPM grid resolution")
    parser.add_argument("--substeps", type=int, default=200, help="the fit's substeps a frame")
    parser.add_argument("--precision", default="f64", help="f64 (the fit's) or f32")
    parser.add_argument("--only", default=",".join(PARTS), help=f"comma-separated parts among {PARTS}")
    parser.add_argument("--json", default=None, help="write the figures here")
    args = parser.parse_args(argv)
    parts = [p for p in args.only.split(",") if p]
    bad = sorted(set(parts) - set(PARTS))
    if bad:
        parser.error(f"--only: unknown parts {bad} (expected some of {PARTS})")
    sys.path.insert(0, HERE)
    from pacnerf import FOOTAGE, fit_copy

    clip = os.path.join(FOOTAGE, args.family, "scene.toml")
    if not os.path.isfile(clip):
        parser.error(f"--family: no clip {clip!r}")
    out = tempfile.mkdtemp(prefix="pacnerf_profile_")
    path = fit_copy(clip, out, args.substeps, args.resolution)

    import tigradsim as tgs
    from tigradsim.core.tape import tape
    from tigradsim.scenes.scene_build import Scene
    from tigradsim.scenes.scene_file import load_scene
    from tigradsim.scenes.scene_views import load_views_footage

    spec = load_scene(path)
    footages = load_views_footage(spec)
    tgs.init(arch="cpu", precision=args.precision)
    c0 = time.process_time()
    scene = Scene(spec, footages, requires_grad=True, unknowns=True)
    sim = scene.sim
    print(f"{args.family}: grid {args.resolution}, {args.substeps} substeps: {scene.model.mpm_particle_count} "
          f"particles, {scene.model.mpm_grid.cell_count} grid nodes, {sim.steps} steps, checkpoint every "
          f"{sim.segment_length} ({sim.segment_count} segments), {len(scene.views)} views; built in "
          f"{time.process_time() - c0:.1f} CPU s", flush=True)

    def forward():
        scene.loss_value()

    def gradient():
        with tape(scene.fit.loss):
            scene.forward()

    runs = dict(forward=forward, gradient=gradient)
    record = dict(family=args.family, resolution=args.resolution, substeps=args.substeps,
                  particles=int(scene.model.mpm_particle_count), steps=int(sim.steps),
                  checkpoint_every=int(sim.segment_length), parts={})
    for name in parts:
        runs[name]()                                  # compile first: a fit compiles once, runs ~15 times
        prof = cProfile.Profile(time.process_time)
        c0, w0 = time.process_time(), time.time()
        prof.enable()
        runs[name]()
        prof.disable()
        cpu, wall = time.process_time() - c0, time.time() - w0
        top = top_functions(prof)
        record["parts"][name] = dict(cpu_s=cpu, wall_s=wall, top=[dict(cpu_s=c, calls=n, where=w) for c, n, w in top])
        loss = float(scene.fit.loss[None])
        print(f"\n{name}: {cpu:.2f} CPU s ({wall:.1f} s wall); loss {loss:.6e} ({loss.hex()})", flush=True)
        if name == "gradient":           # to the last bit: two versions of the code compare exactly
            grads = {p.name: [float(g) for g in np.ravel(p.grad())] for p in scene.params}
            record["loss_at_start"], record["gradient_at_start"] = loss.hex(), \
                {k: [g.hex() for g in v] for k, v in grads.items()}
            print("  gradient: " + ", ".join(f"{k} {v[0]:.9e} ({v[0].hex()})" for k, v in grads.items()))
        for c, n, w in top:
            print(f"  {c:8.2f} s {n:8d}x  {w}")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(record, fh, indent=1)
    return record


if __name__ == "__main__":
    main()
