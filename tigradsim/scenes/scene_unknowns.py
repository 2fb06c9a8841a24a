"""The [unknowns."OBJECT.PARAM"] and [fit] sections of a scene file: what is fitted, from where, within
which bounds, and how the fit runs."""
from __future__ import annotations

import difflib

import numpy as np

from .cloth_soft_constants import CLOTH_SOFT_OBJECT
from .pair_constants import PAIR_OBJECT
from .scene_specs import CONTACT_PARAMS, RIGID_PARAMS, SOFT_MASS_PARAMS, TIES, FitSpec, UnknownSpec
from .scene_table import SceneError, _show, _Table
from .scene_coarse import parse_coarse

SUPERVISIONS = ("mask", "rgb", "both")

OPTIMIZERS = ("adam", "bfgs", "adam+bfgs")

CONTACT_CONSTANTS = ("assume", "nuisance")


def _parse_unknown(file, target, data, objects, ground, colliders=None):
    sec = f'unknowns."{target}"'
    t = _Table(file, sec, data, ("init", "lower", "upper", "log"))
    if target.count(".") != 1:
        raise SceneError(file, "unknowns", target, 'expected "OBJECT.PARAM", e.g. "box.mass" or "ground.mu"')
    obj, param = target.split(".")
    linear = ()                  # parameters fitted in linear space by default (negative values make sense)
    if obj == "ground":
        if ground is None:
            raise SceneError(file, "unknowns", target, "the scene has no [ground]")
        allowed = CONTACT_PARAMS
    elif obj == PAIR_OBJECT and obj not in objects and obj not in (colliders or {}):
        allowed = CONTACT_PARAMS            # the rigid bodies' X against each other (pair_constants)
    elif obj == CLOTH_SOFT_OBJECT and obj not in objects and obj not in (colliders or {}):
        allowed = CONTACT_PARAMS            # the cloths' X against the soft objects (cloth_soft_constants)
    elif obj in (colliders or {}):
        from .scene_colliders import COLLIDER_PARAMS
        allowed = COLLIDER_PARAMS
    elif obj in objects:
        o = objects[obj]
        if o.kind == "rigid":
            allowed = RIGID_PARAMS + tuple(TIES)
        elif o.kind == "cloth":                # scene_cloth.cloth_unknown_param
            from .scene_cloth import cloth_allowed_unknowns
            allowed = cloth_allowed_unknowns(o)
        elif o.kind == "mpm":                  # scene_mpm.mpm_unknown_params
            from ..core.registry import get_material
            from .scene_mpm import VELOCITY_PARAMS
            allowed = tuple(get_material(o.material).params) + ("density",) + VELOCITY_PARAMS
            linear = VELOCITY_PARAMS
        else:
            from ..core.registry import get_material
            allowed = tuple(get_material(o.material).params) + ("damping",) + SOFT_MASS_PARAMS
    else:
        names = list(objects) + list(colliders or {})
        close = difflib.get_close_matches(obj, names + ["ground", PAIR_OBJECT, CLOTH_SOFT_OBJECT], n=1)
        raise SceneError(file, "unknowns", target, f"no object named {obj!r}" +
                         (f"; did you mean {close[0]!r}?" if close else "") +
                         f" (objects: {', '.join(names + (['ground'] if ground else []) + [PAIR_OBJECT])})")
    if param not in allowed:
        close = difflib.get_close_matches(param, list(allowed), n=1)
        raise SceneError(file, "unknowns", target, f"{obj!r} has no parameter {param!r}" +
                         (f"; did you mean {obj}.{close[0]!r}?" if close else "") +
                         f" (parameters: {', '.join(allowed)})")
    log = t.boolean("log", param not in linear)
    init = t.number("init", positive=log)
    lower = t.number("lower", None, positive=log)
    upper = t.number("upper", None, positive=log)
    if lower is not None and upper is not None and not upper > lower:
        t.fail("upper", f"expected upper > lower ({lower}), got {upper}")
    if lower is not None and init < lower or upper is not None and init > upper:
        t.fail("init", f"expected init within [lower, upper] = [{lower}, {upper}], got {init}")
    if obj in objects and objects[obj].kind == "mpm" and param not in linear + ("density",):
        _check_material_bounds(t, objects[obj], param, init, lower, upper, log)
    return UnknownSpec(target=target, object=obj, param=param, init=init, lower=lower, upper=upper, log=log,
                       tie=TIES.get(param) if obj != "ground" and objects.get(obj) is not None
                       and objects[obj].kind == "rigid" else None)



