"""The constitutive interface of MPM matter: `MPMMaterial`, a registry material of kind "mpm".

An MPM material registers through `tigradsim.core.registry.register_material` exactly as a tet or
shell material does (the built-ins live in `materials/mpm_*.py`), and supplies, as `@ti.func`s:

  * `stress(self, F, p)`: the first Piola-Kirchhoff stress P(F) [Pa] of its elastic part (3x3), as
    for tets (required by the registry; `energy(self, F, p)` [J/m^3] is optional, and checked
    against it by the material tests when present).
  * `viscous(self, F, C, p)` (only when `has_viscosity = True`): an extra Kirchhoff stress [Pa]
    from the particle's velocity gradient C (3x3 [1/s], APIC's affine matrix), e.g.
    J 2 eta dev(sym C) for a Newtonian fluid.  Default: none.
  * `project(self, F, plastic, p)` (only when `has_return_mapping = True`): the return mapping,
    applied to the trial deformation gradient F = (I + dt C) F_n after each step; returns
    (F_projected, plastic_projected), `plastic` being one scalar of history per particle (e.g. the
    accumulated plastic volume change of sand).  Default: (F, plastic) unchanged.

The MPM kernel (`tigradsim.physics.mpm_terms`) uses the Kirchhoff stress
    tau = P(F) F^T + viscous(F, C, p)
and `p` is the material's parameter vector (`params` order), differentiable per object.
Everything written with the operations of Taichi's reverse mode: no `ti.svd` (its reverse mode is
not supported), use `tigradsim.core.svd3.svd3` where singular values are needed.
"""
import taichi as ti

from ..core.registry import Material


class MPMMaterial(Material):
    """Base of MPM constitutive models (kind "mpm", F 3x3); see the module docstring."""

    kind = "mpm"
    F_shape = (3, 3)
    has_viscosity = False
    has_return_mapping = False

    @ti.func
    def viscous(self, F, C, p):
        """Viscous Kirchhoff stress [Pa] from the velocity gradient C [1/s]; default: none."""
        return ti.Matrix.zero(float, 3, 3)

    @ti.func
    def project(self, F, plastic, p):
        """Return mapping of the trial F; default: elastic (nothing projected)."""
        return F, plastic

    @classmethod
    def wave_modulus(cls, values):
        """P-wave modulus [Pa] at rest (for the time-step check of `tigradsim.physics.mpm`):
        `lame_moduli`'s lam + 2 mu, or the bulk modulus for fluids (override)."""
        mu, lam = cls.lame_moduli(values)
        return lam + 2.0 * mu

    @classmethod
    def lame_moduli(cls, values):
        """(mu, lam) [Pa] of the material at rest, from E, nu (override for other parameters)."""
        from ..core.registry import lame_from_young_poisson
        return lame_from_young_poisson(values["E"], values["nu"])


def check_young_poisson(label, values):
    """The rules of (E, nu) materials: E > 0 and -1 < nu < 0.5 (named, with the value)."""
    import numpy as np
    E = np.atleast_1d(np.asarray(values["E"], dtype=np.float64))
    nu = np.atleast_1d(np.asarray(values["nu"], dtype=np.float64))
    if np.any(E <= 0):
        raise ValueError(f"material {label!r}: parameter 'E' (Young's modulus, Pa) must be > 0, got {E[np.argmax(E <= 0)]:g}")
    bad = (nu <= -1.0) | (nu >= 0.5)
    if np.any(bad):
        raise ValueError(f"material {label!r}: parameter 'nu' (Poisson's ratio) must lie in (-1, 0.5), "
                         f"got {nu[np.argmax(bad)]:g}")


@ti.func
def lame(E, nu):
    """Lame parameters (mu, lam) [Pa] from Young's modulus E [Pa] and Poisson's ratio nu."""
    return E / (2.0 * (1.0 + nu)), E * nu / ((1.0 + nu) * (1.0 - 2.0 * nu))
