"""Material registry: decorator, validation, parameters, entry-point plugins."""
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import taichi as ti

import tigradsim as tgs
from tigradsim import registry
from tigradsim.core.registry import (ShellMaterial, TetMaterial, evaluate_energy, evaluate_stress, get_material,
                                list_materials, register_material, unregister_material)

PLUGIN_DIR = Path(__file__).parent / "plugin_pkg"


@pytest.fixture(scope="module", autouse=True)
def _taichi_f64():
    tgs.init(arch="cpu", precision="f64")
    yield


@pytest.fixture
def cleanup():
    names = []
    yield names
    for n in names:
        unregister_material(n)


def test_builtins_listed_by_kind():
    assert {"neo_hookean", "corotated", "stvk", "linear"} <= set(list_materials("tet"))
    assert {"membrane", "stvk_membrane"} <= set(list_materials("shell"))
    assert set(list_materials()) >= set(list_materials("tet")) | set(list_materials("shell"))
    nh = get_material("neo_hookean")
    assert nh.kind == "tet" and nh.F_shape == (3, 3) and list(nh.params) == ["mu", "lam"]
    assert nh.param_names == ("mu", "lam") and nh.param_count == nh.num_params == 2 and nh.has_energy
    assert get_material("membrane").F_shape == (3, 2)


def test_unknown_material_lists_known_names():
    with pytest.raises(KeyError) as exc:
        get_material("no_such_material")
    msg = str(exc.value)
    assert "no_such_material" in msg and "neo_hookean" in msg


def test_register_plugin_with_decorator(cleanup):
    @register_material("test_scaled_linear")
    class ScaledLinear(TetMaterial):
        params = {"k": 2.0, "c": None}
        rotation_invariant = False

        @ti.func
        def stress(self, F, p):
            eps = 0.5 * (F + F.transpose()) - ti.Matrix.identity(float, 3)
            return 2.0 * p[0] * p[1] * eps

        @ti.func
        def energy(self, F, p):
            eps = 0.5 * (F + F.transpose()) - ti.Matrix.identity(float, 3)
            return p[0] * p[1] * eps.norm_sqr()

    cleanup.append("test_scaled_linear")
    assert "test_scaled_linear" in list_materials() and "test_scaled_linear" in list_materials("tet")
    mat = get_material("test_scaled_linear")
    assert isinstance(mat, ScaledLinear) and mat.name == "test_scaled_linear"
    F = np.eye(3) + np.diag([0.1, 0.0, 0.0])
    P = evaluate_stress("test_scaled_linear", F, {"c": 3.0})
    assert np.allclose(P, 2 * 2.0 * 3.0 * np.diag([0.1, 0, 0]))
    assert np.isclose(evaluate_energy(mat, F, {"k": 1.0, "c": 1.0}), 0.01)

    # names are unique unless override=True
    with pytest.raises(ValueError, match="already taken"):
        register_material("test_scaled_linear")(ScaledLinear)

    @register_material("test_scaled_linear", override=True)
    class Other(ScaledLinear):
        params = {"k": 1.0, "c": 1.0}

    assert isinstance(get_material("test_scaled_linear"), Other)


def test_shell_plugin_by_columns(cleanup):
    """A shell material that gives `stress_columns` only gets `stress` from it (the same P), one formula for
    one triangle and for LANES at once (`exec.lanes`)."""
    from tigradsim.exec import lanes

    @register_material("test_shell_columns")
    class Columns(ShellMaterial):
        params = {"k": 1.0}

        @ti.func
        def stress_columns(self, f1, f2, p):
            return lanes.scale(f1, p[0] * lanes.dot(f1, f1)), lanes.scale(lanes.cross(f1, f2), p[0])

    cleanup += ["test_shell_columns"]
    assert Columns.in_columns() and get_material("membrane").in_columns() and get_material("stvk_membrane").in_columns()
    F = np.random.default_rng(0).normal(size=(3, 2))
    P = evaluate_stress("test_shell_columns", F, {"k": 2.0})
    np.testing.assert_allclose(P[:, 0], 2.0 * F[:, 0] * (F[:, 0] @ F[:, 0]), rtol=1e-6)
    np.testing.assert_allclose(P[:, 1], 2.0 * np.cross(F[:, 0], F[:, 1]), rtol=1e-6)


