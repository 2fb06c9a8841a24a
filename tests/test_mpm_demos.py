"""The MPM coupling demos' --quick runs, headless (demos/mpm_sand_pile.py, mpm_plasticine_squash.py,
mpm_fluid_splash.py; scenes in tigradsim/scenes/mpm_showcase.py): each writes its GIF and its JSON line, and
what it shows happened (sand heaped on the box, plasticine stayed squashed, the thrown fluid spread)."""
import json
import runpy
import sys

import pytest


def _quick(name, tmp_path, capsys):
    argv = sys.argv
    sys.argv = [name, "--quick", "--headless", "--out", str(tmp_path)]
    try:
        runpy.run_path(f"demos/{name}.py", run_name="__main__")
    finally:
        sys.argv = argv
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert out["gif"] and (tmp_path / f"{name}.gif").exists()
    return out


@pytest.mark.slow       # ~15-25 s each once its kernels are cached, minutes cold on the shared 2-core VM
def test_sand_pile_quick(tmp_path, capsys):
    out = _quick("mpm_sand_pile", tmp_path, capsys)
    assert out["on_box"] > 0.5 and 0.02 < out["heap_height"] < 0.2     # a heap on the box, lower than the column
    assert 0.0 <= out["box_sink"] < 0.01                                # the box stands on its ground contact


@pytest.mark.slow
def test_plasticine_squash_quick(tmp_path, capsys):
    out = _quick("mpm_plasticine_squash", tmp_path, capsys)
    assert out["height_pressed"] < out["height_start"] - 0.02           # squashed by the box
    assert out["spring_back"] < 0.25 * (out["height_start"] - out["height_pressed"])   # and stays so (plastic)
    assert out["widening"] > 0.01 and out["box_rest"] > out["height_end"] - 0.01     # the box rests on it


@pytest.mark.slow
def test_fluid_splash_quick(tmp_path, capsys):
    out = _quick("mpm_fluid_splash", tmp_path, capsys)
    assert out["blob_spread"] > 0.25                                    # the thrown cube (0.2 m) spread
    assert out["in_sphere"] < 0.03                                      # the sphere kept the fluid out
