"""Material registry: the one mechanism through which every kind of element gets its constitutive law.

A material is a small class with a `@ti.func stress(self, F, p)` returning the
first Piola-Kirchhoff stress P(F) and, optionally, `@ti.func energy(self, F, p)`
returning the strain-energy density Psi(F) (per unit rest volume for tets, per
unit rest area for shells), so that P = dPsi/dF.

* `F` is a `ti.Matrix` of shape `F_shape`: 3x3 for kind "tet" (`F = Ds Dm^-1`),
  3x2 for kind "shell" (a triangle's deformation gradient from its 2D rest frame).
* `p` is a `ti.Vector` holding the parameter values in the order of the class's
  `params` (an ordered dict name -> default; a default of None means required).
  `p[0]` is the first parameter, and so on; the values may be fields with
  gradients, so a material's stress must be differentiable in `p` as well.

Built-in materials live in `tigradsim/materials/` (the `materials/` folder) and
register themselves exactly as a user's plugin does::

    import taichi as ti
    from tigradsim.core.registry import register_material, TetMaterial

    @register_material("my_material")
    class MyMaterial(TetMaterial):
        params = {"mu": 1e3, "lam": 1e3}

        @ti.func
        def stress(self, F, p):
            mu, lam = p[0], p[1]
            ...

        @ti.func
        def energy(self, F, p): ...

Third-party packages can also expose materials through the entry-point group
`tigradsim.materials` (value: a module that registers on import, or a material
class, registered under the entry point's name if it is not registered yet).
They are loaded lazily, on the first `get_material` / `list_materials` call; a
plugin that fails to load gives a warning, not an error.

Damping, activation and the like are not material parameters: the element
terms of the simulator handle them for every material alike (pass them in
`param_vector(..., ignore=(...))`).
"""

import math
import warnings
from collections import OrderedDict
from typing import Dict, Iterable, Mapping, Optional

import numpy as np
import taichi as ti

from .quiet_matmul import quiet_matmul_scope

__all__ = [
    "Material", "TetMaterial", "ShellMaterial", "register_material", "unregister_material",
    "get_material", "list_materials", "load_plugins", "lame_from_young_poisson",
    "neo_hookean_from_lame", "lame_from_neo_hookean", "evaluate_stress", "evaluate_energy",
    "ENTRY_POINT_GROUP",
]

ENTRY_POINT_GROUP = "tigradsim.materials"

# Shapes of F for the kinds tigradsim knows; other kinds must set F_shape themselves.
KIND_F_SHAPES = {"tet": (3, 3), "shell": (3, 2)}


class MaterialNotFoundError(KeyError):
    """Raised by `get_material` for a name nobody registered."""

    def __str__(self):  # KeyError would print the message with quotes around it
        return str(self.args[0]) if self.args else ""


