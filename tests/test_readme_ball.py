"""The README's claim about the soft ball at dt 1e-3 (issue 45 item 4), with exactly its ball and loss:
`tet_ball(0.2, 1)` centred 0.5 m up, neo-Hookean mu = lam = 1e3 Pa, density 10, damping 1, the default
ground (ke 1e4, kd 10), falling freely from rest, an MSE on its centre of mass.

Both checks catch it (README, "Trust"): the pre-flight at build (a 2.6 g vertex's ground contact is
past its explicit limit: StabilityWarning, or StabilityError with strict), and the adjoint check in
the backward pass (GradientError) at every horizon through the bounce.  At the dt the warning
suggests the gradient agrees with finite differences."""
import warnings

import numpy as np
import pytest
import taichi as ti

import tigradsim as tgs


def readme_ball(dt=1e-3, duration=0.3, **sim_kw):
    """The README's ball; returns (model, sim, run, loss field)."""
    vertices, tets = tgs.meshes.tet_ball(0.2, 1, center=(0.0, 0.5, 0.0))
    b = tgs.SceneBuilder()
    b.add_ground()
    b.add_soft_mesh((vertices, tets), material="neo_hookean", params={"mu": 1e3, "lam": 1e3}, density=10.0,
                    damping=1.0)
    model = b.finalize()
    steps = int(round(duration / dt))
    sim = tgs.Simulator(model, dt=dt, steps=steps, **sim_kw)
    com = tgs.CenterOfMassRecorder(sim, every=steps)
    loss = tgs.MSELoss(com.com, np.array([[0.0, 0.5, 0.0], [0.1, 0.2, 0.0]]))

    def run():
        loss.value[None] = 0.0
        sim.run()
        loss()

    return model, sim, run, loss.value


def quiet(fn, *args, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", tgs.StabilityWarning)
        return fn(*args, **kw)


def tape(run, loss):
    with ti.ad.Tape(loss):
        run()


def test_the_preflight_catches_the_readme_ball_at_build(f64):
    with pytest.warns(tgs.StabilityWarning, match=r"dt = 0.001 s is past the explicit-integration limit of "
                                                  r"ParticleGroundContact.*mass 0.002629 kg"):
        readme_ball()
    with pytest.raises(tgs.StabilityError, match="ParticleGroundContact"):
        readme_ball(strict=True)


@pytest.mark.parametrize("duration", [0.3, 0.5, 0.8] + [pytest.param(d, marks=pytest.mark.slow) for d in (0.4, 1.0)])
def test_the_adjoint_check_catches_it_and_the_tape_is_wrong(f64, duration):
    """Every horizon through the bounce (0.4 s and 1.0 s with the slow tests); with the adjoint
    probed every 256 steps (before adjoint_check_every = 64) 0.3 s and 0.5 s passed unnoticed with
    this loss."""
    model, sim, run, loss = quiet(readme_ball, duration=duration)
    with pytest.raises(tgs.GradientError, match=r"grew by a factor .* likely cause: ParticleGroundContact at "
                                                r"particle \d+ is at dt / limit = 2.31"):
        tape(run, loss)
    if duration == 0.3:
        sim.adjoint_check = False
        report = tgs.check_gradient(run, loss, [model.particle_qd0], n_dirs=2)
        assert report.max_rel_error > 0.3, str(report)      # what the check protects against (measured ~1)


def test_at_the_suggested_dt_the_gradient_agrees(f64):
    model, sim, run, loss = quiet(readme_ball)
    dt = sim.stability_report().dt_safe
    assert dt == pytest.approx(2.16e-4, rel=1e-2)
    with warnings.catch_warnings():
        warnings.simplefilter("error", tgs.StabilityWarning)
        model, sim, run, loss = readme_ball(dt=dt, strict=True)
    report = tgs.check_gradient(run, loss, [model.particle_qd0], n_dirs=2, rtol=1e-4)
    assert report.ok, str(report)
    assert max(abs(a) for a in report.analytic) > 1e-8        # steps of 1e-3 m/s (the rest velocity's scale)
