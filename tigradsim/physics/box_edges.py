"""Edge-edge contact between two box-shaped rigid bodies: the crossings corner contact does not see.

`body_contact.BodyBodyContact` presses every contact point (a box's 8 corners) of a body on the other body's
shape.  Two boxes that meet edge to edge with crossed edges (a box dropped crosswise on the ridge of another)
have no corner inside the other box, so they would pass through each other.  This term adds, for every pair of
box-shaped bodies (a, b), a < b, in the same contact group, and for each of a's 12 edges, the crossing with one
of b's 12 edges:

    edge i of a:  P(s) = P0 + s dA,  s in [0, 1]      (world; from a's pose and half extents `body_shape_size`)
    edge j of b:  Q(t) = Q0 + t dB,  t in [0, 1]
    (s, t)        the closest points of the two lines (Ericson, Real-Time Collision Detection 5.1.9), used
                  only when both lie strictly inside their edges (at an end, a corner touches: corner contact)
    n             = +-(dA x dB) / |dA x dB|, oriented out of b (n . (u1 + u2) > 0, u1, u2 the outward normals
                  of b's two faces that meet at edge j)
    c             = min((P(s) - Q(t)) . n, 0)     penetration [m]
    x             = (P(s) + Q(t)) / 2             where the force acts
    v             = (v_a + w_a x r_a) - (v_b + w_b x r_b),  r_a = x - X_a, r_b = x - X_b
    f             = contact.contact_force(c, n, v, ke, kd, kf, mu, law)    on a at x;  -f on b at x
                    (damping_integration="implicit": kd, kf at the pair's effective mass along n and the slip)

with the pair's MEAN ke, kd, kf, mu (as corner contact) and the law of a (the lower index; a body's own law
or the ground's: `contact.body_laws`).  Equal and opposite at one point: momentum is conserved exactly.

Which edge pair touches (comparisons only, so nothing here costs the reverse pass): the two edges must not be
parallel (|dA x dB| > 1e-3 |dA| |dB|), their closest points interior, n inside the normal cone of b's edge
(n . u1, n . u2 >= 0) and -n inside a's (the edges meet as edges, not an edge against a face, which corner
contact handles), P(s) inside box b and Q(t) inside box a (the edges poke into each other), and among b's 12
edges the one of least depth (the separating feature, as the separating-axis test picks the axis of least
overlap).  One crossing per edge of a: an edge that pierces two edges of b at once also has a corner inside b.

The differentiable arithmetic (closest points, normal, force) is recomputed once, for the chosen edge pair,
from the step's state and `body_shape_size` (so gradients reach poses, velocities, sizes, ke, kd, kf and mu).
The closest-point parameters are smooth while interior; the choice of edge is piecewise constant.

Pairs (`SceneBuilder.broad_phase`, as `body_contact`'s corners): "grid" (default), the box pairs whose bounding
spheres overlap at the step, from `broadphase.BroadPhase` with bodies as touchers (each pair once, a < b; a
uniform grid rebuilt every step outside the AD, O(boxes) work, and rebuilt from the stored state before the
step's reverse); or "flat", the static list of every box pair that may meet (contact groups, `box_pairs`), each
culled by the bounding spheres every step: O(boxes^2) (vs_warp.py's pile of 64 boxes: 2,016 pairs, 24,192
iterations a step).  Both give the same set of pairs past the sphere test, in the same order where loops are
serial (tests/test_box_edges.py compares the trajectories).

Cost: one flat loop over (box pair, edge of a): 12 P iterations (P listed pairs), culled first by the two
bodies' bounding spheres (`ShapeTable.cull_radius`; the grid's pairs pass it already), then by the distance of
a's edge to b's bounding sphere; only then b's edges are tested, one candidate per axis of b (3 unrolled tests,
`_axis_depth`).

Measured on the 2-vCPU VM shared with other jobs (8 boxes of 0.1 m in a 4 x 4 lattice, f32, 200 steps, cached
kernels, runs alternated, load ~5): forward 3.6-3.8 -> 5.3 us a step; forward + backward 15-21 -> 19 us a step
(within the noise).  Compile: with 12 unrolled edge tests (before `_axis_depth`) the first taped rollout's
compile went from 79 to 334 s (load ~17; the reverse kernel replays the tests); with the 3 of `_axis_depth`
a forward-only crossed-ridge run (compile included) takes 18 s against 31 s with 12 and 5 s without the term.
"""

import numpy as np
import taichi as ti

from ..core.model import StepTerm
from ..core.stability import body_point_counts, contact_row, implicit_dt
from .body_contact import _mean, body_effective_inverse_mass, groups_meet
from .body_effective_mass import body_pair_dt_inverse_masses
from .contact import ContactLaw, contact_force_along
from .rigid_pose import body_position, body_rotation, bottom, quat_rotate, quat_rotate_inv, spatial, top
from .shapes import BOX

