"""Scene files: a TOML description of a clip's scene, parsed and validated into a `SceneSpec`.

What `tigradsim render` and `tigradsim fit` read.  Everything is checked here, in
Python, before any kernel runs, and every error names the file, the section and
the key, e.g.

    scene.toml: [objects.box] mass: expected a positive number, got -1

Unknown keys are errors too, with a "did you mean" suggestion.  The scene as a whole is
checked last, with the checks the Python API runs (tigradsim/scenes/scene_sanity.py): an object
starting inside the ground, a camera below the ground or looking away from the objects (e.g. R
given camera-to-world), an object outside the camera's view at the first frame (partly outside:
a warning) are errors that say what was probably meant.  Paths are relative to the scene file.  Units: metres, kilograms, seconds, degrees (fov only).

Sections (see demos/scenes/*.toml for complete examples):

    [world]        up = "y" | "z" (default "y"); gravity = 9.8 (magnitude, along -up)
                   or a 3-vector in the file's axes
    [simulation]   substeps = 32 (steps per footage frame) | dt = 0.0005 (seconds);
                   duration = seconds simulated (default: to the last footage frame);
                   checkpoint_every = steps per checkpointed segment (optional)
    [ground]       ke, kd, kf, mu (penalty contact; the ground is the plane through the
                   origin normal to `up`); damping = "capped" | "uncapped", friction =
                   "capped" | "huber", friction_velocity (the contact law, tigradsim.physics.contact)
    [objects.NAME] type = "rigid": mesh = "box.obj" (OBJ; duplicate vertices welded) or
                   box = [sx, sy, sz]; mass | density; scale; ke, kd, kf, mu (own contact
                   parameters, default the ground's); contact_radius; contact_law = {damping
                   = "uncapped", friction = "huber", friction_velocity = 1e-3} (own law)
                   type = "soft": tetgen = "ball.node" (+ .ele beside it) or
                   mesh = "ball.msh" (Gmsh, .vtu, .vtk, .mesh, ...: any meshio volume format) or
                   nodes = "x.npy" | [[x, y, z], ...] with tets = "t.npy" | [[i, j, k, l], ...]
                   (0-based; .npy or a text table) or
                   tet_box = {cells = [nx, ny, nz], size = [sx, sy, sz]} or
                   tet_ball = {radius = r, resolution = 2}; material, params = {...},
                   one of density (kg/m^3), mass (total kg) and node_mass (kg per vertex: a number
                   for every vertex alike, a list, or "m.npy"); damping, damping_model =
                   "deformation_rate" | "warp" | "rayleigh_stiffness" | "rayleigh_mass"
                   (tigradsim.physics.damping);
                   radius (contact radius of the vertices)
                   both: position, rotation (unit quaternion x y z w, mesh to world),
                   velocity, angular_velocity (rad/s about the centre), color (RGB in
                   [0, 1] for RGB supervision; default: the footage's mean inside the masks)
    [[forces]]     object, force (N, world), point (mesh coordinates; default the
                   centre of mass), torque (N m), start, end (seconds)
    [camera]       OpenCV: K (3x3), R (3x3, world to camera), t (3), width, height;
                   or look-at: eye, target, up, fov (degrees across the shorter side),
                   width, height; near, far (optional)
    [footage]      frames = "frames/frame_%04d.png" (printf pattern or glob), masks = ...,
                   fps, start_time (simulation time of the first frame, default 0),
                   background = "plate.png" | "estimate" (RGB supervision), first, count
    [unknowns."OBJECT.PARAM"]  init, lower, upper, log (default true); PARAM is mass, ke,
                   kd, kf, mu of a rigid object, a material parameter, damping, mass (total)
                   or density of a soft object, ke, kd, kf, mu of "ground", or a tie "ke_per_mass",
                   "kd_per_mass", "kf_per_mass" (the stiffness per unit mass is the unknown)
    [fit]          iterations, optimizer = "adam" | "bfgs" | "adam+bfgs", lr, polish
                   (BFGS steps of adam+bfgs), starts (multi-start: points scored),
                   local_starts (the best ones fitted), seed, horizons (coarse to fine:
                   frame counts fitted in turn), horizon = "all" | "auto" ("auto": each stage
                   fits at most the frames the model can follow at the values it starts from:
                   the leading frames where the rollouts at dt and dt/2, rendered, differ by
                   an estimated model error (Richardson, 2x the difference for the first-order
                   integrator) within horizon_tolerance = 0.5 render pixels; the report says
                   how many frames were fitted and why; Scene.predictability),
                   time_step_bias (true: the 95 % intervals also cover the time step's bias,
                   estimated by step doubling at the estimate: one rollout at dt/2 per local
                   fit; Scene.time_step_systematics), rtol (stop a
                   stage when the loss falls by less over 5 iterations), time_budget (seconds),
                   supervision = "mask" | "rgb" | "both", resolution (render width in px;
                   the footage is averaged down to it), sigma (edge softness, NDC^2; "auto",
                   the default: as sharp as a camera's antialiased edge, 10-90 % over 0.8 px
                   at the render size, `tigradsim.renderers.sigma_for_edge`), blur
                   (list of blur widths in px of the image loss), refine_camera (fit a
                   correction of the camera pose, within 3 degrees and 5 cm, with the
                   unknowns), refine_focal (and of the focal length, within a factor 1.25),
                   camera_sigma_rotation_deg (0.5), camera_sigma_translation_m (0.01):
                   the calibration's uncertainty, a Gaussian prior on the correction
                   (per component; tigradsim/fitting/camera_prior.py), camera_prior_variance
                   (2e-2: the per-pixel residual variance the prior is weighed against),
                   refine (Levenberg-Marquardt iterations after the gradient steps)

Up axis: tigradsim's world is y-up.  A file written with up = "z" is mapped into it by
one fixed rotation, M = [[1, 0, 0], [0, 0, 1], [0, -1, 0]] ((x, y, z) -> (x, z, -y), a
-90 degree turn about x), applied to everything in the file: positions, velocities,
angular velocities, gravity, forces, force points and meshes (so a body's rotation R
becomes M R M^T, i.e. the quaternion's vector part is rotated by M), and the camera
(R becomes R M^T; eye, target and up become M eye, ...).  Results (estimates,
rollouts) are reported in the file's own terms; the ground is z = 0 in the file.
"""
from __future__ import annotations

