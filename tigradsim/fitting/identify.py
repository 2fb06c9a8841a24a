"""Robust identification: a coarse global search, gradient fits from the best starts,
coarse-to-fine in time, and an uncertainty for every estimate.

    result = tgs.identify(params, forward=fwd, loss=loss_field, residuals=res,
                          starts=16, local_starts=3, horizons=[10, 20, 40], set_horizon=...)
    print(result)                      # estimates +- std, 95% intervals, undetermined, ambiguous
    result.best["mass"].value

Steps:
1. **Search.**  K = `starts` points: the Params' current values (the user's guess,
   `include_current=True`) and Latin-hypercube points in the optimiser's
   coordinates (log where log_space) within the bounds (seeded; every Param needs
   finite bounds for this), each scored by one forward rollout (no gradient).
2. **Local fits** from the best M = `local_starts`: Adam (`adam_iters`) then BFGS
   (`bfgs_iters`) through the existing `optimize` with `stop` criteria, when a Tape
   loss is given (`forward` + `loss`); Levenberg-Marquardt (`least_squares`,
   `lm_iters`) on `residuals` after them, or instead of them when only residuals
   are given.  A start whose rollout blows up, or whose gradient the adjoint check rejects
   (GradientError; raised on when no candidate is left), is recorded and fails alone, on
   any horizon: the next entry of one reserve is fitted in its place (fitting/reserve.py:
   on the first stage the spare search starts in the search's order, on later ones the
   candidates the previous horizon dropped as clearly worse or capped by `keep`, best
   first), so that a failure does not shrink the set the horizons compare; a note says
   which replaced which.
3. **Coarse to fine in time, several candidates.**  With `horizons` (an increasing
   schedule of frame counts) and `set_horizon(k)` (a caller function that makes
   the loss and the residuals use the first k frames: an image loss's frame
   selection, `lambda k: image_loss.set_frames(range(k), target[:k])`, or an
   `MSELoss`'s frame weights, as tests/test_identify.py does), the search runs at
   the first horizon and the local fits run breadth first: the M candidates are
   all fitted on a horizon, compared on its frames, and those that continue are
   fitted on the next (tigradsim/fitting/continuation.py): a candidate is dropped
   only when its loss exceeds `drop_ratio` (default 2) times the best's on the
   same frames or it reached the same point as a better one (within 1 % of the
   search box), and at most `keep` continue (default: all M; the report says when
   competitive ones were cut by keep; a failed candidate is replaced, step 2).  When
   that cap would cut through candidates that tie on the horizon's frames (losses
   within `tie_rtol`: frames before an impact fit every mass alike), the tied ones are
   ranked by their loss on the NEXT horizon's frames instead (one forward rollout
   each), as tied search starts are.  `set_horizon` is called once per horizon, at
   the best candidate's values (an "auto" horizon is chosen there; when that candidate
   fails before any other finished, again at the next one fitted), so all the candidates
   that finish a horizon are compared on the same frames.  The stages begin at the horizon
   where the search ranked the starts (step 1b): the earlier ones, where all tied,
   tell nothing apart.  The reports are made at the last horizon (make it the
   whole clip).  The rollout itself keeps its length (a Simulator's step count is
   fixed), so a short horizon makes the loss smoother (fewer bounces to match),
   not cheaper.
4. **Report.**  At each local minimum: `fit_report` (Gauss-Newton covariance from
   `residuals`, tigradsim/fitting/uncertainty.py).  Minima whose values differ by no more
   than `distinct_sigma` combined standard errors in every determined coordinate
   are one minimum (coordinates the data cannot determine do not separate
   minima: a valley is one minimum).  Distinct minima that fit equally well:
   2 (L_i - L_best) / s^2 <= `tie_chi2` with L = 1/2 |r|^2 (default 3.84, the 95%
   point of chi^2 with 1 degree of freedom: a likelihood-ratio test cannot tell
   them apart), or a loss within `tie_rtol` of the best (default 5 %, with or
   without residuals: where the model is not the world's, the residual is mostly
   model error, its pixels are not independent, and the likelihood-ratio test
   alone would call any two different fits distinguishable), make the result
   "ambiguous" and every such minimum is reported (`Identification.envelope`:
   the range their 95 % intervals span; fitting/ties.py, shared with `compare_models`).
   Starts that tie on the search (scores within `tie_rtol` of the best: e.g. a
   free-fall prefix that every value of a contact parameter fits alike) are scored
   again on the next horizons, one after the other, until they differ
   (`search_rescored`), and the local fits start from the best there.  When more
   still tie than are fitted (or there are no horizons), `search_tied` lists them and
   the summary says that only some were followed (a basin reached only from an
   unfitted one may be missed: more local_starts).

Contract of the callables (as in `tgs.check_gradient`): `forward()` recomputes the
loss from scratch except for zeroing the 0-D `loss` field (done here, and by the
Tape); `residuals()` runs the model and returns the residual vector.
Stop criteria: `stop` (`tgs.StopCriteria`: loss tolerance, relative change over
a window, gradient norm) per local stage, `iters` per stage, and `time_budget`
seconds for the whole identification (the search is cut short and later local
fits are skipped once it is spent).  Progress is printed as `optimize` does.
"""
from __future__ import annotations

