"""Rigid shapes on the ground pushed by a known force: the mass from video (gradSim Table 1).

A rigid object resting on the ground is pushed by a known impulse (`push` N along +x during the
first `push_time` s); how far and how fast it slides depends on its mass.  A target video is
rendered with the true mass; from a wrong guess `PushScene.fit_mass` fits the mass with Adam (in
log-mass, decaying step), then `polish` quasi-Newton steps (`tgs.BFGS`: for one parameter the
secant method on the gradient), which reach the minimum to machine precision.

    sc = PushScene("cylinder")                     # the paper's defaults (below)
    sc.set_mass(1.7); target = sc.target()         # video (K, H, W, 1) at the true mass
    sc.set_mass(0.8); sc.fit_mass(target)          # -> 1.7 (to ~1e-14)
    for t in mass_trials(trials=5, seed=0): ...    # the Table 1 experiment, one MassTrial per fit

Why the scene is as it is (every mass in `MASS_RANGE` = [0.5, 3] kg gives a clean fit):
  * Soft edge (`edge_softness` 1e-3, about one pixel at 64 px): with sharp edges the pixel loss grows like
    |mass error| (a V, no curvature) and neither Adam nor a secant step converges to the last digits.
  * The push (20 N for 0.05 s) and the camera (x in about [-0.85, 0.65] m; the object starts at
    x = -0.5) keep every object in view for every mass in the range: the lightest travels ~0.6 m (a
    sphere rolls ~0.8 m).  With a 40 N push and a closer camera a light guess left the view; an
    object out of view no longer adds its silhouette to the pixel error, so the loss *fell* as the
    guess got lighter and the fit ran away.
  * Contact stiffness, damping and viscous friction act per contact point: a flat base of n > 4
    points (cylinder, cone: 13) gets the box's four-corner totals spread over its n points (each
    x 4/n; per corner ke = 1e4, kd = 20).  With 13 full-strength points (or kd = 60 on the box's 4)
    the damping of the light bodies' tipping modes sits at the explicit step's stability limit
    (c dt / I ~ 2): the rollout still looks right but its gradient blows up (|dL/dlog m| ~ 1e2..1e14,
    of either sign, at 0.5-1.3 kg) and Adam stalls.  With ke = 2e4 the upright cylinder's gradient
    still spiked (x100, wrong sign) at 0.72-0.75 kg at dt 1/480.  Round bodies resting on one vertex
    (sphere, irregular) keep kd = `ROUND_KD` = 60 so they roll over their vertices without hopping.
  * State supervision (the paper's 3D baseline): `state_target="com"` fits the centre-of-mass track;
    "vertices" fits every mesh vertex, which for a rolling sphere depends on the rolling angle and is
    not convex in the mass (from a 0.53 kg guess the sphere, true 2.32 kg, stopped at 1.0 kg).

  * Stability (issue 45): the fit's mass stays in `FIT_BOUNDS` ([0.4, 50] kg, around `MASS_RANGE`), and
    `stable_substeps` splits each rendered frame into as many steps as the pre-flight asks at 0.4 kg: the
    box 16 per frame (dt 1/640 s), the sphere 18, the irregular body 33, the cylinder and cone 12 (1/480).
    At 1/480 s throughout, the box below 0.58 kg, the sphere below 0.64 kg and the irregular body below
    1.32 kg (its default 1 kg included) were past half of their contact's explicit limit (the Quickstart
    warned three times).

Measured before that change (dt 1/480 for every shape; res 64, 60 iterations = 45 Adam + 15 secant,
10 trials, 2 shared cores): seed 0, image
supervision: mean abs relative error 2.3e-15 (every trial <= 1.2e-14; paper 9.01e-5), 162 s wall,
peak 379 MB; state (centre of mass): 2.3e-15, 134 s.  Seed 1, image: 1.9e-15, 104 s.
"""
import os
from dataclasses import dataclass
from typing import Iterator

import numpy as np

