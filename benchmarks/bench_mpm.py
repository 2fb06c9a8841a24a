"""MPM (MLS-MPM, fixed-corotated jelly) time per step, forward and forward+backward, and memory.

    python benchmarks/bench_mpm.py [--arch cpu] [--precision f32] [--scenes small,pacnerf] [--steps 20]
                                   [--material mpm_fixed_corotated|mpm_von_mises|mpm_drucker_prager]

--material picks the cube's law: the elastic default, or a plastic one (its stress and return mapping go
through the differentiable SVD, tigradsim/core/svd3.py; E = 1e5, nu = 0.3, yield stress 1e3 Pa / friction
angle 30 degrees, so the 1 m/s landing yields).

Scenes: "small" (a cube of 4,096 particles on a 32^3 grid) and "pacnerf" (18,252 particles on a 64^3 grid,
PAC-NeRF's order of size), a cube of jelly falling in a unit box, dt = 1e-4 s, checkpointed every 10 steps
(the grid is stored per step slot: its memory is (checkpoint_every + 1) grids, `mpm.grid_nbytes`).
Each scene runs in its own process (its own peak RSS).  Prints one JSON object per scene.

--material mpm_von_mises, small, float32, same VM, load average 4-8, two runs each (before / after the exact
SVD-frame derivatives of svd3.isotropic3, branch svdgrad): before 9.4 / 35.6 and 15.1 / 75.0 ms per step
(forward / forward+backward), after 15.6 / 64.0 and 20.2 / 72.6 ms: within the noise of the shared cores;
the laws alone (benchmarks/bench_svd3.py) went from 0.95 / 3.54 to 2.30 / 7.25 ms per 4,096 particles.

Measured 2026-12-06 on the 2-vCPU VM, float32, 2 threads, load average ~7 (other jobs sharing the cores, so
these are upper bounds), 20 steps, best of 2:
    small   (4,096 particles, 38^3 nodes):  6.6 ms/step forward, 38 ms/step forward+backward, state 50 MB,
            peak RSS 236 MB
    pacnerf (18,252 particles, 70^3 nodes): 49 ms/step forward, 192 ms/step forward+backward, state 282 MB
            (grid 18.3 MB per slot, 11 slots), peak RSS 472 MB
Measured 2026-12-06 on the same VM under a heavier load (load average ~16), one after the other, float32:
    small          27.0 ms/step forward, 142 ms/step forward+backward
    small_coupled  39.6 ms/step forward, 193 ms/step forward+backward (four colliders and a body met at every
                   one of the 54,872 nodes, the grid update serial since it scatters into body_f), peak RSS 446 MB
Measured 2026-12-06 on the same VM (load average ~4), float32, 2 threads, before / after P2G and G2P became one
loop over particles with the stencil unrolled and the weights computed once per particle (the two versions run
alternately, each row the last of two such rounds):
    small       (4,096 particles)   forward 6.6 -> 2.3 ms/step,  forward+backward 25.6 -> 14.0 ms/step
    pacnerf     (18,252 particles)  forward 32.1 -> 15.4 ms/step, forward+backward 130 -> 87 ms/step
    pacnerf32k  (32,768 particles)  forward 48.2 -> 20.3 ms/step, forward+backward 184 -> 102 ms/step
"""
import argparse
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _harness import mpm_centroid_loss, run_child, time_rollout  # noqa: E402

# grid resolution, cube side [m] (8 particles/cell); "pacnerf32k": 32,768 particles on 64^3 cells, the size of
# benchmarks/vs_genesis.py's timing row; "small_coupled": "small" over four colliders (a sphere, a box,
# a capsule and a mesh) and a free rigid box, met at the grid (`tigradsim.physics.mpm_boundary`)
SCENES = {"small": (32, 0.25), "small_coupled": (32, 0.25), "pacnerf": (64, 0.21), "pacnerf32k": (64, 0.25)}


MATERIALS = {"mpm_fixed_corotated": {"E": 1e5, "nu": 0.3},
             "mpm_von_mises": {"E": 1e5, "nu": 0.3, "yield_stress": 1e3},
             "mpm_drucker_prager": {"E": 1e5, "nu": 0.3, "friction_angle": 30.0}}


def build(scene, tgs, material="mpm_fixed_corotated"):
    res, side = SCENES[scene]
    b = tgs.SceneBuilder(gravity=(0, -9.8, 0))
    if scene == "small_coupled":
        v, f = tgs.meshes.icosphere(1, radius=0.08)
        b.add_collider("sphere", 0.08, position=(0.35, 0.15, 0.35))
        b.add_collider("box", (0.08, 0.05, 0.08), position=(0.65, 0.15, 0.35))
        b.add_collider("capsule", (0.05, 0.08), position=(0.35, 0.15, 0.65))
        b.add_collider("mesh", 1.0, position=(0.65, 0.15, 0.65), mesh=(v, f), resolution=16)
        bv, bf = tgs.meshes.box_surface((0.2, 0.05, 0.2))
        b.add_rigid_body(bv, bf, mass=2.0, position=(0.5, 0.24, 0.5))
    b.add_mpm_grid(lower=(0, 0, 0), upper=(1, 1, 1), resolution=res, mu=0.3)
    lo = 0.5 - side / 2
    b.add_mpm(box=((lo, 0.3, lo), (lo + side, 0.3 + side, lo + side)), material=material,
              params=MATERIALS[material], density=1000.0, velocity=(0.0, -1.0, 0.0), particles_per_cell=8)
    return b.finalize()


def run_scene(scene, arch, precision, steps, material="mpm_fixed_corotated"):
    import taichi as ti
    import tigradsim as tgs
    from tigradsim.physics.mpm import grid_nbytes
    tgs.init(arch=arch, precision=precision)
    model = build(scene, tgs, material)
    ck = 10
    sim = tgs.Simulator(model, dt=1e-4, steps=steps, checkpoint_every=ck)
    n = model.mpm_particle_count
    loss = mpm_centroid_loss(sim, steps, axis=1)
    timing = time_rollout(sim, loss)
    g = model.mpm_grid
    return {"scene": scene, "material": material, "precision": precision, "particles": n, "grid_nodes": list(g.res), "steps": steps,
            "checkpoint_every": ck, **timing,
            "grid_mb_per_slot": round(grid_nbytes(model, 1) / 2 ** 20, 1),
            "threads": ti.lang.impl.current_cfg().cpu_max_num_threads,
            "grad_E_nu": model.mpm_params.grad.to_numpy().tolist()}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--arch", default="cpu")
    parser.add_argument("--precision", default="f32")
    parser.add_argument("--scenes", default="small,pacnerf")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--child", action="store_true")
    parser.add_argument("--scene")
    parser.add_argument("--material", default="mpm_fixed_corotated", choices=sorted(MATERIALS))
    args = parser.parse_args()
    if args.child:
        print(json.dumps(run_scene(args.scene, args.arch, args.precision, args.steps, args.material)))
        return
    for scene in args.scenes.split(","):
        print(json.dumps(run_child(os.path.abspath(__file__), ["--scene", scene, "--arch", args.arch,
                                                                "--precision", args.precision, "--steps", args.steps,
                                                                "--material", args.material])),
              flush=True)


if __name__ == "__main__":
    main()
