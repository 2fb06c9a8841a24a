"""Static colliders (tigradsim/physics/colliders.py): rollout gradients against central differences (float64) in
the colliders' pose, size, ke, kd, kf, mu and the objects' initial state, for particles on each shape kind and a
rigid box on a tilted plane; physics against closed forms (a particle on a ramp slides iff tan(theta) > mu, a box
slides down with g (sin - mu cos), a ball bounces off a wall); bad inputs, interpenetrating starts and the
stability pre-flight.

FD scenes keep every contact point in contact for the whole rollout (checked with the numpy distances), so no
touchdown moves inside a finite-difference step, and start with no normal velocity exactly 0 (a kink of
max(-v_n, 0) where the Tape takes one side), as tests/test_contact_laws.py does for the ground.
"""
import numpy as np
import pytest
import taichi as ti

import tigradsim as tgs
from tigradsim import meshes
from tigradsim.physics.colliders import Colliders
from tigradsim.physics.rigid import quat_to_matrix_np
from tigradsim.physics.shapes import shape_distance_np
from rigid_tracks import rigid_track_loss

MASS, RADIUS, KE = 0.1, 0.02, 500.0
SINK = MASS * 9.8 / KE                   # 2 mm static sink of a particle


def _collider_distance(model, c, x):
    """Signed distance of world points x (N, 3) to collider c at the model's current pose and size (numpy)."""
    pose = model.get("collider_pose")[c].astype(np.float64)
    table = model.collider_table
    local = (x - pose[:3]) @ quat_to_matrix_np(pose[3:] / np.linalg.norm(pose[3:]))
    return shape_distance_np(table.kinds[c], model.get("collider_size")[c], local, table.grids[c])[0]


# -- gradients: particles on every kind -------------------------------------------------------------
def _particle_scene():
    """One particle sliding on each collider kind (one model: one compile).  Returns (model, sim, run, loss,
    per-particle collider)."""
    b = tgs.SceneBuilder()
    law = dict(ke=KE, kd=2.0, kf=5.0, mu=0.4)
    tilt = tgs.quat_from_axis_angle((1.0, 0.0, 0.0), np.radians(12.0))
    lie = tgs.quat_from_axis_angle((0.0, 0.0, 1.0), np.pi / 2 + 0.15)          # a capsule lying almost flat
    ball = meshes.icosphere(2, 0.3)
    colliders = [("sphere", 0.3, (0.0, 0.0, 0.0), (0, 0, 0, 1), None),
                 ("box", (0.3, 0.2, 0.25), (2.0, 0.0, 0.0), tgs.quat_from_axis_angle((0, 0, 1), 0.1), None),
                 ("capsule", (0.15, 0.2), (4.0, 0.0, 0.0), lie, None),
                 ("plane", None, (6.0, -1.0, 0.0), tilt, None),
                 ("mesh", 1.1, (8.0, 0.0, 0.0), (0, 0, 0, 1), ball)]
    starts, normals = [], []
    for k, (kind, size, pos, rot, mesh) in enumerate(colliders):
        c = b.add_collider(kind, size, position=pos, rotation=rot, mesh=mesh, **law,
                           damping="capped", friction="huber" if k % 2 else "capped",
                           friction_velocity=0.02 if k % 2 else None)
        assert c == k
    col = b.component(Colliders)
    rng = np.random.default_rng(5)
    for c, (kind, size, pos, rot, mesh) in enumerate(colliders):
        # a point above the collider's frame origin, moved along the surface normal (numpy reference) to
        # 1.2 static sinks inside
        x = np.asarray(pos, float) + np.array([0.05, 1.0, -0.04]) * 0.5
        for _ in range(3):
            pose = col.colliders[c]["pose"]
            R = quat_to_matrix_np(pose[3:])
            dd, n = col.table.distance_np(c, ((x - pose[:3]) @ R)[None])
            x = x - (dd[0] - RADIUS + 1.2 * SINK) * (R @ n[0])
        starts.append(x), normals.append(R @ n[0])
    q, n = np.array(starts), np.array(normals)
    qd = rng.normal(size=(5, 3)) * 0.2
    qd += n * (-0.01 - np.sum(qd * n, axis=1, keepdims=True))     # sliding, slightly into the surface
    b.add_particles(q, qd, MASS, radius=RADIUS)
    model = b.finalize()
    sim = tgs.Simulator(model, dt=1e-3, steps=150)
    rec = tgs.ParticleRecorder(sim, 15)
    loss = tgs.MSELoss(rec.values, rng.normal(size=(rec.frames, 5, 3)) * 0.3)

    def run():
        loss.value[None] = 0
        sim.run()
        loss()

    return model, sim, run, loss.value


