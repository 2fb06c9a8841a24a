"""MPM gradients against float64 central differences along random directions: P2G / grid / G2P through a
few steps (initial positions and velocities, with and without checkpointing), every MPM material's
parameters and the density, the walls' friction and gravity."""
import pytest

import tigradsim as tgs
from mpm_scenes import StateLoss, block_scene, watch


@pytest.fixture(scope="module", autouse=True)
def _f64():
    tgs.init(arch="cpu", precision="f64")
    yield


def _check(model, fields, steps=6, dt=2e-3, checkpoint_every=None, rtol=1e-5, seed=0):
    sim = tgs.Simulator(model, dt=dt, steps=steps, checkpoint_every=checkpoint_every)
    loss = StateLoss(model, seed)
    watch(sim, loss)
    report = tgs.check_gradient(sim.run, loss.loss, fields, direction_count=2, eps=1e-6, rtol=rtol, seed=seed)
    report.assert_ok()
    return report


@pytest.mark.parametrize("checkpoint_every", [None, 4])
def test_initial_positions_and_velocities(checkpoint_every):
    model, _ = block_scene("mpm_neo_hookean", params={"E": 2e3, "nu": 0.3})
    _check(model, [model.mpm_x0, model.mpm_v0], checkpoint_every=checkpoint_every)


@pytest.mark.parametrize("material,params", [
    pytest.param("mpm_fixed_corotated", {"E": 2e3, "nu": 0.3}, marks=pytest.mark.slow),   # polar rotation: ~10 s
    ("mpm_neo_hookean", {"E": 2e3, "nu": 0.25}),
    ("mpm_newtonian", {"viscosity": 2.0, "bulk_modulus": 2e3}),
    ("mpm_bingham", {"plastic_viscosity": 1.0, "bulk_modulus": 2e3, "yield_stress": 20.0, "regularization_rate": 5.0}),
])
def test_material_parameters_and_density(material, params):
    model, _ = block_scene(material, params)
    _check(model, [model.mpm_params, model.mpm_density, model.mpm_x0])


@pytest.mark.slow
def test_wall_friction_and_gravity():
    """A block sliding on the floor (its lowest particles' nodes are in the wall): d/d mu, d/d gravity."""
    model, _ = block_scene("mpm_neo_hookean", params={"E": 2e3, "nu": 0.3}, box=((0.375, 0.0625, 0.375), (0.625, 0.3125, 0.625)),
                           velocity=(0.5, -0.3, 0.2), mu=0.4)
    _check(model, [model.mpm_mu, model.gravity, model.mpm_v0])
