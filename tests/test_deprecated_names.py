"""Names on their way out (issue 43, item 8: one meaning per word): the scene builders' and the demos'
`sigma` is `edge_softness` now; the old keyword and the old flag still work, and say so."""
import argparse
import re
import warnings

import pytest

import tigradsim as tgs
from tigradsim.core.aliases import add_renamed_flag, deprecated_keyword
from tigradsim.scenes import control, control_cloth, control_fem
from tigradsim.scenes.rigid_push import PushScene


def test_deprecated_keyword_returns_the_old_value_and_warns():
    with pytest.warns(DeprecationWarning, match=r"PushScene: sigma= is deprecated: use edge_softness="):
        assert deprecated_keyword("edge_softness", None, "sigma", 2e-3, owner="PushScene") == 2e-3
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert deprecated_keyword("edge_softness", 5e-4, "sigma", None, default=1e-3) == 5e-4
    with pytest.raises(TypeError, match="edge_softness and sigma: give one"):
        deprecated_keyword("edge_softness", 5e-4, "sigma", 2e-3)


def parser_with_renamed_flag():
    p = argparse.ArgumentParser()
    p.add_argument("--edge-softness", type=float, default=1e-3)
    add_renamed_flag(p, "--sigma", "--edge-softness", "edge_softness", type=float)
    return p


def test_renamed_flag_sets_the_new_name_warns_and_is_hidden():
    p = parser_with_renamed_flag()
    with pytest.warns(FutureWarning, match=r"--sigma is deprecated: use --edge-softness"):
        assert p.parse_args(["--sigma", "2e-3"]).edge_softness == 2e-3
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        args = p.parse_args(["--edge-softness", "4e-3"])
        assert args.edge_softness == 4e-3 and not hasattr(args, "sigma")
        assert p.parse_args([]).edge_softness == 1e-3
    assert not re.search(r"^ +--sigma", p.format_help(), flags=re.M) and "--edge-softness" in p.format_help()


@pytest.mark.parametrize("builder, flags", [(control_fem.gear_task, control_fem.GEAR_FLAGS),
                                            (control_cloth.cloth_throw_task, control_cloth.CLOTH_FLAGS)])
def test_control_demos_flags_take_the_old_spelling(builder, flags):
    p = control.add_flags(argparse.ArgumentParser(), builder, flags)
    assert "--edge-softness" in p.format_help() and not re.search(r"^ +--sigma", p.format_help(), flags=re.M)
    with pytest.warns(FutureWarning, match="--sigma is deprecated"):
        args = p.parse_args(["--sigma", "3e-4"])
    assert args.edge_softness == 3e-4
    assert control.builder_defaults(builder)["edge_softness"] == 1e-4


def test_scene_builder_sigma_keyword_still_reaches_the_renderer():
    tgs.init(arch="cpu", precision="f32")
    with pytest.warns(DeprecationWarning, match="PushScene: sigma= is deprecated"):
        scene = PushScene("box", duration=0.05, every=12, res=8, sigma=2e-3)
    assert scene.renderer.edge_softness == pytest.approx(2e-3)
    assert PushScene("box", duration=0.05, every=12, res=8, edge_softness=5e-4).renderer.edge_softness == \
        pytest.approx(5e-4)