import difflib
import json
import math
import os
import re
from dataclasses import dataclass, field
from typing import Optional

import numpy as np

try:                                   # Python >= 3.11
    import tomllib
except ModuleNotFoundError:            # pragma: no cover - older Pythons use the backport
    import tomli as tomllib

__all__ = ["SceneError", "SceneSpec", "ObjectSpec", "ForceSpec", "CameraSpec", "FootageSpec", "UnknownSpec",
           "FitSpec", "load_scene", "parse_scene", "Z_UP_TO_Y_UP", "RIGID_PARAMS", "TIES"]

# (x, y, z) -> (x, z, -y): the file's z-up axes to tigradsim's y-up world.
Z_UP_TO_Y_UP = np.array([[1.0, 0.0, 0.0], [0.0, 0.0, 1.0], [0.0, -1.0, 0.0]])
CONTACT_PARAMS = ("ke", "kd", "kf", "mu")
RIGID_PARAMS = ("mass",) + CONTACT_PARAMS
TIES = {"ke_per_mass": "ke", "kd_per_mass": "kd", "kf_per_mass": "kf"}
SUPERVISIONS = ("mask", "rgb", "both")
OPTIMIZERS = ("adam", "bfgs", "adam+bfgs")
_REQUIRED = object()


class SceneError(ValueError):
    """A scene file is wrong; the message names the file, the section and the key."""

    def __init__(self, file, section, key, message):
        self.file, self.section, self.key = str(file), section, key
        where = f"[{section}] " if section else ""
        what = f"{key}: " if key else ""
        super().__init__(f"{self.file}: {where}{what}{message}")


# ---------------------------------------------------------------------------
# specs (file coordinates, validated; paths absolute)

@dataclass
class ObjectSpec:
    """One object.  kind "rigid": `vertices`, `faces` (closed surface, welded); kind "soft":
    `vertices`, `tets`.  Vectors are in the file's axes."""
    name: str
    kind: str
    vertices: np.ndarray
    faces: Optional[np.ndarray] = None
    tets: Optional[np.ndarray] = None
    mass: Optional[float] = None
    density: Optional[float] = None
    contact: dict = field(default_factory=dict)
    contact_radius: float = 0.0
    law: dict = field(default_factory=dict)       # rigid: this body's contact law (default: the ground's)
    material: Optional[str] = None
    params: dict = field(default_factory=dict)
    damping: float = 0.0
    damping_model: str = "deformation_rate"
    node_mass: Optional[np.ndarray] = None   # soft: per-vertex masses [kg] (instead of mass / density)
    position: np.ndarray = field(default_factory=lambda: np.zeros(3))
    rotation: np.ndarray = field(default_factory=lambda: np.array([0.0, 0.0, 0.0, 1.0]))
    velocity: np.ndarray = field(default_factory=lambda: np.zeros(3))
    angular_velocity: np.ndarray = field(default_factory=lambda: np.zeros(3))
    color: Optional[np.ndarray] = None     # RGB in [0, 1]; None: estimated from the footage inside the masks
    source: str = ""


@dataclass
class ForceSpec:
    object: str
    force: np.ndarray
    point: Optional[np.ndarray]
    torque: np.ndarray
    start: float
    end: float
    index: int = 0


@dataclass
class CameraSpec:
    """kind "opencv": K, R, t; kind "lookat": eye, target, up, fov.  File axes."""
    kind: str
    width: int
    height: int
    K: Optional[np.ndarray] = None
    R: Optional[np.ndarray] = None
    t: Optional[np.ndarray] = None
    eye: Optional[np.ndarray] = None
    target: Optional[np.ndarray] = None
    up: Optional[np.ndarray] = None
    fov: Optional[float] = None
    near: float = 0.01
    far: float = 100.0


@dataclass
class FootageSpec:
    """frames, masks: the files used (absolute paths, in order); folder + pattern (file-name
    pattern, None for a single file) as `tgs.load_footage` takes them; first, count: the
    frames used of those matched."""
    frames: list
    masks: Optional[list]
    fps: float
    start_time: float = 0.0
    background: Optional[str] = None     # absolute path, "estimate" or None
    folder: str = ""
    pattern: Optional[str] = None
    masks_folder: Optional[str] = None
    masks_pattern: Optional[str] = None
    first: int = 0
    count: int = 0


@dataclass
class UnknownSpec:
    """`target` is "OBJECT.PARAM"; `object`, `param` its parts; `tie` the tied parameter
    ("ke" for "ke_per_mass") or None."""
    target: str
    object: str
    param: str
    init: float
    lower: Optional[float]
    upper: Optional[float]
    log: bool
    tie: Optional[str] = None


@dataclass
class FitSpec:
    iterations: int = 60
    optimizer: str = "adam+bfgs"
    lr: float = 0.05
    lr_decay: float = 0.97
    polish: Optional[int] = None          # BFGS steps of adam+bfgs (default: half the iterations)
    polish_lr: float = 0.05
    starts: int = 1
    local_starts: int = 1
    seed: int = 0
    horizons: Optional[tuple] = None      # coarse to fine: frame counts fitted in turn (the clip last)
    horizon: str = "all"                  # "auto": no stage fits past the predictable horizon (Scene.set_horizon)
    # the largest estimated error of the model's silhouette edges in a fitted frame [render px]: half a
    # pixel, the resolution of an edge's position on the pixel grid; beyond it a frame's residual is
    # the model's own error (its dt), which the unknowns would be bent to explain
    horizon_tolerance: float = 0.5
    time_step_bias: bool = True           # intervals cover the step-doubling bias estimate
    rtol: Optional[float] = None          # stop a stage when the loss falls by less over 5 iterations
    time_budget: Optional[float] = None   # seconds for the whole fit
    supervision: str = "mask"
    resolution: Optional[int] = None
    sigma: Optional[float] = None         # None ("auto"): sigma_for_edge(0.8 px) at the render size
    gamma: float = 1e-4
    blur: tuple = (0.0, 2.0, 4.0)
    refine_camera: bool = False
    refine_focal: bool = False
    camera_sigma_rotation_deg: float = 0.5     # prior std of each rotation-vector component [degree]
    camera_sigma_translation_m: float = 0.01   # prior std of each translation component [m, file units]
    camera_prior_variance: float = 2e-2        # per-residual variance the prior is weighed against
    refine: int = 0


