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
and unknown, and no object or collider is named "cloth_soft".  Unstated constants keep the library's values;
they are not (yet) assumed constants or nuisance unknowns of [fit] contact_constants.
"""
from __future__ import annotations

import numpy as np

from .scene_specs import CONTACT_PARAMS
from .scene_table import _Table

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
    if CLOTH_SOFT_OBJECT in spec.objects or CLOTH_SOFT_OBJECT in getattr(spec, "colliders", {}):
        raise spec.error("objects", CLOTH_SOFT_OBJECT, f"the name {CLOTH_SOFT_OBJECT!r} is reserved for the cloths' "
                         "contact constants against the soft objects (\"cloth_soft.ke\", ...): rename the object")
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