@ti.data_oriented
class Material:
    """Base of every material.  Subclass `TetMaterial` or `ShellMaterial` (or this, with
    `kind` and `F_shape` set) and decorate with `@register_material(name)`.

    Class attributes:
        kind: element kind, an open string ("tet", "shell", ...).
        F_shape: (rows, cols) of the deformation gradient the functions receive.
        params: ordered dict parameter name -> default value (None = required);
            `stress`/`energy` get the values as `p`, a ti.Vector in this order.
        rotation_invariant: whether Psi(R F) = Psi(F) for rotations R (False for
            linear elasticity); the test-suite checks it when True.
        positive, nonnegative: names of parameters that must be > 0 / >= 0 (checked at
            build and by `model.set` / `set_object_param`, before any kernel runs); a
            `check_params` classmethod can add any other rule.
    Set by `register_material`: `name`, `param_names`, `param_count` (also under its older name
    `num_params`), `has_energy`.
    """

    kind: str = ""
    F_shape: tuple = ()
    params: Mapping[str, Optional[float]] = OrderedDict()
    rotation_invariant: bool = True
    positive: tuple = ()
    nonnegative: tuple = ()
    name: str = ""

    # ---- parameters -------------------------------------------------------
    @classmethod
    def param_vector(cls, values: Optional[Mapping[str, object]] = None, ignore: Iterable[str] = ()) -> np.ndarray:
        """Parameter values as a float64 array in `params` order.

        Args:
            values: name -> value (a number, or an array: all values broadcast to
                one shape S and the result has shape S + (param_count,)).  Missing
                names take their defaults.
            ignore: names to skip silently (generic element terms such as
                "damping" that a caller passes in the same dict).
        Raises:
            ValueError: unknown name (the known ones are listed), a required
                parameter (default None) missing, or a non-finite value.
        """
        values = dict(values or {})
        ignore = set(ignore)
        known = list(cls.params)
        label = cls.name or cls.__name__
        unknown = [k for k in values if k not in cls.params and k not in ignore]
        if unknown:
            raise ValueError(f"material {label!r}: unknown parameter(s) {unknown}; "
                             f"its parameters are {known}")
        missing = [k for k, d in cls.params.items() if d is None and k not in values]
        if missing:
            raise ValueError(f"material {label!r}: required parameter(s) {missing} not given "
                             f"(parameters: {known})")
        arrays = []
        for k, default in cls.params.items():
            v = np.asarray(values.get(k, default), dtype=np.float64)
            if not np.all(np.isfinite(v)):
                raise ValueError(f"material {label!r}: parameter {k!r} = {values.get(k, default)!r} is not finite")
            arrays.append(v)
        if not arrays:
            return np.zeros((0,), dtype=np.float64)
        arrays = np.broadcast_arrays(*arrays)
        out = np.stack(arrays, axis=-1).astype(np.float64)
        cls.check_values(dict(zip(known, np.moveaxis(out, -1, 0))))
        return out

    @classmethod
    def check_values(cls, values: Dict[str, np.ndarray]) -> None:
        """Raise ValueError unless `values` (name -> array) satisfy the declared `positive` and
        `nonnegative` rules and the `check_params` hook."""
        label = cls.name or cls.__name__
        for names, bad, need in ((cls.positive, lambda v: v <= 0, "> 0"), (cls.nonnegative, lambda v: v < 0, ">= 0")):
            for k in names:
                v = np.atleast_1d(np.asarray(values[k], dtype=np.float64))
                if np.any(bad(v)):
                    raise ValueError(f"material {label!r}: parameter {k!r} must be {need}, got {v[np.argmax(bad(v))]:g}")
        cls.check_params(values)

    @classmethod
    def check_params(cls, values: Dict[str, np.ndarray]) -> None:
        """Hook: raise ValueError for values the material cannot use (default: accept all)."""

    @classmethod
    def wave_modulus(cls, values: Dict[str, np.ndarray]):
        """The P-wave modulus [Pa for tets, N/m for shells] at rest: the largest stiffness of the
        material against a plane strain, lam + 2 mu for an isotropic linear material.  The stability
        pre-flight (`tigradsim.core.stability`) divides it by the density and the element's height to get the
        element's frequency.  Default: lam + 2 mu for materials with parameters "mu" and "lam" (an upper
        bound for the built-in ones: neo-Hookean's small-strain value is lam + 7/8 mu); None (not
        checked) otherwise: a plugin with other parameters overrides this."""
        if "mu" in values and "lam" in values:
            return np.maximum(np.asarray(values["lam"], dtype=np.float64) + 2.0 * np.asarray(values["mu"], dtype=np.float64), 0.0)
        return None

    @classmethod
    def from_lame(cls, mu: float, lam: float) -> dict:
        """The params dict whose small-strain behaviour is linear elasticity with Lame
        parameters (mu, lam).  Default: the material's own "mu" and "lam"."""
        if not {"mu", "lam"} <= set(cls.params):
            raise NotImplementedError(f"material {cls.name or cls.__name__!r} has no from_lame conversion")
        return {"mu": float(mu), "lam": float(lam)}

    @classmethod
    def defaults(cls) -> dict:
        """The default parameter values (None for required ones)."""
        return dict(cls.params)


