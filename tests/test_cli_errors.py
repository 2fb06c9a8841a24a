"""`tigradsim fit|render` always answers as itself: every failure is one `error:` line on stderr,
the JSON last line on stdout and an exit status (2 bad input, 1 the run failed, 130 interrupted),
never a Python traceback (unless --debug asks for one); `fit --resume` continues a killed fit to
the same bits as an uninterrupted run; a GradientError in the middle of a fit ends it with the
best estimate so far, written like a normal result and marked as stopped early.

The footage is test_cli's pushed box (32 px, 16 frames, 8 steps per frame)."""
import json
import os
import shutil
import subprocess
import sys

import pytest

import tigradsim as tgs
from tigradsim import cli
from tigradsim.scenes.fit_journal import KILL_AFTER_ENV, read_journal

from test_cli import _render_footage, _scene, _toml

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(scope="module")
def clip(tmp_path_factory):
    folder = tmp_path_factory.mktemp("cli_errors")
    _render_footage(str(folder))
    (folder / "scene.toml").write_text(_toml(_scene("y")))
    return folder


def _run(argv, capsys):
    """cli.main in-process: (status, JSON last line, stdout, stderr)."""
    code = cli.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, json.loads(out.strip().splitlines()[-1]), out, err


def _answers_as_itself(code, result, err, status=2):
    """One `error:` line on stderr, the same message in the JSON, no traceback, the status."""
    errors = [line for line in err.splitlines() if line.startswith("error:")]
    assert code == status, (code, err)
    assert len(errors) == 1, err
    assert result["ok"] is False and errors[0] == f"error: {result['error']}"
    assert "Traceback" not in err
    return result["error"]


def _broken_copy(clip, tmp_path, frame, content):
    folder = tmp_path / "clip"
    shutil.copytree(clip, folder)
    path = folder / "frames" / f"frame_{frame:04d}.png"
    path.write_bytes(content(path.read_bytes()))
    return folder / "scene.toml"


@pytest.mark.parametrize("content", [lambda png: png[:100], lambda png: b"not an image\n"],
                         ids=["truncated_png", "text_named_png"])
def test_unreadable_frame_is_an_error_line(clip, tmp_path, capsys, content):
    scene = _broken_copy(clip, tmp_path, 5, content)
    for command in ("fit", "render"):
        code, result, _, err = _run([command, scene, "--out", tmp_path / "out"], capsys)
        _answers_as_itself(code, result, err)
        assert result["command"] == command


def test_bad_arguments_are_error_lines(clip, tmp_path, capsys):
    scene = clip / "scene.toml"
    a_file = tmp_path / "report.txt"
    a_file.write_text("not a folder")
    cases = [(["fit", scene, "--out", a_file], ["--out", "report.txt", "existing file"]),
             (["render", scene, "--out", tmp_path / "o", "--resolution", "0"], ["--resolution", "'0'"]),
             (["fit", scene, "--out", tmp_path / "o", "--iterations", "-3"], ["--iterations", "'-3'"]),
             (["fit", scene, "--out", tmp_path / "o", "--arch", "cpux"], ["cpux", "cpu"]),
             (["fit", scene, "--out", tmp_path / "o", "--precision", "f16"], ["--precision", "f16"]),
             (["fit", scene], ["--out"]),
             (["fit", tmp_path / "missing.toml", "--out", tmp_path / "o"], ["missing.toml"]),
             (["frobnicate", scene], ["frobnicate"])]
    for argv, words in cases:
        code, result, _, err = _run(argv, capsys)
        message = _answers_as_itself(code, result, err)
        assert all(w in message for w in words), (argv, message)
        assert result["command"] == (argv[0] if argv[0] in ("fit", "render") else None)
    assert a_file.read_text() == "not a folder"


def test_a_bug_says_so_and_debug_shows_the_traceback(clip, tmp_path, capsys, monkeypatch):
    from tigradsim.scenes import scene_build

    def broken(*args, **kwargs):
        raise KeyError("a key nobody set")

    monkeypatch.setattr(scene_build, "load_scene_footage", broken)
    argv = ["render", clip / "scene.toml", "--out", tmp_path / "o"]
    code, result, _, err = _run(argv, capsys)
    message = _answers_as_itself(code, result, err, status=1)
    assert message.startswith("internal error (a bug in tigradsim") and "--debug" in message
    assert "KeyError" in message and "a key nobody set" in message
    code, result, _, err = _run(argv + ["--debug"], capsys)
    assert code == 1 and "Traceback" in err and "in broken" in err
    assert err.strip().splitlines()[-1] == f"error: {result['error']}"

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(scene_build, "load_scene_footage", interrupted)
    code, result, _, err = _run(["fit", clip / "scene.toml", "--out", tmp_path / "o"], capsys)
    message = _answers_as_itself(code, result, err, status=130)
    assert message.startswith("interrupted") and "--resume" in message


