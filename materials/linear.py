"""Linear elasticity (small strain; not rotation invariant).

    eps = (F + F^T)/2 - I,   Psi = mu eps:eps + lam/2 tr(eps)^2,   P = 2 mu eps + lam tr(eps) I
"""
import taichi as ti

from tigradsim.core.registry import TetMaterial, register_material


@register_material("linear")
class LinearElastic(TetMaterial):
    params = {"mu": 1e3, "lam": 1e3}
    nonnegative = ("mu", "lam")    # negative stiffness is not physical (checked at build and by model.set)
    rotation_invariant = False

    @ti.func
    def stress(self, F, p):
        mu, lam = p[0], p[1]
        I = ti.Matrix.identity(float, 3)
        eps = 0.5 * (F + F.transpose()) - I
        return 2.0 * mu * eps + lam * eps.trace() * I

    @ti.func
    def energy(self, F, p):
        mu, lam = p[0], p[1]
        eps = 0.5 * (F + F.transpose()) - ti.Matrix.identity(float, 3)
        return mu * eps.norm_sqr() + 0.5 * lam * eps.trace() ** 2