def _check_material_bounds(t, obj, param, init, lower, upper, log):
    """An MPM material parameter's init and bounds must be values its material accepts (nu < 0.5, a friction
    angle in (0, 90) degrees, ...), and where the material caps the parameter (any value past some limit is
    refused) the fit needs a bound within the cap: else a step of the optimiser leaves the material's range."""
    from ..core.registry import get_material

    mat = get_material(obj.material)

    def accepted(value):
        try:
            mat.param_vector({**obj.params, param: value})
            return None
        except (ValueError, TypeError) as exc:
            return str(exc)

    for key, value in (("init", init), ("lower", lower), ("upper", upper)):
        why = None if value is None else accepted(value)
        if why is not None:
            t.fail(key, f"{value:g} is outside the range of material {obj.material!r}: {why}")
    def rule(value):                    # the material's message without the probe value
        return accepted(value).rsplit(", got", 1)[0]

    if upper is None and accepted(1e30) is not None:
        t.fail("upper", f"missing: material {obj.material!r} caps {param!r} ({rule(1e30)}); give an upper "
                        "bound within that range (e.g. nu: upper = 0.49)")
    if lower is None and not log and accepted(-1e30) is not None:
        t.fail("lower", f"missing: material {obj.material!r} bounds {param!r} below ({rule(-1e30)}); give a "
                        "lower bound within that range")


def _check_ties(file, unknowns):
    names = {u.target for u in unknowns}
    for u in unknowns:
        if u.tie is not None and f"{u.object}.{u.tie}" in names:
            raise SceneError(file, "unknowns", u.target, f"{u.object}.{u.tie} is an unknown too: give the stiffness "
                             "either directly or per unit mass, not both")



def _parse_fit(file, data):
    t = _Table(file, "fit", data, ("iterations", "optimizer", "lr", "lr_decay", "polish", "polish_lr", "starts",
                                    "local_starts", "keep", "drop_ratio", "seed", "coarse", "horizons", "horizon", "horizon_tolerance", "time_step_bias", "grid_bias", "rtol",
                                    "time_budget", "profile", "profile_points", "profile_iters",
                                    "profile_lr", "profile_check", "supervision", "resolution", "edge_softness", "sigma", "gamma",
                                    "blur",
                                    "refine_camera", "refine_focal",
                                    "camera_sigma_rotation_deg", "camera_sigma_translation_m",
                                    "camera_prior_variance", "refine", "contact_constants",
                                    "assumption_refit_steps", "assumption_rule_out"))
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
    f.keep = t.integer("keep", None, minimum=1)
    f.drop_ratio = t.number("drop_ratio", f.drop_ratio, positive=True)
    if f.drop_ratio <= 1.0:
        t.fail("drop_ratio", f"expected a number > 1 (a candidate whose loss exceeds drop_ratio x the best's is "
                             f"dropped), got {f.drop_ratio}")
    f.seed = t.integer("seed", 0)
    f.coarse = parse_coarse(t)
    h = t.array("horizons", (None,), default=None)
    if h is not None:
        if len(h) == 0 or np.any(h < 1) or np.any(h != np.round(h)) or np.any(np.diff(h) <= 0):
            t.fail("horizons", f"expected an increasing list of frame counts >= 1, got {h.tolist()}")
        f.horizons = tuple(int(k) for k in h)
    if t.has("horizon") and not isinstance(t.data["horizon"], str):
        # a frame count: the schedule ends there (a model comparison fits every model on the frames the
        # first model's "auto" horizon chose: scenes/law_compare.compare_scene_variants)
        f.horizon = t.integer("horizon", None, minimum=1)
    else:
        f.horizon = t.string("horizon", f.horizon, choices=("all", "auto"))
    f.horizon_tolerance = t.number("horizon_tolerance", f.horizon_tolerance, positive=True)
    f.time_step_bias = t.boolean("time_step_bias", f.time_step_bias)
    f.grid_bias = t.boolean("grid_bias", None)
    f.rtol = t.number("rtol", None, positive=True)
    f.time_budget = t.number("time_budget", None, positive=True)
    f.profile = _parse_profile(t)
    f.profile_points = t.integer("profile_points", f.profile_points, minimum=1)
    f.profile_iters = t.integer("profile_iters", f.profile_iters, minimum=0)
    f.profile_lr = t.number("profile_lr", None, positive=True)
    f.profile_check = t.boolean("profile_check", False)      # checked against the profile by scene_file
    f.supervision = t.string("supervision", "mask", choices=SUPERVISIONS)
    f.resolution = t.integer("resolution", None, minimum=4)
    if t.has("edge_softness") and t.has("sigma"):      # sigma: the key's older name
        t.fail("sigma", "is the older name of edge_softness: give one of them")
    key = "sigma" if t.has("sigma") else "edge_softness"
    if t.has(key) and isinstance(t.data[key], str):
        if t.data[key] != "auto":
            t.fail(key, f"expected a positive number or \"auto\", got {_show(t.data[key])}")
        f.edge_softness = None
    else:
        f.edge_softness = t.number(key, f.edge_softness, positive=True)
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
    f.contact_constants = t.string("contact_constants", f.contact_constants, choices=CONTACT_CONSTANTS)
    f.assumption_refit_steps = t.integer("assumption_refit_steps", f.assumption_refit_steps, minimum=0)
    f.assumption_rule_out = t.boolean("assumption_rule_out", f.assumption_rule_out)
    return f


