"""tigradsim.scenes.control / shapes: flags built from a scene builder's keyword arguments, the
settings checks that run before anything is built, and the render demo's turntable (no kernels)."""
import argparse

import numpy as np
import pytest

from tigradsim.scenes import control, control_cloth, control_fem
from tigradsim.scenes.shapes import turntable, unit_mesh

pytestmark = pytest.mark.slow          # the paper's control scenes


def fake_builder(seed=0, blur=(0.0, 2.0), velocity=(1.0, 0.0, 0.0), res=64, dt=1e-3, look_at=(0.0, 1.0, 0.0)):
    return dict(locals())


def test_flags_take_the_builders_defaults_and_build_passes_the_parsed_values():
    p = control.add_flags(argparse.ArgumentParser(), fake_builder, ("seed", "blur", "velocity", "res", "dt", "look_at"))
    p.add_argument("--out", default="somewhere")          # not a builder argument: ignored by build
    assert control.build(fake_builder, p.parse_args([])) == fake_builder()
    args = p.parse_args(["--blur", "0", "1", "3", "--velocity", "2", "0", "-1", "--res", "32", "--look-at", "1", "2",
                         "3", "--method", "state"])
    got = control.build(fake_builder, args, seed=7)
    assert got == dict(seed=7, blur=(0.0, 1.0, 3.0), velocity=(2.0, 0.0, -1.0), res=32, dt=1e-3,
                       look_at=(1.0, 2.0, 3.0))
    assert isinstance(got["res"], int) and args.method == "state"
    with pytest.raises(SystemExit):                         # a fixed-length tuple takes exactly that many values
        p.parse_args(["--velocity", "1", "2"])
    with pytest.raises(ValueError, match="'nope'"):
        control.add_flags(argparse.ArgumentParser(), fake_builder, ("nope",))


@pytest.mark.parametrize("builder, names", [(control_fem.gear_task, control_fem.GEAR_FLAGS),
                                            (control_fem.walker_task, control_fem.WALKER_FLAGS),
                                            (control_cloth.cloth_throw_task, control_cloth.CLOTH_FLAGS)])
def test_demo_flags_parse_to_the_builders_defaults(builder, names):
    args = control.add_flags(argparse.ArgumentParser(), builder, names).parse_args([])
    defaults = control.builder_defaults(builder)
    for name in names:
        value = getattr(args, name)
        assert (tuple(value) if isinstance(value, list) else value) == defaults[name], name
    assert (args.method, args.precision, args.quick) == ("gradsim", "f32", False)


@pytest.mark.parametrize("bad, match", [(dict(dt=0.0), "dt: expected a positive"),
                                        (dict(duration=float("nan")), "duration: expected a positive"),
                                        (dict(duration=1e-4), "duration: .* less than one step"),
                                        (dict(every=0), r"every: .* in \[1, 100\]"),
                                        (dict(every=101), r"every: .* got 101"),
                                        (dict(every=2.5), r"every: .* got 2.5")])
def test_timing_settings_are_checked_before_building(bad, match):
    s = argparse.Namespace(**{**dict(dt=0.01, duration=1.0, every=10), **bad})
    with pytest.raises(ValueError, match=match):
        control.check_timing(s)
    assert control.check_timing(argparse.Namespace(dt=0.01, duration=1.0, every=10)) == 100


def test_builders_reject_bad_timing_before_any_kernel():
    # no tgs.init here: the check runs before a field or kernel is made
    with pytest.raises(ValueError, match="dt: expected a positive number of seconds, got -0.001"):
        control_fem.gear_task(dt=-1e-3)
    with pytest.raises(ValueError, match="every"):
        control_cloth.cloth_throw_task(duration=0.01, every=50)


def test_run_rejects_an_unknown_method_first():
    with pytest.raises(ValueError, match="method: expected one of .* got 'pixels'"):
        control.ControlTask.run(object(), "pixels")


def test_quick_settings_cap_the_paper_settings():
    g = control_fem.gear_quick(control.builder_defaults(control_fem.gear_task))
    assert (g["seeds"], g["iters"], g["res"], g["duration"], g["every"]) == (1, 10, 48, 1.5, 120)
    w = control_fem.walker_quick(dict(control.builder_defaults(control_fem.walker_task), iters=5))
    assert (w["seeds"], w["iters"], w["res"], w["duration"]) == (1, 5, 48, 1.0)
    c = control_cloth.cloth_quick(control.builder_defaults(control_cloth.cloth_throw_task))
    assert (c["seeds"], c["iters"], c["res"]) == (1, 30, 48)


def test_turntable_turns_about_y_after_the_tilt():
    p = np.array([[1.0, 2.0, 3.0]])
    t = turntable(p, 4, tilt=0.0)
    np.testing.assert_allclose(t[0], p)
    np.testing.assert_allclose(t[1], [[3.0, 2.0, -1.0]], atol=1e-12)     # a quarter turn: (x, y, z) -> (z, y, -x)
    tilted = turntable(p, 3, tilt=0.35)
    np.testing.assert_allclose(np.linalg.norm(tilted, axis=-1), np.linalg.norm(p), rtol=1e-12)
    c, s = np.cos(0.35), np.sin(0.35)
    np.testing.assert_allclose(tilted[0], [[1.0, 2.0 * c - 3.0 * s, 2.0 * s + 3.0 * c]], atol=1e-12)
    with pytest.raises(ValueError, match=r"vertices must have shape \(V, 3\)"):
        turntable(np.zeros(3), 4)
    with pytest.raises(ValueError, match="frames must be >= 1, got 0"):
        turntable(p, 0)


def test_unit_mesh_is_centred_and_fits_the_unit_cube():
    v, f = unit_mesh(None, 1)
    np.testing.assert_allclose(0.5 * (v.max(0) + v.min(0)), 0.0, atol=1e-12)
    assert np.isclose(np.abs(v).max(), 1.0) and f.max() == len(v) - 1
