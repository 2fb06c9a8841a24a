"""A differentiable 3x3 singular value decomposition for material plugins (MPM return mappings).

Taichi 1.7.4 cannot differentiate `ti.svd` (its reverse mode rejects the bit operations inside, even on a
value that carries no gradient), so `svd3` computes the factors of a *detached* copy of F with operations
reverse mode accepts (cyclic Jacobi on F^T F, unrolled with `ti.static`), and gives them the analytic
derivative of the SVD (Papadopoulo & Lourakis 2000; Townsend 2016) through a term whose value is ~0:

    dF = F - detach(F),   M = U^T dF V,   d sigma_i = M_ii,
    dU = U Omega_U,  dV = V Omega_V,  for i != j:
        Omega_U_ij = (sigma_j M_ij + sigma_i M_ji) / (sigma_j^2 - sigma_i^2)
        Omega_V_ij = (sigma_i M_ij + sigma_j M_ji) / (sigma_j^2 - sigma_i^2)

Near repeated singular values the denominators vanish; as in the differentiable-MPM literature
(PlasticineLab, Huang et al. 2021, after Townsend) |sigma_j^2 - sigma_i^2| is clamped at `SVD_GAP`
(1e-6), keeping the sign.  Where the mapping of a return mapping is isotropic in the repeated pair (as
for von Mises and Drucker-Prager) the terms the clamp distorts cancel in U f(Sigma) V^T.

`detach(x)` rounds x to a multiple of 2^-40 with `floor` (derivative 0): the factors are those of F to
~1e-12 in float64 (exactly F in float32, where x 2^40 is already an integer).

Convention (the MPM one): U and V are rotations (det +1), sigma sorted decreasing, and sigma_3 < 0 when
det F < 0.
"""
import taichi as ti

from .linalg import matmul

DETACH_SCALE = 2.0 ** 40
JACOBI_SWEEPS = 6           # cyclic sweeps of 3 rotations; quadratic convergence: 4 reach float64's floor
SVD_GAP = 1e-6


@ti.func
def detach(x):
    """x (scalar, vector or matrix) to within 2^-41, with derivative 0."""
    return ti.floor(x * DETACH_SCALE + 0.5) * (1.0 / DETACH_SCALE)


@ti.func
def _rotate(A, V, p: ti.template(), q: ti.template()):
    """One Jacobi rotation zeroing A[p, q] of the symmetric A; V accumulates the rotations."""
    apq = A[p, q]
    big = ti.abs(apq) > 1e-30
    tau = (A[q, q] - A[p, p]) / (2.0 * ti.select(big, apq, 1e-30))
    t = ti.select(tau >= 0.0, 1.0, -1.0) / (ti.abs(tau) + ti.sqrt(1.0 + tau * tau))
    t = ti.select(big, t, 0.0)
    c = 1.0 / ti.sqrt(1.0 + t * t)
    s = t * c
    J = ti.Matrix.identity(float, 3)
    J[p, p] = c
    J[q, q] = c
    J[p, q] = s
    J[q, p] = -s
    return matmul(matmul(J.transpose(), A), J), matmul(V, J)


@ti.func
def _col(M, j: ti.template()):
    return ti.Vector([M[0, j], M[1, j], M[2, j]])


@ti.func
def _unit(v):
    return v / ti.sqrt(v.dot(v) + 1e-60)


@ti.func
def _svd_values(F):
    """U, sigma (vec3), V of F by Jacobi on F^T F (values only; see the module docstring)."""
    A = matmul(F.transpose(), F)
    V = ti.Matrix.identity(float, 3)
    for _ in ti.static(range(JACOBI_SWEEPS)):
        A, V = _rotate(A, V, 0, 1)
        A, V = _rotate(A, V, 0, 2)
        A, V = _rotate(A, V, 1, 2)
    lam = ti.Vector([A[0, 0], A[1, 1], A[2, 2]])
    v0, v1, v2 = _col(V, 0), _col(V, 1), _col(V, 2)
    # sort decreasing: a network of three compare-swaps
    for a, b in ti.static([(0, 1), (1, 2), (0, 1)]):
        swap = lam[a] < lam[b]
        la, lb = lam[a], lam[b]
        lam[a], lam[b] = ti.select(swap, lb, la), ti.select(swap, la, lb)
        if ti.static((a, b) == (0, 1)):
            v0, v1 = ti.select(swap, v1, v0), ti.select(swap, v0, v1)
        else:
            v1, v2 = ti.select(swap, v2, v1), ti.select(swap, v1, v2)
    v2 = v0.cross(v1)                                  # det V = +1
    Fv0, Fv1, Fv2 = F @ v0, F @ v1, F @ v2
    u0 = _unit(Fv0)
    w1 = Fv1 - u0.dot(Fv1) * u0
    # a rank-one F leaves w1 ~ 0: any unit vector orthogonal to u0 then
    other = ti.select(ti.abs(u0[0]) < 0.9, ti.Vector([1.0, 0.0, 0.0]), ti.Vector([0.0, 1.0, 0.0]))
    u1 = ti.select(w1.dot(w1) > 1e-40, _unit(w1), _unit(other - u0.dot(other) * u0))
    u2 = u0.cross(u1)
    sigma = ti.Vector([u0.dot(Fv0), u1.dot(Fv1), u2.dot(Fv2)])    # sigma_3 < 0 when det F < 0
    return ti.Matrix.cols([u0, u1, u2]), sigma, ti.Matrix.cols([v0, v1, v2])


@ti.func
def _gap(d):
    return ti.select(d >= 0.0, ti.max(d, SVD_GAP), ti.min(d, -SVD_GAP))


@ti.func
def svd3(F):
    """U, sigma (vec3), V with F = U diag(sigma) V^T (module docstring), differentiable in F."""
    Fd = detach(F)
    U, sig, V = _svd_values(Fd)
    M = matmul(matmul(U.transpose(), F - Fd), V)       # value ~0; carries dF
    OU = ti.Matrix.zero(float, 3, 3)
    OV = ti.Matrix.zero(float, 3, 3)
    for i, j in ti.static(ti.ndrange(3, 3)):
        if ti.static(i != j):
            d = _gap(sig[j] * sig[j] - sig[i] * sig[i])
            OU[i, j] = (sig[j] * M[i, j] + sig[i] * M[j, i]) / d
            OV[i, j] = (sig[i] * M[i, j] + sig[j] * M[j, i]) / d
    dU, dV = matmul(U, OU), matmul(V, OV)
    dsig = ti.Vector([M[0, 0], M[1, 1], M[2, 2]])
    # each correction minus its detached value: the derivative of the correction, a value within 2^-41
    return U + (dU - detach(dU)), sig + (dsig - detach(dsig)), V + (dV - detach(dV))
