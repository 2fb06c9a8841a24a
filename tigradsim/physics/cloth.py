"""Cloth: triangle-mesh shells with a registered membrane material, dihedral bending,
aerodynamic drag and lift, pinned vertices and anchor springs.

Use through the builder::

    v, f = tgs.meshes.cloth_grid(20, 10, cell=0.1, origin=(0, 1, 0), plane="xy")
    cloth = b.add_cloth(v, f, material="membrane", params={"mu": 500, "lam": 800},
                        density=0.2, bending_stiffness=1e-3, drag=1.0, lift=0.5, pinned=[0, 20])
    b.component(Cloths).attach(b, cloth, [5], stiffness=100)   # anchor springs (from tigradsim.physics.cloth import Cloths)

Physics (per triangle with vertices x0, x1, x2, velocities v0, v1, v2):

* Membrane.  Rest frame: e1 along x1 - x0, e2 = n x e1 in the triangle's plane;
  Dm = [[e1.(x1-x0), e1.(x2-x0)], [e2.(x1-x0), e2.(x2-x0)]] (2x2), rest area A.
  F = [x1-x0, x2-x0] Dm^-1 (3x2), P = material.stress(F, p) + damping * dF/dt,
  forces f1, f2 = columns of -A P Dm^-T, f0 = -(f1 + f2).  The material is any
  registered kind "shell" material (`membrane`, `stvk_membrane`, a user's plugin);
  damping [Pa s * m] is Rayleigh-style on dF/dt.
* Aerodynamics (air at rest, or moving with the cloth's `wind`): v = mean vertex
  velocity - wind, n = unit normal, alpha = atan2(n.v, |v - (n.v) n|) (the angle of
  attack, = pi/2 - acos(n.v^) but differentiable at v = 0 and at n.v^ = +-1),
      f_drag = -k_drag A |n.v| v,   f_lift = -k_lift A alpha |v|^2 n
  (both oppose the motion, as in Warp's `eval_triangles`), split equally on the
  three vertices.  A is the rest area.
* Bending, per interior edge (x3, x4) with opposite vertices x1 (first face) and
  x2 (second face): n1 = (x3-x1) x (x4-x1), n2 = (x4-x2) x (x3-x2), e^ = unit edge,
      theta = atan2((n2 x n1).e^, n1.n2)            (signed dihedral angle, 0 = flat)
      E = k/2 (theta - theta0)^2,   f_i = -(k (theta - theta0) + k_d dtheta/dt) dtheta/dx_i
  with the exact gradients dtheta/dx_i of Bridson et al. 2003 (verified against
  finite differences of E in the tests).  theta0 comes from the rest mesh.  k is per
  edge [N m / rad^2]: E does not scale with the mesh resolution by itself.
  atan2 instead of acos: acos has an infinite derivative at flat cloth.
* Anchors: zero-length springs f = -k (x - a) - k_d v to fixed points a.

Stability (semi-implicit Euler): roughly dt < 1 / sqrt(k / m) for the lightest
vertex (a grid corner holds 1/6 of a cell's mass) with k ~ (mu + lam) for the
membrane and ~ k_bend / cell^2 for bending; e.g. cell 0.1 m, density 0.25 kg/m^2,
mu = 60, lam = 80 N/m runs at dt = 1 ms.

How the element loops add their forces: `exec.loops.element_path` (on a CPU, cloth runs on one
thread, plain adds, unless it has CLOTH_PARTS_MIN_TRIANGLES triangles and the CPU 3 or 4
threads: then on the parts path; GPUs atomic adds).  On one thread, from CLOTH_LANES_MIN_TRIANGLES triangles, the
membrane and bending go four elements at a time, forward (`element_lanes`) and reverse
(`virtual_work`, through the ports of `exec.lane_ports.LaneGroupPorts`); the membrane where its material gives
`stress_columns`.  From CLOTH_REVERSE_THREADS_MIN_TRIANGLES triangles their reverse runs on every thread
where only the state has gradients (`reverse_threads`).  Each law is written once, over lists of per-lane
values, for one element and a lane group alike: `physics.cloth_membrane` (membrane, damping, aerodynamics) and
`physics.cloth_bending` (dihedral bending); this module builds the cloth (`Cloths`) and its anchors.

Fields on the model (T triangles sorted by material, E bending edges, A anchors):
    cloth_indices (T,) ivec3          global particle indices
    cloth_rest_inv (T,) mat2          Dm^-1        cloth_area (T,) [m^2] rest area
    cloth_params (R, n+1), cloth_param_row (T,)   membrane parameter table (last
                                      column: membrane damping); see elements.py
    cloth_drag (Ra,), cloth_lift (Ra,), cloth_wind (Ra,) vec3, cloth_aero_row (T,)
    cloth_bend_indices (E,) ivec4 (x1, x2, x3, x4 above), cloth_bend_rest_angle (E,) [rad]
    cloth_bending_stiffness (Rb,), cloth_bending_damping (Rb,), cloth_bend_row (E,)
    cloth_anchor_indices (A,), cloth_anchor_position (A,) vec3,
    cloth_anchor_stiffness (A,) [N/m], cloth_anchor_damping (A,) [N s/m]
Differentiable: cloth_params, cloth_drag, cloth_lift, cloth_wind,
cloth_bend_rest_angle, cloth_bending_stiffness, cloth_bending_damping and the
anchor position/stiffness/damping (plus the particle fields: mass, q0, qd0).
With share_params=True (default) each `add` call has one row in each table (one
value per cloth to identify); with share_params=False one row per triangle (aero,
membrane) and per edge (bending).  `Cloths.triangle_order` maps sorted rows back.
"""
from dataclasses import dataclass, field as dc_field
from typing import List