import math
import time
from typing import Callable, Optional, Sequence

import numpy as np

from ..core.aliases import renamed_keyword
from ..core.errors import GradientError, SimulationError
from .optim import (BFGS, Adam, Param, StopCriteria, internal_bounds, least_squares, objective_function, optimize,
                    pack, param_summary, unpack)
from .continuation import KEEP_DROP_RATIO, keep_candidates
from .reserve import SEARCH_NEXT, Reserve, dropped_candidates, replacement_note, spare_starts
from .profile import (PROFILE_ITERS, PROFILE_POINTS, AutoProfile, apply_profiles, check_profile_settings, is_auto,
                      profile_intervals, profile_targets)
from .ties import TIE_CHI2, TIE_RTOL, check_tie_thresholds, loss_tied, tied_with_best
from .uncertainty import PIXEL_8BIT_VARIANCE, coordinate_names, fit_report, forget_last_jacobian
from .identification import Identification, Minimum, Run


def latin_hypercube(point_count: int | None = None, dim: int | None = None, rng=None, *,
                    n_points: int | None = None) -> np.ndarray:
    """point_count stratified samples in [0, 1)^dim: each coordinate's point_count strata
    are each hit exactly once (random order per coordinate, uniform within).  `n_points=` is
    point_count's older name."""
    point_count, _ = renamed_keyword("point_count", point_count, "n_points", n_points, owner="latin_hypercube")
    if point_count is None or dim is None or rng is None:
        raise TypeError(f"latin_hypercube: point_count, dim and rng are required, got point_count={point_count!r}, "
                        f"dim={dim!r}, rng={rng!r}")
    u = (np.arange(point_count)[:, None] + rng.uniform(size=(point_count, dim))) / point_count
    for j in range(dim):
        u[:, j] = u[rng.permutation(point_count), j]
    return u


def _held_coordinates(params, search_held) -> np.ndarray:
    """(n,) bool: the packed coordinates of the Params in `search_held` (each must be one of `params`)."""
    held_ids = {id(p) for p in search_held}
    stray = [getattr(p, "name", p) for p in search_held if not any(p is q for q in params)]
    if stray:
        raise ValueError(f"search_held: expected Params among params, got {stray} (not among "
                         f"{[p.name for p in params]})")
    return np.concatenate([np.full(int(np.size(p.value())), id(p) in held_ids) for p in params])


