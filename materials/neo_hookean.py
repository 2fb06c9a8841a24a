"""Stable neo-Hookean (Smith, de Goes, Kim 2018), the form Warp and dflex use.

    Psi = mu/2 (Ic - 3) - mu/2 log((Ic + 1) / 4) + lam/2 (J - alpha)^2 - lam/2 (1 - alpha)^2
    alpha = 1 + mu/lam - mu/(4 lam),   Ic = tr(F^T F),   J = det F
    P = mu (1 - 1/(Ic + 1)) F + lam (J - alpha) cof(F)

The constants (log 4 and (1 - alpha)^2) only make Psi(I) = 0; P(I) = 0 holds by the
choice of alpha.  cof(F) = J F^-T is used instead of the inverse, so inverted
elements (J <= 0) give finite stress pushing them back (no NaN).

mu and lam are NOT the small-strain Lame parameters: those are 3/4 mu and
lam - 5/8 mu.  To get Lame parameters (mu_L, lam_L) set mu = 4/3 mu_L and
lam = lam_L + 5/6 mu_L (`tigradsim.core.registry.neo_hookean_from_lame`, or
`NeoHookean.from_lame(mu_L, lam_L)`).  lam must be > 0.
"""
import numpy as np
import taichi as ti

from tigradsim.core.registry import TetMaterial, neo_hookean_from_lame, register_material
from tigradsim.core.linalg import cofactor3, det3


@register_material("neo_hookean")
class NeoHookean(TetMaterial):
    params = {"mu": 1e3, "lam": 1e3}
    nonnegative = ("mu",)    # negative stiffness is not physical (checked at build and by model.set)

    @classmethod
    def from_lame(cls, mu, lam):
        m, l = neo_hookean_from_lame(mu, lam)
        return {"mu": m, "lam": l}

    @classmethod
    def check_params(cls, values):
        if np.any(values["lam"] <= 0):
            raise ValueError("material 'neo_hookean': lam must be > 0 (alpha = 1 + 3 mu / (4 lam))")

    @ti.func
    def stress(self, F, p):
        mu, lam = p[0], p[1]
        alpha = 1.0 + 0.75 * mu / lam
        Ic = F.norm_sqr()
        J = det3(F)
        return mu * (1.0 - 1.0 / (Ic + 1.0)) * F + lam * (J - alpha) * cofactor3(F)

    @ti.func
    def energy(self, F, p):
        mu, lam = p[0], p[1]
        alpha = 1.0 + 0.75 * mu / lam
        Ic = F.norm_sqr()
        J = det3(F)
        return (0.5 * mu * (Ic - 3.0) - 0.5 * mu * ti.log((Ic + 1.0) * 0.25)
                + 0.5 * lam * ((J - alpha) ** 2 - (1.0 - alpha) ** 2))
