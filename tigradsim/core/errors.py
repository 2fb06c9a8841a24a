"""Input validation shared by every builder, and the simulation error.

Every check runs in Python before any kernel launches, and its message names
the argument, the value found and what was expected.
"""
from __future__ import annotations

import numpy as np


class SimulationError(RuntimeError):
    """A rollout produced non-finite state (it blew up)."""


class GradientError(RuntimeError):
    """A backward pass produced an exploding or non-finite adjoint (the gradient cannot be trusted)."""


class StabilityWarning(UserWarning):
    """dt is past the safe fraction of a force term's explicit-integration limit (`tigradsim.core.stability`):
    the forward run may look fine while its gradients are wrong by orders of magnitude."""


class StabilityError(SimulationError):
    """`Simulator(..., strict=True)`: dt is past the safe fraction of a force term's explicit limit."""


class FootageError(ValueError):
    """Footage that cannot be used as it is: an image file that cannot be read at its own depth
    (truncated, not an image, an unsupported mode), frames or masks of the wrong shape, type or
    range, or masks that cannot be right (every mask empty).  The message names the file or the
    argument and says what was expected."""


class FootageWarning(UserWarning):
    """Masks that are probably wrong (`tigradsim.io.mask_checks`): an empty mask between frames
    that have one, masks that look inverted, or a first mask far from the silhouette rendered at
    the initial guess."""


def as_array(name, value, shape=None, dtype=np.float64, finite=True):
    """Convert `value` to a numpy array and check its shape and finiteness.

    `shape` is a tuple whose entries are ints or None (any size); a scalar
    input is broadcast when `shape` has no None entries.
    """
    try:
        arr = np.asarray(value, dtype=dtype)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{name}: expected numbers convertible to {np.dtype(dtype).name}, got {value!r}") from exc
    if shape is not None:
        if arr.ndim == 0 and all(s is not None for s in shape):
            arr = np.broadcast_to(arr, shape).copy()
        if arr.ndim != len(shape) or any(s is not None and s != a for s, a in zip(shape, arr.shape)):
            want = "(" + ", ".join("N" if s is None else str(s) for s in shape) + ")"
            raise ValueError(f"{name}: expected shape {want}, got {arr.shape}")
    if finite and np.issubdtype(arr.dtype, np.floating) and not np.all(np.isfinite(arr)):
        bad = np.argwhere(~np.isfinite(arr))[0]
        raise ValueError(f"{name}: contains a non-finite value ({arr[tuple(bad)]}) at index {tuple(int(b) for b in bad)}")
    return arr


def as_index_array(name, value):
    """`np.asarray(value)` for an index table; a ragged or non-numeric input is an error naming `name`."""
    try:
        return np.asarray(value)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{name}: expected a rectangular integer array (every row the same length), "
                         f"got {value!r}") from exc


def check_indices(name, indices, count, arity):
    """Check an (M, arity) integer index array against `count` items."""
    idx = as_index_array(name, indices)
    if idx.size == 0:
        return np.zeros((0, arity), dtype=np.int32)
    if not np.issubdtype(idx.dtype, np.integer):
        if np.issubdtype(idx.dtype, np.floating) and np.all(np.mod(idx, 1) == 0):
            idx = idx.astype(np.int64)
        else:
            raise TypeError(f"{name}: expected integer indices, got dtype {idx.dtype}")
    if idx.ndim == 1 and idx.size == arity:
        idx = idx.reshape(1, arity)
    if idx.ndim != 2 or idx.shape[1] != arity:
        raise ValueError(f"{name}: expected shape (M, {arity}), got {idx.shape}")
    bad = np.argwhere((idx < 0) | (idx >= count))
    if len(bad):
        r, c = bad[0]
        raise IndexError(f"{name}[{r}] = {idx[r].tolist()}: index {idx[r, c]} is out of range for {count} particles")
    return idx.astype(np.int32)


def check_positive(name, value, allow_zero=False):
    arr = as_array(name, value)
    bad = arr < 0 if allow_zero else arr <= 0
    if np.any(bad):
        where = np.argwhere(np.atleast_1d(bad))[0][0]
        got = np.atleast_1d(arr)[where]
        need = ">= 0" if allow_zero else "> 0"
        raise ValueError(f"{name}: must be {need}, got {got}" + (f" at index {where}" if arr.ndim else ""))
    return arr


