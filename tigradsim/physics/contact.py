"""Penalty ground contact (ground plane y = 0, normal +y), after dflex and Warp, with a choice of laws.

For a point at height y with radius r and velocity v (v_n = v.n, v_t = v - n v_n):
    c  = min(y - r, 0)                         penetration depth (<= 0) [m]
    fe = -ke c                                 elastic normal force [N]
    fn = fe + fd                               normal force magnitude [N], fd the damping below
    f  = n fn - k_t v_t                        total force [N], k_t the friction coefficient below [N s/m]

A `ContactLaw` picks the damping fd and the friction coefficient k_t:

damping="capped" (the default):
    fd = min(kd max(-v_n, 0), fe)
  damping only while compressing, at most the elastic force.  Every term is 0 at c = 0, so the
  contact force is continuous in position, velocity and every parameter; once the penetration is
  deep enough (ke |c| > kd |v_n|) it is the dflex/Warp force.  The min is a kink where
  kd |v_n| = ke |c|: a point that starts exactly on the ground (c = 0, v_n = 0) reaches |c| = |v_n| dt
  in its first penetrating step, so with ke dt = kd exactly (e.g. ke 1e4, dt 2e-3, kd 20) it sits on
  the kink there and the loss has two one-sided derivatives in ke (the Tape gives one, central
  differences their mean: 6 % apart on a resting box).  Any other kd or dt, or a start off the ground,
  is smooth.
damping="uncapped" (dflex, NVIDIA Warp and Newton's semi-implicit penalty contact):
    fd = kd max(-v_n, 0)   while c < 0 (0 otherwise)
  (Warp: `jd = min(vn, 0) * kd`, applied only when c < 0.)  The damping switches on at full
  strength in the step a point first penetrates, so the force jumps at touchdown: the loss jumps
  whenever a parameter change moves a touchdown to another step, and **the Tape gradient of a
  rollout disagrees with finite differences whose step moves a touchdown** (measured on a box
  bounce with the dflex law: d loss / d kd of the wrong sign).  Between touchdowns it is smooth.
  Use it to match footage simulated by those engines, not as the default for fitting.
Both are never attractive: fn >= 0.

friction="capped" (the default; dflex and Warp's particle contact, `min(vs kf, mu |fn|)`):
    k_t = min(kf, mu fn / |v_t|_e),   |v_t|_e = sqrt(|v_t|^2 + 1e-12 m^2/s^2)
  viscous (kf) below the Coulomb cap, mu fn above it: continuous in v_t and differentiable at
  v_t = 0, with a kink where the two branches meet (|v_t| = mu fn / kf).
friction="huber" (pseudo-Huber-smoothed Coulomb friction, smooth everywhere in v_t):
    s   = sqrt(|v_t|^2 + v_s^2)                pseudo-Huber norm of v_t, v_s = friction_velocity [m/s]
    k_t = kf mu fn / (kf s + mu fn)            i.e. |ft| = (|v_t| / s) * (a b / (a + b)),  a = kf s, b = mu fn
  This is the law of Newton's (Warp's) semi-implicit rigid contact, `min(kf s, mu |fn|) v_t / s` with
  the pseudo-Huber norm s (their `friction_smoothing` is v_s), with the min replaced by the smooth
  harmonic blend a b / (a + b) (which lies between min(a, b) / 2 and min(a, b)).  Limits: |v_t| << mu fn / kf:
  viscous, ft ~ -kf v_t; |v_t| >> mu fn / kf and >> v_s: Coulomb, |ft| -> mu fn; kf -> infinity: the
  pure pseudo-Huber Coulomb law ft = -mu fn v_t / sqrt(|v_t|^2 + v_s^2) (smoothed Coulomb friction as
  in IPC-style dissipation potentials mu fn (s - v_s)).  |ft| < mu fn always.  The force is a smooth
  function of v_t, fn, kf and mu (no min, no kink), so rollouts that move between sliding and sticking
  keep smooth losses.  Default v_s = 1e-3 m/s: below the speeds that matter, so kf sets the sticking regime.

friction="warp" (Warp 1.9.1 / dflex `eval_rigid_contacts`, the friction of their rigid bodies):
    H   = |v_t|^2 / 2 if |v_t| <= d else d (|v_t| - d / 2)      the Huber norm of v_t, d = friction_velocity
    k_t = min(kf, mu fn d / H)
  Warp writes it ft = v_t / H min(kf H, mu_w fn) with its own coefficient mu_w = mu d (a Warp shape's mu is
  tigradsim's mu times its friction_smoothing d).  Above the cap the friction is mu fn |v_t| / (|v_t| - d/2):
  Coulomb for |v_t| >> d, but more than mu fn at slow slip (2 mu fn at |v_t| = d, 2 mu fn d / |v_t| below,
  until kf |v_t| caps it): a static excess, as Stribeck friction has, over speeds of order d.  A box that
  slides to rest stops sooner than under "capped" with the same mu (measured on Warp's ramp clip at Warp's
  constants, d = 0.02 m/s: box B, knocked 131.7 mm under "uncapped", slides 125.8 mm, Warp's own 96.9 mm;
  benchmarks/interacting_diagnose.py).  Continuous in v_t, fn, kf, mu
  (the Huber norm is C1 at |v_t| = d), with the capped law's kink where the two branches of the min meet.
  The force is not inside the Coulomb cone mu fn: |ft| <= mu fn max(|v_t| / (|v_t| - d / 2), 2 d / |v_t|).

damping_integration="explicit" (the default) or "implicit": how the velocity-linear parts are stepped.
  The damping kd (fd = kd |v_n| while compressing, both damping laws) and the viscous friction branch kf (k_t = kf,
  every friction law) act on the contact point's velocity like a dashpot on a point of mass m.  Under the
  Simulator's semi-implicit (symplectic) Euler step dt, v+ = v (1 - dt k / m) for that mode alone: stable only
  for dt k / m < 2, and the pre-flight asks for < 1 (`tigradsim.core.stability`).  On a 3-5 g FEM corner vertex
  at 112 steps a frame that caps kd and kf at 5-9 N s/m, where other engines (Warp, Newton: more substeps) use
  100-150.  "implicit" treats that mode by backward Euler, locally at each contact point:
      m (v+ - v) = -dt k v+    =>    v+ = v / (1 + dt k / m),
  which is the explicit force with the effective coefficient
      k_eff = k / (1 + dt k w) = k m / (m + dt k),      w = 1 / m  (0 for a pinned particle: k_eff = k),
  used for kd and for kf wherever the law's formula has them (in `min(kd |v_n|, fe)`, in `min(kf, ...)`, in
  the huber blend); the elastic ke and the Coulomb branches (mu fn) are unchanged.  k_eff -> k as dt -> 0 (the
  same continuous physics; the two agree to O(dt k / m)), and dt k_eff w = x / (1 + x) < 1 for every k and dt
  (x = dt k w), so the damping mode cannot overshoot: it is unconditionally stable, and at a huge k it stops
  the normal (or sliding) velocity within one step, the overdamped limit a stiff dashpot has.  Only the ke
  mode keeps an explicit limit, omega dt < sqrt(4 - 2 dt k_eff w) in (sqrt 2, 2) (the pre-flight's row).
  It needs the point's mass and dt inside the force: the Simulator writes its dt into `model.step_dt` before
  every forward and backward launch, and the particle terms (ground, colliders, cloth self-contact with the
  pair's reduced mass, w = w_i + w_j) read `particle_mass`.  A rigid body's contact point (against the
  ground, a collider, another body's shape or edges, a particle) is a point of inverse effective mass
  w = 1 / m + (r x d)^T I_world^-1 (r x d) along the direction d (r its arm from the centre of mass), which
  depends on the body's orientation and on d: kd takes w along the normal, kf along the slip v_t / |v_t|
  (`contact_force_along`), a pair of bodies the sum of both bodies' w, a particle against a body 1 / m_i + w
  (`tigradsim.physics.body_effective_mass`, differentiable), each body's w times its contact point count P
  (its mass split over its points: the points touching at once share the body, and without the split the
  body's modes are not unconditionally stable; that module says why).  Their pre-flight rows take the
  orientation-free bound 1 / m + |r|^2 / lambda_min(I) for w, the largest damping fraction.  Opt-in, default "explicit": the
  implicit coefficient is the explicit one times
  1 / (1 + dt k / m), 33-50 % less at the largest kd, kf the explicit pre-flight accepts (dt k / m = 0.5-1),
  so switching the default would move every existing result and test tolerance; "implicit" is what a scene
  needs where the step cannot resolve the damping (soft or cloth vertices of a few grams against another
  engine's kd, kf of 100+ N s/m: [ground] damping_integration = "implicit" in a scene file).  Where the two
  differ, neither is "the" continuous dashpot; both converge to it as dt -> 0 (implicit from below, stably).

A law is chosen per ground (`SceneBuilder.add_ground(damping=..., friction=..., friction_velocity=...)`,
used by every particle and by default by every rigid body) and per rigid body (`add_rigid_body(...,
damping=..., friction=...)`).  The law is compiled into the kernels with `ti.static` (one kernel per
law), so the default law's kernels are the same code as before the option existed.
"""

