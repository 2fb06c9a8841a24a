"""Broad phase: the candidate (toucher, body) pairs of a step, from a uniform grid built every step.

Every contact between a point and a rigid body's shape (a body's contact point against another body,
`body_contact`; a particle, FEM or cloth vertex against a body, `coupling`) is one (toucher, body) pair: toucher
i at world position x_i with contact radius r_i, body b at centre X_b with bounding radius R_b at its current
size (`shapes.ShapeTable.cull_radius`).  A pair can touch only if |x_i - X_b| < R_b + r_i.  The flat loop tests
all U x T pairs every step (U touchers, T bodies); this module finds the pairs that pass that test in O(U + T)
and hands them to the differentiable narrow phase as a list, so the contact terms do work only over the list.

Particle-triangle pairs (cloth against soft bodies, `cloth_soft_contact`) are listed the same way: the targets
are triangles, each the sphere about its centroid that reaches its corners (recomputed at every build, the
triangles deform), inflated by its vertices' mean contact radius.

The same mechanism lists particle-particle pairs (cloth self-contact, `cloth_self_contact`): the targets are then
particles with a radius of their own (half the contact thickness), each pair is listed once (i < j), and the pairs
the caller leaves out (neighbours at rest) are skipped.  And body-body pairs (the crossed edges of two boxes,
`box_edges`): the touchers are then bodies, each at its centre with its bounding radius (`cull_radius`) as contact
radius, so a pair is listed when the two bounding spheres overlap, once (a < b).

Build (`build(s, t)`: one Taichi kernel, NOT differentiated; it reads the state of slot s):
  1. the grid: the box around every body's sphere inflated by the largest toucher radius r_max, cut into cubic
     cells of side h (below);
  2. every body into every cell its inflated sphere's bounding box overlaps (a counting sort: counts, a prefix
     sum, a scatter; bodies in ascending order within a cell);
  3. every toucher looks in the ONE cell that holds x_i (a body whose inflated sphere contains x_i overlaps that
     cell) and lists (i, b) for the bodies there that pass the sphere test, the contact-group test
     (`body_contact.contact_groups`) and, for a body's own contact points, b != its body.
The pair list (`pairs`, `pair_count`) has a bounded capacity: `capacity_per_toucher` pairs per toucher
(`SceneBuilder.broad_phase_capacity`, default DEFAULT_PAIRS_PER_TOUCHER; BODY_PAIR_SCALE times that per body for
body pairs).  A step that needs more raises
`BroadPhaseCapacityError` naming the capacity and the count.

Cell size h (chosen every build from the radii): h = 2 x the MEAN inflated bounding radius (R_b + r_max) of the
bodies.  A body no larger than the mean then spans at most 2 cells per axis (8 cells), and a toucher reads one
cell, so insertion and lookup are O(1) per object; a cell holds about the bodies whose centres lie within ~h, a
bounded number in a pile (a coarser grid would put more bodies in each cell, more sphere tests per toucher; a
finer one puts each body into more cells).  A body much larger than the mean (a table under small boxes) is
inserted into every cell it covers.  The cell count and the insertions have fixed capacities (CELLS_PER_BODY and
ITEMS_PER_BODY per body, at least MIN_CELLS): where the bodies are spread far apart, or one is very large, h is
coarsened (x 1.5 until both fit), which keeps the result exact and only costs more sphere tests.

Gradients: the pair list is integer data, a function of the state through comparisons only, so it carries no
derivative; the narrow phase evaluates the same differentiable force over the listed pairs as the flat loop does
over the pairs that pass its own sphere test (the same set).  The list is one buffer, rebuilt in the backward pass
from the same slot's state before each step's reverse (`Simulator`: a broad-phase scene runs each step as one
tape entry, build then step, whose backward is build then the step's reverse), so checkpointed segments and the
Tape see the same pairs as the forward pass.  Where the loops are serial (`runtime.serial_scatter`) the pairs of
a toucher are listed in ascending body order, the flat loop's order, so the forces sum in the same order.
"""

import numpy as np
import taichi as ti

from ..core.errors import SimulationError
from ..core.runtime import serial_scatter
from .rigid_pose import body_position, body_rotation, quat_rotate

DEFAULT_PAIRS_PER_TOUCHER = 8
# body-pair lists hold this many times `broad_phase_capacity` pairs per body: in a dense pile of equal boxes a
# box's bounding sphere (radius sqrt(3) h, h the half side) meets those of its 18 face and edge neighbours on a
# lattice and more when they are staggered, about half of them listed once per pair (a < b)
BODY_PAIR_SCALE = 2
CELLS_PER_BODY = 8
ITEMS_PER_BODY = 16
MIN_CELLS = 1024
BROAD_PHASES = ("grid", "flat")


