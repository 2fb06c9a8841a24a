"""A soft body's total mass or mean density as one unknown of a fit.

`SoftMassParam(model, handle)` scales the vertex masses of one soft mesh (the
`SoftMesh` that `SceneBuilder.add_soft_mesh` returns) by one number while keeping their
distribution as built (lumped from a density or a total mass, or the per-vertex masses
given with `node_mass=`):

    particle_mass[start + i] = theta * share_i          quantity = "mass"     (theta in kg)
    particle_mass[start + i] = theta * V * share_i      quantity = "density"  (theta in kg/m^3)

share_i = node_mass_i / sum(node_mass) (`SoftMesh.node_mass`), V the rest volume
(`SoftMesh.volume`); fixed vertices keep mass 0.  Its gradient is the chain rule of the
per-vertex one, dL/dtheta = sum_i dL/dm_i * share_i (* V), checked against finite
differences in float64 (tests/test_soft_mass.py).  The rigid body's counterpart is a
`TiedParam` on its entry of body_mass (`scenes.unknown_params.unknown_params`).
"""
import numpy as np

from ..core.model import has_grad
from .optim import TiedParam

__all__ = ["SoftMassParam", "SOFT_MASS_QUANTITIES"]

SOFT_MASS_QUANTITIES = ("mass", "density")


class SoftMassParam(TiedParam):
    """The total mass [kg] or mean density [kg/m^3] of one soft mesh (module docstring).

    model: a finalized Model whose particle_mass has a gradient (finalize(requires_grad=True)
        or naming "particle_mass").  handle: the mesh's `SoftMesh`.
    quantity: "mass" or "density".  value: the initial value (None: the mesh's as built).
    lower, upper, log_space (default True: masses span decades and stay > 0), lr: as `Param`.
    """

    def __init__(self, model, handle, quantity="mass", value=None, name=None, lower=None, upper=None,
                 log_space=True, lr=None):
        if quantity not in SOFT_MASS_QUANTITIES:
            raise ValueError(f"quantity: expected one of {SOFT_MASS_QUANTITIES}, got {quantity!r}")
        node_mass = getattr(handle, "node_mass", None)
        if node_mass is None:
            raise TypeError(f"handle: expected the SoftMesh that add_soft_mesh returned, got {handle!r}")
        if not has_grad(model.particle_mass):
            raise ValueError("SoftMassParam: particle_mass has no gradient; finalize the model with "
                             "requires_grad=True, or name \"particle_mass\" in SceneBuilder.finalize(requires_grad=...)")
        self.quantity = quantity
        self.handle = handle
        start, count = handle.particle_start, handle.particle_count
        self.indices = np.arange(start, start + count)
        free = model.particle_mass.to_numpy()[self.indices] > 0          # fixed vertices have mass 0
        built = float(np.sum(node_mass))
        scale = handle.volume if quantity == "density" else 1.0
        self.coefficients = np.where(free, np.asarray(node_mass, dtype=np.float64) / built * scale, 0.0)
        if value is None:
            value = built / scale
        if not (np.ndim(value) == 0 and np.isfinite(float(value)) and float(value) > 0):
            raise ValueError(f"value: expected a positive finite {quantity} "
                             f"[{'kg' if quantity == 'mass' else 'kg/m^3'}], got {value!r}")
        field = model.particle_mass
        idx, coef = self.indices, self.coefficients

        def forward(theta):
            values = field.to_numpy().astype(np.float64)
            values[idx] = theta[0] * coef
            return values

        def backward(theta, g):
            return float(np.sum(g[idx] * coef))

        super().__init__([(field, forward, backward)], value=[float(value)],
                         name=name or f"soft_mesh_{handle.index}.{quantity}", lower=lower, upper=upper,
                         log_space=log_space, lr=lr)
