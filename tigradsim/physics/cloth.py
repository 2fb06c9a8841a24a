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
(`virtual_work`, through the ports of `LaneGroupPorts`); the membrane where its material gives
`stress_columns`.  From CLOTH_REVERSE_THREADS_MIN_TRIANGLES triangles their reverse runs on every thread
where only the state has gradients (`reverse_threads`).

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

from ..exec import lanes
from .elements import MaterialElements
from ..exec.loops import NO_PORTS, corner_put, corner_q, corner_qd, csr_starts, differentiating, element_path, \
    for_each_element, make_ports, reversing, row_value, stopped_state, table_row, wrap_terms
from ..exec.lanes import LANES
from ..core.errors import as_array, check_positive
from ..core.model import StepTerm, has_grad
from ..core.runtime import scatter_mode
from ..exec.simd import lane_count
from ..core.registry import MaterialNotFoundError, get_material, list_materials

# "auto" puts a cloth's triangles and bending edges on the parts path (`exec.loops.element_path`) from this many
# triangles, both sets together, on CPUs of CLOTH_PARTS_MIN_THREADS threads or more.  On 2 threads one thread
# in lanes (membrane and bending, both ways) is faster at every size: measured (f32, us per step, forward /
# forward + backward, vs_warp's cloth, named gradients, serial on 1 thread against parts on 2): 64 x 64 (8,192
# triangles) 202 / 731 against 338-357 / 1,077-1,117; 112 x 112 (24,642; dt 2.5e-4) 647 / 2,367 against 918 /
# 3,242; 160 x 160 (51,200; dt 4e-5) 1,240 / 4,435 against 1,645 / 5,442 (the per-element costs are linear
# in the count, so the ratio holds beyond).  The parts path on 2 threads runs the one-at-a-time code about
# 1.4-1.6x as fast as one thread (fem32: 1.58x / 1.55x), the lanes about 1.7x; with 3 or 4 threads (the CPUs
# on which "auto" still avoids atomic adds) parts should win again on large cloth, not measured here: the
# earlier crossover (bending alone in lanes, 2 threads: between 96 x 96 and 112 x 112) stands there.  One set
# on threads and the other serial (64 x 64: 349 / 1,051) is slower than either, so the triangle count
# decides for both.
CLOTH_PARTS_MIN_TRIANGLES = 20_000
CLOTH_PARTS_MIN_THREADS = 3

# On one thread the membrane and bending loops go LANES elements at a time (forward and reverse) from this many
# triangles; a smaller cloth takes them one at a time.  The lanes run cloth about twice as fast (f32, named, us
# per step, forward / forward + backward, one at a time against lanes: 16 x 16, 512 triangles, 27 / 94 against
# 14 / 49; 20 x 20 43 / 147 against 20 / 69; 64 x 64 432 / 1,469 against 202 / 723: ~90 ns per triangle and
# step) but cost compile time (a cloth's reverse kernel, uncached: 2.3-2.5 s one at a time, 20-22 s in lanes;
# 30 s with every gradient), once per model and precision: the ~18 s are earned back after ~2e8 triangle-steps,
# a fit of ~200 iterations of 1,000 steps at this size (the offline cache keeps the kernels for later runs).
CLOTH_LANES_MIN_TRIANGLES = 1_024

# From this many triangles a cloth's reverse in lanes runs on threads where it can (`reverse_threads`,
# `LaneGroupPorts`): the backward pass then launches each step's reverse on its own (`Simulator.reverse_per_step`),
# ~25-30 us a step more, which the threads earn back from ~2,500 (float32) to ~3,000 (float64) triangles.
# Measured on the Xeon (vs_warp's cloth at other sizes, named gradients, µs per step forward + backward, one
# thread fused against threads on 2 CPUs, two runs each, alternating), since each lane group has its own entry
# of W (`virtual_work_field`): f32 34 x 34 (2,312 triangles) 306 (twice) against 308-314, 36 x 36 (2,592)
# 340-342 against 321-328, 40 x 40 (3,200) 419-421 against 379; f64 34 x 34 353-396 against 397-406,
# 40 x 40 490 against 457-459; 32 x 32 (f32) 270 against 288-292.  (Before it, with ports on one thread: 4,096.)
CLOTH_REVERSE_THREADS_MIN_TRIANGLES = 3_000

# From this many triangles a cloth's forward lanes are one SIMD register wide (`forward_lanes`: 8 in float32 on
# a CPU with AVX2, where LANES = 4 fills half; the reverse stays at LANES, where 8 measured slower).  Measured
# (vs_warp cloth64, f32, Intel Xeon with AVX-512, µs per step): forward 354-419 -> 288-297, forward + backward
# ~6 % less; the forward kernel compiles in 14-18 s against 4-5 s, once per model and precision (offline cache
# after), which a cloth this size earns back in a long run: below it, LANES.
CLOTH_WIDE_LANES_MIN_TRIANGLES = 4_096