class BroadPhaseCapacityError(SimulationError):
    """More candidate pairs in a step than the broad phase's pair list holds."""


def check_broad_phase(mode, capacity):
    """Validate `SceneBuilder.broad_phase` and `broad_phase_capacity` (before any kernel); returns them."""
    if mode not in BROAD_PHASES:
        raise ValueError(f"broad_phase: expected one of {BROAD_PHASES} ('grid': candidate pairs from a uniform grid "
                         f"each step; 'flat': every (point, body) pair tested), got {mode!r}")
    if capacity is None:
        return mode, DEFAULT_PAIRS_PER_TOUCHER
    if isinstance(capacity, bool) or not (isinstance(capacity, (int, np.integer)) and capacity >= 1):
        raise ValueError(f"broad_phase_capacity: expected a whole number >= 1 (candidate pairs per contact point or "
                         f"particle), got {capacity!r}")
    return mode, int(capacity)


def _index_field(indices):
    field = ti.field(ti.i32, shape=(max(len(indices), 1),))
    field.from_numpy(np.asarray(indices if len(indices) else [0], dtype=np.int32))
    return field


@ti.data_oriented
class BroadPhase:
    """Candidate (toucher, body) pairs of one contact term (module docstring).

    model: the Model; shapes: the body ShapeTable (prefix "body_shape").
    touchers: "points" (body contact points: `contact_point`, `contact_body`, `body_contact_radius`),
        "particles" (`particle_q` of the state, `particle_radius`) or "bodies" (a body's centre and bounding radius
        `shapes.cull_radius`; each pair (a, b) listed once, a < b); toucher_indices: (U,) the touchers of the term
        (indices of contact points, particles or bodies).
    bodies: (T,) the body indices the touchers may touch.  capacity_per_toucher: pairs per toucher.
    After `build(s, t)`: `pair_count[None]` pairs (toucher index, body index) in `pairs[0 .. pair_count)`.
    """

    def __init__(self, model, shapes, touchers: str, toucher_indices, bodies, capacity_per_toucher: int,
                 particle_pairs=None, capacity_scale: int = 1, triangles=None):
        if touchers not in ("points", "particles", "bodies") or \
                ((particle_pairs is not None or triangles is not None) and touchers != "particles"):
            raise ValueError(f"touchers: expected 'points', 'particles' or 'bodies' ('particles' for particle pairs "
                             f"and triangles), got {touchers!r}")
        self.model, self.shapes, self.kind = model, shapes, touchers
        # particle-particle pairs (cloth self-contact): the targets are particles too; `particle_pairs` gives
        # their radius (half the contact thickness) and which pairs are left out (`ParticlePairs`)
        self.particle_pairs = particle_pairs
        # particle-triangle pairs (cloth-soft contact, `cloth_soft_contact`): the targets are triangles, each a
        # sphere around its corners (`cloth_soft_contact.TriangleTargets.sphere`); the touchers' radii are theirs
        self.triangles = triangles
        self.on_triangles = triangles is not None                          # compile-time switches
        self.bodies = particle_pairs is None and triangles is None         # the targets are bodies
        self.toucher_count = len(toucher_indices)
        self.target_count = len(bodies)
        # capacity_scale: pairs per toucher per unit of `SceneBuilder.broad_phase_capacity` (BODY_PAIR_SCALE for
        # body pairs), so the error can name the builder's setting
        self.capacity_scale = capacity_scale
        self.capacity_per_toucher = capacity_per_toucher * capacity_scale
        self.capacity = max(1, self.capacity_per_toucher * self.toucher_count)
        self.cell_capacity = max(MIN_CELLS, CELLS_PER_BODY * self.target_count)
        self.item_capacity = max(MIN_CELLS, ITEMS_PER_BODY * self.target_count)
        self.touchers = _index_field(toucher_indices)
        self.targets = _index_field(bodies)
        self.pairs = ti.Vector.field(2, ti.i32, shape=(self.capacity,))
        self.pair_count = ti.field(ti.i32, shape=())
        self.cell_count = ti.field(ti.i32, shape=(self.cell_capacity,))
        self.cell_start = ti.field(ti.i32, shape=(self.cell_capacity + 1,))
        self.items = ti.field(ti.i32, shape=(self.item_capacity,))
        self.span_lo = ti.Vector.field(3, ti.i32, shape=(max(self.target_count, 1),))
        self.span_hi = ti.Vector.field(3, ti.i32, shape=(max(self.target_count, 1),))
        self.origin = ti.Vector.field(3, float, shape=())
        self.cell = ti.field(float, shape=())
        self.dims = ti.Vector.field(3, ti.i32, shape=())
        self.r_max = ti.field(float, shape=())
        self.serial = serial_scatter()

    # -- the positions and radii the build reads ---------------------------------
    @ti.func
    def _toucher(self, state: ti.template(), s, i):
        """(world position [m], contact radius [m], contact group, own body or -1) of toucher i."""
        x = ti.Vector([0.0, 0.0, 0.0], dt=float)
        r = 0.0
        group = 0
        own = -1
        if ti.static(self.kind == "points"):
            a = self.model.contact_body[i]
            q = state.body_q[s, a]
            x = body_position(q) + quat_rotate(body_rotation(q), self.model.contact_point[i])
            r = self.model.body_contact_radius[a]
            group = self.model.body_contact_group[a]
            own = a
        elif ti.static(self.kind == "bodies"):
            x = body_position(state.body_q[s, i])
            r = self.shapes.cull_radius(i)
            group = self.model.body_contact_group[i]
            own = i
        else:
            x = state.particle_q[s, i]
            r = self._toucher_radius(i)
            group = self.model.particle_contact_group[i]
        return x, r, group, own

    @ti.func
    def _target(self, state: ti.template(), s, j):
        """(centre [m], bounding radius [m], contact group) of target j (a body, or a particle)."""
        c = ti.Vector([0.0, 0.0, 0.0], dt=float)
        radius = 0.0
        group = 0
        if ti.static(self.bodies):
            c = body_position(state.body_q[s, j])
            radius = self.shapes.cull_radius(j)
            group = self.model.body_contact_group[j]
        elif ti.static(self.on_triangles):
            c, radius, group = self.triangles.sphere(state, s, j)
        else:
            c = state.particle_q[s, j]
            radius = self.particle_pairs.radius[j]
            group = self.model.particle_contact_group[j]
        return c, radius, group

    @ti.func
    def _left_out(self, i, own, j):
        """Whether the pair (toucher i, target j) is not a contact: a body's own points; for body pairs each pair
        once (i < j); for particle pairs each pair once (i < j) and the pairs `ParticlePairs` leaves out."""
        out = False
        if ti.static(self.kind == "bodies"):
            out = j <= i
        elif ti.static(self.bodies):
            out = j == own
        elif ti.static(self.on_triangles):
            out = False                          # a toucher and a triangle of another object (the caller's lists)
        else:
            out = j <= i or self.particle_pairs.left_out(i, j)
        return out

    @ti.func
    def _toucher_radius(self, i):
        r = 0.0
        if ti.static(self.kind == "points"):
            r = self.model.body_contact_radius[self.model.contact_body[i]]
        elif ti.static(self.kind == "bodies"):
            r = self.shapes.cull_radius(i)
        elif ti.static(self.bodies or self.on_triangles):
            r = self.model.particle_radius[i]
        else:
            r = self.particle_pairs.radius[i]
        return r

    @ti.func
    def _cell_of(self, x):
        return ti.cast(ti.floor((x - self.origin[None]) / self.cell[None]), ti.i32)

    @ti.func
    def _flat(self, c):
        d = self.dims[None]
        return (c[0] * d[1] + c[1]) * d[2] + c[2]

    # -- the build -----------------------------------------------------------------
    @ti.kernel
    def _build(self, state: ti.template(), s: ti.i32):
        T = ti.static(self.target_count)
        U = ti.static(self.toucher_count)
        # 1. the grid (one serial pass: a handful of reductions and the coarsening loop)
        ti.loop_config(serialize=True)
        for _ in range(1):
            r_max = 0.0
            for j in range(U):
                r_max = ti.max(r_max, self._toucher_radius(self.touchers[j]))
            lo = ti.Vector([1e30, 1e30, 1e30], dt=float)
            hi = -lo
            total = 0.0
            for j in range(T):
                c, radius, _g = self._target(state, s, self.targets[j])
                reach = radius + r_max
                lo = ti.min(lo, c - reach)
                hi = ti.max(hi, c + reach)
                total += reach
            h = 2.0 * total / T
            extent = hi - lo
            fits = False
            while not fits:
                cells = ti.floor(extent / h) + 1.0        # in floats: a tiny h must not overflow an i32
                items = 0.0
                if cells[0] * cells[1] * cells[2] <= self.cell_capacity:
                    for j in range(T):
                        c, radius, _g = self._target(state, s, self.targets[j])
                        reach = radius + r_max
                        span = ti.floor((c + reach - lo) / h) - ti.floor((c - reach - lo) / h) + 1.0
                        items += span[0] * span[1] * span[2]
                    fits = items <= self.item_capacity
                if not fits:
                    h *= 1.5
            self.origin[None] = lo
            self.cell[None] = h
            self.dims[None] = ti.cast(ti.floor(extent / h), ti.i32) + 1
            self.r_max[None] = r_max
            self.pair_count[None] = 0
        # 2. the bodies into the cells their inflated spheres overlap: counts, prefix sum, scatter
        for k in range(self.cell_capacity):
            self.cell_count[k] = 0
        ti.loop_config(serialize=self.serial)
        for j in range(T):
            c, radius, _g = self._target(state, s, self.targets[j])
            reach = radius + self.r_max[None]
            d = self.dims[None]
            lo = ti.max(self._cell_of(c - reach), 0)
            hi = ti.min(self._cell_of(c + reach), d - 1)
            self.span_lo[j] = lo
            self.span_hi[j] = hi
            for u in range(lo[0], hi[0] + 1):
                for v in range(lo[1], hi[1] + 1):
                    for w in range(lo[2], hi[2] + 1):
                        ti.atomic_add(self.cell_count[self._flat(ti.Vector([u, v, w]))], 1)
        ti.loop_config(serialize=True)
        for _ in range(1):
            run = 0
            for k in range(self.cell_capacity):
                self.cell_start[k] = run
                run += self.cell_count[k]
                self.cell_count[k] = 0           # reused as the fill of each cell
            self.cell_start[self.cell_capacity] = run
        ti.loop_config(serialize=True)           # ascending body order within a cell (module docstring)
        for j in range(T):
            lo = self.span_lo[j]
            hi = self.span_hi[j]
            for u in range(lo[0], hi[0] + 1):
                for v in range(lo[1], hi[1] + 1):
                    for w in range(lo[2], hi[2] + 1):
                        k = self._flat(ti.Vector([u, v, w]))
                        self.items[self.cell_start[k] + self.cell_count[k]] = self.targets[j]
                        self.cell_count[k] += 1
        # 3. each toucher against the bodies of its cell
        ti.loop_config(serialize=self.serial)
        for j in range(U):
            i = self.touchers[j]
            x, r, group, own = self._toucher(state, s, i)
            cell = self._cell_of(x)
            d = self.dims[None]
            if (cell >= 0).all() and (cell < d).all():
                k = self._flat(cell)
                for m in range(self.cell_start[k], self.cell_start[k + 1]):
                    b = self.items[m]
                    c, radius, gb = self._target(state, s, b)
                    if (group == gb or group < 0 or gb < 0) and not self._left_out(i, own, b):
                        gap = x - c
                        reach = radius + r
                        if gap.dot(gap) < reach * reach:
                            n = ti.atomic_add(self.pair_count[None], 1)
                            if n < self.capacity:
                                self.pairs[n] = ti.Vector([i, b])

    @ti.func
    def for_each_pair(self, term: ti.template(), state: ti.template(), s: ti.template()):
        """`term._pair(state, s, toucher, target)` for each candidate pair of the last `build`: a contact term's
        one top-level loop (its `apply_forces`), serialized as the term's is (`StepTerm.serial`)."""
        ti.loop_config(serialize=term.serial)
        for k in range(self.pair_count[None]):
            pair = self.pairs[k]
            term._pair(state, s, pair[0], pair[1])

    def build(self, state, s: int, t: int):
        """The candidate pairs of the state at slot s (step t, for the error message).  Raises
        BroadPhaseCapacityError when they do not fit."""
        self._build(state, s)
        count = int(self.pair_count[None])
        if count > self.capacity:
            what, one = {"points": ("(contact point, body)", "contact point"), "bodies": ("(body, body)", "body")}.get(
                self.kind, ("(particle, body)" if self.bodies else "(particle, triangle)" if self.on_triangles
                            else "(particle, particle)", "particle"))
            per = -(-count // self.toucher_count)
            raise BroadPhaseCapacityError(
                f"broad phase: {count} candidate {what} pairs at step {t} exceed the pair list's capacity "
                f"{self.capacity} ({self.capacity_per_toucher} per {one} x {self.toucher_count}); raise "
                f"SceneBuilder.broad_phase_capacity (pairs per toucher) to at least "
                f"{-(-per // self.capacity_scale)}")
