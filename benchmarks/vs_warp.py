"""tigradsim against NVIDIA Warp 1.9.1 (`warp.sim`, SemiImplicitIntegrator + wp.Tape), side by side in one run.

    pip install -e .[bench]          # warp-lang==1.9.1
    python benchmarks/vs_warp.py [--scenes fem16,fem32,cloth32,cloth64,rigid1,rigid64,pile64,cloth64_sphere,
                                  ball3k_box,ball5k_box] [--repeat 3]
                                 [--arch cpu] [--scale 1] [--tiny] [--libraries tigradsim,warp]
                                 [--grads named|all]

Scenes (f32; sizes, dt, steps and constants of bench_fem.py / bench_cloth.py / bench_rigid.py):
  fem16, fem32   tet_box grids of 16x8x8 and 32x16x16 cells (5,120 / 40,960 tets, 5 per cell),
                 2 x 1 x 1 m at y = 0.2, stable neo-Hookean mu = lam = 1e4 Pa, density 1000,
                 thrown down at (0.5, -1, 0) m/s onto the ground (ke 1e4, kd 1, kf 10, mu 0.5),
                 200 steps of 1 ms.
  cloth32, cloth64  cloth_grid 32x32 / 64x64 cells, 1 m square at y = 0.6, membrane mu 10, lam 20,
                 density 1 kg/m^2, dihedral bending 1e-4 N m/rad^2 per edge (damping 1e-6), ground
                 ke 1e3, kd 1, kf 10, mu 0.5 (evaluated every step; the cloth does not land within
                 the run, as in bench_cloth.py: at 64x64, dt = 1 ms is past the explicit limit of that
                 contact for the light grid corners), velocity (0, -0.5, 0.2) plus a 1 m/s downward
                 bump at the centre (so it stretches and bends), 200 steps of 1 ms.
  rigid1, rigid64  0.2 m boxes, density 100, random orientations, sliding and tumbling onto the
                 ground (ke 1e4, kd 10, kf 10, mu 0.5), 1,920 steps of 1/960 s.  The boxes never meet, and
                 body-body contact is off in both (tigradsim: each box its own contact group).
  pile64         64 boxes of 0.1 m (density 100, random orientations, a 4 x 4 x 4 lattice 0.18 m apart) dropped
                 into a bin: the ground and 4 walls 0.74 m apart, with body-body contact (the same ke 1e4, kd 10,
                 kf 10, mu 0.5 everywhere), 400 steps of 1 ms: they land and pile up.  The walls are static
                 box shapes in both (tigradsim: `add_collider("box", ...)`; Warp: add_shape_box on no body).
                   cloth64_sphere  a static sphere collider (`SceneBuilder.add_collider("sphere", ...)`; Warp: add_shape_sphere
                 on no body, its particle-shape contact), radius 0.3 m at (0, 0.3, 0), no ground; cloth64's
                 cloth (same membrane, bending, density) flat at y = 0.65 with velocity (0.2, -1, 0): it lands
                 on the sphere at about step 40 and rests on its top, its edges falling past it (0.4 m by
                 the end), 200 steps of 1 ms.  Contact ke 1e2, kd 0.1, kf 0.1, mu 0.5 (uncapped damping):
                 cloth64's ke 1e3, kd 1 would be past the explicit limit for its 0.24 g particles at 1 ms (the
                 cloth lands here, unlike cloth64's on the ground).
  ball3k_box     a static box collider, half extents (0.5, 0.1, 0.5) m at (0, 0.1, 0) (Warp: add_shape_box),
                 no ground; `meshes.tet_ball(0.2, 3)` (2,880 tets, 847 vertices: tet_ball's levels give 2,880
                 or 11,840 tets) centred at (0, 0.45, 0), fem16's material (stable neo-Hookean mu =
                 lam = 1e4 Pa, density 1000, undamped), thrown at (0.5, -1, 0) m/s onto the box (ke 1e4, kd 1,
                 kf 10, mu 0.5, uncapped damping): it lands at about step 45 and slides; 200 steps of 1 ms.
                 --scale s: tet_ball level 3 + round(log4 s).
  ball5k_box     ball3k_box with the 5k-tet ball of issue 46 item 7: `meshes.tet_ball(0.2, 3, prism_layers=2)`
                 (the same surface, 1,280 triangles; 4,800 tets, 1,171 vertices: two more level-2 shells inside).
Both libraries get the same mesh (Warp's particles, tets, triangles and bending edges are built from
tigradsim's arrays: same vertex order, same lumped masses, same contact radius), so their
trajectories are comparable vertex by vertex.

Where the laws are the same, and where they are made the same:
  * FEM: both use the stable neo-Hookean of Smith et al. with all nine entries of F in Ic, with the
    same (mu, lam).  Warp adds a volumetric damping term (k_damp dJ/dt) to the dF/dt damping, so the
    scenes run undamped (damping 0 in both).  Warp's kernels compute the damping terms anyway;
    tigradsim's forward kernel skips them where a tet's damping is 0, and so do its derivative kernels
    where the damping has no gradient (--grads below).
  * Cloth: the membrane P = mu F + lam (J - alpha) dJ/dF is the same law.  Warp's aerodynamics (current
    area, full force on every vertex) and its area damping differ from tigradsim's, so drag, lift and
    membrane damping are 0 in both (Warp evaluates them anyway; tigradsim's forward kernel skips the
    damping where it is 0 and the aerodynamics where drag and lift are, its derivative kernels too
    with --grads named).  Bending: Warp scales the
    dihedral force by the CURRENT edge length, tigradsim by nothing (k per edge); Warp gets
    edge_ke = k / (rest edge length), which agrees to first order in the edge strain.
  * Ground contact: tigradsim's ground uses damping="uncapped" (Warp's `jd = min(vn, 0) kd` while
    penetrating) and its default capped friction min(kf |vt|, mu fn) (Warp's particle friction).
  * Rigid: Warp's box-on-plane contact is its 8 corners, like tigradsim's vertex contacts, with the
    same uncapped damping; Warp's integrator gets angular_damping = 0 (tigradsim has none) and shape
    thickness 0.  In rigid1/rigid64 box-box contact is off in Warp (has_shape_collision=False) and in
    tigradsim (each box its own contact group): the boxes never meet, and with it on Warp tests all 2,016
    box pairs of rigid64 every step (pile64 has it on in both).  The gyroscopic terms differ (Warp
    explicit, tigradsim one implicit Newton step)
    but vanish for a cube (I = c 1).  The FRICTION LAWS DIFFER, and no setting of Warp's makes them
    equal: Warp's rigid friction is (vt / H(vt)) min(kf H(vt), mu fn) with the Huber norm
    H(vt) = |vt|^2 / 2 below friction_smoothing (default 1 m/s, kept) and
    friction_smoothing (|vt| - friction_smoothing / 2) above, so below 1 m/s its Coulomb branch
    gives 2 mu fn / |vt| (more than mu fn), and a small friction_smoothing makes it viscous
    (kf vt) with no practical cap; tigradsim's is min(kf |vt|, mu fn) along vt.  The rigid scenes'
    position difference is printed, flagged laws_agree = false: it is a different law's answer.
  * Collider contact (cloth64_sphere, ball3k_box, ball5k_box): Warp's particle-shape contact takes, once per step in
    `wp.sim.collide`, the closest point on the shape and its normal, and computes c = n.(x - p) - r: at the
    step's positions that is tigradsim's signed distance of the shape less the radius (sphere and box alike, so
    the same c and n); Warp averages the shape's ke, kd, kf, mu with model.soft_contact_*, set to the same
    values.  Damping: Warp's `min(vn, 0) kd` while c < 0, tigradsim's damping="uncapped".  The friction
    differs, and no setting of either makes it equal: Warp's cap is mu ke |c| (the elastic force alone),
    tigradsim's mu fn with fn = ke |c| + kd max(-vn, 0): they differ while a contact compresses (landing) and
    agree at rest and while it opens.  So laws_agree = false; the trajectories still agree to a few mm
    (max_position_diff_m, and max_mean_height_diff_m: the largest difference of the mean height over every
    step; tests/test_vs_warp_colliders.py compares them at smaller sizes).  Warp's contact buffer
    (soft_contact_max, 65,536 slots by default, all launched every step) is sized to the particle count.
  * Gravity 9.8 m/s^2 in both (Warp's default is 9.80665).
max_position_diff_m: the largest |x_tigradsim - x_warp| over every step and every particle (rigid:
every body's centre of mass), from the rollouts timed (f32 both); particle scenes also give each library's
final centroid (tigradsim_final_centroid_m, warp_final_centroid_m, the mean of the particles) and
max_mean_height_diff_m.

Timing: each scene runs in its own process; in it both libraries are compiled, then timed
alternately (tigradsim forward, tigradsim forward+backward, Warp forward, Warp forward+backward, and
again, --repeat times; a call shorter than 0.3 s is repeated within its turn to fill 0.3 s), the
fastest single call, in microseconds per step.  Forward: the rollout and the
loss (sum of final heights), no tape.  Forward+backward: the same under `tgs.tape` (`ti.ad.Tape` with a cheaper clearing) / `wp.Tape`
+ `tape.backward` + `tape.zero()` (the clearing `ti.ad.Tape` does on entry).  Warp steps are
`state.clear_forces(); [wp.sim.collide(...)]; integrator.simulate(...)` as in Warp's own examples;
Warp's CPU kernels run on one thread, tigradsim's as `tgs.init` decides (see runtime.serial_scatter and
exec.loops.element_path: on 2 cores, FEM element sets of 8,192+ elements (fem32) run on both, smaller ones on one, and
cloth on one at any size, in lanes from 1,024 triangles (cloth.CLOTH_PARTS_MIN_THREADS, CLOTH_LANES_MIN_TRIANGLES);
the JSON's tigradsim_element_paths says which).
ratio = Warp time / tigradsim time (> 1: tigradsim faster).

Gradients: the loss is differentiated with respect to the initial velocities (particle_qd0, rigid:
body_qd0).  --grads named (default) finalizes tigradsim's model with requires_grad naming just that
field, as a user fitting the initial velocity would: its derivative kernels then skip the terms whose
coefficients are 0 and have no gradient (FEM damping, cloth damping / drag / lift).  --grads all gives
every parameter a gradient (tigradsim's figures before 2026-12-04), so the zero-coefficient terms are
differentiated too.  Warp's model has requires_grad=True either way: its adjoint kernels compute every
input's adjoint, needed or not, and it has no way to skip them.  Run both to see the difference.

--scale s multiplies element counts by about s (GPU runs: benchmarks/gpu_check.sh uses 10); finer
meshes need a smaller step, so at a scale other than 1 dt is halved until tigradsim's stability check
accepts it (stable_dt; the JSON's dt says which), for both libraries;
--tiny runs each scene at a toy size in a few steps (tests/test_benchmarks_smoke.py, with
--in-process: all scenes in one process instead of one process each).
The last stdout line is one JSON object:
    {"scenes": [{"scene": "fem16", "tigradsim_us": [fwd, fwd_bwd], "warp_us": [fwd, fwd_bwd],
                 "ratio": [fwd, fwd_bwd], "max_position_diff_m": d, ...}, ...], ...}
"""
import argparse
import json
import os
import time

