"""Loss landscapes of the rigid contact scene (gradSim Table 2's bouncing, pushed box), as in the
paper's figures: the image loss and the 3D (state) loss against the mass and against the friction
coefficient mu (the other parameters at the truth), and a 2-D slice mass x mu, each with the truth
marked.

The truth is trial 0 of `demos/sysid_rigid_contact.py` at --seed (`tigradsim.scenes.rigid_contact.draw`);
the image loss is the fit's pixel MSE against the video rendered at the truth, the state loss the MSE
of the mesh vertex tracks (the demo's --supervision state).  Each point is one forward rollout.

    python benchmarks/landscapes.py                     # 31-point lines, 15 x 15 slice (res 64, dt 1/1920)
    python benchmarks/landscapes.py --points 11 --grid 7 --res 32 --dt 0.0010416666666666667   # quicker

Writes benchmarks/landscapes/contact_mass.png, contact_mu.png, contact_mass_mu.png (and
landscapes.json: the sampled values) and re-renders benchmarks/paper_tables.md, which links them.
Last stdout line: JSON with the files, the truth, each line's argmin and the seconds.
"""
import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "benchmarks", "landscapes")


def loss_line(scenes, targets, truth, name, factors):
    """{supervision: losses (len(factors),)} with parameter `name` at truth[name] x factor and the
    others at the truth."""
    out = {}
    for sup, sc in scenes.items():
        sc.fit.set_target(targets[sup])
        vals = []
        for f in factors:
            sc.set({**truth, name: truth[name] * f})
            vals.append(sc.fit.loss_value())
        out[sup] = np.array(vals)
    return out


def loss_grid(sc, target, truth, fm, fmu):
    """Losses (len(fm), len(fmu)) with the mass at truth x fm[i] and mu at truth x fmu[j]."""
    sc.fit.set_target(target)
    grid = np.empty((len(fm), len(fmu)))
    for i, a in enumerate(fm):
        for j, b in enumerate(fmu):
            sc.set({**truth, "mass": truth["mass"] * a, "mu": truth["mu"] * b})
            grid[i, j] = sc.fit.loss_value()
    return grid


def plot_line(path, factors, losses, name, truth_value, unit):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.4))
    for ax, (sup, vals) in zip(axes, losses.items()):
        x = truth_value * factors
        ax.plot(x, vals, "o-", ms=3, color="tab:blue" if sup == "image" else "tab:green")
        ax.axvline(truth_value, color="tab:red", ls="--", label=f"truth {truth_value:.4g}{unit}")
        ax.set_xlabel(f"{name}{unit and ' [' + unit.strip() + ']'}")
        ax.set_ylabel("pixel MSE" if sup == "image" else "vertex-track MSE [m^2]")
        ax.set_title(f"{'image' if sup == 'image' else '3D (state)'} loss vs {name}")
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_grid(path, fm, fmu, grids, truth):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, len(grids), figsize=(4.6 * len(grids), 3.8))
    axes = np.atleast_1d(axes)
    for ax, (sup, g) in zip(axes, grids.items()):
        # log10 of the loss: the valley floor spans decades (0 at the truth)
        z = np.log10(np.maximum(g, np.max(g) * 1e-12))
        im = ax.contourf(truth["mu"] * fmu, truth["mass"] * fm, z, levels=20, cmap="viridis")
        fig.colorbar(im, ax=ax, label="log10 loss")
        ax.plot([truth["mu"]], [truth["mass"]], "r*", ms=12, label="truth")
        ax.set_xlabel("mu")
        ax.set_ylabel("mass [kg]")
        ax.set_title(f"{'image' if sup == 'image' else '3D (state)'} loss, mass x mu")
        ax.legend(fontsize=8, loc="upper right")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seed", type=int, default=0, help="the truth: trial 0 of the demo at this seed")
    p.add_argument("--points", type=int, default=31, help="points per 1-D line")
    p.add_argument("--grid", type=int, default=15, help="points per axis of the 2-D slice")
    p.add_argument("--span", type=float, default=1.5, help="lines and slice cover truth x/ span (log-spaced)")
    p.add_argument("--res", type=int, default=64)
    p.add_argument("--dt", type=float, default=1 / 1920)
    p.add_argument("--out", default=OUT)
    p.add_argument("--arch", default="cpu")
    args = p.parse_args(argv)
    for k in ("points", "grid"):
        if getattr(args, k) < 3:
            raise ValueError(f"--{k}: expected at least 3 points, got {getattr(args, k)}")
    if not args.span > 1:
        raise ValueError(f"--span: expected a factor > 1, got {args.span}")
    import tigradsim as tgs
    from tigradsim.scenes.rigid_contact import BounceBoxScene, draw
    tgs.init(arch=args.arch, precision="f64", seed=args.seed)
    start = time.time()
    os.makedirs(args.out, exist_ok=True)
    truth, _ = draw(np.random.default_rng(args.seed))
    scenes = {sup: BounceBoxScene(supervision=sup, res=args.res, dt=args.dt) for sup in ("image", "state")}
    targets = {}
    for sup, sc in scenes.items():
        sc.set(truth)
        targets[sup] = sc.target()
    factors = np.exp(np.linspace(-np.log(args.span), np.log(args.span), args.points))
    files, summary = {}, {}
    for name, unit in (("mass", " kg"), ("mu", "")):
        losses = loss_line(scenes, targets, truth, name, factors)
        files[name] = os.path.join(args.out, f"contact_{name}.png")
        plot_line(files[name], factors, losses, name, truth[name], unit)
        summary[name] = {sup: {"argmin": float(truth[name] * factors[int(np.argmin(v))]), "losses": v.tolist()}
                         for sup, v in losses.items()}
        print(f"{name}: argmin " + ", ".join(f"{s} {summary[name][s]['argmin']:.5g}" for s in losses)
              + f" (truth {truth[name]:.5g})", flush=True)
    g = np.exp(np.linspace(-np.log(args.span), np.log(args.span), args.grid))
    grids = {sup: loss_grid(sc, targets[sup], truth, g, g) for sup, sc in scenes.items()}
    files["mass_mu"] = os.path.join(args.out, "contact_mass_mu.png")
    plot_grid(files["mass_mu"], g, g, grids, truth)
    seconds = round(time.time() - start, 1)
    record = {"truth": truth, "factors": factors.tolist(), "grid_factors": g.tolist(), "lines": summary,
              "grids": {s: v.tolist() for s, v in grids.items()}, "seconds": seconds,
              "command": "benchmarks/landscapes.py " + " ".join(argv if argv is not None else sys.argv[1:])}
    with open(os.path.join(args.out, "landscapes.json"), "w") as fh:
        json.dump(record, fh)
    if os.path.abspath(args.out) == OUT:
        subprocess.run([sys.executable, os.path.join(ROOT, "benchmarks", "paper_tables.py"), "--render"],
                       check=True, stdout=subprocess.DEVNULL, cwd=ROOT)
    print(json.dumps({"files": files, "truth": truth, "seconds": seconds,
                      "argmin": {n: {s: v["argmin"] for s, v in summary[n].items()} for n in summary}}))


if __name__ == "__main__":
    main()
