"""Comparing results that two runs accumulate with atomic adds (gradients, forces).

On the CPU the tests' runs add in a fixed order, and results that should be equal are equal bit for
bit, which the tests check.  On a GPU (`TIGRADSIM_ARCH=cuda`, benchmarks/gpu_check.sh) thousands of
threads add floats atomically into shared entries in whatever order they arrive, so two runs of the
same sum differ in the last bits: there the same comparisons allow rounding (a relative 1e-12 of
the largest entry in float64, 1e-5 in float32).
"""
import os

import numpy as np

ON_GPU = (os.environ.get("TIGRADSIM_ARCH") or "cpu") not in ("cpu", "x64", "arm64")


def assert_same_sums(actual, expected, err_msg=""):
    """`actual` equals `expected` bit for bit on the CPU, to rounding on a GPU (module docstring)."""
    actual, expected = np.asarray(actual), np.asarray(expected)
    if not ON_GPU:
        np.testing.assert_array_equal(actual, expected, err_msg=err_msg)
        return
    rel = 1e-12 if expected.dtype == np.float64 else 1e-5
    scale = float(np.abs(expected).max()) if expected.size else 0.0
    np.testing.assert_allclose(actual, expected, rtol=0, atol=rel * scale, err_msg=err_msg)
