"""St. Venant-Kirchhoff membrane for cloth triangles (kind "shell").

    E = (F^T F - I2)/2 (2x2 Green strain),  Psi = mu E:E + lam/2 tr(E)^2,
    P = F (2 mu E + lam tr(E) I2)            (3x2, per unit rest area)

mu and lam are the small-strain in-plane Lame parameters.
"""
import taichi as ti

from tigradsim.core.linalg import matmul
from tigradsim.core.registry import ShellMaterial, register_material
from tigradsim.exec import lanes


@register_material("stvk_membrane")
class StVKMembrane(ShellMaterial):
    params = {"mu": 1e3, "lam": 1e3}
    nonnegative = ("mu", "lam")    # negative stiffness is not physical (checked at build and by model.set)

    @ti.func
    def stress_columns(self, f1, f2, p):
        mu, lam = p[0], p[1]
        e11 = 0.5 * (lanes.dot(f1, f1) - 1.0)        # E = (F^T F - I) / 2, entry by entry
        e12 = 0.5 * lanes.dot(f1, f2)
        e22 = 0.5 * (lanes.dot(f2, f2) - 1.0)
        t = lam * (e11 + e22)
        s11 = 2.0 * mu * e11 + t                      # S = 2 mu E + lam tr(E) I, P = F S
        s12 = 2.0 * mu * e12
        s22 = 2.0 * mu * e22 + t
        return lanes.add3(lanes.scale(f1, s11), lanes.scale(f2, s12)), lanes.add3(lanes.scale(f1, s12), lanes.scale(f2, s22))

    @ti.func
    def energy(self, F, p):
        mu, lam = p[0], p[1]
        E = 0.5 * (matmul(F.transpose(), F) - ti.Matrix.identity(float, 2))
        return mu * E.norm_sqr() + 0.5 * lam * E.trace() ** 2
