"""Static colliders: planes of any normal (ramps, walls), spheres, boxes, capsules and closed triangle meshes that
every particle (FEM and cloth vertices included) and every rigid-body contact point touches.

A collider is a shape of `tigradsim.physics.shapes` (its signed distance d(x) and outward normal n in the
collider's own frame) placed by a pose, vec7 (position [m], unit quaternion x y z w rotating collider
coordinates to the world), with its own penalty parameters ke [N/m], kd [N s/m], kf [N s/m], mu and its own
`ContactLaw`.  A point at x [m] with contact radius r [m] and velocity v [m/s] (the collider does not move, so v
is the velocity relative to it) gets, by `tigradsim.physics.contact.contact_force`:

    x_l = R^T (x - p),   (d, n_l) = shape distance at x_l,   n = R n_l,   c = min(d - r, 0)
    f   = contact_force(c, n, v, ke, kd, kf, mu, law)

on a particle f, on a rigid body's contact point at arm a from the centre of mass the wrench (a x f, f) (with
damping_integration="implicit", kd and kf at the particle's mass or the body point's effective mass along n and
along the slip: `contact.contact_force_along`, `body_effective_mass`).  A
plane collider is the plane y = 0 of its frame, normal +y: `quat_from_axis_angle` / `quat_from_normal` turn it
into a ramp or a wall.  The ground (`SceneBuilder.add_ground`) is the plane collider y = 0 with its own fields
(ground_ke, ...) and a fast path of its own; it is not in this table and behaves as before.

Model fields (C colliders): the `ShapeTable` "collider" (collider_kind, collider_size (C,) vec3 [m],
differentiable, collider_bound and the mesh grids), collider_pose (C,) vec7, collider_ke, collider_kd,
collider_kf, collider_mu (C,): all differentiable, so a fit can move a ramp's angle or a table's height, or
identify a ramp's friction.  The quaternion is normalised in the kernel (an optimiser's step off the unit sphere
changes nothing but its length).

A rigid body touches colliders at its contact points only (`add_rigid_body(contact_points=...)`, default its
mesh vertices), as it touches the ground: a box landing flat on a ball is held by its corners, the ball passing
through the face between them; give a body denser contact points where its faces must rest on curved or small
colliders.

Cost: a point is first tested against the collider's bounding sphere (`ShapeTable.cull_radius`: from the
current size, not the `collider_bound` of finalize, since a fit may grow the size; plus the point's radius) or, for a plane, by its
exact distance, with arithmetic that feeds only the comparison and no local variable assigned twice: the reverse
pass re-evaluates the test and does no adjoint work and allocates no AD stack for a point outside.  (A first
version whose test assigned a local twice cost about 0.8 ms more per step forward+backward for 4,096 particles
against 4 far spheres; this one: 1.9 ns per culled pair forward, 5.3 ns forward+backward, and 4,096 particles
all resting on a sphere 159 / 443 us per step, f32 on the shared 2-core VM: benchmarks/bench_colliders.py.)  Every collider's parameters govern every contact with it (a rigid body's own ke ... mu and
law are those of its ground contact).  Terms are grouped at finalize by law and by planes / other shapes (one
kernel loop each, compile time), as the ground's rigid contact is by law.
"""

import numpy as np
import taichi as ti

from .body_effective_mass import body_point_dt_inverse_masses
from .contact import ContactLaw, contact_force, contact_force_along, dt_over_mass
from .rigid_pose import (body_position, body_rotation, bottom, quat_rotate, quat_rotate_inv,
                         quat_to_matrix_np, spatial, top, world_point)
from .shapes import PLANE, KIND_NAMES, ShapeTable, check_shape
from ..core.errors import as_array, check_positive
from ..core.model import StepTerm
from ..core.placement import deepest_starts
from ..core.runtime import np_float

QUAT_TOL = 1e-6
CONTACT_NAMES = ("ke", "kd", "kf", "mu")


