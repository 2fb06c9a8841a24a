"""Tetrahedral FEM: gradients of a contact-rich rollout for every tet material and
every FEM parameter, rest-state equilibrium, lumped masses, inversion, errors,
plugins, activation control and checkpointing."""
import numpy as np
import pytest
import taichi as ti

import tigradsim as tgs
from tigradsim import fem
from tigradsim.core.registry import TetMaterial, list_materials, register_material, unregister_material

TET_MATERIALS = list_materials("tet")


def block_scene(material="neo_hookean", params=None, damping=2.0, contact=True, requires_grad=True, noise=0.3,
                share_params=True):
    """A 2x1x1-cell box (12 vertices, 10 tets) thrown at the ground, its vertices moving apart."""
    v, t = tgs.meshes.tet_box(2, 1, 1, size=(0.2, 0.1, 0.1), origin=(0.0, 0.045, 0.0))
    rng = np.random.default_rng(3)
    vel = np.array([0.5, -1.2, 0.3]) + rng.normal(size=(len(v), 3)) * noise
    b = tgs.SceneBuilder()
    if contact:
        b.add_ground(ke=2e3, kd=5.0, kf=50.0, mu=0.4)
    h = b.add_soft_mesh((v, t), material=material, params={"mu": 5e3, "lam": 8e3} if params is None else params,
                        density=6000.0, damping=damping, velocity=vel, radius=0.02, share_params=share_params)
    return b.finalize(requires_grad=requires_grad), h


def rollout_loss(model, steps=50, checkpoint_every=None, every=10, fuse_steps=None):
    sim = tgs.Simulator(model, dt=2e-3, steps=steps, checkpoint_every=checkpoint_every, fuse_steps=fuse_steps)
    rec = tgs.ParticleRecorder(sim, every=every)
    rng = np.random.default_rng(0)
    sim.run()
    # Targets near the trajectory: FD is not swamped by round-off.
    loss = tgs.MSELoss(rec.values, rec.numpy() + rng.normal(size=(rec.frames, rec.count, 3)) * 0.05)

    def run():
        loss.value[None] = 0
        sim.run()
        loss()

    return sim, run, loss.value


def check(run, loss, fld, **kw):
    report = tgs.check_gradient(run, loss, [fld], n_dirs=kw.pop("n_dirs", 2), eps=1e-5, rtol=kw.pop("rtol", 1e-5), **kw)
    assert report.ok, str(report)
    assert max(abs(a) for a in report.analytic) > 1e-9, "zero gradient"
    return report


@pytest.mark.parametrize("material", TET_MATERIALS)
def test_gradients_every_fem_parameter(f64, material):
    model, h = block_scene(material)
    model.tet_activation.from_numpy(np.linspace(-0.05, 0.08, model.tet_count))
    sim, run, loss = rollout_loss(model)
    assert sim.state.particle_q.to_numpy()[:, :, 1].min() < 0.02, "the block must touch the ground"
    ncol = model.tet_params.shape[1]
    material_cols = np.zeros((1, ncol))
    material_cols[0, :-1] = 1
    check(run, loss, model.tet_params, masks=[material_cols], n_dirs=1)        # mu, lam
    check(run, loss, model.tet_params, masks=[1 - material_cols], n_dirs=1)    # damping
    check(run, loss, model.tet_activation, scale=[0.05], n_dirs=1)
    if material == "neo_hookean":
        check(run, loss, model.particle_mass)
        check(run, loss, model.particle_qd0)


def test_gradient_per_element_params_and_activation_control(f64):
    model, h = block_scene(share_params=False)
    act_t = fem.enable_activation_control(model, 50)
    act_t.from_numpy(np.random.default_rng(1).normal(size=(50, model.tet_count)) * 0.05)
    sim, run, loss = rollout_loss(model)
    assert model.tet_params.shape[0] == model.tet_count
    check(run, loss, model.tet_params, n_dirs=1)
    check(run, loss, act_t, scale=[0.05], n_dirs=1)