class TetMaterial(Material):
    """A volumetric material for tetrahedra: F is 3x3."""

    kind = "tet"
    F_shape = (3, 3)


class ShellMaterial(Material):
    """A membrane material for triangles (cloth): F is 3x2, the deformation gradient of
    a triangle from its 2D rest frame; energies are per unit rest area.

    A shell material may write its stress column by column instead, as
    `@ti.func stress_columns(self, f1, f2, p)` returning (P1, P2), the columns of P for the columns f1, f2 of
    F, each a list of three values, p a list of the parameter values; written with `tigradsim.exec.lanes`'
    list functions (`lanes.dot`, `lanes.cross`, `lanes.scale`, ...) and `ti.sqrt` & co., one formula serves
    one triangle (scalars) and LANES triangles at once (each value a LANES-vector), and cloth on one thread
    then evaluates its membrane four triangles at a time (`physics.cloth`).  `stress` is made from it."""

    kind = "shell"
    F_shape = (3, 2)

    @ti.func
    def stress(self, F, p):
        """P from `stress_columns` (a subclass without it defines `stress` itself)."""
        P1, P2 = self.stress_columns([F[0, 0], F[1, 0], F[2, 0]], [F[0, 1], F[1, 1], F[2, 1]],
                                     [p[c] for c in ti.static(range(self.param_count))])
        return ti.Matrix.cols([ti.Vector(P1), ti.Vector(P2)])

    @classmethod
    def in_columns(cls) -> bool:
        """Whether the material gives its stress column by column (`stress_columns`)."""
        return hasattr(cls, "stress_columns")


# ---------------------------------------------------------------------------
# registry

_registry: "OrderedDict[str, Material]" = OrderedDict()
_state = {"loaded_eps": set(), "loading": False}


def _normalize_params(cls) -> "OrderedDict[str, Optional[float]]":
    raw = getattr(cls, "params", None)
    if isinstance(raw, str) or raw is None:
        raise TypeError(f"material class {cls.__name__}: `params` must be an ordered dict name -> default "
                        f"(or a tuple of names, all required), got {raw!r}")
    if isinstance(raw, Mapping):
        items = list(raw.items())
    else:
        try:
            items = [(k, None) for k in raw]
        except TypeError:
            raise TypeError(f"material class {cls.__name__}: `params` must be a dict, got {type(raw).__name__}")
    out = OrderedDict()
    for k, d in items:
        if not isinstance(k, str) or not k.isidentifier():
            raise TypeError(f"material class {cls.__name__}: parameter name {k!r} is not an identifier")
        if k in out:
            raise TypeError(f"material class {cls.__name__}: parameter {k!r} appears twice")
        if d is not None:
            try:
                d = float(d)
            except (TypeError, ValueError):
                raise TypeError(f"material class {cls.__name__}: default of {k!r} must be a number or None, got {d!r}")
            if not math.isfinite(d):
                raise TypeError(f"material class {cls.__name__}: default of {k!r} is not finite ({d})")
        out[k] = d
    return out


def _check_rule_names(cls, name):
    for attr in ("positive", "nonnegative"):
        names = getattr(cls, attr, ())
        if isinstance(names, str) or not all(isinstance(k, str) for k in names):
            raise TypeError(f"register_material({name!r}): `{attr}` of {cls.__name__} must be a tuple of parameter "
                            f"names, got {names!r}")
        unknown = [k for k in names if k not in cls.params]
        if unknown:
            raise TypeError(f"register_material({name!r}): `{attr}` of {cls.__name__} names {unknown}, which are not "
                            f"among its parameters {list(cls.params)}")
        setattr(cls, attr, tuple(names))


