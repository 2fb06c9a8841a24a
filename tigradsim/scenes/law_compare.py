"""The contact law as a model choice: fit a scene file's unknowns under each contact law and compare.

Footage does not say which law made it (tigradsim's capped damping, the dflex / Warp uncapped damping, the
capped, the pseudo-Huber or Warp's Huber-norm friction of `tigradsim.physics.contact`, the last once per
friction velocity of its documented grid).  `compare_contact_laws` builds the scene
once per law (the ground's law, which every object without a law of its own then uses; a law the file gives an
object is replaced too), fits each with the file's [fit] settings (`fit_scene`), and compares the fits with
`tigradsim.fitting.model_selection.compare_models`: a table of estimates, intervals, loss and silhouette IoU per
law, and a combined estimate whose interval covers every law that fits as well as the best (a loss within
tie_rtol = 5 % of the best's, the rule the multi-start search uses for equally good minima: fitting/ties.py).
Models compare on the same residuals only: with [fit] horizon = "auto", every variant after the first
finished one fits the frames that one's predictable horizon chose ([fit] horizon = N).
Each variant is fitted in a Python process of its own (tigradsim/scenes/variant_process.py: Taichi frees no
field, and one program holds 512 field trees, which the 7th law of a small box scene passed).
The `tigradsim laws SCENE --out DIR` command runs it.
"""
from __future__ import annotations

import copy

import numpy as np

from ..fitting.bound_hits import report_bound_hits
from ..fitting.model_selection import compare_models
from ..fitting.ties import TIE_CHI2, TIE_RTOL, check_tie_thresholds
from ..physics.contact import DAMPING_LAWS, FRICTION_LAWS, WARP_FRICTION_VELOCITIES, ContactLaw


def law_label(law: ContactLaw) -> str:
    """The label of a law in the comparison tables: "damping+friction", the default friction "capped" left
    out, and "warp" friction with its friction velocity (its delta, m/s): "capped+warp(0.01)"."""
    label = law.damping
    if law.friction == "warp":
        label += f"+warp({law.friction_velocity:g})"
    elif law.friction != "capped":
        label += f"+{law.friction}"
    return label


def parse_law_label(label: str) -> ContactLaw:
    """The law of a label written as `law_label` writes it: "capped", "uncapped+huber", "uncapped+warp(0.02)"."""
    damping, _, friction = str(label).partition("+")
    velocity = None
    if friction.startswith("warp(") and friction.endswith(")"):
        friction, text = "warp", friction[5:-1]
        try:
            velocity = float(text)
        except ValueError:
            raise ValueError(f"law {label!r}: the friction velocity {text!r} is not a number [m/s]") from None
    try:
        return ContactLaw(damping, friction or "capped", velocity)
    except ValueError as exc:
        raise ValueError(f"law {label!r}: {exc} (labels: 'DAMPING' or 'DAMPING+FRICTION', 'DAMPING+warp(V)')") from None


# the laws `tigradsim laws` compares: (damping, friction); "huber" with its default friction velocity, "warp"
# (Warp 1.9.1's rigid friction) with either damping once per friction velocity of its documented grid
# (physics/contact.py WARP_FRICTION_VELOCITIES: delta is a compile-time constant of the kernels, compared as
# discrete models).  Every law the library has: each is fitted in a process of its own
# (`compare_scene_variants(own_process=True)`, tigradsim/scenes/variant_process.py says why).
LAWS = {law_label(law): law for law in
        [ContactLaw(damping, friction, velocity) for damping in DAMPING_LAWS for friction in FRICTION_LAWS
         for velocity in (WARP_FRICTION_VELOCITIES if friction == "warp" else (None,))]}


def law_spec(spec, law: ContactLaw):
    """A copy of a scene spec whose ground and objects use `law`."""
    out = copy.deepcopy(spec)
    if out.ground is None:
        raise ValueError(f"{spec.path}: the scene has no [ground]: there is no contact law to compare")
    options = {"damping": law.damping, "friction": law.friction}
    if law.friction in ("huber", "warp"):
        options["friction_velocity"] = law.friction_velocity
    # how kd and kf are integrated is numerics, not the law compared: the scene's choice stays (the ground's,
    # which the objects' laws merge with: `contact.body_laws`)
    integration = spec.ground.get("law", {}).get("damping_integration")
    out.ground["law"] = dict(options, **({"damping_integration": integration} if integration else {}))
    for obj in out.objects.values():
        if getattr(obj, "law", None):
            obj.law = dict(options)
    return out


