"""tigradsim's MPM against Genesis 1.4.5's (an independent MLS-MPM on Taichi's fork `quadrants`), CPU, same scenes.

    python benchmarks/vs_genesis.py [--scenes elastic,von_mises,sand,newtonian] [--sizes small,medium]
                                    [--timing pacnerf] [--write-reference tests/data/mpm_genesis_small.npz]
    python benchmarks/vs_genesis.py --footage benchmarks/footage/pacnerf/newtonian \
                                    [--at LABEL:viscosity=V,bulk_modulus=V]

Genesis runs in its own venv (it needs torch and quadrants; the main environment's taichi / numpy stay as
they are), as a subprocess (`genesis_mpm_runner.py`) that writes npz.  Recreate the venv with

    python3 -m venv /opt/venvs/genesis
    /opt/venvs/genesis/bin/pip install -r benchmarks/requirements-genesis.txt

(or point --genesis-python at another interpreter that has genesis-world 1.4.5).

Scenes (z up, gravity (0, 0, -9.8) m/s^2, the unit cube [0, 1]^3 walled on all six faces, its floor z = 0):
a cube of 0.25 m, 8 particles per cell on the cell-centred lattice (the same positions, in the same order, are
given to both engines), density 1000 kg/m^3, dropped from z = 0.25 m with velocity (0.3, 0, -0.5) m/s:
  elastic    fixed-corotated, E = 2e4 Pa, nu = 0.3                (Genesis MPM.Elastic(model="corotation"))
  von_mises  plasticine, E = 2e5 Pa, nu = 0.3, yield stress 3e3 Pa (Genesis MPM.ElastoPlastic(use_von_mises=True))
  sand       Drucker-Prager, E = 2e5 Pa, nu = 0.3, friction 30 deg (Genesis MPM.Sand)
  newtonian  viscosity 25 Pa s, bulk modulus 1e5 Pa (the PAC-NeRF clip's truth; Genesis MPM.Liquid(viscous=True)
             with mu = eta / dt, lam = K - 2 eta / (3 dt), as the clip was made)
--footage: the PAC-NeRF Newtonian clip's motion made again by Genesis (its spec, particles and floor plane of
friction 0.5, float64) and run by tigradsim from the same particles (`footage_replica`).
Sizes: small (16^3 cells, 512 particles, the stored reference of tests/test_mpm_vs_genesis.py), medium (32^3,
4,096 particles); dt = 5e-4 s, 1,000 steps (0.5 s: the fall, the impact at ~0.19 s and what follows).
Timing: pacnerf (64^3 cells, 32,768 particles, PAC-NeRF's order of size), elastic, float32, 20 steps.

What is set equal (read from Genesis 1.4.5's source, genesis/engine/solvers/mpm_solver.py, couplers/
legacy_coupler.py, boundaries/boundaries.py, materials/MPM/*.py):
  * MLS-MPM with APIC, quadratic B-splines on a 27-node stencil, nodes at multiples of dx = 1 / grid_density;
    tigradsim's domain [0, 1]^3 at resolution R has its nodes there too (Genesis: grid_density = R, bounds
    [-3 dx, 1 + 3 dx]: its walls stand 3 cells inside its bounds, i.e. on the faces of [0, 1]^3).
  * The same step: F_trial = (I + dt C_n) F_n, the return mapping, the Kirchhoff stress of the projected F,
    P2G with A = m C - dt V (4 / dx^2) tau, grid velocity = momentum / mass + dt g, the walls, G2P.  Genesis
    updates F at the start of a step with C_n, tigradsim at the end with C_(n+1); with C_0 = 0 the F that
    enters the stress of every step is the same.
  * Particle mass rho V_p, V_p = (dx / 2)^3 (Genesis multiplies every V_p by 1e3 and divides it out where a
    mass leaves the solver; inside MPM the factor cancels).
  * Walls: Genesis zeroes a node's velocity component into a wall (restitution 0) and keeps the tangential
    part, i.e. a frictionless slip wall: tigradsim's walls with mu = 0.
  * Laws: fixed-corotated tau = 2 mu (F - U V^T) F^T + lam J (J - 1) I in both.  Drucker-Prager: Hencky-strain
    StVK stress and Klar et al.'s projection with alpha = sqrt(2/3) 2 sin(phi) / (3 - sin(phi)), in both.
    Von Mises: the same projection of the Hencky strain's deviator onto the radius yield / (2 mu).
    Newtonian: Genesis's viscous liquid resets F to J^(1/3) I and takes the fixed-corotated stress of the trial F;
    genesis_liquid (genesis_laws.py) is that law in tigradsim, mpm_newtonian (K J (J - 1) I + 2 eta J dev sym C)
    equals it to first order in dt |C| and J - 1.
  * The floor of --footage: Genesis's rigid plane y = 0 through its legacy coupler (influence 1 at the nodes with
    y <= 0, none above: coup_softness 2 mm < dx) removes a node's approaching normal velocity and takes
    coup_friction times it from the tangential one, as tigradsim's wall with mu does at the same nodes.
What differs (each engine defines it so; nothing here changes either):
  1. Genesis also clamps each particle into [0, 1]^3 after advection and zeroes its outward velocity;
     tigradsim's walls act on the grid only, so a particle may rest up to a fraction of a cell past a wall.
     In these scenes it never acts (no particle reaches a wall: the grid's walls stop them a little before).
  2. Genesis's von Mises plasticine (ElastoPlastic) takes the fixed-corotated stress of the projected F for its
     elastic part; tigradsim's mpm_von_mises takes Hencky StVK (PAC-NeRF's).  They agree to first order in the
     strain, which the yield stress bounds (yield / 2 mu = 0.02 here).  Genesis floors sigma at 0.05 in its
     von Mises mapping, tigradsim at 1e-4.
  3. Genesis's Sand carries a volume correction Jp (taichi_elements' form of Tampubolon et al. 2017): the
     log-volume a particle gains in tension is added to the next step's trace; tigradsim's mpm_drucker_prager
     has none (its `plastic` only records it).  Sand that separates and re-compresses therefore differs.
  4. Genesis skips nodes of mass <= 1e-15 (gs.EPS); tigradsim those of mass 0.  Genesis's SVD is quadrants'
     qd.svd, tigradsim's its own differentiable svd3 / polar rotation: the same R = U V^T where det F > 0.
Gradients: Genesis with SimOptions(requires_grad=True) keeps `substeps_local` substeps in memory (particles and grid
per substep) and checkpoints the particle state between (MPMSolver.save_ckpt / load_ckpt); tigradsim keeps
checkpoint_every + 1 step slots and the segment starts.  The timing sets both to 10.

Measured 2026-12-06 on the 2-vCPU VM (float64, worst per-particle RMS distance over the 0.5 s, small / medium):
elastic 8.4e-11 / 2.9e-10 m; von Mises with Genesis's law (genesis_laws.py) 1.4e-10 / 1.6e-9 m, with
tigradsim's mpm_von_mises 1.9e-3 / 2.1e-3 m; sand with Genesis's law 3.3e-11 / 5.8e-11 m, with tigradsim's
mpm_drucker_prager 4.1e-3 / 7.5e-3 m; newtonian with Genesis's law (genesis_liquid) 3.1e-10 / 2.0e-9 m, with
tigradsim's mpm_newtonian 4.1e-4 / 7.5e-4 m.  --footage (2,197 particles, 1,300 steps): genesis_liquid 9e-8 m,
mpm_newtonian at the truth 2.5e-4 m, at the fits' estimates 1.1-1.3e-2 m.
Timing (pacnerf, f32, 2 threads, best of 2, shared machine, load 8-11):
tigradsim 126 ms/step forward, 520 ms/step forward + backward, peak RSS 529 MB; Genesis 80 ms forward (817 MB),
76 / 339 ms with requires_grad and substeps_local = 10 (1,281 MB).  Details: benchmarks/RESULTS.md.

Output: per scene and size, the centroid distance, the largest bounding-box difference and the per-particle
RMS distance [m] between the two trajectories at a few times and at their worst; then the timing rows, each
engine in its own process (its own peak RSS).  Measured numbers: benchmarks/RESULTS.md ("MPM against Genesis").
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
RUNNER = os.path.join(HERE, "genesis_mpm_runner.py")
DEFAULT_GENESIS_PYTHON = "/opt/venvs/genesis/bin/python"

# scene -> (tigradsim's material, its parameters, the same law as Genesis's as a tigradsim user material
# (genesis_laws.py) where tigradsim's own differs)
MATERIALS = {
    "elastic": ("mpm_fixed_corotated", {"E": 2e4, "nu": 0.3}),
    "von_mises": ("mpm_von_mises", {"E": 2e5, "nu": 0.3, "yield_stress": 3e3}),
    "sand": ("mpm_drucker_prager", {"E": 2e5, "nu": 0.3, "friction_angle": 30.0}),
    # the PAC-NeRF Newtonian clip's truth (benchmarks/footage/pacnerf/newtonian)
    "newtonian": ("mpm_newtonian", {"viscosity": 25.0, "bulk_modulus": 1e5}),
}
GENESIS_LAWS = {"von_mises": "genesis_von_mises", "sand": "genesis_sand", "newtonian": "genesis_liquid"}
SIZES = {"small": 16, "medium": 32, "pacnerf": 64}          # cells along the unit domain
BOX = ((0.375, 0.375, 0.25), (0.625, 0.625, 0.5))          # [m]
VELOCITY = (0.3, 0.0, -0.5)                                # [m/s]
GRAVITY = (0.0, 0.0, -9.8)
DENSITY = 1000.0
DT, STEPS, EVERY = 5e-4, 1000, 50
CHECKPOINT_EVERY = 10          # timing: tigradsim's checkpoint_every, Genesis's substeps_local


def scene_spec(material, resolution, steps=STEPS, every=EVERY, dt=DT, precision="64"):
    """The scene both engines run, as the JSON the Genesis runner reads (positions added by the caller)."""
    name, params = MATERIALS[material]
    dx = 1.0 / resolution
    lo, hi = np.array(BOX[0]), np.array(BOX[1])
    spec = dict(material=material, tigradsim_material=name, genesis_law=GENESIS_LAWS.get(material), params=params,
                resolution=resolution,
                rho=DENSITY, grid_density=float(resolution),
                lower_bound=[-3 * dx] * 3, upper_bound=[1 + 3 * dx] * 3, box_lower=lo.tolist(), box_upper=hi.tolist(),
                box_center=((lo + hi) / 2).tolist(), box_size=(hi - lo).tolist(), particle_size=dx / 2,
                velocity=list(VELOCITY), gravity=list(GRAVITY), dt=dt, steps=steps, every=every, precision=precision)
    spec.update({k: v for k, v in params.items()
                 if k in ("E", "nu", "yield_stress", "friction_angle", "viscosity", "bulk_modulus")})
    return spec


def law_params(spec, material):
    """The parameters of `material` in the spec's scene: the spec's, and for genesis_liquid the run's substep
    (its trial F is rebuilt with it: genesis_laws.py)."""
    return dict(spec["params"], time_step=spec["dt"]) if material == "genesis_liquid" else dict(spec["params"])


def build_tigradsim(spec, tgs, requires_grad=False, material=None):
    """The spec's scene in tigradsim: (model, object); `material` replaces the spec's tigradsim material."""
    material = material or spec["tigradsim_material"]
    b = tgs.SceneBuilder(gravity=tuple(spec["gravity"]))
    b.add_mpm_grid(lower=(0, 0, 0), upper=(1, 1, 1), resolution=int(spec["resolution"]), mu=0.0)
    obj = b.add_mpm(box=(spec["box_lower"], spec["box_upper"]), material=material,
                    params=law_params(spec, material), density=spec["rho"], velocity=tuple(spec["velocity"]),
                    particles_per_cell=8)
    return b.finalize(requires_grad=requires_grad), obj


def tigradsim_trajectory(spec, positions=None, material=None):
    """Particle positions (F, N, 3) [m] at steps 0, every, ... of the spec's scene (tgs.init done by the caller);
    `positions` (N, 3) replaces the sampled ones (must be the same count); `material` replaces the spec's."""
    import tigradsim as tgs
    import genesis_laws  # noqa: F401  (registers genesis_von_mises, genesis_sand, genesis_liquid)
    model, obj = build_tigradsim(spec, tgs, material=material)
    if positions is not None:
        model.set("mpm_x0", np.asarray(positions, dtype=np.float64))
    return recorded_positions(tgs, model, spec["dt"], int(spec["steps"]), int(spec["every"]))


