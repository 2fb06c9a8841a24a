"""Taichi runtime set-up and the autodiff helpers every module uses.

`init` wraps `ti.init` with the settings tigradsim needs.  `custom_op` turns a
pair of Python functions (forward, backward) into one entry on `ti.ad.Tape`,
which is how composite operations (a checkpointed segment of a rollout, a
rendered frame that re-uses scratch buffers) keep their gradients right.
"""
from __future__ import annotations

import atexit
import contextlib
import os
import sys

import numpy as np
import taichi as ti
from taichi.lang import impl

from . import affinity
from taichi.lang.enums import AutodiffMode

_ARCHS = {"cpu": "cpu", "cuda": "cuda", "vulkan": "vulkan", "gpu": "gpu", "metal": "metal", "opengl": "opengl"}
_PRECISIONS = {"f32": ti.f32, "f64": ti.f64}

# Stack size for locals carried through loops under reverse-mode AD.  Taichi's
# default overflows for loops of 34+ passes (DESIGN.md section 5, rule 5).
AD_STACK_SIZE = 256

OFFLINE_CACHE_BYTES = 2 ** 30

_state = {"initialized": False, "precision": "f32", "arch": "cpu", "scatter": "auto", "deterministic": True}
_SCATTER_MODES = ("auto", "parallel", "serial", "parts")
# "auto" scatters serially on CPUs with at most this many threads: there atomic adds from
# threads are slower than one thread's plain adds (benchmarks/MEASURED.md, "Moved from the code").
SERIAL_SCATTER_MAX_THREADS = 4


def init(arch: str = "cpu", precision: str = "f32", debug: bool = False, seed: int = 0, scatter: str = "auto",
         deterministic=None, pin_threads=False, **kwargs):
    """Initialise Taichi for tigradsim.

    Args:
        arch: "cpu", "cuda", "vulkan", "metal", "opengl" or "gpu" (best available).
        precision: "f32" or "f64"; every float field tigradsim creates uses it.
        debug: Taichi debug mode (bounds checks; use with `Tape(validation=True)`).
        seed: seed of Taichi's random number generator and of numpy's global one.
        scatter: how element loops (springs, tets, cloth triangles and bending edges) add
            their forces into shared particles: "parallel" (threads, atomic adds),
            "serial" (one thread, plain adds), "parts" (threads, per-part force buffers, no
            atomic adds into particles, bit-reproducible: `tigradsim.exec.parts`) or "auto"
            (see `serial_scatter` and `tigradsim.exec.loops.element_path`: on CPUs, parts for
            large element sets, serial otherwise; parallel on GPUs).
        deterministic: every rollout, rendered frame, loss and gradient bit-reproducible
            (reductions that would sum in a thread-dependent order run in a fixed order);
            None: True on CPUs, False on GPUs (where it would cost most).  See `deterministic()`.
        pin_threads: pin Taichi's CPU worker threads one to each CPU (`tigradsim.core.affinity`:
            without it a parallel loop often ran on one CPU, and a step took up to 1.4x longer on
            average).  For one process that has the machine to itself (a fit, a benchmark); not for
            several Taichi processes at once (pytest -n, a sweep in a process pool), where a pinned
            worker waits for a CPU another process holds instead of moving to a free one (the test
            suite on 2 workers took over twice as long).  True: pin, or raise where a CPU arch's
            workers cannot be pinned (GPU archs have none: nothing to pin, no error); "auto": pin
            where it can be done (a CPU arch, Linux, 2 or more workers and as many as the
            CPUs this process may use: Taichi's default, or `taskset` for one process among several),
            else leave them; False (default): leave them.  `pinned_threads()` tells what
            was done and why.  Results are the same bits either way.
        kwargs: passed on to `ti.init` (they override the defaults above).  One that matters for
            contact scenes: `advanced_optimization=False` (or the environment variable
            TI_ADVANCED_OPTIMIZATION=0) skips Taichi's own IR passes and leaves optimising to LLVM:
            the reverse step of a box resting on a box compiled in 26 s instead of 186 s, but the
            reverse kernels then use AD stacks (tests/test_no_ad_stacks.py fails) and a step's run time
            moved by up to 2x either way; benchmarks/compile_time.py times both side by side.  A cloth
            then runs one element at a time, never in lanes (`ir_passes`, `physics.cloth`).
    Calling `init` again resets Taichi: fields created before are gone.
    """
    if arch not in _ARCHS:
        raise ValueError(f"init: arch={arch!r} is not one of {sorted(_ARCHS)}")
    if precision not in _PRECISIONS:
        raise ValueError(f"init: precision={precision!r} is not one of {sorted(_PRECISIONS)}")
    if scatter not in _SCATTER_MODES:
        raise ValueError(f"init: scatter={scatter!r} is not one of {_SCATTER_MODES}")
    if not (pin_threads == "auto" or isinstance(pin_threads, bool)):
        raise ValueError(f"init: pin_threads={pin_threads!r} is not one of 'auto', True, False")
    options = dict(
        arch=getattr(ti, _ARCHS[arch]),
        default_fp=_PRECISIONS[precision],
        default_ip=ti.i32,
        debug=debug,
        random_seed=seed,
        ad_stack_size=AD_STACK_SIZE,
        offline_cache=True,
        log_level=ti.WARN,
    )
    # Taichi's default cap (100 MB, oldest quarter dropped when over) is smaller than the kernels of
    # the demos and tests together (~110 MB measured), so it kept recompiling them.  Taichi's own
    # environment variable, where set, wins (a ti.init keyword would override it): the test suite's
    # cache needs more (tests/conftest.py).
    if not os.environ.get("TI_OFFLINE_CACHE_MAX_SIZE_OF_FILES"):
        options["offline_cache_max_size_of_files"] = OFFLINE_CACHE_BYTES
    options.update(kwargs)
    # ti.init prints "[Taichi] Starting on arch=..." on stdout; scripts and demos keep stdout for
    # their results (a JSON last line), so it goes to stderr.
    threads_before = affinity.thread_ids()
    with contextlib.redirect_stdout(sys.stderr):
        ti.init(**options)
    cfg = impl.current_cfg()
    if pin_threads is False:
        affinity.unpinned("init(pin_threads=False), the default")
    elif cfg.arch != ti.cpu:
        affinity.unpinned(f"arch {arch}: no CPU thread pool")
    else:
        affinity.pin_workers(affinity.thread_ids() - threads_before, cfg.cpu_max_num_threads,
                             required=pin_threads is True)
    _reset_stale_validation_kernels()
    if not _state.get("cache_on_exit"):
        atexit.register(_write_offline_cache)
        _state["cache_on_exit"] = True
    np.random.seed(seed)
    if deterministic is None:
        deterministic = arch == "cpu"
    _state.update(initialized=True, precision=precision, arch=arch, scatter=scatter,
                  deterministic=bool(deterministic))
    _state["init_kwargs"] = dict(arch=arch, precision=precision, debug=debug, seed=seed, deterministic=deterministic,
                                 pin_threads=pin_threads, **kwargs)


