"""Tetrahedral finite elements (soft solids): the `TetMeshes` builder component and its force term.

Per tet e with vertices (x0, x1, x2, x3), rest matrix Dm = [X1-X0, X2-X0, X3-X0]
and rest volume V (both precomputed in float64 at finalize):

    F    = Ds Dm^-1,            Ds = [x1-x0, x2-x0, x3-x0]
    dF/dt = dDs/dt Dm^-1        (from the vertex velocities)
    s    = (1 + a)^(-1/3)       a = activation of the element (tet_activation[e])
    P    = s P_mat(s F, p) + P_d(kd, F, dF/dt, p)
    f_k  = -V P Dm^-T e_k       on x_k, k = 1, 2, 3;  f_0 = -(f_1 + f_2 + f_3)

`P_mat` is the registered material's first Piola-Kirchhoff stress (any kind
"tet" material from `tigradsim.core.registry`), `p` its parameters, `kd` the
element's damping coefficient and `P_d` the mesh's damping model (`damping_model=`:
"deformation_rate", the default, P_d = kd dF/dt; "warp", Warp's and Newton's k_damp;
"rayleigh_stiffness", beta K v; "rayleigh_mass", alpha M v, a drag added at the corners:
see `tigradsim.physics.damping` for the forms and each engine's conversion).

Activation (active strain, works for every material alike): the element's
energy is V Psi(s F), so its stress-free shape is the rest shape scaled by
(1 + a)^(1/3) in every direction: a = 0.1 makes the element want 10 % more
volume, a = -0.1 10 % less.  It must stay > -1; the kernel clamps it at
-0.95.  A controller that changes activations per step uses
`enable_activation_control(model, steps)`, which adds `tet_activation_t[t, e]`
(added to `tet_activation[e]` at step t).

Masses (`node_masses`): exactly one of `density` [kg/m^3] (the default, 10), `mass` (the
mesh's total [kg]) or `node_mass` (per vertex [kg]: a scalar gives every vertex the same
mass, or an array (V,)).  A density or total mass is spread over the vertices by the
mesh's `mass_distribution`, a model choice (engines and real objects differ, and footage
does not say which; `tigradsim.scenes.mass_compare` fits under both and compares):
"volume" (the default: lumped, each vertex gets a quarter of density * V of each tet it
belongs to, as a uniform solid and Newton's `add_soft_mesh` have) or "equal" (every vertex
total / V_count, as Warp's `add_soft_grid` gives).  Vertices that are `fixed` get mass 0
and never move (their share is not handed to the free ones, under either distribution).  The
handle keeps the masses as built (`SoftMesh.node_mass`, `.volume`), so that a fit can
scale them by one unknown (`tigradsim.fitting.soft_mass.SoftMassParam`: the total
mass or the mean density).

Model fields (E = tet count, sorted by material; see `tigradsim.physics.elements`):
    tet_indices (E,) ivec4           global particle indices
    tet_Dm_inv (E,) mat3 [1/m]       rest shape inverse
    tet_volume (E,) [m^3]            rest volume
    tet_activation (E,) [-]          differentiable
    tet_params (rows, n_max + 1)     material parameters; last column: damping (Pa s; s for
                                     damping_model "rayleigh_stiffness")
    tet_param_row (E,) int           row of tet_params each tet reads
    tet_damping_model (E,) int       the tet's damping model (`damping.DAMPING_MODELS`)
    tet_corner_share (E,) vec4       1 / tet count of each corner's vertex (only with "rayleigh_mass")
Read or write one object's value with `object_param(model, handle, "mu")` and
`set_object_param(model, handle, "mu", value)` (the handle is what
`SceneBuilder.add_soft_mesh` returns), or the whole table with
`model.get("tet_params")` / `model.set("tet_params", table)`.
"""
from dataclasses import dataclass, field as dc_field
from typing import Optional

import numpy as np
import taichi as ti

