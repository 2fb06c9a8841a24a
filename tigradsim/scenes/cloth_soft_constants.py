"""The cloths' contact constants against the soft (FEM) objects in a scene file: "cloth_soft.X" (X in ke, kd, kf,
mu).

A scene with a cloth and a soft object has the two-way cloth-FEM contact of `physics.cloth_soft_contact` without
saying so (cloth vertices on the soft objects' boundary triangles and their vertices on the cloth's triangles),
with the library's `cloth_soft_contact.DEFAULT_PARAMS`.  A file states its constants like the rigid bodies'
against each other ([bodies], `pair_constants`), as knowns or unknowns, for every (cloth, soft object) pair of
the scene alike:

    [cloth_soft]                     # knowns: ke [N/m] > 0, kd [N s/m], kf [N s/m], mu >= 0 (per touching pair)
    ke = 200.0
    [unknowns."cloth_soft.mu"]       # an unknown: fitted (init, lower, upper, log as any unknown)
    init = 0.3
    lower = 0.05
    upper = 1.0

The thickness of the contact is not one of them: it is the cloth's and the soft object's contact radii
(`radius` of each object, which they also use against the ground and colliders).  The law is the ground's
(`[ground] damping`, `friction`, `damping_integration`), as in the Python API.  An unknown "cloth_soft.X" is a
`TiedParam` on every row of the model's `cloth_soft_X` (one row per (cloth, soft object) pair).  Checked before
any kernel runs (`check_cloth_soft_statements`): the scene has a cloth and a soft object, X is not both known
and unknown, and no object or collider is named "cloth_soft".

A constant the file states nowhere ([cloth_soft] or an unknown) is a guess, as the ground's are, so it is not
silently assumed (`unstated_cloth_soft_constants`): with [fit] contact_constants = "nuisance" it is fitted as a
nuisance unknown "cloth_soft.X" (`scene_unknowns.nuisance_unknowns`), else it is an assumed constant whose effect
on every estimate is reported (`assumed.assumed_constants`), both over `cloth_soft_prior_range`: PRIOR_RANGES
around the library's value for ke, kd and mu; for kf the slip speed below which friction is viscous, v = mu fn /
kf, from 1 mm/s to 1 m/s, with fn the weight a cloth vertex carries (the ground's kf range [1, 1000] N s/m is the
same rule for a ~1 N corner load, and would make a gram-weight cloth vertex's friction Coulomb at any speed); ke,
kd, kf then capped where the scene's step could integrate them on the lightest cloth-soft pair (the stability
pre-flight's safe limit, as `scene_unknowns.soft_contact_caps` does for the ground's).
"""
from __future__ import annotations

import numpy as np

from .scene_specs import CONTACT_PARAMS
from .scene_table import _Table

#: [m/s] the slip speeds between which friction turns from viscous to Coulomb over kf's prior range (as
#: PRIOR_RANGES["kf"] = [1, 1000] N s/m is for a ~1 N corner load: walking speed to millimetres per second)
SLIP_SPEED_RANGE = (1e-3, 1.0)

#: the [unknowns]-style object name of the cloth-soft constants (no object or collider may take it)
CLOTH_SOFT_OBJECT = "cloth_soft"


def parse_cloth_soft(file, data) -> dict:
    """The [cloth_soft] table: {X: value} for the constants it states; ke a positive number (a zero stiffness
    is no contact: put the objects in different scenes instead), kd, kf, mu numbers >= 0."""
    t = _Table(file, CLOTH_SOFT_OBJECT, data, CONTACT_PARAMS)
    return {x: t.number(x, positive=x == "ke", nonnegative=x != "ke") for x in CONTACT_PARAMS if t.has(x)}


def check_cloth_soft_statements(spec):
    """[cloth_soft] and [unknowns."cloth_soft.X"] (module docstring): the name not taken by an object or
    collider, X not both known and unknown, a cloth and a soft object in the scene.  Raises SceneError naming
    the key."""
    known = getattr(spec, "cloth_soft", {})
    unknown = [u for u in spec.unknowns if u.object == CLOTH_SOFT_OBJECT]
    if not known and not unknown:
        return
    check_cloth_soft_name(spec)
    for u in unknown:
        if u.param in known:
            raise spec.error("unknowns", u.target, f"[cloth_soft] states {u.param} = {known[u.param]:g} too: give "
                             "it either as a known in [cloth_soft] or as an unknown, not both")
    kinds = {o.kind for o in spec.objects.values()}
    missing = [k for k in ("cloth", "soft") if k not in kinds]
    if missing:
        where = (CLOTH_SOFT_OBJECT, next(iter(known))) if known else ("unknowns", unknown[0].target)
        raise spec.error(*where, "the cloths' contact constants against the soft objects need a cloth and a soft "
                         f"object in the scene; it has no {' and no '.join(missing)} object (types: "
                         f"{', '.join(sorted(kinds)) or 'none'})")


