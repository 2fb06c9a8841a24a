"""Tetrahedral finite elements (soft solids): the `TetMeshes` builder component and its force term.

Per tet e with vertices (x0, x1, x2, x3), rest matrix Dm = [X1-X0, X2-X0, X3-X0]
and rest volume V (both precomputed in float64 at finalize):

    F    = Ds Dm^-1,            Ds = [x1-x0, x2-x0, x3-x0]
    dF/dt = dDs/dt Dm^-1        (from the vertex velocities)
    s    = (1 + a)^(-1/3)       a = activation of the element (tet_activation[e])
    P    = s P_mat(s F, p) + kd dF/dt
    f_k  = -V P Dm^-T e_k       on x_k, k = 1, 2, 3;  f_0 = -(f_1 + f_2 + f_3)

`P_mat` is the registered material's first Piola-Kirchhoff stress (any kind
"tet" material from `tigradsim.core.registry`), `p` its parameters and `kd` the
element's damping (Rayleigh-style damping on the rate of deformation).

Activation (active strain, works for every material alike): the element's
energy is V Psi(s F), so its stress-free shape is the rest shape scaled by
(1 + a)^(1/3) in every direction: a = 0.1 makes the element want 10 % more
volume, a = -0.1 10 % less.  It must stay > -1; the kernel clamps it at
-0.95.  A controller that changes activations per step uses
`enable_activation_control(model, steps)`, which adds `tet_activation_t[t, e]`
(added to `tet_activation[e]` at step t).

Masses are lumped: each vertex gets a quarter of the mass density * V of each
tet it belongs to (vertices that are `fixed` get mass 0 and never move).

Model fields (E = tet count, sorted by material; see `tigradsim.physics.elements`):
    tet_indices (E,) ivec4           global particle indices
    tet_Dm_inv (E,) mat3 [1/m]       rest shape inverse
    tet_volume (E,) [m^3]            rest volume
    tet_activation (E,) [-]          differentiable
    tet_params (rows, n_max + 1)     material parameters; last column: damping [Pa s]
    tet_param_row (E,) int           row of tet_params each tet reads
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


def lumped_masses(vertex_count, tets, volumes, density):
    """Per-vertex masses [kg]: a quarter of density * V of every adjacent tet."""
    m = np.zeros(vertex_count)
    np.add.at(m, np.asarray(tets).reshape(-1), np.repeat(np.asarray(volumes) * density / 4.0, 4))
    return m


class TetMeshes:
    """Builder component collecting tet meshes (one instance per SceneBuilder)."""

    def __init__(self):
        self.elements = MaterialElements("tet")
        self.meshes = []               # (SoftMesh, rest vertices (V,3), tets local (T,4))

    def add(self, builder, mesh, tets=None, material="neo_hookean", params=None, density=10.0, damping=0.0,
            share_params=True, velocity=(0.0, 0.0, 0.0), radius=0.01, fixed=None, lame=None,
            young_poisson=None) -> SoftMesh:
        """Add a tetrahedral solid.

        Args:
            mesh: (vertices (V, 3) [m], tets (T, 4) int), e.g. `tgs.meshes.tet_box(...)`, or
                vertices with `tets` given separately.  Tets must be positively oriented.
            material: a registered "tet" material name (`tgs.list_materials("tet")`).
            params: the material's parameters (name -> value), e.g. {"mu": 1e3, "lam": 1e3};
                missing ones take the material's defaults; "damping" may be given here too.
                For neo_hookean, mu and lam are NOT the Lame parameters: pass `lame=(mu_L, lam_L)`
                or `young_poisson=(E, nu)` to convert (`material.from_lame`).
            density: [kg/m^3] > 0; masses are lumped from it and the rest volumes.
            damping: [Pa s] >= 0, Rayleigh-style damping on dF/dt.
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
        density = float(check_positive("density", as_array("density", density, shape=())))
        n = len(vertices)
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
        masses = lumped_masses(n, tets, volumes, density)
        start = builder.add_particles(vertices, vel, np.where(mask, 1.0, masses), radius=radius, fixed=mask)
        handle = SoftMesh(particle_start=start, particle_count=n, tet_count=len(tets),
                          faces=(boundary_faces(tets) + start).astype(np.int32), param_rows=range(first_row, first_row + rows),
                          material=mat.name, index=len(self.meshes), local_tets=tets.astype(np.int64))
        self.meshes.append((handle, vertices, volumes))
        return handle

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
        path = element_path(E)
        ports = make_ports(path, model, tets[order], [(model.tet_params, model.tet_param_row.to_numpy())],
                           [(g.start, g.end) for g in groups])
        model.tet_forces = [TetForces(model, g, self.elements.damping_column, path, ports) for g in groups]
        model.force_terms.extend(wrap_terms(ports, model.tet_forces))