from ..core.linalg import matmul
from .damping import RAYLEIGH_MASS, RAYLEIGH_STIFFNESS, WARP, damping_model_code, damping_stress
from .elements import MaterialElements
from ..exec.loops import NO_PORTS, corner_put, corner_q, corner_qd, differentiating, element_path, \
    for_each_element, make_ports, stopped_state, table_row, wrap_terms
from ..core.errors import as_array, as_index_array, check_positive
from ..core.geometry import boundary_faces, validate_tets
from ..core.registry import get_material
from ..core.model import StepTerm, has_grad

# Activation is clamped at this value: (1 + a) must stay positive.
MIN_ACTIVATION = -0.95

__all__ = ["TetMeshes", "SoftMesh", "TetForces", "object_param", "set_object_param", "enable_activation_control",
           "elastic_energy", "lumped_masses"]


@dataclass
class SoftMesh:
    """What `add_soft_mesh` returns.

    particle_start, particle_count: the mesh's vertices are particles
        [particle_start, particle_start + particle_count).
    tet_start, tet_count: its tets are rows [tet_start, tet_start + tet_count) of
        the tet fields (set at finalize: tets are sorted by material).
    faces: (F, 3) boundary triangles in GLOBAL particle indices, outward (rendering).
    param_rows: rows of `tet_params` the mesh uses (one with share_params=True).
    material: the material name.  index: the mesh's number in the builder.
    node_mass: (V,) [kg] the vertices' masses as built (fixed vertices included: in the
        model's particle_mass they are 0).  volume: the rest volume [m^3].
    mass_distribution: how a density or total mass was spread ("volume", "equal"; "given"
        for node_mass=).
    """

    particle_start: int
    particle_count: int
    tet_count: int
    faces: np.ndarray
    param_rows: range
    material: str
    index: int
    tet_start: Optional[int] = None
    local_tets: np.ndarray = dc_field(default=None, repr=False)
    node_mass: np.ndarray = dc_field(default=None, repr=False)
    volume: float = 0.0
    damping_model: str = "deformation_rate"
    mass_distribution: str = "volume"

    @property
    def mass(self) -> float:
        """The mesh's total mass as built [kg] (fixed vertices included)."""
        return float(np.sum(self.node_mass))


def lumped_masses(vertex_count, tets, volumes, density):
    """Per-vertex masses [kg]: a quarter of density * V of every adjacent tet."""
    m = np.zeros(vertex_count)
    np.add.at(m, np.asarray(tets).reshape(-1), np.repeat(np.asarray(volumes) * density / 4.0, 4))
    return m


# the density a soft mesh gets when neither density, mass nor node_mass is given [kg/m^3]
DEFAULT_DENSITY = 10.0


# how a density or total mass is spread over a mesh's vertices (module docstring)
MASS_DISTRIBUTIONS = ("volume", "equal")


def check_mass_distribution(mass_distribution, node_mass=None) -> str:
    """The distribution's name, or ValueError naming the argument: not one of MASS_DISTRIBUTIONS, or a
    distribution other than the default given with per-vertex masses (which are the distribution)."""
    if not isinstance(mass_distribution, str) or mass_distribution not in MASS_DISTRIBUTIONS:
        raise ValueError(f"mass_distribution: expected one of {', '.join(repr(d) for d in MASS_DISTRIBUTIONS)}, "
                         f"got {mass_distribution!r}")
    if node_mass is not None and mass_distribution != "volume":
        raise ValueError(f"mass_distribution: {mass_distribution!r} spreads a density or a total mass; with "
                         "node_mass= the per-vertex masses are given (leave mass_distribution out)")
    return mass_distribution


