"""A user's own force term (`tgs.ForceTerm` + `SceneBuilder.add_force_term`): trajectories against
the analytic ODE, Tape gradients against finite differences (f64), fused == one launch per step ==
checkpointed, and clear errors for what a user can get wrong."""
import numpy as np
import pytest
import taichi as ti

import tigradsim as tgs
from tigradsim import meshes
from tigradsim.physics.rigid import BodyRecorder, spatial


@ti.data_oriented
class QuadraticDrag(tgs.ForceTerm):
    """f = -c |v| v on every particle, c [kg/m] a differentiable model parameter `drag_c`."""

    def __init__(self, model, c=0.1):
        super().__init__(model)
        self.c = self.add_parameter("drag_c", c)

    @ti.func
    def apply_forces(self, state: ti.template(), s: ti.template(), t: ti.template()):
        ti.loop_config(serialize=self.serial)
        for i in range(self.model.particle_count):
            v = state.particle_qd[s, i]
            speed = ti.sqrt(v.dot(v) + 1e-12)
            state.particle_f[s, i] += -self.c[None] * speed * v


@ti.data_oriented
class BodyLinearDrag(tgs.ForceTerm):
    """Force -c v and torque -c_w w on every rigid body (c [N s/m], c_w [N m s] per body)."""

    def __init__(self, model, c, c_w):
        super().__init__(model)
        self.c = self.add_parameter("body_drag", np.full(model.body_count, c))
        self.c_w = self.add_parameter("body_angular_drag", np.full(model.body_count, c_w))

    @ti.func
    def apply_forces(self, state: ti.template(), s: ti.template(), t: ti.template()):
        ti.loop_config(serialize=self.serial)
        for b in range(self.model.body_count):
            qd = state.body_qd[s, b]
            w = ti.Vector([qd[0], qd[1], qd[2]])
            v = ti.Vector([qd[3], qd[4], qd[5]])
            state.body_f[s, b] += spatial(-self.c_w[b] * w, -self.c[b] * v)


V0 = np.array([[3.0, 0.0, 0.0], [0.0, -2.0, 1.0], [1.0, 1.0, 1.0]])
MASS = np.array([0.2, 0.5, 1.0])


def _drag_scene(dt, duration=0.5, c=0.05, gravity=(0.0, 0.0, 0.0), fuse_steps=None, checkpoint_every=None,
                every=25):
    b = tgs.SceneBuilder(gravity=gravity)
    b.add_particles(np.zeros((3, 3)) + [[0.0, 1.0, 0.0]], velocities=V0, masses=MASS)
    index = b.add_force_term(lambda model: QuadraticDrag(model, c=c))
    model = b.finalize()
    sim = tgs.Simulator(model, dt=dt, steps=int(round(duration / dt)), fuse_steps=fuse_steps,
                        checkpoint_every=checkpoint_every)
    rec = tgs.ParticleRecorder(sim, every)
    return model, sim, rec, index


def _analytic_drag(t, c=0.05):
    """Exact solution without gravity: the velocity keeps its direction, speed u' = -(c/m) u^2."""
    u0 = np.linalg.norm(V0, axis=1)
    k = c / MASS
    dist = np.log1p(k * u0 * t) / k
    return np.array([0.0, 1.0, 0.0]) + V0 / u0[:, None] * dist[:, None]


def test_quadratic_drag_matches_the_ode_to_first_order(f64):
    errors = []
    for dt in (2e-3, 1e-3):
        model, sim, rec, index = _drag_scene(dt)
        assert model.user_force_terms[index].c is model.drag_c and model.user_force_terms[index] in sim.force_terms
        sim.run()
        errors.append(np.abs(sim.final_state("particle_q") - _analytic_drag(0.5)).max())
    # semi-implicit Euler is first order: the error is O(dt) (about 1e-3 m here) and halves with dt
    assert errors[1] < 1.5e-3, errors
    assert 1.7 < errors[0] / errors[1] < 2.3, errors
    # the drag matters: without it the particles would be far from the analytic positions
    assert np.abs(V0 * 0.5 + [0.0, 1.0, 0.0] - _analytic_drag(0.5)).max() > 0.1