@dataclass
class SceneSpec:
    path: str
    name: str
    up: str
    gravity: np.ndarray                   # file axes
    dt: Optional[float]
    substeps: Optional[int]
    duration: Optional[float]
    checkpoint_every: Optional[int]
    ground: Optional[dict]
    objects: dict                         # name -> ObjectSpec (file order)
    forces: list
    camera: CameraSpec
    footage: Optional[FootageSpec]
    unknowns: list
    fit: FitSpec
    ground_given: tuple = ()             # the [ground] contact constants the file states (the rest are defaults)

    @property
    def axes(self) -> np.ndarray:
        """The fixed rotation from the file's axes to tigradsim's y-up world (identity for up = "y")."""
        return np.eye(3) if self.up == "y" else Z_UP_TO_Y_UP.copy()

    def error(self, section, key, message) -> SceneError:
        return SceneError(self.path, section, key, message)


# ---------------------------------------------------------------------------
# reading one table

def _typename(v):
    if isinstance(v, bool):
        return "a boolean"
    if isinstance(v, (int, float)):
        return "a number"
    if isinstance(v, str):
        return "a string"
    if isinstance(v, list):
        return "an array"
    if isinstance(v, dict):
        return "a table"
    return type(v).__name__


def _show(v):
    if isinstance(v, dict):
        return "a table"
    text = json.dumps(v) if isinstance(v, str) else str(v).replace("'", '"')     # TOML spelling
    return text if len(text) < 80 else text[:77] + "..."


class _Table:
    """Typed access to one TOML table; every error names the file, the section and the key."""

    def __init__(self, file, section, data, allowed):
        self.file, self.section, self.data = file, section, data
        if not isinstance(data, dict):
            raise SceneError(file, None, section, f"expected a table, got {_typename(data)} {_show(data)}")
        for key in data:
            if key not in allowed:
                self.unknown(key, allowed)

    def unknown(self, key, allowed):
        close = difflib.get_close_matches(key, list(allowed), n=1, cutoff=0.6)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise SceneError(self.file, self.section, key, f"unknown key{hint} (allowed: {', '.join(sorted(allowed))})")

    def fail(self, key, message):
        raise SceneError(self.file, self.section, key, message)

    def has(self, key):
        return key in self.data

    def _get(self, key, default):
        if key in self.data:
            return self.data[key]
        if default is _REQUIRED:
            self.fail(key, "missing (required)")
        return default

    def number(self, key, default=_REQUIRED, positive=False, nonnegative=False, lo=None, hi=None):
        v = self._get(key, default)
        if v is None or (v is default and key not in self.data):
            return v
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            self.fail(key, f"expected a number, got {_typename(v)} {_show(v)}")
        v = float(v)
        if not math.isfinite(v):
            self.fail(key, f"expected a finite number, got {v}")
        if positive and not v > 0:
            self.fail(key, f"expected a positive number, got {_show(self.data[key])}")
        if nonnegative and v < 0:
            self.fail(key, f"expected a number >= 0, got {_show(self.data[key])}")
        if lo is not None and v < lo or hi is not None and v > hi:
            self.fail(key, f"expected a number in [{lo}, {hi}], got {_show(self.data[key])}")
        return v

    def integer(self, key, default=_REQUIRED, minimum=None):
        v = self._get(key, default)
        if key not in self.data:
            return v
        if isinstance(v, bool) or not isinstance(v, int):
            self.fail(key, f"expected an integer, got {_typename(v)} {_show(v)}")
        if minimum is not None and v < minimum:
            self.fail(key, f"expected an integer >= {minimum}, got {v}")
        return int(v)

    def boolean(self, key, default=_REQUIRED):
        v = self._get(key, default)
        if key in self.data and not isinstance(v, bool):
            self.fail(key, f"expected true or false, got {_typename(v)} {_show(v)}")
        return v

    def string(self, key, default=_REQUIRED, choices=None):
        v = self._get(key, default)
        if key not in self.data:
            return v
        if not isinstance(v, str):
            self.fail(key, f"expected a string, got {_typename(v)} {_show(v)}")
        if choices is not None and v not in choices:
            close = difflib.get_close_matches(v, list(choices), n=1, cutoff=0.5)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            self.fail(key, f"expected one of {', '.join(repr(c) for c in choices)}, got {v!r}{hint}")
        return v

    def array(self, key, shape, default=_REQUIRED, positive=False):
        """A nested list of numbers of `shape` (a tuple; None entries: any length)."""
        v = self._get(key, default)
        if key not in self.data:
            return None if v is None else np.asarray(v, dtype=np.float64)
        want = "x".join("N" if s is None else str(s) for s in shape)
        what = f"an array of {shape[0]} numbers" if len(shape) == 1 and shape[0] else f"a {want} array of numbers"

        def ok(x, depth):
            if depth == len(shape):
                return isinstance(x, (int, float)) and not isinstance(x, bool)
            return isinstance(x, list) and (shape[depth] is None or len(x) == shape[depth]) and \
                all(ok(y, depth + 1) for y in x) and (depth + 1 == len(shape) or len({len(y) for y in x}) <= 1)

        if not ok(v, 0):
            self.fail(key, f"expected {what}, got {_show(v)}")
        arr = np.asarray(v, dtype=np.float64)
        if not np.all(np.isfinite(arr)):
            self.fail(key, f"expected finite numbers, got {_show(v)}")
        if positive and np.any(arr <= 0):
            self.fail(key, f"expected positive numbers, got {_show(v)}")
        return arr

    def table(self, key, default=_REQUIRED):
        v = self._get(key, default)
        if key in self.data and not isinstance(v, dict):
            self.fail(key, f"expected a table ({{...}}), got {_typename(v)} {_show(v)}")
        return v

    def path(self, key, default=_REQUIRED, base=None):
        """A path relative to the scene file, which must exist."""
        v = self.string(key, default)
        if key not in self.data:
            return v
        p = os.path.normpath(os.path.join(base, os.path.expanduser(v)))
        if not os.path.exists(p):
            self.fail(key, f"file not found: {v!r} (resolved to {p})")
        return p


