"""MPM matter (elastic solids, plasticine, sand, fluids) as a physics kind: the `MPMBodies` builder
component, added with `SceneBuilder.add_mpm_grid` and `SceneBuilder.add_mpm`.

Usage (SI units: m, kg, s, Pa)::

    b = tgs.SceneBuilder(gravity=(0, -9.8, 0))
    b.add_mpm_grid(lower=(-0.5, 0.0, -0.5), upper=(0.5, 1.0, 0.5), resolution=32, mu=0.3)
    jelly = b.add_mpm(box=((-0.1, 0.3, -0.1), (0.1, 0.5, 0.1)), material="mpm_fixed_corotated",
                      params={"E": 5e4, "nu": 0.3}, density=1000.0, particles_per_cell=8)
    model = b.finalize()
    sim = tgs.Simulator(model, dt=2e-4, steps=500, checkpoint_every=50)

The domain [lower, upper] is a box with walls on its six faces (the lower y face is the floor); with
`ground=True` the plane y = 0 is a wall too (a floor inside a taller domain).  Walls stop inflow and
apply Coulomb friction mu (`tigradsim.physics.mpm_terms.wall`) at the grid nodes on or beyond them.
The static colliders (`add_collider`, any shape) and the rigid bodies are met at the grid nodes too, with
the grid's `boundary` mode ("sticky", "slip", "separate") or a collider's own, and each shape's friction mu;
the bodies get the matter's reaction (two-way coupling): `tigradsim.physics.mpm_boundary`.
The grid has cubic cells of dx = (largest extent of the domain) / resolution, plus 3 cells of padding
outside every face (`mpm_terms.PAD`).  Objects are sampled on a lattice of `particles_per_cell` (a cube
number) points per cell (`mpm_sampling`), inside a box, inside a closed triangle mesh, or given directly.

Model fields (N particles, G objects, one material row each):
    mpm_x0 (N,) vec3 [m], mpm_v0 (N,) vec3 [m/s]     initial positions and velocities (differentiable)
    mpm_C0 (N,) mat3 [1/s], mpm_F0 (N,) mat3          initial affine velocity and deformation gradient
    mpm_plastic0 (N,)                                initial plastic history (material-defined)
    mpm_params (G, n_max)                            material parameters (differentiable; `params` order)
    mpm_density (G,) [kg/m^3]                        (differentiable); particle mass = density * volume
    mpm_particle_volume (G,) [m^3]                   rest volume per particle (not differentiable)
    mpm_mu () [-]                                    Coulomb friction of the walls and ground (differentiable)
State kinds (per step slot): mpm_x, mpm_v, mpm_C, mpm_F, mpm_plastic (checkpointed), and the grid,
mpm_grid_mv (cells,) vec4 (momentum [kg m/s], mass [kg]) and mpm_grid_v (cells,) vec3 [m/s], with each
particle's P2G matrix mpm_affine (N,) mat3 [kg/s] and G2P sums mpm_gather_v (N,) vec3, mpm_gather_C (N,)
mat3: accumulators
(zeroed each segment, never checkpointed; why a grid per slot: `mpm_terms`).  Read positions as
`sim.state.mpm_x[slot, i]` in an observer, or `sim.final_state("mpm_x")`.
"""
import math
from dataclasses import dataclass

import numpy as np
import taichi as ti

from ..core.errors import as_array, check_positive
from ..core.model import StateKind
from ..core.registry import get_material
from ..core.runtime import np_float
from .mpm_boundary import check_boundary_mode, check_starts, grid_obstacles
from .mpm_material import MPMMaterial
from .mpm_sampling import lattice_per_axis, sample_box, sample_mesh
from .mpm_terms import PAD, GridGather, GridToParticle, GridUpdate, ParticleStress, ParticleToGrid

__all__ = ["MPMBodies", "MPMGrid", "MPMObject", "grid_nbytes"]


