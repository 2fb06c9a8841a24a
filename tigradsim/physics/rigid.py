"""Rigid bodies from closed triangle meshes, with differentiable mass, inertia,
contact parameters, initial state and applied forces.

Conventions (world frame, y up, ground plane y = 0):
  * `body_q[t, b]`  vec7 = (px, py, pz, qx, qy, qz, qw): position of the centre
    of mass [m] and the unit quaternion (x, y, z, w order, as in Warp) that
    rotates body coordinates to world coordinates.
  * `body_qd[t, b]` vec6 = (wx, wy, wz, vx, vy, vz): angular velocity [rad/s]
    and centre-of-mass linear velocity [m/s], both in the world frame.
  * `body_f[t, b]`  vec6 = (torque about the centre of mass [N m], force [N]),
    world frame; an accumulator summed by the force terms each step.
  * Body coordinates: the axes of the input mesh, origin at its centre of mass.
    A body added at `position`, `rotation` has its mesh vertex v at world
    position  position + R (v)  ; so body_q0[:3] = position + R com.

Dynamics per step (semi-implicit Euler):
    v1 = v0 + (F / m + g) dt,   x1 = x0 + v1 dt
    w1 = R (wb + dt J^-1 (tau_b - wb x I wb)),   J = I + dt (skew(wb) I - skew(I wb))
(body-frame angular velocity wb = R^T w0, torque tau_b = R^T tau, inertia
I = m * body_inertia: one Newton step of the implicit gyroscopic equation, as
in Bullet; stable for fast spin), then  q1 = normalise(q0 + dt/2 (w1, 0) * q0).

Contact: every contact point (default: the mesh vertices) against the ground,
with `tigradsim.physics.contact`'s law (the ground's `ground_contact_force`) and the body's own ke, kd, kf, mu
and contact law (`tigradsim.physics.contact.ContactLaw`: the ground's unless the body sets its own; with
damping_integration="implicit" kd and kf at the point's effective mass, `body_effective_mass`).

Input quaternions must have unit norm (|q| - 1 within 1e-6 is renormalised
silently; anything else is rejected with ValueError naming `rotation`).
"""
import math

import numpy as np
import taichi as ti

from .body_effective_mass import body_point_dt_inverse_masses
from .contact import DEFAULT_LAW, ContactLaw, body_laws, check_law_options, contact_force_along, touches_ground
from ..core.linalg import matvec
from ..core.errors import as_array, check_positive
from ..core.model import StateKind, StepTerm
from .rigid_mass import check_closed_mesh, mass_properties
from .body_shapes import check_body_shape
from .body_overlap import check_interpenetration
from .coupling import touch_terms
from ..core.geometry import weld_vertices
from ..core.runtime import np_float
# Pose helpers live in rigid_pose (shared with the observers without an import cycle); imported here so that
# `tigradsim.physics.rigid.quat_to_matrix_np`, `.spatial`, ... keep working.
from .rigid_pose import (bottom, body_position, body_rotation, quat_rotate, quat_rotate_inv,  # noqa: F401
                         quat_to_matrix_np, skew, spatial, top, world_point)
# The rigid-body observers, re-exported as `tigradsim.physics.rigid.RigidSurface` / `.BodyRecorder`.
from .rigid_observers import BodyRecorder, RigidSurface  # noqa: F401

QUAT_TOL = 1e-6
_CONTACT_NAMES = ("ke", "kd", "kf", "mu")
_CONTACT_DEFAULTS = dict(ke=1e4, kd=10.0, kf=10.0, mu=0.5)


# -- component ----------------------------------------------------------------
def _weld_for_body(vertices, faces, weld_tol):
    """Vertices and faces with near-duplicate vertices merged (see `RigidBodies.add`); inputs
    whose shapes or indices are wrong pass through unwelded, for `check_closed_mesh` to name."""
    try:
        faces = np.asarray(faces)
    except ValueError:           # ragged rows: numpy's message names no argument
        raise TypeError("faces: expected an (F, 3) array of vertex indices, got rows of different lengths") from None
    if weld_tol is None:
        return vertices, faces
    if not (isinstance(weld_tol, (int, float, np.floating)) and not isinstance(weld_tol, bool)
            and math.isfinite(weld_tol) and 0 <= weld_tol < 0.5):
        raise ValueError(f"weld_tol: expected a number in [0, 0.5) (a fraction of the bounding-box diagonal) "
                         f"or None, got {weld_tol!r}")
    v = as_array("vertices", vertices, shape=(None, 3))
    f = np.asarray(faces)
    if np.issubdtype(f.dtype, np.floating) and f.size and np.all(np.isfinite(f)) and np.all(np.mod(f, 1) == 0):
        f = f.astype(np.int64)
    if (f.ndim != 2 or f.shape[1] != 3 or not f.size or not np.issubdtype(f.dtype, np.integer)
            or f.min() < 0 or f.max() >= len(v)):
        return v, f
    diag = float(np.linalg.norm(v.max(axis=0) - v.min(axis=0)))
    v, f, _ = weld_vertices(v, f, weld_tol * diag)
    return v, f


