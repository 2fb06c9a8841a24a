"""Elastoplastic MPM materials on the singular values of F (`tigradsim.core.svd3.isotropic3`, differentiable):
StVK elasticity in Hencky strain eps = log(sigma) (the form PAC-NeRF, PlasticineLab and Klar et al. use),

    Psi = mu |eps|^2 + lam/2 (tr eps)^2,     P = U diag((2 mu eps_i + lam tr eps) / sigma_i) V^T,

with mu, lam from E [Pa], nu, and a return mapping of the trial F = U diag(sigma) V^T after each step:

  mpm_von_mises (plasticine): eps_dev = eps - tr(eps)/3; where |eps_dev| > yield_stress / (2 mu) the
      deviatoric strain is scaled back to that radius:  eps -= (|eps_dev| - yield/(2 mu)) eps_dev/|eps_dev|.
  mpm_drucker_prager (sand, Klar et al. 2016, without hardening): alpha = sqrt(2/3) 2 sin(phi)/(3 - sin(phi))
      with the friction angle phi [degrees]; in tension (tr eps >= 0) eps = 0 (no cohesion); otherwise
      dgamma = |eps_dev| + (3 lam + 2 mu)/(2 mu) tr(eps) alpha, and where dgamma > 0,
      eps -= dgamma eps_dev / |eps_dev|.  `plastic` accumulates the volume change the projection removes
      (sum of log-strain), the history Klar et al.'s hardening would use.
A fitted friction angle belongs to the grid and the time step it was fitted at: explicit MPM sand's motion at a
fixed grid moves with the step, and did not settle as the step shrank.  Measured on the PAC-NeRF sand clip (Genesis's
MPM at grid 32, 1/2400 s, 35 deg; benchmarks/sand_law_check.py, benchmarks/RESULTS.md "The sand clip's -1.6 deg is
the time step"), the fit's objective at grid 32: at 50 substeps a frame 36.5 deg scores better than 35; the fits end
at 35.25 deg at Genesis's 100 and at 33.37 at 200; at 400, 31.5 scores better than 33.37 and 35.  Genesis's own law
(benchmarks/genesis_laws.py: this one plus its volume correction) moves the same way, so footage an MPM made is
fitted at its maker's step and grid; for other footage the fit's [fit] time_step_bias and grid_bias say how far the
estimate moves with them.  The volume correction is the smaller difference: at Genesis's step both laws prefer
35 deg to 33.37.
Each is an isotropic function of F, G = U diag(g(sigma)) V^T, built by `isotropic3` from its g (the
g funcs below): exact derivatives also where singular values repeat (F = I at rest; svd3.py says
how).  Branch-free (select, max): a local stored under a branch costs an AD stack; the yield surface itself
is a kink, where the derivative is one-sided.  sigma is floored at 1e-4 (log of an inverted particle's sigma_3).
"""
import math

import numpy as np
import taichi as ti

from tigradsim.core.registry import register_material
from tigradsim.core.svd3 import isotropic3, svd3
from tigradsim.physics.mpm_material import MPMMaterial, check_young_poisson, lame

SIGMA_FLOOR = 1e-4


@ti.func
def hencky(sig):
    return ti.log(ti.max(sig, SIGMA_FLOOR))


@ti.func
def deviator_norm(eps):
    dev = eps - eps.sum() / 3.0
    return dev, ti.sqrt(dev.dot(dev) + 1e-30)


@ti.func
def hencky_stress_diag(sig, p):
    """The singular values of P: (2 mu eps_i + lam tr eps) / sigma_i, p = (E, nu, ...)."""
    mu, lam = lame(p[0], p[1])
    eps = hencky(sig)
    return (2.0 * mu * eps + lam * eps.sum()) / ti.max(sig, SIGMA_FLOOR)


@ti.func
def von_mises_strain(sig, p):
    """(projected Hencky strain eps1 (vec3), excess |eps_dev| beyond the yield radius), p = (E, nu, yield)."""
    mu, lam = lame(p[0], p[1])
    eps = hencky(sig)
    dev, size = deviator_norm(eps)
    excess = ti.max(size - p[2] / (2.0 * mu), 0.0)
    return eps - (excess / size) * dev, excess


@ti.func
def von_mises_target(sig, p):
    eps1, excess = von_mises_strain(sig, p)
    return ti.exp(eps1)


@ti.func
def drucker_prager_strain(sig, p):
    """(projected Hencky strain eps1 (vec3), tr eps before), p = (E, nu, friction angle [degrees])."""
    mu, lam = lame(p[0], p[1])
    s = ti.sin(p[2] * (math.pi / 180.0))
    alpha = ti.sqrt(2.0 / 3.0) * 2.0 * s / (3.0 - s)
    eps = hencky(sig)
    tr = eps.sum()
    dev, size = deviator_norm(eps)
    dgamma = ti.max(size + (3.0 * lam + 2.0 * mu) / (2.0 * mu) * tr * alpha, 0.0)
    return ti.select(tr >= 0.0, ti.Vector.zero(float, 3), eps - (dgamma / size) * dev), tr


@ti.func
def drucker_prager_target(sig, p):
    eps1, tr = drucker_prager_strain(sig, p)
    return ti.exp(eps1)


class _Hencky(MPMMaterial):
    has_return_mapping = True

    @classmethod
    def check_params(cls, values):
        check_young_poisson(cls.name, values)

    @ti.func
    def stress(self, F, p):
        P, sig = isotropic3(F, hencky_stress_diag, p)
        return P

    @ti.func
    def energy(self, F, p):
        mu, lam = lame(p[0], p[1])
        U, sig, V = svd3(F)
        eps = hencky(sig)
        return mu * eps.dot(eps) + 0.5 * lam * eps.sum() ** 2


@register_material("mpm_von_mises")
class VonMises(_Hencky):
    params = {"E": 1e4, "nu": 0.3, "yield_stress": 1e3}
    positive = ("yield_stress",)

    @ti.func
    def project(self, F, plastic, p):
        Fp, sig = isotropic3(F, von_mises_target, p)
        eps1, excess = von_mises_strain(sig, p)
        return Fp, plastic + excess


@register_material("mpm_drucker_prager")
class DruckerPrager(_Hencky):
    params = {"E": 1e4, "nu": 0.3, "friction_angle": 30.0}

    @classmethod
    def check_params(cls, values):
        check_young_poisson(cls.name, values)
        phi = np.atleast_1d(np.asarray(values["friction_angle"], dtype=np.float64))
        bad = (phi <= 0) | (phi >= 90)
        if np.any(bad):
            raise ValueError(f"material {cls.name!r}: parameter 'friction_angle' (degrees) must lie in (0, 90), "
                             f"got {phi[np.argmax(bad)]:g}")

    @ti.func
    def project(self, F, plastic, p):
        Fp, sig = isotropic3(F, drucker_prager_target, p)
        eps1, tr = drucker_prager_strain(sig, p)
        return Fp, plastic + tr - eps1.sum()
