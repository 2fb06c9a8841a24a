"""Cloth against soft (FEM) bodies: two-way point-triangle penalty contact with a thickness.

A cloth draped over a soft ball, a towel on a jelly: the cloth's vertices touch the FEM body's boundary triangles,
and the FEM body's boundary vertices touch the cloth's triangles.  Switched on by the builder wherever a cloth and a
soft mesh (`add_soft_mesh`) share a contact group (`body_contact.contact_groups`: one group by default, so every
scene with both has it); constants per (cloth, soft mesh) pair: `SceneBuilder.set_cloth_soft_contact`
(DEFAULT_PARAMS otherwise).  Each term is a list of touchers (particles) against a list of triangles:

    ClothSoftContact("cloth on soft"):  cloth vertices  against the soft meshes' boundary triangles (one-sided)
    ClothSoftContact("soft on cloth"):  soft boundary vertices against the cloth triangles (two-sided)

Narrow phase, point p (velocity v_p, contact radius r_p) against triangle (a, b, c) (radii r_a, r_b, r_c):

    (w_a, w_b, w_c) = barycentric weights of the closest point of the triangle to p    (Ericson's 7 regions)
    x_c = w_a a + w_b b + w_c c,   d = |p - x_c|,   h = r_p + (r_a + r_b + r_c) / 3      thickness [m]
    two-sided (cloth triangle):   contact when d < h:  c = d - h,  n = (p - x_c) / d
    one-sided (soft boundary, outward normal n_t = (b - a) x (c - a) / |.|, s = (p - a).n_t):
        s >= 0 (in front):                       as two-sided (n = n_t over the face, towards the edge or corner
                                                 beyond it: no gaps over convex edges)
        -h < s < 0 (behind) with x_c inside the face: c = s - h, n = n_t  (a vertex that got in is pushed OUT,
                                                 not on through: the solid has an inside, the cloth has not; no
                                                 deeper than h, where the far faces of a thin solid would pull
                                                 a vertex above its top face down through it)
    f = contact_force(c, n, v_p - (w_a v_a + w_b v_b + w_c v_c), ke, kd, kf, mu, law)
    p gets f;  a, b, c get -w_a f, -w_b f, -w_c f

The weights sum to 1, so the forces of a pair sum to zero: linear momentum is conserved exactly (angular momentum
up to the friction's moment about the offset p - x_c, of order h).  `law` is the scene's (the ground's) contact
law, as for cloth self-contact (with damping_integration="implicit" its kd, kf stepped at the pair's reduced
mass 1 / (1/m_p + sum w_k^2 / m_k), `contact.dt_over_mass`); the thickness comes from the contact radii the vertices already have against
the ground and bodies (`add_cloth(radius=)`, `add_soft_mesh(radius=)`), so it is not a new knob.

Why point-triangle (and not the vertex-vertex thickness of `cloth_self_contact`): a soft body's boundary is
usually coarser or finer than the cloth by a large factor (a 64 x 64 cloth of 1.4 cm cells on a ball of 4 cm
edges), and vertex-vertex contact needs a thickness above the coarser mesh's triangle circumradius to stop
crossings, which a drape shows as a visible gap; point-triangle contact holds at any thickness on either mesh,
and the solid's orientation gives a side, which makes it one-sided and recovers vertices that got in.  Both
directions are evaluated because each misses what the other catches: a fine cloth's vertices cannot hold a sharp
corner of a coarse solid that pokes between them (the solid's vertex against the cloth triangle does), and a
coarse cloth's triangles would let a fine solid's vertices through in the same way.  Where both fire on one
contact (a cloth vertex on a face whose vertex is under a cloth triangle) the stiffness adds up: ke is per
touching pair, as for the ground per point.  Likewise every triangle within h of a point pushes it (the
closest-point contacts are summed, as in Warp's `eval_triangles_contact`): a point within h of an edge or a
vertex of a flat patch takes up to 2 (an edge) or k (a vertex of k triangles) times ke, so the resting depth
m g / ke varies over the surface by that factor (sub-millimetre at the constants of the demo).  Keeping only the
nearest feature per point would make ke uniform but the force discontinuous where the nearest one changes.

What it does not catch: edge-edge crossings (a cloth edge sliding over a solid's edge with no vertex of either
within h of the other's triangle, possible only where both meshes are coarse compared with h); a vertex moving
more than about h + its penetration in one step through a cloth triangle (keep v dt well below h); a cloth
vertex that got more than h into the solid (2 h of penetration: ke too soft for the load) is no longer pushed
out and falls through.  The closest-point region changes make the force's derivative jump (its value is continuous
in front of a face); central differences that do not cross such a boundary agree with the Tape (tests).

Broad phase: `broadphase.BroadPhase` with triangles as targets (`TriangleTargets`: each triangle's centroid with
its current bounding radius + the mean radius of its vertices), rebuilt every step outside the AD: O(touchers +
triangles) a step.  The builder's broad_phase = "flat" does not apply here (an all-pairs loop over a cloth and a
solid's surface would be millions of tests): this contact always uses the grid.  Pair capacity: a multiple of
`SceneBuilder.broad_phase_capacity` per toucher, at least PAIRS_SCALE, more where the other mesh is fine against
the reach of its triangles' spheres (`pairs_scale`: a soft ball's vertex under a fine cloth lies in the spheres
of some tens of its triangles).

Gradients: differentiable in the positions, velocities, masses (through the dynamics) and the constants
`cloth_soft_ke`, `cloth_soft_kd`, `cloth_soft_kf`, `cloth_soft_mu` ((C x M,) rows, row = cloth x M + mesh);
the contact radii are not parameters.

Stability (`core.stability`): per toucher, the normal and friction modes with the largest constants of its pairs
on 1/m_p + the largest inverse mass among the vertices of the triangles it may touch (a triangle's effective
inverse mass at a point, sum w_k^2 / m_k, is at most that).
"""
import numpy as np
import taichi as ti