def _parse_profile(t):
    """[fit] profile: true / false, "auto" (the unknowns whose Laplace interval is suspect, with
    profile_check the others checked: fitting/profile.py), or a list of unknowns' names ("OBJECT.PARAM"; checked against
    [unknowns] when the scene is built, by identify)."""
    if not t.has("profile"):
        return None                      # the default: "auto" in MPM scenes, else false (scene_file)
    v = t.data["profile"]
    if isinstance(v, bool) or v == "auto":
        return v
    if isinstance(v, list) and v and all(isinstance(n, str) for n in v):
        return tuple(v)
    t.fail("profile", f"expected true, false, \"auto\" or a list of unknowns' names (\"OBJECT.PARAM\"), got {v!r}")


def nuisance_unknowns(spec) -> list:
    """[fit] contact_constants = "nuisance": one nuisance UnknownSpec per contact constant X that
    [ground] does not state, no unknown fits, and some object takes from the ground (a rigid object
    without its own X, any soft object or cloth, or a collider without its own X), fitted in log space within the prior range
    `PRIOR_RANGES[X]` around the default:

    * "OBJ.X_per_mass" (X in ke, kd, kf) when the scene's one rigid object has its mass as an
      unknown: the contact then scales with the fitted mass, so that a clip with no known force
      (where only X / m shows in the motion) leaves the mass undetermined, as it is, instead of
      pinning it through an absolute stiffness's bound; its range is PRIOR_RANGES[X] over the
      initial mass;
    * "ground.X" otherwise (and for mu, which has no per-mass form);
    * "NAME.X", in a scene without a [ground], for every contact constant a collider's table does not
      state and no unknown fits (`scene_colliders.unstated_collider_constants`), on the collider's own
      entry (with a [ground], such a collider takes the ground's X and moves with it);
    * "bodies.X", the rigid bodies' constant against each other, separate from "ground.X", when two or
      more rigid objects take the shared X and the file states none (`pair_constants`: the same rule for
      every scene), within PRIOR_RANGES[X] around the value they take;
    * "cloth_soft.X", the cloths' constant against the soft objects, when the scene has both and the file
      states X nowhere (`cloth_soft_constants`), within `cloth_soft_prior_range` (PRIOR_RANGES, kf by slip
      speed, capped where the step could not integrate it), started at the library's value.

    With soft objects taking the ground's constants, each of ke, kd, kf's ranges is capped where the
    scene's step could not integrate it (`soft_contact_caps`): a range the step cannot follow would let
    the search wander into rollouts whose gradients are meaningless (GradientError)."""
    from ..fitting.sensitivity import PRIOR_RANGES
    from .scene_colliders import ground_takers, unstated_collider_constants
    from .pair_constants import PAIR_OBJECT, check_pair_name, separate_pair_constant
    from .cloth_soft_constants import (CLOTH_SOFT_OBJECT, check_cloth_soft_name, cloth_soft_prior_range,
                                       unstated_cloth_soft_constants)
    if spec.fit.contact_constants != "nuisance":
        return []
    out = []
    for name, x, value in unstated_collider_constants(spec):
        lower, upper = PRIOR_RANGES[x](value)
        out.append(UnknownSpec(target=f"{name}.{x}", object=name, param=x, init=value, lower=lower, upper=upper,
                               log=True, nuisance=True))
    for x, value in unstated_cloth_soft_constants(spec):
        check_cloth_soft_name(spec)
        lower, upper = cloth_soft_prior_range(spec, x, value)
        out.append(UnknownSpec(target=f"{CLOTH_SOFT_OBJECT}.{x}", object=CLOTH_SOFT_OBJECT, param=x,
                               init=min(max(value, lower), upper), lower=lower, upper=upper, log=True, nuisance=True))
    for x in CONTACT_PARAMS:
        pair = separate_pair_constant(spec, x)
        if pair is not None:
            check_pair_name(spec)
            lower, upper = PRIOR_RANGES[x](pair[1])
            out.append(UnknownSpec(target=f"{PAIR_OBJECT}.{x}", object=PAIR_OBJECT, param=x, init=pair[1],
                                   lower=lower, upper=upper, log=True, nuisance=True))
    if spec.ground is None:
        return out
    fitted = {(u.object, u.tie or u.param) for u in spec.unknowns}
    rigid = [n for n, o in spec.objects.items() if o.kind == "rigid"]
    masses = {u.object: u.init for u in spec.unknowns if u.param == "mass" and u.object in rigid}
    per_mass = rigid[0] if len(rigid) == 1 and len(spec.objects) == 1 and rigid[0] in masses else None
    caps = soft_contact_caps(spec)
    for x in CONTACT_PARAMS:
        if x in spec.ground_given or ("ground", x) in fitted:
            continue
        takers = [n for n, o in spec.objects.items()
                  if (o.kind == "rigid" and x not in o.contact and (n, x) not in fitted) or o.kind in ("soft", "cloth")]
        takers += [f"colliders.{i}" for i in ground_takers(spec, x, fitted)]
        if not takers:
            continue
        value = float(spec.ground[x])
        lower, upper = PRIOR_RANGES[x](value)
        if x in caps and caps[x] < upper:             # what the step can integrate on the lightest soft vertex
            upper = caps[x]
            lower = min(lower, upper / 10.0)
            value = min(max(value, lower), upper)
        tie = f"{x}_per_mass"
        if per_mass is not None and tie in TIES and per_mass in takers:
            m = float(masses[per_mass])
            out.append(UnknownSpec(target=f"{per_mass}.{tie}", object=per_mass, param=tie, init=value / m,
                                   lower=lower / m, upper=upper / m, log=True, tie=x, nuisance=True))
        else:
            out.append(UnknownSpec(target=f"ground.{x}", object="ground", param=x, init=value, lower=lower,
                                   upper=upper, log=True, nuisance=True))
    return out