class RigidBodies:
    """Builder component for rigid bodies (created by `SceneBuilder.add_rigid_body`).

    Model fields it creates (B bodies, V mesh vertices, C contact points, A applied forces):
      body_q0 (B,) vec7, body_qd0 (B,) vec6            initial state (differentiable)
      body_mass (B,) [kg]                              differentiable
      body_inertia (B,) mat3 [m^2]                     inertia PER UNIT MASS about the
                                                       centre of mass, body frame (differentiable;
                                                       the inertia used is body_mass * body_inertia)
      body_ke, body_kd, body_kf, body_mu (B,)          contact parameters against the ground, colliders and
                                                       particles (differentiable)
      body_pair_ke, ..., body_pair_mu (B,)             contact parameters against other bodies (a pair takes
                                                       the mean of its two bodies'; differentiable; initially
                                                       equal to body_ke, ...)
      body_contact_radius (B,) [m]                     not differentiable
      body_force (A,) vec3 [N], body_force_point (A,) vec3 [m, body frame], body_torque (A,) vec3 [N m]
                                                       applied loads (differentiable), active in their windows
      body_vertex (V,) vec3, vertex_body (V,) i32      meshes in body frames (not differentiable)
      contact_point (C,) vec3, contact_body (C,) i32   contact points in body frames
    and attributes: body_count, body_volume (B,) numpy [m^3], body_com_offset (B, 3)
    numpy (mesh-frame centre of mass), body_faces list of (F_b, 3) numpy (per-body
    vertex indices), body_vertex_start (B + 1,) numpy, contact_point_count, body_applied_count.

    Density: mass = density * body_volume, so dL/d(density) = body_volume * dL/d(body_mass).
    An inertia scale k (inertia k * body_mass * body_inertia) has dL/dk = sum(body_inertia * grad).
    `model.set("body_q0", ...)` does not renormalise: write unit quaternions.
    """

    def __init__(self):
        self.bodies = []
        self.forces = []

    @property
    def count(self):
        return len(self.bodies)

    def add(self, builder, vertices, faces, density=None, mass=None, position=(0.0, 0.0, 0.0),
            rotation=(0.0, 0.0, 0.0, 1.0), velocity=(0.0, 0.0, 0.0), angular_velocity=(0.0, 0.0, 0.0),
            ke=None, kd=None, kf=None, mu=None, contact_points=None, contact_radius=0.0,
            damping=None, friction=None, friction_velocity=None, weld_tol=1e-6, shape=None, shape_size=None,
            shape_resolution=None, damping_integration=None) -> int:
        """Add a rigid body bounded by a closed triangle mesh; returns its index.

        Args:
            vertices: (V, 3) [m] mesh coordinates.  faces: (F, 3) vertex indices,
                counter-clockwise seen from outside (outward normals).
            density: [kg/m^3] > 0, or mass: [kg] > 0 (give at most one; default density 1000).
            position: (3,) world position of the mesh-coordinate origin [m].
            rotation: (4,) unit quaternion (x, y, z, w), mesh to world.
            velocity: (3,) centre-of-mass velocity [m/s].  angular_velocity: (3,) [rad/s], world frame.
            ke, kd, kf, mu: contact stiffness [N/m], damping [N s/m], friction
                regularisation [N s/m], Coulomb coefficient; default: the ground's
                values (or 1e4, 10, 10, 0.5 without a ground).
            contact_points: (K, 3) [m] mesh-coordinate points that touch the ground;
                default: every mesh vertex.
            contact_radius: [m] >= 0, radius around each contact point.
            damping, friction, friction_velocity: the contact law of this body (`tigradsim.physics.contact`:
                damping "capped" or "uncapped", friction "capped" or "huber" with friction_velocity
                [m/s] > 0); None: the ground's law (`SceneBuilder.add_ground`), or the default.
            damping_integration: "explicit" or "implicit" (kd and kf by local backward Euler at each contact
                point's effective mass along the normal and along the slip, unconditionally stable:
                `tigradsim.physics.contact`, `body_effective_mass`); None: the ground's (default "explicit").
            weld_tol: vertices closer than weld_tol x the bounding-box diagonal are merged
                (`tigradsim.core.geometry.weld_vertices`) before the closedness check, so a mesh that
                repeats each corner per face (an OBJ/STL box with 24 or 36 corners) is one closed
                surface, and a repeated corner is one contact point, not several; None: no welding.
            shape, shape_size, shape_resolution: the contact shape other bodies and particles touch, in the
                body frame (`tigradsim.physics.body_shapes`): None (a box mesh gets the analytic box, any other
                mesh the signed-distance grid of its mesh), "box", "sphere", "capsule" or "mesh".
        """
        shape_spec = check_body_shape(shape, shape_size, shape_resolution)
        v, f = check_closed_mesh(*_weld_for_body(vertices, faces, weld_tol))
        volume, com, inertia = mass_properties(v, f)
        if not volume > 1e-15:
            raise ValueError(f"faces: the mesh encloses a non-positive volume ({volume:g} m^3): faces must be "
                             "oriented outward (counter-clockwise seen from outside)")
        if density is not None and mass is not None:
            raise ValueError("density, mass: give one of them, not both")
        if mass is not None:
            m = float(check_positive("mass", as_array("mass", mass, shape=())))
        else:
            m = float(check_positive("density", as_array("density", 1000.0 if density is None else density,
                                                            shape=()))) * volume
        pos = as_array("position", position, shape=(3,))
        rot = as_array("rotation", rotation, shape=(4,))
        norm = float(np.linalg.norm(rot))
        if abs(norm - 1.0) > QUAT_TOL:
            raise ValueError(f"rotation: quaternion (x, y, z, w) must have unit norm, got norm {norm:.9g}; "
                             "normalise it first")
        rot = rot / norm
        vel = as_array("velocity", velocity, shape=(3,))
        ang = as_array("angular_velocity", angular_velocity, shape=(3,))
        law = check_law_options(damping, friction, friction_velocity, damping_integration)
        contact = {}
        for name, value in zip(_CONTACT_NAMES, (ke, kd, kf, mu)):
            if value is not None:
                contact[name] = float(check_positive(name, as_array(name, value, shape=()), allow_zero=True))
        if contact_points is None:
            points = v - com
        else:
            points = as_array("contact_points", contact_points, shape=(None, 3)) - com
            if len(points) == 0:
                raise ValueError("contact_points: expected at least one point (or None for the mesh vertices)")
        radius = float(check_positive("contact_radius", as_array("contact_radius", contact_radius, shape=()),
                                      allow_zero=True))
        R = quat_to_matrix_np(rot)
        self.bodies.append(dict(vertices=v - com, faces=f, volume=volume, com=com, mass=m,
                                inertia_unit=inertia / volume, q0=np.concatenate([pos + R @ com, rot]),
                                qd0=np.concatenate([ang, vel]), contact=contact, points=points, radius=radius,
                                law=law, shape=shape_spec))
        return len(self.bodies) - 1

    def prepare(self, builder):
        """Before any field: objects that start inside a body (`body_overlap.check_interpenetration`)."""
        check_interpenetration(builder, self.bodies)

    def placed(self, builder) -> list:
        """Each body's contact points at t = 0 in the world (`tigradsim.core.placement.Placed`)."""
        from ..core.placement import Placed
        return [Placed(f"rigid body {k}", b["q0"][:3] + b["points"] @ quat_to_matrix_np(b["q0"][3:]).T, b["radius"])
                for k, b in enumerate(self.bodies)]

    def add_force(self, builder, body, force=(0.0, 0.0, 0.0), point=None, torque=(0.0, 0.0, 0.0),
                  start=0.0, end=math.inf) -> int:
        """Apply a world-frame force at a body point (and a torque) during [start, end) seconds.

        Step t (time t dt) is loaded when its midpoint (t + 1/2) dt lies in
        [start, end), so a window of k dt covers exactly k steps (impulse
        force * k dt).  `point`: (3,) mesh coordinates (default: the centre of
        mass); it moves with the body.  Returns the index into body_force.
        """
        if not (isinstance(body, (int, np.integer)) and 0 <= body < len(self.bodies)):
            raise IndexError(f"body: {body!r} is not a body index (have {len(self.bodies)} bodies)")
        F = as_array("force", force, shape=(3,))
        tau = as_array("torque", torque, shape=(3,))
        com = self.bodies[body]["com"]
        p = np.zeros(3) if point is None else as_array("point", point, shape=(3,)) - com
        s = float(as_array("start", start, shape=()))
        e = float(as_array("end", end, shape=(), finite=False))
        if not (np.isfinite(s) and s >= 0 and not np.isnan(e) and e > s):
            raise ValueError(f"start, end: need 0 <= start < end (seconds), got start={start!r}, end={end!r}")
        self.forces.append(dict(body=int(body), force=F, point=p, torque=tau, window=(s, min(e, 1e30))))
        return len(self.forces) - 1

    def finalize(self, builder, model):
        B = len(self.bodies)
        model.body_count = B
        if B == 0:
            return
        f = np_float()
        vec3, vec6, vec7 = (ti.types.vector(n, float) for n in (3, 6, 7))
        mat3 = ti.types.matrix(3, 3, float)
        bodies = self.bodies
        ground = builder.ground or {}
        model.add_field("body_q0", vec7, (B,), np.array([b["q0"] for b in bodies], f))
        model.add_field("body_qd0", vec6, (B,), np.array([b["qd0"] for b in bodies], f))
        model.add_field("body_mass", float, (B,), np.array([b["mass"] for b in bodies], f))
        model.add_field("body_inertia", mat3, (B,), np.array([b["inertia_unit"] for b in bodies], f))
        for name in _CONTACT_NAMES:
            values = [b["contact"].get(name, ground.get(name, _CONTACT_DEFAULTS[name])) for b in bodies]
            model.add_field(f"body_{name}", float, (B,), np.array(values, f))
            # the constant against other bodies (`body_contact`'s pair means): its own field, equal at the start
            model.add_field(f"body_pair_{name}", float, (B,), np.array(values, f))
        model.add_field("body_contact_radius", float, (B,), np.array([b["radius"] for b in bodies], f), param=False)
        counts = [len(b["vertices"]) for b in bodies]
        model.body_vertex_start = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
        model.add_field("body_vertex", vec3, (sum(counts),), np.concatenate([b["vertices"] for b in bodies]), param=False)
        model.add_field("vertex_body", ti.i32, (sum(counts),), np.repeat(np.arange(B), counts).astype(np.int32), param=False)
        pcounts = [len(b["points"]) for b in bodies]
        model.contact_point_count = sum(pcounts)
        model.add_field("contact_point", vec3, (sum(pcounts),), np.concatenate([b["points"] for b in bodies]), param=False)
        model.add_field("contact_body", ti.i32, (sum(pcounts),), np.repeat(np.arange(B), pcounts).astype(np.int32),
                        param=False)
        # each body's contact point count: the share its mass is split into under implicit damping
        # (`body_effective_mass`)
        model.add_field("body_contact_point_count", float, (B,), np.array(pcounts, f), param=False)
        model.body_volume = np.array([b["volume"] for b in bodies])
        model.body_com_offset = np.array([b["com"] for b in bodies])
        model.body_faces = [b["faces"] for b in bodies]
        A = len(self.forces)
        model.body_applied_count = A
        if A:
            fs = self.forces
            model.add_field("body_force", vec3, (A,), np.array([x["force"] for x in fs], f))
            model.add_field("body_force_point", vec3, (A,), np.array([x["point"] for x in fs], f))
            model.add_field("body_torque", vec3, (A,), np.array([x["torque"] for x in fs], f))
            model.add_field("body_force_body", ti.i32, (A,), np.array([x["body"] for x in fs], np.int32), param=False)
            model.add_field("body_force_window", ti.types.vector(2, float), (A,),
                            np.array([x["window"] for x in fs], f), param=False)
        model.state_kinds += [
            StateKind("body_q", vec7, B, initial=model.body_q0),
            StateKind("body_qd", vec6, B, initial=model.body_qd0),
            StateKind("body_f", vec6, B, accumulator=True),
        ]
        if model.has_ground:
            model.force_terms += _ground_contact_terms(model, bodies, getattr(builder, "ground_law", DEFAULT_LAW),
                                                       pcounts)
        model.force_terms += touch_terms(builder, model, bodies)      # body-body and particle-body contact
        if A:
            model.integrators.append(RigidAppliedLoads(model))
        model.integrators.append(RigidIntegrator(model))


