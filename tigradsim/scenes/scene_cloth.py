"""Cloth objects of a scene file (`type = "cloth"`): a triangle-mesh shell (`SceneBuilder.add_cloth`) with a
registered shell material, membrane damping and dihedral bending, touching the ground and the colliders as
particles do (e.g. a towel dropped over a ball: `[colliders.ball] kind = "sphere"`):

    [objects.cloth]
    type = "cloth"
    mesh = "cloth.obj"              # its rest (and initial) shape: a triangle mesh, open or closed, metres
    material = "membrane"           # a registered "shell" material (default "membrane": mu, lam [N/m])
    params = {mu = 50.0, lam = 100.0}
    damping = 0.05                  # membrane damping on dF/dt [N s/m] (default 0)
    bending = 1e-3                  # dihedral bending stiffness per interior edge [N m/rad^2] (default 0: none)
    bending_damping = 0.0           # [N m s/rad^2]
    mass = 0.3                      # the whole cloth [kg] (weighed), or density [kg/m^2]
    radius = 0.005                  # contact radius [m] (half its thickness; default 0.005: left out, an
                                    # assumed constant over [0, 0.01], scenes/assumed.py)
    position, rotation, velocity, angular_velocity, color, scale   # as every object's

Unknowns: "cloth.PARAM" for each of the material's parameters ("cloth.mu", "cloth.lam"), "cloth.damping",
"cloth.bending" and "cloth.bending_damping"; a cloth with a bending unknown gets bending edges even where the file
states no bending (the unknown's init is its value).  The cloth's contact constants are the ground's / the
colliders' (as a soft object's particles: [fit] contact_constants covers them)."""
from __future__ import annotations

import numpy as np

CLOTH_KEYS = ("type", "position", "rotation", "velocity", "angular_velocity", "color", "mesh", "material", "params",
              "damping", "bending", "bending_damping", "mass", "density", "radius", "scale")
BENDING_PARAMS = ("bending", "bending_damping")


def parse_cloth_object(t, base, obj):
    """Fill ObjectSpec `obj` from the `type = "cloth"` table `t` (errors name the key, before any kernel runs)."""
    from ..core.registry import get_material, list_materials
    from .scene_objects import _one_of, read_welded_obj

    if not t.has("mesh"):
        t.fail("mesh", "missing (required): the cloth's rest mesh, a triangle OBJ file")
    v, f, obj.source = read_welded_obj(t, base)
    f = np.asarray(f, dtype=np.int64)
    if f.ndim != 2 or f.shape[1] != 3:
        t.fail("mesh", f"expected triangles, got faces of shape {f.shape}")
    x = np.asarray(v, dtype=np.float64)
    area = 0.5 * np.linalg.norm(np.cross(x[f[:, 1]] - x[f[:, 0]], x[f[:, 2]] - x[f[:, 0]]), axis=1)
    if not np.all(area > 0):
        k = int(np.nonzero(~(area > 0))[0][0])
        t.fail("mesh", f"triangle {k} ({f[k].tolist()}) has zero area")
    obj.vertices, obj.faces = x, f
    obj.material = t.string("material", "membrane", choices=list_materials("shell"))
    mat = get_material(obj.material)
    params = t.table("params", {})
    from .scene_table import _Table
    p = _Table(t.file, f"{t.section}.params", params, tuple(mat.params))
    obj.params = {k: p.number(k, nonnegative=True) for k in params}
    missing = [k for k in mat.params if k not in obj.params]
    if missing:
        t.fail("params", f"missing {', '.join(missing)} of material {obj.material!r} (its parameters: "
                         f"{', '.join(mat.params)})")
    obj.damping = t.number("damping", 0.0, nonnegative=True)
    obj.bending = t.number("bending", 0.0, nonnegative=True)
    obj.bending_damping = t.number("bending_damping", 0.0, nonnegative=True)
    key = _one_of(t, ("mass", "density"))
    setattr(obj, key, t.number(key, positive=True))
    obj.contact_radius = t.number("radius", 0.005, nonnegative=True)
    obj.contact_radius_stated = t.has("radius")


def cloth_rest_area(obj) -> float:
    """The rest mesh's area [m^2] (file units, after `scale`)."""
    return float(_triangle_areas(obj).sum())


def cloth_density(obj) -> float:
    """[kg/m^2]: the file's `density`, or its `mass` over the rest area."""
    return obj.density if obj.density is not None else obj.mass / cloth_rest_area(obj)


