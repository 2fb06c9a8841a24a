"""Issue 16, item 5 (the rows this module covers): each bad input is a clear error raised in
Python before any kernel runs, naming the argument and the value; valid but unusual input
(a numpy scalar dt, a pinned particle's mass 0) is accepted."""
import numpy as np
import pytest
import taichi as ti

import tigradsim as tgs
from tigradsim import fem
from tigradsim.core.registry import TetMaterial, register_material, unregister_material


def particles(requires_grad=True, ground=True):
    b = tgs.SceneBuilder()
    b.add_particles([[0.0, 0.5, 0.0], [0.1, 0.5, 0.0]], masses=1.0, radius=0.01)
    b.add_springs([[0, 1]], stiffness=100.0, damping=0.1)
    if ground:
        b.add_ground()
    return b.finalize(requires_grad=requires_grad)


def soft_block(params=None):
    v, t = tgs.meshes.tet_box(1, 1, 1, size=(0.1, 0.1, 0.1), origin=(0.0, 0.2, 0.0))
    b = tgs.SceneBuilder()
    h = b.add_soft_mesh((v, t), material="neo_hookean", params=params or {"mu": 1e3, "lam": 1e3}, density=1000.0)
    return b, h


def test_numpy_scalar_dt_is_accepted(f64):
    model = particles()
    sim = tgs.Simulator(model, dt=np.float32(1e-3), steps=3)
    assert sim.dt == pytest.approx(1e-3, rel=1e-6)
    sim.run()
    assert tgs.Simulator(model, dt=np.float64(1e-3), steps=2).dt == 1e-3
    with pytest.raises(ValueError, match=r"dt: must be a finite number > 0 \(seconds\), got True"):
        tgs.Simulator(model, dt=True, steps=2)
    with pytest.raises(ValueError, match=r"dt: must be a finite number > 0 .*nan"):
        tgs.Simulator(model, dt=np.float32("nan"), steps=2)


def test_negative_particle_mass_is_an_error_zero_pins(f64):
    model = particles()
    with pytest.raises(ValueError, match=r"particle_mass values: must be >= 0, got -1\.0 at index 0"):
        model.set("particle_mass", [-1, 1])
    assert np.all(model.get("particle_mass") == 1.0), "a rejected value must not be written"
    model.set("particle_mass", [0, 1])          # 0 is legal: the particle is pinned
    sim = tgs.Simulator(model, dt=1e-3, steps=5)
    sim.run()
    assert np.allclose(sim.final_state()[0], [0.0, 0.5, 0.0])


@pytest.mark.parametrize("name", ["ground_ke", "ground_kd", "ground_kf", "ground_mu", "spring_stiffness",
                                  "spring_damping"])
def test_negative_stiffness_damping_friction_are_errors(f64, name):
    model = particles()
    value = -1e4 if model.get(name).ndim == 0 else [-1e4]
    with pytest.raises(ValueError, match=rf"{name} values: must be >= 0, got -10000"):
        model.set(name, value)


def test_rest_length_and_rigid_mass_must_be_positive(f64):
    model = particles()
    with pytest.raises(ValueError, match=r"spring_rest_length values: must be > 0, got 0"):
        model.set("spring_rest_length", [0.0])
    b = tgs.SceneBuilder()
    b.add_ground()
    b.add_rigid_body(*tgs.meshes.box_surface((0.1, 0.1, 0.1)), density=100.0, position=(0, 0.2, 0))
    rigid = b.finalize()
    with pytest.raises(ValueError, match=r"body_mass values: must be > 0, got -1"):
        rigid.set("body_mass", [-1.0])
    with pytest.raises(ValueError, match=r"body_ke values: must be >= 0, got -5"):
        rigid.set("body_ke", [-5.0])
    with pytest.raises(ValueError, match=r"body_inertia values: body 0: .*symmetric positive definite"):
        rigid.set("body_inertia", -np.eye(3)[None])


def test_negative_neo_hookean_mu_at_build_and_set_object_param(f64):
    b, _ = soft_block()
    with pytest.raises(ValueError, match=r"material 'neo_hookean': parameter 'mu' must be >= 0, got -1000"):
        b.add_soft_mesh(tgs.meshes.tet_box(1, 1, 1, size=(0.1, 0.1, 0.1)), material="neo_hookean",
                        params={"mu": -1e3, "lam": 1e3})
    model = b.finalize()
    h = model.tet_meshes[0]
    with pytest.raises(ValueError, match=r"tet_params values: .*material 'neo_hookean'.*parameter 'mu' must be >= 0, "
                                         r"got -1000"):
        fem.set_object_param(model, h, "mu", -1e3)
    assert fem.object_param(model, h, "mu") == 1e3
    with pytest.raises(ValueError, match=r"damping \(last column\) must be >= 0, got -1"):
        fem.set_object_param(model, h, "damping", -1.0)
    fem.set_object_param(model, h, "mu", 0.0)            # 0 is legal (pure volumetric stiffness)


def test_plugin_material_declares_its_rules(f64):
    @register_material("test_positive_k")
    class Positive(TetMaterial):
        params = {"k": 1.0, "c": 0.0}
        positive = ("k",)
        nonnegative = ("c",)

        @ti.func
        def stress(self, F, p):
            return p[0] * F

    try:
        b, _ = soft_block()
        with pytest.raises(ValueError, match=r"material 'test_positive_k': parameter 'k' must be > 0, got 0"):
            b.add_soft_mesh(tgs.meshes.tet_box(1, 1, 1, size=(0.1, 0.1, 0.1)), material="test_positive_k",
                            params={"k": 0.0})
        with pytest.raises(TypeError, match=r"`positive` of Bad names \['q'\]"):
            @register_material("test_bad_rules")
            class Bad(TetMaterial):
                params = {"k": 1.0}
                positive = ("q",)

                @ti.func
                def stress(self, F, p):
                    return p[0] * F
    finally:
        unregister_material("test_positive_k")
        unregister_material("test_bad_rules")


def test_model_from_an_older_runtime_is_a_clear_error():
    tgs.init(precision="f32")
    model = particles()
    sim = tgs.Simulator(model, dt=1e-3, steps=2)
    tgs.init(precision="f64")
    with pytest.raises(RuntimeError, match=r"model: the model was finalized before tgs.init\(...\) was called again "
                                           r"\(built at precision 'f32', Taichi now at 'f64'\)"):
        tgs.Simulator(model, dt=1e-3, steps=2)
    with pytest.raises(RuntimeError, match=r"run\(\): the model was finalized before tgs.init"):
        sim.run()
    model = particles()                          # rebuilt after init: fine
    tgs.Simulator(model, dt=1e-3, steps=2).run()


def test_center_of_mass_recorder_every_zero(f64):
    sim = tgs.Simulator(particles(), dt=1e-3, steps=10)
    with pytest.raises(ValueError, match=r"CenterOfMassRecorder: every: must be an integer >= 1, got 0"):
        tgs.CenterOfMassRecorder(sim, every=0)
    with pytest.raises(ValueError, match=r"ParticleRecorder: every: must be an integer >= 1, got 2.5"):
        tgs.ParticleRecorder(sim, every=2.5)
