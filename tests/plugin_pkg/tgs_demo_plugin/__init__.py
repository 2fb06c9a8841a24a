"""Demo material plugin: a polynomial compressible neo-Hookean-like law.

    Psi = c1 (Ic - 3) - 2 c1 (J - 1) + d1 (J - 1)^2
    P   = 2 c1 F + (2 d1 (J - 1) - 2 c1) cof(F)

Small-strain Lame parameters: mu = 2 c1, lam = 2 (d1 - c1).
"""
import taichi as ti

from tigradsim.core.registry import TetMaterial, register_material


@ti.func
def _cof(F):
    c0 = ti.Vector([F[0, 1], F[1, 1], F[2, 1]]).cross(ti.Vector([F[0, 2], F[1, 2], F[2, 2]]))
    c1 = ti.Vector([F[0, 2], F[1, 2], F[2, 2]]).cross(ti.Vector([F[0, 0], F[1, 0], F[2, 0]]))
    c2 = ti.Vector([F[0, 0], F[1, 0], F[2, 0]]).cross(ti.Vector([F[0, 1], F[1, 1], F[2, 1]]))
    return ti.Matrix.cols([c0, c1, c2])


@register_material("demo_plugin")
class DemoPlugin(TetMaterial):
    params = {"c1": 500.0, "d1": 1500.0}

    @classmethod
    def from_lame(cls, mu, lam):
        return {"c1": mu / 2.0, "d1": lam / 2.0 + mu / 2.0}

    @ti.func
    def stress(self, F, p):
        c1, d1 = p[0], p[1]
        J = F.determinant()
        return 2.0 * c1 * F + (2.0 * d1 * (J - 1.0) - 2.0 * c1) * _cof(F)

    @ti.func
    def energy(self, F, p):
        c1, d1 = p[0], p[1]
        J = F.determinant()
        return c1 * (F.norm_sqr() - 3.0) - 2.0 * c1 * (J - 1.0) + d1 * (J - 1.0) ** 2
