"""The rigid bodies' contact constants against EACH OTHER in a scene file: "bodies.X" (X in ke, kd, kf, mu).

A rigid body touches the ground and colliders with its `body_X` and other bodies with its `body_pair_X`
(a pair takes the mean of its two bodies': `physics.body_contact`); a scene file gives both the same value
(the object's own X, else the [ground]'s, else the library default).  When the file states no X for the
bodies' contact with each other, that value is a guess, and not the same guess as the ground's: a box-box
contact here presses through 4 corners where another engine's (Warp's) presses through about 8 points, so
matching its motion takes about twice the per-point stiffness between the boxes while the ground's stays.
So one rule for every scene:

    X is a separate body-body constant "bodies.X" when the scene has two or more rigid objects that take
    the shared value (no X of their own in the file, no [unknowns] entry fits their X) and the file does
    not state X in [ground] (without a [ground]: always, the value is then the library default).

Such a "bodies.X" is a nuisance unknown with [fit] contact_constants = "nuisance"
(`scene_unknowns.nuisance_unknowns`), else an assumed constant (`assumed.assumed_constants`); either way
it moves `body_pair_X` of those bodies only, and "ground.X" then moves the ground's, the colliders' and
the bodies' `body_X` but not their `body_pair_X`.  Where the rule does not apply (one rigid object, or X
stated), "ground.X" moves `body_pair_X` of the bodies taking the ground's value too, as before.
"""
from __future__ import annotations

from .scene_specs import CONTACT_PARAMS

#: the [unknowns]-style object name of the body-body constants (no object or collider may take it)
PAIR_OBJECT = "bodies"

#: the library's contact defaults without a [ground] (`physics.rigid`)
_DEFAULTS = dict(ke=1e4, kd=10.0, kf=10.0, mu=0.5)


def pair_takers(spec, x, fitted=None) -> list:
    """Names of the spec's rigid objects whose body-body constant `x` is the shared (ground's or default)
    value: no X of their own and no [unknowns] entry on their X (`fitted`: (object, param) pairs fitted,
    ties resolved; default: the spec's unknowns)."""
    if fitted is None:
        fitted = {(u.object, u.tie or u.param) for u in spec.unknowns}
    return [n for n, o in spec.objects.items()
            if o.kind == "rigid" and x not in o.contact and (n, x) not in fitted]


def separate_pair_constant(spec, x):
    """(takers, value) when X is a separate "bodies.X" constant of the scene (module docstring's rule), else
    None.  takers: the rigid objects' names whose `body_pair_X` it sets; value: what the file gives them."""
    if x not in CONTACT_PARAMS:
        raise ValueError(f"x: expected one of {CONTACT_PARAMS}, got {x!r}")
    if spec.ground is not None and x in spec.ground_given:
        return None
    fitted = {(u.object, u.tie or u.param) for u in spec.unknowns if u.object != PAIR_OBJECT}
    takers = pair_takers(spec, x, fitted)
    if len(takers) < 2:
        return None
    value = float(spec.ground[x]) if spec.ground is not None else _DEFAULTS[x]
    return takers, value


def check_pair_name(spec):
    """A scene whose objects or colliders use the name "bodies" cannot name its body-body constants."""
    if PAIR_OBJECT in spec.objects or PAIR_OBJECT in getattr(spec, "colliders", {}):
        raise spec.error("objects", PAIR_OBJECT, f"the name {PAIR_OBJECT!r} is reserved for the rigid bodies' "
                         "contact constants against each other (\"bodies.ke\", ...): rename the object")