import math
import numbers
from dataclasses import dataclass
from typing import Optional

import taichi as ti

from ..core.model import StepTerm

FRICTION_EPS = 1e-12
DAMPING_LAWS = ("capped", "uncapped")
DAMPING_INTEGRATIONS = ("explicit", "implicit")
FRICTION_LAWS = ("capped", "huber", "warp")
DEFAULT_FRICTION_VELOCITY = 1e-3
# friction="warp": Warp's own default friction_smoothing (`SemiImplicitIntegrator(friction_smoothing=1.0)`)
DEFAULT_WARP_FRICTION_VELOCITY = 1.0
# friction="warp" as a model choice (scenes/law_compare.LAWS, benchmarks/coverage_laws.py): footage does not
# state delta, and the law's kernels take it at compile time, so it is not fitted continuously but compared
# as discrete models, one per decade over the slip speeds where real contacts leave the Coulomb regime
# (Stribeck velocities of dry and boundary-lubricated contacts are of order 1e-3 to 1e-1 m/s):
# * 1e-3 m/s and below: the law is Coulomb above 1 mm/s, the same as friction="capped" with a large kf
#   (already compared), so it is left out;
# * 1 m/s (Warp's and Newton's default friction_smoothing) is left out too: friction is widened up to
#   walking speed, the viscous-up-to-walking-speed regime issue 44 asks defaults to avoid;
# * 0.01 and 0.1 m/s: the two decades between.  A clip made with a delta between them is fitted by the
#   nearer one, and the law comparison's envelope over equally good laws covers the rest.
WARP_FRICTION_VELOCITIES = (0.01, 0.1)
# Floor of the huber blend's denominator: only matters when kf = 0 and fn = 0 at once (0 / 0).
_HUBER_TINY = 1e-30


