"""The mass-spring lattice throw: learn every particle's initial velocity so that the
lattice's centre of mass lands on a target (demos/mass_spring.py).

    sc = LatticeThrow()
    history = sc.fit(iters=40, lr=0.08)
    frames = sc.rollout(every=20)       # (K, N, 3) [m], the final throw
"""
import numpy as np

from ..sim.builder import SceneBuilder
from ..fitting.losses import MSELoss
from ..core.observers import CenterOfMassRecorder, ParticleRecorder
from ..fitting.optim import Adam, Param, optimize
from ..sim.simulator import Simulator


def lattice(n=5, spacing=0.1, origin=(0.0, 0.3, 0.0)):
    """Particles (n^3, 3) [m] on an n^3 grid and springs (E, 2) to neighbours within sqrt(3) spacings."""
    g = np.stack(np.meshgrid(*[np.arange(n)] * 3, indexing="ij"), -1).reshape(-1, 3)
    pos = g * spacing + np.asarray(origin)
    d = np.abs(g[:, None, :] - g[None, :, :]).max(-1)
    i, j = np.nonzero(np.triu(d == 1))
    return pos, np.stack([i, j], 1)


class LatticeThrow:
    """An n^3 lattice (spacing 0.1 m, particles of 0.02 kg, springs of stiffness 800 N/m and
    damping 0.5) thrown at (0.5, 1.0, 0) m/s onto the ground (ke 4e3, kd 8, kf 20, mu 0.6),
    `steps` steps of dt = 1 ms; the loss is the squared distance [m^2] of the final centre of
    mass from `target` [m], the unknown every particle's initial velocity (bounded to
    +-10 m/s).  Attributes: model, sim, springs (E, 2), velocity (the Param), loss."""

    def __init__(self, n=5, steps=800, target=(1.2, 0.25, 0.4), dt=1e-3):
        pos, self.springs = lattice(n)
        b = SceneBuilder(gravity=(0.0, -9.8, 0.0))
        b.add_particles(pos, velocities=np.tile([0.5, 1.0, 0.0], (len(pos), 1)), masses=0.02, radius=0.01)
        b.add_springs(self.springs, stiffness=800.0, damping=0.5)
        b.add_ground(ke=4e3, kd=8.0, kf=20.0, mu=0.6)
        self.model = b.finalize(requires_grad=True)
        self.sim = Simulator(self.model, dt=dt, steps=steps)
        self.com = CenterOfMassRecorder(self.sim, every=steps)          # frames: start and end
        self.target = np.asarray(target, dtype=np.float64)
        self.loss = MSELoss(self.com.com, np.array([[0.0, 0.0, 0.0], self.target]), frame_weights=[0.0, 1.0])
        self.velocity = Param(self.model.particle_qd0, name="initial velocity", lower=-10.0, upper=10.0)

    def fit(self, iters=40, lr=0.08, log_every=5):
        """Adam on the initial velocities (step `lr` [m/s]) for `iters` iterations; returns the History."""
        def forward():
            self.sim.run()
            self.loss()

        return optimize(forward, self.loss.value, Adam([self.velocity], lr=lr), iters=iters, log_every=log_every)

    def rollout(self, every=20):
        """Run the throw at the current velocities; particle positions (K, N, 3) [m] every `every` steps."""
        recorder = ParticleRecorder(self.sim, every=every)
        self.sim.run()
        return recorder.numpy()

    def final_com(self):
        """The centre of mass (3,) [m] at the end of the last rollout."""
        return self.com.numpy()[-1]
