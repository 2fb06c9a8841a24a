"""Motion of the footage boxes and soft cube simulated by engines other than tigradsim (issue 44, item 1).

`make_footage.py --engine warp|mujoco|newton` renders these exactly as tigradsim's own clips (same box,
camera, push, initial velocities, Mitsuba render, masks); only the motion, the truth values and
the contact law differ.  Each engine runs with ITS OWN contact law and constants (below), none of
which tigradsim has; truth.json states the law, the constants and what of them is comparable with
tigradsim's ke / kd / kf / mu.

NVIDIA Warp 1.9.1, `warp.sim` (deprecated in 1.9, still shipped), `SemiImplicitIntegrator`
(angular_damping 0), rigid box shape on Warp's ground plane (`set_ground_plane`), contacts from
`wp.sim.collide` (the 8 box corners against the plane), float32, 256 steps per 30 fps frame.  Its
law (warp/sim/integrator_euler.py, `eval_rigid_contacts`), per corner at depth d < 0 with normal /
tangential velocity vn, vt:
    fN = -ke d - kd min(vn, 0)                               (damping NOT capped: it can pull)
    ft = -(vt / H(vt)) min(kf H(vt), mu fN),  H the Huber norm with delta = friction_smoothing
so |ft| = min(kf |vt|, mu fN |vt| / H(|vt|)), where |vt| / H(|vt|) = 2 / |vt| below delta and
|vt| / (delta (|vt| - delta / 2)) above it.  That is a Coulomb law of coefficient mu / delta
(delta in m/s) for |vt| >> delta; we take delta = 0.02 m/s and set Warp's mu = mu_c x delta so
that the Coulomb-equivalent coefficient mu_c is the comparable truth (within 5 % above 0.2 m/s;
below 0.02 m/s the friction rises as 2 mu fN / |vt| up to the viscous cap kf |vt|).

MuJoCo 4.0 (PyPI `mujoco`), free body with a box geom (mass given, uniform inertia) on a plane,
its default soft-constraint contact: solref (0.02 s, damping ratio 1), solimp (0.9, 0.95, 0.001),
pyramidal friction cone, condim 3, friction = max of the two geoms' (both mu), Euler integrator,
timestep 1/600 s (20 steps per frame), float64.  No stiffness or damping constant per contact
point: each contact is a constraint whose reference acceleration is -b vn - k d with
k = 1 / (d_w^2 timeconst^2 dampratio^2), b = 2 / (d_w timeconst) (d_w the impedance, 0.9-0.95):
comparable with tigradsim only through mu (a Coulomb coefficient on a pyramidal cone) and, loosely,
k as a stiffness per unit effective mass (about 2,800 s^-2: tigradsim's 4 ke / m would be the
closest quantity); there is no friction regularisation (kf) at all.

Newton 1.8 (PyPI `newton`, on warp-lang 1.19), `SolverXPBD` (extended position-based dynamics, Macklin
et al. 2016 / Mueller et al. 2020): rigid box shape on Newton's ground plane, contacts from
`newton.CollisionPipeline` (box-plane, reduced manifold), float32, 32 steps per 30 fps frame, 8 solver
iterations per step, rigid_contact_relaxation 0.8, contact weighting on (the default: a body's
correction is divided by its number of active contacts).  Newton needs warp-lang >= 1.17, so it runs
in its own venv as a subprocess (benchmarks/newton_sim.py; recreate the venv with
`python3 -m venv /opt/venvs/newton && /opt/venvs/newton/bin/pip install -r benchmarks/requirements-newton.txt`,
or point TIGRADSIM_NEWTON_PYTHON at another interpreter that has newton==1.8.0).  Its law
(newton/_src/solvers/xpbd/kernels.py, `solve_body_contact_positions`), per contact at separation
d < 0 along the normal n, with w = m^-1 + (r x n)^T I^-1 (r x n) the generalised inverse mass:
    normal:   a position correction removing relaxation x d of the penetration per iteration, shared
              between the body's translation and rotation in proportion to m^-1 and I^-1 (multiplier
              dlambda_n = -relaxation d / (dt w)), divided by the body's active contact count; the
              velocity is the position change over dt: a hard, zero-compliance non-penetration
              constraint, no stiffness and no damping constant
    friction: the tangential slip of the contact points over the step, e (a length), corrected by
              dlambda_t = -relaxation e / (dt w_t), limited to |dlambda_t| <= mu |dlambda_n| per
              iteration (Coulomb's cone on the position level, static friction exact up to the
              iterations, no regularisation speed)
    restitution (enable_restitution): after the positional solve the normal velocity is set to
              -e vn_before (Newton's velocity pass over each contact manifold), e the shapes'
              restitution averaged.
Material constants of two shapes are averaged.  Comparable with tigradsim: mu (a Coulomb
coefficient); nothing else (no ke, kd or kf exists; restitution is a coefficient tigradsim's penalty
law has only implicitly through ke and kd).

Newton's semi-implicit solver (not used here) has exactly tigradsim's capped friction
min(kf |vt|, mu fN) and an uncapped normal damping kd min(vn, 0) inside the penetration: a third clip
with that solver would test little that the Warp clips do not.

Soft body (`simulate_soft`, clip warp_soft_drop): Warp 1.9.1 `warp.sim`, `ModelBuilder.add_soft_grid`
(4 x 4 x 4 cells of 0.075 m, 5 tets per cell: 125 particles, 320 tets), SemiImplicitIntegrator, float32,
256 steps per frame.  Material (`eval_tetrahedra`): Warp's stable neo-Hookean with
    P = k_mu (1 - 1/(Ic + 1)) F + k_lambda (J - alpha) cof F + k_damp (dF/dt + (dJ/dt) cof F),
    alpha = 1 + k_mu / k_lambda - k_mu / (4 k_lambda)
(the elastic part is tigradsim's "neo_hookean" with mu = k_mu, lam = k_lambda; the damping is
tigradsim's damping_model "warp" with damping = k_damp).  Masses: add_soft_grid gives EVERY particle
the mass density x cell volume (corners and faces alike: the total is 125 cell masses, not density x
cube volume).  Ground: `eval_particle_ground_contacts` per particle (radius 0 here):
    fN = ke |d| - kd min(vn, 0) (uncapped damping),  |ft| = min(kf |vt|, mu fN)
(tigradsim's capped friction law with an uncapped damping; the constants are model.soft_contact_*).

Force windows follow tigradsim's rule in every engine: step k (time k dt) is loaded when
(k + 1/2) dt lies in [start, end).  A force at a body point is applied as a force at the centre of
mass plus the torque (R p) x F.
"""
from __future__ import annotations