def test_shell_plugin_and_open_kind(cleanup):
    @register_material("test_shell")
    class TestShell(ShellMaterial):
        params = {"k": 1.0}

        @ti.func
        def stress(self, F, p):
            return p[0] * (F - ti.Matrix([[1.0, 0.0], [0.0, 1.0], [0.0, 0.0]]))

    @register_material("test_rod")
    class Rod(registry.Material):
        kind = "rod"
        F_shape = (3, 1)
        params = ("k",)  # a tuple of names: all required

        @ti.func
        def stress(self, F, p):
            return p[0] * F

    cleanup += ["test_shell", "test_rod"]
    assert "test_shell" in list_materials("shell") and list_materials("rod") == ["test_rod"]
    assert not get_material("test_shell").has_energy
    assert get_material("test_rod").params == {"k": None}
    P = evaluate_stress("test_rod", np.ones((3, 1)), {"k": 2.0})
    assert np.allclose(P, 2.0)


def test_class_validation():
    class NoStress(TetMaterial):
        params = {"mu": 1.0}

    with pytest.raises(TypeError, match="stress"):
        register_material("test_bad")(NoStress)

    class NoShellStress(ShellMaterial):
        params = {"mu": 1.0}

    with pytest.raises(TypeError, match="stress_columns"):
        register_material("test_bad")(NoShellStress)

    class PlainColumns(ShellMaterial):
        params = {"mu": 1.0}

        def stress_columns(self, f1, f2, p):
            return f1, f2

    with pytest.raises(TypeError, match="stress_columns"):
        register_material("test_bad")(PlainColumns)

    class PlainPython(TetMaterial):
        params = {"mu": 1.0}

        def stress(self, F, p):
            return F

    with pytest.raises(TypeError, match="ti.func"):
        register_material("test_bad")(PlainPython)

    class NoKind(registry.Material):
        params = {"mu": 1.0}

        @ti.func
        def stress(self, F, p):
            return F

    with pytest.raises(TypeError, match="kind"):
        register_material("test_bad")(NoKind)

    class BadDefault(TetMaterial):
        params = {"mu": "soft"}

        @ti.func
        def stress(self, F, p):
            return F

    with pytest.raises(TypeError, match="default"):
        register_material("test_bad")(BadDefault)

    class NotAMaterial:
        kind = "tet"

    with pytest.raises(TypeError, match="deriving"):
        register_material("test_bad")(NotAMaterial)
    assert "test_bad" not in list_materials()


def test_param_vector():
    nh = get_material("neo_hookean")
    v = nh.param_vector({"lam": 5.0})
    assert v.dtype == np.float64 and v.tolist() == [1e3, 5.0]
    assert nh.param_vector(None).tolist() == [1e3, 1e3]
    assert nh.param_vector({"mu": 2.0, "damping": 1.0}, ignore=("damping",)).tolist() == [2.0, 1e3]
    with pytest.raises(ValueError, match=r"unknown parameter.*'damping'.*\['mu', 'lam'\]"):
        nh.param_vector({"mu": 2.0, "damping": 1.0})
    with pytest.raises(ValueError, match="not finite"):
        nh.param_vector({"mu": float("nan")})
    with pytest.raises(ValueError, match="lam must be > 0"):
        nh.param_vector({"lam": 0.0})
    per_element = nh.param_vector({"mu": np.array([1.0, 2.0, 3.0])})
    assert per_element.shape == (3, 2) and per_element[:, 1].tolist() == [1e3] * 3

    class Req(TetMaterial):
        params = {"a": None, "b": 2.0}

    with pytest.raises(ValueError, match=r"required parameter.*'a'"):
        Req.param_vector({"b": 1.0})


# ---------------------------------------------------------------------------
# entry points