def node_masses(vertex_count, tets, volumes, density=None, mass=None, node_mass=None, mass_distribution="volume"):
    """Per-vertex masses (V,) [kg] from exactly one of:

    density: [kg/m^3] > 0; the default (`DEFAULT_DENSITY`) when none is given.
    mass: the total [kg] > 0.
    node_mass: [kg] > 0 per vertex: a scalar (every vertex the same) or an array (vertex_count,).
    A density (total = density x the rest volume) or a total mass is spread by `mass_distribution`:
    "volume" (lumped, `lumped_masses`) or "equal" (total / vertex_count each).
    Raises ValueError naming the argument (more than one given, <= 0, NaN / inf, wrong shape, an unknown
    distribution or one given with node_mass), TypeError for a non-numeric value.
    """
    given = [k for k, v in (("density", density), ("mass", mass), ("node_mass", node_mass)) if v is not None]
    if len(given) > 1:
        raise ValueError(f"give one of density=, mass= and node_mass=, got {' and '.join(given)}")
    check_mass_distribution(mass_distribution, node_mass)
    if node_mass is not None:
        m = as_array("node_mass", node_mass)
        if m.ndim == 0:
            m = np.full(vertex_count, float(m))
        elif m.shape != (vertex_count,):
            raise ValueError(f"node_mass: expected a scalar or shape ({vertex_count},) (one per vertex), "
                             f"got shape {m.shape}")
        return check_positive("node_mass", m).astype(np.float64)
    volume = float(np.sum(volumes))
    if mass is not None:
        total = float(check_positive("mass", as_array("mass", mass, shape=())))
        rho = total / volume
    else:
        rho = DEFAULT_DENSITY if density is None else float(check_positive("density", as_array("density", density, shape=())))
        total = rho * volume
    if mass_distribution == "equal":
        return np.full(vertex_count, total / vertex_count)
    return lumped_masses(vertex_count, tets, volumes, rho)


