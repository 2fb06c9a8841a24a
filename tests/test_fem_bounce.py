"""demos/fem_bounce.py: StVK at its default stiffness survives the first impact (no tet
inverts); at 1e3, the old default, the demo reports the inversion instead of hiding it."""
import json
import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "demos"))
import fem_bounce  # noqa: E402

pytestmark = pytest.mark.slow          # runs demos/fem_bounce.py


def _run(tmp_path, capsys, *extra):
    # resolution 1 (160 tets), through the first impact (~0.5 s) and the rebound
    fem_bounce.main(["--material", "stvk", "--resolution", "1", "--steps", "1400", "--frame-every", "700",
                     "--headless", "--out", str(tmp_path), *extra])
    out, err = capsys.readouterr()
    return json.loads(out.strip().splitlines()[-1]), err


def test_stvk_default_bounces_without_inverting(tmp_path, capsys):
    result, err = _run(tmp_path, capsys)
    assert result["mu"] == result["lam"] == 3e3
    assert result["min_height"] < 0.01                    # it did hit the ground
    assert result["inverted_samples"] == 0 and result["min_J"] > 0.2, result
    assert "inverted" not in err


def test_soft_stvk_inversion_is_reported(tmp_path, capsys):
    result, err = _run(tmp_path, capsys, "--mu", "1e3", "--lam", "1e3")
    assert result["inverted_samples"] > 0 and result["min_J"] < 0, result
    assert "inverted (J <= 0)" in err
