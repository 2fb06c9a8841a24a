"""MPM matter in a scene file: the [mpm_grid] section and [objects.NAME] type = "mpm" (elastic jelly,
plasticine, sand, fluids: `tigradsim.physics.mpm`), parsed and validated before any kernel runs.

    [mpm_grid]     lower = [x, y, z], upper = [x, y, z] (the domain [m], file axes; walls on its six faces,
                   the lowest one the floor), resolution = cells along its largest extent (integer >= 4),
                   mu = Coulomb friction of the walls (default 0.5), ground = true (a floor at the plane
                   through the origin normal to `up`, inside a taller domain), boundary = "sticky" | "slip" |
                   "separate" (how the matter meets colliders; `SceneBuilder.add_mpm_grid`)
    [objects.NAME] type = "mpm": box = [sx, sy, sz] (centred at `position`) or mesh = "blob.obj" (a closed
                   OBJ surface, placed by position, rotation, scale), sampled on a lattice of
                   particles_per_cell (a cube number: 1, 8, 27; default 8) points per grid cell;
                   material = "mpm_neo_hookean" | "mpm_fixed_corotated" | "mpm_von_mises" |
                   "mpm_drucker_prager" | "mpm_newtonian" | "mpm_bingham" (`tgs.list_materials("mpm")`),
                   params = {E = 2e4, nu = 0.3, ...} (the material's names; defaults for the rest),
                   density [kg/m^3] (required), velocity (the same for every particle), color;
                   splat_radius [m] (the disc radius it is rendered with, default half the particle spacing:
                   `renderers.ParticleSplatter`)

An MPM scene has MPM objects only (no rigid or soft objects, no [ground], no [colliders], no [[forces]]
yet): its floor and walls are the grid's.  Its unknowns are "NAME.PARAM" for any parameter of the object's
material (E, nu; yield_stress; friction_angle [degrees]; viscosity, bulk_modulus; plastic_viscosity, ...),
"NAME.density" and "NAME.vx", "NAME.vy", "NAME.vz" (the object's initial velocity [m/s] along the file's axes,
fitted in linear space by default: a throw's speed is not known in PAC-NeRF's clips either); its footage is fitted through masks (the splats' silhouette; supervision = "mask").
"""
from __future__ import annotations

import numpy as np

from .scene_table import SceneError, _Table

__all__ = ["MPM_KEYS", "VELOCITY_PARAMS", "parse_mpm_object", "parse_mpm_grid", "check_mpm_scene",
           "mpm_unknown_params", "velocity_tie", "mpm_checkpoint_every", "add_mpm_grid", "add_mpm_object",
           "make_splatter"]

MPM_KEYS = ("type", "position", "rotation", "velocity", "color", "box", "mesh", "scale", "material", "params",
            "density", "particles_per_cell", "splat_radius")

# an MPM object's initial velocity components as unknowns, along the file's x, y, z axes
VELOCITY_PARAMS = ("vx", "vy", "vz")

GRID_KEYS = ("lower", "upper", "resolution", "mu", "ground", "boundary")


def parse_mpm_object(t: _Table, base, obj):
    """Fill `obj` (ObjectSpec, kind "mpm") from its table `t`: the shape's closed surface in object
    coordinates (vertices, faces; `box_size` for a box), material, params, density, sampling, splat radius."""
    from ..core.registry import get_material, list_materials
    from ..io.meshes import box_surface
    from ..physics.mpm_sampling import lattice_per_axis
    from ..physics.rigid_mass import check_closed_mesh
    from .scene_objects import _one_of, read_welded_obj

    source = _one_of(t, ("box", "mesh"))
    if source == "box":
        size = t.array("box", (3,), positive=True)
        v, f = box_surface(size)
        obj.box_size, obj.source = size, f"box {size.tolist()}"
    else:
        v, f, p = read_welded_obj(t, base)
        try:
            v, f = check_closed_mesh(v, f)
        except (ValueError, IndexError, TypeError) as exc:
            t.fail("mesh", f"not a closed, consistently oriented surface (MPM samples its inside): {exc}")
        obj.source = p
    obj.vertices, obj.faces = np.asarray(v, dtype=np.float64), np.asarray(f)
    obj.material = t.string("material", "mpm_fixed_corotated", choices=list_materials("mpm"))
    mat = get_material(obj.material)
    p = _Table(t.file, f"{t.section}.params", t.table("params", {}), tuple(mat.params))
    obj.params = {k: p.number(k) for k in p.data}
    try:
        mat.param_vector(obj.params)            # the material's own ranges (nu < 0.5, angles, ...)
    except (ValueError, TypeError) as exc:
        t.fail("params", str(exc))
    obj.density = t.number("density", positive=True)
    obj.particles_per_cell = t.integer("particles_per_cell", 8, minimum=1)
    try:
        lattice_per_axis(obj.particles_per_cell)
    except ValueError as exc:
        t.fail("particles_per_cell", str(exc))
    obj.splat_radius = t.number("splat_radius", None, positive=True)


