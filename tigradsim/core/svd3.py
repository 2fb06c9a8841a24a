"""A differentiable 3x3 singular value decomposition for material plugins (MPM return mappings).

Taichi 1.7.4 cannot differentiate `ti.svd` (its reverse mode rejects the bit operations inside, even on a
value that carries no gradient), so `svd3` computes the factors of a *detached* copy of F with operations
reverse mode accepts (cyclic Jacobi on F^T F, unrolled with `ti.static`), and gives them the analytic
derivative of the SVD (Papadopoulo & Lourakis 2000; Townsend 2016) through a term whose value is ~0:

    dF = F - detach(F),   M = U^T dF V,   d sigma_i = M_ii,
    dU = U Omega_U,  dV = V Omega_V,  for i != j:
        Omega_U_ij = (sigma_j M_ij + sigma_i M_ji) / (sigma_j^2 - sigma_i^2)
        Omega_V_ij = (sigma_i M_ij + sigma_j M_ji) / (sigma_j^2 - sigma_i^2)

Near repeated singular values the denominators vanish, and U, V themselves are not defined there (any
rotation within the repeated pair's plane is an SVD).  `svd3` clamps |sigma_j^2 - sigma_i^2| at `SVD_GAP`
(1e-6, with the sign of the order, as PlasticineLab / Huang et al. 2021 after Townsend): finite, but its
U and V derivatives are not those of anything smooth there.  What a material needs is smooth, though: an
isotropic matrix function G = U diag(g(sigma)) V^T (g permutation-equivariant: a stress, a return
mapping).  Its derivative, in the SVD frame (Lewis 1996; Sendov 2007), is

    U^T dG V = diag(dg) + sum_{i != j} e_i e_j^T [ sym(M)_ij (g_i - g_j) / (sigma_i - sigma_j)
                                                  + skew(M)_ij (g_i + g_j) / (sigma_i + sigma_j) ],
    dg_i = sum_k dg_i/dsigma_k M_kk  (and the derivative in the parameters),

whose divided differences have a limit (dg_i/dsigma_i - dg_i/dsigma_j) as sigma_i -> sigma_j.  `isotropic3`
(F, fn, p) computes G this way, never through U and V: a pair closer than DIVIDED_SPREAD (relative;
1e-5 in float64, 3e-3 in float32) takes (g_i - g_j) / (sigma_i - sigma_j) as fn's central secant over the
pair moved apart to mid -/+ spread/2 (error O(spread^2): ~1e-10 in float64; no cancellation), a wider
pair its plain quotient; |sigma_i + sigma_j| (zero only for an inverted F with sigma_2 = -sigma_3) is
floored at SVD_GAP.  Measured against float64 central differences (tests/test_mpm_plastic.py): F = I,
sigma = (1, 1 + 1e-9, 0.8), (1.3, 0.9, 0.9), and the plastic return mappings through MPM steps, to 1e-5.

`detach(x)` rounds x to a multiple of 2^-40 with `floor` (derivative 0): the factors are those of F to
~1e-12 in float64 (exactly F in float32, where x 2^40 is already an integer).

Convention (the MPM one): U and V are rotations (det +1), sigma sorted decreasing, and sigma_3 < 0 when
det F < 0.
"""
import taichi as ti
from taichi.lang import impl

from .linalg import matmul

DETACH_SCALE = 2.0 ** 40
JACOBI_SWEEPS = 5           # cyclic sweeps of 3 rotations; quadratic convergence: 4 reach float64's floor
SVD_GAP = 1e-6
# isotropic3: a pair of singular values closer than this (relative) takes its divided difference over a
# pair spread to this gap; error O(spread^2) from the secant, O(ulp / spread) from rounding
DIVIDED_SPREAD_F64 = 1e-5
DIVIDED_SPREAD_F32 = 3e-3


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
def _frame(F):
    """The SVD of detach(F) and M = U^T (F - detach(F)) V (value ~0, carrying dF in the SVD frame), and
    sigma carrying its derivative d sigma_i = M_ii (exact, repeated values included)."""
    Fd = detach(F)
    U, sd, V = _svd_values(Fd)
    M = matmul(matmul(U.transpose(), F - Fd), V)
    dsig = ti.Vector([M[0, 0], M[1, 1], M[2, 2]])
    return U, sd, V, M, sd + (dsig - detach(dsig))


