"""A scene file's [unknowns] as `Param`s on the built model (`unknown_params`, used by
tigradsim/scenes/scene_build.py's `Scene`)."""
from __future__ import annotations

import numpy as np

__all__ = ["unknown_params"]


def _entry(field, index):
    """A `TiedParam` tie writing theta into entry `index` of `field` (None: a 0-D field)."""
    if index is None:
        return (field, lambda t: t[0], lambda t, g: g)

    def forward(t):
        values = field.to_numpy().astype(np.float64)
        values[index] = t[0]
        return values

    return (field, forward, lambda t, g: g[index])


def _entries(field, indices):
    """A tie writing theta into several entries of one field (its gradient sums them)."""
    idx = list(indices)

    def forward(t):
        values = field.to_numpy().astype(np.float64)
        values[idx] = t[0]
        return values

    return (field, forward, lambda t, g: g[idx].sum())


def unknown_params(spec, model, handles) -> list:
    """One Param per [unknowns] entry, in file order, with the file's initial values written:

    * a rigid object's mass, ke, kd, kf, mu: `TiedParam` on its entry of body_mass, body_ke, ...
    * "ground.X": `TiedParam` on ground_X, on body_X of every body that takes the ground's
      value (a body with its own X in the file keeps it), on their body_pair_X unless the bodies'
      contact with each other is a separate "bodies.X" (stated in [bodies], an unknown, or nuisance:
      `pair_constants`), and on collider_X of every
      collider that does (`scene_colliders.ground_takers`);
    * "bodies.X" (the user's or a nuisance): `TiedParam` on body_pair_X of the bodies taking it
      (`pair_constants.stated_pair_takers`);
    * "cloth_soft.X": `TiedParam` on every row of cloth_soft_X (`cloth_soft_constants`);
    * a rigid object's ke, kd, kf, mu move its body_X and body_pair_X together (its own constant);
    * a tie "OBJ.ke_per_mass" (kd, kf): `RatioParam` of body_ke over the body's mass, tied to
      the mass Param when the mass is an unknown too (one rigid body per scene);
    * a soft object's material parameter or damping: `ColumnParam` on its rows of tet_params;
    * a soft object's mass (total) or density: `SoftMassParam` scaling its vertex masses;
    * a cloth's material parameter, damping, bending or bending damping: `scene_cloth.cloth_unknown_param`;
    * an MPM object's material parameter, density or initial velocity component (vx, vy, vz):
      `scene_mpm.mpm_unknown_params`;
    * a collider's ke, kd, kf, mu: `TiedParam` on its entry of collider_X; its height: on the y entry of
      its collider_pose.
    """
    from ..physics.fem import param_column
    from ..fitting.optim import ColumnParam, RatioParam, TiedParam
    from .cloth_soft_constants import CLOTH_SOFT_OBJECT, cloth_soft_unknown_param
    from .pair_constants import PAIR_OBJECT, pair_is_separate, stated_pair_takers

    rigid = [n for n, o in spec.objects.items() if o.kind == "rigid"]
    made = {}
    order = sorted(spec.unknowns, key=lambda u: u.tie is not None)       # masses before the ties on them
    for u in order:
        kw = dict(name=u.target, lower=u.lower, upper=u.upper, log_space=u.log)
        if u.object in getattr(spec, "colliders", {}):
            from .scene_colliders import collider_param
            fld, entry = collider_param(model, list(spec.colliders).index(u.object), u.param)
            made[u.target] = TiedParam([_entry(fld, entry)], value=[u.init], **kw)
        elif u.object == PAIR_OBJECT:
            takers = stated_pair_takers(spec, u.param)
            made[u.target] = TiedParam([_entries(getattr(model, f"body_pair_{u.param}"),
                                                 [handles[n] for n in takers])], value=[u.init], **kw)
        elif u.object == CLOTH_SOFT_OBJECT:
            made[u.target] = cloth_soft_unknown_param(u, model, kw)
        elif u.object == "ground":
            ties = [_entry(getattr(model, f"ground_{u.param}"), None)]
            uses = [handles[n] for n in rigid if u.param not in spec.objects[n].contact]
            if uses:
                ties.append(_entries(getattr(model, f"body_{u.param}"), uses))
                if not pair_is_separate(spec, u.param):
                    ties.append(_entries(getattr(model, f"body_pair_{u.param}"), uses))
            from .scene_colliders import ground_takers
            fitted = {(v.object, v.param) for v in spec.unknowns}
            colliders = ground_takers(spec, u.param, fitted)
            if colliders:
                ties.append(_entries(getattr(model, f"collider_{u.param}"), colliders))
            made[u.target] = TiedParam(ties, value=[u.init], **kw)
        elif spec.objects[u.object].kind == "cloth":
            from .scene_cloth import cloth_unknown_param
            made[u.target] = cloth_unknown_param(u, model, handles[u.object], spec.objects[u.object], kw)
        elif spec.objects[u.object].kind == "mpm":
            from .scene_mpm import mpm_unknown_params
            made[u.target] = mpm_unknown_params(u, model, handles[u.object], kw, spec.axes)
        elif spec.objects[u.object].kind == "rigid":
            b = handles[u.object]
            if u.tie is None:
                ties = [_entry(getattr(model, f"body_{u.param}"), b)]
                if u.param != "mass":          # the object's own contact constant: against bodies too
                    ties.append(_entry(getattr(model, f"body_pair_{u.param}"), b))
                made[u.target] = TiedParam(ties, value=[u.init], **kw)
                continue
            if len(rigid) != 1:
                raise spec.error("unknowns", u.target, "a stiffness per unit mass needs a scene with one rigid object "
                                 f"(this one has {len(rigid)})")
            mass = made.get(f"{u.object}.mass")
            field = getattr(model, f"body_{u.tie}")
            field[b] = u.init * (mass.value()[0] if mass is not None else float(model.body_mass[b]))
            made[u.target] = RatioParam(field, mass if mass is not None else model.body_mass, **kw)
        elif u.param in ("mass", "density"):
            from ..fitting.soft_mass import SoftMassParam
            made[u.target] = SoftMassParam(model, handles[u.object], quantity=u.param, value=u.init, **kw)
        else:
            h = handles[u.object]
            col = param_column(model, h, u.param)
            table = model.tet_params.to_numpy()
            table[h.param_rows.start:h.param_rows.stop, col] = u.init
            model.tet_params.from_numpy(table)
            made[u.target] = ColumnParam(model.tet_params, col, rows=np.arange(h.param_rows.start, h.param_rows.stop),
                                         **kw)
    return [made[u.target] for u in spec.unknowns]
