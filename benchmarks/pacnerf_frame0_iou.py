"""Before any motion: how well the PAC-NeRF fit's model of each clip, as sampled, matches the clip's masks at frame 0.
For each clip and grid resolution, the fit's copy of the clip's scene file (`pacnerf.fit_copy`: the benchmark's
substeps and that grid) is built as the fit builds it, and its initial particles (model.mpm_x0) are splatted as the
fit renders MPM matter (`newtonian_bias.mask_scores`: discs of the scene's splat_radius, opacity 0.5) against the
frame-0 masks of the 11 cameras.  A reference row per clip: Genesis's regular sampler reconstructed from truth.json's
genesis_spec (per box axis linspace(-(s - h)/2, (s - h)/2, ceil(s / h)) at h = particle_size, turned by box_quat and
placed at box_center; discs of h / 2), which is only read for that row, never by the fit.

    python benchmarks/pacnerf_frame0_iou.py --resolutions 24,32 --json benchmarks/out/frame0_iou.json

Run with PYTHONPATH at another checkout of tigradsim to score that checkout's sampler (issue 47: the old
world-lattice sampler of commit 7e0c42e against the box-aligned one of 5955ce7).  Prints one JSON row per clip and
grid: particles, total particle volume [m^3] (the box's volume: the sampler's mass), mean IoU and mean squared pixel
difference over the cameras at frame 0.
"""
import argparse
import json
import os
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)


def genesis_like_cloud(spec) -> np.ndarray:
    """Genesis's regular box sampler as reconstructed for the Newtonian clip in benchmarks/RESULTS.md (it reproduced
    Genesis's 2,197 particles and their frame-0 IoU 0.947): (N, 3) [m] from a genesis_spec."""
    from tigradsim.physics.rigid_pose import quat_to_matrix_np
    h, size = float(spec["particle_size"]), np.asarray(spec["box_size"], dtype=np.float64)
    axes = [np.linspace(-(s - h) / 2, (s - h) / 2, int(np.ceil(s / h - 1e-9))) for s in size]
    local = np.stack([g.ravel() for g in np.meshgrid(*axes, indexing="ij")], axis=1)
    w, x, y, z = spec["box_quat"]                         # Genesis's quaternions are (w, x, y, z)
    return local @ quat_to_matrix_np(np.array([x, y, z, w])).T + np.asarray(spec["box_center"])


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", default=os.path.join(HERE, "footage", "pacnerf"))
    parser.add_argument("--families", default="elastic,plasticine,newtonian,sand,bingham")
    parser.add_argument("--resolutions", default="24,32")
    parser.add_argument("--substeps", type=int, default=50, help="the copy's substeps (frame 0 does not depend on "
                        "them; fewer keep the build small)")
    parser.add_argument("--no-genesis", action="store_true", help="skip the Genesis-sampler reference rows")
    parser.add_argument("--slice-radius", action="store_true", help="also splat each grid's cloud with discs of half "
                        "the lattice spacing h = dx / k, the default splat radius before the box's narrowest slice "
                        "(size / ceil(size / h), `scene_mpm.particle_spacing`) became it")
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)

    import tigradsim as tgs
    from tigradsim.scenes.scene_build import Scene
    from tigradsim.scenes.scene_file import load_scene
    from tigradsim.scenes.scene_views import load_views_footage
    import newtonian_bias
    from newtonian_bias import mask_scores
    from pacnerf import fit_copy

    tgs.init(arch="cpu", precision="f64")
    rows = []
    for family in args.families.split(","):
        clip = os.path.join(args.root, family)
        for res in ([] if args.no_genesis else ["genesis"]) + [int(r) for r in args.resolutions.split(",")]:
            with tempfile.TemporaryDirectory() as tmp:
                spec = load_scene(fit_copy(os.path.join(clip, "scene.toml"), tmp, args.substeps,
                                           None if res == "genesis" else res))
                scene = Scene(spec, load_views_footage(spec), requires_grad=False, unknowns=True)
            if res == "genesis":
                with open(os.path.join(clip, "truth.json")) as fh:
                    g = json.load(fh)["engine"]["genesis_spec"]
                x, radius = genesis_like_cloud(g), g["particle_size"] / 2
                volume = len(x) * g["particle_size"] ** 3
            else:
                x, radius = scene.model.mpm_x0.to_numpy().astype(np.float64), scene.splat_radius
                vol = scene.model.mpm_particle_volume.to_numpy()
                volume = float(vol[0]) * len(x)
            newtonian_bias._SPLATTERS.clear()     # its cache is keyed by camera index: another clip's cameras
            radii = [radius]
            if args.slice_radius and res != "genesis":
                from tigradsim.physics.mpm_sampling import lattice_per_axis
                obj = spec.objects[next(iter(spec.objects))]
                radii.append(scene.model.mpm_grid.dx / lattice_per_axis(obj.particles_per_cell) / 2)
            for r in radii:
                mse, iou = mask_scores(scene, x[None], r)
                row = dict(clip=family, sampler=tgs.__file__, grid=res, particles=len(x),
                           volume_m3=float(f"{volume:.5g}"), splat_radius_m=float(f"{r:.5g}"),
                           iou_frame0=round(iou, 4), mse_frame0=float(f"{mse:.4g}"))
                rows.append(row)
                print(json.dumps(row), flush=True)
    if args.json:
        os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
        with open(args.json, "w") as fh:
            json.dump(rows, fh, indent=1)


if __name__ == "__main__":
    main()
