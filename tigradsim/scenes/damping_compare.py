"""The material-damping form as a model choice: fit a soft scene under each damping form and compare.

Footage does not say how the object's material loses energy, nor how much: a user of another engine's
clip (or of a real object) knows neither the engine's damping form nor its coefficient.  For each form
of `tigradsim.physics.damping` ("deformation_rate", "warp", "rayleigh_stiffness", "rayleigh_mass"),
`damping_form_spec` sets every soft object's damping_model to that form and makes its coefficient an
unknown searched over the form's documented prior range (`DAMPING_PRIORS`, started at the range's
geometric centre; an unknown the file has on it takes that range too, since a range in one form's
units means nothing in another's);
`compare_damping_forms` fits each (`fit_scene` with the file's [fit]) and compares them with
`compare_models`: a table per form (estimates, loss, silhouette IoU, intervals) and a combined estimate
of the shared unknowns (the material's parameters, mass, contact constants) whose interval covers every
form that fits as well as the best.  The damping coefficients stay in the per-form rows only: their
units differ between forms, so they have no combined value.

The same comparison from `tigradsim fit` reports (one per form; benchmarks/coverage_soft.py) is
`tigradsim.fitting.model_selection.compare_fit_outputs`.
"""
from __future__ import annotations

import copy

from ..physics.damping import DAMPING_MODELS, DAMPING_PRIORS, DAMPING_UNITS
from ..fitting.ties import TIE_CHI2, TIE_RTOL
from .law_compare import compare_scene_variants
from .scene_specs import UnknownSpec

DAMPING_FORMS = tuple(DAMPING_MODELS)

__all__ = ["DAMPING_FORMS", "damping_form_spec", "damping_unknown_targets", "compare_damping_forms"]


def _soft_objects(spec):
    soft = [name for name, o in spec.objects.items() if o.kind == "soft"]
    if not soft:
        raise ValueError(f"{spec.path}: the scene has no soft object: there is no material damping to compare")
    return soft


def damping_unknown_targets(spec):
    """The unknowns "NAME.damping" of the scene's soft objects (what `damping_form_spec` fits)."""
    return [f"{name}.damping" for name in _soft_objects(spec)]


def damping_form_spec(spec, form):
    """A copy of a scene spec whose soft objects use damping form `form` with their coefficient an unknown
    within DAMPING_PRIORS[form] (log space, started at the range's geometric centre; an unknown the
    file has on it is given that range and start)."""
    if form not in DAMPING_PRIORS:
        raise ValueError(f"form: expected one of {', '.join(repr(k) for k in DAMPING_PRIORS)}, got {form!r}")
    out = copy.deepcopy(spec)
    lower, upper = DAMPING_PRIORS[form]
    init = (lower * upper) ** 0.5
    for name in _soft_objects(out):
        obj = out.objects[name]
        obj.damping_model, obj.damping = form, init
        target = f"{name}.damping"
        out.unknowns = [u for u in out.unknowns if u.target != target]
        out.unknowns.append(UnknownSpec(target=target, object=name, param="damping", init=init, lower=lower,
                                        upper=upper, log=True))
    return out


def compare_damping_forms(spec, footage, forms=None, printer=print, tie_chi2=TIE_CHI2, tie_rtol=TIE_RTOL,
                          **fit_overrides):
    """Fit `spec` under each damping form and compare (module docstring).

    forms: labels of `tigradsim.physics.damping.DAMPING_MODELS` (default: all four).
    fit_overrides: passed to `fit_scene` (iterations, starts, local_starts, refine, horizons).
    Returns (ModelComparison of the shared unknowns, {form: (Identification, iou mean or None)}).
    """
    forms = list(DAMPING_FORMS if forms is None else forms)
    if not forms:
        raise ValueError("forms: expected at least one damping form")
    coefficients = set(damping_unknown_targets(spec))
    specs = {}
    for form in forms:
        variant = damping_form_spec(spec, form)
        lo, hi = DAMPING_PRIORS[form]
        specs[form] = (f"damping form {form}: coefficient in [{lo:g}, {hi:g}] {DAMPING_UNITS[form]}", variant)
    shared = [u.target for u in next(iter(specs.values()))[1].unknowns if u.target not in coefficients]
    return compare_scene_variants(specs, footage, "Damping forms compared (quality: silhouette IoU)", printer,
                                  tie_chi2, shared=shared, tie_rtol=tie_rtol, **fit_overrides)
