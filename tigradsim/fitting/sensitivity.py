"""What an estimate owes to what the user did not give, and whether the fit reached the data.

    report = tgs.fit_report(fit.residuals, params)
    assumed = [tgs.AssumedConstant("ground.kf", 10.0, *PRIOR_RANGES["kf"](10.0), write=set_kf)]
    sens = tgs.assumption_sensitivity(fit.residuals, params, assumed, report)
    quality = tgs.fit_quality(report, noise_floor=..., iou=0.97)
    print(sens, quality)            # "mass moves +9.1 % / -2.0 % over ground.kf in [1, 1000] ..."

**Sensitivity to assumed constants.**  A constant of the model that nobody measured and the fit
did not fit (contact stiffness ke, damping kd, friction regularisation kf, a friction
coefficient mu that is not an unknown, a soft or cloth object's contact radius) is held at a
default; the Gauss-Newton interval of `fit_report` is conditional on it.  With J = dr/dtheta at the estimate (the optimiser's
coordinates, `residual_jacobian`) and r(c) the residuals with the constant set to c, the
linearised refit moves the estimate by

    dtheta(c) = -(J^T J)^+ J^T (r(c) - r(c0))

(the same formula as `fit_report`'s `systematics`), evaluated at both ends of the constant's
prior range (`PRIOR_RANGES`): 2 rollouts per constant, plus the 2 p of J when not given.  Using
the residuals at the ends (a secant) instead of the derivative at c0 keeps the constant's own
non-linearity over a range of decades; the estimate's is still linearised, so a shift far
beyond the interval says "this constant decides the answer", not by exactly how much.  An
estimate whose largest shift exceeds its 95 % interval's half-width is "assumption-dominated":
its interval does not describe what is known.

**Range ends the footage rules out.**  A prior range is what is known before the footage; the footage can
rule part of it out: on Warp's box push the mass moves +47 % with ground.kf = 1, but the loss there, refitted, is
50-100 times the estimate's (benchmarks/RESULTS.md, branch chord44).  So each end is judged as a profile interval
judges a value: where the loss at the end, refitted, rises over the estimate's by more than the profile
intervals' 95 % threshold (`rule_out_threshold`: profile.py's `loss_rise_threshold`, its one definition; the
constant has no std of its own, so the Laplace part takes the largest std ratio of the report's values), the end
is ruled out and RULE_OUT_STEPS bisections between the assumed value and the end (in log c for a positive range,
in c otherwise) find the last point within it; the refit's move there is what the widened interval
(`intervals_with_assumptions`) and the "assumption-dominated" mark use, and `Sensitivity.ruled_out` names the
allowed sub-range ("ground.kf: the footage rules out ground.kf below 6.49").  Refitted: with `refit_steps`, that
refit; with none (linearised), an end whose loss with nothing refitted passes the threshold is refitted by
RULE_OUT_REFIT_STEPS Levenberg-Marquardt iterations before it is judged, as is every bisection point: a loss with
nothing refitted, or at the linearised refit, overstates what a refit reaches, and ruling a value out on it is
over-confident (measured: it ruled out kf = 1000 on the push, where the refit fits better than the estimate).
An end within the threshold changes nothing and costs nothing more; a ruled-out one costs RULE_OUT_STEPS + 1
refits (each 2 rollouts and k Jacobians of 2 n + 1 rollouts, k = refit_steps or RULE_OUT_REFIT_STEPS; the end's
own refit is already there when refit_steps > 0).  A bisection point whose rollout or refit fails keeps the whole
range (what cannot be measured is not ruled out).  The refit is local (from the linearised refit or the estimate),
so a loss it leaves above the threshold may still hide another basin that fits (the push's kf = 1: a full staged
fit reached x67.7, still far past it); and the loss need not rise monotonically towards the end: the bisection
finds one crossing, to 1 / 2^RULE_OUT_STEPS of the way in the constant's scale.

**Misfit.**  An estimate is only as good as the fit: a residual variance s^2_fit = 2 L / (N - p)
far above what the footage's noise allows, or a low silhouette IoU, means the model did not
reach the data (wrong basin, wrong model) and the intervals around that point are meaningless.
`fit_quality` compares s^2_fit with a noise floor (for images, `image_noise_floor`: 8-bit
rounding plus edges placed to within EDGE_FLOOR_PX) and the IoU with MIN_IOU; a fit beyond
either is reported "misfit: residual N x the noise floor" and its estimates' status is "misfit",
including those that sat on a bound: an estimate pushed to its bound by a fit that never reached the
footage says nothing about the bound ("undetermined" stays: the data cannot decide it either way).
"""
from __future__ import annotations

import math
import time
import warnings
from dataclasses import dataclass, field as dc_field
from typing import Callable, Optional, Sequence

import numpy as np

from ..core.errors import SimulationError, StabilityWarning
from .optim import as_params
from .uncertainty import PIXEL_8BIT_VARIANCE, FitReport, json_safe, residual_jacobian


def _decade_each_side(value):
    return (value / 10.0, value * 10.0)


