"""Membrane for cloth triangles, the form of Warp's `eval_triangles` (kind "shell").

F = [f1 f2] is the 3x2 deformation gradient from the triangle's 2D rest frame;
J = |f1 x f2| is the area ratio (area preservation term).

    Psi = mu/2 (|F|^2 - 2) + lam/2 (J - alpha)^2 - lam/2 (1 - alpha)^2,  alpha = 1 + mu/lam
    P = mu F + lam (J - alpha) [f2 x n, n x f1],   n = (f1 x f2) / J

(per unit rest area; the constant makes Psi = 0 at rest, alpha makes P = 0 at
rest).  Small-strain (in-plane) Lame parameters: mu and lam - mu; to get
(mu_L, lam_L) set mu = mu_L, lam = lam_L + mu_L (`Membrane.from_lame`).
lam must be > 0.
"""
import numpy as np
import taichi as ti

from tigradsim.core.registry import ShellMaterial, register_material
from tigradsim.exec import lanes


@register_material("membrane")
class Membrane(ShellMaterial):
    params = {"mu": 1e3, "lam": 1e3}
    nonnegative = ("mu",)    # negative stiffness is not physical (checked at build and by model.set)

    @classmethod
    def from_lame(cls, mu, lam):
        return {"mu": float(mu), "lam": float(lam) + float(mu)}

    @classmethod
    def check_params(cls, values):
        if np.any(values["lam"] <= 0):
            raise ValueError("material 'membrane': lam must be > 0 (alpha = 1 + mu / lam)")

    @ti.func
    def stress_columns(self, f1, f2, p):
        mu, lam = p[0], p[1]
        alpha = 1.0 + mu / lam
        n = lanes.cross(f1, f2)
        J = ti.sqrt(lanes.dot(n, n) + 1e-30)  # no NaN gradient for a collapsed triangle
        nh = lanes.scale(n, 1.0 / J)  # one division, not three (each costs ~2 more in the reverse pass)
        c = lam * (J - alpha)
        return lanes.add3(lanes.scale(f1, mu), lanes.scale(lanes.cross(f2, nh), c)), \
            lanes.add3(lanes.scale(f2, mu), lanes.scale(lanes.cross(nh, f1), c))

    @ti.func
    def energy(self, F, p):
        mu, lam = p[0], p[1]
        alpha = 1.0 + mu / lam
        f1 = ti.Vector([F[0, 0], F[1, 0], F[2, 0]])
        f2 = ti.Vector([F[0, 1], F[1, 1], F[2, 1]])
        n = f1.cross(f2)
        J = ti.sqrt(n.dot(n) + 1e-30)
        return 0.5 * mu * (F.norm_sqr() - 2.0) + 0.5 * lam * ((J - alpha) ** 2 - (1.0 - alpha) ** 2)
