"""The paper's scenes as reusable builders (demos, tests, benchmarks and `tigradsim fit` load them from here).

Modules:
- ``tigradsim.scenes.rigid``: rigid shapes on the ground with a push (mass identification, five objects),
  the bouncing box (contact law ke/kd/kf/mu and mass), the rigid bounce and the pose fit.
- ``tigradsim.scenes.soft``: the soft ball (tet FEM) bouncing, and its mu, lam or per-particle masses from video.
- ``tigradsim.scenes.cloth``: the cloth flag in the wind / dropped, and a thrown cloth's initial velocities from video.
- ``tigradsim.scenes.springs``: the mass-spring lattice thrown so its centre of mass lands on a target.
- ``tigradsim.scenes.reparam``, ``tigradsim.scenes.staging``: the per-particle field reparametrisations and the
  Adam-then-BFGS stages those fits use.
"""
