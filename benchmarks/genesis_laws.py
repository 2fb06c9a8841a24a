"""Genesis 1.4.5's two plastic MPM laws and its viscous liquid written as tigradsim user materials (registered like
any MPM material), so that benchmarks/vs_genesis.py and tests/test_mpm_vs_genesis.py can set the laws equal and
see whether what is left between the engines is only rounding.  Written from the formulas of Genesis's genesis/engine/materials/MPM/
elasto_plastic.py and sand.py (facts: which stress, which clamp, which history), in tigradsim's conventions
(`stress` is the first Piola-Kirchhoff P, the kernel takes tau = P F^T; `project` maps the trial F).

  genesis_von_mises  (Genesis MPM.ElastoPlastic(use_von_mises=True)): the fixed-corotated stress
      (tau = 2 mu (F - R) F^T + lam J (J - 1) I, as tigradsim's mpm_fixed_corotated) and the von Mises return
      mapping of the Hencky strain of max(sigma, 0.05): where |dev eps| > yield / (2 mu), dev eps is scaled back
      to that radius; otherwise F is kept as it is (not rebuilt from the clamped sigma).
  genesis_sand       (Genesis MPM.Sand): tigradsim's Hencky StVK stress and Drucker-Prager projection with
      Genesis's volume correction: `plastic` holds Jp, the log-volume gained in tension, added to the next
      step's trace (tr = sum log max(|sigma|, 1e-4) + Jp): in tension (tr >= 0) F = U V^T and Jp = tr; otherwise
      Jp = 0 and eps -= max(dgamma, 0) / |eps - tr/3| (eps - tr/3), dgamma = |eps - tr/3| +
      (3 lam + 2 mu) / (2 mu) tr alpha.  (eps - tr/3 with Jp in tr, as Genesis writes it.)
  genesis_liquid     (Genesis MPM.Liquid(viscous=True, mu=mu_G, lam=lam_G)): Genesis resets F to J^(1/3) I after
      every substep and takes the fixed-corotated Kirchhoff stress of the one-substep trial F_t = (I + dt C) F_n:
          tau = 2 mu_G (F_t - R(F_t)) F_t^T + lam_G J (J - 1) I,   J = det F_t,  R the polar rotation,
      with C the velocity gradient of the step before (APIC's C).  tigradsim's kernel sees the projected
      F = J^(1/3) I of that same trial (its F update comes at the end of the step before, with the same C), so
      the trial is rebuilt exactly: F_t = (I + dt C) (J / det(I + dt C))^(1/3).  Parameters: viscosity eta
      [Pa s], bulk_modulus K [Pa] and time_step dt [s] (known: the substep of the run, which the rebuilt F_t
      needs), taken to Genesis's as the footage does (benchmarks/genesis_pacnerf_runner.py): mu_G = eta / dt,
      lam_G = K - 2 eta / (3 dt), a Newtonian fluid (eta, K) to first order in dt and J - 1.  What it adds to
      tigradsim's mpm_newtonian (tau = K J (J - 1) I + 2 eta J dev(sym C)), for F_t = a (I + dt C):
      2 eta a^2 sym(C) + 2 (eta / dt) a (a - 1) I - 2 eta / (3 dt) J (J - 1) I + ..., i.e. the same viscous and
      bulk terms plus what is of order dt |C| and (J - 1) beside them (benchmarks/vs_genesis.py measures it).
The norms are sqrt(x . x + 1e-15) (Genesis's `norm(gs.EPS)` in float64).  These are here to check the engines,
not offered as library materials (genesis_liquid has a float64 gradient test, tests/test_mpm_vs_genesis.py, since a
fit may use it).
"""
import math

import taichi as ti

from tigradsim.core.linalg import cofactor3, det3, polar_rotation
from tigradsim.core.registry import register_material
from tigradsim.core.svd3 import svd3
from tigradsim.materials.mpm_fluid import keep_volume
from tigradsim.materials.mpm_plastic import DruckerPrager
from tigradsim.physics.mpm_material import MPMMaterial, check_young_poisson, lame