import numpy as np
import taichi as ti
from taichi.lang import impl

from ..core.errors import as_array, check_positive
from ..core.model import StepTerm, has_grad
from ..core.registry import MaterialNotFoundError, get_material, list_materials
from ..core.runtime import ir_passes, scatter_mode
from ..exec.lane_ports import LaneGroupPorts, virtual_work_field
from ..exec.lanes import LANES
from ..exec.loops import element_path, make_ports, wrap_terms
from .cloth_self_contact import check_self_contact, self_contact_terms
from .cloth_soft_contact import cloth_soft_terms
from ..exec.simd import lane_count
from .cloth_bending import EDGE_EPS, ClothBendingForces, dihedral
from .cloth_membrane import AERO_EPS, NORMAL_EPS, ClothMembraneForces, aerodynamics, columns, list3
from .elements import MaterialElements

# the force terms and their laws live in cloth_membrane and cloth_bending, the lane-group ports in exec.lane_ports;
# their names stay importable from here
__all__ = ["ClothHandle", "Cloths", "ClothMembraneForces", "ClothBendingForces", "ClothAnchorForces", "LaneGroupPorts",
           "rest_frames", "interior_edges", "dihedral_angles", "bending_energy", "forward_lanes", "reverse_threads",
           "virtual_work_field", "dihedral", "aerodynamics", "columns", "list3", "NORMAL_EPS", "EDGE_EPS", "AERO_EPS",
           "CLOTH_PARTS_MIN_TRIANGLES", "CLOTH_PARTS_MIN_THREADS", "CLOTH_LANES_MIN_TRIANGLES",
           "CLOTH_REVERSE_THREADS_MIN_TRIANGLES", "CLOTH_WIDE_LANES_MIN_TRIANGLES"]

# "auto" puts a cloth's triangles and bending edges on the parts path (`exec.loops.element_path`) from this many
# triangles, both sets together, on CPUs of CLOTH_PARTS_MIN_THREADS threads or more: on 2 threads one thread in
# lanes is faster at every size, and one set on threads with the other serial is slower than either
# (figures: benchmarks/MEASURED.md, "Moved from the code").
CLOTH_PARTS_MIN_TRIANGLES = 20_000
CLOTH_PARTS_MIN_THREADS = 3

