"""What the backward pass's adjoint check costs on vs_warp's rigid64 (64 boxes, 1,920 steps of 1/960 s,
f32; tigradsim only): kernel launches of one forward and one forward + backward (`tgs.tape`), counted by
wrapping Taichi's kernel launch, and the best time per step over `--calls` calls, wall clock and the
process's CPU time (on a shared machine the CPU time holds steadier: waiting for a core is not counted).

    python benchmarks/adjoint_check_cost.py [--calls 30]

Run it from two trees alternately to compare them (benchmarks/RESULTS.md, "Speed against Warp, CPU").
The last stdout line is one JSON object:
    {"launches_forward": n, "launches_forward_backward": n, "us_per_step": [f, fb], "cpu_us_per_step": [f, fb]}
"""
import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import vs_warp                                   # noqa: E402  (the scene, built exactly as vs_warp builds it)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--calls", type=int, default=30, help="timed calls of each (best one kept)")
    args = p.parse_args(argv)
    import tigradsim as tgs
    from taichi.lang import kernel_impl
    tgs.init(arch="cpu", precision="f32", pin_threads=vs_warp.PIN_THREADS["auto"])
    spec = vs_warp.scene_spec("rigid64")
    case = vs_warp.TigradsimCase(spec, "cpu")
    for _ in range(3):                           # compile and warm up
        case.forward()
        case.forward_backward()
    launches = [0]
    launch = kernel_impl.Kernel.launch_kernel

    def counted(self, *a, **k):
        launches[0] += 1
        return launch(self, *a, **k)

    kernel_impl.Kernel.launch_kernel = counted
    counts = {}
    for name, fn in (("f", case.forward), ("fb", case.forward_backward)):
        launches[0] = 0
        fn()
        counts[name] = launches[0]
    kernel_impl.Kernel.launch_kernel = launch
    wall, cpu = {"f": 1e9, "fb": 1e9}, {"f": 1e9, "fb": 1e9}
    for _ in range(args.calls):
        for name, fn in (("f", case.forward), ("fb", case.forward_backward)):
            t, c = time.perf_counter(), time.process_time()
            fn()
            wall[name] = min(wall[name], time.perf_counter() - t)
            cpu[name] = min(cpu[name], time.process_time() - c)
    per_step = lambda d: [round(d[k] / spec["steps"] * 1e6, 2) for k in ("f", "fb")]    # noqa: E731
    print(json.dumps({"launches_forward": counts["f"], "launches_forward_backward": counts["fb"],
                      "us_per_step": per_step(wall), "cpu_us_per_step": per_step(cpu),
                      "gradient_finite": bool(case.gradient_finite())}))


if __name__ == "__main__":
    main()
