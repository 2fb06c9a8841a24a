"""Cloth self-contact: vertex-vertex repulsion with a contact thickness, over the pairs of the grid broad phase.

Switched on per cloth: `add_cloth(..., self_contact=True, thickness=h, self_contact_params={"ke": .., "kd": ..,
"kf": .., "mu": ..})`.  Every vertex of such a cloth is a sphere of radius h/2: two vertices i, j (of one cloth, or
of two cloths that both have self-contact, in the same contact group) at distance d = |x_i - x_j| < h_ij, h_ij =
(h_i + h_j) / 2, push apart by the scene's contact law (`contact.contact_force`, the ground's law):

    c = d - h_ij (< 0),   n = (x_i - x_j) / d,   v = v_i - v_j
    f = contact_force(c, n, v, ke_ij, kd_ij, kf_ij, mu_ij, law)     on i;  -f on j

with ke_ij, ... the means of the two cloths' (as body pairs, `body_contact`).  Equal and opposite, along the line
of centres: momentum is conserved.  The pairs come from `broadphase.BroadPhase` (particles against particles,
each pair once), rebuilt every step outside the AD; the force is differentiable in the positions, velocities and
ke, kd, kf, mu (`cloth_self_ke`, ... one row per cloth; the thickness is not differentiable).

Why vertex-vertex and not vertex-triangle: a vertex crossing a triangle passes at most the triangle's circumradius
R from its nearest corner, so with h > R (checked at `add_cloth`: a clear error otherwise; default h = 1.25 x the
largest circumradius) no vertex can cross the cloth without entering a corner's thickness, and one smooth
point-point distance serves both the broad and the narrow phase.  Vertex-triangle contact allows a thinner h but
needs the point-triangle closest point, whose seven regions make the force's derivative jump where the closest
feature changes, and edge-edge tests besides to stop edges crossing; at the thickness a draped cloth shows on
screen (about a cell), vertex-vertex is the simpler and smoother choice.  What it does not catch: a vertex moving
more than about h - R in one step through the other layer (keep v dt well below h).

Left-out pairs: two vertices of the same cloth whose REST distance (the `add_cloth` vertices) is below
REST_FACTOR x h_ij: neighbours in the mesh, which the membrane and bending keep apart; repelling them would push
the cloth apart at rest.  A cloth folded onto itself brings together vertices far apart at rest: those touch.

Stability (`core.stability`): per vertex, the normal and friction modes with its cloth's ke, kd, kf on the
inverse mass 1/m_i + 1/m_min (against the lightest self-contact vertex of its contact group).
"""
import numpy as np
import taichi as ti

from ..core.errors import as_array, check_positive
from ..core.model import StepTerm
from ..core.stability import contact_row
from .body_contact import contact_groups
from .broadphase import BroadPhase, check_broad_phase
from .contact import DEFAULT_LAW, ContactLaw, contact_force, dt_over_mass

REST_FACTOR = 2.0
DEFAULT_PARAMS = {"ke": 100.0, "kd": 0.01, "kf": 0.1, "mu": 0.3}
THICKNESS_OVER_CIRCUMRADIUS = 1.25


def largest_circumradius(vertices, triangles) -> float:
    """Largest circumradius [m] of the triangles (T, 3) of vertices (V, 3)."""
    x = np.asarray(vertices, dtype=np.float64)
    a, b, c = (x[triangles[:, k]] for k in range(3))
    la, lb, lc = (np.linalg.norm(p - q, axis=1) for p, q in ((b, c), (c, a), (a, b)))
    area2 = np.linalg.norm(np.cross(b - a, c - a), axis=1)        # twice the area
    return float((la * lb * lc / (2.0 * area2)).max())


def check_self_contact(self_contact, thickness, params, vertices, triangles):
    """Validate `add_cloth`'s self-contact options (before any kernel): (thickness [m], params dict) or None."""
    if not isinstance(self_contact, (bool, np.bool_)):
        raise TypeError(f"self_contact: expected True or False, got {self_contact!r}")
    if not self_contact:
        if thickness is not None or params is not None:
            raise ValueError("thickness, self_contact_params: give them with self_contact=True")
        return None
    radius = largest_circumradius(vertices, triangles)
    if thickness is None:
        thickness = THICKNESS_OVER_CIRCUMRADIUS * radius
    h = float(check_positive("thickness", as_array("thickness", thickness)))
    if h <= radius:
        raise ValueError(f"thickness: {h:.4g} m is not above the cloth's largest triangle circumradius {radius:.4g} m, "
                         f"so a vertex could cross a triangle without touching its corners (vertex-vertex "
                         f"self-contact); use thickness > {radius:.4g} m (default {THICKNESS_OVER_CIRCUMRADIUS} x) "
                         "or a finer mesh")
    given = dict(params or {})
    unknown = sorted(set(given) - set(DEFAULT_PARAMS))
    if unknown:
        raise ValueError(f"self_contact_params: unknown keys {unknown}; expected some of {sorted(DEFAULT_PARAMS)}")
    out = {k: float(check_positive(f"self_contact_params[{k!r}]", as_array(k, given.get(k, v)), allow_zero=k != "ke"))
           for k, v in DEFAULT_PARAMS.items()}
    return h, out