def _is_ti_func(fn) -> bool:
    return callable(fn) and getattr(fn, "_is_taichi_function", False)


def _validate_class(cls, name: str):
    if not isinstance(cls, type) or not issubclass(cls, Material):
        raise TypeError(f"register_material({name!r}): {cls!r} must be a class deriving from "
                        "tigradsim.TetMaterial, tigradsim.ShellMaterial or tigradsim.core.registry.Material")
    kind = getattr(cls, "kind", "")
    if not isinstance(kind, str) or not kind:
        raise TypeError(f"register_material({name!r}): class {cls.__name__} needs a non-empty string `kind` "
                        "(\"tet\", \"shell\", ...)")
    shape = tuple(getattr(cls, "F_shape", ()) or KIND_F_SHAPES.get(kind, ()))
    if len(shape) != 2 or not all(isinstance(s, int) and s > 0 for s in shape):
        raise TypeError(f"register_material({name!r}): class {cls.__name__} of kind {kind!r} needs "
                        "`F_shape = (rows, cols)`")
    if not _is_ti_func(getattr(cls, "stress", None)):
        raise TypeError(f"register_material({name!r}): class {cls.__name__} needs a `@ti.func def stress(self, F, p)` "
                        "returning the first Piola-Kirchhoff stress")
    columns = getattr(cls, "stress_columns", None)
    if columns is not None and not _is_ti_func(columns):
        raise TypeError(f"register_material({name!r}): `stress_columns` of {cls.__name__} must be a @ti.func (or absent)")
    if issubclass(cls, ShellMaterial) and cls.stress is ShellMaterial.stress and columns is None:
        raise TypeError(f"register_material({name!r}): class {cls.__name__} needs a `@ti.func def stress(self, F, p)` "
                        "or a `@ti.func def stress_columns(self, f1, f2, p)` (ShellMaterial)")
    energy = getattr(cls, "energy", None)
    if energy is not None and not _is_ti_func(energy):
        raise TypeError(f"register_material({name!r}): `energy` of {cls.__name__} must be a @ti.func (or absent)")
    return kind, shape


def register_material(name: str, override: bool = False):
    """Class decorator registering a material under `name`.

    Applies `ti.data_oriented`, checks the class (kind, F_shape, params, a
    `@ti.func stress(self, F, p)`, an optional `@ti.func energy(self, F, p)`),
    normalises `params` to an OrderedDict and sets `name`, `param_names`,
    `param_count`, `has_energy`.  Registering a taken name raises ValueError
    unless `override=True`.  Returns the class unchanged otherwise.
    """
    if not isinstance(name, str) or not name:
        raise TypeError(f"register_material: name must be a non-empty string, got {name!r}")

    def decorator(cls):
        kind, shape = _validate_class(cls, name)
        if name in _registry and not override:
            prev = type(_registry[name])
            raise ValueError(f"register_material: the name {name!r} is already taken by "
                             f"{prev.__module__}.{prev.__qualname__}; pass override=True to replace it")
        cls.params = _normalize_params(cls)
        _check_rule_names(cls, name)
        cls.F_shape = shape
        cls.name = name
        cls.param_names = tuple(cls.params)
        cls.param_count = len(cls.params)
        cls.num_params = cls.param_count        # the older name
        cls.has_energy = getattr(cls, "energy", None) is not None
        # `@` on matrices inside these functions compiles quietly (see tigradsim/core/quiet_matmul.py).
        for fn_name in ("stress", "energy"):
            if fn_name in cls.__dict__ and cls.__dict__[fn_name] is not None:
                setattr(cls, fn_name, quiet_matmul_scope(cls.__dict__[fn_name]))
        cls = ti.data_oriented(cls)
        _registry[name] = cls()
        return cls

    return decorator


def unregister_material(name: str) -> None:
    """Remove a registered material (mainly for tests)."""
    _registry.pop(name, None)


