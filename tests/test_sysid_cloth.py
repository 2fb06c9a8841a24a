"""Cloth per-particle initial velocity from video (demos/sysid_cloth.py, --quick)."""
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "demos"))
import sysid_cloth  # noqa: E402


def last_json(capsys):
    return json.loads(capsys.readouterr().out.strip().splitlines()[-1])


def test_quick_cloth_velocity_reduces_error_tenfold(tmp_path, capsys):
    sysid_cloth.main(["--quick", "--headless", "--out", str(tmp_path)])
    result = last_json(capsys)
    assert result["supervision"] == "image"
    assert result["rel_err"]["velocity"] * 10 <= result["rel_err_initial"]["velocity"], result
    for name in ("loss.png", "params.png", "target_initial_estimate.gif"):
        assert os.path.getsize(tmp_path / name) > 0
