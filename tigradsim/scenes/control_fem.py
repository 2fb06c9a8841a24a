"""Soft bodies driven by per-tet activations, trained from pixels: the gear and the walker
(gradSim's FEM control experiments).  The protocol is `tigradsim.scenes.control.ControlTask.run`.

Every tet's activation (its rest volume grows or shrinks) at every step comes from a policy: a
linear layer plus tanh over `features` sinusoid phase inputs of time
(`tigradsim.fitting.control.LinearTanhPolicy`, starting from the zero policy), evaluated in Taichi inside
the same Tape as the rollout.  The target is an IMAGE: the body at rest translated by x; the loss
is the pixel MSE of the last rendered frame against it plus MSEs of blurred copies (`blur` [px]),
so that the gradient exists before the silhouettes overlap.  "state" trains on the 3D centre of
mass instead (the paper's physics-only baseline); "random" is the paper's random policy
(activations uniform in [-strength, strength], drawn anew at each step).

`gear_task`: a gear (1,152 tets, `tigradsim.scenes.shapes.tet_gear`) standing on the ground like a
wheel, pushed off at 1.5 m/s.  Differences from the paper's setting, measured on 2 shared CPU
cores: 3 seeds x 30 iterations at dt = 1/960 s (60 Hz x 16 substeps, 2,880 steps for 3 s), about
7 minutes (0.084 m mean distance, random 0.55 m); the paper's 6 seeds x 40 iterations would take
about 18 minutes.  Targets are x offsets in [0.5, 2.0] m: the paper's [0, 5] is out of reach for
this gear in 3 s.  Contact is softer than the paper's (ke 1e3, kd 5, kf 1 instead of 1e4, 1, 10):
with the paper's values the per-vertex contact is stiff at this time step and the rollout
gradient explodes (|g| ~ 1e14 in f64 over 1.5 s), so no descent is possible.

Time steps (issue 45): the gear runs at dt 1/2560 s with contact kd 2 N s/m per vertex, the walker at
1/1920 s with kd 1 (about critical damping of their lightest vertices, 1.3 g and 0.8 g), so both are
within their stability pre-flight.  At the 1/960 s of the measurements quoted here the gear's smallest
tets (near the hub) were at 1.3x their explicit limit and its contact (kd 5: 2.2x critical) at 2x; the
walker's contact (kd 2) at 1.3x and its tets at 0.85.  The gear's time is about 2.7x, the walker's 2x
the figures quoted (not re-measured).

`walker_task`: a thin slab of tets in the xy plane (a body block on two legs,
`tigradsim.scenes.shapes.tet_walker`, 0.1 m cells, 200 tets) standing on the ground with
friction; goals x in [0.15, 0.4] m.  Measured on 2 shared CPU cores (f32): defaults (6 seeds x 30
iterations, 1 s rollouts at dt 1/960, 64 px): 0.029 m mean distance (every seed 0.012 to 0.058 m),
random policy 0.287 m, 169 s.  The image loss falls 10x within 5 to 10 iterations (the paper:
solved in 3).  Quick (1 seed, 20 iterations, 48 px): 0.004 to 0.037 m over 8 runs of seed 0
(target 0.309 m; random 0.311 m), about 25 s.  What makes it trainable (measured): material
damping 5 Pa s.  With 0.5 the forward rollout looks fine but the adjoint overflows (|dL/dW| ~ 5e16
over 0.3 s in f64 with the zero policy, NaN in f32 at 1 s) because a fast mode of the small tets
is barely damped at this time step; 5 Pa s (or dt 1/1920) gives |dL/dW| ~ 1e-3.  Friction is
mostly viscous (kf 1 N s/m per vertex, Coulomb cap mu 0.8); activation strength 0.4 (the walker
can cover 1 m in 1 s under the 3D loss); 1 s horizon; Adam lr 0.15 decaying by 0.92 per
iteration (larger steps overshoot once the silhouettes overlap); the camera frames only the
reachable range (-0.17 to 1.17 m), so a pixel is ~3 cm at 48 px.  The final error floor (~0.02 m)
is mostly y (the walker is still activated in the last frame) and z (a sideways drift of the 3D
slab that the camera, looking along -z, barely sees).
"""
import types

import numpy as np
import taichi as ti

from ..core.aliases import deprecated_keyword
from ..fitting import control
from ..physics import fem
from ..sim.builder import SceneBuilder
from ..sim.simulator import Simulator
from .control import ControlTask, check_timing
from .shapes import tet_gear, tet_walker