def _check_pose(position, rotation):
    pos = as_array("position", position, shape=(3,))
    rot = as_array("rotation", rotation, shape=(4,))
    norm = float(np.linalg.norm(rot))
    if abs(norm - 1.0) > QUAT_TOL:
        raise ValueError(f"rotation: quaternion (x, y, z, w) must have unit norm, got {rot.tolist()} of norm "
                         f"{norm:.9g}; normalise it first (tgs.quat_from_axis_angle, tgs.quat_from_normal)")
    return np.concatenate([pos, rot / norm])


class Colliders:
    """The builder component of the static colliders (`SceneBuilder.add_collider`)."""

    def __init__(self):
        self.table = ShapeTable("collider")
        self.colliders = []        # dicts: kind name, pose (7,), contact {ke, kd, kf, mu}, law

    def __len__(self):
        return len(self.colliders)

    def add(self, builder, kind, size=None, position=(0.0, 0.0, 0.0), rotation=(0.0, 0.0, 0.0, 1.0), mesh=None,
            ke=1e4, kd=10.0, kf=10.0, mu=0.5, damping="capped", friction="capped", friction_velocity=None,
            resolution=32, mpm_boundary=None, damping_integration="explicit") -> int:
        """Add a static collider; returns its index.

        kind: "plane" (the plane y = 0 of its frame, normal +y; no size), "sphere" (size: radius [m]), "box"
            (size: half extents (hx, hy, hz) [m]), "capsule" (size: (radius, half length of its axis) [m], axis
            along its local y) or "mesh" (mesh=(vertices (V, 3) [m], faces (F, 3)) closed and outward-oriented,
            in its own frame; size: scale, default 1; its signed distance is sampled on a grid of `resolution`
            points along its longest side: `tigradsim.physics.shapes.mesh_sdf_grid`).
        position: (3,) [m] where the collider's frame origin is (a plane: a point on it).
        rotation: (4,) unit quaternion (x, y, z, w) of its frame; for a plane `tgs.quat_from_normal(normal)` or
            `tgs.quat_from_axis_angle(axis, angle)` (a ramp).
        ke [N/m] > 0, kd [N s/m] >= 0, kf [N s/m] >= 0, mu >= 0: its penalty contact (defaults as add_ground);
        damping, friction, friction_velocity, damping_integration: its `ContactLaw` (`tigradsim.physics.contact`;
            "implicit": kd, kf by local backward Euler at each particle's mass or each rigid contact point's
            effective mass along the normal and the slip).
        mpm_boundary: how MPM matter meets it at the grid, "sticky", "slip" or "separate" (with friction mu);
            None: the MPM grid's `boundary` (`tigradsim.physics.mpm_boundary`).
        """
        if builder._finalized:
            raise RuntimeError("add_collider: this builder was already finalized; add colliders before finalize()")
        if not isinstance(kind, str) or kind not in KIND_NAMES:
            raise ValueError(f"kind: expected one of {sorted(KIND_NAMES)}, got {kind!r}")
        if kind != "mesh" and mesh is not None:
            raise ValueError(f"mesh: only a 'mesh' collider takes a mesh, got one for kind {kind!r}")
        if not (isinstance(resolution, (int, np.integer)) and not isinstance(resolution, bool) and resolution >= 4):
            raise ValueError(f"resolution: expected a whole number >= 4, got {resolution!r}")
        k, size3, grid = check_shape("size", kind, size, mesh=mesh, resolution=int(resolution))
        pose = _check_pose(position, rotation)
        contact = {}
        for name, value in zip(CONTACT_NAMES, (ke, kd, kf, mu)):
            contact[name] = float(check_positive(name, as_array(name, value, shape=()), allow_zero=name != "ke"))
        law = ContactLaw(damping, friction, friction_velocity, damping_integration)
        if mpm_boundary is not None:
            from .mpm_boundary import check_boundary_mode
            check_boundary_mode("mpm_boundary", mpm_boundary)
        self.table.add(k, size3, grid)
        # the mesh itself only for pictures (`collider_surfaces`); the contact reads the grid
        self.colliders.append(dict(kind=kind, pose=pose, contact=contact, law=law, mpm_boundary=mpm_boundary,
                                   mesh=None if mesh is None else tuple(np.asarray(a) for a in mesh)))
        return len(self.colliders) - 1

    # -- build-time checks -----------------------------------------------------------
    def label(self, c) -> str:
        return f"collider {c} ({self.colliders[c]['kind']})"

    def signed_distance_np(self, c, points):
        """Signed distance [m] of world points (N, 3) to collider c at its initial pose and size (numpy)."""
        pose = self.colliders[c]["pose"]
        local = (np.asarray(points, dtype=np.float64) - pose[:3]) @ quat_to_matrix_np(pose[3:])
        return self.table.distance_np(c, local)[0]

    def penetrations(self, objects) -> list:
        """(placed, collider, depth [m], deepest point (3,)) of every object (`Placed`) that starts inside a
        collider deeper than resting contact explains (`tigradsim.core.placement`)."""
        out = []
        for c in range(len(self)):
            for p, depth, k in deepest_starts(objects, lambda x, c=c: self.signed_distance_np(c, x)):
                out.append((p, c, depth, np.asarray(p.points, dtype=np.float64).reshape(-1, 3)[k]))
        return out

    def check_clearance(self, objects) -> None:
        """ValueError naming every object, collider and depth of an interpenetrating start."""
        found = self.penetrations(objects)
        if found:
            raise ValueError("; ".join(
                f"{p.label} starts {depth:.3g} m inside {self.label(c)} (its deepest contact point, radius "
                f"included, at {np.round(x, 4).tolist()} m): move it out of the collider, or the collider away; "
                f"a start deeper than resting contact (a few millimetres) is taken as a misplaced object"
                for p, c, depth, x in found))

    def prepare(self, builder):
        """Before any field or kernel: no object starts inside a collider."""
        self.check_clearance(builder.placed())

    # -- finalize ------------------------------------------------------------------
    def finalize(self, builder, model):
        C = len(self)
        model.collider_count = C
        if C == 0:
            return
        f = np_float()
        self.table.finalize(model)
        model.collider_table = self.table
        model.collider_meshes = [c["mesh"] for c in self.colliders]
        model.add_field("collider_pose", ti.types.vector(7, float), (C,),
                        np.array([c["pose"] for c in self.colliders], f))
        for name in CONTACT_NAMES:
            model.add_field(f"collider_{name}", float, (C,), np.array([c["contact"][name] for c in self.colliders], f))
        # one term per (law, plane or not): both compile-time (the plane test is the exact distance, the others
        # a bounding sphere)
        groups = {}
        for c, col in enumerate(self.colliders):
            groups.setdefault((col["law"], self.table.kinds[c] == PLANE), []).append(c)
        rigid = next((comp for comp in builder.components if type(comp).__name__ == "RigidBodies"), None)
        has_points = rigid is not None and len(rigid.bodies) > 0
        for (law, planes), members in groups.items():
            if model.particle_count:
                model.force_terms.append(ParticleColliderContact(model, law, members, planes))
            if has_points:
                model.force_terms.append(RigidColliderContact(model, law, members, planes))


