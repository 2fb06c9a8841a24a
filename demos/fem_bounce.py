"""A soft ball (tetrahedral FEM) thrown onto the ground: it bounces and squashes.

Any registered tet material works (`--material`, see `tgs.list_materials("tet")`).
With a display it shows the Taichi GUI live; with `--headless` (or no display)
it writes PNG frames and a GIF to `--out`.  Last stdout line: JSON with the
tet count, steps, wall time, the lowest vertex height and the final energy.

    python demos/fem_bounce.py --headless --out out/fem_bounce
    python demos/fem_bounce.py --material corotated --mu 2000 --lam 2000

Default stiffness per material (mu = lam, Pa; `--mu`/`--lam` override): 1e3, except StVK at 3e3.
StVK softens under compression (its stress vanishes, then reverses, as a tet is squashed
towards zero volume), so at 1e3 the ball's bottom tets invert at the first impact and never
recover.  Measured (density 10, dt 1/1920, 3840 steps, J = tet volume / rest volume sampled every
4 steps, f32): the smallest J over the run and at the end

    material      mu = lam   min J     J at the end
    neo_hookean   1e3        0.25      0.95
    corotated     1e3        0.52      0.99
    linear        1e3        0.49      1.05 (swells: see below)
    stvk          1e3       -1.38     -1.15 (inverted from the first impact on, 688 samples)
    stvk          3e3        0.37      0.99

`linear` is not rotation invariant: the rolling ball's tets grow (every J above 1.05 by the end)
as it turns; use it for small rotations only.  The JSON reports `min_J` and `inverted_samples`
so a run with other parameters says whether the mesh inverted.
"""
import argparse
import json
import sys
import time

import numpy as np

import tigradsim as tgs
from tigradsim import fem
from tigradsim.viz import Viewer


# mu = lam [Pa] per material where 1e3 does not bounce sanely (see the module docstring)
DEFAULT_STIFFNESS = {"stvk": 3e3}
J_EVERY = 4          # steps between samples of the tet volume ratios J


def build(args):
    b = tgs.SceneBuilder(gravity=(0.0, -9.8, 0.0))
    b.add_ground(ke=1e4, kd=1.0, kf=10.0, mu=0.5)
    mesh = tgs.meshes.tet_ball(0.5, resolution=args.resolution, center=(-1.0, 1.2, 0.0))
    ball = b.add_soft_mesh(mesh, material=args.material, params={"mu": args.mu, "lam": args.lam},
                           damping=args.damping, density=args.density, velocity=(2.0, 1.0, 0.0), radius=0.01)
    return b.finalize(requires_grad=False), ball


def total_energy(model, q, qd):
    m = model.particle_mass.to_numpy().astype(np.float64)
    g = -float(model.gravity.to_numpy()[1])
    kinetic = 0.5 * float(np.sum(m[:, None] * qd.astype(np.float64) ** 2))
    return kinetic + g * float(np.sum(m * q[:, 1])) + fem.elastic_energy(model, q)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--material", default="neo_hookean", help=f"tet material: one of {tgs.list_materials('tet')}")
    parser.add_argument("--mu", type=float, default=None, help="material parameter mu [Pa] (default: see above)")
    parser.add_argument("--lam", type=float, default=None, help="material parameter lam [Pa] (default: see above)")
    parser.add_argument("--damping", type=float, default=0.5, help="damping on dF/dt [Pa s]")
    parser.add_argument("--density", type=float, default=10.0, help="[kg/m^3]")
    parser.add_argument("--resolution", type=int, default=2, help="tet_ball resolution (2: 640 tets)")
    parser.add_argument("--steps", type=int, default=3840, help="simulation steps")
    parser.add_argument("--dt", type=float, default=1 / 1920, help="time step [s]")
    parser.add_argument("--frame-every", type=int, default=32, help="steps per shown frame")
    parser.add_argument("--arch", default="cpu")
    parser.add_argument("--headless", action="store_true", help="write files instead of opening a window")
    parser.add_argument("--out", default="out/fem_bounce", help="folder for frames and the GIF")
    args = parser.parse_args(argv)
    stiffness = DEFAULT_STIFFNESS.get(args.material, 1e3)
    args.mu = stiffness if args.mu is None else args.mu
    args.lam = stiffness if args.lam is None else args.lam

    start = time.time()
    tgs.init(arch=args.arch, precision="f32")
    model, ball = build(args)
    sim = tgs.Simulator(model, dt=args.dt, steps=args.steps, checkpoint_every=None)
    rec = tgs.ParticleRecorder(sim, every=args.frame_every)
    jrec = tgs.ParticleRecorder(sim, every=J_EVERY)
    sim.run()
    frames = rec.numpy()
    tets = ball.local_tets + ball.particle_start
    vol0 = tgs.meshes.tet_volumes(model.particle_q0.to_numpy().astype(np.float64), tets)
    J = np.array([tgs.meshes.tet_volumes(q, tets) / vol0 for q in jrec.numpy().astype(np.float64)])
    min_J = J.min(axis=1)
    inverted = int(np.sum(min_J <= 0))
    if inverted:
        print(f"fem_bounce: {args.material} with mu={args.mu:g}, lam={args.lam:g}: tets inverted (J <= 0) in "
              f"{inverted} of {len(min_J)} samples; try stiffer parameters", file=sys.stderr)
    q_end = sim.final_state("particle_q")
    qd_end = sim.final_state("particle_qd")
    q_all = sim.state.particle_q.to_numpy()
    sim_seconds = time.time() - start

    viewer = Viewer("fem_bounce", headless=args.headless or None, out_dir=args.out,
                    eye=(0.0, 1.2, 4.5), target=(0.0, 0.5, 0.0), save_every=2)
    for k in range(len(frames)):
        if not viewer.running:
            break
        viewer.ground()
        viewer.triangles(frames[k], ball.faces)
        viewer.text(f"{args.material}  t = {k * args.frame_every * args.dt:.2f} s")
        viewer.show()
    gif = viewer.close(fps=30)
    print(json.dumps({
        "material": args.material, "tets": model.tet_count, "vertices": model.particle_count, "steps": args.steps,
        "dt": args.dt, "seconds": round(time.time() - start, 2), "sim_seconds": round(sim_seconds, 2),
        "min_height": round(float(q_all[:, :, 1].min()), 5),
        "mu": args.mu, "lam": args.lam, "min_J": round(float(min_J.min()), 5),
        "final_min_J": round(float(min_J[-1]), 5), "inverted_samples": inverted,
        "energy_initial": round(total_energy(model, model.particle_q0.to_numpy(), model.particle_qd0.to_numpy()), 5),
        "energy_final": round(total_energy(model, q_end, qd_end), 5),
        "gif": gif,
    }))


if __name__ == "__main__":
    main()
