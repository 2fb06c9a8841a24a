"""Fitting a scene file's unknowns: `fit_scene` runs `tgs.identify` (multi-start, coarse to fine,
Adam then BFGS, Levenberg-Marquardt, uncertainty) on a `Scene` (tigradsim/scenes/scene_build.py)
with the file's [fit] settings, and records the frames fitted and why."""
from __future__ import annotations

import time

from ..fitting.optim import History
from ..io.mask_checks import check_initial_pose

__all__ = ["fit_scene"]


def fit_scene(scene, iterations=None, starts=None, local_starts=None, refine=None, horizons="file",
              printer=print, initial_alpha=None, coarse="file"):
    """Fit the scene's unknowns with `tgs.identify` and the file's [fit] settings (arguments
    override them).  Returns (Identification, History): the History records every rollout the
    fit ran (search, gradient steps, Levenberg-Marquardt trials; not the finite differences of
    the uncertainty) with its loss and values, for the loss curve and parameter traces.

    With [fit] horizon = "auto" every stage's frame count is clamped to the predictable horizon
    at the values the stage starts from (`Scene.set_horizon`; without a horizons schedule the
    one stage asks for the whole clip).  The last stage's count is fixed by the first call at it
    (`identify` calls set_horizon once per horizon, at the leading candidate's values) and kept
    for every candidate, so that their objectives and uncertainty reports are over the same
    frames and compare.  [fit] keep / drop_ratio: how many candidates go on from horizon to
    horizon (tigradsim/fitting/continuation.py).

    With [fit] coarse (tigradsim/scenes/scene_coarse.py) the search, the local fits and the horizons run
    first on the cheaper model it names (`iterations` there, default [fit] iterations), and then one
    local fit of `iterations` on the file's model, on the whole schedule's last horizon, refines the best
    coarse minimum from its BFGS curvature; the result (minima, intervals) is that refinement's, with a
    note on the coarse stage, and the History holds the rollouts of both.  `coarse`: "file" ([fit] coarse),
    None (no coarse stage, as `tigradsim fit --quick` asks) or such a dict.

    Afterwards `scene.horizon_info` says how many frames
    were fitted and why (`Scene.predictability` at the estimate included), and the scene is
    back on every frame (renders and `loss_value` cover the whole clip).

    Before the fit, the first mask is compared with the silhouette rendered at the initial values
    (`check_initial_pose`: a FootageWarning naming the IoU when they are far apart);
    `initial_alpha` (K, H, W): that render when the caller has it (else one rollout makes it)."""
    from ..fitting.identify import identify
    from ..fitting.optim import StopCriteria

    f = scene.spec.fit
    iterations = f.iterations if iterations is None else iterations
    starts = f.starts if starts is None else starts
    local_starts = min(f.local_starts if local_starts is None else local_starts, starts)
    refine = f.refine if refine is None else refine
    horizons = f.horizons if horizons == "file" else horizons
    coarse = f.coarse if isinstance(coarse, str) and coarse == "file" else coarse
    adam, bfgs = _split_iterations(f, iterations)
    K = len(scene.footage)
    auto = f.horizon == "auto"
    last = K                         # the last stage's frame count: the clip, or [fit] horizon = N
    if not isinstance(f.horizon, str):
        if f.horizon > K:
            raise scene.spec.error("fit", "horizon", f"expected a frame count of at most the footage's {K} frames, "
                                   f"got {f.horizon}")
        last = f.horizon
    schedule = None
    if horizons or auto or last < K:
        schedule = [h for h in (horizons or ()) if h < last] + [last]
    final = {}                       # auto: the last stage's frame count, fixed by the first local fit

    def set_horizon(k):
        used = scene.set_horizon(k)
        entry = scene.horizons_used[-1]
        if auto and k == schedule[-1]:
            if "frames" not in final:
                final.update(frames=used, reason=entry["reason"])
            elif used != final["frames"]:
                entry["note"] = (f"this local fit's predictable horizon is {used} frames; fitted on the "
                                 f"{final['frames']} of the first local fit so that their objectives compare")
                scene.use_frames(final["frames"])
                entry["used"] = used = final["frames"]
        if auto:
            printer(f"horizon: {used} of the {k} frames asked ({entry['reason']})" if used < k else
                    f"horizon: {used} frames (predictable at these values: {entry['predictable']})")
        return used

    if scene.footage.masks is not None:      # a mask far from the initial pose: a FootageWarning before the fit
        check_initial_pose(scene.footage.masks, scene.render()[..., -1] if initial_alpha is None else initial_alpha)
    if len(getattr(scene, "views", ())) > 1:           # [[cameras]]: the other cameras' first masks too
        for view, video in list(zip(scene.views, scene.render_views()))[1:]:
            if view.footage.masks is not None:
                check_initial_pose(view.footage.masks, video[..., -1], name=f"camera {view.name!r}: masks")
    history = History()
    t0 = time.time()

    def forward():
        scene.forward()
        history.record(float(scene.fit.loss[None]), scene.params + scene.camera_params, time.time() - t0)

    stop = StopCriteria(rtol=f.rtol, window=5) if f.rtol is not None else None
    time_budget, curvature, coarse_note = f.time_budget, None, None
    if coarse:          # coarse to fine in the model: the search on the cheaper model, the file's model refines
        from .scene_coarse import fit_coarse_stage
        coarse_adam, coarse_bfgs = _split_iterations(f, coarse.get("iterations", iterations))
        _coarse, curvature, coarse_note = fit_coarse_stage(
            scene, coarse, dict(starts=starts, local_starts=local_starts, keep=f.keep, drop_ratio=f.drop_ratio, seed=f.seed,
                        adam_iters=coarse_adam, adam_lr=f.lr, bfgs_iters=coarse_bfgs, bfgs_lr=f.polish_lr, lm_iters=0,
                        stop=stop, time_budget=f.time_budget),
            schedule, lambda value, params: history.record(value, params, time.time() - t0), printer)
        starts = local_starts = 1
        schedule = schedule[-1:] if schedule else None
        if time_budget is not None:
            time_budget = max(time_budget - (time.time() - t0), 1e-3)
    result = identify(scene.params + scene.camera_params, forward=forward, loss=scene.fit.loss, residuals=scene.residuals,
                      groups=scene.residual_groups,
                      systematics=scene.model_systematics,
                      starts=starts, local_starts=local_starts, keep=f.keep, drop_ratio=f.drop_ratio, seed=f.seed, adam_iters=adam, adam_lr=f.lr,
                      bfgs_iters=bfgs, bfgs_lr=f.polish_lr, lm_iters=refine, stop=stop, time_budget=time_budget,
                      horizons=schedule, set_horizon=set_horizon if schedule else None, log_every=1,
                      printer=printer, profile=_profile_names(scene), profile_points=f.profile_points,
                      profile_iters=f.profile_iters, profile_lr=f.profile_lr, bfgs_inverse_hessian=curvature,
                      search_held=scene.camera_params)    # the search keeps the calibrated camera (identify)
    if coarse_note:
        result.notes.insert(0, coarse_note)
        result.coarse_stage = _coarse.to_dict()       # its search, local fits and minima, for the JSON report
    fitted = scene.frames_used
    if scene.frames_used != K:
        scene.use_frames(K)
    scene.horizon_info = _horizon_info(scene, fitted, auto, final.get("reason"), printer)
    return result, history


