"""The control experiments' shared protocol (gradSim's visuomotor control), for the scenes in
`tigradsim.scenes.control_fem` (the gear, the walker) and `tigradsim.scenes.control_cloth` (the
cloth throw).

A task (a `ControlTask`) owns a model, a simulator, a policy (`tigradsim.fitting.control`), a silhouette
camera and the loss field.  `task.run()` runs the paper's protocol: for each seed k, a target
x offset dx ~ U(target_range) from `numpy.random.default_rng(seed + k)`, the target set (an image
for "gradsim", a 3D centre of mass for "state"), the random policy measured, the policy trained
(Adam, `tigradsim.fitting.control.fit_policy`), its final centre of mass compared with the target's.  It
returns a `ControlRun`: the numbers (`summary`: the demos' JSON), the report (`save_report`: loss
curves and the target | final behaviour GIF) and the viewer's `Animation` of seed 0's final
behaviour.

    task = control_fem.gear_task()                     # the paper's gear, the demo's tuning
    run = task.run("gradsim")                           # 3 seeds x 30 iterations
    run.save_report("out/control_fem"); print(run.summary()["position_error"])

Several seeds at once: a `ControlBatch` holds seed k's task as copy k of one batched Model
(`tgs.batched`); its `run()` gives every seed what `ControlTask.run` gives it, with one rollout and one
Tape per iteration for all of them (the cloth throw: `control_cloth.cloth_throw_task(batch=1)`,
`demos/control_cloth.py --batch 1`).

Demos build their flags from a builder's keyword arguments (`add_flags`, same defaults) and call
the builder with the parsed values (`build`), so a default is written once, in the builder.
"""
import argparse
import inspect
import numbers
import time

import numpy as np
import taichi as ti

from ..core.aliases import add_renamed_flag
from ..core.memory import peak_rss_mb
from ..core.tape import zero_fields
from ..fitting import control
from ..fitting.optim import History

__all__ = ["ControlTask", "ControlBatch", "ControlRun", "add_flags", "build", "builder_defaults", "check_timing",
           "run_experiment", "METHODS"]

METHODS = ("gradsim", "state", "random")

# help texts of the builders' keyword arguments (flags --name-with-dashes)
HELP = {
    "seed": "first target seed (targets: seeds seed, seed+1, ...; also seeds the random policy)",
    "seeds": "targets (seeds seed, seed+1, ...)",
    "iters": "Adam iterations per target",
    "lr": "Adam step",
    "lr_decay": "step factor per iteration",
    "res": "image width = height [px]",
    "edge_softness": "SoftRas edge softness (NDC^2; --sigma is its deprecated older name)",
    "blur": "blur widths [px] of the image loss (0: plain MSE)",
    "duration": "simulated seconds",
    "dt": "time step [s]",
    "every": "steps per GIF frame",
    "strength": "activation amplitude",
    "features": "sinusoid phase inputs",
    "frequency": "base angular frequency [rad/s]",
    "velocity": "initial velocity [m/s]",
    "target_range": "target x offset range [m]",
    "checkpoint": "checkpoint every K steps",
    "eye": "camera position [m]",
    "look_at": "camera target [m]",
    "fov": "camera vertical field of view [deg]",
    "thickness": "gear thickness along its axis [m]",
    "ground": "contact ke, kd, kf",
    "mu": "ground friction coefficient",
    "damping": "material damping [Pa s]",
    "grid": "1: coarse stage (best of the grid below by the loss) before Adam; 0: Adam from v = 0",
    "grid_x": "[m/s]", "grid_y": "[m/s]", "grid_z": "[m/s]",
    "height": "initial height [m]",
    "nx": "cloth cells along x", "ny": "cloth cells along z", "cell": "cloth cell size [m]",
    "drag": "aerodynamic drag coefficient", "lift": "aerodynamic lift coefficient",
    "ground_ke": "contact stiffness", "ground_kd": "contact damping", "ground_kf": "contact friction",
    "batch": "1: train every seed at once, as copies of one batched scene (one rollout and Tape per iteration)",
}
# older flag spellings still accepted, with a deprecation warning
RENAMED_FLAGS = {"edge_softness": "--sigma"}
# keyword arguments that take any number of values (the others: as many as their default has)
VARIADIC = {"blur", "grid_x", "grid_y", "grid_z"}