# ---------------------------------------------------------------------------
# Values a model parameter may take (checked by `Model.set` before the field is written).
# Negative stiffness, damping, friction or mass is not physical: a negative ke makes the
# ground attract and the rollout explode without any error, a negative mass is not a
# pinned particle (mass 0 is: it marks a fixed particle).
NONNEGATIVE_PARAMS = frozenset({
    "particle_mass", "spring_stiffness", "spring_damping",
    "ground_ke", "ground_kd", "ground_kf", "ground_mu",
    "body_ke", "body_kd", "body_kf", "body_mu", "mpm_mu",
    "body_pair_ke", "body_pair_kd", "body_pair_kf", "body_pair_mu",
    "cloth_drag", "cloth_bending_stiffness", "cloth_bending_damping",
    "cloth_anchor_stiffness", "cloth_anchor_damping",
    "collider_ke", "collider_kd", "collider_kf", "collider_mu", "collider_size",
})
POSITIVE_PARAMS = frozenset({"spring_rest_length", "body_mass"})
# Material parameter tables: (table, per-element row field) of the terms that read them.
_MATERIAL_TABLES = {"TetForces": ("tet_params", "tet_param_row"),
                    "ClothMembraneForces": ("cloth_params", "cloth_param_row")}


def check_parameter(model, name, arr):
    """Raise ValueError if `arr` (the new values of model parameter `name`) is not physical.

    Scalar parameters follow NONNEGATIVE_PARAMS / POSITIVE_PARAMS; `body_inertia` must be
    symmetric positive definite; a material table (`tet_params`, `cloth_params`) is checked
    row by row with the material's declared rules (`Material.check_values`: `positive`,
    `nonnegative`, `check_params`) and its last column (element damping) must be >= 0.
    """
    label = f"{name} values"
    if name in NONNEGATIVE_PARAMS:
        check_positive(label, arr, allow_zero=True)
    elif name in POSITIVE_PARAMS:
        check_positive(label, arr)
    elif name == "collider_pose":
        # the kernel normalises the quaternion (x, y, z, w): any length but 0 is a rotation
        norms = np.linalg.norm(np.asarray(arr, dtype=np.float64).reshape(-1, 7)[:, 3:], axis=1)
        if np.any(norms < 1e-6):
            c = int(np.argmax(norms < 1e-6))
            raise ValueError(f"{label}: collider {c}: the quaternion (entries 3..6) has norm {norms[c]:.3g}, expected "
                             "a rotation (unit x, y, z, w)")
    elif name == "body_inertia":
        a = np.asarray(arr, dtype=np.float64).reshape(-1, 3, 3)
        for b, m in enumerate(a):
            if not np.allclose(m, m.T, rtol=1e-6, atol=1e-12 * max(1.0, np.abs(m).max())) \
                    or np.linalg.eigvalsh(0.5 * (m + m.T)).min() <= 0:
                raise ValueError(f"{label}: body {b}: the inertia (per unit mass) must be symmetric positive "
                                 f"definite, got {m.tolist()}")
    for term in list(getattr(model, "force_terms", ())) + list(getattr(model, "integrators", ())):
        own = getattr(term, "check_parameter", None)      # a term that checks its own tables (MPM)
        if own is not None:
            own(name, arr)
            continue
        names = getattr(term, "param_table", None) or _MATERIAL_TABLES.get(type(term).__name__)
        group = getattr(term, "group", None)
        if names is None or group is None or names[0] != name:
            continue
        table = np.asarray(arr, dtype=np.float64)
        rows = np.unique(getattr(model, names[1]).to_numpy()[group.start:group.end])
        mat = type(group.material)
        try:
            mat.check_values({k: table[rows, c] for c, k in enumerate(mat.params)})
        except ValueError as exc:
            raise ValueError(f"{label}: rows {rows.tolist()[:8]} (material {mat.name!r}): {exc}") from None
        damping = table[rows, -1]
        if np.any(damping < 0):
            r = int(rows[np.argmax(damping < 0)])
            raise ValueError(f"{label}: row {r} (material {mat.name!r}): damping (last column) must be >= 0, "
                             f"got {table[r, -1]}")


def check_runtime(model, what="model"):
    """Raise RuntimeError if `model` was built under another Taichi runtime: `tgs.init` called again
    since `finalize()` (e.g. a model built at f32, then `tgs.init(precision="f64")`) leaves its fields
    in the old runtime, and Taichi would fail deep inside (an IndexError) or read garbage."""
    tag = getattr(model, "runtime", None)
    if tag is None:
        return
    from taichi.lang import impl
    from .runtime import precision
    ref, built = tag
    if ref() is not impl.get_runtime():
        now = precision()
        change = f"built at precision {built!r}, Taichi now at {now!r}" if built != now else f"precision {built!r}"
        raise RuntimeError(f"{what}: the model was finalized before tgs.init(...) was called again ({change}); "
                           "tgs.init resets Taichi and the model's fields belong to the old runtime. "
                           "Call tgs.init first, then build the scene (SceneBuilder.finalize) and the Simulator")
