"""The paper's cloth (20 x 10 grid, cell 0.1 m, membrane + bending) as a flag pinned at two
corners in the wind (drag and lift), or a square cloth dropped onto the ground (demos/cloth_drape.py).

    model, cloth = drape("flag", wind=(6.0, 0.0, 1.0))
    frames, seconds = simulate(model, cloth)          # (K, V, 3) [m] every 40 steps
"""
import time

import numpy as np

from ..io import meshes
from ..sim.builder import SceneBuilder
from ..core.observers import ParticleRecorder
from ..sim.simulator import Simulator

# viewer camera (eye, target) [m] per drape scene
DRAPE_VIEW = {"flag": ((1.0, 1.2, 3.2), (1.0, 0.7, 0.0)), "drop": ((0.0, 1.6, 3.0), (0.0, 0.3, 0.0))}


def drape(scene="flag", material="membrane", mu=60.0, lam=80.0, damping=0.05, density=0.25, bending=2e-3,
          drag=1.0, lift=0.6, wind=(5.0, 0.0, 1.0), nx=20, ny=10, cell=0.1):
    """`scene="flag"`: an nx x ny grid of `cell` [m] in the xy plane from y = 0.6 m, pinned at
    its two corners on x = 0 (a pole), in `wind` [m/s]; `"drop"`: an nx x nx square (a little
    wrinkled) dropped from 0.8 m onto the ground (no wind).  Shell `material` with mu, lam
    [N/m], damping on dF/dt, `density` [kg/m^2], `bending` stiffness per edge [N m/rad^2]
    (its damping 1 % of it), drag and lift coefficients; ground ke 500 N/m, kd 0.1 N s/m, kf 0.3 N s/m,
    mu 0.5 (sized for the cloth's particles of 0.4-2.5 g: the lightest, a corner's, has its contact modes
    at 0.31 and its membrane at 0.28 of the explicit limit at `simulate`'s dt of 0.5 ms; ke 2e3, kd 2,
    kf 5, as before, put the friction at 6x the limit, `tigradsim.core.stability`).
    Returns (model, cloth): the Model (no gradients) and the builder's cloth handle."""
    if scene not in DRAPE_VIEW:
        raise ValueError(f"scene: expected one of {sorted(DRAPE_VIEW)}, got {scene!r}")
    b = SceneBuilder(gravity=(0.0, -9.8, 0.0))
    b.add_ground(ke=500.0, kd=0.1, kf=0.3, mu=0.5)
    if scene == "flag":
        v, f = meshes.cloth_grid(nx, ny, cell=cell, origin=(0.0, 0.6, 0.0), plane="xy")
        pinned = [0, ny * (nx + 1)]          # bottom-left and top-left corners
    else:
        v, f = meshes.cloth_grid(nx, nx, cell=cell, origin=(-0.5 * nx * cell, 0.8, -0.5 * nx * cell), plane="xz")
        v[:, 1] += 0.1 * np.sin(3.0 * v[:, 0]) * np.cos(2.0 * v[:, 2])   # a little wrinkled
        pinned, wind = None, (0.0, 0.0, 0.0)
    cloth = b.add_cloth(v, f, material=material, params={"mu": mu, "lam": lam}, density=density, damping=damping,
                        bending_stiffness=bending, bending_damping=bending * 0.01, drag=drag, lift=lift, wind=wind,
                        pinned=pinned, radius=0.01)
    return b.finalize(requires_grad=False), cloth


def simulate(model, cloth, dt=5e-4, steps=4000, every=80):
    """Run `steps` steps of `dt` [s]; returns (frames (K, V, 3) [m] of the cloth's particles
    every `every` steps, seconds the simulation took)."""
    sim = Simulator(model, dt=dt, steps=steps)
    rec = ParticleRecorder(sim, every=every, indices=cloth.particles)
    t0 = time.time()
    sim.run()
    return rec.numpy(), time.time() - t0
