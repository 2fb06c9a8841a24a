"""`finalize(requires_grad=<names>)`: only the named parameters get gradients, and the derivative
kernels then skip the velocity terms (FEM and cloth damping, drag, lift, bending damping) whose
coefficients are 0 and have no gradient.  The gradients of the named parameters must equal those of
a model where every parameter has a gradient (float64, to 1e-12), and finite differences, on the
serial and parts paths; elements whose coefficients are NOT 0 must keep their terms."""
import numpy as np
import pytest
import taichi as ti

import tigradsim as tgs
from tigradsim.core.model import has_grad

PATHS = ("serial", "parts")


def fem_scene(requires_grad):
    """Two boxes: one without damping (its term skipped), one with (kept), thrown at the ground."""
    b = tgs.SceneBuilder()
    b.add_ground(ke=2e3, kd=5.0, kf=50.0, mu=0.4)
    rng = np.random.default_rng(4)
    for k, damping in enumerate((0.0, 2.0)):
        v, t = tgs.meshes.tet_box(2, 2, 1, size=(0.2, 0.2, 0.1), origin=(0.3 * k, 0.045, 0.0))
        vel = np.array([0.5, -1.2, 0.3 - k]) + rng.normal(size=(len(v), 3)) * 0.3
        b.add_soft_mesh((v, t), params={"mu": 5e3, "lam": 8e3}, density=6000.0, damping=damping, velocity=vel,
                        radius=0.02)
    return b.finalize(requires_grad=requires_grad)


def cloth_scene(requires_grad):
    """Three cloths: damping, drag, lift and bending damping all 0 (every velocity term skipped);
    damping without aerodynamics; aerodynamics without damping."""
    b = tgs.SceneBuilder()
    b.add_ground(ke=1e3, kd=1.0, kf=1.0, mu=0.5)
    rng = np.random.default_rng(6)
    for k, (kd, drag, lift, bend_kd) in enumerate(((0.0, 0.0, 0.0, 0.0), (1e-2, 0.0, 0.0, 1e-5), (0.0, 1.0, 0.5, 0.0))):
        v, f = tgs.meshes.cloth_grid(3, 3, cell=0.1, origin=(0.4 * k, 0.05, 0.0), plane="xz")
        v = v + rng.normal(size=v.shape) * 0.01
        b.add_cloth(v, f, params={"mu": 20.0, "lam": 30.0, "damping": kd}, density=5.0,
                    bending_stiffness=1e-3, bending_damping=bend_kd, drag=drag, lift=lift, wind=(0.3, 0.0, -0.2),
                    velocity=np.array([0.2, -0.8, 0.1]) + rng.normal(size=v.shape) * 0.2)
    return b.finalize(requires_grad=requires_grad)


# the named parameters (cloth: a bending table with a port on the parts path, beside
# membrane, drag and lift tables without one)
SCENES = {"fem": (fem_scene, ("particle_qd0", "particle_mass")),
          "cloth": (cloth_scene, ("particle_qd0", "cloth_bending_stiffness"))}
UNNAMED = {"fem": ("tet_params",), "cloth": ("cloth_params", "cloth_drag", "cloth_lift", "cloth_bending_damping")}


def build(scene, path, requires_grad):
    tgs.runtime.set_scatter(path)
    try:
        return SCENES[scene][0](requires_grad)
    finally:
        tgs.runtime.set_scatter("auto")


def rollout(model, steps=30):
    sim = tgs.Simulator(model, dt=1e-3, steps=steps)
    rec = tgs.ParticleRecorder(sim, every=10)
    sim.run()
    loss = tgs.MSELoss(rec.values, rec.numpy() + np.random.default_rng(0).normal(size=(rec.frames, rec.count, 3)) * 0.05)

    def run():
        loss.value[None] = 0
        sim.run()
        loss()

    return run, loss.value


def gradients(model, names):
    run, loss = rollout(model)
    with ti.ad.Tape(loss):
        run()
    return {n: model.parameters()[n].grad.to_numpy().copy() for n in names}, run, loss


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("scene", sorted(SCENES))
def test_named_gradients_equal_full_and_finite_differences(f64, scene, path):
    names = SCENES[scene][1]
    model = build(scene, path, set(names))
    for n in names:
        assert has_grad(model.parameters()[n]), n
    for n in UNNAMED[scene]:
        assert not has_grad(model.parameters()[n]), n
    named, run, loss = gradients(model, names)
    full, _, _ = gradients(build(scene, path, True), names)
    for n in names:
        g = full[n]
        assert np.any(g != 0), n
        np.testing.assert_allclose(named[n], g, rtol=1e-12, atol=1e-12 * np.abs(g).max(), err_msg=n)
    for n in names:
        report = tgs.check_gradient(run, loss, [model.parameters()[n]], n_dirs=1, eps=1e-5, rtol=1e-5)
        assert report.ok, f"{n}: {report}"


def test_requires_grad_names_are_checked(f64):
    def model(requires_grad):
        b = tgs.SceneBuilder()
        b.add_particles([[0.0, 1.0, 0.0]], masses=0.1)
        return b.finalize(requires_grad=requires_grad)

    with pytest.raises(ValueError, match=r"requires_grad: \['particle_qd'\] is not a parameter of this model; its "
                                         r"parameters are \[.*'particle_qd0'.*\]"):
        model({"particle_qd"})
    with pytest.raises(TypeError, match=r"requires_grad: .*got the string 'particle_qd0' \(write \('particle_qd0',\)\)"):
        model("particle_qd0")
    with pytest.raises(ValueError, match=r"requires_grad: an empty collection"):
        model(())
    m = model(["particle_mass"])
    assert m.requires_grad and has_grad(m.particle_mass) and not has_grad(m.particle_qd0)
    sim = tgs.Simulator(m, dt=1e-3, steps=3)
    assert has_grad(sim.state.particle_q)                   # the state always has gradients
    loss = ti.field(float, shape=(), needs_grad=True)
    with pytest.raises(ValueError, match=r"Param 'qd0': its field has no gradient; .*requires_grad"):
        tgs.optimize(sim.run, loss, tgs.Adam([tgs.Param(m.particle_qd0, "qd0")], lr=0.1), iters=1, log_every=0)
    for param in (tgs.Param(m.particle_qd0, "qd0"), tgs.ColumnParam(m.particle_qd0, 1, "qd0")):
        with pytest.raises(ValueError, match=r"Param 'qd0': its field has no gradient"):
            param.internal_grad()          # read directly (uncertainty, gradcheck): the same error
    assert tgs.Param(m.particle_mass).grad().shape == (1,)