# ---------------------------------------------------------------------------
# meshes

def _quaternion(t: _Table, key):
    q = t.array(key, (4,), default=None)
    if q is None:
        return np.array([0.0, 0.0, 0.0, 1.0])
    n = float(np.linalg.norm(q))
    if abs(n - 1.0) > 1e-6:
        t.fail(key, f"expected a unit quaternion (x, y, z, w), got norm {n:.9g}: {q.tolist()}")
    return q / n


# ---------------------------------------------------------------------------
# sections

_TOP = ("world", "simulation", "ground", "objects", "forces", "camera", "footage", "unknowns", "fit")
_COMMON_OBJ = ("type", "position", "rotation", "velocity", "angular_velocity", "color")
_RIGID_KEYS = _COMMON_OBJ + ("mesh", "box", "mass", "density", "scale", "contact_radius", "contact_law") + \
    CONTACT_PARAMS
_SOFT_KEYS = _COMMON_OBJ + ("tetgen", "mesh", "nodes", "tets", "tet_box", "tet_ball", "material", "params", "density",
                            "mass", "node_mass", "damping", "damping_model", "radius", "scale")
SOFT_MASS_PARAMS = ("mass", "density")


def _parse_object(file, base, name, data):
    sec = f"objects.{name}"
    if not isinstance(data, dict):
        raise SceneError(file, None, sec, f"expected a table, got {_typename(data)} {_show(data)}")
    kind = data.get("type", None)
    if kind is None:
        raise SceneError(file, sec, "type", 'missing (required): "rigid" or "soft"')
    t = _Table(file, sec, data, _RIGID_KEYS if kind == "rigid" else _SOFT_KEYS if kind == "soft" else _COMMON_OBJ)
    t.string("type", choices=("rigid", "soft"))
    obj = ObjectSpec(name=name, kind=kind, vertices=np.zeros((0, 3)))
    obj.position = t.array("position", (3,), default=np.zeros(3))
    obj.rotation = _quaternion(t, "rotation")
    obj.velocity = t.array("velocity", (3,), default=np.zeros(3))
    obj.angular_velocity = t.array("angular_velocity", (3,), default=np.zeros(3))
    obj.color = t.array("color", (3,), default=None)
    if obj.color is not None and (np.any(obj.color < 0) or np.any(obj.color > 1)):
        t.fail("color", f"expected RGB values in [0, 1], got {obj.color.tolist()}")
    scale = t.number("scale", 1.0, positive=True)
    if kind == "rigid":
        _parse_rigid(t, base, obj)
    else:
        _parse_soft(t, base, obj)
    obj.vertices = obj.vertices * scale
    return obj


def _one_of(t, keys):
    given = [k for k in keys if t.has(k)]
    if len(given) != 1:
        msg = "missing: give one of " if not given else f"give only one of (got {', '.join(given)}): "
        t.fail(" / ".join(keys), msg + ", ".join(keys))
    return given[0]


def _parse_rigid(t, base, obj):
    from ..io.meshes import box_surface, load_obj, weld_vertices
    from ..physics.rigid_mass import check_closed_mesh

    source = _one_of(t, ("mesh", "box"))
    if source == "mesh":
        p = t.path("mesh", base=base)
        try:
            v, f = load_obj(p)
        except (ValueError, IndexError, OSError) as exc:
            t.fail("mesh", f"cannot read {os.path.basename(p)} as an OBJ mesh: {exc}")
        if len(f) == 0:
            t.fail("mesh", f"{os.path.basename(p)} has no faces")
        # per-face corners (OBJ exporters) -> one closed surface, the same rule as add_rigid_body
        diag = float(np.linalg.norm(np.ptp(np.asarray(v, dtype=np.float64), axis=0)))
        v, f, _ = weld_vertices(v, f, 1e-6 * diag)
        obj.source = p
    else:
        size = t.array("box", (3,), positive=True)
        v, f = box_surface(size)
        obj.source = f"box {size.tolist()}"
    try:
        v, f = check_closed_mesh(v, f)
    except (ValueError, IndexError, TypeError) as exc:
        t.fail(source, f"not a closed, consistently oriented surface: {exc}")
    from ..physics.rigid_mass import mass_properties
    volume = mass_properties(v, f)[0]
    if not volume > 0:
        t.fail(source, f"the surface encloses a non-positive volume ({volume:g} m^3): faces must be ordered "
                       "counter-clockwise seen from outside")
    obj.vertices, obj.faces = v, f
    if t.has("mass") and t.has("density"):
        t.fail("mass / density", "give one of mass and density, not both")
    obj.mass = t.number("mass", None, positive=True)
    obj.density = t.number("density", None, positive=True)
    if obj.mass is None and obj.density is None:
        t.fail("mass / density", "missing: give mass [kg] or density [kg/m^3]")
    for k in CONTACT_PARAMS:
        v = t.number(k, None, nonnegative=True)
        if v is not None:
            obj.contact[k] = v
    obj.contact_radius = t.number("contact_radius", 0.0, nonnegative=True)
    if t.has("contact_law"):
        obj.law = _parse_law(_Table(t.file, f"{t.section}.contact_law", t.table("contact_law"),
                                    ("damping", "friction", "friction_velocity")))


def _parse_law(g):
    """damping = "capped" | "uncapped", friction = "capped" | "huber", friction_velocity (m/s)."""
    law = {"damping": g.string("damping", None, choices=("capped", "uncapped")),
           "friction": g.string("friction", None, choices=("capped", "huber")),
           "friction_velocity": g.number("friction_velocity", None, positive=True)}
    if law["friction_velocity"] is not None and law["friction"] != "huber":
        g.fail("friction_velocity", 'only used with friction = "huber"')
    return {k: v for k, v in law.items() if v is not None}