def _check_args(params, forward, loss, residuals, starts, local_starts, horizons, set_horizon, keep, drop_ratio):
    if not params or not all(isinstance(p, Param) for p in params):
        raise ValueError(f"params: expected a non-empty list of tgs.Param, got {params!r}")
    names = [p.name for p in params]
    if len(set(names)) != len(names):
        raise ValueError(f"params: names must be unique (they label the estimates), got {names}")
    if (forward is None) != (loss is None):
        raise ValueError("forward and loss: give both (a Tape loss) or neither")
    if forward is None and residuals is None:
        raise ValueError("identify: give forward and loss (gradient fits), residuals (least squares and the "
                         "uncertainty), or both")
    if not (isinstance(starts, (int, np.integer)) and starts >= 1):
        raise ValueError(f"starts: must be an integer >= 1, got {starts!r}")
    if not (isinstance(local_starts, (int, np.integer)) and 1 <= local_starts <= starts):
        raise ValueError(f"local_starts: must be an integer in [1, starts={starts}], got {local_starts!r}")
    if horizons is not None:
        h = list(horizons)
        if not h or any(not isinstance(k, (int, np.integer)) or k < 1 for k in h) or any(
                b <= a for a, b in zip(h, h[1:])):
            raise ValueError(f"horizons: expected an increasing list of frame counts >= 1, got {horizons!r}")
        if not callable(set_horizon):
            raise ValueError("set_horizon: a function set_horizon(k) is needed with horizons")
    elif set_horizon is not None:
        raise ValueError("set_horizon: given without horizons (the schedule of frame counts)")
    if keep is not None and (isinstance(keep, bool) or not isinstance(keep, (int, np.integer)) or keep < 1):
        raise ValueError(f"keep: must be an integer >= 1 (candidates that go on to the next horizon), got {keep!r}")
    if isinstance(drop_ratio, bool) or not isinstance(drop_ratio, (int, float)) or not (
            math.isfinite(drop_ratio) and drop_ratio > 1):
        raise ValueError(f"drop_ratio: must be a finite number > 1 (a candidate whose loss exceeds drop_ratio x "
                         f"the best's on the same frames is dropped), got {drop_ratio!r}")


