"""The constants a scene file left at the library's defaults, as `AssumedConstant`s for
`tigradsim.fitting.sensitivity.assumption_sensitivity` (`tigradsim fit` reports how far each
estimate moves over their prior ranges).

A contact constant X in ke, kd, kf, mu is assumed when [ground] does not state it (the file's
defaults: `scene_file.parse_scene`), no [unknowns] entry fits it ("ground.X", or "OBJ.X" /
"OBJ.X_per_mass" for every object using it) and at least one object takes the ground's value: a
rigid object without its own X (its `body_X` entry is the ground's), any soft object (its
vertices touch the ground with `ground_X`), or a collider without its own X (its `collider_X`): the file
gives one surface constant for the ground and the colliders that state none, so one assumed constant
"ground.X" moves them together.

The rigid bodies' constant X against each other is its own assumed constant "bodies.X" (writing their
`body_pair_X`) when two or more rigid objects take the shared X and the file states none
(`pair_constants`); "ground.X" then leaves their `body_pair_X` alone, as it does when the file states
X in [bodies] or fits "bodies.X".

A soft or cloth object whose table does not state `radius` (its vertices' contact radius) touches with the
library's default skin (0.01 m soft, 0.005 m cloth): an assumed constant "NAME.radius" over PRIOR_RANGES["radius"]
= [0, 2 x the default] (why: fitting/sensitivity.py), its writer setting `particle_radius` of the object's
vertices; with or without a [ground], and whatever [fit] contact_constants says (the radius is not
differentiable, so never a nuisance unknown: its effect is reported, not fitted).  A stated radius (0 included)
is the user's and is not assumed; a rigid object's contact_radius defaults to 0, the mesh itself, and is not.

The cloths' constant X against the soft objects is assumed, as "cloth_soft.X", when the scene has both and the
file states X nowhere (`cloth_soft_constants.unstated_cloth_soft_constants`: the library's value), over
`cloth_soft_prior_range`, its writer on every row of the model's `cloth_soft_X`; with or without a [ground].

In a scene without a [ground], a collider's contact constant X is assumed, as "NAME.X", when its
[colliders.NAME] table does not state it and no [unknowns] entry "NAME.X" fits it
(`scene_colliders.unstated_collider_constants`): the library's default, a guess about the ramp's or the
table's material.
"""
from __future__ import annotations

import numpy as np

from ..fitting.sensitivity import PRIOR_RANGES, AssumedConstant
from .scene_colliders import collider_param, unstated_collider_constants
from .scene_file import CONTACT_PARAMS

_REASONS = {
    "ke": "a decade either side of the default: the penalty stiffness is a numerical choice, not a measurement",
    "kd": "a decade below to 30 x above the default: up to a critically damped contact over ke's range "
          "(fitting/sensitivity.py PRIOR_RANGES)",
    "kf": "friction is viscous below a slip speed of about mu fn / kf: from viscous up to walking speed (1) to "
          "Coulomb above millimetres per second (1000), as other engines have it",
    "kf_slip": "friction viscous below a slip speed mu fn / kf from 1 m/s to 1 mm/s, fn a cloth vertex's weight "
               "(capped where the step could not integrate it)",
    "mu": "dry contact between everyday materials",
    "radius": "the vertices' contact skin, from 0 (they touch at the mesh: the mesh is the surface, as a measured "
              "shape or another engine's meshed solid has it) to twice the library's default (a numerical margin, "
              "not a measurement, in the middle of the range)",
}


