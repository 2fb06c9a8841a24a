"""The benchmark scripts that issue 17 relies on run, at toy sizes, and print what they promise
(so they cannot rot between the runs that measure): vs_warp.py (tigradsim side always, Warp side
when warp-lang is installed), bench_memory.py, bench_cloth.py, gpu_check.sh (parses; one step runs for
real; its other commands run at toy size in the ones above) and the TIGRADSIM_ARCH switch of conftest.py.
What they print is checked, never how fast: a timing is only required to be a positive, finite number."""
import json
import math
import os
import shutil
import subprocess
import sys

import pytest
from benchmark_modules import benchmark_modules

pytestmark = pytest.mark.slow          # every test here starts a benchmark (or pytest) in a subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BENCH = os.path.join(ROOT, "benchmarks")


def _timing(x):
    """A measured time: a positive, finite number (a benchmark that printed NaN, 0 or nothing fails)."""
    return isinstance(x, (int, float)) and math.isfinite(x) and x > 0


def _run(args, timeout=600, env=None):
    out = subprocess.run([sys.executable] + args, cwd=ROOT, capture_output=True, text=True, timeout=timeout,
                         env=env)
    assert out.returncode == 0, f"{args} failed:\n{out.stderr[-3000:]}"
    return json.loads(out.stdout.strip().splitlines()[-1])


def _vs_warp(libraries, scenes, *extra):
    return _run([os.path.join(BENCH, "vs_warp.py"), "--tiny", "--in-process", "--repeat", "1",
                 "--libraries", libraries, "--scenes", scenes, *extra])


@pytest.mark.parametrize("grads", ["named", "all"])
def test_vs_warp_tigradsim_side_runs_every_scene_kind(grads):
    pin = "auto" if grads == "named" else "off"              # both values of --pin-threads
    res = _vs_warp("tigradsim", "fem16,cloth32,rigid64,pile64", "--grads", grads, "--pin-threads", pin)
    assert [s["scene"] for s in res["scenes"]] == ["fem16", "cloth32", "rigid64", "pile64"]
    assert res["grads"] == grads
    assert [s["tigradsim_grads"] for s in res["scenes"]] == \
        ([["particle_qd0"], ["particle_qd0"], ["body_qd0"], ["body_qd0"]] if grads == "named" else ["all"] * 4)
    for s in res["scenes"]:
        fwd, fwd_bwd = s["tigradsim_us"]
        assert _timing(fwd) and _timing(fwd_bwd), s
        assert s["tigradsim_gradient_finite"], s       # the taped pass reached the initial velocities
        assert s["warp_us"] is None and s["ratio"] is None and s["max_position_diff_m"] is None
        cpus, why = s["tigradsim_pinned_cpus"], s["tigradsim_unpinned_because"]
        if pin == "off":
            assert cpus == [] and "pin_threads=False" in why, s
        else:                                          # pinned one per CPU, or a reason why not
            assert (len(cpus) >= 2 and len(set(cpus)) == len(cpus) and why == "") or (cpus == [] and why), s
    assert res["scenes"][0]["tets"] == 5 * 2 * 1 * 1
    assert res["scenes"][1]["triangles"] == 2 * 4 * 4
    assert res["scenes"][2]["bodies"] == 2


def test_vs_warp_both_libraries_agree_where_the_laws_do():
    pytest.importorskip("warp")
    res = _vs_warp("tigradsim,warp", "fem16,cloth32")
    for s in res["scenes"]:
        assert len(s["warp_us"]) == 2 and len(s["ratio"]) == 2 and s["laws_agree"] is True, s
        # same mesh, masses and laws in f32: the trajectories differ by round-off only
        assert s["max_displacement_m"] > 1e-3, s
        assert s["max_position_diff_m"] < 1e-5, s


def test_vs_warp_records_a_failed_scene_and_runs_the_others(monkeypatch, capsys):
    vs_warp = benchmark_modules("vs_warp")

    def child(script, args):
        if args[0] == "fem16":
            raise RuntimeError("python vs_warp.py --child fem16 failed:\nTraceback ...\nSimulationError: non-finite at step 161\n")
        return {"scene": args[0], "tigradsim_us": [1.0, 2.0]}

    monkeypatch.setattr(vs_warp, "run_child", child)
    with pytest.raises(SystemExit, match="scenes failed: fem16"):
        vs_warp.main(["--scenes", "fem16,rigid1", "--libraries", "tigradsim", "--tiny"])
    last = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert last["scenes"] == [{"scene": "fem16", "error": "SimulationError: non-finite at step 161"},
                              {"scene": "rigid1", "tigradsim_us": [1.0, 2.0]}]