@dataclass(frozen=True)
class ContactLaw:
    """Which contact law a ground or rigid body uses (see the module docstring for the formulas).

    damping: "capped" (default, continuous at touchdown) or "uncapped" (dflex / Warp).
    friction: "capped" (default, min(kf, mu fn / |v_t|)), "huber" (pseudo-Huber, smooth) or "warp" (Warp's
        rigid contact: Coulomb widened at slow slip by the Huber norm).
    friction_velocity: v_s [m/s] > 0 of the "huber" law (None: 1e-3) or delta of the "warp" law (None: 1 m/s,
        Warp's default friction_smoothing); must be None with "capped".
    damping_integration: "explicit" (default) or "implicit" (kd and kf by local backward Euler: k / (1 + dt k / m),
        unconditionally stable; module docstring).
    Hashable and compared by value: terms with equal laws share kernels.
    """

    damping: str = "capped"
    friction: str = "capped"
    friction_velocity: Optional[float] = None
    damping_integration: str = "explicit"

    def __post_init__(self):
        if self.damping not in DAMPING_LAWS:
            raise ValueError(f"damping: expected one of {DAMPING_LAWS}, got {self.damping!r}")
        if self.damping_integration not in DAMPING_INTEGRATIONS:
            raise ValueError(f"damping_integration: expected one of {DAMPING_INTEGRATIONS}, got "
                             f"{self.damping_integration!r}")
        if self.friction not in FRICTION_LAWS:
            raise ValueError(f"friction: expected one of {FRICTION_LAWS}, got {self.friction!r}")
        fv = self.friction_velocity
        if self.friction == "capped":
            if fv is not None:
                raise ValueError(f"friction_velocity: only used by friction='huber' or 'warp', got {fv!r} with "
                                 "friction='capped'")
        else:
            if fv is None:
                fv = DEFAULT_WARP_FRICTION_VELOCITY if self.friction == "warp" else DEFAULT_FRICTION_VELOCITY
            if isinstance(fv, bool) or not isinstance(fv, numbers.Real) or not (math.isfinite(fv) and fv > 0):
                raise ValueError(f"friction_velocity: expected a finite number > 0 [m/s], got {fv!r}")
            object.__setattr__(self, "friction_velocity", float(fv))

    @property
    def is_default(self) -> bool:
        return self == ContactLaw()

    @property
    def implicit(self) -> bool:
        """Whether kd and kf are stepped implicitly (damping_integration="implicit")."""
        return self.damping_integration == "implicit"

    def merged(self, damping=None, friction=None, friction_velocity=None, damping_integration=None) -> "ContactLaw":
        """This law with the given fields replaced (None keeps this law's).  A new `friction`
        drops this law's friction_velocity unless one is given."""
        new_friction = self.friction if friction is None else friction
        fv = friction_velocity
        if fv is None and friction is None:
            fv = self.friction_velocity
        return ContactLaw(self.damping if damping is None else damping, new_friction, fv,
                          self.damping_integration if damping_integration is None else damping_integration)


