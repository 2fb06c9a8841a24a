"""Motion of two INTERACTING scenes simulated by NVIDIA Warp 1.9.1 (`warp.sim`, semi-implicit), for footage
that tigradsim did not make (issue 46, item 6).  `make_interacting_footage.py` renders them with Mitsuba.

warp_ramp_boxes
    A ramp (Warp: an infinite static plane shape through the origin, rising towards -x at RAMP_DEG) meets the
    ground (Warp's ground plane) at x = 0.  Box A rests flat on the ramp, RAMP_START m up from the foot
    (centre, along the slope), released at t = 0; it slides down, crosses the kink onto the ground and hits box
    B, which rests on the ground past the foot.  Contacts: `wp.sim.collide` every step (box corners / edges
    against the ramp plane and the ground, box-box by Warp's edge-based box contact).
    Warp's rigid contact law (`eval_rigid_contacts`) per contact with depth d < 0:
        fN = -ke d - kd min(vn, 0)             (damping not capped)
        |ft| = min(kf |vt|, mu fN |vt| / H(|vt|)),  H the Huber norm with delta = friction_smoothing
    a Coulomb law of coefficient mu / delta for |vt| >> delta (engine_sims.py); the pair's ke, kd, kf, mu are
    the MEANS of the two shapes' materials (the ground is a plane shape with its own).  So the boxes and the
    ground get Warp mu = MU_GROUND_C x delta and the ramp shape 2 MU_RAMP_C delta - MU_GROUND_C delta: the
    box-ramp pair's Coulomb-equivalent coefficient is MU_RAMP_C (the truth "ramp.mu"), the box-ground and
    box-box pairs' MU_GROUND_C.  The mass ratio m_B / m_A is the other truth.

warp_ball_box
    A soft ball (tigradsim.io.meshes.tet_ball(radius, resolution 2), Warp `add_particle` + `add_tetrahedron`,
    Warp's stable neo-Hookean with k_mu, k_lambda, k_damp) is thrown onto a box resting on the ground
    (a dynamic rigid body).  Warp's particle-shape contact (`eval_particle_contacts`, the box's material
    averaged with model.soft_contact_*, set equal; the reaction goes to the box's body_f) and particle-ground
    contact (`eval_particle_ground_contacts`, model.soft_contact_*: fn = -ke c - kd min(vn, 0), friction
    min(kf |vt|, mu |fn|), plain Coulomb).  Warp's k_mu, k_lambda are tigradsim's "neo_hookean" mu, lam (the
    same energy, alpha = 1 + 3 mu / (4 lam), materials/neo_hookean.py); its k_damp is tigradsim's damping
    with damping_model = "warp" (tigradsim/physics/damping.py); its particle masses are the lumped masses
    (density x volume / 4 per adjacent tet), as tigradsim's add_soft_mesh(density=...).
    Truth: the ball's mu and lam [Pa] (small-strain Lame 3/4 mu, lam - 5/8 mu; E from those).

warp_cloth_sphere
    A square cloth (Warp `add_cloth_grid`: CLOTH["cells"] x CLOTH["cells"] cells, Warp's own triangle membrane
    `eval_triangles` with tri_ke, tri_ka, tri_kd and its dihedral bending `eval_bending` with edge_ke) is dropped
    flat from rest over a static sphere (`add_shape_sphere` on no body) standing on the ground; it lands on the
    ball, drapes down around it and its corners reach the ground.  Contacts: Warp's particle-shape contact
    (`eval_particle_contacts`, the sphere's material averaged with model.soft_contact_*, set equal) and
    particle-ground contact (`eval_particle_ground_contacts`): fn = -ke c - kd min(vn, 0) (c = the gap less the
    particle radius), friction min(kf |vt|, mu ke |c|); no particle-particle contact (particle_max_radius 0).
    Masses: add_cloth_grid gives every particle the same mass; a real cloth has a uniform areal density, so
    the particles get a uniform sheet's lumped masses instead (a third of density x area of each adjacent
    triangle, density = CLOTH["mass"] / side^2): what tigradsim's add_cloth(density=...) does, and what a user
    who weighed the cloth can state.
    Conversion to tigradsim (`cloth_conversion`): Warp's triangle force is P = k_mu F + k_damp dF/dt plus the
    area term k_lambda (J - alpha) dJ/dx with alpha = 1 + k_mu / k_lambda, scaled by the rest area: tigradsim's
    "membrane" material with mu = tri_ke, lam = tri_ka [N/m] (the same law, benchmarks/vs_warp.py); its
    damping on dF/dt = tri_kd, but Warp adds an area damping tri_kd dJ/dt dJ/dx that tigradsim has not.
    Bending: Warp's force is -edge_ke (theta - theta0) |e| dtheta/dx with |e| the CURRENT edge length,
    tigradsim's -k (theta - theta0) dtheta/dx with one k per cloth: k = edge_ke x (rest edge length), which is
    cell for the grid's axis edges and sqrt(2) cell for its diagonals (one k cannot be both: the truth states
    k at the axis edges and the edge-length-weighted mean; the clip's check measures the difference).

All: float32, WARP_STEPS_PER_FRAME (the cloth: CLOTH_STEPS_PER_FRAME) steps per 30 fps frame, `SemiImplicitIntegrator(angular_damping=0)`,
gravity 9.8 along -y.  Run: `python3 benchmarks/make_interacting_footage.py` (needs warp-lang 1.9.1 and
mitsuba 3.9.1: `pip install -e ".[engines,footage]"`).
"""
from __future__ import annotations

