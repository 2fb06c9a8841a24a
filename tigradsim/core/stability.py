"""Stability pre-flight: every force term's explicit-integration limit on dt.

Semi-implicit (symplectic) Euler on one mode x'' = -omega^2 x - gamma x' (stiffness k and
damping c on a mass m: omega^2 = k / m, gamma = c / m) is, with a = (omega dt)^2 and b = gamma dt,
the map (x, dt v) -> [[1 - a, 1 - b], [-a, 1 - b]] (x, dt v), of trace 2 - a - b and determinant
1 - b.  Both eigenvalues lie in the unit disc iff b < 2 and a + 2 b < 4 (Jury's test), that is

    dt < dt_limit = 4 / (gamma + sqrt(gamma^2 + 4 omega^2))

which is 2 / omega without damping and 2 m / c without stiffness.  Past it the forward run
explodes; close to it (omega dt near 2) it may still look fine, because contact forces switch off
as soon as a point leaves the ground, while the linearised dynamics the gradient follows are
unstable and the gradient is wrong by orders of magnitude.  The pre-flight therefore asks for
dt <= SAFETY * dt_limit (SAFETY = 0.5) for the worst element of every term:

* ground contact, per free particle of mass m: omega^2 = ke / m, gamma = kd / m (normal), and
  gamma = kf / m (the viscous friction branch, tangential);
  Under a contact law with damping_integration="implicit" (`tigradsim.physics.contact`: kd and kf applied as
  k_eff = k / (1 + dt k / m), local backward Euler) the kd and kf modes are unconditionally stable
  (gamma_eff dt = x / (1 + x) < 1, x = dt k / m): the friction mode has no limit and the normal row is the
  ke mode's alone, omega dt < sqrt(4 - 2 gamma_eff dt) (Jury's a + 2 b < 4 with b = gamma_eff dt fixed by
  the law, not growing with dt past 1), reported with gamma = gamma_eff at the report's dt;
* static colliders (`tigradsim.physics.colliders`): the same as the ground's, with each collider's ke, kd, kf
  (a row per collider);
* rigid contact, per contact point r (from the centre of mass): the same with the body's
  effective mass there, 1 / m_eff = 1 / m + |r x n|^2_{I^-1} <= 1 / m + |r|^2 / lambda_min(I)
  (the bound over every orientation, so a tumbling body is covered); under damping_integration="implicit" the
  force steps kd and kf at the exact 1 / m_eff along the normal and the slip with the body's mass split over
  its P contact points, k_eff = k / (1 + dt k P / m_eff) (`physics.body_effective_mass`: without the split the
  points touching at once are not stable together), so they are unconditionally stable as a particle's, and the
  row is the ke mode's with gamma_eff dt = x / (1 + P x), x = dt kd w at the bound for w (the largest gamma_eff
  dt, the tightest ke limit); body-body, box-edge and particle-body rows likewise (`contact_row`'s split);
* springs (and cloth anchors): omega^2 = k (1/m_i + 1/m_j), gamma = c (1/m_i + 1/m_j) (the exact
  frequency of the two-particle mode; a pinned particle has 1/m = 0);
* tets: the element stiffness of a plane wave is M V grad N_i . grad N_j with M = lam + 2 mu the
  P-wave modulus (`Material.wave_modulus`) and |grad N_k| = 1 / h_k (h_k the height of vertex k
  over the opposite face).  Per vertex k of lumped mass m_k, Gershgorin's bound on the largest
  eigenvalue of M^-1 K is omega_k^2 = (1 / m_k) sum_e M_e V_e sum_j |grad N_ek . grad N_ej|, exact
  for a uniform chain (where it gives omega = 2 c_p / h, c_p = sqrt(M / rho): the classic
  dt < h / c_p); the damping kd on dF/dt gives gamma_k the same way with kd for M (other damping
  models through the term's `damping_modulus`: 2 kd for Warp's, beta M for Rayleigh's beta);
  an activation a scales the stiffness by (1 + a)^(-2/3);
* cloth membrane: the same per triangle with the rest area A for V and the membrane modulus
  [N/m] (area density instead of density);
* cloth bending: each edge's stiffness is k g g^T with g = dtheta/dx (|dtheta/dx_1| = 1 / h_1,
  the height of the opposite vertex over the edge); Gershgorin per vertex i of mass m_i:
  omega_i^2 = (1 / m_i) sum_edges k |g_i| sum_j |g_j| (at the initial positions); gamma likewise
  with the bending damping.

A force term of a user's own (`tgs.ForceTerm`) can report its limits with a method
`stability_limits(self) -> list[StabilityRow]` (`StabilityRow.from_elements` helps); terms
without a formula are listed in the report as not checked.  Velocity-dependent aerodynamic drag
and lift and per-step external forces have no fixed limit and are not checked.
"""
from __future__ import annotations

