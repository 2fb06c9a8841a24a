"""Control from pixels: policy gradients (FD, f64) and the quick demos beat the random policy."""
import argparse
import os

import numpy as np
import pytest
import taichi as ti

import tigradsim as tgs
from tigradsim import control
from tigradsim.io.meshes import boundary_faces, validate_tets
from tigradsim.scenes import control_cloth, control_fem
from tigradsim.scenes.control import builder_defaults, run_experiment
from tigradsim.scenes.shapes import tet_gear, tet_walker


def quick_run(builder, quick, out, **overrides):
    """The demo's --quick run (f32, seed 0, as `demos/<name>.py --quick --headless`): its JSON dict."""
    tgs.init(arch="cpu", precision="f32", seed=0)
    return run_experiment(builder, quick(builder_defaults(builder)), str(out), **overrides)[0]


def test_gear_mesh_is_conforming():
    v, t = tet_gear()
    assert t.shape == (1152, 4)
    assert validate_tets(v, t).min() > 0
    # conforming: only the outer surface is boundary (2 caps + hub + rim)
    assert len(boundary_faces(t)) == 2 * 192 + 2 * 2 * 48 * 2
    v, t = tet_walker()
    assert validate_tets(v, t).min() > 0


def small_fem_task(method, checkpoint=16):
    ns = argparse.Namespace(dt=1 / 960, duration=0.1, velocity=[1.5, 0.0, 0.0], checkpoint=checkpoint,
                            eye=[1.0, 2.2, 5.0], look_at=[1.0, 0.3, 0.0], fov=45, res=24, edge_softness=1e-4, every=24,
                            features=8, frequency=2.5, strength=0.3, seed=0, blur=[0.0, 2.0], lr_decay=1.0)
    mesh = tet_gear(teeth=4, rings=2, layers=1, center=(0.0, 0.52, 0.0), thickness=0.6)
    task = control_fem.FemControlTask(mesh, ns, {"mu": 1e3, "lam": 1e3}, 10.0, 1.0,
                                      dict(ke=1e3, kd=5.0, kf=1.0, mu=0.5))
    task.method = method
    task.set_target((0.3, 0.0, 0.0), method)
    return task


@pytest.mark.parametrize("method", ["gradsim", "state"])
def test_linear_policy_gradient_matches_fd(f64, method):
    task = small_fem_task(method)
    pol = task.policy
    pol.W.from_numpy(np.random.default_rng(1).standard_normal(pol.W.shape) * 0.5)
    pol.b.from_numpy(np.random.default_rng(2).standard_normal(pol.b.shape) * 0.2)

    def run():
        pol.write()
        task.rollout()

    tgs.check_gradient(run, task.loss, [pol.W, pol.b], n_dirs=3, eps=1e-6, rtol=1e-4).assert_ok()


def test_mlp_policy_gradient_matches_fd(f64):
    task = small_fem_task("gradsim")
    mlp = control.MLPPolicy(task.act, control.sinusoid_features(task.steps, task.args.dt), hidden=6,
                            scale=0.3, init_std=1.0, seed=3)

    def run():
        mlp.write()
        task.rollout()

    tgs.check_gradient(run, task.loss, [mlp.W1, mlp.b1, mlp.W2, mlp.b2], n_dirs=3, eps=1e-6,
                       rtol=1e-4).assert_ok()


def test_policy_matches_numpy(f64):
    out = ti.field(float, shape=(7, 5), needs_grad=True)
    phi = control.sinusoid_features(7, 0.1, 8)
    pol = control.LinearTanhPolicy(out, phi, scale=0.4, init_std=0.5, seed=1)
    pol.write()
    np.testing.assert_allclose(out.to_numpy(), pol.numpy(), rtol=1e-12)


def test_velocity_control_gradient_matches_fd(f64):
    ns = argparse.Namespace(seed=0, nx=4, ny=2, cell=0.25, height=0.3, drag=1.0, lift=0.6, ground_ke=200.0,
                            ground_kd=1.0, ground_kf=0.2, duration=0.15, dt=1e-3, every=50, checkpoint=40,
                            eye=[1.5, 4.0, 4.0], look_at=[1.5, 0.3, 0.0], fov=50, res=24, edge_softness=1e-4,
                            blur=[0.0, 2.0])
    task = control_cloth.ClothControlTask(ns)
    for method in ("gradsim", "state"):
        task.set_target(0.5, method)
        task.policy.set((1.0, 0.5, -0.2))

        def run():
            task.policy.write()
            task.rollout()

        tgs.check_gradient(run, task.loss, [task.policy.v], n_dirs=2, eps=1e-6, rtol=1e-4).assert_ok()


SMALL_THROW = dict(seed=3, seeds=2, iters=3, lr=0.5, lr_decay=0.93, grid=1, grid_x=[-1.0, 1.0], grid_y=[0.0],
                   grid_z=[0.0], nx=4, ny=2, cell=0.25, height=0.3, drag=1.0, lift=0.6, ground_ke=200.0, ground_kd=1.0,
                   ground_kf=0.2, duration=0.15, dt=1e-3, every=50, checkpoint=40, eye=[1.5, 4.0, 4.0],
                   look_at=[1.5, 0.3, 0.0], fov=50, res=24, edge_softness=1e-4, blur=[0.0, 2.0], target_range=[0.0, 1.0])


