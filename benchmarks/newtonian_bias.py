"""Where the PAC-NeRF Newtonian clip's steady bias comes from, in 3D (no cameras): the clip's motion made again by
Genesis 1.4.5 (truth.json's genesis_spec, the footage's own float32 and substep, no surfaces), and tigradsim's
particles run from the fit's own scene file (its grid, substeps, particle sampling and material) at chosen values.
The two clouds are sampled differently, so they are compared by shape moments per footage frame, volume-weighted:
the centroid height (mean y), the thickness (std of y) and the spread (sqrt(var x + var z)) [m].  If tigradsim at the
truth matches Genesis's moments better than at the fit's estimate, the dynamics are not what biases the fit (the
rendering is); if the estimate matches better, the model's 3D motion itself prefers the wrong values.

    python benchmarks/newtonian_bias.py benchmarks/out/pacnerf_newt/newtonian/scene.toml \
        --clip benchmarks/footage/pacnerf/newtonian --at estimate:fluid.viscosity=31.31,fluid.bulk_modulus=2.329e4

Genesis runs in its venv (benchmarks/requirements-genesis.txt), its trajectory cached at --genesis-cache.  Prints one
JSON row per point: each moment's per-frame values and its largest difference to Genesis's over the frames.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))


def moments(x, volume=None):
    """(frames, 3) shape moments of clouds x (F, N, 3) [m]: centroid height, thickness, spread (module docstring)."""
    w = np.ones(x.shape[1]) if volume is None else np.asarray(volume, dtype=np.float64)
    w = w / w.sum()
    mean = np.einsum("fnd,n->fd", x, w)
    var = np.einsum("fnd,n->fd", (x - mean[:, None, :]) ** 2, w)
    return np.stack([mean[:, 1], np.sqrt(var[:, 1]), np.sqrt(var[:, 0] + var[:, 2])], axis=1)


def genesis_frames(clip, genesis_python, cache, precision="32"):
    """Genesis's particle positions (F, N, 3) at the clip's frames (cached in `cache`)."""
    if cache and os.path.exists(cache):
        with np.load(cache) as z:
            return z["positions"].astype(np.float64)
    with open(os.path.join(clip, "truth.json")) as fh:
        spec = dict(json.load(fh)["engine"]["genesis_spec"], precision=precision, surfaces=False)
    with tempfile.TemporaryDirectory() as tmp:
        spec_path, out = os.path.join(tmp, "spec.json"), os.path.join(tmp, "out.npz")
        with open(spec_path, "w") as fh:
            json.dump(spec, fh)
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        proc = subprocess.run([genesis_python, "-I", os.path.join(HERE, "genesis_pacnerf_runner.py"), spec_path, out],
                              capture_output=True, text=True, env=env)
        if proc.returncode != 0:
            raise RuntimeError(f"Genesis runner failed:\n{proc.stderr[-3000:]}")
        with np.load(out) as z:
            x = z["positions"].astype(np.float64)
    if cache:
        os.makedirs(os.path.dirname(os.path.abspath(cache)), exist_ok=True)
        np.savez_compressed(cache, positions=x)
    return x


class Recorder:
    """The positions (F, N, 3) [m] of the scene's MPM particles at the footage frames, recorded by an observer of the
    scene's simulator (registered once; `frames(values)` runs the rollout at `values`)."""

    def __init__(self, scene):
        import taichi as ti
        self.scene = scene
        every = int(round(1.0 / (scene.footage.fps * scene.dt)))          # steps per footage frame
        n = scene.model.mpm_particle_count
        self.x = ti.Vector.field(3, float, shape=(scene.sim.steps // every + 1, n))
        x = self.x

        @ti.kernel
        def record(state: ti.template(), s: ti.i32, f: ti.i32):
            for i in range(n):
                x[f, i] = state.mpm_x[s, i]

        scene.sim.observe(lambda state, slot, frame: record(state, slot, frame), every=every)

    def frames(self, values):
        self.scene.set_values(values)
        self.scene.sim.run()
        return self.x.to_numpy()


_SPLATTERS = {}


def mask_scores(scene, frames, radius):
    """How clouds (F, N, 3) [m] splatted as tigradsim's fit renders MPM matter (`ParticleSplatter`, discs of `radius`
    [m], opacity 0.5) match the footage's masks, over every camera and frame: (mean squared pixel difference, mean
    IoU of the silhouettes thresholded at 1/2)."""
    from tigradsim.renderers.splats import ParticleSplatter
    sq, iou = [], []
    for i, view in enumerate(scene.views):
        # one splatter per camera and cloud size, kept: Taichi 1.7.4 crashed on the third set of new fields
        key = (i, frames.shape[1], len(frames), radius)
        if key not in _SPLATTERS:
            _SPLATTERS[key] = ParticleSplatter(view.camera, frames.shape[1], frames=len(frames), radius=radius,
                                               opacity=0.5)
        ren = _SPLATTERS[key]
        masks = np.asarray(view.footage.masks, dtype=np.float64)
        for k in range(len(frames)):
            image = ren.render_numpy(frames[k], frame=k).astype(np.float64)
            sq.append(((image - masks[k]) ** 2).mean())
            a, m = image > 0.5, masks[k] > 0.5
            iou.append((a & m).sum() / max((a | m).sum(), 1))
    return float(np.mean(sq)), float(np.mean(iou))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("scene", help="the fit's scene file (OUT/newtonian/scene.toml of benchmarks/pacnerf.py)")
    parser.add_argument("--clip", default=os.path.join(HERE, "footage", "pacnerf", "newtonian"))
    parser.add_argument("--at", action="append", default=[], metavar="LABEL:NAME=V,NAME=V")
    parser.add_argument("--genesis-python", default="/opt/venvs/genesis/bin/python")
    parser.add_argument("--no-truth", action="store_true", help="only the --at points")
    parser.add_argument("--render", action="store_true", help="also splat each cloud (Genesis's with discs of half "
                        "its particle spacing, tigradsim's with the scene's) against the footage's masks")
    parser.add_argument("--genesis-cache", default=os.path.join(HERE, "out", "newtonian_bias", "genesis_f32.npz"))
    args = parser.parse_args(argv)
    for name, path in (("scene", args.scene), ("--clip", os.path.join(args.clip, "truth.json"))):
        if not os.path.isfile(path):
            parser.error(f"{name}: no file {path!r}")
    genesis_x = genesis_frames(args.clip, args.genesis_python, args.genesis_cache)
    theirs = moments(genesis_x)
    genesis_row = dict(point="genesis", centroid_y=np.round(theirs[:, 0], 5).tolist(),
                       thickness=np.round(theirs[:, 1], 5).tolist(), spread=np.round(theirs[:, 2], 5).tolist())

    import tigradsim as tgs
    from tigradsim.scenes.scene_build import Scene
    from tigradsim.scenes.scene_file import load_scene
    from tigradsim.scenes.scene_views import load_views_footage
    sys.path.insert(0, HERE)
    from pacnerf_loss_at import truth_values
    spec = load_scene(args.scene)
    tgs.init(arch="cpu", precision="f64")
    scene = Scene(spec, load_views_footage(spec), requires_grad=False, unknowns=True)
    if args.render:
        with open(os.path.join(args.clip, "truth.json")) as fh:
            spacing = float(json.load(fh)["engine"]["genesis_spec"]["particle_size"])
        genesis_row["masks_mse"], genesis_row["masks_iou"] = mask_scores(scene, genesis_x, spacing / 2)
        genesis_row["splat_radius_m"] = spacing / 2
    print(json.dumps(genesis_row), flush=True)
    names = list(scene.values())
    points = [] if args.no_truth else [("truth", truth_values(os.path.join(args.clip, "truth.json"), names))]
    for item in args.at:
        label, _, pairs = item.partition(":")
        points.append((label, {k.strip(): float(v) for k, v in (p.split("=") for p in pairs.split(",") if p)}))
    recorder = Recorder(scene)
    for label, values in points:
        x = recorder.frames(values)
        mine = moments(x)
        scores = {}
        if args.render:
            scores["masks_mse"], scores["masks_iou"] = mask_scores(scene, x, scene.splat_radius)
            scores["splat_radius_m"] = scene.splat_radius
        if mine.shape != theirs.shape:
            sys.exit(f"frames: tigradsim recorded {mine.shape[0]}, Genesis {theirs.shape[0]}")
        diff = mine - theirs
        print(json.dumps(dict(point=label, values=values, particles=scene.model.mpm_particle_count,
                              centroid_y=np.round(mine[:, 0], 5).tolist(), thickness=np.round(mine[:, 1], 5).tolist(),
                              spread=np.round(mine[:, 2], 5).tolist(),
                              max_abs_diff_m={k: float(f"{np.abs(diff[:, i]).max():.3g}")
                                              for i, k in enumerate(("centroid_y", "thickness", "spread"))},
                              rms_diff_m={k: float(f"{np.sqrt((diff[:, i] ** 2).mean()):.3g}")
                                          for i, k in enumerate(("centroid_y", "thickness", "spread"))}, **scores)),
              flush=True)


if __name__ == "__main__":
    main()
