"""What a scene file describes, validated (`SceneSpec` and its parts), in the file's own coordinates with
absolute paths, and the names of the parameters a scene may give or fit."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

import numpy as np

from ..core.aliases import alias_property
from .scene_table import SceneError

# (x, y, z) -> (x, z, -y): the file's z-up axes to tigradsim's y-up world.
Z_UP_TO_Y_UP = np.array([[1.0, 0.0, 0.0], [0.0, 0.0, 1.0], [0.0, -1.0, 0.0]])

CONTACT_PARAMS = ("ke", "kd", "kf", "mu")

RIGID_PARAMS = ("mass",) + CONTACT_PARAMS

TIES = {"ke_per_mass": "ke", "kd_per_mass": "kd", "kf_per_mass": "kf"}

SOFT_MASS_PARAMS = ("mass", "density")


@dataclass
class ObjectSpec:
    """One object.  kind "rigid": `vertices`, `faces` (closed surface, welded); kind "soft":
    `vertices`, `tets`; kind "cloth": `vertices`, `faces` (triangles, open or closed; its density [kg/m^2] or
    total mass).  Vectors are in the file's axes."""
    name: str
    kind: str
    vertices: np.ndarray
    faces: Optional[np.ndarray] = None
    tets: Optional[np.ndarray] = None
    mass: Optional[float] = None
    density: Optional[float] = None
    contact: dict = field(default_factory=dict)
    contact_radius: float = 0.0
    # soft / cloth: whether the file stated `radius`; an unstated one is the library's default skin, an assumed
    # constant "NAME.radius" in the fit's report (scenes/assumed.py).  Rigid: always True (its default 0 is the mesh)
    contact_radius_stated: bool = True
    law: dict = field(default_factory=dict)       # rigid: this body's contact law (default: the ground's)
    shape: dict = field(default_factory=dict)     # rigid: add_rigid_body's shape, shape_size (file axes), ...
    material: Optional[str] = None
    params: dict = field(default_factory=dict)
    damping: float = 0.0
    damping_model: str = "deformation_rate"
    node_mass: Optional[np.ndarray] = None   # soft: per-vertex masses [kg] (instead of mass / density)
    mass_distribution: str = "volume"        # soft: how mass / density is spread: "volume" or "equal" (physics/fem.py)
    bending: float = 0.0                     # cloth: bending stiffness per edge [N m/rad^2] (scene_cloth.py)
    bending_damping: float = 0.0             # cloth: [N m s/rad^2]
    position: np.ndarray = field(default_factory=lambda: np.zeros(3))
    rotation: np.ndarray = field(default_factory=lambda: np.array([0.0, 0.0, 0.0, 1.0]))
    velocity: np.ndarray = field(default_factory=lambda: np.zeros(3))
    angular_velocity: np.ndarray = field(default_factory=lambda: np.zeros(3))
    color: Optional[np.ndarray] = None     # RGB in [0, 1]; None: estimated from the footage inside the masks
    source: str = ""
    # kind "mpm" (scene_mpm.py): `vertices`, `faces` the closed surface sampled; box_size (3,) for a box
    box_size: Optional[np.ndarray] = None
    particles_per_cell: int = 8
    splat_radius: Optional[float] = None



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
class ViewSpec:
    """One camera of a scene: its name ("camera" for a file's single [camera]), the camera and its
    footage files (None without footage), and which footage timing keys (fps, start_time, first,
    count) its [[cameras]] entry gave itself rather than taking [footage]'s.  File axes."""
    name: str
    camera: CameraSpec
    footage: Optional[FootageSpec]
    own_timing: tuple = ()



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
    nuisance: bool = False                # added by [fit] contact_constants = "nuisance", not by the file



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
    keep: Optional[int] = None            # candidates that go on to each next horizon (None: all local_starts)
    drop_ratio: float = 2.0               # a candidate > drop_ratio x the best loss on a horizon is dropped
    seed: int = 0
    horizons: Optional[tuple] = None      # coarse to fine: frame counts fitted in turn (the clip last)
    # coarse to fine in the model: {substeps, resolution, iterations} of a cheaper model on which the search and
    # local fits run first, the file's model refining the best (scene_coarse.py); None: no coarse stage
    coarse: Optional[dict] = None
    horizon: object = "all"               # "auto": no stage fits past the predictable horizon (Scene.set_horizon);
                                          # an int N: the last stage fits frames 0..N-1
    # the largest estimated error of the model's silhouette edges in a fitted frame [render px]: half a
    # pixel, the resolution of an edge's position on the pixel grid; beyond it a frame's residual is
    # the model's own error (its dt), which the unknowns would be bent to explain
    horizon_tolerance: float = 0.5
    time_step_bias: bool = True           # intervals cover the step-doubling bias estimate
    # intervals cover the MPM grid's bias (a rollout at a finer grid); None: true in scenes of MPM matter
    grid_bias: Optional[bool] = None
    rtol: Optional[float] = None          # stop a stage when the loss falls by less over 5 iterations
    time_budget: Optional[float] = None   # seconds for the whole fit
    # profile-likelihood intervals (fitting/profile.py): False, True (every unknown) or a tuple of unknowns
    profile: object = None                # true, false, "auto", or a tuple of unknowns' names; None: "auto" in
    #                                       MPM scenes, else false (scene_file)
    profile_check: bool = False           # "auto": check the values not profiled at one point a side
    profile_points: int = 5               # per side at most, the last on the bound
    profile_iters: int = 3                # BFGS steps of the other unknowns at each point
    profile_lr: Optional[float] = None    # their trust radius (None: polish_lr)
    supervision: str = "mask"
    resolution: Optional[int] = None
    edge_softness: Optional[float] = None   # [NDC^2]; None ("auto"): edge_softness_for_edge(0.8 px) at the render size
    gamma: float = 1e-4
    blur: tuple = (0.0, 2.0, 4.0)
    refine_camera: bool = False
    refine_focal: bool = False
    camera_sigma_rotation_deg: float = 0.5     # prior std of each rotation-vector component [degree]
    camera_sigma_translation_m: float = 0.01   # prior std of each translation component [m, file units]
    camera_prior_variance: float = 2e-2        # per-residual variance the prior is weighed against
    refine: int = 0
    # the contact constants [ground] does not state: "assume" (held at the defaults; the report
    # widens the intervals by their sensitivity over PRIOR_RANGES) or "nuisance" (fitted jointly
    # within PRIOR_RANGES; intervals marginalised, and widened for those the footage cannot determine)
    contact_constants: str = "assume"
    # Levenberg-Marquardt iterations past the linearised refit when the report moves each estimate over an assumed
    # (or undetermined nuisance) constant's range (fitting/sensitivity._refit_at_end); 0: linearised only
    assumption_refit_steps: int = 0
    # judge each range end against the profile intervals' 95 % threshold and take the move at the last value the
    # footage allows (fitting/sensitivity.py, "Range ends the footage rules out"); false: the whole prior ranges,
    # for a clip whose rollouts are too dear for the bisections' refits (the ball clip's report: 381-528 CPU s
    # with it against 40-107 without, benchmarks/RESULTS.md, branch ends44)
    assumption_rule_out: bool = True

    sigma = alias_property("edge_softness")



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
    # every camera with its footage: [[cameras]] in file order, or the single [camera] + [footage] as
    # one view named "camera"; `camera` and `footage` above are the first view's
    views: list = field(default_factory=list)
    colliders: dict = field(default_factory=dict)   # name -> scene_colliders.ColliderSpec (file order)
    mpm_grid: Optional[dict] = None      # [mpm_grid] (scene_mpm.parse_mpm_grid), file axes
    bodies: dict = field(default_factory=dict)      # [bodies]: the rigid bodies' X against each other (pair_constants)
    cloth_soft: dict = field(default_factory=dict)  # [cloth_soft]: the cloths' X against the soft objects
    # [simulation] substeps = "auto": (min_substeps, max_substeps), the fit's step chosen by step doubling
    # (step_choice.py; `substeps` holds min_substeps until then); None: the file's step is the fit's
    auto_substeps: Optional[tuple] = None

    @property
    def several_cameras(self) -> bool:
        """Whether the file gives [[cameras]] (even one) rather than one [camera]."""
        return bool(self.views) and self.views[0].name != "camera"

    def view_spec(self, view) -> "SceneSpec":
        """This spec with `view`'s (a ViewSpec) camera and footage as `camera` and `footage`: what the
        single-camera functions (scene_camera, load_scene_footage, check_scene) read."""
        import dataclasses
        return dataclasses.replace(self, camera=view.camera, footage=view.footage, views=[view])

    def camera_section(self, view=None) -> str:
        """The section that names a camera in errors: "camera", or "cameras.NAME"."""
        return f"cameras.{view.name}" if view is not None and self.several_cameras else "camera"

    @property
    def axes(self) -> np.ndarray:
        """The fixed rotation from the file's axes to tigradsim's y-up world (identity for up = "y")."""
        return np.eye(3) if self.up == "y" else Z_UP_TO_Y_UP.copy()

    def error(self, section, key, message) -> SceneError:
        return SceneError(self.path, section, key, message)
