"""The thrown cloth of gradSim's Table 3 (demos/sysid_cloth.py): the paper's 20 x 10 cloth (cell
0.1 m, membrane + bending) thrown through the air, every particle's initial velocity identified
from a rendered video (`ThrownClothFit`), coarse to fine with `ClothFitSchedule`.  The same
cloth as a flag in the wind or dropped: `tigradsim.scenes.cloth_drape`.

Thrown cloth, what is identifiable: the truth is a rigid throw (translation + spin about
y) plus a smooth random per-particle part along the cloth's normal (a flick that bends
it).  Independent per-particle (white) velocities and smooth in-plane stretching
velocities are not identifiable from 64-px video: the membrane (mu 60 N/m, 2.5 g
particles) absorbs them within about one frame interval, as ~2 mm (0.04 px)
oscillations.  Measured with noise in all directions (RMS 0.35 m/s): 0.051; white noise
with the old pipeline: 0.13 (about the size of the noise itself).
Why the multi-scale pixel loss (`BlurredImageMSE`, blur 0, 2, 4 px) in every stage: with
sharp soft-rasterised edges (edge_softness 1e-4) the pixel MSE grows like |error|, so Adam's
steps do not shrink near the answer and a quadratic model (BFGS) does not fit it; the
plain-MSE setup stalled at 0.13 (white noise) and 0.5 in the affine stage alone.  The
blurred loss is quadratic out to a few pixels, and BFGS then follows the a_y / a_z
(depth) valley that Adam crawls along.
Measured (2 shared cores, image supervision, defaults, 120 iterations): 3 trials give
0.0132, 0.0137, 0.0092, mean 0.0120 (paper 0.026; rigid stage alone 0.06-0.10, its floor
0.05-0.07), 270-310 s per trial (2.4 s per iteration), peak memory 380 MB.  State
supervision (3D positions at the same frames): 0.0056 in 168 s.  Quick settings (10 x 5
grid, 32 px, 55 iterations): 1.0 -> 0.014 in about 40 s.
"""
import time
from dataclasses import dataclass
from typing import Iterator, Sequence

import numpy as np

from ..io import meshes
from ..sim.builder import SceneBuilder
from ..core.observers import ParticleRecorder
from ..core.aliases import deprecated_keyword
from ..fitting.optim import Adam, History, Param
from ..io.panels import labelled_strip
from ..renderers import BlurredImageMSE, Camera, SoftRasterizer
from ..sim.simulator import Simulator
from ..fitting.sysid import VideoFit, render_particles
from .reparam import AffineVelocity, RigidVelocity, SmoothedVelocity, best_affine, best_rigid
from .staging import ScalarAdam, adam_then_bfgs

PAPER_REL_ERR = {"velocity": 0.026}    # gradSim Table 3

QUICK_SCENE = dict(nx=10, ny=5, cell=0.2, res=32, duration=0.4, dt=1e-3, every=20, checkpoint=100)   # --quick
# [m/s]: a throw's mean velocity (vx, vy, vz), each drawn uniform in its range (truths and guesses);
# the centre is the fixed throw of earlier runs, (1, 2, -0.5)
THROW_RANGE = ((0.5, 1.5), (1.5, 2.5), (-1.0, 0.0))
SPIN_RANGE = (1.0, 3.0)       # [rad/s]: a true throw's spin about y, drawn uniform in it


def draw_throw(rng):
    """A mean velocity (3,) [m/s] drawn uniform in `THROW_RANGE` from `rng`."""
    return np.array([rng.uniform(lo, hi) for lo, hi in THROW_RANGE])


def _check_choice(name, value, allowed):
    if value not in allowed:
        raise ValueError(f"{name}: expected one of {allowed}, got {value!r}")


def velocity_error(est, true):
    """Mean over particles of |v_est - v_true| / |v_true| (est, true: (N, 3))."""
    return float(np.mean(np.linalg.norm(est - true, axis=1) / np.linalg.norm(true, axis=1)))


def norm_error(est, true):
    """||V_est - V_true||_F / ||V_true||_F."""
    return float(np.linalg.norm(est - true) / np.linalg.norm(true))


