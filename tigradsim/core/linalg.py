"""Differentiable small-matrix helpers for material plugins (`tigradsim.core.linalg`).

Taichi 1.7.4 cannot differentiate 3x3 `ti.svd` / `ti.polar_decompose`, so the
polar rotation here is a fixed number of scaled Newton iterations (Higham 1986),
unrolled with `ti.static` so that reverse mode differentiates it correctly.
"""
import taichi as ti

from .fastmath import _float64_build

# Iterations of the scaled Newton polar rotation, per float type: the fewest that reach each type's
# rounding floor over stretches 0.01-10, plus one spare (tests/test_materials.py checks them against 12
# iterations); each iteration costs step time and compile time (benchmarks/MEASURED.md, "Moved from the code").
POLAR_ITERS = {"f32": 6, "f64": 7}


def polar_iterations() -> int:
    """Newton iterations `polar_rotation` unrolls in the current build (`POLAR_ITERS`)."""
    return POLAR_ITERS["f64" if _float64_build() else "f32"]


@ti.func
def matmul(a, b):
    """a @ b for small matrices, written out element by element.  Taichi's `@`
    builds each entry in a loop-carried local, which reverse mode spills to its
    AD stack ("Loading variable ... before anything is stored" warnings): the
    reverse kernels then compile many times slower."""
    return ti.Matrix([[_row_col(a, b, i, j) for j in ti.static(range(b.m))] for i in ti.static(range(a.n))])


@ti.func
def matvec(a, x):
    """a @ x for a small matrix and vector, written out (see `matmul`)."""
    return ti.Vector([_row_vec(a, x, i) for i in ti.static(range(a.n))])


@ti.func
def _row_vec(a, x, i: ti.template()):
    r = a[i, 0] * x[0]
    for k in ti.static(range(1, a.m)):
        r = r + a[i, k] * x[k]
    return r


@ti.func
def _row_col(a, b, i: ti.template(), j: ti.template()):
    r = a[i, 0] * b[0, j]
    for k in ti.static(range(1, a.m)):
        r = r + a[i, k] * b[k, j]
    return r


@ti.func
def cofactor3(F):
    """Cofactor matrix cof(F) = det(F) F^-T = d det(F) / dF (no division: safe when det F <= 0)."""
    c0 = ti.Vector([F[0, 1], F[1, 1], F[2, 1]]).cross(ti.Vector([F[0, 2], F[1, 2], F[2, 2]]))
    c1 = ti.Vector([F[0, 2], F[1, 2], F[2, 2]]).cross(ti.Vector([F[0, 0], F[1, 0], F[2, 0]]))
    c2 = ti.Vector([F[0, 0], F[1, 0], F[2, 0]]).cross(ti.Vector([F[0, 1], F[1, 1], F[2, 1]]))
    return ti.Matrix.cols([c0, c1, c2])


@ti.func
def det3(F):
    """det F as a sum of products (differentiable everywhere)."""
    return (F[0, 0] * (F[1, 1] * F[2, 2] - F[1, 2] * F[2, 1])
            - F[0, 1] * (F[1, 0] * F[2, 2] - F[1, 2] * F[2, 0])
            + F[0, 2] * (F[1, 0] * F[2, 1] - F[1, 1] * F[2, 0]))


@ti.func
def polar_rotation(F):
    """Orthogonal factor R of the polar decomposition F = R S (S symmetric positive definite).

    Scaled Newton iteration X <- (g X + X^-T / g) / 2 with g = (|X^-1|_F / |X|_F)^(1/2),
    `polar_iterations()` times (6 in float32, 7 in float64 builds), starting from X = F.
    det R = sign(det F): for an inverted element (det F < 0) R is a reflection.  Differentiable
    (forward and reverse); a singular F (det F = 0 exactly) is guarded against NaN but gives no
    meaningful R.
    """
    X = F
    for _ in ti.static(range(polar_iterations())):
        C = cofactor3(X)
        d = X[0, 0] * C[0, 0] + X[1, 0] * C[1, 0] + X[2, 0] * C[2, 0]
        tiny = 1e-30
        d = ti.select(ti.abs(d) < tiny, tiny, d)
        Y = C / d  # X^-T
        g = ti.sqrt(ti.sqrt(Y.norm_sqr() / (X.norm_sqr() + tiny)))
        X = 0.5 * (g * X + Y / g)
    return X
