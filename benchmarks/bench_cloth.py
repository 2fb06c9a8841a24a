"""Cloth step cost: membrane + bending + drag/lift + ground contact, f32 on the CPU.

Grids 32x32 (1,089 particles, 2,048 triangles) and 64x64 (4,225 particles,
8,192 triangles), 200 steps of dt = 1 ms.  Prints JSON: microseconds per step,
forward and forward + backward (Tape), after a warm-up run (compilation excluded).
No ratios against another day's figures: benchmarks/vs_warp.py times Warp 1.9.1 on the
same grids side by side in one run.

Where the time goes (measured here, 2 cores): a vec3 atomic add costs ~16 ns
(48,640 of them, the 64x64 bending scatter, take ~800 us; plain writes of the
same data take ~34 us), and the backward pass has one more per position and
velocity read.  In a serial loop Taichi demotes those atomics to plain adds,
so on a CPU the element loops run serially (`tgs.init(scatter="auto")`, see
`tigradsim.core.runtime.serial_scatter`), and then the whole rollout between two
frames is one kernel launch (`Simulator(fuse_steps=...)`): a launch from
Python costs 50-100 us here.  --compare times the default (serial, fused)
against one launch per step ("stepwise") and parallel scatter ("parallel") in
one process, alternating, so that load on the machine hits all alike.

    python benchmarks/bench_cloth.py [--sizes 32 64] [--steps 200] [--repeat 3] [--compare] [--grads all|named]
    python benchmarks/bench_cloth.py --threads-compare [--sizes 64] [--rounds 5] [--paths parts] [--grads all|named]
    python benchmarks/bench_cloth.py --on-ball --sizes 64 --steps 50 --repeat 2    # 64x64 on a 4,800-tet ball

--on-ball: a cloth draped on a soft ball (cloth-FEM contact, `physics.cloth_soft_contact`), ms per step forward
and forward + backward, with the contact on and off (`on_ball`).

--threads-compare: the serial path on 1 and 2 threads against element loops on both cores
(--paths: "parts" (default), "parallel", or "auto": what `tgs.init()` picks) on 2 and 1 threads,
alternating in one process, best of --rounds (see benchmarks/bench_fem.py `threads_compare`); one JSON line
per size.
--grads: "all" (default) gives every parameter a gradient, as a fit of the cloth's material would; "named"
only the initial velocities (particle_qd0), as vs_warp.py's default does.  A cloth's reverse runs on both
cores only where its parameters have no gradient (`cloth.reverse_threads`), so the two-core figure of the
default path is `--threads-compare --sizes 64 --paths auto --grads named` (2026-12-05, this scene, damped and
with drag and lift: benchmarks/RESULTS.md, "Two cores against one").
"""
import argparse
import json
import time

import numpy as np
import taichi as ti

import tigradsim as tgs

from _harness import PIN_THREADS, add_pin_threads_argument


def build(n, grads="all"):
    v, f = tgs.meshes.cloth_grid(n, n, cell=1.0 / n, origin=(-0.5, 0.6, -0.5), plane="xz")
    b = tgs.SceneBuilder()
    b.add_ground(ke=1e3, kd=1.0, kf=10.0, mu=0.5)
    b.add_cloth(v, f, material="membrane", params={"mu": 10.0, "lam": 20.0, "damping": 1e-3}, density=1.0,
                bending_stiffness=1e-4, bending_damping=1e-6, drag=1.0, lift=0.5, velocity=(0.0, -0.5, 0.2))
    return b.finalize(requires_grad=True if grads == "all" else {"particle_qd0"})


