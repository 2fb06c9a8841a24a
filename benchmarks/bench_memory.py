"""Peak memory of a long differentiable rollout with video: the paper's soft ball
(demos/sysid_fem.py's scene, `--full`) over 3,840 steps of 1/1920 s, rendered
every 32 steps (121 frames) as 256x256 soft silhouettes, forward and backward
(one VideoFit iteration: pixel MSE, Tape through renderer and FEM, Adam step)
under checkpointing.

    python benchmarks/bench_memory.py [--res 256] [--steps 3840] [--every 32] [--checkpoint 128]
                                      [--arch cpu] [--precision f32] [--height 0.9]

Memory figures (MB = 2**20 bytes):
  baseline_rss_mb      RSS after `tgs.init` (Python, Taichi, LLVM; before any scene)
  peak_rss_mb          high-water RSS of this process (`tigradsim.core.memory.peak_rss_mb`: VmHWM)
                       after the backward pass: the number the 1 GB target is about
  fields_mb            the Taichi fields this scene allocates, gradients included, by owner:
                       state (the checkpoint working buffer), checkpoints (segment starts),
                       renderer (frames + scratch), loss (target frames), model
Each stage's RSS and the high-water mark reached by then are also printed (after build,
the target render, set_target, the taped iteration): the stage where the high-water mark
jumps is where the peak comes from.  Target: peak under 1 GB.  With --arch cuda the RSS
figures are host memory only; fields_mb is then what lives on the device.
The last line is one JSON object.
"""
import argparse
import json
import time

import numpy as np


def field_mb(fields, requires_grad):
    """Bytes [MB] of Taichi fields (gradient copies counted when they exist)."""
    from taichi.lang.util import to_numpy_type
    total = 0
    for f in fields:
        comps = getattr(f, "n", 1) * (getattr(f, "m", 1) or 1)
        size = int(np.prod(f.shape)) * comps * np.dtype(to_numpy_type(f.dtype)).itemsize
        total += size * (2 if requires_grad(f) else 1)
    return total / 2 ** 20


def build(args):
    """The soft ball of the Table 3 fit (`tigradsim.scenes.soft.SoftBallFit`, demos/sysid_fem.py) at this
    benchmark's length, size and checkpointing: the scene, with its model, simulator, renderer and VideoFit."""
    from tigradsim.scenes.soft import SoftBallFit

    dt = 1 / 1920
    return SoftBallFit("lame", duration=args.steps * dt, dt=dt, every=args.every, res=args.res,
                       checkpoint=args.checkpoint, resolution=args.resolution, height=args.height)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--res", type=int, default=256, help="image width = height [px]")
    p.add_argument("--steps", type=int, default=3840, help="steps of 1/1920 s (3840: the paper's 2 s)")
    p.add_argument("--every", type=int, default=32, help="render every this many steps")
    p.add_argument("--checkpoint", type=int, default=128, help="checkpoint_every (segment length)")
    p.add_argument("--resolution", type=int, default=2, help="tet_ball resolution (2: 640 tets)")
    p.add_argument("--height", type=float, default=0.9, help="initial centre height [m] (radius 0.5)")
    p.add_argument("--arch", default="cpu")
    p.add_argument("--precision", default="f32")
    args = p.parse_args(argv)

    import taichi as ti
    import tigradsim as tgs
    from tigradsim.core.memory import peak_rss_mb, rss_mb
    from tigradsim.core.model import has_grad
    from taichi.lang.field import Field

    tgs.init(arch=args.arch, precision=args.precision)
    baseline = rss_mb()
    scene = build(args)
    model, sim, ren, fit = scene.model, scene.sim, scene.renderer, scene.fit
    mu = scene.params[0]                       # the fit's log-space ColumnParam on tet_params[:, 0]
    stages, peaks = {}, {}

    def stage(name):
        stages[name], peaks[name] = round(rss_mb(), 1), round(peak_rss_mb(), 1)

    stage("build")
    t1 = time.perf_counter()
    target = fit.render()                      # forward only: the target video at the true mu
    t_forward = time.perf_counter() - t1
    stage("target_render")
    fit.set_target(target)
    stage("set_target")
    mu.write(np.array([1.5e3]))                # a wrong guess, so the gradient is not ~0
    t1 = time.perf_counter()
    fit.fit(target, iters=1, lr=0.05, printer=lambda *a: None)    # forward + backward under the Tape + Adam step
    ti.sync()
    t_iter = time.perf_counter() - t1
    stage("taped_iteration")
    grad = float(mu.grad()[0])
    if not np.isfinite(grad) or grad == 0.0:
        raise RuntimeError(f"bench_memory: d loss / d mu = {grad}: the backward pass did not run through")

    requires_grad = model.requires_grad
    state_mb = sim.state.nbytes() / 2 ** 20
    ck_mb = sim.checkpoints.nbytes() / 2 ** 20 if sim.checkpoints else 0.0
    ren_mb = ren.memory_bytes() / 2 ** 20
    loss = fit._image_loss
    ren_ids = {id(v) for v in vars(ren).values()}
    loss_fields = [v for v in vars(loss).values() if isinstance(v, Field) and id(v) not in ren_ids]
    loss_mb = field_mb(loss_fields, has_grad)
    model_fields = [v for v in vars(model).values() if isinstance(v, Field)]
    model_mb = field_mb(model_fields, has_grad)
    peak = peak_rss_mb()
    out = {
        "benchmark": "memory", "arch": args.arch, "precision": args.precision,
        "particles": model.particle_count, "tets": model.tet_count, "steps": args.steps,
        "frames": int(ren.image.shape[0]), "res": args.res, "checkpoint_every": args.checkpoint,
        "requires_grad": bool(requires_grad),
        "baseline_rss_mb": round(baseline, 1), "rss_after_mb": stages, "peak_rss_after_mb": peaks,
        "peak_rss_mb": round(peak, 1),
        "peak_over_baseline_mb": round(peak - baseline, 1),
        "fields_mb": {"state": round(state_mb, 4), "checkpoints": round(ck_mb, 4), "renderer": round(ren_mb, 3),
                      "loss": round(loss_mb, 3), "model": round(model_mb, 4)},
        "forward_s": round(t_forward, 2), "forward_backward_s": round(t_iter, 2),
        "grad_mu": grad, "under_1gb": peak < 1024,
    }
    print(json.dumps(out))


if __name__ == "__main__":
    main()