def add_body_force(builder, body, force=(0.0, 0.0, 0.0), point=None, torque=(0.0, 0.0, 0.0), start=0.0,
                   end=math.inf) -> int:
    """Apply a force at a point of rigid body `body` over a time window; see `RigidBodies.add_force`."""
    return builder.component(RigidBodies).add_force(builder, body, force, point, torque, start, end)


def add_body_controls(sim):
    """Allocate a differentiable per-step load `body_f_ext[t, b]` on a Simulator's rigid bodies.

    Returns the field: (steps, B) vec6 (torque about the centre of mass [N m],
    force [N]), world frame, zero-initialised, with gradients when the model
    requires them.  Call it before the simulator's first `run()` (the substep
    kernel is compiled then, with the force terms it has at that moment).
    """
    model = sim.model
    if getattr(model, "body_count", 0) == 0:
        raise ValueError("sim: the model has no rigid bodies (use SceneBuilder.add_rigid_body)")
    field = ti.Vector.field(6, float, shape=(sim.steps, model.body_count), needs_grad=model.requires_grad)
    sim.force_terms.append(BodyExternalForce(model, field))
    return field


# -- physics terms --------------------------------------------------------------
@ti.data_oriented
class BodyExternalForce(StepTerm):
    """Adds a per-step load `force[t, b]` (vec6: torque, force; world frame) to each body."""

    def __init__(self, model, force_field):
        super().__init__(model)
        self.force = force_field

    @ti.func
    def apply_forces(self, state: ti.template(), s: ti.template(), t: ti.template()):
        ti.loop_config(serialize=self.serial)
        for b in range(self.model.body_count):
            state.body_f[s, b] += self.force[t, b]



