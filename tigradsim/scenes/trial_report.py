"""The report every multi-trial fit demo writes: trial 0's full report and one labelled row per trial.

A scene's `trials(...)` yields trial results with `.row` (the JSON row), `.seconds` (fit time),
`.index`, `.target_video`, `.initial_video` and `.truth` (a dict of parameter values), and the
scene has `.fit` (its VideoFit) and `.report_strip(trial)` (the labelled target | initial |
estimate strip).  `collect_trials` runs them and writes the pictures.
"""
import os
import time

from ..core.memory import peak_rss_mb
from ..io.panels import trials_grid
from ..io.video import save_gif


def collect_trials(scene, trials, out_dir, title, truth=lambda trial: trial.truth):
    """Run `trials`; write trial 0's loss/parameter plots, labelled GIF and overlay, and every
    trial's strip as a grid in OUT/trials.gif.  truth: trial -> the dict save_report labels the
    target with.  Returns (rows, fit_seconds, grid (uint8 video), trials_gif_path)."""
    rows, strips, fit_seconds = [], [], 0.0
    for trial in trials:
        rows.append(trial.row)
        fit_seconds += trial.seconds
        if trial.index == 0:
            paths = scene.fit.save_report(out_dir, trial.target_video, trial.initial_video, truth=truth(trial),
                                          title=title)
            print(f"wrote {paths['loss_plot']}, {paths['param_plot']}, {paths['gif']}")
        strips.append(scene.report_strip(trial))
    grid = trials_grid(strips)                   # one labelled row per trial
    return rows, fit_seconds, grid, save_gif(grid, os.path.join(out_dir, "trials.gif"), fps=15)


def timing(start, fit_seconds, iterations):
    """The demos' timing fields: wall seconds since `start`, fit seconds per iteration, peak RSS [MB]."""
    return {"seconds": round(time.time() - start, 1),
            "seconds_per_iter": round(fit_seconds / max(1, iterations), 3),
            "peak_mem_mb": round(peak_rss_mb(), 1)}
