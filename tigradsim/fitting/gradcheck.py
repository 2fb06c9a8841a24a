"""Check Tape gradients against central finite differences along random directions.

Taichi's reverse mode can be wrong without any error (DESIGN.md section 5), so
every differentiable piece of tigradsim is tested with `check_gradient`, in
float64 (`tgs.init(precision="f64")`).
"""
from __future__ import annotations

from dataclasses import dataclass, field as dc_field
from typing import Callable, Sequence

import numpy as np

from ..core.aliases import renamed_keyword
from ..core.model import has_grad
from ..core.runtime import precision
from ..core.tape import tape


@dataclass
class GradCheckReport:
    """Directional derivatives: `analytic[k]` from the Tape, `numeric[k]` from finite differences."""

    analytic: list = dc_field(default_factory=list)
    numeric: list = dc_field(default_factory=list)
    rel_errors: list = dc_field(default_factory=list)
    rtol: float = 1e-5
    atol: float = 1e-10

    @property
    def max_rel_error(self) -> float:
        return max(self.rel_errors) if self.rel_errors else 0.0

    @property
    def ok(self) -> bool:
        return self.max_rel_error <= self.rtol

    def __str__(self):
        rows = [f"  dir {k}: tape {a:+.10e}  fd {n:+.10e}  rel.err {e:.2e}"
                for k, (a, n, e) in enumerate(zip(self.analytic, self.numeric, self.rel_errors))]
        return f"gradient check (rtol {self.rtol:g}): max rel. error {self.max_rel_error:.3e}\n" + "\n".join(rows)

    def assert_ok(self):
        if not self.ok:
            raise AssertionError(str(self))
        return self


def _record(report, analytic, numeric, atol, typical=0.0):
    """Append one direction's derivatives and their relative difference to `report`.

    The difference is relative to the larger of the two derivatives and `typical`, the size of a
    derivative along a random unit direction (|gradient| / sqrt(dimension)): a direction nearly
    orthogonal to the gradient has a tiny derivative, and finite differences carry an absolute
    round-off error on the scale of the whole gradient (measured in float32: 3.6e-4 of it on a correct
    gradient, 1.2e-2 of a direction's derivative 34x smaller than typical)."""
    denom = max(abs(analytic), abs(numeric), typical)
    report.analytic.append(analytic)
    report.numeric.append(numeric)
    report.rel_errors.append(0.0 if denom < atol else abs(analytic - numeric) / denom)


def _as_list(params):
    return list(params) if isinstance(params, (list, tuple)) else [params]


def default_eps() -> float:
    """The finite-difference step (relative to each field's scale) for the current precision.

    Central differences err by ~ eps^2 |f^(3)| (truncation) + u |f| / eps (round-off, u the unit
    round-off), smallest at eps ~ cbrt(u): in float32 (u = 1.2e-7) that is ~5e-3; 1e-6 there is
    below the loss's resolution (the issue measured a relative error of 0.87 on a correct
    gradient).  float64 keeps 1e-6 (cbrt(2.2e-16) = 6e-6), as every test of the library uses.
    """
    if precision() == "f32":
        return float(np.cbrt(np.finfo(np.float32).eps))
    return 1e-6


def default_rtol() -> float:
    """The relative tolerance of a gradient check for the current precision: 2 cbrt(machine epsilon),
    1.2e-5 in float64 and 9.8e-3 in float32.

    At the default step (`default_eps`) central differences themselves err by ~ eps_machine^(2/3)
    relative (2.4e-5 in float32), but a rollout's loss and its Tape gradient also carry round-off
    that the dynamics amplify: a correct float32 gradient of the README tour's particles differs from
    its finite differences by ~5e-4 (issue 45), so float64's 1e-5 would fail it.  2 cbrt(eps) keeps
    float64 at the library's usual 1e-5 and leaves float32 a factor ~20 above that round-off, while
    a wrong gradient (scaled by 1.1: 0.09; a component's sign flipped: typically > 0.1) still fails.
    """
    eps = np.finfo(np.float32 if precision() == "f32" else np.float64).eps
    return float(2.0 * np.cbrt(eps))


def _check_differentiable(loss, params):
    """Clear errors for fields the Tape cannot differentiate (before anything runs)."""
    if not has_grad(loss) or not hasattr(loss, "shape") or tuple(loss.shape) != ():
        raise ValueError(f"loss: expected a 0-D Taichi field with needs_grad=True, got {type(loss).__name__}"
                         f"{' of shape ' + str(tuple(loss.shape)) if hasattr(loss, 'shape') else ''}"
                         f"{'' if has_grad(loss) else ' without a gradient'}")
    for k, p in enumerate(params):
        if not hasattr(p, "to_numpy"):
            raise TypeError(f"params[{k}]: expected a Taichi field, got {type(p).__name__}")
        if not has_grad(p):
            raise ValueError(f"params[{k}]: the field has no gradient (needs_grad=False); was the model finalized "
                             "with requires_grad=False?  Use SceneBuilder.finalize(requires_grad=True) (or name this parameter in "
                             "requires_grad=...) to check gradients")


