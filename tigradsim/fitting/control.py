"""Controllers learned through the simulator (and the renderer): policies in Taichi.

A policy is an object with

* `params`: a list of `tgs.Param` (fields with needs_grad) for the optimiser;
* `write()`: launches the kernel(s) that fill its output field from the
  parameters.  Call it INSIDE the `ti.ad.Tape`, before `sim.run()`, so the
  rollout and the policy are differentiated together:

      policy = LinearTanhPolicy(model.tet_activation_t, sinusoid_features(steps, dt), scale=0.3)
      with ti.ad.Tape(loss):
          policy.write()          # tet_activation_t[t, e] for every step t
          sim.run()
          image_loss(loss)

The output is a per-step control field `out[t, j]` read by the simulation at
step t (FEM: `tigradsim.physics.fem.enable_activation_control(model, steps)` gives
`model.tet_activation_t`).  The inputs are open-loop features of time
(`sinusoid_features`), as in the gradSim paper's control experiments.

Policies here: `LinearTanhPolicy` (out = scale * tanh(W phi(t) + b)),
`MLPPolicy` (a two-layer tanh network, an example of a user-supplied policy
through the same interface), `RandomPolicy` (the random baseline) and
`VelocityControl` (one initial velocity for a set of particles, e.g. a cloth).
Any class with `params` and `write()` works with `fit_policy`; a list of policies, one per copy of a
batched scene, trains every copy at once (an Adam per copy).

The image loss of the tasks is `tigradsim.renderers.BlurredImageMSE` on the last
frame: pixel MSE plus MSEs of Gaussian-blurred copies of the frame and the
target.  Blurring is linear, so it is still a loss on the pixels alone, but it
gives a gradient when the rendered object and the target do not overlap (a plain
silhouette MSE is then flat).
"""
import math
import time

import numpy as np
import taichi as ti

from .batch import PerCopy
from .optim import Adam, History, Param, optimize
from ..core.runtime import deterministic, np_float

__all__ = ["sinusoid_features", "LinearTanhPolicy", "MLPPolicy", "RandomPolicy", "VelocityControl",
           "fit_policy", "surface", "com_errors", "save_report"]


