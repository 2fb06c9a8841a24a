"""A rigid box (or any closed OBJ mesh) thrown onto the ground with spin: it bounces, slides and
comes to rest.  The contact stiffness ke, damping kd, friction regularisation kf and Coulomb mu are
the body's own (differentiable) parameters; the ground has the same law.

    sc = BounceScene()                      # a 0.4 x 0.25 x 0.3 m box, 1 kg, 4000 steps of 1 ms
    result = sc.run()                       # BounceResult: vertices per frame, bounce and slide metrics
"""
import time
from dataclasses import dataclass

import numpy as np

from ..sim.builder import SceneBuilder
from ..physics.rigid_observers import BodyRecorder, RigidSurface
from ..sim.simulator import Simulator
from ..io import meshes

START = (-1.2, 1.0, 0.0)                   # initial centre [m]
VELOCITY, SPIN = (1.2, 1.0, 0.0), (0.0, 2.0, 6.0)   # initial velocity [m/s] and angular velocity [rad/s]
TILT = (0.2, 0.0, 0.25, 1.0)               # initial orientation (quaternion x, y, z, w; normalised)


def thrown_body_model(mesh=None, *, mass=1.0, ke=1e4, kd=10.0, kf=10.0, mu=0.5, requires_grad=False):
    """The Model: the ground (ke [N/m], kd [N s/m], kf [N s/m], mu) and one body of `mass` [kg] with
    the same contact law, thrown from START with VELOCITY and SPIN, tilted by TILT.

    mesh: None (a 0.4 x 0.25 x 0.3 m box), an OBJ path (centred and scaled to about 0.6 m across) or
    (vertices (V, 3) [m], faces (F, 3)) used as given."""
    if mesh is None:
        vertices, faces = meshes.box_surface((0.4, 0.25, 0.3))
    elif isinstance(mesh, (str, bytes)) or hasattr(mesh, "__fspath__"):
        vertices, faces = meshes.load_obj(mesh)
        vertices = vertices - vertices.mean(0)
        vertices *= 0.3 / np.abs(vertices).max()            # about 0.6 m across
    else:
        vertices, faces = mesh
    b = SceneBuilder(gravity=(0.0, -9.8, 0.0))
    b.add_ground(ke=ke, kd=kd, kf=kf, mu=mu)
    tilt = np.asarray(TILT)
    b.add_rigid_body(vertices, faces, mass=mass, position=START, rotation=tilt / np.linalg.norm(tilt),
                     velocity=VELOCITY, angular_velocity=SPIN)
    return b.finalize(requires_grad=requires_grad)


def bounce_metrics(positions, lowest):
    """(bounce_height_ratio, slide_distance [m], first-contact frame) from the centre-of-mass positions
    (K, 3) and the lowest mesh-vertex height per frame (K,): the peak height after the first touch-down
    over the drop height (both above the resting height), and the horizontal travel of the centre
    from the first touch-down to the last frame."""
    positions, lowest = np.asarray(positions, dtype=np.float64), np.asarray(lowest, dtype=np.float64)
    if positions.ndim != 2 or positions.shape[1] != 3 or lowest.shape != positions.shape[:1]:
        raise ValueError(f"positions, lowest: expected shapes (K, 3) and (K,), got {positions.shape} and "
                         f"{lowest.shape}")
    y = positions[:, 1]
    rest = y[-1]
    touch = int(np.argmax(lowest <= 0.0))               # first frame in contact
    drop = y[:touch + 1].max() - rest                    # peak of the throw above the resting height
    bounce = (y[touch:].max() - rest) / drop if drop > 0 else 0.0
    slide = float(np.linalg.norm(positions[-1, [0, 2]] - positions[touch, [0, 2]]))
    return float(bounce), slide, touch


@dataclass
class BounceResult:
    """vertices: world surface vertices per shown frame (K, V, 3) [m]; faces (F, 3); positions: the
    centre of mass per frame (K, 3); seconds: wall time of the rollout; the metrics of
    `bounce_metrics`; final_speed: |v| of the centre at the end [m/s]; frame_dt: seconds per frame."""
    vertices: np.ndarray
    faces: np.ndarray
    positions: np.ndarray
    seconds: float
    bounce_height_ratio: float
    slide_distance: float
    final_speed: float
    frame_dt: float


class BounceScene:
    """The throw, simulated for `steps` steps of `dt` s and recorded every `every` steps.

    Args: mesh, mass, ke, kd, kf, mu: see `thrown_body_model`; steps, dt [s], every.
    Attributes: model, sim, surface (RigidSurface), poses (BodyRecorder)."""

    def __init__(self, mesh=None, *, mass=1.0, ke=1e4, kd=10.0, kf=10.0, mu=0.5, steps=4000, dt=1e-3, every=20):
        if int(steps) != steps or steps < 1 or int(every) != every or every < 1:
            raise ValueError(f"steps, every: expected positive integers, got steps={steps!r}, every={every!r}")
        self.model = thrown_body_model(mesh, mass=mass, ke=ke, kd=kd, kf=kf, mu=mu)
        self.sim = Simulator(self.model, dt=dt, steps=steps)
        self.surface = RigidSurface(self.sim, every=every)
        self.poses = BodyRecorder(self.sim, every=every)
        self.every = every

    def run(self) -> BounceResult:
        start = time.time()
        self.sim.run()
        seconds = time.time() - start
        positions = self.poses.numpy()[0][:, 0].astype(np.float64)
        verts = self.surface.numpy()
        bounce, slide, _ = bounce_metrics(positions, verts[:, :, 1].min(axis=1))
        speed = float(np.linalg.norm(self.sim.final_state("body_qd")[0]))
        return BounceResult(verts, self.surface.faces, positions, seconds, bounce, slide, speed,
                            self.every * self.sim.dt)