@dataclass
class ClothFitSchedule:
    """Coarse to fine: first `coarse` x `iters` iterations on a rigid throw (6 numbers;
    `coarse_field="affine"`: 12), its last `coarse_polish` by BFGS (trust radius
    `polish_lr` [m/s, rad/s]); then the rest split over one stage per `fine_scales`
    length [m] on every particle's velocity with smoothed steps (`SmoothedVelocity`;
    Adam with one second moment per parameter (`fine_adam="scalar"`) or per value
    ("adam"), step `fine_lr` x `lr`, then up to `fine_polish` BFGS steps, trust radius
    `fine_polish_lr` [m/s]).  lr: Adam step [m/s], times `lr_decay` per iteration.
    blur / fine_blur: blur widths [px] of the multi-scale pixel loss (0: plain MSE) of
    the coarse / per-particle stages.  coarse_refine: Levenberg-Marquardt iterations
    on the coarse field after its gradient steps (25 rollouts each).
    `quick()`: the quick settings (55 iterations, one fine stage)."""
    iters: int = 120
    lr: float = 0.3
    lr_decay: float = 0.97
    coarse: float = 1 / 3
    coarse_polish: int = 30
    polish_lr: float = 0.2
    blur: Sequence[float] = (0.0, 2.0, 4.0)
    fine_blur: Sequence[float] = (0.0, 2.0, 4.0)
    coarse_field: str = "rigid"
    fine_adam: str = "scalar"
    coarse_refine: int = 0
    fine_scales: Sequence[float] = (0.3, 0.1)
    fine_polish: int = 1000
    fine_polish_lr: float = 0.05
    fine_lr: float = 0.25

    def __post_init__(self):
        _check_choice("coarse_field", self.coarse_field, ("rigid", "affine"))
        _check_choice("fine_adam", self.fine_adam, ("scalar", "adam"))
        if not 0.0 <= self.coarse <= 1.0:
            raise ValueError(f"coarse: expected the fraction of iterations on the coarse field in [0, 1], "
                             f"got {self.coarse}")
        if self.iters < 0:
            raise ValueError(f"iters: expected a number of iterations >= 0, got {self.iters}")

    def quick(self):
        """These settings with the quick stage layout (coarse 0.55, 25 BFGS steps at trust
        radius 0.5, one fine stage at 0.3 m)."""
        self.coarse, self.coarse_polish, self.polish_lr, self.fine_scales = 0.55, 25, 0.5, (0.3,)
        return self

    def stages(self):
        """[(kind, iterations, Adam lr, BFGS steps)]: kind "coarse" or a smoothing length [m]."""
        coarse_iters = int(round(self.coarse * self.iters))
        fine = [float(length) for length in self.fine_scales]
        fine_iters = np.diff(np.round(np.linspace(0, self.iters - coarse_iters, len(fine) + 1)).astype(int))
        return ([("coarse", coarse_iters, self.lr, self.coarse_polish)]
                + [(length, n, self.lr * self.fine_lr, self.fine_polish) for length, n in zip(fine, fine_iters)])