# Prior ranges of the constants a scene file may leave at the library's defaults: value -> (lower, upper).
# Why these:
# * ke (penalty stiffness N/m): the default is a numerical choice, not a measurement; a decade either
#   side spans soft rubber mats to stiff floors at the time steps the simulator runs stably.
# * kd (contact damping N s/m per contact point): a decade below the default to 30 x above it.  What kd
#   means physically is the damping ratio zeta = kd / (2 sqrt(ke m_c)) of a contact point carrying mass m_c;
#   engines span zeta ~ 0 (elastic bounce) to 1 (MuJoCo's default solref dampratio: critically damped, no
#   bounce).  With the defaults (ke 1e4, kd 10) on a 1 kg box resting on 4 corners (m_c = m / 4), a decade
#   above kd reaches zeta = 1 only at ke itself; 30 x reaches zeta = 0.95 at ke's upper bound 1e5, i.e. a
#   critically damped contact anywhere in ke's range.  Further would not integrate: the explicit damping
#   needs kd dt / m_eff < 2, and a corner of a tumbling 1 kg box has an effective mass m_eff down to about
#   0.13 kg (the stability check's figure), so kd 300 already gives 1.2 at 64 substeps per 30 fps frame (the
#   stability pre-flight warns where a coarser step cannot follow).
#   (Under damping = "capped" the damping is at most the elastic force, so a point's restitution cannot
#   fall below 1 / sqrt(2) however large kd is: only "uncapped" damping uses the upper part of the range.)
# * kf (friction regularisation, N s/m per contact point): below a slip speed of about mu fn / kf the
#   friction is viscous; [1, 1000] spans "viscous up to walking speed" (1 N s/m on a 1 kg box: ~5 m/s)
#   to "Coulomb above 5 mm/s" (1000), the regime every other engine uses.
# * mu (Coulomb friction, when assumed): [0.1, 1], the range of dry contact between everyday materials.
# * radius (a soft or cloth object's vertices' contact radius [m], when its table leaves it at the library's
#   default r0: 0.01 soft, 0.005 cloth): [0, 2 r0].  The vertices touch that far outside the mesh.  0 is the
#   mesh itself as the surface: a measured shape, a meshed solid in another engine's footage (Warp's soft
#   particles, radius 0), a cloth of no thickness.  r0 is a numerical skin, not a measurement (it keeps fast
#   vertices from passing through a thin object within a step), so the range puts it in the middle: a skin as
#   thick again above it.  Linear, not log: 0 is a value, not a limit.  Measured on Warp's ball clip
#   (benchmarks/RESULTS.md, branch ball46): r0 where Warp has 0 made the 0.1 m ball touch as a 0.11 m one, and
#   the loss's minimum along lam sat -27 % from the truth.
PRIOR_RANGES = {
    "ke": _decade_each_side,
    "kd": lambda value: (value / 10.0, value * 30.0),
    "kf": lambda value: (1.0, 1000.0),
    "mu": lambda value: (0.1, 1.0),
    "radius": lambda value: (0.0, 2.0 * value),
}
ASSUMPTION_DOMINATED = "assumption-dominated"
MISFIT = "misfit"
# fit_quality: a fit is a misfit when s^2_fit exceeds MISFIT_RATIO times the noise floor (the residual's
# RMS about 3 times what the footage allows) or the mean silhouette IoU is below MIN_IOU
MISFIT_RATIO = 10.0
MIN_IOU = 0.9
# image_noise_floor: silhouette / colour edges placed to within this many pixels are as good as the
# footage allows (another renderer's antialiasing, a camera's blur)
EDGE_FLOOR_PX = 0.5
# bisections between the assumed value and a ruled-out range end (module docstring): the allowed end is then known to
# 1/16 of that distance in the constant's own scale (a factor 1.15 in kf over the decade 1-10), at 4 evaluations an end
RULE_OUT_STEPS = 4
# Levenberg-Marquardt iterations of the refit that judges an end where the sensitivity is linearised (refit_steps 0)
# and the loss with nothing refitted passes the threshold: a value is ruled out only on a refitted loss.  Why: on
# Warp's push the loss at ground.kf = 1000 is 7.1 x the estimate's with nothing refitted and stays past the
# threshold at the linearised refit, yet 3 LM iterations bring it to 0.90 x (benchmarks/RESULTS.md, branch ends44);
# 3 is where chord44's measurement found most of the refit's move (kf = 1: loss x78.9 at 3, x50.5 at 10)
RULE_OUT_REFIT_STEPS = 3


@dataclass
class AssumedConstant:
    """A model constant held fixed at `value` that the user did not give.

    name: how the report names it ("ground.kf"); value: the value the fit used; lower, upper:
    its prior range (same units, lower < upper; lower may be 0 for a length: a contact radius); write(c): sets it in the model (the next
    rollout uses c); reason: why that range (shown in the report)."""

    name: str
    value: float
    lower: float
    upper: float
    write: Callable[[float], None]
    reason: str = ""

    def __post_init__(self):
        for key in ("value", "lower", "upper"):
            v = getattr(self, key)
            if not (isinstance(v, (int, float, np.floating)) and math.isfinite(v)):
                raise ValueError(f"AssumedConstant {self.name!r}: {key} must be a finite number, got {v!r}")
        if not self.lower < self.upper:
            raise ValueError(f"AssumedConstant {self.name!r}: expected lower < upper, got [{self.lower}, {self.upper}]")
        if not callable(self.write):
            raise ValueError(f"AssumedConstant {self.name!r}: write must be a function write(value)")


# exp(s) - 1 overflows a float past this log-space shift
_LOG_FLOAT_MAX = math.log(np.finfo(np.float64).max)


def relative_change(s: float) -> float:
    """exp(s) - 1: a log-space shift as a relative change, +inf past the float range.  A linearised shift of
    hundreds of log units (an undetermined nuisance moving an estimate along a flat direction: measured on
    Newton's box drop with implicit damping) says only that the constant decides the answer; the report must
    still be written."""
    return math.expm1(s) if s < _LOG_FLOAT_MAX else math.inf