DEFAULT_LAW = ContactLaw()


def check_law_options(damping=None, friction=None, friction_velocity=None, damping_integration=None) -> dict:
    """Validate contact-law options given on their own (None: not given); returns the given ones by name.
    Whether friction_velocity fits the friction law is checked when the law is resolved (`ContactLaw`)."""
    if damping is not None and damping not in DAMPING_LAWS:
        raise ValueError(f"damping: expected one of {DAMPING_LAWS} (or None), got {damping!r}")
    if friction is not None and friction not in FRICTION_LAWS:
        raise ValueError(f"friction: expected one of {FRICTION_LAWS} (or None), got {friction!r}")
    if damping_integration is not None and damping_integration not in DAMPING_INTEGRATIONS:
        raise ValueError(f"damping_integration: expected one of {DAMPING_INTEGRATIONS} (or None), got "
                         f"{damping_integration!r}")
    if friction_velocity is not None:
        fv = friction_velocity
        if isinstance(fv, bool) or not isinstance(fv, numbers.Real) or not (math.isfinite(fv) and fv > 0):
            raise ValueError(f"friction_velocity: expected a finite number > 0 [m/s] (or None), got {fv!r}")
    given = dict(damping=damping, friction=friction, friction_velocity=friction_velocity,
                 damping_integration=damping_integration)
    return {k: v for k, v in given.items() if v is not None}


def body_laws(ground_law: ContactLaw, bodies) -> list:
    """Each rigid body's contact law: the ground's with the body's own options (`body["law"]`, a dict of
    damping / friction / friction_velocity) merged in; a bad combination names the body."""
    laws = []
    for b, body in enumerate(bodies):
        try:
            laws.append(ground_law.merged(**body["law"]))
        except ValueError as err:
            raise ValueError(f"rigid body {b}: {err}") from None
    return laws


@ti.func
def implicit_coefficient(k, dt_inv_mass, law: ti.template()):
    """The coefficient [N s/m] a velocity-linear force -k v is applied with: k itself ("explicit"), or the
    backward-Euler k / (1 + dt k / m) ("implicit"; dt_inv_mass = dt / m [s/kg], 0 for a pinned point; m a
    rigid body point's effective mass along the force, `body_effective_mass`).  Module docstring:
    damping_integration."""
    if ti.static(law.damping_integration == "implicit"):
        return k / (1.0 + dt_inv_mass * k)
    else:
        return k


@ti.func
def _normal_force(c, vn, ke, kd, law: ti.template()):
    """fn = fe + fd [N] of the module docstring (c <= 0 the penetration, vn the normal velocity; kd the
    coefficient as applied, `implicit_coefficient`)."""
    elastic = -ke * c
    if ti.static(law.damping == "uncapped"):
        return elastic + ti.select(c < 0.0, kd * ti.max(-vn, 0.0), 0.0)
    else:
        return elastic + ti.min(kd * ti.max(-vn, 0.0), elastic)


@ti.func
def _friction_coefficient(vt, fn, kf, mu, law: ti.template()):
    """k_t [N s/m] of the module docstring: the friction force is -k_t v_t (kf as applied)."""
    if ti.static(law.friction == "huber"):
        s = ti.sqrt(vt.dot(vt) + ti.static(law.friction_velocity * law.friction_velocity))
        b = mu * fn
        return kf * b / (kf * s + b + _HUBER_TINY)
    elif ti.static(law.friction == "warp"):
        delta = ti.static(law.friction_velocity)
        speed = ti.sqrt(vt.dot(vt) + FRICTION_EPS)
        huber = ti.select(speed <= delta, 0.5 * speed * speed, delta * (speed - 0.5 * delta))
        return ti.min(kf, mu * fn * delta / huber)
    else:
        return ti.min(kf, mu * fn / ti.sqrt(vt.dot(vt) + FRICTION_EPS))


