"""Optimiser schedules of the scene fits: a stage of Adam steps polished by BFGS steps
(`adam_then_bfgs`), and `ScalarAdam` for the per-particle stages.

Why this split: Adam moves a wrong guess into the basin quickly but its normalised steps
do not shrink near the minimum; BFGS (`tgs.BFGS`, no line search, a trust radius) then
converges in a few steps where the loss is close to quadratic.
"""
import os

import numpy as np

from ..fitting.optim import BFGS, Adam, History


class ScalarAdam(Adam):
    """Adam with one second-moment estimate per parameter (the mean of g^2 over its
    values) instead of one per value: steps follow the (smoothed) gradient's
    direction, so values whose gradient is ~0 (motions the video cannot see)
    are not pushed by full-size normalised steps as in per-value Adam."""

    def _update(self, k, g, lr):
        b1, b2 = self.betas
        g2 = float(np.mean(g * g))
        m = (1 - b1) * g if self._m[k] is None else b1 * self._m[k] + (1 - b1) * g
        v = (1 - b2) * g2 if self._v[k] is None else b2 * self._v[k] + (1 - b2) * g2
        self._m[k], self._v[k] = m, v
        mhat = m / (1 - b1 ** self.iteration)
        vhat = v / (1 - b2 ** self.iteration)
        return lr * mhat / (np.sqrt(vhat) + self.eps)


def checkpoint_path(out_dir, name):
    """Where a stage's resumable state goes (`VideoFit.fit(resume=...)`): out_dir/name.pkl,
    or None (no resuming) when out_dir is None."""
    return None if out_dir is None else os.path.join(out_dir, f"{name}.pkl")


def adam_then_bfgs(fit, target, iters, polish, lr, polish_lr, lr_decay=1.0, adam=Adam, log_every=(10, 5),
                   resume_dir=None, name="", gather=None, suffix=""):
    """One stage of a `VideoFit`: `iters - polish` Adam steps (class `adam`, step `lr` in
    the params' internal coordinates, times `lr_decay` per iteration), then `polish` BFGS
    steps (trust radius `polish_lr`), on `fit.params` towards `target`.  Phases with no
    iterations are skipped.

    resume_dir: a folder for resumable checkpoints (`<name>adam.pkl`, `<name>bfgs.pkl`);
    None: no checkpoints.  log_every: (Adam, BFGS) progress intervals.
    gather: None (the phases append to `fit.history`), or a History into which each
    phase's own History is merged, its parameter traces renamed `<param name><suffix>`
    (one trace per stage where stages fit differently shaped parameters of one name).
    Returns `fit.history`.
    """
    polish = min(polish, iters)
    for phase, n, every in (("adam", iters - polish, log_every[0]), ("bfgs", polish, log_every[1])):
        if n <= 0:
            continue
        opt = adam(fit.params, lr=lr, lr_decay=lr_decay) if phase == "adam" else BFGS(fit.params, lr=polish_lr)
        if gather is not None:
            fit.history = History()
        fit.fit(target, iters=n, optimizer=opt, log_every=every, resume=checkpoint_path(resume_dir, f"{name}{phase}"))
        if gather is not None:
            gather.loss += fit.history.loss
            gather.seconds += fit.history.seconds
            for key, values in fit.history.params.items():
                gather.params[f"{key}{suffix}"] = values
    return fit.history
