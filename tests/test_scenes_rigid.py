"""tigradsim.scenes' rigid scenes: the pose kernel's gradient (f64, FD), the seeded draws, the bounce
metrics, and bad arguments rejected before any kernel runs.  (The fits themselves run in
test_sysid.py, test_sysid_rigid_contact.py, test_resume.py and test_reproducible.py.)"""
import numpy as np
import pytest
import taichi as ti

import tigradsim as tgs
from tigradsim.renderers import ImageMSE
from tigradsim.scenes import rigid_bounce, rigid_contact, rigid_pose_fit, rigid_push

pytestmark = pytest.mark.slow          # the paper's rigid scenes


def test_posed_mesh_vertices_gradient_matches_fd(f64):
    """X = R(r) rest + t: Tape gradient w.r.t. the six pose numbers equals central differences, at a
    general pose and at zero rotation (where the kernel's sqrt(|r|^2 + 1e-12) keeps it finite)."""
    rng = np.random.default_rng(3)
    obj = rigid_pose_fit.PosedMesh(rng.normal(size=(7, 3)))
    assert obj.vertex_count == obj.n == 7                    # n: vertex_count's older name
    loss = tgs.MSELoss(obj.X, rng.normal(size=(1, 7, 3)))

    def run():
        obj.apply()
        loss()

    for pose in ([0.1, -0.2, 0.3, 0.4, -0.5, 0.6], [0.1, -0.2, 0.3, 0.0, 0.0, 0.0]):
        obj.pose.from_numpy(np.array(pose))
        report = tgs.check_gradient(run, loss.value, [obj.pose], n_dirs=4, rtol=1e-6, scale=[0.3])
        report.assert_ok()
        assert max(abs(a) for a in report.analytic) > 1e-3, report     # a real, non-zero derivative


def test_pose_scene_image_loss_gradient_matches_fd(f64):
    """The whole pose fit's objective (pose -> vertices -> soft rasterizer -> pixel MSE) at 16 px."""
    sc = rigid_pose_fit.PoseScene(size=16, seed=1)
    target = sc.render(sc.true_pose)
    mse = ImageMSE(sc.renderer.image, target[None])
    loss = ti.field(float, shape=(), needs_grad=True)
    sc.obj.pose.from_numpy(sc.init_pose)

    def run():
        sc.obj.apply()
        sc.renderer.render(sc.obj.X, 0, 0)
        mse(loss)

    tgs.check_gradient(run, loss, [sc.obj.pose], n_dirs=2, rtol=1e-5, scale=[0.05]).assert_ok()


def test_pose_errors():
    r = rigid_pose_fit.rotation_matrix([0.0, 0.0, np.pi / 2])
    np.testing.assert_allclose(r @ [1.0, 0.0, 0.0], [0.0, 1.0, 0.0], atol=1e-15)
    t, a = rigid_pose_fit.pose_errors([0.3, 0, 0, 0, 0.2, 0], [0, 0.4, 0, 0, -0.1, 0])
    assert t == pytest.approx(0.5) and a == pytest.approx(0.3)


def test_contact_draws_are_seeded_and_overrides_keep_the_other_draws():
    truth, guess = rigid_contact.draw(np.random.default_rng(0))
    again, _ = rigid_contact.draw(np.random.default_rng(0))
    assert truth == again
    for n in rigid_contact.NAMES:
        lo, hi = rigid_contact.BOUNDS[n]
        assert lo <= guess[n] <= hi and guess[n] != truth[n]
        assert 1 / 1.5 <= guess[n] / truth[n] <= 1.5 or guess[n] in (lo, hi)
    zeta = truth["kd"] / np.sqrt(truth["ke"] * truth["mass"])
    assert 0.3 <= zeta <= 0.6
    fixed, _ = rigid_contact.draw(np.random.default_rng(0), truth={"mu": 0.9})
    assert fixed == {**truth, "mu": 0.9}


def test_mass_draws_are_seeded_log_uniform():
    a = [rigid_push.draw_masses(np.random.default_rng(5)) for _ in range(2)]
    assert a[0] == a[1] and all(0.5 <= m <= 3.0 for m in a[0])
    assert rigid_push.draw_masses(np.random.default_rng(5), true_mass=2.0)[0] == 2.0


def test_bounce_metrics_on_a_known_track():
    # falls from 1.0 to touch at frame 2, bounces to 0.5 (rest 0.2: ratio 0.3 / 0.8), slides 0.6 m along x
    y = np.array([1.0, 0.6, 0.2, 0.5, 0.2, 0.2])
    x = np.array([0.0, 0.1, 0.2, 0.5, 0.8, 0.8])
    positions = np.stack([x, y, np.zeros_like(x)], axis=1)
    bounce, slide, touch = rigid_bounce.bounce_metrics(positions, y - 0.2)
    assert (touch, bounce, slide) == (2, pytest.approx(0.375), pytest.approx(0.6))


@pytest.mark.parametrize("make, match", [
    (lambda: rigid_push.PushScene("pyramid"), "shape: unknown shape 'pyramid'"),
    (lambda: rigid_push.PushScene("box", supervision="pixels"), "supervision: expected 'image' or 'state'"),
    (lambda: rigid_push.PushScene("box", dt=0.0), "dt: expected a positive time"),
    (lambda: next(rigid_push.mass_trials(trials=0)), "trials: expected a positive integer, got 0"),
    (lambda: rigid_contact.BounceBoxScene(box=(0.3, -0.1, 0.2)), "box: expected three positive sizes"),
    (lambda: rigid_contact.BounceBoxScene(every=0), "every, res: expected positive integers"),
    (lambda: rigid_contact.draw(np.random.default_rng(0), guess_factor=0.5), "guess_factor: expected a factor >= 1"),
    (lambda: rigid_contact.draw(np.random.default_rng(0), truth={"density": 1.0}), r"truth: unknown parameter"),
    (lambda: rigid_bounce.BounceScene(steps=0), "steps, every: expected positive integers"),
    (lambda: rigid_bounce.bounce_metrics(np.zeros((4, 2)), np.zeros(4)), r"positions, lowest: expected shapes"),
    (lambda: rigid_pose_fit.PoseScene(size=4), "size: expected an image size >= 8 px, got 4"),
    (lambda: rigid_pose_fit.PoseScene(true_pose=(0, 0, 0)), r"true_pose: expected 6 numbers"),
])
def test_bad_arguments_are_named(make, match):
    with pytest.raises(ValueError, match=match):
        make()
