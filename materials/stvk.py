"""St. Venant-Kirchhoff.

    E = (F^T F - I)/2,   Psi = mu E:E + lam/2 tr(E)^2,   P = F (2 mu E + lam tr(E) I)

mu and lam are the small-strain Lame parameters.  Softens (and can collapse)
under strong compression.
"""
import taichi as ti

from tigradsim.core.registry import TetMaterial, register_material
from tigradsim.core.linalg import matmul


@register_material("stvk")
class StVK(TetMaterial):
    params = {"mu": 1e3, "lam": 1e3}
    nonnegative = ("mu", "lam")    # negative stiffness is not physical (checked at build and by model.set)

    @ti.func
    def stress(self, F, p):
        mu, lam = p[0], p[1]
        I = ti.Matrix.identity(float, 3)
        E = 0.5 * (matmul(F.transpose(), F) - I)
        return matmul(F, 2.0 * mu * E + lam * E.trace() * I)

    @ti.func
    def energy(self, F, p):
        mu, lam = p[0], p[1]
        E = 0.5 * (matmul(F.transpose(), F) - ti.Matrix.identity(float, 3))
        return mu * E.norm_sqr() + 0.5 * lam * E.trace() ** 2
