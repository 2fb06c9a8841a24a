"""The benchmark scripts that issue 17 relies on run, at toy sizes, and print what they promise
(so they cannot rot between the runs that measure): vs_warp.py (tigradsim side always, Warp side
when warp-lang is installed), bench_memory.py, gpu_check.sh (parses; one step runs for real; its
other commands run at toy size in the ones above), warp_pieces.sh (on a stand-in for warp-lang),
bench_threads.py, lanes_probe.py and the TIGRADSIM_ARCH switch of conftest.py."""
import json
import os
import shutil
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BENCH = os.path.join(ROOT, "benchmarks")


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
    res = _vs_warp("tigradsim", "fem16,cloth32,rigid64", "--grads", grads, "--pin-threads", pin)
    assert [s["scene"] for s in res["scenes"]] == ["fem16", "cloth32", "rigid64"]
    assert res["grads"] == grads
    assert [s["tigradsim_grads"] for s in res["scenes"]] == \
        ([["particle_qd0"], ["particle_qd0"], ["body_qd0"]] if grads == "named" else ["all"] * 3)
    for s in res["scenes"]:
        fwd, fwd_bwd = s["tigradsim_us"]
        assert 0 < fwd and 0 < fwd_bwd, s
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
    sys.path.insert(0, BENCH)
    try:
        import vs_warp
    finally:
        sys.path.remove(BENCH)

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
    sys.path.insert(0, BENCH)
    try:
        import vs_warp
    finally:
        sys.path.remove(BENCH)

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


def test_warp_pieces_pack_and_unpack_round_trip(tmp_path):
    """benchmarks/warp_pieces.sh on a small stand-in for warp-lang: pack leaves the Python files and
    the first xz piece in .wpa/, the second in .wpb/ (tests/ and warp-clang.so left out); unpack joins
    them, after call 1's copy to the stash, into the same bytes; a .so that packs into more than two
    pieces is refused."""
    if shutil.which("xz") is None:
        pytest.skip("xz not installed")
    site = tmp_path / "site"
    (site / "warp" / "bin").mkdir(parents=True)
    (site / "warp" / "tests").mkdir()
    (site / "warp" / "__init__.py").write_text(
        "__version__ = '0.0.1'\ndef init():\n    pass\ndef get_cuda_devices():\n    return ['cuda:0']\n")
    (site / "warp" / "tests" / "test_x.py").write_text("")
    (site / "warp" / "bin" / "warp-clang.so").write_bytes(b"clang")
    so = os.urandom(150_000)                       # random: xz cannot shrink it, so it takes two pieces
    (site / "warp" / "bin" / "warp.so").write_bytes(so)
    (site / "warp_lang-0.0.1.dist-info").mkdir()
    (site / "warp_lang-0.0.1.dist-info" / "METADATA").write_text("Name: warp-lang\n")
    pieces, stash, dest = tmp_path / "pieces", tmp_path / "stash", tmp_path / "dest"
    env = dict(os.environ, PYTHONPATH=str(site), PIECES_DIR=str(pieces), STASH_DIR=str(stash), PIECE="100000")
    script = os.path.join(BENCH, "warp_pieces.sh")
    out = subprocess.run(["bash", script, "pack"], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    assert sorted(os.listdir(pieces / ".wpa")) == ["warp_py.tar.xz", "warp_so.xz.aa"]
    assert os.listdir(pieces / ".wpb") == ["warp_so.xz.ab"]
    assert (pieces / ".wpa" / "warp_so.xz.aa").stat().st_size == 100_000
    shutil.copytree(pieces / ".wpa", stash)        # what call 1 does on the device
    env["PYTHONPATH"] = ""
    out = subprocess.run(["bash", script, "unpack", str(dest)], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "warp 0.0.1 ['cuda:0']" in out.stdout
    assert (dest / "warp" / "bin" / "warp.so").read_bytes() == so
    assert (dest / "warp_lang-0.0.1.dist-info" / "METADATA").exists()
    assert not (dest / "warp" / "tests").exists() and not (dest / "warp" / "bin" / "warp-clang.so").exists()
    env.update(PYTHONPATH=str(site), PIECE="50000")
    out = subprocess.run(["bash", script, "pack"], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 1 and "more than two pieces of 50000 bytes" in out.stderr
    out = subprocess.run(["bash", script], capture_output=True, text=True, env=env, timeout=30)
    assert out.returncode == 2 and "usage" in out.stderr


def test_bench_threads_times_every_configuration():
    res = _run([os.path.join(BENCH, "bench_threads.py"), "--parts", "2", "--work", "10", "--launches", "5",
                "--rounds", "1"])
    t = res["threads"]
    assert set(res["configs"]) == {"1 thread", f"{t} threads", f"{t} threads, pinned"}
    for stats in res["configs"].values():
        assert 0 < stats["best_ms"] <= stats["median_ms"] <= stats["p90_ms"], stats
        assert stats["best_ms"] <= stats["mean_ms"], stats
    assert res["mean_speedup_unpinned"] > 0 and res["mean_speedup_pinned"] > 0


def test_lanes_probe_agrees_with_the_scalar_loop():
    """The lanes give the scalar loop's bending forces and adjoints (f32 rounding), in both reverse layouts."""
    res = _run([os.path.join(BENCH, "lanes_probe.py"), "--n", "6", "--lanes", "4", "--repeat", "2"])
    assert res["edges"] > 0 and res["edges"] % 4 == 0 and res["precision"] == "f32"
    for key in ("forward_us", "reverse_scatter_us", "reverse_ports_us"):
        assert res[key]["scalar"] > 0 and res[key]["lanes"] > 0, res
    assert res["max_force_diff"] < 1e-8, res                   # the largest force is ~4e-4 N here
    assert res["max_adjoint_rel_diff"] < 1e-4, res


def test_bench_cloth_threads_compare_with_named_gradients():
    """bench_cloth.py --grads named differentiates the initial velocities only (the cloth's reverse can then
    run on both cores) and --threads-compare --paths auto times what `tgs.init()` picks against serial."""
    res = _run([os.path.join(BENCH, "bench_cloth.py"), "--sizes", "4", "--steps", "3", "--repeat", "1",
                "--grads", "named"])
    (row,) = res["results"]
    assert row["grads"] == "named" and row["triangles"] == 32
    assert 0 < row["forward_us_per_step"] < row["forward_backward_us_per_step"], row
    res = _run([os.path.join(BENCH, "bench_cloth.py"), "--threads-compare", "--sizes", "4", "--steps", "3",
                "--rounds", "1", "--paths", "auto", "--grads", "named"])
    assert res["grads"] == "named" and res["scene"] == "cloth4"
    assert set(res["us_per_step_fwd_fwdbwd"]) == {"serial_1thread", "serial_2thread", "auto_2thread", "auto_1thread"}
    for fwd, fwd_bwd in res["us_per_step_fwd_fwdbwd"].values():
        assert 0 < fwd < fwd_bwd
    assert all(v > 0 for v in res["auto_2thread_speedup_over_serial_1thread"])
