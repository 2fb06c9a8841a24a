"""Run: PYTHONPATH=. python3 benchmarks/law_ties_recombine.py (prints the markdown rows of RESULTS.md "Equally good laws").
Re-combine the Warp drop laws' mu from the per-law rows recorded in benchmarks/RESULTS.md (the per-law
estimates.json files are gone): loss relative to the best, mu estimate, status, 95 % and discrepancy intervals."""
from tigradsim.fitting.model_selection import compare_fit_outputs
rows = {  # variant: {law: (loss rel. to best, 2dL/s2, mu, status, ci95, disc)}
 "clean": {"capped+warp(0.1)": (0.0, 0, 1.13, "ok", [0.927, 1.21], [0.05, 1.5]),
           "capped+warp(0.01)": (0.021, 2.2e3, 1.00, "misfit", [0.970, 1.13], [0.161, 1.5]),
           "capped": (0.030, 3.2e3, 1.14, "ok", [0.968, 1.31], [0.129, 1.5])},
 "camera": {"capped+warp(0.01)": (0.0, 0, 0.733, "ok", [0.372, 1.28], [0.372, 1.28]),
            "capped": (0.012, 1.3e3, 0.821, "ok", [0.577, 1.12], [0.577, 1.12]),
            "capped+warp(0.1)": (0.058, 6.4e3, 0.673, "misfit", [0.483, 1.08], [0.05, 1.5])},
 "noisy": {"capped+warp(0.1)": (0.0, 0, 1.11, "ok", [0.677, 1.36], [0.05, 1.5]),
           "capped+warp(0.01)": (0.0015, 633, 1.20, "misfit", [1.18, 1.24], [0.407, 1.5]),
           "capped": (0.0023, 998, 1.42, "ok", [0.988, 1.5], [0.05, 1.5])},
}
for variant, laws in rows.items():
    ex, d = max((v[0], v[1]) for v in laws.values())
    s2 = 2 * ex / d                                   # the best's residual variance, loss 1 (relative)
    outputs = {k: {"identification": {"minima": [{"report": {"loss": 1 + v[0], "s2": s2, "residual_count": 1}}]},
                   "unknowns": {"box.mu": {"estimate": v[2], "status": v[3], "ci95": v[4], "ci95_with_discrepancy": v[5]}}}
               for k, v in laws.items()}
    c = compare_fit_outputs(outputs, interval_keys=("ci95", "ci95_with_discrepancy"))
    old = compare_fit_outputs(outputs, interval_keys=("ci95", "ci95_with_discrepancy"), tie_rtol=0.0)
    mu = c["combined"]["box.mu"]
    hold = lambda ci: "yes" if ci[0] <= 0.6 <= ci[1] else "no"
    print(f"| {variant} | {c['best']} | {', '.join(c['equally_good'])} | {mu['estimate']:.3g} ({100 * (mu['estimate'] / 0.6 - 1):+.1f} %) | "
          f"[{mu['ci95'][0]:.3g}, {mu['ci95'][1]:.3g}] | {hold(mu['ci95'])} | [{mu['ci95_with_discrepancy'][0]:.3g}, "
          f"{mu['ci95_with_discrepancy'][1]:.3g}] | {hold(mu['ci95_with_discrepancy'])} | {mu['spread']:.3g} | {mu['status']} | "
          f"{', '.join(old['equally_good'])} |")