@dataclass
class MPMGrid:
    """The background grid: `origin` (3,) [m] of node (0, 0, 0), cell size `dx` [m], `res` (3,) nodes per
    axis (padding included), the user's `lower`, `upper` [m], wall friction `mu`, `ground` (plane y = 0)."""
    lower: np.ndarray
    upper: np.ndarray
    dx: float
    res: tuple
    origin: np.ndarray
    mu: float
    ground: bool
    boundary: str = "separate"
    band: float = 0.0

    @property
    def cell_count(self) -> int:
        return int(np.prod(self.res))


@dataclass
class MPMObject:
    """What `add_mpm` returns: its particles are rows [particle_start, particle_start + particle_count) of
    the MPM state; `row` its row of `mpm_params` / `mpm_density`; `material` its name; `particle_volume`
    [m^3] and `mass` [kg] as built."""
    particle_start: int
    particle_count: int
    row: int
    material: str
    particle_volume: float
    density: float

    @property
    def mass(self) -> float:
        return self.density * self.particle_volume * self.particle_count


def grid_nbytes(model, slots: int) -> int:
    """Bytes of the MPM grid state over `slots` step slots (gradients included when the model has them)."""
    per = 8 if np_float() == np.float64 else 4
    return model.mpm_grid.cell_count * 7 * per * slots * (2 if model.requires_grad else 1)