# Floors under squared lengths (norm() at 0 has a NaN gradient); far below any real
# cloth's |n|^2 = (2 area)^2 even in f32.
NORMAL_EPS = 1e-30
EDGE_EPS = 1e-24
AERO_EPS = 1e-12   # [m^2/s^2] under |v_tangential|


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
        self.triangle_order = None

    # -- add ------------------------------------------------------------------
    def add(self, builder, vertices, triangles, material="membrane", params=None, density=0.1, damping=0.0,
            bending_stiffness=0.0, bending_damping=0.0, drag=0.0, lift=0.0, wind=(0.0, 0.0, 0.0), pinned=None,
            velocity=(0.0, 0.0, 0.0), radius=0.005, share_params=True) -> ClothHandle:
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
        # everything validated: now change the builder
        self.elements.add(material, nt, params, damping, share_params)
        start = builder.add_particles(x, vel, np.where(fixed, 1.0, mass), radius, fixed=fixed)
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
        in_lanes = path == "serial" and len(tris) >= CLOTH_LANES_MIN_TRIANGLES
        width = forward_lanes(len(tris))
        membrane = [ClothMembraneForces(model, g, self.elements.damping_column, path, ports, in_lanes, width)
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
            bending = ClothBendingForces(model, path, ports, in_lanes, width)
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


# ---------------------------------------------------------------------------
# force terms

@ti.func
def list3(v):
    """A 3-vector as a list of its three components (`exec.lanes`' form for one element)."""
    return [v[0], v[1], v[2]]


@ti.func
def _col(M, c: ti.template()):
    return ti.Vector([M[0, c], M[1, c], M[2, c]])


@ti.data_oriented
class ClothMembraneForces(StepTerm):
    """Membrane (registered shell material + dF/dt damping) and aerodynamics, per triangle of
    one material group (one term per group: a term runs one loop, see model.py)."""

    def __init__(self, model, group, damping_column, path="serial", ports=None, in_lanes=False, forward_lanes=LANES):
        super().__init__(model)
        self.group = group
        self.damping_column = damping_column
        self.path = path                 # exec.loops.element_path: "serial", "parallel", or "parts" (with ports)
        self.serial = path == "serial"
        self.ports = NO_PORTS if ports is None else ports
        # in_lanes (one thread, CLOTH_LANES_MIN_TRIANGLES) and a material that gives its stress by columns:
        # forward kernels take LANES triangles per iteration (`element_lanes`, `exec.loops.for_each_element`)
        self.in_lanes = in_lanes and self.serial and group.material.in_columns()
        self.forward_lanes = forward_lanes       # elements per iteration of the forward lanes (the reverse: LANES)
        self.lane_forces = lanes.LaneForces(3, forward_lanes) if self.in_lanes else None
        # ... and so does its reverse kernel, through `reverse_ports` (`virtual_work`), on threads unless a
        # membrane or aerodynamics parameter has a gradient (`LaneGroupPorts`)
        self.reverse_in_lanes = self.in_lanes and model.requires_grad
        self.reverse_ports = None
        if self.reverse_in_lanes:
            self.work = virtual_work_field(group.end - group.start)
            params = [model.cloth_params] + [getattr(model, f"cloth_{k}") for k in ("drag", "lift", "wind")]
            self.reverse_ports = LaneGroupPorts(model, model.cloth_indices.to_numpy()[group.start:group.end],
                                                reverse_threads(model, params))
            self.parallel_reverse = self.reverse_ports.parallel

    @property
    def element_range(self):
        """[start, end) of the triangles this term loops over (`parts.merge_part_loops`)."""
        return self.group.start, self.group.end

    @ti.func
    def apply_forces(self, state: ti.template(), s: ti.template(), t: ti.template()):
        if ti.static(self.reverse_in_lanes and reversing()):
            self.virtual_work(state, s)
        else:
            for_each_element(self, state, s, t, self.group.start, self.group.end)

    @ti.func
    def element(self, state: ti.template(), s: ti.template(), t: ti.template(), e, b):
        """Triangle e's membrane and aerodynamic corner forces, added at slot s; b: its block
        (`exec.loops.for_each_element`)."""
        if ti.static(self.ports.active):     # parts path: inputs through ports (exec.ports)
            self.ports.stop(state)
            self.ports.open(e)
        tri = self.model.cloth_indices[e]
        i, j, k = tri[0], tri[1], tri[2]
        x0 = corner_q(self.ports, state, s, e, b, 0, i)
        d1 = corner_q(self.ports, state, s, e, b, 1, j) - x0
        d2 = corner_q(self.ports, state, s, e, b, 2, k) - x0
        B = self.model.cloth_rest_inv[e]
        area = self.model.cloth_area[e]
        row = self.model.cloth_param_row[e]
        pr = table_row(self.ports, 0, self.model.cloth_params, e, b, row)
        # F = [d1 d2] B and H = -A P B^T written out (no matmul in the reverse pass)
        F = ti.Matrix.cols([d1 * B[0, 0] + d2 * B[1, 0], d1 * B[0, 1] + d2 * B[1, 1]])
        P = self.group.material.stress(F, ti.Vector([pr[c] for c in ti.static(range(self.group.param_count))]))
        kd = pr[self.damping_column]
        drag = table_row(self.ports, 1, self.model.cloth_drag, e, b, self.model.cloth_aero_row[e])
        lift = table_row(self.ports, 2, self.model.cloth_lift, e, b, self.model.cloth_aero_row[e])
        fa = ti.Vector([0.0, 0.0, 0.0])
        # The forward kernel skips the damping where kd = 0, and the aerodynamics where drag and lift
        # are 0 (the defaults: together 30 % of a 64x64 cloth step, measured).  A derivative kernel
        # evaluates a term whenever its coefficients have a gradient (d/dkd, d/ddrag and d/dlift at 0
        # are not 0), and skips it like the forward kernel where they have none.
        # Bitwise | on the comparisons, not `or`: Taichi compiles `or` to a branch that stores into a
        # local twice, and its reverse pass keeps such a local on an AD stack (pushed and popped per
        # triangle; 615 stack allocations in the printed IR of a cloth step, none with `|`)
        damped = (kd != 0.0) | ti.static(differentiating() and has_grad(self.model.cloth_params))
        aero = (drag != 0.0) | (lift != 0.0)
        if damped | aero:
            v0 = corner_qd(self.ports, state, s, e, b, 0, i)
            w1 = corner_qd(self.ports, state, s, e, b, 1, j) - v0
            w2 = corner_qd(self.ports, state, s, e, b, 2, k) - v0
            if damped:
                P += kd * ti.Matrix.cols([w1 * B[0, 0] + w2 * B[1, 0], w1 * B[0, 1] + w2 * B[1, 1]])
            if aero:
                wind = table_row(self.ports, 3, self.model.cloth_wind, e, b, self.model.cloth_aero_row[e])
                fa = ti.Vector(aerodynamics(list3(d1), list3(d2), area, list3((3.0 * v0 + w1 + w2) / 3.0 - wind), drag, lift))
        if ti.static(differentiating() and (has_grad(self.model.cloth_drag) or has_grad(self.model.cloth_lift))):
            if aero == 0:           # drag = lift = 0 here
                fa = self.aerodynamics_at_zero(state, s, e, i, j, k, area, drag, lift)
        p0 = _col(P, 0)
        p1 = _col(P, 1)
        f1 = -area * (p0 * B[0, 0] + p1 * B[0, 1])
        f2 = -area * (p0 * B[1, 0] + p1 * B[1, 1])
        corner_put(self.ports, state, s, e, b, 0, i, fa - f1 - f2)
        corner_put(self.ports, state, s, e, b, 1, j, fa + f1)
        corner_put(self.ports, state, s, e, b, 2, k, fa + f2)

    @ti.func
    def element_lanes(self, state: ti.template(), s: ti.template(), t: ti.template(), base, end: ti.template()):
        """`element` of the LANES triangles base, base + 1, ... (below end) at once, on one thread, in forward
        kernels (`exec.loops.for_each_element`; `exec.lanes`: the same formulas, the material's by columns).
        Lanes past the last triangle repeat it with their forces multiplied by 0."""
        arow, idx, B, area, p, kd, drag, lift = self.triangle_lanes(base, end, self.forward_lanes)
        out = self.lane_forces
        x0 = out.corner(state.particle_q, s, idx, 0)
        d1 = lanes.sub(out.corner(state.particle_q, s, idx, 1), x0)
        d2 = lanes.sub(out.corner(state.particle_q, s, idx, 2), x0)
        P1, P2 = self.group.material.stress_columns(columns(d1, d2, B, 0), columns(d1, d2, B, 1), p)
        corner_forces(out, P1, P2, B, area, False)
        damped = lanes.any_nonzero(kd)
        aero = lanes.any_nonzero(drag) | lanes.any_nonzero(lift)
        if damped | aero:
            v0 = out.corner(state.particle_qd, s, idx, 0)
            w1 = lanes.sub(out.corner(state.particle_qd, s, idx, 1), v0)
            w2 = lanes.sub(out.corner(state.particle_qd, s, idx, 2), v0)
            if damped:
                corner_forces(out, lanes.scale(columns(w1, w2, B, 0), kd), lanes.scale(columns(w1, w2, B, 1), kd), B, area, True)
            if aero:
                fa = aerodynamics(d1, d2, area, self.relative_velocity(arow, v0, w1, w2, self.forward_lanes), drag, lift)
                for k in ti.static(range(3)):
                    out.accumulate(k, fa[0], fa[1], fa[2])
        out.add(state, s, idx)

    @ti.func
    def virtual_work(self, state: ti.template(), s: ti.template()):
        """The loop that stands for the membrane and aerodynamic forces in the reverse kernel (`apply_forces`),
        as `ClothBendingForces.virtual_work` does for bending: W = sum over triangles and corners k of
        lambda_k . f_k, lambda = particle_f.grad[s] read as a constant, LANES triangles at a time, positions
        and velocities through `reverse_ports` (on threads where `LaneGroupPorts.parallel`).  With the corner forces -A P B^T (corner 0
        taking minus the other two) W = -A P : ([lambda_1 - lambda_0, lambda_2 - lambda_0] B) per triangle,
        plus (lambda_0 + lambda_1 + lambda_2) . f_aero."""
        start = ti.static(self.group.start)
        end = ti.static(self.group.end)
        ports = self.reverse_ports
        ti.loop_config(serialize=not ports.parallel)
        for g in range((end - start + LANES - 1) // LANES):
            ti.stop_grad(state.particle_q)       # the state's adjoints go through the ports
            ti.stop_grad(state.particle_qd)
            base = start + g * LANES
            self.work.grad[g] = 1.0              # W's adjoint (see ClothBendingForces.virtual_work)
            ports.open(g)
            arow, idx, B, area, p, kd, drag, lift = self.triangle_lanes(base, end, LANES)
            x = [lanes.add3(lanes.corner(state.particle_q, s, idx, k, LANES), ports.corner(ports.qport, g, k))
                 for k in ti.static(range(3))]
            d1 = lanes.sub(x[1], x[0])
            d2 = lanes.sub(x[2], x[0])
            adj = [lanes.corner(state.particle_f.grad, s, idx, k, LANES) for k in ti.static(range(3))]
            m1 = lanes.sub(adj[1], adj[0])
            m2 = lanes.sub(adj[2], adj[0])
            G1 = columns(m1, m2, B, 0)
            G2 = columns(m1, m2, B, 1)
            P1, P2 = self.group.material.stress_columns(columns(d1, d2, B, 0), columns(d1, d2, B, 1), p)
            self.work[g] += (-area * (lanes.dot(P1, G1) + lanes.dot(P2, G2))).sum()
            # A derivative kernel evaluates a term whose coefficients have gradients even where they are 0
            # (see `element`); where they are 0 on every lane, the derivatives in everything but them are 0, and
            # the state (without its ports) and the wind are read as constants (`aerodynamics_at_zero`)
            damp_grad = ti.static(has_grad(self.model.cloth_params))
            aero_grad = ti.static(has_grad(self.model.cloth_drag) or has_grad(self.model.cloth_lift))
            damped = lanes.any_nonzero(kd)
            aero = lanes.any_nonzero(drag) | lanes.any_nonzero(lift)
            adj_sum = lanes.add3(lanes.add3(adj[0], adj[1]), adj[2])
            if damped | aero:
                v = [lanes.add3(lanes.corner(state.particle_qd, s, idx, k, LANES), ports.corner(ports.qdport, g, k))
                     for k in ti.static(range(3))]
                self.velocity_work(g, arow, B, area, kd, drag, lift, G1, G2, adj_sum, d1, d2, v,
                                   damped | ti.static(damp_grad), aero | ti.static(aero_grad))
            elif ti.static(damp_grad or aero_grad):
                ti.stop_grad(self.model.cloth_wind)
                x0 = lanes.corner(state.particle_q, s, idx, 0, LANES)
                self.velocity_work(g, arow, B, area, kd, drag, lift, G1, G2, adj_sum,
                                   lanes.sub(lanes.corner(state.particle_q, s, idx, 1, LANES), x0),
                                   lanes.sub(lanes.corner(state.particle_q, s, idx, 2, LANES), x0),
                                   [lanes.corner(state.particle_qd, s, idx, k, LANES) for k in ti.static(range(3))],
                                   ti.static(damp_grad), ti.static(aero_grad))

    @ti.func
    def velocity_work(self, g, arow, B, area, kd, drag, lift, G1, G2, adj_sum, d1, d2, v, damped, aero):
        """Add the virtual work of the damping (where `damped`) and aerodynamic (where `aero`) forces of
        the LANES triangles of lane group g (arow: their aerodynamics rows) to W's entry g (`virtual_work`; v: their
        corner velocities, three lane triples)."""
        w1 = lanes.sub(v[1], v[0])
        w2 = lanes.sub(v[2], v[0])
        if damped:
            self.work[g] += (-area * kd * (lanes.dot(columns(w1, w2, B, 0), G1)
                                           + lanes.dot(columns(w1, w2, B, 1), G2))).sum()
        if aero:
            fa = aerodynamics(d1, d2, area, self.relative_velocity(arow, v[0], w1, w2, LANES), drag, lift)
            self.work[g] += lanes.dot(fa, adj_sum).sum()

    @ti.func
    def triangle_lanes(self, base, end, n: ti.template()):
        """The n triangles from base below end: their aerodynamics rows, the (3, n) particle indices, B = Dm^-1
        (2x2 nested lists of lane values), the rest areas times 1 on live lanes and 0 on lanes past the last
        triangle (which repeat it), the material parameters (a list of lane values), the membrane damping, the
        drag and the lift."""
        e, live = lanes.element_indices(base, end, n)
        idx = ti.Matrix([[self.model.cloth_indices[e[l]][k] for l in ti.static(range(n))] for k in ti.static(range(3))])
        B = [[ti.Vector([self.model.cloth_rest_inv[e[l]][r, c] for l in ti.static(range(n))]) for c in ti.static(range(2))]
             for r in ti.static(range(2))]
        area = ti.Vector([self.model.cloth_area[e[l]] for l in ti.static(range(n))]) * live
        row = ti.Vector([self.model.cloth_param_row[e[l]] for l in ti.static(range(n))])
        p = [ti.Vector([self.model.cloth_params[row[l], c] for l in ti.static(range(n))])
             for c in ti.static(range(self.group.param_count))]
        kd = ti.Vector([self.model.cloth_params[row[l], self.damping_column] for l in ti.static(range(n))])
        arow = ti.Vector([self.model.cloth_aero_row[e[l]] for l in ti.static(range(n))])
        drag = ti.Vector([self.model.cloth_drag[arow[l]] for l in ti.static(range(n))])
        lift = ti.Vector([self.model.cloth_lift[arow[l]] for l in ti.static(range(n))])
        return arow, idx, B, area, p, kd, drag, lift

    @ti.func
    def relative_velocity(self, arow, v0, w1, w2, n: ti.template()):
        """Mean corner velocity minus the wind of n triangles with aerodynamics rows arow (lane triples; w1, w2:
        v1 - v0, v2 - v0)."""
        return [(3.0 * v0[c] + w1[c] + w2[c]) / 3.0 - ti.Vector([self.model.cloth_wind[arow[l]][c] for l in ti.static(range(n))])
                for c in ti.static(range(3))]

    @ti.func
    def aerodynamics_at_zero(self, state: ti.template(), s: ti.template(), e, i, j, k, area, drag, lift):
        """`aerodynamics` of triangle e where drag = lift = 0, for a derivative kernel that needs d/d(drag)
        and d/d(lift) there (not 0).  Its value is 0, and so is its derivative in every other input
        (each term is a multiple of drag or lift), so the positions, velocities and wind are read
        without a gradient path: Taichi then carries adjoints only to drag and lift, not back through
        the normal, the angle of attack and the reads (cloth32 with every gradient: 100 of the
        backward's ~400 us per step went there)."""
        x0, v0 = stopped_state(state, s, i)
        x1, v1 = stopped_state(state, s, j)
        x2, v2 = stopped_state(state, s, k)
        ti.stop_grad(self.model.cloth_wind)
        wind = row_value(self.model.cloth_wind, self.model.cloth_aero_row[e])
        return ti.Vector(aerodynamics(list3(x1 - x0), list3(x2 - x0), area, list3((v0 + v1 + v2) / 3.0 - wind), drag, lift))


@ti.func
def columns(d1, d2, B, c: ti.template()):
    """Column c of [d1 d2] B (d1, d2: lane triples; B: 2x2 nested lists of lane values)."""
    return [d1[r] * B[0][c] + d2[r] * B[1][c] for r in range(3)]


@ti.func
def corner_forces(out: ti.template(), P1, P2, B, area, add: ti.template()):
    """The three corner forces -A P B^T (columns f1, f2; corner 0 takes -(f1 + f2)) of LANES triangles with
    stress columns P1, P2, stored into `out` (a `lanes.LaneForces`), or added to what it holds (add=True)."""
    f1 = [-area * (P1[r] * B[0][0] + P2[r] * B[0][1]) for r in range(3)]
    f2 = [-area * (P1[r] * B[1][0] + P2[r] * B[1][1]) for r in range(3)]
    f0 = [-(f1[r] + f2[r]) for r in range(3)]
    if ti.static(add):
        out.accumulate(0, f0[0], f0[1], f0[2])
        out.accumulate(1, f1[0], f1[1], f1[2])
        out.accumulate(2, f2[0], f2[1], f2[2])
    else:
        out.put(0, f0[0], f0[1], f0[2])
        out.put(1, f1[0], f1[1], f1[2])
        out.put(2, f2[0], f2[1], f2[2])


@ti.func
def aerodynamics(d1, d2, area, v, drag, lift):
    """A triangle's aerodynamic force per corner [N]: drag and lift on its mean velocity relative to the wind,
    v [m/s] (d1, d2: its edge vectors from corner 0, area [m^2] its rest area); lane triples and lane values
    (`exec.lanes`), or lists of three scalars and scalars for one triangle."""
    n = lanes.cross(d1, d2)
    nh = lanes.scale(n, 1.0 / ti.sqrt(lanes.dot(n, n) + NORMAL_EPS))
    vn = lanes.dot(nh, v)
    vt = lanes.sub(v, lanes.scale(nh, vn))
    attack = lanes.atan2_lanes(vn, ti.sqrt(lanes.dot(vt, vt) + AERO_EPS))
    return lanes.add3(lanes.scale(v, -(drag * area / 3.0) * ti.abs(vn)),
                      lanes.scale(nh, -(lift * area / 3.0) * attack * lanes.dot(v, v)))


@ti.func
def dihedral(x1, x2, x3, x4):
    """Signed dihedral angles theta and their gradients dtheta/dx1 .. dtheta/dx4 (Bridson et al. 2003) of L
    bending edges at once, each corner given as a lane triple (`exec.lanes`: a list of three L-vectors;
    three scalars for one edge): returns (theta (L-vector or scalar), [g1, g2, g3, g4] (lane triples)).
    x3, x4: the edge; x1, x2: the opposite corners."""
    n1 = lanes.cross(lanes.sub(x3, x1), lanes.sub(x4, x1))
    n2 = lanes.cross(lanes.sub(x4, x2), lanes.sub(x3, x2))
    edge = lanes.sub(x4, x3)
    el = ti.sqrt(lanes.dot(edge, edge) + EDGE_EPS)
    eh = lanes.scale(edge, 1.0 / el)
    theta = lanes.atan2_lanes(lanes.dot(lanes.cross(n2, n1), eh), lanes.dot(n1, n2))
    a1 = lanes.scale(n1, 1.0 / (lanes.dot(n1, n1) + NORMAL_EPS))
    a2 = lanes.scale(n2, 1.0 / (lanes.dot(n2, n2) + NORMAL_EPS))
    d14 = lanes.dot(lanes.sub(x1, x4), eh)
    d24 = lanes.dot(lanes.sub(x2, x4), eh)
    d31 = lanes.dot(lanes.sub(x3, x1), eh)
    d32 = lanes.dot(lanes.sub(x3, x2), eh)
    return theta, [lanes.scale(a1, el), lanes.scale(a2, el), [a1[c] * d14 + a2[c] * d24 for c in range(3)],
                   [a1[c] * d31 + a2[c] * d32 for c in range(3)]]


@ti.data_oriented
class ClothBendingForces(StepTerm):
    """Dihedral-angle bending: f = -(k (theta - theta0) + k_d dtheta/dt) dtheta/dx."""

    def __init__(self, model, path="serial", ports=None, in_lanes=False, forward_lanes=LANES):
        super().__init__(model)
        self.path = path                 # exec.loops.element_path: "serial", "parallel", or "parts" (with ports)
        self.serial = path == "serial"
        self.ports = NO_PORTS if ports is None else ports
        # in_lanes (one thread, CLOTH_LANES_MIN_TRIANGLES): forward kernels take LANES edges per iteration
        # (`element_lanes`, `exec.loops.for_each_element`), and so does the reverse kernel where there are gradients
        # (`virtual_work`, through these ports)
        self.in_lanes = in_lanes and self.serial
        self.forward_lanes = forward_lanes       # edges per iteration of the forward lanes (the reverse: LANES)
        self.lane_forces = lanes.LaneForces(4, forward_lanes) if self.in_lanes else None
        self.reverse_in_lanes = self.in_lanes and model.requires_grad
        self.reverse_ports = None
        if self.reverse_in_lanes:
            self.work = virtual_work_field(model.cloth_edge_count)
            # on threads unless a bending parameter has a gradient (`LaneGroupPorts`)
            params = (model.cloth_bending_stiffness, model.cloth_bending_damping, model.cloth_bend_rest_angle)
            self.reverse_ports = LaneGroupPorts(model, model.cloth_bend_indices.to_numpy(), reverse_threads(model, params))
            self.parallel_reverse = self.reverse_ports.parallel

    @property
    def element_range(self):
        """[start, end) of the bending edges this term loops over (`parts.merge_part_loops`)."""
        return 0, self.model.cloth_edge_count

    @ti.func
    def apply_forces(self, state: ti.template(), s: ti.template(), t: ti.template()):
        if ti.static(self.reverse_in_lanes and reversing()):
            self.virtual_work(state, s)
        else:
            for_each_element(self, state, s, t, 0, self.model.cloth_edge_count)

    @ti.func
    def element(self, state: ti.template(), s: ti.template(), t: ti.template(), e, b):
        """Bending edge e's corner forces, added at slot s; b: its block (`exec.loops.for_each_element`)."""
        if ti.static(self.ports.active):     # parts path: inputs through ports (exec.ports)
            self.ports.stop(state)
            self.ports.open(e)
        q = self.model.cloth_bend_indices[e]
        x1 = corner_q(self.ports, state, s, e, b, 0, q[0])
        x2 = corner_q(self.ports, state, s, e, b, 1, q[1])
        x3 = corner_q(self.ports, state, s, e, b, 2, q[2])
        x4 = corner_q(self.ports, state, s, e, b, 3, q[3])
        theta, d = dihedral([x1[c] for c in ti.static(range(3))], [x2[c] for c in ti.static(range(3))],
                            [x3[c] for c in ti.static(range(3))], [x4[c] for c in ti.static(range(3))])
        g1 = ti.Vector(d[0])
        g2 = ti.Vector(d[1])
        g3 = ti.Vector(d[2])
        g4 = ti.Vector(d[3])
        r = self.model.cloth_bend_row[e]
        c = -(table_row(self.ports, 0, self.model.cloth_bending_stiffness, e, b, r)
              * (theta - self.model.cloth_bend_rest_angle[e])
              + self.damping_moment(state, s, e, b, q, g1, g2, g3, g4,
                                    table_row(self.ports, 1, self.model.cloth_bending_damping, e, b, r)))
        corner_put(self.ports, state, s, e, b, 0, q[0], c * g1)
        corner_put(self.ports, state, s, e, b, 1, q[1], c * g2)
        corner_put(self.ports, state, s, e, b, 2, q[2], c * g3)
        corner_put(self.ports, state, s, e, b, 3, q[3], c * g4)

    @ti.func
    def element_lanes(self, state: ti.template(), s: ti.template(), t: ti.template(), base, end: ti.template()):
        """`element` of the LANES edges base, base + 1, ... (below end) at once, on one thread, in forward
        kernels (`exec.loops.for_each_element`; `exec.lanes`: every quantity a LANES-vector, a 3-vector a
        lane triple; the same formulas).  Lanes past the last edge repeat it with their forces multiplied
        by 0."""
        n = ti.static(self.forward_lanes)
        e, live, q = self.edge_lanes(base, end, n)
        out = self.lane_forces
        theta, g = dihedral(out.corner(state.particle_q, s, q, 0), out.corner(state.particle_q, s, q, 1),
                            out.corner(state.particle_q, s, q, 2), out.corner(state.particle_q, s, q, 3))
        stiffness, kd, rest = self.params_lanes(e, n)
        m = kd * 0.0
        if lanes.any_nonzero(kd):            # the velocities are read only where some lane is damped
            m = kd * self.corner_dot(g, state.particle_qd, s, q, n)
        c = -(stiffness * (theta - rest) + m) * live
        for k in ti.static(range(4)):
            f = lanes.scale(g[k], c)
            out.put(k, f[0], f[1], f[2])
        out.add(state, s, q)

    @ti.func
    def virtual_work(self, state: ti.template(), s: ti.template()):
        """The loop that stands for the bending forces in the reverse kernel (`apply_forces`; the reverse is
        what runs): W = sum over edges and corners k of lambda_k . f_k(q, qd, p), with lambda_k =
        particle_f.grad[s] at corner k read as a constant, so that W's reverse adds (df/dq)^T lambda,
        (df/dqd)^T lambda and (df/dp)^T lambda into the adjoints of the state and the parameters: the reverse
        of the force term.  Reverse kernels run loop by loop backwards, so lambda is read after the
        integrator's reverse has made it.  The edges go LANES at a time (`exec.lanes`; Taichi's reverse of
        the forward loop itself would be scalar: benchmarks/lanes_probe.py), their positions and velocities
        read as stop_grad(state) + port, the ports of the lane group (`LaneGroupPorts`), which take the
        adjoints side by side; the ports' own loop, before this one, adds them into the particles' in its
        reverse.  Each lane group writes only its own ports, so the loop runs on threads
        (`LaneGroupPorts.parallel`)."""
        count = ti.static(self.model.cloth_edge_count)
        ports = self.reverse_ports
        ti.loop_config(serialize=not ports.parallel)
        for g in range((count + LANES - 1) // LANES):
            ti.stop_grad(state.particle_q)       # the state's adjoints go through the ports
            ti.stop_grad(state.particle_qd)
            # W's adjoint is 1 (a Tape clears it) and the group's port adjoints start from 0: stores to .grad
            # fields stay in place in the reverse kernel, ahead of the adjoints that read or add to them.  W has
            # an entry per lane group (`virtual_work_field`)
            self.work.grad[g] = 1.0
            ports.open(g)
            e, live, q = self.edge_lanes(g * LANES, count, LANES)
            x = [lanes.add3(lanes.corner(state.particle_q, s, q, k, LANES), ports.corner(ports.qport, g, k))
                 for k in ti.static(range(4))]
            theta, gr = dihedral(x[0], x[1], x[2], x[3])
            stiffness, kd, rest = self.params_lanes(e, LANES)
            v = [lanes.add3(lanes.corner(state.particle_qd, s, q, k, LANES), ports.corner(ports.qdport, g, k))
                 for k in ti.static(range(4))]
            rate = lanes.dot(gr[0], v[0]) + lanes.dot(gr[1], v[1]) + lanes.dot(gr[2], v[2]) + lanes.dot(gr[3], v[3])
            c = -(stiffness * (theta - rest) + kd * rate) * live
            self.work[g] += (c * self.corner_dot(gr, state.particle_f.grad, s, q, LANES)).sum()

    @ti.func
    def corner_dot(self, g, field: ti.template(), s, q, n: ti.template()):
        """sum over the 4 corners k of g_k . field[s, corner k] on each of n lanes (g: 4 lane triples, dtheta/dx;
        field: particle_qd for dtheta/dt, particle_f.grad for the force adjoints' work)."""
        return lanes.dot(g[0], lanes.corner(field, s, q, 0, n)) + lanes.dot(g[1], lanes.corner(field, s, q, 1, n)) \
            + lanes.dot(g[2], lanes.corner(field, s, q, 2, n)) + lanes.dot(g[3], lanes.corner(field, s, q, 3, n))

    @ti.func
    def edge_lanes(self, base, end, n: ti.template()):
        """The n edges from base below end: (their indices, 1 on live lanes and 0 on lanes past the last
        edge, which repeat it, the (4, n) particle indices)."""
        e, live = lanes.element_indices(base, end, n)
        q = ti.Matrix([[self.model.cloth_bend_indices[e[l]][k] for l in ti.static(range(n))]
                       for k in ti.static(range(4))])
        return e, live, q

    @ti.func
    def params_lanes(self, e, n: ti.template()):
        """(stiffness, damping, rest angle) of the n edges e, n-vectors."""
        r = ti.Vector([self.model.cloth_bend_row[e[l]] for l in ti.static(range(n))])
        return ti.Vector([self.model.cloth_bending_stiffness[r[l]] for l in ti.static(range(n))]), \
            ti.Vector([self.model.cloth_bending_damping[r[l]] for l in ti.static(range(n))]), \
            ti.Vector([self.model.cloth_bend_rest_angle[e[l]] for l in ti.static(range(n))])

    @ti.func
    def damping_moment(self, state: ti.template(), s: ti.template(), e, b, q, g1, g2, g3, g4, kd):
        """kd dtheta/dt [N m] of bending edge e (g1..g4: dtheta/dx of its corners).  The forward kernel
        skips the four velocity reads where kd = 0 (the default); derivative kernels do too unless kd
        has a gradient, since d/dkd at 0 is dtheta/dt."""
        if ti.static(differentiating() and has_grad(self.model.cloth_bending_damping)):
            return kd * self.angle_rate(state, s, e, b, q, g1, g2, g3, g4)
        else:
            m = 0.0
            if kd != 0.0:
                m = kd * self.angle_rate(state, s, e, b, q, g1, g2, g3, g4)
            return m

    @ti.func
    def angle_rate(self, state: ti.template(), s: ti.template(), e, b, q, g1, g2, g3, g4):
        """dtheta/dt [rad/s] of bending edge e from its corner velocities."""
        return g1.dot(corner_qd(self.ports, state, s, e, b, 0, q[0])) + g2.dot(corner_qd(self.ports, state, s, e, b, 1, q[1])) \
            + g3.dot(corner_qd(self.ports, state, s, e, b, 2, q[2])) + g4.dot(corner_qd(self.ports, state, s, e, b, 3, q[3]))


def forward_lanes(triangle_count: int) -> int:
    """Elements per iteration of a cloth's forward lanes: one SIMD register's worth (`exec.simd.lane_count`: 8 in
    float32 on a CPU with AVX2) from CLOTH_WIDE_LANES_MIN_TRIANGLES triangles, LANES below."""
    if triangle_count < CLOTH_WIDE_LANES_MIN_TRIANGLES:
        return LANES
    return max(LANES, lane_count(8 if impl.current_cfg().default_fp == ti.f64 else 4))


def virtual_work_field(element_count: int):
    """W of a cloth term's `virtual_work`, one entry per lane group of its `element_count` elements, with an
    adjoint.  Every iteration of that loop stores W's adjoint (1) and adds to W: into one scalar, both threads
    wrote one cache line each iteration, and each took it from the other (cloth64, each step's reverse on two
    threads: 527-529 against 498-504 us with an entry per group; the same gradient bits)."""
    return ti.field(float, shape=(max(-(-element_count // LANES), 1),), needs_grad=True)


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
class LaneGroupPorts(StepTerm):
    """The input ports of an element set whose reverse runs in lanes (`ClothBendingForces.virtual_work`), one
    per lane group g of LANES elements: qport[g] and qdport[g], vectors of 3 K LANES zeros (component c of
    corner k on lane l at (3 k + c) LANES + l).  The element term reads its corners' positions and velocities
    as stop_grad(state) + port, so Taichi's reverse of its lanes loop adds the input adjoints into the group's
    own ports; every access to them in that loop has the index g alone, so Taichi adds without atomics and
    the loop runs on threads.  This term's loop comes before the element term's in a step, so in the reverse
    kernel it runs after it: per particle, on threads, it sums the port adjoints of the particle's
    incidences (listed by corner, lane, then group: a fixed order, bit-reproducible for any thread count)
    into the particle's adjoints, reading each at a run-time component index.  The forward kernel runs
    nothing here.

    Measured (vs_warp cloth64, f32, named gradients, µs per step, forward + backward): 1,298-1,310 with the
    ports on one thread (the code before), 1,015-1,149 with this on two threads (benchmarks/MEASURED.md).

    indices: (E, K) numpy particle indices of the elements; parallel: run the reverse loops on threads (the
    element term must add nothing else from its lanes into shared adjoints: parameter tables without
    gradients)."""

    def __init__(self, model, indices, parallel: bool):
        super().__init__(model)
        idx = np.asarray(indices, dtype=np.int64)
        E, K = idx.shape
        self.parallel = bool(parallel)
        self.parallel_reverse = self.parallel
        groups = -(-E // LANES)
        width = 3 * K * LANES
        self.qport = ti.Vector.field(width, float, shape=groups, needs_grad=True)
        self.qdport = ti.Vector.field(width, float, shape=groups, needs_grad=True)
        # incidences per particle (CSR: start, then per incidence its lane group and the index of its x
        # component in the group's port, 3 k LANES + l), ordered by corner, lane, then group: one list and
        # one loop per particle (a list per corner and lane, each its own loop, took 9 s more to compile
        # where the steps are fused and read 2 K LANES starts per particle)
        N = model.particle_count
        e = np.repeat(np.arange(E), K)
        k = np.tile(np.arange(K), E)
        particle = idx.reshape(-1)
        order = np.lexsort((e // LANES, k * LANES + e % LANES, particle))
        self.start = ti.field(ti.i32, shape=N + 1)
        self.start.from_numpy(csr_starts(particle, N))
        n = max(E * K, 1)
        self.group = ti.field(ti.i32, shape=n)
        self.offset = ti.field(ti.i32, shape=n)
        if E:
            self.group.from_numpy((e // LANES)[order].astype(np.int32))
            self.offset.from_numpy((3 * k * LANES + e % LANES)[order].astype(np.int32))

    def _index_port_adjoints(self):
        """Let kernels index the ports' adjoints by a run-time component (Taichi 1.7 computes the stride of
        a vector field's components for the field itself, not for its adjoint); called while a kernel is
        traced, after the fields are materialized."""
        for port in (self.qport, self.qdport):
            if port.grad._get_dynamic_index_stride() is None:
                port.grad._calc_dynamic_index_stride()

    def stability_limits(self):
        return []

    @ti.func
    def apply_forces(self, state: ti.template(), s: ti.template(), t: ti.template()):
        if ti.static(reversing()):
            ti.static(self._index_port_adjoints())
            ti.loop_config(serialize=not self.parallel)
            for i in range(self.model.particle_count):
                # straight into the particle's adjoints: a local summed across the loop would sit on Taichi's
                # AD stack where the steps are fused (measured: the reverse twice as slow)
                for j in range(self.start[i], self.start[i + 1]):
                    g = self.group[j]
                    o = self.offset[j]
                    state.particle_q.grad[s, i] += ti.Vector(
                        [self.qport.grad[g][o + c * LANES] for c in ti.static(range(3))])
                    state.particle_qd.grad[s, i] += ti.Vector(
                        [self.qdport.grad[g][o + c * LANES] for c in ti.static(range(3))])

    @ti.func
    def open(self, g):
        """Zero lane group g's port adjoints (its element term's reverse is about to add into them)."""
        self.qport.grad[g] = ti.Vector([0.0 for _ in ti.static(range(self.qport.n))])
        self.qdport.grad[g] = ti.Vector([0.0 for _ in ti.static(range(self.qdport.n))])

    @ti.func
    def corner(self, port: ti.template(), g, k: ti.template()):
        """Corner k's ports of lane group g, a lane triple."""
        return [ti.Vector([port[g][(3 * k + c) * LANES + l] for l in ti.static(range(LANES))]) for c in ti.static(range(3))]


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