def compare_contact_laws(spec, footage, laws=None, printer=print, tie_chi2=TIE_CHI2, tie_rtol=TIE_RTOL,
                         **fit_overrides):
    """Fit `spec`'s unknowns under each law and compare (module docstring).

    laws: {label: ContactLaw} (default: `LAWS`, every law the library has).
    tie_chi2, tie_rtol: "equally good" (`compare_models`).
    fit_overrides: passed to `fit_scene` (iterations, starts, local_starts, refine, horizons).
    Returns (ModelComparison, {label: (Identification, iou mean or None)}).
    """
    laws = dict(LAWS if laws is None else laws)
    if not laws:
        raise ValueError("laws: expected at least one {label: ContactLaw}")
    specs = {}
    for label, law in laws.items():
        if not isinstance(law, ContactLaw):
            raise TypeError(f"laws[{label!r}]: expected a tigradsim ContactLaw, got {type(law).__name__}")
        specs[label] = (f"contact law {label}: damping {law.damping}, friction {law.friction}", law_spec(spec, law))
    return compare_scene_variants(specs, footage, "Contact laws compared (quality: silhouette IoU)", printer,
                                  tie_chi2, tie_rtol=tie_rtol, **fit_overrides)


def compare_scene_variants(specs, footage, title, printer=print, tie_chi2=TIE_CHI2, shared=None, tie_rtol=TIE_RTOL,
                           own_process=True, **fit_overrides):
    """Fit each variant of a scene (one model choice each: a contact law, a damping form) and compare them
    with `compare_models`.

    specs: {label: (description printed before its fit, SceneSpec)}; shared: the unknowns compared and
    combined (default: all; leave out one whose meaning differs between variants).
    own_process: fit each variant in a Python process of its own (`variant_process`: Taichi never frees a
    field and has room for 512 field trees, so many variants in one program crash it); False: in this
    process (a few variants of a small scene, or a test that stands in for the fit).
    Returns (ModelComparison, {label: (Identification, iou mean or None)}).
    """
    check_tie_thresholds(tie_chi2, tie_rtol)          # before any fit
    reports, quality, results, suspect = {}, {}, {}, {}
    pinned = None          # [fit] horizon = "auto": the frames the first finished variant's fit chose
    for label, (description, variant) in specs.items():
        printer(f"== {description}")
        if pinned is not None and variant.fit.horizon == "auto":
            # models compare on the same residuals only: every later variant fits the same frames
            variant = copy.deepcopy(variant)
            variant.fit.horizon = pinned
            printer(f"horizon: the {pinned} frames the first variant's fit chose (\"auto\"), so that the fits compare")
        if own_process:
            from .variant_process import fit_in_own_process
            result, iou, frames, bounds = fit_in_own_process(label, variant, footage, printer, fit_overrides)
        else:
            result, iou, frames, bounds = fit_variant(variant, footage, printer, fit_overrides)
        if pinned is None and variant.fit.horizon == "auto" and result.best is not None:
            pinned = int(frames)
        results[label] = (result, iou)
        if result.best is None:
            printer(f"{label}: no fit report (no local fit finished); left out of the comparison")
            continue
        reports[label], quality[label] = result.best, iou
        # the suspect rule (model_selection): every fitted value on its bound, unknowns and nuisances alike,
        # before `shared` leaves some out of the comparison
        suspect[label] = report_bound_hits(result.best, bounds)
    if not reports:
        raise ValueError(f"compare_scene_variants: no variant's fit finished ({', '.join(specs)})")
    if shared is not None:
        reports = {k: _only(rep, shared) for k, rep in reports.items()}
    comparison = compare_models(reports, tie_chi2=tie_chi2, quality=quality, tie_rtol=tie_rtol, suspect=suspect)
    printer(comparison.to_markdown(title))
    return comparison, results


def fit_variant(variant, footage, printer, fit_overrides):
    """Build and fit one variant's scene (`fit_scene`); returns (Identification, silhouette IoU mean over
    the cameras or None without masks, frames fitted or None, {name: (lower, upper, log_space)} of the
    fitted scalar unknowns: the suspect rule's bounds)."""
    from .scene_build import Scene, fit_scene, silhouette_iou
    from .step_choice import choose_substeps

    variant, _step = choose_substeps(variant, footage, printer)     # [simulation] substeps = "auto": each law its own
    scene = Scene(variant, footage)
    result, _history = fit_scene(scene, printer=printer, **fit_overrides)
    frames = (getattr(scene, "horizon_info", None) or {}).get("frames_fitted")
    iou = None
    clips = footage if isinstance(footage, list) else [footage]       # [[cameras]]: one clip per camera
    if all(c.masks is not None for c in clips):      # the mean over the cameras
        iou = float(np.mean([silhouette_iou(v[..., -1], c.masks).mean()
                             for v, c in zip(scene.render_views(), clips)]))
    return result, iou, frames, param_bounds(getattr(scene, "params", []))


def param_bounds(params):
    """{name: (lower, upper, log_space)} of the Params with scalar bounds (None where a bound is not one)."""
    def scalar(b):
        return float(b) if b is not None and np.size(b) == 1 else None

    return {p.name: (scalar(p.lower), scalar(p.upper), bool(p.log_space)) for p in params}


def _only(report, names):
    """A copy of a FitReport with only the estimates `names` (for comparing the shared ones)."""
    out = copy.copy(report)
    out.estimates = [e for e in report.estimates if e.name in names]
    return out