@dataclass
class Shift:
    """How far one estimate moves over one constant's range.

    shift_lower, shift_upper: the linearised refit's move (optimiser's coordinates: log units for
    log-space values) with the constant at its lower / upper end (None: that rollout failed);
    change_lower, change_upper: the same as a relative change of the value (log space) or in the
    value's units; half_width: the estimate's 95 % half-width in the same coordinates as the shift
    (None when undetermined); dominated: max |shift| > half_width; loss_ratio_lower, loss_ratio_upper: |r|^2 with
    the constant at that end over |r|^2 at the estimate, after the refit where the sensitivity refitted
    (`refit_steps`), else before it (an upper bound): an end whose ratio is far above 1 is one the footage
    itself rules out, so its move overstates what is unknown (None: not measured or the rollout failed)."""

    estimate: str
    constant: str
    lower: float
    upper: float
    value: float
    log_space: bool
    shift_lower: Optional[float]
    shift_upper: Optional[float]
    half_width: Optional[float]
    dominated: bool
    loss_ratio_lower: Optional[float] = None
    loss_ratio_upper: Optional[float] = None
    # where the footage rules out that side of the range (module docstring): the constant's last value within the
    # 95 % profile threshold (None: the end itself is) and the move there
    allowed_lower: Optional[float] = None
    allowed_upper: Optional[float] = None
    allowed_shift_lower: Optional[float] = None
    allowed_shift_upper: Optional[float] = None

    def moves(self, whole_range: bool = False) -> list:
        """[move at the lower side, at the upper side] over the range the footage allows (at a ruled-out side, the
        move at its allowed end), or over the whole prior range; a failed rollout's None left out."""
        lo = self.shift_lower if whole_range or self.allowed_lower is None else self.allowed_shift_lower
        hi = self.shift_upper if whole_range or self.allowed_upper is None else self.allowed_shift_upper
        return [m for m in (lo, hi) if m is not None]

    @property
    def largest(self) -> float:
        """The largest |move| over the range the footage allows."""
        return max((abs(s) for s in self.moves()), default=math.nan)

    def _change(self, s):
        if s is None:
            return "rollout failed"
        return f"{relative_change(s) * 100:+.3g} %" if self.log_space else f"{s:+.4g}"

    @property
    def text(self) -> str:
        hw = ("undetermined" if self.half_width is None else
              f"{relative_change(self.half_width) * 100:.3g} %" if self.log_space else f"{self.half_width:.4g}")
        return (f"{self.estimate} moves {self._change(self.shift_lower)} / {self._change(self.shift_upper)} over "
                f"{self.constant} in [{self.lower:.4g}, {self.upper:.4g}]" + self._allowed_text() +
                f" (assumed {self.value:.4g}; 95 % interval half-width {hw})")

    def cell(self, side) -> str:
        """The move at one side ("lower" / "upper") for a table: at a side the footage rules out, the move at the
        prior end and, after it, at the allowed end."""
        move, at = getattr(self, f"shift_{side}"), getattr(self, f"allowed_{side}")
        return self._change(move) + ("" if at is None else
                                     f" (ruled out; {self._change(getattr(self, f'allowed_shift_{side}'))} at {at:.4g})")

    def _allowed_text(self) -> str:
        if self.allowed_lower is None and self.allowed_upper is None:
            return ""
        lo, hi = (self.lower if self.allowed_lower is None else self.allowed_lower,
                  self.upper if self.allowed_upper is None else self.allowed_upper)
        return (f", {self._change(self.allowed_shift_lower if self.allowed_lower is not None else self.shift_lower)}"
                f" / {self._change(self.allowed_shift_upper if self.allowed_upper is not None else self.shift_upper)}"
                f" over the [{lo:.4g}, {hi:.4g}] the footage allows")

    def to_dict(self):
        rel = (lambda s: None if s is None else relative_change(s)) if self.log_space else (lambda s: s)
        return json_safe({"estimate": self.estimate, "constant": self.constant, "range": [self.lower, self.upper],
                      "assumed": self.value, "log_space": self.log_space, "shift_lower": self.shift_lower,
                      "shift_upper": self.shift_upper, "change_lower": rel(self.shift_lower),
                      "change_upper": rel(self.shift_upper), "half_width": self.half_width,
                      "dominated": self.dominated, "loss_ratio_lower": self.loss_ratio_lower,
                      "loss_ratio_upper": self.loss_ratio_upper, "allowed_lower": self.allowed_lower,
                      "allowed_upper": self.allowed_upper, "allowed_shift_lower": self.allowed_shift_lower,
                      "allowed_shift_upper": self.allowed_shift_upper,
                      "allowed_change_lower": rel(self.allowed_shift_lower),
                      "allowed_change_upper": rel(self.allowed_shift_upper), "text": self.text})


@dataclass
class RuledOut:
    """One side of an assumed constant's prior range that the footage rules out (module docstring).

    constant: its name; side: "lower" / "upper"; bound: that end of the prior range; allowed: the last value
    found within the 95 % profile threshold (the assumed value when none nearer the end is); outside: the nearest
    value found past it (the crossing lies between allowed and outside); loss_ratio: |r|^2 at the bound, refitted,
    over the estimate's; evaluations: bisection points (each a refit); refit_steps: the Levenberg-Marquardt
    iterations of each refit (`refit_steps`, or RULE_OUT_REFIT_STEPS where the sensitivity is linearised)."""

    constant: str
    side: str
    bound: float
    allowed: float
    outside: float
    loss_ratio: float
    evaluations: int
    refit_steps: int

    @property
    def text(self) -> str:
        word = "below" if self.side == "lower" else "above"
        return (f"{self.constant}: the footage rules out {self.constant} {word} {self.allowed:.4g} (the loss "
                f"refitted ({self.refit_steps} LM iterations) rises past the 95 % profile threshold "
                f"between {self.allowed:.4g} and {self.outside:.4g}; x{self.loss_ratio:.3g} at {self.bound:.4g}); "
                f"the interval with assumed constants takes the move at {self.allowed:.4g}")

    def to_dict(self):
        return json_safe(dict(self.__dict__, text=self.text))


