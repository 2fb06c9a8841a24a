"""Contact between rigid bodies: every contact point of a body against the shape of every other body.

For each ordered pair of bodies (a, b), a != b, in the same contact group (`contact_groups` below): each
contact point p of a (`contact_point`, body frame; radius `body_contact_radius[a]`) at world position x is
taken into b's body frame, x_b = R_b^T (x - X_b), and its signed distance d and outward normal n_b to b's
shape (`body_shapes`, `shapes.ShapeTable.distance`) give

    c = min(d - radius_a, 0)            penetration [m]
    n = R_b n_b                         normal, out of b
    v = (v_a + w_a x r_a) - (v_b + w_b x r_b)     velocity of the point of a relative to the material point of b
                                        at the same place (r_a = x - X_a, r_b = x - X_b)
    f = contact.contact_force(c, n, v, ke, kd, kf, mu, law)      on a at x;  -f on b at x

so the pair's forces are equal and opposite and act at one point: linear and angular momentum are conserved
exactly.  Both orders (a, b) and (b, a) are evaluated, so a box's corners touch the other's faces and the
other's corners touch its faces; two box-shaped bodies' crossed edges, where no corner is inside the other
box, are `box_edges.BoxEdgeContact`'s (the same law, pair means and `contact_force`).

Pair parameters: ke, kd, kf and mu of a pair are the MEANS of the two bodies' (`body_pair_ke`, ...), Warp's rule
(`warp.sim.integrator_euler.eval_rigid_contacts` averages the two shapes' materials).  `body_pair_X` is each
body's constant against other bodies, a field of its own beside its constant against the ground and colliders
(`body_X`): both start at the value the body was given (`rigid.RigidBodies`), and a fit may move them apart
(a scene file's "bodies.X" nuisance or assumed constant, `scenes.pair_constants`), since a box-box contact's
point count (4 corners here, about 8 points in Warp) changes the stiffness per point it takes.  Law: each contact point
uses the contact law of ITS body (its own or the ground's, `rigid.RigidBodies.add`), as it does against the
ground, so two bodies with the same law (the usual case: both take the ground's) touch by that law.  Bodies
with different laws may share a scene (tests/test_contact_laws.py has two far apart) and may even touch: a's
points then press on b by a's law and b's points on a by b's (each force still equal and opposite).  One
term per law, over the contact points of the bodies with that law (as `rigid.RigidGroundContact`).

Broad phase (`SceneBuilder.broad_phase`): "grid" (default), the candidate (contact point, body) pairs of each
step from `broadphase.BroadPhase` (a uniform grid rebuilt every step outside the AD: O(C + B) work, C contact
points, B bodies), and the narrow phase below over that list only; or "flat", one flat loop over every (contact
point c of body a, body b): first the contact groups, then the bodies' bounding spheres, |X_a - X_b| < reach_a +
bound_b (reach = the largest |contact point| + radius, bound = the shape's bounding radius at its current size),
then the point against b's bounding sphere: O(C x B) tests (34,816 a step for vs_warp.py's pile64 of 68 bodies).
Both give the same pairs (the grid lists exactly the points inside b's bounding sphere) and, where loops are
serial, the same forces bit for bit (tests/test_broadphase.py).  In both, the tests only feed comparisons, and the
differentiable arithmetic is recomputed inside the branch (as `rigid.RigidGroundContact` does), so the reverse
pass does no work for points that do not touch.  A loop over body pairs with an inner loop over a's points was
reversed WRONGLY by Taichi 1.7.4 (box-on-box gradients 5-150 % off finite differences): both paths are one flat
loop over (point, body) entries.

Contact groups (`SceneBuilder.contact_groups`, set by `tgs.batched`): bodies (and particles, `coupling`)
interact only within one group; group -1 interacts with every group.  Default: one group.

Versus Warp 1.9.1 (warp.sim, `SemiImplicitIntegrator`, `wp.sim.collide`; tests/test_body_contact_warp.py):
the same pair means, the same penalty law with damping="uncapped" (Warp's `min(vn, 0) kd` while penetrating),
and for a sphere the same geometry (its centre with the radius as contact radius against the other shape): a
ball dropped on a box on the ground follows Warp's trajectory within 4.1e-6 m over 0.6 s.  Where they differ:
  * box-box: Warp's contact is edge-based (the closest point of each of the 12 edges of one box to the other
    box, found by a line search; on a flat face 8 contacts, 4 of them along the edges), tigradsim's the 8
    corners of each box against the other box, so a box resting on a box has 4 contact points here, 8 there.
  * friction: Warp's rigid friction is (vt / H(vt)) min(kf H(vt), mu |fn|) with a Huber norm H (see
    benchmarks/vs_warp.py), ours the contact law's (min(kf, mu fn / |vt|) vt by default): equal only where the
    tangential velocity is 0.
  * Warp finds contacts once per `collide` call within a margin (rigid_contact_margin) and evaluates the force
    at their current geometry; tigradsim evaluates the distance every step.
  * Two boxes of equal size stacked exactly aligned touch corner on edge: inside a box, the distance picks
    the nearest face, and at its edge the side face ties with the top one, so such a stack sinks (seen: the
    middle of three equal 0.2 m boxes 12 cm low after 1 s).  Stack boxes of different sizes, or offset them.
"""

