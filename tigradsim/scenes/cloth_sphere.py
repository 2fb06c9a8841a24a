"""A square cloth dropped over a ball: the cloth (membrane + dihedral bending) falls onto a static sphere
collider standing on the ground (`SceneBuilder.add_collider("sphere", ...)`), rests on its top and drapes
down around it (demos/cloth_sphere.py); and the cloth's stretch and bend stiffness identified from its
rendered silhouettes (`ClothSphereFit`; tests/test_cloth_sphere.py fits them to tigradsim's own motion at a
finer step and to NVIDIA Warp's).

    scene = ClothSphere(nx=16)
    frames, seconds = scene.run()              # (K, V, 3) [m] every `every` steps

The cloth (side `side` [m], nx x nx cells) starts flat at `height` [m] above the ground, offset by `offset`
[m] in x so that it drapes unevenly; the sphere (radius `radius` [m]) stands on the ground at the origin.
Cloth and sphere contact constants are those of tigradsim.scenes.cloth_drape (ke 500 N/m, kd 0.1 N s/m,
kf 0.3 N s/m, mu 0.5), sized for its particles of a few tenths of a gram to a few grams: at the defaults (16
x 16 cells of 7.5 cm, 0.25 kg/m^2: particles of 0.35-1.4 g) and dt = 0.5 ms every contact mode and the
membrane are within `tigradsim.core.stability`'s limits (the demo's stability test checks it).
"""
import time

import numpy as np

from ..io import meshes
from ..sim.builder import SceneBuilder
from ..core.observers import ParticleRecorder
from ..sim.simulator import Simulator

# viewer camera (eye, target) [m]
VIEW = ((0.6, 1.1, 1.9), (0.0, 0.3, 0.0))
CONTACT = dict(ke=500.0, kd=0.1, kf=0.3, mu=0.5)


def cloth_sphere_model(nx=16, side=1.2, height=0.75, offset=0.1, radius=0.3, mu=60.0, lam=80.0, damping=0.05,
                       density=0.25, bending=2e-3, requires_grad=False):
    """(model, cloth handle): an nx x nx `side` [m] cloth at `height` [m] (shifted `offset` [m] along x) over a
    sphere of `radius` [m] resting on the ground at the origin.  Membrane mu, lam [N/m] and `damping` on dF/dt,
    `density` [kg/m^2], `bending` stiffness per edge [N m/rad^2] (its damping 1 % of it).  requires_grad as
    `SceneBuilder.finalize`'s."""
    if not (isinstance(nx, (int, np.integer)) and nx >= 2):
        raise ValueError(f"nx: expected a whole number of cells >= 2, got {nx!r}")
    if not height > 2.0 * radius + 0.01:
        raise ValueError(f"height: the cloth must start above the sphere's top ({2.0 * radius:g} m) by more than its "
                         f"contact radius, got {height!r} m")
    b = SceneBuilder(gravity=(0.0, -9.8, 0.0))
    b.add_ground(**CONTACT)
    b.add_collider("sphere", radius, (0.0, radius, 0.0), **CONTACT)
    v, f = meshes.cloth_grid(nx, nx, cell=side / nx, origin=(offset - 0.5 * side, height, -0.5 * side), plane="xz")
    cloth = b.add_cloth(v, f, material="membrane", params={"mu": mu, "lam": lam}, density=density, damping=damping,
                        bending_stiffness=bending, bending_damping=bending * 0.01, drag=0.0, lift=0.0, radius=0.01)
    return b.finalize(requires_grad=requires_grad), cloth


class ClothSphere:
    """The drop for `steps` steps of `dt` [s], the cloth's particles recorded every `every` steps (the other
    arguments: `cloth_sphere_model`'s)."""

    def __init__(self, steps=3000, dt=5e-4, every=60, **model_args):
        if int(steps) != steps or steps < 1 or int(every) != every or every < 1:
            raise ValueError(f"steps, every: expected positive integers, got steps={steps!r}, every={every!r}")
        self.model, self.cloth = cloth_sphere_model(**model_args)
        self.radius = float(model_args.get("radius", 0.3))
        self.sim = Simulator(self.model, dt=dt, steps=int(steps))
        self.recorder = ParticleRecorder(self.sim, every=int(every), indices=self.cloth.particles)
        self.every = int(every)

    @property
    def faces(self):
        """(F, 3) triangles over the recorded particles."""
        return self.cloth.faces - self.cloth.particle_start

    def run(self):
        """(frames (K, V, 3) [m], seconds the rollout took)."""
        start = time.time()
        self.sim.run()
        return self.recorder.numpy(), time.time() - start

    def summary(self, frames) -> dict:
        """Where the cloth ended: its lowest and highest point [m], `sphere_gap` [m] (the least distance of a
        particle from the sphere's surface: its contact radius, 1 cm, less the contact's give, where it rests on
        the ball; < 0 had it passed through), the share of its particles on the sphere (within 2 cm of its
        surface) and on the ground (below 2 cm), whether every position is finite."""
        last = frames[-1]
        centre = np.array([0.0, self.radius, 0.0])
        gap = np.linalg.norm(last - centre, axis=1) - self.radius
        on_sphere = np.abs(gap) < 0.02
        return dict(min_y=round(float(last[:, 1].min()), 4), max_y=round(float(last[:, 1].max()), 4),
                    sphere_gap=round(float(gap.min()), 5),
                    on_sphere=round(float(on_sphere.mean()), 3), on_ground=round(float((last[:, 1] < 0.02).mean()), 3),
                    finite=bool(np.all(np.isfinite(frames))))