from ..core.errors import as_array, check_positive
from ..core.model import StepTerm
from ..core.stability import contact_row
from .body_contact import contact_groups, groups_meet
from .broadphase import BroadPhase, check_broad_phase
from .contact import DEFAULT_LAW, ContactLaw, contact_force, dt_over_mass

DEFAULT_PARAMS = {"ke": 100.0, "kd": 0.01, "kf": 0.1, "mu": 0.3}
PAIRS_SCALE = 4
FOLD_MARGIN = 4.0
_TINY = 1e-12                 # [m] below this distance the direction p - x_c is undefined: no force


def check_cloth_soft_params(params: dict) -> dict:
    """Validate {"ke", "kd", "kf", "mu"} (some of them) of `SceneBuilder.set_cloth_soft_contact`; returns them as
    floats.  ke > 0, the others >= 0."""
    unknown = sorted(set(params) - set(DEFAULT_PARAMS))
    if unknown:
        raise ValueError(f"set_cloth_soft_contact: unknown constants {unknown}; expected some of "
                         f"{sorted(DEFAULT_PARAMS)}")
    return {k: float(check_positive(k, as_array(k, v, shape=()), allow_zero=k != "ke")) for k, v in params.items()}


@ti.func
def _nonzero(x):
    """x, or 1 where x is 0: a denominator of a region that is not selected (`ti.select` evaluates both sides, and
    an inf there would turn the unselected side's zero adjoint into NaN)."""
    return ti.select(ti.abs(x) > 1e-300, x, 1.0)


@ti.func
def closest_barycentric(p, a, b, c):
    """Barycentric weights (w_a, w_b, w_c) of the point of triangle (a, b, c) closest to p, and 1 where that point
    is inside the face (0 on an edge or corner).  Ericson, Real-Time Collision Detection, 5.1.5: the Voronoi
    region from the signs of six dot products (comparisons only), then the weights of that region.  Written with
    `ti.select` and no local assigned twice, as the step runs nested in the serial step loop (`Simulator`), where
    Taichi 1.7.4's reverse of locals carried through branches is not to be trusted (DESIGN.md section 5, rule 4)."""
    ab = b - a
    ac = c - a
    d1 = ab.dot(p - a)
    d2 = ac.dot(p - a)
    d3 = ab.dot(p - b)
    d4 = ac.dot(p - b)
    d5 = ab.dot(p - c)
    d6 = ac.dot(p - c)
    vc = d1 * d4 - d3 * d2
    vb = d5 * d2 - d1 * d6
    va = d3 * d6 - d5 * d4
    # regions 0 corner a, 1 corner b, 2 edge ab, 3 corner c, 4 edge ac, 5 edge bc, 6 the face (Ericson's order)
    region = ti.select((d1 <= 0.0) & (d2 <= 0.0), 0,
             ti.select((d3 >= 0.0) & (d4 <= d3), 1,
             ti.select((vc <= 0.0) & (d1 >= 0.0) & (d3 <= 0.0), 2,
             ti.select((d6 >= 0.0) & (d5 <= d6), 3,
             ti.select((vb <= 0.0) & (d2 >= 0.0) & (d6 <= 0.0), 4,
             ti.select((va <= 0.0) & (d4 - d3 >= 0.0) & (d5 - d6 >= 0.0), 5, 6))))))
    t_ab = d1 / _nonzero(d1 - d3)
    t_ac = d2 / _nonzero(d2 - d6)
    t_bc = (d4 - d3) / _nonzero((d4 - d3) + (d5 - d6))
    inv = 1.0 / _nonzero(va + vb + vc)
    wb = ti.select(region == 1, 1.0, ti.select(region == 2, t_ab, ti.select(region == 5, 1.0 - t_bc,
                   ti.select(region == 6, vb * inv, 0.0))))
    wc = ti.select(region == 3, 1.0, ti.select(region == 4, t_ac, ti.select(region == 5, t_bc,
                   ti.select(region == 6, vc * inv, 0.0))))
    return 1.0 - wb - wc, wb, wc, ti.select(region == 6, 1, 0)