def test_gradient_error_mid_fit_reports_the_best_estimate_so_far(clip, tmp_path, capsys, monkeypatch):
    """The backward pass of the 5th gradient step raises GradientError (as Simulator's adjoint check
    does): the fit ends with the lowest-loss rollout so far as its estimate, written and printed."""
    runs = {"n": 0}
    run, judge = tgs.Simulator.run, tgs.Simulator._judge_adjoint

    def counting_run(self):
        runs["n"] += 1
        return run(self)

    def failing_judge(self, step, a, bad, post):
        # 2 rollouts before the fit (initial loss, initial render), the search, 4 gradient steps
        if runs["n"] >= 8:
            raise self._gradient_error(f"test: the adjoint blew up at step {step}")
        return judge(self, step, a, bad, post)

    monkeypatch.setattr(tgs.Simulator, "run", counting_run)
    monkeypatch.setattr(tgs.Simulator, "_judge_adjoint", failing_judge)
    out = tmp_path / "fit"
    code, result, stdout, err = _run(["fit", clip / "scene.toml", "--out", out], capsys)
    message = _answers_as_itself(code, result, err, status=1)
    assert message.startswith("test: the adjoint blew up") and "the gradient cannot be trusted" in message
    assert result["stopped_early"] is True and result["status"] == {"box.mass": "stopped early"}
    assert result["ci95"] == {"box.mass": None} and result["std"] == {"box.mass": None}
    # the estimate is the lowest-loss rollout of the journal, which holds the 6 rollouts
    _, records, _ = read_journal(out / "fit_journal.bin")
    forwards = [r for r in records if r["kind"] == "forward"]
    assert len(forwards) == 6 and forwards[-1]["error"][0] is tgs.GradientError
    best = min(forwards, key=lambda r: r["loss"])
    assert best is not forwards[0] and best["loss"] < 0.5 * forwards[0]["loss"]
    assert result["estimates"]["box.mass"] == float(best["key"][3][0][0])
    assert result["loss_final"] == pytest.approx(best["loss"], rel=1e-12)   # re-rendered at the estimate
    assert result["loss_final"] < result["loss_initial"] and result["iou_final"] > result["iou_initial"]
    assert result["rollouts"] == 6 and "stopped early" in stdout
    with open(result["files"]["estimates_json"]) as fh:
        report = json.load(fh)
    assert report["stopped_early"] is True and report["error"] == message
    assert report["unknowns"]["box.mass"]["estimate"] == result["estimates"]["box.mass"]
    assert "The fit stopped early" in open(result["files"]["estimates_md"]).read()
    for key in ("loss_plot", "param_plot", "fit_outline_gif"):
        assert os.path.getsize(result["files"][key]) > 0


def _resume_scene(clip):
    """The clip with every stage the journal replays: a 2-start search, 2 local fits of Adam then
    BFGS, coarse to fine (8 frames, then 16, each within the predictable horizon), Levenberg-Marquardt,
    the intervals with the time step's bias."""
    data = _scene("y")
    data["fit"].update(iterations=4, optimizer="adam+bfgs", polish=2, lr=0.1, starts=2, local_starts=2,
                       horizons=[8], horizon="auto", refine=1)
    path = clip / "scene_resume.toml"
    path.write_text(_toml(data))
    return path


def _strip_times(obj):
    """The report without its clock readings and resume counts (all else must agree to the bit)."""
    if isinstance(obj, dict):
        return {k: _strip_times(v) for k, v in obj.items() if k not in ("seconds", "resumed", "out", "files")}
    if isinstance(obj, list):
        return [_strip_times(v) for v in obj]
    return obj


def _journal_prefix(path, count):
    """Cut a journal to its header and first `count` records: what a fit killed right after writing
    them leaves (the file is only ever appended to)."""
    from tigradsim.scenes.fit_journal import _HEAD
    data = path.read_bytes()
    end = 0
    for _ in range(count + 1):
        size, _crc = _HEAD.unpack_from(data, end)
        end += _HEAD.size + size
    path.write_bytes(data[:end])


