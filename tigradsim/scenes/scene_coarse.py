"""Coarse to fine in the model: a scene fit's first stage on a cheaper model of the same scene ([fit] coarse).

    [fit]
    starts = 8
    local_starts = 2
    iterations = 6                                          # BFGS steps on the file's model
    coarse = {resolution = 24, substeps = 50, iterations = 12}

Why: a fit whose every rollout is expensive (an MPM clip at the grid and step that make its model right: grid 32,
200 substeps a frame) can afford few gradient steps, too few to walk a flat valley from a far start, and no
multi-start at all.  The same scene at a coarser discretisation (fewer substeps, a coarser MPM grid: 5-10x cheaper)
has nearly the same objective on the same footage, so the search (`starts`, `local_starts`, `keep`, `horizons`:
everything `tgs.identify` does) runs there, and the file's model only refines the best coarse minimum.  The
refinement starts from the coarse BFGS run's curvature (`tgs.BFGS`'s inverse_hessian): its first step is a
quasi-Newton step of the finer model's gradient, not a gradient step of the whole trust radius, which would throw a
start already near the minimum out of it.  The intervals, systematics and profiles are the file's model's (the
refinement's report); the coarse stage has none (no residual rollouts: it is only a search).

The coarse model is the scene file with [simulation] substeps = `substeps` (its dt dropped) and/or [mpm_grid]
resolution = `resolution` (an MPM object is sampled anew on the coarser cells and its splats take that lattice's
default radius, as `scene_refined` does for the finer grid), everything else the file's.  Its minimum is not the
file's model's (the discretisation's bias moves it, most along the directions the footage sees least); the
refinement on the file's model is what removes that.  Not journalled: `tigradsim fit --resume` runs the coarse stage
again (the same rollouts, whose gradients may differ in the last bits: the reverse MPM loops sum on threads), and
replays the refinement's journal only if it starts from the same bits.
"""
from __future__ import annotations

import dataclasses
import math
import time
import warnings

from ..fitting.horizons import copy_values

__all__ = ["COARSE_KEYS", "parse_coarse", "coarse_spec", "coarse_scene", "fit_coarse_stage"]

COARSE_KEYS = ("substeps", "resolution", "iterations")


def parse_coarse(table):
    """[fit] coarse of a scene file (`table`: the [fit] `_Table`) as a dict with some of COARSE_KEYS (substeps and/or
    resolution given, iterations optional), or None when absent; a SceneError names the key and the value."""
    if not table.has("coarse"):
        return None
    v = table.data["coarse"]
    if not isinstance(v, dict):
        table.fail("coarse", f"expected a table such as {{resolution = 24, substeps = 50, iterations = 12}} (the "
                             f"cheaper model of the first stage), got {v!r}")
    unknown = sorted(set(v) - set(COARSE_KEYS))
    if unknown:
        table.fail("coarse", f"unknown key(s) {unknown} (allowed: {', '.join(COARSE_KEYS)})")
    if "substeps" not in v and "resolution" not in v:
        table.fail("coarse", "expected substeps and/or resolution (the coarser model's step and MPM grid), got "
                             f"only {sorted(v) or 'an empty table'}")
    out = {}
    for key, minimum in (("substeps", 1), ("resolution", 4), ("iterations", 0)):
        if key in v:
            x = v[key]
            if isinstance(x, bool) or not isinstance(x, int) or x < minimum:
                table.fail("coarse", f"{key}: expected an integer >= {minimum}, got {x!r}")
            out[key] = int(x)
    return out


def coarse_spec(spec, coarse=None):
    """The SceneSpec of `spec`'s coarse model (`coarse`: a dict as `parse_coarse` gives, default the spec's [fit]
    coarse; module docstring), its own [fit] coarse removed."""
    c = spec.fit.coarse if coarse is None else coarse
    if not c:
        raise ValueError("spec: its [fit] has no coarse table (the cheaper model of the first stage)")
    changes = {}
    if "substeps" in c:
        changes.update(dt=None, substeps=c["substeps"], auto_substeps=None)
    if "resolution" in c:
        if spec.mpm_grid is None:
            raise spec.error("fit", "coarse", f"resolution = {c['resolution']} sets the MPM grid, but this scene has "
                                              "no [mpm_grid] (no MPM matter)")
        changes["mpm_grid"] = dict(spec.mpm_grid, resolution=c["resolution"])
    return dataclasses.replace(spec, fit=dataclasses.replace(spec.fit, coarse=None), **changes)