@pytest.mark.parametrize("scatter", ["serial", "parts"])
def test_gradients_at_zero_activation_and_damping(f64, scatter):
    """The element takes cheap branches where a tet's activation is exactly 0 and where its damping is
    0, the defaults (the derivative kernel reads the velocities of kd dF/dt without a gradient path
    there, `deformation_rate_stopped`): the derivatives must still be those of (1 + a)^(-1/3) and of
    kd dF/dt, for a fit that starts from 0, and for a mix of zero and non-zero activations; the
    initial velocity's too.  On the serial path and on the parts path (ports)."""
    tgs.runtime.set_scatter(scatter)
    try:
        model, h = block_scene(damping=0.0)
    finally:
        tgs.runtime.set_scatter("auto")
    sim, run, loss = rollout_loss(model)
    check(run, loss, model.tet_activation, scale=[0.05], n_dirs=2)
    damping_col = np.zeros((1, model.tet_params.shape[1]))
    damping_col[0, -1] = 1
    check(run, loss, model.tet_params, masks=[damping_col], n_dirs=1)
    check(run, loss, model.particle_qd0, n_dirs=1)
    act = np.zeros(model.tet_count)
    act[::2] = 0.04
    model.tet_activation.from_numpy(act)
    check(run, loss, model.tet_activation, scale=[0.05], n_dirs=1)


def test_checkpointed_and_parallel_gradients_equal_full(f64):
    """Checkpointing, and parallel (atomic) instead of serial scatter, give the same gradients."""
    grads = {}
    for ck, scatter in ((None, "serial"), (12, "serial"), (None, "parallel")):
        tgs.runtime.set_scatter(scatter)
        model, h = block_scene()
        tgs.runtime.set_scatter("auto")
        model.tet_activation.from_numpy(np.linspace(-0.05, 0.08, model.tet_count))
        sim, run, loss = rollout_loss(model, steps=50, checkpoint_every=ck)
        with ti.ad.Tape(loss):
            run()
        grads[ck, scatter] = {n: model.parameters()[n].grad.to_numpy().copy()
                              for n in ("tet_params", "tet_activation", "particle_qd0", "particle_mass")}
    for key in ((12, "serial"), (None, "parallel")):
        for name, g in grads[None, "serial"].items():
            assert np.any(g != 0), name
            np.testing.assert_allclose(grads[key][name], g, rtol=1e-10, atol=1e-13, err_msg=f"{key}: {name}")


def test_two_materials_fused_and_per_step_gradients(f64):
    """Two meshes of different materials (two tet terms, one loop each) with activation control:
    fused steps and one launch per step give the same gradients, and FD agrees."""
    b = tgs.SceneBuilder()
    b.add_ground(ke=2e3, kd=5.0, kf=50.0, mu=0.4)
    for k, material in enumerate(("neo_hookean", "corotated")):
        v, t = tgs.meshes.tet_box(2, 1, 1, size=(0.2, 0.1, 0.1), origin=(0.3 * k, 0.045, 0.0))
        b.add_soft_mesh((v, t), material=material, params={"mu": 5e3, "lam": 8e3}, density=6000.0, damping=2.0,
                        velocity=(0.5, -1.2, 0.3 - k), radius=0.02)
    model = b.finalize()
    act_t = fem.enable_activation_control(model, 40)
    act_t.from_numpy(np.random.default_rng(1).normal(size=(40, model.tet_count)) * 0.05)
    grads = {}
    for fuse in (True, False):
        sim, run, loss = rollout_loss(model, steps=40, fuse_steps=fuse)
        with ti.ad.Tape(loss):
            run()
        grads[fuse] = [f.grad.to_numpy().copy() for f in (model.tet_params, act_t, model.particle_qd0)]
    for fused, stepwise in zip(grads[True], grads[False]):
        assert np.any(stepwise != 0)
        np.testing.assert_allclose(fused, stepwise, rtol=1e-11, atol=1e-14)
    material_cols = np.zeros((1, model.tet_params.shape[1]))
    material_cols[0, :-1] = 1
    check(run, loss, model.tet_params, masks=[material_cols], n_dirs=1)     # mu, lam of both meshes