import numpy as np

from _harness import PIN_THREADS, add_pin_threads_argument, run_child

SCENES = ("fem16", "fem32", "cloth32", "cloth64", "rigid1", "rigid64", "pile64", "cloth64_sphere", "ball3k_box",
          "ball5k_box")
GRAVITY = 9.8


# Whether both libraries integrate the same equations in a scene kind, and what differs (module docstring).
LAWS = {
    "fem": (True, "same stable neo-Hookean, lumped masses, uncapped-damping capped-friction ground; damping 0 "
                  "(Warp adds a volumetric damping term)"),
    "cloth": (True, "same membrane and dihedral bending; Warp scales bending by the current edge length, "
                    "tigradsim by the rest length (k / L0 given to Warp); no aerodynamics or membrane damping "
                    "(Warp's differ)"),
    "cloth_sphere": (False, "same membrane, bending and contact force except the friction cap while compressing: "
                            "Warp mu ke |c|, tigradsim mu (ke |c| + kd max(-vn, 0)); same at rest"),
    "ball_box": (False, "same neo-Hookean and contact force except the friction cap while compressing: "
                        "Warp mu ke |c|, tigradsim mu (ke |c| + kd max(-vn, 0)); same at rest"),
    "pile": (False, "friction differs as in rigid; box-box contact differs by design: Warp's is edge-based (the "
                    "closest point of each of the 12 edges to the other box), tigradsim's the 8 corners against the "
                    "other box"),
    "rigid": (False, "friction differs: Warp (vt / H(vt)) min(kf H(vt), mu fn) with a Huber norm H "
                     "(friction_smoothing 1 m/s), tigradsim min(kf |vt|, mu fn); contact points, damping, "
                     "integration agree (cubes: no gyroscopic term)"),
}