def _entry_points():
    """The entry points of the group `tigradsim.materials` (importlib.metadata)."""
    from importlib import metadata
    eps = metadata.entry_points()
    if hasattr(eps, "select"):
        return list(eps.select(group=ENTRY_POINT_GROUP))
    return list(eps.get(ENTRY_POINT_GROUP, []))  # Python 3.9


def load_plugins(force: bool = False) -> list:
    """Import every not-yet-loaded entry point of the group `tigradsim.materials` (the built-in
    materials register when the package is imported: `tigradsim/__init__.py` imports
    `tigradsim.materials`).  Called lazily by `get_material` and `list_materials`;
    call it with force=True to pick up plugins installed since.  Returns the names
    of the entry points loaded by this call."""
    if _state["loading"]:
        return []
    if _state.get("scanned") and not force:
        return []
    _state["loading"] = True
    loaded = []
    try:
        try:
            eps = _entry_points()
        except Exception as exc:  # a broken environment must not break the simulator
            warnings.warn(f"tigradsim: could not list entry points of {ENTRY_POINT_GROUP!r}: {exc}", RuntimeWarning)
            eps = []
        for ep in eps:
            key = (ep.name, ep.value)
            if key in _state["loaded_eps"]:
                continue
            _state["loaded_eps"].add(key)
            try:
                obj = ep.load()
                if isinstance(obj, type) and issubclass(obj, Material) and not any(type(m) is obj for m in _registry.values()):
                    register_material(ep.name)(obj)
                loaded.append(ep.name)
            except Exception as exc:
                warnings.warn(f"tigradsim: material plugin {ep.name!r} ({ep.value}) failed to load and is "
                              f"skipped: {type(exc).__name__}: {exc}", RuntimeWarning)
        _state["scanned"] = True
    finally:
        _state["loading"] = False
    return loaded


def get_material(name: str) -> Material:
    """The registered material `name` (a shared instance of its class; use it in kernels as
    `mat.stress(F, p)` with `mat` captured by `ti.static` or passed as `ti.template()`).

    Raises MaterialNotFoundError (a KeyError) listing the known names.
    """
    if isinstance(name, Material):
        return name
    load_plugins()
    try:
        return _registry[name]
    except KeyError:
        raise MaterialNotFoundError(f"unknown material {name!r}; registered materials: {sorted(_registry)}") from None


def list_materials(kind: Optional[str] = None) -> list:
    """Sorted names of the registered materials, optionally only those of one kind."""
    load_plugins()
    return sorted(n for n, m in _registry.items() if kind is None or m.kind == kind)


# ---------------------------------------------------------------------------
# elastic constants

def lame_from_young_poisson(E, nu):
    """Lame parameters (mu, lam) from Young's modulus E and Poisson's ratio nu (-1 < nu < 0.5)."""
    E = np.asarray(E, dtype=np.float64)
    nu = np.asarray(nu, dtype=np.float64)
    if np.any(nu <= -1.0) or np.any(nu >= 0.5):
        raise ValueError(f"Poisson's ratio must lie in (-1, 0.5), got {nu}")
    mu = E / (2.0 * (1.0 + nu))
    lam = E * nu / ((1.0 + nu) * (1.0 - 2.0 * nu))
    if mu.ndim == 0:
        return float(mu), float(lam)
    return mu, lam


def neo_hookean_from_lame(mu_lame, lam_lame):
    """The (mu, lam) to give the stable neo-Hookean material so that its small-strain
    behaviour is linear elasticity with Lame parameters (mu_lame, lam_lame).

    Linearising Psi = mu/2 (Ic-3) - mu/2 log(Ic+1) + lam/2 (J-alpha)^2 at F = I gives
    Lame parameters 3/4 mu and lam - 5/8 mu, so mu = 4/3 mu_lame and
    lam = lam_lame + 5/6 mu_lame.
    """
    mu_lame = np.asarray(mu_lame, dtype=np.float64)
    lam_lame = np.asarray(lam_lame, dtype=np.float64)
    mu = 4.0 / 3.0 * mu_lame
    lam = lam_lame + 5.0 / 6.0 * mu_lame
    if mu.ndim == 0:
        return float(mu), float(lam)
    return mu, lam