@pytest.mark.slow
def test_resume_replays_around_unrecorded_values(clip, tmp_path, capsys, monkeypatch):
    """Values over RECORD_BYTES_MAX (here all: the residuals, the time step's systematics) are not
    recorded; resumed, those calls run again between the replayed ones, to the same bits."""
    from tigradsim.scenes import fit_journal
    monkeypatch.setattr(fit_journal, "RECORD_BYTES_MAX", 0)
    scene = clip / "scene.toml"
    code, whole, _, _ = _run(["fit", scene, "--out", tmp_path / "whole", "--iterations", "5"], capsys)
    assert code == 0
    _, records, _ = read_journal(tmp_path / "whole" / "fit_journal.bin")
    assert {r["kind"] for r in records} == {"forward"} and len(records) == 8    # search, 6 BFGS, the minimum
    shutil.copytree(tmp_path / "whole", tmp_path / "cut")
    _journal_prefix(tmp_path / "cut" / "fit_journal.bin", 4)
    code, resumed, _, _ = _run(["fit", scene, "--out", tmp_path / "cut", "--iterations", "5", "--resume"], capsys)
    assert code == 0 and resumed["resumed"] == {"rollouts_recorded": 4, "rollouts_replayed": 4}
    assert _strip_times(resumed) == _strip_times(whole)

    # a journal whose second rollout's gradient was changed: the replay takes another path and says so
    import pickle
    import zlib
    from tigradsim.scenes.fit_journal import _HEAD
    header, records, _ = read_journal(tmp_path / "cut" / "fit_journal.bin")
    records[1]["grads"] = [-g for g in records[1]["grads"]]
    records[1]["check"] = [-g for g in records[1]["check"]]
    with open(tmp_path / "cut" / "fit_journal.bin", "wb") as fh:
        for obj in [header] + records:
            data = pickle.dumps(obj)
            fh.write(_HEAD.pack(len(data), zlib.crc32(data)) + data)
    code, result, _, err = _run(["fit", scene, "--out", tmp_path / "cut", "--iterations", "5", "--resume"], capsys)
    message = _answers_as_itself(code, result, err)
    assert "fit_journal.bin: at rollout 3 the resumed fit asks for forward" in message
    assert "took another path" in message

    (tmp_path / "cut" / "fit_journal.bin").write_text("iteration 4, mass 1.2\n")
    code, result, _, err = _run(["fit", scene, "--out", tmp_path / "cut", "--resume"], capsys)
    message = _answers_as_itself(code, result, err)
    assert "fit_journal.bin: not a tigradsim fit journal" in message


@pytest.mark.slow
def test_resume_after_kill_is_bit_identical(clip, tmp_path, capsys):
    scene = _resume_scene(clip)
    code, whole, _, _ = _run(["fit", scene, "--out", tmp_path / "whole"], capsys)
    assert code == 0
    _, records, _ = read_journal(tmp_path / "whole" / "fit_journal.bin")
    kinds = {r["kind"] for r in records}
    assert kinds == {"forward", "residuals", "time_step_systematics", "predictability"}, kinds
    kill_at = 2 * len(records) // 3

    # a fit killed (SIGKILL) in a process of its own, once its journal holds kill_at rollouts
    out = tmp_path / "killed"
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""),
               **{KILL_AFTER_ENV: str(kill_at)})
    proc = subprocess.run([sys.executable, "-m", "tigradsim.cli", "fit", str(scene), "--out", str(out)], env=env,
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == -9, proc.stderr[-2000:]
    journal = out / "fit_journal.bin"
    _, left, end = read_journal(journal)
    assert len(left) == kill_at
    # and a torn record after them, as a kill in the middle of a write leaves
    data = journal.read_bytes()
    journal.write_bytes(data + data[end - 40:end - 10])

    code, resumed, stdout, _ = _run(["fit", scene, "--out", out, "--resume"], capsys)
    assert code == 0 and f"resuming: {kill_at} rollouts recorded" in stdout
    assert resumed["resumed"] == {"rollouts_recorded": kill_at, "rollouts_replayed": kill_at}
    assert _strip_times(resumed) == _strip_times(whole)
    reports = [json.load(open(d / "estimates.json")) for d in (tmp_path / "whole", out)]
    assert _strip_times(reports[1]) == _strip_times(reports[0])
    _, after, _ = read_journal(journal)
    assert len(after) == len(records)

    # a journal is refused by another fit (other options), with the file named
    code, result, _, err = _run(["fit", scene, "--out", out, "--resume", "--iterations", "3"], capsys)
    message = _answers_as_itself(code, result, err)
    assert str(journal) in message and "another fit" in message and "iterations" in message