def check_cloth_soft_name(spec):
    """A scene whose objects or colliders use the name "cloth_soft" cannot name its cloth-soft constants."""
    if CLOTH_SOFT_OBJECT in spec.objects or CLOTH_SOFT_OBJECT in getattr(spec, "colliders", {}):
        raise spec.error("objects", CLOTH_SOFT_OBJECT, f"the name {CLOTH_SOFT_OBJECT!r} is reserved for the cloths' "
                         "contact constants against the soft objects (\"cloth_soft.ke\", ...): rename the object")


def set_stated_cloth_soft_constants(spec, builder):
    """Passes the [cloth_soft] knowns to `SceneBuilder.set_cloth_soft_contact` (every cloth against every soft
    object), before the model is finalized."""
    known = getattr(spec, "cloth_soft", {})
    if known:
        builder.set_cloth_soft_contact(**known)


def cloth_soft_unknown_param(u, model, kw):
    """The Param of an unknown "cloth_soft.X": one coordinate written to every row of `cloth_soft_X` (its
    gradient the sum over the rows)."""
    from ..fitting.optim import TiedParam
    if not hasattr(model, f"cloth_soft_{u.param}"):
        raise ValueError(f"unknowns: {u.target!r}: the model has no cloth-soft contact (its cloths and soft objects "
                         "share no contact group)")
    field = getattr(model, f"cloth_soft_{u.param}")
    rows = field.shape[0]

    def forward(theta):
        return np.full(rows, theta[0])

    return TiedParam([(field, forward, lambda theta, g: g.sum())], value=[u.init], **kw)


def unstated_cloth_soft_constants(spec) -> list:
    """[(X, value)] for the cloth-soft constants of a scene with a cloth and a soft object that the file states
    nowhere: not in [cloth_soft], no [unknowns."cloth_soft.X"] entry (a nuisance one, which stands for the unstated
    constant, excepted); value: the library's (`cloth_soft_contact.DEFAULT_PARAMS`)."""
    from ..physics.cloth_soft_contact import DEFAULT_PARAMS
    kinds = {o.kind for o in spec.objects.values()}
    if not {"cloth", "soft"} <= kinds:
        return []
    stated = set(getattr(spec, "cloth_soft", {})) | {u.param for u in spec.unknowns
                                                     if u.object == CLOTH_SOFT_OBJECT and not u.nuisance}
    return [(x, float(DEFAULT_PARAMS[x])) for x in CONTACT_PARAMS if x not in stated]


def cloth_soft_prior_range(spec, x, value) -> tuple:
    """(lower, upper) of the unstated cloth-soft constant X at `value` (module docstring): PRIOR_RANGES[X](value)
    for ke, kd, mu; for kf mu fn / SLIP_SPEED_RANGE reversed, fn = |gravity| x the cloths' mean vertex mass and mu
    the scene's (stated or default) cloth-soft mu; ke, kd, kf capped by `cloth_soft_caps` (lower then at most a
    tenth of the cap)."""
    from ..fitting.sensitivity import PRIOR_RANGES
    from ..physics.cloth_soft_contact import DEFAULT_PARAMS
    if x == "kf":
        mu = float(getattr(spec, "cloth_soft", {}).get("mu", DEFAULT_PARAMS["mu"]))
        weight = float(np.linalg.norm(spec.gravity)) * float(np.mean(_vertex_masses(spec, "cloth")))
        lower, upper = mu * weight / SLIP_SPEED_RANGE[1], mu * weight / SLIP_SPEED_RANGE[0]
    else:
        lower, upper = PRIOR_RANGES[x](value)
    cap = cloth_soft_caps(spec).get(x)
    if cap is not None and cap < upper:
        upper, lower = cap, min(lower, cap / 10.0)
    return float(lower), float(upper)


def cloth_soft_caps(spec) -> dict:
    """{"ke", "kd", "kf"}: the largest cloth-soft constants the scene's step can integrate on its lightest pair:
    the stability pre-flight's safe limit (`scene_unknowns.step_caps`) on the effective inverse mass 1 / m_c +
    1 / m_s of the lightest cloth vertex and the lightest soft vertex (what `ClothSoftContact.stability_limits`
    bounds a pair's by); only ke under the implicit damping law.  Empty without a known step."""
    from .scene_unknowns import step_caps
    cloth, soft = (float(np.min(_vertex_masses(spec, kind))) for kind in ("cloth", "soft"))
    return step_caps(spec, 1.0 / (1.0 / cloth + 1.0 / soft))


def _vertex_masses(spec, kind) -> np.ndarray:
    """The moving vertices' masses [kg] of every `kind` ("cloth" or "soft") object, as the builder spreads them."""
    from .scene_cloth import cloth_vertex_masses
    from .scene_unknowns import _soft_vertex_masses
    masses = cloth_vertex_masses if kind == "cloth" else _soft_vertex_masses
    m = np.concatenate([masses(o) for o in spec.objects.values() if o.kind == kind])
    return m[m > 0]