def lame_from_neo_hookean(mu, lam):
    """Inverse of `neo_hookean_from_lame`: the small-strain Lame parameters (3/4 mu, lam - 5/8 mu)."""
    mu = np.asarray(mu, dtype=np.float64)
    lam = np.asarray(lam, dtype=np.float64)
    out = (0.75 * mu, lam - 0.625 * mu)
    if out[0].ndim == 0:
        return float(out[0]), float(out[1])
    return out


# ---------------------------------------------------------------------------
# evaluation helpers (tests, debugging, plots): one small kernel for any material

@ti.kernel
def _eval_kernel(mat: ti.template(), nr: ti.template(), nc: ti.template(), npar: ti.template(),
                 want_energy: ti.template(), F: ti.types.ndarray(), p: ti.types.ndarray(),
                 out_P: ti.types.ndarray(), out_e: ti.types.ndarray()):
    for i in range(F.shape[0]):
        M = ti.Matrix.zero(float, nr, nc)
        for a, b in ti.static(ti.ndrange(nr, nc)):
            M[a, b] = F[i, a, b]
        q = ti.Vector.zero(float, max(npar, 1))
        for k in ti.static(range(npar)):
            q[k] = p[i, k]
        if ti.static(want_energy):
            out_e[i] = mat.energy(M, q)
        else:
            P = mat.stress(M, q)
            for a, b in ti.static(ti.ndrange(nr, nc)):
                out_P[i, a, b] = P[a, b]


def _prepare(material, F, values):
    from .runtime import ensure_init, np_float
    ensure_init()
    mat = get_material(material)
    nr, nc = mat.F_shape
    F = np.asarray(F, dtype=np.float64)
    single = F.ndim == 2
    F = F.reshape(-1, nr, nc)
    if isinstance(values, Mapping) or values is None:
        p = mat.param_vector(values)
    else:
        p = np.asarray(values, dtype=np.float64)
    if mat.param_count == 0:
        p = np.zeros((F.shape[0], 1))
    else:
        p = np.broadcast_to(p, (F.shape[0], mat.param_count))
    fp = np_float()
    return mat, nr, nc, np.ascontiguousarray(F, dtype=fp), np.ascontiguousarray(p, dtype=fp), single, fp


def evaluate_stress(material, F, values=None) -> np.ndarray:
    """P(F) of a material for one F (shape F_shape) or a batch (N, *F_shape).

    `values` is a params dict (defaults filled in) or an array of parameter values
    (param_count,) or (N, param_count).  Runs a small Taichi kernel (calls `tgs.init`
    with defaults if Taichi is not initialised).
    """
    mat, nr, nc, F, p, single, fp = _prepare(material, F, values)
    out = np.zeros(F.shape, dtype=fp)
    dummy = np.zeros(1, dtype=fp)
    _eval_kernel(mat, nr, nc, mat.param_count, False, F, p, out, dummy)
    return out[0] if single else out


def evaluate_energy(material, F, values=None) -> np.ndarray:
    """Psi(F) of a material (see `evaluate_stress` for the arguments)."""
    mat, nr, nc, F, p, single, fp = _prepare(material, F, values)
    if not mat.has_energy:
        raise NotImplementedError(f"material {mat.name!r} defines no energy")
    out = np.zeros(F.shape[0], dtype=fp)
    dummy = np.zeros((1, nr, nc), dtype=fp)
    _eval_kernel(mat, nr, nc, mat.param_count, True, F, p, dummy, out)
    return out[0] if single else out
