"""Search or model?  The fit's objective of a PAC-NeRF clip at chosen values of its unknowns: at the truth, at the
fit's estimate and at the start, from the same scene file the fit used (benchmarks/pacnerf.py writes it to
OUT/<family>/scene.toml: the clip's file with the benchmark's substeps and grid), in the fit's precision (f64).

    python benchmarks/pacnerf_loss_at.py benchmarks/out/pacnerf_g32/elastic/scene.toml \
        --truth benchmarks/footage/pacnerf/elastic/truth.json \
        --estimates benchmarks/out/pacnerf_g32/elastic/estimates.json

If the loss at the truth is lower than at the estimate, the fit missed a better point it could have reached (a
search problem: bounds, iterations, start); if it is higher, the model itself prefers the wrong values (a steady
model bias that only an interval term can cover).  Prints, and with --json writes, one record per point: the
values, the loss (the fit's objective, Tape units, the same as estimates.json's loss_final) and the mean IoU
over the cameras.  One rollout per point (no gradients): ~1-2 CPU-minutes each at grid 32.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time


def truth_values(path, names) -> dict:
    """{unknown name: truth} for the unknowns `names` ("OBJECT.PARAM") from a clip's truth.json."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from pacnerf import read_truth, truth_of
    truth = read_truth(os.path.dirname(os.path.abspath(path)))
    return {n: truth_of(n, truth) for n in names}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("scene", help="the scene file the fit used (OUT/<family>/scene.toml of benchmarks/pacnerf.py)")
    parser.add_argument("--truth", required=True, help="the clip's truth.json")
    parser.add_argument("--estimates", default=None, help="the fit's estimates.json (adds the estimate's point)")
    parser.add_argument("--at", action="append", default=[], metavar="LABEL:NAME=V,NAME=V",
                        help="another point (repeatable), e.g. 'grid24:jelly.E=9.675e4,jelly.nu=0.4377'; unknowns "
                             "not named keep the start's value")
    parser.add_argument("--no-start", action="store_true", help="skip the start's point")
    parser.add_argument("--precision", default="f64", help="f64 (the fit's) or f32")
    parser.add_argument("--json", default=None, help="write the records here")
    args = parser.parse_args(argv)
    for name, path in (("scene", args.scene), ("--truth", args.truth), ("--estimates", args.estimates)):
        if path is not None and not os.path.isfile(path):
            parser.error(f"{name}: no file {path!r}")

    import tigradsim as tgs
    from tigradsim.scenes.scene_build import Scene
    from tigradsim.scenes.scene_file import load_scene
    from tigradsim.scenes.scene_views import load_views_footage, mean_iou, views_iou

    spec = load_scene(args.scene)
    footages = load_views_footage(spec)
    tgs.init(arch="cpu", precision=args.precision)
    scene = Scene(spec, footages, requires_grad=False, unknowns=True)
    start = scene.values()
    points = [("truth", truth_values(args.truth, list(start)))]
    if args.estimates:
        with open(args.estimates) as fh:
            rep = json.load(fh)
        points.append(("estimate", {k: u["estimate"] for k, u in rep["unknowns"].items()}))
        points.append(("reported loss_final", None))
        reported = rep.get("loss_final")
    for item in args.at:
        label, _, pairs = item.partition(":")
        try:
            values = dict(start, **{k.strip(): float(v) for k, v in (p.split("=") for p in pairs.split(",") if p)})
        except ValueError:
            parser.error(f"--at: {item!r} is not LABEL:NAME=VALUE,NAME=VALUE")
        unknown = sorted(set(values) - set(start))
        if unknown:
            parser.error(f"--at: {unknown} are not unknowns of the scene (expected some of {sorted(start)})")
        points.append((label, values))
    if not args.no_start:
        points.append(("start", start))
    records = []
    for label, values in points:
        if values is None:
            print(f"estimates.json loss_final: {reported}", flush=True)
            continue
        missing = [k for k, v in values.items() if v is None]
        if missing:
            parser.error(f"--truth: no truth for {missing}")
        t0 = time.process_time()
        scene.set_values(values)
        loss = scene.loss_value()
        iou = mean_iou(views_iou(scene, scene.render_views()))
        rec = dict(point=label, values=values, loss=loss, iou=iou, cpu_s=time.process_time() - t0)
        records.append(rec)
        print(f"{label}: " + ", ".join(f"{k}={v:.5g}" for k, v in values.items())
              + f"; loss {loss:.6e}, IoU {iou:.4f}, {rec['cpu_s']:.0f} CPU s", flush=True)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(records, fh, indent=1, default=float)
    return records


if __name__ == "__main__":
    main()
