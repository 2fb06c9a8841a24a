"""Static colliders: time per step, forward and forward+backward, of 4,096 particles against colliders
that are far (every pair culled), or a sphere they all rest on (every particle in contact) plus far ones,
beside the same particles without colliders.  What a culled pair costs and what a contact costs.

    python benchmarks/bench_colliders.py [--particles 4096] [--colliders 4] [--steps 200] [--repeats 3]

Prints one JSON object (us per step per configuration; timings only, no test asserts them).
"""
import argparse
import json

import numpy as np

from _harness import time_rollout


def run_config(particles, colliders, near, steps, repeats):
    import tigradsim as tgs
    b = tgs.SceneBuilder(gravity=(0.0, 0.0, 0.0))
    rng = np.random.default_rng(0)
    if near:         # every particle 2 mm into a sphere of radius 1 m
        d = rng.normal(size=(particles, 3))
        q = d / np.linalg.norm(d, axis=1, keepdims=True) * (1.0 + 0.01 - 0.002) + [0.0, 3.0, 0.0]
    else:
        q = rng.uniform(-1.0, 1.0, (particles, 3)) + [0.0, 3.0, 0.0]
    b.add_particles(q, rng.normal(size=(particles, 3)) * 0.01, 0.01, radius=0.01)
    for k in range(colliders):
        b.add_collider("sphere", 1.0, position=(0.0, 3.0, 0.0) if near and k == 0 else (10.0 + 3.0 * k, 0.0, 0.0),
                       ke=10.0, kd=0.01, kf=0.01)
    model = b.finalize()
    sim = tgs.Simulator(model, dt=1e-3, steps=steps)
    rec = tgs.ParticleRecorder(sim, steps)
    loss = tgs.MSELoss(rec.values, np.zeros((rec.frames, particles, 3)))
    t = time_rollout(sim, loss, repeats=repeats)
    return {"colliders": colliders, "in_contact": bool(near), "us_per_step_forward": t["us_per_step_forward"],
            "us_per_step_forward_backward": t["us_per_step_forward_backward"]}


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--particles", type=int, default=4096)
    p.add_argument("--colliders", type=int, default=4)
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--arch", default="cpu")
    p.add_argument("--precision", default="f32")
    args = p.parse_args()
    import tigradsim as tgs
    tgs.init(arch=args.arch, precision=args.precision)
    rows = [run_config(args.particles, c, near, args.steps, args.repeats)
            for c, near in ((0, False), (args.colliders, False), (args.colliders, True))]
    base, far = rows[0], rows[1]
    pairs = args.particles * args.colliders
    print(json.dumps({"benchmark": "colliders", "arch": args.arch, "precision": args.precision,
                      "particles": args.particles, "steps": args.steps, "rows": rows,
                      "ns_per_culled_pair_forward": round(1e3 * (far["us_per_step_forward"]
                                                                 - base["us_per_step_forward"]) / pairs, 2),
                      "ns_per_culled_pair_forward_backward": round(1e3 * (far["us_per_step_forward_backward"]
                                                                          - base["us_per_step_forward_backward"]) / pairs, 2)},
                     indent=1))


if __name__ == "__main__":
    main()
