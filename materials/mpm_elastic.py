"""Elastic MPM materials of Young's modulus E [Pa] and Poisson's ratio nu (-1 < nu < 0.5), with
mu = E / (2 (1 + nu)), lam = E nu / ((1 + nu)(1 - 2 nu)):

  mpm_fixed_corotated (Stomakhin et al. 2012, the MLS-MPM paper's jelly):
      Psi = mu |F - R|^2 + lam/2 (J - 1)^2,   P = 2 mu (F - R) + lam (J - 1) cof(F)
  mpm_neo_hookean (the compressible form of PAC-NeRF and the MPM course):
      Psi = mu/2 (tr(F^T F) - 3) - mu log J + lam/2 (log J)^2,   P = mu (F - F^-T) + lam log J F^-T

R is the polar rotation of F (`tigradsim.core.linalg.polar_rotation`, differentiable), cof(F) = J F^-T.
For neo-Hookean J is floored at 1e-6 (an inverted particle gets a large finite push back, not a NaN).
"""
import taichi as ti

from tigradsim.core.linalg import cofactor3, det3, matmul, polar_rotation
from tigradsim.core.registry import register_material
from tigradsim.physics.mpm_material import MPMMaterial, check_young_poisson, lame

J_FLOOR = 1e-6


class _YoungPoisson(MPMMaterial):
    params = {"E": 1e4, "nu": 0.3}

    @classmethod
    def check_params(cls, values):
        check_young_poisson(cls.name, values)


@register_material("mpm_fixed_corotated")
class FixedCorotated(_YoungPoisson):
    @ti.func
    def stress(self, F, p):
        mu, lam = lame(p[0], p[1])
        R = polar_rotation(F)
        return 2.0 * mu * (F - R) + lam * (det3(F) - 1.0) * cofactor3(F)

    @ti.func
    def energy(self, F, p):
        mu, lam = lame(p[0], p[1])
        R = polar_rotation(F)
        J = det3(F)
        return mu * (F - R).norm_sqr() + 0.5 * lam * (J - 1.0) ** 2


@register_material("mpm_neo_hookean")
class NeoHookeanMPM(_YoungPoisson):
    @ti.func
    def stress(self, F, p):
        mu, lam = lame(p[0], p[1])
        J = det3(F)
        Jc = ti.max(J, J_FLOOR)
        FinvT = cofactor3(F) / Jc
        return mu * (F - FinvT) + lam * ti.log(Jc) * FinvT

    @ti.func
    def energy(self, F, p):
        mu, lam = lame(p[0], p[1])
        logJ = ti.log(ti.max(det3(F), J_FLOOR))
        return 0.5 * mu * (F.norm_sqr() - 3.0) - mu * logJ + 0.5 * lam * logJ * logJ
