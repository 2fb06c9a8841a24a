"""Fluid MPM materials: only the volume ratio J = det F carries elastic stress, and the return mapping
keeps F = J^(1/3) I (the deviatoric part is forgotten each step, as in PAC-NeRF and the MPM course), so
shear is resisted by viscosity alone, through the velocity gradient C (APIC's affine matrix, [1/s]):

    pressure (both):  P = K (J - 1) cof(F),  Psi = K/2 (J - 1)^2          (K: bulk_modulus [Pa])
    D = dev(sym C) [1/s], shear rate gamma = sqrt(2 D:D)
    mpm_newtonian:  tau_visc = J 2 eta D                                   (eta: viscosity [Pa s])
    mpm_bingham:    tau_visc = J 2 (eta_p + tau_y (1 - exp(-gamma / gamma_0)) / gamma) D
        a Bingham plastic regularised after Papanastasiou (1987): yield_stress tau_y [Pa],
        plastic_viscosity eta_p [Pa s], regularisation rate gamma_0 [1/s] (below it the matter is a
        very viscous fluid of viscosity ~ tau_y / gamma_0 instead of a rigid plug).  The factor
        (1 - exp(-x)) / x is evaluated as a series near 0, so its derivative is finite at rest.
"""
import taichi as ti

from tigradsim.core.linalg import cofactor3, det3
from tigradsim.core.registry import register_material
from tigradsim.physics.mpm_material import MPMMaterial


@ti.func
def deviatoric_rate(C):
    D = 0.5 * (C + C.transpose())
    return D - (D.trace() / 3.0) * ti.Matrix.identity(float, 3)


@ti.func
def keep_volume(F, plastic):
    J = det3(F)
    return ti.pow(ti.max(J, 1e-6), 1.0 / 3.0) * ti.Matrix.identity(float, 3), plastic


class _Fluid(MPMMaterial):
    has_viscosity = True
    has_return_mapping = True

    @classmethod
    def wave_modulus(cls, values):
        return values["bulk_modulus"]

    @ti.func
    def stress(self, F, p):
        return p[1] * (det3(F) - 1.0) * cofactor3(F)

    @ti.func
    def energy(self, F, p):
        return 0.5 * p[1] * (det3(F) - 1.0) ** 2

    @ti.func
    def project(self, F, plastic, p):
        return keep_volume(F, plastic)


@register_material("mpm_newtonian")
class Newtonian(_Fluid):
    params = {"viscosity": 1.0, "bulk_modulus": 1e4}
    nonnegative = ("viscosity",)
    positive = ("bulk_modulus",)

    @ti.func
    def viscous(self, F, C, p):
        return (2.0 * p[0] * det3(F)) * deviatoric_rate(C)


@register_material("mpm_bingham")
class Bingham(_Fluid):
    params = {"plastic_viscosity": 1.0, "bulk_modulus": 1e4, "yield_stress": 10.0, "regularization_rate": 1.0}
    nonnegative = ("plastic_viscosity", "yield_stress")
    positive = ("bulk_modulus", "regularization_rate")

    @ti.func
    def stress(self, F, p):           # the bulk modulus is p[1] here too
        return p[1] * (det3(F) - 1.0) * cofactor3(F)

    @ti.func
    def viscous(self, F, C, p):
        D = deviatoric_rate(C)
        gamma = ti.sqrt(2.0 * D.norm_sqr() + 1e-30)
        x = gamma / p[3]
        # (1 - exp(-x)) / x, by its series below 1e-4 (cancellation, and its derivative at x -> 0)
        ratio = ti.select(x < 1e-4, 1.0 - 0.5 * x + x * x / 6.0, (1.0 - ti.exp(-x)) / ti.max(x, 1e-4))
        eta = p[0] + p[2] * ratio / p[3]
        return (2.0 * eta * det3(F)) * D