class TetMeshes:
    """Builder component collecting tet meshes (one instance per SceneBuilder)."""

    def __init__(self):
        self.elements = MaterialElements("tet")
        self.meshes = []               # (SoftMesh, rest vertices (V,3), tets local (T,4))

    def add(self, builder, mesh, tets=None, material="neo_hookean", params=None, density=None, damping=0.0,
            share_params=True, velocity=(0.0, 0.0, 0.0), radius=0.01, fixed=None, lame=None,
            young_poisson=None, mass=None, node_mass=None, damping_model="deformation_rate",
            mass_distribution="volume") -> SoftMesh:
        """Add a tetrahedral solid.

        Args:
            mesh: (vertices (V, 3) [m], tets (T, 4) int), e.g. `tgs.meshes.tet_box(...)`, or
                vertices with `tets` given separately.  Tets must be positively oriented.
            material: a registered "tet" material name (`tgs.list_materials("tet")`).
            params: the material's parameters (name -> value), e.g. {"mu": 1e3, "lam": 1e3};
                missing ones take the material's defaults; "damping" may be given here too.
                For neo_hookean, mu and lam are NOT the Lame parameters: pass `lame=(mu_L, lam_L)`
                or `young_poisson=(E, nu)` to convert (`material.from_lame`).
            density: [kg/m^3] > 0 (default 10); total = density x the rest volume.
            mass: instead of density, the total mass [kg] > 0.
            mass_distribution: how the density's or mass's total is spread over the vertices:
                "volume" (default; a quarter of each adjacent tet's mass) or "equal" (total / V
                each, as Warp's add_soft_grid); not with node_mass.
            node_mass: instead of density, per-vertex masses [kg] > 0: a scalar (every vertex
                the same) or (V,).  Give at most one of density, mass and node_mass.
            damping: >= 0, the material damping coefficient of `damping_model`.
            damping_model: "deformation_rate" (kd dF/dt, [Pa s]), "warp" (Warp / Newton's
                k_damp, [Pa s]), "rayleigh_stiffness" (beta [s], stiffness-proportional) or
                "rayleigh_mass" (alpha [1/s], mass-proportional); see `tigradsim.physics.damping`.
            share_params: one parameter row for the whole mesh (True) or one per tet.
            velocity: (3,) or (V, 3) initial velocity [m/s].
            radius: contact radius of the vertices [m].
            fixed: None, a bool mask (V,) or vertex indices of pinned vertices.
        Returns: a SoftMesh handle.
        Raises ValueError / IndexError / KeyError (unknown material) before anything is added.
        """
        if tets is None:
            if not (isinstance(mesh, (tuple, list)) and len(mesh) == 2):
                raise TypeError("add_soft_mesh: mesh must be (vertices, tets) or vertices with tets=...")
            vertices, tets = mesh
        else:
            vertices = mesh
        vertices = as_array("vertices", vertices, shape=(None, 3))
        tets = as_index_array("tets", tets)
        if tets.size and not np.issubdtype(tets.dtype, np.integer):
            if np.issubdtype(tets.dtype, np.floating) and np.all(np.mod(tets, 1) == 0):
                tets = tets.astype(np.int64)
            else:
                raise TypeError(f"tets: expected integer indices, got dtype {tets.dtype}")
        if tets.ndim != 2 or tets.shape[1] != 4 or len(tets) == 0:
            raise ValueError(f"tets: expected shape (T, 4) with T >= 1, got {tets.shape}")
        try:
            volumes = validate_tets(vertices, tets)
        except ValueError as exc:
            err = IndexError if "out of range" in str(exc) else ValueError
            raise err(f"tets: {exc}") from None
        n = len(vertices)
        masses = node_masses(n, tets, volumes, density=density, mass=mass, node_mass=node_mass,
                             mass_distribution=mass_distribution)
        form = damping_model_code(damping_model)
        vel = as_array("velocity", velocity)
        if vel.shape == (3,):
            vel = np.tile(vel, (n, 1))
        vel = as_array("velocity", vel, shape=(n, 3))
        mask = np.zeros(n, dtype=bool)
        if fixed is not None:
            f = np.asarray(fixed)
            if f.dtype == bool:
                if f.shape != (n,):
                    raise ValueError(f"fixed: a bool mask must have shape ({n},), got {f.shape}")
                mask = f
            else:
                f = f.reshape(-1)
                if f.size and (not np.issubdtype(f.dtype, np.integer) or f.min() < 0 or f.max() >= n):
                    raise IndexError(f"fixed: vertex indices must be integers in [0, {n}), got {f.tolist()}")
                mask[f] = True
        mat = get_material(material)          # unknown name: KeyError listing the registered ones
        params = dict(params or {})
        if lame is not None or young_poisson is not None:
            if lame is not None and young_poisson is not None:
                raise ValueError("give at most one of lame=(mu, lam) and young_poisson=(E, nu)")
            if young_poisson is not None:
                from ..core.registry import lame_from_young_poisson
                lame = lame_from_young_poisson(*young_poisson)
            conv = type(mat).from_lame(*lame)
            clash = sorted(set(conv) & set(params))
            if clash:
                raise ValueError(f"params: {clash} given twice (in params and through lame/young_poisson)")
            params.update(conv)
        first_row = sum(len(b[2]) for b in self.elements._blocks)
        # Validates kind, parameter names/values and damping; appends the block only when all pass.
        self.elements.add(material, len(tets), params, damping, share_params)
        rows = len(self.elements._blocks[-1][2])
        start = builder.add_particles(vertices, vel, np.where(mask, 1.0, masses), radius=radius, fixed=mask)
        handle = SoftMesh(particle_start=start, particle_count=n, tet_count=len(tets),
                          faces=(boundary_faces(tets) + start).astype(np.int32), param_rows=range(first_row, first_row + rows),
                          material=mat.name, index=len(self.meshes), local_tets=tets.astype(np.int64),
                          node_mass=masses, volume=float(np.sum(volumes)), damping_model=damping_model,
                          mass_distribution="given" if node_mass is not None else mass_distribution)
        self.meshes.append((handle, vertices, volumes))
        return handle

    def placed(self, builder) -> list:
        """Each mesh's vertices at t = 0 (`tigradsim.core.placement.Placed`; the SceneBuilder
        fills in their positions and radii)."""
        from ..core.placement import Placed
        return [Placed(f"soft mesh {h.index}", None,
                       particles=range(h.particle_start, h.particle_start + h.particle_count)) for h, _, _ in self.meshes]

    def finalize(self, builder, model):
        if not self.meshes:
            return
        tets, dm_inv, vols = [], [], []
        for handle, x, v in self.meshes:
            t = handle.local_tets
            a, b, c, d = (x[t[:, k]] for k in range(4))
            Dm = np.stack([b - a, c - a, d - a], axis=-1)          # columns
            dm_inv.append(np.linalg.inv(Dm))
            tets.append(t + handle.particle_start)
            vols.append(v)
        tets, dm_inv, vols = np.concatenate(tets), np.concatenate(dm_inv), np.concatenate(vols)
        order, groups = self.elements.finalize(model, "tet")
        position = np.empty_like(order)
        position[order] = np.arange(len(order))
        offset = 0
        for handle, _, _ in self.meshes:
            handle.tet_start = int(position[offset]) if handle.tet_count else None
            offset += handle.tet_count
        E = len(order)
        model.tet_count = E
        model.tet_meshes = [h for h, _, _ in self.meshes]
        model.add_field("tet_indices", ti.types.vector(4, ti.i32), (E,), tets[order].astype(np.int32), param=False)
        model.add_field("tet_Dm_inv", ti.types.matrix(3, 3, float), (E,), dm_inv[order], param=False)
        model.add_field("tet_volume", float, (E,), vols[order], param=False)
        model.add_field("tet_activation", float, (E,), np.zeros(E))
        forms = np.concatenate([np.full(h.tet_count, damping_model_code(h.damping_model)) for h, _, _ in self.meshes])[order]
        model.add_field("tet_damping_model", ti.i32, (E,), forms.astype(np.int32), param=False)
        if np.any(forms == RAYLEIGH_MASS):
            # each corner's share of its vertex's drag: 1 / (the vertex's tet count in its mesh)
            shares = [1.0 / np.bincount(h.local_tets.reshape(-1), minlength=h.particle_count)[h.local_tets]
                      for h, _, _ in self.meshes]
            model.add_field("tet_corner_share", ti.types.vector(4, float), (E,), np.concatenate(shares)[order],
                            param=False)
        path = element_path(E)
        ports = make_ports(path, model, tets[order], [(model.tet_params, model.tet_param_row.to_numpy())],
                           [(g.start, g.end) for g in groups])
        model.tet_forces = [TetForces(model, g, self.elements.damping_column, path, ports,
                                      damping_models=tuple(sorted(set(forms[g.start:g.end].tolist()))))
                            for g in groups]
        model.force_terms.extend(wrap_terms(ports, model.tet_forces))


