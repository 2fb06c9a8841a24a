"""The soft body's mass distribution as a model choice: fit a soft scene under each distribution and compare.

A user who weighed the object knows its total mass, not how that mass sits over the mesh's vertices: a
uniform solid (and Newton's `add_soft_mesh`) lumps it by the tets' volumes, Warp's `add_soft_grid` gives
every vertex the same share, a real object may be neither.  Measured on Warp's soft-cube clip: fitting
Warp's equal-mass footage with volume-lumped masses moves mu by up to -41 %.  So, like the contact law (`law_compare`) and the
material-damping form (`damping_compare`), the distribution is compared rather than assumed:
`mass_distribution_spec` sets every soft object's `mass_distribution` ("volume" or "equal",
`tigradsim.physics.fem.MASS_DISTRIBUTIONS`; an object given per-vertex masses keeps them: its distribution
is a fact of the file, not a choice), and `compare_mass_distributions` fits each (`fit_scene` with the
file's [fit]) through `compare_scene_variants`: a table per distribution (estimates, loss, silhouette IoU,
intervals) and a combined estimate whose interval covers every distribution that fits as well as the best
(fitting/ties.py: a loss within 5 % of the best's).  A total-mass or density unknown ("NAME.mass") keeps the
distribution's shares (`tigradsim.fitting.soft_mass.SoftMassParam`), so it means the same in every variant
and is combined like the material's parameters.

    from tigradsim.scenes.mass_compare import compare_mass_distributions
    comparison, fits = compare_mass_distributions(load_scene("cube.toml"), footage)
    print(comparison.to_markdown())

What the comparison can and cannot say, measured (benchmarks/RESULTS.md, "The soft body's mass distribution as a
model choice"): on Warp's clean clip the equal distribution (Warp's) fits 2.9 x better and gives mu -0.5 % where
volume gave -41 %; but on Newton's clean clip (volume-lumped) the equal distribution fits 26 % better with mu +77 %,
compensating in the ground's friction (at its bound) and the damping; forward runs at Newton's true constants are
17 mm RMS off its clip with volume masses, 54 mm with equal.  A silhouette loss does not reliably tell the
distributions apart when the rest of the model is not the engine's: where the distribution is known, state it.

The distribution and the material-damping form compared jointly (2 x 4 fits, every combination one variant;
`variant_product`): `compare_mass_and_damping(spec, footage)`; a fit with a determined value on a prior bound
(the ground's mu at 1.0 above) is "suspect" and cannot win alone (fitting/model_selection.py).

The same comparison from `tigradsim fit` reports (one per distribution) is
`tigradsim.fitting.model_selection.compare_fit_outputs` (benchmarks/implicit_damping_fit.py
--mass-distributions volume,equal; with --form all, the product of distributions and damping forms).
"""
from __future__ import annotations

import copy

from ..fitting.ties import TIE_CHI2, TIE_RTOL
from ..physics.fem import MASS_DISTRIBUTIONS, check_mass_distribution
from .damping_compare import DAMPING_FORMS, damping_form_spec, damping_unknown_targets
from .law_compare import compare_scene_variants
from .variant_product import compare_variant_product

__all__ = ["MASS_DISTRIBUTIONS", "mass_distribution_spec", "compare_mass_distributions", "mass_damping_choices",
           "compare_mass_and_damping"]

_DESCRIPTIONS = {"volume": "each vertex a quarter of its tets' masses (a uniform solid)",
                 "equal": "every vertex the same share of the total"}


def _spread_objects(spec):
    """Names of the soft objects whose mass is spread from a total or a density (not given per vertex)."""
    soft = [name for name, o in spec.objects.items() if o.kind == "soft"]
    if not soft:
        raise ValueError(f"{spec.path}: the scene has no soft object: there is no mass distribution to compare")
    spread = [name for name in soft if spec.objects[name].node_mass is None]
    if not spread:
        raise ValueError(f"{spec.path}: every soft object has node_mass (per-vertex masses given): there is no "
                         "mass distribution to compare")
    return spread