class MPMBodies:
    """Builder component of MPM matter (module docstring)."""

    def __init__(self):
        self.grid = None
        self.objects = []        # dicts: positions, velocity, material, values, density, volume

    # finalized after every other component: the grid's boundary reads the colliders' and the rigid bodies'
    # shape tables, and its terms go before the rigid integrator (`builder.finalize`)
    finalize_last = True

    def set_grid(self, builder, lower, upper, resolution, mu=0.5, ground=False, boundary="separate",
                 band=None) -> MPMGrid:
        """The MPM domain [lower, upper] ((3,) each [m]) and grid: `resolution` cells along its largest
        extent (an int >= 4), walls with Coulomb friction `mu` >= 0, and with `ground` a floor at y = 0.
        boundary: how the matter meets the colliders (unless a collider's `mpm_boundary` says otherwise) and
        the rigid bodies, "sticky", "slip" or "separate" (`mpm_boundary`; friction: each collider's and
        body's mu); band [m] > 0: the width of their soft influence outside the shape (default half a cell).
        Call once, before `add_mpm`."""
        if self.grid is not None:
            raise ValueError("add_mpm_grid: the scene already has an MPM grid (one per scene)")
        lo = as_array("lower", lower, shape=(3,))
        hi = as_array("upper", upper, shape=(3,))
        if np.any(hi <= lo):
            d = int(np.argmax(hi <= lo))
            raise ValueError(f"upper: must exceed lower on every axis, got lower={lo.tolist()}, upper={hi.tolist()} "
                             f"(axis {d})")
        if not (isinstance(resolution, (int, np.integer)) and not isinstance(resolution, bool) and resolution >= 4):
            raise ValueError(f"resolution: expected an integer >= 4 (cells along the domain's largest extent), "
                             f"got {resolution!r}")
        mu = float(check_positive("mu", as_array("mu", mu, shape=()), allow_zero=True))
        if ground and not lo[1] < 0.0 < hi[1]:
            raise ValueError(f"ground: the plane y = 0 must lie inside the domain (lower y {lo[1]:g} < 0 < upper y "
                             f"{hi[1]:g}); a domain whose lower y is 0 has its floor there already (ground=False)")
        check_boundary_mode("boundary", boundary)
        dx = float((hi - lo).max()) / int(resolution)
        band = 0.5 * dx if band is None else float(check_positive("band", as_array("band", band, shape=())))
        cells = np.ceil((hi - lo) / dx - 1e-9).astype(int)
        res = tuple(int(c) + 2 * PAD for c in cells)
        self.grid = MPMGrid(lo, lo + cells * dx, dx, res, lo - PAD * dx, mu, bool(ground), boundary, band)
        return self.grid

    def add(self, builder, box=None, mesh=None, particles=None, particle_volume=None, material="mpm_fixed_corotated",
            params=None, density=1000.0, velocity=(0.0, 0.0, 0.0), particles_per_cell=8, rotation=None) -> MPMObject:
        """Add one object of MPM matter; give exactly one of
            box: (lower, upper), (3,) each [m], turned by `rotation` about its centre (a unit quaternion
                 (x, y, z, w) or a (3, 3) rotation matrix; None: axis-aligned), sampled on its own lattice
                 (`mpm_sampling.sample_box`);
            mesh: (vertices (V, 3) [m], faces (F, 3)), closed, outward;
            particles: (N, 3) positions [m] with particle_volume [m^3] > 0 (each particle's rest volume).
        material: a registered material of kind "mpm" (`tgs.list_materials("mpm")`); params: its values
        (defaults for the rest); density [kg/m^3] > 0; velocity (3,) [m/s], the same for every particle;
        particles_per_cell: lattice points per grid cell for box and mesh (1, 8, 27, ...).
        """
        if self.grid is None:
            raise ValueError("add_mpm: call SceneBuilder.add_mpm_grid(lower, upper, resolution) first (the particles "
                             "are sampled on the grid's lattice)")
        given = [k for k, v in dict(box=box, mesh=mesh, particles=particles).items() if v is not None]
        if len(given) != 1:
            raise ValueError(f"add_mpm: give exactly one of box=, mesh=, particles= (got {given or 'none'})")
        if rotation is not None and box is None:
            raise ValueError("rotation: only a box= is turned by it (place a mesh's or the particles' own points)")
        mat = get_material(material)
        if not isinstance(mat, MPMMaterial):
            raise ValueError(f"material: {mat.name!r} is a {mat.kind!r} material; MPM needs one of kind 'mpm': "
                             f"{sorted(n for n in _mpm_names())}")
        values = mat.param_vector(params)
        rho = float(check_positive("density", as_array("density", density, shape=())))
        vel = as_array("velocity", velocity, shape=(3,))
        g = self.grid
        if particles is not None:
            pts = as_array("particles", particles, shape=(None, 3))
            if particle_volume is None:
                raise ValueError("particle_volume: required with particles= (each particle's rest volume, m^3)")
            vol = float(check_positive("particle_volume", as_array("particle_volume", particle_volume, shape=())))
            if vol > g.dx ** 3 * (1 + 1e-9):
                raise ValueError(f"particle_volume: {vol:g} m^3 is more than a grid cell ({g.dx ** 3:g} m^3): fewer than "
                                 "one particle per cell leaves holes in the matter; use more particles or a coarser grid")
        else:
            k = lattice_per_axis(particles_per_cell)
            h = g.dx / k
            if box is not None:
                pts, vol = sample_box(*box, h, rotation)
            else:
                pts, vol = sample_mesh(*mesh, g.origin, h), h ** 3
        if len(pts) == 0:
            raise ValueError(f"add_mpm: no lattice point falls inside the {given[0]} (it is smaller than the particle "
                             f"spacing {g.dx / lattice_per_axis(particles_per_cell):g} m); use a finer grid or more "
                             "particles_per_cell")
        self._check_inside(pts, given[0])
        extent = pts.max(axis=0) - pts.min(axis=0) + vol ** (1 / 3)
        if extent.min() < 2 * g.dx * (1 - 1e-9):
            d = int(np.argmin(extent))
            raise ValueError(f"add_mpm: the grid is too coarse for the {given[0]}: it is {extent[d]:.4g} m across along "
                             f"axis {d}, less than 2 cells of dx = {g.dx:.4g} m; raise the grid's resolution")
        start = sum(len(o["positions"]) for o in self.objects)
        self.objects.append(dict(positions=pts, velocity=vel, material=mat, values=values, density=rho, volume=vol))
        return MPMObject(start, len(pts), len(self.objects) - 1, mat.name, vol, rho)

    def _check_inside(self, pts, what):
        g = self.grid
        out = np.any((pts < g.lower) | (pts > g.upper), axis=1)
        if g.ground:
            out |= pts[:, 1] < 0.0
        if np.any(out):
            i = int(np.argmax(out))
            raise ValueError(f"add_mpm: particle {i} of the {what} at {pts[i].round(6).tolist()} lies outside the MPM "
                             f"domain [{g.lower.tolist()}, {g.upper.tolist()}]" + (" or below the ground y = 0" if g.ground
                                                                                   else ""))

    def prepare(self, builder):
        """Before any field or kernel: no particle starts inside a collider or a rigid body."""
        if self.grid is not None and self.objects:
            check_starts(builder, self.grid, self.objects)

    def placed(self, builder) -> list:
        return []            # MPM matter meets the ground through the grid, not the penalty contact

    def finalize(self, builder, model):
        objs = self.objects
        model.mpm_particle_count = n = sum(len(o["positions"]) for o in objs)
        if self.grid is None or n == 0:
            return
        f = np_float()
        vec3, mat3 = ti.types.vector(3, float), ti.types.matrix(3, 3, float)
        model.mpm_grid = g = self.grid
        model.mpm_objects = [(o["material"].name, len(o["positions"])) for o in objs]
        counts = [len(o["positions"]) for o in objs]
        model.add_field("mpm_x0", vec3, (n,), np.concatenate([o["positions"] for o in objs]).astype(f))
        model.add_field("mpm_v0", vec3, (n,), np.repeat([o["velocity"] for o in objs], counts, axis=0).astype(f))
        model.add_field("mpm_C0", mat3, (n,), np.zeros((n, 3, 3), f))
        model.add_field("mpm_F0", mat3, (n,), np.tile(np.eye(3, dtype=f), (n, 1, 1)))
        model.add_field("mpm_plastic0", float, (n,), np.zeros(n, f))
        width = max(1, max(o["material"].param_count for o in objs))
        table = np.zeros((len(objs), width))
        for r, o in enumerate(objs):
            table[r, :o["material"].param_count] = o["values"]
        model.add_field("mpm_params", float, (len(objs), width), table.astype(f))
        model.add_field("mpm_density", float, (len(objs),), np.array([o["density"] for o in objs], f))
        model.add_field("mpm_particle_volume", float, (len(objs),), np.array([o["volume"] for o in objs], f),
                        param=False)
        model.add_field("mpm_mu", float, (), g.mu)
        model.state_kinds += [
            StateKind("mpm_x", vec3, n, initial=model.mpm_x0),
            StateKind("mpm_v", vec3, n, initial=model.mpm_v0),
            StateKind("mpm_C", mat3, n, initial=model.mpm_C0),
            StateKind("mpm_F", mat3, n, initial=model.mpm_F0),
            StateKind("mpm_plastic", float, n, initial=model.mpm_plastic0),
            StateKind("mpm_affine", mat3, n, accumulator=True),
            StateKind("mpm_gather_v", vec3, n, accumulator=True),
            StateKind("mpm_gather_C", mat3, n, accumulator=True),
            StateKind("mpm_grid_mv", ti.types.vector(4, float), g.cell_count, accumulator=True),
            StateKind("mpm_grid_v", vec3, g.cell_count, accumulator=True),
        ]
        handles, start = [], 0
        for r, o in enumerate(objs):
            handles.append(MPMObject(start, len(o["positions"]), r, o["material"].name, o["volume"], o["density"]))
            start += len(o["positions"])
        terms = [ParticleStress(model, h, o["material"]) for h, o in zip(handles, objs)]
        terms += [ParticleToGrid(model, h, o["material"]) for h, o in zip(handles, objs)]
        terms.append(GridUpdate(model, grid_obstacles(builder, model, g)))
        terms += [GridGather(model, h, o["material"]) for h, o in zip(handles, objs)]
        terms += [GridToParticle(model, h, o["material"]) for h, o in zip(handles, objs)]
        # before the rigid integrator: the grid update adds the matter's reaction to body_f of the same step
        rigid = [k for k, t in enumerate(model.integrators) if type(t).__name__ in ("RigidAppliedLoads",
                                                                                   "RigidIntegrator")]
        at = rigid[0] if rigid else len(model.integrators)
        model.integrators[at:at] = terms


def _mpm_names():
    from ..core.registry import list_materials
    return list_materials("mpm")
