"""The bouncing, pushed box: mass, contact stiffness, damping, friction from video (gradSim Table 2).

A flat box (0.3 x 0.1 x 0.22 m) is dropped flat with its centre at `height` (0.12 m: 7 cm above the
ground): it bounces (bounce height and contact time depend on ke, kd and the mass) and settles; at
`push_start` (0.95 s, after the box has settled for every drawn truth) a known force (`push` N for
`push_time` s, applied `push_offset` off the centre, so the box also spins about the vertical)
slides it along the ground (mu sets the deceleration mu g) until it stops (the last cm/s, below the
Coulomb cap mu fn / kf, about 0.1 m/s, are the viscous kf regime: 4-5 frames).  One perspective
camera looks from the front and above.  (A box thrown sideways into its bounce tips onto an edge and
tumbles: chaotic loss.  A box still micro-bouncing when the push starts makes the loss bumpy in
every parameter at the 0.5 % scale, because which corners touch during the push changes the
impulse: hence the low drop, the higher damping ratio and the late push.)

    sc = BounceBoxScene()                           # the paper's defaults
    truth, guess = draw(np.random.default_rng(0))   # dicts over NAMES
    sc.set(truth); target = sc.target()
    sc.set(guess); sc.fit_contact(target)           # -> truth (to ~1e-13)
    for t in contact_trials(trials=3, seed=0): ...  # the Table 2 experiment, one ContactTrial per fit

Identifiability: the contact forces are linear in (ke, kd, kf), so scaling mass, ke, kd and kf by
one factor leaves the motion unchanged: only the known push pins the mass, and with it the rest.
kf only acts in the last frames of the slide: its loss curvature is as small as ke's (loss 4e-9 at
a 1 % error, against 2e-5 for the mass), but the loss is smooth in it and the default fit recovers
it; at quick settings (dt 1/960, 40 BFGS steps) it does not converge.

Gradients: the contact damping is capped by the elastic force (tigradsim/physics/contact.py), so the contact
force is continuous at touchdown, and the Tape gradient of this loss agrees with central differences
(f64, default settings, at a 25 % guess and at truth x 1.03) to <1e-8 relative along random
directions; per parameter (log step 1e-5) 8e-5..4e-4 (mass), 1e-5 (mu), 1e-6 (ke), 3e-7 (kd),
5e-9 (kf).

Contact stiffness and time step: the true ke is drawn from [1.25e3, 5e3] N/m per corner (static
sink 0.4-3 mm, a contact lasts ~20-55 ms).  With the stiffer [5e3, 2e4] the loss along ke was bumpy
at the 1 % scale at dt 1/1920 and 1/3840 and BFGS stopped with ke 3-9 % off in 2 of 3 trials; with
the softer contact it is a clean parabola at dt 1/1920 (the default).  At dt 1/960 it is bumpy
again at the 0.5 % scale (quick settings get ke to ~3e-3 only).

Fitting (`BounceBoxScene.fit_contact`): all five parameters together, each a log-space `Param` with
`BOUNDS`: Adam, then quasi-Newton steps (`tgs.BFGS`; Adam alone stalls in the mass-mu valley, a
heavier box with more friction), stopping once the loss is <= `stop_loss` (1e-26: ~1e-10 relative in
every parameter); if BFGS ends above it, Levenberg-Marquardt (`tgs.least_squares`) from BFGS's best
point.  Why: near the truth the Gauss-Newton Hessian (log-parameters) has a condition number ~1e6, its
slowest direction almost pure kf (seed 3, trial 0: eigenvalues 2.8 .. 2.9e-6); BFGS (trust radius, no
line search) learns that curvature slowly, and in that trial ended its 110 steps with kf 17 % off at
loss 3.8e-8 (the loss falls monotonically along the straight line to the truth: no other minimum, no
bound); Gauss-Newton reads the curvature off the Jacobian and reached loss <= 1e-26 in 6 iterations.

Truths (`draw`, seeded, log-uniform, `TRUE_RANGE`): mass [0.8, 1.5] kg, ke [1.25e3, 5e3] N/m,
kf [5, 20] N s/m, mu [0.35, 0.6], kd = zeta sqrt(ke mass) with the damping ratio zeta in [0.3, 0.6]
(each of the four bottom corners carries mass / 4; the capped damping keeps the bounce visible:
trial 0 leaves the ground at ~0.4 of its impact speed).  Guesses: each truth times a log-uniform
factor in [1/guess_factor, guess_factor] (1.5), clamped to `BOUNDS`.

Measured (seed 0, image, res 64, 3 trials, 2 shared cores): every trial converges in all five
parameters (BFGS stopped after 60, 60, 90 steps); mean abs relative errors mass 3.0e-15, ke 7.7e-15,
kd 3.1e-14, kf 4.6e-13, mu 4.1e-15 (initial 0.25, 0.26, 0.24, 0.24, 0.20); 332 s wall, 239 s CPU,
peak 293 MB (paper: mass 2.87e-4, kd 0.400, ke 0.003, kf 0.001, mu 0.007).  State supervision (mesh
vertex tracks): mass 7.7e-14, ke 7.3e-14, kd 1.1e-12, kf 5.7e-12, mu 5.7e-14.  Quick settings (1
trial, res 32, dt 1/960, 90 iterations): errors fall from mass 0.17, ke 0.32, kd 0.40, kf 0.20,
mu 0.42 to 5.4e-4, 2.8e-3, 3.0e-3, 9.4e-2, 1.3e-3.
"""
import os
from dataclasses import dataclass
from typing import Iterator

