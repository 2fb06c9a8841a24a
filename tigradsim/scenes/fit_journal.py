"""A fit's journal: every rollout `fit_scene` asks for, recorded as it happens, so that a fit that
was killed can be resumed bit-identically (`tigradsim fit --resume`), and a fit cut short by a
`GradientError` can end with its best rollout so far.

    journal = FitJournal(path, fingerprint, resume=True)   # reads what a killed run left
    journal.attach(scene)                                  # before fit_scene(scene, ...)
    result, history = fit_scene(scene, ...)
    journal.detach()

How: `attach` routes the scene's five rollout methods (`forward`, `residuals`,
`time_step_systematics`, `grid_systematics`, `predictability`: every rollout `fit_scene` and `tgs.identify` run goes
through one of them) through the journal.  Live, each call runs and its outcome is appended to
the file as one record, written whole and flushed (a process killed while writing leaves a torn
last record, which the next reader drops).  Resumed, the fit runs again from its start: being
deterministic (`tgs.init`'s `deterministic`, on CPUs), it asks for the same rollouts in the same
order, and each call is answered from the next record without running, after checking that it
asks for the same thing (the same method and arguments, the same frames, the unknowns' values to
the bit).  Where the records run out it goes on live and appends.  The search, the gradient
steps, Levenberg-Marquardt, the intervals and the horizons are all replayed the same way, with no
checkpoint of their own.

A rollout under a Tape (`optimize`'s gradient steps) has its backward pass run inside the call,
exactly as the Tape would run it on exit, so that its record (loss and the `.grad` of every field
the unknowns read) is complete when written; replayed, the loss and those gradients are written
back and the Tape evaluates nothing.  Outcomes the fit handles (`SimulationError`,
`GradientError`, `ValueError`) are recorded and raised again on replay; other exceptions (an
interrupt, a bug) are not recorded, so the rollout runs again on resume.

A journal is tied to its fit by a fingerprint (the caller's: the scene file, the footage, the
initial loss, the options); resuming another fit's journal, or a fit that takes another path than
its journal (tigradsim changed), raises `JournalError` naming the file and what differs.
Runs that depend on the clock (`[fit] time_budget`) are not reproducible, resumed or not.
A value over RECORD_BYTES_MAX (a colour clip's residual vector) is not recorded: on resume its call
runs again, which gives the same bits.
"""
from __future__ import annotations

import math
import os
import pickle
import signal
import struct
import time
import zlib

import numpy as np

from ..core.errors import GradientError, SimulationError

JOURNAL_FORMAT = "tigradsim fit journal"
JOURNAL_VERSION = 1
# For tests of resuming: the process kills itself (SIGKILL, as `kill -9`) once the journal holds
# this many records.
KILL_AFTER_ENV = "TIGRADSIM_JOURNAL_KILL_AFTER"
ROLLOUT_METHODS = ("forward", "residuals", "time_step_systematics", "grid_systematics", "predictability")
# outcomes of a rollout that the fit handles, recorded and raised again on replay
RECORDED_ERRORS = (SimulationError, GradientError, ValueError)
_HEAD = struct.Struct("<QI")        # record framing: payload length, CRC-32 of the payload
_COMPRESS_BYTES = 1 << 16           # arrays larger than this are stored zlib-compressed (residuals)
# A value (residual vector) larger than this is not recorded: its call runs again on resume.  Silhouette
# residuals compress ~30x (mostly zeros), colour residuals hardly: a 128 px RGB clip of 36 frames has
# 14 MB per call, and Levenberg-Marquardt and the intervals make dozens of calls.
RECORD_BYTES_MAX = 8 << 20


class JournalError(OSError):
    """A journal that cannot be resumed: not a journal, another fit's, or a fit that took another path.
    An OSError (a file whose content cannot be used, as PIL's truncated image), not a ValueError:
    `tgs.identify` takes a ValueError from a residual call for a rollout that failed and goes on."""