import numpy as np
import taichi as ti

from .contact import ContactLaw, contact_force
from ..core.model import StepTerm
from ..core.runtime import np_float
from ..core.stability import StabilityRow, contact_row
from .rigid_pose import body_position, body_rotation, bottom, quat_rotate, quat_rotate_inv, spatial, top


def contact_groups(builder, kind: str, count: int) -> np.ndarray:
    """(count,) int contact group of every body (kind "bodies") or particle ("particles"): the builder's
    `contact_groups[kind]` (set by `tgs.batched`), default all 0."""
    groups = getattr(builder, "contact_groups", None) or {}
    g = groups.get(kind)
    if g is None:
        return np.zeros(count, dtype=np.int32)
    g = np.asarray(g, dtype=np.int32)
    if g.shape != (count,):
        raise ValueError(f"contact_groups[{kind!r}]: expected {count} groups, got shape {g.shape}")
    return g


def groups_meet(ga, gb):
    """Whether contact groups ga, gb (numpy, broadcast) interact: equal, or either is -1."""
    ga, gb = np.asarray(ga), np.asarray(gb)
    return (ga == gb) | (ga < 0) | (gb < 0)


def point_reach(points, radius) -> float:
    """Largest |p| + radius [m] of a body's contact points (body frame): its bounding sphere as a toucher."""
    return float(np.linalg.norm(np.asarray(points, dtype=np.float64), axis=1).max()) + float(radius)


def body_effective_inverse_mass(model):
    """(1 / m (B,), 1 / lambda_min(I) (B,)) of every body (inertia about the centre of mass, world-orientation
    free bound: `core.stability`'s rigid contact)."""
    mass = model.body_mass.to_numpy().astype(np.float64)
    inertia = model.body_inertia.to_numpy().astype(np.float64) * mass[:, None, None]
    lam_min = np.array([np.linalg.eigvalsh(0.5 * (I + I.T)).min() for I in inertia])
    return 1.0 / mass, 1.0 / lam_min


@ti.func
def _mean(field: ti.template(), a, b):
    """A pair's contact parameter: the mean of the two bodies' (Warp's rule, module docstring)."""
    return 0.5 * (field[a] + field[b])


