"""Two-way coupling of particles with rigid bodies: every particle against every body's shape.

Particles are every point mass of the scene: those added with `add_particles`, the vertices of FEM solids
(`add_soft_mesh`) and of cloths (`add_cloth`).  Particle i (position x, velocity v, radius r_i) against body
b (pose X_b, R_b; shape `body_shapes`, body frame) in the same contact group (`body_contact.contact_groups`):

    d, n_b = shape distance of R_b^T (x - X_b),   n = R_b n_b,   r_b = x - X_b
    f = contact.contact_force(min(d - r_i, 0), n, v - (v_b + w_b x r_b), ke_b, kd_b, kf_b, mu_b, law_b)
    particle i gets f; body b gets -f at x (force -f, torque -r_b x f about its centre of mass)

Contact parameters and law: the BODY's (`body_ke`, ..., its own contact law or the ground's): a particle
has no contact parameters of its own in tigradsim (it touches the ground with the ground's).  Pairs: from the
grid broad phase (`broadphase.BroadPhase`, `SceneBuilder.broad_phase = "grid"`, the default: O(particles +
bodies) a step), or the flat loop over every (particle, body) ("flat": O(particles x bodies) sphere tests, a
5,000-vertex ball against one box: 5,000 tests).  Culling as in `body_contact`: a particle outside the body's
bounding sphere does no differentiable arithmetic, and the reverse pass no work for it.

Not in this change, and why:
  * cloth-FEM contact: a cloth vertex against a soft solid has no signed distance to ask (the solid's surface
    moves with its elements; a rigid body's shape is fixed in its frame); it needs point-triangle proximity
    between deforming meshes.  Draping over a rigid body or a static collider is what this module and the
    colliders give; a cloth over a soft body passes through.  Cloth self-contact (and contact between cloths) is
    vertex-vertex repulsion within a thickness: `cloth_self_contact`.
  * particle-particle contact between different objects (a soft ball against another soft ball): same
    reason (no shape to ask); each still touches the ground, the colliders and the bodies.
"""

import numpy as np
import taichi as ti

from .contact import DEFAULT_LAW, ContactLaw, body_laws, contact_force
from ..core.model import StepTerm
from ..core.stability import contact_row
from .body_contact import (BodyBodyContact, body_contact_fields, body_effective_inverse_mass, contact_groups,
                           groups_meet)
from .body_shapes import body_shape_table
from .box_edges import BoxEdgeContact, box_pairs
from .broadphase import BODY_PAIR_SCALE, BroadPhase, check_broad_phase
from .rigid_pose import body_position, body_rotation, bottom, quat_rotate, quat_rotate_inv, spatial, top
from .shapes import BOX


@ti.data_oriented
class ParticleBodyContact(StepTerm):
    """Penalty contact of every particle against the shapes of the bodies listed in `bodies` (an i32 field of
    body indices that share `law`), with the reaction on the body (module docstring)."""

    def __init__(self, model, shapes, law: ContactLaw, bodies, broad=None):
        super().__init__(model)
        self.shapes = shapes
        self.law = law
        self.bodies = bodies
        self.use_broad = broad is not None     # compile-time switch
        self.broad = broad                   # a `broadphase.BroadPhase` of every particle against `bodies`, or None

    @ti.func
    def _pair(self, state: ti.template(), s: ti.template(), i, b):
        q = state.body_q[s, b]
        radius = self.model.particle_radius[i]
        bound = self.shapes.cull_radius(b) + radius
        local0 = quat_rotate_inv(body_rotation(q), state.particle_q[s, i] - body_position(q))
        if local0.dot(local0) < bound * bound:            # only comparisons: no adjoint work when apart
            d0, n0 = self.shapes.distance(b, local0)
            if d0 < radius:
                rot = body_rotation(q)
                r_b = state.particle_q[s, i] - body_position(q)
                d, n_local = self.shapes.distance(b, quat_rotate_inv(rot, r_b))
                n = quat_rotate(rot, n_local)
                qd = state.body_qd[s, b]
                v = state.particle_qd[s, i] - (bottom(qd) + top(qd).cross(r_b))
                f = contact_force(ti.min(d - radius, 0.0), n, v, self.model.body_ke[b], self.model.body_kd[b],
                                  self.model.body_kf[b], self.model.body_mu[b], self.law)
                state.particle_f[s, i] += f
                state.body_f[s, b] += spatial(-r_b.cross(f), -f)

    @ti.func
    def apply_forces(self, state: ti.template(), s: ti.template(), t: ti.template()):
        listed = ti.static(self.bodies.shape[0])
        if ti.static(self.use_broad):      # the step's candidate pairs (groups already tested)
            self.broad.for_each_pair(self, state, s)
        else:                                      # the flat loop: every (particle, listed body)
            ti.loop_config(serialize=self.serial)
            for p in range(self.model.particle_count * listed):
                i = p // listed
                b = self.bodies[p - i * listed]
                gi = self.model.particle_contact_group[i]
                gb = self.model.body_contact_group[b]
                if gi == gb or gi < 0 or gb < 0:
                    self._pair(state, s, i, b)

    def stability_limits(self):
        """Per particle against any body it may touch: normal and friction modes with the body's ke, kd, kf on
        the inverse effective mass 1/m_i + 1/m_b + R_b^2 / lambda_min(I_b) (a pinned particle: 1/m_i = 0)."""
        m = self.model
        bodies = self.bodies.to_numpy()
        inv_m, inv_i = body_effective_inverse_mass(m)
        bound = np.minimum(m.body_shape_bound.to_numpy().astype(np.float64), 1e6)[bodies]
        w_body = inv_m[bodies] + bound ** 2 * inv_i[bodies]
        pm = m.particle_mass.to_numpy().astype(np.float64)
        w_particle = np.where(pm > 0, 1.0 / np.where(pm > 0, pm, 1.0), 0.0)
        groups = m.body_contact_group.to_numpy()[bodies]
        meet = groups_meet(m.particle_contact_group.to_numpy()[:, None], groups[None, :])
        pi, bi = np.nonzero(meet)
        w = w_particle[pi] + w_body[bi]
        k = {n: getattr(m, f"body_{n}").to_numpy().astype(np.float64)[bodies][bi] for n in ("ke", "kd", "kf")}
        return [contact_row(type(self).__name__, "particle", pi, w, k["ke"], k["kd"], k["kf"],
                            lambda j: f"against body {bodies[bi[j]]}, particle mass {pm[pi[j]]:.4g} kg, "
                                      f"effective mass {1 / w[j]:.4g} kg")]