@ti.data_oriented
class ParticlePairs:
    """The broad phase's view of the self-contact vertices: radius (half the thickness, per particle) and the
    left-out pairs (same cloth, rest distance below REST_FACTOR x the pair's thickness)."""

    def __init__(self, model):
        self.radius = model.cloth_self_radius
        self.cloth = model.cloth_self_row
        self.rest = model.cloth_self_rest

    @ti.func
    def left_out(self, i, j):
        gap = self.rest[i] - self.rest[j]
        reach = REST_FACTOR * (self.radius[i] + self.radius[j])
        return self.cloth[i] == self.cloth[j] and gap.dot(gap) < reach * reach


@ti.data_oriented
class ClothSelfContact(StepTerm):
    """Vertex-vertex repulsion of the self-contact cloths' vertices (module docstring), over the broad phase's
    pairs.  Model fields: cloth_self_row (P,) i32 (the cloth's row, -1: no self-contact), cloth_self_radius (P,)
    [m] (h / 2), cloth_self_rest (P,) vec3 [m], cloth_self_ke/kd/kf/mu (R,) (one row per cloth, differentiable)."""

    def __init__(self, model, law: ContactLaw, vertices, capacity):
        super().__init__(model)
        self.law = law
        self.vertices = np.asarray(vertices)
        self.broad = BroadPhase(model, None, "particles", vertices, vertices, capacity,
                                particle_pairs=ParticlePairs(model))

    @ti.func
    def _pair(self, state: ti.template(), s: ti.template(), i, j):
        h = self.model.cloth_self_radius[i] + self.model.cloth_self_radius[j]
        gap0 = state.particle_q[s, i] - state.particle_q[s, j]
        d2 = gap0.dot(gap0)
        if d2 < h * h and d2 > 1e-24:            # only comparisons above: no adjoint work for pairs apart
            gap = state.particle_q[s, i] - state.particle_q[s, j]
            d = ti.sqrt(gap.dot(gap))
            n = gap / d
            ri = self.model.cloth_self_row[i]
            rj = self.model.cloth_self_row[j]
            f = contact_force(d - h, n, state.particle_qd[s, i] - state.particle_qd[s, j],
                              0.5 * (self.model.cloth_self_ke[ri] + self.model.cloth_self_ke[rj]),
                              0.5 * (self.model.cloth_self_kd[ri] + self.model.cloth_self_kd[rj]),
                              0.5 * (self.model.cloth_self_kf[ri] + self.model.cloth_self_kf[rj]),
                              0.5 * (self.model.cloth_self_mu[ri] + self.model.cloth_self_mu[rj]), self.law,
                              # the pair's relative velocity: its reduced mass, dt (1/m_i + 1/m_j)
                              dt_over_mass(self.model, i, self.law) + dt_over_mass(self.model, j, self.law))
            state.particle_f[s, i] += f
            state.particle_f[s, j] -= f

    @ti.func
    def apply_forces(self, state: ti.template(), s: ti.template(), t: ti.template()):
        self.broad.for_each_pair(self, state, s)

    def stability_limits(self, dt=None):
        """Per self-contact vertex: normal and friction modes with its cloth's ke, kd, kf on 1/m_i + 1/m_min
        (m_min: the lightest self-contact vertex of its contact group; pinned vertices have 1/m = 0); with
        damping_integration="implicit", at the step dt [s] (kd, kf unconditionally stable)."""
        m = self.model
        idx = self.vertices
        pm = m.particle_mass.to_numpy().astype(np.float64)[idx]
        w = np.where(pm > 0, 1.0 / np.where(pm > 0, pm, 1.0), 0.0)
        groups = m.particle_contact_group.to_numpy()[idx]
        w_other = np.array([w[(groups == g) | (groups < 0) | (g < 0)].max() for g in groups])
        rows = m.cloth_self_row.to_numpy()[idx]
        k = {n: getattr(m, f"cloth_self_{n}").to_numpy().astype(np.float64)[rows] for n in ("ke", "kd", "kf")}
        wt = w + w_other
        return [contact_row(type(self).__name__, "particle", idx, wt, k["ke"], k["kd"], k["kf"],
                            lambda j: f"self-contact, particle mass {pm[j]:.4g} kg, effective mass "
                                      f"{1 / wt[j]:.4g} kg", implicit_dt=dt if self.law.implicit else None)]


def self_contact_terms(builder, model, cloths) -> list:
    """The `ClothSelfContact` term of the cloths added with self_contact=True (`Cloths.finalize`), with its model
    fields; [] when none has it.  `cloths`: (first particle, vertex count, rest vertices (V, 3), thickness [m],
    params dict) per self-contact cloth."""
    if not cloths:
        return []
    P = model.particle_count
    row = np.full(P, -1, dtype=np.int32)
    radius = np.zeros(P)
    rest = np.zeros((P, 3))
    for r, (start, count, vertices, h, _) in enumerate(cloths):
        row[start:start + count] = r
        radius[start:start + count] = 0.5 * h
        rest[start:start + count] = vertices
    model.add_field("cloth_self_row", ti.i32, (P,), row, param=False)
    model.add_field("cloth_self_radius", float, (P,), radius, param=False)
    model.add_field("cloth_self_rest", ti.types.vector(3, float), (P,), rest, param=False)
    for name in DEFAULT_PARAMS:
        model.add_field(f"cloth_self_{name}", float, (len(cloths),), np.array([c[4][name] for c in cloths]))
    if not hasattr(model, "particle_contact_group"):
        model.add_field("particle_contact_group", ti.i32, (P,), contact_groups(builder, "particles", P), param=False)
    _, capacity = check_broad_phase("grid", getattr(builder, "broad_phase_capacity", None))
    law = getattr(builder, "ground_law", DEFAULT_LAW)
    return [ClothSelfContact(model, law, np.nonzero(row >= 0)[0], capacity)]