def _parse_soft(t, base, obj):
    from ..io.meshes import load_tetgen, tet_ball, tet_box
    from ..core.registry import get_material, list_materials

    source = _one_of(t, ("tetgen", "mesh", "nodes", "tet_box", "tet_ball"))
    if t.has("tets") and source != "nodes":
        t.fail("tets", "only with nodes = ... (the node array the tets index)")
    if source in ("mesh", "nodes"):
        v, tets, obj.source = _soft_mesh_input(t, base, source)
    elif source == "tetgen":
        p = t.path("tetgen", base=base)
        ele = os.path.splitext(p)[0] + ".ele"
        if not os.path.exists(ele):
            t.fail("tetgen", f"{os.path.basename(p)} needs its .ele file beside it: {ele} not found")
        try:
            v, tets = load_tetgen(p, ele)
        except (ValueError, IndexError, OSError) as exc:
            t.fail("tetgen", f"cannot read the TetGen mesh: {exc}")
        obj.source = p
    elif source == "tet_box":
        g = _Table(t.file, f"{t.section}.tet_box", t.data["tet_box"], ("cells", "size"))
        cells = g.array("cells", (3,), positive=True)
        if np.any(cells != np.round(cells)):
            g.fail("cells", f"expected 3 positive integers, got {cells.tolist()}")
        size = g.array("size", (3,), positive=True)
        v, tets = tet_box(*cells.astype(int), size=size, origin=-0.5 * size)
        obj.source = f"tet_box cells {cells.astype(int).tolist()} size {size.tolist()}"
    else:
        g = _Table(t.file, f"{t.section}.tet_ball", t.data["tet_ball"], ("radius", "resolution"))
        radius = g.number("radius", positive=True)
        res = g.integer("resolution", 2, minimum=1)
        if res > 4:
            g.fail("resolution", f"expected 1 to 4 (level {res} would have {10 * 4 ** res + 2} surface vertices)")
        v, tets = tet_ball(radius, resolution=res)
        obj.source = f"tet_ball radius {radius} resolution {res}"
    obj.vertices, obj.tets = np.asarray(v, dtype=np.float64), np.asarray(tets)
    names = list_materials("tet")
    obj.material = t.string("material", "neo_hookean", choices=names)
    mat = get_material(obj.material)
    params = t.table("params", {})
    allowed = tuple(mat.params) + ("damping",)
    p = _Table(t.file, f"{t.section}.params", params, allowed)
    obj.params = {k: p.number(k, positive=k != "damping", nonnegative=True) for k in params}
    obj.damping = t.number("damping", 0.0, nonnegative=True)
    if "damping" in obj.params:
        if t.has("damping"):
            t.fail("damping", "given twice (also in params)")
        obj.damping = obj.params.pop("damping")
    from ..physics.damping import DAMPING_MODELS
    obj.damping_model = t.string("damping_model", "deformation_rate", choices=tuple(DAMPING_MODELS))
    mass_key = _one_of(t, ("density", "mass", "node_mass"))
    if mass_key == "node_mass":
        obj.node_mass = _node_mass(t, base, len(obj.vertices))
    else:
        setattr(obj, mass_key, t.number(mass_key, positive=True))
    obj.contact_radius = t.number("radius", 0.01, nonnegative=True)


def _array_value(t, key, base):
    """An array given inline (a TOML list) or as a file name (.npy or a text table), as numpy."""
    from ..io.mesh_io import MeshFileError, load_array
    v = t.data[key]
    if isinstance(v, str):
        try:
            return load_array(t.path(key, base=base))
        except MeshFileError as exc:
            t.fail(key, str(exc))
    if not isinstance(v, list):
        t.fail(key, f"expected a file name or an array, got {_typename(v)} {_show(v)}")
    try:
        arr = np.asarray(v, dtype=np.float64)
    except (TypeError, ValueError):
        t.fail(key, f"expected a rectangular array of numbers, got {_show(v)}")
    return arr


def _soft_mesh_input(t, base, source):
    """(vertices, tets, source) of mesh = "file" (any meshio volume format, or TetGen) or nodes / tets arrays."""
    from ..io.mesh_io import MeshFileError, load_mesh, tets_from_arrays
    if source == "mesh":
        p = t.path("mesh", base=base)
        try:
            v, tets = load_mesh(p, cells="tetra")
        except (MeshFileError, ValueError, IndexError, OSError) as exc:
            t.fail("mesh", f"cannot read a tet mesh: {exc}")
        return v, tets, p
    if not t.has("tets"):
        t.fail("tets", "missing: nodes = ... needs tets = ... (0-based vertex indices, 4 a row)")
    nodes, tets = _array_value(t, "nodes", base), _array_value(t, "tets", base)
    try:
        v, tets = tets_from_arrays(nodes, tets, source="nodes / tets")
    except MeshFileError as exc:
        t.fail("nodes / tets", str(exc))
    return v, tets, f"nodes / tets ({len(v)} nodes, {len(tets)} tets)"


def _node_mass(t, base, count):
    """node_mass: a number (every vertex alike), a list or a file of `count` positive masses [kg]."""
    if isinstance(t.data["node_mass"], (int, float)) and not isinstance(t.data["node_mass"], bool):
        return np.full(count, t.number("node_mass", positive=True))
    m = _array_value(t, "node_mass", base).reshape(-1)
    if m.shape != (count,):
        t.fail("node_mass", f"expected one mass per vertex ({count}), got {m.size}")
    if not np.all(np.isfinite(m)) or np.any(m <= 0):
        k = int(np.nonzero(~(np.isfinite(m) & (m > 0)))[0][0])
        t.fail("node_mass", f"expected positive finite masses [kg], got {m[k]} at vertex {k}")
    return m


def _parse_force(file, k, data, objects):
    sec = f"forces.{k}"
    t = _Table(file, sec, data, ("object", "force", "point", "torque", "start", "end"))
    name = t.string("object")
    if name not in objects:
        close = difflib.get_close_matches(name, list(objects), n=1)
        t.fail("object", f"no object named {name!r}" + (f"; did you mean {close[0]!r}?" if close else "")
               + f" (objects: {', '.join(objects) or 'none'})")
    if objects[name].kind != "rigid":
        t.fail("object", f"{name!r} is a soft object: known forces act on rigid objects only")
    force = t.array("force", (3,), default=np.zeros(3))
    torque = t.array("torque", (3,), default=np.zeros(3))
    if not t.has("force") and not t.has("torque"):
        t.fail("force", "missing: give force [N] (and/or torque [N m])")
    start = t.number("start", 0.0, nonnegative=True)
    end = t.number("end", math.inf)
    if t.has("end") and not end > start:
        t.fail("end", f"expected end > start ({start}), got {end}")
    return ForceSpec(object=name, force=force, point=t.array("point", (3,), default=None), torque=torque,
                     start=start, end=end, index=k)