from ..sim.builder import SceneBuilder
from ..fitting.optim import BFGS, Adam, History, Param
from ..renderers import Camera, SoftRasterizer
from ..physics.rigid import add_body_force
from ..physics.rigid_observers import BodyRecorder, RigidSurface
from ..sim.simulator import Simulator
from ..core.aliases import deprecated_keyword
from ..fitting.sysid import VideoFit, relative_error, render_surface
from ..io import meshes

SHAPES = ("box", "sphere", "cylinder", "cone", "irregular")
MASS_RANGE = (0.5, 3.0)                          # truths and guesses are drawn log-uniformly from here [kg]
FIT_BOUNDS = (0.4, 50.0)                         # the fitted mass's bounds [kg]: the scene's dt is stable down to 0.4
GROUND = dict(ke=1e4, kd=20.0, kf=30.0, mu=0.3)  # per corner of a four-corner base (see the module docstring)
ROUND_KD = 60.0                                  # contact damping of a body resting on one vertex [N s/m]
START_X = -0.5                                   # initial x of the centre [m]; the push is along +x
CAMERA_EYE, CAMERA_TARGET = (-0.1, 0.8, 1.7), (-0.1, 0.1, 0.0)


def shape_mesh(name):
    """The surface (vertices (V, 3) [m], faces (F, 3)) of one of `SHAPES`, about 0.4 m across."""
    if name == "box":
        return meshes.box_surface((0.4, 0.3, 0.3))
    if name == "sphere":
        return meshes.icosphere(1, 0.2)
    if name == "cylinder":
        return meshes.cylinder_surface(0.18, 0.3, 12)
    if name == "cone":
        return meshes.cone_surface(0.2, 0.35, 12)
    if name == "irregular":
        v, f = meshes.icosphere(1, 0.2)
        v = v * (1.0 + 0.25 * np.random.default_rng(7).uniform(-1, 1, (len(v), 1)))   # a fixed noisy sphere
        return v * [1.3, 0.9, 1.0], f
    raise ValueError(f"shape: unknown shape {name!r}; choose from {SHAPES}")


def push_model(shape="box", *, push=20.0, push_time=0.05, ground=None, requires_grad=True):
    """The Model: one `shape` (mass 1 kg, at rest on the ground at x = START_X) pushed along +x by
    `push` N during [0, push_time) s; `ground`: the ground's ke, kd, kf, mu (default `GROUND`)."""
    ground = dict(GROUND if ground is None else ground)
    vertices, faces = shape_mesh(shape)
    vertices = vertices - vertices.mean(0)
    b = SceneBuilder(gravity=(0.0, -9.8, 0.0))
    b.add_ground(**ground)
    lift = -vertices[:, 1].min()
    # spread the box's four corners' worth of contact over a flat base of n > 4 points, or the light
    # bodies' contact is too stiff for the explicit step and the gradients blow up
    bottom = int(np.sum(vertices[:, 1] < vertices[:, 1].min() + 1e-6))
    scale = 4.0 / max(bottom, 4)
    contact = {k: ground[k] * scale for k in ("ke", "kd", "kf")}
    if bottom < 4:      # a round body on one vertex: more damping, so it rolls over the vertices without hopping
        contact["kd"] = ROUND_KD
    body = b.add_rigid_body(vertices, faces, mass=1.0, position=(START_X, lift, 0.0), mu=ground["mu"], **contact)
    add_body_force(b, body, force=(push, 0.0, 0.0), start=0.0, end=push_time)
    return b.finalize(requires_grad=requires_grad)


def stable_substeps(model, every, dt, lightest=FIT_BOUNDS[0]):
    """(every, dt): the frame interval `every` x `dt` [s] split into the fewest steps that keep the
    scene within its stability pre-flight (`tigradsim.core.stability`) at every mass the fit may
    visit, down to `lightest` [kg] (the lightest body is the least stable: its contact modes are the
    fastest).  The box and the round bodies need half of 1/480 s there (contact ke, kd and kf on an
    effective mass of 0.05-0.13 kg); the cylinder and the cone keep it."""
    from ..core.stability import stability_report
    from ..sim.timing import substeps_per_frame
    mass = model.get("body_mass")
    model.set("body_mass", np.full_like(mass, lightest))
    dt_safe = stability_report(model, dt).dt_safe
    model.set("body_mass", mass)
    return substeps_per_frame(1.0 / (every * dt), min(dt, dt_safe))