import numpy as np

from ..sim.builder import SceneBuilder
from ..fitting.optim import BFGS, Adam, History, Param, least_squares
from ..renderers import Camera, SoftRasterizer
from ..physics.rigid import add_body_force
from ..physics.rigid_observers import RigidSurface
from ..sim.simulator import Simulator
from ..core.aliases import deprecated_keyword
from ..fitting.sysid import VideoFit, relative_error, render_surface
from ..io import meshes

NAMES = ("mass", "ke", "kd", "kf", "mu")
FIELDS = {"mass": "body_mass", "ke": "body_ke", "kd": "body_kd", "kf": "body_kf", "mu": "body_mu"}
TRUE_RANGE = {"mass": (0.8, 1.5), "ke": (1.25e3, 5e3), "zeta": (0.3, 0.6), "kf": (5.0, 20.0), "mu": (0.35, 0.6)}
BOUNDS = {"mass": (0.1, 20.0), "ke": (2e2, 5e4), "kd": (1.0, 200.0), "kf": (0.5, 200.0), "mu": (0.05, 2.0)}
GROUND = dict(ke=1e4, kd=30.0, kf=10.0, mu=0.5)  # the ground's own law; the body's values are the unknowns
START_X = -0.4                                   # initial x of the box's centre [m]


def bounce_box_model(*, box=(0.3, 0.1, 0.22), height=0.12, push=20.0, push_offset=0.05, push_start=0.95,
                     push_time=0.1, ground=None, damping="capped", friction="capped", requires_grad=True):
    """The Model: a box (size x y z [m], 1 kg) dropped flat from centre height `height` [m] at x =
    START_X, kicked along +x by `push` N through a point `push_offset` m off the centre along z (it
    spins about +y) during [push_start, push_start + push_time) s.  ground: ke, kd, kf, mu of the
    ground (default `GROUND`); damping, friction: the contact law's options (tigradsim.physics.contact)."""
    if len(box) != 3 or not all(s > 0 for s in box):
        raise ValueError(f"box: expected three positive sizes x y z [m], got {box!r}")
    vertices, faces = meshes.box_surface(box)
    b = SceneBuilder(gravity=(0.0, -9.8, 0.0))
    b.add_ground(**dict(GROUND if ground is None else ground), damping=damping, friction=friction)
    body = b.add_rigid_body(vertices, faces, mass=1.0, position=(START_X, height, 0.0))
    add_body_force(b, body, force=(push, 0.0, 0.0), point=(0.0, 0.0, push_offset), start=push_start,
                   end=push_start + push_time)
    return b.finalize(requires_grad=requires_grad)


