"""A scene's refined models, for the systematics its fit's intervals cover (`fit_report(systematics=...)`,
`tigradsim.fitting.refined_model.Refinement`): each is the same scene file with one discretisation refined,
built on first use (no gradients), given the fit's current values and run once at the estimate.

    "time_step": dt -> dt / 2 ([fit] time_step_bias; tigradsim/fitting/time_step_bias.py); also the
                 reference of [fit] horizon = "auto" (`Scene.predictability`)
    "grid":      the MPM grid's resolution n -> round(4 n / 3) ([fit] grid_bias, on by default in scenes of
                 MPM matter; tigradsim/fitting/grid_bias.py).  Its particles: an MPM object is sampled on a
                 lattice of particles_per_cell points per grid cell, so the finer scene samples its objects
                 anew at its finer cells (the same particles_per_cell: (4/3)^3 = 2.4x the particles), and its
                 splats take the default radius of that finer lattice (half its spacing; a file's splat_radius
                 is kept).  That is the scene the file gives at the finer resolution: the dynamics' grid, the
                 particle quadrature and the rendered lattice refined together, as a user refining the
                 resolution would get; the systematic is the bias of all three.

The footage, cameras, unknowns (with their values copied in) and the frames fitted are the scene's.
The finer grid keeps the scene's time step, whose stability limit shrinks with dx: a finer-grid rollout that
blows up at the estimate raises as the scene's own would, and `tgs.identify` then reports the fit without
intervals, saying why (more substeps, or grid_bias = false, is the way out).
"""
from __future__ import annotations

import dataclasses
import warnings

from ..fitting.grid_bias import finer_resolution, grid_refinement
from ..fitting.horizons import copy_values
from ..fitting.time_step_bias import time_step_refinement

__all__ = ["REFINED_MODELS", "refined_spec", "refined_scene", "refined_at_current_values", "refinement_of",
           "refined_systematics"]

REFINED_MODELS = ("time_step", "grid")


def _check(scene, which):
    if which not in REFINED_MODELS:
        raise ValueError(f"which: expected one of {', '.join(REFINED_MODELS)}, got {which!r}")
    if which == "grid" and scene.spec.mpm_grid is None:
        raise ValueError("which: 'grid' refines the MPM grid, but this scene has no [mpm_grid] (no MPM matter)")


def refined_spec(scene, which):
    """The scene's SceneSpec with the discretisation `which` refined (module docstring)."""
    _check(scene, which)
    spec = scene.spec
    if which == "time_step":
        return dataclasses.replace(spec, dt=scene.dt / 2.0)
    grid = dict(spec.mpm_grid, resolution=finer_resolution(spec.mpm_grid["resolution"]))
    return dataclasses.replace(spec, mpm_grid=grid)


def refinement_of(scene, which):
    """The `Refinement` (label, ratio, order) of the scene's model refined by `which`."""
    _check(scene, which)
    if which == "time_step":
        return time_step_refinement(scene.dt)
    n = scene.spec.mpm_grid["resolution"]
    return grid_refinement(n, finer_resolution(n))


def refined_scene(scene, which):
    """The scene refined by `which` (same file, footage, camera and unknowns; no gradients), built on the
    first call and kept in scene._refined."""
    cache = scene.__dict__.setdefault("_refined", {})
    if which not in cache:
        spec = refined_spec(scene, which)
        with warnings.catch_warnings():
            # half the step: within every limit the scene itself met.  The finer grid at the same step: within
            # 3/4 of the scene's margin (fitting/grid_bias.py); a rollout that blows up raises, as the scene's
            warnings.simplefilter("ignore")
            footage = scene._footages if len(scene._footages) > 1 else scene.footage
            cache[which] = type(scene)(spec, footage, requires_grad=False, unknowns=scene._with_unknowns)
    return cache[which]


def refined_at_current_values(scene, which):
    """`refined_scene` given the scene's current values (unknowns and camera correction)."""
    refined = refined_scene(scene, which)
    copy_values(scene.params + scene.camera_params, refined.params + refined.camera_params)
    return refined


def refined_systematics(scene, which) -> dict:
    """{label: (residuals, factor)}: the refined model's residuals at the scene's current values, on the
    frames fitted now (one forward rollout), with its Richardson factor."""
    refined = refined_at_current_values(scene, which)
    refined.use_frames(scene.frames_used)
    return refinement_of(scene, which).systematics(refined.residuals)