def mass_distribution_spec(spec, distribution):
    """A copy of a scene spec whose soft objects (those with a mass or density) spread it by `distribution`."""
    check_mass_distribution(distribution)
    out = copy.deepcopy(spec)
    for name in _spread_objects(out):
        out.objects[name].mass_distribution = distribution
    return out


def compare_mass_distributions(spec, footage, distributions=None, printer=print, tie_chi2=TIE_CHI2,
                               tie_rtol=TIE_RTOL, **fit_overrides):
    """Fit `spec` under each mass distribution and compare (module docstring).

    distributions: names from MASS_DISTRIBUTIONS (default: both).
    tie_chi2, tie_rtol: "equally good" (`compare_models`).
    fit_overrides: passed to `fit_scene` (iterations, starts, local_starts, refine, horizons).
    Returns (ModelComparison of every unknown, {distribution: (Identification, iou mean or None)}).
    """
    distributions = list(MASS_DISTRIBUTIONS if distributions is None else distributions)
    if not distributions:
        raise ValueError("distributions: expected at least one mass distribution")
    specs = {}
    for name in distributions:
        specs[name] = (f"mass distribution {name}: {_DESCRIPTIONS.get(name, '')}", mass_distribution_spec(spec, name))
    return compare_scene_variants(specs, footage, "Mass distributions compared (quality: silhouette IoU)", printer,
                                  tie_chi2, tie_rtol=tie_rtol, **fit_overrides)


def mass_damping_choices(spec, distributions=None, forms=None):
    """The two soft-body choices as `variant_product` takes them: [("mass distribution", ...), ("damping
    form", ...)] (defaults: every distribution, every damping form).  Bad names fail here, before any fit."""
    from ..physics.damping import DAMPING_PRIORS, DAMPING_UNITS

    distributions = list(MASS_DISTRIBUTIONS if distributions is None else distributions)
    forms = list(DAMPING_FORMS if forms is None else forms)
    if not distributions:
        raise ValueError("distributions: expected at least one mass distribution")
    if not forms:
        raise ValueError("forms: expected at least one damping form")
    for name in distributions:
        check_mass_distribution(name)
    _spread_objects(spec)
    for form in forms:
        if form not in DAMPING_PRIORS:
            raise ValueError(f"forms: expected names among {', '.join(DAMPING_FORMS)}, got {form!r}")
    masses = {d: (f"mass distribution {d}", lambda s, d=d: mass_distribution_spec(s, d)) for d in distributions}
    damping = {f: (f"damping form {f} in [{DAMPING_PRIORS[f][0]:g}, {DAMPING_PRIORS[f][1]:g}] {DAMPING_UNITS[f]}",
                   lambda s, f=f: damping_form_spec(s, f)) for f in forms}
    return [("mass distribution", masses), ("damping form", damping)]


def compare_mass_and_damping(spec, footage, distributions=None, forms=None, printer=print, tie_chi2=TIE_CHI2,
                             tie_rtol=TIE_RTOL, **fit_overrides):
    """Fit `spec` under every (mass distribution, damping form) and compare them jointly (`variant_product`:
    one fit per combination, in a process of its own; labels "volume/warp").  The damping coefficients stay
    in the per-combination rows (their units differ between forms); every other unknown is combined.
    Returns (ModelComparison, {label: (Identification, iou mean or None)})."""
    choices = mass_damping_choices(spec, distributions, forms)
    coefficients = set(damping_unknown_targets(spec))
    first = damping_form_spec(spec, next(iter(choices[1][1])))
    shared = [u.target for u in first.unknowns if u.target not in coefficients]
    return compare_variant_product(spec, footage, choices, "Mass distributions and damping forms compared "
                                   "(quality: silhouette IoU)", printer, tie_chi2, tie_rtol, shared=shared,
                                   **fit_overrides)
