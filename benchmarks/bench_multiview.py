"""Cost of a second camera in one fit (issue 47, item 5): a box pushed along +x, filmed by one camera
("along", looking down the push) or by two ("along" + "above"), `VideoFit` with the mass as the unknown;
seconds per gradient iteration (rollout, every view's render and image loss, backward) and per
forward-only rollout, best of --repeats, at --res px.

    python benchmarks/bench_multiview.py [--res 32] [--frames 8] [--iters 5] [--repeats 3] [--precision f64]

The scene is tests/test_multiview.py's (`pushed_box_two_views`).  Kernels are compiled before the clocks
start.  The last line is one JSON object: {"res", "frames", "one_view_s", "two_views_s", "ratio", ...}.

Measured on the shared 2-core AMD VM, 2026-12-06, f64, 8 frames, under a load average of ~8 (other
sessions' tests), so the figures scatter: 32 px: one view 12.5 ms / two views 24.9 ms per gradient
iteration (forward 2.7 / 3.2 ms), again 37.8 / 38.6 ms; 64 px: 43.0 / 47.3 ms, again 41.7 / 45.6 ms.
The second camera adds its render, loss and their backward; the rollout is shared.
"""
import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))


def _best(fn, repeats):
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--res", type=int, default=32)
    ap.add_argument("--frames", type=int, default=8)
    ap.add_argument("--iters", type=int, default=5)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--precision", default="f64", choices=("f32", "f64"))
    args = ap.parse_args(argv)

    import tigradsim as tgs
    import test_multiview as scene_module
    from tigradsim.fitting.views import View

    tgs.init(arch="cpu", precision=args.precision)
    scene_module.SIZE, scene_module.FRAMES = args.res, args.frames
    model, sim, ren = scene_module.pushed_box_two_views()
    mass = tgs.Param(model.body_mass, "mass", log_space=True, lower=0.05, upper=50.0)
    fits = {"one_view": tgs.VideoFit(sim, ren["along"], [mass]),
            "two_views": tgs.VideoFit(sim, [View(ren["along"], name="along"), View(ren["above"], name="above")],
                                      [mass])}
    model.set("body_mass", [1.4])
    targets = {k: f.render() for k, f in fits.items()}
    out = {"res": args.res, "frames": args.frames, "iters": args.iters, "precision": args.precision}
    for name, fit in fits.items():
        fit.set_target(targets[name])

        def gradient_steps(fit=fit, name=name):
            model.set("body_mass", [1.0])
            fit.fit(targets[name], iters=args.iters, optimizer=tgs.Adam([mass], lr=0.05), log_every=0)

        gradient_steps()                          # compile
        out[f"{name}_s"] = _best(gradient_steps, args.repeats) / args.iters
        out[f"{name}_forward_s"] = _best(fit.loss_value, args.repeats)
        print(f"{name}: {out[f'{name}_s'] * 1e3:.1f} ms per gradient iteration, "
              f"{out[f'{name}_forward_s'] * 1e3:.1f} ms per forward rollout + loss")
    out["ratio"] = out["two_views_s"] / out["one_view_s"]
    print(json.dumps(out))


if __name__ == "__main__":
    main()