import inspect
import math
import warnings
from dataclasses import dataclass
from typing import List, Optional

import numpy as np

from .errors import StabilityError, StabilityWarning

SAFETY = 0.5
# Parameters come from the model's fields, in float32 builds rounded to ~6e-8 relative: a dt exactly at
# the safe fraction (mass 0.02 kg, kf 20 N s/m, dt 1 ms: demos/mass_spring.py) must not read as past it.
ROUNDING = 1e-6


def explicit_dt_limit(omega, gamma):
    """Largest stable dt [s] of semi-implicit Euler on x'' = -omega^2 x - gamma x' (module docstring):
    4 / (gamma + sqrt(gamma^2 + 4 omega^2)); inf where both are 0.  omega, gamma [1/s], arrays."""
    omega = np.asarray(omega, dtype=np.float64)
    gamma = np.asarray(gamma, dtype=np.float64)
    denom = gamma + np.sqrt(gamma ** 2 + 4.0 * omega ** 2)
    with np.errstate(divide="ignore"):
        return np.where(denom > 0, 4.0 / np.where(denom > 0, denom, 1.0), np.inf)


@dataclass
class StabilityRow:
    """The worst element of one force term.

    term: the term's name; element: which element ("particle 12", "tet 40", ...);
    omega [1/s], gamma [1/s]: its frequency and damping rate; dt_limit [s]: explicit_dt_limit;
    detail: the numbers they come from.
    """

    term: str
    element: str
    omega: float
    gamma: float
    dt_limit: float
    detail: str = ""

    def dt_safe(self, safety: float = SAFETY) -> float:
        """The largest dt [s] the pre-flight accepts."""
        return safety * self.dt_limit

    def past_safe(self, dt: float, safety: float = SAFETY) -> bool:
        """Whether dt [s] is past `dt_safe` by more than the rounding of the parameters (ROUNDING)."""
        return dt > self.dt_safe(safety) * (1.0 + ROUNDING)

    @classmethod
    def from_elements(cls, term, what, omega, gamma, detail=None, index=None):
        """The row of the element with the smallest limit among arrays omega, gamma (None if empty).
        `what` names an element kind ("particle"); `index` maps positions to element numbers;
        `detail(k)` describes element k (position k)."""
        omega = np.atleast_1d(np.asarray(omega, dtype=np.float64))
        gamma = np.broadcast_to(np.asarray(gamma, dtype=np.float64), omega.shape)
        if omega.size == 0:
            return None
        lim = explicit_dt_limit(omega, gamma)
        k = int(np.argmin(lim))
        number = int(index[k]) if index is not None else k
        return cls(term, f"{what} {number}", float(omega[k]), float(gamma[k]), float(lim[k]),
                   detail(k) if detail is not None else "")


