"""The scripts of benchmarks/ imported as modules, for the tests that check their pieces."""
import importlib
import os
import sys

BENCHMARKS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "benchmarks")


def benchmark_modules(*names):
    """Import benchmarks/NAME.py for each of `names`, in order, and return the modules (one name: the module).

    The folder is on sys.path only while importing, as each script's own imports of its sibling scripts
    (`import _harness`, `from coverage_laws import ...`) expect; nothing else sees it afterwards."""
    sys.path.insert(0, BENCHMARKS)
    try:
        modules = [importlib.import_module(name) for name in names]
    finally:
        sys.path.remove(BENCHMARKS)
    return modules[0] if len(modules) == 1 else modules
