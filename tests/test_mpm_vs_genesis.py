"""tigradsim's MPM against an independent engine: Genesis 1.4.5's MLS-MPM (CPU, float64), on the small scenes of
benchmarks/vs_genesis.py (a 0.25 m cube of 512 particles on a 16^3 grid dropped in a walled unit box, 1,000 steps
of 5e-4 s), whose Genesis trajectories are stored in tests/data/mpm_genesis_small.npz (every 50th step, float32;
rewritten by `python benchmarks/vs_genesis.py --sizes small --timing '' --write-reference
tests/data/mpm_genesis_small.npz`, which needs the Genesis venv of benchmarks/requirements-genesis.txt).  The test
itself needs only the stored file, and is skipped cleanly without it.

Each plastic scene runs twice in tigradsim: with its own law (mpm_von_mises, mpm_drucker_prager) and with
Genesis's law written as a tigradsim user material (benchmarks/genesis_laws.py).  Tolerances, from what the
two engines define alike and not (benchmarks/vs_genesis.py's docstring), on the largest per-particle RMS
distance and centroid distance over the 0.5 s:
  * the same law (elastic fixed-corotated; genesis_von_mises; genesis_sand), the same step, walls, masses and
    particles: the trajectories are the same up to rounding (measured ~1e-10 m in float64), so 1e-6 m (the
    float32 storage of the reference alone is ~3e-8 m).  This is what checks tigradsim's MPM step.
  * tigradsim's own laws, which differ from Genesis's by definition: von Mises (Hencky StVK elasticity where
    Genesis has fixed-corotated), sand (no volume correction): the measured difference (RESULTS.md) with a
    factor ~2 of margin, named in TOLERANCE.
"""
import json
import os
import sys

import numpy as np
import pytest

import tigradsim as tgs

BENCHMARKS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "benchmarks")
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
}


def _reference():
    if not os.path.exists(REFERENCE):
        pytest.skip(f"{REFERENCE} absent (write it with benchmarks/vs_genesis.py --write-reference)")
    with np.load(REFERENCE) as z:
        return {k: z[k] for k in z.files}


def _benchmark():
    """benchmarks/vs_genesis.py (its tigradsim side: the scene, the recording) and genesis_laws.py."""
    sys.path.insert(0, BENCHMARKS)
    try:
        import genesis_laws  # noqa: F401  (registers genesis_von_mises, genesis_sand)
        import vs_genesis
    finally:
        sys.path.remove(BENCHMARKS)
    return vs_genesis


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
