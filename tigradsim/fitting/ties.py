"""When two fits of the same data fit equally well: the one rule that `identify` (distinct minima, tied
search starts) and `model_selection` (contact laws, damping forms, any model variants) share.

Two fits with losses L = 1/2 |r|^2 on the same residuals are equally good when either

* the loss of the worse is within `tie_rtol` of the best (default 5 %): L - L_best <= tie_rtol |L_best|, or
* a likelihood-ratio test cannot tell them apart: 2 (L - L_best) / s^2 <= `tie_chi2` (default 3.84, the 95 %
  point of chi^2 with one degree of freedom), s^2 the best fit's residual variance.

Why the relative rule and not the likelihood-ratio test alone: the test counts every pixel as an independent
observation.  Footage residuals are not: where the model is not the world's (another contact law, a damping
form, the time step) the residual is mostly model error, and it moves the silhouette the same way over
neighbouring pixels and neighbouring frames.  Measured on Warp drop clips (benchmarks/RESULTS.md, "Warp's
rigid friction among the laws a drop fit compares"): 2 dL / s^2 of 600 to 6,400 between laws whose losses
differ by 0.15 to 5.8 %, so the test alone calls any two different fits distinguishable.
Why not an effective-sample-size correction of the test instead (dividing the statistic by the pixels per
independent observation): the clusters the intervals use (`residual_groups`: blocks of contiguous frames)
say which residuals may be correlated, not how many independent observations there are, and estimating
that needs the residual vectors, which the saved fit reports (estimates.json, `compare_fit_outputs`) do
not keep.  The relative rule needs only the losses, and the search already uses it, so a model comparison
and a multi-start search call the same fits equally good.  The statistic is still computed (tables show
it) and still ties fits on small, truly independent data, where 5 % of the loss is more than noise.
"""
from __future__ import annotations

import math

__all__ = ["TIE_CHI2", "TIE_RTOL", "check_tie_thresholds", "loss_tied", "likelihood_ratio", "tied_with_best"]

TIE_CHI2 = 3.84       # the 95 % point of chi^2 with one degree of freedom
TIE_RTOL = 0.05       # losses within 5 % of the best


def check_tie_thresholds(tie_chi2: float, tie_rtol: float) -> None:
    """A clear error for a threshold that is not a number >= 0 (before any fit or comparison runs)."""
    for name, value in (("tie_chi2", tie_chi2), ("tie_rtol", tie_rtol)):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not (value >= 0 and math.isfinite(value)):
            raise ValueError(f"{name}: expected a finite number >= 0, got {value!r}")


def loss_tied(loss: float, best_loss: float, tie_rtol: float = TIE_RTOL) -> bool:
    """Whether `loss` is within `tie_rtol` of `best_loss` (relative to |best_loss|, floored at 1e-300)."""
    return loss - best_loss <= tie_rtol * max(abs(best_loss), 1e-300)


def likelihood_ratio(loss: float, best_loss: float, s2: float) -> float:
    """2 (loss - best_loss) / s2 (s2: the best fit's residual variance; a zero or non-finite one counts as
    1e-300, so that any worse loss is infinitely far)."""
    s2 = s2 if s2 > 0 and math.isfinite(s2) else 1e-300
    return 2.0 * (loss - best_loss) / s2


def tied_with_best(loss: float, best_loss: float, s2=None, tie_chi2: float = TIE_CHI2,
                   tie_rtol: float = TIE_RTOL) -> bool:
    """Whether a fit with `loss` fits as well as the best (module docstring); s2 None: the relative rule only
    (no residuals, no likelihood-ratio test)."""
    if loss_tied(loss, best_loss, tie_rtol):
        return True
    return s2 is not None and likelihood_ratio(loss, best_loss, s2) <= tie_chi2