def identify(params: Sequence[Param], forward: Optional[Callable[[], None]] = None, loss=None,
             residuals: Optional[Callable[[], np.ndarray]] = None, starts: int = 8, local_starts: int = 2,
             seed: int = 0, include_current: bool = True, adam_iters: int = 30, adam_lr: float = 0.05,
             bfgs_iters: int = 30, bfgs_lr: float = 0.05, lm_iters: int = 0, stop: Optional[StopCriteria] = None,
             time_budget: Optional[float] = None, horizons: Optional[Sequence[int]] = None,
             set_horizon: Optional[Callable[[int], None]] = None, noise_floor: float = PIXEL_8BIT_VARIANCE,
             fd_step: Optional[float] = None, undetermined_std: float = 0.5, distinct_sigma: float = 3.0,
             same_tol: float = 1e-3, tie_chi2: float = TIE_CHI2, tie_rtol: float = TIE_RTOL, log_every: int = 10,
             printer=print, groups=None, systematics=None, keep: Optional[int] = None,
             drop_ratio: float = KEEP_DROP_RATIO, profile=None, profile_points: int = PROFILE_POINTS,
             profile_iters: int = PROFILE_ITERS, profile_lr: Optional[float] = None,
             search_held: Sequence[Param] = (), bfgs_inverse_hessian=None) -> Identification:
    """Multi-start, coarse-to-fine identification with uncertainties (module docstring).

    params: Params with finite bounds (needed when starts > include_current).
    forward, loss: a Tape loss (0-D field) and the function that computes it.
    residuals: residual vector function (uncertainty, least squares, L = 1/2 |r|^2).
    starts: K points scored; local_starts: M best ones fitted.  seed: of the search.
    adam_iters, adam_lr, bfgs_iters, bfgs_lr: gradient stages per horizon (0 skips).
    lm_iters: Levenberg-Marquardt iterations per horizon on `residuals` (after the
        gradient stages); when only residuals are given and lm_iters is 0, 20 are used.
    stop: StopCriteria for each gradient stage.  time_budget: seconds in all.
    horizons, set_horizon: coarse-to-fine schedule (frame counts) and its setter.
    noise_floor, fd_step, undetermined_std: passed to `fit_report`.
    groups: clusters of correlated residuals (e.g. video frames), passed to `fit_report`
        for its cluster-robust covariance: an int, an (N,) label array, or a callable
        groups(N) giving the labels of the current residual vector (its length changes
        with the horizon).
    systematics: a function returning fit_report's `systematics` ({name: (residuals under
        a refined model, extrapolation factor)}) at the current values, called at each
        local fit's end before its report: the intervals then cover the model bias it
        estimates (e.g. the time step's, `tigradsim.fitting.time_step_bias.time_step_systematics`).
    keep: candidates that go on to each next horizon at most (None: all local_starts);
        drop_ratio: a candidate whose loss on a horizon's frames exceeds drop_ratio x the
        best's is dropped there (`continuation.keep_candidates`; `Identification.stages`).
    distinct_sigma, same_tol: minima closer than distinct_sigma combined std in every
        determined coordinate (or than same_tol in internal units without residuals)
        are the same.  tie_chi2, tie_rtol: equally good minima (module docstring);
        tie_rtol also judges starts tied on the search (`Identification.search_tied`).
    search_held: Params among `params` that every search start keeps at their current values (the local fits
        still fit them): a camera correction, whose prior puts it near its calibration (zero), drawn over its
        bounds (+-3 degrees, +-5 cm) would turn every random start's camera by degrees, spoil its loss and
        leave the search nothing but the current values to pick (Newton's soft cube, camera variant: random
        starts 12 x the current point's search loss, the physics' search lost).
    profile: True, a name or a list of names: profile-likelihood intervals of those scalar values at
        the best minimum (fitting/profile.py: `profile_points` a side, `profile_iters` BFGS steps of trust
        radius `profile_lr` (default bfgs_lr) of the others at each; within time_budget).  "auto" (or an
        AutoProfile naming the candidates): only the values whose Laplace interval is suspect, in full;
        AutoProfile(check=True): the others checked at one point a side (fitting/profile.py's docstring).
    bfgs_inverse_hessian: (n, n) the BFGS stage's starting curvature in the internal coordinates (`tgs.BFGS`'s
        inverse_hessian; e.g. `Run.inverse_hessian` of a fit of a cheaper model of the same loss, as a scene's
        [fit] coarse stage passes on); None: the first BFGS step is a gradient step of the trust radius.
    """
    params = list(params)
    _check_args(params, forward, loss, residuals, starts, local_starts, horizons, set_horizon, keep, drop_ratio)
    check_tie_thresholds(tie_chi2, tie_rtol)
    if bfgs_inverse_hessian is not None:          # its shape and definiteness, before any rollout
        BFGS(params, lr=bfgs_lr, inverse_hessian=bfgs_inverse_hessian)
    profiled = profile_targets(profile, params)          # a bad name fails before any rollout
    # a fit keeps no Jacobian of an earlier fit: its journal must hold every rollout it needs (a resume in a
    # fresh process replays them; `residual_jacobian` says why one is kept at all)
    forget_last_jacobian()
    if profiled:
        check_profile_settings(profile_points, profile_iters, profile_lr, tie_rtol)
    t0 = time.time()
    deadline = math.inf if time_budget is None else t0 + float(time_budget)
    horizons = list(horizons) if horizons is not None else None
    if forward is None and lm_iters == 0:
        lm_iters = 20
    names = coordinate_names(params)
    notes = []

    lo, hi = internal_bounds(params)
    x_user = pack(params).astype(np.float64)
    n_random = starts - (1 if include_current else 0)
    if n_random > 0:
        unbounded = [names[i] for i in range(len(lo)) if not (math.isfinite(lo[i]) and math.isfinite(hi[i]))]
        if unbounded:
            raise ValueError(f"identify: the search needs finite lower and upper bounds; missing for {unbounded} "
                             "(or pass starts=1 to fit from the current values only)")
    rng = np.random.default_rng(seed)
    points = ([x_user] if include_current else []) + list(lo + latin_hypercube(n_random, len(lo), rng) * (hi - lo))
    held = _held_coordinates(params, search_held)
    for x in points:
        x[held] = x_user[held]

    objective = objective_function(forward, loss, residuals)

    def values_dict(x):
        return {n: float(np.exp(v) if log else v) for n, v, log in zip(names, x, _log_flags(params))}

    # 1. coarse search (forward only) at the first horizon
    if horizons:
        set_horizon(horizons[0])
    search = []
    for k, x in enumerate(points):
        if time.time() > deadline and search:
            notes.append(f"time budget spent: scored {len(search)} of {len(points)} starts")
            break
        unpack(params, x)
        try:
            value = objective()
        except SimulationError:
            value = math.inf
        if not math.isfinite(value):
            value = math.inf
        search.append((x, value))
        if log_every:
            printer(f"search {k + 1:3d}/{len(points)}  loss {value:.6e}  " + "  ".join(param_summary(p) for p in params))
    scores = {i: value for i, (_x, value) in enumerate(search)}
    chosen, search_tied = _rank_starts(scores, local_starts, tie_rtol)
    if not chosen:
        unpack(params, x_user)
        raise SimulationError("identify: every start's rollout blew up or gave a non-finite loss")
    # 1b. starts that tie on the first horizon (a free-fall prefix that every contact value fits alike) are
    # scored again on the later horizons, one after the other, until they differ: the local fits then start
    # from the starts that fit the frames where the parameters show, not from the first of a tie
    rescored = []
    for h in (horizons or [])[1:]:
        if len(search_tied) <= len(chosen) or time.time() > deadline:
            break
        unpack(params, search[chosen[0]][0])      # the frames (an "auto" horizon) are chosen at the best start
        set_horizon(h)
        tied_scores = _losses_at(params, objective, {i: search[i][0] for i in search_tied})
        rescored.append({"frames": h, "scores": {i: tied_scores[i] for i in search_tied}})
        if log_every:
            printer(f"search: {len(search_tied)} starts tie on the first {horizons[len(rescored) - 1]} frames; "
                    f"scored again on {h} frames")
        chosen, search_tied = _rank_starts(tied_scores, local_starts, tie_rtol)
        if not chosen:      # every tied start blew up on the longer horizon: keep the first ranking
            chosen, search_tied = _rank_starts(scores, local_starts, tie_rtol)
            break
    if rescored:
        last = rescored[-1]
        notes.append(f"{len(rescored[0]['scores'])} starts tied on the first {horizons[0]} frames; scored again on "
                     f"{last['frames']} frames, where " + (
                         "they differ: local fits ran from the best (starts "
                         f"{', '.join(str(i + 1) for i in chosen)})" if len(search_tied) <= len(chosen) else
                         f"{len(search_tied)} still tie"))
    if len(search_tied) > len(chosen):
        where = f" on the first {(rescored[-1]['frames'] if rescored else horizons[0])} frames" if horizons else ""
        best_score = min(scores[i] for i in chosen) if not rescored else min(rescored[-1]["scores"].values())
        notes.append(f"{len(search_tied)} of {len(search)} starts tie on the search{where} (scores within "
                     f"{tie_rtol:g} of the best, {best_score:.4g}): it cannot rank them, and local fits ran from "
                     f"{len(chosen)} of them (starts {', '.join(str(i + 1) for i in chosen)}); a basin reached "
                     "only from the others may be missed (raise local_starts, or begin the horizons where the "
                     "starts differ)")

    # 2.-3. local fits, coarse to fine, breadth first: every candidate is fitted on a horizon before any
    # goes on to the next, and only those not clearly worse on the frames all have seen continue
    # (tigradsim/fitting/continuation.py).  The stages begin at the horizon the search ranked the starts
    # on: earlier horizons, where the starts tied, show nothing that tells them apart
    first_stage = len(rescored) if horizons else 0
    stage_horizons = horizons[first_stage:] if horizons else [None]
    gradient_errors = []          # candidates stopped by the adjoint check (GradientError)
    if first_stage:
        notes.append(f"the local fits begin at the {stage_horizons[0]}-frame horizon, where the search ranked the "
                     f"starts (on the first {horizons[first_stage - 1]} frames they tied)")
    keep = len(chosen) if keep is None else int(keep)
    # the search box's span per internal coordinate (for "the same point"); unbounded ones: 1 internal unit
    spans = np.where(np.isfinite(hi - lo), hi - lo, 1.0)
    runs = [Run(i, values_dict(search[i][0]), search[i][1]) for i in chosen]
    live = [(run, np.array(search[run.start][0], dtype=np.float64)) for run in runs]
    # a candidate that fails is replaced from one reserve (fitting/reserve.py): on the first stage the spare
    # search starts, on later ones the candidates the previous horizon dropped as worse or capped
    reserve = Reserve((Run(i, values_dict(search[i][0]), search[i][1]), np.array(search[i][0], dtype=np.float64),
                       SEARCH_NEXT) for i in spare_starts(scores, rescored, chosen))
    stages = []
    for s, h in enumerate(stage_horizons):
        if time.time() > deadline:
            notes.append(f"time budget spent before the {h}-frame horizon: {len(live)} candidates end there")
            break
        if h is not None and log_every:
            printer(f"horizon {h} frames: {len(live)} candidate(s)")
        fitted = []
        framed = None                         # the candidate at whose values the stage's frames were chosen
        queue = list(live)                    # grows when a failed candidate is replaced from the reserve
        for rank, (run, x) in _growing(queue):
            if time.time() > deadline:
                notes.append(f"time budget spent: {len(queue) - rank} of {len(queue)} fits skipped at the "
                             f"{h}-frame horizon")
                break
            if h is not None and not any(math.isfinite(r.objective) for r, _x in fitted) and framed is not run:
                # the frames (an "auto" horizon) are chosen at the leading candidate; while none has finished
                # here (the leader failed), at the next one fitted: every finished candidate has the same frames
                unpack(params, x)
                set_horizon(h)
                framed = run
            started = time.time()
            unpack(params, x)
            if log_every:
                printer(f"local fit of start {run.start + 1} ({rank + 1}/{len(queue)})" +
                        (f" on {h} frames" if h is not None else "") + f" (search loss {run.search_loss:.6e})")
            try:
                run.stop_reason, run.inverse_hessian = _local_fit(
                    params, forward, loss, residuals, adam_iters, adam_lr, bfgs_iters, bfgs_lr, lm_iters, stop,
                    deadline, log_every, printer, bfgs_inverse_hessian)
                run.objective = objective()
            except (SimulationError, GradientError) as exc:
                # a candidate whose rollout blew up, or whose gradient the adjoint check cannot trust (a start
                # past the step's stability limit), fails alone: the others go on, and the next of the reserve
                # is fitted in its place, so that a failure does not shrink the set the horizons compare
                run.stop_reason, run.objective = f"failed: {exc}", math.nan
                if isinstance(exc, GradientError):
                    gradient_errors.append(exc)
                if log_every:
                    printer(f"local fit of start {run.start + 1} failed: {exc}")
                entry = reserve.take()
                notes.append(replacement_note(run, entry, h))
                if entry is not None:
                    queue.append(entry[:2])
                    if all(r is not entry[0] for r in runs):
                        runs.append(entry[0])
                    run.stop_reason += f"; replaced by start {entry[0].start + 1}, {entry[2]}"
                    if s > 0:                             # the previous horizon's dropped one goes on after all
                        stages[-1].revived.append(entry[0].start)
                    if log_every:
                        printer(f"start {entry[0].start + 1}, {entry[2]}, takes its place")
            run.seconds += time.time() - started
            fitted.append((run, pack(params).astype(np.float64)))
        if s == len(stage_horizons) - 1 or not fitted:
            live = fitted
            break
        next_h = stage_horizons[s + 1]
        decision = keep_candidates({run.start: run.objective for run, _x in fitted}, keep, drop_ratio,
                                   points={run.start: x for run, x in fitted}, spans=spans, tie_rtol=tie_rtol,
                                   rescore=None if next_h is None else _next_horizon_scorer(
                                       params, objective, set_horizon, next_h, fitted),
                                   rescored_frames=next_h)
        decision.frames = h
        stages.append(decision)
        for run, _x in fitted:
            if run.start not in decision.kept:
                why = ("failed" if run.start in decision.failed else "clearly worse" if run.start in decision.worse
                       else "the same point as a better one" if run.start in decision.same
                       else f"more than keep = {keep} competitive")
                run.stop_reason += f"; dropped after the {h}-frame horizon ({why}, loss {run.objective:.4g})"
        if log_every:
            printer(decision.sentence())
        by_start = {run.start: (run, x) for run, x in fitted}
        live = [by_start[i] for i in decision.kept]
        reserve = Reserve(dropped_candidates(decision, by_start))
        if not live:
            break
    if gradient_errors and not any(math.isfinite(run.objective) for run, _x in live):
        raise gradient_errors[-1]           # no candidate left: the caller's "stopped early" (best rollout so far)
    finals = []
    for run, x in live:
        if not math.isfinite(run.objective):
            continue
        unpack(params, x)
        report = None
        if residuals is not None:
            try:
                report = fit_report(residuals, params, noise_floor=noise_floor, fd_step=fd_step,
                                    undetermined_std=undetermined_std, groups=groups,
                                    systematics=systematics() if systematics is not None else None)
            except (ValueError, SimulationError) as exc:      # a rollout near the minimum blew up
                notes.append(f"no uncertainty for the fit from start {run.start + 1}: {exc}")
        finals.append((run, x, report))
    notes += [d.sentence() for d in stages if d.capped or len(d.objectives) > 1]

    # 4. group into distinct minima, find ties
    finals.sort(key=lambda f: f[0].objective)
    minima = []
    for run, x, report in finals:
        for k, m in enumerate(minima):
            if _same(m, x, report, distinct_sigma, same_tol):
                m.runs.append(run.start)
                run.minimum = k
                break
        else:
            run.minimum = len(minima)
            minima.append(Minimum(run.objective, values_dict(x), x, report, [run.start]))
    tied = []
    if minima:
        best = minima[0]
        for k, m in enumerate(minima):
            # fitting/ties.py's rule: within tie_rtol of the best objective, or the reports' likelihood ratio
            if k == 0 or loss_tied(m.objective, best.objective, tie_rtol) or (
                    best.report is not None and m.report is not None
                    and tied_with_best(m.report.loss, best.report.loss, best.report.s2, tie_chi2, tie_rtol=0.0)):
                tied.append(k)
        if profiled and best.report is not None:
            unpack(params, best.x)
            which = AutoProfile(tuple(profiled), getattr(profile, "check", False)) if is_auto(profile) else profiled
            apply_profiles(best.report, profile_intervals(
                params, best.report, which, forward, loss, residuals, best.objective, profile_points,
                profile_iters, bfgs_lr if profile_lr is None else profile_lr, tie_rtol, deadline,
                printer if log_every else (lambda *a: None)))
        unpack(params, best.x)
    else:
        unpack(params, x_user)
        notes.append("no local fit finished; the Params are back at their initial values")
    ambiguous = len(tied) > 1
    if residuals is None:
        notes.append("no residuals: estimates have no uncertainty (pass residuals=, e.g. VideoFit.residuals)")
    result = Identification(minima, ambiguous, tied, [(values_dict(x), v) for x, v in search], runs,
                            time.time() - t0, notes, search_tied, list(chosen), rescored, stages)
    if log_every:
        printer(str(result))
    return result