class Case:
    """One cloth scene, compiled, with its timings (best of the repeats)."""

    def __init__(self, n, steps, mode, scatter=None, grads="all"):
        scatter = scatter or ("parallel" if mode == "parallel" else "auto")
        tgs.runtime.set_scatter(scatter)
        self.mode = mode
        self.model = model = build(n, grads)
        self.grads = grads
        self.grad_field = model.cloth_params if grads == "all" else model.particle_qd0
        tgs.runtime.set_scatter("auto")
        self.sim = sim = tgs.Simulator(model, dt=1e-3, steps=steps, fuse_steps=False if mode == "stepwise" else None)
        self.loss = loss = ti.field(float, shape=(), needs_grad=True)
        slot = sim.slot(steps)

        @ti.kernel
        def objective():
            for i in range(model.particle_count):
                loss[None] += sim.state.particle_q[slot, i].y

        self.objective = objective
        self.fwd, self.bwd = [], []
        self.forward()                  # compile
        self.taped()

    def forward(self):
        self.sim.run()
        self.objective()

    def taped(self):
        with ti.ad.Tape(self.loss):
            self.forward()

    def time_once(self):
        for fn, times in ((self.sim.run, self.fwd), (self.taped, self.bwd)):
            ti.sync()
            t0 = time.perf_counter()
            fn()
            ti.sync()
            times.append(time.perf_counter() - t0)

    def result(self, n):
        steps = self.sim.steps
        f_us, b_us = min(self.fwd) / steps * 1e6, min(self.bwd) / steps * 1e6
        assert np.all(np.isfinite(self.grad_field.grad.to_numpy())), "non-finite gradient"
        model = self.model
        out = {"grid": f"{n}x{n}", "mode": self.mode, "grads": self.grads, "fused_steps": self.sim.fused,
               "particles": model.particle_count, "triangles": model.cloth_triangle_count,
               "bending_edges": model.cloth_edge_count, "steps": steps,
               "forward_us_per_step": round(f_us, 1), "forward_backward_us_per_step": round(b_us, 1)}
        return out


def bench(n, steps, repeat, compare, grads="all"):
    modes = ("default", "stepwise", "parallel") if compare else ("default",)
    cases = [Case(n, steps, m, grads=grads) for m in modes]
    for _ in range(repeat):             # alternate, so that machine load hits every mode alike
        for c in cases:
            c.time_once()
    results = [c.result(n) for c in cases]
    for other in results[1:]:
        results[0][f"{other['mode']}_over_default"] = {
            k: round(other[k] / results[0][k], 2) for k in ("forward_us_per_step", "forward_backward_us_per_step")}
    return results


DT_ON_BALL = 2e-4      # [s]: the 64 x 64 cloth's membrane and the 4,800-tet ball within their explicit limits


def on_ball(n, resolution, prism_layers, steps, repeat, land_steps=1000):
    """A n x n cloth on a soft ball (`scenes.cloth_soft_drape.towel_on_ball`, tet_ball(0.25, resolution,
    prism_layers=...)): the cloth is first dropped for `land_steps` steps of DT_ON_BALL (forward only) so that it lies
    on the ball, then `steps` steps from that state are timed forward and forward + backward (a Tape on the sum
    of the final heights; every parameter has a gradient), best of `repeat`; and the same with the cloth-ball
    contact off (the cloth and the ball in different contact groups), so the contact's share shows."""
    from tigradsim.scenes.cloth_soft_drape import towel_on_ball
    model, cloth, ball = towel_on_ball(n, resolution, prism_layers, dt=DT_ON_BALL)
    sim = tgs.Simulator(model, dt=DT_ON_BALL, steps=land_steps)
    sim.run()
    q, qd = sim.state.particle_q.to_numpy()[land_steps], sim.state.particle_qd.to_numpy()[land_steps]
    out = {"benchmark": "cloth_on_soft_ball", "grid": f"{n}x{n}", "cloth_vertices": cloth.particle_count,
           "tets": ball.tet_count, "ball_boundary_triangles": len(ball.faces), "steps": steps, "dt": DT_ON_BALL}
    for label, touch in (("contact", True), ("no_contact", False)):
        import tigradsim.scenes.cloth_soft_drape as scene
        builder_groups = None if touch else {"particles": np.r_[np.zeros(ball.particle_count, int),
                                                                np.ones(cloth.particle_count, int)]}
        m = _towel_model(scene, n, resolution, prism_layers, builder_groups)
        m.particle_q0.from_numpy(q)
        m.particle_qd0.from_numpy(qd)
        s = tgs.Simulator(m, dt=DT_ON_BALL, steps=steps)
        loss = ti.field(float, shape=(), needs_grad=True)
        slot = s.slot(steps)

        @ti.kernel
        def objective():
            for i in range(m.particle_count):
                loss[None] += s.state.particle_q[slot, i].y

        def taped():
            with ti.ad.Tape(loss):
                s.run()
                objective()
        s.run()
        taped()                                      # compile both
        fwd, bwd = [], []
        for _ in range(repeat):
            for fn, times in ((s.run, fwd), (taped, bwd)):
                ti.sync()
                t0 = time.perf_counter()
                fn()
                ti.sync()
                times.append(time.perf_counter() - t0)
        assert np.all(np.isfinite(m.particle_qd0.grad.to_numpy())), "non-finite gradient"
        out[label] = {"forward_ms_per_step": round(min(fwd) / steps * 1e3, 2),
                      "forward_backward_ms_per_step": round(min(bwd) / steps * 1e3, 2)}
        if touch:
            terms = [t for t in s.force_terms if type(t).__name__ == "ClothSoftContact"]
            out["contact_pairs_listed"] = [int(t.broad.pair_count[None]) for t in terms]
    return out