@pytest.mark.slow
def test_particle_rollout_gradients_on_every_kind(f64):
    model, sim, run, loss = _particle_scene()
    kinds = [model.collider_table.kinds[c] for c in range(5)]
    assert sorted(kinds) == [0, 1, 2, 3, 4]
    run()
    q = sim.state.particle_q.to_numpy()
    for c in range(5):
        gap = _collider_distance(model, c, q[:, c]) - RADIUS
        assert np.all(gap < 0), f"particle {c} stays in contact with collider {c} (no touchdown in an FD step)"
        moved = np.linalg.norm(q[-1, c] - q[0, c])
        assert moved > 5e-4, f"particle {c} slides on collider {c}"
    params = model.parameters()
    names = ["collider_pose", "collider_size", "collider_ke", "collider_kd", "collider_kf", "collider_mu",
             "particle_q0", "particle_qd0"]
    tgs.check_gradient(run, loss, [params[n] for n in names], n_dirs=3, eps=1e-6, rtol=1e-5).assert_ok()
    for c in range(5):            # each collider's own parameters (its pose, size and contact) matter and agree
        mask = (np.arange(5) == c).astype(float)
        own = ["collider_pose", "collider_ke", "collider_kd", "collider_kf", "collider_mu"]
        if kinds[c] != 0:
            own.append("collider_size")
        report = tgs.check_gradient(run, loss, [params[n] for n in own], n_dirs=2, eps=1e-6, rtol=1e-5,
                                    masks=[mask] * len(own), seed=c)
        assert report.ok, f"collider {c}: {report}"
        assert min(abs(a) for a in report.analytic) > 1e-9, f"collider {c}'s parameters should matter here"


# -- gradients: a rigid box on a tilted plane ---------------------------------------------------------
BOX = (0.3, 0.1, 0.22)


def _ramp_rotation(theta):
    """A plane collider rising towards +x at angle theta (normal (-sin, cos, 0)); its downhill unit vector."""
    return tgs.quat_from_axis_angle((0.0, 0.0, 1.0), theta), np.array([-np.cos(theta), -np.sin(theta), 0.0])


def _box_on_ramp(theta, mu, ke=500.0, speed=0.8, spin=0.0, kf=10.0, steps=300, friction="capped"):
    b = tgs.SceneBuilder()
    rot, down = _ramp_rotation(theta)
    b.add_collider("plane", rotation=rot, ke=ke, kd=5.0, kf=kf, mu=mu, friction=friction,
                   friction_velocity=0.02 if friction == "huber" else None)
    v, f = meshes.box_surface(BOX)
    normal = quat_to_matrix_np(rot)[:, 1]
    sink = 9.8 * np.cos(theta) / (4 * ke)
    centre = normal * (BOX[1] / 2 - 1.1 * sink) - down * 0.5
    b.add_rigid_body(v, f, mass=1.0, position=centre, rotation=rot, velocity=down * speed - normal * 0.03,
                     angular_velocity=normal * spin + np.array([0.02, 0.0, -0.03]))
    model = b.finalize()
    sim = tgs.Simulator(model, dt=1e-3, steps=steps)
    return model, sim, down, normal


def _corner_gaps(model, sim):
    q = sim.state.body_q.to_numpy()[:, 0]
    corners = model.contact_point.to_numpy()
    world = np.array([(quat_to_matrix_np(p[3:]) @ corners.T).T + p[:3] for p in q])       # (T, 8, 3)
    return np.stack([_collider_distance(model, 0, w) for w in world])                   # (T, 8)