# On one thread the membrane and bending loops go LANES elements at a time (forward and reverse) from this many
# triangles; a smaller cloth takes them one at a time: the lanes run about twice as fast but compile ~10x
# longer, earned back only by a long fit (benchmarks/MEASURED.md, "Moved from the code").
CLOTH_LANES_MIN_TRIANGLES = 1_024

# From this many triangles a cloth's reverse in lanes runs on threads where it can (`reverse_threads`,
# `LaneGroupPorts`): the backward pass then launches each step's reverse on its own (`Simulator.reverse_per_step`),
# a fixed cost a step that the threads earn back from about this size (benchmarks/MEASURED.md, "Moved from the
# code").
CLOTH_REVERSE_THREADS_MIN_TRIANGLES = 3_000

# From this many triangles a cloth's forward lanes are one SIMD register wide (`forward_lanes`: 8 in float32 on
# a CPU with AVX2, where LANES = 4 fills half; the reverse stays at LANES, where 8 measured slower): faster per
# step but slower to compile, so only a cloth this size earns it back (benchmarks/MEASURED.md, "Moved from the
# code").
CLOTH_WIDE_LANES_MIN_TRIANGLES = 4_096


@dataclass
class ClothHandle:
    """What `add_cloth` returns.

    index: cloth number (order of `add` calls).  particle_start, particle_count:
    the cloth's vertices are particles [start, start + count).  faces: (T, 3)
    triangles in GLOBAL particle indices (for rendering).  bend_edges: (E, 4) global
    (x1, x2, x3, x4) of each interior edge.  pinned: global indices of pinned vertices.
    """

    index: int
    particle_start: int
    particle_count: int
    faces: np.ndarray
    bend_edges: np.ndarray
    pinned: np.ndarray = dc_field(default_factory=lambda: np.zeros(0, dtype=np.int64))

    @property
    def triangle_count(self) -> int:
        return len(self.faces)

    @property
    def edge_count(self) -> int:
        return len(self.bend_edges)

    @property
    def particles(self) -> np.ndarray:
        return np.arange(self.particle_start, self.particle_start + self.particle_count)


# ---------------------------------------------------------------------------
# numpy geometry (build time; also used by tests)

def rest_frames(x, tris):
    """Per-triangle inverse rest matrices Dm^-1 (T, 2, 2) and rest areas (T,)."""
    x = np.asarray(x, dtype=np.float64)
    t = np.asarray(tris, dtype=np.int64)
    d1 = x[t[:, 1]] - x[t[:, 0]]
    d2 = x[t[:, 2]] - x[t[:, 0]]
    n = np.cross(d1, d2)
    area = 0.5 * np.linalg.norm(n, axis=1)
    e1 = d1 / np.linalg.norm(d1, axis=1, keepdims=True)
    nh = n / np.linalg.norm(n, axis=1, keepdims=True)
    e2 = np.cross(nh, e1)
    dm = np.empty((len(t), 2, 2))
    dm[:, 0, 0] = np.einsum("ij,ij->i", e1, d1)
    dm[:, 0, 1] = np.einsum("ij,ij->i", e1, d2)
    dm[:, 1, 0] = 0.0
    dm[:, 1, 1] = np.einsum("ij,ij->i", e2, d2)
    return np.linalg.inv(dm), area