def _drag_loss(model, sim, rec):
    rng = np.random.default_rng(1)
    loss = tgs.MSELoss(rec.values, rng.normal(size=(rec.frames, 3, 3)) * 0.5)

    def run():
        loss.value[None] = 0
        sim.run()
        loss()

    return run, loss.value


def test_drag_gradient_matches_finite_differences(f64):
    model, sim, rec, _ = _drag_scene(2e-3, duration=0.3, gravity=(0.0, -9.8, 0.0))
    run, loss = _drag_loss(model, sim, rec)
    report = tgs.check_gradient(run, loss, [model.drag_c], n_dirs=2, eps=1e-6, rtol=1e-6)
    report.assert_ok()
    assert abs(report.analytic[0]) > 1e-3, "the drag coefficient should matter"
    tgs.check_gradient(run, loss, [model.drag_c, model.particle_qd0, model.particle_mass], n_dirs=2, eps=1e-6,
                       rtol=1e-6).assert_ok()


def test_fused_unfused_and_checkpointed_gradients_agree(f64):
    grads = {}
    for key in ((True, None), (False, None), (None, 40)):
        model, sim, rec, _ = _drag_scene(2e-3, duration=0.3, gravity=(0.0, -9.8, 0.0), fuse_steps=key[0],
                                         checkpoint_every=key[1])
        run, loss = _drag_loss(model, sim, rec)
        with ti.ad.Tape(loss):
            run()
        grads[key] = (float(loss[None]), model.drag_c.grad.to_numpy().copy(), model.particle_qd0.grad.to_numpy().copy())
    ref = grads[True, None]
    assert abs(ref[1]) > 0
    for key, (value, g_c, g_v) in grads.items():
        assert value == pytest.approx(ref[0], rel=1e-13), key
        np.testing.assert_allclose(g_c, ref[1], rtol=1e-12, err_msg=str(key))
        np.testing.assert_allclose(g_v, ref[2], rtol=1e-12, atol=1e-14, err_msg=str(key))


def _body_drag_scene(fuse_steps=None):
    b = tgs.SceneBuilder(gravity=(0.0, 0.0, 0.0))
    v, f = meshes.box_surface((0.3, 0.2, 0.25))
    b.add_rigid_body(v, f, mass=1.5, position=(0.0, 1.0, 0.0), velocity=(1.0, 2.0, -0.5),
                     angular_velocity=(0.0, 3.0, 0.0))
    b.add_force_term(lambda model: BodyLinearDrag(model, c=0.6, c_w=0.02))
    model = b.finalize()
    sim = tgs.Simulator(model, dt=1e-2, steps=60, fuse_steps=fuse_steps)
    return model, sim


def test_rigid_drag_term_is_exact_discrete_decay_and_differentiable(f64):
    model, sim = _body_drag_scene()
    rec = BodyRecorder(sim, 10)
    sim.run()
    # semi-implicit Euler of v' = -(c/m) v: v_k = v0 (1 - c dt / m)^k exactly; spin about a principal
    # axis (y) decays likewise with the inertia I_yy (the gyroscopic term vanishes there)
    qd = sim.state.body_qd.to_numpy()[:, 0]
    k = np.arange(61)
    np.testing.assert_allclose(qd[:, 3:], np.outer((1 - 0.6 * 1e-2 / 1.5) ** k, [1.0, 2.0, -0.5]), rtol=1e-12)
    i_yy = 1.5 * model.get("body_inertia")[0][1, 1]
    np.testing.assert_allclose(qd[:, 1], 3.0 * (1 - 0.02 * 1e-2 / i_yy) ** k, rtol=1e-12)
    loss = tgs.MSELoss(rec.positions, np.random.default_rng(0).normal(size=(rec.frames, 1, 3)))

    def run():
        loss.value[None] = 0
        sim.run()
        loss()

    tgs.check_gradient(run, loss.value, [model.body_drag, model.body_mass, model.body_qd0], n_dirs=2, eps=1e-6,
                       rtol=1e-6).assert_ok()