class BounceBoxScene:
    """The box, its simulator, renderer and five-parameter fit (built once, reused across trials).

    Args (the paper's defaults): box, height, push, push_offset, push_start, push_time: see
    `bounce_box_model`; duration: seconds simulated; dt: time step [s] (contacts last 12-25 ms: at
    1/960 the discrete restitution depends on the touchdown phase within a step and the loss ripples
    in ke at the 2 % scale); every: steps per rendered frame; res: image size [px];
    edge_softness: the soft rasterizer's edge softness (NDC^2; `sigma=`: its deprecated older name);
    checkpoint: checkpoint every this many steps; supervision: "image" or "state" (mesh vertex tracks).

    Attributes: model, sim, surface, renderer, params (log-space Params in NAMES order, `BOUNDS`), fit.
    """

    def __init__(self, *, box=(0.3, 0.1, 0.22), height=0.12, push=20.0, push_offset=0.05, push_start=0.95,
                 push_time=0.1, duration=1.6, dt=1 / 1920, every=32, res=64, edge_softness=1e-3, checkpoint=None,
                 supervision="image", sigma=None):
        if sigma is not None:
            edge_softness = deprecated_keyword("edge_softness", None, "sigma", sigma, owner="BounceBoxScene")
        if supervision not in ("image", "state"):
            raise ValueError(f"supervision: expected 'image' or 'state', got {supervision!r}")
        for name, value in (("duration", duration), ("dt", dt)):
            if not value > 0:
                raise ValueError(f"{name}: expected a positive time [s], got {value!r}")
        if int(every) != every or every < 1 or int(res) != res or res < 1:
            raise ValueError(f"every, res: expected positive integers, got every={every!r}, res={res!r}")
        self.model = bounce_box_model(box=box, height=height, push=push, push_offset=push_offset,
                                      push_start=push_start, push_time=push_time)
        steps = int(round(duration / dt))
        self.sim = Simulator(self.model, dt=dt, steps=steps, checkpoint_every=checkpoint)
        self.surface = RigidSurface(self.sim, every=every)
        cam = Camera(eye=(0.0, 0.9, 1.8), target=(0.0, 0.05, 0.0), fov=50, width=res, height=res)
        self.renderer = SoftRasterizer(cam, self.surface.faces, self.surface.vertex_count, frames=self.surface.frames,
                                       edge_softness=edge_softness, gamma=1e-4, shading="silhouette")
        render_surface(self.sim, self.renderer, self.surface, every)
        self.params = [Param(getattr(self.model, FIELDS[n]), n, lower=BOUNDS[n][0], upper=BOUNDS[n][1],
                             log_space=True) for n in NAMES]
        if supervision == "state":
            self.fit = VideoFit(self.sim, self.renderer, self.params, supervision="state",
                                state_source=self.surface.vertices)
        else:
            self.fit = VideoFit(self.sim, self.renderer, self.params)

    def set(self, values):
        """Set the body's parameters from a dict over NAMES (missing names keep their value)."""
        unknown = sorted(set(values) - set(NAMES))
        if unknown:
            raise ValueError(f"values: unknown parameter(s) {unknown}; expected names from {NAMES}")
        for n in NAMES:
            if n in values:
                self.model.set(FIELDS[n], [values[n]])

    def get(self) -> dict:
        return {n: float(self.model.get(FIELDS[n])[0]) for n in NAMES}

    def target(self) -> np.ndarray:
        """Roll out at the current parameters: the video (image supervision) or the vertex tracks (state)."""
        return self.fit.render() if self.fit.supervision == "image" else self.fit.record_state()

    def fit_contact(self, target, iters=160, polish=110, lr=0.05, lr_decay=0.97, polish_lr=0.05, stop_loss=1e-26,
                    stop_every=10, refine=10, fd_step=1e-4, resume=None, printer=print) -> dict:
        """Fit all five parameters to `target` from the current values, with a fresh History:
        `iters - polish` Adam steps (lr, lr_decay, log-parameters), then up to `polish` BFGS steps (trust
        radius `polish_lr`) in chunks of `stop_every`, stopping once the loss is <= `stop_loss`; if the
        loss is still above `stop_loss` then, up to `refine` Levenberg-Marquardt iterations
        (`tgs.least_squares`, central-difference Jacobian of step `fd_step` in log-parameters, 11 or more
        forward rollouts each) from the best point so far, again stopping once the loss is <= `stop_loss`.
        resume: a path prefix (PREFIX_adam.pkl, PREFIX_bfgs.pkl).  Returns the estimate (dict); the
        rollouts of the LM stage (forward only; the History gets one entry per LM iteration) are in
        `self.lm_rollouts`."""
        self.fit.history = History()
        self.lm_rollouts = 0
        adam_iters = max(iters - polish, 0)
        if adam_iters:
            opt = Adam(self.params, lr=lr, lr_decay=lr_decay)
            self.fit.fit(target, iters=adam_iters, optimizer=opt, log_every=10, resume=resume and f"{resume}_adam.pkl")
        if polish:
            opt = BFGS(self.params, lr=polish_lr)
            # in chunks of stop_every steps (the optimiser's state carries over; each chunk re-evaluates its
            # starting point once), stopping once the loss is below stop_loss: the fit has converged
            done = 0
            while done < polish:
                done = min(done + stop_every, polish)
                self.fit.fit(target, iters=done, optimizer=opt, log_every=5, resume=resume and f"{resume}_bfgs.pkl")
                if self.fit.history.loss[-1] <= stop_loss:
                    printer(f"converged after {done} BFGS steps (loss {self.fit.history.loss[-1]:.3e})")
                    break
        h = self.fit.history
        if refine and (not h.loss or h.loss[-1] > stop_loss):
            # BFGS has not converged: the slow direction is a valley along which kf trades against ke, kd
            # and the mass (seed 3, trial 0 of Table 2: BFGS ended with kf 17 % off at loss 3.8e-8, and the
            # loss falls monotonically along the straight line to the truth, where it is 0; the Gauss-Newton
            # Hessian's condition number there is ~1e6).  BFGS with a trust radius and no line search
            # builds that curvature slowly from noisy pairs; Gauss-Newton takes it from the Jacobian.
            h.restore_best(self.params)       # BFGS steps are not monotone: start from its best
            self.fit.set_target(target)

            def residuals():
                self.lm_rollouts += 1
                return self.fit.residuals()

            printer(f"BFGS stopped at loss {h.loss[-1]:.3e} > stop_loss {stop_loss:.1e}: Levenberg-Marquardt")
            self.fit.history = least_squares(residuals, self.params, iters=refine, fd_step=fd_step, printer=printer,
                                             history=h, stop_mse=stop_loss)
        return self.get()