@dataclass
class StabilityReport:
    """Per-term limits for a time step `dt` [s]; `rows` one per checked term (its worst element),
    `unchecked` the names of terms without a formula."""

    dt: float
    rows: List[StabilityRow]
    unchecked: List[str]
    safety: float = SAFETY

    @property
    def violations(self) -> List[StabilityRow]:
        """Rows whose dt_safe is below dt, worst first."""
        bad = [r for r in self.rows if r.past_safe(self.dt, self.safety)]
        return sorted(bad, key=lambda r: r.dt_limit)

    @property
    def ok(self) -> bool:
        return not self.violations

    @property
    def dt_safe(self) -> float:
        """The largest dt [s] every term accepts (inf without limits)."""
        return min((r.dt_safe(self.safety) for r in self.rows), default=math.inf)

    def message(self) -> str:
        """What a warning or StabilityError says: the worst term, element, values and the safe dt."""
        bad = self.violations
        if not bad:
            return f"dt = {self.dt:g} s is within every force term's stability limit"
        w = bad[0]
        others = "" if len(bad) == 1 else f"; also past the safe fraction: {', '.join(r.term for r in bad[1:])}"
        where = "past" if self.dt >= w.dt_limit else f"{self.dt / w.dt_limit:.2g} of (safe: {self.safety:g} of)"
        return (f"dt = {self.dt:g} s is {where} the explicit-integration limit of {w.term}: at {w.element} "
                f"omega = {w.omega:.4g} 1/s, gamma = {w.gamma:.4g} 1/s ({w.detail}), so omega dt = "
                f"{w.omega * self.dt:.3g} and gamma dt = {w.gamma * self.dt:.3g}; semi-implicit Euler is "
                f"stable up to dt = {w.dt_limit:.4g} s and the largest safe dt (x {self.safety:g}) is "
                f"{self.dt_safe:.4g} s{others}. Near or past the limit the forward run can look fine while "
                "its gradients are wrong by orders of magnitude: use a smaller dt or softer / heavier "
                "elements (tigradsim.core.stability explains the formulas)")

    def __str__(self):
        head = f"stability report for dt = {self.dt:g} s (safety {self.safety:g}):"
        lines = [head, f"  {'term':34s} {'element':18s} {'omega[1/s]':>11s} {'gamma[1/s]':>11s} "
                       f"{'dt_limit[s]':>12s} {'dt/limit':>9s}"]
        for r in sorted(self.rows, key=lambda r: r.dt_limit):
            flag = "  PAST SAFE LIMIT" if r.past_safe(self.dt, self.safety) else ""
            lines.append(f"  {r.term:34s} {r.element:18s} {r.omega:11.4g} {r.gamma:11.4g} {r.dt_limit:12.4g} "
                         f"{self.dt / r.dt_limit:9.3g}{flag}")
        if self.unchecked:
            lines.append(f"  not checked (no formula): {', '.join(self.unchecked)}")
        return "\n".join(lines)


def stability_report(model, dt: float, force_terms=None, safety: float = SAFETY) -> StabilityReport:
    """Every force term's explicit limit at the model's current parameters (module docstring).

    force_terms: the terms to check (default: `model.force_terms`; a Simulator passes its own list).
    """
    rows, unchecked = [], []
    # integrators with a limit of their own (MPM's stress: the grid's CFL bound) report beside the force terms
    limited = [t for t in getattr(model, "integrators", []) if getattr(t, "stability_limits", None) is not None]
    for term in list(model.force_terms if force_terms is None else force_terms) + limited:
        own = getattr(term, "stability_limits", None)
        if own is not None:
            # a term whose limit depends on dt itself (implicit contact damping) takes it as `dt=`
            takes_dt = "dt" in inspect.signature(own).parameters
            found = [r for r in (own(dt=float(dt)) if takes_dt else own()) if r is not None]
        else:
            fn = _FORMULAS.get(type(term).__name__)
            if fn is None:
                if type(term).__name__ not in _NO_LIMIT:
                    unchecked.append(type(term).__name__)
                continue
            found = [r for r in fn(model, term, float(dt)) if r is not None]
        rows.extend(found)
    return StabilityReport(float(dt), rows, unchecked, safety)