@pytest.mark.slow
def test_rigid_box_on_tilted_plane_gradient(f64):
    model, sim, down, normal = _box_on_ramp(np.radians(15.0), 0.4, spin=1.5, friction="huber")
    run, total = rigid_track_loss(sim, 1, 30, 60, seed=7)
    run()
    gaps = _corner_gaps(model, sim)
    bottom = gaps[0] < 0
    assert bottom.sum() == 4 and np.all(gaps[:, bottom] < 0) and np.all(gaps[:, ~bottom] > 0), \
        "the four bottom corners stay in contact, the top ones never touch"
    params = model.parameters()
    names = ["collider_pose", "collider_ke", "collider_kd", "collider_kf", "collider_mu", "body_qd0", "body_mass"]
    tgs.check_gradient(run, total, [params[n] for n in names], n_dirs=3, eps=1e-5, rtol=1e-5).assert_ok()
    for name in names[:5]:
        report = tgs.check_gradient(run, total, [params[name]], n_dirs=1, eps=1e-5, rtol=1e-5)
        assert report.ok, f"{name}: {report}"
        assert abs(report.analytic[0]) > 1e-8, f"{name} should matter here"


# -- physics against closed forms ------------------------------------------------------------------------
def test_particle_on_ramp_slides_iff_tan_theta_exceeds_mu(f64):
    """One model, re-posed: the ramp's angle, mu and the particle's start are parameters."""
    kf, ke = 40.0, 2e3
    b = tgs.SceneBuilder()
    b.add_collider("plane", rotation=_ramp_rotation(0.3)[0], ke=ke, kd=5.0, kf=kf, mu=0.5)
    b.add_particle((0.0, RADIUS, 0.0), mass=MASS, radius=RADIUS)
    model = b.finalize(requires_grad=False)
    sim = tgs.Simulator(model, dt=1e-3, steps=1000)
    g = 9.8
    for theta_deg, mu in [(20.0, 0.5), (30.0, 0.5), (25.0, 0.3), (15.0, 0.3)]:
        theta = np.radians(theta_deg)
        rot, down = _ramp_rotation(theta)
        normal = quat_to_matrix_np(rot)[:, 1]
        model.set("collider_pose", np.concatenate([[0.0, 0.0, 0.0], rot])[None])
        model.set("collider_mu", [mu])
        model.set("particle_q0", (normal * (RADIUS - MASS * g * np.cos(theta) / ke))[None])
        sim.run()
        qd = sim.state.particle_qd.to_numpy()[:, 0]
        along = qd @ down
        t = np.arange(len(along)) * 1e-3
        if np.tan(theta) > mu:
            a = g * (np.sin(theta) - mu * np.cos(theta))
            late = t > 0.2
            fit = np.polyfit(t[late], along[late], 1)[0]
            assert fit == pytest.approx(a, rel=5e-3), f"theta {theta_deg}, mu {mu}: slides with g (sin - mu cos)"
        else:
            creep = MASS * g * np.sin(theta) / kf      # the viscous (kf) branch below the Coulomb cap
            assert np.abs(along).max() < 1.05 * creep and along[-1] == pytest.approx(creep, rel=0.02), \
                f"theta {theta_deg}, mu {mu}: sticks (creeps at m g sin / kf)"
        assert abs(qd[-1] @ normal) < 1e-3, "stays on the ramp"


def test_box_slides_down_ramp_with_analytic_acceleration(f64):
    theta, mu = np.radians(30.0), 0.3
    model, sim, down, normal = _box_on_ramp(theta, mu, ke=2e4, speed=0.5, kf=100.0, steps=600)
    sim.run()
    v = sim.state.body_qd.to_numpy()[:, 0, 3:] @ down
    t = np.arange(len(v)) * 1e-3
    late = t > 0.1
    accel = np.polyfit(t[late], v[late], 1)[0]
    expected = 9.8 * (np.sin(theta) - mu * np.cos(theta))
    assert accel == pytest.approx(expected, rel=0.01)
    w = sim.state.body_qd.to_numpy()[-1, 0, :3]
    assert np.linalg.norm(w) < 0.05, "slides flat, does not tumble"


