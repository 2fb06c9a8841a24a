"""Material damping of tet elements: the common forms, as named models.

Each model maps the element's damping coefficient c (the last column of `tet_params`,
`damping=` in `add_soft_mesh`), its deformation gradient F, the rate dF/dt (from the
corner velocities, Ds_dot Dm^-1) and the material's parameters p to a first
Piola-Kirchhoff damping stress P_d [Pa], added to the elastic stress (`fem.TetForces`):

"deformation_rate" (the default; tigradsim's form since the start), c in [Pa s]:
    P_d = c dF/dt
    Warp 1.9.1 / Newton 1.8 `eval_tetrahedra` put this same term in their deviatoric
    stress (`dFdt * k_damp`).  It also damps rigid spin (dF/dt = W F is not zero).

"warp", c in [Pa s]: Warp's and Newton's whole `k_damp` (`tet_materials[:, 2]` of
    `ModelBuilder.add_soft_mesh(k_damp=...)` / `add_soft_grid(k_damp=...)`): the term
    above plus a volumetric one along dJ/dx with the same coefficient,
        P_d = c (dF/dt + (dJ/dt) cof F),   dJ/dt = cof F : dF/dt.
    Conversion: c = k_damp (Warp scales its k_mu, k_lambda and k_damp by the rest volume
    inside the kernel, as tigradsim does with V; no other factor).  Its k_mu and k_lambda
    are tigradsim's "neo_hookean" mu and lam (the same stable neo-Hookean, alpha = 1 +
    3 mu / (4 lam)), and its `add_soft_grid` gives every particle the mass density * cell
    volume: `add_soft_mesh(..., node_mass=that)`.

"rayleigh_stiffness", c = beta in [s]: stiffness-proportional (Rayleigh) damping, the
    damping force beta K v of the element's stiffness at rest K, generalised to large
    motion at the stress level on the Green strain rate (as Chrono's ChDamping*Rayleigh
    classes do: `beta [E] e_dot` with [E] the stiffness of the undeformed material), so
    that rigid motion is not damped:
        E_dot = sym(F^T dF/dt),   S_d = beta C0 : E_dot,   P_d = F S_d
    C0 = dP/dF at F = I is the element's own material's tangent at rest (with its current
    parameters, so a fitted mu or lam moves the damping with it); C0 : E_dot is evaluated
    as a central difference of the material's stress at I +- s E_dot, with the step s
    chosen so that |s E_dot| = 1e-3 (relative error ~1e-6 from the step, ~1e-4 from
    float32 rounding; float64 FD tests check the Tape's derivative of exactly this
    expression).  For an isotropic material C0 : E = 2 mu_L E + lam_L tr(E) I, with
    (mu_L, lam_L) its small-strain Lame parameters.
    Conversions: MuJoCo's flexcomp `<elasticity damping=...>` is a stiffness-proportional
    coefficient in seconds (beta = damping, on MuJoCo's own linear element stiffness);
    Abaqus / Ansys / Chrono "beta" (Rayleigh beta_R, in R = alpha M + beta K): beta = beta.
    A modal damping ratio zeta at angular frequency omega: beta = 2 zeta / omega.

"rayleigh_mass", c = alpha in [1/s]: mass-proportional (Rayleigh alpha) damping, a drag on
    every vertex, f_i = -alpha m_i v_i (no stress: P_d = 0; `fem.TetForces` adds the drag at
    the corners, each of a vertex's n_i tets of the mesh adding 1/n_i of it, so the total is
    exact for one alpha per mesh, the share_params default).  It damps rigid motion too.
    Conversions: SOFA's `rayleighMass`, Abaqus / Ansys / Chrono "alpha" (R = alpha M + beta K):
    alpha = alpha; a per-vertex linear damping d [N s/m] (e.g. MuJoCo's joint damping on a
    flex vertex's slider dofs): alpha = d / m_i; a modal damping ratio zeta at angular
    frequency omega: alpha = 2 zeta omega.

A mesh has one damping model and one coefficient (the table's one damping column): the full
Rayleigh alpha M + beta K is not expressible; take the term that dominates at the frequencies
the footage shows (alpha at low ones, beta at high ones).

Prior ranges (`DAMPING_PRIORS`): footage never states a material's damping, so a fit that is not
given it fits the coefficient within a range that spans what soft solids show, per form (the
coefficient's units differ between forms).  Each range is wide on purpose (four to five decades:
it is a search range, not a guess); its geometric centre is where such a fit starts.
  deformation_rate, warp: c in [1e-3, 1e2] Pa s.  c / mu is the material's relaxation time; for
      shear moduli of 1e3-1e5 Pa (gels, foams, rubbers) and relaxation times of 1e-5 to 1e-1 s the
      coefficient lies in this range (Warp's and Newton's examples use k_damp 0 to 10).
  rayleigh_stiffness, beta in [1e-5, 1e-1] s: a damping ratio zeta = beta omega / 2 of 0.3 % to
      30 % at omega ~ 2 pi x 10-100 Hz, the first modes of a hand-sized soft object.
  rayleigh_mass, alpha in [1e-2, 1e2] 1/s: a drag time 1 / alpha from 100 s (none over a clip)
      to 10 ms (an object stopped within a frame or two).
"""
import taichi as ti

