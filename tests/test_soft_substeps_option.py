"""benchmarks' soft-clip step option (issue 44, benchmarks/soft_drop_diagnose.py): coverage_soft.make_soft_scene(substeps=)
and implicit_damping_fit.py --substeps write [simulation] substeps into the scene file and change nothing else;
bad values are refused before any fit."""

import pytest
from benchmark_modules import benchmark_modules


def test_substeps_reach_the_soft_scene_file_and_nothing_else_changes(tmp_path):
    from tigradsim.scenes.scene_file import load_scene
    soft = benchmark_modules("coverage_soft")
    plain, _ = soft.make_soft_scene("newton_soft_drop", "clean", "nuisance", str(tmp_path / "plain"), str(tmp_path),
                                    True, "warp", ground={"damping_integration": "implicit"})
    made, truths = soft.make_soft_scene("newton_soft_drop", "clean", "nuisance", str(tmp_path / "made"),
                                        str(tmp_path), True, "warp", ground={"damping_integration": "implicit"},
                                        mass_distribution="equal", substeps=256)
    a, b = load_scene(plain), load_scene(made)
    assert (a.substeps, b.substeps) == (112, 256)              # the --quick soft settings, then the option
    assert b.objects["cube"].mass_distribution == "equal" and a.objects["cube"].mass_distribution == "volume"
    assert a.ground == b.ground and [u.target for u in a.unknowns] == [u.target for u in b.unknowns]
    assert truths == {"cube.mu": 3500.0, "cube.lam": 12000.0}
    for bad in (0, True, 2.5):
        with pytest.raises(ValueError, match=f"substeps: expected an integer >= 1 .*got {bad!r}"):
            soft.make_soft_scene("newton_soft_drop", "clean", "nuisance", str(tmp_path / "bad"), str(tmp_path), True,
                                 "warp", substeps=bad)


def test_implicit_damping_fit_refuses_a_bad_step(tmp_path, capsys):
    idf = benchmark_modules("implicit_damping_fit")
    with pytest.raises(SystemExit):
        idf.main(["--clip", "newton_soft_drop", "--substeps", "0", "--out", str(tmp_path)])
    assert "--substeps: expected an integer >= 1 (steps a frame), got 0" in capsys.readouterr().err