def test_rigid_boxes_land_on_a_table_and_a_ball(f64):
    """Rigid contact points against non-plane colliders: a box dropped on a table (a box collider) comes to rest
    flat on its top; one dropped off-centre on a ball (a sphere collider) tips off it, its corners never deep in."""
    b = tgs.SceneBuilder()
    b.add_ground(ke=1e4, kd=20.0)
    b.add_collider("box", (0.4, 0.1, 0.4), position=(0.0, 0.3, 0.0), ke=1e4, kd=20.0)
    b.add_collider("sphere", 0.3, position=(3.0, 0.3, 0.0), ke=1e4, kd=20.0)
    v, f = meshes.box_surface(BOX)
    b.add_rigid_body(v, f, mass=1.0, position=(0.05, 0.6, 0.0))
    b.add_rigid_body(v, f, mass=1.0, position=(3.1, 0.8, 0.02))
    model = b.finalize(requires_grad=False)
    sim = tgs.Simulator(model, dt=5e-4, steps=3000)
    sim.run()
    q = sim.state.body_q.to_numpy()
    corners = model.contact_point.to_numpy()
    owner = model.contact_body.to_numpy()
    world = lambda t, k: (quat_to_matrix_np(q[t, k, 3:]) @ corners[owner == k].T).T + q[t, k, :3]
    table_top = 0.4
    assert q[-1, 0, 1] == pytest.approx(table_top + BOX[1] / 2, abs=2e-3), "rests on the table"
    assert np.abs(world(-1, 0)[:, 1] - table_top).min() < 2e-3, "flat on it"
    gaps = np.array([np.linalg.norm(world(t, 1) - [3.0, 0.3, 0.0], axis=1).min() for t in range(len(q))])
    # corners only (the contact points): the impact on a corner pair sinks ~1 cm at ke 1e4
    assert gaps.min() > 0.3 - 0.02, "its corners never enter the ball deeper than the impact's penalty depth"
    assert np.linalg.norm(q[-1, 1, [0, 2]] - [3.0, 0.0]) > 0.3, "tips off it"


@pytest.mark.parametrize("precision", ["f32", "f64"])
def test_ball_bounces_off_wall(precision):
    tgs.init(precision=precision)
    b = tgs.SceneBuilder(gravity=(0.0, 0.0, 0.0))
    b.add_collider("plane", position=(1.0, 0.0, 0.0), rotation=tgs.quat_from_normal((-1.0, 0.0, 0.0)),
                   ke=1e4, kd=0.0, kf=0.0, mu=0.0)
    b.add_collider("sphere", 0.2, position=(0.0, 0.0, 1.0), ke=1e4, kd=2.0, kf=0.0, mu=0.0)
    b.add_particle((0.0, 0.0, 0.0), velocity=(2.0, 0.0, 0.3), mass=MASS, radius=0.05)       # wall
    b.add_particle((0.0, 0.0, 0.3), velocity=(0.0, 0.0, 2.0), mass=MASS, radius=0.05)       # sphere, head on
    model = b.finalize(requires_grad=False)
    sim = tgs.Simulator(model, dt=1e-4, steps=6000)
    sim.run()
    q, qd = sim.state.particle_q.to_numpy(), sim.state.particle_qd.to_numpy()
    assert qd[-1, 0, 0] == pytest.approx(-2.0, rel=1e-3), "elastic wall: the normal velocity reverses"
    assert qd[-1, 0, 2] == pytest.approx(0.3, rel=1e-3), "frictionless: the tangential velocity stays"
    assert q[:, 0, 0].max() < 1.0 - 0.05 + 0.01, "the wall stops it within its penalty depth"
    assert -2.0 < qd[-1, 1, 2] < -1.0, "bounces back off the sphere, losing energy to kd"
    assert np.all(np.abs(qd[-1, 1, :2]) < 1e-6), "head on: straight back"