def recorded_positions(tgs, model, dt, steps, every):
    """Run `model` for `steps` steps of `dt` [s] and return its MPM particles' positions (F, N, 3) [m] at steps
    0, every, 2 every, ... (checkpointed every `every` steps)."""
    import taichi as ti
    sim = tgs.Simulator(model, dt=dt, steps=steps, checkpoint_every=every)
    n = model.mpm_particle_count
    frames = ti.Vector.field(3, float, shape=(steps // every + 1, n))

    @ti.kernel
    def record(state: ti.template(), s: ti.i32, f: ti.i32):
        for i in range(n):
            frames[f, i] = state.mpm_x[s, i]

    sim.observe(lambda state, slot, frame: record(state, slot, frame), every=every)
    sim.run()
    return frames.to_numpy()


def compare(a, b):
    """Per-frame differences of two trajectories (F, N, 3): centroid distance, largest bounding-box corner
    coordinate difference, per-particle RMS distance [m]."""
    centroid = np.linalg.norm(a.mean(axis=1) - b.mean(axis=1), axis=1)
    box = np.maximum(np.abs(a.min(axis=1) - b.min(axis=1)).max(axis=1),
                     np.abs(a.max(axis=1) - b.max(axis=1)).max(axis=1))
    rms = np.sqrt(((a - b) ** 2).sum(axis=2).mean(axis=1))
    return centroid, box, rms


def run_genesis(spec, positions, genesis_python, mode="trajectory", backward=False):
    """Run the spec in Genesis's venv; returns the runner's npz as a dict."""
    with tempfile.TemporaryDirectory() as tmp:
        pos_path, spec_path, out_path = (os.path.join(tmp, n) for n in ("x0.npy", "spec.json", "out.npz"))
        np.save(pos_path, np.asarray(positions, dtype=np.float64))
        with open(spec_path, "w") as fh:
            json.dump(dict(spec, positions=pos_path, mode=mode, backward=backward), fh)
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}     # its own packages only
        proc = subprocess.run([genesis_python, "-I", RUNNER, spec_path, out_path], capture_output=True, text=True,
                              env=env)
        if proc.returncode != 0:
            raise RuntimeError(f"Genesis runner failed (exit {proc.returncode}):\n{proc.stdout[-1500:]}\n"
                               f"{proc.stderr[-3000:]}")
        with np.load(out_path) as z:
            return {k: z[k] for k in z.files}


def difference_row(spec, mine, theirs):
    centroid, box, rms = compare(mine, theirs)
    times = np.arange(len(rms)) * spec["every"] * spec["dt"]
    picks = [i for i, t in enumerate(times) if round(t, 6) in (0.1, 0.2, 0.3, 0.4, 0.5)]
    drop = mine[0, :, 2].mean() - mine[:, :, 2].mean(axis=1).min()
    return {"particles": mine.shape[1], "dx_m": 1.0 / spec["resolution"], "fall_of_centroid_m": round(float(drop), 4),
            "lowest_particle_m": float(f"{mine[:, :, 2].min():.3g}"),
            "at_s": [round(float(times[i]), 3) for i in picks],
            "centroid_diff_m": [float(f"{centroid[i]:.3g}") for i in picks],
            "bbox_diff_m": [float(f"{box[i]:.3g}") for i in picks],
            "rms_diff_m": [float(f"{rms[i]:.3g}") for i in picks],
            "max_centroid_diff_m": float(f"{centroid.max():.3g}"), "max_bbox_diff_m": float(f"{box.max():.3g}"),
            "max_rms_diff_m": float(f"{rms.max():.3g}"),
            "before_impact_max_rms_m": float(f"{rms[times <= 0.15].max():.3g}")}


def trajectory_rows(materials, sizes, genesis_python, reference_path=None):
    import tigradsim as tgs
    tgs.init(arch="cpu", precision="f64")
    stored = {}
    for size in sizes:
        for mat in materials:
            spec = scene_spec(mat, SIZES[size])
            mine = tigradsim_trajectory(spec)
            theirs = run_genesis(spec, mine[0], genesis_python)["frames"]
            laws = [spec["tigradsim_material"]] + ([spec["genesis_law"]] if spec["genesis_law"] else [])
            for law in laws:
                ours = mine if law == spec["tigradsim_material"] else tigradsim_trajectory(spec, material=law)
                print(json.dumps(dict(scene=mat, size=size, tigradsim_law=law, **difference_row(spec, ours, theirs))),
                      flush=True)
            if size == "small":
                stored[mat] = dict(spec=spec, x0=mine[0], genesis=theirs)
    if reference_path and stored:
        # the scenes not run this time keep their stored trajectories
        arrays, specs = {}, {}
        if os.path.exists(reference_path):
            with np.load(reference_path) as z:
                arrays = {k: z[k] for k in z.files}
            specs = json.loads(str(arrays["spec_json"]))
        specs.update({m: s["spec"] for m, s in stored.items()})
        arrays["spec_json"] = np.array(json.dumps(specs))
        for mat, s in stored.items():
            arrays[f"{mat}_x0"] = s["x0"]
            arrays[f"{mat}_genesis"] = s["genesis"].astype(np.float32)
        np.savez_compressed(reference_path, **arrays)
        print(f"wrote {reference_path}", flush=True)


def footage_replica(clip, genesis_python, points=(), precision="64"):
    """The PAC-NeRF-protocol Newtonian clip's motion made again (benchmarks/footage/pacnerf/newtonian: truth.json's
    genesis_spec, Genesis's own particles and floor plane) and run by tigradsim from the very same particles
    (particle volume particle_size^3, the clip's 1 m domain at Genesis's grid, Genesis's substep, walls with the
    floor's friction: the puddle stays clear of the side walls), with Genesis's law (genesis_liquid), tigradsim's
    mpm_newtonian at the truth and at `points` ({label: {param: value}}, e.g. a fit's estimate).  Prints one row
    per law: the per-particle RMS and centroid distances to Genesis's trajectory at the 14 footage frames."""
    import tigradsim as tgs
    import genesis_laws  # noqa: F401
    with open(os.path.join(clip, "truth.json")) as fh:
        truth = json.load(fh)
    gspec = dict(truth["engine"]["genesis_spec"], precision=precision, surfaces=False)
    if gspec["law"] != "newtonian":
        sys.exit(f"--footage: {clip} is a {gspec['law']!r} clip; only the newtonian clip is replicated")
    with tempfile.TemporaryDirectory() as tmp:
        spec_path, out_path = os.path.join(tmp, "spec.json"), os.path.join(tmp, "out.npz")
        with open(spec_path, "w") as fh:
            json.dump(gspec, fh)
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        proc = subprocess.run([genesis_python, "-I", os.path.join(HERE, "genesis_pacnerf_runner.py"), spec_path,
                               out_path], capture_output=True, text=True, env=env)
        if proc.returncode != 0:
            raise RuntimeError(f"Genesis runner failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}")
        with np.load(out_path) as z:
            theirs = z["positions"].astype(np.float64)
    tgs.init(arch="cpu", precision="f" + precision)
    dt, every = float(gspec["dt"]), int(gspec["steps_per_frame"])
    steps = every * (int(gspec["frames"]) - 1)
    resolution = int(round(gspec["grid_density"]))
    truth_params = {"viscosity": gspec["viscosity"], "bulk_modulus": gspec["bulk_modulus"]}
    laws = [("genesis_liquid", "truth", dict(truth_params, time_step=dt)), ("mpm_newtonian", "truth", truth_params)]
    laws += [("mpm_newtonian", label, values) for label, values in dict(points).items()]
    for law, label, params in laws:
        b = tgs.SceneBuilder(gravity=tuple(gspec["gravity"]))
        b.add_mpm_grid(lower=(0, 0, 0), upper=(1, 1, 1), resolution=resolution, mu=float(gspec["floor_friction"] or 0))
        b.add_mpm(particles=theirs[0], particle_volume=float(gspec["particle_size"]) ** 3, material=law, params=params,
                  density=float(gspec["rho"]))
        model = b.finalize(requires_grad=False)
        n = model.mpm_particle_count
        mine = recorded_positions(tgs, model, dt, steps, every)
        centroid, box, rms = compare(mine, theirs)
        print(json.dumps(dict(scene="footage newtonian", precision=f"f{precision}", tigradsim_law=law, at=label,
                              params={k: float(f"{v:.6g}") for k, v in params.items()}, particles=n,
                              dx_m=1.0 / resolution, dt_s=dt, steps=steps,
                              rms_diff_m_per_frame=[float(f"{r:.3g}") for r in rms],
                              centroid_y_diff_m_per_frame=[float(f"{d:.3g}")
                                                           for d in (mine - theirs).mean(axis=1)[:, 1]],
                              max_rms_diff_m=float(f"{rms.max():.3g}"),
                              max_centroid_diff_m=float(f"{centroid.max():.3g}"),
                              max_bbox_diff_m=float(f"{box.max():.3g}"),
                              genesis_extent_m=[float(f"{e:.4g}") for e in theirs[-1].max(0) - theirs[-1].min(0)],
                              genesis_lowest_y_m=float(f"{theirs[:, :, 1].min():.3g}"))), flush=True)


def tigradsim_timing(spec, steps, precision, checkpoint_every=CHECKPOINT_EVERY):
    """Child process: forward and forward+backward per step of tigradsim on the spec (elastic drop)."""
    import tigradsim as tgs
    from _harness import mpm_centroid_loss, time_rollout
    tgs.init(arch="cpu", precision=precision)
    model, obj = build_tigradsim(spec, tgs, requires_grad=True)
    sim = tgs.Simulator(model, dt=spec["dt"], steps=steps, checkpoint_every=checkpoint_every)
    n = model.mpm_particle_count
    loss = mpm_centroid_loss(sim, steps, axis=2)
    t = time_rollout(sim, loss)
    return dict(particles=n, grid_nodes=list(model.mpm_grid.res), steps=steps,
                checkpoint_every=checkpoint_every, ms_per_step_forward=round(t["us_per_step_forward"] / 1e3, 2),
                ms_per_step_forward_backward=round(t["us_per_step_forward_backward"] / 1e3, 2),
                # d mean(z) / d v0_z summed over the particles (the last taped pass): the elapsed time in free fall
                grad_v0z_sum=float(f"{float(model.mpm_v0.grad.to_numpy()[:, 2].sum()):.4g}"),
                state_mb=t["state_fields_mb"], peak_rss_mb=t["peak_rss_mb"], x0=None)


def timing_rows(size, steps, genesis_python, precision_bits="32", repeat=2):
    """Forward and forward + backward per step of both engines on the elastic drop at `size`, each run in a
    process of its own (its own peak RSS), alternately, `repeat` rounds; prints every run, then the best."""
    spec = scene_spec("elastic", SIZES[size], steps=steps, dt=2e-4, precision=precision_bits)
    best = {}

    def keep(engine, row):
        print(json.dumps(dict(scene=f"elastic {size}", precision=f"f{precision_bits}", engine=engine, **row)),
              flush=True)
        old = best.get(engine)
        if old is None or row.get("ms_per_step_forward_backward", row.get("ms_per_step_forward", 0)) < \
                old.get("ms_per_step_forward_backward", old.get("ms_per_step_forward", 0)):
            best[engine] = row

    for _ in range(repeat):
        out = subprocess.run([sys.executable, os.path.abspath(__file__), "--child-timing", size, "--steps", str(steps),
                              "--precision", precision_bits], capture_output=True, text=True)
        if out.returncode != 0:
            raise RuntimeError(out.stderr[-3000:])
        mine = json.loads(out.stdout.strip().splitlines()[-1])
        x0_path = mine.pop("x0_path")
        x0 = np.load(x0_path)
        os.remove(x0_path)
        keep("tigradsim", mine)
        fwd = run_genesis(spec, x0, genesis_python, mode="timing")
        keep("genesis", dict(particles=int(fwd["particles"]), grid_nodes=fwd["grid_nodes"].tolist(), steps=steps,
                             ms_per_step_forward=round(float(fwd["seconds_forward"]) / steps * 1e3, 2),
                             peak_rss_mb=round(float(fwd["peak_rss_mb"]), 1),
                             rss_after_import_mb=round(float(fwd["rss_after_import_mb"]), 1)))
        try:
            # Genesis keeps substeps_local substeps in memory and checkpoints between: 10, as tigradsim
            bwd = run_genesis(dict(spec, substeps_local=CHECKPOINT_EVERY), x0, genesis_python, mode="timing",
                              backward=True)
            keep("genesis (requires_grad)", dict(
                ms_per_step_forward=round(float(bwd["seconds_forward"]) / steps * 1e3, 2),
                ms_per_step_forward_backward=round(float(bwd["seconds_forward"] + bwd["seconds_backward"])
                                                   / steps * 1e3, 2),
                grad_v0z_sum=float(f"{float(bwd['grad_v0z_sum']):.4g}"),
                peak_rss_mb=round(float(bwd["peak_rss_mb"]), 1), substeps_local=CHECKPOINT_EVERY))
        except RuntimeError as exc:
            print(json.dumps(dict(engine="genesis (requires_grad)",
                                  backward_failed=str(exc).strip().splitlines()[-1][:300])), flush=True)
    for engine, row in best.items():
        print(json.dumps(dict(best_of=repeat, scene=f"elastic {size}", precision=f"f{precision_bits}", engine=engine,
                              **row)), flush=True)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--scenes", default="elastic,von_mises,sand,newtonian")
    parser.add_argument("--sizes", default="small,medium", help="trajectory comparisons ('' for none)")
    parser.add_argument("--timing", default="pacnerf", help="size of the timing rows ('' for none)")
    parser.add_argument("--steps", type=int, default=20, help="timed steps")
    parser.add_argument("--precision", default="32", choices=("32", "64"), help="of the timing rows")
    parser.add_argument("--repeat", type=int, default=2, help="timing rounds (the engines alternate)")
    parser.add_argument("--genesis-python", default=DEFAULT_GENESIS_PYTHON)
    parser.add_argument("--write-reference", default=None, help="store the small size's Genesis trajectories here")
    parser.add_argument("--footage", default=None, help="a newtonian PAC-NeRF clip folder: its motion made again by "
                        "Genesis and run by tigradsim from the same particles (footage_replica)")
    parser.add_argument("--at", action="append", default=[], metavar="LABEL:viscosity=V,bulk_modulus=V",
                        help="with --footage: mpm_newtonian also at these values (repeatable)")
    parser.add_argument("--footage-precision", default="64", choices=("32", "64"))
    parser.add_argument("--child-timing", default=None)
    args = parser.parse_args()
    if args.child_timing:
        spec = scene_spec("elastic", SIZES[args.child_timing], steps=args.steps, dt=2e-4, precision=args.precision)
        row = tigradsim_timing(spec, args.steps, "f" + args.precision)
        import tigradsim as tgs
        model, _ = build_tigradsim(spec, tgs)
        path = os.path.join(tempfile.gettempdir(), f"vs_genesis_x0_{os.getpid()}.npy")
        np.save(path, model.get("mpm_x0"))
        row.pop("x0")
        print(json.dumps(dict(row, x0_path=path)))
        return
    if args.footage:
        points = {}
        for item in args.at:
            label, _, pairs = item.partition(":")
            points[label] = {k.strip(): float(v) for k, v in (p.split("=") for p in pairs.split(",") if p)}
        footage_replica(args.footage, args.genesis_python, points, args.footage_precision)
        return
    sizes = [s for s in args.sizes.split(",") if s]
    scenes = [s for s in args.scenes.split(",") if s]
    for label, names, known in (("--scenes", scenes, MATERIALS), ("--sizes", sizes, SIZES),
                                ("--timing", [args.timing] if args.timing else [], SIZES)):
        bad = [n for n in names if n not in known]
        if bad:
            sys.exit(f"{label}: unknown {bad}; expected names from {sorted(known)}")
    if not os.path.exists(args.genesis_python):
        sys.exit(f"--genesis-python: {args.genesis_python} not found; create the venv (module docstring)")
    if sizes:
        trajectory_rows(scenes, sizes, args.genesis_python, args.write_reference)
    if args.timing:
        timing_rows(args.timing, args.steps, args.genesis_python, args.precision, args.repeat)


if __name__ == "__main__":
    main()