from ..core.linalg import cofactor3, matmul

DEFORMATION_RATE, WARP, RAYLEIGH_STIFFNESS, RAYLEIGH_MASS = 0, 1, 2, 3
DAMPING_MODELS = {"deformation_rate": DEFORMATION_RATE, "warp": WARP, "rayleigh_stiffness": RAYLEIGH_STIFFNESS,
                  "rayleigh_mass": RAYLEIGH_MASS}
# how far from the rest state the tangent's central difference reaches (|s E_dot|)
TANGENT_STEP = 1e-3

# each form's search range of its coefficient (module docstring: why these)
DAMPING_PRIORS = {"deformation_rate": (1e-3, 1e2), "warp": (1e-3, 1e2), "rayleigh_stiffness": (1e-5, 1e-1),
                  "rayleigh_mass": (1e-2, 1e2)}
DAMPING_UNITS = {"deformation_rate": "Pa s", "warp": "Pa s", "rayleigh_stiffness": "s", "rayleigh_mass": "1/s"}

__all__ = ["DAMPING_MODELS", "DAMPING_PRIORS", "DAMPING_UNITS", "damping_model_code", "damping_stress"]


def damping_model_code(name) -> int:
    """The integer code of a damping model name; ValueError listing the names for an unknown one."""
    if not isinstance(name, str) or name not in DAMPING_MODELS:
        raise ValueError(f"damping_model: expected one of {', '.join(repr(k) for k in DAMPING_MODELS)}, got {name!r}")
    return DAMPING_MODELS[name]


@ti.func
def damping_stress(model: ti.template(), material: ti.template(), c, F, Fdot, p):
    """P_d [Pa] of damping model `model` (a code, static) for coefficient c, deformation
    gradient F, its rate Fdot [1/s] and the material's parameters p (module docstring)."""
    P = c * Fdot
    if ti.static(model == WARP):
        C = cofactor3(F)
        P += c * (C * Fdot).sum() * C
    elif ti.static(model == RAYLEIGH_STIFFNESS):
        Edot = 0.5 * (matmul(F.transpose(), Fdot) + matmul(Fdot.transpose(), F))
        # the step: |s E_dot| = TANGENT_STEP (a tiny floor keeps s finite at E_dot = 0, where P_d = 0)
        s = TANGENT_STEP / ti.sqrt(Edot.norm_sqr() + 1e-30)
        eye = ti.Matrix.identity(float, 3)
        S = (material.stress(eye + s * Edot, p) - material.stress(eye - s * Edot, p)) / (2.0 * s)
        P = c * matmul(F, S)
    elif ti.static(model == RAYLEIGH_MASS):
        P = ti.Matrix.zero(float, 3, 3)          # a drag on the vertices, not a stress (fem.TetForces)
    return P
