"""The effective mass of a rigid body's contact point along a direction: what damping_integration="implicit"
steps a rigid contact's kd and kf with (`tigradsim.physics.contact`, module docstring).

A force f = -k (d . v) d at the arm r from a body's centre of mass (world frame) changes the point's velocity
along the unit direction d at the rate

    d(d . v)/dt = -k (d . v) w(r, d),      w(r, d) = 1 / m + (r x d)^T I_world^-1 (r x d)   [1/kg]

(I_world = R I_body R^T, I_body = body_mass x body_inertia about the centre of mass), so the contact point alone
is a point of mass 1 / w along d.  w depends on the body's orientation (through R) and on the direction: the
normal n for kd, the slip direction v_t / |v_t| for kf (the friction force is -k_t v_t, along the slip).

Mass splitting.  A body touches through several points at once (a box on the ground: 4 corners), and their
dampers act on the same body: backward Euler per point at 1 / w is then NOT unconditionally stable for the body's
modes.  As k -> inf, dt k_eff w -> 1 per point, and the step multiplies a mode's velocity by 1 - (the sum of the
points' shares of it): a 5 cm cube's spin on its 4 bottom corners by 1 - 2.18 (it flips sign and grows, held only
by the Coulomb cap; measured: a 50 g cube with kf = 100 N s/m at 960 steps/s chatters as the explicit step does),
and a thin stick's pitch on its 4 bottom corners by 1 - 2.18 under kd alone.  So each point takes its body's mass
split over the body's P contact points (Tonge, Benevolenski and Voroshilov, "Mass splitting for jitter-free
parallel rigid body simulation", SIGGRAPH 2012): w_split = P w, and k_eff = k / (1 + dt k w_split).  Then, with
D the dampers' matrix (each touching contact's normal damper kd and slip damper kf, rank one each, c_i = dt k_eff,i,
u_i = M^-1/2 J_i^T), Cauchy-Schwarz gives y^T dt M^-1/2 D M^-1/2 y = sum_i c_i (u_i . y)^2 <= sum_i c_i w_split,i
(|y_a|^2 / P_a + |y_b|^2 / P_b) < sum_bodies |y_b|^2 N_b / P_b, N_b the dampers on body b: every mode of the body
loses less than its whole velocity in a step (no overshoot) while N_b <= P_b (a box resting on 4 of its 8 corners:
4 normal + 4 slip dampers), and less than twice it (Jury's damping limit) while N_b < 2 P_b (the box on the ground
under another box).  The price: when fewer points touch than P, k_eff is smaller than it need be (kd_eff =
k / (1 + 8 x) on a box's 4 resting corners), the same physics as dt -> 0.  A body with many contact points (a
mesh's vertices) gets a small share each: give it `contact_points` where that matters.

A pair of bodies a, b touching at one point: w = P_a w_a(r_a, d) + P_b w_b(r_b, d) (the relative velocity's rate
is the sum; a static collider or the ground adds nothing); a particle i against a body: 1 / m_i + P_b w_b (a
particle usually touches one body at a time: its own mass is not split).

Every quantity is differentiable (the body's pose, the point's arm and velocity, mass and body_inertia), so the
Tape follows k_eff.  The slip direction is v_t / sqrt(|v_t|^2 + FRICTION_EPS) (`contact.FRICTION_EPS`): it
tends to 0 below ~1e-6 m/s, where w_t -> 1 / m, and the friction force -k_t v_t itself vanishes there.
Explicit laws get 0 for dt w (compile time: the explicit kernels read none of it).
"""

import taichi as ti

from .contact import FRICTION_EPS, dt_over_mass
from .rigid_pose import quat_rotate_inv