@ti.data_oriented
class TetForces(StepTerm):
    """The FEM force term of one material group (see the module docstring for the formulas;
    one term per group: a term runs one loop, see model.py)."""

    def __init__(self, model, group, damping_column, path="serial", ports=None, damping_models=(0,)):
        super().__init__(model)
        self.group = group
        self.damping_models = tuple(int(c) for c in damping_models)   # the codes its tets use (static)
        self.has_mass_damping = RAYLEIGH_MASS in self.damping_models
        self.damping_column = damping_column
        self.activation_t = None         # optional (steps, E) field: per-step activation (controllers)
        self.path = path                 # exec.loops.element_path: "serial", "parallel", or "parts" (with ports)
        self.serial = path == "serial"
        self.ports = NO_PORTS if ports is None else ports

    def damping_modulus(self, damping, modulus):
        """What the stability report (`core.stability`) takes for each of this group's tets' damping:
        the coefficient c [Pa s] of a viscous stress c dF/dt with the same largest damping rate.
        damping, modulus: (group tets,) the coefficient and the wave modulus lam + 2 mu [Pa]."""
        codes = self.model.tet_damping_model.to_numpy()[self.group.start:self.group.end]
        # rayleigh_mass: a drag alpha on every vertex, stable for alpha dt < 2, not an element stiffness
        # (0 here: its limit is not in the element rows)
        return np.select([codes == WARP, codes == RAYLEIGH_STIFFNESS, codes == RAYLEIGH_MASS],
                         [2.0 * damping, damping * modulus, 0.0 * damping], damping)

    @property
    def has_activation_t(self):
        return self.activation_t is not None

    @property
    def element_range(self):
        """[start, end) of the tets this term loops over (`parts.merge_part_loops`)."""
        return self.group.start, self.group.end

    @ti.func
    def apply_forces(self, state: ti.template(), s: ti.template(), t: ti.template()):
        for_each_element(self, state, s, t, self.group.start, self.group.end)

    @ti.func
    def element(self, state: ti.template(), s: ti.template(), t: ti.template(), e, b):
        """Tet e's corner forces, added at slot s (step t); b: its block (`exec.loops.for_each_element`)."""
        if ti.static(self.ports.active):     # parts path: inputs through ports (exec.ports)
            self.ports.stop(state)
            self.ports.open(e)
        idx = self.model.tet_indices[e]
        x0 = corner_q(self.ports, state, s, e, b, 0, idx[0])
        d1 = corner_q(self.ports, state, s, e, b, 1, idx[1]) - x0
        d2 = corner_q(self.ports, state, s, e, b, 2, idx[2]) - x0
        d3 = corner_q(self.ports, state, s, e, b, 3, idx[3]) - x0
        Dm_inv = self.model.tet_Dm_inv[e]
        F = matmul(ti.Matrix.cols([d1, d2, d3]), Dm_inv)
        row = self.model.tet_param_row[e]
        pr = table_row(self.ports, 0, self.model.tet_params, e, b, row)
        p = ti.Vector([pr[c] for c in ti.static(range(self.group.param_count))])
        kd = pr[self.damping_column]
        a = self.model.tet_activation[e]
        if ti.static(self.has_activation_t):
            a += self.activation_t[t, e]
        # (1 + a)^(-1/3) costs an exp and a log per tet and step (18 % of an FEM step, measured);
        # at a = 0 (no activation, the common case) 1 - a/3 has the same value and derivative.
        sc = 1.0 - a / 3.0
        if a != 0.0:
            sc = ti.exp(-ti.log(1.0 + ti.max(a, MIN_ACTIVATION)) / 3.0)
        P = sc * self.group.material.stress(sc * F, p) + self.damping_stress(state, s, e, b, idx, Dm_inv, kd, F, p)
        H = -self.model.tet_volume[e] * matmul(P, Dm_inv.transpose())
        f1 = ti.Vector([H[0, 0], H[1, 0], H[2, 0]])
        f2 = ti.Vector([H[0, 1], H[1, 1], H[2, 1]])
        f3 = ti.Vector([H[0, 2], H[1, 2], H[2, 2]])
        if ti.static(self.has_mass_damping):
            corner_put(self.ports, state, s, e, b, 0, idx[0], -(f1 + f2 + f3) + self.mass_drag(state, s, e, b, idx, kd, 0))
            corner_put(self.ports, state, s, e, b, 1, idx[1], f1 + self.mass_drag(state, s, e, b, idx, kd, 1))
            corner_put(self.ports, state, s, e, b, 2, idx[2], f2 + self.mass_drag(state, s, e, b, idx, kd, 2))
            corner_put(self.ports, state, s, e, b, 3, idx[3], f3 + self.mass_drag(state, s, e, b, idx, kd, 3))
        else:
            corner_put(self.ports, state, s, e, b, 0, idx[0], -(f1 + f2 + f3))
            corner_put(self.ports, state, s, e, b, 1, idx[1], f1)
            corner_put(self.ports, state, s, e, b, 2, idx[2], f2)
            corner_put(self.ports, state, s, e, b, 3, idx[3], f3)

    @ti.func
    def mass_drag(self, state: ti.template(), s: ti.template(), e, b, idx, kd, k: ti.template()):
        """Corner k's share of "rayleigh_mass" damping, -alpha m_i v_i / n_i (`physics.damping`);
        0 for the group's tets of other models (selected, not branched: no AD stack)."""
        alpha = kd
        if ti.static(len(self.damping_models) > 1):
            alpha = ti.select(self.model.tet_damping_model[e] == RAYLEIGH_MASS, kd, 0.0)
        share = self.model.tet_corner_share[e][k]
        return -alpha * share * self.model.particle_mass[idx[k]] * corner_qd(self.ports, state, s, e, b, k, idx[k])

    @ti.func
    def damping_stress(self, state: ti.template(), s: ti.template(), e, b, idx, Dm_inv, kd, F, p):
        """The damping stress P_d [Pa] of tet e (`damping_law`; kd dF/dt by default).  The forward kernel skips it where kd = 0 (the default: four velocity
        reads and a 3x3 product, 6 % of a 40,960-tet step, measured).  Derivative kernels evaluate it
        whenever the parameter table has a gradient, since d/dkd at kd = 0 is dF/dt, not 0; without one
        (`finalize(requires_grad=...)` not naming tet_params) they skip it too (fem32, forward + backward
        with only the initial velocity named: 3,475 us per step against 4,571 with every gradient)."""
        if ti.static(differentiating() and has_grad(self.model.tet_params)):
            D = ti.Matrix.zero(float, 3, 3)
            if kd != 0.0:
                D = self.damping_law(e, kd, F, self.deformation_rate(state, s, e, b, idx, Dm_inv), p)
            else:
                # at kd = 0 the value and every derivative but d/dkd are 0: the velocities are read
                # without a gradient path, so Taichi carries an adjoint to kd alone (fem32 with every
                # gradient: see benchmarks/MEASURED.md, "Backward passes that skip what is zero")
                D = self.damping_law(e, kd, F, self.deformation_rate_stopped(state, s, idx, Dm_inv), p)
            return D
        else:
            D = ti.Matrix.zero(float, 3, 3)
            if kd != 0.0:
                D = self.damping_law(e, kd, F, self.deformation_rate(state, s, e, b, idx, Dm_inv), p)
            return D

    @ti.func
    def damping_law(self, e, kd, F, Fdot, p):
        """P_d of tet e's damping model (`physics.damping`): chosen at compile time where the group's
        tets share one model (the common case: no per-tet read), else by the tet's code."""
        P = ti.Matrix.zero(float, 3, 3)
        if ti.static(len(self.damping_models) == 1):
            P = damping_stress(self.damping_models[0], self.group.material, kd, F, Fdot, p)
        else:
            code = self.model.tet_damping_model[e]
            for c in ti.static(self.damping_models):
                if code == c:
                    P = damping_stress(c, self.group.material, kd, F, Fdot, p)
        return P

    @ti.func
    def deformation_rate(self, state: ti.template(), s: ti.template(), e, b, idx, Dm_inv):
        """dF/dt [1/s] of tet e from its corner velocities."""
        v0 = corner_qd(self.ports, state, s, e, b, 0, idx[0])
        w1 = corner_qd(self.ports, state, s, e, b, 1, idx[1]) - v0
        w2 = corner_qd(self.ports, state, s, e, b, 2, idx[2]) - v0
        w3 = corner_qd(self.ports, state, s, e, b, 3, idx[3]) - v0
        return matmul(ti.Matrix.cols([w1, w2, w3]), Dm_inv)

    @ti.func
    def deformation_rate_stopped(self, state: ti.template(), s: ti.template(), idx, Dm_inv):
        """`deformation_rate` read from the state without a gradient path (`exec.ports.stopped_state`; no
        ports: nothing flows back)."""
        _, v0 = stopped_state(state, s, idx[0])
        _, v1 = stopped_state(state, s, idx[1])
        _, v2 = stopped_state(state, s, idx[2])
        _, v3 = stopped_state(state, s, idx[3])
        return matmul(ti.Matrix.cols([v1 - v0, v2 - v0, v3 - v0]), Dm_inv)