def add_collider(builder, *args, **kwargs) -> int:
    """`Colliders.add` on the builder's component."""
    return builder.component(Colliders).add(builder, *args, **kwargs)


# -- terms ---------------------------------------------------------------------------
@ti.data_oriented
class ColliderContactBase(StepTerm):
    """What the particle and rigid-body terms share: the colliders of one law (`members`: all planes, or none),
    the cull and the force of one point against one collider."""

    def __init__(self, model, law: ContactLaw, members, planes: bool):
        super().__init__(model)
        self.law = law
        self.planes = bool(planes)     # compile time: every member is a plane (else none is)
        self.member_ids = list(members)
        self.member_count = len(self.member_ids)
        self.members = ti.field(ti.i32, shape=(self.member_count,))
        self.members.from_numpy(np.array(self.member_ids, np.int32))
        self.table = model.collider_table

    @ti.func
    def _frame(self, c):
        """Collider c's position and its quaternion normalised (an optimiser's step may leave the unit sphere)."""
        pose = self.model.collider_pose[c]
        rot = body_rotation(pose)
        return body_position(pose), rot / ti.sqrt(rot.dot(rot))

    @ti.func
    def _near(self, c, x, radius):
        """Whether a point at x [m] of `radius` may touch collider c: for a plane, whether it penetrates; for the
        other shapes, whether it lies in the bounding sphere (radius from the current size, plus the point's).
        Pure expressions (no local variable assigned twice), so that in the reverse pass a point that fails the
        test costs no adjoint work and no AD stack."""
        if ti.static(self.planes):
            pos, rot = self._frame(c)
            return quat_rotate_inv(rot, x - pos)[1] < radius
        else:
            gap = x - body_position(self.model.collider_pose[c])
            reach = self.table.cull_radius(c) + radius
            return gap.dot(gap) < reach * reach

    @ti.func
    def _surface(self, c, x):
        """(signed distance d [m], outward unit normal n, world) of collider c at the point x [m]."""
        pos, rot = self._frame(c)
        d, nl = self.table.distance(c, quat_rotate_inv(rot, x - pos))
        return d, quat_rotate(rot, nl)

    @ti.func
    def _force(self, c, x, v, radius, dt_inv_mass):
        """Force [N] on a point at x [m] moving at v [m/s] with `radius` [m] from collider c: exactly 0, with zero
        derivatives, where it does not penetrate (`tigradsim.physics.contact.touches_ground` says why).
        dt_inv_mass = dt / m [s/kg]: the implicit damping's (`contact.implicit_coefficient`; 0: explicit)."""
        d, n = self._surface(c, x)
        return contact_force(ti.min(d - radius, 0.0), n, v, self.model.collider_ke[c], self.model.collider_kd[c],
                             self.model.collider_kf[c], self.model.collider_mu[c], self.law, dt_inv_mass)