def _is_rotation(R, tol=1e-6):
    return np.allclose(R @ R.T, np.eye(3), atol=tol) and abs(np.linalg.det(R) - 1.0) < tol


def _parse_camera(file, data):
    t = _Table(file, "camera", data, ("K", "R", "t", "eye", "target", "up", "fov", "width", "height", "near", "far"))
    opencv = [k for k in ("K", "R", "t") if t.has(k)]
    lookat = [k for k in ("eye", "target", "up", "fov") if t.has(k)]
    if opencv and lookat:
        t.fail(", ".join(opencv + lookat), "inconsistent camera: give either K, R, t (OpenCV) or eye, target, up, "
                                            "fov (look-at), not keys of both")
    if not opencv and not lookat:
        t.fail("K / eye", "missing: give K, R, t (OpenCV calibration) or eye, target, fov (look-at)")
    cam = CameraSpec(kind="opencv" if opencv else "lookat", width=t.integer("width", minimum=1),
                     height=t.integer("height", minimum=1))
    cam.near = t.number("near", 0.01, positive=True)
    cam.far = t.number("far", 100.0, positive=True)
    if not cam.far > cam.near:
        t.fail("far", f"expected far > near ({cam.near}), got {cam.far}")
    if opencv:
        K = t.array("K", (3, 3))
        R = t.array("R", (3, 3))
        cam.t = t.array("t", (3,))
        if not np.allclose(K[2], [0.0, 0.0, 1.0]) or K[1, 0] != 0 or K[0, 1] != 0:
            t.fail("K", f"inconsistent camera: expected [[fx, 0, cx], [0, fy, cy], [0, 0, 1]] (no skew), got {K.tolist()}")
        if not (K[0, 0] > 0 and K[1, 1] > 0):
            t.fail("K", f"inconsistent camera: expected positive focal lengths fx, fy, got {K[0, 0]}, {K[1, 1]}")
        if not _is_rotation(R):
            t.fail("R", "inconsistent camera: expected a rotation matrix (R R^T = I, det R = 1), got "
                        f"{np.round(R, 6).tolist()} (det {np.linalg.det(R):.6g})")
        from ..renderers.camera import check_principal_point
        try:
            check_principal_point(K[0, 2], K[1, 2], cam.width, cam.height, who="inconsistent camera")
        except ValueError as exc:
            t.fail("K", str(exc))
        cam.K, cam.R = K, R
    else:
        cam.eye = t.array("eye", (3,))
        cam.target = t.array("target", (3,))
        cam.up = t.array("up", (3,), default=None)
        cam.fov = t.number("fov", lo=1e-3, hi=179.0)
        if np.linalg.norm(cam.target - cam.eye) < 1e-12:
            t.fail("target", f"inconsistent camera: eye and target coincide ({cam.eye.tolist()})")
    return cam


def _expand_pattern(t, key, base):
    """The files of a frame pattern, in frame order: a printf ("frames/frame_%04d.png", by
    number) or glob ("frames/*.png", natural order) pattern on the file name, or one file.
    Returns (files, folder, file-name pattern or None)."""
    from ..io.video import list_frames

    pattern = t.string(key)
    full = os.path.normpath(os.path.join(base, os.path.expanduser(pattern)))
    folder, name = os.path.split(full)
    if os.path.isdir(full):
        t.fail(key, f"{pattern!r} is a folder: give a file pattern, e.g. {os.path.join(pattern, 'frame_%04d.png')!r} "
                    f"or {os.path.join(pattern, '*.png')!r}, so that frames and masks are not mixed")
    if re.search(r"%0?\d*d", folder) or any(c in folder for c in "*?["):
        t.fail(key, f"{pattern!r}: only the file name may hold a pattern (%04d or *), not the folder")
    if "%" in name or any(c in name for c in "*?["):
        if not os.path.isdir(folder):
            t.fail(key, f"no files match {pattern!r}: folder {folder} not found")
        try:
            files = [str(f) for f in list_frames(folder, name)]
        except ValueError as exc:
            t.fail(key, f"no files match {pattern!r} ({exc})")
        return files, folder, name
    if not os.path.exists(full):
        t.fail(key, f"no files match {pattern!r} (resolved to {full})")
    return [full], full, None


def _parse_footage(file, base, data):
    t = _Table(file, "footage", data, ("frames", "masks", "fps", "start_time", "background", "first", "count"))
    frames, folder, fpat = _expand_pattern(t, "frames", base)
    masks, mfolder, mpat = _expand_pattern(t, "masks", base) if t.has("masks") else (None, None, None)
    first = t.integer("first", 0, minimum=0)
    count = t.integer("count", None, minimum=1)
    if masks is not None and len(masks) != len(frames):
        t.fail("masks", f"{len(masks)} mask files match {t.data['masks']!r} but {len(frames)} frames match "
                        f"{t.data['frames']!r}: expected one mask per frame")
    if first >= len(frames):
        t.fail("first", f"the footage has {len(frames)} frames, so first={first} leaves none")
    stop = len(frames) if count is None else first + count
    if stop > len(frames):
        t.fail("count", f"first={first} + count={count} exceeds the {len(frames)} frames found")
    bg = t.string("background", None)
    if bg is not None and bg != "estimate":
        bg = t.path("background", base=base)
    return FootageSpec(frames=frames[first:stop], masks=None if masks is None else masks[first:stop],
                       fps=t.number("fps", positive=True), start_time=t.number("start_time", 0.0, nonnegative=True),
                       background=bg, folder=folder, pattern=fpat, masks_folder=mfolder, masks_pattern=mpat,
                       first=first, count=stop - first)


