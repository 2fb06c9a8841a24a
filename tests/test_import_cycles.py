"""The `tigradsim` package has no import cycles between its modules (issue 19, item 5).

The graph is built from the source files with `ast`, without importing anything: one node per module of
every package that pyproject.toml installs under `tigradsim` (including `tigradsim.materials` and
`tigradsim.renderers`, which live in the top-level `materials/` and `renderers/` folders, and any layer
subfolder with an `__init__.py`), one edge per import executed when the module is imported, i.e. at module
level (inside `if` / `try` / `with` blocks and class bodies too, but not inside functions or methods, nor
under `if TYPE_CHECKING:`).  Relative imports are resolved against the importing module's package.

An edge goes to the module named by the import: `from .a import b` points at `a.b` when `b` is a submodule and
at `a` (its `__init__`) otherwise; parents' `__init__`s that Python also runs are not edges (every submodule
would otherwise sit in a cycle with `tigradsim/__init__.py`, which imports them all).

The packages are found by walking the folders that `[tool.setuptools.package-dir]` maps (or the package's own
folder), so the test keeps working when modules move into subpackages.
"""
import ast
import sys
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
TOP = "tigradsim"


def package_roots(root=ROOT, top=TOP):
    """{package name: folder} for `top` and every package pyproject.toml installs under it."""
    cfg = tomllib.loads((root / "pyproject.toml").read_text()).get("tool", {}).get("setuptools", {})
    mapped = dict(cfg.get("package-dir", {}))
    names = set(cfg.get("packages", [])) | set(mapped) | {top}
    roots = {}
    for name in names:
        if name != top and not name.startswith(top + "."):
            continue
        # the folder: the longest mapped prefix of the name, then the rest of the dotted path
        parts = name.split(".")
        for k in range(len(parts), 0, -1):
            prefix = ".".join(parts[:k])
            if prefix in mapped:
                folder = root / mapped[prefix] / Path(*parts[k:]) if parts[k:] else root / mapped[prefix]
                break
        else:
            folder = root / Path(*parts)
        roots[name] = folder
    return roots


def discover_modules(roots):
    """{module name: (path, is_package)} for every .py file under the package folders (walked recursively:
    a subfolder with an __init__.py is a subpackage)."""
    modules = {}

    def walk(pkg, folder):
        if not (folder / "__init__.py").is_file():
            return
        modules[pkg] = (folder / "__init__.py", True)
        for path in sorted(folder.iterdir()):
            if path.is_dir() and path.name.isidentifier():
                sub = f"{pkg}.{path.name}"
                if sub not in roots:  # a mapped package is walked from its own folder
                    walk(sub, path)
            elif path.suffix == ".py" and path.stem != "__init__" and path.stem.isidentifier():
                modules[f"{pkg}.{path.stem}"] = (path, False)

    for pkg, folder in sorted(roots.items()):
        walk(pkg, folder)
    return modules


def _module_level_imports(tree):
    """Import / ImportFrom nodes run when the module is imported: the module body and the bodies of its
    top-level if / try / with / for / while blocks and classes, not functions or `if TYPE_CHECKING:`."""
    out = []

    def visit(stmts):
        for node in stmts:
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                out.append(node)
            elif isinstance(node, ast.If):
                test = node.test
                name = test.id if isinstance(test, ast.Name) else getattr(test, "attr", None)
                if name != "TYPE_CHECKING":
                    visit(node.body)
                visit(node.orelse)
            elif isinstance(node, ast.Try) or type(node).__name__ == "TryStar":
                visit(node.body)
                for handler in node.handlers:
                    visit(handler.body)
                visit(node.orelse)
                visit(node.finalbody)
            elif isinstance(node, (ast.With, ast.For, ast.While)):
                visit(node.body)
                visit(getattr(node, "orelse", []))
            elif isinstance(node, ast.ClassDef):     # a class body runs at import (its methods do not)
                visit(node.body)

    visit(tree.body)
    return out