def test_vs_warp_rejects_unknown_scene_before_running():
    out = subprocess.run([sys.executable, os.path.join(BENCH, "vs_warp.py"), "--scenes", "fem16,boat3",
                          "--libraries", "tigradsim"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode != 0 and "unknown scene 'boat3'" in out.stderr
    out = subprocess.run([sys.executable, os.path.join(BENCH, "vs_warp.py"), "--arch", "tpu",
                          "--libraries", "tigradsim"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode != 0 and "--arch: expected one of" in out.stderr and "'tpu'" in out.stderr
    assert out.stdout == ""                            # no scene ran


def test_bench_memory_reports_peak_and_field_memory():
    res = _run([os.path.join(BENCH, "bench_memory.py"), "--res", "16", "--steps", "64", "--every", "16",
                "--checkpoint", "16", "--resolution", "1",
                "--height", "0.505"])        # touching the ground at once: mu gets a gradient
    assert res["frames"] == 5 and res["steps"] == 64 and res["checkpoint_every"] == 16
    assert res["peak_rss_mb"] >= res["baseline_rss_mb"] > 0
    f = res["fields_mb"]
    assert f["renderer"] > 0 and f["loss"] > 0 and f["state"] > 0 and f["checkpoints"] > 0
    assert res["under_1gb"] is True


def test_vs_warp_scaled_scenes_halve_dt_until_the_stability_check_accepts_it():
    vs_warp = benchmark_modules("vs_warp")

    class Report:
        def __init__(self, ok):
            self.ok = ok

    asked = []

    def report(model, dt):
        asked.append(dt)
        return Report(dt <= 0.3e-3)

    assert vs_warp.stable_dt(report, None, 1e-3) == 0.25e-3
    assert asked == [1e-3, 0.5e-3, 0.25e-3]
    assert vs_warp.stable_dt(lambda m, dt: Report(True), None, 1e-3) == 1e-3
    assert vs_warp.scene_spec("fem32", 10.0)["scale"] == 10.0 and vs_warp.scene_spec("fem32")["scale"] == 1.0


def test_gpu_check_script_parses():
    bash = shutil.which("bash")
    if bash is None:
        pytest.skip("no bash")
    out = subprocess.run([bash, "-n", os.path.join(BENCH, "gpu_check.sh")], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr


def test_gpu_check_step_prints_its_json_line(tmp_path):
    """One step of gpu_check.sh run for real (ONLY, at toy size on the CPU): its JSON line names the
    step, its exit status and pytest's summary (without the ===== around it), and the log is kept."""
    bash = shutil.which("bash")
    if bash is None:
        pytest.skip("no bash")
    env = dict(os.environ, ARCH="cpu", QUICK="1", ONLY="tests_f32", OUT=str(tmp_path), PYTHON=sys.executable)
    out = subprocess.run([bash, os.path.join(BENCH, "gpu_check.sh")], capture_output=True, text=True,
                         timeout=600, env=env, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    lines = [json.loads(line) for line in out.stdout.strip().splitlines()]
    assert [line["step"] for line in lines] == ["tests_f32", "done"], lines
    assert lines[0]["rc"] == 0 and lines[0]["summary"].startswith("1 passed"), lines[0]
    log = (tmp_path / "gpu_check_logs" / "tests_f32.out").read_text()
    assert "PASSED" in log                             # -v: every test named


def test_unknown_tigradsim_arch_for_tests_is_a_usage_error():
    env = dict(os.environ, TIGRADSIM_ARCH="tpu")
    out = subprocess.run([sys.executable, "-m", "pytest", "-q", "--co", "-p", "no:cacheprovider",
                          os.path.join(ROOT, "tests", "test_fastmath.py")],
                         cwd=ROOT, capture_output=True, text=True, timeout=120, env=env)
    assert out.returncode != 0
    assert "TIGRADSIM_ARCH='tpu'" in out.stdout + out.stderr


def test_bench_cloth_threads_compare_with_named_gradients():
    """bench_cloth.py --grads named differentiates the initial velocities only (the cloth's reverse can then
    run on both cores; the script itself fails on a non-finite gradient) and --threads-compare --paths auto
    times what `tgs.init()` picks against serial: the scene it built, and a finite time for every case."""
    res = _run([os.path.join(BENCH, "bench_cloth.py"), "--sizes", "4", "--steps", "3", "--repeat", "1",
                "--grads", "named"])
    assert res["benchmark"] == "cloth" and res["precision"] == "f32"
    (row,) = res["results"]
    assert row["grads"] == "named" and row["grid"] == "4x4" and row["mode"] == "default", row
    assert (row["particles"], row["triangles"], row["steps"]) == (25, 32, 3), row
    assert row["bending_edges"] > 0, row
    assert _timing(row["forward_us_per_step"]) and _timing(row["forward_backward_us_per_step"]), row
    res = _run([os.path.join(BENCH, "bench_cloth.py"), "--threads-compare", "--sizes", "4", "--steps", "3",
                "--rounds", "1", "--paths", "auto", "--grads", "named"])
    assert res["grads"] == "named" and res["scene"] == "cloth4"
    assert set(res["us_per_step_fwd_fwdbwd"]) == {"serial_1thread", "serial_2thread", "auto_2thread", "auto_1thread"}
    for pair in res["us_per_step_fwd_fwdbwd"].values():
        assert len(pair) == 2 and all(_timing(t) for t in pair), res
    speedups = res["auto_2thread_speedup_over_serial_1thread"]
    assert len(speedups) == 2 and all(_timing(v) for v in speedups), res
