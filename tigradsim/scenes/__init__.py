"""The paper's scenes as reusable builders (demos, tests, benchmarks and `tigradsim fit` load them from here).

Modules:
- ``tigradsim.scenes.rigid``: rigid shapes on the ground with a push (mass identification, five objects),
  the bouncing box (contact law ke/kd/kf/mu and mass), the rigid bounce and the pose fit.
"""
