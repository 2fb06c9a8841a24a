"""Scenes of interacting objects from scene files (issue 46, item 6): rigid and soft objects in one scene (a
soft ball on a box: `TimedVertices(source="both")`, Scene kind "mixed"), and colliders that take the ground's
contact constants move with a "ground.X" unknown, nuisance or assumed constant
(`scene_colliders.ground_takers`).  Gradients against central differences in float64."""
import numpy as np
import pytest

import tigradsim as tgs
from tigradsim.io.footage import TimedVertices
from tigradsim.scenes.scene_file import parse_scene

from test_scene_file import BOX, _scene


def _box_and_particles(grad):
    from tigradsim.renderers import box
    v, f = box((0.2, 0.1, 0.15))
    b = tgs.SceneBuilder(gravity=(0, -9.8, 0))
    b.add_rigid_body(v, f, mass=1.0, position=(0, 1, 0), velocity=(0.5, 0.0, 0.0), angular_velocity=(1, 2, 0))
    b.add_particles([[3.5, 1.0, 0.0], [3.7, 1.2, 0.1]], velocities=[[0.3, 1.0, 0.0], [-0.2, 0.0, 0.4]])
    model = b.finalize(requires_grad=grad)
    return model, tgs.Simulator(model, dt=0.01, steps=30, checkpoint_every=7)


def test_timed_vertices_both_layout_and_gradient(f64):
    """source="both": the bodies' vertices (RigidSurface's layout) then every particle, at frame times between
    steps; the interpolating gather's gradient w.r.t. both initial velocities matches central differences."""
    times = [0.0, 0.105, 0.2, 0.283]
    model, sim = _box_and_particles(grad=True)
    both = TimedVertices(sim, times, source="both")
    rigid = TimedVertices(sim, times, source="rigid")
    parts = TimedVertices(sim, times, source="particles")
    sim.run()
    assert both.rigid_vertex_count == 8 and both.vertex_count == 10
    np.testing.assert_array_equal(both.faces, rigid.faces)
    np.testing.assert_allclose(both.numpy(), np.concatenate([rigid.numpy(), parts.numpy()], axis=1), atol=1e-14)
    target = both.numpy() + np.random.default_rng(1).normal(0, 0.05, both.numpy().shape)
    mse = tgs.MSELoss(both.vertices, target)

    def run():
        mse.value[None] = 0
        sim.run()
        mse()

    tgs.check_gradient(run, mse.value, [model.body_qd0, model.particle_qd0], n_dirs=3, rtol=1e-6).assert_ok()
    with pytest.raises(ValueError, match="source: expected one of"):
        TimedVertices(sim, times, source="all")


def _ramp_data(tmp_path, contact_constants="nuisance", ramp_mu=None):
    ramp = {"kind": "plane", "normal": [0.25881905, 0.96592583, 0.0], "position": [0.0, 0.0, 0.0]}    # 15 degrees
    if ramp_mu is not None:
        ramp["mu"] = ramp_mu
    on_ramp = dict(BOX, position=[-0.2871, 0.1287, 0.0], rotation=[0.0, 0.0, -0.13052619, 0.99144486],
                   velocity=[0.8, -0.2, 0.0])          # flat on the ramp, sliding down it
    soft = {"type": "soft", "tet_box": {"cells": [1, 1, 1], "size": [0.1, 0.1, 0.1]}, "material": "neo_hookean",
            "params": {"mu": 2000.0, "lam": 4000.0}, "density": 200.0, "position": [0.35, 0.06, 0.0]}
    return _scene(tmp_path, ground={}, objects={"box": on_ramp, "cube": soft}, forces=[],
                  colliders={"ramp": ramp}, unknowns={"box.mass": {"init": 1.2, "lower": 0.2, "upper": 5.0}},
                  **{"simulation.duration": 0.1, "simulation.substeps": 40, "fit.contact_constants": contact_constants})


def test_mixed_scene_parses_and_the_ramp_takes_the_ground_nuisance(tmp_path):
    spec = parse_scene(_ramp_data(tmp_path), str(tmp_path / "scene.toml"))
    assert {o.kind for o in spec.objects.values()} == {"rigid", "soft"}
    assert spec.colliders["ramp"].given == frozenset()
    assert {u.target for u in spec.unknowns if u.nuisance} == {"ground.ke", "ground.kd", "ground.kf", "ground.mu"}
    # a collider stating its own mu keeps it: the ground's nuisance mu still exists (the box takes it) ...
    own = parse_scene(_ramp_data(tmp_path, ramp_mu=0.3), str(tmp_path / "scene.toml"))
    assert own.colliders["ramp"].given == frozenset({"mu"})
    from tigradsim.scenes.scene_colliders import ground_takers
    assert ground_takers(own, "mu") == [] and ground_takers(own, "ke") == [0]
    assert ground_takers(spec, "mu", {("ramp", "mu")}) == []      # ... and so does one whose mu is an unknown


@pytest.mark.slow
def test_mixed_scene_renders_and_ground_tie_moves_the_collider(tmp_path, f64_without_ir_passes):
    """A box on a ramp collider beside a soft cube: the Scene renders rigid and particle vertices together;
    the "ground.mu" nuisance Param writes the ground's, the box's and the ramp's mu, and its gradient (through
    the box's friction on the ramp) matches central differences; "assume" mode's writer does the same."""
    from tigradsim.scenes.assumed import assumed_constants
    from tigradsim.scenes.scene_build import Scene, load_scene_footage

    spec = parse_scene(_ramp_data(tmp_path), str(tmp_path / "scene.toml"))
    scene = Scene(spec, load_scene_footage(spec))
    m = scene.model
    assert scene.kind == "mixed" and scene.timed.source == "both"
    assert scene.timed.vertex_count == 8 + m.particle_count
    mu = next(p for p in scene.params if p.name == "ground.mu")
    scene.set_values({"ground.mu": 0.37})
    assert np.isclose(m.get("ground_mu"), 0.37) and np.isclose(m.get("body_mu")[0], 0.37)
    assert np.isclose(m.get("collider_mu")[0], 0.37)
    rec = tgs.BodyRecorder(scene.sim, every=40)
    scene.sim.run()
    assert np.all(np.isfinite(scene.timed.numpy()))
    loss = tgs.MSELoss(rec.positions, rec.positions.to_numpy() + 0.01)

    def run():
        loss.value[None] = 0.0
        scene.sim.run()
        loss._accumulate()

    report = tgs.check_param_gradient(run, loss.value, mu, n_dirs=1, eps=1e-6, rtol=1e-5)
    assert report.ok, str(report)

    spec = parse_scene(_ramp_data(tmp_path, contact_constants="assume"), str(tmp_path / "scene.toml"))
    scene = Scene(spec, load_scene_footage(spec))
    assumed = {a.name: a for a in assumed_constants(scene)}
    assumed["ground.kf"].write(42.0)
    assert np.isclose(scene.model.get("collider_kf")[0], 42.0) and np.isclose(scene.model.get("ground_kf"), 42.0)