NORM_EPS = 1e-15


@ti.func
def _diag(U, d, V):
    """U diag(d) V^T: F rebuilt from its singular vectors and new singular values."""
    return U @ ti.Matrix([[d[0], 0.0, 0.0], [0.0, d[1], 0.0], [0.0, 0.0, d[2]]]) @ V.transpose()


@register_material("genesis_von_mises", override=True)
class GenesisVonMises(MPMMaterial):
    params = {"E": 1e4, "nu": 0.3, "yield_stress": 1e3}
    positive = ("yield_stress",)
    has_return_mapping = True

    @classmethod
    def check_params(cls, values):
        check_young_poisson(cls.name, values)

    @ti.func
    def stress(self, F, p):
        mu, lam = lame(p[0], p[1])
        return 2.0 * mu * (F - polar_rotation(F)) + lam * (det3(F) - 1.0) * cofactor3(F)

    @ti.func
    def project(self, F, plastic, p):
        mu, lam = lame(p[0], p[1])
        U, sig, V = svd3(F)
        eps = ti.log(ti.max(sig, 0.05))
        dev = eps - eps.sum() / 3.0
        size = ti.sqrt(dev.dot(dev) + NORM_EPS)
        excess = size - p[2] / (2.0 * mu)
        F1 = _diag(U, ti.exp(eps - (excess / size) * dev), V)
        return ti.select(excess > 0.0, F1, F), plastic + ti.max(excess, 0.0)


@register_material("genesis_sand", override=True)
class GenesisSand(DruckerPrager):
    params = {"E": 1e4, "nu": 0.3, "friction_angle": 30.0}

    @ti.func
    def project(self, F, plastic, p):
        mu, lam = lame(p[0], p[1])
        s = ti.sin(p[2] * (math.pi / 180.0))
        alpha = ti.sqrt(2.0 / 3.0) * 2.0 * s / (3.0 - s)
        U, sig, V = svd3(F)
        eps = ti.log(ti.max(ti.abs(sig), 1e-4))
        tr = eps.sum() + plastic
        hat = eps - tr / 3.0
        size = ti.sqrt(hat.dot(hat) + NORM_EPS)
        dgamma = size + (3.0 * lam + 2.0 * mu) / (2.0 * mu) * tr * alpha
        eps1 = ti.select(tr >= 0.0, ti.Vector.zero(float, 3), eps - (ti.max(dgamma, 0.0) / size) * hat)
        return _diag(U, ti.exp(eps1), V), ti.select(tr >= 0.0, tr, 0.0)


@register_material("genesis_liquid", override=True)
class GenesisLiquid(MPMMaterial):
    params = {"viscosity": 1.0, "bulk_modulus": 1e4, "time_step": 1e-3}
    nonnegative = ("viscosity",)
    positive = ("bulk_modulus", "time_step")
    has_viscosity = True
    has_return_mapping = True

    @classmethod
    def wave_modulus(cls, values):
        return values["bulk_modulus"]

    @ti.func
    def stress(self, F, p):
        # lam_G (J - 1) cof F, so that P F^T = lam_G J (J - 1) I
        lam = p[1] - 2.0 * p[0] / (3.0 * p[2])
        return lam * (det3(F) - 1.0) * cofactor3(F)

    @ti.func
    def viscous(self, F, C, p):
        mu = p[0] / p[2]
        A = ti.Matrix.identity(float, 3) + p[2] * C
        # the trial F of Genesis's step: F was projected from (I + dt C) F_n, det F_n = det F / det(I + dt C)
        trial = ti.pow(ti.max(det3(F) / det3(A), 1e-6), 1.0 / 3.0) * A
        return 2.0 * mu * (trial - polar_rotation(trial)) @ trial.transpose()

    @ti.func
    def project(self, F, plastic, p):
        # Genesis keeps F = J^(1/3) I between steps, as tigradsim's fluids do
        return keep_volume(F, plastic)
