"""Foundation: integrator exactness, gradients of every particle parameter,
checkpointing, validation mode, and errors on bad input."""
import numpy as np
import pytest
import taichi as ti

import tigradsim as tgs
from atomic_order import assert_same_sums


def small_scene(contact=True, sliding=False, requires_grad=True):
    """A 3x2x2 spring block; with `sliding` it rests on the ground moving sideways."""
    g = np.stack(np.meshgrid(np.arange(3), np.arange(2), np.arange(2), indexing="ij"), -1).reshape(-1, 3) * 0.2
    b = tgs.SceneBuilder()
    if sliding:
        pos = g + [0.0, 0.0195, 0.0]                     # just inside the contact radius
        # vy != 0: min(v_n, 0) has a kink at exactly v_n = 0, where the one-sided
        # finite difference and the Tape's branch legitimately differ.
        vel = np.tile([1.5, -0.05, 0.4], (len(g), 1))
    else:
        pos = g + [0.0, 0.05 if contact else 1.0, 0.0]
        vel = np.tile([1.0, -0.5, 0.3], (len(g), 1)) + np.random.default_rng(1).normal(size=(len(g), 3)) * 0.3
    b.add_particles(pos, velocities=vel, masses=np.linspace(0.5, 1.5, len(g)), radius=0.02)
    pairs = [(i, j) for i in range(len(g)) for j in range(i + 1, len(g)) if np.linalg.norm(g[i] - g[j]) < 0.3]
    b.add_springs(pairs, stiffness=500.0, damping=2.0)
    if contact:
        b.add_ground(ke=2e3, kd=5.0, kf=50.0, mu=0.4)
    return b.finalize(requires_grad=requires_grad)


def rollout_loss(model, steps=60, checkpoint_every=None, external_force=False, fuse_steps=None):
    sim = tgs.Simulator(model, dt=2e-3, steps=steps, checkpoint_every=checkpoint_every, external_force=external_force,
                        fuse_steps=fuse_steps)
    rec = tgs.ParticleRecorder(sim, every=20)
    com = tgs.CenterOfMassRecorder(sim, every=30)
    rng = np.random.default_rng(0)
    # Targets near the trajectory keep the loss small next to its derivatives,
    # so finite differences are not swamped by round-off.
    sim.run()
    pos_loss = tgs.MSELoss(rec.values, rec.numpy() + rng.normal(size=(rec.frames, rec.count, 3)) * 0.05)
    com_loss = tgs.MSELoss(com.com, com.numpy() + rng.normal(size=(com.frames, 3)) * 0.05)
    total = ti.field(float, shape=(), needs_grad=True)

    @ti.kernel
    def add():
        total[None] += pos_loss.value[None] + 0.5 * com_loss.value[None]

    def run():
        pos_loss.value[None] = 0
        com_loss.value[None] = 0
        sim.run()
        pos_loss()
        com_loss()
        add()

    return sim, run, total


def test_integrator_exact(f64):
    b = tgs.SceneBuilder(gravity=(0, -10, 0))
    b.add_particle((0, 1, 0), mass=1.0)
    sim = tgs.Simulator(b.finalize(), dt=1 / 30, steps=3)
    sim.run()
    qd = sim.state.particle_qd.to_numpy()[:, 0, 1]
    drop = 1 - sim.state.particle_q.to_numpy()[:, 0, 1]
    np.testing.assert_allclose(qd[1:], [-1 / 3, -2 / 3, -1.0], rtol=1e-12)
    np.testing.assert_allclose(drop[1:], [0.0111111111, 0.0333333333, 0.0666666667], rtol=1e-8)


PARTICLE_PARAMS = ["particle_q0", "particle_qd0", "particle_mass", "spring_stiffness", "spring_damping",
                   "spring_rest_length", "gravity"]
CONTACT_PARAMS = ["ground_ke", "ground_kd", "ground_kf", "ground_mu"]


@pytest.mark.parametrize("scene", ["free", "bounce", "slide"])
def test_gradients_every_parameter(f64, scene):
    model = small_scene(contact=scene != "free", sliding=scene == "slide")
    sim, run, loss = rollout_loss(model)
    names = PARTICLE_PARAMS + (CONTACT_PARAMS if scene != "free" else [])
    if scene == "slide":
        names.remove("ground_kf")   # fully in the Coulomb regime: kf has no effect (zero gradient)
    for name in names:
        report = tgs.check_gradient(run, loss, [getattr(model, name)], n_dirs=2, eps=1e-5, rtol=1e-5)
        assert report.ok, f"{scene} / {name}:\n{report}"
        assert max(abs(a) for a in report.analytic) > 1e-9, f"{name}: gradient is zero"


