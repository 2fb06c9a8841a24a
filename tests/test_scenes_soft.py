"""tigradsim.scenes soft, cloth and springs: the tuned schedules resolve to the demos' documented
defaults, bad arguments are named before any kernel runs, and the scene builders build the paper's
scenes (the fits themselves run end to end in test_sysid_fem.py / test_sysid_cloth.py)."""
import numpy as np
import pytest

from tigradsim.scenes import cloth, cloth_drape, soft
from tigradsim.scenes.staging import ScalarAdam

pytestmark = pytest.mark.slow          # the paper's soft-body and cloth scenes


def test_ball_schedule_defaults_per_mode():
    lame = soft.BallFitSchedule().resolved("lame")        # grid search + Levenberg-Marquardt, no gradient stage
    assert (lame.search, lame.refine, lame.refine_fd, lame.iters, lame.polish) == (9, 20, [1e-2, 1e-4], 0, 0)
    gradient = soft.BallFitSchedule(search=0).resolved("lame")
    assert (gradient.iters, gradient.polish, gradient.lr, gradient.lr_decay, gradient.blur) == (60, 30, 0.05, 0.98, [])
    mass = soft.BallFitSchedule().resolved("mass")      # search, polynomial LM, then BFGS on every mass
    assert (mass.iters, mass.polish, mass.lr, mass.blur, mass.mass_smoothing) == (100, 100, 0.03, [0.0, 2.0, 4.0], 0.25)
    gradient = soft.BallFitSchedule(refine=0).resolved("mass")
    assert (gradient.iters, gradient.polish, gradient.mass_uniform) == (160, 100, 10)
    quick = soft.BallFitSchedule().resolved("mass", quick=True, mass_truth="white")
    assert (quick.iters, quick.polish, quick.lr, quick.lr_decay, quick.mass_uniform, quick.refine, quick.blur,
            quick.mass_smoothing) == (40, 40, 0.05, 0.93, 0, 4, [0.0, 1.0, 2.0], 0.0)
    assert soft.BallFitSchedule(refine=0).resolved("mass", quick=True).mass_uniform == 6
    assert soft.BallFitSchedule(search=0).resolved("lame", full=True).iters == 200
    assert soft.BallFitSchedule().resolved("lame", full=True).iters == 0
    given = soft.BallFitSchedule(iters=12, polish=50).resolved("lame")
    assert (given.iters, given.polish) == (12, 12)        # polish never exceeds iters


def test_cloth_schedule_stages_split_the_iterations():
    stages = cloth.ClothFitSchedule().stages()
    assert [(k, n) for k, n, _, _ in stages] == [("coarse", 40), (0.3, 40), (0.1, 40)]
    assert stages[1][2] == pytest.approx(0.3 * 0.25)                  # fine lr = fine_lr x lr
    quick = cloth.ClothFitSchedule(iters=55).quick().stages()
    assert [(k, n, p) for k, n, _, p in quick] == [("coarse", 30, 25), (0.3, 25, 1000)]


def test_bad_scene_arguments_are_named(f64):
    with pytest.raises(ValueError, match="estimate: expected 'lame' or 'mass', got 'lamé'"):
        soft.SoftBallFit("lamé")
    with pytest.raises(ValueError, match="supervision: expected 'image' or 'state', got 'video'"):
        soft.SoftBallFit("mass", supervision="video")
    with pytest.raises(ValueError, match="estimate: expected 'lame' or 'mass', got 'density'"):
        soft.BallFitSchedule().resolved("density")
    assert soft.BallFitSchedule().resolved("mass").search == 9     # the masses' scale is searched first
    with pytest.raises(ValueError, match="scene: expected one of"):
        cloth_drape.drape("flagpole")
    with pytest.raises(ValueError, match="shading: expected one of"):
        cloth.ThrownClothFit(shading="lambert")
    with pytest.raises(ValueError, match="coarse_field: expected one of"):
        cloth.ClothFitSchedule(coarse_field="rigid_body")
    with pytest.raises(ValueError, match=r"coarse: expected the fraction .* got 1.5"):
        cloth.ClothFitSchedule(coarse=1.5)