# -- bad inputs ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("kwargs, words", [
    (dict(kind="cone"), "kind"),
    (dict(kind=3), "kind"),
    (dict(kind="sphere", size=-0.1), "size"),
    (dict(kind="sphere"), "size"),
    (dict(kind="box", size=(0.1, 0.2)), "size"),
    (dict(kind="capsule", size=(0.1, float("nan"))), "size"),
    (dict(kind="plane", size=1.0), "size"),
    (dict(kind="mesh"), "mesh"),
    (dict(kind="sphere", size=0.1, mesh=meshes.box_surface()), "mesh"),
    (dict(kind="mesh", mesh=meshes.box_surface(), resolution=2), "resolution"),
    (dict(kind="plane", rotation=(0.0, 0.0, 0.0, 2.0)), "rotation"),
    (dict(kind="plane", rotation=(0.0, 0.0, 1.0)), "rotation"),
    (dict(kind="plane", position=(0.0, float("nan"), 0.0)), "position"),
    (dict(kind="plane", ke=0.0), "ke"),
    (dict(kind="plane", kd=-1.0), "kd"),
    (dict(kind="plane", kf=float("inf")), "kf"),
    (dict(kind="plane", mu=-0.1), "mu"),
    (dict(kind="plane", damping="soft"), "damping"),
    (dict(kind="plane", friction_velocity=0.1), "friction_velocity"),
])
def test_bad_collider_inputs(kwargs, words):
    b = tgs.SceneBuilder()
    with pytest.raises((ValueError, TypeError), match=words):
        b.add_collider(**kwargs)


def test_model_set_checks_collider_values():
    b = tgs.SceneBuilder()
    b.add_collider("sphere", 0.3)
    b.add_particle((0.0, 1.0, 0.0))
    model = b.finalize(requires_grad=False)
    with pytest.raises(ValueError, match="collider_pose values: collider 0: the quaternion"):
        model.set("collider_pose", [[0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]])
    with pytest.raises(ValueError, match="collider_mu values"):
        model.set("collider_mu", [-0.2])
    model.set("collider_pose", [[0.0, 0.1, 0.0, 0.0, 0.0, 0.0, 2.0]])       # any length: normalised in the kernel


def test_quaternion_helpers():
    q = tgs.quat_from_axis_angle((0, 0, 2.0), np.radians(30))
    np.testing.assert_allclose(quat_to_matrix_np(q)[:, 1], [-0.5, np.cos(np.radians(30)), 0], atol=1e-15)
    for n in [(1, 0, 0), (0, -1, 0), (0, 1, 0), (0.3, -0.2, 0.9)]:
        q = tgs.quat_from_normal(n)
        assert np.linalg.norm(q) == pytest.approx(1.0)
        np.testing.assert_allclose(quat_to_matrix_np(q)[:, 1], np.array(n) / np.linalg.norm(n), atol=1e-12)
    with pytest.raises(ValueError, match="normal"):
        tgs.quat_from_normal((0, 0, 0))
    with pytest.raises(ValueError, match="axis"):
        tgs.quat_from_axis_angle((0, 0), 1.0)


def test_interpenetrating_starts_are_named_errors():
    b = tgs.SceneBuilder()
    b.add_collider("box", (0.5, 0.2, 0.5), position=(0.0, 0.0, 0.0))
    b.add_collider("sphere", 0.3, position=(3.0, 0.0, 0.0))
    b.add_collider("plane", position=(0.0, -1.0, 0.0))
    b.add_particle((3.0, 0.1, 0.0), radius=0.01)                                        # 0.21 m inside the sphere
    v, f = meshes.box_surface((0.2, 0.2, 0.2))
    b.add_rigid_body(v, f, position=(0.0, 0.25, 0.0))                                   # 0.05 m into the box top
    tv, tt = meshes.tet_box(1, 1, 1, size=(0.2, 0.2, 0.2), origin=(5.0, -1.05, 0.0))    # 0.05 m below the plane (+ radius 0.01)
    b.add_soft_mesh(tv, tt)
    with pytest.raises(ValueError) as err:
        b.finalize()
    text = str(err.value)
    assert "particle 0 starts 0.21 m inside collider 1 (sphere)" in text
    assert "rigid body 0 starts 0.05 m inside collider 0 (box)" in text
    assert "soft mesh 0 starts 0.06 m inside collider 2 (plane)" in text