import math

import numpy as np

GRAVITY = 9.8
FPS = 30
WARP_STEPS_PER_FRAME = 256
WARP_FRICTION_SMOOTHING = 0.02          # [m/s] delta of Warp's Huber norm

RAMP = dict(
    frames=30, ramp_deg=25.0, ramp_start=0.6,                   # [deg], [m] box A's centre from the foot, along the slope
    speed_a=0.8,             # [m/s] box A's initial speed down the ramp (well above delta: from rest, Warp's friction
                             # below delta, 2 mu fN / |vt|, would hold it: a static friction above tan 25 degrees)
    size_a=(0.2, 0.1, 0.15), mass_a=0.6, size_b=(0.14, 0.16, 0.18), mass_b=0.72,
    position_b=(0.2, None, 0.0),                                # y: B's static sink
    mu_ramp_c=0.25, mu_ground_c=0.3,                             # Coulomb-equivalent (above ~0.2 m/s slip)
    ke=2.0e4, kd=30.0, kf=200.0)                                # per contact, every shape alike
BALL = dict(
    frames=36, radius=0.1, resolution=2, density=1000.0, position=(-0.08, 0.42, 0.0), velocity=(0.5, -0.5, 0.0),
    mu=12000.0, lam=30000.0, k_damp=2.0,                        # Warp's k_mu, k_lambda [Pa], k_damp [Pa s]
    box_size=(0.32, 0.12, 0.24), box_mass=0.9, box_position=(0.05, None, 0.0),
    contact=dict(ke=1.0e4, kd=10.0, kf=100.0, mu=0.5),          # soft contact and the box / ground shapes
    particle_radius=0.0)
CLOTH_STEPS_PER_FRAME = 128
CLOTH = dict(
    frames=36, cells=19, side=0.9,           # 20 x 20 vertices, a 0.9 m square
    height=0.6, offset=(0.06, 0.0, 0.04),    # [m] the flat cloth's plane; its centre's offset from the ball's axis
    mass=0.3,                                # [kg] the whole cloth (0.37 kg/m^2)
    sphere_radius=0.22,                      # [m], standing on the ground at (0, r, 0)
    tri_ke=60.0, tri_ka=120.0, tri_kd=0.05,  # Warp's membrane [N/m], [N/m], [N s/m]
    edge_ke=0.02, edge_kd=0.0,               # Warp's bending [N/rad^2] (x the edge length: N m/rad^2)
    particle_radius=0.005,                   # [m] the contact radius (half the cloth's thickness)
    contact=dict(ke=800.0, kd=0.2, kf=0.25, mu=0.4))  # particle-ground and particle-sphere, per particle