def parse_mpm_grid(file, data, up):
    """[mpm_grid] -> dict(lower, upper (file axes), resolution, mu, ground, boundary)."""
    from ..physics.mpm_boundary import check_boundary_mode

    t = _Table(file, "mpm_grid", data, GRID_KEYS)
    lower, upper = t.array("lower", (3,)), t.array("upper", (3,))
    if np.any(upper <= lower):
        t.fail("upper", f"must exceed lower on every axis, got lower = {lower.tolist()}, upper = {upper.tolist()}")
    grid = dict(lower=lower, upper=upper, resolution=t.integer("resolution", minimum=4),
                mu=t.number("mu", 0.5, nonnegative=True), ground=t.boolean("ground", False),
                boundary=t.string("boundary", "separate"))
    try:
        check_boundary_mode("boundary", grid["boundary"])
    except ValueError as exc:
        t.fail("boundary", str(exc))
    axis = 1 if up == "y" else 2
    if grid["ground"] and not lower[axis] < 0.0 < upper[axis]:
        t.fail("ground", f"the floor {'y' if up == 'y' else 'z'} = 0 must lie inside the domain (lower "
               f"{lower[axis]:g} < 0 < upper {upper[axis]:g}); a domain starting at 0 has its floor there already")
    return grid


def check_mpm_scene(file, data, objects, grid):
    """What an MPM scene may not have (module docstring), and the grid it needs; each object's dx-dependent
    facts (lattice spacing, at least two cells across, inside the domain) are checked by `add_mpm` when the
    scene is built (named [objects.NAME] there)."""
    mpm = [n for n, o in objects.items() if o.kind == "mpm"]
    if not mpm:
        if grid is not None:
            raise SceneError(file, None, "[mpm_grid]", 'no [objects.NAME] of type = "mpm" uses it: remove it')
        return
    if grid is None:
        raise SceneError(file, None, "[mpm_grid]", f"missing: the MPM object(s) {', '.join(mpm)} need a grid "
                         "(lower, upper, resolution)")
    other = [n for n, o in objects.items() if o.kind != "mpm"]
    if other:
        raise SceneError(file, f"objects.{other[0]}", "type", f"a scene with MPM objects ({', '.join(mpm)}) has MPM "
                         "objects only (rigid or soft objects beside MPM matter are not supported in scene files yet)")
    for key, what in (("ground", "the floor and walls of an MPM scene are [mpm_grid]'s (its mu; ground = true "
                                 "for a floor at height 0 in a taller domain): remove [ground]"),
                      ("colliders", "colliders in MPM scenes are not supported in scene files yet"),
                      ("forces", "known forces act on rigid objects only")):
        if key in data:
            raise SceneError(file, None, f"[{key}]", what)


def velocity_tie(field, handle, axis, M):
    """A `TiedParam` tie setting the initial velocity of the MPM object `handle` (its rows of `field`, mpm_v0
    (N,) vec3 [m/s], y-up world) along the file's axis `axis` (0, 1, 2: x, y, z; the world direction M[:, axis],
    M the file-to-world rotation) to theta [m/s], keeping the other two components: every particle of the object
    moves as one at the start.  Its gradient: the sum over the object's particles of d loss / d v0 . M[:, axis]."""
    rows = slice(handle.particle_start, handle.particle_start + handle.particle_count)
    d = np.asarray(M, dtype=np.float64)[:, axis]

    def forward(t):
        v = field.to_numpy().astype(np.float64)
        v[rows] += np.outer(t[0] - v[rows] @ d, d)
        return v

    return (field, forward, lambda t, g: np.asarray(g)[rows].sum(axis=0) @ d)


def mpm_unknown_params(u, model, handle, kw, model_axes=np.eye(3)):
    """The Param of an MPM object's unknown `u` (UnknownSpec): a material parameter -> `ColumnParam` on the
    object's row of mpm_params; density -> `TiedParam` on its entry of mpm_density; vx, vy, vz ->
    `TiedParam` on its particles' rows of mpm_v0 (`velocity_tie`); the file's initial value written.
    kw: name, lower, upper, log_space."""
    from ..fitting.optim import ColumnParam, TiedParam

    if u.param in VELOCITY_PARAMS:
        return TiedParam([velocity_tie(model.mpm_v0, handle, VELOCITY_PARAMS.index(u.param), model_axes)],
                         value=[u.init], **kw)
    if u.param == "density":
        field, row = model.mpm_density, handle.row

        def forward(t):
            values = field.to_numpy().astype(np.float64)
            values[row] = t[0]
            return values

        return TiedParam([(field, forward, lambda t, g: g[row])], value=[u.init], **kw)
    from ..core.registry import get_material
    col = list(get_material(handle.material).params).index(u.param)
    table = model.mpm_params.to_numpy()
    table[handle.row, col] = u.init
    model.mpm_params.from_numpy(table)
    return ColumnParam(model.mpm_params, col, rows=np.array([handle.row]), **kw)


# ---------------------------------------------------------------------------
# building (scene_build.Scene)

