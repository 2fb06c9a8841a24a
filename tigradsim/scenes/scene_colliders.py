"""The [colliders.NAME] sections of a scene file: static colliders (`SceneBuilder.add_collider`) that the objects
touch, e.g. a ramp or a table:

    [colliders.ramp]
    kind = "plane"                 # "plane" | "sphere" | "box" | "capsule" | "mesh"
    normal = [-0.42, 0.91, 0.0]    # planes: the outward normal (or rotation = [x, y, z, w]; default: up)
    position = [0.0, 0.0, 0.0]     # a point of the plane / the shape's centre
    mu = 0.2                       # ke, kd, kf, mu (default: the [ground]'s, else 1e4, 10, 10, 0.5)
    contact_law = {friction = "huber"}

Shapes and their keys: "sphere" radius; "box" half_extents = [hx, hy, hz]; "capsule" radius, half_length (its
axis along the file's up axis before `rotation`); "mesh" mesh = "table.obj" (closed, outward-oriented OBJ),
scale, resolution (of its signed-distance grid, default 32).  Sizes and meshes are in the file's axes (a box's
half extents along the file's x, y, z); a plane's default normal is the file's up axis.  Every collider's
ke, kd, kf, mu and "height" (its position along the up axis [m]) may be unknowns: "ramp.mu", "table.height".
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

import numpy as np

from .scene_specs import CONTACT_PARAMS
from .scene_table import SceneError, _show, _Table, _typename

KINDS = ("plane", "sphere", "box", "capsule", "mesh")
# what each kind takes besides the common keys
_SHAPE_KEYS = {"plane": ("normal",), "sphere": ("radius",), "box": ("half_extents",),
               "capsule": ("radius", "half_length"), "mesh": ("mesh", "scale", "resolution")}
_COMMON = ("kind", "position", "rotation", "contact_law") + CONTACT_PARAMS
# parameters a collider may have as an [unknowns] entry
COLLIDER_PARAMS = CONTACT_PARAMS + ("height",)
_DEFAULTS = dict(ke=1e4, kd=10.0, kf=10.0, mu=0.5)


@dataclass
class ColliderSpec:
    """One collider, in the file's axes: `size` the add_collider size in the file's axes (a box's half extents,
    (radius, half_length), a sphere's radius, a mesh's scale; None for a plane), `mesh` (vertices, faces) or
    None, `normal` (planes given by one) or None, `contact` ke, kd, kf, mu, `law` its contact law options."""
    name: str
    kind: str
    size: Optional[np.ndarray] = None
    mesh: Optional[tuple] = None
    resolution: int = 32
    position: np.ndarray = field(default_factory=lambda: np.zeros(3))
    rotation: np.ndarray = field(default_factory=lambda: np.array([0.0, 0.0, 0.0, 1.0]))
    normal: Optional[np.ndarray] = None
    contact: dict = field(default_factory=dict)
    law: dict = field(default_factory=dict)
    given: frozenset = frozenset()            # the contact constants the file states (the others: the ground's)


def analytic_size(t: _Table, kind: str, required=True):
    """The size of a "sphere" (radius), "box" (half_extents) or "capsule" (radius, half_length) from table `t`,
    in the file's axes, as `add_collider` / `add_rigid_body(shape_size=)` take it; None when `required` is
    False and no size key is given.  Colliders and rigid objects' `shape` tables share these keys."""
    keys = _SHAPE_KEYS[kind]
    if not required and not any(t.has(k) for k in keys):
        return None
    if kind == "sphere":
        return np.array([t.number("radius", positive=True)])
    if kind == "box":
        return t.array("half_extents", (3,), positive=True)
    return np.array([t.number("radius", positive=True), t.number("half_length", positive=True)])


def file_axes_size(kind: str, size, M):
    """A shape size given in the file's axes, in tigradsim's y-up axes (M: the file's axes to the world): a
    box's half extents follow its axes (|M h|); a radius, a capsule's (radius, half length along the up axis)
    and a scale do not change."""
    if size is None or kind != "box":
        return size
    return np.abs(M @ size)


def _parse_collider(file, base, name, data, ground) -> ColliderSpec:
    from .scene_objects import _parse_law, _quaternion

    sec = f"colliders.{name}"
    if not isinstance(data, dict):
        raise SceneError(file, None, sec, f"expected a table, got {_typename(data)} {_show(data)}")
    kind = data.get("kind", None)
    if kind is None:
        raise SceneError(file, sec, "kind", f"missing (required): one of {', '.join(KINDS)}")
    if kind not in KINDS:                     # before the keys, which depend on it
        raise SceneError(file, sec, "kind", f"expected one of {', '.join(KINDS)}, got {_show(kind)}")
    t = _Table(file, sec, data, _COMMON + _SHAPE_KEYS[kind])
    c = ColliderSpec(name=name, kind=kind)
    c.position = t.array("position", (3,), default=np.zeros(3))
    if kind == "plane" and t.has("normal"):
        if t.has("rotation"):
            t.fail("normal / rotation", "give one of normal and rotation, not both")
        c.normal = t.array("normal", (3,))
        if not np.linalg.norm(c.normal) > 0:
            t.fail("normal", f"expected a nonzero vector, got {c.normal.tolist()}")
    c.rotation = _quaternion(t, "rotation")
    if kind in ("sphere", "box", "capsule"):
        c.size = analytic_size(t, kind)
    elif kind == "mesh":
        from ..io.meshes import load_obj
        p = t.path("mesh", base=base)
        try:
            c.mesh = load_obj(p)
        except (ValueError, IndexError, OSError) as exc:
            t.fail("mesh", f"cannot read {p} as an OBJ mesh: {exc}")
        c.size = np.array([t.number("scale", 1.0, positive=True)])
        c.resolution = t.integer("resolution", 32, minimum=4)
    defaults = {k: (ground or _DEFAULTS)[k] for k in CONTACT_PARAMS}
    c.contact = {k: t.number(k, defaults[k], positive=k == "ke", nonnegative=k != "ke") for k in CONTACT_PARAMS}
    c.given = frozenset(k for k in CONTACT_PARAMS if t.has(k))
    if t.has("contact_law"):
        c.law = _parse_law(_Table(file, f"{sec}.contact_law", t.table("contact_law"),
                                  ("damping", "friction", "friction_velocity", "damping_integration")))
    elif ground is not None:                  # as a rigid object: the ground's law unless it has its own
        c.law = dict(ground.get("law", {}))
    return c


