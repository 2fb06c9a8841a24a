"""Throw a 3D mass-spring lattice so that its centre of mass lands on a target.

The optimiser (Adam) learns the initial velocity of every particle through the
differentiable rollout (springs + ground contact with friction).  With a display
it shows the final throw in the Taichi GUI; with `--headless --out DIR` (or no
display) it writes frames, a GIF and a loss-curve PNG.  Last line: JSON.

    python demos/mass_spring.py --headless --out out/mass_spring
"""
import argparse
import json
import os
import time

import numpy as np

import tigradsim as tgs
from tigradsim.plots import plot_loss
from tigradsim.viz import Viewer


def lattice(n=5, spacing=0.1, origin=(0.0, 0.3, 0.0)):
    """Particles on an n^3 grid and springs to neighbours within sqrt(3) spacings."""
    g = np.stack(np.meshgrid(*[np.arange(n)] * 3, indexing="ij"), -1).reshape(-1, 3)
    pos = g * spacing + np.asarray(origin)
    d = np.abs(g[:, None, :] - g[None, :, :]).max(-1)
    i, j = np.nonzero(np.triu(d == 1))
    return pos, np.stack([i, j], 1)


def build(args):
    pos, springs = lattice(args.n)
    b = tgs.SceneBuilder(gravity=(0.0, -9.8, 0.0))
    b.add_particles(pos, velocities=np.tile([0.5, 1.0, 0.0], (len(pos), 1)), masses=0.02, radius=0.01)
    b.add_springs(springs, stiffness=800.0, damping=0.5)
    b.add_ground(ke=4e3, kd=8.0, kf=20.0, mu=0.6)
    return b.finalize(requires_grad=True), springs


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--iters", type=int, default=40, help="optimisation iterations")
    parser.add_argument("--steps", type=int, default=800, help="simulation steps of dt = 1 ms")
    parser.add_argument("--n", type=int, default=5, help="particles per lattice edge")
    parser.add_argument("--lr", type=float, default=0.08, help="Adam learning rate [m/s]")
    parser.add_argument("--target", type=float, nargs=3, default=(1.2, 0.25, 0.4), help="target centre of mass [m]")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--arch", default="cpu")
    parser.add_argument("--headless", action="store_true", help="write files instead of opening a window")
    parser.add_argument("--out", default="out/mass_spring", help="folder for frames, GIF and plots")
    args = parser.parse_args(argv)

    start = time.time()
    tgs.init(arch=args.arch, precision="f32", seed=args.seed)
    model, springs = build(args)
    sim = tgs.Simulator(model, dt=1e-3, steps=args.steps)
    com = tgs.CenterOfMassRecorder(sim, every=args.steps)          # frames: start and end
    target = np.array([[0.0, 0.0, 0.0], args.target])
    loss = tgs.MSELoss(com.com, target, frame_weights=[0.0, 1.0])

    velocity = tgs.Param(model.particle_qd0, name="initial velocity", lower=-10.0, upper=10.0)
    opt = tgs.Adam([velocity], lr=args.lr)

    def forward():
        sim.run()
        loss()

    history = tgs.optimize(forward, loss.value, opt, iters=args.iters, log_every=5)
    os.makedirs(args.out, exist_ok=True)
    curve = plot_loss(history, os.path.join(args.out, "loss.png"), title="mass-spring throw: COM distance^2")

    # Show the final throw.
    recorder = tgs.ParticleRecorder(sim, every=20)
    sim.run()
    frames = recorder.numpy()
    viewer = Viewer("mass_spring", headless=args.headless or None, out_dir=args.out,
                    eye=(0.6, 1.2, 3.2), target=(0.6, 0.2, 0.2))
    for k in range(len(frames)):
        if not viewer.running:
            break
        viewer.ground()
        viewer.segments(frames[k][springs[:, 0]], frames[k][springs[:, 1]], color=0x3070B0)
        viewer.particles(frames[k], radius=2.5)
        viewer.particles(np.array([args.target]), radius=6, color=0xD03030)
        viewer.text(f"t = {k * 20e-3:.2f} s   loss {history.loss[-1]:.2e}")
        viewer.show()
    gif = viewer.close(fps=25)
    final_com = com.numpy()[-1]
    print(json.dumps({
        "loss_initial": history.loss[0], "loss_final": history.loss[-1], "iters": args.iters,
        "final_com": [round(float(x), 4) for x in final_com], "target": list(args.target),
        "particles": model.particle_count, "springs": model.spring_count, "steps": args.steps,
        "seconds": round(time.time() - start, 2), "gif": gif, "loss_plot": curve,
    }))


if __name__ == "__main__":
    main()