class PushScene:
    """One shape pushed on the ground, rendered as silhouettes, with its mass fit (reusable across trials).

    Args (the paper's defaults):
        shape: one of `SHAPES`.
        push, push_time: the known force [N] along +x and how long it acts [s].
        duration: seconds simulated; dt: the largest time step [s]; every: steps of dt per rendered frame
            (frames every `every` x `dt` s; each split into as many steps as `stable_substeps` asks).
        res: image width = height [px]; edge_softness: the soft rasterizer's (NDC^2, `Coverage.edge_softness`;
            `sigma=` is its deprecated older name).
        checkpoint: checkpoint the rollout every this many steps (None: keep every step).
        supervision: "image" (pixels) or "state" (3D tracks: `state_target` "com", the centre of mass,
            or "vertices", every mesh vertex).

    Attributes: model, sim, surface (RigidSurface: world vertices per frame), renderer, mass (the
    log-space Param of `model.body_mass`, bounds [0.05, 50] kg), fit (VideoFit).
    """

    def __init__(self, shape="box", *, push=20.0, push_time=0.05, duration=0.6, dt=1 / 480, every=12, res=64,
                 edge_softness=1e-3, checkpoint=None, supervision="image", state_target="com", sigma=None):
        if sigma is not None:
            edge_softness = deprecated_keyword("edge_softness", None, "sigma", sigma, owner="PushScene")
        if shape not in SHAPES:
            raise ValueError(f"shape: unknown shape {shape!r}; choose from {SHAPES}")
        if supervision not in ("image", "state"):
            raise ValueError(f"supervision: expected 'image' or 'state', got {supervision!r}")
        if state_target not in ("com", "vertices"):
            raise ValueError(f"state_target: expected 'com' or 'vertices', got {state_target!r}")
        for name, value in (("duration", duration), ("dt", dt)):
            if not value > 0:
                raise ValueError(f"{name}: expected a positive time [s], got {value!r}")
        if int(every) != every or every < 1 or int(res) != res or res < 1:
            raise ValueError(f"every, res: expected positive integers, got every={every!r}, res={res!r}")
        self.shape = shape
        self.model = push_model(shape, push=push, push_time=push_time)
        every, dt = stable_substeps(self.model, every, dt)
        steps = int(round(duration / dt))
        self.sim = Simulator(self.model, dt=dt, steps=steps, checkpoint_every=checkpoint)
        self.surface = RigidSurface(self.sim, every=every)
        cam = Camera(eye=CAMERA_EYE, target=CAMERA_TARGET, fov=45, width=res, height=res)
        self.renderer = SoftRasterizer(cam, self.surface.faces, self.surface.vertex_count, frames=self.surface.frames,
                                       edge_softness=edge_softness, gamma=1e-4, shading="silhouette")
        render_surface(self.sim, self.renderer, self.surface, every)
        self.mass = Param(self.model.body_mass, "mass", lower=FIT_BOUNDS[0], upper=FIT_BOUNDS[1], log_space=True)
        if supervision == "state":
            source = BodyRecorder(self.sim, every=every).positions if state_target == "com" else self.surface.vertices
            self.fit = VideoFit(self.sim, self.renderer, [self.mass], supervision="state", state_source=source)
        else:
            self.fit = VideoFit(self.sim, self.renderer, [self.mass])

    def set_mass(self, mass):
        """Set the body's mass [kg]."""
        self.model.set("body_mass", [float(mass)])

    def get_mass(self) -> float:
        return float(self.model.get("body_mass")[0])

    def target(self) -> np.ndarray:
        """Roll out at the current mass: the video (image supervision) or the 3D tracks (state)."""
        return self.fit.render() if self.fit.supervision == "image" else self.fit.record_state()

    def fit_mass(self, target, iters=60, polish=15, lr=0.15, lr_decay=0.93, polish_lr=0.05, resume=None) -> float:
        """Fit the mass to `target` from the current mass: `iters - polish` Adam steps (lr, lr_decay, in
        log-mass), then `polish` BFGS (secant) steps of at most `polish_lr`; a fresh History.

        resume: a path prefix: the fit is saved to / continued from PREFIX.pkl (Adam) and
        PREFIX_polish.pkl (BFGS).  Returns the estimated mass [kg]."""
        self.fit.history = History()
        adam_iters = max(iters - polish, 0)
        if adam_iters:
            opt = Adam([self.mass], lr=lr, lr_decay=lr_decay)
            self.fit.fit(target, iters=adam_iters, optimizer=opt, log_every=10,
                         resume=resume and f"{resume}.pkl")
        if polish:
            self.fit.fit(target, iters=polish, optimizer=BFGS([self.mass], lr=polish_lr), log_every=5,
                         resume=resume and f"{resume}_polish.pkl")
        return self.get_mass()


