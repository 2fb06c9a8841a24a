"""Rigid contact parameters (mass, ke, kd, kf, mu) from video: the quick demo."""
import json
import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "demos"))
import sysid_rigid_contact  # noqa: E402

pytestmark = pytest.mark.slow          # runs demos/sysid_rigid_contact.py


def last_json(capsys):
    return json.loads(capsys.readouterr().out.strip().splitlines()[-1])


def test_quick_rigid_contact_reduces_error_tenfold(tmp_path, capsys):
    sysid_rigid_contact.main(["--quick", "--headless", "--out", str(tmp_path)])
    result = last_json(capsys)
    identifiable = ("mass", "ke", "kd", "mu")          # kf: converges at the default dt and iterations only
    err = sum(result["rel_err"][n] for n in identifiable)
    err0 = sum(result["rel_err_initial"][n] for n in identifiable)
    assert err * 10 <= err0, result
    for name in ("loss.png", "params.png", "target_initial_estimate.gif"):
        assert os.path.getsize(tmp_path / name) > 0