# -- what a user can get wrong ----------------------------------------------------------------
class NotATerm:
    def __init__(self, model):
        self.model = model


@ti.data_oriented
class NoApply(tgs.ForceTerm):
    pass


@ti.data_oriented
class PlainApply(tgs.ForceTerm):
    def apply_forces(self, state, s, t):
        pass


@ti.data_oriented
class NoSuperInit(tgs.ForceTerm):
    def __init__(self, model):
        self.model = model

    @ti.func
    def apply_forces(self, state: ti.template(), s: ti.template(), t: ti.template()):
        pass


@ti.data_oriented
class WrongSignature(tgs.ForceTerm):
    @ti.func
    def apply_forces(self, state: ti.template(), s: ti.template()):
        pass


def _builder():
    b = tgs.SceneBuilder()
    b.add_particle((0.0, 1.0, 0.0))
    return b


@pytest.mark.parametrize("factory, error, match", [
    (NotATerm, TypeError, "expected an instance of tgs.ForceTerm"),
    (NoApply, TypeError, "defines no apply_forces"),
    (PlainApply, TypeError, "must be decorated with @ti.func"),
    (NoSuperInit, TypeError, r"must call super\(\).__init__\(model\)"),
    (WrongSignature, TypeError, r"must take \(self, state, s, t\)"),
    (lambda model: QuadraticDrag(_builder().finalize()), ValueError, "built for another Model"),
])
def test_bad_force_terms_are_rejected_at_finalize(f64, factory, error, match):
    b = _builder()
    b.add_force_term(factory)
    with pytest.raises(error, match=match):
        b.finalize()


def test_bad_factories_and_late_terms_are_rejected(f64):
    b = _builder()
    with pytest.raises(TypeError, match="factory: expected a callable"):
        b.add_force_term(3)
    model = b.finalize()
    with pytest.raises(TypeError, match="pass a factory"):
        _builder().add_force_term(QuadraticDrag(model))
    with pytest.raises(RuntimeError, match="already finalized"):
        b.add_force_term(QuadraticDrag)
    b2 = _builder()
    b2.add_force_term(QuadraticDrag)
    b2.add_force_term(QuadraticDrag)          # both would create model.drag_c
    with pytest.raises(ValueError, match="already has an attribute 'drag_c'"):
        b2.finalize()
    b3 = _builder()
    b3.add_force_term(lambda model: QuadraticDrag(model, c=[1.0, 2.0]))
    model3 = b3.finalize()
    assert model3.get("drag_c").shape == (2,)  # add_parameter follows the value's shape


def test_the_docstring_example_runs(f64, tmp_path):
    """tgs.ForceTerm's documented example is code that works (extracted from the docstring; run from a
    file, since Taichi reads a ti.func's source)."""
    import importlib.util
    import textwrap
    doc = tgs.ForceTerm.__doc__
    block = doc[doc.index("::\n") + 3:doc.index("    A rigid-body term")]
    path = tmp_path / "force_term_example.py"
    path.write_text(textwrap.dedent(block))
    spec = importlib.util.spec_from_file_location("force_term_example", path)
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    model, sim = example.model, example.sim
    sim.run()
    v = sim.final_state("particle_qd")[0]
    # drag slows the particle beyond gravity alone: horizontal speed 3 m/s drops below it
    assert 0.0 < v[0] < 3.0 * 0.9 and model.get("drag_c") == pytest.approx(0.05)


def test_substeps_per_frame():
    assert tgs.substeps_per_frame(30, 1 / 960) == (32, pytest.approx(1 / 960, rel=1e-15))
    n, dt = tgs.substeps_per_frame(29.97, 1e-3)
    assert n == 34 and dt <= 1e-3 and n * dt == pytest.approx(1 / 29.97, rel=1e-14)
    assert tgs.substeps_per_frame(30, 1.0) == (1, pytest.approx(1 / 30))
    with pytest.raises(ValueError, match="max_dt"):
        tgs.substeps_per_frame(30, 0.0)
    with pytest.raises(ValueError, match="fps"):
        tgs.substeps_per_frame(-1, 1e-3)