def sinusoid_features(steps, dt, count=8, base_frequency=2.5):
    """Open-loop phase inputs phi (steps, count): sin and cos of omega_k t for
    omega_k = base_frequency * (k + 1) [rad/s], k = 0 .. count/2 - 1 (t = step * dt)."""
    if count < 2 or count % 2:
        raise ValueError(f"count: must be an even number >= 2, got {count}")
    t = np.arange(int(steps))[:, None] * float(dt)
    w = float(base_frequency) * (np.arange(count // 2) + 1)[None, :]
    return np.concatenate([np.sin(w * t), np.cos(w * t)], axis=1)


def _out_shape(out):
    shape = tuple(out.shape)
    if len(shape) != 2 or getattr(out, "n", None) is not None:
        raise ValueError(f"out: expected a scalar Taichi field of shape (steps, outputs), got shape {shape}")
    return shape


@ti.data_oriented
class LinearTanhPolicy:
    """out[t, j] = scale * tanh(sum_k W[j, k] phi[t, k] + b[j]).

    Args:
        out: the (steps, J) control field (e.g. `model.tet_activation_t`).
        features: numpy (steps, K) inputs (e.g. `sinusoid_features`); K <= 32.
        scale: output amplitude (activation strength).
        bias: learn b (else it stays 0).
        init_std: W and b start as N(0, init_std^2) (seeded by `seed`); 0 gives a zero policy.
    Attributes: `W` (J, K), `b` (J,) fields with gradients; `params`.
    """

    def __init__(self, out, features, scale=1.0, bias=True, init_std=0.0, seed=0):
        steps, J = _out_shape(out)
        phi = np.asarray(features, dtype=np.float64)
        if phi.ndim != 2 or phi.shape[0] != steps:
            raise ValueError(f"features: expected shape ({steps}, K), got {phi.shape}")
        K = phi.shape[1]
        if not 1 <= K <= 32:
            raise ValueError(f"features: 1 to 32 inputs supported, got {K}")
        self.out, self.steps, self.outputs, self.inputs = out, steps, J, K
        self.scale = float(scale)
        self.phi = ti.field(float, shape=(steps, K))
        self.phi.from_numpy(phi.astype(np_float()))
        self.W = ti.field(float, shape=(J, K), needs_grad=True)
        self.b = ti.field(float, shape=J, needs_grad=True)
        rng = np.random.default_rng(seed)
        self.W.from_numpy((rng.standard_normal((J, K)) * init_std).astype(np_float()))
        self.b.from_numpy((rng.standard_normal(J) * init_std if bias else np.zeros(J)).astype(np_float()))
        self.params = [Param(self.W, "W")] + ([Param(self.b, "b")] if bias else [])
        self._serial = deterministic()      # reverse sums into W, b in a fixed order (runtime.deterministic)

    def write(self):
        self._write(self.scale)

    @ti.kernel
    def _write(self, scale: float):
        # reverse: every step t adds into W[j, k]'s adjoint; in a fixed order when deterministic
        ti.loop_config(serialize=self._serial)
        # a range-for, not a struct-for over `out`: Taichi ignores serialize on struct-fors
        for t, j in ti.ndrange(self.out.shape[0], self.out.shape[1]):
            z = self.b[j]
            for k in ti.static(range(self.inputs)):
                z += self.W[j, k] * self.phi[t, k]
            self.out[t, j] = scale * ti.tanh(z)

    def numpy(self):
        """The outputs for every step as numpy (steps, J) (computed on the CPU side)."""
        W, b, phi = self.W.to_numpy(), self.b.to_numpy(), self.phi.to_numpy()
        return self.scale * np.tanh(phi @ W.T + b)


@ti.data_oriented
class MLPPolicy:
    """A two-layer network: h = tanh(W1 phi(t) + b1), out = scale * tanh(W2 h + b2).

    An example of a user-supplied policy: parameter fields + a `write()` that
    fills `out` (intermediate layer in its own field, so each field is written
    once per Tape).  Hidden size <= 64 (the sums are unrolled).
    """

    def __init__(self, out, features, hidden=16, scale=1.0, init_std=0.3, seed=0):
        steps, J = _out_shape(out)
        phi = np.asarray(features, dtype=np.float64)
        if phi.ndim != 2 or phi.shape[0] != steps or phi.shape[1] > 32:
            raise ValueError(f"features: expected shape ({steps}, K <= 32), got {phi.shape}")
        if not 1 <= hidden <= 64:
            raise ValueError(f"hidden: 1 to 64 units supported, got {hidden}")
        K = phi.shape[1]
        self.out, self.steps, self.outputs, self.inputs, self.hidden = out, steps, J, K, int(hidden)
        self.scale = float(scale)
        self.phi = ti.field(float, shape=(steps, K))
        self.phi.from_numpy(phi.astype(np_float()))
        self.h = ti.field(float, shape=(steps, self.hidden), needs_grad=True)
        self.W1 = ti.field(float, shape=(self.hidden, K), needs_grad=True)
        self.b1 = ti.field(float, shape=self.hidden, needs_grad=True)
        self.W2 = ti.field(float, shape=(J, self.hidden), needs_grad=True)
        self.b2 = ti.field(float, shape=J, needs_grad=True)
        rng = np.random.default_rng(seed)
        npf = np_float()
        self.W1.from_numpy((rng.standard_normal((self.hidden, K)) / math.sqrt(K)).astype(npf))
        self.b1.from_numpy(np.zeros(self.hidden, dtype=npf))
        self.W2.from_numpy((rng.standard_normal((J, self.hidden)) * init_std / math.sqrt(self.hidden)).astype(npf))
        self.b2.from_numpy(np.zeros(J, dtype=npf))
        self.params = [Param(self.W1, "W1"), Param(self.b1, "b1"), Param(self.W2, "W2"), Param(self.b2, "b2")]
        self._serial = deterministic()      # reverse sums into the weights in a fixed order (runtime.deterministic)

    def write(self):
        self._hidden()
        self._output(self.scale)

    @ti.kernel
    def _hidden(self):
        ti.loop_config(serialize=self._serial)   # adjoint sums over t in a fixed order
        for t, i in self.h:
            z = self.b1[i]
            for k in ti.static(range(self.inputs)):
                z += self.W1[i, k] * self.phi[t, k]
            self.h[t, i] = ti.tanh(z)

    @ti.kernel
    def _output(self, scale: float):
        ti.loop_config(serialize=self._serial)   # adjoint sums over t and j in a fixed order
        for t, j in self.out:
            z = self.b2[j]
            for i in ti.static(range(self.hidden)):
                z += self.W2[j, i] * self.h[t, i]
            self.out[t, j] = scale * ti.tanh(z)


class RandomPolicy:
    """The random baseline: out[t, j] uniform in [-scale, scale], drawn anew at each `write()`
    (as the paper's random policy); nothing to learn (`params` is empty)."""

    def __init__(self, out, scale=1.0, seed=0):
        self.out, self.scale = out, float(scale)
        self.shape = _out_shape(out)
        self.rng = np.random.default_rng(seed)
        self.params = []

    def write(self):
        self.out.from_numpy(self.rng.uniform(-self.scale, self.scale, self.shape).astype(np_float()))


@ti.data_oriented
class VelocityControl:
    """One initial velocity v (3,) [m/s] for particles [start, start + count):
    `write()` sets `particle_qd0[i] = v + base[i]` (base: their velocities at construction)."""

    def __init__(self, model, start, count, velocity=(0.0, 0.0, 0.0), name="velocity"):
        self.model, self.start, self.count = model, int(start), int(count)
        self.v = ti.Vector.field(3, float, shape=(), needs_grad=True)
        self.v[None] = [float(x) for x in velocity]
        self.base = ti.Vector.field(3, float, shape=self.count)
        self.base.from_numpy(model.get("particle_qd0")[self.start:self.start + self.count].astype(np_float()))
        self.params = [Param(self.v, name)]
        self._serial = deterministic()      # reverse sums into v in a fixed order (runtime.deterministic)

    def set(self, velocity):
        self.v[None] = [float(x) for x in velocity]

    def value(self):
        return self.v.to_numpy().astype(np.float64)

    def write(self):
        self._write()

    @ti.kernel
    def _write(self):
        ti.loop_config(serialize=self._serial)   # v's adjoint sums over i in a fixed order
        for i in range(self.count):
            self.model.particle_qd0[self.start + i] = self.v[None] + self.base[i]


# ---------------------------------------------------------------------------

def fit_policy(policy, rollout, loss, iters, lr=0.01, optimizer=None, log_every=10, printer=print, decay=1.0,
               history=None):
    """Adam on the policy's parameters: each iteration runs, in one Tape,
    `policy.write()` then `rollout()` (which runs the simulator and adds the loss
    into the 0-D field `loss`).  `decay` multiplies the step size after each
    iteration.  Returns the History (iters + 1 losses; the last at the final policy).

    `policy` may be a list of policies, one per copy of a batched scene (`tgs.batched`, e.g. one
    `VelocityControl` per copy's particles) whose losses `rollout` sums into `loss`: copies do not
    interact, so each copy's gradient is its own, and each gets an Adam of its own
    (`tigradsim.fitting.batch.PerCopy`), stepping exactly as it would in a fit of that copy alone.
    `history`: the History to record into (default: a new one)."""
    per_copy = isinstance(policy, (list, tuple))
    policies = list(policy) if per_copy else [policy]
    if not policies:
        raise ValueError("policy: expected a policy or a non-empty list of policies, got an empty list")
    if optimizer is None:
        optimizer = (PerCopy.build(lambda params: Adam(params, lr=lr), [p.params for p in policies]) if per_copy
                     else Adam(policy.params, lr=lr))
    opt = optimizer
    if decay != 1.0:
        base = opt.step

        def step():
            base()
            opt.lr *= decay
        opt.step = step

    def forward():
        for p in policies:
            p.write()
        rollout()

    return optimize(forward, loss, opt, iters=iters, log_every=log_every, printer=printer,
                    history=history if history is not None else History())


# ---------------------------------------------------------------------------
# helpers shared by the control demos

def surface(faces):
    """(vertex ids (V,), faces (F, 3) indexing them) from faces in global particle indices."""
    faces = np.asarray(faces)
    ids = np.unique(faces)
    return ids.astype(np.int64), np.searchsorted(ids, faces).astype(np.int32)


def observe_task(task, faces, args, indices=None):
    """Set up what a control task from pixels observes, as attributes of `task`
    (which has `sim` and `steps`); `indices`: the task's particles (default: every particle of the
    model; a copy of a batched scene passes its own):

    surface_ids, surface_faces: the surface particles and faces indexing them;
    camera, renderer: a silhouette SoftRasterizer with frames 0 and `steps`
        (the loss needs only the last frame), rendering the particles;
    com: centre of mass at steps 0 and `steps` (3D loss, the reported error);
    video: surface positions every `args.every` steps (the GIF of the behaviour).
    `args` gives eye, look_at, fov, res, edge_softness, every.
    """
    from ..renderers import Camera, SoftRasterizer
    from .sysid import render_particles
    from ..core.observers import CenterOfMassRecorder, ParticleRecorder
    task.surface_ids, task.surface_faces = surface(faces)
    task.camera = Camera(eye=tuple(args.eye), target=tuple(args.look_at), fov=args.fov, width=args.res,
                         height=args.res)
    task.renderer = SoftRasterizer(task.camera, task.surface_faces, len(task.surface_ids), frames=2,
                                   edge_softness=args.edge_softness, gamma=1e-4, shading="silhouette",
                                   vertex_ids=task.surface_ids)
    render_particles(task.sim, task.renderer, task.steps)
    task.com = CenterOfMassRecorder(task.sim, every=task.steps, indices=indices)
    task.video = ParticleRecorder(task.sim, every=args.every, indices=task.surface_ids)


def set_task_loss(task, method, start_com):
    """Point `task`'s loss at its target: the blurred multi-scale pixel MSE of the last
    frame against `task.target_img` ("gradsim"), or the squared distance of the final
    centre of mass to `task.target_com` ("state"); "random" needs none."""
    from .losses import MSELoss
    from ..renderers import BlurredImageMSE
    if method == "gradsim":
        if task.image_loss is None:
            task.image_loss = BlurredImageMSE(task.renderer.image, task.target_img[None], frames=[1], channels=[0],
                                              blur_px=task.args.blur)
        else:
            task.image_loss.set_target(task.target_img[None])
    elif method == "state":
        task.state_loss = MSELoss(task.com.com, np.stack([start_com, task.target_com]), frame_weights=[0.0, 1.0])
    task.method = method


def com_errors(final_com, target_com):
    """(distance |c - c*|, the paper's metric mean((c - c*)^2) over x, y, z)."""
    d = np.asarray(final_com, dtype=np.float64) - np.asarray(target_com, dtype=np.float64)
    return float(np.linalg.norm(d)), float(np.mean(d * d))


def save_report(out_dir, histories, target_image, video, title, fps=15):
    """Loss curves (one per seed), a labelled GIF "target" | "final behaviour", and
    overlay.png (the final frame's outline in red over the target image).

    histories: list of History (or of loss lists).  target_image: (H, W[, C]).
    video: (K, H, W[, C]) frames of the final behaviour.
    Returns {"loss_plot", "gif", "overlay": path}."""
    import os
    from ..io.panels import labelled_strip, overlay_png
    from ..io.plots import _pyplot
    from ..io.video import save_gif
    os.makedirs(out_dir, exist_ok=True)
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(5, 3.2), dpi=120)
    for k, h in enumerate(histories):
        loss = np.asarray(getattr(h, "loss", h), dtype=np.float64)
        if len(loss):
            ax.semilogy(np.arange(len(loss)), np.maximum(loss, 1e-300), lw=1.4, label=f"seed {k}")
    ax.set_xlabel("iteration")
    ax.set_ylabel("loss")
    ax.set_title(title)
    ax.grid(True, which="both", alpha=0.3)
    if 1 < len(histories) <= 8:
        ax.legend(fontsize=7)
    fig.tight_layout()
    loss_path = os.path.join(out_dir, "loss.png")
    fig.savefig(loss_path)
    plt.close(fig)
    video = np.asarray(video)
    target = np.asarray(target_image)[None]       # one frame: held for the whole video
    gif = os.path.join(out_dir, "target_vs_final.gif")
    scale = max(2, -(-160 // video.shape[2]))      # panels wide enough for their labels
    save_gif(labelled_strip([("target", target), ("final behaviour", video)], scale=scale), gif, fps=fps)
    overlay = overlay_png(target[0], video[-1], os.path.join(out_dir, "overlay.png"))
    return {"loss_plot": loss_path, "gif": gif, "overlay": overlay}