def _growing(items: list):
    """enumerate(items) that also yields what is appended to `items` while it runs."""
    k = 0
    while k < len(items):
        yield k, items[k]
        k += 1


def _next_horizon_scorer(params, objective, set_horizon, frames, fitted):
    """rescore(starts) for `keep_candidates`: each start's loss at its fitted values on the next horizon's
    `frames` (one forward rollout each; a blow-up is +inf).  The frames (an "auto" horizon) are chosen at the
    best-fitting of the stage's candidates (all of them, not only the tied ones), as the next stage chooses them
    at its leader."""
    by_start = {run.start: (run, x) for run, x in fitted}
    leader = min(by_start, key=lambda k: (by_start[k][0].objective if math.isfinite(by_start[k][0].objective)
                                          else math.inf, k))

    def rescore(starts):
        unpack(params, by_start[leader][1])
        set_horizon(frames)
        return _losses_at(params, objective, {k: by_start[k][1] for k in starts})

    return rescore


def _losses_at(params, objective, points: dict) -> dict:
    """{key: the objective at the packed values points[key]} (one forward rollout each; a rollout that blows up,
    or a loss that is not finite, is +inf)."""
    losses = {}
    for key, x in points.items():
        unpack(params, x)
        try:
            value = objective()
        except SimulationError:
            value = math.inf
        losses[key] = value if math.isfinite(value) else math.inf
    return losses