def _quat_z(deg):
    h = math.radians(deg) / 2
    return np.array([0.0, 0.0, math.sin(h), math.cos(h)])


def ramp_frame(deg):
    """(rotation xyzw (4,), outward normal (3,), downhill unit vector (3,)) of a plane through the origin rising
    towards -x at `deg` degrees: the rotation turns +y into the normal (sin, cos, 0)."""
    a = math.radians(deg)
    return _quat_z(-deg), np.array([math.sin(a), math.cos(a), 0.0]), np.array([math.cos(a), -math.sin(a), 0.0])


def _warp():
    import warp as wp
    import warp.sim  # noqa: F401  (deprecated in 1.9, still shipped)
    wp.config.quiet = True
    wp.init()
    return wp


def _poses(state, count):
    q = state.body_q.numpy()[:count].astype(np.float64)
    return q[:, :3], q[:, 3:7] / np.linalg.norm(q[:, 3:7], axis=1, keepdims=True)


def _soft_ground(model, contact):
    """Ground on, and Warp's particle ("soft") contact constants set to `contact`'s ke, kd, kf, mu, with no
    particle-particle contact (tigradsim has none within a body or a cloth)."""
    model.ground = True
    model.soft_contact_ke, model.soft_contact_kd, model.soft_contact_kf, model.soft_contact_mu = (
        contact["ke"], contact["kd"], contact["kf"], contact["mu"])
    model.particle_max_radius = 0.0


def _warp_frames(wp, model, integrator, dt, steps_per_frame, frames, record):
    """Warp's semi-implicit rollout with `wp.sim.collide` every step: `record(state)` at the start and after
    every `steps_per_frame` steps, `frames` records in all (a list)."""
    control = model.control()
    s0, s1 = model.state(), model.state()
    out = [record(s0)]
    for step in range((frames - 1) * steps_per_frame):
        s0.clear_forces()
        wp.sim.collide(model, s0)
        integrator.simulate(model, s0, s1, dt, control)
        s0, s1 = s1, s0
        if (step + 1) % steps_per_frame == 0:
            out.append(record(s0))
    return out


