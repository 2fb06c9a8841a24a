"""Cloth per-particle initial velocity from video (demos/sysid_cloth.py, --quick)."""
import json
import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "demos"))
import sysid_cloth  # noqa: E402  (the demo, run end to end)
from tigradsim.scenes.reparam import AffineVelocity, RigidVelocity, SmoothedVelocity  # noqa: E402

pytestmark = pytest.mark.slow          # runs demos/sysid_cloth.py


def last_json(capsys):
    return json.loads(capsys.readouterr().out.strip().splitlines()[-1])


def test_quick_cloth_velocity_reduces_error_tenfold(tmp_path, capsys):
    sysid_cloth.main(["--quick", "--headless", "--out", str(tmp_path)])
    result = last_json(capsys)
    assert result["supervision"] == "image"
    assert result["rel_err"]["velocity"] * 10 <= result["rel_err_initial"]["velocity"], result
    for name in ("loss.png", "params.png", "target_initial_estimate.gif"):
        assert os.path.getsize(tmp_path / name) > 0


def test_velocity_reparametrisations_chain_rule_matches_fd(f64):
    """AffineVelocity, RigidVelocity and SmoothedVelocity map a few numbers (or smoothed
    steps) onto every particle's velocity: their hand-written internal_grad against
    central differences in their own coordinates (f64)."""
    import numpy as np
    import taichi as ti
    import tigradsim as tgs
    rng = np.random.default_rng(5)
    n = 7
    rest = rng.uniform(0.0, 0.6, (n, 3))
    fld = ti.Vector.field(3, float, shape=n, needs_grad=True)
    w = ti.Vector.field(3, float, shape=n)
    w.from_numpy(rng.uniform(-1.0, 1.0, (n, 3)))
    loss = ti.field(float, shape=(), needs_grad=True)

    @ti.kernel
    def run():
        for i in fld:
            loss[None] += w[i].dot(fld[i] * fld[i] * fld[i])

    for p, z in ((AffineVelocity(fld, rest), rng.normal(size=12)),
                 (RigidVelocity(fld, rest), rng.normal(size=6)),
                 (SmoothedVelocity(fld, rest, 0.3), rng.normal(size=(n, 3)) * 0.5),
                 (SmoothedVelocity(fld, rest, 0.0), rng.normal(size=(n, 3)) * 0.5)):
        p.write(z)
        report = tgs.check_param_gradient(run, loss, p)
        assert report.ok, f"{type(p).__name__}:\n{report}"
