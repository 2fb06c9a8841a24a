"""A box (and a few particles) sliding down a ramp onto the ground: a plane collider tilted by `angle`, with its
own friction mu, meets the ground y = 0 at x = 0.  On the ramp the box's centre accelerates at
g (sin(angle) - mu cos(angle)) (Coulomb sliding, every bottom corner at the friction cap); on the ground the
ground's friction stops it.

    sc = RampScene()                    # 25 degrees, ramp mu 0.2, a 0.3 x 0.2 x 0.25 m box of 1 kg, 2500 steps
    r = sc.run()                        # RampResult: vertices and particles per frame, acceleration on the ramp

System identification (`RampScene(..., fit=True)`, `fit_ramp_mu`): the ramp's mu (the collider's `collider_mu`,
one log-space Param) from the box's silhouettes, seen by a camera from the side: the frames rendered at the true
mu are the target, the fit starts from a guess and follows the Tape gradient through the renderer, the box's
contact with the ramp (a plane collider) and with the ground.
"""
import time
from dataclasses import dataclass

import numpy as np

from ..io import meshes
from ..physics.rigid_observers import BodyRecorder, RigidSurface
from ..physics.rigid_pose import quat_from_axis_angle, quat_to_matrix_np
from ..core.observers import ParticleRecorder
from ..sim.builder import SceneBuilder
from ..sim.simulator import Simulator

MU_BOUNDS = (0.02, 1.0)
CAMERA = dict(eye=(-0.7, 0.9, 3.2), target=(-0.7, 0.35, 0.0), fov=45)

BOX = (0.3, 0.2, 0.25)           # box size [m]
START = 1.6                      # distance of the box's start up the ramp from its foot [m]
RAMP_LENGTH = 2.4                # the length of ramp the pictures show, from its foot up [m]
PARTICLE_RADIUS, PARTICLE_MASS = 0.05, 0.05


def ramp_frame(angle):
    """(rotation (4,), outward normal (3,), downhill unit vector (3,)) of a ramp rising towards -x at `angle`
    [rad] whose foot is the line x = 0 on the ground."""
    rot = quat_from_axis_angle((0.0, 0.0, 1.0), -angle)
    normal = quat_to_matrix_np(rot)[:, 1]
    return rot, normal, np.array([np.cos(angle), -np.sin(angle), 0.0])


def ramp_model(angle=np.radians(25.0), mu=0.2, *, mass=1.0, ke=1e4, kd=10.0, kf=10.0, ground_mu=0.5, particles=3,
               requires_grad=False):
    """The Model: the ground (ke, kd, kf, ground_mu), the ramp (a plane collider through the origin with ke, kd,
    kf, mu) and a box of `mass` [kg] resting on it START m up, flat, plus `particles` particles beside it."""
    rot, normal, down = ramp_frame(angle)
    b = SceneBuilder()
    b.add_ground(ke=ke, kd=kd, kf=kf, mu=ground_mu)
    b.add_collider("plane", rotation=rot, ke=ke, kd=kd, kf=kf, mu=mu)
    v, f = meshes.box_surface(BOX)
    sink = mass * 9.8 * np.cos(angle) / (4 * ke)                  # each bottom corner's static sink
    b.add_rigid_body(v, f, mass=mass, position=-down * START + normal * (BOX[1] / 2 - sink), rotation=rot)
    if particles:
        sink = PARTICLE_MASS * 9.8 * np.cos(angle) / ke
        # beside the box, alternately left and right of it, each 0.35 m further down
        q = [-down * (START - 0.35 * k) + normal * (PARTICLE_RADIUS - sink) + [0.0, 0.0, 0.45 * (-1) ** k]
             for k in range(particles)]
        b.add_particles(np.array(q), None, PARTICLE_MASS, radius=PARTICLE_RADIUS)
    return b.finalize(requires_grad=requires_grad)


def slide_acceleration(times, positions, down, on_ramp):
    """Least-squares acceleration [m/s^2] of the centre's travel along `down` over the frames `on_ramp`
    (s(t) = s0 + v0 t + a t^2 / 2)."""
    s = np.asarray(positions, dtype=np.float64) @ down
    t = np.asarray(times, dtype=np.float64)
    return float(2.0 * np.polyfit(t[on_ramp], s[on_ramp], 2)[0])


@dataclass
class RampResult:
    """vertices: the box's world surface vertices per shown frame (K, V, 3) [m]; faces (F, 3); particles (K, N, 3)
    [m]; positions: the box's centre per frame (K, 3); acceleration: its measured acceleration along the ramp
    [m/s^2] while on it, analytic: g (sin - mu cos); final_x: its centre's x at the end [m] (> 0: on the
    ground); seconds: wall time of the rollout; frame_dt [s]."""
    vertices: np.ndarray
    faces: np.ndarray
    particles: np.ndarray
    positions: np.ndarray
    acceleration: float
    analytic: float
    final_x: float
    seconds: float
    frame_dt: float