def _parse_unknown(file, target, data, objects, ground):
    sec = f'unknowns."{target}"'
    t = _Table(file, sec, data, ("init", "lower", "upper", "log"))
    if target.count(".") != 1:
        raise SceneError(file, "unknowns", target, 'expected "OBJECT.PARAM", e.g. "box.mass" or "ground.mu"')
    obj, param = target.split(".")
    if obj == "ground":
        if ground is None:
            raise SceneError(file, "unknowns", target, "the scene has no [ground]")
        allowed = CONTACT_PARAMS
    elif obj in objects:
        o = objects[obj]
        if o.kind == "rigid":
            allowed = RIGID_PARAMS + tuple(TIES)
        else:
            from ..core.registry import get_material
            allowed = tuple(get_material(o.material).params) + ("damping",) + SOFT_MASS_PARAMS
    else:
        close = difflib.get_close_matches(obj, list(objects) + ["ground"], n=1)
        raise SceneError(file, "unknowns", target, f"no object named {obj!r}" +
                         (f"; did you mean {close[0]!r}?" if close else "") +
                         f" (objects: {', '.join(list(objects) + (['ground'] if ground else []))})")
    if param not in allowed:
        close = difflib.get_close_matches(param, list(allowed), n=1)
        raise SceneError(file, "unknowns", target, f"{obj!r} has no parameter {param!r}" +
                         (f"; did you mean {obj}.{close[0]!r}?" if close else "") +
                         f" (parameters: {', '.join(allowed)})")
    log = t.boolean("log", True)
    init = t.number("init", positive=log)
    lower = t.number("lower", None, positive=log)
    upper = t.number("upper", None, positive=log)
    if lower is not None and upper is not None and not upper > lower:
        t.fail("upper", f"expected upper > lower ({lower}), got {upper}")
    if lower is not None and init < lower or upper is not None and init > upper:
        t.fail("init", f"expected init within [lower, upper] = [{lower}, {upper}], got {init}")
    return UnknownSpec(target=target, object=obj, param=param, init=init, lower=lower, upper=upper, log=log,
                       tie=TIES.get(param) if obj != "ground" and objects.get(obj) is not None
                       and objects[obj].kind == "rigid" else None)


def _parse_fit(file, data):
    t = _Table(file, "fit", data, ("iterations", "optimizer", "lr", "lr_decay", "polish", "polish_lr", "starts",
                                    "local_starts", "seed", "horizons", "horizon", "horizon_tolerance", "time_step_bias", "rtol",
                                    "time_budget", "supervision", "resolution", "sigma", "gamma", "blur",
                                    "refine_camera", "refine_focal",
                                    "camera_sigma_rotation_deg", "camera_sigma_translation_m",
                                    "camera_prior_variance", "refine"))
    f = FitSpec()
    f.iterations = t.integer("iterations", f.iterations, minimum=0)
    f.optimizer = t.string("optimizer", f.optimizer, choices=OPTIMIZERS)
    f.lr = t.number("lr", f.lr, positive=True)
    f.lr_decay = t.number("lr_decay", f.lr_decay, positive=True, hi=1.0)
    f.polish = t.integer("polish", None, minimum=0)
    if f.polish is not None and f.polish > f.iterations:
        t.fail("polish", f"expected at most iterations ({f.iterations}), got {f.polish}")
    f.polish_lr = t.number("polish_lr", f.polish_lr, positive=True)
    f.starts = t.integer("starts", 1, minimum=1)
    f.local_starts = t.integer("local_starts", min(f.starts, 2), minimum=1)
    if f.local_starts > f.starts:
        t.fail("local_starts", f"expected at most starts ({f.starts}), got {f.local_starts}")
    f.seed = t.integer("seed", 0)
    h = t.array("horizons", (None,), default=None)
    if h is not None:
        if len(h) == 0 or np.any(h < 1) or np.any(h != np.round(h)) or np.any(np.diff(h) <= 0):
            t.fail("horizons", f"expected an increasing list of frame counts >= 1, got {h.tolist()}")
        f.horizons = tuple(int(k) for k in h)
    f.horizon = t.string("horizon", f.horizon, choices=("all", "auto"))
    f.horizon_tolerance = t.number("horizon_tolerance", f.horizon_tolerance, positive=True)
    f.time_step_bias = t.boolean("time_step_bias", f.time_step_bias)
    f.rtol = t.number("rtol", None, positive=True)
    f.time_budget = t.number("time_budget", None, positive=True)
    f.supervision = t.string("supervision", "mask", choices=SUPERVISIONS)
    f.resolution = t.integer("resolution", None, minimum=4)
    if t.has("sigma") and isinstance(t.data["sigma"], str):
        if t.data["sigma"] != "auto":
            t.fail("sigma", f"expected a positive number or \"auto\", got {_show(t.data['sigma'])}")
        f.sigma = None
    else:
        f.sigma = t.number("sigma", f.sigma, positive=True)
    f.gamma = t.number("gamma", f.gamma, positive=True)
    blur = t.array("blur", (None,), default=None)
    if blur is not None:
        if len(blur) == 0 or np.any(blur < 0):
            t.fail("blur", f"expected a non-empty list of blur widths >= 0 [px], got {blur.tolist()}")
        f.blur = tuple(float(b) for b in blur)
    f.refine_camera = t.boolean("refine_camera", False)
    f.refine_focal = t.boolean("refine_focal", False)
    if f.refine_focal and not f.refine_camera:
        t.fail("refine_focal", "needs refine_camera = true")
    f.camera_sigma_rotation_deg = t.number("camera_sigma_rotation_deg", f.camera_sigma_rotation_deg, positive=True)
    f.camera_sigma_translation_m = t.number("camera_sigma_translation_m", f.camera_sigma_translation_m,
                                            positive=True)
    f.camera_prior_variance = t.number("camera_prior_variance", f.camera_prior_variance, positive=True)
    f.refine = t.integer("refine", 0, minimum=0)
    return f


def _parse_world(file, data):
    t = _Table(file, "world", data, ("up", "gravity"))
    up = t.string("up", "y", choices=("y", "z"))
    axis = np.array([0.0, 1.0, 0.0]) if up == "y" else np.array([0.0, 0.0, 1.0])
    g = t.data.get("gravity", 9.8)
    if isinstance(g, list):
        gravity = t.array("gravity", (3,))
    else:
        gravity = -axis * t.number("gravity", 9.8, nonnegative=True)
    return up, gravity