def simulate_ramp_boxes(spec=RAMP):
    """Warp rollout of warp_ramp_boxes.  Returns dict(positions (T, 2, 3), quats (T, 2, 4) xyzw, state0 (initial
    positions (2, 3), quats (2, 4)), info {simulation, contact, truth, comparable})."""
    wp = _warp()
    s = spec
    delta = WARP_FRICTION_SMOOTHING
    mu_box = s["mu_ground_c"] * delta
    mu_ramp = 2.0 * s["mu_ramp_c"] * delta - mu_box                 # pair mean = mu_ramp_c x delta
    if mu_ramp <= 0:
        raise ValueError(f"mu_ramp_c: the pair mean needs mu_ramp_c > mu_ground_c / 2, got {s['mu_ramp_c']}")
    mat = dict(ke=s["ke"], kd=s["kd"], kf=s["kf"])
    rot, normal, down = ramp_frame(s["ramp_deg"])
    size_a, size_b = np.asarray(s["size_a"]), np.asarray(s["size_b"])
    ma, mb = s["mass_a"], s["mass_b"]
    # resting starts: each bottom corner's static sink (4 corners on a plane; along the normal on the ramp)
    sink_a = ma * GRAVITY * math.cos(math.radians(s["ramp_deg"])) / (4 * s["ke"])
    pa = -down * s["ramp_start"] + normal * (size_a[1] / 2 - sink_a)
    pb = np.array([s["position_b"][0], size_b[1] / 2 - mb * GRAVITY / (4 * s["ke"]), s["position_b"][2]])
    b = wp.sim.ModelBuilder(up_vector=(0.0, 1.0, 0.0), gravity=-GRAVITY)
    b.rigid_contact_margin = 0.05
    body_a = b.add_body(origin=wp.transform(wp.vec3(*pa), wp.quat(*rot)))
    b.add_shape_box(body_a, hx=size_a[0] / 2, hy=size_a[1] / 2, hz=size_a[2] / 2, density=ma / float(np.prod(size_a)),
                    mu=mu_box, thickness=0.0, **mat)
    b.body_qd[body_a] = wp.spatial_vector(0.0, 0.0, 0.0, *(down * s["speed_a"]))
    body_b = b.add_body(origin=wp.transform(wp.vec3(*pb), wp.quat(0.0, 0.0, 0.0, 1.0)))
    b.add_shape_box(body_b, hx=size_b[0] / 2, hy=size_b[1] / 2, hz=size_b[2] / 2, density=mb / float(np.prod(size_b)),
                    mu=mu_box, thickness=0.0, **mat)
    b.add_shape_plane(pos=wp.vec3(0.0, 0.0, 0.0), rot=wp.quat(*rot), width=0.0, length=0.0, body=-1, mu=mu_ramp,
                      thickness=0.0, **mat)
    b.set_ground_plane(mu=mu_box, **mat)
    model = b.finalize(device="cpu")
    model.ground = True
    integrator = wp.sim.SemiImplicitIntegrator(angular_damping=0.0, friction_smoothing=delta)
    dt = 1.0 / (FPS * WARP_STEPS_PER_FRAME)
    poses = _warp_frames(wp, model, integrator, dt, WARP_STEPS_PER_FRAME, s["frames"], lambda st: _poses(st, 2))
    positions, quats = [p for p, _ in poses], [q for _, q in poses]
    info = {
        "simulation": {"simulator": f"NVIDIA Warp {wp.config.version} (warp.sim)",
                       "integrator": f"warp.sim.SemiImplicitIntegrator(angular_damping=0, friction_smoothing={delta})",
                       "dt": dt, "steps_per_frame": WARP_STEPS_PER_FRAME, "precision": "f32",
                       "collision": "wp.sim.collide every step (rigid_contact_margin 0.05 m): box-plane (ramp), "
                                    "box-ground, box-box (Warp's edge-based box contact)",
                       "generator": "benchmarks/interacting_sims.py"},
        "contact": {"law": "Warp eval_rigid_contacts, per contact at depth d < 0: fN = -ke d - kd min(vn, 0) (damping "
                           "not capped); |ft| = min(kf |vt|, mu fN |vt| / H(|vt|)) along -vt, H the Huber norm with "
                           f"delta = {delta} m/s: Coulomb of coefficient mu / delta for |vt| >> delta; a pair's "
                           "ke, kd, kf, mu are the means of its two shapes'",
                    "ke": s["ke"], "kd": s["kd"], "kf": s["kf"], "friction_smoothing": delta,
                    "mu_warp": {"box_a": mu_box, "box_b": mu_box, "ground": mu_box, "ramp": mu_ramp},
                    "mu_coulomb_equivalent_pairs": {"box-ramp": s["mu_ramp_c"], "box-ground": s["mu_ground_c"],
                                                    "box-box": s["mu_ground_c"]}},
        "truth": {"ramp.mu": s["mu_ramp_c"], "mass_ratio_b_over_a": mb / ma, "box_a.mass": ma, "box_b.mass": mb},
        "comparable": {
            "ramp.mu": "the box-ramp pair's Coulomb-equivalent coefficient (mean of the two shapes' Warp mu) / "
                       "friction_smoothing: the sliding friction coefficient above ~0.2 m/s slip (within 5 %; the "
                       "box starts at rest, so for its first ~0.1 s Warp's friction exceeds mu fN)",
            "mass ratio": "m_B / m_A: the same quantity in any engine",
            "ke": "per contact point like tigradsim's, but Warp's box-box and box-plane contacts are edge-based "
                  "(more points than tigradsim's corners): not comparable",
            "kd, kf": "order of magnitude only (uncapped damping, Huber friction)"},
    }
    state0 = {"positions": np.array([pa, pb]), "quats": np.array([rot, [0.0, 0.0, 0.0, 1.0]]),
              "velocities": np.array([down * s["speed_a"], np.zeros(3)])}
    return dict(positions=np.array(positions), quats=np.array(quats), state0=state0, info=info)