import json
import math
import os
import subprocess
import tempfile

import numpy as np

GRAVITY = (0.0, -9.8, 0.0)
FPS = 30

WARP_STEPS_PER_FRAME = 256
WARP_FRICTION_SMOOTHING = 0.02          # [m/s] delta of Warp's Huber norm
MUJOCO_TIMESTEP = 1.0 / 600.0
MUJOCO_STEPS_PER_FRAME = 20
NEWTON_STEPS_PER_FRAME = 32
NEWTON_ITERATIONS = 8
NEWTON_RELAXATION = 0.8
# Newton lives in its own venv (it needs warp-lang >= 1.17); override with TIGRADSIM_NEWTON_PYTHON
NEWTON_PYTHON_DEFAULT = "/opt/venvs/newton/bin/python"

# Each engine's truth and contact constants per clip (the box, camera, push and initial state are
# make_footage.CLIPS's).  The masses and friction coefficients differ from tigradsim's clips and from
# each other, so that no fit setting can be tuned to one number.
ENGINE_CLIPS = {
    "warp": {
        # Warp's ModelBuilder defaults are ke 1e5, kd 1000, kf 1000; kd 1000 on a 0.3 kg corner at
        # this dt is near the explicit damping limit, so a softer floor, as a Warp user would pick
        "box_push": dict(mass=1.37, contact=dict(ke=2.0e4, kd=50.0, kf=200.0, mu_c=0.41)),
        "box_drop": dict(mass=0.85, contact=dict(ke=1.0e4, kd=30.0, kf=1000.0, mu_c=0.6)),
    },
    "mujoco": {
        "box_push": dict(mass=1.25, contact=dict(solref=(0.02, 1.0), solimp=(0.9, 0.95, 0.001, 0.5, 2.0), mu=0.45)),
        "box_drop": dict(mass=0.95, contact=dict(solref=(0.02, 1.0), solimp=(0.9, 0.95, 0.001, 0.5, 2.0), mu=0.55)),
    },
    "newton": {
        "box_push": dict(mass=1.2, contact=dict(mu=0.43, restitution=0.0)),
        "box_drop": dict(mass=0.8, contact=dict(mu=0.45, restitution=0.3)),
    },
}
# Soft clips of other engines: the engine's own material, masses and damping (make_footage.CLIPS'
# soft_drop gives the cube's size, cells, pose, velocity and camera).
ENGINE_SOFT_CLIPS = {
    "warp": {
        "soft_drop": dict(k_mu=4000.0, k_lambda=9000.0, k_damp=0.8, density=80.0, radius=0.0,
                          ground=dict(ke=1.0e4, kd=10.0, kf=100.0, mu=0.6)),
    },
    # Newton: tigradsim's tet_box mesh with 6 tets per cell (384 tets, not Warp's 5-tet grid), masses
    # lumped from the tets by Newton, its own material, damping and ground constants
    "newton": {
        "soft_drop": dict(k_mu=3500.0, k_lambda=12000.0, k_damp=3.0, density=90.0, tets_per_cell=6,
                          contact_gap=0.01, ground=dict(ke=1.5e4, kd=20.0, kf=150.0, mu=0.7)),
    },
}
NEWTON_SOFT_STEPS_PER_FRAME = 256
ENGINES = tuple(ENGINE_CLIPS)