def check_gradient(run: Callable[[], None], loss, params: Sequence, direction_count: int | None = None,
                   eps: float | None = None, rtol: float | None = None, atol: float = 1e-10, seed: int = 0,
                   scale: Sequence | None = None, masks: Sequence | None = None,
                   n_dirs: int | None = None) -> GradCheckReport:
    """Compare the Tape gradient of `loss` with central differences.

    Args:
        run: launches every kernel that computes `loss` from `params`; it must
            recompute from scratch each call (accumulators it uses are reset by
            it or are the loss itself, which is zeroed here).
        loss: 0-D Taichi field with needs_grad.
        params: Taichi fields with needs_grad (one or a list).
        direction_count: number of random directions (3; `n_dirs=` is its older name).
        eps: finite-difference step along a unit-norm direction (times `scale`); None:
            `default_eps()`, ~cbrt(machine epsilon): 1e-6 in float64, 4.9e-3 in float32.
        rtol, atol: the relative tolerance (None: `default_rtol()`, from the precision:
            1.2e-5 in float64, 9.8e-3 in float32), and the magnitude below which both
            derivatives count as zero.
        scale: per-field step multipliers; default: each field's RMS value
            (at least 1e-3), so parameters of very different sizes (a
            stiffness of 1e4, a position of 0.1) get comparable relative steps.
        masks: per-field numpy arrays of 0/1 (or None) restricting the directions.
    Returns:
        GradCheckReport (call `.assert_ok()` in tests).
    """
    direction_count, _ = renamed_keyword("direction_count", direction_count, "n_dirs", n_dirs, 3, "check_gradient")
    params = _as_list(params)
    _check_differentiable(loss, params)
    eps = default_eps() if eps is None else float(eps)
    rtol = default_rtol() if rtol is None else float(rtol)
    masks = list(masks) if masks is not None else [None] * len(params)
    rng = np.random.default_rng(seed)
    base = [p.to_numpy() for p in params]
    if scale is None:
        scale = [max(float(np.sqrt(np.mean(np.square(b.astype(np.float64))))), 1e-3) for b in base]
    scale = list(scale)

    def set_values(values):
        for p, v, b in zip(params, values, base):
            p.from_numpy(np.array(v, dtype=b.dtype, order="C").reshape(b.shape))

    def evaluate(values):
        set_values(values)
        loss[None] = 0
        run()
        return float(loss[None])

    set_values(base)
    with tape(loss):
        run()
    grads = [p.grad.to_numpy().astype(np.float64) for p in params]

    report = GradCheckReport(rtol=rtol, atol=atol)
    # per-field 0/1 masks broadcast to the field's shape (the directions' support)
    support = [np.ones(b.shape) if m is None else
               np.broadcast_to(np.asarray(m, dtype=np.float64).reshape(np.shape(m) + (1,) * (b.ndim - np.ndim(m))), b.shape)
               for b, m in zip(base, masks)]
    dimension = max(sum(int(np.count_nonzero(w)) for w in support), 1)
    typical = float(np.sqrt(sum(float(np.sum((g * s * w) ** 2)) for g, s, w in zip(grads, scale, support)) / dimension))
    for _ in range(direction_count):
        dirs = [np.asarray(rng.standard_normal(b.shape)) * w * s for b, w, s in zip(base, support, scale)]
        norm = np.sqrt(sum(float(np.sum((d / s) ** 2)) for d, s in zip(dirs, scale))) or 1.0
        dirs = [d / norm for d in dirs]
        analytic = sum(float(np.sum(g * d)) for g, d in zip(grads, dirs))
        plus = evaluate([b + eps * d for b, d in zip(base, dirs)])
        minus = evaluate([b - eps * d for b, d in zip(base, dirs)])
        _record(report, analytic, (plus - minus) / (2 * eps), atol, typical)
    set_values(base)
    return report


def check_param_gradient(run: Callable[[], None], loss, param, direction_count: int | None = None,
                         eps: float | None = None, rtol: float | None = None, atol: float = 1e-10, seed: int = 0,
                         n_dirs: int | None = None) -> GradCheckReport:
    """Check a `tgs.Param`'s chain rule: `param.internal_grad()` (after a Tape of
    `run`) against central differences of the loss in the optimiser's coordinates
    (`param.to_internal(param.value())`, written back with `param.write(param.from_internal(x))`).

    For reparametrised parameters (a subclass that maps a few numbers, or smoothed
    steps, onto a field) this tests their hand-written `internal_grad`; the Tape
    part is as in `check_gradient`.  Directions are unit-norm; eps is absolute (None: `default_eps()`);
    rtol None: `default_rtol()`.  direction_count: number of random directions (3; `n_dirs=` is its
    older name).
    """
    direction_count, _ = renamed_keyword("direction_count", direction_count, "n_dirs", n_dirs, 3,
                                         "check_param_gradient")
    eps = default_eps() if eps is None else float(eps)
    rtol = default_rtol() if rtol is None else float(rtol)
    rng = np.random.default_rng(seed)
    x0 = np.asarray(param.to_internal(param.value()), dtype=np.float64)

    def set_x(x):
        param.write(param.from_internal(x))

    def evaluate(x):
        set_x(x)
        loss[None] = 0.0
        run()
        return float(loss[None])

    set_x(x0)
    with tape(loss):
        run()
    grad = np.asarray(param.internal_grad(), dtype=np.float64).reshape(x0.shape)
    report = GradCheckReport(rtol=rtol, atol=atol)
    typical = float(np.linalg.norm(grad)) / np.sqrt(max(grad.size, 1))
    for _ in range(direction_count):
        d = rng.standard_normal(x0.shape)
        d /= np.linalg.norm(d) or 1.0
        analytic = float(np.sum(grad * d))
        _record(report, analytic, (evaluate(x0 + eps * d) - evaluate(x0 - eps * d)) / (2 * eps), atol, typical)
    set_x(x0)
    return report