def ball_mesh(spec=BALL):
    """The ball's rest mesh centred at the origin: (vertices (V, 3), tets (T, 4)), tigradsim's tet_ball."""
    from tigradsim.io.meshes import tet_ball
    v, t = tet_ball(spec["radius"], spec["resolution"])
    return np.asarray(v, dtype=np.float64), np.asarray(t, dtype=np.int64)


def lumped_masses(vertices, tets, density):
    """(V,) vertex masses: a quarter of density x volume of each adjacent tet [kg]."""
    x = vertices[tets]
    vol = np.abs(np.einsum("ij,ij->i", np.cross(x[:, 1] - x[:, 0], x[:, 2] - x[:, 0]), x[:, 3] - x[:, 0])) / 6.0
    m = np.zeros(len(vertices))
    np.add.at(m, tets.ravel(), np.repeat(density * vol / 4.0, 4))
    return m


def simulate_ball_box(spec=BALL):
    """Warp rollout of warp_ball_box.  Returns dict(particles (T, V, 3), box_positions (T, 3), box_quats (T, 4),
    rest (V, 3), tets (T, 4), state0, info)."""
    wp = _warp()
    s = spec
    rest, tets = ball_mesh(s)
    x0 = rest + np.asarray(s["position"])
    masses = lumped_masses(rest, tets, s["density"])
    size = np.asarray(s["box_size"])
    c = s["contact"]
    mat = dict(c)
    pb = np.array([s["box_position"][0], size[1] / 2 - s["box_mass"] * GRAVITY / (4 * c["ke"]), s["box_position"][2]])
    b = wp.sim.ModelBuilder(up_vector=(0.0, 1.0, 0.0), gravity=-GRAVITY)
    for x, m in zip(x0, masses):
        b.add_particle(tuple(x), tuple(s["velocity"]), float(m), radius=s["particle_radius"])
    for t in tets:
        b.add_tetrahedron(*map(int, t), k_mu=s["mu"], k_lambda=s["lam"], k_damp=s["k_damp"])
    body = b.add_body(origin=wp.transform(wp.vec3(*pb), wp.quat(0.0, 0.0, 0.0, 1.0)))
    b.add_shape_box(body, hx=size[0] / 2, hy=size[1] / 2, hz=size[2] / 2, density=s["box_mass"] / float(np.prod(size)),
                    thickness=0.0, **mat)
    b.set_ground_plane(**mat)
    b.soft_contact_max = len(x0) * 2
    model = b.finalize(device="cpu")
    _soft_ground(model, c)
    integrator = wp.sim.SemiImplicitIntegrator(angular_damping=0.0)
    dt = 1.0 / (FPS * WARP_STEPS_PER_FRAME)
    frames = _warp_frames(wp, model, integrator, dt, WARP_STEPS_PER_FRAME, s["frames"],
                          lambda st: (st.particle_q.numpy().astype(np.float64), _poses(st, 1)))
    particles = [x for x, _ in frames]
    box_p, box_q = [p[0] for _, (p, _) in frames], [q[0] for _, (_, q) in frames]
    mu, lam = s["mu"], s["lam"]
    mu_l, lam_l = 0.75 * mu, lam - 0.625 * mu
    young = mu_l * (3 * lam_l + 2 * mu_l) / (lam_l + mu_l)
    info = {
        "simulation": {"simulator": f"NVIDIA Warp {wp.config.version} (warp.sim)",
                       "integrator": "warp.sim.SemiImplicitIntegrator(angular_damping=0)", "dt": dt,
                       "steps_per_frame": WARP_STEPS_PER_FRAME, "precision": "f32",
                       "collision": "wp.sim.collide every step: particle-box (soft contacts, margin 0.2 m), "
                                    "box-ground; particle-ground in the integrator",
                       "generator": "benchmarks/interacting_sims.py"},
        "contact": {"law": "particles: Warp eval_particle_contacts / eval_particle_ground_contacts, fn = -ke c - kd "
                           "min(vn, 0), friction min(kf |vt|, mu |fn|) (the box's material averaged with "
                           "model.soft_contact_*, set equal); box-ground: eval_rigid_contacts (engine_sims.py) with "
                           "Warp's default friction_smoothing 1 m/s",
                    **c, "particle_radius": s["particle_radius"]},
        "truth": {"ball.mu": mu, "ball.lam": lam, "ball.damping": s["k_damp"],
                  "small_strain_lame": {"mu": mu_l, "lam": lam_l}, "young_modulus": young,
                  "poisson_ratio": lam_l / (2 * (lam_l + mu_l))},
        "comparable": {
            "mu, lam": "Warp's k_mu, k_lambda ARE tigradsim's neo_hookean mu, lam (the same stable neo-Hookean "
                       "energy, materials/neo_hookean.py)",
            "damping": "Warp's k_damp is tigradsim's damping with damping_model = \"warp\"",
            "contact": "ke, kd per point as tigradsim's with damping = \"uncapped\"; friction: Warp's cap mu ke |c| "
                       "vs tigradsim's mu fn (vs_warp.py)"},
    }
    state0 = {"ball_position": np.asarray(s["position"], dtype=np.float64), "box_position": pb,
              "box_quat": np.array([0.0, 0.0, 0.0, 1.0])}
    return dict(particles=np.array(particles), box_positions=np.array(box_p), box_quats=np.array(box_q), rest=rest,
                tets=tets, masses=masses, state0=state0, info=info)