# The fit's side camera [m] (sees the cloth fall onto the ball and drape down its sides) and the bounds of
# the identified stiffnesses (membrane mu [N/m], bending per edge [N m/rad^2]).
FIT_CAMERA = dict(eye=(0.0, 0.55, 2.4), target=(0.05, 0.4, 0.0), fov=45.0)
FIT_BOUNDS = {"mu": (5.0, 150.0), "bending": (1e-4, 2e-2)}


class ClothSphereFit:
    """The drop at `dt` [s] for `duration` [s] with the cloth's silhouette rendered (`res` px square, a side
    camera) every `frame_dt` [s], as a `VideoFit` of the membrane's mu (`ColumnParam` of cloth_params: the
    stretch stiffness; lam stays) and the bending stiffness (one value shared by every edge), both in log space
    within FIT_BOUNDS.  The other arguments: `cloth_sphere_model`'s (nx 8: particles of 1.4-5.6 g, within the
    contact and membrane limits at dt = 1 ms up to mu 150 N/m: the membrane at 0.45 of its explicit limit,
    the contacts at 0.39).

    `footage(values, dt)`: the silhouettes of the same scene at another step (e.g. dt / 4, the "camera"),
    rendered at the same frame times; `residuals()` (via `fit`) compares this fit's rollout with them."""

    def __init__(self, dt=1e-3, duration=0.8, frame_dt=0.1, res=40, nx=8, **model_args):
        from ..fitting.params import ColumnParam, Param
        from ..fitting.sysid import VideoFit, render_particles
        from ..renderers import Camera, SoftRasterizer
        every = int(round(frame_dt / dt))
        if every < 1 or abs(every * dt - frame_dt) > 1e-9 * frame_dt:
            raise ValueError(f"frame_dt: expected a whole multiple of dt = {dt!r} s, got {frame_dt!r} s")
        self.dt, self.every, self.res = float(dt), every, int(res)
        self.model_args = dict(model_args, nx=nx)
        self.model, self.cloth = cloth_sphere_model(requires_grad={"cloth_params", "cloth_bending_stiffness"},
                                                    **self.model_args)
        self.sim = Simulator(self.model, dt=dt, steps=int(round(duration / dt)))
        ids = np.unique(self.cloth.faces)
        cam = Camera(**FIT_CAMERA, width=res, height=res)
        self.renderer = SoftRasterizer(cam, np.searchsorted(ids, self.cloth.faces), vertex_count=len(ids),
                                       frames=self.sim.frame_count(every), vertex_ids=ids, sigma=1e-3, gamma=1e-4,
                                       shading="silhouette")
        render_particles(self.sim, self.renderer, every)
        self.mu = ColumnParam(self.model.cloth_params, 0, "mu", *FIT_BOUNDS["mu"], log_space=True)
        self.bending = Param(self.model.cloth_bending_stiffness, "bending", *FIT_BOUNDS["bending"], log_space=True)
        self.params = [self.mu, self.bending]
        self.fit = VideoFit(self.sim, self.renderer, self.params)

    def set_values(self, mu, bending):
        """Write the membrane mu [N/m] and the bending stiffness [N m/rad^2]."""
        self.mu.write(np.full(self.mu.value().shape, float(mu)))
        self.bending.write(np.full(self.bending.value().shape, float(bending)))

    def values(self) -> dict:
        return {"mu": float(self.mu.value()[0]), "bending": float(self.bending.value()[0])}

    def render_positions(self, frames) -> np.ndarray:
        """The silhouettes (K, H, W) of given cloth positions (K, V, 3) [m] at the fit's frame times, e.g.
        another simulator's motion; shaped as `render`'s."""
        frames = np.asarray(frames, dtype=np.float64)
        shape = self.renderer.image.shape
        if frames.shape != (shape[0], len(self.cloth.particles), 3):
            raise ValueError(f"frames: expected ({shape[0]}, {len(self.cloth.particles)}, 3) cloth positions [m], "
                             f"got shape {frames.shape}")
        return np.stack([self.renderer.render_numpy(x, k) for k, x in enumerate(frames)]).reshape(
            self.renderer.image.to_numpy().shape)

    def render(self, mu, bending) -> np.ndarray:
        """The silhouettes (K, H, W) at these stiffnesses (one rollout)."""
        self.set_values(mu, bending)
        return self.fit.render()
