"""A footage soft cube simulated by Newton 1.8 (SolverSemiImplicit, tet FEM), run in Newton's own venv.

Like benchmarks/newton_sim.py (the boxes) it runs in Newton's venv as a subprocess
(engine_sims._simulate_newton_soft starts it) and imports nothing of this repository: numbers in
(a JSON file), numbers out (an npz file).

    python3 -m venv /opt/venvs/newton
    /opt/venvs/newton/bin/pip install -r benchmarks/requirements-newton.txt
    /opt/venvs/newton/bin/python benchmarks/newton_soft_sim.py IN.json OUT.npz

IN.json: {"vertices": (V, 3) rest positions [m] centred at the origin, "tets": (T, 4) 0-based,
"x0": (V, 3) initial positions, "v0": (V, 3) initial velocities [m/s], "density" [kg/m^3],
"k_mu", "k_lambda" [Pa], "k_damp" [Pa s], "ground": {"ke" [N/m], "kd" [N s/m], "kf" [N s/m], "mu"},
"contact_gap" [m] (the collision pipeline's soft-contact detection distance), "frames", "fps",
"substeps" (steps per frame)}.  Y is up, gravity (0, -9.8, 0), the ground plane y = 0.

The cube is `ModelBuilder.add_soft_mesh` (masses lumped from the tets by Newton: each tet gives a
quarter of density x its volume to each corner), no surface triangles' stiffness (tri_ke = tri_ka = 0,
Newton's default for add_soft_mesh), stepped by `SolverSemiImplicit` with `CollisionPipeline`'s
particle-shape contacts against the ground plane (`eval_particle_body_contact`).

OUT.npz: "positions" (frames, V, 3) node positions at the frame times, "masses" (V,) Newton's particle
masses, "versions" (newton, warp) as a string array.
"""
import sys

import numpy as np


def simulate(spec):
    import warp as wp
    import newton
    wp.config.quiet = True
    rest = np.asarray(spec["vertices"], dtype=np.float64)
    tets = np.asarray(spec["tets"], dtype=np.int64)
    g = spec["ground"]
    builder = newton.ModelBuilder(up_axis=newton.Axis.Y, gravity=(0.0, -9.8, 0.0))
    builder.add_soft_mesh(pos=wp.vec3(0.0, 0.0, 0.0), rot=wp.quat_identity(), scale=1.0, vel=wp.vec3(0.0, 0.0, 0.0),
                          vertices=[wp.vec3(*p) for p in rest], indices=tets.reshape(-1).tolist(),
                          density=float(spec["density"]), k_mu=float(spec["k_mu"]), k_lambda=float(spec["k_lambda"]),
                          k_damp=float(spec["k_damp"]), particle_radius=0.0)
    # the particle and the ground material are averaged by Newton's contact kernel: give both the same
    ground = newton.ModelBuilder.ShapeConfig(ke=float(g["ke"]), kd=float(g["kd"]), kf=float(g["kf"]), mu=float(g["mu"]))
    builder.add_ground_plane(cfg=ground)
    model = builder.finalize(device="cpu")
    model.soft_contact_ke, model.soft_contact_kd = float(g["ke"]), float(g["kd"])
    model.soft_contact_kf, model.soft_contact_mu = float(g["kf"]), float(g["mu"])
    solver = newton.solvers.SolverSemiImplicit(model)
    pipeline = newton.CollisionPipeline(model, soft_contact_gap=float(spec["contact_gap"]))
    contacts = pipeline.contacts()
    control = model.control()
    s0, s1 = model.state(), model.state()
    s0.particle_q.assign(np.asarray(spec["x0"], dtype=np.float32))
    s0.particle_qd.assign(np.asarray(spec["v0"], dtype=np.float32))
    dt = 1.0 / (spec["fps"] * spec["substeps"])
    xs = [s0.particle_q.numpy().astype(np.float64)]
    for k in range((spec["frames"] - 1) * spec["substeps"]):
        s0.clear_forces()
        pipeline.collide(s0, contacts)
        solver.step(s0, s1, control, contacts, dt)
        s0, s1 = s1, s0
        if (k + 1) % spec["substeps"] == 0:
            xs.append(s0.particle_q.numpy().astype(np.float64))
    return dict(positions=np.array(xs), masses=model.particle_mass.numpy().astype(np.float64),
                versions=np.array([newton.__version__, wp.config.version]))


if __name__ == "__main__":
    from newton_sim import main     # the same command line (this script's folder is on sys.path)
    main(sys.argv[1:], simulate=simulate, script="newton_soft_sim.py")
