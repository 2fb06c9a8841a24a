"""Uncertainty of a least-squares estimate (Gauss-Newton), and what the data cannot determine.

At the optimum of L = 1/2 |r(theta)|^2 (N residuals, p parameter values):

    cov(theta) ~ s^2 (J^T J)^-1,     s^2 = max(2 L / (N - p), noise_floor)

with J = dr/dtheta in the optimiser's coordinates (log(value) for a log-space
Param), taken by central finite differences of the residual function (2 p
rollouts; one-sided next to a bound, because `Param.from_internal` clamps there).
`s^2` is the residual variance per residual value; a synthetic fit that reaches
zero residual would give zero-width intervals, so it is floored by `noise_floor`
(default `PIXEL_8BIT_VARIANCE` = (1/255)^2 / 12, the variance of rounding a
pixel value in [0, 1] to 8 bits: the least noise any 8-bit video carries; for
residuals in other units, e.g. positions in metres, pass your measurement
variance, or 0).  The report gives both numbers.

Per parameter value: the estimate, its standard error `std` (in log units where
log_space), and an approximate 95% interval, theta +- 1.96 std, i.e. a
multiplicative interval value x/ exp(1.96 std) in log space.  A value whose std
exceeds `undetermined_std` (log units: 0.5 means the 95% interval spans a factor
exp(1.96) = 7 either way; for a linear Param, relative to max(|value|, 0.1 (upper -
lower)), or to max(|value|, 1e-12) when unbounded) is reported "undetermined"
instead of a number.

Eigen-decomposition of J^T J = V diag(lambda) V^T: the combination of
parameters along an eigenvector v_k is determined to std s / sqrt(lambda_k).  A
direction is reported as one the data cannot determine when
    lambda_k <= rel_eig_tol * lambda_max   (numerically singular: 1e-12 for
        float64 residuals, 1e-5 for float32, the FD Jacobian's round-off level), or
    s / sqrt(lambda_k) > undetermined_std   (large against the noise),
and named by its coefficients: for log-space values, moving along it multiplies
each value by t^c (e.g. mass, ke, kd and kf all with c = 1: "mass, ke, kd, kf
scale together"; a and b with c = 1, -1: "only a * b is determined").  Values with
a weight |v_ik| > `null_weight` on a numerically singular direction get an
infinite std (undetermined); smaller weights there are round-off and are dropped
(pseudo-inverse), so a parameter outside the null space (mu when only mass, ke,
kd, kf scale together) keeps its finite std.

Correlated residuals (`groups`): s^2 (J^T J)^-1 takes the N residuals as independent.
Pixels of one video frame are not: a model mismatch (time step, contact law, camera,
shading) moves whole silhouette edges, so the errors of a frame's pixels share a sign,
and with N ~ 1e5 pixels the iid intervals come out ~0.1 % wide against errors of 1 %.
With `groups` (cluster labels, e.g. one per video frame) the report also computes the
cluster-robust (sandwich) covariance

    cov_robust = (J^T J)^+ [sum_g (J_g^T r_g)(J_g^T r_g)^T] (J^T J)^+ * G / (G - p)

over G clusters (J_g, r_g: the rows of cluster g), which takes only the clusters as
independent and needs no noise model; it needs G > p.  Conservatively, each value's
variance is the LARGER of the iid and the robust one (the covariance reported is
cov_robust plus a diagonal that raises each variance to that maximum, so it stays
positive semi-definite): the robust estimate from few clusters is itself noisy and can
come out below the iid one, which is never too wide for independent noise.
Model bias (`systematics`): residual-based intervals cannot see an error that every
frame shares, e.g. the time step's: the whole clip is fitted by a model that is a
little off in the same way.  Given the residuals r_alt at the same values under a
refined model (the simulation at dt / 2), the linearised refit moves the estimate by
(J^T J)^+ J^T (r - r_alt); times the extrapolation factor (2 for a first-order method
halved once: Richardson) that estimates the bias of the dt model against the exact one.
It is reported per value (`Estimate.bias`) and the interval is widened to cover the
estimate moved by it (the union of the intervals around both); with several systematics (the
time step's and the MPM grid's) the interval covers the estimate moved by any subset of them
(from the sum of their negative shifts to the sum of their positive ones), so that one bias
estimate of the wrong sign cannot narrow what another widened; `Estimate.bias` is their sum.  Measured on the
footage benchmark's box push (64 steps per frame against a clip simulated at 256):
mass +0.20 %, mu -0.31 % at 64, +0.07 %, -0.12 % at 256, while the residual intervals
were +-0.1 % wide.
With the robust covariance the 95 % interval uses Student's t quantile with G - 1 degrees
of freedom instead of 1.96 (`t95`; the usual small-sample correction for few clusters,
Cameron and Miller 2015): with G = 6 clusters the interval is 2.571 std wide either way.
`FitReport.covariance_type` says which was used ("iid", or "max(iid, cluster-robust
over G clusters)"), with both standard errors (std_iid, std_robust).  The undetermined
directions are still judged with the iid s^2 / lambda_k (numerical identifiability).
All of this is local (the curvature at the estimate): where the loss stays flat far beyond it,
the profile likelihood (tigradsim/fitting/profile.py, `identify(profile=...)`, [fit] profile)
walks out with the other values refitted, at the loss rise these intervals imply, and widens the
interval to the union, or marks the value "undetermined" at a prior bound (`FitReport.profiles`).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field as dc_field
from typing import Callable, Optional, Sequence

import numpy as np

from .optim import Param, as_params, pack, unpack

PIXEL_8BIT_VARIANCE = (1.0 / 255.0) ** 2 / 12.0
Z95 = 1.959963984540054
# Student's t 0.975 quantiles for 1..30 degrees of freedom (standard tables)
_T975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145,
         2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048,
         2.045, 2.042)


def t95(dof) -> float:
    """The two-sided 95 % quantile of Student's t with `dof` degrees of freedom (Z95 for
    dof = inf): a table to 30, the Cornish-Fisher expansion in 1/dof above it (error < 1e-4)."""
    if not dof >= 1:
        raise ValueError(f"t95: dof must be >= 1, got {dof!r}")
    if not math.isfinite(dof):
        return Z95
    if dof <= 30 and float(dof) == int(dof):
        return _T975[int(dof) - 1]
    z, n = Z95, float(dof)
    return (z + (z ** 3 + z) / (4 * n) + (5 * z ** 5 + 16 * z ** 3 + 3 * z) / (96 * n ** 2)
            + (3 * z ** 7 + 19 * z ** 5 + 17 * z ** 3 - 15 * z) / (384 * n ** 3))


def coordinate_names(params: Sequence[Param]) -> list:
    """One label per scalar coordinate: the Param's name, or name[i] for arrays."""
    names = []
    for p in params:
        n = int(np.size(p.value()))
        names += [p.name] if n == 1 else [f"{p.name}[{i}]" for i in range(n)]
    return names


