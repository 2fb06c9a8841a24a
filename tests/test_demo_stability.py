"""Every demo's default scene is within its own stability limits (issue 45 item 5).

Each script in demos/ is run as `python3 demos/NAME.py --headless` would run it, with its default
flags, up to the first `Simulator` it builds: there the scene goes through the pre-flight
(`tigradsim.core.stability.stability_report`, what `Simulator` warns from) and the demo stops, so
no rollout runs.  The rigid-mass demo (the Quickstart) also fits masses: every one of its shapes is
checked at the lightest mass its fit may visit.  Before issue 45, control_fem, control_cloth and
control_walker were 1.3-2x past the explicit limit itself at their defaults, sysid_cloth past half of
it, and the Quickstart warned three times (its sphere and irregular body at light masses)."""
import importlib.util
from pathlib import Path

import pytest

import tigradsim as tgs
from tigradsim.sim import simulator
from tigradsim.core.stability import stability_report

DEMOS = Path(__file__).resolve().parents[1] / "demos"
# demos with no dynamics: they render (render_mesh) or fit a pose through the renderer (fit_pose)
NO_SIMULATOR = {"fit_pose", "render_mesh"}


class _Stopped(BaseException):
    """Raised at the demo's first Simulator (a BaseException: no demo's `except Exception` swallows it)."""


def _load(name):
    spec = importlib.util.spec_from_file_location(f"demo_{name}", DEMOS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _names():
    return sorted(p.stem for p in DEMOS.glob("*.py") if p.stem not in NO_SIMULATOR)


def test_the_list_covers_every_demo():
    assert NO_SIMULATOR <= {p.stem for p in DEMOS.glob("*.py")}
    for name in NO_SIMULATOR:
        assert "Simulator" not in (DEMOS / f"{name}.py").read_text()
    assert len(_names()) >= 11


@pytest.mark.parametrize("name", _names())
def test_demo_defaults_pass_the_preflight(name, tmp_path, monkeypatch):
    reports = []

    def preflight_and_stop(sim, stacklevel):
        reports.append(stability_report(sim.model, sim.dt, sim.force_terms))
        raise _Stopped

    monkeypatch.setattr(simulator.Simulator, "_preflight", preflight_and_stop)
    demo = _load(name)
    with pytest.raises(_Stopped):
        demo.main(["--headless", "--out", str(tmp_path)])
    report = reports[0]
    assert report.rows, f"{name}: no force term reported a limit"
    assert report.ok, f"{name} at its defaults:\n{report}\n{report.message()}"


def test_quickstart_shapes_are_stable_at_every_mass_the_fit_may_visit():
    """demos/sysid_rigid_mass.py draws truths and guesses in MASS_RANGE and fits within FIT_BOUNDS:
    every shape, at its defaults (dt 1/480 s, a frame every 12 steps, split by `stable_substeps`), is
    within the pre-flight from the lightest bound up."""
    from tigradsim.scenes import rigid_push
    tgs.init(arch="cpu", precision="f64")
    assert rigid_push.FIT_BOUNDS[0] <= rigid_push.MASS_RANGE[0] and rigid_push.MASS_RANGE[1] <= rigid_push.FIT_BOUNDS[1]
    for shape in rigid_push.SHAPES:
        model = rigid_push.push_model(shape)
        every, dt = rigid_push.stable_substeps(model, 12, 1 / 480)
        assert every * dt == pytest.approx(12 / 480)             # the frames keep their times
        for mass in (rigid_push.FIT_BOUNDS[0], *rigid_push.MASS_RANGE, rigid_push.FIT_BOUNDS[1]):
            model.set("body_mass", [mass])
            report = stability_report(model, dt)
            assert report.ok, f"{shape} at {mass} kg, dt {dt:.4g} s:\n{report}"