def enable_activation_control(model, steps: int):
    """Add `model.tet_activation_t` (steps, E), a differentiable per-step activation added to
    `tet_activation` at step t.  Call before the first Simulator using the model runs."""
    if not getattr(model, "tet_count", 0):
        raise ValueError("enable_activation_control: the model has no tets")
    if not (isinstance(steps, (int, np.integer)) and steps >= 1):
        raise ValueError(f"steps: must be an integer >= 1, got {steps!r}")
    fld = model.add_field("tet_activation_t", float, (int(steps), model.tet_count), np.zeros((int(steps), model.tet_count)),
                          grad=True)      # the control: differentiable whenever the model has gradients
    for term in model.tet_forces:
        term.activation_t = fld
    return fld


def param_column(model, handle, name) -> int:
    """The column of `model.tet_params` that holds parameter `name` ("mu", "lam", ..., or "damping")
    of soft mesh `handle`'s material; KeyError naming the material's parameters for another name."""
    mat = get_material(handle.material)
    if name == "damping":
        return model.tet_params.shape[1] - 1
    if name not in mat.params:
        raise KeyError(f"material {mat.name!r} has no parameter {name!r}; its parameters are "
                       f"{list(mat.params) + ['damping']}")
    return list(mat.params).index(name)


def object_param(model, handle, name):
    """The value(s) of parameter `name` ("mu", "lam", ..., or "damping") of one soft mesh:
    a float with share_params=True, else an array (tet_count,) in the mesh's tet order."""
    col = param_column(model, handle, name)
    vals = model.get("tet_params")[handle.param_rows.start:handle.param_rows.stop, col]
    return float(vals[0]) if len(vals) == 1 else vals


