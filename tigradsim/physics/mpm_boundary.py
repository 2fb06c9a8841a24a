"""MPM grid boundary conditions against shapes: the static colliders and, two-way, the rigid bodies.

One mechanism for both: in `mpm_terms.GridUpdate`, after gravity, the domain walls and the ground, every grid
node x_i [m] with velocity v_i [m/s] meets every obstacle k (collider c or rigid body b; its `ShapeTable`
signed distance d and outward normal n at x_i, `tigradsim.physics.shapes`) in turn:

    v_k   = velocity of the obstacle at x_i         (0 for a collider; v_b + w_b x (x_i - X_b) for a body)
    u     = v_i - v_k                               (velocity relative to the obstacle)
    s(d)  = clamp(1 - d / band, 0, 1)^2             (influence: 1 inside the shape, falling to 0 at d = band)
    v_i  <- v_k + u + s(d) (project(u, n, mu, mode) - u)

    project, by the obstacle's boundary mode (u_n = u . n, u_t = u - u_n n):
      "sticky"    0                                           (the matter moves with the obstacle)
      "slip"      u_t max(0, 1 - mu |u_n| / |u_t|)            (no normal motion either way; Coulomb friction)
      "separate"  as "slip" where u_n < 0 (approaching), u where u_n >= 0 (free to leave)

Why a soft influence (as PlasticineLab's tools, Huang et al. 2021, whose influence is min(exp(-d k), 1)) and not
the hard test d < 0: with the hard test a node's velocity does not depend on where a plane or a box face is, only
on which nodes are inside, so the derivative of anything with respect to a collider's position or size is 0
almost everywhere.  The smooth step makes it follow d; its band (default half a cell, `add_mpm_grid(band=)`)
thickens each shape by about a quarter of a cell, as the particles' own half-cell reach does anyway.  The
quadratic step has value and slope 0 at d = band (no jump when a node enters the band) and value 1 at d <= 0.

Two-way coupling with rigid bodies (a rigid tool pressing plasticine, sand poured on a box): the node's
momentum change by body b, dp = m_i (v_i after - v_i before), is the impulse the body gave the matter; the
body gets the opposite, -dp / dt as a force at x_i (force and torque (x_i - X_b) x f about its centre of mass)
in `body_f[s, b]`, which the rigid integrator of the same step applies.  Linear and angular momentum are
therefore exchanged exactly (the test: a free-fall collision conserves the sum up to gravity).  We chose this
grid-level exchange (as MLS-MPM's rigid coupling of Hu et al. 2018 and PlasticineLab's tools do, the tools
being kinematic there) over penalty forces between particles and the body's surface because it needs no contact
stiffness to tune (no new time-step bound from a stiff spring), acts where the matter's momentum lives (the
grid), and is the same code as the static colliders.  Its limitation is the explicit exchange: the body's
velocity is that of the step's start, so a body much lighter than the matter on the nodes it covers (by
about the ratio of their masses) can overshoot; give such a body more mass or take smaller steps.

Culling: none; every node meets every obstacle with straight-line arithmetic (selects, no branches around the
differentiable part), which the reverse pass handles without AD stacks.  The count of obstacles is unrolled at
compile time (`MAX_OBSTACLES`).
"""
import numpy as np
import taichi as ti

from .rigid_pose import body_position, body_rotation, bottom, quat_rotate, quat_rotate_inv, spatial, top

STICKY, SLIP, SEPARATE = 0, 1, 2
BOUNDARY_MODES = {"sticky": STICKY, "slip": SLIP, "separate": SEPARATE}
# The obstacles are unrolled into the grid loop: more would make a long compile (and a scene with many bodies
# that the matter never reaches pays for all of them at every node).
MAX_OBSTACLES = 16