__all__ = ["FemControlTask", "gear_task", "walker_task", "gear_quick", "walker_quick", "GEAR_FLAGS",
           "WALKER_FLAGS"]

_COMMON_FLAGS = ("seed", "seeds", "iters", "lr", "lr_decay", "res", "edge_softness", "blur", "duration", "dt", "every",
                 "strength", "features", "frequency", "velocity", "target_range", "checkpoint", "eye", "look_at",
                 "fov")
GEAR_FLAGS = _COMMON_FLAGS + ("thickness",)                   # the demo's flags (`control.add_flags`)
WALKER_FLAGS = _COMMON_FLAGS + ("ground", "mu", "damping")


class FemControlTask(ControlTask):
    """A soft body whose per-tet activations come from a policy, rendered from a fixed camera;
    one instance is reused for every seed.

    mesh: (vertices (V, 3) [m], tets (T, 4)) already placed in the world.  settings: an object with
    attributes dt [s], duration [s], velocity (3,) [m/s], checkpoint, features, frequency [rad/s],
    strength, seed, eye, look_at, fov, res, edge_softness, every, blur (and, for `run`: seeds, iters, lr,
    lr_decay, target_range), e.g. as made by `gear_task`.  material_params: the material's
    parameters ({"mu", "lam"} [Pa]); density [kg/m^3]; damping [Pa s]; ground: `add_ground`'s
    keyword arguments (ke, kd, kf, mu).
    Attributes: model, sim, steps, act (the (steps, T) activation field), policy
    (`LinearTanhPolicy`), random_policy, loss, renderer, com, video, rest_com (3,).
    """

    experiment = "control_fem"

    def __init__(self, mesh, settings, material_params, density, damping, ground):
        self.args = settings
        self.steps = check_timing(settings)
        b = SceneBuilder(gravity=(0.0, -9.8, 0.0))
        b.add_ground(**ground)
        self.rest = np.asarray(mesh[0], dtype=np.float64)
        self.handle = b.add_soft_mesh(mesh, params=material_params, damping=damping, density=density,
                                      velocity=tuple(settings.velocity), radius=0.01)
        self.model = b.finalize(requires_grad=True)
        self.act = fem.enable_activation_control(self.model, self.steps)
        self.sim = Simulator(self.model, dt=settings.dt, steps=self.steps, checkpoint_every=settings.checkpoint)
        control.observe_task(self, self.handle.faces, settings)
        masses = self.model.get("particle_mass")
        self.rest_com = (self.rest * masses[:, None]).sum(0) / masses.sum()
        self.policy = control.LinearTanhPolicy(
            self.act, control.sinusoid_features(self.steps, settings.dt, settings.features, settings.frequency),
            scale=settings.strength, init_std=0.0)
        self.random_policy = control.RandomPolicy(self.act, scale=settings.strength, seed=settings.seed)
        self.loss = ti.field(float, shape=(), needs_grad=True)
        self.image_loss = None
        self.state_loss = None

    def target_image(self, offset):
        """Silhouette (H, W) of the rest mesh translated by `offset` (3,) [m]."""
        verts = self.rest[self.surface_ids] + np.asarray(offset, dtype=np.float64)
        return self.renderer.render_numpy(verts, frame=1)[..., 0].copy()

    def set_target(self, offset, method):
        """The rest pose translated by `offset` ((3,) [m], or a number: along x) is the target."""
        offset = np.asarray(offset, dtype=np.float64)
        offset = np.array([float(offset), 0.0, 0.0]) if offset.ndim == 0 else offset
        if offset.shape != (3,) or not np.isfinite(offset).all():
            raise ValueError(f"offset: expected a finite number or (3,) vector [m], got {offset.tolist()}")
        self.target_offset = offset
        self.target_com = self.rest_com + offset
        self.target_vertices = self.rest[self.surface_ids] + offset
        self.target_img = self.target_image(offset)
        control.set_task_loss(self, method, self.rest_com)

    def evaluate(self, policy=None):
        """Run `policy` (default: the trained one) forward; returns (distance [m], mse [m^2])."""
        (policy or self.policy).write()
        self.sim.run()
        return self.final_errors()

    def evaluate_random(self):
        return self.evaluate(self.random_policy)

    def start(self, method, printer=print):
        """Every target starts from the zero policy (activation 0: the body at rest)."""
        for p in self.policy.params:
            p.field.fill(0.0)
        return {}

    def fit(self, iters, lr, lr_decay=1.0, log_every=10, printer=print):
        """Adam on the policy for the task's loss; returns the History."""
        return control.fit_policy(self.policy, self.rollout, self.loss, iters=iters, lr=lr, log_every=log_every,
                                  decay=lr_decay, printer=printer)

    def summary_fields(self):
        return {"steps": self.steps, "dt": self.args.dt, "tets": self.model.tet_count, "res": self.args.res}