def soft_contact_caps(spec) -> dict:
    """{"ke": N/m, "kd": N s/m, "kf": N s/m}: the largest ground constants a soft object's lightest vertex
    (mass m, as the builder spreads it: `mass` or `density` by its mass_distribution, or `node_mass`) can
    take at the scene's step dt within the stability pre-flight's safe limit (`tigradsim.core.stability`:
    dt <= 0.5 x 4 / (gamma + sqrt(gamma^2 + 4 omega^2))) with all three at their cap at once:
    ke = 0.5 m / dt^2 and kd = kf = 0.5 m / dt (omega = 0.71 / dt, gamma = 0.5 / dt: the safe limit is
    then exactly dt).  Empty without soft objects or without a known step (no dt, substeps or fps).
    With [ground] damping_integration = "implicit" (kd and kf by local backward Euler, unconditionally stable:
    `tigradsim.physics.contact`) only ke is capped, at the same 0.5 m / dt^2 (the ke mode's safe limit is then
    0.5 sqrt(4 - 2 gamma_eff dt) / omega >= 0.71 / omega): kd and kf keep their whole prior ranges, the
    100-150 N s/m that other engines use included."""
    soft = [o for o in spec.objects.values() if o.kind == "soft"]
    if not soft:
        return {}
    return step_caps(spec, min(float(np.min(_soft_vertex_masses(o))) for o in soft))


def step_caps(spec, m) -> dict:
    """{"ke", "kd", "kf"} = 0.5 m / dt^2, 0.5 m / dt, 0.5 m / dt for a contact on the (effective) mass `m` [kg] at
    the scene's step dt (`soft_contact_caps`), only ke with [ground] damping_integration = "implicit"; {} without a
    known step."""
    fps = getattr(spec.footage, "fps", None) if spec.footage is not None else None
    dt = spec.dt if spec.dt is not None else (1.0 / (fps * spec.substeps) if fps and spec.substeps else None)
    if dt is None:
        return {}
    if (spec.ground or {}).get("law", {}).get("damping_integration") == "implicit":
        return {"ke": 0.5 * m / dt ** 2}
    return {"ke": 0.5 * m / dt ** 2, "kd": 0.5 * m / dt, "kf": 0.5 * m / dt}


def _soft_vertex_masses(obj):
    """(V,) vertex masses [kg] of a soft ObjectSpec as the builder spreads them (`physics.fem.node_masses`):
    node_mass, or the density's or total mass's spread by the object's mass_distribution."""
    from ..physics.fem import node_masses
    x = np.asarray(obj.vertices, dtype=np.float64)
    t = np.asarray(obj.tets, dtype=np.int64)
    vol = np.abs(np.linalg.det(x[t[:, 1:]] - x[t[:, :1]])) / 6.0
    return node_masses(len(x), t, vol, density=obj.density, mass=obj.mass, node_mass=obj.node_mass,
                       mass_distribution=getattr(obj, "mass_distribution", "volume"))