def parse_colliders(file, base, data, ground, objects) -> dict:
    """name -> ColliderSpec of the file's [colliders.NAME] tables (file order)."""
    if not isinstance(data, dict):
        raise SceneError(file, None, "colliders", f"expected tables [colliders.NAME], got {_typename(data)}")
    out = {}
    for name, cd in data.items():
        if name == "ground" or name in objects:
            raise SceneError(file, "colliders", name, f"the name {name!r} is taken by "
                             f"{'the ground' if name == 'ground' else 'an object'}: colliders and objects share "
                             "the names [unknowns] refer to")
        out[name] = _parse_collider(file, base, name, cd, ground)
    return out


def collider_arguments(c: ColliderSpec, M) -> dict:
    """`SceneBuilder.add_collider` arguments of collider `c` in tigradsim's y-up world; M the file's axes to the
    world (`SceneSpec.axes`)."""
    from ..physics.rigid_pose import quat_from_normal

    if c.normal is not None:
        rotation = quat_from_normal(M @ c.normal)
    else:
        rotation = np.concatenate([M @ c.rotation[:3], c.rotation[3:]])          # M R M^T
    size = None if c.size is None else c.size.copy()
    mesh = None
    size = file_axes_size(c.kind, size, M)      # a box's half extents along its own (world-mapped) axes
    if c.kind == "mesh":
        mesh = (c.mesh[0] @ M.T, c.mesh[1])
    return dict(kind=c.kind, size=size, position=M @ c.position, rotation=rotation, mesh=mesh,
                resolution=c.resolution, **c.contact, **c.law)


def add_scene_colliders(builder, spec) -> dict:
    """Add the spec's colliders to a SceneBuilder; name -> collider index.  Errors name the file's section."""
    out = {}
    for name, c in getattr(spec, "colliders", {}).items():
        try:
            out[name] = builder.add_collider(**collider_arguments(c, spec.axes))
        except (ValueError, TypeError) as exc:
            raise spec.error(f"colliders.{name}", c.kind, str(exc)) from None
    return out


def collider_penetrations(spec, placed) -> list:
    """(object label, collider name, depth [m]) of every object (`Placed`, world axes) that starts inside a
    collider of the spec deeper than resting contact (`tigradsim.physics.colliders.Colliders.penetrations`)."""
    from ..physics.colliders import Colliders
    from ..sim.builder import SceneBuilder

    colliders = getattr(spec, "colliders", {})
    if not colliders:
        return []
    builder = SceneBuilder()
    names = list(colliders)
    add_scene_colliders(builder, spec)
    return [(p.label, names[c], depth) for p, c, depth, _ in builder.component(Colliders).penetrations(placed)]


def ground_takers(spec, x, fitted=()) -> list:
    """Indices of the spec's colliders that take the ground's contact constant `x` (the file states no X of
    their own and no [unknowns] entry "NAME.X" fits it; `fitted` the (object, param) pairs fitted): a
    "ground.X" unknown, nuisance or assumed constant moves theirs with the ground's."""
    return [i for i, (name, c) in enumerate(getattr(spec, "colliders", {}).items())
            if x not in c.given and (name, x) not in fitted]


def collider_param(model, index, param):
    """(field, entry) of a collider unknown: ke ... mu -> collider_X[index]; height -> collider_pose[index, 1]."""
    if param == "height":
        return model.collider_pose, (index, 1)
    return getattr(model, f"collider_{param}"), index


def unstated_collider_constants(spec) -> list:
    """(collider name, X, value) of every contact constant X in ke, kd, kf, mu that a [colliders.NAME] table
    does not state and no [unknowns] entry ("NAME.X") fits, in a scene WITHOUT a [ground]: its value is the
    library's default, an assumption about the collider's material, reported ("NAME.X") by
    `assumed.assumed_constants` and fitted by [fit] contact_constants = "nuisance".  With a [ground], such a
    collider takes the ground's X and moves with "ground.X" (`ground_takers`): the file gives one surface
    constant for both, so one assumed (or nuisance) constant carries it."""
    if spec.ground is not None:
        return []
    fitted = {(u.object, u.tie or u.param) for u in spec.unknowns}
    return [(name, x, float(c.contact[x])) for name, c in getattr(spec, "colliders", {}).items()
            for x in CONTACT_PARAMS if x not in c.given and (name, x) not in fitted]