def coarse_scene(scene, coarse=None):
    """The coarse model of `scene` (same file, footage, cameras, unknowns; with gradients), at the scene's current
    values; `coarse` as in `coarse_spec`.  Checked to be no finer than the scene: a coarse step shorter than the
    scene's, or a grid finer than its grid, raises a SceneError naming [fit] coarse."""
    c = scene.spec.fit.coarse if coarse is None else coarse
    spec = coarse_spec(scene.spec, c)
    if "resolution" in c and c["resolution"] > scene.spec.mpm_grid["resolution"]:
        raise scene.spec.error("fit", "coarse", f"resolution = {c['resolution']} is finer than the file's MPM grid "
                                                f"({scene.spec.mpm_grid['resolution']}): expected a cheaper model")
    footage = scene._footages if len(scene._footages) > 1 else scene.footage
    with warnings.catch_warnings():        # the scene's own build warned already (footage, stability pre-flight)
        warnings.simplefilter("ignore")
        coarse = type(scene)(spec, footage, requires_grad=True, unknowns=scene._with_unknowns)
    if coarse.dt < scene.dt * (1.0 - 1e-9):
        raise scene.spec.error("fit", "coarse", f"substeps = {c['substeps']} gives dt {coarse.dt:.6g} s, shorter than "
                                                f"the fit's own {scene.dt:.6g} s: expected a cheaper model")
    copy_values(scene.params + scene.camera_params, coarse.params + coarse.camera_params)
    return coarse


def fit_coarse_stage(scene, coarse, identify_kwargs, schedule, record, printer):
    """[fit] coarse's first stage (`coarse`: its dict): `tgs.identify` on `coarse_scene(scene, coarse)` with
    `identify_kwargs` (the file's search,
    local fits and optimiser settings; `fit_scene` builds them) and the horizons `schedule` (or None), without
    residuals (no intervals).  `record(loss, params)` is called after every rollout (the fit's History).  Writes the
    best coarse minimum into the scene's Params and returns (the coarse Identification, the inverse-Hessian estimate
    of the run that reached it or None, a sentence for the fit's notes)."""
    from ..fitting.identify import identify

    t0 = time.time()
    c = coarse
    coarse = coarse_scene(scene, c)
    what = ", ".join(f"{k} {c[k]}" for k in ("resolution", "substeps") if k in c)
    printer(f"coarse stage ({what}; dt {coarse.dt:.6g} s against {scene.dt:.6g} s): search and local fits")

    def forward():
        coarse.forward()
        record(float(coarse.fit.loss[None]), coarse.params + coarse.camera_params)

    result = identify(coarse.params + coarse.camera_params, forward=forward, loss=coarse.fit.loss, residuals=None,
                      horizons=schedule, set_horizon=coarse.set_horizon if schedule else None, log_every=1,
                      printer=printer, search_held=coarse.camera_params, **identify_kwargs)
    if not result.minima:
        raise RuntimeError("coarse stage: no local fit finished")     # identify raised already when none started
    copy_values(coarse.params + coarse.camera_params, scene.params + scene.camera_params)
    runs = [r for r in result.runs if r.minimum == 0 and math.isfinite(r.objective)]
    best = min(runs, key=lambda r: r.objective) if runs else None
    curvature = None if best is None else best.inverse_hessian
    values = ", ".join(f"{k}={v:.5g}" for k, v in result.minima[0].values.items())
    sentence = (f"coarse stage ([fit] coarse: {what}): {len(result.search)} starts scored, "
                f"{len(result.runs)} fitted, {len(result.minima)} distinct minima; the best (loss {result.minima[0].objective:.6g} "
                f"in the coarse model, {values}) started the fit on the file's model"
                + (" from its BFGS curvature" if curvature is not None else "") + f" ({time.time() - t0:.0f} s)")
    printer(sentence)
    return result, curvature, sentence