def _rank_starts(scores: dict, local_starts: int, tie_rtol: float):
    """(the `local_starts` best finite-scored starts, every start tied with the best) of {start: score}; ties
    are scores within tie_rtol of the best, in the order of the scores (then of the starts)."""
    order = sorted(scores, key=lambda i: (scores[i], i))
    chosen = [i for i in order if math.isfinite(scores[i])][:local_starts]
    if not chosen:
        return [], []
    best = scores[chosen[0]]
    return chosen, [i for i in order if loss_tied(scores[i], best, tie_rtol)]


def _log_flags(params):
    flags = []
    for p in params:
        flags += [bool(p.log_space)] * int(np.size(p.value()))
    return flags


def _same(minimum, x, report, distinct_sigma, same_tol):
    """Whether x (with its report) is the same minimum as `minimum`."""
    d = np.abs(x - minimum.x)
    if report is None or minimum.report is None:
        return bool(np.all(d <= same_tol))
    s1 = np.sqrt(np.maximum(np.diag(report.covariance), 0.0))
    s2 = np.sqrt(np.maximum(np.diag(minimum.report.covariance), 0.0))
    s = np.sqrt(s1 ** 2 + s2 ** 2)
    determined = np.isfinite(s)
    # a zero std (zero noise floor) falls back to the absolute tolerance
    return bool(np.all(d[determined] <= np.maximum(distinct_sigma * s[determined], same_tol)))


