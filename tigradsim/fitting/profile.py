"""Profile-likelihood intervals: how far a value can move before the fit gets worse, the other
unknowns refitted at every step (what the Laplace interval of `fit_report` cannot see).

Why: `fit_report`'s interval is the local curvature of the loss at the estimate (Gauss-Newton,
s^2 (J^T J)^-1).  Where the loss is flat far beyond that curvature (an MPM fluid's plastic viscosity
and bulk modulus trade against its yield stress along a long valley: a point with 20x lower
viscosity fits the PAC-NeRF Bingham clip as well as the truth) the interval is narrow, excludes
the truth, and nothing in the report says "undetermined".  The profile walks the valley instead.

For each profiled scalar parameter theta_i, on each side of the estimate, in the optimiser's
coordinate u (log(value) for a log-space Param):

* step outward: the first point at the Laplace half-width (q std_i, the report's own), then
  geometric steps (ratio >= 2) chosen so that the `points`-th lands on the prior bound;
* at each point hold theta_i there and refit the other unknowns briefly (`iters` BFGS steps on
  the Tape loss, warm-started from the previous point; Levenberg-Marquardt on the residuals when
  there is no Tape loss), keep the lowest loss seen;
* stop when the loss rise over the estimate's passes the threshold (the interval's end is
  interpolated in sqrt(rise), linear in u for a quadratic valley), or at the bound.

The threshold is the one the report's intervals already imply, not a second calibration:

* the Laplace interval's: near the minimum L = 1/2 |r|^2 rises along the profile by
  dL = s^2 d^2 / (2 std_iid_i^2) (d the offset in u), so the report's 95 % end d = q std_i
  (q: 1.96, or Student's t with the cluster-robust covariance; std_i: max(iid, robust)) is where
  dL = 1/2 s^2 (q std_i / std_iid_i)^2; for iid residuals that is 1/2 s^2 3.84, the
  likelihood-ratio test `ties.py` ties minima with (tie_chi2);
* and `ties.py`'s relative rule: a fit whose loss is within tie_rtol (5 %) of the best is as
  good as the best (footage residuals are mostly model error, so identify and the model
  comparison call such fits equally good; the profile calls them inside the interval).

threshold_i = max of the two.  A side that reaches the prior bound below the threshold leaves
theta_i undetermined there: the report marks it "undetermined" with the bound.  The interval
reported is the union of the Laplace one and the profile's.

Units: with a Tape loss the profile measures that loss; it is taken as a constant multiple of
1/2 |r|^2 (a scene's is 2 / N times it), the multiple measured at the estimate.

Cost: per profiled value at most 2 `points` refits of `iters` + 1 rollouts with gradient.

profile = "auto" (`AutoProfile`): profile only the values whose Laplace interval is suspect, and, with
check (scene files: [fit] profile_check = true), check the others at one point a side.  Why: a full
profile costs 2 `points` refits per value (on an MPM fit at PAC-NeRF's size as much again as the fit),
so profiling every value by default does not fit a 15-CPU-minute budget, yet the values a user cannot
trust are the ones Laplace gets wrong.  Per value:

* profiled in full where Laplace cannot bound it (infinite std) or its 95 % interval is wider than
  the estimate itself (relative width > AUTO_RELATIVE_WIDTH = 1; in log coordinates a range over a
  factor ~2.7): across such a range the linearisation Laplace rests on is least trustworthy, and
  these are the weakly determined values (an MPM fluid's bulk modulus from masks);
* with check, checked elsewhere (else left to Laplace): the first profile point of each side, at
  the Laplace end, other unknowns refitted.  Under the quadratic model Laplace assumes, the loss
  rises there by the Laplace threshold.  Where the rise there is at least AUTO_CHECK_RATIO = 1/4 of
  the threshold (the larger of the Laplace and tie parts, the full profile's), the side ends where
  the quadratic through the estimate and that point crosses the threshold, at most twice as far
  (reason "checked": on a quadratic valley the full profile's end; the Laplace end when the
  threshold is Laplace's); otherwise the valley is longer than one point can tell (the curved,
  saturating valleys Laplace misses at any width, or a tie threshold far above Laplace's) and the
  side walks on as a full profile.  A refit of `iters` steps can
  only overstate the rise, so a failed check is real; a passed one may hide a valley the refit did
  not find.  Cost: 2 refits a checked value (an MPM fit with a slow rollout cannot always afford
  them: the PAC-NeRF plasticine clip's 3 checks would cost more than its fit).
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field as dc_field
from typing import Callable, Optional, Sequence, Tuple

import numpy as np

from ..core.errors import GradientError, SimulationError
from .optim import BFGS, least_squares, objective_function, optimize, pack, unpack
from .ties import TIE_RTOL
from .uncertainty import Direction, Z95, _coordinate_info, coordinate_names, json_safe, t95

__all__ = ["ProfileSide", "Profile", "AutoProfile", "profile_threshold", "loss_rise_threshold", "profile_intervals", "apply_profiles",
           "profile_targets", "check_profile_settings", "suspect_reason"]

PROFILE_POINTS = 5        # points per side at most (the last one on the bound)
PROFILE_ITERS = 3         # BFGS steps of the other unknowns at each point
AUTO = "auto"
AUTO_RELATIVE_WIDTH = 1.0  # "auto": a Laplace 95 % interval wider than the estimate is profiled in full
AUTO_CHECK_RATIO = 0.25    # "auto": a checked side whose first rise is below this share of the threshold walks on


@dataclass(frozen=True)
class AutoProfile:
    """profile = "auto" (module docstring): of `candidates` (names of scalar values; None: every
    scalar Param) profile in full those whose Laplace interval is suspect (`suspect_reason`); with
    `check`, check the others at one point a side and walk on where the check fails (else leave them
    to Laplace)."""

    candidates: Optional[Tuple[str, ...]] = None
    check: bool = False


@dataclass
class ProfileSide:
    """One side of a profile.  end: where the interval ends (the Param's units); reason:
    "threshold" (the loss rose past it: end interpolated), "bound" (reached the prior bound below
    the threshold: undetermined there), "at bound" (the estimate sits on the bound), "no bound"
    (points spent with no bound and still below), "failed" (a rollout blew up: end is the last
    point inside), "time budget", "checked" (profile = "auto" with checks: the first point, at the Laplace
    end, rose by at least 1/4 of the threshold; end: where the quadratic through it crosses the threshold)."""

    end: float
    reason: str


@dataclass
class Profile:
    """The profile of one scalar value.  points: [(value, loss rise over the estimate's, in
    1/2 |r|^2 units)] in the order evaluated; threshold: the rise that ends the interval (same
    units); laplace: the report's 95 % interval before the union; lower, upper: ProfileSide."""

    name: str
    value: float
    log_space: bool
    threshold: float
    threshold_laplace: float
    threshold_tie: float
    laplace: tuple
    lower: ProfileSide
    upper: ProfileSide
    points: list = dc_field(default_factory=list)
    rollouts: int = 0
    seconds: float = 0.0
    better: Optional[tuple] = None      # (value, rise < 0) of a point that fitted better than the estimate
    better_values: Optional[dict] = None  # every scalar value at that point ({name: value}, the others refitted)
    mode: str = "full"                  # "full", or "check" (profile = "auto": one point a side unless it fails)
    why: str = ""                       # profile = "auto": why this value was profiled in full / only checked

    @property
    def undetermined(self) -> bool:
        return "bound" in (self.lower.reason, self.upper.reason)

    @property
    def interval(self) -> tuple:
        """The union of the Laplace interval and the profile's."""
        lo = [v for v in (self.laplace[0], self.lower.end) if v is not None]
        hi = [v for v in (self.laplace[1], self.upper.end) if v is not None]
        return (min(lo), max(hi))

    def sentence(self) -> str:
        bounds = [s.end for s in (self.lower, self.upper) if s.reason == "bound"]
        open_ = [f"past {s.end:.4g} the {'rollouts blew up' if s.reason == 'failed' else 'time budget ran out'}"
                 f" (the interval may reach further)" for s in (self.lower, self.upper)
                 if s.reason in ("failed", "time budget")]
        if not bounds:
            return (f"{self.name}: profile interval [{self.lower.end:.4g}, {self.upper.end:.4g}] "
                    f"(loss rise threshold {self.threshold:.3g})" + "".join(f"; {o}" for o in open_))
        side = " and ".join(f"{b:.4g}" for b in bounds)
        return (f"{self.name} is not determined by the data: with the other unknowns refitted, the loss stays "
                f"within the threshold ({self.threshold:.3g}) out to the prior bound {side}"
                + "".join(f"; {o}" for o in open_))

    def to_dict(self):
        return json_safe({"name": self.name, "value": self.value, "log_space": self.log_space,
                          "threshold": self.threshold, "threshold_laplace": self.threshold_laplace,
                          "threshold_tie": self.threshold_tie, "laplace": list(self.laplace),
                          "lower": self.lower.end, "lower_reason": self.lower.reason,
                          "upper": self.upper.end, "upper_reason": self.upper.reason,
                          "interval": list(self.interval), "undetermined": self.undetermined,
                          "points": [list(p) for p in self.points], "rollouts": self.rollouts,
                          "seconds": self.seconds, "better": self.better,
                          "better_values": self.better_values, "mode": self.mode, "why": self.why})


def profile_threshold(report, index: int, tie_rtol: float = TIE_RTOL) -> tuple:
    """(threshold, laplace part, tie part) of the loss rise (1/2 |r|^2 units) that ends the profile
    interval of the report's `index`-th value (module docstring)."""
    return loss_rise_threshold(report, std_ratio(report, index), tie_rtol)


def std_ratio(report, index: int) -> float:
    """The report's `index`-th std over its iid std, at least 1 (1 without an iid std): how much the
    cluster-robust covariance widens that value's interval (module docstring, the Laplace part)."""
    e = report.estimates[index]
    if report.std_iid is not None:
        s_iid = float(report.std_iid[index])
        if math.isfinite(e.std) and math.isfinite(s_iid) and s_iid > 0:
            return max(e.std / s_iid, 1.0)
    return 1.0


def loss_rise_threshold(report, ratio: float = 1.0, tie_rtol: float = TIE_RTOL) -> tuple:
    """(threshold, laplace part, tie part): the loss rise (1/2 |r|^2 units) over the estimate's past which a
    value is outside the 95 % profile interval (module docstring), for a value whose std is `ratio` times its
    iid std (`std_ratio`).  The one definition: the profile intervals and the assumed constants' ruled-out
    range ends (`sensitivity.rule_out_threshold`) both use it."""
    q = t95(report.clusters - 1) if report.std_robust is not None else Z95
    laplace = 0.5 * report.s2 * (q * ratio) ** 2
    tie = float(tie_rtol) * abs(report.loss)
    return max(laplace, tie), laplace, tie


def profile_targets(profile, params) -> list:
    """The names of the scalar values to profile: `profile` True (every scalar Param), a name or a
    list of names (each a scalar Param's), "auto" or an AutoProfile (its candidates: those that
    `profile_intervals` may profile), or False / None (none).  ValueError naming a bad one."""
    scalar = [p.name for p in params if int(np.size(p.value())) == 1]
    if profile is None or profile is False:
        return []
    if profile is True or (isinstance(profile, str) and profile == AUTO):
        return scalar
    if isinstance(profile, AutoProfile):
        if profile.candidates is None:
            return scalar
        return profile_targets(list(profile.candidates), params) if profile.candidates else []
    names = [profile] if isinstance(profile, str) else profile
    if not isinstance(names, (list, tuple)) or not names or not all(isinstance(n, str) for n in names):
        raise ValueError(f"profile: expected true, false, \"auto\" or a list of parameter names, got {profile!r}")
    for n in names:
        if n not in scalar:
            raise ValueError(f"profile: {n!r} is not a scalar parameter of the fit; expected one of {scalar}")
    return list(dict.fromkeys(names))


def is_auto(profile) -> bool:
    """Whether `profile` asks for the "auto" choice (module docstring)."""
    return isinstance(profile, AutoProfile) or (isinstance(profile, str) and profile == AUTO)


def suspect_reason(report, index: int, relative_width: float = AUTO_RELATIVE_WIDTH) -> Optional[str]:
    """Why the report's `index`-th Laplace interval is suspect enough to profile in full (profile =
    "auto", module docstring), or None (left to Laplace, or checked at one point a side with
    AutoProfile.check).  Suspect: no finite interval
    (Laplace cannot bound it), or an interval wider than `relative_width` times |estimate|."""
    e = report.estimates[index]
    lo, hi = e.lower95, e.upper95
    if not (math.isfinite(e.std) and e.std > 0) or lo is None or hi is None or not (
            math.isfinite(lo) and math.isfinite(hi)):
        return "the Gauss-Newton (Laplace) interval does not bound it"
    width = (hi - lo) / abs(e.value) if e.value != 0 else math.inf
    if width > relative_width:
        return (f"its Gauss-Newton (Laplace) 95 % interval [{lo:.4g}, {hi:.4g}] is {width:.3g} x the estimate "
                f"wide (over {relative_width:g}: a weakly determined value)")
    return None


def check_profile_settings(points, iters, lr=None, tie_rtol=TIE_RTOL):
    """A clear error for a bad profile setting (before any rollout)."""
    if lr is not None and (isinstance(lr, bool) or not isinstance(lr, (int, float)) or not (
            lr > 0 and math.isfinite(lr))):
        raise ValueError(f"profile_lr: expected a finite number > 0 (a trust radius), got {lr!r}")
    for name, v, lo in (("profile_points", points, 1), ("profile_iters", iters, 0)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < lo:
            raise ValueError(f"{name}: expected an integer >= {lo}, got {v!r}")
    if isinstance(tie_rtol, bool) or not isinstance(tie_rtol, (int, float)) or not (
            tie_rtol >= 0 and math.isfinite(tie_rtol)):
        raise ValueError(f"tie_rtol: expected a finite number >= 0, got {tie_rtol!r}")


def profile_intervals(params: Sequence, report, names, forward: Optional[Callable[[], None]] = None, loss=None,
                      residuals: Optional[Callable[[], np.ndarray]] = None, best_objective: Optional[float] = None,
                      points: int = PROFILE_POINTS, iters: int = PROFILE_ITERS, lr: float = 0.05,
                      tie_rtol: float = TIE_RTOL, deadline: float = math.inf, printer=print) -> dict:
    """{name: Profile} for the scalar values `names` (True, a name or a list: `profile_targets`; "auto" or an
    AutoProfile: those of its candidates whose Laplace interval is suspect in full, with its `check` the others
    checked at one point a side, module docstring; a value not profiled has no entry) of the fit at the Params'
    current values, which must be those `report` (a FitReport) was made at.

    forward, loss: the Tape loss (the other unknowns are refitted by `iters` BFGS steps of trust
    radius `lr`, the fit's polish step); residuals: used instead (Levenberg-Marquardt, `iters`
    iterations) when there is no Tape loss.  best_objective: the objective at the estimate (one
    rollout when None).  points: per side at most, the last on the bound.  tie_rtol: ties.py's
    relative rule (module docstring).  deadline: time.time() after which no point starts.
    Progress: one line per point (parameter, value, loss, rise, threshold).  The Params are back at
    the estimate afterwards."""
    check_profile_settings(points, iters, lr, tie_rtol)
    params = list(params)
    auto = is_auto(names)
    auto_check = isinstance(names, AutoProfile) and names.check
    names = profile_targets(names, params)
    if forward is None and residuals is None:
        raise ValueError("profile_intervals: give forward and loss (a Tape loss) or residuals")
    if (forward is None) != (loss is None):
        raise ValueError("profile_intervals: forward and loss: give both or neither")
    coords = coordinate_names(params)
    info = _coordinate_info(params)
    x_hat = pack(params).astype(np.float64)

    objective = objective_function(forward, loss, residuals)

    if best_objective is None:
        best_objective = objective()
    # the objective as a multiple of 1/2 |r|^2 (module docstring, "Units")
    scale = best_objective / report.loss if report.loss > 0 and best_objective > 0 else 1.0
    out = {}
    try:
        for name in names:
            i = coords.index(name)
            why = suspect_reason(report, i) if auto else None
            check = auto and why is None
            if check and not auto_check:
                printer(f"profile {name}: not profiled: its Gauss-Newton (Laplace) interval is not suspect")
                continue
            if auto:
                why = why or ("its Gauss-Newton (Laplace) interval checked at one point a side (the other "
                              "unknowns refitted); walked on where the loss rose there by less than "
                              f"{AUTO_CHECK_RATIO:g} of the threshold")
                printer(f"profile {name}: {'check' if check else 'full'}: {why}")
            out[name] = _profile_one(params, report, i, info[i], x_hat, objective, forward, loss, residuals,
                                     best_objective, scale, points, iters, lr, tie_rtol, deadline, printer, check)
            if auto:
                out[name].mode, out[name].why = ("check" if check else "full"), why
            unpack(params, x_hat)
    finally:
        unpack(params, x_hat)
    return out


def _refit(params, i, forward, loss, residuals, objective, iters, lr):
    """Refit every Param but the one holding coordinate i (held at its value); returns (objective at
    the best point seen, rollouts)."""
    held = _param_of(params, i)
    others = [p for p in params if p is not held]
    if not others or iters == 0:
        return objective(), 1
    if forward is not None:
        hist = optimize(forward, loss, BFGS(others, lr=lr), iters=iters, log_every=0)
        hist.restore_best(others)
        return float(np.min(hist.loss)), len(hist.loss)
    least_squares(residuals, others, iters=iters, log_every=0)
    return objective(), 2 * iters + 2


def _param_of(params, i):
    k = 0
    for p in params:
        k += int(np.size(p.value()))
        if i < k:
            return p
    raise IndexError(i)


def _profile_one(params, report, i, info_i, x_hat, objective, forward, loss, residuals, best, scale, points, iters,
                 lr, tie_rtol, deadline, printer, check=False) -> Profile:
    """One value's profile (module docstring); check: end a side after its first point (reason "checked",
    quadratic extrapolation) unless the loss rose there by less than AUTO_CHECK_RATIO of the threshold (then
    walk on)."""
    _p, log, lo, hi = info_i
    e = report.estimates[i]
    thr, thr_lap, thr_tie = profile_threshold(report, i, tie_rtol)
    to_value = math.exp if log else float
    u0 = float(x_hat[i])
    q = t95(report.clusters - 1) if report.std_robust is not None else Z95
    finite_std = math.isfinite(e.std) and e.std > 0
    half = q * e.std if finite_std else (0.25 if log else 0.1 * max(abs(u0), 1.0))
    prof = Profile(e.name, e.value, log, thr, thr_lap, thr_tie, (e.lower95, e.upper95), None, None)
    t0 = time.time()
    sides = {}
    for sign, bound in ((-1.0, lo), (1.0, hi)):
        room = abs(bound - u0) if math.isfinite(bound) else math.inf
        if room <= 1e-9 * max(abs(u0), 1.0):
            sides[sign] = ProfileSide(to_value(bound), "at bound")
            continue
        first = min(half, room)
        ratio = max(2.0, (room / first) ** (1.0 / max(points - 1, 1))) if math.isfinite(room) else 2.0
        x = x_hat.copy()
        inside_t, inside_rise, side = 0.0, 0.0, None
        for k in range(points):
            if time.time() > deadline:
                side = ProfileSide(to_value(u0 + sign * inside_t), "time budget")
                break
            t = min(first * ratio ** k, room)
            if k == points - 1 and math.isfinite(room):
                t = room                         # the last point on the bound
            x[i] = u0 + sign * t
            unpack(params, x)
            try:
                value, n = _refit(params, i, forward, loss, residuals, objective, iters, lr)
            except (SimulationError, GradientError) as exc:
                printer(f"profile {e.name} = {to_value(x[i]):.5g}: rollout failed ({exc})")
                side = ProfileSide(to_value(u0 + sign * inside_t), "failed")
                break
            prof.rollouts += n
            rise = (value - best) / scale if math.isfinite(value) else math.inf
            prof.points.append((to_value(x[i]), rise))
            printer(f"profile {e.name} = {to_value(x[i]):.5g}  loss {value:.6e}  rise {rise:.3g} "
                    f"(threshold {thr:.3g})")
            # clearly better than the estimate: lower by more than the tie rule's "equally good" (5 % of the loss),
            # whatever the Laplace part of the threshold (the Bingham clip at 32 / 200: K's Laplace threshold 400,
            # a point 373 lower, i.e. 41 % of the loss, was the truth's basin)
            if rise < -(thr_tie if thr_tie > 0 else thr) and (prof.better is None or rise < prof.better[1]):
                prof.better = (to_value(x[i]), rise)
                prof.better_values = {p.name: float(np.ravel(p.value())[0]) for p in params
                                      if int(np.size(p.value())) == 1}
            if rise > thr:
                # the end between the last point inside and this one, linear in sqrt(rise)
                a, b = math.sqrt(max(inside_rise, 0.0)), math.sqrt(rise) if math.isfinite(rise) else math.inf
                f = (math.sqrt(thr) - a) / (b - a) if math.isfinite(b) and b > a else 0.0
                side = ProfileSide(to_value(u0 + sign * (inside_t + f * (t - inside_t))), "threshold")
                break
            if check and k == 0 and finite_std and t < room and rise >= AUTO_CHECK_RATIO * thr:
                # the loss rose at least a quarter of the threshold already: the quadratic through the estimate and
                # this point crosses the threshold within 2 t; end there (where a full profile would end on a
                # quadratic valley: at the Laplace end when the threshold is Laplace's, further when the tie
                # rule's is larger)
                side = ProfileSide(to_value(u0 + sign * t * math.sqrt(thr / max(rise, 1e-300))), "checked")
                break
            inside_t, inside_rise = t, max(rise, 0.0)
            x = pack(params).astype(np.float64)  # warm start: the others where this point's refit left them
            if t >= room:
                side = ProfileSide(to_value(bound), "bound")
                break
        if side is None:
            side = ProfileSide(to_value(u0 + sign * inside_t), "no bound")
        sides[sign] = side
        unpack(params, x_hat)
    prof.lower, prof.upper = sides[-1.0], sides[1.0]
    prof.seconds = time.time() - t0
    return prof


def apply_profiles(report, profiles: dict) -> None:
    """Write the profiles into `report` (a FitReport): each estimate's 95 % interval becomes the union
    of its Laplace one and the profile's; a profile that reached a prior bound below the threshold
    makes the estimate "undetermined" (its interval reaching the bound) and adds a Direction naming
    it to `report.undetermined`; `report.profiles` keeps them."""
    report.profiles = dict(profiles)
    for name, prof in profiles.items():
        e = report[name]
        e.lower95, e.upper95 = prof.interval
        if prof.undetermined:
            e.status = "undetermined"
            report.undetermined.append(Direction(math.nan, math.inf, {name: 1.0}, prof.sentence()))
        elif e.status == "undetermined":
            # Laplace could not bound it, the profile did on both sides: the data do fix it, non-linearly
            e.status = "ok"
        if not prof.undetermined and any(s.reason in ("failed", "time budget") for s in (prof.lower, prof.upper)):
            report.notes.append(prof.sentence())
        if prof.better is not None:
            where = ", ".join(f"{k} = {v:.4g}" for k, v in (prof.better_values or {}).items())
            report.notes.append(f"{name}: the profile found a better fit at {prof.better[0]:.4g} (loss "
                                f"{-prof.better[1]:.3g} lower, {-prof.better[1] / max(report.loss, 1e-300):.0%} of "
                                f"the estimate's" + (f"; there {where}" if where else "") + "): the fit had not "
                                "converged; the intervals are measured from a point that is not the minimum: refit "
                                "from there")
