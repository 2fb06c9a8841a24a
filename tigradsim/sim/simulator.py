"""Simulator: runs a Model forward in a StateStore, inside or outside `ti.ad.Tape`.

Where element loops run in parallel (GPUs, CPUs with many threads; see
`runtime.serial_scatter`), one substep is ONE kernel launch: every force term's
loop, then every integrator's loop, fused with `ti.static` over the model's
terms.  Where they run serially (small CPUs), a whole run of steps between two
events (an observer's frame, a finite-state check) is ONE kernel launch: the
steps are an inner loop of a single serial task, so the reverse pass runs them
backwards.  A launch from Python costs more than a small scene's whole step
(figures: benchmarks/MEASURED.md, "Moved from the code").
Taichi 1.7.4 reverses such a nested step correctly only if every block inside
the step loop holds one loop (two sibling inner loops give wrong gradients,
measured): each term's loop is therefore a branch of a `phase` loop.  That is
why every force term and integrator runs exactly one loop (model.py).

Rollouts run in segments.  Without checkpointing there is one segment and the
store keeps every step (memory O(N T)).  With `checkpoint_every=K` the store is
a working buffer of K + 1 slots, the state at each segment start is kept in
`checkpoints`, and each segment is one tape entry (`custom_op`) whose backward
recomputes the segment while recording its kernels on a local tape, then runs
their `.grad()` in reverse (memory O(N (T/K + K)), about 2x the forward work).
Observers (renderers, recorders) run inside the segments, so they see every
state whichever mode is used, and their kernels are replayed in backward too.
"""

import math
import numbers
from typing import Callable, Optional

import numpy as np
import taichi as ti
from taichi.lang import impl

from ..core.errors import GradientError, SimulationError, check_runtime
from ..core.model import Model
from ..physics.particles import ExternalParticleForce
from ..core.runtime import custom_op, no_grad, serial_loop
from ..core.stability import StabilityReport, preflight, stability_report
from ..core.tape import zero_fields
from ..core.state import StateStore
from .adjoint_taps import AdjointTaps, as_tensor
from .adjoint_health import ADJOINT_GROWTH_ALLOWANCE, ADJOINT_GROWTH_RATE, AdjointHealth




class _Recorder:
    """A minimal tape: what `ti.ad.Tape` records, replayable in reverse."""

    def __init__(self):
        self.calls = []

    def insert(self, func, args):
        self.calls.append((func, args))

    def replay_grad(self):
        for func, args in reversed(self.calls):
            func.grad(*args)