def test_slide_is_friction_limited(f64):
    """The sliding scene really slides (Coulomb cap active), so its friction gradients are tested."""
    model = small_scene(sliding=True)
    sim = tgs.Simulator(model, dt=2e-3, steps=60)
    sim.run()
    vx = sim.state.particle_qd.to_numpy()[:, :, 0].mean(axis=1)
    decel = (vx[10] - vx[50]) / (40 * 2e-3)
    assert vx[50] > 0.5 and 0.5 * 0.4 * 9.8 < decel < 1.5 * 0.4 * 9.8


def test_external_force_gradient(f64):
    model = small_scene()
    sim, run, loss = rollout_loss(model, external_force=True)
    f = np.zeros((sim.steps, model.particle_count, 3))
    f[:10, :3] = [2.0, 1.0, 0.0]
    sim.particle_f_ext.from_numpy(f)
    report = tgs.check_gradient(run, loss, [sim.particle_f_ext], n_dirs=2, scale=[1.0], eps=1e-5, rtol=1e-5)
    assert report.ok, str(report)


def test_checkpointed_and_parallel_gradients_equal_full(f64):
    """Checkpointing, and parallel (atomic) instead of serial spring scatter, give the same gradients."""
    grads = {}
    for ck, scatter in ((None, "serial"), (7, "serial"), (25, "serial"), (None, "parallel")):
        tgs.runtime.set_scatter(scatter)
        model = small_scene()
        tgs.runtime.set_scatter("auto")
        sim, run, loss = rollout_loss(model, steps=60, checkpoint_every=ck)
        with ti.ad.Tape(loss):
            run()
        grads[ck, scatter] = {n: model.parameters()[n].grad.to_numpy().copy() for n in PARTICLE_PARAMS + CONTACT_PARAMS}
        grads[ck, scatter]["loss"] = loss[None]
        if ck:
            assert sim.state.slots == ck + 1 and sim.checkpoints.slots == -(-60 // ck) + 1
    for key in ((7, "serial"), (25, "serial"), (None, "parallel")):
        for name, g in grads[None, "serial"].items():
            np.testing.assert_allclose(grads[key][name], g, rtol=1e-11, atol=1e-14, err_msg=f"{key}: {name}")


def test_fused_steps_equal_one_launch_per_step(f64):
    """Many steps per kernel launch (the default on small CPUs) gives the same states and
    gradients as one launch per step, with observers every 20 and 30 steps, an external
    force, and checkpoints that do not line up with the frames."""
    model = small_scene()
    results = {}
    for fuse, ck in ((False, None), (True, None), (True, 7), (False, 7)):
        sim, run, loss = rollout_loss(model, steps=60, checkpoint_every=ck, external_force=True, fuse_steps=fuse)
        assert sim.fused == fuse
        f = np.zeros((60, model.particle_count, 3))
        f[5:25, :4] = [3.0, 1.0, -2.0]
        sim.particle_f_ext.from_numpy(f)
        sim.run()
        q_final = sim.final_state()      # before the Tape: its backward refills the checkpoint buffer
        with ti.ad.Tape(loss):
            run()
        out = {n: model.parameters()[n].grad.to_numpy().copy() for n in PARTICLE_PARAMS + CONTACT_PARAMS}
        out["f_ext"] = sim.particle_f_ext.grad.to_numpy().copy()
        out["loss"] = loss[None]
        out["q_final"] = q_final
        results[fuse, ck] = out
    assert np.abs(results[False, None]["f_ext"]).max() > 0
    for key in ((True, None), (True, 7), (False, 7)):
        for name, g in results[False, None].items():
            np.testing.assert_allclose(results[key][name], g, rtol=1e-11, atol=1e-14, err_msg=f"{key}: {name}")


def test_fuse_steps_default_follows_scatter(f64):
    assert tgs.Simulator(small_scene(), dt=1e-3, steps=3).fused == tgs.runtime.serial_scatter()
    tgs.runtime.set_scatter("parallel")
    try:
        model = small_scene()
    finally:
        tgs.runtime.set_scatter("auto")
    assert not tgs.Simulator(model, dt=1e-3, steps=3).fused     # parallel loops: one launch per step


def test_checkpointing_shrinks_state_memory(f64):
    model = small_scene()
    full = tgs.Simulator(model, dt=1e-3, steps=1000)
    ck = tgs.Simulator(model, dt=1e-3, steps=1000, checkpoint_every=32)
    full_bytes = full.state.nbytes()
    ck_bytes = ck.state.nbytes() + ck.checkpoints.nbytes()
    # O(N T) versus O(N (T/K + K)): 1001 slots of q, qd, f versus 33 + 33 (q, qd) + 33 (f)
    assert ck_bytes < full_bytes / 10


def test_validation_mode_passes(f64):
    tgs.init(precision="f64", debug=True)
    model = small_scene()
    sim, run, loss = rollout_loss(model, steps=20, checkpoint_every=8)
    with ti.ad.Tape(loss, validation=True):
        run()
    assert np.any(model.particle_qd0.grad.to_numpy() != 0)


def test_f32_runs(f32):
    model = small_scene()
    sim, run, loss = rollout_loss(model)
    with ti.ad.Tape(loss):
        run()
    g = model.particle_qd0.grad.to_numpy()
    assert g.dtype == np.float32 and np.all(np.isfinite(g)) and np.abs(g).max() > 0


def test_blow_up_names_step(f64):
    b = tgs.SceneBuilder()
    b.add_particles([[0, 0, 0], [0.1, 0, 0]], masses=1e-3)
    b.add_spring(0, 1, stiffness=1e9, rest_length=0.2)
    sim = tgs.Simulator(b.finalize(), dt=1e-2, steps=200, check_every=16)
    with pytest.raises(tgs.SimulationError, match=r"non-finite at step \d+.*smaller time step"):
        sim.run()


def test_bookkeeping_loops_serial_or_parallel_agree(f64, monkeypatch):
    """The simulator's small loops (initial state, checkpoint copies, zeroing the forces, the finite
    and adjoint checks) run on one thread below `runtime.SERIAL_LOOP_MAX` entries: on either side of
    the limit the trajectory, the gradients and the step a blow-up is reported at are the same."""
    assert tgs.runtime.serial_loop(10) and not tgs.runtime.serial_loop(tgs.runtime.SERIAL_LOOP_MAX + 1)
    results = []
    for limit in (10 ** 9, 0):           # every loop serial, then every loop parallel
        monkeypatch.setattr(tgs.runtime, "SERIAL_LOOP_MAX", limit)
        model = small_scene()
        sim, run, loss = rollout_loss(model, steps=60, checkpoint_every=7)
        with ti.ad.Tape(loss):
            run()
        grads = {n: model.parameters()[n].grad.to_numpy().copy() for n in PARTICLE_PARAMS}
        b = tgs.SceneBuilder()
        b.add_particles([[0, 0, 0], [0.1, 0, 0]], masses=1e-3)
        b.add_spring(0, 1, stiffness=1e9, rest_length=0.2)
        with pytest.raises(tgs.SimulationError, match=r"non-finite at step \d+") as err:
            tgs.Simulator(b.finalize(), dt=1e-2, steps=200, check_every=16).run()
        results.append((sim.final_state(), loss[None], grads, str(err.value).split(":")[0]))
    (q0, l0, g0, e0), (q1, l1, g1, e1) = results
    assert_same_sums(q1, q0)
    assert_same_sums(l1, l0)
    assert e1 == e0
    for name in g0:
        assert np.any(g0[name] != 0), name
        assert_same_sums(g1[name], g0[name], err_msg=name)


def test_optimizer_recovers_velocity(f64):
    b = tgs.SceneBuilder()
    b.add_particle((0, 1, 0), velocity=(0, 0, 0), mass=1.0)
    model = b.finalize()
    sim = tgs.Simulator(model, dt=0.01, steps=50)
    rec = tgs.ParticleRecorder(sim, every=50)
    loss = tgs.MSELoss(rec.values, np.array([[[0, 1, 0]], [[1.0, 1.0 + 0.5 - 0.5 * 9.8 * 0.51 * 0.5, 0.5]]]))
    opt = tgs.Adam([tgs.Param(model.particle_qd0, "v0")], lr=0.2)
    hist = tgs.optimize(lambda: (sim.run(), loss()), loss.value, opt, iters=150, log_every=0)
    assert hist.loss[-1] < 1e-4 * hist.loss[0]
    assert len(hist.loss) == 151


def test_log_space_param_stays_positive(f64):
    b = tgs.SceneBuilder()
    b.add_particles([[0, 1, 0], [0.2, 1, 0]])
    b.add_spring(0, 1, stiffness=10.0)
    model = b.finalize()
    p = tgs.Param(model.spring_stiffness, "ke", log_space=True, lower=1.0, upper=1e4)
    model.spring_stiffness.grad.from_numpy(np.array([1e6]))
    opt = tgs.SGD([p], lr=0.5)
    opt.step()
    value = model.spring_stiffness.to_numpy()[0]
    assert 1.0 <= value < 10.0


# -- bad input -----------------------------------------------------------------
def test_bad_positions(f64):
    b = tgs.SceneBuilder()
    with pytest.raises(ValueError, match="positions.*non-finite"):
        b.add_particles([[0, np.nan, 0]])
    with pytest.raises(ValueError, match=r"positions: expected shape \(N, 3\)"):
        b.add_particles([[0, 1]])


def test_bad_mass_and_springs(f64):
    b = tgs.SceneBuilder()
    with pytest.raises(ValueError, match="masses: must be > 0"):
        b.add_particles([[0, 0, 0]], masses=0.0)
    b.add_particles([[0, 0, 0], [1, 0, 0], [1, 0, 0]])
    with pytest.raises(IndexError, match="spring indices.*out of range for 3 particles"):
        b.add_spring(0, 5, stiffness=1.0)
    with pytest.raises(ValueError, match="rest length would be 0"):
        b.add_spring(1, 2, stiffness=1.0)
    with pytest.raises(ValueError, match="rest_length: must be > 0"):
        b.add_spring(0, 1, stiffness=1.0, rest_length=0.0)
    with pytest.raises(ValueError, match="stiffness: must be >= 0"):
        b.add_spring(0, 1, stiffness=-1.0)
    with pytest.raises(ValueError, match="two different particles"):
        b.add_spring(1, 1, stiffness=1.0)


def test_bad_simulator_args(f64):
    b = tgs.SceneBuilder()
    b.add_particle((0, 0, 0))
    model = b.finalize()
    with pytest.raises(ValueError, match="dt: must be"):
        tgs.Simulator(model, dt=0.0, steps=10)
    with pytest.raises(ValueError, match="steps: must be"):
        tgs.Simulator(model, dt=0.01, steps=0)
    with pytest.raises(ValueError, match="checkpoint_every"):
        tgs.Simulator(model, dt=0.01, steps=10, checkpoint_every=0)
    with pytest.raises(ValueError, match="particle_qd0 values: expected shape"):
        model.set("particle_qd0", np.zeros((2, 3)))
    with pytest.raises(KeyError, match="unknown parameter"):
        model.set("nope", 1.0)
    with pytest.raises(ValueError, match="ground.*ke: must be >= 0|ke: must be >= 0"):
        tgs.SceneBuilder().add_ground(ke=-1)


def test_scatter_mode_choice(f64):
    from taichi.lang import impl
    assert tgs.runtime.serial_scatter() == (impl.current_cfg().cpu_max_num_threads
                                            <= tgs.runtime.SERIAL_SCATTER_MAX_THREADS)
    tgs.runtime.set_scatter("parallel")
    assert not tgs.runtime.serial_scatter()
    tgs.runtime.set_scatter("auto")
    with pytest.raises(ValueError, match="scatter='atomic'"):
        tgs.init(scatter="atomic")
    with pytest.raises(ValueError, match="mode='x'"):
        tgs.runtime.set_scatter("x")


@ti.kernel
def _double_into(x: ti.template(), y: ti.template()):
    for i in range(x.shape[0]):
        y[None] += 2.0 * x[i]


def test_init_resets_kernels_a_validation_tape_left_checked():
    """Taichi 1.7.4's Tape(validation=True) leaves a kernel recorded twice in validation mode (it restores
    modes in recording order); `tgs.init` puts it back, so later rollouts run plain forward kernels."""
    from taichi.lang.enums import AutodiffMode
    tgs.init(precision="f64", debug=True)
    try:
        x = ti.field(float, shape=3, needs_grad=True)
        y = ti.field(float, shape=(), needs_grad=True)
        with ti.ad.Tape(y, validation=True):
            _double_into(x, y)
            _double_into(x, y)
        assert np.allclose(x.grad.to_numpy(), 4.0)
        kernel = _double_into._primal
        assert kernel.autodiff_mode == AutodiffMode.VALIDATION       # Taichi's stale mode (the bug)
        tgs.init(precision="f64")
        assert kernel.autodiff_mode == AutodiffMode.NONE
    finally:
        tgs.init()