def test_total_mass_is_density_times_volume(f64):
    v, t = tgs.meshes.tet_ball(0.3, resolution=1)
    b = tgs.SceneBuilder()
    h = b.add_soft_mesh((v, t), density=37.0)
    h2 = b.add_soft_mesh(tgs.meshes.tet_box(2, 2, 1, size=(0.4, 0.2, 0.1), origin=(1, 0, 0)), material="stvk",
                         density=5.0, fixed=[0, 1])
    model = b.finalize()
    mass = model.particle_mass.to_numpy()
    vol = tgs.meshes.tet_volumes(v, t).sum()
    np.testing.assert_allclose(mass[:h.particle_count].sum(), 37.0 * vol, rtol=1e-12)
    assert mass[h2.particle_start] == 0 and mass[h2.particle_start + 1] == 0       # fixed
    assert model.tet_count == h.tet_count + h2.tet_count
    assert h.faces.min() >= 0 and h2.faces.min() >= h2.particle_start
    np.testing.assert_allclose(tgs.meshes.surface_volume(model.particle_q0.to_numpy(), h.faces), vol, rtol=1e-9)
    # handles find their rows after sorting by material (neo_hookean > stvk: stvk first)
    tets = model.tet_indices.to_numpy()
    assert tets[h.tet_start:h.tet_start + h.tet_count].min() == 0
    assert tets[h2.tet_start:h2.tet_start + h2.tet_count].min() == h2.particle_start


def test_object_params_read_write(f64):
    b = tgs.SceneBuilder()
    h1 = b.add_soft_mesh(tgs.meshes.tet_box(1, 1, 1), params={"mu": 10.0, "lam": 20.0}, damping=0.5)
    h2 = b.add_soft_mesh(tgs.meshes.tet_box(1, 1, 1, origin=(2, 0, 0)), material="corotated", lame=(3.0, 4.0))
    h3 = b.add_soft_mesh(tgs.meshes.tet_box(1, 1, 1, origin=(4, 0, 0)), young_poisson=(1e4, 0.3))
    model = b.finalize()
    assert fem.object_param(model, h1, "mu") == 10.0 and fem.object_param(model, h1, "damping") == 0.5
    assert fem.object_param(model, h2, "lam") == 4.0
    mu_l, lam_l = tgs.lame_from_young_poisson(1e4, 0.3)
    assert fem.object_param(model, h3, "mu") == pytest.approx(4 / 3 * mu_l)
    fem.set_object_param(model, h1, "lam", 99.0)
    assert fem.object_param(model, h1, "lam") == 99.0 and fem.object_param(model, h2, "lam") == 4.0
    with pytest.raises(KeyError, match="no parameter 'E'"):
        fem.object_param(model, h1, "E")


@pytest.mark.parametrize("material", TET_MATERIALS)
def test_zero_force_at_rest_shape(f64, material):
    v, t = tgs.meshes.tet_ball(0.3, resolution=1)
    b = tgs.SceneBuilder(gravity=(0, 0, 0))
    b.add_soft_mesh((v, t), material=material, params={"mu": 1e4, "lam": 2e4}, damping=1.0, density=10.0)
    model = b.finalize(requires_grad=False)
    sim = tgs.Simulator(model, dt=1e-3, steps=2)
    sim.run()
    f = sim.state.particle_f.to_numpy()[0]
    assert np.abs(f).max() < 1e-9 * 1e4 * 0.3 ** 2
    np.testing.assert_allclose(sim.state.particle_q.to_numpy()[2], v, atol=1e-12)


