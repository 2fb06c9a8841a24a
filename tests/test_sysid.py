"""System identification from video: the quick demo, loading a saved video,
and resuming a fit."""
import json
import os
import sys

import numpy as np
import pytest

import tigradsim as tgs
from tigradsim.scenes.rigid_push import PushScene

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "demos"))
import sysid_rigid_mass  # noqa: E402  (the demo itself: its main() is under test)

pytestmark = pytest.mark.slow          # runs the rigid-mass demo and the paper's push scene


def last_json(capsys):
    out = capsys.readouterr().out.strip().splitlines()
    return json.loads(out[-1])


def small_args(tmp_path, extra=()):
    return ["--quick", "--trials", "1", "--shape", "box", "--true-mass", "1.7", "--init-mass", "0.8",
            "--headless", "--out", str(tmp_path)] + list(extra)


def test_quick_rigid_mass_reduces_error_tenfold(tmp_path, capsys):
    sysid_rigid_mass.main(small_args(tmp_path))
    result = last_json(capsys)
    assert result["rel_err"]["mass"] * 10 <= result["rel_err_initial"]["mass"], result
    for name in ("loss.png", "params.png", "target_initial_estimate.gif"):
        assert os.path.getsize(tmp_path / name) > 0


def make_fit():
    import argparse
    tgs.init(precision="f64")
    ns = argparse.Namespace(push=20.0, duration=0.3, dt=1 / 480, every=24, res=24, sigma=1e-3, checkpoint=None)
    return PushScene("box", **vars(ns))


def test_target_from_disk_gives_same_fit(tmp_path):
    from tigradsim.io.video import save_frames
    sc = make_fit()
    sc.model.set("body_mass", [1.6])
    target = sc.fit.render()
    save_frames(target[..., 0], tmp_path / "video", prefix="f")
    estimates = []
    for tgt in (np.round(target * 255) / 255, str(tmp_path / "video")):
        sc.model.set("body_mass", [0.9])
        sc.fit.history = tgs.History()
        sc.fit.fit(tgt, iters=12, optimizer=tgs.Adam([sc.mass], lr=0.1, lr_decay=0.85), log_every=0)
        estimates.append(float(sc.model.get("body_mass")[0]))
    assert estimates[0] == pytest.approx(estimates[1], rel=1e-9)
    assert abs(estimates[0] - 1.6) < abs(0.9 - 1.6) / 2


def test_resume_reproduces_uninterrupted_fit(tmp_path):
    sc = make_fit()
    sc.model.set("body_mass", [1.6])
    target = sc.fit.render()

    def fit(iters, resume):
        sc.fit.fit(target, iters=iters, optimizer=tgs.Adam([sc.mass], lr=0.1), log_every=0, resume=resume,
                   save_every=1)
        return float(sc.model.get("body_mass")[0]), list(sc.fit.history.loss)

    sc.model.set("body_mass", [0.9])
    sc.fit.history = tgs.History()
    straight, straight_loss = fit(10, None)

    sc.model.set("body_mass", [0.9])
    sc.fit.history = tgs.History()
    path = str(tmp_path / "fit.pkl")
    fit(4, path)                                   # "interrupted" after 4 iterations
    sc.model.set("body_mass", [123.0])             # whatever the process held is gone
    sc.fit.history = tgs.History()
    resumed, resumed_loss = fit(10, path)
    assert resumed == pytest.approx(straight, rel=1e-12)
    np.testing.assert_allclose(resumed_loss, straight_loss, rtol=1e-12)


def test_checkpointed_rendering_gradient_equals_full():
    """Frames rendered inside checkpointed segments: the renderer's custom op is
    recorded and replayed by the segment's backward, so the gradient matches."""
    import argparse
    import taichi as ti
    grads = []
    for ck in (None, 16):
        tgs.init(precision="f64")
        ns = argparse.Namespace(push=40.0, duration=0.3, dt=1 / 480, every=24, res=24, sigma=2e-5, checkpoint=ck)
        sc = PushScene("box", **vars(ns))
        sc.model.set("body_mass", [1.6])
        target = sc.fit.render()
        sc.model.set("body_mass", [1.1])
        sc.fit.set_target(target)
        with ti.ad.Tape(sc.fit.loss):
            sc.fit._forward()
        grads.append((float(sc.fit.loss[None]), sc.model.body_mass.grad.to_numpy().copy(),
                      sc.model.body_qd0.grad.to_numpy().copy()))
    assert grads[0][0] == pytest.approx(grads[1][0], rel=1e-12)
    assert abs(grads[0][1][0]) > 0
    np.testing.assert_allclose(grads[1][1], grads[0][1], rtol=1e-10)
    np.testing.assert_allclose(grads[1][2], grads[0][2], rtol=1e-9, atol=1e-12)