@ti.data_oriented
class TriangleTargets:
    """The broad phase's view of a triangle list (`BroadPhase(..., triangles=)`): triangle j as a sphere at its
    centroid whose radius reaches its corners, plus the mean contact radius of its vertices; its contact group is
    its first vertex's.  indices: (T, 3) global particle indices."""

    def __init__(self, model, indices):
        self.model = model
        self.count = len(indices)
        self.indices = ti.Vector.field(3, ti.i32, shape=(max(self.count, 1),))
        self.indices.from_numpy(np.asarray(indices, dtype=np.int32).reshape(-1, 3) if self.count
                                else np.zeros((1, 3), dtype=np.int32))

    @ti.func
    def sphere(self, state: ti.template(), s, j):
        """(centre [m], radius [m], contact group) of triangle j at slot s."""
        t = self.indices[j]
        a = state.particle_q[s, t[0]]
        b = state.particle_q[s, t[1]]
        c = state.particle_q[s, t[2]]
        centre = (a + b + c) / 3.0
        reach = ti.sqrt(ti.max((a - centre).norm_sqr(), ti.max((b - centre).norm_sqr(), (c - centre).norm_sqr())))
        mean_radius = (self.model.particle_radius[t[0]] + self.model.particle_radius[t[1]]
                       + self.model.particle_radius[t[2]]) / 3.0
        return centre, reach + mean_radius, self.model.particle_contact_group[t[0]]