@dataclass
class Sensitivity:
    """`assumption_sensitivity`'s result: one Shift per (estimate, constant), the constants and
    their reasons, and notes (failed rollouts)."""

    shifts: list
    constants: list
    notes: list = dc_field(default_factory=list)
    refit_steps: int = 0          # Levenberg-Marquardt iterations past the linearised refit (0: linearised only)
    ruled_out: list = dc_field(default_factory=list)    # RuledOut: range sides the footage rules out
    threshold: Optional[float] = None   # the loss rise (1/2 |r|^2) that rules a value out (None: not judged)
    # rollouts and CPU s of the whole sensitivity (not counting a Jacobian given to it) and of its rule-out part
    cost: dict = dc_field(default_factory=dict)

    @property
    def dominated(self) -> list:
        return [s for s in self.shifts if s.dominated]

    @property
    def preferred_ends(self) -> list:
        """[(constant, end value, loss ratio)]: range ends where the footage fits better than at the assumed value
        by more than the ties' relative rule (`ties.TIE_RTOL`: losses within 5 % are equally good), each constant
        once (its lowest ratio): the assumed value is not what the footage says."""
        from .ties import TIE_RTOL
        best = {}
        for s in self.shifts:
            for end, ratio in ((s.lower, s.loss_ratio_lower), (s.upper, s.loss_ratio_upper)):
                if ratio is not None and ratio < 1.0 - TIE_RTOL and ratio < best.get(s.constant, (0, 1.0))[1]:
                    best[s.constant] = (end, ratio)
        return [(c, end, ratio) for c, (end, ratio) in best.items()]

    def warnings(self) -> list:
        """One sentence per estimate an assumed constant moves by more than its interval, and per constant whose
        range end fits the footage better than its assumed value (`preferred_ends`)."""
        values = {c.name: c.value for c in self.constants}
        return [f"assumed constant dominates an estimate: {s.text}" for s in self.dominated] + \
            [f"the footage fits better with {c} = {end:.4g} than at the assumed {values[c]:.4g} (loss x{ratio:.3g}"
             + (")" if self.refit_steps else ", before refitting)") + ": state it, or fit it ([fit] contact_constants "
             "= \"nuisance\" or an [unknowns] entry)" for c, end, ratio in self.preferred_ends]

    def to_dict(self):
        return json_safe({"constants": [{"name": c.name, "assumed": c.value, "range": [c.lower, c.upper],
                                     "reason": c.reason} for c in self.constants],
                      "shifts": [s.to_dict() for s in self.shifts], "notes": self.notes,
                      "refit_steps": self.refit_steps, "ruled_out": [r.to_dict() for r in self.ruled_out],
                      "threshold": self.threshold, "cost": self.cost})

    def to_markdown(self, title="Sensitivity to assumed constants"):
        if not self.constants:
            return ""
        rows = [f"### {title}", "", "Constants the fit did not fit and the scene did not state, held at a default; "
                "each estimate's move with the constant at either end of its prior range (" +
                ("linearised refit" if not self.refit_steps else
                 f"refitted: the linearised refit, then up to {self.refit_steps} Levenberg-Marquardt "
                 "iterations") + "):", "",
                "| estimate | constant | range | assumed | move at lower end | move at upper end | 95 % half-width "
                "| dominates | loss at the ends / at the estimate |", "|---|---|---|---|---|---|---|---|---|"]
        for s in self.shifts:
            hw = ("-" if s.half_width is None else
                  f"{relative_change(s.half_width) * 100:.3g} %" if s.log_space else f"{s.half_width:.4g}")
            rows.append(f"| {s.estimate} | {s.constant} | [{s.lower:.4g}, {s.upper:.4g}] | {s.value:.4g} | "
                        f"{s.cell('lower')} | {s.cell('upper')} | {hw} | "
                        f"{'**yes**' if s.dominated else 'no'} | {_ratio(s.loss_ratio_lower)} / "
                        f"{_ratio(s.loss_ratio_upper)} |")
        rows += ["", "(loss at an end: with the constant there, " + ("after the refit" if self.refit_steps else
                 "before refitting, an upper bound") + "; far above 1, the footage itself rules that end out" +
                 ("" if self.threshold is None else
                  f": where the loss, refitted, rises by more than the profile intervals' 95 % threshold "
                  f"({self.threshold:.3g} in 1/2 |r|^2) the move is taken at the last value within it, below") + ")"]
        rows += [""] + [f"- {c.name} in [{c.lower:.4g}, {c.upper:.4g}]: {c.reason}" for c in self.constants if c.reason]
        rows += [f"- {r.text}" for r in self.ruled_out] + [f"- {n}" for n in self.notes]
        if self.cost.get("rollouts"):
            rows += [f"- cost: {self.cost['rollouts']} rollouts, {self.cost['cpu_s']:.3g} CPU s, of which judging and "
                     f"bisecting the range ends: {self.cost['rule_out_rollouts']}, {self.cost['rule_out_cpu_s']:.3g} s"]
        return "\n".join(rows) + "\n"

    def __str__(self):
        return "\n".join([s.text + ("  ** dominates **" if s.dominated else "") for s in self.shifts] +
                         [r.text for r in self.ruled_out] + self.notes)


def _ratio(x) -> str:
    return "-" if x is None else f"{x:.3g}"


def _check_refit_steps(refit_steps) -> int:
    if isinstance(refit_steps, bool) or not isinstance(refit_steps, (int, np.integer)) or refit_steps < 0:
        raise ValueError(f"refit_steps: expected an integer >= 0, got {refit_steps!r}")
    return int(refit_steps)


def _check_rule_out(rule_out, report) -> Optional[float]:
    """`rule_out_threshold(report)` when rule_out, else None; a clear error for a non-bool."""
    if not isinstance(rule_out, (bool, np.bool_)):
        raise ValueError(f"rule_out: expected True or False, got {rule_out!r}")
    return rule_out_threshold(report) if rule_out else None


