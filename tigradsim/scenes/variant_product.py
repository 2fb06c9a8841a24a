"""Several independent model choices compared jointly: every combination of their options is one variant.

Footage leaves more than one modelling choice open at once: a soft body's mass distribution (`mass_compare`)
and its material-damping form (`damping_compare`), the contact law (`law_compare`), ...  Compared one at a
time, each choice is judged with the others fixed to a guess, and a wrong guess for one moves the pick of the
other (measured on Warp's soft clip: with volume-lumped masses every damping form gave mu -34 to -41 %).
`variant_product` builds the product of the choices' options (a scene spec per combination, labelled
"option1/option2/...", the first choice varying slowest) and `compare_variant_product` fits each with
`compare_scene_variants`: each combination in a Python process of its own, the same tie rule
(fitting/ties.py), the suspect rule for fits with values on a prior bound, and one combined estimate whose
interval covers every equally good combination (fitting/model_selection.py).  The cost is the product of the
option counts in fits (2 distributions x 4 damping forms: 8 fits).

    choices = [("mass distribution", {d: (f"masses {d}", lambda s, d=d: mass_distribution_spec(s, d))
                                      for d in ("volume", "equal")}),
               ("damping form", {f: (f"damping {f}", lambda s, f=f: damping_form_spec(s, f)) for f in forms})]
    comparison, fits = compare_variant_product(spec, footage, choices, shared=["cube.mu", "cube.lam"])

`tigradsim.scenes.mass_compare.compare_mass_and_damping` is that call for the two soft-body choices.
"""
from __future__ import annotations

from ..fitting.ties import TIE_CHI2, TIE_RTOL, check_tie_thresholds
from .law_compare import compare_scene_variants

__all__ = ["JOINT_SEPARATOR", "joint_label", "variant_product", "compare_variant_product"]

JOINT_SEPARATOR = "/"


def joint_label(options) -> str:
    """The label of one combination: its options' labels joined by "/" ("equal/warp")."""
    return JOINT_SEPARATOR.join(options)


def _check_choices(choices):
    """A clear error for a malformed `choices` (before any spec is built or any fit runs)."""
    if not isinstance(choices, (list, tuple)) or not choices:
        raise ValueError(f"choices: expected a non-empty list of (name, {{option label: (description, "
                         f"transform)}}), got {choices!r}")
    names = set()
    for i, item in enumerate(choices):
        if not (isinstance(item, (list, tuple)) and len(item) == 2 and isinstance(item[0], str)
                and isinstance(item[1], dict)):
            raise ValueError(f"choices[{i}]: expected (name, {{option label: (description, transform)}}), got {item!r}")
        name, options = item
        if name in names:
            raise ValueError(f"choices[{i}]: the choice {name!r} is given twice")
        names.add(name)
        if not options:
            raise ValueError(f"choices[{i}] ({name}): expected at least one option")
        for label, entry in options.items():
            if not isinstance(label, str) or not label or JOINT_SEPARATOR in label:
                raise ValueError(f"choices[{i}] ({name}): option label {label!r}: expected a non-empty string "
                                 f"without {JOINT_SEPARATOR!r} (it joins the labels of a combination)")
            if not (isinstance(entry, (list, tuple)) and len(entry) == 2 and callable(entry[1])):
                raise ValueError(f"choices[{i}] ({name}), option {label!r}: expected (description, transform: "
                                 f"SceneSpec -> SceneSpec), got {entry!r}")


def variant_product(spec, choices):
    """Every combination of the choices' options as a scene variant.

    choices: [(choice name, {option label: (description, transform)})], transform(spec) returning a new
        SceneSpec with that option applied (it must not change its argument; the `*_spec` functions of
        law_compare, damping_compare and mass_compare copy); the options of later choices are applied to
        the result of earlier ones.
    Returns {joint label: (description, SceneSpec)}, ordered with the first choice varying slowest.  Every
    combination is built here, so that a bad option fails before any fit.
    """
    _check_choices(choices)
    combos = [((), "", spec)]
    for _name, options in choices:
        combos = [(labels + (label,), f"{text}; {description}" if text else description, transform(built))
                  for labels, text, built in combos for label, (description, transform) in options.items()]
    return {joint_label(labels): (text, built) for labels, text, built in combos}


def compare_variant_product(spec, footage, choices, title="Model choices compared jointly (quality: silhouette IoU)",
                            printer=print, tie_chi2=TIE_CHI2, tie_rtol=TIE_RTOL, shared=None, own_process=True,
                            **fit_overrides):
    """Fit every combination of `choices` (`variant_product`) and compare them (`compare_scene_variants`).

    shared: the unknowns compared and combined (default: all; leave out one whose meaning differs between
        combinations, such as a damping coefficient whose units depend on the form).
    Returns (ModelComparison, {joint label: (Identification, iou mean or None)}).
    """
    check_tie_thresholds(tie_chi2, tie_rtol)          # before any fit
    specs = variant_product(spec, choices)
    return compare_scene_variants(specs, footage, title, printer, tie_chi2, shared=shared, tie_rtol=tie_rtol,
                                  own_process=own_process, **fit_overrides)