@ti.data_oriented
class ClothSoftContact(StepTerm):
    """Point-triangle penalty contact of `touchers` (particle indices) against `triangles` (T, 3) (module
    docstring); one_sided: the triangles are a soft body's outward boundary (True) or a cloth (False).  Model
    fields: cloth_soft_cloth (P,) i32 (the particle's cloth, -1: none), cloth_soft_mesh (P,) i32 (its soft mesh,
    -1: none), cloth_soft_mesh_count (int), cloth_soft_ke/kd/kf/mu (C x M,) (differentiable)."""

    def __init__(self, model, law: ContactLaw, touchers, triangles, one_sided: bool, capacity: int, name: str,
                 capacity_scale: int = PAIRS_SCALE):
        super().__init__(model)
        self.law = law
        self.one_sided = one_sided
        self.mesh_count = model.cloth_soft_mesh_count
        self.description = name
        self.toucher_indices = np.asarray(touchers)
        self.triangle_indices = np.asarray(triangles)
        self.triangles = TriangleTargets(model, triangles)
        self.broad = BroadPhase(model, None, "particles", touchers, np.arange(len(triangles)), capacity,
                                triangles=self.triangles, capacity_scale=capacity_scale)

    @ti.func
    def _row(self, i, t0):
        """The constants' row of the pair (particle i, triangle whose first vertex is t0)."""
        row = 0
        if ti.static(self.one_sided):         # i a cloth vertex, the triangle a soft mesh's
            row = self.model.cloth_soft_cloth[i] * ti.static(self.mesh_count) + self.model.cloth_soft_mesh[t0]
        else:                                 # i a soft mesh's vertex, the triangle a cloth's
            row = self.model.cloth_soft_cloth[t0] * ti.static(self.mesh_count) + self.model.cloth_soft_mesh[i]
        return row

    @ti.func
    def _apply(self, state: ti.template(), s: ti.template(), i, t, depth, n, wa, wb, wc):
        """The contact force of penetration `depth` along `n` on particle i, and its reaction on triangle t's
        vertices by the weights."""
        row = self._row(i, t[0])
        v = state.particle_qd[s, i] - (wa * state.particle_qd[s, t[0]] + wb * state.particle_qd[s, t[1]]
                                       + wc * state.particle_qd[s, t[2]])
        # damping_integration="implicit": dt over the pair's reduced mass along the relative velocity, 1/m_p +
        # sum w_k^2 / m_k (the triangle's point moves by w_k of each vertex's velocity); 0 when explicit
        dt_inv_mass = dt_over_mass(self.model, i, self.law) + wa * wa * dt_over_mass(self.model, t[0], self.law) \
            + wb * wb * dt_over_mass(self.model, t[1], self.law) + wc * wc * dt_over_mass(self.model, t[2], self.law)
        f = contact_force(depth, n, v, self.model.cloth_soft_ke[row], self.model.cloth_soft_kd[row],
                          self.model.cloth_soft_kf[row], self.model.cloth_soft_mu[row], self.law, dt_inv_mass)
        state.particle_f[s, i] += f
        state.particle_f[s, t[0]] -= wa * f
        state.particle_f[s, t[1]] -= wb * f
        state.particle_f[s, t[2]] -= wc * f

    @ti.func
    def _pair(self, state: ti.template(), s: ti.template(), i, j):
        # no local is assigned twice (see `closest_barycentric`): each case is a branch of its own
        t = self.triangles.indices[j]
        p = state.particle_q[s, i]
        a = state.particle_q[s, t[0]]
        b = state.particle_q[s, t[1]]
        c = state.particle_q[s, t[2]]
        h = self.model.particle_radius[i] + (self.model.particle_radius[t[0]] + self.model.particle_radius[t[1]]
                                             + self.model.particle_radius[t[2]]) / 3.0
        wa, wb, wc, face = closest_barycentric(p, a, b, c)
        gap = p - (wa * a + wb * b + wc * c)
        d2 = gap.dot(gap)
        if ti.static(self.one_sided):
            area2 = (b - a).cross(c - a)
            normal = area2 / ti.sqrt(area2.dot(area2))
            side = (p - a).dot(normal)
            if side >= 0.0 and d2 < h * h and d2 > _TINY * _TINY:              # in front, closer than h
                d = ti.sqrt(d2)
                self._apply(state, s, i, t, d - h, gap / d, wa, wb, wc)
            if side < 0.0 and side > -h and face == 1:                         # behind the face, at most h in
                self._apply(state, s, i, t, side - h, normal, wa, wb, wc)
        else:
            if d2 < h * h and d2 > _TINY * _TINY:
                d = ti.sqrt(d2)
                self._apply(state, s, i, t, d - h, gap / d, wa, wb, wc)

    @ti.func
    def apply_forces(self, state: ti.template(), s: ti.template(), t: ti.template()):
        self.broad.for_each_pair(self, state, s)

    def stability_limits(self, dt=None):
        """Per toucher (module docstring): its pairs' largest ke, kd, kf on 1/m_p + the largest inverse mass of the
        triangles' vertices in a contact group it meets (pinned vertices: 1/m = 0); with
        damping_integration="implicit", at the step dt [s] (kd, kf unconditionally stable)."""
        m = self.model
        pm = m.particle_mass.to_numpy().astype(np.float64)
        inv = np.where(pm > 0, 1.0 / np.where(pm > 0, pm, 1.0), 0.0)
        groups = m.particle_contact_group.to_numpy()
        idx = self.toucher_indices
        tri_vertices = np.unique(self.triangle_indices.reshape(-1))
        meet = groups_meet(groups[idx][:, None], groups[tri_vertices][None, :])
        w_other = np.where(meet, inv[tri_vertices][None, :], 0.0).max(axis=1)
        cloth = m.cloth_soft_cloth.to_numpy()
        mesh = m.cloth_soft_mesh.to_numpy()
        M = m.cloth_soft_mesh_count
        k = {}
        for name in ("ke", "kd", "kf"):
            table = getattr(m, f"cloth_soft_{name}").to_numpy().astype(np.float64).reshape(-1, M)
            # a cloth vertex: the largest over the meshes (its row); a soft vertex: over the cloths (its column)
            k[name] = table[cloth[idx]].max(axis=1) if self.one_sided else table[:, mesh[idx]].max(axis=0)
        w = inv[idx] + w_other
        return [contact_row(f"{type(self).__name__}[{self.description}]", "particle", idx, w, k["ke"], k["kd"],
                            k["kf"], lambda j: f"particle mass {pm[idx[j]]:.4g} kg, effective mass "
                                               f"{1 / w[j]:.4g} kg" if w[j] > 0 else "pinned",
                            implicit_dt=dt if self.law.implicit else None)]