def _half_width(e) -> Optional[float]:
    """95 % half-width of an Estimate in the optimiser's coordinates (None when undetermined)."""
    if e.lower95 is None or e.upper95 is None:
        return None
    if e.log_space:
        return 0.5 * (math.log(e.upper95) - math.log(e.lower95))
    return 0.5 * (e.upper95 - e.lower95)


def assumption_sensitivity(residuals: Callable[[], np.ndarray], params: Sequence, assumed: Sequence[AssumedConstant],
                           report: FitReport, jacobian=None, fd_step: Optional[float] = None,
                           mark: bool = True, refit_steps: int = 0, rule_out: bool = True) -> Sensitivity:
    """How far each estimate of `report` moves over each assumed constant's prior range (module
    docstring); call at the estimate (the Params hold it, as after `fit_report`).

    residuals, params: as given to `fit_report`.  assumed: `AssumedConstant`s (each is written
    back to its value afterwards).  report: the FitReport at these values (its intervals).
    jacobian: (J, r0) if already computed (else 2 p rollouts).  mark: set the status of every
    "ok" estimate that a constant dominates to "assumption-dominated" and add a note to the
    report.  A rollout that blows up at a range end is noted and that end left out; one past the
    simulator's stability limit (a StabilityWarning, e.g. kf = 1000 at a coarse dt) is noted as doubtful.
    refit_steps: Levenberg-Marquardt iterations past the linearised refit at each end (`_refit_at_end`: a fresh
    finite-difference Jacobian each, 2 n + 1 forward rollouts or more); 0 is the linearised refit alone.
    rule_out: judge each end against the 95 % profile threshold and, where the footage rules it out, use the move
    at the allowed end instead (module docstring, "Range ends the footage rules out"; `Sensitivity.ruled_out`);
    False: the whole prior range, as before.
    """
    params = as_params(params)
    refit_steps = _check_refit_steps(refit_steps)
    assumed = list(assumed)
    if not all(isinstance(c, AssumedConstant) for c in assumed):
        raise ValueError(f"assumed: expected a list of AssumedConstant, got {assumed!r}")
    if not isinstance(report, FitReport):
        raise ValueError(f"report: expected the FitReport at the estimate, got {type(report).__name__}")
    if not assumed:
        return Sensitivity([], [])
    if jacobian is None:
        J, r0 = residual_jacobian(residuals, params, fd_step)
    else:
        J, r0 = (np.asarray(a, dtype=np.float64) for a in jacobian)
    r0 = np.ravel(r0)
    if J.shape[1] != len(report.estimates):
        raise ValueError(f"report: {len(report.estimates)} estimates for {J.shape[1]} parameter coordinates")
    notes, shifts, ruled, cost = [], [], [], {}
    threshold = _check_rule_out(rule_out, report)
    _add_shifts(residuals, J, r0, assumed, report.estimates, range(len(report.estimates)), shifts, notes,
                params, refit_steps, threshold, ruled, cost)
    sens = Sensitivity(shifts, assumed, notes, refit_steps, ruled, threshold, cost)
    if mark:
        _mark_dominated(report, sens, lambda s: f"the interval assumes {s.constant} = {s.value:.4g}")
    return sens


def _mark_dominated(report, sens, why):
    """Mark each estimate an assumed constant moves past its interval "assumption-dominated" (an "ok" one) and
    say why in the report's notes (`why(shift)`)."""
    for s in sens.dominated:
        e = report[s.estimate]
        if e.status == "ok":
            e.status = ASSUMPTION_DOMINATED
        report.notes.append(f"{s.text}: {why(s)}")


def _end_residuals(residuals, c, value, r0, notes):
    """The residuals with constant `c` written at `value` (a range end, or a point between it and the assumed
    value), or None (a failed or non-finite rollout: noted).  A StabilityWarning there is noted too."""
    c.write(float(value))
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", StabilityWarning)
            r = np.asarray(np.ravel(residuals()), dtype=np.float64)
    except SimulationError as exc:
        r, caught = None, []
        notes.append(f"{c.name} = {value:.4g}: the rollout failed ({exc})")
    if any(issubclass(w.category, StabilityWarning) for w in caught):
        # the time step is past the explicit limit there: that end's move is partly integration error
        notes.append(f"{c.name} = {value:.4g}: past the simulator's stability limit at this "
                     "time step (StabilityWarning), so the move at this end is doubtful")
    for w in caught:           # other warnings go on to the caller
        if not issubclass(w.category, StabilityWarning):
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    if r is not None and (r.shape != r0.shape or not np.all(np.isfinite(r))):
        notes.append(f"{c.name} = {value:.4g}: the residuals are not finite")
        r = None
    return r