# The collider scenes (module docstring): contact constants, shapes and starts.
CLOTH_SPHERE = dict(radius=0.3, centre=(0.0, 0.3, 0.0), height=0.65, velocity=(0.2, -1.0, 0.0),
                    ke=1e2, kd=0.1, kf=0.1, mu=0.5)
BALL_BOX = dict(radius=0.2, centre=(0.0, 0.45, 0.0), velocity=(0.5, -1.0, 0.0), half=(0.5, 0.1, 0.5),
                box_centre=(0.0, 0.1, 0.0), ke=1e4, kd=1.0, kf=10.0, mu=0.5)


def scene_spec(scene, scale=1.0, tiny=False):
    """Sizes and step counts of a scene.  scale multiplies the element count by about `scale`."""
    if scene == "cloth64_sphere":
        n = 4 if tiny else max(2, int(round(64 * scale ** 0.5)))
        return dict(kind="cloth_sphere", n=n, dt=1e-3, steps=10 if tiny else 200, scale=scale)
    if scene in ("ball3k_box", "ball5k_box"):  # tet_ball resolution 3: 2,880 tets (4,800 with 2 prism layers)
        level = 1 if tiny else max(1, 3 + int(round(np.log(scale) / np.log(4))))
        return dict(kind="ball_box", resolution=level, prism_layers=2 if scene == "ball5k_box" else 0, dt=1e-3,
                    steps=10 if tiny else 200, scale=scale)
    kind = scene.rstrip("0123456789")
    if kind not in ("fem", "cloth", "rigid", "pile") or not scene[len(kind):]:
        raise ValueError(f"unknown scene {scene!r}; known: {SCENES}")
    size = int(scene[len(kind):])
    if kind == "fem":
        n = 2 if tiny else max(2, int(round(size * scale ** (1 / 3) / 2)) * 2)     # even: n x n/2 x n/2 cells
        return dict(kind=kind, n=n, dt=1e-3, steps=10 if tiny else 200, scale=scale)
    if kind == "cloth":
        n = 4 if tiny else max(2, int(round(size * scale ** 0.5)))
        return dict(kind=kind, n=n, dt=1e-3, steps=10 if tiny else 200, scale=scale)
    if kind == "rigid":
        count = min(size, 2) if tiny else max(1, int(round(size * scale)))
        return dict(kind=kind, count=count, dt=1.0 / 960, steps=20 if tiny else 1920, scale=scale)
    if kind == "pile":
        count = 8 if tiny else max(8, int(round(size * scale)))
        return dict(kind=kind, count=count, dt=1e-3, steps=20 if tiny else 400, scale=scale)
    raise ValueError(f"unknown scene {scene!r}; known: {SCENES}")