@pytest.mark.slow
@pytest.mark.parametrize("method", ["gradsim", "state", "random"])
def test_batched_cloth_seeds_equal_one_after_another(f64, tmp_path, method):
    """Issue 17: several control seeds run together.  Two seeds of the cloth throw as the copies of one
    batched Model (one rollout, one Tape, an Adam per copy) give each seed the targets, random baseline,
    coarse-stage start, loss curve, learned velocity and errors of the sequential run, and the report."""
    seq = control_cloth.ClothControlTask(argparse.Namespace(**SMALL_THROW)).run(method, printer=lambda *a: None)
    batch = control_cloth.cloth_throw_task(**SMALL_THROW, batch=1)
    assert isinstance(batch, tgs.scenes.control.ControlBatch) and len(batch.copies) == 2
    run = batch.run(method, printer=lambda *a: None)
    assert [r["seed"] for r in run.per_seed] == [3, 4]
    for a, b in zip(seq.per_seed, run.per_seed):
        assert a.keys() == b.keys()
        for k in a:
            np.testing.assert_allclose(np.asarray(b[k], dtype=float), np.asarray(a[k], dtype=float), rtol=1e-12,
                                       atol=1e-15, err_msg=f"{method}: {k}")
    for a, b in zip(seq.histories, run.histories):
        np.testing.assert_allclose(b.loss if b else [], a.loss if a else [], rtol=1e-12)
    summary = run.summary(out=str(tmp_path))
    assert summary["seeds"] == 2 and summary["experiment"] == "control_cloth"
    np.testing.assert_allclose(summary["position_error"], seq.summary()["position_error"], rtol=1e-12)
    if method != "random":
        run.save_report(tmp_path, printer=lambda *a: None)
        assert os.path.getsize(tmp_path / "loss.png") > 0 and os.path.getsize(tmp_path / "target_vs_final.gif") > 0
    run.animation()


def test_batched_cloth_gradient_matches_finite_differences(f64):
    """The batch's summed loss (each copy against its own target image) differentiated with respect to both
    copies' initial velocities: Tape against central differences along random directions."""
    batch = control_cloth.cloth_throw_task(**SMALL_THROW, batch=1)
    for k, c in enumerate(batch.copies):
        c.set_target(0.3 + 0.5 * k, "gradsim")
        c.policy.set((1.0 - 0.3 * k, 0.5, -0.2 + 0.4 * k))

    def run():
        for c in batch.copies:
            c.policy.write()
        batch.rollout()

    tgs.check_gradient(run, batch.loss, [c.policy.v for c in batch.copies], n_dirs=3, eps=1e-6,
                       rtol=1e-4).assert_ok()


@pytest.mark.slow
def test_batched_control_bad_input_is_named(f64):
    with pytest.raises(ValueError, match="batch: expected 0 .* or 1 .*, got 2"):
        control_cloth.cloth_throw_task(**SMALL_THROW, batch=2)
    batch = control_cloth.cloth_throw_task(**SMALL_THROW, batch=1)
    with pytest.raises(ValueError, match="seeds: this batch has 2 copies, one per seed, got seeds=3"):
        batch.run("state", seeds=3)
    with pytest.raises(ValueError, match="method: expected one of"):
        batch.run("walk")
    with pytest.raises(ValueError, match="copies: expected at least one task"):
        tgs.scenes.control.ControlBatch([], batch.sim)
    with pytest.raises(ValueError, match="policy: expected a policy or a non-empty list of policies"):
        control.fit_policy([], batch.rollout, batch.loss, iters=1)


@pytest.mark.slow
def test_quick_fem_beats_random_threefold(tmp_path):
    r = quick_run(control_fem.gear_task, control_fem.gear_quick, tmp_path, target_range=(0.8, 0.8))
    assert r["position_error"] * 3 <= r["position_error_random"], r
    for name in ("loss.png", "target_vs_final.gif"):
        assert os.path.getsize(tmp_path / name) > 0


@pytest.mark.slow
def test_quick_cloth_beats_random_threefold(tmp_path):
    r = quick_run(control_cloth.cloth_throw_task, control_cloth.cloth_quick, tmp_path)
    assert r["position_error"] * 3 <= r["position_error_random"], r
    assert os.path.getsize(tmp_path / "target_vs_final.gif") > 0


def test_walker_policy_gradient_matches_fd(f64):
    """The walker's settings (material damping, ground) on a short rollout with ground contact."""
    task = control_fem.walker_task(duration=0.06, res=24, checkpoint=16, blur=(0.0, 2.0))
    pol = task.policy
    pol.W.from_numpy(np.random.default_rng(1).standard_normal(pol.W.shape) * 0.5)
    pol.b.from_numpy(np.random.default_rng(2).standard_normal(pol.b.shape) * 0.2)
    for method in ("gradsim", "state"):
        task.set_target((0.3, 0.0, 0.0), method)

        def run():
            pol.write()
            task.rollout()

        tgs.check_gradient(run, task.loss, [pol.W, pol.b], n_dirs=2, eps=1e-6, rtol=1e-4).assert_ok()


@pytest.mark.slow
def test_quick_walker_beats_random_threefold(tmp_path):
    r = quick_run(control_fem.walker_task, control_fem.walker_quick, tmp_path)
    assert r["position_error"] * 3 <= r["position_error_random"], r
    for name in ("loss.png", "target_vs_final.gif"):
        assert os.path.getsize(tmp_path / name) > 0