def mpm_checkpoint_every(spec, steps) -> int:
    """The Simulator's checkpoint_every for an MPM scene: the file's [simulation] checkpoint_every, else
    ceil(sqrt(steps)) (as many segments as steps in one: the fewest stored steps, ~2 sqrt(steps), for one
    extra forward pass in the backward).  An MPM step's state holds the grid (7 values per node, and their
    gradients) beside the particles: kept at every step, a PAC-NeRF-sized rollout (~500 steps of a 27^3-node
    grid) takes GBs."""
    if spec.checkpoint_every is not None:
        return spec.checkpoint_every
    return max(1, int(np.ceil(np.sqrt(steps))))

def add_mpm_grid(spec, b):
    """[mpm_grid] on the SceneBuilder `b`, in the y-up world; returns the `MPMGrid`."""
    g, M = spec.mpm_grid, spec.axes
    corners = np.stack([g["lower"], g["upper"]]) @ M.T       # an axis-aligned box stays one under M
    try:
        return b.add_mpm_grid(lower=corners.min(0), upper=corners.max(0), resolution=g["resolution"], mu=g["mu"],
                              ground=g["ground"], boundary=g["boundary"])
    except (ValueError, TypeError) as exc:
        raise spec.error("mpm_grid", "lower / upper", str(exc)) from None


def add_mpm_object(spec, b, obj):
    """An MPM object on `b` (`SceneBuilder.add_mpm`): a box, in any pose, sampled as a box on its own lattice
    (`mpm_sampling.sample_box`), anything else as its closed surface placed in the world.  Returns the
    `MPMObject`."""
    from ..physics.rigid_pose import quat_to_matrix_np

    M = spec.axes
    shape = {}
    if obj.box_size is not None:
        centre = M @ obj.position
        shape["box"] = (centre - obj.box_size / 2, centre + obj.box_size / 2)
        shape["rotation"] = M @ quat_to_matrix_np(obj.rotation)      # box axes -> file axes -> world
    else:
        x = obj.position + obj.vertices @ quat_to_matrix_np(obj.rotation).T
        shape["mesh"] = (x @ M.T, obj.faces)
    return b.add_mpm(**shape, material=obj.material, params=obj.params, density=obj.density,
                     velocity=M @ obj.velocity, particles_per_cell=obj.particles_per_cell)


def particle_spacing(obj, h) -> float:
    """The spacing [m] of an MPM object's particles on a lattice of about h: a box's narrowest slice on its own
    lattice (`mpm_sampling.box_counts`), a mesh's h.  Half of it is the splat radius at which the discs end on
    the box's faces rather than past them (measured on the PAC-NeRF clips at grid 32: frame-0 mask IoU
    0.933-0.937 with h / 2, 0.947-0.954 with the narrowest slice; benchmarks/RESULTS.md, branch mpmfit_a)."""
    from ..physics.mpm_sampling import box_counts

    if obj.box_size is None:
        return h
    size = np.asarray(obj.box_size, dtype=np.float64)
    return float(np.min(size / box_counts(size, h)))


def make_splatter(scene):
    """The renderer of a scene of MPM objects: their particles' soft-splat silhouette
    (`renderers.ParticleSplatter`), frame k at footage time k (`render_at_times(source="mpm")`: blended
    between the two steps around it), discs of the smallest object's splat_radius (default half its particle
    spacing, `particle_spacing`: the radius at which a sampled box splats to its mask, tests/test_splats.py),
    opacity 0.5.
    Masks only.  Sets scene.timed, scene.plate (None), scene.edge_softness, scene.splat_radius."""
    from ..io.footage import render_at_times
    from ..physics.mpm_sampling import lattice_per_axis
    from ..renderers import edge_softness_for_edge
    from ..renderers.splats import ParticleSplatter
    from .scene_build import EDGE_PX

    spec, fit = scene.spec, scene.spec.fit
    if fit.supervision != "mask":
        raise spec.error("fit", "supervision", f"{fit.supervision!r}: MPM matter is rendered as a splat silhouette "
                         "without colour; use supervision = \"mask\"")
    dx = scene.model.mpm_grid.dx
    scene.splat_radius = min(o.splat_radius if o.splat_radius is not None else
                             particle_spacing(o, dx / lattice_per_axis(o.particles_per_cell)) / 2
                             for o in spec.objects.values())
    # splats' edge is their disc footprint, not the rasterizer's edge softness; the value is kept for the
    # attributes the report and the views read
    scene.edge_softness = fit.edge_softness if fit.edge_softness is not None else \
        edge_softness_for_edge(EDGE_PX, scene.camera.width, scene.camera.height)
    scene.plate = None
    ren = ParticleSplatter(scene.camera, scene.model.mpm_particle_count, frames=len(scene.footage),
                           radius=scene.splat_radius, opacity=0.5)
    try:
        scene.timed = render_at_times(scene.sim, ren, scene.footage, source="mpm")
    except ValueError as exc:
        raise spec.error("footage", "start_time", str(exc)) from None
    return ren
