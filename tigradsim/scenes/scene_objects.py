"""The [objects.NAME] sections of a scene file (rigid bodies, soft solids and cloths: shape, mesh, mass, material,
contact law, initial pose and velocity) and the [[forces]] it applies to them.  Cloths: scene_cloth.py."""
from __future__ import annotations

import difflib
import math
import os

import numpy as np

from .scene_specs import CONTACT_PARAMS, ForceSpec, ObjectSpec
from .scene_table import SceneError, _show, _Table, _typename

_COMMON_OBJ = ("type", "position", "rotation", "velocity", "angular_velocity", "color")

_RIGID_KEYS = _COMMON_OBJ + ("mesh", "box", "mass", "density", "scale", "contact_radius", "contact_law", "shape") + \
    CONTACT_PARAMS

_SOFT_KEYS = _COMMON_OBJ + ("tetgen", "mesh", "nodes", "tets", "tet_box", "tet_ball", "material", "params", "density",
                            "mass", "node_mass", "mass_distribution", "damping", "damping_model", "radius", "scale")


def _quaternion(t: _Table, key):
    q = t.array(key, (4,), default=None)
    if q is None:
        return np.array([0.0, 0.0, 0.0, 1.0])
    n = float(np.linalg.norm(q))
    if abs(n - 1.0) > 1e-6:
        t.fail(key, f"expected a unit quaternion (x, y, z, w), got norm {n:.9g}: {q.tolist()}")
    return q / n



def _parse_object(file, base, name, data):
    sec = f"objects.{name}"
    if not isinstance(data, dict):
        raise SceneError(file, None, sec, f"expected a table, got {_typename(data)} {_show(data)}")
    kind = data.get("type", None)
    if kind is None:
        raise SceneError(file, sec, "type", 'missing (required): "rigid", "soft", "cloth" or "mpm"')
    from .scene_cloth import CLOTH_KEYS
    from .scene_mpm import MPM_KEYS
    t = _Table(file, sec, data, {"rigid": _RIGID_KEYS, "soft": _SOFT_KEYS, "mpm": MPM_KEYS,
                                 "cloth": CLOTH_KEYS}.get(kind, _COMMON_OBJ))
    t.string("type", choices=("rigid", "soft", "cloth", "mpm"))
    obj = ObjectSpec(name=name, kind=kind, vertices=np.zeros((0, 3)))
    obj.position = t.array("position", (3,), default=np.zeros(3))
    obj.rotation = _quaternion(t, "rotation")
    obj.velocity = t.array("velocity", (3,), default=np.zeros(3))
    obj.angular_velocity = t.array("angular_velocity", (3,), default=np.zeros(3)) if kind != "mpm" else np.zeros(3)
    obj.color = t.array("color", (3,), default=None)
    if obj.color is not None and (np.any(obj.color < 0) or np.any(obj.color > 1)):
        t.fail("color", f"expected RGB values in [0, 1], got {obj.color.tolist()}")
    scale = t.number("scale", 1.0, positive=True)
    if kind == "rigid":
        _parse_rigid(t, base, obj)
    elif kind == "mpm":
        from .scene_mpm import parse_mpm_object
        parse_mpm_object(t, base, obj)
        if obj.box_size is not None:
            obj.box_size = obj.box_size * scale
    elif kind == "cloth":
        from .scene_cloth import parse_cloth_object
        parse_cloth_object(t, base, obj)
    else:
        _parse_soft(t, base, obj)
    obj.vertices = obj.vertices * scale
    return obj



def _one_of(t, keys):
    given = [k for k in keys if t.has(k)]
    if len(given) != 1:
        msg = "missing: give one of " if not given else f"give only one of (got {', '.join(given)}): "
        t.fail(" / ".join(keys), msg + ", ".join(keys))
    return given[0]