def preflight(model, dt: float, force_terms=None, strict: bool = False, safety: float = SAFETY,
              stacklevel: int = 3) -> StabilityReport:
    """Run `stability_report`; past the safe limit warn (StabilityWarning) or, with strict, raise
    StabilityError.  Returns the report."""
    report = stability_report(model, dt, force_terms, safety)
    if not report.ok:
        if strict:
            raise StabilityError(report.message())
        warnings.warn(report.message(), StabilityWarning, stacklevel=stacklevel)
    return report


# ---------------------------------------------------------------------------
# per-term formulas (numpy, float64, the model's current parameter values)

def _inv_mass(model):
    m = model.particle_mass.to_numpy().astype(np.float64)
    with np.errstate(divide="ignore"):
        return np.where(m > 0, 1.0 / np.where(m > 0, m, 1.0), 0.0), m


def _scalar(model, name):
    return float(np.asarray(getattr(model, name).to_numpy(), dtype=np.float64))


def implicit_dt(law, dt):
    """dt [s] where `law` (a `ContactLaw`, or None) steps kd and kf implicitly (`ContactLaw.implicit`) and dt is
    known, else None: the `implicit_dt` of `contact_row`."""
    return dt if dt is not None and law is not None and getattr(law, "implicit", False) else None


def _implicit_dt(term, dt):
    """dt [s] where the term's contact law steps kd and kf implicitly (`ContactLaw.implicit`), else None."""
    return implicit_dt(getattr(term, "law", None), dt)


def _ground(model, term, dt=None):
    w, m = _inv_mass(model)
    free = np.nonzero(w > 0)[0]
    ke, kd, kf = (_scalar(model, f"ground_{k}") for k in ("ke", "kd", "kf"))
    return [_contact_row(type(term).__name__, "particle", free, w[free], ke, kd, kf, lambda k: f"mass {m[free[k]]:.4g} kg",
                         implicit_dt=_implicit_dt(term, dt))]


def _contact_row(name, what, index, w, ke, kd, kf, describe, implicit_dt=None, split=1.0):
    """Normal (ke, kd) and tangential (kf) modes per point of inverse (effective) mass w.  implicit_dt: the step
    [s] of a law with damping_integration="implicit" (module docstring: kd, kf unconditionally stable, the ke
    mode's limit sqrt(4 - 2 gamma_eff dt) / omega), None for explicit.  split: the factor >= 1 the implicit
    coefficient takes w with (a rigid body's mass split over its contact points, `physics.body_effective_mass`:
    kd_eff = kd / (1 + dt kd w split)), per point or one for all."""
    if len(index) == 0:
        return None
    ke, kd, kf = (np.broadcast_to(np.asarray(x, dtype=np.float64), w.shape) for x in (ke, kd, kf))
    if implicit_dt is not None:
        x = implicit_dt * kd * w
        split = np.broadcast_to(np.asarray(split, dtype=np.float64), w.shape)
        b = x / (1.0 + split * x)                     # gamma_eff dt < 1 / split <= 1 for every kd
        omega = np.sqrt(ke * w)
        with np.errstate(divide="ignore"):
            lim = np.where(omega > 0, np.sqrt(4.0 - 2.0 * b) / np.where(omega > 0, omega, 1.0), np.inf)
        k = int(np.argmin(lim))
        return StabilityRow(name, f"{what} {int(index[k])}", float(omega[k]), float(b[k] / implicit_dt), float(lim[k]),
                            f"ke = {ke[k]:.4g} N/m; kd = {kd[k]:.4g}, kf = {kf[k]:.4g} N s/m implicit (unconditionally "
                            f"stable, kd_eff = {kd[k] / (1.0 + split[k] * x[k]):.4g} N s/m at this dt), {describe(k)}")
    omega, gamma_n, gamma_t = np.sqrt(ke * w), kd * w, kf * w
    tangential = explicit_dt_limit(0.0, gamma_t) < explicit_dt_limit(omega, gamma_n)
    omega = np.where(tangential, 0.0, omega)
    gamma = np.where(tangential, gamma_t, gamma_n)

    def detail(k):
        mode = f"friction kf = {kf[k]:.4g} N s/m" if tangential[k] else f"ke = {ke[k]:.4g} N/m, kd = {kd[k]:.4g} N s/m"
        return f"{mode}, {describe(k)}"

    return StabilityRow.from_elements(name, what, omega, gamma, detail, index)


