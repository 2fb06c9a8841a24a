"""Taichi's own IR optimisation passes on (the library's default) and off (`tgs.init(advanced_optimization=False)`,
which compiles contact scenes several times faster: benchmarks/compile_time.py).  Per kind of step (springs with ground contact, FEM,
cloth, a rigid body with ground contact), the same small scene is compiled both ways: with the passes on
the Tape gradient of every parameter matches central differences along random directions (float64),
and the gradients of the two compilations agree to round-off.
"""
import numpy as np
import pytest

import tigradsim as tgs
import test_cloth
import test_core
import test_fem
from test_rigid_grad import _scene as rigid_scene


def _particles():
    """test_core's spring block bouncing on the ground: its parameters and its contact constants."""
    sim, run, loss = test_core.rollout_loss(test_core.small_scene())
    return sim.model, run, loss, test_core.PARTICLE_PARAMS + test_core.CONTACT_PARAMS, 1e-5


def _fem():
    """test_fem's block thrown at the ground (neo-Hookean): Lame parameters and damping, mass, initial state."""
    model, _ = test_fem.block_scene()
    sim, run, loss = test_fem.rollout_loss(model)
    return model, run, loss, ["tet_params", "particle_mass", "particle_q0", "particle_qd0"], 1e-5


def _cloth():
    """test_cloth's flat cloth falling in the air: membrane, bending, drag and lift, masses and initial state."""
    model, _ = test_cloth.grad_scene("flat")
    sim, run, loss = test_cloth.rollout(model)
    return model, run, loss, test_cloth.CLOTH_PARAMS, 1e-5


def _rigid():
    """test_rigid_grad's box bouncing and sliding on the ground: mass, inertia, contact constants, initial state."""
    model, sim, run, total, controls = rigid_scene()
    return model, run, total, ["body_mass", "body_inertia", "body_ke", "body_kd", "body_kf", "body_mu", "body_q0",
                               "body_qd0"], 1e-6


SCENES = {"particles": _particles, "fem": _fem, "cloth": _cloth, "rigid": _rigid}


def _gradients(kind, optimized):
    tgs.init(arch="cpu", precision="f64", advanced_optimization=optimized)
    model, run, loss, names, eps = SCENES[kind]()
    params = {name: getattr(model, name) for name in names}
    with tgs.tape(loss):
        run()
    return model, run, loss, params, eps, {name: p.grad.to_numpy().copy() for name, p in params.items()}


@pytest.mark.parametrize("kind", sorted(SCENES))
def test_default_compilation_gradients_match_finite_differences_and_the_suites(kind):
    _, run, loss, params, eps, grads = _gradients(kind, optimized=True)
    for name, param in params.items():         # one at a time, as the scene's own test file checks them
        assert np.abs(grads[name]).max() > 1e-10, f"{kind}: {name}: zero gradient"
        report = tgs.check_gradient(run, loss, [param], n_dirs=1, eps=eps, rtol=1e-5)
        assert report.ok, f"{kind}: {name}, Taichi's passes on:\n{report}"
    *_, suite_grads = _gradients(kind, optimized=False)
    for name, g in grads.items():
        np.testing.assert_allclose(suite_grads[name], g, rtol=1e-8, atol=1e-12 * max(1.0, np.abs(g).max()),
                                   err_msg=f"{kind}: {name}, passes off vs on")


def test_cloth_goes_one_element_at_a_time_without_the_passes(monkeypatch):
    """A cloth's membrane and bending in lanes (LANES elements at a time, with their own reverse: `exec.lanes`) need
    Taichi's IR passes: compiled without them, test_cloth's lanes scenes stopped with a non-finite adjoint at the
    first step (GradientError; 2026-12-08).  So without the passes a cloth goes one element at a time, and its
    gradients equal those of the lanes compiled with the passes."""
    from tigradsim.physics import cloth
    monkeypatch.setattr(cloth, "CLOTH_LANES_MIN_TRIANGLES", 0)         # this small cloth in lanes, where it can
    grads = {}
    for optimized in (True, False):
        model, *_, grads[optimized] = _gradients("cloth", optimized)
        in_lanes = [t for t in model.force_terms if getattr(t, "in_lanes", False)]
        assert bool(in_lanes) == optimized, f"passes {'on' if optimized else 'off'}: {len(in_lanes)} terms in lanes"
    for name, g in grads[True].items():
        assert np.abs(g).max() > 1e-10, f"{name}: zero gradient"
        np.testing.assert_allclose(grads[False][name], g, rtol=1e-8, atol=1e-12 * max(1.0, np.abs(g).max()),
                                   err_msg=f"{name}: one element at a time without the passes vs lanes with them")
