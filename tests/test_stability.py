"""Stability pre-flight (issue 16, item 1): every force term's explicit-integration limit.

For each term a scene starts at rest (at equilibrium) with a 1e-6 m perturbation and runs at
0.9 x the reported limit (it must stay near rest: the limit is not too tight) and past it (the
perturbation must grow: the limit is not too loose; the Gershgorin bounds for tets are
conservative by up to ~2.5x, measured, so their unstable side is 3x).  Then the warning
(below / above the safe fraction), strict=True, and the re-check after `model.set`."""
import warnings

import numpy as np
import pytest

import tigradsim as tgs
from tigradsim import fem
from tigradsim.core import stability
from tigradsim.physics.cloth import Cloths

PERTURB = 1e-6


def grows(model, dt, steps=300):
    """Max displacement from the initial positions over the run, relative to PERTURB (inf: blew up)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", tgs.StabilityWarning)
        sim = tgs.Simulator(model, dt=dt, steps=steps, adjoint_check=False)
    try:
        sim.run()
    except tgs.SimulationError:
        return np.inf
    if model.particle_count:
        q = sim.state.particle_q.to_numpy()
    else:
        q = sim.state.body_q.to_numpy()[..., :3]
    return float(np.abs(q - q[:1]).max() / PERTURB)


def limit_of(model, term):
    rows = [r for r in tgs.stability_report(model, 1.0).rows if r.term.startswith(term)]
    assert len(rows) == 1, tgs.stability_report(model, 1.0)
    return rows[0]


def assert_sides(build, term, unstable_factor=1.2):
    row = limit_of(build(), term)
    assert row.dt_limit == min(r.dt_limit for r in tgs.stability_report(build(), 1.0).rows), "term must bind"
    stable = grows(build(), 0.9 * row.dt_limit)
    unstable = grows(build(), unstable_factor * row.dt_limit)
    assert stable < 100, f"{term}: at 0.9 x limit the perturbation grew {stable:.3g}x"
    assert unstable > 1e4, f"{term}: at {unstable_factor} x limit the perturbation grew only {unstable:.3g}x"
    return row


def jitter(x, seed=0):
    return x + np.random.default_rng(seed).normal(size=np.shape(x)) * PERTURB


# -- one scene per term --------------------------------------------------------------------
def test_formula_matches_the_oscillator():
    """explicit_dt_limit: 2/omega without damping, 2/gamma without stiffness, Jury's a + 2b = 4 between."""
    assert stability.explicit_dt_limit(100.0, 0.0) == pytest.approx(0.02)
    assert stability.explicit_dt_limit(0.0, 50.0) == pytest.approx(0.04)
    dt = stability.explicit_dt_limit(100.0, 30.0)
    assert (100.0 * dt) ** 2 + 2 * 30.0 * dt == pytest.approx(4.0)
    assert stability.explicit_dt_limit(0.0, 0.0) == np.inf


def test_springs(f64):
    def build():
        b = tgs.SceneBuilder(gravity=(0, 0, 0))
        b.add_particles(jitter([[0.0, 1.0, 0.0], [0.1, 1.0, 0.0]]), masses=[0.02, 0.05])
        b.add_springs([[0, 1]], stiffness=800.0, damping=0.5, rest_length=[0.1])
        return b.finalize()

    row = assert_sides(build, "SpringForces")
    w = 1 / 0.02 + 1 / 0.05
    assert row.omega == pytest.approx(np.sqrt(800 * w)) and row.gamma == pytest.approx(0.5 * w)