def builder_defaults(builder):
    """{name: default} of the keyword arguments of a scene builder."""
    return {k: p.default for k, p in inspect.signature(builder).parameters.items()
            if p.default is not inspect.Parameter.empty}


def add_flags(parser, builder, names):
    """Add flags --name-with-dashes for the keyword arguments `names` of `builder` (their defaults,
    types from the defaults: int, float, or a tuple of floats), and --method, --precision, --quick,
    --arch.  `build(builder, args)` then calls the builder with the parsed values."""
    defaults = builder_defaults(builder)
    for name in names:
        if name not in defaults:
            raise ValueError(f"add_flags: {builder.__name__} has no keyword argument {name!r}")
        d = defaults[name]
        if isinstance(d, tuple):
            kw = dict(type=float, nargs="+" if name in VARIADIC else len(d), default=list(d))
        else:
            kw = dict(type=type(d), default=d)
        parser.add_argument("--" + name.replace("_", "-"), help=HELP.get(name), **kw)
        if name in RENAMED_FLAGS:
            add_renamed_flag(parser, RENAMED_FLAGS[name], "--" + name.replace("_", "-"), name, type=kw["type"])
    parser.add_argument("--method", choices=METHODS, default="gradsim",
                        help="gradsim: image loss; state: 3D centre-of-mass loss; random: random policy only")
    parser.add_argument("--precision", choices=("f32", "f64"), default="f32")
    parser.add_argument("--quick", action="store_true", help="small settings for tests")
    parser.add_argument("--arch", default="cpu")
    return parser


def build(builder, settings, **overrides):
    """Call `builder` with the values in `settings` (a dict or an argparse Namespace) of its
    keyword arguments (other entries, e.g. --out, are ignored), then `overrides`."""
    values = dict(vars(settings)) if isinstance(settings, argparse.Namespace) else dict(settings)
    names = builder_defaults(builder)
    kw = {k: (tuple(v) if isinstance(v, list) else v) for k, v in values.items() if k in names}
    kw.update(overrides)
    return builder(**kw)


def check_timing(settings):
    """Raise ValueError (naming the setting) unless dt > 0 [s], duration >= dt [s] and 1 <= every <= steps;
    called by the tasks' constructors before anything is built.  Returns steps = round(duration / dt)."""
    dt, duration, every = settings.dt, settings.duration, settings.every
    for name, value in (("dt", dt), ("duration", duration)):
        if not (isinstance(value, (int, float)) and np.isfinite(value) and value > 0):
            raise ValueError(f"{name}: expected a positive number of seconds, got {value!r}")
    steps = int(round(duration / dt))
    if steps < 1:
        raise ValueError(f"duration: {duration} s is less than one step of dt = {dt} s")
    if not (isinstance(every, numbers.Integral) and 1 <= every <= steps):
        raise ValueError(f"every: expected an integer number of steps per frame in [1, {steps}], got {every!r}")
    return steps


@ti.kernel
def _add(dst: ti.template(), src: ti.template()):
    dst[None] += src[None]