def _towel_model(scene, n, resolution, prism_layers, groups):
    """`towel_on_ball`'s model, with the builder's contact groups set to `groups` (None: one group)."""
    from tigradsim.sim import builder as builder_module
    original = builder_module.SceneBuilder.finalize

    def finalize(self, *a, **k):
        if groups is not None:
            self.contact_groups = groups
        return original(self, *a, **k)
    builder_module.SceneBuilder.finalize = finalize
    try:
        return scene.towel_on_ball(n, resolution, prism_layers, requires_grad=True, dt=DT_ON_BALL)[0]
    finally:
        builder_module.SceneBuilder.finalize = original


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sizes", type=int, nargs="+", default=[32, 64])
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--arch", default="cpu")
    p.add_argument("--compare", action="store_true",
                   help="also time one launch per step and parallel scatter (ratios to the default)")
    p.add_argument("--threads-compare", action="store_true",
                   help="serial vs --paths on 1 and 2 threads, alternating in one process")
    p.add_argument("--paths", default="parts", help="paths for --threads-compare, comma-separated")
    p.add_argument("--rounds", type=int, default=5, help="rounds for --threads-compare (best of)")
    p.add_argument("--grads", choices=("all", "named"), default="all",
                   help="every parameter has a gradient (all), or only the initial velocities (named)")
    p.add_argument("--on-ball", action="store_true",
                   help="a --sizes cloth on a soft ball (tet_ball level --ball-resolution, --prism-layers), "
                        "cloth-FEM contact on and off")
    p.add_argument("--ball-resolution", type=int, default=3)
    p.add_argument("--prism-layers", type=int, default=2, help="tet_ball prism layers (3 and 2: 4,800 tets)")
    add_pin_threads_argument(p)
    args = p.parse_args(argv)
    if args.on_ball:
        tgs.init(arch=args.arch, precision="f32", pin_threads=PIN_THREADS[args.pin_threads])
        for n in args.sizes:
            print(json.dumps(on_ball(n, args.ball_resolution, args.prism_layers, args.steps, args.repeat)), flush=True)
        return
    if args.threads_compare:
        from bench_fem import threads_compare
        for n in args.sizes:
            def timer(tgs_, n=n):
                case = Case(n, args.steps, "default", scatter=tgs_.runtime.scatter_mode(), grads=args.grads)

                def once():
                    case.fwd, case.bwd = [], []
                    case.time_once()
                    return case.fwd[0] / args.steps, case.bwd[0] / args.steps
                return once
            res = threads_compare(timer, "f32", args.paths.split(","), args.rounds, label=f"cloth{n}",
                                  pin_threads=args.pin_threads)
            res["grads"] = args.grads
            print(json.dumps(res), flush=True)
        return
    tgs.init(arch=args.arch, precision="f32", pin_threads=PIN_THREADS[args.pin_threads])
    results = [r for n in args.sizes for r in bench(n, args.steps, args.repeat, args.compare, args.grads)]
    print(json.dumps({"benchmark": "cloth", "arch": args.arch, "precision": "f32", "results": results}))


if __name__ == "__main__":
    main()