def _renamed(values, owner):
    """A task builder's keyword values with the deprecated `sigma` folded into `edge_softness`."""
    values = dict(values)
    sigma = values.pop("sigma", None)
    if sigma is not None:
        values["edge_softness"] = deprecated_keyword("edge_softness", None, "sigma", sigma, owner=owner)
    return values


def _settings(values):
    return types.SimpleNamespace(**{k: (list(v) if isinstance(v, tuple) else v) for k, v in values.items()})


def gear_task(seed=0, seeds=3, iters=30, lr=0.02, lr_decay=0.97, target_range=(0.5, 2.0), duration=3.0,
              dt=1 / 2560, every=160, strength=0.3, features=8, frequency=2.5, velocity=(1.5, 0.0, 0.0), res=64,
              edge_softness=1e-4, blur=(0.0, 2.0, 6.0), checkpoint=160, eye=(1.0, 2.2, 5.0),
              look_at=(1.0, 0.3, 0.0), fov=45.0, thickness=0.6, lame=(1e3, 1e3), density=10.0, damping=1.0,
              ground=(1e3, 2.0, 1.0), mu=0.5, sigma=None):
    """The gear scene (module docstring), after `tgs.init`.  Units: seconds, metres, m/s, rad/s,
    pixels (res, blur), degrees (fov), Pa (lame = (mu, lambda)), kg/m^3, Pa s (damping), ground =
    (ke, kd, kf) per contact vertex, mu the ground's friction coefficient.  Returns a `FemControlTask`
    (its `run()` uses seeds, iters, lr, lr_decay, target_range); `sigma=`: edge_softness's deprecated older name."""
    s = _settings(_renamed(locals(), "gear_task"))
    mesh = tet_gear(center=(0.0, 0.52, 0.0), thickness=thickness)
    return FemControlTask(mesh, s, {"mu": lame[0], "lam": lame[1]}, density=density, damping=damping,
                          ground=dict(ke=ground[0], kd=ground[1], kf=ground[2], mu=mu))


def walker_task(seed=0, seeds=6, iters=30, lr=0.15, lr_decay=0.92, target_range=(0.15, 0.4), duration=1.0,
                dt=1 / 1920, every=64, strength=0.4, features=8, frequency=6.0, velocity=(0.0, 0.0, 0.0), res=64,
                edge_softness=1e-4, blur=(0.0, 2.0, 6.0), checkpoint=128, eye=(0.5, 0.5, 1.6),
                look_at=(0.5, 0.2, 0.0), fov=45.0, lame=(1e3, 1e3), density=10.0, damping=5.0,
                ground=(300.0, 1.0, 1.0), mu=0.8, sigma=None):
    """The walker scene (module docstring), after `tgs.init`; units as `gear_task`.  Returns a
    `FemControlTask` (experiment "control_walker")."""
    s = _settings(_renamed(locals(), "walker_task"))
    mesh = tet_walker(cell=0.1, depth=2, origin=(0.0, 0.011, -0.1))
    task = FemControlTask(mesh, s, {"mu": lame[0], "lam": lame[1]}, density=density, damping=damping,
                          ground=dict(ke=ground[0], kd=ground[1], kf=ground[2], mu=mu))
    task.experiment = "control_walker"
    return task


def gear_quick(settings):
    """The gear's quick settings (tests, < 90 s on 2 cores) from a dict of `gear_task` keyword
    arguments: 1 seed, <= 10 iterations, <= 48 px, <= 1.5 s, a frame every 3/64 s (120 steps)."""
    s = dict(settings)
    s.update(seeds=min(s["seeds"], 1), iters=min(s["iters"], 10), res=min(s["res"], 48),
             duration=min(s["duration"], 1.5), every=max(1, int(round(3 / 64 / s["dt"]))))
    return s


def walker_quick(settings):
    """The walker's quick settings (about 25 s): 1 seed, <= 20 iterations, <= 48 px, <= 1 s."""
    s = dict(settings)
    s.update(seeds=min(s["seeds"], 1), iters=min(s["iters"], 20), res=min(s["res"], 48),
             duration=min(s["duration"], 1.0))
    return s