def _add_shifts(residuals, J, r0, constants, estimates, columns, shifts, notes, refit_params=None, refit_steps=0,
                threshold=None, ruled_out=None, cost=None):
    """Append a Shift per (estimate, constant): the linearised refit of the coordinates `columns`
    of J (the estimates `estimates[i]` for i in columns) with each constant at its range ends, carried on by
    `refit_steps` Levenberg-Marquardt iterations (`_refit_at_end`; refit_params: the Params whose packed
    coordinates are `columns`).  threshold: the loss rise (1/2 |r|^2) past which an end is ruled out and the
    allowed end bisected for (`_rule_out`, module docstring; None: not judged); ruled_out: the list each
    RuledOut is appended to; cost: a dict whose "rollouts", "cpu_s" (all) and "rule_out_rollouts",
    "rule_out_cpu_s" (the judging refits and bisections) are added to."""
    cost = {} if cost is None else cost
    for key in ("rollouts", "cpu_s", "rule_out_rollouts", "rule_out_cpu_s"):
        cost.setdefault(key, 0)
    count, cpu0 = [0], time.process_time()
    residuals_in = residuals

    def residuals():
        count[0] += 1
        return residuals_in()

    depth = [0]

    def charged(fn, *args):
        """fn(*args), its rollouts and CPU s added to the rule-out's cost (once: a bisection's refits are in it)."""
        n, t = count[0], time.process_time()
        depth[0] += 1
        try:
            return fn(*args)
        finally:
            depth[0] -= 1
            if depth[0] == 0:
                cost["rule_out_rollouts"] += count[0] - n
                cost["rule_out_cpu_s"] += time.process_time() - t

    columns = list(columns)
    Jc = J[:, columns]
    pinv = np.linalg.pinv(Jc.T @ Jc, rcond=1e-12)
    loss0 = float(r0 @ r0)

    def at(c, value, bisecting=False):
        """(move, |r|^2 reported, the judged |r|^2) with c at value (None: the rollout failed).  Refitted
        (`refit_steps`): the refit's move and |r|^2 all three.  Linearised: the linearised move and |r|^2 with
        nothing refitted, judged where that passes the threshold by a refit of RULE_OUT_REFIT_STEPS (module
        docstring), whose move a bisection point (`bisecting`) reports."""
        r = _end_residuals(residuals, c, value, r0, notes)
        if r is None:
            return None, None, None
        move, loss = -(pinv @ (Jc.T @ (r - r0))), float(r @ r)
        if refit_steps > 0:
            move, refitted = _refit_at_end(residuals, refit_params, r, move, refit_steps)
            return move, refitted, refitted
        if threshold is None or 0.5 * (loss - loss0) <= threshold:
            return move, loss, loss
        refit_move, judged = charged(_refit_at_end, residuals, refit_params, r, move, RULE_OUT_REFIT_STEPS)
        return (refit_move if bisecting else move), loss, judged

    for c in constants:
        moves, ratios, allowed = {}, {}, {}
        try:
            for end in ("lower", "upper"):
                moves[end], loss, judged = at(c, getattr(c, end))
                ratios[end] = None if loss is None or loss0 <= 0.0 else loss / loss0
                out = None if threshold is None or judged is None or 0.5 * (judged - loss0) <= threshold else \
                    charged(_rule_out, c, end, lambda v, c=c: at(c, v, True), loss0, judged, threshold,
                            refit_steps or RULE_OUT_REFIT_STEPS)
                allowed[end] = None if out is None else out[1]
                if out is not None:
                    ruled_out.append(out[0])
        finally:
            c.write(float(c.value))
        for k, i in enumerate(columns):
            e = estimates[i]
            lo = None if moves["lower"] is None else float(moves["lower"][k])
            hi = None if moves["upper"] is None else float(moves["upper"][k])
            at_lo, at_hi = ((None, None) if allowed[end] is None else (allowed[end][0], float(allowed[end][1][k]))
                            for end in ("lower", "upper"))
            shift = Shift(e.name, c.name, c.lower, c.upper, c.value, e.log_space, lo, hi, _half_width(e), False,
                          ratios["lower"], ratios["upper"], at_lo[0], at_hi[0], at_lo[1], at_hi[1])
            shift.dominated = shift.half_width is not None and max([0.0] + [abs(m) for m in shift.moves()]) > \
                shift.half_width
            shifts.append(shift)
    cost["rollouts"] += count[0]
    cost["cpu_s"] += time.process_time() - cpu0


def _rule_out(c, end, at, loss0, judged, threshold, refit_steps):
    """(RuledOut, (allowed value, move there)) for the side `end` of constant `c`'s range, whose judged |r|^2
    `judged` rises over the estimate's `loss0` by more than `threshold` (1/2 |r|^2): RULE_OUT_STEPS bisections
    between the assumed value (rise 0, move 0) and the end, in log c for a positive range, else in c
    (`at(value)` -> (move, |r|^2, judged |r|^2)).  None where a bisection point's rollout fails: what cannot be
    measured is not ruled out."""
    bound = float(getattr(c, end))
    log = c.lower > 0.0 and c.value > 0.0
    to_s, to_c = (math.log, math.exp) if log else (float, float)
    s_in, s_out, move_in = to_s(c.value), to_s(bound), None
    for _ in range(RULE_OUT_STEPS):
        mid = 0.5 * (s_in + s_out)
        move, _, loss = at(to_c(mid))
        if loss is None:
            return None
        if 0.5 * (loss - loss0) > threshold:
            s_out = mid
        else:
            s_in, move_in = mid, move
    allowed = to_c(s_in)
    if move_in is None:        # no point nearer the end than the assumed value is allowed: the estimate's own
        move_in = np.zeros_like(np.asarray(move, dtype=np.float64))
        allowed = float(c.value)
    return (RuledOut(c.name, end, bound, allowed, to_c(s_out), judged / loss0 if loss0 > 0 else math.inf,
                     RULE_OUT_STEPS, refit_steps), (allowed, np.asarray(move_in, dtype=np.float64)))


def rule_out_threshold(report: FitReport) -> float:
    """The loss rise (1/2 |r|^2 units) over the estimate's past which the footage rules a constant's value out
    (module docstring): the profile intervals' 95 % threshold (`profile.loss_rise_threshold`), with the largest
    std-over-iid-std ratio among the report's values (`profile.std_ratio`): a constant has no robust std of its
    own, and the largest ratio is the least that rules out (the widest allowed range)."""
    from .profile import loss_rise_threshold, std_ratio
    ratio = max([1.0] + [std_ratio(report, i) for i in range(len(report.estimates))])
    return loss_rise_threshold(report, ratio)[0]