def cloth_soft_terms(builder, model, cloths) -> list:
    """The two `ClothSoftContact` terms of a scene with cloths (`cloths`: the `ClothHandle`s) and soft meshes
    (the builder's `TetMeshes`) that share a contact group, with their model fields; [] otherwise.  Called by
    `Cloths.finalize`.  Constants: `builder.cloth_soft_params` {(cloth index or None, mesh index or None):
    {name: value}} (`SceneBuilder.set_cloth_soft_contact`), later entries over earlier ones, over DEFAULT_PARAMS."""
    from .fem import TetMeshes
    soft = next((c for c in builder.components if type(c) is TetMeshes), None)
    meshes = [h for h, _, _ in soft.meshes] if soft is not None else []
    if not cloths or not meshes:
        return []
    P = model.particle_count
    if not hasattr(model, "particle_contact_group"):
        model.add_field("particle_contact_group", ti.i32, (P,), contact_groups(builder, "particles", P), param=False)
    groups = model.particle_contact_group.to_numpy()
    cloth_particles = np.concatenate([np.arange(c.particle_start, c.particle_start + c.particle_count)
                                      for c in cloths])
    cloth_triangles = np.concatenate([c.faces for c in cloths])
    faces = np.concatenate([h.faces for h in meshes])
    soft_vertices = np.unique(faces.reshape(-1))
    if not np.any(groups_meet(np.unique(groups[cloth_particles])[:, None], np.unique(groups[soft_vertices])[None, :])):
        return []
    of_cloth = np.full(P, -1, dtype=np.int32)
    of_mesh = np.full(P, -1, dtype=np.int32)
    for k, c in enumerate(cloths):
        of_cloth[c.particle_start:c.particle_start + c.particle_count] = k
    for k, h in enumerate(meshes):
        of_mesh[h.particle_start:h.particle_start + h.particle_count] = k
    C, M = len(cloths), len(meshes)
    table = {name: np.full((C, M), value) for name, value in DEFAULT_PARAMS.items()}
    for (cloth, mesh), params in getattr(builder, "cloth_soft_params", {}).items():
        for name, value in params.items():
            table[name][slice(None) if cloth is None else cloth, slice(None) if mesh is None else mesh] = value
    model.cloth_soft_mesh_count = M
    model.add_field("cloth_soft_cloth", ti.i32, (P,), of_cloth, param=False)
    model.add_field("cloth_soft_mesh", ti.i32, (P,), of_mesh, param=False)
    for name in DEFAULT_PARAMS:
        model.add_field(f"cloth_soft_{name}", float, (C * M,), table[name].reshape(-1))
    _, capacity = check_broad_phase("grid", getattr(builder, "broad_phase_capacity", None))
    law = getattr(builder, "ground_law", DEFAULT_LAW)
    x = model.particle_q0.to_numpy().astype(np.float64)
    radius = model.particle_radius.to_numpy().astype(np.float64)
    return [ClothSoftContact(model, law, cloth_particles, faces, True, capacity, "cloth on soft",
                             pairs_scale(x, radius, faces, radius[cloth_particles].max(), capacity)),
            ClothSoftContact(model, law, soft_vertices, cloth_triangles, False, capacity, "soft on cloth",
                             pairs_scale(x, radius, cloth_triangles, radius[soft_vertices].max(), capacity))]


def pairs_scale(x, radius, triangles, toucher_radius, capacity) -> int:
    """Pairs per toucher, in units of `capacity` (`SceneBuilder.broad_phase_capacity`), that a term's list holds:
    PAIRS_SCALE, or more where the triangles are small against their reach: a point near a mesh touches the
    triangles whose spheres (`TriangleTargets`) hold it, about pi rho^2 / A of them on a flat sheet (rho: the
    largest sphere radius at rest + the toucher's radius, A: the smallest triangle area), and FOLD_MARGIN times
    that where the sheet folds or layers (a cloth draped in pleats).  x (P, 3), radius (P,): the particles at rest."""
    a, b, c = (x[triangles[:, k]] for k in range(3))
    centre = (a + b + c) / 3.0
    reach = np.sqrt(np.max([((p - centre) ** 2).sum(1) for p in (a, b, c)], axis=0)) + radius[triangles].mean(1)
    area = 0.5 * np.linalg.norm(np.cross(b - a, c - a), axis=1)
    per_point = FOLD_MARGIN * np.pi * (reach.max() + toucher_radius) ** 2 / area.min()
    return max(PAIRS_SCALE, int(np.ceil(per_point / capacity)))