def check_boundary_mode(name, mode) -> int:
    """The id of a boundary mode given by name ("sticky", "slip", "separate"); ValueError naming `name`."""
    if not isinstance(mode, str) or mode not in BOUNDARY_MODES:
        raise ValueError(f"{name}: expected one of {sorted(BOUNDARY_MODES)} (how MPM matter meets the shape), "
                         f"got {mode!r}")
    return BOUNDARY_MODES[mode]


@ti.func
def influence(d, band):
    """Weight in [0, 1] of an obstacle at signed distance d [m] (band [m] > 0; module docstring)."""
    a = ti.min(ti.max(1.0 - d / band, 0.0), 1.0)
    return a * a


@ti.func
def project(u, n, mu, mode):
    """Velocity u [m/s] relative to an obstacle of outward unit normal n after its boundary condition (module
    docstring); mu the Coulomb coefficient, mode a runtime int.  sqrt(. + eps) keeps the derivative finite at
    u_t = 0; selects, not branches (reverse mode)."""
    un = u.dot(n)
    ut = u - un * n
    speed = ti.sqrt(ut.dot(ut) + 1e-20)
    slid = ut * ti.max(0.0, 1.0 - mu * ti.abs(un) / speed)
    held = ti.select(mode == SLIP, slid, ti.select(un < 0.0, slid, u))
    return ti.select(mode == STICKY, ti.Vector.zero(float, 3), held)


@ti.data_oriented
class GridObstacles:
    """The colliders and rigid bodies MPM matter meets at the grid (module docstring).

    collider_table / body_table: the `ShapeTable`s (or None), collider_modes / body_modes: boundary mode ids
    per collider / body, band [m]."""

    def __init__(self, model, collider_table, collider_modes, body_table, body_modes, band):
        self.model = model
        self.collider_table, self.body_table = collider_table, body_table
        self.collider_modes = tuple(int(m) for m in collider_modes)
        self.body_modes = tuple(int(m) for m in body_modes)
        self.collider_count, self.body_count = len(self.collider_modes), len(self.body_modes)
        self.band = float(band)
        # kinds known at build time: each obstacle compiles only its own shape's code (`distance_of_kind`)
        self.collider_kinds = tuple(collider_table.kinds) if collider_table is not None else ()
        self.body_kinds = tuple(body_table.kinds) if body_table is not None else ()
        if self.collider_count + self.body_count > MAX_OBSTACLES:
            raise ValueError(f"MPM boundary: {self.collider_count} colliders and {self.body_count} rigid bodies meet "
                             f"the MPM grid, more than {MAX_OBSTACLES} (each is unrolled into the grid update); "
                             "combine static shapes into one mesh collider")

    @property
    def count(self) -> int:
        return self.collider_count + self.body_count

    @ti.func
    def _meet(self, v, v_obstacle, d, n, mu, mode: ti.template()):
        u = v - v_obstacle
        # v + s (...), not v_obstacle + u + ...: exactly v where s = 0 (the reaction on a body is then exactly 0)
        return v + influence(d, self.band) * (project(u, n, mu, mode) - u)

    @ti.func
    def apply(self, state: ti.template(), s: ti.template(), v, mass, x, dt):
        """Velocity of a node at x [m] of mass `mass` [kg] with velocity v after every obstacle; each body gets
        the reaction to what it did (`body_f[s, b]`)."""
        out = v
        for c in ti.static(range(self.collider_count)):
            pose = self.model.collider_pose[c]
            rot = body_rotation(pose)
            rot = rot / ti.sqrt(rot.dot(rot))
            d, nl = self.collider_table.distance_of_kind(
                c, quat_rotate_inv(rot, x - body_position(pose)), ti.static(self.collider_kinds[c]))
            out = self._meet(out, ti.Vector.zero(float, 3), d, quat_rotate(rot, nl), self.model.collider_mu[c],
                           ti.static(self.collider_modes[c]))
        for b in ti.static(range(self.body_count)):
            q = state.body_q[s, b]
            qd = state.body_qd[s, b]
            rot = body_rotation(q)
            r = x - body_position(q)
            d, nl = self.body_table.distance_of_kind(b, quat_rotate_inv(rot, r), ti.static(self.body_kinds[b]))
            v_body = bottom(qd) + top(qd).cross(r)
            v1 = self._meet(out, v_body, d, quat_rotate(rot, nl), self.model.body_mu[b], ti.static(self.body_modes[b]))
            f = (mass / dt) * (out - v1)                     # the force the matter puts on the body [N]
            if mass > 0.0 and d < self.band:
                state.body_f[s, b] += spatial(r.cross(f), f)
            out = v1
        return out


