"""How the choice of `tgs.discrepancy_intervals`' runs and quantile was made: re-scores the saved fits
of benchmarks/coverage.py (their estimates.json: the report, its per-frame statistics and the
intervals with assumed constants) with the discrepancy widening computed for B = 3, 4, 6 runs of
frames left out in turn and the 1.96 (z) or Student's t (B - 1) quantile, and prints per choice the
coverage (all estimates, and those not marked misfit), the estimates excluded by more than 2
half-widths and the median half-width.  No rollout: it reads the files only.

    python3 benchmarks/coverage_blocks.py out/coverage [more output folders ...]

(each folder holds coverage.py's CLIP_VARIANT_CONTACT/fit/estimates.json; a later folder's fit of a
clip and variant replaces an earlier one's).
"""
from __future__ import annotations

import glob
import json
import math
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from coverage import truths_of  # noqa: E402
from tigradsim.fitting.discrepancy import FrameStatistics, block_jackknife  # noqa: E402
from tigradsim.fitting.uncertainty import Z95, t95  # noqa: E402

CHOICES = [(b, q) for b in (3, 4, 6) for q in ("z", "t")]


def rows_of(report, clip):
    """One dict per scored estimate with an interval: log error, the report's 95 % interval's half-widths
    below / above the estimate, the assumptions' widening below / above, and per choice the factor."""
    stats = FrameStatistics.from_dict(report["frame_statistics"])
    names = [e["name"] for e in report["identification"]["minima"][0]["report"]["estimates"]]
    jk = {b: np.sqrt(block_jackknife(stats, b)[0]) for b in (3, 4, 6)}
    out = []
    for k, truth in truths_of(clip).items():
        u = report["unknowns"].get(k)
        if u is None or u["ci95"] is None:
            continue
        est, (lo, hi), (wlo, whi) = u["estimate"], u["ci95"], u["ci95_with_assumptions"]
        row = {"unknown": k, "status": u["status"], "err": math.log(truth / est), "below": math.log(est / lo),
               "above": math.log(hi / est), "down": math.log(lo / wlo), "up": math.log(whi / hi)}
        half = 0.5 * (row["below"] + row["above"])
        for b, q in CHOICES:
            s = jk[b][names.index(k)]
            quantile = Z95 if q == "z" else t95(b - 1)
            row[(b, q)] = max(1.0, quantile * s / half) if half > 0 and math.isfinite(s) else 1.0
        out.append(row)
    return out


def main(folders):
    fits = {}
    for folder in folders:
        for path in sorted(glob.glob(os.path.join(folder, "*", "fit", "estimates.json"))):
            key = os.path.basename(os.path.dirname(os.path.dirname(path)))
            fits[key] = path
    rows = []
    for key, path in sorted(fits.items()):
        report = json.load(open(path))
        if not report.get("frame_statistics"):
            continue
        clip = key.rsplit("_", 2)[0]
        rows += [dict(r, fit=key) for r in rows_of(report, clip)]
    print(f"{len(rows)} estimates with an interval from {len(fits)} fits")
    print("| runs | quantile | coverage | not misfit | excess > 2 | median factor | median half-width (log) |")
    print("|---|---|---|---|---|---|---|")
    for b, q in CHOICES:
        inside, excess, widths = [], [], []
        for r in rows:
            f = r[(b, q)]
            below, above = f * r["below"] + r["down"], f * r["above"] + r["up"]
            out = max(0.0, -r["err"] - below, r["err"] - above)
            inside.append(out == 0.0)
            excess.append(out / (0.5 * (below + above)))
            widths.append(0.5 * (below + above))
        ok = [i for i, r in zip(inside, rows) if r["status"] != "misfit"]
        print(f"| {b} | {'1.96' if q == 'z' else f't({b - 1}) {t95(b - 1):.3g}'} | {sum(inside)}/{len(rows)} | "
              f"{sum(ok)}/{len(ok)} | {sum(e > 2 for e in excess)} | {np.median([r[(b, q)] for r in rows]):.3g} | "
              f"{np.median(widths):.3g} |")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    main(sys.argv[1:])
