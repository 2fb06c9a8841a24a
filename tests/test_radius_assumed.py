"""A soft or cloth object's contact radius the scene file does not state is an assumed constant (issue 44 item 2,
issue 46): "NAME.radius" over PRIOR_RANGES["radius"] = [0, 2 x the library's default], its writer on the object's
rows of particle_radius, its sensitivity reported for every estimate (tigradsim/scenes/assumed.py); a stated radius
(0 included) is the user's and is not assumed.  No differentiable piece is added (the radius is written between
rollouts, never differentiated), so no gradient check here."""
import numpy as np
import pytest

import tigradsim as tgs
from tigradsim.scenes.assumed import assumed_constants, unstated_radii
from tigradsim.scenes.scene_file import parse_scene

from test_soft_mass import soft_scene

CUBE = {"tet_box": {"cells": [1, 1, 1], "size": [0.1, 0.1, 0.1]}, "density": 500.0, "params": {"mu": 3e3, "lam": 5e3},
        "position": [0.0, 0.055, 0.0]}       # centred: its bottom 5 mm above the ground, inside the default 1 cm skin


def _cube_scene(tmp_path, **obj):
    """The soft cube scene of test_soft_mass (3 frames, 8 x 8 px) with every ground constant stated, 40 steps a
    frame and the ground's ke as the one unknown."""
    data = soft_scene(tmp_path, dict(CUBE, **obj), {"ground.ke": {"init": 1e4, "lower": 1e3, "upper": 1e5}})
    data["simulation"]["substeps"] = 40
    return data


def test_only_an_unstated_radius_is_marked(tmp_path):
    """Parsing only: soft and cloth objects record whether their table stated `radius` (0 is a statement)."""
    from test_scene_cloth import _cloth_scene
    from test_scene_file import DELETE

    spec = parse_scene(_cube_scene(tmp_path), str(tmp_path / "scene.toml"))
    cube = spec.objects["cube"]
    assert cube.contact_radius == 0.01 and not cube.contact_radius_stated
    for r in (0.0, 0.01):
        cube = parse_scene(_cube_scene(tmp_path, radius=r), str(tmp_path / "scene.toml")).objects["cube"]
        assert cube.contact_radius == r and cube.contact_radius_stated
    cloth = parse_scene(_cloth_scene(tmp_path), str(tmp_path / "scene.toml")).objects["cloth"]
    assert cloth.contact_radius_stated
    cloth = parse_scene(_cloth_scene(tmp_path, **{"objects.cloth.radius": DELETE}),
                        str(tmp_path / "scene.toml")).objects["cloth"]
    assert cloth.contact_radius == 0.005 and not cloth.contact_radius_stated
    assert tgs.PRIOR_RANGES["radius"](0.005) == (0.0, 0.01)


def test_unstated_cloth_radius_is_assumed_on_its_own_rows(tmp_path):
    """A built cloth scene without `radius`: "cloth.radius" (0.005 in [0, 0.01]) is its only assumed constant (the
    ground states all four), and its writer moves the cloth's particle_radius rows only."""
    from tigradsim.scenes.scene_build import Scene, load_scene_footage
    from test_scene_cloth import _cloth_scene
    from test_scene_file import DELETE

    tgs.init(arch="cpu", precision="f64")
    spec = parse_scene(_cloth_scene(tmp_path, **{"objects.cloth.radius": DELETE}), str(tmp_path / "scene.toml"))
    scene = Scene(spec, load_scene_footage(spec))
    (c,) = assumed_constants(scene)
    assert (c.name, c.value, c.lower, c.upper) == ("cloth.radius", 0.005, 0.0, 0.01) and "skin" in c.reason
    h = scene.handles["cloth"]
    c.write(0.008)
    r = scene.model.particle_radius.to_numpy()
    assert np.allclose(r[h.particle_start:h.particle_start + h.particle_count], 0.008)
    stated = parse_scene(_cloth_scene(tmp_path), str(tmp_path / "scene.toml"))
    assert unstated_radii(Scene(stated, load_scene_footage(stated))) == []


@pytest.mark.slow
def test_unstated_soft_radius_is_reported_with_its_sensitivity(tmp_path):
    """The soft cube, its bottom 5 mm above the ground, "footage" its own drawn vertices at ground.ke = 1e4 with the
    default 1 cm skin (so the estimate is the truth).  The unstated radius is assumed over [0, 0.02]: a thicker skin
    pushes the cube up, which the linearised refit undoes with a softer ground (ke down), a thinner one with a
    stiffer ground; the move is reported for ground.ke at both ends, and a 1 cm change of the skin against a few
    tenths of a mm of penetration dominates ke's interval.  The same scene stating radius = 0.01 assumes nothing."""
    from tigradsim.scenes.scene_build import Scene, load_scene_footage

    tgs.init(arch="cpu", precision="f64")
    spec = parse_scene(_cube_scene(tmp_path), str(tmp_path / "scene.toml"))
    scene = Scene(spec, load_scene_footage(spec))
    scene.sim.run()
    target = scene.timed.numpy().copy()

    def residuals():
        scene.sim.run()
        return (scene.timed.numpy() - target).ravel()

    params = scene.params
    assert [p.name for p in params] == ["ground.ke"]
    report = tgs.fit_report(residuals, params, noise_floor=1e-8)      # (0.1 mm)^2 per coordinate
    assumed = assumed_constants(scene)
    assert [(c.name, c.value, c.lower, c.upper) for c in assumed] == [("cube.radius", 0.01, 0.0, 0.02)]
    # the "footage" was made with the assumed skin and a (0.1 mm)^2 floor: it rules out both halves of the range (the
    # refitted loss at the first bisection points, 5 mm either side, is far past the threshold), so the allowed
    # range is the assumed value itself and nothing moves (fitting/sensitivity.py, "Range ends the footage rules out")
    judged = tgs.assumption_sensitivity(residuals, params, assumed, report, mark=False)
    assert [(r.side, r.allowed) for r in judged.ruled_out] == [("lower", 0.01), ("upper", 0.01)]
    assert judged.shifts[0].moves() == [0.0, 0.0] and not judged.shifts[0].dominated
    # over the whole prior range (rule_out=False): the moves at the ends
    sens = tgs.assumption_sensitivity(residuals, params, assumed, report, rule_out=False)
    (shift,) = sens.shifts
    assert shift.estimate == "ground.ke" and shift.constant == "cube.radius"
    assert shift.shift_lower > 0 > shift.shift_upper, shift.text        # no skin: stiffer; thicker: softer
    assert shift.dominated and report["ground.ke"].status == "assumption-dominated"
    assert "| ground.ke | cube.radius | [0, 0.02] | 0.01 |" in sens.to_markdown()
    assert np.allclose(scene.model.particle_radius.to_numpy(), 0.01), "written back to the assumed value"

    stated = parse_scene(_cube_scene(tmp_path, radius=0.01), str(tmp_path / "scene.toml"))
    assert assumed_constants(Scene(stated, load_scene_footage(stated))) == []