def cloth_lumped_masses(vertices, triangles, density):
    """(V,) vertex masses of a uniform sheet: a third of density x area of each adjacent triangle [kg]."""
    x = vertices[triangles]
    area = 0.5 * np.linalg.norm(np.cross(x[:, 1] - x[:, 0], x[:, 2] - x[:, 0]), axis=1)
    m = np.zeros(len(vertices))
    np.add.at(m, triangles.ravel(), np.repeat(density * area / 3.0, 3))
    return m


def cloth_conversion(spec=CLOTH):
    """Warp's cloth constants as tigradsim's: membrane mu, lam [N/m] and damping, bending k per edge [N m/rad^2]
    (at the axis edges, and the edge-length mean over Warp's bending edges), the density [kg/m^2]."""
    cell = spec["side"] / spec["cells"]
    n = spec["cells"]
    axis_edges, diagonal_edges = 2 * n * (n - 1), n * n          # interior edges of an n x n grid
    mean_len = cell * (axis_edges + np.sqrt(2.0) * diagonal_edges) / (axis_edges + diagonal_edges)
    return {"mu": spec["tri_ke"], "lam": spec["tri_ka"], "damping": spec["tri_kd"],
            "bending": spec["edge_ke"] * cell, "bending_mean_edge": float(spec["edge_ke"] * mean_len),
            "bending_damping": spec["edge_kd"] * cell, "density": spec["mass"] / spec["side"] ** 2}


