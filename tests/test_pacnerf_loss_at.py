"""benchmarks/pacnerf_loss_at.py without a rollout (no kernel): the truth of each unknown read from a clip's
truth.json, and the clear errors for a missing file or a malformed --at point."""
import json
import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
import pacnerf_loss_at  # noqa: E402


def test_truth_values_reads_the_footage_makers_format(tmp_path):
    path = tmp_path / "truth.json"
    path.write_text(json.dumps({"object": "jelly", "truth": {"material": "x", "E": 1e5, "nu": 0.3}}))
    assert pacnerf_loss_at.truth_values(str(path), ["jelly.E", "jelly.nu", "jelly.density"]) == \
        {"jelly.E": 1e5, "jelly.nu": 0.3, "jelly.density": None}


def test_missing_files_are_named(tmp_path, capsys):
    truth = tmp_path / "truth.json"
    truth.write_text("{}")
    with pytest.raises(SystemExit):
        pacnerf_loss_at.main([str(tmp_path / "nope.toml"), "--truth", str(truth)])
    assert "nope.toml" in capsys.readouterr().err
    scene = tmp_path / "scene.toml"
    scene.write_text("")
    with pytest.raises(SystemExit):
        pacnerf_loss_at.main([str(scene), "--truth", str(tmp_path / "missing.json")])
    err = capsys.readouterr().err
    assert "--truth" in err and "missing.json" in err
