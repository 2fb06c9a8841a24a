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

A user states the bodies' constants against each other like the ground's, as knowns or unknowns:

    [bodies]                       # knowns: the value of body_pair_X for the rigid objects taking it
    kd = 40.0
    [unknowns."bodies.mu"]         # an unknown: fitted (init, lower, upper, log as any unknown)
    init = 0.5
    lower = 0.1
    upper = 1.0

Either way X is then the file's ("stated"), not a guess: no nuisance or assumed "bodies.X" is added, and
"ground.X" (stated, unknown, nuisance or assumed) no longer moves `body_pair_X`.  The objects it applies to
("takers") are the rigid objects without their own X and without an [unknowns] entry fitting their X (an
object's own X sets its `body_X` and `body_pair_X` together and wins); there must be two of them at least
(`check_pair_statements`: a clear error before any kernel runs otherwise).
"""
from __future__ import annotations

from .scene_specs import CONTACT_PARAMS
from .scene_table import _Table

#: the [unknowns]-style object name of the body-body constants (no object or collider may take it)
PAIR_OBJECT = "bodies"

#: the library's contact defaults without a [ground] (`physics.rigid`)
_DEFAULTS = dict(ke=1e4, kd=10.0, kf=10.0, mu=0.5)


def parse_bodies(file, data) -> dict:
    """The [bodies] table: {X: value} for the constants it states (ke [N/m], kd [N s/m], kf [N s/m] per contact
    point, mu), each a number >= 0 as in [ground]."""
    t = _Table(file, PAIR_OBJECT, data, CONTACT_PARAMS)
    return {x: t.number(x, nonnegative=True) for x in CONTACT_PARAMS if t.has(x)}


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
    if spec.ground is not None and x in spec.ground_given or pair_stated(spec, x):
        return None
    takers = stated_pair_takers(spec, x)
    if len(takers) < 2:
        return None
    value = float(spec.ground[x]) if spec.ground is not None else _DEFAULTS[x]
    return takers, value


def pair_stated(spec, x) -> bool:
    """Whether the file states the bodies' X against each other: in [bodies] or as a (non-nuisance)
    [unknowns."bodies.X"] entry."""
    return x in getattr(spec, "bodies", {}) or any(u.object == PAIR_OBJECT and u.param == x and not u.nuisance
                                                   for u in spec.unknowns)


def pair_is_separate(spec, x) -> bool:
    """Whether `body_pair_X` of the takers is its own constant (stated, fitted, nuisance or assumed), so that
    "ground.X" must leave it alone."""
    return pair_stated(spec, x) or separate_pair_constant(spec, x) is not None


def stated_pair_takers(spec, x) -> list:
    """The rigid objects a "bodies.X" (stated, fitted, nuisance or assumed) applies to: no X of their own, no
    [unknowns] entry fitting their X ("bodies.X" itself does not count)."""
    fitted = {(u.object, u.tie or u.param) for u in spec.unknowns if u.object != PAIR_OBJECT}
    return pair_takers(spec, x, fitted)


def check_pair_statements(spec):
    """[bodies] and [unknowns."bodies.X"] (module docstring): the name not taken by an object or collider, X not
    both known and unknown, and at least two rigid objects taking it.  Raises SceneError naming the key."""
    stated = sorted(set(getattr(spec, "bodies", {})) | {u.param for u in spec.unknowns
                                                          if u.object == PAIR_OBJECT and not u.nuisance})
    if not stated:
        return
    check_pair_name(spec)
    for u in spec.unknowns:
        if u.object == PAIR_OBJECT and u.param in getattr(spec, "bodies", {}):
            raise spec.error("unknowns", u.target, f"[bodies] states {u.param} = {spec.bodies[u.param]:g} too: "
                             "give it either as a known in [bodies] or as an unknown, not both")
    rigid = [n for n, o in spec.objects.items() if o.kind == "rigid"]
    for x in stated:
        takers = stated_pair_takers(spec, x)
        if len(takers) >= 2:
            continue
        where = ("unknowns", f"{PAIR_OBJECT}.{x}") if x not in getattr(spec, "bodies", {}) else (PAIR_OBJECT, x)
        own = [n for n in rigid if n not in takers]
        raise spec.error(*where, "the rigid bodies' contact constant against each other needs two or more rigid "
                         f"objects taking it (no {x} of their own, none fitted): the scene has {len(rigid)} rigid "
                         f"object(s)" + (f" (with their own {x}, stated or fitted: {', '.join(own)})" if own else ""))


def write_stated_pair_constants(spec, model, handles):
    """Writes each [bodies] X into `body_pair_X` of its takers (the builder starts every `body_pair_X` at the
    object's own X, else the ground's)."""
    for x, value in getattr(spec, "bodies", {}).items():
        rows = [handles[n] for n in stated_pair_takers(spec, x)]
        field = getattr(model, f"body_pair_{x}")
        a = field.to_numpy()
        a[rows] = value
        field.from_numpy(a)


def check_pair_name(spec):
    """A scene whose objects or colliders use the name "bodies" cannot name its body-body constants."""
    if PAIR_OBJECT in spec.objects or PAIR_OBJECT in getattr(spec, "colliders", {}):
        raise spec.error("objects", PAIR_OBJECT, f"the name {PAIR_OBJECT!r} is reserved for the rigid bodies' "
                         "contact constants against each other (\"bodies.ke\", ...): rename the object")