def _quat_matrix(q):
    """Rotation matrix of a unit quaternion (x, y, z, w)."""
    x, y, z, w = np.asarray(q, dtype=np.float64) / np.linalg.norm(q)
    return np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
                     [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
                     [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)]])


def _loaded(step, dt, force):
    return force["start"] <= (step + 0.5) * dt < force["end"]


def _wrench(forces, step, dt, rotation):
    """World force (3,) and torque about the centre of mass (3,) of the known forces at `step`."""
    F, T = np.zeros(3), np.zeros(3)
    for f in forces:
        if _loaded(step, dt, f):
            fw = np.asarray(f["force"], dtype=np.float64)
            F += fw
            T += np.cross(rotation @ np.asarray(f["point"], dtype=np.float64), fw)
    return F, T


def box_vertices(size, positions, quats):
    """World vertices (T, 8, 3) of tigradsim's box_surface posed by (T, 3) positions and (T, 4) quaternions."""
    from tigradsim.io.meshes import box_surface
    local, faces = box_surface(size)
    local = np.asarray(local, dtype=np.float64)
    verts = np.stack([p + local @ _quat_matrix(q).T for p, q in zip(positions, quats)])
    return verts, np.asarray(faces, dtype=np.int32)


def simulate(engine, spec, frames, initial_rotation):
    """Simulate make_footage's rigid clip `spec` in `engine` with ENGINE_CLIPS's truth.

    Returns (vertices (T, 8, 3), faces (12, 3), positions (T, 3), quats (T, 4) xyzw, state0,
    info) with info = {"simulation": ..., "contact": ..., "truth": ..., "comparable": ...} for truth.json."""
    if engine not in ENGINE_CLIPS:
        raise ValueError(f"engine: expected one of {ENGINES}, got {engine!r}")
    return {"warp": _simulate_warp, "mujoco": _simulate_mujoco, "newton": _simulate_newton}[engine](
        spec, frames, initial_rotation)


def _clip_name(spec):
    return "box_push" if spec["forces"] else "box_drop"


# ---------------------------------------------------------------------------- Warp
def _simulate_warp(spec, frames, initial_rotation):
    import warp as wp
    import warp.sim  # noqa: F401  (deprecated in 1.9, still shipped)
    wp.config.quiet = True
    wp.init()
    e = ENGINE_CLIPS["warp"][_clip_name(spec)]
    m, c = e["mass"], e["contact"]
    mu = c["mu_c"] * WARP_FRICTION_SMOOTHING                       # Warp's mu (see the module docstring)
    size = np.asarray(spec["size"], dtype=np.float64)
    position = list(spec["position"])
    if position[1] is None:   # resting: the centre at its static sink, m g / (4 ke) per corner
        position[1] = size[1] / 2 - m * -GRAVITY[1] / (4 * c["ke"])
    q0 = initial_rotation
    builder = wp.sim.ModelBuilder(up_vector=(0.0, 1.0, 0.0), gravity=GRAVITY[1])   # along up: -9.8
    body = builder.add_body(origin=wp.transform(wp.vec3(*position), wp.quat(*q0)))
    builder.add_shape_box(body, hx=size[0] / 2, hy=size[1] / 2, hz=size[2] / 2, density=m / float(np.prod(size)),
                          ke=c["ke"], kd=c["kd"], kf=c["kf"], mu=mu, thickness=0.0, has_shape_collision=False)
    builder.body_qd[body] = wp.spatial_vector(*spec["angular_velocity"], *spec["velocity"])
    builder.set_ground_plane(ke=c["ke"], kd=c["kd"], kf=c["kf"], mu=mu)
    model = builder.finalize(device="cpu")
    model.ground = True
    integrator = wp.sim.SemiImplicitIntegrator(angular_damping=0.0, friction_smoothing=WARP_FRICTION_SMOOTHING)
    control = model.control()
    s0, s1 = model.state(), model.state()
    dt = 1.0 / (FPS * WARP_STEPS_PER_FRAME)
    poses = [s0.body_q.numpy()[0].astype(np.float64)]
    for step in range((frames - 1) * WARP_STEPS_PER_FRAME):
        s0.clear_forces()
        wp.sim.collide(model, s0)
        if spec["forces"]:
            q = s0.body_q.numpy()[0]
            F, T = _wrench(spec["forces"], step, dt, _quat_matrix(q[3:7]))
            s0.body_f.assign(np.array([[*T, *F]], dtype=np.float32))
        integrator.simulate(model, s0, s1, dt, control)
        s0, s1 = s1, s0
        if (step + 1) % WARP_STEPS_PER_FRAME == 0:
            poses.append(s0.body_q.numpy()[0].astype(np.float64))
    poses = np.array(poses)
    positions, quats = poses[:, :3], poses[:, 3:7] / np.linalg.norm(poses[:, 3:7], axis=1, keepdims=True)
    verts, faces = box_vertices(size, positions, quats)
    info = {
        "simulation": {"simulator": f"NVIDIA Warp {wp.config.version} (warp.sim)", "integrator":
                       "warp.sim.SemiImplicitIntegrator(angular_damping=0, friction_smoothing="
                       f"{WARP_FRICTION_SMOOTHING})", "dt": dt, "steps_per_frame": WARP_STEPS_PER_FRAME,
                       "precision": "f32", "collision": "wp.sim.collide: the 8 box corners against the ground plane"},
        "contact": {"law": "Warp eval_rigid_contacts, per corner at depth d < 0: fN = -ke d - kd min(vn, 0) (damping "
                           "not capped); friction |ft| = min(kf |vt|, mu fN |vt| / H(|vt|)) along -vt, H the Huber "
                           f"norm with delta = {WARP_FRICTION_SMOOTHING} m/s (|vt|/H = 2/|vt| below delta, "
                           "|vt| / (delta (|vt| - delta/2)) above): Coulomb with coefficient mu / delta for "
                           "|vt| >> delta",
                    "per": "contact point (box corner); shape and ground materials equal (Warp averages them)",
                    "ke": c["ke"], "kd": c["kd"], "kf": c["kf"], "mu_warp": mu,
                    "friction_smoothing": WARP_FRICTION_SMOOTHING, "mu_coulomb_equivalent": c["mu_c"]},
        "truth": {"mass": m, "mu": c["mu_c"]},
        "comparable": {
            "mu": "mu_coulomb_equivalent = mu_warp / friction_smoothing: the sliding friction coefficient above "
                  "~0.2 m/s slip (within 5 %); slower, Warp's friction exceeds mu fN (2 mu_warp fN / |vt|) up to "
                  "its viscous cap kf |vt|",
            "ke": "same meaning as tigradsim's ke per contact point (N/m, linear penalty)",
            "kd": "N s/m per point like tigradsim's, but Warp's damping is not capped by the elastic force "
                  "(tigradsim's default law caps it): comparable only as an order of magnitude",
            "kf": "a viscous cap on friction like tigradsim's kf, but applied against a friction that is not "
                  "Coulomb below delta: comparable only as an order of magnitude"},
        "initial_position_rule": "box_push: the centre at its static sink h/2 - m g / (4 ke)" if spec["forces"] else None,
    }
    state0 = dict(position=np.asarray(position, dtype=np.float64), rotation=np.asarray(q0, dtype=np.float64))
    return verts, faces, positions, quats, state0, info


