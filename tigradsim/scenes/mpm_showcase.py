"""Three MPM scenes that show the grid coupling (`tigradsim.physics.mpm_boundary`), the scenes of the demos
demos/mpm_sand_pile.py, demos/mpm_plasticine_squash.py and demos/mpm_fluid_splash.py:

  * `sand_pile`: a column of Drucker-Prager sand poured onto a free rigid box resting on the ground; the sand
    heaps on the box, runs off its sides and spreads on the floor (two-way: the box carries its weight).
  * `plasticine_squash`: a rigid box pressed by a known force onto a von Mises block on the floor, then
    released: the block is squashed and stays squashed (plastic), where an elastic one would spring back.
  * `fluid_splash`: a Newtonian blob thrown into a shallow pool of the same fluid, past a static sphere
    collider: the pool splashes up and the sheet runs round the sphere.

Each returns a `Showcase`: the model, the simulator (forward only, checkpointed segments so that the memory is
a few grids, not one per step), and a recorder of the particles (and bodies) every `every` steps.
Units: m, kg, s, Pa.
"""

import time
from dataclasses import dataclass, field

import numpy as np
import taichi as ti

from ..io import meshes
from ..physics.mpm_sampling import lattice_points
from ..physics.rigid import add_body_force
from ..physics.rigid_pose import quat_to_matrix_np
from ..sim.builder import SceneBuilder
from ..sim.simulator import Simulator


@ti.data_oriented
class MPMRecorder:
    """MPM particle positions (frames, N, 3) [m] and body poses (frames, B, 7) every `every` steps."""

    def __init__(self, sim, every):
        model = sim.model
        self.frames = sim.frame_count(every)
        self.body_count = getattr(model, "body_count", 0)
        self.x = ti.Vector.field(3, float, shape=(self.frames, model.mpm_particle_count))
        self.q = ti.Vector.field(7, float, shape=(self.frames, max(1, self.body_count)))
        sim.observe(self, every)

    def __call__(self, state, slot, frame):
        self._record_x(state.mpm_x, slot, frame)
        if self.body_count:
            self._record_q(state.body_q, slot, frame)

    @ti.kernel
    def _record_x(self, src: ti.template(), slot: ti.i32, frame: ti.i32):
        for i in range(self.x.shape[1]):
            self.x[frame, i] = src[slot, i]

    @ti.kernel
    def _record_q(self, src: ti.template(), slot: ti.i32, frame: ti.i32):
        for b in range(self.body_count):
            self.q[frame, b] = src[slot, b]


@dataclass
class Showcase:
    """A built MPM scene: model, sim, recorder, the frame interval `frame_dt` [s], the rigid box's mesh
    (vertices in its body frame, faces) if any, and scene facts in `info`."""
    model: object
    sim: Simulator
    recorder: MPMRecorder
    frame_dt: float
    box: tuple = None
    info: dict = field(default_factory=dict)

    def run(self):
        """Roll out; returns (particles (frames, N, 3), box vertices (frames, V, 3) or None, seconds)."""
        t0 = time.time()
        self.sim.run()
        seconds = time.time() - t0
        x = self.recorder.x.to_numpy()
        boxes = None
        if self.box is not None:
            q = self.recorder.q.to_numpy()[:, 0]
            local = self.box[0]
            boxes = np.stack([qk[:3] + local @ quat_to_matrix_np(qk[3:]).T for qk in q])
        return x, boxes, seconds


def _sim(model, dt, steps, every):
    sim = Simulator(model, dt=dt, steps=steps, checkpoint_every=every)
    return sim, MPMRecorder(sim, every)


def _box_body(b, size, mass, position, **contact):
    v, f = meshes.box_surface(size)
    b.add_rigid_body(v, f, mass=mass, position=position, **contact)
    return v - np.mean(v, axis=0), f