def interior_edges(tris, vertex_count=None):
    """Bending quadruples (E, 4): (x1, x2, x3, x4) = (opposite in face a, opposite in
    face b, edge start, edge end), the edge direction taken from face a's winding.

    Raises ValueError naming the edges shared by more than two triangles.
    """
    t = np.asarray(tris, dtype=np.int64)
    nt = len(t)
    if nt == 0:
        return np.zeros((0, 4), dtype=np.int64)
    # directed edges (a, b) of each face and the opposite vertex
    a = t[:, [0, 1, 2]].reshape(-1)
    b = t[:, [1, 2, 0]].reshape(-1)
    opp = t[:, [2, 0, 1]].reshape(-1)
    face = np.repeat(np.arange(nt), 3)
    key = np.stack([np.minimum(a, b), np.maximum(a, b)], 1)
    _, inv, counts = np.unique(key, axis=0, return_inverse=True, return_counts=True)
    inv = inv.reshape(-1)
    bad = np.nonzero(counts > 2)[0]
    if len(bad):
        edges = []
        for u in bad[:5]:
            rows = np.nonzero(inv == u)[0]
            edges.append(f"({key[rows[0], 0]}, {key[rows[0], 1]}) in triangles {face[rows].tolist()}")
        raise ValueError(f"triangles: {len(bad)} non-manifold edge(s) shared by more than two triangles, "
                         f"so bending is undefined there: " + "; ".join(edges)
                         + (" ..." if len(bad) > 5 else "") + " (pass bending_stiffness=0 and bending_damping=0 "
                         "to build the cloth without bending)")
    order = np.argsort(inv, kind="stable")
    sorted_inv = inv[order]
    starts = np.nonzero(np.r_[True, sorted_inv[1:] != sorted_inv[:-1]])[0]
    pair = starts[counts[sorted_inv[starts]] == 2]
    first, second = order[pair], order[pair + 1]
    return np.stack([opp[first], opp[second], a[first], b[first]], 1)


def dihedral_angles(x, quads):
    """Signed dihedral angles (E,) [rad] of bending quadruples, as the kernel computes them."""
    x = np.asarray(x, dtype=np.float64)
    q = np.asarray(quads, dtype=np.int64)
    x1, x2, x3, x4 = (x[q[:, k]] for k in range(4))
    n1 = np.cross(x3 - x1, x4 - x1)
    n2 = np.cross(x4 - x2, x3 - x2)
    e = x4 - x3
    e = e / np.linalg.norm(e, axis=1, keepdims=True)
    return np.arctan2(np.einsum("ij,ij->i", np.cross(n2, n1), e), np.einsum("ij,ij->i", n1, n2))


def bending_energy(x, quads, stiffness, rest_angle):
    """E = sum k/2 (theta - theta0)^2 (numpy, for tests and diagnostics)."""
    th = dihedral_angles(x, quads)
    return float(np.sum(0.5 * np.asarray(stiffness) * (th - np.asarray(rest_angle)) ** 2))


# ---------------------------------------------------------------------------
# builder component

def _per(name, value, count, shared, allow_negative=False):
    """A coefficient as (rows,) float64: one row (shared) or `count` rows."""
    rows = 1 if shared else count
    arr = np.asarray(value, dtype=np.float64)
    if arr.ndim == 0 or arr.size == 1:
        arr = np.full(rows, float(arr.reshape(-1)[0]) if arr.size else 0.0)
    elif shared:
        raise ValueError(f"{name}: with share_params=True give one value, got shape {arr.shape}")
    arr = as_array(name, arr, shape=(rows,))
    if not allow_negative:
        check_positive(name, arr, allow_zero=True)
    return arr