class ControlTask:
    """What the control scenes share.  A subclass sets, in its constructor: `args` (the settings:
    an object with the builder's keyword arguments as attributes; `tigradsim.fitting.control.observe_task`
    and `set_task_loss` read it under this name), `model`, `sim`, `steps`, `policy`, `loss` (a 0-D
    field with gradients), `image_loss = state_loss = None`, and through
    `tigradsim.fitting.control.observe_task`: `renderer`, `com`, `video`, `surface_ids`, `surface_faces`.
    It implements `set_target(offset, method)` (setting `target_com` (3,), `target_img` (H, W),
    `target_vertices` (S, 3)), `evaluate_random()`, `start(method, printer)`, `fit(...)` and
    `evaluate()`; optionally `seed_info()` and `summary_fields()`.
    """

    experiment = "control"

    @property
    def settings(self):
        return self.args

    def rollout(self):
        """Inside the Tape: simulate and add the loss (image or state) into `self.loss`."""
        self.sim.run()
        self.add_loss(self.loss)

    def add_loss(self, dst):
        """Add the task's loss (image or state, as `set_target` chose) of the last rollout into the 0-D
        field `dst` (inside the Tape: differentiated)."""
        if self.image_loss is not None and self.method == "gradsim":
            self.image_loss(dst)
        else:
            self.state_loss.value[None] = 0.0
            self.state_loss._accumulate()
            _add(dst, self.state_loss.value)

    def final_errors(self):
        """(distance [m], the paper's mse [m^2]) of the last rollout's final centre of mass to the target's."""
        return control.com_errors(self.com.numpy()[-1], self.target_com)

    def behaviour_video(self):
        """Silhouettes (K, H, W) of the last rollout's recorded frames (every `every` steps)."""
        return np.stack([self.renderer.render_numpy(f, frame=1)[..., 0].copy() for f in self.video.numpy()])

    def seed_info(self):
        """Extra per-seed entries of the report (after `target_dx`)."""
        return {}

    def summary_fields(self):
        return {"steps": self.steps, "dt": self.args.dt, "res": self.args.res}

    def run(self, method="gradsim", seeds=None, iters=None, lr=None, lr_decay=None, target_range=None,
            log_every=None, printer=print):
        """The paper's protocol (module docstring) for `seeds` targets, one after another; unset arguments
        come from the task's settings.  Returns a `ControlRun`."""
        seeds, iters, lr, lr_decay, log_every = _run_settings(self, method, seeds, iters, lr, lr_decay, target_range,
                                                               log_every)
        start = time.time()
        run = ControlRun(self, method, iters=0 if method == "random" else iters)
        for k in range(seeds):
            dx = self._announce_target(k, target_range, method, printer)
            r_err, r_mse = self.evaluate_random()
            self.start(method, printer)
            if method == "random":
                err, mse, hist = r_err, r_mse, []
            else:
                hist = self.fit(iters, lr, lr_decay, log_every, printer)
                err, mse = self.evaluate()
            run.add_seed(self, k, dx, err, mse, r_err, r_mse, hist, printer)
        run.seconds = time.time() - start
        return run

    def _announce_target(self, k, target_range, method, printer):
        """Seed k's target x offset dx ~ U(target_range) from `default_rng(seed + k)`, set as this task's
        target; returns dx [m]."""
        s = self.args
        lo, hi = (s.target_range if target_range is None else target_range)
        dx = float(np.random.default_rng(s.seed + k).uniform(lo, hi))
        self.set_target((dx, 0.0, 0.0), method)
        printer(f"seed {s.seed + k}: target x offset {dx:.3f} m, target com {np.round(self.target_com, 3).tolist()}")
        return dx


