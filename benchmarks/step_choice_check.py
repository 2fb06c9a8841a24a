"""The step `[simulation] substeps = "auto"` would choose for a clip, without fitting (issues 44, 46).

Runs `tigradsim.scenes.step_choice.choose_substeps` (step doubling from --min steps a frame until the rollouts at
dt and dt/2 agree on every footage frame within [fit] horizon_tolerance, up to --max) on a scene file, at the
unknowns' initial values (what `tigradsim fit` does before it fits) or, for diagnosis, at values given with --init
(e.g. the clip's truth, which no fit reads).  Prints the check's figures at each count and one JSON line.

    python3 benchmarks/step_choice_check.py benchmarks/footage/warp_ramp_boxes/scene.toml [--min 32] [--max 512]
        [--init ramp.mu=0.25 --init box_b.mass=1.2]
    python3 benchmarks/step_choice_check.py --coverage warp_box_drop [--law 'uncapped+warp(0.01)'] --min 64

--coverage CLIP: the clip's coverage.py scene (clean variant, --quick settings, contact constants "nuisance", the
law given: tigradsim.scenes.law_compare.parse_law_label), written under --scene-dir.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)


def coverage_scene(clip, label, scene_dir):
    """coverage.py's scene file of `clip` (clean, --quick, nuisance contact constants) under law `label`."""
    from coverage import make_scene
    from tigradsim.scenes.law_compare import parse_law_label

    law = parse_law_label(label)
    keys = {"damping": law.damping, "friction": law.friction}
    if law.friction in ("huber", "warp"):
        keys["friction_velocity"] = law.friction_velocity
    path, _ = make_scene(clip, "clean", "nuisance", scene_dir, os.path.join(scene_dir, "out"), True, law=keys)
    return path


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("scene", nargs="?", help="a scene file (or --coverage CLIP)")
    p.add_argument("--coverage", default=None, help="a clip of benchmarks/footage: its coverage.py scene")
    p.add_argument("--law", default="capped", help="--coverage: the contact law label")
    p.add_argument("--scene-dir", default=None, help="--coverage: where its scene file is written")
    p.add_argument("--min", type=int, default=32, dest="lo", help="min_substeps (the first count tried)")
    p.add_argument("--max", type=int, default=512, dest="hi", help="max_substeps (the cap)")
    p.add_argument("--init", action="append", default=[], help="NAME=VALUE: an unknown's initial value (diagnosis)")
    p.add_argument("--precision", default="f64")
    args = p.parse_args(argv)
    import tomllib

    import tigradsim as tgs
    from tigradsim.scenes.scene_build import load_scene_footage
    from tigradsim.scenes.scene_file import parse_scene
    from tigradsim.scenes.step_choice import choose_substeps

    if (args.scene is None) == (args.coverage is None):
        p.error("give a scene file or --coverage CLIP (one of them)")
    path = args.scene or coverage_scene(args.coverage, args.law, args.scene_dir or tempfile.mkdtemp(prefix="step_"))
    with open(path, "rb") as fh:
        data = tomllib.load(fh)
    sim = {k: v for k, v in data.get("simulation", {}).items() if k not in ("dt", "substeps")}
    data["simulation"] = dict(sim, substeps="auto", min_substeps=args.lo, max_substeps=args.hi)
    spec = parse_scene(data, path)
    given = {}
    for item in args.init:
        name, _, value = item.partition("=")
        match = [u for u in spec.unknowns if u.target == name]
        if not match or not value:
            p.error(f"--init {item!r}: expected NAME=VALUE with NAME one of {[u.target for u in spec.unknowns]}")
        match[0].init = given[name] = float(value)
    footage = load_scene_footage(spec)
    tgs.init(precision=args.precision)
    t0 = time.process_time()
    chosen, report = choose_substeps(spec, footage)
    print(json.dumps({"scene": os.path.abspath(path), "init": given or "the file's", "cpu_s": time.process_time() - t0,
                      **report}), flush=True)


if __name__ == "__main__":
    main()