@ti.data_oriented
class BodyBodyContact(StepTerm):
    """Penalty contact of every body's contact points against every other body's shape (module docstring).

    shapes: the finalized body ShapeTable (prefix "body_shape"); law: the `ContactLaw` of the touching points;
    points: an i32 field of the contact points (indices into `contact_point`) of the bodies with that law, or
    None for every contact point (every body has that law).
    Model fields it reads besides the bodies': body_point_start (B + 1,) i32 (body b's contact points are
    start[b]..start[b + 1]), body_reach (B,) [m], body_contact_group (B,) i32.
    """

    def __init__(self, model, shapes, law: ContactLaw, points=None, broad=None):
        super().__init__(model)
        self.shapes = shapes
        self.law = law
        self.points = points
        self.all_points = points is None     # compile-time switch
        self.use_broad = broad is not None     # compile-time switch
        self.broad = broad                   # a `broadphase.BroadPhase` over these points, or None: the flat loop

    @ti.func
    def _point(self, state: ti.template(), s: ti.template(), a, b, c):
        """Contact point c of body a against body b's shape: forces on both (no-op when apart)."""
        qa = state.body_q[s, a]
        qb = state.body_q[s, b]
        radius = self.model.body_contact_radius[a]
        bound = self.shapes.cull_radius(b) + radius
        # test first, with arithmetic that only feeds comparisons (no adjoint work for points apart)
        x0 = body_position(qa) + quat_rotate(body_rotation(qa), self.model.contact_point[c])
        local0 = quat_rotate_inv(body_rotation(qb), x0 - body_position(qb))
        if local0.dot(local0) < bound * bound:
            d0, n0 = self.shapes.distance(b, local0)
            if d0 < radius:
                rot_a = body_rotation(qa)
                rot_b = body_rotation(qb)
                r_a = quat_rotate(rot_a, self.model.contact_point[c])
                x = body_position(qa) + r_a
                r_b = x - body_position(qb)
                d, n_local = self.shapes.distance(b, quat_rotate_inv(rot_b, r_b))
                n = quat_rotate(rot_b, n_local)
                qda = state.body_qd[s, a]
                qdb = state.body_qd[s, b]
                v = (bottom(qda) + top(qda).cross(r_a)) - (bottom(qdb) + top(qdb).cross(r_b))
                f = contact_force(ti.min(d - radius, 0.0), n, v, _mean(self.model.body_pair_ke, a, b),
                                  _mean(self.model.body_pair_kd, a, b), _mean(self.model.body_pair_kf, a, b),
                                  _mean(self.model.body_pair_mu, a, b), self.law)
                state.body_f[s, a] += spatial(r_a.cross(f), f)
                state.body_f[s, b] += spatial(-r_b.cross(f), -f)

    @ti.func
    def _pair(self, state: ti.template(), s: ti.template(), c, b):
        """Contact point c (of body a) against body b, culled by contact group and bounding spheres."""
        a = self.model.contact_body[c]
        ga = self.model.body_contact_group[a]
        gb = self.model.body_contact_group[b]
        if a != b and (ga == gb or ga < 0 or gb < 0):
            gap = body_position(state.body_q[s, a]) - body_position(state.body_q[s, b])
            reach = self.model.body_reach[a] + self.shapes.cull_radius(b)
            if gap.dot(gap) < reach * reach:          # the bodies' bounding spheres overlap
                self._point(state, s, a, b, c)

    @ti.func
    def apply_forces(self, state: ti.template(), s: ti.template(), t: ti.template()):
        # One flat loop over (contact point, body): a loop over body pairs with an inner loop over the points of
        # a was reversed wrongly by Taichi 1.7.4 (the box-on-box gradients 5-150 % off finite differences).
        count = ti.static(self.model.body_count)
        if ti.static(self.use_broad):      # the step's candidate pairs (built before the step)
            self.broad.for_each_pair(self, state, s)
        elif ti.static(self.all_points):
            ti.loop_config(serialize=self.serial)
            for k in range(self.model.contact_point_count * count):
                c = k // count
                self._pair(state, s, c, k - c * count)
        else:
            ti.loop_config(serialize=self.serial)
            for k in range(self.points.shape[0] * count):
                j = k // count
                self._pair(state, s, self.points[j], k - j * count)

    def stability_limits(self):
        """Per contact point of body a against any other body b it may touch: the normal and friction modes
        with the pair's mean ke, kd, kf on the inverse effective mass w_a(point) + 1/m_b + R_b^2/lambda_min(I_b)
        (R_b: b's shape bounding radius; `core.stability`'s rigid-contact bound for each body)."""
        m = self.model
        inv_m, inv_i = body_effective_inverse_mass(m)
        body = m.contact_body.to_numpy()
        r2 = np.sum(m.contact_point.to_numpy().astype(np.float64) ** 2, axis=1)
        w_point = inv_m[body] + r2 * inv_i[body]                                   # (C,)
        bound = np.minimum(m.body_shape_bound.to_numpy().astype(np.float64), 1e6)
        w_other = inv_m + bound ** 2 * inv_i                                        # (B,)
        groups = m.body_contact_group.to_numpy()
        k = {n: getattr(m, f"body_pair_{n}").to_numpy().astype(np.float64) for n in ("ke", "kd", "kf")}
        meet = groups_meet(groups[body][:, None], groups[None, :]) & (body[:, None] != np.arange(m.body_count))
        w = (w_point[:, None] + w_other[None, :])
        pair = {n: 0.5 * (v[body][:, None] + v[None, :]) for n, v in k.items()}
        if not self.all_points:
            meet &= np.isin(np.arange(len(body)), self.points.to_numpy())[:, None]
        ci, bi = np.nonzero(meet)
        return [contact_row(type(self).__name__, "contact point", ci, w[ci, bi], pair["ke"][ci, bi],
                            pair["kd"][ci, bi], pair["kf"][ci, bi],
                            lambda j: f"body {body[ci[j]]} against body {bi[j]}, effective mass "
                                      f"{1 / w[ci[j], bi[j]]:.4g} kg")]


def body_contact_fields(model, bodies, groups):
    """The fields `BodyBodyContact` and `coupling.ParticleBodyContact` read besides the bodies' own."""
    counts = [len(b["points"]) for b in bodies]
    model.add_field("body_point_start", ti.i32, (len(bodies) + 1,),
                    np.concatenate([[0], np.cumsum(counts)]).astype(np.int32), param=False)
    model.add_field("body_reach", float, (len(bodies),),
                    np.array([point_reach(b["points"], b["radius"]) for b in bodies], np_float()), param=False)
    model.add_field("body_contact_group", ti.i32, (len(bodies),), groups.astype(np.int32), param=False)