def read_welded_obj(t, base):
    """The OBJ file named by key "mesh" of table `t` (relative to `base`), its per-face corners (as OBJ
    exporters write them) welded into one surface, the same rule as add_rigid_body: (vertices, faces,
    path).  A file that cannot be read or has no faces is an error naming the key."""
    from ..io.meshes import load_obj, weld_vertices

    p = t.path("mesh", base=base)
    try:
        v, f = load_obj(p)
    except (ValueError, IndexError, OSError) as exc:
        t.fail("mesh", f"cannot read {os.path.basename(p)} as an OBJ mesh: {exc}")
    if len(f) == 0:
        t.fail("mesh", f"{os.path.basename(p)} has no faces")
    diag = float(np.linalg.norm(np.ptp(np.asarray(v, dtype=np.float64), axis=0)))
    v, f, _ = weld_vertices(v, f, 1e-6 * diag)
    return v, f, p


def _parse_rigid(t, base, obj):
    from ..io.meshes import box_surface
    from ..physics.rigid_mass import check_closed_mesh

    source = _one_of(t, ("mesh", "box"))
    if source == "mesh":
        v, f, obj.source = read_welded_obj(t, base)
    else:
        size = t.array("box", (3,), positive=True)
        v, f = box_surface(size)
        obj.source = f"box {size.tolist()}"
    try:
        v, f = check_closed_mesh(v, f)
    except (ValueError, IndexError, TypeError) as exc:
        t.fail(source, f"not a closed, consistently oriented surface: {exc}")
    from ..physics.rigid_mass import mass_properties
    volume = mass_properties(v, f)[0]
    if not volume > 0:
        t.fail(source, f"the surface encloses a non-positive volume ({volume:g} m^3): faces must be ordered "
                       "counter-clockwise seen from outside")
    obj.vertices, obj.faces = v, f
    if t.has("mass") and t.has("density"):
        t.fail("mass / density", "give one of mass and density, not both")
    obj.mass = t.number("mass", None, positive=True)
    obj.density = t.number("density", None, positive=True)
    if obj.mass is None and obj.density is None:
        t.fail("mass / density", "missing: give mass [kg] or density [kg/m^3]")
    for k in CONTACT_PARAMS:
        v = t.number(k, None, nonnegative=True)
        if v is not None:
            obj.contact[k] = v
    obj.contact_radius = t.number("contact_radius", 0.0, nonnegative=True)
    if t.has("contact_law"):
        obj.law = _parse_law(_Table(t.file, f"{t.section}.contact_law", t.table("contact_law"),
                                    ("damping", "friction", "friction_velocity")))
    if t.has("shape"):
        obj.shape = _parse_body_shape(t)


def _parse_body_shape(t):
    """A rigid object's collision shape (what the other bodies touch; `physics.body_shapes`), as
    {"shape": kind, "shape_size": size in the file's axes or None, "shape_resolution": int or None}:

        shape = "sphere"                                 # the default size: enclosing the mesh
        shape = {kind = "capsule", radius = 0.05, half_length = 0.1}    # the colliders' size keys
        shape = {kind = "mesh", scale = 1.0, resolution = 32}           # the object's own mesh
    """
    from ..physics.body_shapes import BODY_SHAPES
    from .scene_colliders import _SHAPE_KEYS, analytic_size

    if isinstance(t.data["shape"], str):
        return {"shape": t.string("shape", choices=BODY_SHAPES), "shape_size": None, "shape_resolution": None}
    raw = t.table("shape")
    kind = raw.get("kind", None) if isinstance(raw, dict) else None
    if kind is None:
        t.fail("shape", f"missing kind: expected a shape name ({', '.join(BODY_SHAPES)}) or a table "
                        f"{{kind = ..., size keys}}, got {_show(raw)}")
    if kind not in BODY_SHAPES:
        t.fail("shape", f"kind: expected one of {', '.join(BODY_SHAPES)}, got {_show(kind)}")
    keys = ("scale", "resolution") if kind == "mesh" else _SHAPE_KEYS[kind]
    g = _Table(t.file, f"{t.section}.shape", raw, ("kind",) + keys)
    if kind == "mesh":
        scale = g.number("scale", None, positive=True)
        return {"shape": kind, "shape_size": None if scale is None else np.array([scale]),
                "shape_resolution": g.integer("resolution", None, minimum=4)}
    return {"shape": kind, "shape_size": analytic_size(g, kind, required=False), "shape_resolution": None}



