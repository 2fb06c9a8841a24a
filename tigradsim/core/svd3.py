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
(1e-6), with the sign of the order (Omega stays antisymmetric).  KNOWN LIMITATION (measured, see
tests/test_mpm_plastic.py): the clamp keeps the derivative finite but not right there.  An isotropic
matrix function G = U diag(g(sigma)) V^T has, off the diagonal of the SVD frame, the divided differences
(g_i - g_j) / (sigma_i - sigma_j) and (g_i + g_j) / (sigma_i + sigma_j); the clamped Omega gives 0 for
the first when g_i = g_j (e.g. d log(S) at F = I loses sym(dF)), and a distorted value when the gap is
below the clamp.  The fix, for the return mappings, is to differentiate G through those divided
differences (with g' where the gap vanishes) rather than through U and V; not done yet.

`detach(x)` rounds x to a multiple of 2^-40 with `floor` (derivative 0): the factors are those of F to
~1e-12 in float64 (exactly F in float32, where x 2^40 is already an integer).

Convention (the MPM one): U and V are rotations (det +1), sigma sorted decreasing, and sigma_3 < 0 when
det F < 0.
"""
import taichi as ti

from .linalg import matmul

DETACH_SCALE = 2.0 ** 40
JACOBI_SWEEPS = 5           # cyclic sweeps of 3 rotations; quadratic convergence: 4 reach float64's floor
SVD_GAP = 1e-6


@ti.func
def detach(x):
    """x (scalar, vector or matrix) to within 2^-41, with derivative 0."""
    return ti.floor(x * DETACH_SCALE + 0.5) * (1.0 / DETACH_SCALE)


@ti.func
def _rotate(A, V, p: ti.template(), q: ti.template()):
    """One Jacobi rotation zeroing A[p, q] of the symmetric A (A <- J^T A J, V <- V J), written out on the
    entries it changes and returned as new matrices: no local is stored twice, so the reverse kernel keeps
    no AD stack (element assignments to one local matrix, repeated over the sweeps, made its compile take
    minutes)."""
    r = ti.static(3 - p - q)
    apq = A[p, q]
    big = ti.abs(apq) > 1e-30
    tau = (A[q, q] - A[p, p]) / (2.0 * ti.select(big, apq, 1e-30))
    t = ti.select(big, ti.select(tau >= 0.0, 1.0, -1.0) / (ti.abs(tau) + ti.sqrt(1.0 + tau * tau)), 0.0)
    c = 1.0 / ti.sqrt(1.0 + t * t)
    s = t * c
    arp = c * A[r, p] - s * A[r, q]
    arq = s * A[r, p] + c * A[r, q]
    app, aqq, arr = A[p, p] - t * apq, A[q, q] + t * apq, A[r, r]
    A1 = ti.Matrix([[_entry(app, aqq, arr, arp, arq, i, j, p, q, r) for j in ti.static(range(3))]
                    for i in ti.static(range(3))])
    V1 = ti.Matrix([[_vcol(V, c, s, k, j, p, q) for j in ti.static(range(3))] for k in ti.static(range(3))])
    return A1, V1


@ti.func
def _entry(app, aqq, arr, arp, arq, i: ti.template(), j: ti.template(), p: ti.template(), q: ti.template(),
           r: ti.template()):
    out = 0.0
    if ti.static(i == j == p):
        out = app
    elif ti.static(i == j == q):
        out = aqq
    elif ti.static(i == j == r):
        out = arr
    elif ti.static((i, j) in ((r, p), (p, r))):
        out = arp
    elif ti.static((i, j) in ((r, q), (q, r))):
        out = arq
    return out


@ti.func
def _vcol(V, c, s, k: ti.template(), j: ti.template(), p: ti.template(), q: ti.template()):
    out = V[k, j]
    if ti.static(j == p):
        out = c * V[k, p] - s * V[k, q]
    elif ti.static(j == q):
        out = s * V[k, p] + c * V[k, q]
    return out


@ti.func
def _sweeps(A, V, n: ti.template()):
    """`n` cyclic Jacobi sweeps, by recursion: each level's locals are its own (stored once)."""
    if ti.static(n == 0):
        return A, V
    else:
        A1, V1 = _rotate(A, V, 0, 1)
        A2, V2 = _rotate(A1, V1, 0, 2)
        A3, V3 = _rotate(A2, V2, 1, 2)
        return _sweeps(A3, V3, n - 1)


@ti.func
def _col(M, j: ti.template()):
    return ti.Vector([M[0, j], M[1, j], M[2, j]])


@ti.func
def _unit(v):
    return v / ti.sqrt(v.dot(v) + 1e-60)


@ti.func
def _swap(la, lb, va, vb):
    swap = la < lb
    return ti.select(swap, lb, la), ti.select(swap, la, lb), ti.select(swap, vb, va), ti.select(swap, va, vb)


@ti.func
def _svd_values(F):
    """U, sigma (vec3), V of F by Jacobi on F^T F (values only; see the module docstring)."""
    A, V = _sweeps(matmul(F.transpose(), F), ti.Matrix.identity(float, 3), JACOBI_SWEEPS)
    # sort decreasing: a network of three compare-swaps
    l0, l1, v0, v1 = _swap(A[0, 0], A[1, 1], _col(V, 0), _col(V, 1))
    m1, l2, w1, v2 = _swap(l1, A[2, 2], v1, _col(V, 2))
    n0, n1, u0v, u1v = _swap(l0, m1, v0, w1)
    return _factors(F, u0v, u1v)


@ti.func
def _factors(F, v0, v1):
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
def _gap(sig, i: ti.template(), j: ti.template()):
    """sigma_j^2 - sigma_i^2, at least SVD_GAP in size, its sign by the order (sigma sorted decreasing):
    negative for i < j, and exactly the negative of the (j, i) value, so Omega stays antisymmetric when
    the singular values are equal."""
    d = sig[j] * sig[j] - sig[i] * sig[i]
    out = 0.0
    if ti.static(i < j):
        out = ti.min(d, -SVD_GAP)
    else:
        out = ti.max(d, SVD_GAP)
    return out


@ti.func
def _omega(sig, M, i: ti.template(), j: ti.template(), left: ti.template()):
    out = 0.0
    if ti.static(i != j):
        d = _gap(sig, i, j)
        if ti.static(left == 1):
            out = (sig[j] * M[i, j] + sig[i] * M[j, i]) / d
        else:
            out = (sig[i] * M[i, j] + sig[j] * M[j, i]) / d
    return out


@ti.func
def _omega_matrix(sig, M, left: ti.template()):
    return ti.Matrix([[0.0, _omega(sig, M, 0, 1, left), _omega(sig, M, 0, 2, left)],
                      [_omega(sig, M, 1, 0, left), 0.0, _omega(sig, M, 1, 2, left)],
                      [_omega(sig, M, 2, 0, left), _omega(sig, M, 2, 1, left), 0.0]])


@ti.func
def svd3(F):
    """U, sigma (vec3), V with F = U diag(sigma) V^T (module docstring), differentiable in F."""
    Fd = detach(F)
    U, sig, V = _svd_values(Fd)
    M = matmul(matmul(U.transpose(), F - Fd), V)       # value ~0; carries dF
    OU, OV = _omega_matrix(sig, M, 1), _omega_matrix(sig, M, 0)
    dU, dV = matmul(U, OU), matmul(V, OV)
    dsig = ti.Vector([M[0, 0], M[1, 1], M[2, 2]])
    # each correction minus its detached value: the derivative of the correction, a value within 2^-41
    return U + (dU - detach(dU)), sig + (dsig - detach(dsig)), V + (dV - detach(dV))