EDGE_COUNT = 12
# |dA x dB| below this fraction of |dA| |dB|: the edges are parallel (a box resting flat on a box; corners touch)
_PARALLEL = 1e-3
# slack of the normal-cone and inside tests (unit vectors, and fractions of a half extent)
_SLACK = 1e-6


def box_pairs(kinds, groups, laws):
    """{law: (P, 2) int32 array of (a, b), a < b, ascending}: the pairs of box-shaped bodies that can meet
    (contact groups), by the law of a.  `kinds` (B,) shape kind ids, `groups` (B,) contact groups, `laws` (B,)."""
    boxes = np.flatnonzero(np.asarray(kinds) == BOX)
    groups = np.asarray(groups)
    ia, ib = np.triu_indices(len(boxes), 1)
    a, b = boxes[ia], boxes[ib]
    meet = groups_meet(groups[a], groups[b])
    a, b = a[meet], b[meet]
    out = {}
    for law in dict.fromkeys(laws[k] for k in boxes):          # the laws of the boxes, in order
        of_law = np.array([laws[k] == law for k in a], dtype=bool)
        if of_law.any():
            out[law] = np.stack([a[of_law], b[of_law]], axis=1).astype(np.int32)
    return out


@ti.func
def _edge(h, e):
    """Edge e (0..11) of a box of half extents h (body frame): (start, direction = end - start, outward normals
    of its two faces).  Edge e runs along axis e // 4; bits 0 and 1 of e % 4 pick the signs of the next two."""
    axis = e // 4
    u = (axis + 1) % 3
    w = (axis + 2) % 3
    su = ti.select((e & 1) == 1, 1.0, -1.0)
    sw = ti.select((e & 2) == 2, 1.0, -1.0)
    start = ti.Vector([ti.select(c == axis, -1.0, ti.select(c == u, su, sw)) * h[c] for c in ti.static(range(3))])
    direction = ti.Vector([ti.select(c == axis, 2.0, 0.0) * h[c] for c in ti.static(range(3))])
    face_u = ti.Vector([ti.select(c == u, su, 0.0) for c in ti.static(range(3))])
    face_w = ti.Vector([ti.select(c == w, sw, 0.0) for c in ti.static(range(3))])
    return start, direction, face_u, face_w


@ti.func
def _inside(x, h):
    """Whether local point x lies in the box of half extents h (with a sliver of slack)."""
    return (ti.abs(x[0]) <= h[0] * (1.0 + _SLACK)) & (ti.abs(x[1]) <= h[1] * (1.0 + _SLACK)) & \
        (ti.abs(x[2]) <= h[2] * (1.0 + _SLACK))


@ti.func
def _closest(p0, d, q0, e):
    """Line parameters (s, t) of the closest points of p0 + s d and q0 + t e, and |d x e|^2 / (|d|^2 |e|^2)
    (the squared sine of their angle; the parameters are meaningless when it is ~0)."""
    r = p0 - q0
    A = d.dot(d)
    E = e.dot(e)
    B = d.dot(e)
    den = A * E - B * B
    den_safe = ti.max(den, 1e-30 * A * E)
    s = (B * e.dot(r) - d.dot(r) * E) / den_safe
    t = (A * e.dot(r) - B * d.dot(r)) / den_safe
    return s, t, den / (A * E)