def assumed_constants(scene) -> list:
    """One `AssumedConstant` "NAME.radius" per soft or cloth object that states no contact radius
    (`unstated_radii`), "ground.X" per contact constant the scene assumed, or "NAME.X" per collider's
    in a scene without a [ground], "cloth_soft.X" per cloth-soft constant (module docstring), with its value, prior range (`PRIOR_RANGES`) and a
    writer that sets `ground_X` and the `body_X` / `collider_X` entries of the rigid objects and colliders
    that take the ground's value, or the collider's own entry."""
    from .scene_colliders import ground_takers
    from .pair_constants import PAIR_OBJECT, pair_is_separate, separate_pair_constant
    from .cloth_soft_constants import CLOTH_SOFT_OBJECT, cloth_soft_prior_range, unstated_cloth_soft_constants
    spec = scene.spec
    out = []
    fitted = {(u.object, u.tie or u.param) for u in spec.unknowns}
    out += unstated_radii(scene)
    for name, x, value in unstated_collider_constants(spec):
        lower, upper = PRIOR_RANGES[x](value)
        out.append(AssumedConstant(f"{name}.{x}", value, lower, upper,
                                   _entry_writer(*collider_param(scene.model, scene.colliders[name], x)),
                                   _REASONS[x]))
    separate = {x: separate_pair_constant(spec, x) for x in CONTACT_PARAMS}
    for x, pair in separate.items():
        if pair is not None and (PAIR_OBJECT, x) not in fitted:
            rows = [scene.handles[n] for n in pair[0]]
            lower, upper = PRIOR_RANGES[x](pair[1])
            out.append(AssumedConstant(f"{PAIR_OBJECT}.{x}", pair[1], lower, upper,
                                       _rows_writer(getattr(scene.model, f"body_pair_{x}"), rows),
                                       _REASONS[x] + "; the bodies' contact with each other, apart from the ground's"))
    for x, value in unstated_cloth_soft_constants(spec):
        if (CLOTH_SOFT_OBJECT, x) not in fitted:
            out.append(AssumedConstant(f"{CLOTH_SOFT_OBJECT}.{x}", value, *cloth_soft_prior_range(spec, x, value),
                                       _rows_writer(getattr(scene.model, f"cloth_soft_{x}"),
                                                    range(getattr(scene.model, f"cloth_soft_{x}").shape[0])),
                                       (_REASONS[x] if x != "kf" else _REASONS["kf_slip"])
                                       + "; the cloths' contact with the soft objects"))
    if spec.ground is None:
        return out
    for x in CONTACT_PARAMS:
        if x in spec.ground_given or ("ground", x) in fitted:
            continue
        bodies = [scene.handles[n] for n, o in spec.objects.items()
                  if o.kind == "rigid" and x not in o.contact and (n, x) not in fitted]
        soft = any(o.kind in ("soft", "cloth") for o in spec.objects.values())     # particles: the ground's X
        colliders = ground_takers(spec, x, fitted)
        if not bodies and not soft and not colliders:
            continue
        value = float(spec.ground[x])
        lower, upper = PRIOR_RANGES[x](value)
        out.append(AssumedConstant(f"ground.{x}", value, lower, upper,
                                   _writer(scene.model, x, bodies, colliders, pairs=not pair_is_separate(spec, x)),
                                   _REASONS[x]))
    return out


def unstated_radii(scene) -> list:
    """One `AssumedConstant` "NAME.radius" per soft or cloth object whose table left `radius` at the library's
    default (module docstring): value the default [m], range PRIOR_RANGES["radius"], writer on the object's rows of
    `particle_radius` (the particles [particle_start, particle_start + particle_count) of its handle)."""
    out = []
    for name, obj in scene.spec.objects.items():
        if obj.kind not in ("soft", "cloth") or obj.contact_radius_stated:
            continue
        h = scene.handles[name]
        lower, upper = PRIOR_RANGES["radius"](obj.contact_radius)
        rows = range(h.particle_start, h.particle_start + h.particle_count)
        out.append(AssumedConstant(f"{name}.radius", float(obj.contact_radius), lower, upper,
                                   _rows_writer(scene.model.particle_radius, rows), _REASONS["radius"]))
    return out


def _entry_writer(field, entry):
    def write(value):
        field[entry] = value

    return write


def _rows_writer(field, rows):
    def write(value):
        a = field.to_numpy()
        a[list(rows)] = value
        field.from_numpy(a)

    return write


def _writer(model, x, bodies, colliders=(), pairs=True):
    """Writes ground_X, body_X of `bodies` (and their body_pair_X when `pairs`: no separate "bodies.X") and
    collider_X of `colliders`."""
    ground, body = getattr(model, f"ground_{x}"), getattr(model, f"body_{x}", None)
    collider = getattr(model, f"collider_{x}", None)
    pair = getattr(model, f"body_pair_{x}", None) if pairs else None

    def write(value):
        ground[None] = value
        for field, rows in ((body, bodies), (pair, bodies), (collider, colliders)):
            if len(rows) and field is not None:
                a = field.to_numpy()
                a[list(rows)] = value
                field.from_numpy(a)

    return write


def scene_noise_floor(scene, frames) -> float:
    """The residual variance per value a fit of the scene's first `frames` footage frames can reach
    (`image_noise_floor` of the targets its supervision compares with, weighted by their residual
    counts: masks for "mask", colour frames for "rgb", both for "both")."""
    from ..fitting.sensitivity import image_noise_floor

    sup, targets = scene.spec.fit.supervision, []
    for fo in [v.footage for v in getattr(scene, "views", ())] or [scene.footage]:     # every camera's
        targets += ([fo.masks[:frames]] if sup in ("mask", "both") else []) + \
                   ([fo.frames[:frames]] if sup in ("rgb", "both") else [])
    sizes = [t.size for t in targets]
    return float(sum(image_noise_floor(t) * n for t, n in zip(targets, sizes)) / sum(sizes))


def sensitivity_options(fit_spec) -> dict:
    """The keywords a scene file's [fit] gives both sensitivities (assumed and undetermined nuisance constants):
    {"refit_steps": assumption_refit_steps, "rule_out": assumption_rule_out}."""
    return {"refit_steps": fit_spec.assumption_refit_steps, "rule_out": fit_spec.assumption_rule_out}