def stable_dt(report, model, dt):
    """`dt` [s] halved until tigradsim's stability check (`report`, tgs.stability_report) accepts
    it for `model`.  The scenes' dt is stable at --scale 1; finer meshes (--scale 10 on a GPU) have
    lighter particles and shorter edges, whose contact and elastic rates need a smaller step (fem32
    x 10 at dt = 1e-3 s diverges at step 161).  Used at --scale other than 1 only: at 1, the scenes
    keep the dt of the CPU benchmarks (cloth64's light corners are past the contact limit there,
    harmlessly: the cloth does not land within the run).  Both libraries use the same dt."""
    while not report(model, dt).ok:
        dt *= 0.5
    return dt


def rigid_bodies(count):
    """bench_rigid.py's boxes: (positions, unit quaternions (x, y, z, w)), same seed."""
    side = int(np.ceil(np.sqrt(count)))
    rng = np.random.default_rng(0)
    pos, rot = [], []
    for k in range(count):
        q = rng.normal(size=4)
        pos.append((0.5 * (k % side), 0.4 + 0.05 * k / count, 0.5 * (k // side)))
        rot.append(q / np.linalg.norm(q))
    return np.array(pos), np.array(rot)


def cloth_velocity(v):
    """(V, 3) initial cloth velocity [m/s]: (0, -0.5, 0.2) plus a downward bump of 1 m/s at the
    centre (sin x sin), so the membrane stretches and bends (a uniform velocity keeps the grid flat
    and unstrained in free fall: no elastic force to compare, and both give the same positions
    bit for bit)."""
    u = (v[:, 0] + 0.5) * np.pi
    w = (v[:, 2] + 0.5) * np.pi
    vel = np.tile([0.0, -0.5, 0.2], (len(v), 1))
    vel[:, 1] -= np.sin(u) * np.sin(w)
    return vel


def pile_bodies(count):
    """pile64's boxes: (positions, unit quaternions (x, y, z, w)): a lattice of side ceil(count^(1/3)), 0.18 m
    apart (more than a box's diagonal, 0.173 m: no two start inside each other), centred over the bin, from 0.1 m
    up; random orientations (seed 1)."""
    side = int(np.ceil(count ** (1 / 3)))
    rng = np.random.default_rng(1)
    pos, rot = [], []
    for k in range(count):
        i, j, l = k % side, (k // side) % side, k // (side * side)
        q = rng.normal(size=4)
        pos.append((0.18 * (i - (side - 1) / 2), 0.1 + 0.18 * l, 0.18 * (j - (side - 1) / 2)))
        rot.append(q / np.linalg.norm(q))
    return np.array(pos), np.array(rot)


# pile64's bin: 4 walls (centre, half extents) around a 0.74 m square floor (the ground)
PILE = dict(half=0.05, density=100.0,
            walls=[((0.42, 0.2, 0.0), (0.05, 0.2, 0.42)), ((-0.42, 0.2, 0.0), (0.05, 0.2, 0.42)),
                   ((0.0, 0.2, 0.42), (0.37, 0.2, 0.05)), ((0.0, 0.2, -0.42), (0.37, 0.2, 0.05))])


RIGID = dict(half=0.1, density=100.0, ke=1e4, kd=10.0, kf=10.0, mu=0.5,
             velocity=(0.5, 0.0, 0.2), angular_velocity=(1.0, 2.0, 0.5))


# ----------------------------------------------------------------------------- tigradsim
class TigradsimCase:
    """One scene in tigradsim: a requires_grad model, its Simulator (every step stored) and a
    loss kernel (sum of the final heights)."""

    name = "tigradsim"

    def __init__(self, spec, arch, grads="named"):
        import taichi as ti
        import tigradsim as tgs
        self.ti, self.tgs, self.spec = ti, tgs, spec
        b = tgs.SceneBuilder(gravity=(0.0, -GRAVITY, 0.0))
        kind = spec["kind"]
        if kind == "fem":
            n = spec["n"]
            b.add_ground(ke=1e4, kd=1.0, kf=10.0, mu=0.5, damping="uncapped")
            mesh = tgs.meshes.tet_box(n, n // 2, n // 2, size=(2.0, 1.0, 1.0), origin=(0.0, 0.2, 0.0))
            b.add_soft_mesh(mesh, params={"mu": 1e4, "lam": 1e4, "damping": 0.0}, density=1000.0,
                            velocity=(0.5, -1.0, 0.0))
        elif kind == "cloth":
            n = spec["n"]
            b.add_ground(ke=1e3, kd=1.0, kf=10.0, mu=0.5, damping="uncapped")
            v, f = tgs.meshes.cloth_grid(n, n, cell=1.0 / n, origin=(-0.5, 0.6, -0.5), plane="xz")
            b.add_cloth(v, f, material="membrane", params={"mu": 10.0, "lam": 20.0, "damping": 0.0}, density=1.0,
                        bending_stiffness=1e-4, bending_damping=1e-6, drag=0.0, lift=0.0, velocity=cloth_velocity(v))
        elif kind == "cloth_sphere":
            n, c = spec["n"], CLOTH_SPHERE
            b.add_collider("sphere", c["radius"], c["centre"], ke=c["ke"], kd=c["kd"], kf=c["kf"], mu=c["mu"],
                           damping="uncapped")
            v, f = tgs.meshes.cloth_grid(n, n, cell=1.0 / n, origin=(-0.5, c["height"], -0.5), plane="xz")
            b.add_cloth(v, f, material="membrane", params={"mu": 10.0, "lam": 20.0, "damping": 0.0}, density=1.0,
                        bending_stiffness=1e-4, bending_damping=1e-6, drag=0.0, lift=0.0, velocity=c["velocity"])
        elif kind == "ball_box":
            c = BALL_BOX
            b.add_collider("box", c["half"], c["box_centre"], ke=c["ke"], kd=c["kd"], kf=c["kf"], mu=c["mu"],
                           damping="uncapped")
            mesh = tgs.meshes.tet_ball(c["radius"], spec["resolution"], center=c["centre"],
                                       prism_layers=spec["prism_layers"])
            b.add_soft_mesh(mesh, params={"mu": 1e4, "lam": 1e4, "damping": 0.0}, density=1000.0,
                            velocity=c["velocity"])
        elif kind == "pile":
            r = RIGID
            b.add_ground(ke=r["ke"], kd=r["kd"], kf=r["kf"], mu=r["mu"], damping="uncapped")
            v, f = tgs.meshes.box_surface((2 * PILE["half"],) * 3)
            for p, q in zip(*pile_bodies(spec["count"])):
                b.add_rigid_body(v, f, density=PILE["density"], position=p, rotation=q)
            for centre, half in PILE["walls"]:      # static box colliders, 1 mm above the ground (as Warp's)
                b.add_collider("box", half, (centre[0], half[1] + 1e-3, centre[2]), ke=r["ke"], kd=r["kd"], kf=r["kf"],
                               mu=r["mu"], damping="uncapped")
        else:
            r = RIGID
            b.add_ground(ke=r["ke"], kd=r["kd"], kf=r["kf"], mu=r["mu"], damping="uncapped")
            v, f = tgs.meshes.box_surface((2 * r["half"],) * 3)
            for p, q in zip(*rigid_bodies(spec["count"])):
                b.add_rigid_body(v, f, density=r["density"], position=p, rotation=q, velocity=r["velocity"],
                                 angular_velocity=r["angular_velocity"])
            # the boxes never meet, and Warp's box-box contact is off (has_shape_collision=False): none here either
            b.contact_groups = {"bodies": np.arange(spec["count"])}
        self.grads = ["body_qd0" if kind in ("rigid", "pile") else "particle_qd0"] if grads == "named" else "all"
        self.model = model = b.finalize(requires_grad=set(self.grads) if grads == "named" else True)
        self.dt = spec["dt"] if spec["scale"] == 1 else stable_dt(tgs.stability_report, model, spec["dt"])
        self.sim = sim = tgs.Simulator(model, dt=self.dt, steps=spec["steps"])
        self.loss = ti.field(float, shape=(), needs_grad=True)
        slot = sim.slot(spec["steps"])
        loss = self.loss

        if kind in ("rigid", "pile"):
            @ti.kernel
            def objective():
                for b in range(model.body_count):
                    loss[None] += sim.state.body_q[slot, b][1]
        else:
            @ti.kernel
            def objective():
                for i in range(model.particle_count):
                    loss[None] += sim.state.particle_q[slot, i].y

        self.objective = objective

    def forward(self):
        self.sim.run()
        self.objective()
        self.ti.sync()

    def forward_backward(self):
        self.loss[None] = 0.0
        with self.tgs.tape(self.loss):          # ti.ad.Tape, its clearing of every gradient cheaper
            self.sim.run()
            self.objective()
        self.ti.sync()

    def trajectory(self):
        """(steps + 1, N, 3) positions [m]: particles, or the bodies' centres of mass."""
        if self.spec["kind"] == "pile":              # the boxes (the walls are colliders: not bodies)
            return self.sim.state.body_q.to_numpy()[:, :self.spec["count"], :3].astype(np.float64)
        if self.spec["kind"] == "rigid":
            return self.sim.state.body_q.to_numpy()[..., :3].astype(np.float64)
        return self.sim.state.particle_q.to_numpy().astype(np.float64)

    def gradient_finite(self):
        g = self.model.particle_qd0.grad.to_numpy() if self.spec["kind"] not in ("rigid", "pile") \
            else self.model.body_qd0.grad.to_numpy()
        return bool(np.all(np.isfinite(g)) and np.any(g != 0))

    def info(self):
        m = self.model
        out = {"particles": int(m.particle_count)}
        for key, name in (("tet_count", "tets"), ("cloth_triangle_count", "triangles"),
                          ("cloth_edge_count", "bending_edges"), ("body_count", "bodies")):
            if getattr(m, key, 0):
                out[name] = int(getattr(m, key))
        return out


# ----------------------------------------------------------------------------- Warp
class WarpCase:
    """The same scene in warp.sim, built from the tigradsim model's arrays (same vertex order)."""

    name = "warp"

    def __init__(self, spec, tgs_case, device):
        import warp as wp
        import warp.sim  # noqa: F401  (deprecated in 1.9, still shipped)
        self.wp, self.spec, self.device = wp, spec, device
        m = tgs_case.model
        kind = spec["kind"]
        builder = wp.sim.ModelBuilder(up_vector=(0.0, 1.0, 0.0), gravity=-GRAVITY)
        if kind not in ("rigid", "pile"):
            q0 = m.get("particle_q0").astype(np.float64)
            qd0 = m.get("particle_qd0").astype(np.float64)
            mass = m.get("particle_mass").astype(np.float64)
            radius = m.particle_radius.to_numpy().astype(np.float64)
            for x, v, ms, r in zip(q0, qd0, mass, radius):
                builder.add_particle(tuple(x), tuple(v), float(ms), radius=float(r))
        if kind in ("fem", "ball_box"):
            for t in m.tet_indices.to_numpy():
                builder.add_tetrahedron(*map(int, t), k_mu=1e4, k_lambda=1e4, k_damp=0.0)
            ke, kd, kf, mu = 1e4, 1.0, 10.0, 0.5
        if kind in ("cloth", "cloth_sphere"):
            tri = m.cloth_indices.to_numpy()
            builder.add_triangles(tri[:, 0], tri[:, 1], tri[:, 2], tri_ke=[10.0] * len(tri), tri_ka=[20.0] * len(tri),
                                  tri_kd=[0.0] * len(tri), tri_drag=[0.0] * len(tri), tri_lift=[0.0] * len(tri))
            quads = m.cloth_bend_indices.to_numpy()
            rest_len = np.linalg.norm(q0[quads[:, 3]] - q0[quads[:, 2]], axis=1)
            builder.add_edges(quads[:, 0], quads[:, 1], quads[:, 2], quads[:, 3],
                              rest=m.get("cloth_bend_rest_angle").astype(np.float64),
                              edge_ke=list(1e-4 / rest_len), edge_kd=list(1e-6 / rest_len))
            ke, kd, kf, mu = 1e3, 1.0, 10.0, 0.5
        if kind in ("cloth_sphere", "ball_box"):
            # the static collider: a shape on no body (-1); Warp averages the shape's ke ... mu with
            # model.soft_contact_*, given the same values below, so each is the collider's
            c = CLOTH_SPHERE if kind == "cloth_sphere" else BALL_BOX
            ke, kd, kf, mu = c["ke"], c["kd"], c["kf"], c["mu"]
            shape = dict(ke=ke, kd=kd, kf=kf, mu=mu, thickness=0.0, has_ground_collision=False,
                         has_shape_collision=False)
            # Warp launches its particle-shape contact kernel over every slot of its contact buffer each step
            # (default 65,536, each an early return past the count): sized to what can occur here, one contact
            # per particle with the one shape (within soft_contact_margin 0.2 m, Warp's default)
            builder.soft_contact_max = len(q0)
            if kind == "cloth_sphere":
                builder.add_shape_sphere(-1, pos=c["centre"], radius=c["radius"], **shape)
            else:
                builder.add_shape_box(-1, pos=c["box_centre"], hx=c["half"][0], hy=c["half"][1], hz=c["half"][2],
                                      **shape)
        if kind == "rigid":
            r = RIGID
            ke, kd, kf, mu = r["ke"], r["kd"], r["kf"], r["mu"]
            for p, q in zip(*rigid_bodies(spec["count"])):
                body = builder.add_body(origin=wp.transform(wp.vec3(*p), wp.quat(*q)))
                builder.add_shape_box(body, hx=r["half"], hy=r["half"], hz=r["half"], density=r["density"],
                                      ke=ke, kd=kd, kf=kf, mu=mu, thickness=0.0, has_shape_collision=False)
                builder.body_qd[body] = wp.spatial_vector(*r["angular_velocity"], *r["velocity"])
            builder.set_ground_plane(ke=ke, kd=kd, kf=kf, mu=mu)
        if kind == "pile":
            r = RIGID
            ke, kd, kf, mu = r["ke"], r["kd"], r["kf"], r["mu"]
            for p, q in zip(*pile_bodies(spec["count"])):
                body = builder.add_body(origin=wp.transform(wp.vec3(*p), wp.quat(*q)))
                builder.add_shape_box(body, hx=PILE["half"], hy=PILE["half"], hz=PILE["half"], density=PILE["density"],
                                      ke=ke, kd=kd, kf=kf, mu=mu, thickness=0.0)
            for centre, half in PILE["walls"]:
                builder.add_shape_box(-1, pos=wp.vec3(centre[0], half[1] + 1e-3, centre[2]), hx=half[0], hy=half[1],
                                      hz=half[2], ke=ke, kd=kd, kf=kf, mu=mu, thickness=0.0)
            builder.set_ground_plane(ke=ke, kd=kd, kf=kf, mu=mu)
        self.model = model = builder.finalize(device=device, requires_grad=True)
        model.ground = kind in ("fem", "cloth", "rigid", "pile")     # the collider scenes have no ground
        model.soft_contact_ke, model.soft_contact_kd, model.soft_contact_kf, model.soft_contact_mu = ke, kd, kf, mu
        # No particle-particle contact in these scenes (tigradsim has none): without this, Warp launches
        # its hash-grid particle kernel every step (an early return per particle).
        model.particle_max_radius = 0.0
        self.integrator = wp.sim.SemiImplicitIntegrator(angular_damping=0.0)
        self.control = model.control()
        self.states = [model.state() for _ in range(spec["steps"] + 1)]
        self.loss = wp.zeros(1, dtype=float, device=device, requires_grad=True)
        self.rigid = kind in ("rigid", "pile")
        # contact generation every step: rigid contacts, and the particles' contacts with the collider shape
        self.collide = kind in ("rigid", "pile", "cloth_sphere", "ball_box")
        self._kernels()

    def _kernels(self):
        wp = self.wp
        if self.rigid:
            @wp.kernel
            def height(q: wp.array(dtype=wp.transform), loss: wp.array(dtype=float)):
                tid = wp.tid()
                wp.atomic_add(loss, 0, wp.transform_get_translation(q[tid])[1])
        else:
            @wp.kernel
            def height(q: wp.array(dtype=wp.vec3), loss: wp.array(dtype=float)):
                tid = wp.tid()
                wp.atomic_add(loss, 0, q[tid][1])
        self.height = height

    def _rollout(self, taped):
        wp, model, dt = self.wp, self.model, self.spec["dt"]
        for i in range(self.spec["steps"]):
            s0, s1 = self.states[i], self.states[i + 1]
            s0.clear_forces()
            if self.collide:
                wp.sim.collide(model, s0, requires_grad=taped)
            self.integrator.simulate(model, s0, s1, dt, self.control)
        last = self.states[-1]
        q = last.body_q if self.rigid else last.particle_q
        wp.launch(self.height, dim=len(q), inputs=[q, self.loss], device=self.device)

    def forward(self):
        self.loss.zero_()
        self._rollout(taped=False)
        self.wp.synchronize_device(self.device)

    def forward_backward(self):
        wp = self.wp
        self.loss.zero_()
        tape = wp.Tape()
        with tape:
            self._rollout(taped=True)
        tape.backward(self.loss)
        tape.zero()
        wp.synchronize_device(self.device)

    def trajectory(self):
        if self.rigid:
            return np.stack([s.body_q.numpy()[:, :3] for s in self.states]).astype(np.float64)
        return np.stack([s.particle_q.numpy() for s in self.states]).astype(np.float64)


# ----------------------------------------------------------------------------- timing
def time_alternating(cases, repeat, min_block_s=0.3):
    """Best seconds of one forward and one forward_backward call per case, the cases taking turns
    (so that load on the shared machine falls on all of them alike).  One untimed compile run
    first; each round then calls each function as often as fills `min_block_s` (at least once:
    a run of a few milliseconds, like tigradsim's fused rigid rollout, is otherwise decided by one
    context switch), `repeat` rounds, and keeps the fastest single call."""
    counts = {}
    for c in cases:
        for k, fn in enumerate((c.forward, c.forward_backward)):
            fn()                                       # compile
            t0 = time.perf_counter()
            fn()
            counts[c.name, k] = max(1, min(50, int(min_block_s / max(time.perf_counter() - t0, 1e-6))))
    best = {c.name: [float("inf"), float("inf")] for c in cases}
    for _ in range(repeat):
        for c in cases:
            for k, fn in enumerate((c.forward, c.forward_backward)):
                for _ in range(counts[c.name, k]):
                    t0 = time.perf_counter()
                    fn()
                    best[c.name][k] = min(best[c.name][k], time.perf_counter() - t0)
    return best


def run_scene(scene, arch, repeat, scale, tiny, libraries, grads="named", pin_threads="auto"):
    import tigradsim as tgs
    tgs.init(arch=arch, precision="f32", pin_threads=PIN_THREADS[pin_threads])
    spec = scene_spec(scene, scale, tiny)
    cases = [TigradsimCase(spec, arch, grads)]
    spec["dt"] = cases[0].dt                           # halved where the scene needs it (stable_dt)
    if "warp" in libraries:
        import warp as wp
        wp.config.quiet = True
        wp.init()
        device = "cuda:0" if arch in ("cuda", "gpu") else "cpu"
        cases.append(WarpCase(spec, cases[0], device))
    best = time_alternating(cases, repeat, min_block_s=0.0 if tiny else 0.3)
    us = {name: [round(t / spec["steps"] * 1e6, 2) for t in ts] for name, ts in best.items()}
    out = {"scene": scene, **{k: v for k, v in spec.items() if k != "kind"}, **cases[0].info(),
           "tigradsim_us": us["tigradsim"], "warp_us": us.get("warp"), "ratio": None, "max_position_diff_m": None,
           "tigradsim_gradient_finite": cases[0].gradient_finite(), "tigradsim_grads": cases[0].grads,
           "tigradsim_serial_scatter": tgs.runtime.serial_scatter(),
           # Taichi's CPU workers, one per CPU (tigradsim.core.affinity), or why not
           "tigradsim_pinned_cpus": sorted(tgs.pinned_threads()["pinned"].values()),
           "tigradsim_unpinned_because": tgs.pinned_threads()["reason"],
           # how each element loop ran ("serial", "parts", ...: exec.loops.element_path, chosen per element set)
           "tigradsim_element_paths": sorted({t.path for t in cases[0].model.force_terms if hasattr(t, "path")})}
    if len(cases) == 2:
        out["ratio"] = [round(w / t, 2) for w, t in zip(us["warp"], us["tigradsim"])]
        a, b = cases[0].trajectory(), cases[1].trajectory()
        out["max_position_diff_m"] = float(np.abs(a - b).max())
        out["laws_agree"], out["law_note"] = LAWS[spec["kind"]]
        if spec["kind"] not in ("rigid", "pile"):      # mean height and centroid: the figures a different law moves least
            for name, traj in (("tigradsim", a), ("warp", b)):
                out[f"{name}_final_centroid_m"] = [round(float(x), 6) for x in traj[-1].mean(0)]
            out["max_mean_height_diff_m"] = float(np.abs(a[..., 1].mean(1) - b[..., 1].mean(1)).max())
        out["max_displacement_m"] = float(np.abs(a - a[:1]).max())    # scale for the difference above
    return out


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--scenes", default=",".join(SCENES))
    p.add_argument("--repeat", type=int, default=3, help="timed rounds per library (best of)")
    p.add_argument("--arch", default="cpu", help="tigradsim arch; Warp runs on cuda:0 for cuda/gpu, else cpu")
    p.add_argument("--scale", type=float, default=1.0, help="element counts x about this")
    p.add_argument("--tiny", action="store_true", help="toy sizes and 10-20 steps (smoke test)")
    p.add_argument("--libraries", default="tigradsim,warp", help="tigradsim,warp or tigradsim alone")
    p.add_argument("--grads", choices=("named", "all"), default="named",
                   help="tigradsim's model: gradients for the initial velocities only (named) or every parameter")
    p.add_argument("--in-process", action="store_true",
                   help="run every scene in this process (faster start; peak memory is then shared)")
    add_pin_threads_argument(p)
    p.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    libraries = args.libraries.split(",")
    if args.child:
        print(json.dumps(run_scene(args.child, args.arch, args.repeat, args.scale, args.tiny, libraries, args.grads,
                                   args.pin_threads)))
        return
    for s in args.scenes.split(","):
        scene_spec(s)                                  # unknown names fail here, before any run
    from tigradsim.core.runtime import _ARCHS
    if args.arch not in _ARCHS:
        raise SystemExit(f"--arch: expected one of {sorted(_ARCHS)}, got {args.arch!r}")
    if "tigradsim" not in libraries or not set(libraries) <= {"tigradsim", "warp"}:
        raise SystemExit(f"--libraries: expected tigradsim or tigradsim,warp, got {args.libraries!r} "
                         "(Warp's scene is built from tigradsim's)")
    if "warp" in libraries:
        try:
            import warp  # noqa: F401
        except ImportError:
            raise SystemExit("vs_warp.py: warp-lang is not installed (pip install -e .[bench], or "
                             "--libraries tigradsim)") from None
    results = []
    for scene in args.scenes.split(","):
        child_args = [scene, "--arch", args.arch, "--repeat", args.repeat, "--scale", args.scale,
                      "--libraries", args.libraries, "--grads", args.grads, "--pin-threads", args.pin_threads] \
            + (["--tiny"] if args.tiny else [])
        if args.in_process:
            r = run_scene(scene, args.arch, args.repeat, args.scale, args.tiny, libraries, args.grads, args.pin_threads)
        else:
            try:
                r = run_child(os.path.abspath(__file__), child_args)
            except RuntimeError as e:                  # one failed scene: say so, run the others
                lines = [ln for ln in str(e).splitlines() if ln.strip()]
                r = {"scene": scene, "error": lines[-1] if lines else str(e)}
        print(json.dumps(r), flush=True)
        results.append(r)
    print(json.dumps({"benchmark": "vs_warp", "arch": args.arch, "precision": "f32", "scale": args.scale,
                      "grads": args.grads,
                      "tiny": args.tiny, "repeat": args.repeat, "cpu_count": os.cpu_count(), "scenes": results}))
    failed = [r["scene"] for r in results if "error" in r]
    if failed:
        raise SystemExit(f"vs_warp.py: scenes failed: {', '.join(failed)} (their entries hold the error)")


if __name__ == "__main__":
    main()