def _refit_at_end(residuals, refit_params, r_end, move, steps):
    """The refit of `refit_params` (the Params whose packed coordinates are the shifted columns) with a constant at
    a range end (already written): `levenberg_marquardt.least_squares` for `steps` iterations (each a fresh
    central-difference Jacobian, 2 n + 1 forward rollouts or more), from the linearised refit `move` where that
    lowers |r|^2 below the estimate's `r_end` there, else from the estimate.  Why: the linearised refit is exact
    only where the residuals are linear in the estimate over the move; a constant that changes how a contact
    behaves (friction viscous up to walking speed at a small kf, a contact skin) moves the data's preferred value
    non-linearly, and one step can understate the move manyfold (benchmarks/RESULTS.md, the Warp push clip's
    mass over ground.kf: +3.7 % linearised against +47 % refitted).  A rollout that fails on the way leaves the
    linearised move (and the loss None).  Returns (move in packed coordinates, |r|^2 there); the Params are
    restored."""
    from .levenberg_marquardt import least_squares
    from .params import pack, unpack
    x0 = pack(refit_params).astype(np.float64)
    try:
        unpack(refit_params, x0 + move)
        r = np.asarray(np.ravel(residuals()), dtype=np.float64)
        if not (np.all(np.isfinite(r)) and float(r @ r) < float(r_end @ r_end)):
            unpack(refit_params, x0)
        least_squares(residuals, refit_params, iters=steps, fd_step=1e-3, log_every=0, printer=None)
        r = np.asarray(np.ravel(residuals()), dtype=np.float64)        # where it ended (LM's last record may not be)
        return pack(refit_params).astype(np.float64) - x0, float(r @ r)
    except SimulationError:
        return np.asarray(move, dtype=np.float64), None
    finally:
        unpack(refit_params, x0)


def nuisance_sensitivity(residuals: Callable[[], np.ndarray], params: Sequence, nuisance: Sequence[str],
                         report: FitReport, jacobian=None, fd_step: Optional[float] = None,
                         reasons: Optional[dict] = None, mark: bool = True, refit_steps: int = 0,
                         rule_out: bool = True) -> Sensitivity:
    """The nuisance constants the data did not pin down, profiled over their ranges.

    A nuisance constant (a contact constant nobody measured, fitted jointly with the values of
    interest within its prior range: its Param's bounds) whose estimate is determined is already
    in the intervals of the others: the joint Laplace covariance's marginal.  One the footage
    cannot determine ("undetermined", "at bound", or a 95 % interval cut at a bound of its range)
    has no Gaussian marginal; for each of those, this sets it to either end of its Param's bounds
    and refits the values of interest linearly (the other columns of J, nuisance ones included),
    as `assumption_sensitivity` does for an assumed constant.

    nuisance: names of Params in `params` fitted as nuisance.  reasons: {name: why that range}.  refit_steps,
    rule_out: as in `assumption_sensitivity` (a bound the footage rules out, for a nuisance constant it leaves
    undetermined near its estimate, is judged the same way).
    Returns a Sensitivity over the estimates that are not nuisance (empty when every nuisance is
    determined); with mark, those that move by more than their interval are "assumption-dominated"."""
    params = as_params(params)
    refit_steps = _check_refit_steps(refit_steps)
    names = [p.name for p in params]
    missing = [n for n in nuisance if n not in names]
    if missing:
        raise ValueError(f"nuisance: {missing} are not among the params {names}")
    sizes = [int(np.size(p.value())) for p in params]       # optimiser coordinates per Param (a camera: 6)
    if len(report.estimates) != sum(sizes):
        raise ValueError(f"report: {len(report.estimates)} estimates for {sum(sizes)} parameter coordinates")
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(int)
    cols = {i: list(range(starts[i], starts[i] + sizes[i])) for i in range(len(params))}
    for n in nuisance:
        if sizes[names.index(n)] != 1:
            raise ValueError(f"nuisance: {n!r} must be a scalar Param, it has {sizes[names.index(n)]} values")

    def loose(i):
        """Undetermined, on a bound, or with its 95 % interval cut at a bound: no Gaussian marginal."""
        p, e = params[i], report.estimates[starts[i]]
        if p.lower is None or p.upper is None:
            return False
        if e.status in ("undetermined", "at bound") or e.lower95 is None or e.upper95 is None:
            return True
        lo, hi = float(np.min(p.lower)), float(np.max(p.upper))
        return e.lower95 <= lo * (1 + 1e-6) or e.upper95 >= hi * (1 - 1e-6)

    free = [i for i, p in enumerate(params) if p.name in nuisance and loose(i)]
    threshold = _check_rule_out(rule_out, report)
    if not free:
        return Sensitivity([], [])
    if jacobian is None:
        J, r0 = residual_jacobian(residuals, params, fd_step)
    else:
        J, r0 = (np.asarray(a, dtype=np.float64) for a in jacobian)
    r0 = np.ravel(r0)
    notes, shifts, constants, ruled, cost = [], [], [], [], {}
    for i in free:
        p = params[i]
        value = float(np.ravel(p.value())[0])
        c = AssumedConstant(p.name, value, float(np.min(p.lower)), float(np.max(p.upper)),
                            lambda v, p=p: p.write(np.array([v])), (reasons or {}).get(p.name, ""))
        constants.append(c)
        # refit every other coordinate (values of interest, camera, determined nuisance ones) but the
        # nuisance constants that are free too (each is profiled on its own)
        refit = [k for j in range(len(params)) if j != i and j not in free for k in cols[j]]
        before = len(shifts)
        _add_shifts(residuals, J, r0, [c], report.estimates, refit, shifts, notes,
                    [params[j] for j in range(len(params)) if j != i and j not in free], refit_steps, threshold, ruled,
                    cost)
        shifts[before:] = [s for s in shifts[before:] if s.estimate not in nuisance]
    sens = Sensitivity(shifts, constants, notes, refit_steps, ruled, threshold, cost)
    if mark:
        _mark_dominated(report, sens, lambda s: f"{s.constant} is a nuisance constant the footage does not determine")
    return sens