class RampScene:
    """The slide for `steps` steps of `dt` s, recorded every `every` steps (arguments of `ramp_model`)."""

    def __init__(self, angle_deg=25.0, mu=0.2, *, mass=1.0, ke=1e4, kd=10.0, kf=10.0, ground_mu=0.5, particles=3,
                 steps=2500, dt=1e-3, every=20, fit=False, res=64):
        if int(steps) != steps or steps < 1 or int(every) != every or every < 1:
            raise ValueError(f"steps, every: expected positive integers, got steps={steps!r}, every={every!r}")
        if not 0.0 < angle_deg < 60.0:
            raise ValueError(f"angle_deg: expected an angle in (0, 60) degrees, got {angle_deg!r}")
        self.angle, self.mu = np.radians(angle_deg), float(mu)
        self.model = ramp_model(self.angle, mu, mass=mass, ke=ke, kd=kd, kf=kf, ground_mu=ground_mu,
                                particles=particles, requires_grad={"collider_mu"} if fit else False)
        self.sim = Simulator(self.model, dt=dt, steps=steps)
        self.surface = RigidSurface(self.sim, every=every)
        self.poses = BodyRecorder(self.sim, every=every)
        self.points = ParticleRecorder(self.sim, every) if particles else None
        self.every = every
        self.fit = None
        if fit:      # the box's silhouette every `every` steps, and a VideoFit of the ramp's mu
            from ..fitting.optim import Param
            from ..fitting.sysid import VideoFit, render_surface
            from ..renderers import Camera, SoftRasterizer
            cam = Camera(**CAMERA, width=res, height=res)
            self.renderer = SoftRasterizer(cam, self.surface.faces, self.surface.vertex_count,
                                           frames=self.surface.frames, sigma=1e-3, gamma=1e-4, shading="silhouette")
            render_surface(self.sim, self.renderer, self.surface, every)
            self.mu_param = Param(self.model.collider_mu, "mu", lower=MU_BOUNDS[0], upper=MU_BOUNDS[1], log_space=True)
            self.fit = VideoFit(self.sim, self.renderer, [self.mu_param])

    def run(self) -> RampResult:
        start = time.time()
        self.sim.run()
        seconds = time.time() - start
        positions = self.poses.numpy()[0][:, 0].astype(np.float64)
        verts = self.surface.numpy()
        frame_dt = self.every * self.sim.dt
        t = np.arange(len(positions)) * frame_dt
        _, normal, down = ramp_frame(self.angle)
        # on the ramp: every vertex clear of the foot (x < -0.05) after the first 0.1 s (settling)
        on_ramp = (verts[:, :, 0].max(axis=1) < -0.05) & (t >= 0.1)
        accel = slide_acceleration(t, positions, down, on_ramp) if on_ramp.sum() >= 4 else float("nan")
        analytic = 9.8 * (np.sin(self.angle) - self.mu * np.cos(self.angle))
        particles = self.points.values.to_numpy() if self.points is not None else np.zeros((len(t), 0, 3))
        return RampResult(verts, self.surface.faces, particles, positions, accel, float(analytic),
                          float(positions[-1, 0]), seconds, frame_dt)


def fit_ramp_mu(scene: RampScene, guess, iters=12, lr=0.3, printer=print) -> dict:
    """The ramp's mu from the box's silhouettes: render the target at the scene's current mu (the truth), set
    mu to `guess` and take `iters` quasi-Newton steps (`tgs.BFGS`, trust radius `lr` in log mu).  Returns
    {truth, guess, estimate, rel_err, loss_initial, loss_final, iters, seconds}.  `scene` must be built with
    fit=True."""
    from ..fitting.optim import BFGS
    if scene.fit is None:
        raise ValueError("scene: build the RampScene with fit=True (a renderer and the mu Param)")
    if not MU_BOUNDS[0] <= guess <= MU_BOUNDS[1]:
        raise ValueError(f"guess: expected a friction coefficient in {MU_BOUNDS}, got {guess!r}")
    start = time.time()
    truth = float(scene.model.get("collider_mu")[0])
    target = scene.fit.render()
    scene.model.set("collider_mu", [guess])
    history = scene.fit.fit(target, iters=iters, optimizer=BFGS([scene.mu_param], lr=lr), log_every=max(iters // 4, 1),
                            printer=printer)
    history.restore_best([scene.mu_param])
    estimate = float(scene.model.get("collider_mu")[0])
    return dict(truth=truth, guess=float(guess), estimate=estimate, rel_err=abs(estimate - truth) / truth,
                loss_initial=float(history.loss[0]), loss_final=float(min(history.loss)), iters=iters,
                seconds=time.time() - start)
