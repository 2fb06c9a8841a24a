"""Tetrahedral FEM (stable neo-Hookean) + ground contact: time per step, forward
and forward+backward, tet-steps per second and peak memory, per scene.

    python benchmarks/bench_fem.py [--arch cpu] [--precision f32] [--scenes ball,box16,box32] [--scatter auto]

Scenes: the paper's ball (tet_ball, ~430-640 tets, 3840 steps at 1/1920 s,
checkpointed every 64 steps), tet_box grids of 16x8x8 cells (5,120 tets) and
32x16x16 cells (40,960 tets), 200 steps of 1 ms.  Each scene runs in its own
process so that peak RSS is its own.  Prints one JSON object per scene.

No ratios against figures from another run: compare with Warp side by side in one
run with benchmarks/vs_warp.py (same grids, dt, steps and laws).  The ball's one
reference figure (gradSim's dflex, which cannot be installed here) is printed as
recorded, with its date, and never divided into.
"""
import argparse
import json

import numpy as np

from _harness import run_child, time_rollout

# dflex (gradSim's engine) forward time per step of the ball, recorded on 2026-12-02 on this
# machine, another day's load: a label, not a live comparison.
DFLEX_RECORDED = {"ball": {"dflex_forward_us_recorded_2026_12_02": 104.0}}


def build(scene, tgs):
    b = tgs.SceneBuilder()
    b.add_ground(ke=1e4, kd=1.0, kf=10.0, mu=0.5)
    if scene == "ball":
        mesh = tgs.meshes.tet_ball(1.0, resolution=2, center=(0.0, 1.5, 0.0))
        b.add_soft_mesh(mesh, params={"mu": 1e3, "lam": 1e3, "damping": 0.1}, density=10.0, velocity=(1.0, 0.0, 0.0))
        return b.finalize(), 1 / 1920, 3840, 64
    n = {"box16": 16, "box32": 32}[scene]
    mesh = tgs.meshes.tet_box(n, n // 2, n // 2, size=(2.0, 1.0, 1.0), origin=(0.0, 0.2, 0.0))
    b.add_soft_mesh(mesh, params={"mu": 1e4, "lam": 1e4, "damping": 0.05}, density=1000.0, velocity=(0.5, -1.0, 0.0))
    return b.finalize(), 1e-3, 200, None


def run_scene(scene, arch, precision, scatter="auto"):
    import taichi as ti
    import tigradsim as tgs
    tgs.init(arch=arch, precision=precision, scatter=scatter)
    model, dt, steps, ck = build(scene, tgs)
    sim = tgs.Simulator(model, dt=dt, steps=steps, checkpoint_every=ck)
    com = tgs.CenterOfMassRecorder(sim, every=steps)
    loss = tgs.MSELoss(com.com, np.zeros((2, 3)))
    timing = time_rollout(sim, loss)
    fwd = timing["us_per_step_forward"] * 1e-6
    fwd_bwd = timing["us_per_step_forward_backward"] * 1e-6
    out = {
        "scene": scene, "scatter": scatter, "serial": tgs.runtime.serial_scatter(), "particles": model.particle_count, "tets": model.tet_count, "steps": steps, "dt": dt,
        "checkpoint_every": ck, **timing,
        "tet_steps_per_s_forward": round(model.tet_count / fwd),
        "tet_steps_per_s_forward_backward": round(model.tet_count / fwd_bwd),
        "grad_norm_mu_lam": float(np.linalg.norm(model.tet_params.grad.to_numpy())),
    }
    out.update(DFLEX_RECORDED.get(scene, {}))
    return out


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--arch", default="cpu")
    parser.add_argument("--precision", default="f32")
    parser.add_argument("--scenes", default="ball,box16,box32")
    parser.add_argument("--scatter", choices=("auto", "parallel", "serial"), default="auto",
                        help="element loops: serial plain adds or parallel atomics (tgs.init)")
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(run_scene(args.child, args.arch, args.precision, args.scatter)))
        return
    for scene in args.scenes.split(","):
        try:
            result = run_child(__file__, [scene, "--arch", args.arch, "--precision", args.precision, "--scatter", args.scatter])
        except RuntimeError as exc:
            result = {"scene": scene, "error": str(exc).strip().splitlines()[-1]}
        print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