@ti.func
def inverse_mass_along(model: ti.template(), b, rot, r, d):
    """w = 1 / m + (r x d)^T I_world^-1 (r x d) [1/kg] of body b's point at the arm r [m] (world frame) along the
    direction d (world, unit for the true effective mass); rot: the body's unit quaternion (x, y, z, w).  Not
    split (`split_inverse_mass_along`)."""
    mass = model.body_mass[b]
    inertia = model.body_inertia[b] * mass
    u = quat_rotate_inv(rot, r.cross(d))                 # r x d in the body frame, where the inertia is constant
    c0 = ti.Vector([inertia[0, 0], inertia[1, 0], inertia[2, 0]])
    c1 = ti.Vector([inertia[0, 1], inertia[1, 1], inertia[2, 1]])
    c2 = ti.Vector([inertia[0, 2], inertia[1, 2], inertia[2, 2]])
    # I^-1 u by the rows of the adjugate (the columns' cross products) over det I, as `rigid.RigidIntegrator`
    # solves with J: no general inverse in the forward or the reverse pass
    r0 = c1.cross(c2)
    solved = ti.Vector([r0.dot(u), c2.cross(c0).dot(u), c0.cross(c1).dot(u)]) / c0.dot(r0)
    return 1.0 / mass + u.dot(solved)


@ti.func
def split_inverse_mass_along(model: ti.template(), b, rot, r, d):
    """P_b w [1/kg]: `inverse_mass_along` with body b's mass split over its P_b contact points (module
    docstring)."""
    return model.body_contact_point_count[b] * inverse_mass_along(model, b, rot, r, d)


@ti.func
def slip_direction(n, v):
    """The unit slip direction v_t / |v_t| of a velocity v against the unit normal n (0 as v_t -> 0; module
    docstring)."""
    vt = v - n * v.dot(n)
    return vt / ti.sqrt(vt.dot(vt) + FRICTION_EPS)


@ti.func
def body_point_dt_inverse_masses(model: ti.template(), b, rot, r, n, v, law: ti.template()):
    """(dt w_n, dt w_t) [s/kg] of body b's contact point at the arm r against a static surface of unit normal n,
    v the point's velocity: dt times the split inverse effective masses along n (for kd) and along the slip (for
    kf), dt the Simulator's step (`model.step_dt`); (0, 0) for an explicit law (`contact.contact_force_along`)."""
    if ti.static(law.implicit):
        dt = model.step_dt[None]
        return (dt * split_inverse_mass_along(model, b, rot, r, n),
                dt * split_inverse_mass_along(model, b, rot, r, slip_direction(n, v)))
    else:
        return 0.0, 0.0


@ti.func
def body_pair_dt_inverse_masses(model: ti.template(), a, rot_a, r_a, b, rot_b, r_b, n, v, law: ti.template()):
    """(dt w_n, dt w_t) [s/kg] of the point where body a (arm r_a) touches body b (arm r_b), v the relative
    velocity: the two bodies' split inverse effective masses summed along n and along the slip; (0, 0) explicitly."""
    if ti.static(law.implicit):
        dt = model.step_dt[None]
        t = slip_direction(n, v)
        return (dt * (split_inverse_mass_along(model, a, rot_a, r_a, n)
                      + split_inverse_mass_along(model, b, rot_b, r_b, n)),
                dt * (split_inverse_mass_along(model, a, rot_a, r_a, t)
                      + split_inverse_mass_along(model, b, rot_b, r_b, t)))
    else:
        return 0.0, 0.0


@ti.func
def particle_body_dt_inverse_masses(model: ti.template(), i, b, rot, r_b, n, v, law: ti.template()):
    """(dt w_n, dt w_t) [s/kg] of particle i touching body b (arm r_b), v the relative velocity: dt / m_i (0 for a
    pinned particle, `contact.dt_over_mass`) plus the body's split inverse effective mass along n and along the slip;
    (0, 0) explicitly."""
    if ti.static(law.implicit):
        dt = model.step_dt[None]
        particle = dt_over_mass(model, i, law)
        return (particle + dt * split_inverse_mass_along(model, b, rot, r_b, n),
                particle + dt * split_inverse_mass_along(model, b, rot, r_b, slip_direction(n, v)))
    else:
        return 0.0, 0.0
