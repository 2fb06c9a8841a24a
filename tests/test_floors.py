"""Every module of tigradsim imports only its own floor or a lower one (issue 43, items 1 and 5).

The floors, lowest first, are written once, in `FLOOR_ORDER` below (the README's Layout section quotes it):
a module on one floor may import any module on its own floor or on a floor to its left; names joined by a
comma share a floor.  A module's floor is the first component of its path under the `tigradsim` package
(`tigradsim.physics.fem` is on `physics`; `tigradsim.renderers.*` and `tigradsim.materials.*`, which live in
the top-level `renderers/` and `materials/` folders, are on `renderers` and `materials`); `tigradsim.cli` is
on `cli`, and so is the package's own `__init__` (the public `tgs.*` names, which re-export every floor):
nothing below the top floor may import `tigradsim` itself.

Every import counts: module level, inside functions and methods, under `if TYPE_CHECKING:`; relative imports
are resolved against the importing module's package.  An import points at the module it names: `from .a
import b` at `a.b` when `b` is a submodule and at `a` otherwise.  The package tree is read with `ast` from the
folders pyproject.toml maps (the same walk as tests/test_import_cycles.py), so nothing is imported.
"""
import ast
from pathlib import Path

from test_import_cycles import ROOT, TOP, discover_modules, import_targets, package_roots

FLOOR_ORDER = "core < exec < physics, io < materials, renderers < fitting < sim < scenes < cli"


def floors(order=FLOOR_ORDER):
    """{floor name: height} from the order text (0 is the ground floor)."""
    return {name.strip(): height for height, level in enumerate(order.split("<"))
            for name in level.split(",")}


def floor_of(module, heights, top=TOP):
    """The floor name of a dotted module name inside `top` (the top floor for the package itself)."""
    if module == top:
        return max(heights, key=heights.get)
    first = module[len(top) + 1:].split(".")[0]
    if first not in heights:
        raise AssertionError(f"module {module} is on no floor: its first component {first!r} is not in "
                             f"FLOOR_ORDER = {FLOOR_ORDER!r}")
    return first


def imports_of(tree, module, is_package, modules):
    """[(line, target module)] for every import in `tree` (at any depth) that names a module in `modules`."""
    package = module if is_package else module.rpartition(".")[0]
    return [(node.lineno, target) for node in ast.walk(tree) if isinstance(node, (ast.Import, ast.ImportFrom))
            for target in import_targets(node, package, modules)]


def upward_imports(modules, read=lambda path: Path(path).read_text(), order=FLOOR_ORDER, top=TOP):
    """['path:line: importer (from-floor) imports target (to-floor)'] for every import that goes to a higher
    floor.  `modules` is {module name: (path, is_package)}; `read` gives a path's source text."""
    heights = floors(order)
    found = []
    for name, (path, is_pkg) in sorted(modules.items()):
        tree = ast.parse(read(path), filename=str(path))
        here = floor_of(name, heights, top)
        for line, target in sorted(set(imports_of(tree, name, is_pkg, modules))):
            there = floor_of(target, heights, top)
            if heights[there] > heights[here]:
                try:
                    shown = Path(path).relative_to(ROOT)
                except ValueError:
                    shown = path
                found.append(f"{shown}:{line}: {name} ({here}) imports {target} ({there}): "
                             f"{here} -> {there} goes up")
    return found


def test_every_module_is_on_a_floor():
    """The walk finds the package and every floor named in FLOOR_ORDER has modules (so an empty or
    misread tree cannot pass)."""
    modules = discover_modules(package_roots())
    heights = floors()
    on = {floor_of(m, heights) for m in modules}
    assert set(heights) <= on, f"floors with no module: {sorted(set(heights) - on)}"
    assert len(modules) >= 60


def test_no_import_goes_up_a_floor():
    found = upward_imports(discover_modules(package_roots()))
    assert not found, "imports that go up a floor (order: " + FLOOR_ORDER + "):\n" + "\n".join(found)


def _synthetic_tree():
    """A package laid out on the real floors, with source text held in memory."""
    sources = {
        "tigradsim/__init__.py": "from .sim.builder import SceneBuilder\n",
        "tigradsim/core/__init__.py": "",
        "tigradsim/core/model.py": "import numpy as np\n",
        "tigradsim/exec/__init__.py": "",
        "tigradsim/exec/ports.py": "from ..core import model\n",
        "tigradsim/physics/__init__.py": "",
        "tigradsim/physics/fem.py": "from tigradsim.exec.ports import corner_q\n",
        "tigradsim/sim/__init__.py": "",
        "tigradsim/sim/builder.py": "from ..physics import fem\nimport tigradsim.core.model\n",
        "tigradsim/cli.py": "import tigradsim as tgs\n",
    }
    modules = {}
    for path in sources:
        parts = path[:-3].split("/")
        is_pkg = parts[-1] == "__init__"
        modules[".".join(parts[:-1] if is_pkg else parts)] = (path, is_pkg)
    return sources, modules


def test_checker_passes_a_clean_tree():
    sources, modules = _synthetic_tree()
    assert upward_imports(modules, read=sources.__getitem__) == []


def test_checker_catches_a_planted_upward_import():
    """An import of the builder (sim) planted inside a function of a physics module, written relatively,
    and a module-level import of the package's public names from the core, are both named with file, line
    and floors."""
    sources, modules = _synthetic_tree()
    sources["tigradsim/physics/fem.py"] += ("\n\ndef build():\n"
                                            "    from ..sim.builder import SceneBuilder\n"
                                            "    return SceneBuilder\n")
    sources["tigradsim/core/model.py"] += "from tigradsim import SceneBuilder\n"
    found = upward_imports(modules, read=sources.__getitem__)
    assert found == [
        "tigradsim/core/model.py:2: tigradsim.core.model (core) imports tigradsim (cli): "
        "core -> cli goes up",
        "tigradsim/physics/fem.py:5: tigradsim.physics.fem (physics) imports tigradsim.sim.builder (sim): "
        "physics -> sim goes up",
    ], found


def test_checker_reads_the_order_text():
    """Comma-joined names share a floor (io may import physics and back); the order decides, not the
    alphabet."""
    heights = floors()
    assert heights["core"] == 0 and heights["exec"] == 1
    assert heights["physics"] == heights["io"] and heights["materials"] == heights["renderers"]
    assert heights["fitting"] < heights["sim"] < heights["scenes"] < heights["cli"]
    sources, modules = _synthetic_tree()
    sources["tigradsim/io/__init__.py"] = ""
    sources["tigradsim/io/meshes.py"] = "from ..physics.fem import build\n"
    modules["tigradsim.io"] = ("tigradsim/io/__init__.py", True)
    modules["tigradsim.io.meshes"] = ("tigradsim/io/meshes.py", False)
    assert upward_imports(modules, read=sources.__getitem__) == []
    assert len(upward_imports(modules, read=sources.__getitem__,
                              order="core < exec < io < physics < sim < cli")) == 1