@ti.data_oriented
class BoxEdgeContact(StepTerm):
    """Edge-edge contact by contact law `law` of the box pairs `pairs` ((P, 2) int array, a < b: every pair that
    may meet, `box_pairs`) (module docstring).  shapes: the finalized body ShapeTable (prefix "body_shape").
    broad: a `broadphase.BroadPhase` with touchers "bodies" (the boxes of law `law` against every box) whose
    step's pairs the term evaluates, or None: the flat loop over `pairs`.  The stability limits cover `pairs`."""

    def __init__(self, model, shapes, law: ContactLaw, pairs, broad=None):
        super().__init__(model)
        self.shapes = shapes
        self.law = law
        self.pair_count = len(pairs)
        self.pairs_np = np.asarray(pairs, dtype=np.int32).reshape(-1, 2)
        self.use_broad = broad is not None     # compile-time switch
        self.broad = broad
        self.pairs = ti.Vector.field(2, ti.i32, shape=(1 if self.use_broad else self.pair_count,))
        if not self.use_broad:
            self.pairs.from_numpy(self.pairs_np)

    @ti.func
    def _axis_depth(self, p0, d, ua, wa, hb, k: ti.template()):
        """(depth [m], edge index j) of the crossing of a's edge (p0 + s d, its faces' normals ua, wa; in b's
        frame) with the one of b's 4 edges along axis k (compile time) that it can cross as an edge; depth 1e30
        when there is none (module docstring); comparisons only.

        In b's frame the 4 edges along k are the corners (+-h_u, +-h_w) of the (u, w) plane, and a's line
        projects to a line there with unit normal m = (d_w, -d_u) / |d_uw| and offset rho = p0_uw . m.  The
        normal n of a crossing is +-m (perpendicular to both edges), out of b and into the edge's quadrant, so
        its corner is (sign n_u h_u, sign n_w h_w), and the shallower of the two candidates (the corner on the
        line's side, n = sign(rho) m) is the separating one.  s minimises the projected distance to that corner,
        t follows from the k coordinate.  One expression per local and `&` (not `and`, which compiles to a
        branch): a local stored twice under a branch would go on an AD stack in the reverse kernel."""
        u = ti.static((k + 1) % 3)
        w = ti.static((k + 2) % 3)
        du, dw = d[u], d[w]
        duw2 = du * du + dw * dw
        rho = p0[u] * dw - p0[w] * du                     # |d_uw| times the line's offset along m
        inv = ti.select(rho < 0.0, -1.0, 1.0) / ti.sqrt(ti.max(duw2, 1e-30))
        nu, nw = dw * inv, -du * inv                      # n = sign(rho) m: towards the line, out of b
        su = ti.select(nu < 0.0, -1.0, 1.0)
        sw = ti.select(nw < 0.0, -1.0, 1.0)
        cu, cw = su * hb[u], sw * hb[w]
        s = ((cu - p0[u]) * du + (cw - p0[w]) * dw) / ti.max(duw2, 1e-30)
        t = (p0[k] + s * d[k] + hb[k]) / (2.0 * hb[k])
        P = p0 + s * d
        depth = (cu - P[u]) * nu + (cw - P[w]) * nw
        valid = (duw2 > _PARALLEL * _PARALLEL * d.dot(d)) & (s > 0.0) & (s < 1.0) & (t > 0.0) & (t < 1.0) & \
            (nu * ua[u] + nw * ua[w] <= _SLACK) & (nu * wa[u] + nw * wa[w] <= _SLACK) & (depth > 0.0) & \
            _inside(P, hb)
        j = 4 * k + ti.select(su > 0.0, 1, 0) + ti.select(sw > 0.0, 2, 0)
        return ti.select(valid, depth, 1e30), j

    @ti.func
    def _edge_pair(self, state: ti.template(), s: ti.template(), a, b, i):
        """Edge i of a against the edges of b: the force of the crossing of least depth, if any."""
        qa = state.body_q[s, a]
        qb = state.body_q[s, b]
        rot_a, rot_b = body_rotation(qa), body_rotation(qb)
        ha, hb = self.shapes.size[a], self.shapes.size[b]
        start, direction, fa_u, fa_w = _edge(ha, i)
        # a's edge and face normals in b's frame, where b's edges are axis-aligned
        p0 = quat_rotate_inv(rot_b, body_position(qa) + quat_rotate(rot_a, start) - body_position(qb))
        d = quat_rotate_inv(rot_b, quat_rotate(rot_a, direction))
        near = p0 + ti.min(ti.max(-p0.dot(d) / d.dot(d), 0.0), 1.0) * d
        bound = self.shapes.cull_radius(b)
        if near.dot(near) < bound * bound:                   # a's edge reaches b's bounding sphere
            ua = quat_rotate_inv(rot_b, quat_rotate(rot_a, fa_u))
            wa = quat_rotate_inv(rot_b, quat_rotate(rot_a, fa_w))
            d0, j0 = self._axis_depth(p0, d, ua, wa, hb, 0)
            d1, j1 = self._axis_depth(p0, d, ua, wa, hb, 1)
            d2, j2 = self._axis_depth(p0, d, ua, wa, hb, 2)
            least = ti.min(d0, d1, d2)
            if least < 1e29:
                j = ti.select(d0 == least, j0, ti.select(d1 == least, j1, j2))
                # b's point of the crossing must lie inside a too
                q0, e, _fu, _fw = _edge(hb, j)
                _s, t, _sin2 = _closest(p0, d, q0, e)
                qa_local = quat_rotate_inv(rot_a, quat_rotate(rot_b, q0 + t * e) + body_position(qb) - body_position(qa))
                if _inside(qa_local, ha):
                    self._force(state, s, a, b, i, j)

    @ti.func
    def _force(self, state: ti.template(), s_: ti.template(), a, b, i, j):
        """The force of the crossing of edge i of a with edge j of b (differentiable)."""
        qa = state.body_q[s_, a]
        qb = state.body_q[s_, b]
        rot_a, rot_b = body_rotation(qa), body_rotation(qb)
        xa, xb = body_position(qa), body_position(qb)
        sa, da, _ua, _wa = _edge(self.shapes.size[a], i)
        sb, db, fb_u, fb_w = _edge(self.shapes.size[b], j)
        p0 = xa + quat_rotate(rot_a, sa)
        dA = quat_rotate(rot_a, da)
        q0 = xb + quat_rotate(rot_b, sb)
        dB = quat_rotate(rot_b, db)
        s, t, _sin2 = _closest(p0, dA, q0, dB)
        P = p0 + s * dA
        Q = q0 + t * dB
        nraw = dA.cross(dB)
        # out of b: the sign is a comparison (piecewise constant), the direction differentiable
        sign = ti.select(nraw.dot(quat_rotate(rot_b, fb_u + fb_w)) < 0.0, -1.0, 1.0)
        n = nraw * (sign / ti.sqrt(nraw.dot(nraw)))
        x = 0.5 * (P + Q)
        r_a = x - xa
        r_b = x - xb
        qda = state.body_qd[s_, a]
        qdb = state.body_qd[s_, b]
        v = (bottom(qda) + top(qda).cross(r_a)) - (bottom(qdb) + top(qdb).cross(r_b))
        # damping_integration="implicit": kd, kf at the pair's effective mass (both bodies' w summed)
        dt_w_normal, dt_w_slip = body_pair_dt_inverse_masses(self.model, a, rot_a, r_a, b, rot_b, r_b, n, v,
                                                             self.law)
        f = contact_force_along(ti.min((P - Q).dot(n), 0.0), n, v, _mean(self.model.body_pair_ke, a, b),
                                _mean(self.model.body_pair_kd, a, b), _mean(self.model.body_pair_kf, a, b),
                                _mean(self.model.body_pair_mu, a, b), self.law, dt_w_normal, dt_w_slip)
        state.body_f[s_, a] += spatial(r_a.cross(f), f)
        state.body_f[s_, b] += spatial(-r_b.cross(f), -f)

    @ti.func
    def _pair_edge(self, state: ti.template(), s: ti.template(), a, b, i):
        """Edge i of a against b, when the bodies' bounding spheres overlap."""
        gap = body_position(state.body_q[s, a]) - body_position(state.body_q[s, b])
        reach = self.shapes.cull_radius(a) + self.shapes.cull_radius(b)
        if gap.dot(gap) < reach * reach:
            self._edge_pair(state, s, a, b, i)

    @ti.func
    def apply_forces(self, state: ti.template(), s: ti.template(), t: ti.template()):
        if ti.static(self.use_broad):          # the step's pairs (built before the step)
            ti.loop_config(serialize=self.serial)
            for k in range(self.broad.pair_count[None] * EDGE_COUNT):
                p = k // EDGE_COUNT
                pair = self.broad.pairs[p]
                self._pair_edge(state, s, pair[0], pair[1], k - p * EDGE_COUNT)
        else:
            ti.loop_config(serialize=self.serial)
            for k in range(self.pair_count * EDGE_COUNT):
                p = k // EDGE_COUNT
                pair = self.pairs[p]
                self._pair_edge(state, s, pair[0], pair[1], k - p * EDGE_COUNT)

    def stability_limits(self, dt=None):
        """Per box pair: the normal and friction modes with the pair's mean ke, kd, kf on the inverse effective
        mass 1/m_a + R_a^2/lambda_min(I_a) + 1/m_b + R_b^2/lambda_min(I_b) (R: the box's bounding radius, the
        farthest an edge point lies from its centre); dt [s]: the step, for a law with
        damping_integration="implicit" (kd, kf unconditionally stable: the ke mode's row)."""
        m = self.model
        inv_m, inv_i = body_effective_inverse_mass(m)
        bound = m.body_shape_bound.to_numpy().astype(np.float64)
        w_body = inv_m + bound ** 2 * inv_i
        a, b = self.pairs_np[:, 0], self.pairs_np[:, 1]
        # the constants the force reads (`_pair_edge`): the bodies' against each other, not the ground's
        k = {n: getattr(m, f"body_pair_{n}").to_numpy().astype(np.float64) for n in ("ke", "kd", "kf")}
        pair = {n: 0.5 * (v[a] + v[b]) for n, v in k.items()}
        w = w_body[a] + w_body[b]
        count = body_point_counts(m)       # implicit damping's mass split (`body_effective_mass`)
        split = (count[a] * w_body[a] + count[b] * w_body[b]) / w
        return [contact_row(type(self).__name__, "box pair", np.arange(len(a)), w, pair["ke"], pair["kd"],
                            pair["kf"], lambda j: f"edges of body {a[j]} against edges of body {b[j]}, effective "
                                                  f"mass {1 / w[j]:.4g} kg", implicit_dt=implicit_dt(self.law, dt),
                            split=split)]