class Cloths:
    """Builder component for cloth (one per SceneBuilder; see `SceneBuilder.add_cloth`)."""

    def __init__(self):
        self.elements = MaterialElements("shell")
        self.handles: List[ClothHandle] = []
        self._tris, self._rest_inv, self._area = [], [], []
        self._aero_rows, self._aero_row = [], []         # rows (drag, lift, wx, wy, wz); row per triangle
        self._quads, self._rest_angle, self._bend_rows, self._bend_row = [], [], [], []
        self._anchors = []                               # (indices, positions, ke, kd)
        self._self_contact = []                          # (first particle, count, rest vertices, thickness, params)
        self.triangle_order = None

    # -- add ------------------------------------------------------------------
    def add(self, builder, vertices, triangles, material="membrane", params=None, density=0.1, damping=0.0,
            bending_stiffness=0.0, bending_damping=0.0, drag=0.0, lift=0.0, wind=(0.0, 0.0, 0.0), pinned=None,
            velocity=(0.0, 0.0, 0.0), radius=0.005, share_params=True, self_contact=False, thickness=None,
            self_contact_params=None) -> ClothHandle:
        """Add a cloth; returns a ClothHandle.

        Args:
            vertices: (V, 3) rest (and initial) positions [m].  triangles: (T, 3) vertex indices
                (0-based, local to this cloth), e.g. from `tgs.meshes.cloth_grid` or `load_obj`.
            material: name of a registered "shell" material.  params: its parameters (dict;
                arrays (T,) with share_params=False); may include "damping".
            density: mass per area [kg/m^2], > 0; each vertex gets 1/3 of each adjacent
                triangle's mass.
            damping: membrane damping on dF/dt, >= 0.
            bending_stiffness: k per interior edge [N m/rad^2], >= 0.  bending_damping: [N m s/rad^2].
                Both 0: no bending term and no manifold check.
            drag, lift: aerodynamic coefficients [kg/m^3] (drag >= 0).  wind: (3,) air velocity [m/s].
            pinned: local vertex indices that are fixed (mass 0; they never move).
            velocity: (3,) or (V, 3) initial velocity [m/s].  radius: contact radius [m].
            share_params: one parameter row per cloth (True) or per triangle / edge (False).
            self_contact: vertex-vertex repulsion between this cloth's vertices (and those of the other
                self-contact cloths) within `thickness` [m] (default 1.25 x the largest triangle circumradius;
                must exceed it), with `self_contact_params` {"ke", "kd", "kf", "mu"} (defaults
                `cloth_self_contact.DEFAULT_PARAMS`); see `tigradsim.physics.cloth_self_contact`.
        """
        x = as_array("vertices", vertices, shape=(None, 3))
        nv = len(x)
        if nv < 3:
            raise ValueError(f"vertices: a cloth needs at least 3 vertices, got {nv}")
        tri = self._check_triangles(triangles, nv)
        nt = len(tri)
        try:
            get_material(material)
        except MaterialNotFoundError:
            raise MaterialNotFoundError(f"material={material!r}: unknown material; registered shell materials: "
                                        f"{list_materials('shell')}") from None
        density = float(check_positive("density", as_array("density", density)))
        area = self._check_areas(x, tri)
        rest_inv, _ = rest_frames(x, tri)
        mass = np.zeros(nv)
        np.add.at(mass, tri.reshape(-1), np.repeat(density * area / 3.0, 3))
        fixed = np.zeros(nv, dtype=bool)
        if pinned is not None:
            pin = np.asarray(pinned).reshape(-1)
            if pin.size and not np.issubdtype(pin.dtype, np.integer):
                raise TypeError(f"pinned: expected integer vertex indices, got dtype {pin.dtype}")
            badp = np.nonzero((pin < 0) | (pin >= nv))[0]
            if len(badp):
                raise IndexError(f"pinned[{badp[0]}] = {int(pin[badp[0]])}: out of range for {nv} vertices")
            fixed[pin] = True
        lonely = np.nonzero((mass <= 0) & ~fixed)[0]
        if len(lonely):
            raise ValueError(f"vertices: vertex {lonely[0]} belongs to no triangle, so its mass would be 0 "
                             f"({len(lonely)} such vertices); remove it or pin it")
        vel = as_array("velocity", velocity)
        if vel.shape == (3,):
            vel = np.tile(vel, (nv, 1))
        vel = as_array("velocity", vel, shape=(nv, 3))
        kb = np.asarray(bending_stiffness, dtype=np.float64)
        kbd = np.asarray(bending_damping, dtype=np.float64)
        with_bending = bool(np.any(kb != 0) or np.any(kbd != 0))
        quads = interior_edges(tri) if with_bending else np.zeros((0, 4), dtype=np.int64)
        ne = len(quads)
        bend = np.stack([_per("bending_stiffness", kb, ne, share_params),
                         _per("bending_damping", kbd, ne, share_params)], 1) if ne else np.zeros((0, 2))
        wind = as_array("wind", wind, shape=(3,))
        aero = np.stack([_per("drag", drag, nt, share_params), _per("lift", lift, nt, share_params, True)], 1)
        aero = np.concatenate([aero, np.tile(wind, (len(aero), 1))], 1)
        selfc = check_self_contact(self_contact, thickness, self_contact_params, x, tri)
        # everything validated: now change the builder
        self.elements.add(material, nt, params, damping, share_params)
        start = builder.add_particles(x, vel, np.where(fixed, 1.0, mass), radius, fixed=fixed)
        if selfc is not None:
            self._self_contact.append((start, nv, x, *selfc))
        self._tris.append(tri + start)
        self._rest_inv.append(rest_inv)
        self._area.append(area)
        arow0 = sum(len(r) for r in self._aero_rows)
        self._aero_row.append(arow0 + (np.zeros(nt, dtype=np.int64) if share_params else np.arange(nt)))
        self._aero_rows.append(aero)
        if ne:
            brow0 = sum(len(r) for r in self._bend_rows)
            self._quads.append(quads + start)
            self._rest_angle.append(dihedral_angles(x, quads))
            self._bend_row.append(brow0 + (np.zeros(ne, dtype=np.int64) if share_params else np.arange(ne)))
            self._bend_rows.append(bend)
        handle = ClothHandle(len(self.handles), start, nv, (tri + start).astype(np.int32),
                             (quads + start).astype(np.int32), np.nonzero(fixed)[0] + start)
        self.handles.append(handle)
        return handle

    def placed(self, builder) -> list:
        """Each cloth's vertices at t = 0 (`tigradsim.core.placement.Placed`; the SceneBuilder
        fills in their positions and radii)."""
        from ..core.placement import Placed
        return [Placed(f"cloth {h.index}", None, particles=range(h.particle_start, h.particle_start + h.particle_count))
                for h in self.handles]

    def attach(self, builder, cloth: ClothHandle, vertices, stiffness, damping=0.0, positions=None) -> int:
        """Zero-length springs from cloth vertices (local indices) to fixed anchor points.

        positions: (K, 3) anchor points [m]; default the vertices' rest positions.
        stiffness [N/m] and damping [N s/m]: scalars or (K,).  Returns the first anchor index.
        """
        idx = np.asarray(vertices).reshape(-1)
        if not np.issubdtype(idx.dtype, np.integer):
            raise TypeError(f"vertices: expected integer vertex indices, got dtype {idx.dtype}")
        bad = np.nonzero((idx < 0) | (idx >= cloth.particle_count))[0]
        if len(bad):
            raise IndexError(f"vertices[{bad[0]}] = {int(idx[bad[0]])}: out of range for {cloth.particle_count} vertices")
        k = len(idx)
        gidx = idx + cloth.particle_start
        if positions is None:
            pos = np.concatenate(builder._q)[gidx]
        else:
            pos = as_array("positions", positions, shape=(k, 3))
        ke = check_positive("stiffness", as_array("stiffness", stiffness, shape=(k,)), allow_zero=True)
        kd = check_positive("damping", as_array("damping", damping, shape=(k,)), allow_zero=True)
        first = sum(len(a[0]) for a in self._anchors)
        self._anchors.append((gidx, pos, ke, kd))
        return first

    @staticmethod
    def _check_triangles(triangles, nv):
        t = np.asarray(triangles)
        if t.ndim != 2 or t.shape[1] != 3 or len(t) == 0:
            raise ValueError(f"triangles: expected shape (T, 3) with T >= 1, got {t.shape}")
        if not np.issubdtype(t.dtype, np.integer):
            if np.issubdtype(t.dtype, np.floating) and np.all(np.mod(t, 1) == 0):
                t = t.astype(np.int64)
            else:
                raise TypeError(f"triangles: expected integer vertex indices, got dtype {t.dtype}")
        bad = np.argwhere((t < 0) | (t >= nv))
        if len(bad):
            r, c = bad[0]
            raise IndexError(f"triangles[{r}] = {t[r].tolist()}: index {int(t[r, c])} is out of range for {nv} vertices")
        return t.astype(np.int64)

    @staticmethod
    def _check_areas(x, tri, rel_tol=1e-10):
        area = 0.5 * np.linalg.norm(np.cross(x[tri[:, 1]] - x[tri[:, 0]], x[tri[:, 2]] - x[tri[:, 0]]), axis=1)
        diag = float(np.linalg.norm(x.max(axis=0) - x.min(axis=0)))
        bad = np.nonzero(area <= rel_tol * diag ** 2)[0]
        if len(bad):
            k = int(bad[0])
            raise ValueError(f"triangles[{k}] = {tri[k].tolist()}: degenerate (zero-area) triangle, area "
                             f"{area[k]:.3g} m^2 ({len(bad)} degenerate triangles in all)")
        return area

    # -- finalize ---------------------------------------------------------------
    def finalize(self, builder, model):
        if not self._tris:
            return
        order, groups = self.elements.finalize(model, "cloth")
        self.triangle_order = order
        tris = np.concatenate(self._tris)[order]
        vec3 = ti.types.vector(3, float)
        model.cloth_triangle_count = len(tris)
        model.add_field("cloth_indices", ti.types.vector(3, ti.i32), (len(tris),), tris, param=False)
        model.add_field("cloth_rest_inv", ti.types.matrix(2, 2, float), (len(tris),),
                        np.concatenate(self._rest_inv)[order], param=False)
        model.add_field("cloth_area", float, (len(tris),), np.concatenate(self._area)[order], param=False)
        aero = np.concatenate(self._aero_rows)
        model.add_field("cloth_drag", float, (len(aero),), aero[:, 0])
        model.add_field("cloth_lift", float, (len(aero),), aero[:, 1])
        model.add_field("cloth_wind", vec3, (len(aero),), aero[:, 2:5])
        model.add_field("cloth_aero_row", ti.i32, (len(tris),), np.concatenate(self._aero_row)[order], param=False)
        path = element_path(len(tris), CLOTH_PARTS_MIN_TRIANGLES, CLOTH_PARTS_MIN_THREADS)
        ports = make_ports(path, model, tris, [(model.cloth_params, model.cloth_param_row.to_numpy())]
                           + [(getattr(model, f"cloth_{k}"), model.cloth_aero_row.to_numpy())
                              for k in ("drag", "lift", "wind")], [(g.start, g.end) for g in groups])
        # the lanes' reverse needs Taichi's IR passes: compiled without them (`init(advanced_optimization=False)`)
        # its adjoint became non-finite at the first step (GradientError; tests/test_ir_optimization.py)
        in_lanes = path == "serial" and len(tris) >= CLOTH_LANES_MIN_TRIANGLES and ir_passes()
        width = forward_lanes(len(tris))
        # the membrane's reverse in lanes runs on threads unless one of its parameter tables has a gradient
        threads = reverse_threads(model, [model.cloth_params] + [getattr(model, f"cloth_{k}") for k in ("drag", "lift", "wind")])
        membrane = [ClothMembraneForces(model, g, self.elements.damping_column, path, ports, in_lanes, width, threads)
                    for g in groups]
        # each term's reverse ports (`LaneGroupPorts`): their loops come before the membrane's
        model.force_terms.extend(m.reverse_ports for m in membrane if m.reverse_ports is not None)
        model.force_terms.extend(wrap_terms(ports, membrane))
        ne = sum(len(q) for q in self._quads)
        model.cloth_edge_count = ne
        if ne:
            bend = np.concatenate(self._bend_rows)
            model.add_field("cloth_bend_indices", ti.types.vector(4, ti.i32), (ne,), np.concatenate(self._quads), param=False)
            model.add_field("cloth_bend_rest_angle", float, (ne,), np.concatenate(self._rest_angle))
            model.add_field("cloth_bending_stiffness", float, (len(bend),), bend[:, 0])
            model.add_field("cloth_bending_damping", float, (len(bend),), bend[:, 1])
            model.add_field("cloth_bend_row", ti.i32, (ne,), np.concatenate(self._bend_row), param=False)
            quads = np.concatenate(self._quads)
            ports = make_ports(path, model, quads, [(getattr(model, f"cloth_bending_{k}"), model.cloth_bend_row.to_numpy())
                                                    for k in ("stiffness", "damping")])
            threads = reverse_threads(model, (model.cloth_bending_stiffness, model.cloth_bending_damping,
                                              model.cloth_bend_rest_angle))
            bending = ClothBendingForces(model, path, ports, in_lanes, width, threads)
            if bending.reverse_in_lanes:
                model.force_terms.append(bending.reverse_ports)      # its loop comes before bending's
            model.force_terms.extend(wrap_terms(ports, [bending]))
        na = sum(len(a[0]) for a in self._anchors)
        model.cloth_anchor_count = na
        if na:
            cat = [np.concatenate([a[k] for a in self._anchors]) for k in range(4)]
            model.add_field("cloth_anchor_indices", ti.i32, (na,), cat[0], param=False)
            model.add_field("cloth_anchor_position", vec3, (na,), cat[1])
            model.add_field("cloth_anchor_stiffness", float, (na,), cat[2])
            model.add_field("cloth_anchor_damping", float, (na,), cat[3])
            model.force_terms.append(ClothAnchorForces(model))
        model.force_terms.extend(self_contact_terms(builder, model, self._self_contact))
        # against the soft meshes (`cloth_soft_contact`): the builder's TetMeshes, if any, in a shared contact group
        model.force_terms.extend(cloth_soft_terms(builder, model, self.handles))