def scene_honesty(scene, report, frames, iou=None) -> dict:
    """After `fit_scene`, at the estimate: the sensitivity of every estimate of `report` to the
    scene's assumed constants (`assumed_constants`, `assumption_sensitivity`), to its nuisance
    constants the footage leaves undetermined (`nuisance_sensitivity`), each interval widened by
    both over the part of each constant's range the footage does not rule out (`intervals_with_assumptions`:
    "intervals_with_assumptions" {name: (lo, hi)}; over the whole ranges: "intervals_with_assumptions_whole_range"),
    those widened
    further by the model discrepancy (`discrepancy_intervals` over the per-frame statistics
    `frame_statistics`: "intervals_with_discrepancy", "discrepancy", "frame_statistics") and the fit's
    quality against the footage's noise floor and the silhouette IoU `iou` (`fit_quality`),
    both on the first `frames` frames (those fitted).  Marks the report's estimates
    ("assumption-dominated", "misfit", "suspect": a determined value on a bound of its prior range,
    `bound_hits.mark_suspect`).  Returns {"assumptions": Sensitivity.to_dict(),
    "fit_quality": FitQuality.to_dict(), "warnings": [sentences], "markdown": text}."""
    from ..fitting.sensitivity import (assumption_sensitivity, fit_quality, intervals_with_assumptions,
                                       nuisance_sensitivity)
    from ..fitting.bound_hits import mark_suspect
    from ..fitting.discrepancy import discrepancy_intervals, frame_statistics
    from ..fitting.uncertainty import residual_jacobian

    K = len(scene.footage)
    params = scene.params + scene.camera_params
    nuisance = [u.target for u in scene.spec.unknowns if u.nuisance]
    assumed = assumed_constants(scene)
    scene.use_frames(frames)
    try:
        jac = residual_jacobian(scene.residuals, params)
        stats = frame_statistics(*jac, scene.residual_groups(count=jac[1].size, per_frame=True), frames=frames)
        options = sensitivity_options(scene.spec.fit)
        sens = assumption_sensitivity(scene.residuals, params, assumed, report, jacobian=jac, **options)
        nsens = nuisance_sensitivity(scene.residuals, params, nuisance, report, jacobian=jac,
                                     reasons={u.target: _REASONS[u.tie or u.param] for u in scene.spec.unknowns
                                              if u.nuisance}, **options)
        quality = fit_quality(report, noise_floor=scene_noise_floor(scene, frames), iou=iou,
                              iou_frames=frames if frames < K else None)
        suspect = mark_suspect(report, {u.target: (u.lower, u.upper, u.log) for u in scene.spec.unknowns})
    finally:
        scene.use_frames(K)
    intervals = intervals_with_assumptions(report, sens, nsens)
    # the same over the whole prior ranges, the ends the footage rules out included (what the rule removed)
    whole = intervals_with_assumptions(report, sens, nsens, whole_range=True)
    discrepancy = discrepancy_intervals(report, stats, bounds={u.target: (u.lower, u.upper) for u in scene.spec.unknowns
                                                               if u.lower is not None and u.upper is not None})
    with_discrepancy = discrepancy.widen(intervals, report)
    warnings = sens.warnings() + nsens.warnings() + ([quality.text] if quality.misfit else []) + \
        ([suspect] if suspect else [])
    md = sens.to_markdown() + nsens.to_markdown("Sensitivity to nuisance constants the footage does not determine")
    if nuisance:
        md += ("\nNuisance constants (not stated in [ground], fitted within their prior ranges: "
               + ", ".join(f"{u.target} in [{u.lower:.4g}, {u.upper:.4g}]" for u in scene.spec.unknowns if u.nuisance)
               + "); the other intervals are marginal over them."
               + (" bodies.X: the rigid bodies' contact constant against each other, fitted apart from the "
                  "ground's and colliders' (`tgs.scenes.pair_constants`)."
                  if any(u.object == "bodies" for u in scene.spec.unknowns if u.nuisance) else "") + "\n")
    md += f"\nFit quality: {quality.text}.\n" + (f"\nBound hits: {suspect}.\n" if suspect else "")
    if discrepancy.notes:
        md += ("\nModel discrepancy (refits leaving out the beginning, middle or end of the fitted frames; "
               "`tgs.discrepancy_intervals`):\n\n" + "\n".join(f"- {n}" for n in discrepancy.notes) + "\n")
    return {"assumptions": sens.to_dict(), "nuisance": nsens.to_dict() if nuisance else None,
            "fit_quality": quality.to_dict(), "intervals_with_assumptions": intervals,
            "intervals_with_assumptions_whole_range": whole, "warnings": warnings,
            "markdown": md, "frame_statistics": stats.to_dict(), "discrepancy": discrepancy.to_dict(),
            "intervals_with_discrepancy": with_discrepancy}