def intervals_with_assumptions(report: FitReport, *sensitivities: Sensitivity, whole_range: bool = False) -> dict:
    """{estimate name: (lower, upper)}: each 95 % interval of `report` widened to include what the
    constants of `sensitivities` (assumed ones, undetermined nuisance ones) can do over their
    ranges: in the optimiser's coordinates, the lower end moves by the sum over constants of the
    most negative shift (0 if none is), the upper end by the sum of the most positive: a
    worst-case (linear) sum, since nothing says the constants are independent.  Over each constant's range the
    footage allows (`Shift.moves`: at a side it rules out, the move at the allowed end; module docstring), or with
    whole_range over the whole prior range.  An undetermined estimate keeps None.  The statistical interval (ci95) stays as it is beside this one."""
    out = {}
    for e in report.estimates:
        if e.lower95 is None or e.upper95 is None:
            out[e.name] = None
            continue
        down = up = 0.0
        for sens in sensitivities:
            for s in sens.shifts:
                if s.estimate != e.name:
                    continue
                moves = s.moves(whole_range)
                down += min([0.0] + moves)
                up += max([0.0] + moves)
        if e.log_space:
            out[e.name] = (float(e.lower95 * math.exp(down)), float(e.upper95 * (1.0 + relative_change(up))))
        else:
            out[e.name] = (float(e.lower95 + down), float(e.upper95 + up))
    return out



@dataclass
class FitQuality:
    """`fit_quality`'s verdict: ratio = s^2_fit / noise_floor, iou (None when not given), misfit and
    the sentence saying why."""

    ratio: float
    noise_floor: float
    iou: Optional[float]
    misfit: bool
    text: str

    def to_dict(self):
        return json_safe(self.__dict__)


def image_noise_floor(target, edge_px: float = EDGE_FLOOR_PX) -> float:
    """Per-value residual variance a near-perfect fit of images `target` (K, H, W[, C], values in
    [0, 1]) leaves: 8-bit rounding (PIXEL_8BIT_VARIANCE) plus every edge placed within `edge_px`
    pixels (a straight edge displaced by d px changes one pixel per edge pixel by about d, so the
    sum of squares is d^2 times the edge length; the length is the images' total variation)."""
    a = np.asarray(target, dtype=np.float64)
    if a.ndim == 3:
        a = a[..., None]
    if a.ndim != 4 or a.size == 0:
        raise ValueError(f"target: expected images (K, H, W) or (K, H, W, C), got shape {np.shape(target)}")
    if not (isinstance(edge_px, (int, float)) and edge_px >= 0 and math.isfinite(edge_px)):
        raise ValueError(f"edge_px: expected a finite number of pixels >= 0, got {edge_px!r}")
    tv = np.abs(np.diff(a, axis=1)).sum() + np.abs(np.diff(a, axis=2)).sum()
    return PIXEL_8BIT_VARIANCE + edge_px ** 2 * float(tv) / a.size


def fit_quality(report: FitReport, noise_floor: Optional[float] = None, iou: Optional[float] = None,
                max_ratio: float = MISFIT_RATIO, min_iou: float = MIN_IOU, mark: bool = True,
                iou_frames: Optional[int] = None) -> FitQuality:
    """Whether the fit reached what the data allow (module docstring, "Misfit").

    noise_floor: the residual variance per value the footage allows (default: the report's
    floor); iou: mean silhouette IoU of the fit, or None (iou_frames: the number of leading frames it is the
    mean over, when not the whole clip: said in the text).  A fit with s^2_fit > max_ratio *
    noise_floor or iou < min_iou is a misfit; with mark, every estimate whose status is "ok" or
    "assumption-dominated" or "at bound" becomes "misfit" and the report gets a note."""
    floor = report.noise_floor if noise_floor is None else noise_floor
    if not (isinstance(floor, (int, float, np.floating)) and floor > 0 and math.isfinite(floor)):
        raise ValueError(f"noise_floor: expected a positive variance per residual value, got {floor!r}")
    if iou is not None and not (isinstance(iou, (int, float, np.floating)) and 0 <= iou <= 1):
        raise ValueError(f"iou: expected a number in [0, 1] or None, got {iou!r}")
    s2 = report.s2_fit if math.isfinite(report.s2_fit) else 2.0 * report.loss / max(report.residual_count, 1)
    ratio = float(s2 / floor)
    reasons = []
    iou_name = "silhouette IoU" + ("" if iou_frames is None else f" over the {iou_frames} fitted frames")
    if ratio > max_ratio:
        reasons.append(f"residual {ratio:.3g} x the noise floor (s^2 {s2:.3g} against {floor:.3g}; at most "
                       f"{max_ratio:g} x expected)")
    if iou is not None and iou < min_iou:
        reasons.append(f"{iou_name} {iou:.3f} < {min_iou:g}")
    misfit = bool(reasons)
    text = ("misfit: " + "; ".join(reasons) + ": the model did not reach the data (another basin, or a model "
            "that cannot follow the footage); the estimates and intervals describe that point only") if misfit \
        else f"residual {ratio:.3g} x the noise floor" + ("" if iou is None else f", {iou_name} {iou:.3f}")
    if mark and misfit:
        for e in report.estimates:
            if e.status in ("ok", ASSUMPTION_DOMINATED, "at bound"):
                e.status = MISFIT
        report.notes.append(text)
    return FitQuality(ratio, float(floor), None if iou is None else float(iou), misfit, text)