def forward_lanes(triangle_count: int) -> int:
    """Elements per iteration of a cloth's forward lanes: one SIMD register's worth (`exec.simd.lane_count`: 8 in
    float32 on a CPU with AVX2) from CLOTH_WIDE_LANES_MIN_TRIANGLES triangles, LANES below."""
    if triangle_count < CLOTH_WIDE_LANES_MIN_TRIANGLES:
        return LANES
    return max(LANES, lane_count(8 if impl.current_cfg().default_fp == ti.f64 else 4))


def reverse_threads(model, params) -> bool:
    """Whether a cloth element term's reverse in lanes runs on threads (`LaneGroupPorts`): on a CPU with 2 or
    more threads, for a cloth of CLOTH_REVERSE_THREADS_MIN_TRIANGLES triangles or more, where none of the
    parameter tables the term reads has a gradient (their adjoints would be added from the lanes atomically,
    in an order that varies: those fits keep it on one thread) and the run is not asked to be serial
    (`tgs.init(scatter="serial")`)."""
    cfg = impl.current_cfg()
    return cfg.arch == ti.cpu and cfg.cpu_max_num_threads >= 2 and scatter_mode() != "serial" \
        and model.cloth_triangle_count >= CLOTH_REVERSE_THREADS_MIN_TRIANGLES \
        and not any(has_grad(f) for f in params)


@ti.data_oriented
class ClothAnchorForces(StepTerm):
    """Zero-length anchor springs f = -k (x - a) - k_d v."""

    @ti.func
    def apply_forces(self, state: ti.template(), s: ti.template(), t: ti.template()):
        ti.loop_config(serialize=self.serial)
        for a in range(self.model.cloth_anchor_count):
            i = self.model.cloth_anchor_indices[a]
            state.particle_f[s, i] += -self.model.cloth_anchor_stiffness[a] * (
                state.particle_q[s, i] - self.model.cloth_anchor_position[a]) \
                - self.model.cloth_anchor_damping[a] * state.particle_qd[s, i]