def draw_masses(rng, mass_range=MASS_RANGE, true_mass=None, init_mass=None):
    """(true mass, initial guess) [kg], each log-uniform in `mass_range` from `rng` unless given
    (a given value draws nothing, so the other draws stay those of the seed)."""
    lo, hi = np.log(mass_range)
    truth = true_mass or float(np.exp(rng.uniform(lo, hi)))
    guess = init_mass or float(np.exp(rng.uniform(lo, hi)))
    return truth, guess


@dataclass
class MassTrial:
    """One fit of `mass_trials`: the scene (its fit holds this trial's History until the next trial),
    the masses [kg], and the videos (K, H, W, 1) at the truth and at the guess."""
    index: int
    scene: PushScene
    true: float
    initial: float
    estimate: float
    target_video: np.ndarray
    initial_video: np.ndarray

    @property
    def rel_err(self) -> float:
        return relative_error(self.estimate, self.true)

    @property
    def rel_err_initial(self) -> float:
        return relative_error(self.initial, self.true)

    def summary(self) -> dict:
        return {"shape": self.scene.shape, "true": self.true, "initial": self.initial, "estimate": self.estimate,
                "rel_err": self.rel_err}


def mass_trials(trials=5, seed=0, shape=None, true_mass=None, init_mass=None, fit=None, resume_dir=None,
                printer=print, **scene) -> Iterator[MassTrial]:
    """The Table 1 experiment: `trials` fits, cycling through `SHAPES` (or all `shape`), truths and
    guesses from `draw_masses` with numpy's generator seeded by `seed`.  One `PushScene` per shape
    (keyword arguments `scene`) is built on first use and reused.  fit: keyword arguments of
    `PushScene.fit_mass`; resume_dir: save/continue every trial's fit there (trialN.pkl).
    Yields a `MassTrial` after each fit."""
    if int(trials) != trials or trials < 1:
        raise ValueError(f"trials: expected a positive integer, got {trials!r}")
    if shape is not None and shape not in SHAPES:
        raise ValueError(f"shape: unknown shape {shape!r}; choose from {SHAPES}")
    rng = np.random.default_rng(seed)
    scenes = {}
    for trial in range(trials):
        name = shape or SHAPES[trial % len(SHAPES)]
        if name not in scenes:
            scenes[name] = PushScene(name, **scene)
        sc = scenes[name]
        truth, guess = draw_masses(rng, true_mass=true_mass, init_mass=init_mass)
        sc.set_mass(truth)
        target = sc.target()
        truth_video = target if sc.fit.supervision == "image" else sc.fit.render()
        sc.set_mass(guess)
        initial_video = sc.fit.render()
        printer(f"trial {trial}: {name}, true mass {truth:.4f} kg, initial guess {guess:.4f} kg")
        resume = os.path.join(resume_dir, f"trial{trial}") if resume_dir else None
        estimate = sc.fit_mass(target, resume=resume, **(fit or {}))
        yield MassTrial(trial, sc, truth, guess, estimate, truth_video, initial_video)