@ti.data_oriented
class TetForces(StepTerm):
    """The FEM force term of one material group (see the module docstring for the formulas;
    one term per group: a term runs one loop, see model.py)."""

    def __init__(self, model, group, damping_column, path="serial", ports=None):
        super().__init__(model)
        self.group = group
        self.damping_column = damping_column
        self.activation_t = None         # optional (steps, E) field: per-step activation (controllers)
        self.path = path                 # exec.loops.element_path: "serial", "parallel", or "parts" (with ports)
        self.serial = path == "serial"
        self.ports = NO_PORTS if ports is None else ports

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
        P = sc * self.group.material.stress(sc * F, p) + self.damping_stress(state, s, e, b, idx, Dm_inv, kd)
        H = -self.model.tet_volume[e] * matmul(P, Dm_inv.transpose())
        f1 = ti.Vector([H[0, 0], H[1, 0], H[2, 0]])
        f2 = ti.Vector([H[0, 1], H[1, 1], H[2, 1]])
        f3 = ti.Vector([H[0, 2], H[1, 2], H[2, 2]])
        corner_put(self.ports, state, s, e, b, 0, idx[0], -(f1 + f2 + f3))
        corner_put(self.ports, state, s, e, b, 1, idx[1], f1)
        corner_put(self.ports, state, s, e, b, 2, idx[2], f2)
        corner_put(self.ports, state, s, e, b, 3, idx[3], f3)

    @ti.func
    def damping_stress(self, state: ti.template(), s: ti.template(), e, b, idx, Dm_inv, kd):
        """kd dF/dt [Pa] of tet e.  The forward kernel skips it where kd = 0 (the default: four velocity
        reads and a 3x3 product, 6 % of a 40,960-tet step, measured).  Derivative kernels evaluate it
        whenever the parameter table has a gradient, since d/dkd at kd = 0 is dF/dt, not 0; without one
        (`finalize(requires_grad=...)` not naming tet_params) they skip it too (fem32, forward + backward
        with only the initial velocity named: 3,475 us per step against 4,571 with every gradient)."""
        if ti.static(differentiating() and has_grad(self.model.tet_params)):
            D = ti.Matrix.zero(float, 3, 3)
            if kd != 0.0:
                D = kd * self.deformation_rate(state, s, e, b, idx, Dm_inv)
            else:
                # at kd = 0 the value and every derivative but d/dkd are 0: the velocities are read
                # without a gradient path, so Taichi carries an adjoint to kd alone (fem32 with every
                # gradient: see benchmarks/MEASURED.md, "Backward passes that skip what is zero")
                D = kd * self.deformation_rate_stopped(state, s, idx, Dm_inv)
            return D
        else:
            D = ti.Matrix.zero(float, 3, 3)
            if kd != 0.0:
                D = kd * self.deformation_rate(state, s, e, b, idx, Dm_inv)
            return D

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


def _column(model, handle, name):
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
    col = _column(model, handle, name)
    vals = model.get("tet_params")[handle.param_rows.start:handle.param_rows.stop, col]
    return float(vals[0]) if len(vals) == 1 else vals


def set_object_param(model, handle, name, value):
    """Write parameter `name` of one soft mesh (a scalar, or one value per tet)."""
    col = _column(model, handle, name)
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