def test_ground_contact(f64):
    m, ke, kd, r = 0.01, 1e4, 0.2, 0.01

    def build():
        b = tgs.SceneBuilder()
        b.add_particles(jitter([[0.0, r - m * 9.8 / ke, 0.0]]), masses=m, radius=r)   # resting on the ground
        b.add_ground(ke=ke, kd=kd, kf=0.0, mu=0.5)
        return b.finalize()

    row = assert_sides(build, "ParticleGroundContact")
    assert row.omega == pytest.approx(np.sqrt(ke / m)) and row.gamma == pytest.approx(kd / m)
    # the viscous friction branch kf is a damping too: dt < 2 m / kf
    b = tgs.SceneBuilder()
    b.add_particles([[0.0, 0.5, 0.0]], masses=m)
    b.add_ground(ke=10.0, kd=0.0, kf=50.0)
    row = limit_of(b.finalize(), "ParticleGroundContact")
    assert row.dt_limit == pytest.approx(2 * m / 50.0) and "friction kf = 50" in row.detail


def test_rigid_contact(f64):
    m, ke = 1.0, 2e4
    v, f = tgs.meshes.box_surface((0.1, 0.1, 0.1))

    def build():
        b = tgs.SceneBuilder()
        b.add_ground(ke=ke, kd=0.0, kf=0.0, mu=0.5)
        # resting on its four bottom corners
        b.add_rigid_body(v, f, mass=m, position=jitter([0.0, 0.05 - m * 9.8 / (4 * ke), 0.0]))
        return b.finalize()

    row = assert_sides(build, "RigidGroundContact", unstable_factor=1.5)
    # effective mass at a corner: 1 / (1/m + |r|^2 / lambda_min(I)), I = m a^2 / 6, |r|^2 = 3 a^2 / 4
    assert row.omega == pytest.approx(np.sqrt(ke * 5.5 / m))


def test_tets(f64):
    def build():
        v, t = tgs.meshes.tet_box(2, 1, 1, size=(0.2, 0.1, 0.1))
        b = tgs.SceneBuilder(gravity=(0, 0, 0))
        b.add_soft_mesh((jitter(v), t), material="neo_hookean", params={"mu": 1e3, "lam": 1e3}, density=10.0)
        return b.finalize()

    row = assert_sides(build, "TetForces[neo_hookean]", unstable_factor=3.0)
    assert "modulus lam + 2 mu = 3000 Pa" in row.detail and row.element.startswith("particle")


def test_cloth_membrane_and_anchor(f64):
    def build(anchor_k=0.0):
        v, f = tgs.meshes.cloth_grid(3, 3, 0.1)
        b = tgs.SceneBuilder(gravity=(0, 0, 0))
        cloth = b.add_cloth(jitter(v), f, material="membrane", params={"mu": 500.0, "lam": 800.0}, density=0.2,
                            bending_stiffness=0.0)
        if anchor_k:
            b.component(Cloths).attach(b, cloth, [5], stiffness=anchor_k)
        return b.finalize()

    row = assert_sides(build, "ClothMembraneForces[membrane]", unstable_factor=1.5)
    assert "modulus lam + 2 mu = 1800 N/m" in row.detail
    anchor = limit_of(build(anchor_k=1e5), "ClothAnchorForces")
    m5 = build().get("particle_mass")[5]
    assert anchor.omega == pytest.approx(np.sqrt(1e5 / m5))


def test_cloth_bending(f64):
    def build():
        v, f = tgs.meshes.cloth_grid(4, 4, 0.1)
        x = v.copy()
        x[:, 1] += np.random.default_rng(1).normal(size=len(v)) * PERTURB       # out of plane
        b = tgs.SceneBuilder(gravity=(0, 0, 0))
        b.add_cloth(x, f, material="membrane", params={"mu": 0.0, "lam": 1e-3}, density=0.2, bending_stiffness=1e-2)
        return b.finalize()

    assert_sides(build, "ClothBendingForces", unstable_factor=1.5)


# -- warning, strict, report, re-check after set --------------------------------------------
def soft_ball(density=10.0, ke=1e4, kd=10.0):
    v, t = tgs.meshes.tet_ball(0.2, 1, center=(0.0, 0.2, 0.0))
    b = tgs.SceneBuilder()
    b.add_ground(ke=ke, kd=kd)
    h = b.add_soft_mesh((v, t), material="neo_hookean", params={"mu": 1e3, "lam": 1e3}, density=density, damping=1.0)
    return b.finalize(), h