def test_resting_contact_is_not_an_error():
    b = tgs.SceneBuilder()
    b.add_collider("box", (0.5, 0.2, 0.5))
    b.add_particle((0.0, 0.2 + 0.01 - 0.002, 0.0), radius=0.01)                     # 2 mm: a resting sink
    b.finalize(requires_grad=False)


def test_stability_preflight_counts_collider_stiffness():
    b = tgs.SceneBuilder()
    b.add_collider("sphere", 0.3, ke=1e7)
    b.add_particle((0.0, 0.5, 0.0), mass=0.01)
    model = b.finalize(requires_grad=False)
    report = tgs.stability_report(model, 1e-3)
    assert not report.ok and "ParticleColliderContact[collider 0]" in report.message()
    with pytest.raises(tgs.StabilityError, match="ParticleColliderContact"):
        tgs.Simulator(model, dt=1e-3, steps=2, strict=True).run()


# -- the demo ------------------------------------------------------------------------------------------
@pytest.mark.slow
def test_ramp_box_demo_quick(tmp_path):
    """demos/ramp_box.py --quick --headless: the box slides at g (sin - mu cos), reaches the ground, and the fit
    finds the ramp's mu from the rendered frames."""
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path
    root = Path(__file__).resolve().parents[1]
    env = dict(os.environ, PYTHONPATH=str(root))
    out = subprocess.run([sys.executable, str(root / "demos" / "ramp_box.py"), "--quick", "--headless", "--out",
                          str(tmp_path)], capture_output=True, text=True, env=env, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["steps"] == 1200 and result["accel_rel_err"] < 0.01
    assert result["final_x"] > 0, "reaches the ground"
    fit = result["fit"]          # the ramp's mu from the box's silhouettes, from 1.6 x the truth
    assert fit["guess"] == pytest.approx(1.6 * fit["truth"]) and fit["rel_err"] < 0.01
    assert Path(result["gif"]).is_file()


# -- scene files -----------------------------------------------------------------------------------------
TABLE = {"kind": "box", "half_extents": [0.5, 0.05, 0.5], "position": [0.0, 0.3, 0.0], "mu": 0.3}


def _table_scene(tmp_path, **changes):
    from test_scene_file import BOX as FILE_BOX, _scene
    sink = 9.8 / (4 * 1e4)
    box = dict(FILE_BOX, position=[0.0, 0.35 + 0.05 - 1.1 * sink, 0.0], velocity=[1.0, -0.05, 0.2])
    changes = {"objects": {"box": box}, "colliders": {"table": dict(TABLE)}, "forces": [],
               "camera.target": [0.0, 0.35, 0.0], "camera.eye": [0.0, 1.0, 1.5], **changes}
    return _scene(tmp_path, **changes)


def _scene_error(tmp_path, **changes):
    from tigradsim.scenes.scene_file import SceneError, parse_scene
    with pytest.raises(SceneError) as info:
        parse_scene(_table_scene(tmp_path, **changes), str(tmp_path / "scene.toml"))
    return str(info.value)


def test_scene_file_colliders_parse(tmp_path):
    from tigradsim.scenes.scene_colliders import collider_arguments
    from tigradsim.scenes.scene_file import Z_UP_TO_Y_UP, parse_scene
    ramp = {"kind": "plane", "normal": [-0.3, 1.0, 0.0], "position": [3.0, 0.0, 0.0], "contact_law": {"friction": "huber"}}
    data = _table_scene(tmp_path, **{"colliders.ramp": ramp, "unknowns": {"table.height": {"init": 0.3},
                                                                           "ramp.mu": {"init": 0.4}}})
    spec = parse_scene(data, str(tmp_path / "scene.toml"))
    assert list(spec.colliders) == ["table", "ramp"]
    table, ramp = spec.colliders["table"], spec.colliders["ramp"]
    assert table.contact == dict(ke=1e4, kd=10.0, kf=10.0, mu=0.3), "ke, kd, kf from [ground], its own mu"
    assert ramp.law == {"friction": "huber"}
    args = collider_arguments(ramp, spec.axes)
    np.testing.assert_allclose(quat_to_matrix_np(args["rotation"])[:, 1], np.array([-0.3, 1.0, 0.0]) / np.hypot(0.3, 1),
                               atol=1e-12)
    # a z-up file: the box's half extents follow the axes (its height is the file's z)
    zup = dict(TABLE, half_extents=[0.5, 0.4, 0.05], position=[0.0, 0.0, 0.3])
    args = collider_arguments(dataclass_replace(table, size=np.array(zup["half_extents"]),
                                                position=np.array(zup["position"])), Z_UP_TO_Y_UP)
    np.testing.assert_allclose(args["size"], [0.5, 0.05, 0.4])
    np.testing.assert_allclose(args["position"], [0.0, 0.3, 0.0])


def dataclass_replace(obj, **kw):
    import dataclasses
    return dataclasses.replace(obj, **kw)


def test_scene_file_collider_errors(tmp_path):
    assert "[colliders.table] kind: expected one of" in _scene_error(tmp_path, **{"colliders.table.kind": "cone"})
    assert "[colliders.table] radius: unknown key" in _scene_error(tmp_path, **{"colliders.table.radius": 1.0})
    assert "[colliders.table] half_extents: expected" in _scene_error(tmp_path, **{"colliders.table.half_extents": [1, -1, 1]})
    assert "[colliders.table] ke: expected a positive number" in _scene_error(tmp_path, **{"colliders.table.ke": 0.0})
    assert "[colliders.table] rotation: expected a unit quaternion" in _scene_error(
        tmp_path, **{"colliders.table.rotation": [0, 0, 0, 2]})
    assert "the name 'box' is taken by an object" in _scene_error(tmp_path, **{"colliders.box": dict(TABLE)})
    assert "'table' has no parameter 'mass'" in _scene_error(tmp_path, unknowns={"table.mass": {"init": 1.0}})
    # a table 0.4 m thick whose top is 0.1 m above the box's bottom corners
    msg = _scene_error(tmp_path, **{"colliders.table.position": [0.0, 0.25, 0.0], "colliders.table.half_extents":
                                    [0.5, 0.2, 0.5]})
    assert msg.startswith("scene.toml: [objects.box] position: starts 0.1 m") and "[colliders.table]" in msg


@pytest.mark.slow
def test_scene_file_collider_unknowns_gradient(tmp_path, f64):
    """A box sliding on a table collider: the table's mu and height as scene unknowns are written where they
    belong and their gradients match central differences."""
    from tigradsim.scenes.scene_build import Scene, load_scene_footage
    from tigradsim.scenes.scene_file import parse_scene
    data = _table_scene(tmp_path, unknowns={"table.mu": {"init": 0.35}, "table.height": {"init": 0.3}},
                        **{"simulation.duration": 0.12, "simulation.substeps": 40})
    spec = parse_scene(data, str(tmp_path / "scene.toml"))
    scene = Scene(spec, load_scene_footage(spec))
    m = scene.model
    assert scene.colliders == {"table": 0}
    assert np.isclose(m.get("collider_mu")[0], 0.35) and np.isclose(m.get("collider_pose")[0, 1], 0.3)
    rec = tgs.BodyRecorder(scene.sim, every=40)
    loss = tgs.MSELoss(rec.positions, np.zeros((rec.frames, rec.count, 3)) + [0.1, 0.2, 0.05])

    def run():
        loss.value[None] = 0.0
        scene.sim.run()
        loss._accumulate()

    run()
    assert scene.sim.state.body_q.to_numpy()[-1, 0, 0] > 0.05, "slides on the table"
    # eps 1e-7: the capped damping's branch (min(kd |v_n|, ke |c|)) switches at some step every ~1e-6 m of
    # height here (the box's corners oscillate about their rest sink), kinks that a 1e-5 step straddles
    # (measured: 1e-2 off at 1e-5, 1e-4 at 1e-6, 5e-11 at 1e-7)
    for p in scene.params:
        report = tgs.check_param_gradient(run, loss.value, p, n_dirs=1, eps=1e-7, rtol=1e-6)
        assert report.ok and abs(report.analytic[0]) > 1e-6, (p.name, str(report))


def test_batched_copies_share_colliders_added_before():
    b = tgs.SceneBuilder()
    b.add_collider("plane", position=(0.0, -0.5, 0.0))
    batch = tgs.batched(lambda bb, k: bb.add_particle((0.0, 0.1 * k, 0.0)), 2, builder=b, requires_grad=False)
    assert batch.model.collider_count == 1

    def per_copy(bb, k):
        bb.add_collider("sphere", 0.1, position=(5.0 + k, 0.0, 0.0))
        return bb.add_particle((0.0, 0.1 * k, 0.0))

    with pytest.raises(ValueError, match="copy 0 added a collider"):
        tgs.batched(per_copy, 2)


def test_soft_mesh_and_cloth_rest_on_colliders(f64):
    """FEM and cloth vertices are particles: a soft cube lands on a table (a box collider) and stays on it; a
    cloth dropped on a sphere collider drapes over it (its middle rests on the top, its corners hang lower)."""
    b = tgs.SceneBuilder()
    b.add_collider("box", (0.3, 0.05, 0.3), position=(0.0, 0.3, 0.0), ke=500.0, kd=0.5, kf=0.3, mu=0.5)
    b.add_collider("sphere", 0.2, position=(2.0, 0.3, 0.0), ke=500.0, kd=0.5, kf=0.3, mu=0.5)
    tv, tt = meshes.tet_box(2, 2, 2, size=(0.2, 0.2, 0.2), origin=(-0.1, 0.38, -0.1))
    b.add_soft_mesh(tv, tt, params={"mu": 2e3, "lam": 2e3}, density=100.0, damping=5.0, radius=0.01)
    cv, ct = meshes.cloth_grid(8, 8, cell=0.075, origin=(2.0 - 0.3, 0.56, -0.3))
    b.add_cloth(cv, ct, params={"mu": 50.0, "lam": 50.0}, density=0.5, damping=0.05, bending_stiffness=1e-4)
    model = b.finalize(requires_grad=False)
    sim = tgs.Simulator(model, dt=5e-4, steps=1600, strict=True)
    sim.run()
    q = sim.state.particle_q.to_numpy()[-1]
    cube, cloth = q[:len(tv)], q[len(tv):]
    top = 0.35
    # its 9 bottom vertices carry 0.8 kg on ke = 500 N/m each: sinks of millimetres (most under the middle one)
    assert top + 0.01 - 0.008 < cube[:, 1].min() < top + 0.01, "rests on the table"
    assert np.all(np.abs(cube[:, [0, 2]]).max() < 0.3), "on it"
    d = np.linalg.norm(cloth - [2.0, 0.3, 0.0], axis=1)
    assert d.min() > 0.2 + 0.005 - 0.004, "does not pass through the sphere"
    middle = cloth[np.argmin(np.linalg.norm(cv[:, [0, 2]] - [2.0, 0.0], axis=1))]
    corners = cloth[[0, 8, 72, 80]]
    assert middle[1] == pytest.approx(0.5 + 0.005, abs=0.01) and np.all(corners[:, 1] < middle[1] - 0.1), "drapes"


def test_scene_file_takes_every_friction_law(tmp_path):
    """contact_law's friction choices are the library's (capped, huber, warp); friction_velocity goes with huber or
    warp only (named in the error)."""
    from tigradsim.scenes.scene_file import parse_scene
    ramp = {"kind": "plane", "normal": [-0.3, 1.0, 0.0], "position": [3.0, 0.0, 0.0],
            "contact_law": {"damping": "uncapped", "friction": "warp", "friction_velocity": 0.02}}
    spec = parse_scene(_table_scene(tmp_path, **{"colliders.ramp": ramp}), str(tmp_path / "scene.toml"))
    assert spec.colliders["ramp"].law == {"damping": "uncapped", "friction": "warp", "friction_velocity": 0.02}
    bad = dict(ramp, contact_law={"friction": "capped", "friction_velocity": 0.02})
    assert 'only used with friction = "huber" or "warp"' in _scene_error(tmp_path, **{"colliders.ramp": bad})