def cloth_vertex_masses(obj) -> np.ndarray:
    """(V,) vertex masses [kg] of a cloth ObjectSpec as the builder spreads them (`physics.cloth`: each vertex a
    third of each adjacent triangle's mass)."""
    mass = np.zeros(len(obj.vertices))
    np.add.at(mass, np.asarray(obj.faces).reshape(-1), np.repeat(cloth_density(obj) * _triangle_areas(obj) / 3.0, 3))
    return mass


def _triangle_areas(obj) -> np.ndarray:
    x, f = np.asarray(obj.vertices, dtype=np.float64), np.asarray(obj.faces)
    return 0.5 * np.linalg.norm(np.cross(x[f[:, 1]] - x[f[:, 0]], x[f[:, 2]] - x[f[:, 0]]), axis=1)


def add_cloth_object(builder, obj, spec, M):
    """`builder.add_cloth` for cloth ObjectSpec `obj` (file axes; M the file's axes to the world); returns the
    ClothHandle.  An unknown bending parameter's init stands in for an unstated (zero) bending value, so that
    the cloth has the bending edges the unknown writes into."""
    from ..physics.rigid import quat_to_matrix_np

    x = obj.position + obj.vertices @ quat_to_matrix_np(obj.rotation).T          # file axes, world positions
    centroid = x.mean(axis=0)
    vel = obj.velocity + np.cross(obj.angular_velocity, x - centroid)
    density = cloth_density(obj)
    bending = {k: getattr(obj, k) for k in BENDING_PARAMS}
    for u in spec.unknowns:
        if u.object == obj.name and u.param in BENDING_PARAMS and bending[u.param] == 0.0:
            bending[u.param] = float(u.init)
    return builder.add_cloth(x @ M.T, obj.faces, material=obj.material, params=dict(obj.params),
                             density=density, damping=obj.damping, bending_stiffness=bending["bending"],
                             bending_damping=bending["bending_damping"], drag=0.0, lift=0.0, velocity=vel @ M.T,
                             radius=obj.contact_radius)


def cloth_allowed_unknowns(obj) -> tuple:
    """The [unknowns] parameters a cloth object has."""
    from ..core.registry import get_material
    return tuple(get_material(obj.material).params) + ("damping",) + BENDING_PARAMS


def cloth_param_rows(model, handle) -> np.ndarray:
    """Rows of model.cloth_params that the cloth `handle`'s triangles use."""
    tri = model.cloth_indices.to_numpy()[:, 0]
    mine = (tri >= handle.particle_start) & (tri < handle.particle_start + handle.particle_count)
    return np.unique(model.cloth_param_row.to_numpy()[mine])


def cloth_bend_rows(model, handle) -> np.ndarray:
    """Rows of model.cloth_bending_stiffness / _damping that the cloth `handle`'s bending edges use."""
    if not getattr(model, "cloth_edge_count", 0):
        return np.zeros(0, dtype=np.int64)
    q = model.cloth_bend_indices.to_numpy()[:, 2]
    mine = (q >= handle.particle_start) & (q < handle.particle_start + handle.particle_count)
    return np.unique(model.cloth_bend_row.to_numpy()[mine])


def cloth_unknown_param(u, model, handle, obj, kw):
    """The Param of cloth unknown `u` ("OBJ.mu", "OBJ.damping", "OBJ.bending", ...) on the built model, its
    init written: a `ColumnParam` on the cloth's rows of cloth_params (a material parameter, or damping in the
    last column), a `TiedParam` on its rows of cloth_bending_stiffness / cloth_bending_damping."""
    from ..core.registry import get_material
    from ..fitting.optim import ColumnParam, TiedParam

    if u.param in BENDING_PARAMS:
        field = getattr(model, "cloth_bending_stiffness" if u.param == "bending" else "cloth_bending_damping")
        rows = cloth_bend_rows(model, handle)
        idx = list(rows)

        def forward(theta):
            values = field.to_numpy().astype(np.float64)
            values[idx] = theta[0]
            return values

        return TiedParam([(field, forward, lambda theta, g: g[idx].sum())], value=[u.init], **kw)
    rows = cloth_param_rows(model, handle)
    ncol = model.cloth_params.shape[1]
    col = ncol - 1 if u.param == "damping" else list(get_material(obj.material).params).index(u.param)
    table = model.cloth_params.to_numpy()
    table[rows, col] = u.init
    model.cloth_params.from_numpy(table)
    return ColumnParam(model.cloth_params, col, rows=rows, **kw)