def _parse_law(g):
    """damping = "capped" | "uncapped", friction = "capped" | "huber" | "warp", friction_velocity (m/s), and, where
    the table allows it ([ground], a collider's contact_law), damping_integration = "explicit" | "implicit"."""
    from ..physics.contact import DAMPING_INTEGRATIONS, DAMPING_LAWS, FRICTION_LAWS
    law = {"damping": g.string("damping", None, choices=DAMPING_LAWS),
           "friction": g.string("friction", None, choices=FRICTION_LAWS),
           "friction_velocity": g.number("friction_velocity", None, positive=True),
           "damping_integration": g.string("damping_integration", None, choices=DAMPING_INTEGRATIONS)}
    if law["friction_velocity"] is not None and law["friction"] in (None, "capped"):
        g.fail("friction_velocity", 'only used with friction = "huber" or "warp"')
    return {k: v for k, v in law.items() if v is not None}



def _parse_soft(t, base, obj):
    from ..io.meshes import load_tetgen, tet_ball, tet_box
    from ..core.registry import get_material, list_materials

    source = _one_of(t, ("tetgen", "mesh", "nodes", "tet_box", "tet_ball"))
    if t.has("tets") and source != "nodes":
        t.fail("tets", "only with nodes = ... (the node array the tets index)")
    if source in ("mesh", "nodes"):
        v, tets, obj.source = _soft_mesh_input(t, base, source)
    elif source == "tetgen":
        p = t.path("tetgen", base=base)
        ele = os.path.splitext(p)[0] + ".ele"
        if not os.path.exists(ele):
            t.fail("tetgen", f"{os.path.basename(p)} needs its .ele file beside it: {ele} not found")
        try:
            v, tets = load_tetgen(p, ele)
        except (ValueError, IndexError, OSError) as exc:
            t.fail("tetgen", f"cannot read the TetGen mesh: {exc}")
        obj.source = p
    elif source == "tet_box":
        g = _Table(t.file, f"{t.section}.tet_box", t.data["tet_box"], ("cells", "size"))
        cells = g.array("cells", (3,), positive=True)
        if np.any(cells != np.round(cells)):
            g.fail("cells", f"expected 3 positive integers, got {cells.tolist()}")
        size = g.array("size", (3,), positive=True)
        v, tets = tet_box(*cells.astype(int), size=size, origin=-0.5 * size)
        obj.source = f"tet_box cells {cells.astype(int).tolist()} size {size.tolist()}"
    else:
        g = _Table(t.file, f"{t.section}.tet_ball", t.data["tet_ball"], ("radius", "resolution"))
        radius = g.number("radius", positive=True)
        res = g.integer("resolution", 2, minimum=1)
        if res > 4:
            g.fail("resolution", f"expected 1 to 4 (level {res} would have {10 * 4 ** res + 2} surface vertices)")
        v, tets = tet_ball(radius, resolution=res)
        obj.source = f"tet_ball radius {radius} resolution {res}"
    obj.vertices, obj.tets = np.asarray(v, dtype=np.float64), np.asarray(tets)
    names = list_materials("tet")
    obj.material = t.string("material", "neo_hookean", choices=names)
    mat = get_material(obj.material)
    params = t.table("params", {})
    allowed = tuple(mat.params) + ("damping",)
    p = _Table(t.file, f"{t.section}.params", params, allowed)
    obj.params = {k: p.number(k, positive=k != "damping", nonnegative=True) for k in params}
    obj.damping = t.number("damping", 0.0, nonnegative=True)
    if "damping" in obj.params:
        if t.has("damping"):
            t.fail("damping", "given twice (also in params)")
        obj.damping = obj.params.pop("damping")
    from ..physics.damping import DAMPING_MODELS
    obj.damping_model = t.string("damping_model", "deformation_rate", choices=tuple(DAMPING_MODELS))
    mass_key = _one_of(t, ("density", "mass", "node_mass"))
    if mass_key == "node_mass":
        obj.node_mass = _node_mass(t, base, len(obj.vertices))
        if t.has("mass_distribution"):
            t.fail("mass_distribution", "node_mass gives the per-vertex masses themselves: mass_distribution "
                                        "spreads a mass or density (leave it out)")
    else:
        setattr(obj, mass_key, t.number(mass_key, positive=True))
    from ..physics.fem import MASS_DISTRIBUTIONS
    obj.mass_distribution = t.string("mass_distribution", "volume", choices=MASS_DISTRIBUTIONS)
    obj.contact_radius = t.number("radius", 0.01, nonnegative=True)
    obj.contact_radius_stated = t.has("radius")



