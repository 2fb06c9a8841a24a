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
    [simulation]   substeps = 32 (steps per footage frame) | dt = 0.0005 (seconds) |
                   substeps = "auto" (`tigradsim fit` chooses the step: from min_substeps = 32 it
                   doubles the count, at the unknowns' init values, until the rollouts at dt and
                   dt/2 agree on every footage frame within [fit] horizon_tolerance, as [fit]
                   horizon = "auto" measures it, up to max_substeps = 512; the report gives the
                   figure at each count and says when the cap was hit; `tigradsim render` runs at
                   min_substeps; tigradsim/scenes/step_choice.py);
                   duration = seconds simulated (default: to the last footage frame);
                   checkpoint_every = steps per checkpointed segment (optional)
    [ground]       ke, kd, kf, mu (penalty contact; the ground is the plane through the
                   origin normal to `up`); damping = "capped" | "uncapped", friction =
                   "capped" | "huber" | "warp", friction_velocity (the contact law,
                   tigradsim.physics.contact); damping_integration = "explicit" | "implicit"
                   (kd, kf by local backward Euler: stable on light soft/cloth vertices)
    [bodies]       ke, kd, kf, mu (>= 0): the rigid objects' contact constants against EACH OTHER
                   (their body_pair_X), for the rigid objects without their own X; needs two or
                   more of them; default: the ground's (or fitted / assumed as "bodies.X" below);
                   an unknown "bodies.X" in [unknowns] fits it instead (tigradsim/scenes/pair_constants.py)
    [cloth_soft]   ke (> 0), kd, kf, mu (>= 0): the cloths' contact constants against the soft objects
                   (every cloth-soft pair; the two-way cloth-FEM contact is on in any scene with both);
                   needs a cloth and a soft object; default: the library's (cloth_soft_contact.DEFAULT_PARAMS);
                   the thickness is the objects' contact radii; an unknown "cloth_soft.X" fits it instead;
                   one stated nowhere is an assumed constant, or a nuisance unknown with [fit]
                   contact_constants = "nuisance" (tigradsim/scenes/cloth_soft_constants.py)
    [colliders.NAME] kind = "plane" | "sphere" | "box" | "capsule" | "mesh": static shapes the objects
                   touch (a ramp, a wall, a table); position, rotation or (planes) normal; radius,
                   half_extents, half_length, mesh + scale + resolution; ke, kd, kf, mu (default
                   the ground's), contact_law (tigradsim/scenes/scene_colliders.py)
    [objects.NAME] type = "rigid": mesh = "box.obj" (OBJ; duplicate vertices welded) or
                   box = [sx, sy, sz]; mass | density; scale; ke, kd, kf, mu (own contact
                   parameters, default the ground's); contact_radius; contact_law = {damping
                   = "uncapped", friction = "huber", friction_velocity = 1e-3} (own law);
                   shape = "box" | "sphere" | "capsule" | "mesh" (the collision shape the other
                   bodies touch, its size enclosing the mesh; default: a box for a box mesh,
                   else the mesh) or a table with the colliders' size keys, e.g. shape =
                   {kind = "capsule", radius = 0.05, half_length = 0.1}, {kind = "mesh",
                   scale = 1.0, resolution = 32} (tigradsim.physics.body_shapes)
                   type = "soft": tetgen = "ball.node" (+ .ele beside it) or
                   mesh = "ball.msh" (Gmsh, .vtu, .vtk, .mesh, ...: any meshio volume format) or
                   nodes = "x.npy" | [[x, y, z], ...] with tets = "t.npy" | [[i, j, k, l], ...]
                   (0-based; .npy or a text table) or
                   tet_box = {cells = [nx, ny, nz], size = [sx, sy, sz]} or
                   tet_ball = {radius = r, resolution = 2}; material, params = {...},
                   one of density (kg/m^3), mass (total kg) and node_mass (kg per vertex: a number
                   for every vertex alike, a list, or "m.npy"); mass_distribution = "volume"
                   (default: lumped from the tets' volumes) | "equal" (mass / vertex count each)
                   spreads a mass or density; damping, damping_model =
                   "deformation_rate" | "warp" | "rayleigh_stiffness" | "rayleigh_mass"
                   (tigradsim.physics.damping);
                   radius (contact radius of the vertices [m], default 0.01: they touch that far
                   outside the mesh; 0 when the mesh is the object's surface, as another engine's
                   footage of a meshed solid has it: on Warp's ball clip the default skin put the
                   vertices 13 mm RMS off Warp's, 0 put them 5 mm off, benchmarks/RESULTS.md; left
                   out, it is an assumed constant "NAME.radius" over [0, 2 x the default] whose
                   effect on every estimate the fit reports: tigradsim/scenes/assumed.py)
                   type = "cloth": mesh = "cloth.obj" (a triangle mesh, its rest and initial shape),
                   material = "membrane" | "stvk_membrane" | ..., params = {mu, lam} [N/m], damping,
                   bending, bending_damping (per edge), mass (total kg) or density (kg/m^2), radius
                   (default 0.005; left out, assumed over [0, 0.01] as a soft object's);
                   it touches the ground and the colliders as soft vertices do
                   (tigradsim/scenes/scene_cloth.py)
                   all: position, rotation (unit quaternion x y z w, mesh to world),
                   velocity, angular_velocity (rad/s about the centre), color (RGB in
                   [0, 1] for RGB supervision; default: the footage's mean inside the masks)
                   Rigid and soft objects may share a scene (a soft ball on a box): the soft
                   vertices touch the bodies' shapes with the reaction on the bodies
                   (tigradsim.physics.coupling) and both are rendered (TimedVertices "both")
                   type = "mpm": MPM matter (jelly, plasticine, sand, fluid): box = [sx, sy, sz] or
                   mesh = "blob.obj" (closed), material = "mpm_neo_hookean" | ... , params, density,
                   particles_per_cell, velocity, splat_radius; needs [mpm_grid]; rendered as soft
                   splats (masks only); MPM objects only in such a scene (tigradsim/scenes/scene_mpm.py)
    [mpm_grid]     lower, upper, resolution, mu, ground, boundary: the MPM domain and grid
                   (tigradsim/scenes/scene_mpm.py)
    [[forces]]     object, force (N, world), point (mesh coordinates; default the
                   centre of mass), torque (N m), start, end (seconds)
    [camera]       OpenCV: K (3x3), R (3x3, world to camera), t (3), width, height;
                   or look-at: eye, target, up, fov (degrees across the shorter side),
                   width, height; near, far (optional)
    [[cameras]]    several calibrated cameras instead of [camera], one table each: name (required,
                   unique: letters, digits, - and _), the keys of [camera] (K, R, t or eye,
                   target, up, fov; width, height, near, far), and that camera's own footage files
                   frames, masks, background (as in [footage]); [footage] then holds what the
                   cameras share: fps, start_time, first, count, each of which a camera may give
                   itself (clips at their own frame rates and start times: each camera's frame k
                   is drawn at its own start_time + k / fps; horizons count the first camera's
                   frames, the others fit their frames up to that time).  The fit sums
                   every camera's image loss (tigradsim/scenes/scene_views.py); errors name the
                   camera ([cameras.NAME]); the report gives each camera's IoU.  refine_camera
                   refines each camera's own pose, under its own prior.
    [footage]      frames = "frames/frame_%04d.png" (printf pattern or glob), masks = ...,
                   fps, start_time (simulation time of the first frame, default 0),
                   background = "plate.png" | "estimate" (RGB supervision), first, count
    [unknowns."OBJECT.PARAM"]  init, lower, upper, log (default true); PARAM is mass, ke,
                   kd, kf, mu of a rigid object, ke, kd, kf, mu of "bodies" (the rigid
                   objects against each other), ke, kd, kf, mu of "cloth_soft" (the cloths
                   against the soft objects), a material parameter, damping, mass (total)
                   or density of a soft object, a material parameter (E, nu, yield_stress,
                   friction_angle [degrees], viscosity, bulk_modulus, plastic_viscosity, ...; bounds
                   within the material's range, an upper one where it caps the value: nu < 0.5),
                   density or initial velocity vx, vy, vz (file axes; linear by default) of an
                   MPM object, ke, kd, kf, mu of "ground", ke, kd, kf, mu, height of a
                   collider, or a tie "ke_per_mass",
                   "kd_per_mass", "kf_per_mass" (the stiffness per unit mass is the unknown)
    [fit]          iterations, optimizer = "adam" | "bfgs" | "adam+bfgs", lr, polish
                   (BFGS steps of adam+bfgs), starts (multi-start: points scored),
                   local_starts (the best ones fitted), keep (at most this many of them go on
                   from each horizon to the next; default all), drop_ratio (default 2: one whose
                   loss on a horizon's frames exceeds drop_ratio x the best's is dropped there),
                   seed, coarse = {substeps, resolution, iterations} (coarse to fine in the model:
                   the search, local fits and horizons run first on the scene with those [simulation]
                   substeps and / or [mpm_grid] resolution, then `iterations` on the file's model
                   refine the best coarse minimum from its BFGS curvature; scene_coarse.py),
                   horizons (coarse to fine: frame counts fitted in turn), horizon = "all" | "auto" | N ("auto": each stage
                   fits at most the frames the model can follow at the values it starts from:
                   the leading frames where the rollouts at dt and dt/2, rendered, differ by
                   an estimated model error (Richardson, 2x the difference for the first-order
                   integrator) within horizon_tolerance = 0.5 render pixels; the report says
                   how many frames were fitted and why; Scene.predictability; an integer N:
                   the schedule ends at the first N frames, as a model comparison fits every
                   model on the frames the first one's "auto" horizon chose),
                   time_step_bias (true: the 95 % intervals also cover the time step's bias,
                   estimated by step doubling at the estimate: one rollout at dt/2 per local
                   fit; Scene.time_step_systematics), grid_bias (MPM scenes only, true by default
                   there: the intervals also cover the MPM grid's bias, estimated from one rollout
                   at a 4/3 finer grid at the estimate; Scene.grid_systematics, fitting/grid_bias.py),
                   rtol (stop a
                   stage when the loss falls by less over 5 iterations), time_budget (seconds),
                   profile (true, "auto", or a list of unknowns: profile-likelihood intervals, each value
                   stepped out to the loss-rise threshold the intervals imply or to its bound,
                   the others refitted by profile_iters = 3 BFGS steps at each of at most
                   profile_points = 5 points a side, trust radius profile_lr (default polish_lr);
                   reaching a bound below the threshold makes it "undetermined";
                   fitting/profile.py; off by default: 2-4 rollouts a point; "auto": in full only
                   the unknowns whose Gauss-Newton interval is unbounded or wider than the
                   estimate (the default in MPM scenes, where a fluid's bulk modulus is one);
                   profile_check = true: with "auto", the others checked at one point a side
                   (2 refits each), walked on where the loss rose there by under 1/4 of the
                   threshold),
                   supervision = "mask" | "rgb" | "both", resolution (render width in px;
                   the footage is averaged down to it), edge_softness (NDC^2; "auto",
                   the default: as sharp as a camera's antialiased edge, 10-90 % over 0.8 px
                   at the render size, `tigradsim.renderers.edge_softness_for_edge`;
                   `sigma` is its older name, still read), blur
                   (list of blur widths in px of the image loss), refine_camera (fit a
                   correction of the camera pose, within 3 degrees and 5 cm, with the
                   unknowns), refine_focal (and of the focal length, within a factor 1.25),
                   camera_sigma_rotation_deg (0.5), camera_sigma_translation_m (0.01):
                   the calibration's uncertainty, a Gaussian prior on the correction
                   (per component; tigradsim/fitting/camera_prior.py), camera_prior_variance
                   (2e-2: the per-pixel residual variance the prior is weighed against),
                   refine (Levenberg-Marquardt iterations after the gradient steps),
                   contact_constants = "assume" | "nuisance" (what becomes of the contact
                   constants [ground] does not state and no unknown fits: "assume" holds
                   them at the defaults and widens the reported intervals by their
                   sensitivity over PRIOR_RANGES; "nuisance" adds them as log-space unknowns
                   within PRIOR_RANGES, "OBJ.X_per_mass" when the one rigid object's mass is an
                   unknown, else "ground.X", so the intervals are marginal over them, widened
                   for those the footage leaves undetermined; a collider's constants its
                   [colliders.NAME] does not state are assumed, or nuisance, as "NAME.X";
                   with two or more rigid objects taking the shared X (none of their own, not
                   fitted) and X stated neither in [ground] nor in [bodies] nor as an unknown
                   "bodies.X", their contact with EACH OTHER is its
                   own constant "bodies.X", assumed or nuisance apart from "ground.X", within
                   the same PRIOR_RANGES: tigradsim/scenes/pair_constants.py; the name
                   "bodies" is then reserved),
                   assumption_refit_steps (0: each assumed constant's move is the linearised
                   refit; k > 0: then k Levenberg-Marquardt iterations at each range end,
                   2 n + 1 forward rollouts each; the report gives the loss at each end over
                   the estimate's either way, and warns where an end fits the footage better
                   than the assumed value; an end whose refitted loss passes the profile
                   intervals' 95 % threshold is ruled out and the interval with assumed
                   constants takes the move at the last value the footage allows, found by
                   bisection: fitting/sensitivity.py, "Range ends the footage rules out"),
                   assumption_rule_out (default true; false: the interval with assumed
                   constants takes the moves at the ends of the whole prior ranges, and no
                   refit judges or bisects an end: for clips whose rollouts are too dear)

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
import os

import numpy as np

try:                                   # Python >= 3.11
    import tomllib
except ModuleNotFoundError:            # pragma: no cover - older Pythons use the backport
    import tomli as tomllib

# the sections, each parsed in a module of its own; every name is importable from here as before
from .scene_camera import _parse_camera, _parse_cameras, _parse_footage
from .scene_colliders import parse_colliders
from .scene_objects import _parse_force, _parse_law, _parse_object
from .scene_specs import (CONTACT_PARAMS, RIGID_PARAMS, TIES, Z_UP_TO_Y_UP, CameraSpec, FitSpec, FootageSpec,
                          ForceSpec, ObjectSpec, SceneSpec, UnknownSpec, ViewSpec)
from .scene_specs import SOFT_MASS_PARAMS  # noqa: F401
from .scene_table import SceneError, _Table, _typename
from .scene_unknowns import _check_ties, _parse_fit, _parse_unknown, nuisance_unknowns
from .pair_constants import check_pair_statements, parse_bodies
from .cloth_soft_constants import check_cloth_soft_statements, parse_cloth_soft
from .scene_unknowns import OPTIMIZERS, SUPERVISIONS  # noqa: F401

__all__ = ["SceneError", "SceneSpec", "ObjectSpec", "ForceSpec", "CameraSpec", "FootageSpec", "UnknownSpec",
           "FitSpec", "load_scene", "parse_scene", "Z_UP_TO_Y_UP", "RIGID_PARAMS", "TIES"]

DEFAULT_SUBSTEPS = 32          # steps per footage frame when the file gives neither dt nor substeps
DEFAULT_MAX_SUBSTEPS = 512     # substeps = "auto": the most steps per frame the fit doubles to (Warp's clips: 256)

_TOP = ("world", "simulation", "ground", "bodies", "cloth_soft", "colliders", "objects", "forces", "camera", "cameras", "footage", "unknowns",
        "fit", "mpm_grid")


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
    t = _Table(file, "simulation", data, ("dt", "substeps", "min_substeps", "max_substeps", "duration",
                                          "checkpoint_every"))
    if t.has("dt") and t.has("substeps"):
        t.fail("dt / substeps", "give one of dt and substeps (steps per footage frame), not both")
    dt = t.number("dt", None, positive=True)
    auto = _parse_auto_substeps(t)
    substeps = auto[0] if auto else t.integer("substeps", None, minimum=1)
    if dt is None and substeps is None:
        substeps = DEFAULT_SUBSTEPS
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
    return dt, substeps, auto, duration, t.integer("checkpoint_every", None, minimum=1)


def _parse_auto_substeps(t):
    """substeps = "auto": (min_substeps, max_substeps), the first count the fit tries and its cap
    (tigradsim/scenes/step_choice.py); None for a fixed count.  min_substeps / max_substeps only with "auto"."""
    v = t.data.get("substeps")
    if not isinstance(v, str):
        for key in ("min_substeps", "max_substeps"):
            if t.has(key):
                t.fail(key, 'only with substeps = "auto" (the fit chooses its step between min_substeps and '
                            'max_substeps); with a fixed substeps remove it')
        return None
    if v != "auto":
        t.fail("substeps", f'expected a whole number of steps per footage frame or "auto", got {v!r}')
    lo = t.integer("min_substeps", DEFAULT_SUBSTEPS, minimum=1)
    hi = t.integer("max_substeps", max(DEFAULT_MAX_SUBSTEPS, lo), minimum=1)
    if hi < lo:
        t.fail("max_substeps", f"expected at least min_substeps = {lo} (the first count tried), got {hi}")
    return lo, hi



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
        g = _Table(file, "ground", data["ground"], CONTACT_PARAMS + ("damping", "friction", "friction_velocity",
                                                                     "damping_integration"))
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
    from .scene_mpm import check_mpm_scene, parse_mpm_grid
    mpm_grid = parse_mpm_grid(file, data["mpm_grid"], up) if "mpm_grid" in data else None
    check_mpm_scene(file, data, objects, mpm_grid)
    colliders = parse_colliders(file, base, data.get("colliders", {}), ground, objects)
    forces_data = data.get("forces", [])
    if not isinstance(forces_data, list):
        raise SceneError(file, None, "forces", "expected an array of tables [[forces]]")
    forces = [_parse_force(file, k, fd, objects) for k, fd in enumerate(forces_data)]
    if "camera" in data and "cameras" in data:
        raise SceneError(file, None, "[camera] / [[cameras]]", "give one camera as [camera] or several as "
                         "[[cameras]], not both")
    if "cameras" in data:                  # several cameras, each with its own frames and masks
        views, footage = _parse_cameras(file, base, data["cameras"], data.get("footage"))
        camera = views[0].camera
    else:
        if "camera" not in data:
            raise SceneError(file, None, "[camera]", "missing (required; or several cameras as [[cameras]])")
        camera = _parse_camera(file, data["camera"])
        footage = _parse_footage(file, base, data["footage"]) if "footage" in data else None
        views = [ViewSpec("camera", camera, footage)]
    dt, substeps, auto_substeps, duration, ckpt = _parse_simulation(file, data.get("simulation", {}), footage)
    unk = data.get("unknowns", {})
    if not isinstance(unk, dict):
        raise SceneError(file, None, "unknowns", "expected tables [unknowns.\"OBJECT.PARAM\"]")
    unknowns = [_parse_unknown(file, k, v, objects, ground, colliders) for k, v in unk.items()]
    _check_ties(file, unknowns)
    fit = _parse_fit(file, data.get("fit", {}))
    if fit.grid_bias and mpm_grid is None:
        raise SceneError(file, "fit", "grid_bias", "true, but the scene has no MPM grid ([mpm_grid]): the grid's bias "
                         "is that of MPM matter; remove grid_bias (it is on by default in MPM scenes)")
    fit.grid_bias = mpm_grid is not None if fit.grid_bias is None else fit.grid_bias
    # MPM matter: profile the unknowns whose Laplace interval is suspect (a fluid's bulk modulus from masks), at
    # no cost where none is (fitting/profile.py, benchmarks/RESULTS.md "profile = auto")
    fit.profile = ("auto" if mpm_grid is not None else False) if fit.profile is None else fit.profile
    if fit.profile_check and fit.profile != "auto":
        raise SceneError(file, "fit", "profile_check", f"true, but profile is {fit.profile!r}: the one-point checks "
                         "are profile = \"auto\"'s (of the values it does not profile in full); set profile = "
                         "\"auto\" or remove profile_check")
    unbounded = [u.target for u in unknowns if u.lower is None or u.upper is None]
    if fit.starts > 1 and unbounded:
        raise SceneError(file, "fit", "starts", f"a multi-start search draws starts within the bounds: give lower "
                         f"and upper for {', '.join(unbounded)} (or starts = 1)")
    if fit.horizons is not None and footage is not None and fit.horizons[-1] > len(footage.frames):
        raise SceneError(file, "fit", "horizons", f"{fit.horizons[-1]} frames, but the footage has "
                         f"{len(footage.frames)}")
    for view in views:
        if fit.supervision in ("mask", "both") and view.footage is not None and view.footage.masks is None:
            where = "[footage]" if len(views) == 1 and view.name == "camera" else f"camera {view.name!r}"
            raise SceneError(file, "fit", "supervision", f"{fit.supervision!r} needs mask frames: add "
                             f"masks = \"...\" to {where} (or use supervision = \"rgb\")")
    spec = SceneSpec(path=file, name=os.path.splitext(file)[0], up=up, gravity=gravity, dt=dt, substeps=substeps,
                     auto_substeps=auto_substeps, duration=duration, checkpoint_every=ckpt, ground=ground, objects=objects, forces=forces,
                     camera=camera, footage=footage, unknowns=unknowns, fit=fit, ground_given=ground_given,
                     views=views, colliders=colliders, mpm_grid=mpm_grid,
                     bodies=parse_bodies(file, data["bodies"]) if "bodies" in data else {},
                     cloth_soft=parse_cloth_soft(file, data["cloth_soft"]) if "cloth_soft" in data else {})
    check_pair_statements(spec)             # [bodies] / "bodies.X": two rigid objects taking them, ...
    check_cloth_soft_statements(spec)       # [cloth_soft] / "cloth_soft.X": a cloth and a soft object, ...
    spec.unknowns = unknowns + nuisance_unknowns(spec)     # [fit] contact_constants = "nuisance"
    from .scene_sanity import check_scene      # the scene as a whole: ground, camera, view (as the Python API)
    check_scene(spec)
    return spec



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