@ti.func
def touches_ground(x, radius):
    """Whether a point at `x` [m] with `radius` [m] penetrates the ground (c < 0).  Where it does not,
    `ground_contact_force` is exactly 0 and so is each of its derivatives (c = 0 has a zero derivative
    in x there, and every term is a multiple of c or of fn = 0), so the contact loops skip such points:
    the same values and gradients, and a reverse pass that does no adjoint work for the points in the
    air (vs_warp.py's cloth never touches the ground, a tet grid touches with its bottom layer, a box at
    rest with half its corners: rigid64 forward + backward 34 -> 20 us per step)."""
    return x[1] - radius < 0.0


@ti.func
def ground_contact_force(x, v, radius, ke, kd, kf, mu, law: ti.template(), dt_inv_mass=0.0):
    """Force [N] on a point at `x` [m] moving with `v` [m/s] from the ground y = 0, by `law`
    (a `ContactLaw`, compile time); dt_inv_mass = dt / m [s/kg] for damping_integration="implicit"."""
    n = ti.Vector([0.0, 1.0, 0.0], dt=float)
    return contact_force(ti.min(x.dot(n) - radius, 0.0), n, v, ke, kd, kf, mu, law, dt_inv_mass)


@ti.func
def contact_force(c, n, v, ke, kd, kf, mu, law: ti.template(), dt_inv_mass=0.0):
    """Force [N] of one penalty contact by `law`: penetration c <= 0 [m] along the unit normal n (pointing
    out of the surface touched), v [m/s] the point's velocity relative to that surface.  The module
    docstring's formulas with a general normal: every pairing (ground, colliders, body-body, particle-body)
    calls this one function (or `contact_force_along`).  dt_inv_mass = dt / m [s/kg] (m the point's mass, or
    the pair's reduced mass): used by damping_integration="implicit" only (0: the explicit coefficients)."""
    return contact_force_along(c, n, v, ke, kd, kf, mu, law, dt_inv_mass, dt_inv_mass)


@ti.func
def contact_force_along(c, n, v, ke, kd, kf, mu, law: ti.template(), dt_inv_mass_normal, dt_inv_mass_slip):
    """`contact_force` with dt / m_eff [s/kg] apart along the normal (kd's) and along the slip v_t (kf's): a
    rigid body's contact point, whose effective mass depends on the direction (`body_effective_mass`)."""
    vn = v.dot(n)
    vt = v - n * vn
    fn = _normal_force(c, vn, ke, implicit_coefficient(kd, dt_inv_mass_normal, law), law)
    return n * fn - vt * _friction_coefficient(vt, fn, implicit_coefficient(kf, dt_inv_mass_slip, law), mu, law)


@ti.func
def dt_over_mass(model: ti.template(), i, law: ti.template()):
    """dt / m_i [s/kg] of particle i at the Simulator's step (`model.step_dt`), 0 for a pinned particle; 0 under
    damping_integration="explicit" (compile time: the explicit kernels read neither field)."""
    if ti.static(law.implicit):
        mass = model.particle_mass[i]
        return ti.select(mass > 0.0, 1.0, 0.0) / ti.max(mass, 1e-30) * model.step_dt[None]
    else:
        return 0.0


@ti.data_oriented
class ParticleGroundContact(StepTerm):
    """Ground contact for every particle with the model's ground parameters and the ground's law."""

    def __init__(self, model, law: ContactLaw = DEFAULT_LAW):
        super().__init__(model)
        self.law = law

    @ti.func
    def apply_forces(self, state: ti.template(), s: ti.template(), t: ti.template()):
        ti.loop_config(serialize=self.serial)
        for i in range(self.model.particle_count):
            x = state.particle_q[s, i]
            radius = self.model.particle_radius[i]
            if touches_ground(x, radius):
                state.particle_f[s, i] += ground_contact_force(
                    x, state.particle_qd[s, i], radius, self.model.ground_ke[None], self.model.ground_kd[None],
                    self.model.ground_kf[None], self.model.ground_mu[None], self.law,
                    dt_over_mass(self.model, i, self.law))
