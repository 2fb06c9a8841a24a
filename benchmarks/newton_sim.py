"""A footage box simulated by Newton 1.8 (SolverXPBD), run in Newton's own virtual environment.

Newton 1.8 needs warp-lang >= 1.17, which would replace the warp-lang 1.9.1 that the main environment
keeps (benchmarks/vs_warp.py, engine_sims' Warp clips), so it lives in its own venv and this script
runs there as a subprocess (engine_sims._simulate_newton starts it).  It imports neither tigradsim nor
anything of this repository: numbers in (a JSON file), numbers out (an npz file).

    python3 -m venv /opt/venvs/newton
    /opt/venvs/newton/bin/pip install -r benchmarks/requirements-newton.txt
    /opt/venvs/newton/bin/python benchmarks/newton_sim.py IN.json OUT.npz

IN.json: {"size": [sx, sy, sz] m, "mass": kg, "position": [x, y, z] (y None: rest on the floor at
Newton's own resting height), "quaternion_xyzw", "velocity" (world, m/s), "angular_velocity" (world,
rad/s), "forces": [{"force" (world N), "point" (body coordinates m), "start", "end" s}], "frames",
"fps", "substeps" (steps per frame), "iterations" (XPBD iterations per step), "mu", "restitution",
"relaxation" (rigid_contact_relaxation)}.  Y is up, gravity (0, -9.8, 0), the ground plane y = 0.

OUT.npz: "positions" (frames, 3) centre of mass, "quats" (frames, 4) x y z w, "position0" (3,) the
initial centre (after settling for a resting box), "versions" (newton, warp) as a string array.
Force windows follow tigradsim's rule: step k (time k dt) is loaded when (k + 1/2) dt lies in
[start, end); a force at a body point is the force at the centre of mass plus the torque (R p) x F.
"""
import json
import sys

import numpy as np


def _quat_matrix(q):
    x, y, z, w = np.asarray(q, dtype=np.float64) / np.linalg.norm(q)
    return np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
                     [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
                     [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)]])


def simulate(spec):
    import warp as wp
    import newton
    wp.config.quiet = True
    size = np.asarray(spec["size"], dtype=np.float64)
    m = float(spec["mass"])
    position = list(spec["position"])
    settle = position[1] is None
    if settle:
        position[1] = size[1] / 2
    q0 = [float(v) for v in spec["quaternion_xyzw"]]
    builder = newton.ModelBuilder(up_axis=newton.Axis.Y, gravity=(0.0, -9.8, 0.0))
    cfg = newton.ModelBuilder.ShapeConfig(density=m / float(np.prod(size)), mu=float(spec["mu"]),
                                          restitution=float(spec["restitution"]), mu_torsional=0.0, mu_rolling=0.0)
    body = builder.add_body(xform=wp.transform(wp.vec3(*position), wp.quat(*q0)))
    builder.add_shape_box(body, hx=size[0] / 2, hy=size[1] / 2, hz=size[2] / 2, cfg=cfg)
    ground = newton.ModelBuilder.ShapeConfig(mu=float(spec["mu"]), restitution=float(spec["restitution"]),
                                             mu_torsional=0.0, mu_rolling=0.0)
    builder.add_ground_plane(cfg=ground)
    model = builder.finalize(device="cpu")
    solver = newton.solvers.SolverXPBD(model, iterations=int(spec["iterations"]),
                                       rigid_contact_relaxation=float(spec["relaxation"]),
                                       enable_restitution=float(spec["restitution"]) > 0.0)
    pipeline = newton.CollisionPipeline(model)
    contacts = pipeline.contacts()
    control = model.control()
    s0, s1 = model.state(), model.state()
    dt = 1.0 / (spec["fps"] * spec["substeps"])

    def step(forces_at=None):
        nonlocal s0, s1
        s0.clear_forces()
        if forces_at is not None:
            s0.body_f.assign(np.array([forces_at], dtype=np.float32))
        pipeline.collide(s0, contacts)
        solver.step(s0, s1, control, contacts, dt)
        s0, s1 = s1, s0

    if settle:   # resting: Newton's own resting pose, then start from it at rest
        for _ in range(int(spec["fps"] * spec["substeps"])):
            step()
        q = s0.body_q.numpy()[0].astype(np.float64)
        q[0], q[2] = spec["position"][0], spec["position"][2]
        q[3:7] = q0
        s0.body_q.assign(q[None].astype(np.float32))
        s0.body_qd.zero_()
    else:        # Newton's body_qd: (linear velocity of the centre of mass, angular velocity), both world
        s0.body_qd.assign(np.array([[*spec["velocity"], *spec["angular_velocity"]]], dtype=np.float32))
    poses = [s0.body_q.numpy()[0].astype(np.float64)]
    position0 = poses[0][:3].copy()
    for k in range((spec["frames"] - 1) * spec["substeps"]):
        F, T = np.zeros(3), np.zeros(3)
        for f in spec["forces"]:
            if f["start"] <= (k + 0.5) * dt < f["end"]:
                R = _quat_matrix(s0.body_q.numpy()[0][3:7])
                F += np.asarray(f["force"], dtype=np.float64)
                T += np.cross(R @ np.asarray(f["point"], dtype=np.float64), f["force"])
        step([*F, *T] if spec["forces"] else None)
        if (k + 1) % spec["substeps"] == 0:
            poses.append(s0.body_q.numpy()[0].astype(np.float64))
    poses = np.array(poses)
    quats = poses[:, 3:7] / np.linalg.norm(poses[:, 3:7], axis=1, keepdims=True)
    return dict(positions=poses[:, :3], quats=quats, position0=position0,
                versions=np.array([newton.__version__, wp.config.version]))


def main(argv, simulate=simulate, script="newton_sim.py"):
    """The runners' command line, `script IN.json OUT.npz`: simulate(spec from IN.json) saved to OUT.npz
    (newton_soft_sim.py uses it with its own simulate)."""
    if len(argv) != 2:
        raise SystemExit(f"usage: {script} IN.json OUT.npz")
    with open(argv[0]) as fh:
        spec = json.load(fh)
    np.savez(argv[1], **simulate(spec))


if __name__ == "__main__":
    main(sys.argv[1:])