def draw(rng, guess_factor=1.5, truth=None, guess=None):
    """(truth, guess): dicts over NAMES drawn from `rng` (module docstring: `TRUE_RANGE`, kd from the
    damping ratio, guesses within x/ `guess_factor` of the truth, clamped to `BOUNDS`).  truth, guess:
    dicts of values that replace the drawn ones (everything is drawn regardless, so the other draws
    stay those of the seed)."""
    if not guess_factor >= 1:
        raise ValueError(f"guess_factor: expected a factor >= 1, got {guess_factor!r}")
    for name, given in (("truth", truth), ("guess", guess)):
        unknown = sorted(set(given or {}) - set(NAMES))
        if unknown:
            raise ValueError(f"{name}: unknown parameter(s) {unknown}; expected names from {NAMES}")
    drawn_truth, drawn_guess = {}, {}
    for n in NAMES:
        lo, hi = np.log(TRUE_RANGE["zeta" if n == "kd" else n])
        drawn_truth[n] = float(np.exp(rng.uniform(lo, hi)))
        if n == "kd":    # damping ratio of the four bottom corners -> a visible bounce
            drawn_truth[n] *= float(np.sqrt(drawn_truth["ke"] * drawn_truth["mass"]))
        f = np.log(guess_factor)
        drawn_guess[n] = float(np.clip(drawn_truth[n] * np.exp(rng.uniform(-f, f)), *BOUNDS[n]))
    return {**drawn_truth, **(truth or {})}, {**drawn_guess, **(guess or {})}