def test_warning_names_term_element_value_and_safe_dt(f64):
    model, _ = soft_ball()              # the README ball: omega dt = 1.95 at dt = 1 ms (issue 16)
    with pytest.warns(tgs.StabilityWarning, match=r"dt = 0.001 s is (past|\S+ of \(safe: 0.5 of\)) the explicit-integration limit of "
                                                  r"ParticleGroundContact: at particle \d+ omega = 1950 1/s, "
                                                  r"gamma = 3804 1/s \(ke = 1e\+04 N/m, kd = 10 N s/m, mass 0.002629 kg\)"
                                                  r".*largest safe dt \(x 0.5\) is 0.0002161 s"):
        sim = tgs.Simulator(model, dt=1e-3, steps=10)
    report = sim.stability_report()
    assert not report.ok and report.dt_safe == pytest.approx(2.1614e-4, rel=1e-3)
    assert {r.term for r in report.rows} == {"ParticleGroundContact", "TetForces[neo_hookean]"}
    assert "PAST SAFE LIMIT" in str(report)
    with pytest.raises(tgs.StabilityError, match=r"the explicit-integration limit of ParticleGroundContact"):
        tgs.Simulator(model, dt=1e-3, steps=10, strict=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error", tgs.StabilityWarning)
        tgs.Simulator(model, dt=report.dt_safe, steps=10, strict=True).run()    # at the suggested dt: silent


def test_set_and_set_object_param_recheck_at_run(f64):
    model, h = soft_ball(density=100.0, ke=2e3, kd=0.5)
    with warnings.catch_warnings():
        warnings.simplefilter("error", tgs.StabilityWarning)
        sim = tgs.Simulator(model, dt=1e-3, steps=5, strict=True)
        sim.run()
    model.set("ground_ke", 1e6)                       # stiffer ground: past the limit from now on
    with pytest.raises(tgs.StabilityError, match=r"ParticleGroundContact: .*ke = 1e\+06 N/m"):
        sim.run()
    model.set("ground_ke", 2e3)
    sim.run()
    fem.set_object_param(model, h, "mu", 1e6)        # 1000x stiffer ball
    with pytest.raises(tgs.StabilityError, match=r"TetForces\[neo_hookean\]: at particle \d+ .*lam \+ 2 mu = 2\.001e\+06 Pa"):
        sim.run()
    with pytest.warns(tgs.StabilityWarning, match="TetForces"):
        tgs.Simulator(model, dt=1e-3, steps=5)       # default: a warning, not an error


def test_a_dt_exactly_at_the_safe_fraction_is_not_past_it_in_float32(f32):
    """Parameters read from float32 fields carry ~6e-8 relative rounding: mass 0.02 kg and kf 20 N s/m put
    the safe dt at exactly 1 ms (2 m / kf x 0.5), and dt = 1 ms must be silent (demos/mass_spring.py warned
    "0.5 of (safe: 0.5 of)"); 0.1 % past it warns."""
    b = tgs.SceneBuilder()
    b.add_particles([[0.0, 0.5, 0.0]], masses=0.02)
    b.add_ground(ke=10.0, kd=0.0, kf=20.0)
    model = b.finalize()
    row = limit_of(model, "ParticleGroundContact")
    assert row.dt_safe() == pytest.approx(1e-3, rel=1e-6) and row.dt_safe() != 1e-3    # rounded, either side
    with warnings.catch_warnings():
        warnings.simplefilter("error", tgs.StabilityWarning)
        report = tgs.Simulator(model, dt=1e-3, steps=5).stability_report()
    assert report.ok and "PAST SAFE LIMIT" not in str(report)
    with pytest.warns(tgs.StabilityWarning, match=r"dt = 0.001001 s is 0.5 of \(safe: 0.5 of\)"):
        tgs.Simulator(model, dt=1.001e-3, steps=5)