class ThrownClothFit:
    """A cloth (nx x ny cells of `cell` [m], membrane mu, lam [N/m], `density` [kg/m^2],
    `bending` [N m/rad^2]) thrown through the air from 1 m up, its simulator
    (checkpointed), a renderer of unlit random per-vertex colours (a printed cloth;
    `shading="silhouette"`: outlines) and a `VideoFit` of every particle's initial
    velocity (`particle_qd0`, N x 3 [m/s]).  The clip: `duration` [s] of `dt`, a frame
    every `every` steps (26 frames of 64 x 64 by default)."""

    def __init__(self, supervision="image", shading="color", nx=20, ny=10, cell=0.1, mu=60.0, lam=80.0,
                 damping=0.05, density=0.25, bending=2e-3, duration=0.5, dt=1 / 1200, every=24, res=64,
                 edge_softness=1e-4, checkpoint=120, sigma=None):
        if sigma is not None:       # the deprecated older name of edge_softness
            edge_softness = deprecated_keyword("edge_softness", None, "sigma", sigma, owner="ThrownClothFit")
        _check_choice("supervision", supervision, ("image", "state"))
        _check_choice("shading", shading, ("color", "silhouette"))
        self.res, self.grid, self.cell = res, [nx, ny], cell
        b = SceneBuilder(gravity=(0.0, -9.8, 0.0))
        v, f = meshes.cloth_grid(nx, ny, cell=cell, origin=(-0.5 * nx * cell, 1.0, -0.5 * ny * cell), plane="xz")
        self.rest = v                                          # (N, 3) [m]
        self.cloth = b.add_cloth(v, f, material="membrane", params={"mu": mu, "lam": lam}, density=density,
                                 damping=damping, bending_stiffness=bending, bending_damping=bending * 0.01,
                                 radius=0.01)
        # only the fitted initial velocity gets a gradient: the backward pass then skips the
        # aerodynamics (drag and lift are 0 here)
        self.model = b.finalize(requires_grad={"particle_qd0"})
        self.sim = Simulator(self.model, dt=dt, steps=int(round(duration / dt)), checkpoint_every=checkpoint)
        ids = np.unique(self.cloth.faces)
        local = np.searchsorted(ids, self.cloth.faces)
        cam = Camera(eye=(0.0, 2.6, 2.6), target=(0.3, 0.9, 0.0), fov=50, width=res, height=res)
        colors = np.random.default_rng(5).uniform(0.2, 1.0, size=(len(ids), 3))
        self.renderer = SoftRasterizer(cam, local, vertex_count=len(ids), frames=self.sim.frame_count(every),
                                       vertex_ids=ids, edge_softness=edge_softness, gamma=1e-4, shading=shading,
                                       vertex_colors=colors, ambient=(1.0, 1.0, 1.0), lights=[])
        render_particles(self.sim, self.renderer, every)
        self.recorder = ParticleRecorder(self.sim, every=every) if supervision == "state" else None
        self.velocity = Param(self.model.particle_qd0, "velocity", lower=-20.0, upper=20.0)
        self.fit = VideoFit(self.sim, self.renderer, [self.velocity], supervision=supervision,
                            state_source=self.recorder.values if self.recorder else None)
        self._losses = {}      # blur widths -> BlurredImageMSE (made once: it owns Taichi fields)

    def true_velocity(self, rng, throw=None, spin=None, noise=0.3, noise_kind="smooth",
                      noise_dirs="normal", noise_length=0.3):
        """A throw (N, 3) [m/s]: `throw` (3,) [m/s] + `spin` [rad/s] about y + a per-particle
        random part of RMS `noise` [m/s]: white noise smoothed over `noise_length` [m]
        (`noise_kind="white"`: independent per particle), along the cloth's normal
        (`noise_dirs="all"`: in all directions).  throw / spin None: drawn from `rng`
        (`draw_throw`, uniform in `SPIN_RANGE`)."""
        x = self.rest - self.rest.mean(0)
        base = draw_throw(rng) if throw is None else np.array(throw, dtype=np.float64)
        spin = rng.uniform(*SPIN_RANGE) if spin is None else spin
        spin = np.cross(np.array([0.0, spin, 0.0]), x)
        noise_v = rng.normal(0.0, noise, size=x.shape)
        if noise_kind == "smooth" and noise > 0:
            # white noise smoothed by a Gaussian of length noise_length, rescaled to RMS noise
            d2 = ((x[:, None, :] - x[None, :, :]) ** 2).sum(-1)
            noise_v = np.exp(-0.5 * d2 / noise_length ** 2) @ noise_v
        if noise_dirs == "normal":
            noise_v[:, [0, 2]] = 0.0          # along the cloth's normal (y) only
        if noise > 0:
            noise_v *= noise / np.sqrt(np.mean(np.sum(noise_v ** 2, 1)))
        return base + spin + noise_v

    def floors(self, truth):
        """Errors of the best affine and the best rigid field for `truth`: the coarse stage's floors."""
        return velocity_error(best_affine(self.rest, truth), truth), velocity_error(best_rigid(self.rest, truth), truth)

    def target(self):
        """Rollout at the current velocities: the video (K, H, W, C), or (state supervision) positions."""
        return self.fit.render() if self.recorder is None else self.fit.record_state()

    def _image_loss(self, blur):
        key = tuple(float(b) for b in blur)
        if any(b > 0 for b in key) and key not in self._losses:
            self._losses[key] = BlurredImageMSE(self.renderer.image, blur_px=key)
        return self._losses.get(key)          # None: the plain pixel MSE

    def trials(self, count, rng, schedule, init_velocity=None, resume_dir=None,
               **truth) -> Iterator["ClothTrial"]:
        """The Table 3 experiment: `count` fits, each of a truth drawn from `rng`
        (`true_velocity(rng, **truth)`) from the guess `init_velocity` (3,) [m/s] for every
        particle (None: a throw drawn from `rng` after the truth, `draw_throw`), with
        `schedule`; yields one `ClothTrial` per fit, right after it.
        resume_dir: resumable checkpoints `trial<k>_stage<j>_*.pkl` there."""
        for k in range(count):
            velocity = self.true_velocity(rng, **truth)
            affine, rigid = self.floors(velocity)
            print(f"trial {k}: error of the best affine field {affine:.5f}, of the best rigid one {rigid:.5f} "
                  "(floors of the coarse stage)")
            mean = draw_throw(rng) if init_velocity is None else np.array(init_velocity, dtype=np.float64)
            guess = np.tile(mean, (len(velocity), 1))
            self.velocity.write(velocity)
            target = self.target()
            self.velocity.write(guess)
            initial_video = self.fit.render()
            t0 = time.time()
            self.run(target, schedule, truth=velocity, resume_dir=resume_dir, name=f"trial{k}_")
            seconds = time.time() - t0
            est = self.velocity.value()
            row = {"rel_err": velocity_error(est, velocity), "rel_err_initial": velocity_error(guess, velocity),
                   "rel_err_norm": norm_error(est, velocity), "true_mean_velocity": velocity.mean(0).tolist(),
                   "est_mean_velocity": est.mean(0).tolist()}
            print(f"trial {k}: rel_err {row['rel_err']:.5f} (initial {row['rel_err_initial']:.5f}), "
                  f"norm-based {row['rel_err_norm']:.5f}")
            if self.recorder is None:
                target_video = target
            else:
                self.velocity.write(velocity)
                target_video = self.fit.render()
                self.velocity.write(est)
            yield ClothTrial(k, velocity, guess, target_video, initial_video, row, seconds)

    def run(self, target, schedule: ClothFitSchedule, truth=None, resume_dir=None, name=""):
        """Fit the initial velocities from the current ones (the guess) to `target`, stage by
        stage (`schedule.stages()`); prints each stage's error when `truth` (N, 3) is given.
        Leaves one History of all stages in `self.fit.history` and returns it."""
        s = schedule
        history = History()
        for k, (kind, iters, lr, polish) in enumerate(s.stages()):
            if iters <= 0:
                continue
            coarse = kind == "coarse"
            if coarse:
                param = (RigidVelocity if s.coarse_field == "rigid" else AffineVelocity)(self.model.particle_qd0,
                                                                                          self.rest)
            else:
                param = SmoothedVelocity(self.model.particle_qd0, self.rest, kind)
            polish = min(polish, iters)
            self.fit.params = [param]
            self.fit.set_image_loss(self._image_loss(s.blur if coarse else s.fine_blur))
            print(f"stage {k}: {param.name} ({param.value().size} numbers"
                  + ("" if coarse else f", smoothing length {param.length} m")
                  + f"), {iters} iterations ({iters - polish} Adam + {polish} BFGS)")
            adam = ScalarAdam if (not coarse and s.fine_adam == "scalar") else Adam
            adam_then_bfgs(self.fit, target, iters, polish, lr, s.polish_lr if coarse else s.fine_polish_lr,
                           lr_decay=s.lr_decay, adam=adam, log_every=(10, 10), resume_dir=resume_dir,
                           name=f"{name}stage{k}_", gather=history, suffix=str(k))
            if coarse and s.coarse_refine > 0:
                print(f"stage {k}: {s.coarse_refine} Levenberg-Marquardt iterations on the coarse field")
                self.fit.history = History()
                self.fit.refine(target, iters=s.coarse_refine, fd_step=1e-4)
                history.loss += self.fit.history.loss
                history.seconds += self.fit.history.seconds
            if truth is not None:
                print(f"stage {k}: rel_err {velocity_error(self.velocity.value(), truth):.5f}")
        self.fit.history = history
        self.fit.params = [self.velocity]    # the physical values again (reports label them)
        return history

    def report_strip(self, trial, scale=None):
        """The labelled video target | initial guess | estimate of one `ClothTrial` (the scene
        holding its estimate), each panel with its mean velocity and (guess, estimate) the
        relative error: uint8 (K, H', W', 3); scale: integer upscaling (None: panels >= 192 px)."""
        def label(v, err=None):
            line = "mean v (" + ", ".join(f"{x:.3g}" for x in np.mean(v, axis=0)) + ") m/s"   # fits 192 px
            return line if err is None else f"{line}\nrel. error {err:.2g}"

        scale = scale or max(2, -(-192 // self.res))
        return labelled_strip([("target", trial.target_video, label(trial.truth)),
                               ("initial guess", trial.initial_video, label(trial.guess, trial.row["rel_err_initial"])),
                               ("estimate", self.fit.render(), label(self.velocity.value(), trial.row["rel_err"]))],
                              scale=scale)


def summarize(sc, rows, schedule, extra=None):
    """The JSON summary of `rows` (one per trial, `ClothTrial.row`): means over trials of
    rel_err, rel_err_initial and rel_err_norm (as {"velocity": ..}), the paper's figure,
    the schedule's iters and the scene's sizes; `extra` (e.g. timings) goes last."""
    mean = lambda key: {"velocity": float(np.mean([r[key] for r in rows]))}
    return {"rel_err": mean("rel_err"), "rel_err_initial": mean("rel_err_initial"),
            "rel_err_norm": mean("rel_err_norm"), "paper_rel_err": PAPER_REL_ERR, "iters": schedule.iters,
            "trials": len(rows), "res": sc.res, "particles": sc.model.particle_count, "grid": sc.grid,
            "cell": sc.cell, "steps": sc.sim.steps, "frames": sc.renderer.frames, **(extra or {})}


@dataclass
class ClothTrial:
    """One fit of `ThrownClothFit.trials`: true and initial velocities (N, 3) [m/s], the target
    video (rendered at the truth, also under state supervision) and the guess's video
    (K, H, W, C), the row of errors (rel_err, rel_err_initial, rel_err_norm, mean velocities)
    and the fit's seconds."""
    index: int
    truth: np.ndarray
    guess: np.ndarray
    target_video: np.ndarray
    initial_video: np.ndarray
    row: dict
    seconds: float
