"""tigradsim's MPM against an independent engine: Genesis 1.4.5's MLS-MPM (CPU, float64), on the small scenes of
benchmarks/vs_genesis.py (a 0.25 m cube of 512 particles on a 16^3 grid dropped in a walled unit box, 1,000 steps
of 5e-4 s), whose Genesis trajectories are stored in tests/data/mpm_genesis_small.npz (every 50th step, float32;
rewritten by `python benchmarks/vs_genesis.py --sizes small --timing '' --write-reference
tests/data/mpm_genesis_small.npz`, which needs the Genesis venv of benchmarks/requirements-genesis.txt).  The test
itself needs only the stored file, and is skipped cleanly without it.

Each plastic and the fluid scene runs twice in tigradsim: with its own law (mpm_von_mises, mpm_drucker_prager,
mpm_newtonian) and with
Genesis's law written as a tigradsim user material (benchmarks/genesis_laws.py).  Tolerances, from what the
two engines define alike and not (benchmarks/vs_genesis.py's docstring), on the largest per-particle RMS
distance and centroid distance over the 0.5 s:
  * the same law (elastic fixed-corotated; genesis_von_mises; genesis_sand; genesis_liquid), the same step, walls,
    masses and particles: the trajectories are the same up to rounding (measured ~1e-10 m in float64), so 1e-6 m (the
    float32 storage of the reference alone is ~3e-8 m).  This is what checks tigradsim's MPM step.
  * tigradsim's own laws, which differ from Genesis's by definition: von Mises (Hencky StVK elasticity where
    Genesis has fixed-corotated), sand (no volume correction), Newtonian (Genesis's viscous liquid is
    mpm_newtonian only to first order in dt |C| and J - 1): the measured difference (RESULTS.md) with a
    factor ~2 of margin, named in TOLERANCE.
"""
import json
import os
import sys

import numpy as np
import pytest
from benchmark_modules import benchmark_modules

import tigradsim as tgs

REFERENCE = os.path.join(os.path.dirname(__file__), "data", "mpm_genesis_small.npz")

SAME_LAW = (1e-6, 1e-6)
# (scene, tigradsim material) -> (largest per-particle RMS distance, largest centroid distance) [m] over the 0.5 s
# (the cube is 0.25 m, the grid's dx 0.0625 m, the fall ~0.29 m)
TOLERANCE = {
    ("elastic", "mpm_fixed_corotated"): SAME_LAW,
    ("von_mises", "genesis_von_mises"): SAME_LAW,
    ("sand", "genesis_sand"): SAME_LAW,
    ("von_mises", "mpm_von_mises"): (4e-3, 3e-3),      # measured 1.9e-3, 1.4e-3
    ("sand", "mpm_drucker_prager"): (8e-3, 4e-3),   # measured 4.1e-3, 1.9e-3
    ("newtonian", "genesis_liquid"): SAME_LAW,
    ("newtonian", "mpm_newtonian"): (8e-4, 3e-4),   # measured 4.1e-4, 1.4e-4
}


def _reference():
    if not os.path.exists(REFERENCE):
        pytest.skip(f"{REFERENCE} absent (write it with benchmarks/vs_genesis.py --write-reference)")
    with np.load(REFERENCE) as z:
        return {k: z[k] for k in z.files}


def _benchmark():
    """benchmarks/vs_genesis.py (its tigradsim side: the scene, the recording) and genesis_laws.py."""
    # genesis_laws first: it registers genesis_von_mises, genesis_sand and genesis_liquid
    return benchmark_modules("genesis_laws", "vs_genesis")[1]


@pytest.mark.slow          # each: 6-19 s on 2 shared cores (1,000 MPM steps of 512 particles, compiling included)
@pytest.mark.parametrize("scene,material", list(TOLERANCE))
def test_trajectory_matches_genesis(scene, material):
    ref = _reference()
    spec = json.loads(str(ref["spec_json"]))[scene]
    tgs.init(arch="cpu", precision="f64")
    bench = _benchmark()
    x0 = ref[f"{scene}_x0"]
    model, _ = bench.build_tigradsim(spec, tgs, material=material)
    # the particles Genesis was given are tigradsim's own lattice: the same positions, in the same order
    assert np.abs(model.get("mpm_x0") - x0).max() < 1e-12
    mine = bench.tigradsim_trajectory(spec, material=material)
    theirs = ref[f"{scene}_genesis"].astype(np.float64)
    assert mine.shape == theirs.shape
    # the scene is not trivial: the cube fell to the floor and was deformed there
    z = mine[:, :, 2]
    assert z.mean(axis=1).min() < z[0].mean() - 0.2 and z.min() < 0.05
    centroid, _, rms = bench.compare(mine, theirs)
    rms_tol, centroid_tol = TOLERANCE[(scene, material)]
    assert rms.max() < rms_tol and centroid.max() < centroid_tol, (scene, material, rms.max(), centroid.max())


@pytest.mark.slow          # 305 s from an empty cache in the suite with Taichi's IR passes, 46 s without
def test_genesis_liquid_gradient(f64_without_ir_passes):
    """genesis_liquid (Genesis's viscous liquid as a user material, a fit may use it): the Tape gradient of a
    loss of the whole MPM state (positions, velocities, F, C) through 6 steps against float64 central differences,
    to its viscosity and bulk modulus and to the particles' initial velocities.  The block starts with a shear and
    an expansion (v0 = v + G x), so that both the viscous term (C) and the pressure (J - 1) act; the test first
    checks that they do: the loss moves when either parameter doubles."""
    sys.path.insert(0, os.path.dirname(__file__))
    from mpm_scenes import StateLoss, block_scene, watch
    _benchmark()                                   # registers genesis_liquid
    dt = 2e-3
    params = {"viscosity": 5.0, "bulk_modulus": 2e3, "time_step": dt}
    model, _ = block_scene("genesis_liquid", params=params, particles_per_cell=8)
    x0 = model.get("mpm_x0")
    G = np.array([[0.4, 1.5, 0.0], [-0.8, 0.3, 0.6], [0.2, -1.0, 0.5]])        # [1/s]
    model.set("mpm_v0", np.array([0.3, -0.2, 0.1]) + (x0 - x0.mean(0)) @ G.T)
    sim = tgs.Simulator(model, dt=dt, steps=6)
    loss = StateLoss(model, seed=1)
    watch(sim, loss)

    def loss_at(row):
        model.set("mpm_params", np.array([row], dtype=np.float64))
        loss.loss[None] = 0.0
        sim.run()
        return loss.loss[None]

    base = [params["viscosity"], params["bulk_modulus"], dt]
    l0 = loss_at(base)
    # the bulk modulus doubled moves the loss (~26, rounding ~1e-13) by 4e-4 (measured): both must act
    assert abs(loss_at([2 * base[0], base[1], dt]) - l0) > 1e-5
    assert abs(loss_at([base[0], 2 * base[1], dt]) - l0) > 1e-5
    loss_at(base)
    only_eta_and_k = np.array([[1.0, 1.0, 0.0]])     # the substep is known, not fitted
    for fields, masks in (([model.mpm_params], [only_eta_and_k]), ([model.mpm_v0], None)):
        tgs.check_gradient(sim.run, loss.loss, fields, direction_count=2, eps=1e-6, rtol=1e-5,
                           masks=masks).assert_ok()
