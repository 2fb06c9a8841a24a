"""A material class exposed directly as an entry point (not decorated: the registry
registers it under the entry point's name)."""
import taichi as ti

from tigradsim.core.registry import TetMaterial


class PlainHooke(TetMaterial):
    """Linear elasticity with a single required parameter: Psi = k eps:eps."""

    params = {"k": None}
    rotation_invariant = False

    @ti.func
    def stress(self, F, p):
        eps = 0.5 * (F + F.transpose()) - ti.Matrix.identity(float, 3)
        return 2.0 * p[0] * eps

    @ti.func
    def energy(self, F, p):
        eps = 0.5 * (F + F.transpose()) - ti.Matrix.identity(float, 3)
        return p[0] * eps.norm_sqr()
