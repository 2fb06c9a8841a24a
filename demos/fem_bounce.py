"""A soft ball (tetrahedral FEM) thrown onto the ground: it bounces and squashes.

Any registered tet material works (`--material`, see `tgs.list_materials("tet")`).
With a display it shows the Taichi GUI live; with `--headless` (or no display)
it writes PNG frames and a GIF to `--out`.  Last stdout line: JSON with the
tet count, steps, wall time, the lowest vertex height and the final energy.

    python demos/fem_bounce.py --headless --out out/fem_bounce
    python demos/fem_bounce.py --material corotated --mu 2000 --lam 2000
"""
import argparse
import json
import time

import numpy as np

import tigradsim as tgs
from tigradsim import fem
from tigradsim.viz import Viewer


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
    parser.add_argument("--mu", type=float, default=1e3, help="material parameter mu [Pa]")
    parser.add_argument("--lam", type=float, default=1e3, help="material parameter lam [Pa]")
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

    start = time.time()
    tgs.init(arch=args.arch, precision="f32")
    model, ball = build(args)
    sim = tgs.Simulator(model, dt=args.dt, steps=args.steps, checkpoint_every=None)
    rec = tgs.ParticleRecorder(sim, every=args.frame_every)
    sim.run()
    frames = rec.numpy()
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
        "energy_initial": round(total_energy(model, model.particle_q0.to_numpy(), model.particle_qd0.to_numpy()), 5),
        "energy_final": round(total_energy(model, q_end, qd_end), 5),
        "gif": gif,
    }))


if __name__ == "__main__":
    main()