def test_mass_truth_is_a_smooth_factor_on_the_lumped_masses(f64):
    sc = soft.SoftBallFit("mass", resolution=1, res=8, duration=0.05, every=32, checkpoint=64)
    truth, guess = sc.draw_truth_and_guess(np.random.default_rng(0), init_scale=3.0)
    factor = truth["mass"] / sc.lumped
    assert factor.min() >= 0.5 and factor.max() <= 1.5
    assert np.sqrt(np.mean((factor - 1.0) ** 2)) == pytest.approx(0.6 / np.sqrt(12.0), rel=0.1)
    np.testing.assert_allclose(guess["mass"], 3.0 * sc.lumped)
    with pytest.raises(ValueError, match="mass_truth: expected 'smooth' or 'white', got 'pink'"):
        sc.draw_truth_and_guess(np.random.default_rng(0), mass_truth="pink")
    # without init_scale the guess is the lumped masses times a factor drawn per trial
    rng = np.random.default_rng(1)
    factors = [sc.draw_truth_and_guess(rng)[1]["mass"] / sc.lumped for _ in range(40)]
    scales = np.array([f[0] for f in factors])
    assert all(np.allclose(f, f[0]) for f in factors)
    assert np.all((scales >= 0.5 - 1e-12) & (scales <= 2.0 + 1e-12)) and np.all(np.abs(np.log(scales)) >= np.log(1.3))
    assert (scales > 1).any() and (scales < 1).any() and len(np.unique(scales)) == 40


def test_scalar_adam_steps_along_the_gradient(f64):
    """One second moment per parameter: the first step is lr x g / rms(g) (per-value Adam's
    would be lr x sign(g)), so values with no gradient do not move."""
    import taichi as ti
    import tigradsim as tgs
    fld = ti.field(float, shape=3, needs_grad=True)
    fld.from_numpy(np.array([1.0, 2.0, 3.0]))
    g = np.array([3.0, -1.0, 0.0])
    fld.grad.from_numpy(g)
    ScalarAdam([tgs.Param(fld, "p")], lr=0.1).step()
    np.testing.assert_allclose(fld.to_numpy(), [1.0, 2.0, 3.0] - 0.1 * g / np.sqrt(np.mean(g ** 2)), rtol=1e-6)


def test_cloth_truth_and_guess_are_drawn_per_trial(f64):
    """Table 3 cloth: the true throw (mean velocity, spin) and the guess are drawn from ranges."""
    sc = cloth.ThrownClothFit(nx=4, ny=2, cell=0.2, res=8, duration=0.02, every=10, checkpoint=10)
    rng = np.random.default_rng(2)
    means = np.array([sc.true_velocity(rng, noise=0.0).mean(0) for _ in range(30)])
    lo, hi = np.array(cloth.THROW_RANGE).T
    assert np.all((means >= lo) & (means <= hi)), means      # the spin about the centre adds no mean
    assert np.all(means.std(0) > 0.15 * (hi - lo))
    fixed = sc.true_velocity(rng, throw=(1.0, 2.0, -0.5), spin=0.0, noise=0.0)
    np.testing.assert_allclose(fixed, np.tile([1.0, 2.0, -0.5], (len(fixed), 1)))
    schedule = cloth.ClothFitSchedule(iters=0)
    guesses = [t.guess for t in sc.trials(2, np.random.default_rng(3), schedule)]
    for g in guesses:
        assert np.allclose(g, g[0]) and np.all((g[0] >= lo) & (g[0] <= hi))
    assert not np.allclose(guesses[0], guesses[1])



@pytest.mark.parametrize("scene", ["flag", "drop"])
def test_drape_defaults_are_within_every_stability_limit(f32, scene):
    """demos/cloth_drape.py's scenes at `simulate`'s default dt: every force term within half its explicit
    limit (the ground's friction was 6x past it on the 0.42 g corner particles), so the demo builds its
    Simulator without a StabilityWarning."""
    import inspect
    import warnings

    import tigradsim as tgs
    dt = inspect.signature(cloth_drape.simulate).parameters["dt"].default
    model, _ = cloth_drape.drape(scene)
    with warnings.catch_warnings():
        warnings.simplefilter("error", tgs.StabilityWarning)
        report = tgs.Simulator(model, dt=dt, steps=1).stability_report()
    assert report.ok and {r.term.split("[")[0] for r in report.rows} == {
        "ParticleGroundContact", "ClothMembraneForces", "ClothBendingForces"}
    assert max(dt / r.dt_limit for r in report.rows) < 0.35, str(report)