class _Observer:
    """An observer's callback and when it fires: every `every` steps, or at the sorted
    step indices `steps` (frame k at steps[k])."""

    def __init__(self, fn, every, frames, steps=None):
        self.fn, self.every, self.frames = fn, every, frames
        self.steps = steps
        self.frame_at = None if steps is None else {int(t): k for k, t in enumerate(steps)}

    def next_step(self, t):
        """The first step after t at which this observer fires (None: none left)."""
        if self.steps is None:
            return (t // self.every + 1) * self.every
        k = int(np.searchsorted(self.steps, t, side="right"))
        return int(self.steps[k]) if k < len(self.steps) else None

    def frame(self, t):
        """The frame recorded at step t, or None."""
        if self.steps is None:
            return t // self.every if t % self.every == 0 else None
        return self.frame_at.get(int(t))


@ti.data_oriented
class Simulator:
    """Semi-implicit Euler rollout of `steps` steps of `dt` seconds.

    Args:
        model: the Model from `SceneBuilder.finalize()`.
        dt: time step [s], > 0.
        steps: number of steps of the rollout.
        checkpoint_every: segment length K for checkpointed gradients, or None
            to store every step.
        external_force: allocate `particle_f_ext[t, i]` [N], a differentiable
            per-step force on each particle (known impulses, controls).
        check_every: steps between checks for non-finite state in the forward pass (256: a blow-up
            stays non-finite, so a sparse check finds it; each check ends a fused launch, which costs
            tiny scenes time per step).
        adjoint_check_every: steps between the backward pass's looks at the adjoint (`adjoint_check`),
            only in taped runs.  64: with 256 a blow-up of a few tens of steps (a soft ball's bounce past
            the contact's explicit limit, tests/test_readme_ball.py) was spread over the 256 steps'
            growth allowance and missed at some horizons.  A look costs no launch and does not split a
            fused run of steps: the step kernels tap the adjoint (`AdjointTaps`), read once per segment.
        fuse_steps: run the steps between two events in one kernel launch (True), one
            launch per step (False), or None: fused when every force term and integrator
            runs its loop serially (`runtime.serial_scatter`; a nested loop is never
            parallel, so parallel terms keep one launch per step).  A term whose reverse loop runs on
            threads (`StepTerm.parallel_reverse`: large cloth) keeps the forward fused and has each
            step's reverse launched on its own (`reverse_per_step`).
        strict: past the safe fraction of a force term's explicit-integration limit
            (`tigradsim.core.stability`, checked here and at `run()` after `model.set`) raise
            `StabilityError` instead of warning (`StabilityWarning`).
        adjoint_check: in the backward pass, watch the size of the state adjoint and raise
            `GradientError` when it turns non-finite or grows faster than
            `adjoint_growth_rate` [1/s] beyond `adjoint_growth_allowance` (see `_judge_adjoint`).
    Attributes:
        state: the StateStore (every step, or the working buffer).
        checkpoints: StateStore of segment starts (checkpointed mode) or None.
    """

    def __init__(self, model: Model, dt: float, steps: int, checkpoint_every: Optional[int] = None,
                 external_force: bool = False, check_every: int = 256, adjoint_check_every: int = 64,
                 fuse_steps: Optional[bool] = None,
                 strict: bool = False, adjoint_check: bool = True):
        # numbers.Real: numpy scalars (np.float32(1e-3)) are valid time steps too
        if isinstance(dt, bool) or not (isinstance(dt, numbers.Real) and math.isfinite(dt) and dt > 0):
            raise ValueError(f"dt: must be a finite number > 0 (seconds), got {dt!r}")
        if not (isinstance(steps, (int, np.integer)) and steps >= 1):
            raise ValueError(f"steps: must be an integer >= 1, got {steps!r}")
        if checkpoint_every is not None and not (isinstance(checkpoint_every, (int, np.integer)) and checkpoint_every >= 1):
            raise ValueError(f"checkpoint_every: must be an integer >= 1 or None, got {checkpoint_every!r}")
        check_runtime(model)
        self.model = model
        self.dt = float(dt)
        self.steps = int(steps)
        self.check_every = max(1, int(check_every))
        self.adjoint_check_every = max(1, int(adjoint_check_every))
        self.checkpointing = checkpoint_every is not None and checkpoint_every < steps
        self.segment_length = int(checkpoint_every) if self.checkpointing else self.steps
        self.segment_count = -(-self.steps // self.segment_length)
        self.state = StateStore(model, self.segment_length + 1)
        self.checkpoints = StateStore(model, self.segment_count + 1, include_accumulators=False) \
            if self.checkpointing else None
        self.force_terms = list(model.force_terms)
        self.particle_f_ext = None
        if external_force:
            if model.particle_count == 0:
                raise ValueError("external_force=True needs particles in the model")
            self.particle_f_ext = ti.Vector.field(3, float, shape=(self.steps, model.particle_count),
                                                  needs_grad=model.requires_grad)
            self.force_terms.append(ExternalParticleForce(model, self.particle_f_ext))
        self.integrators = list(model.integrators)
        self.fuse_steps = fuse_steps
        self._build_field_lists()
        self._observers: list[_Observer] = []
        self._bad_step = ti.field(ti.i32, shape=())
        self._segment_op = custom_op(self._segment_forward, self._segment_backward)
        self._fused_op = custom_op(self._substeps, self._fused_backward)
        # contact terms whose pairs come from a broad phase (`physics.broadphase`): each step is one tape entry,
        # the build (not differentiated) then the step, and its backward rebuilds the pairs from the same slot
        # before the step's reverse, so a fused run is one step per launch
        self._broad_phases = [term.broad for term in self.force_terms if getattr(term, "broad", None) is not None]
        self._broad_fused_op = custom_op(lambda *a: self._broad_then(self._substeps, *a),
                                         lambda *a: self._broad_then(self._fused_backward, *a))
        self._broad_step_op = custom_op(lambda *a: self._broad_then(self._substep, *a),
                                        lambda *a: self._broad_then(self._substep.grad, *a))
        self._check_op = no_grad(self._check_finite_range)
        self._clear_op = no_grad(self._clear_accumulators)
        self.strict = bool(strict)
        self.adjoint_check = bool(adjoint_check) and model.requires_grad
        self.adjoint_growth_rate = ADJOINT_GROWTH_RATE
        self.adjoint_growth_allowance = ADJOINT_GROWTH_ALLOWANCE
        self._health = AdjointHealth()
        # taps exist wherever there are gradients (adjoint_check may be switched on later)
        self._taps = AdjointTaps(self.state, self.segment_length, self.adjoint_check_every) \
            if model.requires_grad else None
        self._tap_pairs = self._taps.pairs if self._taps is not None else []
        self._adjoint_op = custom_op(lambda *args: None, self._probe_adjoint)
        self._record_op = custom_op(lambda *args: None, self._record_tap)   # a tap between step launches
        self._adjoint_seen = []           # (step, size, post) read by this backward pass, judged at step 0
        self._end_pre = {}                # step -> size: a segment end's pre (an observer fires there)
        self._preflight_version = None
        self._preflight(stacklevel=4)

    # -- public -------------------------------------------------------------
    def observe(self, fn: Callable[[StateStore, int, int], None], every: Optional[int] = None,
                steps=None) -> int:
        """Call `fn(state, slot, frame)` at steps 0, every, 2*every, ... <= steps, or,
        with `steps=` (a strictly increasing sequence of step indices in [0, self.steps]),
        frame k at step steps[k] (frames at arbitrary times: see `tigradsim.io.footage`).

        `fn` reads the state at `slot` of `state` and writes frame `frame` of its
        own output fields; its kernels (or custom ops) are differentiated like
        the physics.  `fn` must be idempotent per frame (it may be called twice for
        a step at a checkpoint segment boundary, and again in the backward pass).
        Returns the number of frames.
        """
        if (every is None) == (steps is None):
            raise ValueError(f"observe: pass exactly one of every= (an integer >= 1) and steps= (step indices), "
                             f"got every={every!r}, steps={steps!r}")
        if steps is not None:
            arr = self._check_steps(steps)
            self._observers.append(_Observer(fn, None, len(arr), arr))
            return len(arr)
        frames = self.frame_count(every)
        self._observers.append(_Observer(fn, int(every), frames))
        return frames

    def _check_steps(self, steps):
        arr = np.asarray(steps)
        if arr.ndim != 1 or arr.size == 0 or not np.issubdtype(arr.dtype, np.integer):
            raise ValueError(f"steps: expected a non-empty 1-D sequence of integer step indices, got {steps!r}")
        if arr.min() < 0 or arr.max() > self.steps:
            raise ValueError(f"steps: indices must lie in [0, {self.steps}] (the rollout has {self.steps} steps of "
                             f"{self.dt:g} s), got [{arr.min()}, {arr.max()}]")
        if np.any(np.diff(arr) <= 0):
            k = int(np.argmax(np.diff(arr) <= 0))
            raise ValueError(f"steps: must be strictly increasing, got steps[{k}] = {arr[k]}, "
                             f"steps[{k + 1}] = {arr[k + 1]}")
        return arr.astype(np.int64)

    def frame_count(self, every: Optional[int] = None, steps=None) -> int:
        """Number of frames an observer called every `every` steps (or at `steps`) receives."""
        if steps is not None:
            return len(self._check_steps(steps))
        if not (isinstance(every, (int, np.integer)) and not isinstance(every, bool) and every >= 1):
            raise ValueError(f"every: must be an integer >= 1, got {every!r}")
        return self.steps // int(every) + 1

    def run(self):
        """Run the whole rollout from the model's initial state.

        Inside `ti.ad.Tape(loss)` it is differentiated; the loss must be computed
        from observer outputs (in checkpointed mode intermediate states are not
        kept).  Raises SimulationError if the state becomes non-finite, StabilityError (strict) if
        `model.set` moved a parameter past a stability limit, and, in the backward pass,
        GradientError if the adjoint blows up (`adjoint_check`).
        """
        check_runtime(self.model, "run()")
        if self.model.version != self._preflight_version:
            self._preflight(stacklevel=4)
        self._health = AdjointHealth()
        self._adjoint_seen, self._end_pre = [], {}
        if self._probing():
            if self._taps.dirty:         # a backward pass stopped before reading them
                self._taps.clear()
            self._taps.dirty = True
        for seg in range(self.segment_count):
            if self.checkpointing:
                self._segment_op(seg)
            else:
                self._segment_forward(seg)

    def stability_report(self) -> StabilityReport:
        """Every force term's explicit-integration limit at dt for the current parameters (a table:
        `print(sim.stability_report())`; `tigradsim.core.stability` gives the formulas)."""
        return stability_report(self.model, self.dt, self.force_terms)

    def _preflight(self, stacklevel):
        self._preflight_version = self.model.version
        return preflight(self.model, self.dt, self.force_terms, strict=self.strict, stacklevel=stacklevel)

    # -- adjoint health -----------------------------------------------------------
    def _probing(self):
        """Whether this run watches the adjoint: a taped run with `adjoint_check` (and gradients)."""
        return self.adjoint_check and self._taps is not None and impl.get_runtime().target_tape is not None

    def _probe_steps(self, seg, start, end):
        """Steps of segment `seg` at which the adjoint is looked at: every `adjoint_check_every` steps
        from the segment's start, its end, and step 0."""
        steps = set(range(start + self._taps.every, end, self._taps.every)) | {end}
        return steps | {start} if seg == 0 else steps

    def _record_tap(self, which, s, m):
        """Backward of a tap between step launches: the adjoint at slot s into tap m (`AdjointTaps.record_pre`)."""
        if self.adjoint_check:
            (self._taps.record_pre if which == "pre" else self._taps.record_post)(s, m)

    def _has_frame(self, t):
        return any(obs.frame(t) is not None for obs in self._observers)

    def _probe_adjoint(self, what, seg):
        """Backward of a probe op.  what="end": the segment's end, before its observers' gradient
        (placed after them in the forward pass); what="segment": the whole segment, after every step's
        reverse (placed at its start): one launch reads every tap (`AdjointTaps`) and the adjoint at
        the segment's first slot, and at step 0 every look of the backward pass is judged in its order
        (later steps first, a step's pre before its post; `_judge_adjoint`)."""
        if not self.adjoint_check or self._taps is None:
            return
        start, end = self._segment_range(seg)
        if what == "end":
            self._end_pre[end] = float(self._taps.measure(end - start, 0))
            return
        first = float(self._taps.measure(0, 1))     # one launch, then one read
        sizes = self._taps.sizes()
        for p in sorted(self._probe_steps(seg, start, end), reverse=True):
            m, frame = self._taps.index(p - start), self._has_frame(p)
            post = first if p == start else float(sizes[m, 1])
            pre = self._end_pre.pop(p) if p == end and frame else (float(sizes[m, 0]) if frame else post)
            self._adjoint_seen += [(p, pre, False), (p, post, True)]
        if seg == 0:
            self._taps.dirty = False
            seen, self._adjoint_seen = self._adjoint_seen, []
            for step, a, post in seen:
                self._judge_adjoint(step, max(a, 0.0), a < 0, post)

    def _judge_adjoint(self, step, a, bad, post):
        """Raise GradientError if the adjoint at `step` is non-finite or grew too fast (`AdjointHealth.judge`)."""
        self._health.judge(step, a, bad, post, dt=self.dt, steps=self.steps, rate=self.adjoint_growth_rate,
                           allowance=self.adjoint_growth_allowance, error=self._gradient_error)

    @property
    def adjoint_trace(self) -> list:
        """(step, max |adjoint| before / after the observers at that step) read by the last backward pass."""
        return self._health.trace

    def _gradient_error(self, what):
        rt = impl.get_runtime()
        if rt.target_tape is not None and hasattr(rt.target_tape, "eval_on_exit"):
            rt.target_tape.eval_on_exit = False
        report = self.stability_report()
        if report.rows:
            w = min(report.rows, key=lambda r: r.dt_limit)
            cause = (f"likely cause: {w.term} at {w.element} is at dt / limit = {self.dt / w.dt_limit:.3g} of its "
                     f"explicit-integration limit ({w.detail}; stable below dt = {w.dt_limit:.4g} s, safe below "
                     f"{report.dt_safe:.4g} s)")
            if report.ok:
                cause += ("; every term is within its safe limit, so the dynamics may be chaotic over this horizon "
                          "(shorten it, add damping, or raise sim.adjoint_growth_rate if this growth is physical)")
        else:
            cause = ("likely cause: not an explicit-integration limit (no force term reports one); look at the loss "
                     "and the observers (a norm or square root at 0 has a NaN gradient)")
        return GradientError(f"{what}: the gradient cannot be trusted; {cause}. "
                             "Simulator(adjoint_check=False) turns this check off")

    def slot(self, t: int) -> int:
        """Slot of step t in `state` (full-storage mode only)."""
        if self.checkpointing:
            raise RuntimeError("slot(): in checkpointed mode only the current segment is stored; use an observer")
        return int(t)

    def final_state(self, name: str = "particle_q") -> np.ndarray:
        """State `name` after the last step, as numpy (both modes)."""
        last = self.steps - (self.segment_count - 1) * self.segment_length
        return getattr(self.state, name).to_numpy()[last]

    # -- segments -------------------------------------------------------------
    def _segment_range(self, seg):
        start = seg * self.segment_length
        return start, min(start + self.segment_length, self.steps)

    def _segment_forward(self, seg, check=True):
        start, end = self._segment_range(seg)
        self.model.use_dt(self.dt)       # implicit contact damping reads it (also in a checkpointed recompute)
        self._clear_op()
        if seg == 0:
            self._load_initial()
        else:
            self._restore(seg)
        probe = self._probing()
        probe_steps = self._probe_steps(seg, start, end) if probe else ()
        tap_end = end - start if probe else -1       # the step kernels tap the watched slots
        if probe:                        # backward: after the segment's steps and step 0's observers
            self._adjoint_op("segment", seg)
        self._notify(start, 0)
        checked = 0                      # first slot not yet checked for non-finite values
        t = start
        while t < end:
            stop = min(end, self._next_frame(t), start + checked + self.check_every if check else end)
            # a watched step where an observer fires: its pre tapped before the run's first step
            pre_tap = self._taps.index(t - start) if t in probe_steps and self._has_frame(t) else -1
            if self.fused and self._broad_phases:
                for k in range(t, stop):
                    self._broad_fused_op(k - start, k, 1, tap_end, pre_tap if k == t else -1)
            elif self.fused:
                self._fused_op(t - start, t, stop - t, tap_end, pre_tap)
            else:                        # the taps read between the launches
                for k in range(t, stop):
                    if k == t and pre_tap >= 0:
                        self._record_op("pre", k - start, pre_tap)
                    if self._broad_phases:
                        self._broad_step_op(k - start, k)
                    else:
                        self._substep(k - start, k)
                    if probe and self._taps.is_watched(k + 1 - start, tap_end):
                        self._record_op("post", k + 1 - start, self._taps.index(k + 1 - start))
            self._notify(stop, stop - start)  # no observer has a frame before `stop`
            if probe and stop == end and self._has_frame(end):    # the end's pre: before its observers' gradient
                self._adjoint_op("end", seg)
            if check and (stop - start - checked >= self.check_every or stop == end):
                self._check_op(checked, stop - start + 1, start)
                checked = stop - start + 1
            t = stop
        if self.checkpointing:
            self._save(end - start, seg + 1)

    @property
    def fused(self) -> bool:
        """Whether a run of steps is one kernel launch (see `fuse_steps`)."""
        if self.fuse_steps is not None:
            return bool(self.fuse_steps)
        return all(getattr(loop, "serial", False) for loop, _ in self._loops())

    @property
    def reverse_per_step(self) -> bool:
        """Whether the backward pass of a fused run launches the reverse of each step on its own
        (`_fused_backward`): where some term's reverse loop runs on threads (`StepTerm.parallel_reverse`),
        which a loop nested in the fused step loop cannot."""
        return any(getattr(loop, "parallel_reverse", False) for loop, _ in self._loops())

    def _fused_backward(self, s0, t0, count, tap_end, pre_tap):
        """Reverse of `count` fused steps from slot s0 (step t0): the fused kernel's own reverse, or, where a
        term's reverse runs on threads (`reverse_per_step`), each step's reverse launched on its own, last
        step first (the same derivatives: every step reads its state at its own slot)."""
        self.model.use_dt(self.dt)       # another Simulator of the model may have run since the forward pass
        if self.reverse_per_step:
            for k in reversed(range(count)):         # the fused kernel's taps, read around each step
                if self._taps is not None and self._taps.is_watched(s0 + k + 1, tap_end):
                    self._record_tap("post", s0 + k + 1, self._taps.index(s0 + k + 1))
                self._substep.grad(s0 + k, t0 + k)
            if pre_tap >= 0:
                self._record_tap("pre", s0, pre_tap)
        else:
            self._substeps.grad(s0, t0, count, tap_end, pre_tap)

    def _broad_then(self, launch, s, t, *rest):
        """Every broad phase's pairs from slot s (step t), then `launch(s, t, *rest)`: a step, or its reverse."""
        self.model.use_dt(self.dt)
        for broad in self._broad_phases:
            broad.build(self.state, s, t)
        launch(s, t, *rest)

    def _next_frame(self, t):
        """The first step after t at which an observer records a frame (a fused run stops there)."""
        nxt = [n for n in (obs.next_step(t) for obs in self._observers) if n is not None]
        return min(nxt) if nxt else self.steps

    def _segment_backward(self, seg):
        rt = impl.get_runtime()
        outer_tape, outer_replaced = rt.target_tape, rt.grad_replaced
        recorder = _Recorder()
        rt.target_tape, rt.grad_replaced = recorder, False
        try:
            self._segment_forward(seg, check=False)
        finally:
            rt.target_tape, rt.grad_replaced = outer_tape, outer_replaced
        self._clear_grads()
        recorder.replay_grad()

    def _notify(self, t, slot):
        for obs in self._observers:
            frame = obs.frame(t)
            if frame is not None:
                obs.fn(self.state, slot, frame)

    def _check_finite_range(self, s0, s1, t0):
        self._bad_step[None] = 1 << 30
        self._find_nonfinite(s0, s1)
        bad = int(self._bad_step[None])
        if bad < (1 << 30):
            rt = impl.get_runtime()
            if rt.target_tape is not None and hasattr(rt.target_tape, "eval_on_exit"):
                rt.target_tape.eval_on_exit = False
            step = t0 + bad
            raise SimulationError(
                f"the simulation became non-finite at step {step} (t = {step * self.dt:.6g} s, dt = {self.dt:g} s); "
                f"try a smaller time step (e.g. dt = {self.dt / 4:g}) or softer stiffness / contact ke")

    # -- kernels --------------------------------------------------------------
    def _build_field_lists(self):
        st, ck = self.state, self.checkpoints
        kinds = self.state.kinds
        self._initial_pairs = [(getattr(st, k.name), k.initial) for k in kinds if k.initial is not None]
        self._stored = [getattr(st, k.name) for k in kinds if not k.accumulator]
        self._accumulators = [getattr(st, k.name) for k in kinds if k.accumulator]
        self._checkpoint_pairs = [(getattr(st, k.name), getattr(ck, k.name)) for k in kinds if not k.accumulator] \
            if ck is not None else []

    @ti.kernel
    def _substep(self, s: ti.i32, t: ti.i32):
        for loop in ti.static(self._loops()):
            self._run_loop(loop, s, t)

    @ti.kernel
    def _substeps(self, s0: ti.i32, t0: ti.i32, count: ti.i32, tap_end: ti.i32, pre_tap: ti.i32):
        """`count` substeps from slot s0 (step t0) in one launch: for serial loops only.  Taps
        (`AdjointTaps`): the slots written that are watched (tap_end >= 0), and slot s0's pre tap
        before the first step where pre_tap >= 0."""
        loops = ti.static(self._loops())
        taps = ti.static(self._tap_pairs)
        loop_count, tap_count = ti.static(len(loops), len(taps))
        ti.loop_config(serialize=True)
        for _ in range(1):               # one serial task; the step loop is nested, so it is reversed
            for k in range(count):
                for phase in range(ti.static(tap_count + loop_count + tap_count)):
                    for j in ti.static(range(tap_count)):
                        if phase == j:   # one loop per block: see the module docstring
                            self._taps.subtract(taps[j][0], taps[j][1], s0, pre_tap,
                                                ti.cast(k == 0 and pre_tap >= 0, ti.i32))
                    for j in ti.static(range(loop_count)):
                        if phase == tap_count + j:
                            self._run_loop(loops[j], s0 + k, t0 + k)
                    for j in ti.static(range(tap_count)):
                        if phase == tap_count + loop_count + j:
                            self._taps.subtract(taps[j][0], taps[j][2], s0 + k + 1, self._taps.tap_index(s0 + k + 1),
                                                self._taps.watched(s0 + k + 1, tap_end))

    def _loops(self):
        """(term, is_integrator) for every loop of a step, in order: force terms, then integrators."""
        return [(term, False) for term in self.force_terms] + [(integ, True) for integ in self.integrators]

    @ti.func
    def _run_loop(self, loop: ti.template(), s: ti.template(), t: ti.template()):
        if ti.static(loop[1]):
            loop[0].integrate(self.state, s, t, self.dt)
        else:
            loop[0].apply_forces(self.state, s, t)

    @ti.kernel
    def _load_initial(self):
        for pair in ti.static(self._initial_pairs):
            ti.loop_config(serialize=ti.static(serial_loop(pair[1].shape[0])))
            for i in range(pair[1].shape[0]):
                pair[0][0, i] = pair[1][i]

    @ti.kernel
    def _restore(self, seg: ti.i32):
        for pair in ti.static(self._checkpoint_pairs):
            ti.loop_config(serialize=ti.static(serial_loop(pair[0].shape[1])))
            for i in range(pair[0].shape[1]):
                pair[0][0, i] = pair[1][seg, i]

    @ti.kernel
    def _save(self, s: ti.i32, seg: ti.i32):
        for pair in ti.static(self._checkpoint_pairs):
            ti.loop_config(serialize=ti.static(serial_loop(pair[0].shape[1])))
            for i in range(pair[0].shape[1]):
                pair[1][seg, i] = pair[0][s, i]

    def _clear_accumulators(self):
        if self._accumulators:
            zero_fields(tuple(self._accumulators))

    def _clear_grads(self):
        if self.model.requires_grad:
            zero_fields(tuple(fld.grad for fld in self.state.fields()))

    @ti.kernel
    def _find_nonfinite(self, s0: ti.i32, s1: ti.i32):
        for fld in ti.static(self._stored):
            # s1 - s0 <= check_every + 1 (_segment_forward)
            ti.loop_config(serialize=ti.static(serial_loop(fld.shape[1] * (self.check_every + 1))))
            for s, i in ti.ndrange((s0, s1), fld.shape[1]):
                if not (as_tensor(fld, ti.abs(fld[s, i])) <= 1e30).all():
                    ti.atomic_min(self._bad_step[None], s)