def _coordinate_info(params):
    """Per scalar coordinate: (param, log_space, lo, hi) in internal coordinates."""
    info = []
    for p in params:
        lo, hi = p.internal_bounds()
        for a, b in zip(lo.reshape(-1), hi.reshape(-1)):
            info.append((p, bool(p.log_space), float(a), float(b)))
    return info


def residual_jacobian(residuals: Callable[[], np.ndarray], params: Sequence[Param], fd_step: Optional[float] = None,
                      r0: Optional[np.ndarray] = None):
    """J = dr/dx (N, n) in the optimiser's coordinates x by central differences.

    Step per coordinate: fd_step in log units for log-space values, fd_step *
    max(|x|, 1) for linear ones (default fd_step: 1e-3 for float64 residuals, 1e-2
    for float32).  Next to a bound (where `from_internal` would clamp) the
    difference is one-sided.  The parameters are restored afterwards.
    Returns (J, r0) with r0 the residuals at the current parameters (float64).

    The last Jacobian is kept: a call at the same coordinates, bounds and step whose residuals
    r0 are bitwise those of the last call returns it again (a copy) after that one rollout instead
    of 2 n more.  Why: a scene fit's report and its sensitivity to assumed constants
    (`scenes.assumed.scene_honesty`) each took the Jacobian at the estimate (the PAC-NeRF
    plasticine fit: ~100 CPU s twice, benchmarks/RESULTS.md, branch prof47b), through different
    callables (identify wraps the scene's).  Residuals equal to the bit at the same point mean the
    same model there (a changed model, frame count or constant gives other residuals, and then the
    Jacobian is taken anew).  Each fit (`tgs.identify`) starts with none kept (`forget_last_jacobian`).
    """
    params = as_params(params)
    x0 = pack(params).astype(np.float64)
    if r0 is None:
        r0 = np.ravel(residuals())
    dtype = np.asarray(r0).dtype
    r0 = np.asarray(r0, dtype=np.float64).ravel()
    if fd_step is None:
        fd_step = 1e-2 if dtype == np.float32 else 1e-3
    info = _coordinate_info(params)
    key = (tuple(coordinate_names(params)), tuple((log, lo, hi) for _, log, lo, hi in info), x0.tobytes(),
           float(fd_step))
    last = _LAST_JACOBIAN.get("entry")
    if last is not None and last[0] == key and np.array_equal(last[1], r0):
        return last[2].copy(), r0
    J = np.empty((r0.size, x0.size))
    try:
        for i, (_, log, lo, hi) in enumerate(info):
            h = fd_step if log else fd_step * max(abs(x0[i]), 1.0)
            up, down = x0[i] + h <= hi, x0[i] - h >= lo
            if not (up or down):
                raise ValueError(f"residual_jacobian: the bounds of coordinate {i} ({lo}, {hi}) are closer than the "
                                 f"finite-difference step {h}; pass a smaller fd_step")
            cols = {}
            for sgn, ok in ((1.0, up), (-1.0, down)):
                if ok:
                    x = x0.copy()
                    x[i] += sgn * h
                    unpack(params, x)
                    cols[sgn] = np.asarray(np.ravel(residuals()), dtype=np.float64)
            plus, minus = cols.get(1.0, r0), cols.get(-1.0, r0)
            J[:, i] = (plus - minus) / (h * ((1.0 in cols) + (-1.0 in cols)))
    finally:
        unpack(params, x0)
    _LAST_JACOBIAN["entry"] = (key, r0.copy(), J.copy())
    return J, r0