def _array_value(t, key, base):
    """An array given inline (a TOML list) or as a file name (.npy or a text table), as numpy."""
    from ..io.mesh_io import MeshFileError, load_array
    v = t.data[key]
    if isinstance(v, str):
        try:
            return load_array(t.path(key, base=base))
        except MeshFileError as exc:
            t.fail(key, str(exc))
    if not isinstance(v, list):
        t.fail(key, f"expected a file name or an array, got {_typename(v)} {_show(v)}")
    try:
        arr = np.asarray(v, dtype=np.float64)
    except (TypeError, ValueError):
        t.fail(key, f"expected a rectangular array of numbers, got {_show(v)}")
    return arr



def _soft_mesh_input(t, base, source):
    """(vertices, tets, source) of mesh = "file" (any meshio volume format, or TetGen) or nodes / tets arrays."""
    from ..io.mesh_io import MeshFileError, load_mesh, tets_from_arrays
    if source == "mesh":
        p = t.path("mesh", base=base)
        try:
            v, tets = load_mesh(p, cells="tetra")
        except (MeshFileError, ValueError, IndexError, OSError) as exc:
            t.fail("mesh", f"cannot read a tet mesh: {exc}")
        return v, tets, p
    if not t.has("tets"):
        t.fail("tets", "missing: nodes = ... needs tets = ... (0-based vertex indices, 4 a row)")
    nodes, tets = _array_value(t, "nodes", base), _array_value(t, "tets", base)
    try:
        v, tets = tets_from_arrays(nodes, tets, source="nodes / tets")
    except MeshFileError as exc:
        t.fail("nodes / tets", str(exc))
    return v, tets, f"nodes / tets ({len(v)} nodes, {len(tets)} tets)"



def _node_mass(t, base, count):
    """node_mass: a number (every vertex alike), a list or a file of `count` positive masses [kg]."""
    if isinstance(t.data["node_mass"], (int, float)) and not isinstance(t.data["node_mass"], bool):
        return np.full(count, t.number("node_mass", positive=True))
    m = _array_value(t, "node_mass", base).reshape(-1)
    if m.shape != (count,):
        t.fail("node_mass", f"expected one mass per vertex ({count}), got {m.size}")
    if not np.all(np.isfinite(m)) or np.any(m <= 0):
        k = int(np.nonzero(~(np.isfinite(m) & (m > 0)))[0][0])
        t.fail("node_mass", f"expected positive finite masses [kg], got {m[k]} at vertex {k}")
    return m



def _parse_force(file, k, data, objects):
    sec = f"forces.{k}"
    t = _Table(file, sec, data, ("object", "force", "point", "torque", "start", "end"))
    name = t.string("object")
    if name not in objects:
        close = difflib.get_close_matches(name, list(objects), n=1)
        t.fail("object", f"no object named {name!r}" + (f"; did you mean {close[0]!r}?" if close else "")
               + f" (objects: {', '.join(objects) or 'none'})")
    if objects[name].kind != "rigid":
        t.fail("object", f"{name!r} is a {objects[name].kind} object: known forces act on rigid objects only")
    force = t.array("force", (3,), default=np.zeros(3))
    torque = t.array("torque", (3,), default=np.zeros(3))
    if not t.has("force") and not t.has("torque"):
        t.fail("force", "missing: give force [N] (and/or torque [N m])")
    start = t.number("start", 0.0, nonnegative=True)
    end = t.number("end", math.inf)
    if t.has("end") and not end > start:
        t.fail("end", f"expected end > start ({start}), got {end}")
    return ForceSpec(object=name, force=force, point=t.array("point", (3,), default=None), torque=torque,
                     start=start, end=end, index=k)