def sand_pile(resolution=24, steps=1500, dt=5e-4, every=25, friction_angle=35.0):
    """Sand (E 1e5 Pa, nu 0.3, density 1500 kg/m^3, Drucker-Prager friction angle [deg]) poured from a column
    0.125 m wide (2 cells of the --quick demo's grid) and 0.5 m tall onto a 0.3 x 0.12 x 0.3 m, 8 kg box on the ground in a 1 m domain."""
    b = SceneBuilder(gravity=(0.0, -9.8, 0.0))
    b.add_ground(ke=4e4, kd=400.0, kf=100.0, mu=0.6)
    box = _box_body(b, (0.3, 0.12, 0.3), 8.0, (0.5, 0.06, 0.5), mu=0.5)
    b.add_mpm_grid(lower=(0.0, 0.0, 0.0), upper=(1.0, 1.0, 1.0), resolution=resolution, mu=0.5)
    obj = b.add_mpm(box=((0.4375, 0.3, 0.4375), (0.5625, 0.8, 0.5625)), material="mpm_drucker_prager",
                    params={"E": 1e5, "nu": 0.3, "friction_angle": friction_angle}, density=1500.0,
                    velocity=(0.0, -1.0, 0.0), particles_per_cell=8)
    model = b.finalize(requires_grad=False)
    sim, rec = _sim(model, dt, steps, every)
    return Showcase(model, sim, rec, dt * every, box, dict(particles=obj.particle_count, sand_mass=obj.mass,
                                                           box_top=0.12, box_half=0.15))


def plasticine_squash(resolution=24, steps=1200, dt=4e-4, every=25, yield_stress=2e3, press=300.0,
                      press_until=0.3):
    """A 0.3 x 0.15 x 0.3 m von Mises block (E 5e4 Pa, nu 0.3, yield stress [Pa], density 1000 kg/m^3) on the
    floor; a 0.4 x 0.1 x 0.4 m, 10 kg rigid box from just above, pressed down with `press` [N] until
    `press_until` [s], then left to rest on it (sticky contact: the box carries the top along)."""
    b = SceneBuilder(gravity=(0.0, -9.8, 0.0))
    box = _box_body(b, (0.4, 0.1, 0.4), 10.0, (0.5, 0.22, 0.5), mu=0.5)
    add_body_force(b, 0, force=(0.0, -press, 0.0), start=0.0, end=press_until)
    b.add_mpm_grid(lower=(0.0, 0.0, 0.0), upper=(1.0, 0.6, 1.0), resolution=resolution, mu=0.5, boundary="sticky")
    obj = b.add_mpm(box=((0.35, 0.0, 0.35), (0.65, 0.15, 0.65)), material="mpm_von_mises",
                    params={"E": 5e4, "nu": 0.3, "yield_stress": yield_stress}, density=1000.0,
                    particles_per_cell=8)
    model = b.finalize(requires_grad=False)
    sim, rec = _sim(model, dt, steps, every)
    return Showcase(model, sim, rec, dt * every, box, dict(particles=obj.particle_count, block_height=0.15))


def fluid_splash(resolution=24, steps=1000, dt=4e-4, every=20, viscosity=0.05):
    """A 0.2 m Newtonian cube (viscosity [Pa s], bulk modulus 2e5 Pa, density 1000 kg/m^3) thrown down at
    3 m/s into a 0.13 m deep pool filling a 1 x 1 m floor, beside a static sphere collider (radius 0.12 m)."""
    b = SceneBuilder(gravity=(0.0, -9.8, 0.0))
    grid = b.add_mpm_grid(lower=(0.0, 0.0, 0.0), upper=(1.0, 0.8, 1.0), resolution=resolution, mu=0.0)
    centre, radius = np.array([0.72, 0.1, 0.5]), 0.12
    b.add_collider("sphere", radius, position=centre, mu=0.1, mpm_boundary="slip")
    fluid = dict(material="mpm_newtonian", params={"viscosity": viscosity, "bulk_modulus": 2e5}, density=1000.0)
    # the pool: the lattice of 8 particles per cell in the floor's 0.13 m, less what the sphere takes
    h = grid.dx / 2
    pts = lattice_points(grid.origin, h, (0.0, 0.0, 0.0), (1.0, 0.13, 1.0))
    pts = pts[np.linalg.norm(pts - centre, axis=1) > radius + 0.5 * h]
    pool = b.add_mpm(particles=pts, particle_volume=h ** 3, **fluid)
    blob = b.add_mpm(box=((0.3, 0.4, 0.4), (0.5, 0.6, 0.6)), velocity=(0.5, -3.0, 0.0), particles_per_cell=8,
                     **fluid)
    model = b.finalize(requires_grad=False)
    sim, rec = _sim(model, dt, steps, every)
    return Showcase(model, sim, rec, dt * every, None, dict(particles=pool.particle_count + blob.particle_count,
                                                            pool=(pool.particle_start, pool.particle_count),
                                                            pool_depth=0.13, sphere=(centre, radius)))