_LAST_JACOBIAN = {}     # "entry": (key, r0, J) of the last `residual_jacobian` (its docstring says why)


def forget_last_jacobian():
    """Drop the Jacobian `residual_jacobian` keeps (`tgs.identify` does at its start: a fit's journal then
    records every rollout of its own, as a resume in a fresh process needs)."""
    _LAST_JACOBIAN.clear()


def json_safe(x):
    """JSON-safe: floats (None for inf / nan), lists, dicts."""
    if isinstance(x, dict):
        return {str(k): json_safe(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [json_safe(v) for v in x]
    if isinstance(x, np.ndarray):
        return json_safe(x.tolist())
    if isinstance(x, (bool, np.bool_)):
        return bool(x)
    if isinstance(x, (int, np.integer)):
        return int(x)
    if isinstance(x, (float, np.floating)):
        return float(x) if math.isfinite(x) else None
    return x


def _g(x, digits=4):
    return "-" if x is None or (isinstance(x, float) and not math.isfinite(x)) else f"{x:.{digits}g}"


@dataclass
class Estimate:
    """One estimated scalar value.

    value: the estimate in the Param's units.  std: standard error in the
    optimiser's coordinates (log units for log_space; inf when undetermined).
    lower95, upper95: approximate 95% interval (value x/ exp(1.96 std) in log
    space, value -+ 1.96 std otherwise), None when undetermined.
    status: "ok", "undetermined" (std above the threshold, or on a direction the
    data cannot determine) or "at bound" (the estimate sits on a bound: the
    interval is cut there and the fit may want a wider range).
    """

    name: str
    value: float
    std: float
    log_space: bool
    lower95: Optional[float]
    upper95: Optional[float]
    status: str = "ok"
    bias: float = 0.0            # estimated model bias (`systematics`), optimiser's coordinates

    @property
    def determined(self) -> bool:
        return self.status != "undetermined"

    @property
    def relative_std(self) -> float:
        """std as a fraction of the value (log units are already relative)."""
        return self.std if self.log_space else self.std / max(abs(self.value), 1e-300)

    def to_dict(self):
        return json_safe({"name": self.name, "value": self.value, "std": self.std, "log_space": self.log_space,
                      "lower95": self.lower95, "upper95": self.upper95, "status": self.status,
                      "bias": self.bias})

    def __str__(self):
        if self.status == "undetermined":
            within = (f"; within [{self.lower95:.6g}, {self.upper95:.6g}] (profile)" if self.lower95 is not None
                      else "")
            return f"{self.name} = {self.value:.6g}  undetermined (the data do not fix it{within})"
        unit = "in log" if self.log_space else "abs"
        tail = "  [at bound]" if self.status == "at bound" else ""
        return (f"{self.name} = {self.value:.6g}  std {self.std:.3g} ({unit})  "
                f"95% [{self.lower95:.6g}, {self.upper95:.6g}]{tail}")


@dataclass
class Direction:
    """A combination of parameters the data cannot determine (an eigenvector of J^T J).

    eigenvalue: lambda_k; std: s / sqrt(lambda_k) along the unit direction (inf when
    numerically singular); coefficients: name -> component, scaled so the largest
    magnitude is 1 (components below 0.05 left out); text: a sentence naming it.
    """

    eigenvalue: float
    std: float
    coefficients: dict
    text: str

    def to_dict(self):
        return json_safe({"eigenvalue": self.eigenvalue, "std": self.std, "coefficients": self.coefficients,
                      "text": self.text})


def _describe(coefs, logs):
    """A sentence for a poorly determined direction (coefficients normalised to max |c| = 1)."""
    names = list(coefs)
    if len(names) == 1:
        return f"{names[0]} is not determined by the data"
    c = np.array([coefs[n] for n in names])
    if all(logs[n] for n in names):
        if np.all(np.abs(np.abs(c) - 1.0) < 0.2):
            pos = [n for n in names if coefs[n] > 0]
            neg = [n for n in names if coefs[n] < 0]
            if not neg or not pos:
                return f"{', '.join(names)} scale together (the data fix only their ratios)"
            if len(pos) == 1 and len(neg) == 1:
                # log a - log b free: a and 1/b scale together, a * b stays
                return f"only the product {names[0]} * {names[1]} is determined"
        terms = ", ".join(f"{n} x t^{coefs[n]:+.2f}" for n in names)
        return f"scaling {terms} leaves the fit (nearly) unchanged"
    terms = ", ".join(f"{n} {'x t^' if logs[n] else '+ t * '}{coefs[n]:+.2f}" for n in names)
    return f"moving {terms} leaves the fit (nearly) unchanged"


@dataclass
class FitReport:
    """Estimates with uncertainties at one minimum (see the module docstring).

    loss: 1/2 |r|^2 at the estimate; residual_count N; parameter_count p;
    s2_fit: 2 L / (N - p) (nan when N <= p); noise_floor; s2: the variance used;
    eigenvalues: of J^T J, ascending; undetermined: the Directions the data
    cannot determine; covariance: s^2 (J^T J)^+ in the optimiser's coordinates
    (inf on the diagonal of undetermined values); step_over_std: the largest
    |Gauss-Newton step| / std over determined values (well below 1 at a
    converged minimum).  notes: anything the reader should know.
    """

    estimates: list
    loss: float
    residual_count: int
    parameter_count: int
    s2_fit: float
    noise_floor: float
    s2: float
    eigenvalues: np.ndarray
    undetermined: list
    covariance: np.ndarray
    step_over_std: float
    notes: list = dc_field(default_factory=list)
    covariance_type: str = "iid"
    clusters: int = 0
    std_iid: Optional[np.ndarray] = None
    std_robust: Optional[np.ndarray] = None
    systematics: dict = dc_field(default_factory=dict)   # name -> (p,) shift (optimiser's coordinates)
    profiles: dict = dc_field(default_factory=dict)      # name -> profile.Profile (`apply_profiles`)

    def __getitem__(self, name) -> Estimate:
        for e in self.estimates:
            if e.name == name:
                return e
        raise KeyError(f"no estimate named {name!r}; have {[e.name for e in self.estimates]}")

    def values(self) -> dict:
        return {e.name: e.value for e in self.estimates}

    @property
    def all_determined(self) -> bool:
        return all(e.determined for e in self.estimates) and not self.undetermined

    def to_dict(self):
        return json_safe({"estimates": [e.to_dict() for e in self.estimates], "loss": self.loss,
                      "residual_count": self.residual_count, "parameter_count": self.parameter_count,
                      "s2_fit": self.s2_fit, "noise_floor": self.noise_floor, "s2": self.s2,
                      "eigenvalues": self.eigenvalues, "undetermined": [d.to_dict() for d in self.undetermined],
                      "covariance": self.covariance, "step_over_std": self.step_over_std, "notes": self.notes,
                      "covariance_type": self.covariance_type, "clusters": self.clusters,
                      "std_iid": self.std_iid, "std_robust": self.std_robust, "systematics": self.systematics,
                      "profiles": {k: v.to_dict() for k, v in self.profiles.items()}})

    def to_markdown(self, title="Estimates"):
        bias = bool(self.systematics)
        rows = [f"### {title}", "", "| parameter | estimate | std | 95% interval | status |" + (" model bias |" if bias
                                                                                            else ""),
                "|---|---|---|---|---|" + ("---|" if bias else "")]
        for e in self.estimates:
            std = "-" if not e.determined else f"{e.std:.3g}" + (" (log)" if e.log_space else "")
            ci = "-" if e.lower95 is None else f"[{e.lower95:.6g}, {e.upper95:.6g}]"
            value = f"{e.value:.6g}" if e.determined else f"({e.value:.6g})"
            shift = f" {e.bias:+.3g}" + (" (log)" if e.log_space else "") + " |" if bias else ""
            rows.append(f"| {e.name} | {value} | {std} | {ci} | {e.status} |{shift}")
        rows += ["", f"Residuals N = {self.residual_count}, parameters p = {self.parameter_count}, "
                     f"loss 1/2|r|^2 = {self.loss:.6g}; noise variance from the fit s^2 = {_g(self.s2_fit)}, "
                     f"floor {self.noise_floor:.3g}, used {self.s2:.3g}; covariance: {self.covariance_type}."]
        if self.undetermined:
            rows += ["", "Not determined by the data:"] + [f"- {d.text} (std along it {_g(d.std, 3)})"
                                                          for d in self.undetermined]
        rows += [f"- {n}" for n in self.notes]
        return "\n".join(rows) + "\n"

    def __str__(self):
        lines = [str(e) for e in self.estimates]
        lines.append(f"s^2 used {self.s2:.3g} (fit {_g(self.s2_fit, 3)}, floor {self.noise_floor:.3g}); "
                     f"N {self.residual_count}, p {self.parameter_count}; covariance {self.covariance_type}")
        lines += [f"not determined: {d.text}" for d in self.undetermined]
        lines += [f"note: {n}" for n in self.notes]
        return "\n".join(lines)


def _systematic_shifts(systematics, J, r, Ainv) -> dict:
    """{name: (p,) linearised shift of the estimate under each refined model} (`fit_report`)."""
    if not systematics:
        return {}
    if not isinstance(systematics, dict):
        raise ValueError(f"systematics: expected a dict name -> (residuals, factor), got {type(systematics).__name__}")
    out = {}
    for name, entry in systematics.items():
        try:
            r_alt, factor = entry
        except (TypeError, ValueError):
            raise ValueError(f"systematics[{name!r}]: expected (residuals, factor), got {entry!r}") from None
        r_alt = np.ravel(np.asarray(r_alt, dtype=np.float64))
        if r_alt.shape != r.shape:
            raise ValueError(f"systematics[{name!r}]: expected {r.size} residuals (as many as the fit's), "
                             f"got {r_alt.size}")
        if not (np.all(np.isfinite(r_alt)) and isinstance(factor, (int, float)) and math.isfinite(factor)):
            raise ValueError(f"systematics[{name!r}]: residuals and factor must be finite (factor {factor!r})")
        out[str(name)] = -float(factor) * (Ainv @ (J.T @ (r_alt - r)))
    return out


def fit_report(residuals: Callable[[], np.ndarray], params: Sequence, noise_floor: float = PIXEL_8BIT_VARIANCE,
               fd_step: Optional[float] = None, undetermined_std: float = 0.5, rel_eig_tol: Optional[float] = None,
               null_weight: float = 0.05, jacobian=None, groups=None, systematics=None) -> FitReport:
    """Estimates, standard errors, 95% intervals and undetermined combinations at the
    current parameter values, which should be a minimum of 1/2 |residuals()|^2.

    residuals: runs the model at the Params' current values and returns the residual
        vector (e.g. `VideoFit.residuals`: rendered minus target pixels).
    noise_floor: least residual variance per value (module docstring; 0 for none).
    fd_step: finite-difference step (see `residual_jacobian`).
    undetermined_std: std (log units, or relative for linear values) above which a
        value is "undetermined"; also the std along a direction above which it is named.
    rel_eig_tol: eigenvalues of J^T J below rel_eig_tol * the largest are numerically
        zero (default 1e-12 for float64 residuals, 1e-5 for float32).
    null_weight: a value with a larger eigenvector component on a numerically zero
        direction is undetermined.
    jacobian: (J, r0) if already computed (skips the 2 p rollouts).
    groups: clusters of correlated residuals for the cluster-robust covariance (module
        docstring): an int G (G equal contiguous blocks of the N residuals, e.g. video
        frames; N must be a multiple of G), an (N,) array of labels, or a callable
        groups(N) returning the labels (for residual vectors whose length changes);
        None: iid residuals only.  Each variance is then max(iid, robust).
    systematics: model biases the residuals cannot show (module docstring, "Model
        bias"): {name: (r_alt, factor)} with r_alt the residual vector at the current
        values under a refined model (e.g. the simulation at dt / 2) and factor the
        extrapolation to the exact model (2 for a first-order method halved once).
        Each gives a shift -factor (J^T J)^+ J^T (r_alt - r); their sum is each
        estimate's `bias` and the 95 % interval is widened to cover the estimate moved
        by it.
    """
    params = as_params(params)
    for name, v in (("noise_floor", noise_floor), ("undetermined_std", undetermined_std),
                    ("null_weight", null_weight)):
        if not (isinstance(v, (int, float, np.floating)) and v >= 0 and math.isfinite(v)):
            raise ValueError(f"{name}: must be a finite number >= 0, got {v!r}")
    r_dtype = None
    if jacobian is None:
        r = np.ravel(residuals())
        r_dtype = np.asarray(r).dtype
        J, r = residual_jacobian(residuals, params, fd_step, r0=r)
    else:
        J, r = (np.asarray(a, dtype=np.float64) for a in jacobian)
        r = r.ravel()
    if not (np.all(np.isfinite(J)) and np.all(np.isfinite(r))):
        raise ValueError("fit_report: the residuals or their finite-difference Jacobian are not finite "
                         "(a rollout blew up near the estimate?)")
    if rel_eig_tol is None:
        rel_eig_tol = 1e-5 if r_dtype == np.float32 else 1e-12
    N, p = J.shape
    labels = _group_labels(groups, N)
    loss = 0.5 * float(r @ r)
    s2_fit = 2.0 * loss / (N - p) if N > p else float("nan")
    notes = []
    if not N > p:
        notes.append(f"only {N} residuals for {p} parameters: no noise estimate, the floor is used")
    s2 = max(s2_fit if math.isfinite(s2_fit) else 0.0, float(noise_floor))
    if s2 == 0.0:
        notes.append("zero residual and noise_floor 0: the intervals have zero width")

    names = coordinate_names(params)
    info = _coordinate_info(params)
    x = pack(params).astype(np.float64)
    A = J.T @ J
    lam, V = np.linalg.eigh(A)
    lam_max = float(lam[-1]) if lam.size else 0.0
    singular = lam <= rel_eig_tol * lam_max if lam_max > 0 else np.ones_like(lam, dtype=bool)
    inv = np.where(singular, 0.0, 1.0 / np.where(singular, 1.0, lam))
    cov = s2 * (V * inv) @ V.T
    var = np.diag(cov).copy()
    null_w = np.abs(V[:, singular]).max(axis=1) if singular.any() else np.zeros(p)
    var[null_w > null_weight] = np.inf
    for i in np.nonzero(null_w > null_weight)[0]:
        cov[i, i] = np.inf
    std_iid = np.sqrt(np.maximum(var, 0.0))
    covariance_type, n_clusters, std_robust = "iid", 0, None
    if labels is not None:
        Ainv = (V * inv) @ V.T
        _, idx = np.unique(labels, return_inverse=True)
        n_clusters = int(idx.max()) + 1
        if n_clusters > p:
            scores = np.zeros((n_clusters, p))
            np.add.at(scores, idx, J * r[:, None])            # row g: J_g^T r_g
            cov_r = Ainv @ (scores.T @ scores) @ Ainv * (n_clusters / (n_clusters - p))
            var_r = np.diag(cov_r).copy()
            var_r[~np.isfinite(var)] = np.inf
            std_robust = np.sqrt(np.maximum(var_r, 0.0))
            finite = np.isfinite(var)
            raise_by = np.where(finite, np.maximum(var - np.where(finite, var_r, 0.0), 0.0), 0.0)
            cov = np.where(np.isfinite(cov), cov_r, cov) + np.diag(raise_by)
            var = np.where(finite, np.maximum(var, var_r), np.inf)
            covariance_type = f"max(iid, cluster-robust over {n_clusters} clusters)"
        else:
            notes.append(f"{n_clusters} residual clusters for {p} parameters: no cluster-robust covariance "
                         "(needs more clusters than parameters); the iid one is used")
    std = np.sqrt(np.maximum(var, 0.0))
    quantile = t95(n_clusters - 1) if std_robust is not None else Z95
    shifts = _systematic_shifts(systematics, J, r, (V * inv) @ V.T)
    bias = np.sum([v for v in shifts.values()], axis=0) if shifts else np.zeros(p)
    # the interval covers the estimate moved by any subset of the systematics (each is itself an estimate:
    # one must not narrow the interval another widened): from the sum of their negative parts to that of
    # their positive parts
    down = np.sum([np.minimum(v, 0.0) for v in shifts.values()], axis=0) if shifts else np.zeros(p)
    up = np.sum([np.maximum(v, 0.0) for v in shifts.values()], axis=0) if shifts else np.zeros(p)
    for name, v in shifts.items():
        notes.append(f"{name}: the estimates would move by " + ", ".join(
            f"{n} {b:+.3g}" + (" (log)" if info[i][1] else "") for i, (n, b) in enumerate(zip(names, v)))
            + "; the 95 % intervals cover it")

    # directions the data cannot determine
    logs = {n: info[i][1] for i, n in enumerate(names)}
    undetermined = []
    for k in range(p):
        d_std = math.inf if singular[k] else math.sqrt(s2 / lam[k]) if lam[k] > 0 else math.inf
        if not (singular[k] or d_std > undetermined_std):
            continue
        v = V[:, k] / np.abs(V[:, k]).max()
        if v[np.argmax(np.abs(v))] < 0:
            v = -v
        coefs = {names[i]: round(float(v[i]), 3) for i in range(p) if abs(v[i]) >= 0.05}
        undetermined.append(Direction(float(lam[k]), d_std, coefs, _describe(coefs, logs)))

    # Gauss-Newton step from here, against the std: a converged fit has it << 1
    g = J.T @ r
    step = -((V * inv) @ V.T) @ g
    determined = np.isfinite(std) & (std > 0)
    step_over_std = float(np.max(np.abs(step[determined]) / std[determined])) if determined.any() else float("nan")
    if math.isfinite(step_over_std) and step_over_std > 0.5:
        notes.append(f"not at a minimum: a Gauss-Newton step would move a value by {step_over_std:.2g} std "
                     "(fit longer, or refine with least_squares)")

    estimates = []
    for i, (p_, log, lo, hi) in enumerate(info):
        xi, si = float(x[i]), float(std[i])
        value = float(math.exp(xi)) if log else xi
        scale = 1.0 if log else max(abs(value), 0.1 * (hi - lo) if math.isfinite(hi - lo) else 1e-12)
        if not math.isfinite(si) or si / scale > undetermined_std:
            estimates.append(Estimate(names[i], value, si, log, None, None, "undetermined"))
            continue
        bi = float(bias[i]) if math.isfinite(bias[i]) else 0.0
        di = float(down[i]) if math.isfinite(down[i]) else 0.0
        ui = float(up[i]) if math.isfinite(up[i]) else 0.0
        a, b = max(xi + di - quantile * si, lo), min(xi + ui + quantile * si, hi)
        h = 1e-6 * max(abs(xi), 1.0)          # a clamped float32 value sits within ~1e-7 of its bound
        status = "at bound" if (xi - lo <= h or hi - xi <= h) else "ok"
        lower, upper = (math.exp(a), math.exp(b)) if log else (a, b)
        estimates.append(Estimate(names[i], value, si, log, lower, upper, status, bi))
    return FitReport(estimates, loss, N, p, s2_fit, float(noise_floor), s2, lam, undetermined, cov, step_over_std,
                     notes, covariance_type, n_clusters, std_iid, std_robust, shifts)


def _group_labels(groups, N):
    """(N,) cluster labels from fit_report's `groups` (None stays None)."""
    if groups is None:
        return None
    if callable(groups):
        groups = groups(N)
    if isinstance(groups, (int, np.integer)) and not isinstance(groups, bool):
        G = int(groups)
        if G < 1 or N % G:
            raise ValueError(f"groups: expected a number of equal blocks >= 1 that divides the {N} residuals, "
                             f"got {G}")
        return np.repeat(np.arange(G), N // G)
    labels = np.asarray(groups)
    if labels.shape != (N,):
        raise ValueError(f"groups: expected an int or one label per residual, shape ({N},), got shape "
                         f"{labels.shape}")
    return labels