def _split_iterations(f, iterations):
    """(Adam steps, BFGS steps) of a local fit of `iterations` under [fit] optimizer (and polish)."""
    if f.optimizer == "adam":
        return iterations, 0
    if f.optimizer == "bfgs":
        return 0, iterations
    bfgs = min(f.polish if f.polish is not None else iterations // 2, iterations)
    return iterations - bfgs, bfgs


def _profile_names(scene):
    """[fit] profile as identify's `profile`: True: every unknown (not the camera correction); "auto":
    an AutoProfile of the unknowns that are not nuisances (fitting/profile.py); a list: those, each
    checked against [unknowns] (a SceneError naming the key)."""
    from ..fitting.profile import AutoProfile

    wanted = scene.spec.fit.profile
    if wanted is None:                   # a spec made in Python: as a file's default, "auto" with MPM matter
        wanted = "auto" if scene.spec.mpm_grid is not None else False
    names = [u.target for u in scene.spec.unknowns]
    if wanted is True:
        return [p.name for p in scene.params if p.name in names] or None
    if wanted == "auto":
        kept = [u.target for u in scene.spec.unknowns if not u.nuisance]
        return AutoProfile(tuple(p.name for p in scene.params if p.name in kept), scene.spec.fit.profile_check) \
            if kept else None
    if not wanted:
        return None
    for n in wanted:
        if n not in names:
            raise scene.spec.error("fit", "profile", f"{n!r} is not an unknown; expected some of {names}")
    return list(wanted)


def _horizon_info(scene, fitted, auto, reason, printer) -> dict:
    """The report's account of the frames fitted (estimates.json / .md): frames_fitted,
    frames_total, horizon ("auto" or "all"), horizon_reason and, with auto, the predictability
    at the estimate (the Params hold it) and every set_horizon call."""
    K = len(scene.footage)
    info = {"frames_fitted": int(fitted), "frames_total": K, "horizon": scene.spec.fit.horizon}
    if not auto:
        ends = f" ([fit] horizon = {fitted})" if not isinstance(scene.spec.fit.horizon, str) else \
            " (the horizons schedule ends there)"
        info["horizon_reason"] = f"fitted frames 0..{fitted - 1} of {K}" + (ends if fitted < K else "")
        return info
    pred = scene.predictability()
    reason = reason or pred.reason()
    info["horizon_reason"] = (f"fitted frames 0..{fitted - 1} of {K}: {reason}" if fitted < K else
                              f"fitted all {K} frames: {reason}")
    if pred.horizon != fitted:
        info["horizon_reason"] += (f"; at the estimate the predictable horizon is {pred.horizon} frames "
                                   f"({pred.disagreement[min(pred.horizon, K - 1)]:.3f} px at frame "
                                   f"{min(pred.horizon, K - 1)})")
    info["predictability_at_estimate"] = pred.to_dict()
    info["horizon_stages"] = [{k: v for k, v in e.items() if k != "reason"} for e in scene.horizons_used]
    printer(info["horizon_reason"])
    return info
