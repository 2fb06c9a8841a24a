"""A square cloth dropped over a soft (FEM) ball: the cloth-FEM contact of `physics.cloth_soft_contact`
(demos/cloth_soft_drape.py, benchmarks/bench_cloth.py's cloth-on-ball figures).

    model, cloth, ball = towel_on_ball(cloth_cells=24, ball_resolution=2)
    frames, ball_frames, seconds = simulate(model, cloth, ball, steps=1200)
"""
import time

import numpy as np

from ..core.observers import ParticleRecorder
from ..io import meshes
from ..sim.builder import SceneBuilder
from ..sim.simulator import Simulator

BALL_RADIUS = 0.25          # [m]
CLOTH_SIZE = 0.9            # [m] side of the square cloth
VIEW = ((0.0, 0.9, 1.6), (0.0, 0.3, 0.0))      # viewer camera (eye, target) [m]


def towel_on_ball(cloth_cells=24, ball_resolution=2, prism_layers=0, youngs=5e3, poisson=0.3, ball_density=50.0,
                  cloth_density=0.3, cloth_mu=20.0, cloth_lam=20.0, contact=None, requires_grad=False, dt=5e-4):
    """A cloth_cells x cloth_cells cloth of side CLOTH_SIZE [m] (membrane mu, lam [N/m], light bending,
    `cloth_density` [kg/m^2]) held flat 7 cm above a soft neo-Hookean ball (`meshes.tet_ball(BALL_RADIUS,
    ball_resolution, prism_layers=...)`, Young's modulus `youngs` [Pa], `poisson`, `ball_density` [kg/m^3]) that
    stands on the ground with its lowest vertices (the bottom 10 % of its height) pinned.  Contact radii 5 mm on
    both, so the cloth-ball thickness is 1 cm.  The cloth's contact constants (against the ball: `contact`, a dict
    for `SceneBuilder.set_cloth_soft_contact`; and the ground's) are sized for the time step `dt` [s] and the
    lightest cloth vertex m (a corner: density x cell^2 / 6), whose mass falls with the cell's area: ke = 0.2 m /
    dt^2, kd = 0.05 m / dt, kf = 0.3 m / dt, mu 0.4 (ground 0.5), well inside the explicit limit
    (`core.stability`) at any cloth size.  Returns (model, cloth handle, ball handle)."""
    cell = CLOTH_SIZE / cloth_cells
    lightest = cloth_density * cell * cell / 6.0
    ke, kd, kf = 0.2 * lightest / dt ** 2, 0.05 * lightest / dt, 0.3 * lightest / dt
    b = SceneBuilder(gravity=(0.0, -9.8, 0.0))
    b.add_ground(ke=ke, kd=kd, kf=kf, mu=0.5)
    v, t = meshes.tet_ball(BALL_RADIUS, ball_resolution, center=(0.0, BALL_RADIUS + 0.005, 0.0),
                           prism_layers=prism_layers)
    ball = b.add_soft_mesh((v, t), young_poisson=(youngs, poisson), density=ball_density, damping=2.0, radius=0.005,
                           fixed=np.nonzero(v[:, 1] < 0.2 * BALL_RADIUS + 0.005)[0])
    half = 0.5 * CLOTH_SIZE
    cv, ct = meshes.cloth_grid(cloth_cells, cloth_cells, cell=cell, origin=(-half, 2 * BALL_RADIUS + 0.075, -half),
                               plane="xz")
    cloth = b.add_cloth(cv, ct, params={"mu": cloth_mu, "lam": cloth_lam}, density=cloth_density, damping=0.02,
                        bending_stiffness=1e-5, bending_damping=1e-7, radius=0.005)
    b.set_cloth_soft_contact(**(contact or {"ke": ke, "kd": kd, "kf": kf, "mu": 0.4}))
    return b.finalize(requires_grad=requires_grad), cloth, ball


def simulate(model, cloth, ball, dt=5e-4, steps=1200, every=40):
    """Run `steps` steps of `dt` [s]; returns (cloth frames (K, V, 3), ball frames (K, Vb, 3) [m] every `every`
    steps, seconds the simulation took)."""
    sim = Simulator(model, dt=dt, steps=steps)
    cloth_rec = ParticleRecorder(sim, every=every, indices=cloth.particles)
    ball_rec = ParticleRecorder(sim, every=every,
                                indices=np.arange(ball.particle_start, ball.particle_start + ball.particle_count))
    t0 = time.time()
    sim.run()
    return cloth_rec.numpy(), ball_rec.numpy(), time.time() - t0