def _same(a, b) -> bool:
    """Bitwise equality of keys: nested tuples / lists of numbers, strings and arrays."""
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return (isinstance(a, np.ndarray) and isinstance(b, np.ndarray) and a.dtype == b.dtype
                and a.shape == b.shape and a.tobytes() == b.tobytes())
    if isinstance(a, (tuple, list)) and isinstance(b, (tuple, list)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return type(a) is type(b) and a == b


MISMATCH = object()


def _nbytes(value) -> int:
    """Bytes of the arrays in a value (nested dicts, tuples, lists)."""
    if isinstance(value, np.ndarray):
        return value.nbytes
    if isinstance(value, dict):
        return sum(_nbytes(v) for v in value.values())
    if isinstance(value, (tuple, list)):
        return sum(_nbytes(v) for v in value)
    return 0


def _pack(value):
    """value with its large arrays zlib-compressed (exactly restored by `_unpack`)."""
    if isinstance(value, np.ndarray) and value.nbytes > _COMPRESS_BYTES:
        return ("__zarray__", value.dtype.str, value.shape, zlib.compress(np.ascontiguousarray(value).tobytes(), 1))
    if isinstance(value, dict):
        return {k: _pack(v) for k, v in value.items()}
    if isinstance(value, (tuple, list)):
        return type(value)(_pack(v) for v in value)
    return value


def _unpack(value):
    if isinstance(value, tuple) and len(value) == 4 and value[0] == "__zarray__":
        _, dtype, shape, data = value
        return np.frombuffer(zlib.decompress(data), dtype=np.dtype(dtype)).reshape(shape).copy()
    if isinstance(value, dict):
        return {k: _unpack(v) for k, v in value.items()}
    if isinstance(value, (tuple, list)):
        return type(value)(_unpack(v) for v in value)
    return value


def _error(recorded):
    """The recorded exception again: its class (pickled by reference) and message, without calling
    its __init__ (a subclass may take other arguments)."""
    cls, message = recorded
    exc = cls.__new__(cls)
    exc.args = (message,)
    return exc


def grad_fields(params) -> list:
    """The fields whose `.grad` the Params' gradients read: each Param's field and a
    `TiedParam`'s tied fields (a `RatioParam` reads its own field; its mass is a Param too)."""
    out, seen = [], set()
    for p in params:
        for f in [p.field] + [t[0] for t in getattr(p, "ties", ())]:
            if id(f) not in seen:
                seen.add(id(f))
                out.append(f)
    return out


def _describe(key) -> str:
    kind, frames, args, values = key
    return f"{kind}{'' if not args else args!r} on {frames} frames at " + ", ".join(
        np.array2string(np.ravel(v), precision=17, separator=",") for v in values)


class FitJournal:
    """The journal file of one fit (module docstring).

    path: the file.  fingerprint: a dict that identifies the fit (compared on resume; its
    entries are named in the error when they differ).  resume: continue the records in `path`
    when it exists; otherwise (or False) the file is started afresh.
    Attributes: records (every record of this fit so far, replayed then live; the values of live
    ones are on file only), replayed (how many calls were answered from the file), recorded_before
    (records the file held).
    """

    def __init__(self, path, fingerprint: dict, resume: bool = False):
        self.path = os.fspath(path)
        self.fingerprint = dict(fingerprint)
        self.records = []
        self.replayed = 0
        self._pending, self._good_end = [], None
        self._scene = None
        self._fh = None
        self._t0 = time.time()
        kill = os.environ.get(KILL_AFTER_ENV)
        self._kill_after = int(kill) if kill else None
        if resume and os.path.exists(self.path) and os.path.getsize(self.path) > 0:   # empty: killed at once
            self._pending, self._good_end = self._read()
        self.recorded_before = len(self._pending)
        if not self._pending:
            self._start_file()

    # -- the file -----------------------------------------------------------------
    def _header(self):
        return {"format": JOURNAL_FORMAT, "version": JOURNAL_VERSION, "fingerprint": self.fingerprint}

    def _start_file(self):
        self._fh = open(self.path, "wb")
        self._write(self._header())
        self._good_end = self._fh.tell()

    def _write(self, obj):
        data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
        self._fh.write(_HEAD.pack(len(data), zlib.crc32(data)) + data)
        self._fh.flush()

    def _read(self):
        """(records, end offset of the last whole record) of the file; JournalError if it is not a
        journal of this fit."""
        path = self.path
        header, records, end = read_journal(path)
        if not isinstance(header, dict) or header.get("format") != JOURNAL_FORMAT:
            raise JournalError(f"{path}: not a tigradsim fit journal (or its first record is torn); delete it or "
                               "run without --resume")
        if header.get("version") != JOURNAL_VERSION:
            raise JournalError(f"{path}: a fit journal of version {header.get('version')!r}, this tigradsim reads "
                               f"version {JOURNAL_VERSION}; delete it or run without --resume")
        theirs = header.get("fingerprint", {})
        differ = [k for k in sorted(set(theirs) | set(self.fingerprint)) if theirs.get(k) != self.fingerprint.get(k)]
        if differ:
            what = "; ".join(f"{k}: {theirs.get(k)!r} there, {self.fingerprint.get(k)!r} now" for k in differ)
            raise JournalError(f"{path}: the journal of another fit ({what}); delete it, or run without --resume "
                               "to start this fit afresh")
        return records, end

    def _append(self, rec):
        rec["seconds"] = time.time() - self._t0
        self.records.append({k: v for k, v in rec.items() if k != "value"})   # residuals: on file only
        if self._fh is None:                     # the first live record after the replayed ones
            self._fh = open(self.path, "r+b")
            self._fh.seek(self._good_end)
            self._fh.truncate()
        self._write({k: (_pack(v) if k == "value" else v) for k, v in rec.items()})
        if self._kill_after is not None and len(self.records) >= self._kill_after:
            os.kill(os.getpid(), signal.SIGKILL)

    def close(self):
        if self._fh is not None:
            self._fh.close()
            self._fh = None

    # -- attaching ------------------------------------------------------------------
    def attach(self, scene):
        """Route `scene`'s rollout methods (ROLLOUT_METHODS) through the journal, until `detach`."""
        self._scene = scene
        self.params = list(scene.params) + list(scene.camera_params)
        self._grad_fields = grad_fields(self.params)
        scene.forward = self._forward(scene.forward)
        for name in ROLLOUT_METHODS[1:]:
            setattr(scene, name, self._returning(name, getattr(scene, name)))

    def detach(self):
        """Give `scene` its own methods back and close the file."""
        if self._scene is not None:
            for name in ROLLOUT_METHODS:
                self._scene.__dict__.pop(name, None)
            self._scene = None
        self.close()

    def _key(self, kind, args):
        return (kind, int(self._scene.frames_used), args,
                tuple(np.array(p.value(), dtype=np.float64) for p in self.params))

    def _replay(self, key, strict=True):
        """The next record of the file if there is one (checked against `key`), else None.
        strict=False: a record that does not match is left for the next call and MISMATCH returned
        (the call may be one whose value is too large to be recorded)."""
        if self.replayed >= len(self._pending):
            return None
        rec = self._pending[self.replayed]
        if not _same(rec["key"], key):
            if not strict:
                return MISMATCH
            raise self._diverged(key, rec)
        self.replayed += 1
        self.records.append(rec)
        return rec

    def _diverged(self, key, rec):
        return JournalError(f"{self.path}: at rollout {self.replayed + 1} the resumed fit asks for "
                               f"{_describe(key)}, the journal recorded {_describe(rec['key'])}: the fit took another "
                               "path (tigradsim changed since); delete the journal or run without --resume")

    # -- the rollouts --------------------------------------------------------------
    def _forward(self, run):
        from taichi.lang import impl

        loss = self._scene.fit.loss

        def forward():
            rt = impl.get_runtime()
            tape = rt.target_tape
            taped = tape is not None and bool(getattr(tape, "eval_on_exit", False))
            key = self._key("forward", ("tape",) if taped else ())
            rec = self._replay(key)
            if rec is not None:
                if taped:
                    tape.eval_on_exit = False          # the gradient comes from the record
                if rec["error"] is not None:
                    raise _error(rec["error"])
                loss[None] = rec["loss"]
                if taped:
                    self._write_grads(rec)
                return
            rec = {"kind": "forward", "key": key, "loss": None, "grads": None, "check": None, "error": None}
            try:
                run()
                rec["loss"] = float(loss[None])
                if taped:
                    _backward_now(rt, tape)
                    rec["grads"] = [f.grad.to_numpy() for f in self._grad_fields]
                    rec["check"] = [np.asarray(p.internal_grad(), dtype=np.float64) for p in self.params]
            except RECORDED_ERRORS as exc:
                rec["error"] = (type(exc), str(exc))
                self._append(rec)
                raise
            self._append(rec)

        return forward

    def _write_grads(self, rec):
        for f, g in zip(self._grad_fields, rec["grads"]):
            f.grad.from_numpy(g)
        for p, want in zip(self.params, rec["check"]):
            got = np.asarray(p.internal_grad(), dtype=np.float64)
            if not (got.shape == want.shape and np.array_equal(got, want, equal_nan=True)):
                raise JournalError(f"{self.path}: the replayed gradient of {p.name!r} is {got}, recorded {want}: this "
                                   "Param reads gradients of fields the journal does not record (a bug; run without "
                                   "--resume)")

    def _returning(self, kind, run):
        def call(*args, **kwargs):
            key = self._key(kind, (args, tuple(sorted(kwargs.items()))))
            rec = self._replay(key, strict=False)
            if rec is not None and rec is not MISMATCH:
                if rec["error"] is not None:
                    raise _error(rec["error"])
                return _unpack(rec["value"])
            mismatch, rec = rec, {"kind": kind, "key": key, "value": None, "error": None}
            try:
                value = run(*args, **kwargs)
            except RECORDED_ERRORS as exc:
                if mismatch is MISMATCH:
                    raise self._diverged(key, self._pending[self.replayed]) from None
                rec["error"] = (type(exc), str(exc))
                self._append(rec)
                raise
            if _nbytes(value) > RECORD_BYTES_MAX:       # not recorded (nor expected in the file)
                return value
            if mismatch is MISMATCH:
                raise self._diverged(key, self._pending[self.replayed])
            rec["value"] = value
            self._append(rec)
            return value

        return call

    # -- what the fit has done -----------------------------------------------------------
    def forwards(self) -> list:
        """The forward rollouts so far that gave a finite loss (records, in order)."""
        return [r for r in self.records if r["kind"] == "forward" and r["loss"] is not None
                and math.isfinite(r["loss"])]

    def best(self):
        """The record of the lowest loss among the forward rollouts on the most frames fitted so far
        (coarse to fine: the losses on fewer frames do not compare), or None."""
        done = self.forwards()
        if not done:
            return None
        frames = max(r["key"][1] for r in done)
        return min((r for r in done if r["key"][1] == frames), key=lambda r: r["loss"])

    def write_values(self, rec):
        """Write a record's values of the unknowns (and camera correction) into their Params."""
        for p, v in zip(self.params, rec["key"][3]):
            p.write(v)

    def history(self):
        """A `History` of the forward rollouts (loss and values per rollout), as `fit_scene` keeps."""
        from ..fitting.optim import History

        h = History()
        for r in self.forwards():
            h.loss.append(r["loss"])
            for p, v in zip(self.params, r["key"][3]):
                h.params.setdefault(p.name, []).append(v.copy())
            h.seconds.append(r["seconds"])
        return h


def read_journal(path):
    """(header, records, end): the whole records of a journal file, in order (the header is the
    first; None if there is none) and the offset where they end.  A torn or corrupt tail (a process
    killed while writing) is left out."""
    with open(path, "rb") as fh:
        data = fh.read()
    objects, end = [], 0
    while end + _HEAD.size <= len(data):
        size, crc = _HEAD.unpack_from(data, end)
        payload = data[end + _HEAD.size:end + _HEAD.size + size]
        if len(payload) < size or zlib.crc32(payload) != crc:
            break
        try:
            objects.append(pickle.loads(payload))
        except Exception:            # a record this reader cannot load ends the usable part
            break
        end += _HEAD.size + size
    return (objects[0] if objects else None), objects[1:], end


def _backward_now(rt, tape):
    """The Tape's backward pass, now, as `ti.ad.Tape.__exit__` would run it (no tape recording
    while it runs); the Tape then evaluates nothing on exit."""
    rt.target_tape = None
    try:
        tape.grad()
    finally:
        tape.eval_on_exit = False
        rt.target_tape = tape