def check_starts(builder, grid, objects) -> None:
    """Before any field or kernel: no MPM particle starts inside a collider or a rigid body deeper than half
    the particle spacing (the matter would be thrown out at the first step).  `objects`: `MPMBodies.objects`
    dicts (positions, volume).  ValueError naming the object, the shape, the depth and the deepest particle."""
    from .colliders import Colliders
    from .rigid import RigidBodies
    from .body_shapes import body_shape_table
    from .rigid_pose import quat_to_matrix_np
    cols = next((c for c in builder.components if isinstance(c, Colliders)), None)
    rig = next((c for c in builder.components if isinstance(c, RigidBodies)), None)
    shapes = []
    if cols is not None:
        shapes += [(cols.label(c), lambda x, c=c: cols.signed_distance_np(c, x)) for c in range(len(cols))]
    if rig is not None and rig.bodies:
        table = body_shape_table(rig.bodies)

        def body_distance(x, b):
            q0 = rig.bodies[b]["q0"]
            return table.distance_np(b, (x - q0[:3]) @ quat_to_matrix_np(q0[3:]))[0]
        shapes += [(f"rigid body {b}", lambda x, b=b: body_distance(x, b)) for b in range(len(rig.bodies))]
    for k, obj in enumerate(objects):
        pts, allowed = obj["positions"], 0.5 * obj["volume"] ** (1.0 / 3.0)
        for label, distance in shapes:
            d = distance(pts)
            if d.min() < -allowed:
                i = int(np.argmin(d))
                raise ValueError(f"add_mpm: MPM object {k} starts {-d[i]:.3g} m inside {label} (its particle {i} at "
                                 f"{np.round(pts[i], 4).tolist()} m; allowed: half the particle spacing, "
                                 f"{allowed:.3g} m): move the matter or the shape, or sample the matter around it "
                                 "(add_mpm(particles=...))")


def grid_obstacles(builder, model, grid) -> GridObstacles:
    """The `GridObstacles` of a finalized scene (called by `mpm.MPMBodies.finalize`, after the colliders and the
    rigid bodies finalized): every collider, with its `mpm_boundary` or the grid's; every rigid body with the
    grid's boundary mode.  None when there is neither."""
    from .colliders import Colliders
    from .rigid import RigidBodies
    from .body_shapes import body_shape_table
    cols = next((c for c in builder.components if isinstance(c, Colliders)), None)
    rig = next((c for c in builder.components if isinstance(c, RigidBodies)), None)
    collider_modes = [BOUNDARY_MODES[c.get("mpm_boundary") or grid.boundary] for c in cols.colliders] if cols else []
    body_count = len(rig.bodies) if rig else 0
    if not collider_modes and not body_count:
        return None
    body_table = None
    if body_count:
        body_table = getattr(model, "body_shape_table", None)
        if body_table is None:          # the bodies touch nothing else: their shapes are made here
            body_table = body_shape_table(rig.bodies).finalize(model)
            model.body_shape_table = body_table
    return GridObstacles(model, cols.table if collider_modes else None, collider_modes, body_table,
                         [BOUNDARY_MODES[grid.boundary]] * body_count, grid.band)


__all__ = ["BOUNDARY_MODES", "GridObstacles", "MAX_OBSTACLES", "check_boundary_mode", "check_starts", "grid_obstacles",
           "influence", "project"]