def ir_passes() -> bool:
    """Whether Taichi compiles with its own IR passes (`init(advanced_optimization=...)`, default True)."""
    return bool(impl.current_cfg().advanced_optimization)


def init_settings() -> dict:
    """The keyword arguments of the last `init`, scatter as it is now (`set_scatter` may have changed it):
    what another process passes to `init` to run the same program (tigradsim/scenes/variant_process.py);
    {} before any `init`."""
    if not _state["initialized"]:
        return {}
    return dict(_state["init_kwargs"], scatter=_state["scatter"])


def _write_offline_cache():
    """At exit: `ti.reset()`, which writes the kernels compiled since the last reset to Taichi's offline
    cache.  Taichi 1.7.4 writes it at a reset (a later `ti.init` included) but not when the interpreter
    exits, so a script that initialised once (a demo, a benchmark, a fit) compiled every kernel again
    on its next run (measured: a 64 px silhouette renderer's first frame and backward 3.9 s every run;
    1.1 s with the cache)."""
    if impl.get_runtime().prog is None:
        return
    try:
        ti.reset()
    except Exception as exc:       # the interpreter is going down: say so, do not raise
        print(f"tigradsim: writing Taichi's offline cache at exit failed: {exc!r}", file=sys.stderr)


def _reset_stale_validation_kernels():
    """Put kernels that `ti.ad.Tape(validation=True)` left in validation mode back in forward mode.

    Taichi 1.7.4's Tape restores each recorded kernel's mode in recording order, so a kernel recorded
    twice (a recorder called every frame) ends in the mode it had at its second recording: validation.
    Kernel objects outlive `ti.init`, so later rollouts ran checked kernels outside any tape, and a later
    checkpointed validation tape failed on the observer's replay ("Snode ... is overwritten
    unexpectedly"; test_cloth after test_scatter_colour on one worker).  A scan of live objects, ~11 ms.
    """
    import gc
    from taichi.lang.enums import AutodiffMode
    from taichi.lang.kernel_impl import Kernel
    for obj in gc.get_objects():
        if isinstance(obj, Kernel) and obj.autodiff_mode == AutodiffMode.VALIDATION:
            obj.autodiff_mode = AutodiffMode.NONE


def ensure_init():
    """Initialise with defaults if the user has not called `init` yet."""
    if not _state["initialized"]:
        init()