@ti.data_oriented
class ParticleColliderContact(ColliderContactBase):
    """Every particle against every collider of one law."""

    @ti.func
    def apply_forces(self, state: ti.template(), s: ti.template(), t: ti.template()):
        ti.loop_config(serialize=self.serial)
        for i, j in ti.ndrange(self.model.particle_count, self.member_count):
            c = self.members[j]
            radius = self.model.particle_radius[i]
            if self._near(c, state.particle_q[s, i], radius):
                state.particle_f[s, i] += self._force(c, state.particle_q[s, i], state.particle_qd[s, i], radius,
                                                      dt_over_mass(self.model, i, self.law))


@ti.data_oriented
class RigidColliderContact(ColliderContactBase):
    """Every rigid-body contact point against every collider of one law: force and torque on the body."""

    @ti.func
    def apply_forces(self, state: ti.template(), s: ti.template(), t: ti.template()):
        ti.loop_config(serialize=self.serial)
        for p, j in ti.ndrange(self.model.contact_point_count, self.member_count):
            c = self.members[j]
            b = self.model.contact_body[p]
            q = state.body_q[s, b]
            radius = self.model.body_contact_radius[b]
            # the point formed twice, for the test and in the branch, as in RigidGroundContact
            if self._near(c, world_point(q, self.model.contact_point[p]), radius):
                qd = state.body_qd[s, b]
                rot = body_rotation(q)
                r = quat_rotate(rot, self.model.contact_point[p])
                x = body_position(q) + r
                v = bottom(qd) + top(qd).cross(r)
                d, n = self._surface(c, x)
                # damping_integration="implicit": kd, kf at the point's effective mass along n and along the slip
                dt_w_normal, dt_w_slip = body_point_dt_inverse_masses(self.model, b, rot, r, n, v, self.law)
                f = contact_force_along(ti.min(d - radius, 0.0), n, v, self.model.collider_ke[c],
                                        self.model.collider_kd[c], self.model.collider_kf[c],
                                        self.model.collider_mu[c], self.law, dt_w_normal, dt_w_slip)
                state.body_f[s, b] += spatial(r.cross(f), f)