def _local_fit(params, forward, loss, residuals, adam_iters, adam_lr, bfgs_iters, bfgs_lr, lm_iters, stop,
               deadline, log_every, printer, inverse_hessian=None):
    """Adam, then BFGS (Tape loss, from `inverse_hessian` if given), then LM (residuals); returns (the last stop
    reason, the BFGS stage's final inverse-Hessian estimate or None)."""
    reason, curvature = "", None
    stages = []
    if forward is not None:
        if adam_iters > 0:
            stages.append((Adam, adam_lr, adam_iters))
        if bfgs_iters > 0:
            stages.append((BFGS, bfgs_lr, bfgs_iters))
    for cls, lr, iters in stages:
        remaining = deadline - time.time()
        if remaining <= 0:
            return "time budget", curvature
        crit = StopCriteria(**{**(stop.__dict__ if stop is not None else {}),
                               "time_budget": min(remaining, stop.time_budget if stop is not None and
                                                  stop.time_budget is not None else math.inf)})
        if not math.isfinite(crit.time_budget):
            crit.time_budget = None
        opt = cls(params, lr=lr, inverse_hessian=inverse_hessian) if cls is BFGS else cls(params, lr=lr)
        hist = optimize(forward, loss, opt, iters=iters, log_every=log_every, printer=printer, stop=crit)
        reason = f"{cls.__name__}: {hist.stop_reason}"
        if cls is BFGS:
            curvature = opt.inverse_hessian
        hist.restore_best(params)
        if hist.stop_reason.startswith("loss ") and stop is not None and stop.loss_tol is not None:
            return reason, curvature
    if residuals is not None and lm_iters > 0 and time.time() < deadline:
        least_squares(residuals, params, iters=lm_iters, log_every=log_every, printer=printer)
        reason = (reason + "; " if reason else "") + "LM"
    return reason, curvature
