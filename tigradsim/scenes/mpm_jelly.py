"""A jelly cube of MPM matter (neo-Hookean, E and nu) dropped on the floor, seen by one camera as soft splats
(`renderers.ParticleSplatter`), and its Young's modulus identified from those silhouettes alone: the gradSim
loop (simulate, render, compare in image space, backpropagate to the material) on continuum matter.

The cube: 0.25 m, density 500 kg/m^3, released at rest 0.3 m above the floor in a 1 m domain (walls and floor
with Coulomb friction 0.5); particles 8 per cell, splatted with radius a quarter cell (half the particle
spacing: the radius that gives a sampled box's mask, `tests/test_splats.py`).  `demos/mpm_jelly.py` shows it.
"""
from __future__ import annotations

import time

import numpy as np

from ..fitting.params import ColumnParam
from ..fitting.optim import BFGS
from ..fitting.sysid import VideoFit
from ..renderers.camera import Camera
from ..renderers.splats import ParticleSplatter
from ..sim.builder import SceneBuilder
from ..sim.simulator import Simulator

CUBE = ((0.375, 0.3, 0.375), (0.625, 0.55, 0.625))


class JellyScene:
    """The scene (module docstring).  E [Pa], nu, density [kg/m^3]; resolution: grid cells along the 1 m domain;
    steps of dt [s], a frame every `every` steps, rendered at res x res px.  Attributes: model, sim, splatter
    (its `image`: the silhouettes), obj (the MPMObject), frame_count."""

    def __init__(self, E=2e4, nu=0.3, density=500.0, resolution=16, steps=400, dt=1e-3, every=20, res=48,
                 requires_grad=True):
        b = SceneBuilder(gravity=(0.0, -9.8, 0.0))
        grid = b.add_mpm_grid(lower=(0, 0, 0), upper=(1, 1, 1), resolution=resolution, mu=0.5)
        self.obj = b.add_mpm(box=CUBE, material="mpm_neo_hookean", params={"E": E, "nu": nu}, density=density,
                             particles_per_cell=8)
        self.model = b.finalize(requires_grad=requires_grad)
        self.sim = Simulator(self.model, dt=dt, steps=steps)
        self.every, self.dt = every, dt
        self.frame_count = self.sim.frame_count(every)
        self.camera = Camera(eye=(0.5, 0.55, 2.0), target=(0.5, 0.3, 0.5), fov=30, width=res, height=res)
        self.splatter = ParticleSplatter(self.camera, self.model.get("mpm_x0").shape[0], frames=self.frame_count,
                                         radius=grid.dx / 4, opacity=0.5)
        self.sim.observe(lambda state, slot, frame: self.splatter.render(state.mpm_x, slot, frame), every=every)

    def run(self):
        """Roll out; returns (positions (frames, N, 3) [m], silhouettes (frames, H, W), seconds)."""
        t0 = time.time()
        self.sim.run()
        seconds = time.time() - t0
        x = self.sim.state.mpm_x.to_numpy()[::self.every][:self.frame_count]
        return x, self.splatter.image.to_numpy()[..., 0].copy(), seconds


def fit_youngs_modulus(scene: JellyScene, target, guess, iters=8, printer=print) -> dict:
    """Identify E from the silhouettes `target` (frames, H, W), starting at `guess` [Pa]; nu, density and the
    rest as given.  Quasi-Newton (BFGS) on log E through the splats and the MPM rollout."""
    truth = float(scene.model.get("mpm_params")[0, 0])
    E = ColumnParam(scene.model.mpm_params, 0, "E", lower=1e3, upper=1e6, log_space=True)
    scene.model.set("mpm_params", np.array([[guess, scene.model.get("mpm_params")[0, 1]]]))
    fit = VideoFit(scene.sim, scene.splatter, [E], check_view=False)
    t0 = time.time()
    history = fit.fit(target, iters=iters, optimizer=BFGS([E], lr=0.5), log_every=1, printer=printer)
    estimate = float(E.value()[0])
    return dict(truth=truth, guess=float(guess), estimate=estimate, rel_err=abs(estimate - truth) / truth,
                loss_initial=float(history.loss[0]), loss_final=float(min(history.loss)), iters=len(history.loss),
                seconds=round(time.time() - t0, 2))