# ---------------------------------------------------------------------------- MuJoCo
def _mjcf(size, m, c, position, quat_wxyz):
    sr, si = c["solref"], c["solimp"]
    ground_q = (math.cos(-math.pi / 4), math.sin(-math.pi / 4), 0.0, 0.0)      # the plane's +z turned to +y
    f = lambda v: " ".join(f"{x:.17g}" for x in v)
    return f"""<mujoco model="footage_box">
  <option timestep="{MUJOCO_TIMESTEP:.17g}" gravity="{f(GRAVITY)}" integrator="Euler" cone="pyramidal"/>
  <default><geom solref="{f(sr)}" solimp="{f(si)}" condim="3"/></default>
  <worldbody>
    <geom name="ground" type="plane" size="10 10 0.1" quat="{f(ground_q)}" friction="{c['mu']} 0.005 0.0001"/>
    <body name="box" pos="{f(position)}" quat="{f(quat_wxyz)}">
      <freejoint/>
      <geom name="box" type="box" size="{f(np.asarray(size) / 2)}" mass="{m:.17g}" friction="{c['mu']} 0.005 0.0001"/>
    </body>
  </worldbody>
</mujoco>"""


def _simulate_mujoco(spec, frames, initial_rotation):
    import mujoco
    e = ENGINE_CLIPS["mujoco"][_clip_name(spec)]
    m, c = e["mass"], e["contact"]
    size = np.asarray(spec["size"], dtype=np.float64)
    q0 = np.asarray(initial_rotation, dtype=np.float64)
    position = list(spec["position"])
    settle = position[1] is None
    if settle:
        position[1] = size[1] / 2
    model = mujoco.MjModel.from_xml_string(_mjcf(size, m, c, position, (q0[3], q0[0], q0[1], q0[2])))
    data = mujoco.MjData(model)
    if settle:   # resting: let MuJoCo's soft contact reach its own equilibrium, then start from it at rest
        for _ in range(int(round(1.0 / MUJOCO_TIMESTEP))):
            mujoco.mj_step(model, data)
        data.qvel[:] = 0.0
        data.qpos[3:7] = (q0[3], q0[0], q0[1], q0[2])
        data.qpos[0] = spec["position"][0]
        data.qpos[2] = spec["position"][2]
        data.time = 0.0
        mujoco.mj_forward(model, data)
        position = data.qpos[:3].copy().tolist()
    R0 = _quat_matrix(q0)
    data.qvel[0:3] = spec["velocity"]
    data.qvel[3:6] = R0.T @ np.asarray(spec["angular_velocity"], dtype=np.float64)   # free joint: body-frame w
    mujoco.mj_forward(model, data)

    def pose():
        w, x, y, z = data.qpos[3:7]
        return np.concatenate([data.qpos[:3], [x, y, z, w]])

    poses = [pose()]
    body = model.body("box").id
    for step in range((frames - 1) * MUJOCO_STEPS_PER_FRAME):
        if spec["forces"]:
            F, T = _wrench(spec["forces"], step, MUJOCO_TIMESTEP, _quat_matrix(pose()[3:7]))
            data.xfrc_applied[body, :3], data.xfrc_applied[body, 3:] = F, T
        mujoco.mj_step(model, data)
        if (step + 1) % MUJOCO_STEPS_PER_FRAME == 0:
            poses.append(pose())
    poses = np.array(poses)
    positions, quats = poses[:, :3], poses[:, 3:7] / np.linalg.norm(poses[:, 3:7], axis=1, keepdims=True)
    verts, faces = box_vertices(size, positions, quats)
    tc, ratio = c["solref"]
    info = {
        "simulation": {"simulator": f"MuJoCo {mujoco.__version__}", "integrator": "Euler (implicit in joint damping; "
                       "none here)", "dt": MUJOCO_TIMESTEP, "steps_per_frame": MUJOCO_STEPS_PER_FRAME, "precision": "f64",
                       "collision": "MuJoCo box-plane (up to 4 contacts at the deepest corners)",
                       "solver": "Newton (MuJoCo's default), pyramidal cone"},
        "contact": {"law": "MuJoCo soft constraints: each contact's reference acceleration -b vn - k d with "
                           "k = 1/(d_w^2 timeconst^2 dampratio^2), b = 2/(d_w timeconst), d_w from solimp; friction a "
                           "pyramidal Coulomb cone of coefficient mu solved with the normal force (no regularisation "
                           "speed); geoms' friction combined by max",
                    "solref": list(c["solref"]), "solimp": list(c["solimp"]), "mu": c["mu"], "condim": 3,
                    "stiffness_per_unit_mass_s^-2": 1.0 / (tc * tc * ratio * ratio)},
        "truth": {"mass": m, "mu": c["mu"]},
        "comparable": {
            "mu": "a Coulomb friction coefficient (pyramidal cone): comparable with tigradsim's mu",
            "ke": "none per point; k = 1/(timeconst^2 dampratio^2) = %.0f s^-2 is a stiffness per unit effective "
                  "mass (tigradsim's 4 ke / m is the nearest quantity, loosely)" % (1.0 / (tc * tc * ratio * ratio)),
            "kd": "none per point; damping ratio %g of the constraint (critically damped: no bounce)" % ratio,
            "kf": "none: MuJoCo's friction has no regularisation speed (static friction holds exactly up to the "
                  "solver's softness)"},
        "initial_position_rule": ("box_push: MuJoCo's own resting height (1 s settled at rest, then velocities "
                                  "zeroed and x, z, orientation reset)") if settle else None,
    }
    state0 = dict(position=np.asarray(position, dtype=np.float64), rotation=q0)
    return verts, faces, positions, quats, state0, info