def set_object_param(model, handle, name, value):
    """Write parameter `name` of one soft mesh (a scalar, or one value per tet)."""
    col = param_column(model, handle, name)
    table = model.get("tet_params")
    r = handle.param_rows
    table[r.start:r.stop, col] = as_array(name, value, shape=(r.stop - r.start,)) if np.ndim(value) else float(value)
    model.set("tet_params", table)


def elastic_energy(model, positions) -> float:
    """Total elastic energy [J] of the tets at `positions` (numpy (N, 3)), activation included
    (float64, numpy + `registry.evaluate_energy`; materials without energy count 0)."""
    from ..core.registry import evaluate_energy
    x = np.asarray(positions, dtype=np.float64)
    t = model.tet_indices.to_numpy()
    Dm_inv = model.tet_Dm_inv.to_numpy().astype(np.float64)
    vol = model.tet_volume.to_numpy().astype(np.float64)
    act = np.maximum(model.tet_activation.to_numpy().astype(np.float64), MIN_ACTIVATION)
    table = model.get("tet_params").astype(np.float64)
    rows = model.tet_param_row.to_numpy()
    Ds = np.stack([x[t[:, k]] - x[t[:, 0]] for k in (1, 2, 3)], axis=-1)
    F = (Ds @ Dm_inv) * ((1.0 + act) ** (-1.0 / 3.0))[:, None, None]
    total = 0.0
    for g in (term.group for term in model.tet_forces):
        if not g.material.has_energy:
            continue
        sl = slice(g.start, g.end)
        psi = evaluate_energy(g.material, F[sl], table[rows[sl], :g.param_count])
        total += float(np.sum(np.asarray(psi, dtype=np.float64) * vol[sl]))
    return total