def test_forces_match_energy_gradient(f64):
    """f = -dE/dx for a deformed ball (activation included), against numpy FD of elastic_energy."""
    v, t = tgs.meshes.tet_ball(0.3, resolution=1)
    b = tgs.SceneBuilder(gravity=(0, 0, 0))
    b.add_soft_mesh((v, t), params={"mu": 1e3, "lam": 3e3})
    model = b.finalize(requires_grad=False)
    model.tet_activation.from_numpy(np.random.default_rng(2).uniform(-0.2, 0.3, model.tet_count))
    x = v + np.random.default_rng(1).normal(size=v.shape) * 0.02
    model.particle_q0.from_numpy(x)
    sim = tgs.Simulator(model, dt=1e-3, steps=1)
    sim.run()
    f = sim.state.particle_f.to_numpy()[0]
    for i, k in [(0, 1), (7, 0), (30, 2)]:
        xp, xm = x.copy(), x.copy()
        xp[i, k] += 1e-6
        xm[i, k] -= 1e-6
        dE = (fem.elastic_energy(model, xp) - fem.elastic_energy(model, xm)) / 2e-6
        assert f[i, k] == pytest.approx(-dE, rel=1e-6, abs=1e-6)


def test_activation_expands(f64):
    v, t = tgs.meshes.tet_box(1, 1, 1, size=0.1)
    b = tgs.SceneBuilder(gravity=(0, 0, 0))
    b.add_soft_mesh((v, t), params={"mu": 1e3, "lam": 1e3}, damping=5.0, density=100.0)
    model = b.finalize(requires_grad=False)
    model.tet_activation.fill(0.331)        # (1.331)^(1/3) = 1.1
    sim = tgs.Simulator(model, dt=1e-4, steps=3000)
    sim.run()
    q = sim.final_state()
    np.testing.assert_allclose(np.ptp(q, axis=0), 0.11, rtol=1e-3)


def test_ball_at_rest_on_ground_stays_at_rest(f64):
    """Let a damped ball settle on the ground, restart it from there at rest: it stays put (no drift)."""
    v, t = tgs.meshes.tet_ball(0.2, resolution=1, center=(0.0, 0.2 + 0.01, 0.0))
    b = tgs.SceneBuilder()
    # Light vertices (~5 g): contact kd, kf and element damping stay inside the explicit limits at dt = 0.5 ms.
    b.add_ground(ke=1e4, kd=2.0, kf=2.0, mu=0.5)
    b.add_soft_mesh((v, t), params={"mu": 2e4, "lam": 2e4}, damping=40.0, density=50.0, radius=0.01)
    model = b.finalize(requires_grad=False)
    settle = tgs.Simulator(model, dt=5e-4, steps=4000)
    settle.run()
    model.particle_q0.from_numpy(settle.final_state())
    model.particle_qd0.from_numpy(np.zeros((model.particle_count, 3)))
    sim = tgs.Simulator(model, dt=5e-4, steps=2000)
    sim.run()
    qd = sim.state.particle_qd.to_numpy()
    q = sim.state.particle_q.to_numpy()
    com = q.mean(axis=1)
    assert np.abs(qd).max() < 5e-3, np.abs(qd).max()
    assert np.abs(qd[1000:]).max() < 2.5e-3, np.abs(qd[1000:]).max()
    assert np.abs(com - com[0]).max() < 3e-4                 # over 1 s
    assert q[:, :, 1].min() > 0.0


