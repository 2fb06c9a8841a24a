"""`check_gradient` picks its tolerance from the precision (issue 45 item 7): a correct gradient passes
at the default rtol in float32 and float64 (float32 failed at 1e-5: 5e-4 on a correct gradient), and a
wrong one (scaled by 1.1, or one component's sign flipped) fails in both."""
import numpy as np
import pytest
import taichi as ti

import tigradsim as tgs
from tigradsim.fitting import gradcheck


def tour_scene():
    """The README tour's particle settings (8 particles of 0.02 kg, springs 800 / 0.5, ground
    4e3 / 8 / 20 / 0.6, dt 1 ms, 200 steps), loss: an MSE on the final centre of mass.
    Returns (model, sim, loss)."""
    g = np.stack(np.meshgrid(np.arange(2), np.arange(2), np.arange(2), indexing="ij"), -1).reshape(-1, 3) * 0.1
    b = tgs.SceneBuilder()
    b.add_particles(g + [0.0, 0.15, 0.0], velocities=np.tile([1.0, -1.0, 0.5], (8, 1)), masses=0.02, radius=0.01)
    b.add_springs([(i, j) for i in range(8) for j in range(i + 1, 8)], stiffness=800.0, damping=0.5)
    b.add_ground(ke=4e3, kd=8.0, kf=20.0, mu=0.6)
    model = b.finalize()
    sim = tgs.Simulator(model, dt=1e-3, steps=200)
    com = tgs.CenterOfMassRecorder(sim, every=200)
    loss = tgs.MSELoss(com.com, np.array([[0.0, 0.0, 0.0], [0.3, 0.1, 0.2]]), frame_weights=[0, 1])
    return model, sim, loss


def tour_particles(wrong=None):
    """`tour_scene` with its checked parameter `v0` copied into the initial velocities by a kernel whose
    backward is exact (wrong=None), scaled by 1.1 ("scaled") or has the sign of its largest component
    flipped ("flipped").  Returns (run, loss field, v0)."""
    model, sim, loss = tour_scene()
    v0 = ti.Vector.field(3, float, shape=8, needs_grad=True)
    v0.from_numpy(model.particle_qd0.to_numpy())

    @ti.kernel
    def copy_kernel():
        for i in v0:
            model.particle_qd0[i] = v0[i]

    @ti.ad.grad_replaced
    def copy():
        copy_kernel()

    @ti.ad.grad_for(copy)
    def copy_grad():
        g = model.particle_qd0.grad.to_numpy().astype(np.float64)
        if wrong == "scaled":
            g = 1.1 * g
        elif wrong == "flipped":
            k = np.unravel_index(np.argmax(np.abs(g)), g.shape)
            g[k] = -g[k]
        v0.grad.from_numpy((v0.grad.to_numpy() + g).astype(v0.grad.to_numpy().dtype))

    def run():
        loss.value[None] = 0.0
        copy()
        sim.run()
        loss()

    return run, loss.value, v0


@pytest.mark.parametrize("precision, rtol", [("f32", 9.8e-3), ("f64", 1.2e-5)])
def test_default_tolerance_passes_a_correct_gradient_and_fails_wrong_ones(precision, rtol):
    tgs.init(arch="cpu", precision=precision)
    assert gradcheck.default_rtol() == pytest.approx(rtol, rel=1e-2)
    run, loss, v0 = tour_particles()
    report = tgs.check_gradient(run, loss, [v0], direction_count=3)
    assert report.rtol == gradcheck.default_rtol() and len(report.analytic) == 3
    assert report.ok, str(report)
    assert max(abs(a) for a in report.analytic) > 1e-3          # a real gradient, not zeros
    if precision == "f32":
        # float64's tolerance would call this correct gradient wrong (what issue 45 saw)
        assert report.max_rel_error > 1e-5, str(report)
    for wrong in ("scaled", "flipped"):
        run, loss, v0 = tour_particles(wrong)
        bad = tgs.check_gradient(run, loss, [v0], n_dirs=3)              # n_dirs: direction_count's older name
        assert not bad.ok and len(bad.analytic) == 3, f"{wrong}: {bad}"
        assert bad.max_rel_error > 3 * bad.rtol, f"{wrong}: {bad}"     # failed by a margin, not by noise


def test_param_gradient_default_tolerance_f32():
    tgs.init(arch="cpu", precision="f32")
    run, loss, v0 = tour_particles()
    report = tgs.check_param_gradient(run, loss, tgs.Param(v0, "v0", lower=-10.0, upper=10.0))
    assert report.rtol == gradcheck.default_rtol() and report.ok, str(report)
    with pytest.raises(TypeError, match="check_param_gradient: direction_count and n_dirs: give one"):
        tgs.check_param_gradient(run, loss, tgs.Param(v0, "v0"), direction_count=2, n_dirs=2)
    with pytest.raises(TypeError, match="check_gradient: direction_count and n_dirs: give one"):
        tgs.check_gradient(run, loss, [v0], direction_count=2, n_dirs=2)


def test_check_gradient_f32_default_step(f32):
    """README tour settings in float32 (particles 0.02 kg, springs 800 / 0.5, ground 4e3 / 8 / 20 / 0.6,
    dt 1 ms): the default step (cbrt(eps_f32) x the field's scale) passes; 1e-6 does not."""
    model, sim, loss = tour_scene()

    def run():
        loss.value[None] = 0.0
        sim.run()
        loss()

    assert tgs.gradcheck.default_eps() == pytest.approx(4.92e-3, rel=1e-2)
    report = tgs.check_gradient(run, loss.value, [model.particle_qd0], n_dirs=3, rtol=3e-2)
    assert report.ok, str(report)
    tiny = tgs.check_gradient(run, loss.value, [model.particle_qd0], n_dirs=3, eps=1e-6, rtol=3e-2)
    assert not tiny.ok, "1e-6 is below float32 resolution: this test would not notice a regression"