@dataclass
class ContactTrial:
    """One fit of `contact_trials`: the scene (its fit holds this trial's History until the next
    trial), truth / initial / estimate dicts over NAMES, and the videos (K, H, W, 1) at the truth and
    at the guess."""
    index: int
    scene: BounceBoxScene
    true: dict
    initial: dict
    estimate: dict
    target_video: np.ndarray
    initial_video: np.ndarray

    @property
    def rel_err(self) -> dict:
        return {n: relative_error(self.estimate[n], self.true[n]) for n in NAMES}

    @property
    def rel_err_initial(self) -> dict:
        return {n: relative_error(self.initial[n], self.true[n]) for n in NAMES}

    def summary(self) -> dict:
        # rollouts: History entries (gradient iterations, one per LM iteration); lm_rollouts: LM's forward runs
        return {"true": self.true, "initial": self.initial, "estimate": self.estimate, "rel_err": self.rel_err,
                "rollouts": len(self.scene.fit.history.loss), "lm_rollouts": getattr(self.scene, "lm_rollouts", 0)}


def contact_trials(trials=3, seed=0, guess_factor=1.5, truth=None, guess=None, fit=None, resume_dir=None,
                   printer=print, **scene) -> Iterator[ContactTrial]:
    """The Table 2 experiment: `trials` fits of one `BounceBoxScene` (keyword arguments `scene`),
    truths and guesses from `draw` (numpy's generator seeded by `seed`; `truth`, `guess`: dicts of
    fixed values).  fit: keyword arguments of `BounceBoxScene.fit_contact`; resume_dir: save/continue
    every trial's fit there (trialN_adam.pkl, trialN_bfgs.pkl).  Yields a `ContactTrial` per fit."""
    if int(trials) != trials or trials < 1:
        raise ValueError(f"trials: expected a positive integer, got {trials!r}")
    rng = np.random.default_rng(seed)
    sc = BounceBoxScene(**scene)
    for trial in range(trials):
        true, initial = draw(rng, guess_factor, truth, guess)
        sc.set(true)
        target = sc.target()
        truth_video = target if sc.fit.supervision == "image" else sc.fit.render()
        sc.set(initial)
        initial_video = sc.fit.render()
        printer(f"trial {trial}: true " + ", ".join(f"{n}={true[n]:.5g}" for n in NAMES))
        printer("         guess " + ", ".join(f"{n}={initial[n]:.5g}" for n in NAMES))
        resume = os.path.join(resume_dir, f"trial{trial}") if resume_dir else None
        estimate = sc.fit_contact(target, resume=resume, printer=printer, **(fit or {}))
        result = ContactTrial(trial, sc, true, initial, estimate, truth_video, initial_video)
        err = result.rel_err
        printer(f"trial {trial}: estimate " + ", ".join(f"{n}={estimate[n]:.6g} (err {err[n]:.2e})" for n in NAMES))
        yield result
