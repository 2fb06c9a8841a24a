"""Issue 47's sand bias (fits end ~1.6 deg under the PAC-NeRF sand clip's 35 deg): the fit's objective of the sand
clip at chosen friction angles, under tigradsim's own Drucker-Prager law (`mpm_drucker_prager`) and under Genesis's
(`genesis_sand` of benchmarks/genesis_laws.py: the same law plus its volume correction Jp), at chosen grids and
substeps.  One rollout (no gradients, f64) per point, the scene file as benchmarks/pacnerf.py fits it (`fit_copy`).

    python benchmarks/sand_law_check.py --grid 32 --substeps 200 --angles 33.37,35 --laws mpm_drucker_prager,genesis_sand

If the truth (35 deg) wins under Genesis's law and loses under tigradsim's, the bias is the law's volume
correction (a model difference), not the grid or the search.  Prints one line per point; --json writes them.
The truth is given here by the user of this script (it is a diagnosis, not a fit).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
CLIP = os.path.join(HERE, "footage", "pacnerf", "sand", "scene.toml")


def centroid_check(scene) -> dict:
    """The particles' centroid at the footage frames against Genesis's (truth.json centroid_per_frame): per frame
    the difference [m] (F, 3), and the last frame's height and horizontal extent of the cloud (mean |x - c| in
    x and z) [m]."""
    import numpy as np
    from vs_genesis import recorded_positions
    import tigradsim as tgs
    with open(os.path.join(os.path.dirname(CLIP), "truth.json")) as fh:
        theirs = np.asarray(json.load(fh)["centroid_per_frame"])
    every = int(round(1.0 / (scene.footage.fps * scene.dt)))
    x = recorded_positions(tgs, scene.model, scene.dt, every * (len(theirs) - 1), every)
    c = x.mean(axis=1)
    d = c - theirs
    last = x[-1]
    spread = np.abs(last[:, [0, 2]] - last[:, [0, 2]].mean(axis=0)).mean()
    return dict(centroid_diff_m=d.round(6).tolist(), last_centroid_y=float(c[-1, 1]),
                last_spread_xz_m=float(spread), last_max_y=float(last[:, 1].max()))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--grid", type=int, default=32, help="[mpm_grid] resolution")
    parser.add_argument("--substeps", type=int, default=200, help="[simulation] substeps a frame")
    parser.add_argument("--angles", default="33.37,35", help="friction angles [deg], comma separated")
    parser.add_argument("--laws", default="mpm_drucker_prager,genesis_sand", help="MPM materials, comma separated")
    parser.add_argument("--precision", default="f64")
    parser.add_argument("--out", default="/tmp/sand_law_check", help="folder for the scene copies")
    parser.add_argument("--json", default=None)
    parser.add_argument("--centroids", action="store_true",
                        help="also the particles' centroid at each footage frame against truth.json's (Genesis's)")
    args = parser.parse_args(argv)
    angles = [float(a) for a in args.angles.split(",") if a]
    laws = [s for s in args.laws.split(",") if s]

    sys.path.insert(0, HERE)
    import genesis_laws  # noqa: F401  (registers genesis_sand)
    from pacnerf import fit_copy

    import tigradsim as tgs
    from tigradsim.scenes.scene_build import Scene
    from tigradsim.scenes.scene_file import load_scene
    from tigradsim.scenes.scene_views import load_views_footage, mean_iou, views_iou

    tgs.init(arch="cpu", precision=args.precision)
    records = []
    for law in laws:
        folder = os.path.join(args.out, f"{law}_g{args.grid}_s{args.substeps}")
        path = fit_copy(CLIP, folder, args.substeps, args.grid)
        with open(path) as fh:
            text = fh.read()
        with open(path, "w") as fh:
            fh.write(text.replace('"mpm_drucker_prager"', f'"{law}"'))
        spec = load_scene(path)
        scene = Scene(spec, load_views_footage(spec), requires_grad=False, unknowns=True)
        for phi in angles:
            t0 = time.process_time()
            scene.set_values({"sand.friction_angle": phi})
            loss = scene.loss_value()
            iou = mean_iou(views_iou(scene, scene.render_views()))
            rec = dict(law=law, grid=args.grid, substeps=args.substeps, angle=phi, loss=loss, iou=iou,
                       particles=int(scene.model.mpm_particle_count), cpu_s=time.process_time() - t0)
            if args.centroids:
                rec.update(centroid_check(scene))
            records.append(rec)
            print(f"{law} g{args.grid}/{args.substeps} phi={phi:g}: loss {loss:.6e}, IoU {iou:.4f}, "
                  f"{rec['cpu_s']:.0f} CPU s, {rec['particles']} particles", flush=True)
            if args.centroids:
                print(f"   centroid y - Genesis's per frame [mm]: "
                      + " ".join(f"{1e3 * d[1]:+.2f}" for d in rec["centroid_diff_m"])
                      + f"; last y {rec['last_centroid_y']:.5f}, spread {rec['last_spread_xz_m']:.5f}, "
                      f"top {rec['last_max_y']:.5f}", flush=True)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(records, fh, indent=1)
    return records


if __name__ == "__main__":
    main()
