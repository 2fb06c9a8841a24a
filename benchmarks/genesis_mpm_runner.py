"""Genesis 1.4.5's MPM on one scene, run inside the Genesis venv (never imports tigradsim): the other half of
benchmarks/vs_genesis.py, which writes the scene as JSON, runs

    /opt/venvs/genesis/bin/python benchmarks/genesis_mpm_runner.py SPEC.json OUT.npz

and reads OUT.npz: `frames` (F, N, 3) particle positions [m] at steps 0, every, 2 every, ... (trajectory mode),
`seconds_forward` / `seconds_backward` (timing mode: the wall time of the rollout and of scene.backward of the
mean height; `grad_v0z_sum`, its gradient to the initial z velocities summed, = the elapsed time in free fall), and
`rss_after_import_mb`, `peak_rss_mb` (this process's resident memory after importing genesis + torch, and its
peak).  The venv (CPU torch, Genesis and its Taichi fork `quadrants`):

    python3 -m venv /opt/venvs/genesis
    /opt/venvs/genesis/bin/pip install -r benchmarks/requirements-genesis.txt

SPEC keys: material ("elastic" | "von_mises" | "sand" | "newtonian"), E [Pa], nu (not newtonian),
viscosity [Pa s], bulk_modulus [Pa] (newtonian: MPM.Liquid(viscous=True, mu = viscosity / dt, lam = bulk_modulus -
2 viscosity / (3 dt)), as benchmarks/genesis_pacnerf_runner.py makes the Newtonian footage), rho [kg/m^3],
yield_stress [Pa] (von_mises),
friction_angle [deg] (sand), grid_density [1/m] (1 / dx), lower_bound, upper_bound (Genesis's domain [m]: its
walls stand 3 cells inside), box_center, box_size [m] (the regular sampler's box: the same particle count as
the positions), particle_size [m] (particle volume = particle_size^3), positions (path of an .npy (N, 3) [m]
set after build: the same particles in the same order as tigradsim's), velocity (3,) [m/s], gravity (3,),
dt [s] (one MPM substep), steps, every, precision ("32" | "64"), mode ("trajectory" | "timing"), backward (bool),
substeps_local (with backward: substeps kept in memory between checkpoints; default all).
"""
import json
import os
import resource
import sys
import time

# this folder holds benchmarks/coverage.py, which would shadow the `coverage` package numba (a Genesis
# dependency) imports: keep the script's own folder off the path
sys.path = [p for p in sys.path if os.path.abspath(p or ".") != os.path.dirname(os.path.abspath(__file__))]

import numpy as np  # noqa: E402


def rss_mb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def material(gs, spec):
    if spec["material"] == "newtonian":
        # Genesis's viscous liquid, its (mu, lam) from (viscosity, bulk modulus) as the PAC-NeRF footage takes them
        # (genesis_pacnerf_runner.py): mu_G = eta / dt, lam_G = K - 2 eta / (3 dt)
        eta, K, dt = spec["viscosity"], spec["bulk_modulus"], spec["dt"]
        return gs.materials.MPM.Liquid(viscous=True, mu=eta / dt, lam=K - 2.0 * eta / (3.0 * dt), rho=spec["rho"],
                                       sampler="regular")
    common = dict(E=spec["E"], nu=spec["nu"], rho=spec["rho"], sampler="regular")
    if spec["material"] == "elastic":
        return gs.materials.MPM.Elastic(model="corotation", **common)
    if spec["material"] == "von_mises":
        return gs.materials.MPM.ElastoPlastic(use_von_mises=True, von_mises_yield_stress=spec["yield_stress"], **common)
    if spec["material"] == "sand":
        return gs.materials.MPM.Sand(friction_angle=spec["friction_angle"], **common)
    raise ValueError(f"material: expected elastic, von_mises, sand or newtonian, got {spec['material']!r}")


def main(spec_path, out_path):
    import torch
    import genesis as gs
    with open(spec_path) as fh:
        spec = json.load(fh)
    torch.set_num_threads(spec.get("threads", 2))
    gs.init(backend=gs.cpu, precision=spec["precision"], logging_level="warning")
    rss0 = rss_mb()
    grad = bool(spec.get("backward", False))
    steps = int(spec["steps"])
    sim_opts = dict(dt=spec["dt"], substeps=1, gravity=tuple(spec["gravity"]), requires_grad=grad)
    if grad:
        # substeps kept in memory; beyond them Genesis checkpoints the particle state (MPMSolver.save_ckpt) and
        # recomputes in the backward pass, as tigradsim does with checkpoint_every
        sim_opts["substeps_local"] = int(spec.get("substeps_local", steps))
    scene = gs.Scene(
        sim_options=gs.options.SimOptions(**sim_opts),
        mpm_options=gs.options.MPMOptions(lower_bound=tuple(spec["lower_bound"]),
                                          upper_bound=tuple(spec["upper_bound"]),
                                          grid_density=spec["grid_density"], particle_size=spec["particle_size"]),
        show_viewer=False)
    entity = scene.add_entity(material=material(gs, spec),
                              morph=gs.morphs.Box(pos=tuple(spec["box_center"]), size=tuple(spec["box_size"])))
    scene.build()
    x0 = np.load(spec["positions"])
    if entity.n_particles != len(x0):
        raise RuntimeError(f"Genesis sampled {entity.n_particles} particles, tigradsim {len(x0)}: the boxes differ")
    dtype = torch.float64 if spec["precision"] == "64" else torch.float32
    entity.set_particles_pos(torch.tensor(x0, dtype=dtype))
    entity.set_particles_vel(torch.tensor(np.tile(spec["velocity"], (len(x0), 1)), dtype=dtype))
    out = {"rss_after_import_mb": rss0, "particles": len(x0),
           "grid_nodes": np.array(scene.sim.mpm_solver._grid_res)}
    if spec["mode"] == "trajectory":
        every = int(spec["every"])
        frames = [entity.get_particles_pos().cpu().numpy().copy()]
        for k in range(1, steps + 1):
            scene.step()
            if k % every == 0:
                frames.append(entity.get_particles_pos().cpu().numpy().copy())
        out["frames"] = np.array(frames)
    else:                           # timing: the first round compiles, the second is timed
        for round_ in range(2):
            if round_:
                scene.reset()
                entity.set_particles_pos(torch.tensor(x0, dtype=dtype))
            # with requires_grad the initial velocity goes in as a target the gradient reaches (set_velocity)
            v0 = torch.tensor(np.tile(spec["velocity"], (len(x0), 1)), dtype=dtype, requires_grad=grad)
            if grad:
                entity.set_velocity(v0)
            else:
                entity.set_particles_vel(v0)
            t0 = time.perf_counter()
            for _ in range(steps):
                scene.step()
            out["seconds_forward"] = time.perf_counter() - t0
            if grad:
                loss = entity.get_state().pos[..., 2].mean()
                t0 = time.perf_counter()
                scene.backward(loss)
                out["seconds_backward"] = time.perf_counter() - t0
                # d mean(z) / d v0_z summed over the particles: the elapsed time while the cube falls freely
                out["grad_v0z_sum"] = float(v0.grad[:, 2].sum())
    out["peak_rss_mb"] = rss_mb()
    np.savez(out_path, **out)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