# ---------------------------------------------------------------------------- Newton (own venv)
def newton_python():
    """The interpreter of Newton's venv (TIGRADSIM_NEWTON_PYTHON, default /opt/venvs/newton/bin/python)."""
    path = os.environ.get("TIGRADSIM_NEWTON_PYTHON", NEWTON_PYTHON_DEFAULT)
    if not os.path.exists(path):
        raise RuntimeError(f"TIGRADSIM_NEWTON_PYTHON: no interpreter at {path!r}; create Newton's venv: python3 -m venv "
                           "/opt/venvs/newton && /opt/venvs/newton/bin/pip install -r benchmarks/requirements-newton.txt")
    return path


def run_in_newton(script_name, job) -> dict:
    """Run benchmarks/`script_name` in Newton's venv on the JSON-able `job`; returns the arrays it saved (npz)."""
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), script_name)
    with tempfile.TemporaryDirectory() as tmp:
        src, dst = os.path.join(tmp, "in.json"), os.path.join(tmp, "out.npz")
        with open(src, "w") as fh:
            json.dump(job, fh)
        r = subprocess.run([newton_python(), script, src, dst], capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError(f"{script_name} failed (rc {r.returncode}):\n{r.stderr[-3000:]}")
        return dict(np.load(dst))


def _simulate_newton(spec, frames, initial_rotation):
    e = ENGINE_CLIPS["newton"][_clip_name(spec)]
    m, c = e["mass"], e["contact"]
    size = np.asarray(spec["size"], dtype=np.float64)
    q0 = np.asarray(initial_rotation, dtype=np.float64)
    job = {"size": size.tolist(), "mass": m, "position": list(spec["position"]), "quaternion_xyzw": q0.tolist(),
           "velocity": list(spec["velocity"]), "angular_velocity": list(spec["angular_velocity"]),
           "forces": [{k: (list(v) if isinstance(v, tuple) else v) for k, v in f.items()} for f in spec["forces"]],
           "frames": int(frames), "fps": FPS, "substeps": NEWTON_STEPS_PER_FRAME, "iterations": NEWTON_ITERATIONS,
           "mu": c["mu"], "restitution": c["restitution"], "relaxation": NEWTON_RELAXATION}
    out = run_in_newton("newton_sim.py", job)
    positions, quats = out["positions"], out["quats"]
    newton_version, warp_version = (str(v) for v in out["versions"])
    verts, faces = box_vertices(size, positions, quats)
    dt = 1.0 / (FPS * NEWTON_STEPS_PER_FRAME)
    info = {
        "simulation": {"simulator": f"Newton {newton_version} (warp-lang {warp_version}, own venv; "
                                    "benchmarks/newton_sim.py)",
                       "integrator": f"newton.solvers.SolverXPBD(iterations={NEWTON_ITERATIONS}, "
                                     f"rigid_contact_relaxation={NEWTON_RELAXATION}, enable_restitution="
                                     f"{c['restitution'] > 0}), rigid_contact_con_weighting on (default)",
                       "dt": dt, "steps_per_frame": NEWTON_STEPS_PER_FRAME, "precision": "f32",
                       "collision": "newton.CollisionPipeline (box-plane, reduced contact manifold)",
                       "solver": "XPBD position-level contact and friction"},
        "contact": {"law": "Newton XPBD solve_body_contact_positions: hard non-penetration (zero compliance) corrected "
                           "by relaxation x depth per iteration, divided by the body's contact count; position-level "
                           "friction on the tangential slip, limited per iteration to mu x the normal multiplier "
                           "(Coulomb cone, no regularisation speed); restitution e applied to the normal velocity "
                           "after the positional solve (enable_restitution)",
                    "per": "contact of the collision pipeline's manifold; shape and ground materials equal "
                           "(Newton averages them)",
                    "mu": c["mu"], "restitution": c["restitution"], "mu_torsional": 0.0, "mu_rolling": 0.0,
                    "relaxation": NEWTON_RELAXATION, "iterations": NEWTON_ITERATIONS},
        "truth": {"mass": m, "mu": c["mu"]},
        "comparable": {
            "mu": "a Coulomb friction coefficient (position-level cone, static friction exact up to the iterations): "
                  "comparable with tigradsim's mu",
            "ke": "none: XPBD contact is rigid (zero compliance); no stiffness exists",
            "kd": "none: no contact damping; energy leaves through restitution %g (a coefficient of restitution "
                  "on the normal velocity) and the position projection" % c["restitution"],
            "kf": "none: no friction regularisation speed"},
        "initial_position_rule": ("box_push: Newton's own resting height (1 s settled at rest, then velocities "
                                  "zeroed and x, z, orientation reset)") if spec["forces"] else None,
    }
    state0 = dict(position=np.asarray(out["position0"], dtype=np.float64), rotation=q0)
    return verts, faces, positions, quats, state0, info


# ---------------------------------------------------------------------------- soft bodies
def simulate_soft(engine, spec, frames, initial_rotation):
    """Simulate make_footage's soft clip `spec` (the cube's size, cells, pose, velocity) in `engine`
    with ENGINE_SOFT_CLIPS's material, masses, damping and ground.

    Returns (vertices (T, V, 3), surface faces (F, 3), centroids (T, 3), rest vertices (V, 3) centred at
    the origin, tets (T4, 4) 0-based positively oriented, node masses (V,), info)."""
    if engine not in ENGINE_SOFT_CLIPS:
        raise ValueError(f"engine: soft clips exist for {tuple(ENGINE_SOFT_CLIPS)}, got {engine!r}")
    if engine == "newton":
        return _simulate_newton_soft(spec, frames, initial_rotation)
    return _simulate_warp_soft(spec, frames, initial_rotation)


def _soft_initial_state(rest, spec, initial_rotation):
    """x0 = position + R rest, v0 = linear + angular x (x0 - position): (V, 3) each."""
    R = _quat_matrix(initial_rotation)
    position = np.asarray(spec["position"], dtype=np.float64)
    x0 = rest @ R.T + position
    v0 = np.asarray(spec["velocity"], dtype=np.float64) + np.cross(
        np.asarray(spec["angular_velocity"], dtype=np.float64), x0 - position)
    return x0, v0


def _simulate_newton_soft(spec, frames, initial_rotation):
    """Newton 1.8 SolverSemiImplicit soft cube (benchmarks/newton_soft_sim.py in Newton's venv)."""
    from tigradsim.io.meshes import boundary_faces, tet_box
    e = ENGINE_SOFT_CLIPS["newton"]["soft_drop"]
    n, s = int(spec["cells"]), float(spec["size"])
    rest, tets = tet_box(n, n, n, size=(s, s, s), origin=(-s / 2,) * 3, tets_per_cell=e["tets_per_cell"])
    x0, v0 = _soft_initial_state(rest, spec, initial_rotation)
    job = {"vertices": rest.tolist(), "tets": np.asarray(tets).tolist(), "x0": x0.tolist(), "v0": v0.tolist(),
           "density": e["density"], "k_mu": e["k_mu"], "k_lambda": e["k_lambda"], "k_damp": e["k_damp"],
           "ground": e["ground"], "contact_gap": e["contact_gap"], "frames": int(frames), "fps": FPS,
           "substeps": NEWTON_SOFT_STEPS_PER_FRAME}
    out = run_in_newton("newton_soft_sim.py", job)
    xs, masses = out["positions"], out["masses"]
    if not np.all(np.isfinite(xs)):
        raise RuntimeError("newton soft drop: the simulation blew up (non-finite positions)")
    newton_version, warp_version = (str(v) for v in out["versions"])
    centroids = (xs * masses[None, :, None]).sum(1) / masses.sum()
    g = e["ground"]
    info = {
        "simulation": {"simulator": f"Newton {newton_version} (warp-lang {warp_version}, own venv; "
                                    "benchmarks/newton_soft_sim.py)",
                       "integrator": "newton.solvers.SolverSemiImplicit", "dt": 1.0 / (FPS * NEWTON_SOFT_STEPS_PER_FRAME),
                       "steps_per_frame": NEWTON_SOFT_STEPS_PER_FRAME, "precision": "f32",
                       "collision": f"newton.CollisionPipeline(soft_contact_gap={e['contact_gap']}) particle-shape "
                                    "contacts against add_ground_plane",
                       "builder": f"ModelBuilder.add_soft_mesh(tigradsim tet_box {n} x {n} x {n}, "
                                  f"{e['tets_per_cell']} tets per cell, density {e['density']:g}, k_mu {e['k_mu']:g}, "
                                  f"k_lambda {e['k_lambda']:g}, k_damp {e['k_damp']:g}, tri_ke = tri_ka = 0)"},
        "material": {"law": "Newton eval_tetrahedra (as Warp's): P = k_mu (1 - 1/(Ic + 1)) F + k_lambda (J - alpha) "
                            "cof F + k_damp (dF/dt + (dJ/dt) cof F), alpha = 1 + k_mu/k_lambda - k_mu/(4 k_lambda), "
                            "per tet x rest volume",
                     "k_mu": e["k_mu"], "k_lambda": e["k_lambda"], "k_damp": e["k_damp"],
                     "conversion_to_tigradsim": "material neo_hookean, mu = k_mu, lam = k_lambda (the same energy "
                                                "and alpha); damping = k_damp with damping_model \"warp\""},
        "masses": {"rule": "add_soft_mesh: each tet gives a quarter of density x its volume to each corner (lumped, "
                           "as tigradsim's density / total mass)",
                   "density": e["density"], "node_mass": None, "total_mass": float(masses.sum()),
                   "equal": bool(np.allclose(masses, masses[0]))},
        "contact": {"law": "Newton eval_particle_body_contact per particle at signed distance c <= 0 (radius 0): "
                           "f = -(n c ke + n kd min(vn, 0) + t min(kf |vt|, mu |c| ke)) (damping uncapped, the "
                           "friction cap from the elastic part only); particle and ground constants averaged (equal)",
                    "per": "particle", "ke": g["ke"], "kd": g["kd"], "kf": g["kf"], "mu": g["mu"],
                    "particle_radius": 0.0},
        "comparable": {
            "mu": "a Coulomb coefficient capping a viscous kf friction, as tigradsim's capped law (the cap without "
                  "the normal damping)",
            "ke": "same meaning as tigradsim's ke per vertex (N/m, linear penalty)",
            "kd": "N s/m per vertex, not capped by the elastic force",
            "kf": "same meaning as tigradsim's kf (the viscous cap of the friction, N s/m per vertex)"},
        "truth": {"mu": e["k_mu"], "lam": e["k_lambda"], "damping": e["k_damp"], "damping_model": "warp"},
    }
    return xs, boundary_faces(tets).astype(np.int32), centroids, rest, np.asarray(tets, dtype=np.int64), masses, info


def _simulate_warp_soft(spec, frames, initial_rotation):
    import warp as wp
    import warp.sim  # noqa: F401
    from tigradsim.io.meshes import boundary_faces
    wp.config.quiet = True
    wp.init()
    e = ENGINE_SOFT_CLIPS["warp"]["soft_drop"]
    n, s = int(spec["cells"]), float(spec["size"])
    cell = s / n
    builder = wp.sim.ModelBuilder(up_vector=(0.0, 1.0, 0.0), gravity=GRAVITY[1])
    builder.default_particle_radius = e["radius"]
    # built at rest centred at the origin; the pose and velocity are set on the state below
    builder.add_soft_grid(pos=wp.vec3(-s / 2, -s / 2, -s / 2), rot=wp.quat_identity(), vel=wp.vec3(0.0, 0.0, 0.0),
                          dim_x=n, dim_y=n, dim_z=n, cell_x=cell, cell_y=cell, cell_z=cell, density=e["density"],
                          k_mu=e["k_mu"], k_lambda=e["k_lambda"], k_damp=e["k_damp"])
    model = builder.finalize(device="cpu")
    # add_soft_grid also adds its boundary triangles as a membrane (tri_ke 100 by default: ~13 % of the
    # cube's shear stiffness here); tri_ke = tri_ka = 0 makes Warp's triangle kernel divide 0 by 0
    # (alpha = 1 + ke / ka), so the triangles are switched off by count: the clip is the tets alone
    model.tri_count = 0
    model.ground = True
    g = e["ground"]
    model.soft_contact_ke, model.soft_contact_kd, model.soft_contact_kf, model.soft_contact_mu = (
        g["ke"], g["kd"], g["kf"], g["mu"])
    rest = model.particle_q.numpy().astype(np.float64)
    tets = model.tet_indices.numpy().astype(np.int64)
    masses = model.particle_mass.numpy().astype(np.float64)
    R = _quat_matrix(initial_rotation)
    position = np.asarray(spec["position"], dtype=np.float64)
    x0 = rest @ R.T + position
    v0 = np.asarray(spec["velocity"], dtype=np.float64) + np.cross(
        np.asarray(spec["angular_velocity"], dtype=np.float64), x0 - position)
    s0, s1 = model.state(), model.state()
    s0.particle_q.assign(x0.astype(np.float32))
    s0.particle_qd.assign(v0.astype(np.float32))
    integrator = wp.sim.SemiImplicitIntegrator()
    dt = 1.0 / (FPS * WARP_STEPS_PER_FRAME)
    xs = [s0.particle_q.numpy().astype(np.float64)]
    for step in range((frames - 1) * WARP_STEPS_PER_FRAME):
        s0.clear_forces()
        integrator.simulate(model, s0, s1, dt)
        s0, s1 = s1, s0
        if (step + 1) % WARP_STEPS_PER_FRAME == 0:
            xs.append(s0.particle_q.numpy().astype(np.float64))
    xs = np.array(xs)
    if not np.all(np.isfinite(xs)):
        raise RuntimeError("warp soft drop: the simulation blew up (non-finite positions)")
    centroids = (xs * masses[None, :, None]).sum(1) / masses.sum()
    node_mass = float(masses[0])
    info = {
        "simulation": {"simulator": f"NVIDIA Warp {wp.config.version} (warp.sim)",
                       "integrator": "warp.sim.SemiImplicitIntegrator", "dt": dt,
                       "steps_per_frame": WARP_STEPS_PER_FRAME, "precision": "f32",
                       "builder": f"ModelBuilder.add_soft_grid(dim {n} x {n} x {n}, cell {cell:g} m, density "
                                  f"{e['density']:g}, k_mu {e['k_mu']:g}, k_lambda {e['k_lambda']:g}, k_damp "
                                  f"{e['k_damp']:g}); its boundary triangles (a membrane) switched off: model.tri_count = 0"},
        "material": {"law": "Warp eval_tetrahedra: P = k_mu (1 - 1/(Ic + 1)) F + k_lambda (J - alpha) cof F + k_damp "
                            "(dF/dt + (dJ/dt) cof F), alpha = 1 + k_mu/k_lambda - k_mu/(4 k_lambda), per tet x rest "
                            "volume",
                     "k_mu": e["k_mu"], "k_lambda": e["k_lambda"], "k_damp": e["k_damp"],
                     "conversion_to_tigradsim": "material neo_hookean, mu = k_mu, lam = k_lambda (the same energy "
                                                "and alpha); damping = k_damp with damping_model \"warp\""},
        "masses": {"rule": "add_soft_grid: every particle density x cell volume (not lumped from the tets)",
                   "density": e["density"], "cell_volume": cell ** 3, "node_mass": node_mass,
                   "total_mass": float(masses.sum()), "equal": bool(np.allclose(masses, node_mass))},
        "contact": {"law": "Warp eval_particle_ground_contacts per particle at depth d < 0 (radius below): "
                           "fN = ke |d| - kd min(vn, 0) (damping not capped), |ft| = min(kf |vt|, mu fN) along -vt",
                    "per": "particle", "ke": g["ke"], "kd": g["kd"], "kf": g["kf"], "mu": g["mu"],
                    "particle_radius": e["radius"]},
        "comparable": {
            "mu": "the same Coulomb coefficient with the same viscous cap kf as tigradsim's capped friction",
            "ke": "same meaning as tigradsim's ke per vertex (N/m, linear penalty)",
            "kd": "N s/m per vertex like tigradsim's, but Warp's damping is not capped by the elastic force",
            "kf": "same meaning as tigradsim's kf (the viscous cap of the friction, N s/m per vertex)"},
        "truth": {"mu": e["k_mu"], "lam": e["k_lambda"], "damping": e["k_damp"], "damping_model": "warp"},
    }
    return xs, boundary_faces(tets).astype(np.int32), centroids, rest, tets, masses, info