def touch_terms(builder, model, bodies) -> list:
    """The force terms through which bodies touch each other and the particles (called by
    `rigid.RigidBodies.finalize`): a `BodyBodyContact` when two bodies share a contact group (and a
    `box_edges.BoxEdgeContact` per contact law when two box-shaped bodies do), a
    `ParticleBodyContact` per contact law of the bodies when there are particles.  Creates the body shape
    table's fields (prefix "body_shape") and the contact-group fields.  [] when nothing can touch a body."""
    B, P = len(bodies), model.particle_count
    mode, capacity = check_broad_phase(getattr(builder, "broad_phase", "grid"),
                                       getattr(builder, "broad_phase_capacity", None))
    body_groups = contact_groups(builder, "bodies", B)
    pairs = B > 1 and bool(np.any(np.triu(groups_meet(body_groups[:, None], body_groups[None, :]), 1)))
    if not pairs and P == 0:
        return []
    ground_law = getattr(builder, "ground_law", DEFAULT_LAW)
    laws = body_laws(ground_law, bodies)
    shapes = body_shape_table(bodies).finalize(model)
    model.body_shape_table = shapes          # MPM's grid boundary reads it too (`mpm_boundary`)
    body_contact_fields(model, bodies, body_groups)
    by_law = {}
    for b, law in enumerate(laws):
        by_law.setdefault(law, []).append(b)
    terms = []
    if pairs:
        starts = model.body_point_start.to_numpy()
        for law, members in by_law.items():
            points = np.concatenate([np.arange(starts[b], starts[b + 1]) for b in members])
            broad = BroadPhase(model, shapes, "points", points, np.arange(B), capacity) if mode == "grid" else None
            terms.append(BodyBodyContact(model, shapes, law, None if len(by_law) == 1 else _index_field(points),
                                         broad))
        # crossed box edges: the box pairs of each step from a broad phase over the boxes (bodies as touchers),
        # or the flat loop over every box pair that may meet
        kinds = np.array([b["table_entry"][0] for b in bodies])
        boxes = np.flatnonzero(kinds == BOX)
        for law, box_pair_list in box_pairs(kinds, body_groups, laws).items():
            broad = BroadPhase(model, shapes, "bodies", [b for b in boxes if laws[b] == law], boxes, capacity,
                               capacity_scale=BODY_PAIR_SCALE) if mode == "grid" else None
            terms.append(BoxEdgeContact(model, shapes, law, box_pair_list, broad))
    if P:
        if not hasattr(model, "particle_contact_group"):     # cloth self-contact may have made it
            model.add_field("particle_contact_group", ti.i32, (P,), contact_groups(builder, "particles", P),
                            param=False)
        for law, members in by_law.items():
            broad = BroadPhase(model, shapes, "particles", np.arange(P), members, capacity) if mode == "grid" else None
            terms.append(ParticleBodyContact(model, shapes, law, _index_field(members), broad))
    return terms


def _index_field(indices):
    field = ti.field(ti.i32, shape=(len(indices),))
    field.from_numpy(np.asarray(indices, dtype=np.int32))
    return field