def _run_settings(task, method, seeds, iters, lr, lr_decay, target_range, log_every):
    """`ControlTask.run`'s arguments, unset ones from `task.args`, checked (the method first, before
    `task` is read): (seeds, iters, lr, lr_decay, log_every)."""
    if method not in METHODS:
        raise ValueError(f"method: expected one of {METHODS}, got {method!r}")
    s = task.args
    seeds = s.seeds if seeds is None else int(seeds)
    iters = s.iters if iters is None else int(iters)
    lr = s.lr if lr is None else float(lr)
    lr_decay = s.lr_decay if lr_decay is None else float(lr_decay)
    lo, hi = (s.target_range if target_range is None else target_range)
    if seeds < 1 or iters < 0 or not lo <= hi:
        raise ValueError(f"run: need seeds >= 1, iters >= 0 and target_range lo <= hi, got seeds={seeds}, "
                         f"iters={iters}, target_range=({lo}, {hi})")
    return seeds, iters, lr, lr_decay, max(1, iters // 10) if log_every is None else log_every


class ControlBatch:
    """`ControlTask.run`'s protocol for several seeds at once: copy k of one batched Model
    (`tgs.batched`) is seed k's task, and one rollout, one Tape and one Adam step per copy
    (`fit_policy` with a list of policies) advance every seed together.

    copies: ControlTasks sharing one Simulator `sim` (each observing and rendering its own
    particles, with its own policy, loss field and target), which implement besides the
    `ControlTask` interface `set_random(rng)` (set the policy to a random one drawn from `rng`) and
    `candidates(method)` (the coarse stage's candidate policies, each a value for `policy.set`;
    [] for none).  Seed k's targets, random policy, coarse stage, Adam path and errors are those of
    `copies[k].run` for that seed (to round-off: the copies' steps are the same arithmetic; tested),
    with one shared exception: a rollout that diverges halves every copy's step
    (`tigradsim.fitting.batch`).  The random policies are drawn in seed order from one generator
    seeded `seed + 1000`, as a sequential run draws them.
    """

    def __init__(self, copies, sim):
        if not copies:
            raise ValueError("copies: expected at least one task")
        self.copies, self.sim = list(copies), sim
        first = self.copies[0]
        self.args, self.experiment = first.args, first.experiment
        # what a ControlRun's report and animation read of "the task" is copy 0's
        self.steps, self.surface_faces, self.summary_fields = first.steps, first.surface_faces, first.summary_fields
        self.loss = ti.field(float, shape=(), needs_grad=True)
        self._copy_loss_fields = tuple(c.loss for c in self.copies)
        self.copy_losses = []        # per iteration of the last fit: each copy's loss

    @property
    def settings(self):
        return self.args

    def rollout(self):
        """Inside the Tape: one rollout of every copy; each copy's loss into its own field (all zeroed by
        one launch on the Tape), their sum into `self.loss`."""
        self.sim.run()
        zero_fields(self._copy_loss_fields)
        for c in self.copies:
            c.add_loss(c.loss)
            _add(self.loss, c.loss)

    def _losses(self):
        return np.array([float(c.loss[None]) for c in self.copies])

    def _evaluate(self):
        """Run every copy's current policy forward; returns [(distance [m], mse [m^2]) per copy]."""
        for c in self.copies:
            c.policy.write()
        self.sim.run()
        return [c.final_errors() for c in self.copies]

    def _start(self, method, printer):
        """Each copy's coarse stage (as `ControlTask.start`), every candidate evaluated for all copies by
        one rollout."""
        cands = self.copies[0].candidates(method)
        for c in self.copies:
            c.v0, c.l0 = np.zeros(3), None
        if cands:
            table = []
            for v in cands:
                for c in self.copies:
                    c.policy.set(v)
                    c.policy.write()
                self.loss[None] = 0.0
                self.rollout()
                table.append(self._losses())
            table = np.array(table)                        # (candidates, copies)
            for k, (c, best) in enumerate(zip(self.copies, np.argmin(table, axis=0))):   # first of equal losses
                c.v0, c.l0 = np.asarray(cands[best], dtype=np.float64), float(table[best, k])
                printer(f"seed {c.args.seed + k}: coarse stage: start from v = {c.v0.tolist()} (loss {c.l0:.4e})")
        for c in self.copies:
            c.policy.set(c.v0)

    def run(self, method="gradsim", seeds=None, iters=None, lr=None, lr_decay=None, target_range=None,
            log_every=None, printer=print):
        """`ControlTask.run` with every seed at once (one seed per copy: `seeds`, if given, must be the
        number of copies).  Returns a `ControlRun` with one loss curve per seed."""
        B = len(self.copies)
        if seeds is not None and seeds != B:
            raise ValueError(f"seeds: this batch has {B} copies, one per seed, got seeds={seeds} (build the batch "
                             f"with seeds={seeds} to run {seeds})")
        seeds, iters, lr, lr_decay, log_every = _run_settings(self.copies[0], method, B, iters, lr, lr_decay,
                                                               target_range, log_every)
        start = time.time()
        run = ControlRun(self, method, iters=0 if method == "random" else iters)
        dxs = [c._announce_target(k, target_range, method, printer) for k, c in enumerate(self.copies)]
        rng = np.random.default_rng(self.args.seed + 1000)
        for c in self.copies:
            c.set_random(rng)
        randoms = self._evaluate()
        hists = [[] for _ in self.copies]
        self._start(method, printer)                  # as `ControlTask.start`: for "random", v = 0 is left set
        if method == "random":
            errors = randoms
        else:
            batch = self

            class _PerCopyHistory(History):           # the copies' own losses next to the sum
                def record(self, loss, params, seconds):
                    super().record(loss, params, seconds)
                    batch.copy_losses.append(batch._losses())

            self.copy_losses = []
            control.fit_policy([c.policy for c in self.copies], self.rollout, self.loss, iters=iters, lr=lr,
                               log_every=log_every, decay=lr_decay, printer=printer, history=_PerCopyHistory())
            table = np.array(self.copy_losses)
            hists = [History(loss=table[:, k].tolist()) for k in range(seeds)]
            errors = self._evaluate()
        for k, c in enumerate(self.copies):
            run.add_seed(c, k, dxs[k], *errors[k], *randoms[k], hists[k], printer)
        run.seconds = time.time() - start
        return run


class ControlRun:
    """The outcome of `ControlTask.run`: `per_seed` (list of dicts: seed, target_dx, position_error
    [m], position_mse [m^2], random_error, random_mse, ...), `histories` (one `History` per seed,
    [] for the random method), and seed 0's `target_image` (H, W), `final_video` (K, H, W)
    silhouettes, `final_positions` (K, S, 3) [m] surface positions every `every` steps and
    `target_vertices` (S, 3) [m]."""

    def __init__(self, task, method, iters):
        self.task, self.method, self.iters = task, method, iters
        self.per_seed, self.histories = [], []
        self.target_image = self.final_video = self.final_positions = self.target_vertices = None
        self.seconds = 0.0

    def add_seed(self, task, k, dx, err, mse, r_err, r_mse, hist, printer=print):
        """Record seed k (of `task`, which just ran it): its numbers, its loss History, and for k = 0 its
        final behaviour (the report's GIF and the viewer's animation)."""
        seed = task.args.seed + k
        if k == 0:
            self.final_video, self.target_image = task.behaviour_video(), task.target_img
            self.final_positions, self.target_vertices = task.video.numpy(), task.target_vertices.copy()
        self.histories.append(hist)
        self.per_seed.append({"seed": seed, "target_dx": dx, **task.seed_info(), "position_error": err,
                              "position_mse": mse, "random_error": r_err, "random_mse": r_mse})
        printer(f"seed {seed}: {self.method} com error {err:.4f} m (mse {mse:.4f}); random {r_err:.4f} m")

    def mean(self, key):
        return float(np.mean([r[key] for r in self.per_seed]))

    def summary(self, start=None, out=None):
        """The demos' JSON: position_error (mean over seeds of the final centre-of-mass distance to
        the target's) [m], position_mse (the paper's metric: mean over x, y, z of the squared
        difference) [m^2], the same for the random policy, iters, seeds, seconds (since `start`, a
        `time.time()`; default: the run's own time), peak_mem_mb, steps, dt, (tets,) res, per_seed, out."""
        t = self.task
        return {
            "experiment": t.experiment, "method": self.method,
            "position_error": self.mean("position_error"), "position_error_random": self.mean("random_error"),
            "position_mse": self.mean("position_mse"), "position_mse_random": self.mean("random_mse"),
            "iters": self.iters, "seeds": len(self.per_seed),
            "seconds": round(self.seconds if start is None else time.time() - start, 1),
            "peak_mem_mb": round(peak_rss_mb(), 1),
            **t.summary_fields(), "per_seed": self.per_seed, "out": out,
        }

    def save_report(self, out_dir, printer=print):
        """Loss curves (loss.png) and target | final behaviour (target_vs_final.gif) under `out_dir`."""
        paths = control.save_report(out_dir, self.histories, self.target_image, self.final_video,
                                    title=f"{self.task.experiment}: {self.method} loss")
        printer(f"wrote {paths['loss_plot']}, {paths['gif']}")
        return paths

    def animation(self):
        """`tigradsim.io.viz.Animation` of seed 0's final behaviour (blue) and the target pose (grey),
        played at real time, seen from the task's camera."""
        from ..io.viz import Animation
        t, s = self.task, self.task.args
        frame_dt = s.every * s.dt
        anim = Animation(frame_dt, eye=tuple(s.eye), target=tuple(s.look_at), fov=s.fov, ground=True,
                         ground_extent=float(max(2.0, np.abs(self.target_vertices[:, [0, 2]]).max() + 1.0)))
        anim.mesh(self.target_vertices, t.surface_faces, color=0xB8B8B8)
        anim.mesh(self.final_positions, t.surface_faces, color=0x60A0E0)
        err = self.per_seed[0]["position_error"]
        anim.caption(lambda k: f"{t.experiment} ({self.method}), seed {self.per_seed[0]['seed']}: "
                               f"t = {k * frame_dt:.2f} s; grey: target; final error {err:.3f} m")
        return anim


def run_experiment(builder, settings, out, method=None, start=None, printer=print, **overrides):
    """Build a task with `build(builder, settings, **overrides)`, `run` it (`method`, else
    settings' `method`, else "gradsim"), write its report under `out`.  Returns (summary dict, ControlRun)."""
    values = dict(vars(settings)) if isinstance(settings, argparse.Namespace) else dict(settings)
    method = method or values.get("method", "gradsim")
    start = time.time() if start is None else start
    task = build(builder, values, **overrides)
    run = task.run(method, printer=printer)
    run.save_report(out, printer=printer)
    return run.summary(start, str(out)), run