def import_targets(node, package, modules):
    """The modules in `modules` that one Import / ImportFrom `node` names, relative imports resolved against
    `package`: `from .a import b` names `a.b` when that is a module and `a` otherwise."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names if alias.name in modules]
    if node.level:
        base = package.split(".")
        if node.level > 1:
            base = base[:len(base) - (node.level - 1)]
        base = ".".join(base + ([node.module] if node.module else []))
    else:
        base = node.module
    targets = []
    for alias in node.names:
        sub = f"{base}.{alias.name}"
        if sub in modules:
            targets.append(sub)
        elif base in modules:
            targets.append(base)
    return targets


def import_graph(modules):
    """{module: {module it imports at module level}}, restricted to the modules in `modules`."""
    graph = {}
    for name, (path, is_pkg) in modules.items():
        tree = ast.parse(path.read_text(), filename=str(path))
        package = name if is_pkg else name.rpartition(".")[0]
        targets = {t for node in _module_level_imports(tree) for t in import_targets(node, package, modules)}
        targets.discard(name)
        graph[name] = targets
    return graph


def find_cycle(graph):
    """One cycle as a list [m0, m1, ..., m0], or None (iterative depth-first search)."""
    WHITE, GREY, BLACK = 0, 1, 2
    colour = dict.fromkeys(graph, WHITE)
    for start in sorted(graph):
        if colour[start] != WHITE:
            continue
        stack = [(start, iter(sorted(graph[start])))]
        path = [start]
        colour[start] = GREY
        while stack:
            node, children = stack[-1]
            child = next(children, None)
            if child is None:
                colour[node] = BLACK
                stack.pop()
                path.pop()
            elif colour.get(child, BLACK) == GREY:
                return path[path.index(child):] + [child]
            elif colour.get(child) == WHITE:
                colour[child] = GREY
                stack.append((child, iter(sorted(graph[child]))))
                path.append(child)
    return None


def _graph():
    modules = discover_modules(package_roots())
    return modules, import_graph(modules)


def _named(modules, last):
    """The one module whose last dotted component is `last` (wherever a layer move put it)."""
    found = [m for m in modules if m.rpartition(".")[2] == last]
    assert len(found) == 1, f"expected one module named {last!r}, found {found} among {sorted(modules)}"
    return found[0]


def test_graph_covers_the_package():
    """The walk finds the core, the materials and the renderers (so an empty graph cannot pass)."""
    modules, graph = _graph()
    assert "tigradsim" in modules, sorted(modules)
    assert modules[_named(modules, "materials")][1] and modules[_named(modules, "renderers")][1]   # packages
    assert _named(modules, "neo_hookean").startswith(_named(modules, "materials") + ".")
    assert _named(modules, "softras").startswith(_named(modules, "renderers") + ".")
    assert len(modules) >= 40
    # known edges: the package __init__ imports the simulator; a material (in the mapped materials/ folder)
    # imports the registry
    assert _named(modules, "simulator") in graph["tigradsim"]
    assert _named(modules, "registry") in graph[_named(modules, "neo_hookean")]


def test_no_import_cycles():
    modules, graph = _graph()
    cycle = find_cycle(graph)
    assert cycle is None, "import cycle: " + " -> ".join(cycle) + \
        "\n(" + "; ".join(f"{modules[a][0].relative_to(ROOT)} imports {b}" for a, b in zip(cycle, cycle[1:])) + ")"


def test_find_cycle_reports_a_cycle():
    """The detector itself: a three-module cycle behind an acyclic part is found and printed in order."""
    graph = {"a": {"b"}, "b": {"c", "d"}, "c": {"e"}, "d": set(), "e": {"b"}}
    assert find_cycle(graph) == ["b", "c", "e", "b"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_graph_reads_module_level_imports_only(tmp_path):
    """Imports inside functions and under TYPE_CHECKING are not edges; relative imports (levels 1 and 2)
    and `from pkg import submodule` resolve to the right modules."""
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("from .a import f\n")
    (pkg / "a.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .b import g\n"
                              "def f():\n    from .b import g\n    return g\n"
                              "class K:\n    def m(self):\n        from . import b\n")
    (pkg / "b.py").write_text("try:\n    from .sub import c\nexcept ImportError:\n    c = None\n")
    (pkg / "sub" / "__init__.py").write_text("class S:\n    from ..a import f\n")
    (pkg / "sub" / "c.py").write_text("from ..a import f\nimport pkg.b\n")
    modules = discover_modules({"pkg": pkg})
    graph = import_graph(modules)
    assert graph == {"pkg": {"pkg.a"}, "pkg.a": set(), "pkg.b": {"pkg.sub.c"}, "pkg.sub": {"pkg.a"},
                     "pkg.sub.c": {"pkg.a", "pkg.b"}}
    assert find_cycle(graph) == ["pkg.b", "pkg.sub.c", "pkg.b"]
