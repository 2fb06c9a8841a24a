"""The paper's scenes as reusable builders (demos, tests, benchmarks and `tigradsim fit` load them from here).

Modules:
- ``tigradsim.scenes.rigid_push``: rigid shapes on the ground with a known push, their mass from video (Table 1:
  ``PushScene``, ``mass_trials`` over the five objects, truths and guesses from a seed).
- ``tigradsim.scenes.rigid_contact``: the dropped, bouncing, pushed box, its mass, ke, kd, kf, mu from video
  (Table 2: ``BounceBoxScene``, ``draw``, ``contact_trials``).
- ``tigradsim.scenes.rigid_bounce``: a box (or OBJ mesh) thrown onto the ground with spin (``BounceScene``,
  ``bounce_metrics``).
- ``tigradsim.scenes.ramp_slide``: a box and particles sliding down a ramp (a plane collider) onto the ground,
  and the ramp's mu from the box's silhouettes (``RampScene``, ``fit_ramp_mu``).
- ``tigradsim.scenes.rigid_pose_fit``: an ellipsoid's pose from one image through the renderer (``PoseScene``).
- ``tigradsim.scenes.soft``: the soft ball (tet FEM), its mu, lam or per-particle masses from video (Table 3:
  ``SoftBallFit.trials``, ``BallFitSchedule``); ``tigradsim.scenes.soft_bounce``: the ball of any tet material
  bouncing (``bouncing_ball``, ``simulate_bounce``).
- ``tigradsim.scenes.cloth``: a thrown cloth's per-particle initial velocities from video (Table 3:
  ``ThrownClothFit.trials``, ``ClothFitSchedule``); ``tigradsim.scenes.cloth_drape``: the flag in the wind or
  the dropped cloth (``drape``, ``simulate``).
- ``tigradsim.scenes.springs``: the mass-spring lattice thrown so its centre of mass lands on a target
  (``LatticeThrow``).
- ``tigradsim.scenes.reparam``, ``tigradsim.scenes.staging``: the per-particle field reparametrisations and the
  Adam-then-BFGS stages those fits use.
- ``tigradsim.scenes.control_fem``: the soft gear and the walker trained from pixels (per-tet activation
  policies; ``gear_task``, ``walker_task``); ``tigradsim.scenes.control_cloth``: the cloth throw
  (``cloth_throw_task``); ``tigradsim.scenes.control``: their shared protocol (``ControlTask.run``), flags, report.
- ``tigradsim.scenes.trial_report``: the multi-trial fits' report (trial 0's plots, one labelled row per trial in
  trials.gif) and timing fields.
- ``tigradsim.scenes.shapes``: the scenes' procedural meshes (``tet_gear``, ``tet_walker``, ``tet_cells``) and the
  render demo's turntable.
"""