def test_inversion_stays_finite_with_stable_neo_hookean(f64):
    x = np.array([[0, 0, 0], [1, 0, 0], [0, 1, 0], [0, 0, 1]], dtype=float) * 0.1
    b = tgs.SceneBuilder(gravity=(0, 0, 0))
    b.add_soft_mesh((x, [[0, 1, 2, 3]]), params={"mu": 100.0, "lam": 100.0}, density=100.0,
                    velocity=[[0, 0, 0], [0, 0, 0], [0, 0, 0], [0.02, 0.02, -8.0]])
    model = b.finalize()
    sim = tgs.Simulator(model, dt=1e-4, steps=400)
    rec = tgs.ParticleRecorder(sim, every=400)
    loss = tgs.MSELoss(rec.values, np.zeros((2, 4, 3)))
    with ti.ad.Tape(loss.value):
        sim.run()
        loss()
    q = sim.state.particle_q.to_numpy()
    z = q[:, 3, 2] - q[:, 0:3, 2].mean(axis=1)
    assert z.min() < 0, "the apex must pass through the base (inversion)"
    assert np.all(np.isfinite(q)) and np.all(np.isfinite(model.tet_params.grad.to_numpy()))
    assert np.all(np.isfinite(model.particle_qd0.grad.to_numpy()))


def test_user_plugin_usable_by_name(f64):
    @register_material("test_fem_plugin_linear", override=True)
    class Plugin(TetMaterial):
        params = {"k": None}

        @ti.func
        def stress(self, F, p):
            return p[0] * (F - ti.Matrix.identity(float, 3))

    try:
        model, h = block_scene("test_fem_plugin_linear", params={"k": 300.0})
        assert fem.object_param(model, h, "k") == 300.0
        sim, run, loss = rollout_loss(model, steps=30)
        check(run, loss, model.tet_params, n_dirs=1)
        with pytest.raises(ValueError, match="required parameter"):
            block_scene("test_fem_plugin_linear", params={})
    finally:
        unregister_material("test_fem_plugin_linear")


# -- errors -------------------------------------------------------------------

def _box():
    return tgs.meshes.tet_box(1, 1, 1)


@pytest.mark.parametrize("kwargs, err, match", [
    (dict(material="no_such_material"), KeyError, "unknown material 'no_such_material'.*neo_hookean"),
    (dict(material="membrane"), ValueError, "kind 'shell'"),
    (dict(params={"mu": 1.0, "nu": 0.3}), ValueError, r"unknown parameter\(s\) \['nu'\]"),
    (dict(params={"mu": 1.0, "lam": 0.0}), ValueError, "lam must be > 0"),
    (dict(density=0.0), ValueError, "density: must be > 0"),
    (dict(density=-1.0), ValueError, "density: must be > 0"),
    (dict(damping=-1.0), ValueError, "damping: must be >= 0"),
    (dict(velocity=[1.0, 2.0]), ValueError, "velocity"),
    (dict(fixed=[99]), IndexError, "fixed"),
    (dict(lame=(1.0, 1.0), young_poisson=(1.0, 0.3)), ValueError, "at most one"),
])
def test_bad_arguments(f64, kwargs, err, match):
    b = tgs.SceneBuilder()
    with pytest.raises(err, match=match):
        b.add_soft_mesh(_box(), **kwargs)
    assert b.particle_count == 0 and b.component(fem.TetMeshes).elements.count == 0


def test_bad_meshes(f64):
    v, t = _box()
    b = tgs.SceneBuilder()
    flipped = t.copy()
    flipped[3] = flipped[3][[1, 0, 2, 3]]
    with pytest.raises(ValueError, match="tets: inverted or degenerate tet 3"):
        b.add_soft_mesh((v, flipped))
    flat = v.copy()
    flat[:, 1] = 0.0
    with pytest.raises(ValueError, match="tets: inverted or degenerate"):
        b.add_soft_mesh((flat, t))
    bad = t.copy()
    bad[2, 1] = len(v)
    with pytest.raises(IndexError, match=f"tets: tet 2 has vertex index {len(v)} out of range"):
        b.add_soft_mesh((v, bad))
    with pytest.raises(ValueError, match=r"tets: expected shape \(T, 4\)"):
        b.add_soft_mesh((v, t[:, :3]))
    with pytest.raises(ValueError, match="vertices"):
        b.add_soft_mesh((v[:, :2], t))
    assert b.particle_count == 0
