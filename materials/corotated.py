"""Corotated linear elasticity.

    F = R S (polar decomposition),   Psi = mu |F - R|^2 + lam/2 tr(R^T F - I)^2
    P = 2 mu (F - R) + lam tr(R^T F - I) R

mu and lam are the small-strain Lame parameters.  R comes from
`tigradsim.core.linalg.polar_rotation` (differentiable scaled Newton
iterations; Taichi cannot differentiate 3x3 ti.svd/ti.polar_decompose).  For an
inverted element R is the orthogonal polar factor with det -1: the stress stays
finite but does not push the element back through inversion (prefer
neo_hookean for large compression).
"""
import taichi as ti

from tigradsim.core.registry import TetMaterial, register_material
from tigradsim.core.linalg import matmul, polar_rotation


@register_material("corotated")
class Corotated(TetMaterial):
    params = {"mu": 1e3, "lam": 1e3}
    nonnegative = ("mu", "lam")    # negative stiffness is not physical (checked at build and by model.set)

    @ti.func
    def stress(self, F, p):
        mu, lam = p[0], p[1]
        R = polar_rotation(F)
        s = matmul(R.transpose(), F).trace() - 3.0
        return 2.0 * mu * (F - R) + lam * s * R

    @ti.func
    def energy(self, F, p):
        mu, lam = p[0], p[1]
        R = polar_rotation(F)
        s = matmul(R.transpose(), F).trace() - 3.0
        return mu * (F - R).norm_sqr() + 0.5 * lam * s * s