def simulate_cloth_sphere(spec=CLOTH, steps_per_frame=CLOTH_STEPS_PER_FRAME):
    """Warp rollout of warp_cloth_sphere.  Returns dict(particles (T, V, 3), rest (V, 3), triangles (F, 3),
    masses (V,), info)."""
    wp = _warp()
    s = spec
    n, side = s["cells"], s["side"]
    cell = side / n
    c = s["contact"]
    # the grid in Warp's x-y plane turned -90 degrees about x: x -> x, y -> -z, normal +z -> +y
    h = -math.pi / 4
    rot = (math.sin(h), 0.0, 0.0, math.cos(h))
    origin = np.array([s["offset"][0] - side / 2, s["height"], s["offset"][2] + side / 2])
    b = wp.sim.ModelBuilder(up_vector=(0.0, 1.0, 0.0), gravity=-GRAVITY)
    b.add_cloth_grid(pos=wp.vec3(*origin), rot=wp.quat(*rot), vel=wp.vec3(0.0, 0.0, 0.0), dim_x=n, dim_y=n,
                     cell_x=cell, cell_y=cell, mass=1.0, tri_ke=s["tri_ke"], tri_ka=s["tri_ka"], tri_kd=s["tri_kd"],
                     tri_drag=0.0, tri_lift=0.0, edge_ke=s["edge_ke"], edge_kd=s["edge_kd"],
                     particle_radius=s["particle_radius"])
    rest = np.array(b.particle_q, dtype=np.float64)
    tris = np.array(b.tri_indices, dtype=np.int64)
    density = s["mass"] / side ** 2
    masses = cloth_lumped_masses(rest, tris, density)
    b.particle_mass = [float(m) for m in masses]
    r = s["sphere_radius"]
    b.add_shape_sphere(-1, pos=(0.0, r, 0.0), radius=r, thickness=0.0, has_ground_collision=False,
                       has_shape_collision=False, **c)
    b.set_ground_plane(**c)
    b.soft_contact_max = 2 * len(rest)
    model = b.finalize(device="cpu")
    _soft_ground(model, c)
    integrator = wp.sim.SemiImplicitIntegrator()
    dt = 1.0 / (FPS * steps_per_frame)
    particles = _warp_frames(wp, model, integrator, dt, steps_per_frame, s["frames"],
                             lambda st: st.particle_q.numpy().astype(np.float64))
    conv = cloth_conversion(s)
    info = {
        "simulation": {"simulator": f"NVIDIA Warp {wp.config.version} (warp.sim)",
                       "integrator": "warp.sim.SemiImplicitIntegrator()", "dt": dt, "steps_per_frame": steps_per_frame,
                       "precision": "f32",
                       "collision": "wp.sim.collide every step: particle-sphere (soft contacts); particle-ground in "
                                    "the integrator; no particle-particle contact",
                       "cloth": f"add_cloth_grid({n} x {n} cells of {cell:.6g} m), tri_ke {s['tri_ke']}, tri_ka "
                                f"{s['tri_ka']}, tri_kd {s['tri_kd']}, edge_ke {s['edge_ke']}, edge_kd {s['edge_kd']}, "
                                "no drag / lift; particle masses: a uniform sheet's lumped masses",
                       "generator": "benchmarks/interacting_sims.py"},
        "contact": {"law": "Warp eval_particle_contacts / eval_particle_ground_contacts: fn = -ke c - kd min(vn, 0) "
                           "(c: the gap less the particle radius; damping not capped), friction min(kf |vt|, "
                           "mu ke |c|) (the sphere's material averaged with model.soft_contact_*, set equal)",
                    **c, "particle_radius": s["particle_radius"]},
        "truth": {"cloth.mu": conv["mu"], "cloth.lam": conv["lam"], "cloth.damping": conv["damping"],
                  "cloth.bending": conv["bending"], "cloth.bending_mean_edge": conv["bending_mean_edge"],
                  "cloth.density": conv["density"], "cloth.mass": s["mass"],
                  "warp": {k: s[k] for k in ("tri_ke", "tri_ka", "tri_kd", "edge_ke", "edge_kd")}},
        "comparable": {
            "mu, lam": "Warp's tri_ke, tri_ka ARE tigradsim's \"membrane\" mu, lam [N/m] (the same law: P = mu F + "
                       "lam (J - alpha) dJ/dF, alpha = 1 + mu / lam, times the rest area)",
            "damping": "tri_kd = tigradsim's membrane damping on dF/dt; Warp also damps the area (tri_kd dJ/dt), "
                       "tigradsim does not",
            "bending": "tigradsim k per edge = edge_ke x rest edge length: edge_ke x cell at the axis edges (the "
                       "truth cloth.bending), x sqrt(2) cell at the diagonals; Warp scales by the current length",
            "contact": "ke, kd per particle as tigradsim's with damping = \"uncapped\"; friction: Warp's cap mu ke |c| "
                       "vs tigradsim's mu fn (vs_warp.py)"},
    }
    return dict(particles=np.array(particles), rest=rest, triangles=tris, masses=masses, info=info)