# public: the body-body and particle-body contact terms (physics.body_contact, physics.coupling) report with it
contact_row = _contact_row


def _springs(model, term, dt=None):
    w, _ = _inv_mass(model)
    idx = model.spring_indices.to_numpy()
    wsum = w[idx[:, 0]] + w[idx[:, 1]]
    k = model.spring_stiffness.to_numpy().astype(np.float64)
    c = model.spring_damping.to_numpy().astype(np.float64)
    return [StabilityRow.from_elements(type(term).__name__, "spring", np.sqrt(k * wsum), c * wsum,
                                       lambda e: f"ke = {k[e]:.4g} N/m, kd = {c[e]:.4g} N s/m, "
                                                 f"reduced mass {1 / wsum[e] if wsum[e] > 0 else math.inf:.4g} kg")]


def _anchors(model, term, dt=None):
    w, m = _inv_mass(model)
    i = model.cloth_anchor_indices.to_numpy()
    k = model.cloth_anchor_stiffness.to_numpy().astype(np.float64)
    c = model.cloth_anchor_damping.to_numpy().astype(np.float64)
    return [StabilityRow.from_elements(type(term).__name__, "anchor", np.sqrt(k * w[i]), c * w[i],
                                       lambda a: f"k = {k[a]:.4g} N/m, kd = {c[a]:.4g} N s/m, mass {m[i[a]]:.4g} kg")]


def _material_elements(model, term, prefix, grads, measure, indices):
    """Gershgorin bound per vertex for elements [start, end) of one material group.

    grads (E, n, d): grad N of the element's n vertices [1/m]; measure (E,): V or A; indices (E, n).
    """
    g = term.group
    sl = slice(g.start, g.end)
    table = getattr(model, f"{prefix}_params").to_numpy().astype(np.float64)
    rows = getattr(model, f"{prefix}_param_row").to_numpy()[sl]
    mat = type(g.material)
    values = {k: table[rows, c] for c, k in enumerate(mat.params)}
    modulus = mat.wave_modulus(values)
    name = f"{type(term).__name__}[{mat.name}]"
    if modulus is None:
        return [StabilityRow(name, "-", 0.0, 0.0, math.inf, f"material {mat.name!r} declares no wave_modulus: not checked")]
    modulus = np.broadcast_to(np.asarray(modulus, dtype=np.float64), rows.shape)
    damping = table[rows, term.damping_column]
    if prefix == "tet":
        a = np.maximum(model.tet_activation.to_numpy()[sl].astype(np.float64), -0.95)
        modulus = modulus * (1.0 + a) ** (-2.0 / 3.0)
    if hasattr(term, "damping_modulus"):      # the coefficient in [Pa s] of the term's damping model
        damping = term.damping_modulus(damping, modulus)
    gr = grads[sl]
    coupling = np.abs(np.einsum("eid,ejd->eij", gr, gr)).sum(axis=2)          # (E, n): sum_j |gN_i . gN_j|
    w, m = _inv_mass(model)
    n = len(m)
    idx = indices[sl]
    K = np.zeros(n)
    C = np.zeros(n)
    np.add.at(K, idx.reshape(-1), (modulus[:, None] * measure[sl][:, None] * coupling).reshape(-1))
    np.add.at(C, idx.reshape(-1), (damping[:, None] * measure[sl][:, None] * coupling).reshape(-1))
    verts = np.unique(idx)
    verts = verts[w[verts] > 0]
    if len(verts) == 0:
        return []
    # the vertex's stiffest adjacent element, to name in the report
    worst_el = {}
    per = (modulus[:, None] * measure[sl][:, None] * coupling)
    for e, (vs, ks) in enumerate(zip(idx, per)):
        for v, kv in zip(vs, ks):
            if kv > worst_el.get(v, (-1.0, 0))[0]:
                worst_el[v] = (kv, e + g.start)
    heights = 1.0 / np.sqrt(np.max(np.einsum("eid,eid->ei", gr, gr), axis=1))      # shortest height per element
    unit = "Pa" if prefix == "tet" else "N/m"

    def detail(k):
        v = verts[k]
        e = worst_el[v][1]
        return (f"{'tet' if prefix == 'tet' else 'triangle'} {e}: modulus lam + 2 mu = {modulus[e - g.start]:.4g} {unit}, "
                f"damping {damping[e - g.start]:.4g}, shortest height {heights[e - g.start]:.4g} m; "
                f"vertex mass {m[v]:.4g} kg")

    return [StabilityRow.from_elements(name, "particle", np.sqrt(K[verts] * w[verts]), C[verts] * w[verts],
                                       detail, verts)]


