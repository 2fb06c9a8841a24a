"""A soft ball (tetrahedral FEM) of any registered tet material thrown onto the ground: it
bounces and squashes (demos/fem_bounce.py).  `simulate_bounce` reports the tet volume ratios J
(J <= 0: an inverted tet) and the energy, so a material or parameters that invert show it.

    model, ball = bouncing_ball("corotated")          # mu = lam = default_stiffness(material)
    run = simulate_bounce(model, ball)                 # frames, min_J, min_height, energies
"""
import numpy as np

from ..io import meshes
from ..physics import fem
from ..sim.builder import SceneBuilder
from ..core.observers import ParticleRecorder
from ..sim.simulator import Simulator

DEFAULT_STIFFNESS = {"stvk": 3e3}    # mu = lam [Pa] where 1e3 does not bounce sanely (StVK inverts at 1e3)


def default_stiffness(material):
    """mu = lam [Pa] the bounce uses for `material`: 1e3, StVK 3e3 (see demos/fem_bounce.py)."""
    return DEFAULT_STIFFNESS.get(material, 1e3)


def bouncing_ball(material="neo_hookean", mu=None, lam=None, damping=0.5, density=10.0, resolution=2,
                  radius=0.5, center=(-1.0, 1.2, 0.0), velocity=(2.0, 1.0, 0.0), requires_grad=False):
    """A `tgs.meshes.tet_ball` (resolution 2: 640 tets) of `material` (default mu = lam =
    `default_stiffness`) [Pa], damping on dF/dt [Pa s], density [kg/m^3], thrown from
    `center` [m] at `velocity` [m/s] onto the ground (ke 1e4, kd 1, kf 10, mu 0.5).
    Returns (model, ball): the finalized Model and the builder's soft-mesh handle."""
    stiffness = default_stiffness(material)
    mu = stiffness if mu is None else mu
    lam = stiffness if lam is None else lam
    b = SceneBuilder(gravity=(0.0, -9.8, 0.0))
    b.add_ground(ke=1e4, kd=1.0, kf=10.0, mu=0.5)
    mesh = meshes.tet_ball(radius, resolution=resolution, center=center)
    ball = b.add_soft_mesh(mesh, material=material, params={"mu": mu, "lam": lam}, damping=damping,
                           density=density, velocity=velocity, radius=0.01)
    return b.finalize(requires_grad=requires_grad), ball


def total_energy(model, q, qd):
    """Kinetic + gravitational + elastic energy [J] at positions q (N, 3) and velocities qd (N, 3)."""
    m = model.particle_mass.to_numpy().astype(np.float64)
    g = -float(model.gravity.to_numpy()[1])
    kinetic = 0.5 * float(np.sum(m[:, None] * qd.astype(np.float64) ** 2))
    return kinetic + g * float(np.sum(m * q[:, 1])) + fem.elastic_energy(model, q)


def simulate_bounce(model, ball, dt=1 / 1920, steps=3840, frame_every=32, j_every=4):
    """Run the bounce (all steps kept: no checkpoints).  Returns a dict:
    frames (K, V, 3) [m] every `frame_every` steps; min_J (S,): the smallest tet volume
    ratio J = volume / rest volume every `j_every` steps (J <= 0: an inverted tet);
    min_height [m]: lowest vertex over every step; energy_initial, energy_final [J]."""
    sim = Simulator(model, dt=dt, steps=steps, checkpoint_every=None)
    rec = ParticleRecorder(sim, every=frame_every)
    jrec = ParticleRecorder(sim, every=j_every)
    sim.run()
    tets = ball.local_tets + ball.particle_start
    vol0 = meshes.tet_volumes(model.particle_q0.to_numpy().astype(np.float64), tets)
    J = np.array([meshes.tet_volumes(q, tets) / vol0 for q in jrec.numpy().astype(np.float64)])
    q_all = sim.state.particle_q.to_numpy()
    return {
        "sim": sim, "frames": rec.numpy(), "min_J": J.min(axis=1),
        "min_height": float(q_all[:, :, 1].min()),
        "energy_initial": total_energy(model, model.particle_q0.to_numpy(), model.particle_qd0.to_numpy()),
        "energy_final": total_energy(model, sim.final_state("particle_q"), sim.final_state("particle_qd")),
    }