def _parse_simulation(file, data, footage):
    t = _Table(file, "simulation", data, ("dt", "substeps", "duration", "checkpoint_every"))
    if t.has("dt") and t.has("substeps"):
        t.fail("dt / substeps", "give one of dt and substeps (steps per footage frame), not both")
    dt = t.number("dt", None, positive=True)
    substeps = t.integer("substeps", None, minimum=1)
    if dt is None and substeps is None:
        substeps = 32
    duration = t.number("duration", None, positive=True)
    if duration is None and footage is None:
        t.fail("duration", "missing: without [footage] give the seconds to simulate")
    if dt is not None and footage is not None:
        per_frame = 1.0 / (footage.fps * dt)
        if abs(per_frame - round(per_frame)) > 1e-6 * per_frame:
            t.fail("dt", f"1 / (fps dt) = {per_frame:.6g} steps per footage frame: expected a whole number "
                         f"(or give substeps instead of dt)")
    if dt is not None and dt > 0.05:
        t.fail("dt", f"expected a time step of at most 0.05 s, got {dt}")
    return dt, substeps, duration, t.integer("checkpoint_every", None, minimum=1)


def parse_scene(data: dict, path="scene.toml") -> SceneSpec:
    """Validate a scene already read from TOML (`data`); `path` names the file in errors and
    anchors relative paths."""
    file = os.path.basename(str(path)) if path else "scene.toml"
    base = os.path.dirname(os.path.abspath(str(path)))
    for key in data:
        if key not in _TOP:
            close = difflib.get_close_matches(key, list(_TOP), n=1, cutoff=0.6)
            raise SceneError(file, None, f"[{key}]", "unknown section" + (f"; did you mean [{close[0]}]?" if close
                                                                           else f" (sections: {', '.join(_TOP)})"))
    up, gravity = _parse_world(file, data.get("world", {}))
    ground, ground_given = None, ()
    if "ground" in data:
        g = _Table(file, "ground", data["ground"], CONTACT_PARAMS + ("damping", "friction", "friction_velocity"))
        defaults = dict(ke=1e4, kd=10.0, kf=10.0, mu=0.5)
        ground = {k: g.number(k, defaults[k], nonnegative=True) for k in CONTACT_PARAMS}
        ground_given = tuple(k for k in CONTACT_PARAMS if g.has(k))
        ground["law"] = _parse_law(g)
    objs = data.get("objects")
    if not objs:
        raise SceneError(file, None, "[objects]", "missing: the scene needs at least one [objects.NAME] table")
    if not isinstance(objs, dict):
        raise SceneError(file, None, "objects", f"expected tables [objects.NAME], got {_typename(objs)}")
    objects = {}
    for name, od in objs.items():
        if name == "ground":
            raise SceneError(file, "objects", name, '"ground" is reserved for the ground plane ([ground])')
        objects[name] = _parse_object(file, base, name, od)
    kinds = {o.kind for o in objects.values()}
    if len(kinds) > 1:
        raise SceneError(file, None, "[objects]", "mixing rigid and soft objects in one scene is not supported "
                         f"(rigid: {[n for n, o in objects.items() if o.kind == 'rigid']}, soft: "
                         f"{[n for n, o in objects.items() if o.kind == 'soft']})")
    forces_data = data.get("forces", [])
    if not isinstance(forces_data, list):
        raise SceneError(file, None, "forces", "expected an array of tables [[forces]]")
    forces = [_parse_force(file, k, fd, objects) for k, fd in enumerate(forces_data)]
    if "camera" not in data:
        raise SceneError(file, None, "[camera]", "missing (required)")
    camera = _parse_camera(file, data["camera"])
    footage = _parse_footage(file, base, data["footage"]) if "footage" in data else None
    dt, substeps, duration, ckpt = _parse_simulation(file, data.get("simulation", {}), footage)
    unk = data.get("unknowns", {})
    if not isinstance(unk, dict):
        raise SceneError(file, None, "unknowns", "expected tables [unknowns.\"OBJECT.PARAM\"]")
    unknowns = [_parse_unknown(file, k, v, objects, ground) for k, v in unk.items()]
    _check_ties(file, unknowns)
    fit = _parse_fit(file, data.get("fit", {}))
    unbounded = [u.target for u in unknowns if u.lower is None or u.upper is None]
    if fit.starts > 1 and unbounded:
        raise SceneError(file, "fit", "starts", f"a multi-start search draws starts within the bounds: give lower "
                         f"and upper for {', '.join(unbounded)} (or starts = 1)")
    if fit.horizons is not None and footage is not None and fit.horizons[-1] > len(footage.frames):
        raise SceneError(file, "fit", "horizons", f"{fit.horizons[-1]} frames, but the footage has "
                         f"{len(footage.frames)}")
    if fit.supervision in ("mask", "both") and footage is not None and footage.masks is None:
        raise SceneError(file, "fit", "supervision", f"{fit.supervision!r} needs mask frames: add "
                         "masks = \"...\" to [footage] (or use supervision = \"rgb\")")
    spec = SceneSpec(path=file, name=os.path.splitext(file)[0], up=up, gravity=gravity, dt=dt, substeps=substeps,
                     duration=duration, checkpoint_every=ckpt, ground=ground, objects=objects, forces=forces,
                     camera=camera, footage=footage, unknowns=unknowns, fit=fit, ground_given=ground_given)
    from .scene_sanity import check_scene      # the scene as a whole: ground, camera, view (as the Python API)
    check_scene(spec)
    return spec


def _check_ties(file, unknowns):
    names = {u.target for u in unknowns}
    for u in unknowns:
        if u.tie is not None and f"{u.object}.{u.tie}" in names:
            raise SceneError(file, "unknowns", u.target, f"{u.object}.{u.tie} is an unknown too: give the stiffness "
                             "either directly or per unit mass, not both")


def load_scene(path) -> SceneSpec:
    """Read and validate a scene file (TOML).  Raises SceneError (a ValueError) naming the
    file and the key for anything wrong; no Taichi kernel runs."""
    path = str(path)
    file = os.path.basename(path)
    if not os.path.exists(path):
        raise SceneError(file, None, None, f"scene file not found: {path}")
    try:
        with open(path, "rb") as fh:
            data = tomllib.load(fh)
    except tomllib.TOMLDecodeError as exc:
        raise SceneError(file, None, None, f"not valid TOML: {exc}") from None
    return parse_scene(data, path)