@ti.func
def svd3(F):
    """U, sigma (vec3), V with F = U diag(sigma) V^T (module docstring), differentiable in F; the
    derivatives of U and V are clamped where singular values repeat: use `isotropic3` for U diag(g) V^T."""
    U, sd, V, M, sig = _frame(F)
    OU, OV = _omega_matrix(sd, M, 1), _omega_matrix(sd, M, 0)
    dU, dV = matmul(U, OU), matmul(V, OV)
    # each correction minus its detached value: the derivative of the correction, a value within 2^-41
    return U + (dU - detach(dU)), sig, V + (dV - detach(dV))


def _spread() -> float:
    return DIVIDED_SPREAD_F64 if impl.current_cfg().default_fp == ti.f64 else DIVIDED_SPREAD_F32


@ti.func
def _with_pair(s, i: ti.template(), j: ti.template(), si, sj):
    """s (vec3) with entries i, j replaced by si, sj."""
    return ti.Vector([_pick(s, k, i, j, si, sj) for k in ti.static(range(3))])


@ti.func
def _pick(s, k: ti.template(), i: ti.template(), j: ti.template(), si, sj):
    out = s[k]
    if ti.static(k == i):
        out = si
    elif ti.static(k == j):
        out = sj
    return out


@ti.func
def _signed_floor(x, floor):
    return ti.select(x >= 0.0, ti.max(x, floor), ti.min(x, -floor))


@ti.func
def _pair_term(fn: ti.template(), sd, gd, p, M, i: ti.template(), j: ti.template()):
    """Entry (i, j) of the derivative of G in the SVD frame (module docstring), for i != j:
    sym M_ij (g_i - g_j)/(s_i - s_j) + skew M_ij (g_i + g_j)/(s_i + s_j)."""
    out = 0.0
    if ti.static(i != j):
        si, sj = sd[i], sd[j]
        h = ti.static(_spread()) * 0.5 * (ti.abs(si) + ti.abs(sj)) + 1e-30
        gap = si - sj
        near = ti.abs(gap) < h
        mid = 0.5 * (si + sj)
        # a pair closer than h: the divided difference over mid -/+ h/2 (fn is permutation-equivariant,
        # so this is the central secant of g_i - g_j along e_i - e_j: error O(h^2), no cancellation)
        gs = fn(_with_pair(sd, i, j, mid + 0.5 * h, mid - 0.5 * h), p)
        slope = ti.select(near, (gs[i] - gs[j]) / h, (gd[i] - gd[j]) / ti.select(near, 1.0, gap))
        mean = (gd[i] + gd[j]) / _signed_floor(si + sj, SVD_GAP)
        out = 0.5 * (M[i, j] + M[j, i]) * slope + 0.5 * (M[i, j] - M[j, i]) * mean
    return out


@ti.func
def isotropic3(F, fn: ti.template(), p):
    """G = U diag(g) V^T with g = fn(sigma, p), and sigma (vec3, differentiable), for F = U diag(sigma) V^T.

    fn(sigma, p) -> vec3: a permutation-equivariant `ti.func` of the singular values (g_i depends on
    sigma_i and on symmetric functions of sigma, e.g. a return mapping on log(sigma)) and of `p` (passed
    through, e.g. the material's parameter vector).  G is differentiable in F and p, exactly also where
    singular values repeat (module docstring: divided differences instead of the clamped Omega)."""
    U, sd, V, M, sig = _frame(F)
    g = fn(sig, p)                          # its value, and its derivative in sigma (d sigma = diag M) and p
    pd = detach(p)
    gd = fn(sd, pd)                         # the divided differences' values: no derivative needed
    K = ti.Matrix([[_pair_term(fn, sd, gd, pd, M, i, j) for j in ti.static(range(3))] for i in ti.static(range(3))])
    C = matmul(matmul(U, K), V.transpose())
    G = matmul(matmul(U, ti.Matrix([[g[0], 0.0, 0.0], [0.0, g[1], 0.0], [0.0, 0.0, g[2]]])), V.transpose())
    return G + (C - detach(C)), sig
