"""benchmarks/coverage.py's numerics options (issue 44): --rigid-damping writes [ground] damping_integration and
--substeps [simulation] substeps into every rigid clip's scene file, the same for every law of a comparison, and
nothing else changes; bad values and clips that do not take them are refused before any fit."""

import pytest
from benchmark_modules import benchmark_modules


def _coverage():
    return benchmark_modules("coverage")


def test_rigid_damping_and_substeps_reach_the_scene_file(tmp_path):
    from tigradsim.scenes.scene_file import load_scene
    cov = _coverage()
    law = {"damping": "uncapped", "friction": "warp", "friction_velocity": 0.01}
    plain, _ = cov.make_scene("warp_box_drop", "clean", "nuisance", str(tmp_path / "plain"), str(tmp_path), True,
                              law=law)
    made, truths = cov.make_scene("warp_box_drop", "clean", "nuisance", str(tmp_path / "made"), str(tmp_path), True,
                                  law=law, ground={"damping_integration": "implicit"}, substeps=256)
    a, b = load_scene(plain), load_scene(made)
    assert b.ground["law"] == dict(law, damping_integration="implicit")
    assert a.ground["law"] == law                      # the default: nothing written, the library's explicit
    assert (a.substeps, b.substeps) == (64, 256)       # --quick drop settings, then the option
    assert set(b.ground) == set(a.ground) and [u.target for u in a.unknowns] == [u.target for u in b.unknowns]
    assert truths["box.mu"] == pytest.approx(0.6)


def test_bad_or_unsupported_numerics_options_are_refused(tmp_path, capsys):
    cov = _coverage()
    with pytest.raises(SystemExit):
        cov.main(["--clips", "warp_box_drop", "--substeps", "0", "--out", str(tmp_path)])
    assert "--substeps: expected an integer >= 1, got 0" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        cov.main(["--clips", "warp_box_drop", "--rigid-damping", "backward", "--out", str(tmp_path)])
    assert "invalid choice: 'backward'" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        cov.main(["--clips", "warp_soft_drop", "--substeps", "128", "--out", str(tmp_path)])
    assert "--substeps: not implemented for the soft clips" in capsys.readouterr().err
    with pytest.raises(ValueError, match="not implemented for the cloth clips"):
        cov.make_scene("warp_cloth_sphere", "clean", "nuisance", str(tmp_path / "c"), str(tmp_path), True,
                       substeps=128)
