"""Penalty ground contact (ground plane y = 0, normal +y), after dflex and Warp.

For a point at height y with radius r and velocity v:
    c  = min(y - r, 0)                         penetration depth (<= 0)
    fe = -ke c                                 elastic normal force
    fd = min(kd max(-v_n, 0), fe)              damping while compressing, at most fe
    fn = fe + fd                               normal force magnitude
    ft = -v_t min(kf, mu fn / |v_t|_eps)       friction: viscous (kf) below the
                                               Coulomb cap, mu fn above it

Why the damping is capped by the elastic force: in dflex and Warp the damping
term kd |v_n| switches on at full strength in the step a point first
penetrates, so the force jumps at touchdown, the loss jumps whenever a
parameter change moves a touchdown to another step, and the gradient of a
bouncing rollout disagrees with finite differences (measured on a box
bounce: d loss / d kd of the wrong sign).  With the cap every term is 0 at
c = 0 and the contact force is continuous in position, velocity and every
parameter; once the penetration is deep enough (ke |c| > kd |v_n|) it is the
dflex force.  The normal force is never attractive (fn >= 0).  The friction cap
makes friction continuous in v_t and differentiable at v_t = 0 (the
regularised norm uses eps = 1e-12 m^2/s^2 under the square root).
"""

import taichi as ti

from .model import StepTerm

FRICTION_EPS = 1e-12


@ti.func
def ground_contact_force(x, v, radius, ke, kd, kf, mu):
    """Force [N] on a point at `x` [m] moving with `v` [m/s] from the ground y = 0."""
    n = ti.Vector([0.0, 1.0, 0.0], dt=float)
    c = ti.min(x.dot(n) - radius, 0.0)
    vn = v.dot(n)
    vt = v - n * vn
    elastic = -ke * c
    fn = elastic + ti.min(kd * ti.max(-vn, 0.0), elastic)
    vt_norm = ti.sqrt(vt.dot(vt) + FRICTION_EPS)
    friction_coeff = ti.min(kf, mu * fn / vt_norm)
    return n * fn - vt * friction_coeff


@ti.data_oriented
class ParticleGroundContact(StepTerm):
    """Ground contact for every particle with the model's ground parameters."""

    @ti.func
    def apply_forces(self, state: ti.template(), s: ti.template(), t: ti.template()):
        ti.loop_config(serialize=self.serial)
        for i in range(self.model.particle_count):
            f = ground_contact_force(state.particle_q[s, i], state.particle_qd[s, i], self.model.particle_radius[i],
                                     self.model.ground_ke[None], self.model.ground_kd[None], self.model.ground_kf[None], self.model.ground_mu[None])
            state.particle_f[s, i] += f