def set_scatter(mode: str):
    """Change the scatter mode (see `init`) for force terms built from now on."""
    if mode not in _SCATTER_MODES:
        raise ValueError(f"set_scatter: mode={mode!r} is not one of {_SCATTER_MODES}")
    _state["scatter"] = mode


def serial_scatter() -> bool:
    """Whether element loops that add forces into shared particles run on one thread.

    On a CPU, Taichi adds floats atomically with a compare-and-swap loop (~5 ns per
    float, a vec3 ~16 ns) and the reverse pass does the same for every adjoint; in a
    serial loop it demotes those atomics to plain adds, which is faster than two
    threads doing atomics (benchmarks/bench_cloth.py --compare measures
    both).  The step's per-particle and per-body loops (contact, integrators,
    external forces) follow the same choice: on such a CPU, handing a loop to the
    thread pool cost 16 us at best and ~120 us on average (kernel profiler, cloth
    32x32, 2 cores), more than the loop's work (1,089 particles: ~10 us), and a
    substep made only of serial loops is one task.  GPUs have native atomics and
    thousands of threads: "auto" keeps their loops parallel, and so does a CPU with
    more than SERIAL_SCATTER_MAX_THREADS threads, unless `deterministic()`: parallel
    scatter adds into shared particles in a thread-dependent order, so "auto" is serial
    whenever results must be bit-reproducible (an explicit "parallel" still gives
    parallel loops and gives up bitwise reproducibility of the physics).  Read when a
    force term is built (model finalize).
    """
    mode = _state["scatter"]
    if mode in ("auto", "parts"):   # parts: element loops only (exec.loops.element_path)
        if _state["deterministic"]:
            return True
        cfg = impl.current_cfg()
        return cfg.arch == ti.cpu and cfg.cpu_max_num_threads <= SERIAL_SCATTER_MAX_THREADS
    return mode == "serial"


# Bookkeeping loops over at most this many entries run on one thread on CPUs (`serial_loop`).
SERIAL_LOOP_MAX = 32768


def serial_loop(count: int, cost: int = 1) -> bool:
    """Whether a small loop over `count` entries should run on one thread: on CPUs when
    count * cost <= SERIAL_LOOP_MAX, `cost` being the body's work per entry relative to
    copying one vector (~1-2 ns).  Handing a loop to the thread pool costs ~50 us on this
    2-core machine (kernel profiler; 5-20 us at best), more than a serial pass over a
    64x64 frame: on a one-box rollout of 1,920 steps such loops were half the kernel time
    of forward + backward, in a 64 px silhouette fit of one box 40 % of an iteration.
    GPUs keep every loop parallel (one GPU thread would do all the work).  Compile time:
    `ti.loop_config(serialize=ti.static(serial_loop(n)))`."""
    return impl.current_cfg().arch == ti.cpu and count * cost <= SERIAL_LOOP_MAX


def scatter_mode() -> str:
    """The scatter mode of `init` / `set_scatter`: "auto", "parallel", "serial" or "parts"."""
    return _state["scatter"]


def deterministic() -> bool:
    """Whether kernels must sum in a fixed order (`init(deterministic=...)`): loops that
    reduce floats into shared locations (a loss, a pixel's sums, a vertex's adjoint) run
    serially, or in a fixed order, when this is True.  Read when a kernel is compiled."""
    return bool(_state["deterministic"])


def precision() -> str:
    """"f32" or "f64": the precision chosen in `init`."""
    return _state["precision"]


def np_float():
    """The numpy float type matching the Taichi default float."""
    return np.float64 if _state["precision"] == "f64" else np.float32


def custom_op(forward, backward):
    """Make `forward(*args)` one differentiable entry on the active `ti.ad.Tape`.

    Kernels launched inside `forward` are not recorded on the tape; instead the
    tape calls `backward(*args)` when it runs in reverse.  Unlike
    `ti.ad.grad_replaced`, ops nest: an op called inside another op runs its
    forward only, and the outer op's backward decides how to differentiate it
    (usually by calling `inner.grad(*args)`).
    """

    def op(*args):
        rt = impl.get_runtime()
        outer = rt.grad_replaced
        if rt.target_tape is not None and not outer:
            rt.target_tape.insert(op, args)
        rt.grad_replaced = True
        try:
            forward(*args)
        finally:
            rt.grad_replaced = outer

    op.grad = backward
    op.autodiff_mode = AutodiffMode.NONE
    op.__name__ = getattr(forward, "__name__", "custom_op")
    op.__doc__ = forward.__doc__
    return op


def no_grad(fn):
    """Run `fn` inside a tape without recording it (its gradient is zero)."""
    return custom_op(fn, lambda *args: None)
