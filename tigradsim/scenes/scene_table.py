"""Reading one TOML table of a scene file: typed access whose every error (`SceneError`) names the file,
the section and the key, and unknown keys answered with a "did you mean"."""
from __future__ import annotations

import difflib
import json
import math
import os

import numpy as np


_REQUIRED = object()



class SceneError(ValueError):
    """A scene file is wrong; the message names the file, the section and the key."""

    def __init__(self, file, section, key, message):
        self.file, self.section, self.key = str(file), section, key
        where = f"[{section}] " if section else ""
        what = f"{key}: " if key else ""
        super().__init__(f"{self.file}: {where}{what}{message}")



def _typename(v):
    if isinstance(v, bool):
        return "a boolean"
    if isinstance(v, (int, float)):
        return "a number"
    if isinstance(v, str):
        return "a string"
    if isinstance(v, list):
        return "an array"
    if isinstance(v, dict):
        return "a table"
    return type(v).__name__



def _show(v):
    if isinstance(v, dict):
        return "a table"
    text = json.dumps(v) if isinstance(v, str) else str(v).replace("'", '"')     # TOML spelling
    return text if len(text) < 80 else text[:77] + "..."



class _Table:
    """Typed access to one TOML table; every error names the file, the section and the key."""

    def __init__(self, file, section, data, allowed):
        self.file, self.section, self.data = file, section, data
        if not isinstance(data, dict):
            raise SceneError(file, None, section, f"expected a table, got {_typename(data)} {_show(data)}")
        for key in data:
            if key not in allowed:
                self.unknown(key, allowed)

    def unknown(self, key, allowed):
        close = difflib.get_close_matches(key, list(allowed), n=1, cutoff=0.6)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise SceneError(self.file, self.section, key, f"unknown key{hint} (allowed: {', '.join(sorted(allowed))})")

    def fail(self, key, message):
        raise SceneError(self.file, self.section, key, message)

    def has(self, key):
        return key in self.data

    def _get(self, key, default):
        if key in self.data:
            return self.data[key]
        if default is _REQUIRED:
            self.fail(key, "missing (required)")
        return default

    def number(self, key, default=_REQUIRED, positive=False, nonnegative=False, lo=None, hi=None):
        v = self._get(key, default)
        if v is None or (v is default and key not in self.data):
            return v
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            self.fail(key, f"expected a number, got {_typename(v)} {_show(v)}")
        v = float(v)
        if not math.isfinite(v):
            self.fail(key, f"expected a finite number, got {v}")
        if positive and not v > 0:
            self.fail(key, f"expected a positive number, got {_show(self.data[key])}")
        if nonnegative and v < 0:
            self.fail(key, f"expected a number >= 0, got {_show(self.data[key])}")
        if lo is not None and v < lo or hi is not None and v > hi:
            self.fail(key, f"expected a number in [{lo}, {hi}], got {_show(self.data[key])}")
        return v

    def integer(self, key, default=_REQUIRED, minimum=None):
        v = self._get(key, default)
        if key not in self.data:
            return v
        if isinstance(v, bool) or not isinstance(v, int):
            self.fail(key, f"expected an integer, got {_typename(v)} {_show(v)}")
        if minimum is not None and v < minimum:
            self.fail(key, f"expected an integer >= {minimum}, got {v}")
        return int(v)

    def boolean(self, key, default=_REQUIRED):
        v = self._get(key, default)
        if key in self.data and not isinstance(v, bool):
            self.fail(key, f"expected true or false, got {_typename(v)} {_show(v)}")
        return v

    def string(self, key, default=_REQUIRED, choices=None):
        v = self._get(key, default)
        if key not in self.data:
            return v
        if not isinstance(v, str):
            self.fail(key, f"expected a string, got {_typename(v)} {_show(v)}")
        if choices is not None and v not in choices:
            close = difflib.get_close_matches(v, list(choices), n=1, cutoff=0.5)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            self.fail(key, f"expected one of {', '.join(repr(c) for c in choices)}, got {v!r}{hint}")
        return v

    def array(self, key, shape, default=_REQUIRED, positive=False):
        """A nested list of numbers of `shape` (a tuple; None entries: any length)."""
        v = self._get(key, default)
        if key not in self.data:
            return None if v is None else np.asarray(v, dtype=np.float64)
        want = "x".join("N" if s is None else str(s) for s in shape)
        what = f"an array of {shape[0]} numbers" if len(shape) == 1 and shape[0] else f"a {want} array of numbers"

        def ok(x, depth):
            if depth == len(shape):
                return isinstance(x, (int, float)) and not isinstance(x, bool)
            return isinstance(x, list) and (shape[depth] is None or len(x) == shape[depth]) and \
                all(ok(y, depth + 1) for y in x) and (depth + 1 == len(shape) or len({len(y) for y in x}) <= 1)

        if not ok(v, 0):
            self.fail(key, f"expected {what}, got {_show(v)}")
        arr = np.asarray(v, dtype=np.float64)
        if not np.all(np.isfinite(arr)):
            self.fail(key, f"expected finite numbers, got {_show(v)}")
        if positive and np.any(arr <= 0):
            self.fail(key, f"expected positive numbers, got {_show(v)}")
        return arr

    def table(self, key, default=_REQUIRED):
        v = self._get(key, default)
        if key in self.data and not isinstance(v, dict):
            self.fail(key, f"expected a table ({{...}}), got {_typename(v)} {_show(v)}")
        return v

    def path(self, key, default=_REQUIRED, base=None):
        """A path relative to the scene file, which must exist."""
        v = self.string(key, default)
        if key not in self.data:
            return v
        p = os.path.normpath(os.path.join(base, os.path.expanduser(v)))
        if not os.path.exists(p):
            self.fail(key, f"file not found: {v!r} (resolved to {p})")
        return p