def _write_dist_info(root: Path, entry_points: str):
    d = root / "tgs_demo_plugin-0.1.0.dist-info"
    d.mkdir()
    (d / "METADATA").write_text("Metadata-Version: 2.1\nName: tgs-demo-plugin\nVersion: 0.1.0\n")
    (d / "entry_points.txt").write_text(textwrap.dedent(entry_points))


@pytest.fixture
def plugin_env(tmp_path, monkeypatch):
    """Make tests/plugin_pkg importable and 'installed' (a .dist-info on sys.path)."""
    monkeypatch.syspath_prepend(str(PLUGIN_DIR))
    monkeypatch.syspath_prepend(str(tmp_path))
    before = set(registry._state["loaded_eps"])
    yield tmp_path
    for n in ("demo_plugin", "demo_plugin_cls"):
        unregister_material(n)
    for mod in [m for m in sys.modules if m.startswith("tgs_demo_plugin")]:
        del sys.modules[mod]
    registry._state["loaded_eps"] = before


def test_entry_point_plugins_are_discovered(plugin_env):
    _write_dist_info(plugin_env, """
        [tigradsim.materials]
        demo_plugin = tgs_demo_plugin
        demo_plugin_cls = tgs_demo_plugin.extra:PlainHooke
        broken_plugin = tgs_no_such_module_xyz
        """)
    assert "demo_plugin" not in list_materials()
    with pytest.warns(RuntimeWarning, match="broken_plugin"):
        loaded = registry.load_plugins(force=True)
    assert set(loaded) == {"demo_plugin", "demo_plugin_cls"}
    assert {"demo_plugin", "demo_plugin_cls"} <= set(list_materials("tet"))
    mat = get_material("demo_plugin")
    assert mat.params == {"c1": 500.0, "d1": 1500.0}
    cls_mat = get_material("demo_plugin_cls")
    assert cls_mat.name == "demo_plugin_cls" and cls_mat.params == {"k": None}

    # usable by name like a built-in: P = dPsi/dF and small-strain Lame parameters
    rng = np.random.default_rng(0)
    F = np.eye(3) + 0.2 * rng.standard_normal((3, 3))
    P = evaluate_stress("demo_plugin", F)
    h = 1e-6
    fd = np.zeros((3, 3))
    for a in range(3):
        for b in range(3):
            E = np.zeros((3, 3))
            E[a, b] = h
            fd[a, b] = (evaluate_energy("demo_plugin", F + E) - evaluate_energy("demo_plugin", F - E)) / (2 * h)
    assert np.abs(P - fd).max() < 1e-6 * np.abs(P).max()
    H = rng.standard_normal((3, 3))
    P = evaluate_stress("demo_plugin", np.eye(3) + 1e-7 * H, mat.from_lame(2.0, 3.0)) / 1e-7
    eps = 0.5 * (H + H.T)
    assert np.allclose(P, 2 * 2.0 * eps + 3.0 * np.trace(eps) * np.eye(3), rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="required"):
        cls_mat.param_vector({})
    assert np.allclose(evaluate_stress("demo_plugin_cls", np.eye(3) * 1.1, {"k": 10.0}), 2 * 10.0 * 0.1 * np.eye(3))

    # loading again does not re-register (no 'already taken' error, no new warnings)
    assert registry.load_plugins(force=True) == []


def test_conflicting_plugin_warns_instead_of_crashing(plugin_env):
    pkg = plugin_env / "tgs_demo_conflict.py"
    pkg.write_text(textwrap.dedent("""
        import taichi as ti
        from tigradsim.core.registry import TetMaterial, register_material

        @register_material("neo_hookean")   # taken by the built-in
        class Clash(TetMaterial):
            params = {"mu": 1.0}

            @ti.func
            def stress(self, F, p):
                return F
        """))
    _write_dist_info(plugin_env, """
        [tigradsim.materials]
        clash = tgs_demo_conflict
        """)
    with pytest.warns(RuntimeWarning, match="already taken"):
        registry.load_plugins(force=True)
    assert type(get_material("neo_hookean")).__name__ == "NeoHookean"
    sys.modules.pop("tgs_demo_conflict", None)