def _ground_contact_terms(model, bodies, ground_law, point_counts):
    """One RigidGroundContact term per distinct contact law (each term runs one loop, over the
    contact points of its bodies; with a single law it loops over every point directly)."""
    laws = body_laws(ground_law, bodies)
    starts = np.concatenate([[0], np.cumsum(point_counts)]).astype(np.int64)
    groups = {}
    for b, law in enumerate(laws):
        groups.setdefault(law, []).append(b)
    if len(groups) == 1:
        return [RigidGroundContact(model, laws[0])]
    terms = []
    for law, members in groups.items():
        points = np.concatenate([np.arange(starts[b], starts[b + 1]) for b in members]).astype(np.int32)
        field = ti.field(ti.i32, shape=(len(points),))
        field.from_numpy(points)
        terms.append(RigidGroundContact(model, law, field))
    return terms


@ti.data_oriented
class RigidGroundContact(StepTerm):
    """Penalty contact of body contact points with the ground y = 0 (per-body ke, kd, kf, mu) by one
    `ContactLaw`: of every contact point (`points` None), or of the contact points listed in `points`
    (an i32 field), when bodies use different laws."""

    def __init__(self, model, law: ContactLaw = DEFAULT_LAW, points=None):
        super().__init__(model)
        self.law = law
        self.points = points
        self.all_points = points is None     # compile-time switch ("is" is not allowed in Taichi scope)

    @ti.func
    def _point_force(self, state: ti.template(), s: ti.template(), c):
        b = self.model.contact_body[c]
        q = state.body_q[s, b]
        radius = self.model.body_contact_radius[b]
        # The point's position is formed twice, for the test and inside the branch, so that the test's
        # arithmetic feeds only the comparison: the reverse pass then does no adjoint work at all for
        # a point in the air (with one shared x it ran x's adjoint for every point: 17.5 against 15.6
        # us per step backward on vs_warp's rigid64)
        if touches_ground(world_point(q, self.model.contact_point[c]), radius):
            qd = state.body_qd[s, b]
            rot = body_rotation(q)
            r = quat_rotate(rot, self.model.contact_point[c])
            x = body_position(q) + r
            v = bottom(qd) + top(qd).cross(r)
            n = ti.Vector([0.0, 1.0, 0.0], dt=float)
            # damping_integration="implicit": kd, kf at the point's effective mass along n and along the slip
            dt_w_normal, dt_w_slip = body_point_dt_inverse_masses(self.model, b, rot, r, n, v, self.law)
            f = contact_force_along(ti.min(x[1] - radius, 0.0), n, v, self.model.body_ke[b], self.model.body_kd[b],
                                    self.model.body_kf[b], self.model.body_mu[b], self.law, dt_w_normal, dt_w_slip)
            state.body_f[s, b] += spatial(r.cross(f), f)

    @ti.func
    def apply_forces(self, state: ti.template(), s: ti.template(), t: ti.template()):
        if ti.static(self.all_points):
            ti.loop_config(serialize=self.serial)
            for c in range(self.model.contact_point_count):
                self._point_force(state, s, c)
        else:
            ti.loop_config(serialize=self.serial)
            for k in range(self.points.shape[0]):
                self._point_force(state, s, self.points[k])


