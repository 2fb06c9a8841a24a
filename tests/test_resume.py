"""VideoFit checkpoints: resuming from a file that is not a checkpoint, a truncated one, or
another fit's gives a ValueError naming the path and the problem, before anything changes."""
import pickle

import numpy as np
import pytest

import tigradsim as tgs
from tigradsim.scenes.rigid_push import PushScene

pytestmark = pytest.mark.slow          # fits the paper's push scene


@pytest.fixture(scope="module")
def scene():
    import argparse
    tgs.init(precision="f64")
    ns = argparse.Namespace(push=20.0, duration=0.1, dt=1 / 480, every=24, res=16, edge_softness=1e-3, checkpoint=None)
    sc = PushScene("box", **vars(ns))
    sc.fit.optimizer = tgs.Adam([sc.mass], lr=0.1)
    return sc


def _expect(sc, path, match):
    sc.model.set("body_mass", [0.77])
    with pytest.raises(ValueError, match=match) as exc:
        sc.fit.load_state(str(path))
    assert str(path) in str(exc.value)
    assert float(sc.model.get("body_mass")[0]) == 0.77          # nothing changed


def test_resume_errors_name_path_and_problem(scene, tmp_path):
    sc = scene
    good = tmp_path / "fit.pkl"
    sc.model.set("body_mass", [1.3])
    sc.fit.save_state(str(good))
    data = good.read_bytes()

    (tmp_path / "text.pkl").write_text("iteration 4, mass 1.3\n")
    _expect(sc, tmp_path / "text.pkl", "not a pickle")
    (tmp_path / "empty.pkl").write_bytes(b"")
    _expect(sc, tmp_path / "empty.pkl", "empty file")
    (tmp_path / "cut.pkl").write_bytes(data[: len(data) // 2])
    _expect(sc, tmp_path / "cut.pkl", "truncated or corrupt")
    (tmp_path / "other.pkl").write_bytes(pickle.dumps({"weights": np.zeros(3)}))
    _expect(sc, tmp_path / "other.pkl", "not a VideoFit checkpoint")
    legacy = {"params": [np.array([1.0])], "optimizer": {}, "history": tgs.History()}
    (tmp_path / "legacy.pkl").write_bytes(pickle.dumps(legacy))
    _expect(sc, tmp_path / "legacy.pkl", "before version 1")
    state = pickle.loads(data)
    state["params"] = [("density", (3,))]
    (tmp_path / "another.pkl").write_bytes(pickle.dumps(state))
    _expect(sc, tmp_path / "another.pkl", r"another fit.*density")
    state = pickle.loads(data)
    state["optimizer"] = "BFGS"
    (tmp_path / "bfgs.pkl").write_bytes(pickle.dumps(state))
    _expect(sc, tmp_path / "bfgs.pkl", "BFGS")
    state = pickle.loads(data)
    state["version"] = 99
    (tmp_path / "v99.pkl").write_bytes(pickle.dumps(state))
    _expect(sc, tmp_path / "v99.pkl", "version 99")

    sc.model.set("body_mass", [0.5])                             # the good one still loads
    sc.fit.load_state(str(good))
    assert float(sc.model.get("body_mass")[0]) == pytest.approx(1.3, rel=1e-12)


def test_fit_with_bad_resume_file_fails_before_fitting(scene, tmp_path):
    bad = tmp_path / "bad.pkl"
    bad.write_text("not a checkpoint")
    with pytest.raises(ValueError, match=str(bad)):
        scene.fit.fit(scene.fit.render(), iters=1, resume=str(bad), log_every=0)