def _tets(model, term, dt=None):
    Dm_inv = model.tet_Dm_inv.to_numpy().astype(np.float64)          # rows k = grad N_{k+1}
    grads = np.concatenate([-Dm_inv.sum(axis=1, keepdims=True), Dm_inv], axis=1)       # (E, 4, 3)
    vol = model.tet_volume.to_numpy().astype(np.float64)
    return _material_elements(model, term, "tet", grads, vol, model.tet_indices.to_numpy())


def _membrane(model, term, dt=None):
    B = model.cloth_rest_inv.to_numpy().astype(np.float64)            # 2x2 Dm^-1: rows = grad N_1, grad N_2
    grads = np.concatenate([-B.sum(axis=1, keepdims=True), B], axis=1)                  # (T, 3, 2)
    area = model.cloth_area.to_numpy().astype(np.float64)
    return _material_elements(model, term, "cloth", grads, area, model.cloth_indices.to_numpy())


def _bending(model, term, dt=None):
    w, m = _inv_mass(model)
    q = model.cloth_bend_indices.to_numpy()
    x = model.particle_q0.to_numpy().astype(np.float64)
    x1, x2, x3, x4 = (x[q[:, k]] for k in range(4))
    edge = np.linalg.norm(x4 - x3, axis=1)
    c1 = np.cross(x3 - x1, x4 - x1)
    c2 = np.cross(x4 - x2, x3 - x2)
    n1 = np.sum(c1 ** 2, axis=1)                                       # (2 area of face 1)^2
    n2 = np.sum(c2 ** 2, axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        # dtheta/dx_i of Bridson et al. 2003, as the kernel computes them
        e_hat = (x4 - x3) / edge[:, None]
        a1, a2 = c1 / n1[:, None], c2 / n2[:, None]
        g = np.stack([a1 * edge[:, None], a2 * edge[:, None],
                      a1 * np.sum((x1 - x4) * e_hat, 1)[:, None] + a2 * np.sum((x2 - x4) * e_hat, 1)[:, None],
                      a1 * np.sum((x3 - x1) * e_hat, 1)[:, None] + a2 * np.sum((x3 - x2) * e_hat, 1)[:, None]], 1)
    norms = np.nan_to_num(np.linalg.norm(g, axis=2), nan=0.0, posinf=0.0)          # (E, 4)
    coupling = norms * norms.sum(axis=1, keepdims=True)                  # |g_i| sum_j |g_j| >= sum_j |g_i . g_j|
    r = model.cloth_bend_row.to_numpy()
    k = model.cloth_bending_stiffness.to_numpy().astype(np.float64)[r]
    c = model.cloth_bending_damping.to_numpy().astype(np.float64)[r]
    K = np.zeros(len(m))
    C = np.zeros(len(m))
    np.add.at(K, q.reshape(-1), (k[:, None] * coupling).reshape(-1))
    np.add.at(C, q.reshape(-1), (c[:, None] * coupling).reshape(-1))
    verts = np.unique(q)
    verts = verts[w[verts] > 0]
    return [StabilityRow.from_elements(type(term).__name__, "particle", np.sqrt(K[verts] * w[verts]), C[verts] * w[verts],
                                       lambda j: f"sum over its bending edges of k |dtheta/dx_i| sum_j |dtheta/dx_j| = "
                                                 f"{K[verts[j]]:.4g} N/m, vertex mass {m[verts[j]]:.4g} kg", verts)]


def body_point_counts(model) -> np.ndarray:
    """(B,) each rigid body's contact point count: the mass split of implicit damping
    (`physics.body_effective_mass`)."""
    return model.body_contact_point_count.to_numpy().astype(np.float64)


def _contact_point_inv_mass(model):
    """Per contact point: its body, the bound on its inverse effective mass (module docstring), the body
    masses and |r|^2."""
    mass = model.body_mass.to_numpy().astype(np.float64)
    inertia = model.body_inertia.to_numpy().astype(np.float64) * mass[:, None, None]
    lam_min = np.array([np.linalg.eigvalsh(0.5 * (I + I.T)).min() for I in inertia])
    body = model.contact_body.to_numpy()
    r2 = np.sum(model.contact_point.to_numpy().astype(np.float64) ** 2, axis=1)
    return body, 1.0 / mass[body] + r2 / lam_min[body], mass, r2


def _rigid_contact(model, term, dt=None):
    body, w, mass, r2 = _contact_point_inv_mass(model)
    ke, kd, kf = (getattr(model, f"body_{k}").to_numpy().astype(np.float64)[body] for k in ("ke", "kd", "kf"))
    return [_contact_row(type(term).__name__, "contact point", np.arange(len(body)), w, ke, kd, kf,
                         lambda c: f"body {body[c]} of mass {mass[body[c]]:.4g} kg, effective mass "
                                   f"{1 / w[c]:.4g} kg at |r| = {math.sqrt(r2[c]):.4g} m",
                         implicit_dt=_implicit_dt(term, dt), split=body_point_counts(model)[body])]


def _collider_params(model, c):
    return [float(model.get(f"collider_{k}")[c]) for k in ("ke", "kd", "kf")]


def _particle_colliders(model, term, dt=None):
    """As the ground's, with each collider's ke, kd, kf (one row per collider of the term)."""
    w, m = _inv_mass(model)
    free = np.nonzero(w > 0)[0]
    return [_contact_row(f"{type(term).__name__}[collider {c}]", "particle", free, w[free], *_collider_params(model, c),
                         lambda k: f"mass {m[free[k]]:.4g} kg", implicit_dt=_implicit_dt(term, dt))
            for c in term.member_ids]


def _rigid_colliders(model, term, dt=None):
    """As the rigid ground contact's, with each collider's ke, kd, kf (one row per collider of the term)."""
    body, w, mass, r2 = _contact_point_inv_mass(model)
    return [_contact_row(f"{type(term).__name__}[collider {c}]", "contact point", np.arange(len(body)), w,
                         *_collider_params(model, c),
                         lambda p: f"body {body[p]} of mass {mass[body[p]]:.4g} kg, effective mass "
                                   f"{1 / w[p]:.4g} kg at |r| = {math.sqrt(r2[p]):.4g} m",
                         implicit_dt=_implicit_dt(term, dt), split=body_point_counts(model)[body])
            for c in term.member_ids]


_FORMULAS = {
    "ParticleGroundContact": _ground,
    "SpringForces": _springs,
    "TetForces": _tets,
    "ClothMembraneForces": _membrane,
    "ClothBendingForces": _bending,
    "ClothAnchorForces": _anchors,
    "RigidGroundContact": _rigid_contact,
    "ParticleColliderContact": _particle_colliders,
    "RigidColliderContact": _rigid_colliders,
}
# Terms with no stiffness or damping of their own (known loads).
_NO_LIMIT = {"ExternalParticleForce", "BodyExternalForce"}