@ti.data_oriented
class RigidAppliedLoads(StepTerm):
    """Loads applied at body points in their time windows [s] (`add_body_force`).

    Listed with the integrators, before `RigidIntegrator`, because the window test
    needs dt; like a force term it only adds to `body_f[s]`.
    """

    @ti.func
    def integrate(self, state: ti.template(), s: ti.template(), t: ti.template(), dt: ti.template()):
        ti.loop_config(serialize=self.serial)
        for a in range(self.model.body_applied_count):
            b = self.model.body_force_body[a]
            window = self.model.body_force_window[a]
            mid = (ti.cast(t, float) + 0.5) * dt
            if window[0] <= mid and mid < window[1]:
                q = state.body_q[s, b]
                r = quat_rotate(body_rotation(q), self.model.body_force_point[a])
                force = self.model.body_force[a]
                state.body_f[s, b] += spatial(r.cross(force) + self.model.body_torque[a], force)


@ti.data_oriented
class RigidIntegrator(StepTerm):
    """The semi-implicit rigid-body step (module docstring)."""

    @ti.func
    def _jac_column(self, inertia, wb, iw, dt, k: ti.template()):
        """Column k of J = I + dt (skew(wb) I - skew(I wb)): I e_k + dt (wb x I e_k - (I wb) x e_k)."""
        ik = ti.Vector([inertia[0, k], inertia[1, k], inertia[2, k]])
        ek = ti.Vector([1.0 if i == k else 0.0 for i in ti.static(range(3))])
        return ik + dt * (wb.cross(ik) - iw.cross(ek))

    @ti.func
    def integrate(self, state: ti.template(), s: ti.template(), t: ti.template(), dt: ti.template()):
        ti.loop_config(serialize=self.serial)
        for b in range(self.model.body_count):
            q = state.body_q[s, b]
            qd = state.body_qd[s, b]
            f = state.body_f[s, b]
            m = self.model.body_mass[b]
            rot = body_rotation(q)
            v1 = bottom(qd) + (bottom(f) / m + self.model.gravity[None]) * dt
            x1 = body_position(q) + v1 * dt
            inertia = self.model.body_inertia[b] * m
            wb = quat_rotate_inv(rot, top(qd))
            tb = quat_rotate_inv(rot, top(f))
            iw = matvec(inertia, wb)
            # J = I + dt (skew(wb) I - skew(I wb)) column by column (skew(a) b = a x b), and J^-1 rhs by
            # the rows of J^-1 = the columns' cross products / det J: fewer operations than a matrix
            # product and a general inverse, forward and, above all, in the reverse pass
            c0 = self._jac_column(inertia, wb, iw, dt, 0)
            c1 = self._jac_column(inertia, wb, iw, dt, 1)
            c2 = self._jac_column(inertia, wb, iw, dt, 2)
            r0 = c1.cross(c2)
            rhs = tb - wb.cross(iw)
            solved = ti.Vector([r0.dot(rhs), c2.cross(c0).dot(rhs), c0.cross(c1).dot(rhs)]) * (1.0 / c0.dot(r0))
            wb1 = wb + solved * dt
            w1 = quat_rotate(rot, wb1)
            u = ti.Vector([rot[0], rot[1], rot[2]])
            dq_v = w1 * rot[3] + w1.cross(u)
            dq_w = -w1.dot(u)
            r1 = rot + 0.5 * dt * ti.Vector([dq_v[0], dq_v[1], dq_v[2], dq_w])
            r1 = r1 / ti.sqrt(r1.dot(r1))
            state.body_q[s + 1, b] = ti.Vector([x1[0], x1[1], x1[2], r1[0], r1[1], r1[2], r1[3]])
            state.body_qd[s + 1, b] = spatial(w1, v1)

