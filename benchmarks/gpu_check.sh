#!/usr/bin/env bash
# GPU check, for a machine with an NVIDIA GPU (run it whenever one is available):
#   1. the gradient tests (finite differences vs Tape, f64) on cuda,
#   2. the f32 tests on cuda,
#   3. the benchmarks at 10x the CPU sizes: vs_warp.py --scale 10 (Warp 1.9.1 on cuda:0 alongside,
#      when warp-lang is installed), bench_memory.py (3,840 steps, 121 frames at 256x256,
#      checkpointed), bench_render.py.
# Every step prints one JSON line ({"step": ..., "rc": ..., ...}; benchmarks: their own JSON as
# "result"), all under an overall budget of 470 s (each step has its own time limit, cut to what is
# left; a step that would start with under 20 s left is skipped and says so), so the script ends
# within 8 minutes.  Taichi and Warp compile on first use: on a fresh machine most of the tests'
# time is compilation.  Logs of every step: $OUT/gpu_check_logs (printed on the last line).
#
#   bash benchmarks/gpu_check.sh                      # cuda, full sizes
#   ARCH=cpu QUICK=1 bash benchmarks/gpu_check.sh     # the same commands at toy sizes on the CPU
#
# On a machine without taichi (the H200 used on 2026-12-04: Python 3.12, numpy 2.5, pytest, xdist and
# pytest-timeout, but no taichi, dill or meshio), carry their wheels in an ignored .whl/ (56 MB; Warp's
# 132 MB wheel does not fit a 64 MiB transfer: how it was sent in two pieces is in benchmarks/MEASURED.md,
# "Retired prototypes") and install tigradsim without fetching anything:
#   python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
#       --platform manylinux_2_27_x86_64 -d .whl taichi==1.7.4 dill meshio==5.3.5
#   # there:
#   python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site
#   python3 -m pip install -q --no-index --no-deps --no-build-isolation -e . && bash benchmarks/gpu_check.sh
# (the runs that day took 4-5 minutes with the machine's start; the machine started in about 30 s).
#
# ARCH: tigradsim arch (default cuda; the tests get it through TIGRADSIM_ARCH, tests/conftest.py).
# QUICK=1: one test per group and toy benchmark sizes (checks that the commands work), with
#   BUDGET_S=2400 and LIMIT_SCALE=5 unless given.
# ONLY: space-separated step names to run (default: all), e.g. ONLY="tests_f64_gradients vs_warp_x10".
# BUDGET_S: overall budget in seconds (default 470).  LIMIT_SCALE: factor on every step's time limit
# (default 1).  OUT: folder for the logs (default: a temp dir).
set -u -o pipefail
cd "$(dirname "$0")/.."

ARCH=${ARCH:-cuda}
QUICK=${QUICK:-0}
if [ "$QUICK" = "1" ]; then          # a small shared CPU compiles slowly: more time per step
    BUDGET_S=${BUDGET_S:-2400}
    LIMIT_SCALE=${LIMIT_SCALE:-5}
fi
BUDGET_S=${BUDGET_S:-470}
LIMIT_SCALE=${LIMIT_SCALE:-1}
LOGS=${OUT:-$(mktemp -d)}/gpu_check_logs
mkdir -p "$LOGS"
PY=${PYTHON:-python3}
START=$SECONDS

left() { echo $((BUDGET_S - (SECONDS - START))); }

# json_objects FILE RC: the last JSON object FILE holds (one line, or an indented block from a
# line "{" to a line "}"); after a timeout or failure (RC != 0) the list of all it holds (vs_warp
# prints one line per finished scene).  null / [] when none.
json_objects() {
    "$PY" -c '
import json, sys
lines, objs, start = open(sys.argv[1]).read().splitlines(), [], None
for k, line in enumerate(lines):
    if line.startswith("{"):
        try:
            objs.append(json.loads(line))
            continue
        except ValueError:
            start = k
    if start is not None and line.startswith("}"):
        try:
            objs.append(json.loads("\n".join(lines[start:k + 1])))
        except ValueError:
            pass
        start = None
print(json.dumps((objs[-1] if objs else None) if sys.argv[2] == "0" else objs))
' "$1" "$2"
}

# clean FILE: its last non-blank line, without characters that would break a JSON string.
clean() { grep -v '^[[:space:]]*$' "$1" | tail -1 | tr -d '"\\' | tr -d '\t' | sed 's/^ *//;s/ *$//'; }

# run_step NAME LIMIT_S COMMAND...: runs COMMAND under timeout min(LIMIT_S, budget left) and prints
# one JSON line: tests -> pytest's summary line; benchmarks -> their JSON as "result".
run_step() {
    local name=$1 limit=$(($2 * LIMIT_SCALE))
    shift 2
    if [ -n "${ONLY:-}" ] && [[ " $ONLY " != *" $name "* ]]; then
        return
    fi
    local budget
    budget=$(left)
    if [ "$budget" -lt 20 ]; then
        printf '{"step": "%s", "arch": "%s", "skipped": "overall budget of %s s spent"}\n' "$name" "$ARCH" "$BUDGET_S"
        return
    fi
    [ "$limit" -gt "$budget" ] && limit=$budget
    local t0=$SECONDS rc
    timeout "$limit" "$@" >"$LOGS/$name.out" 2>"$LOGS/$name.err"
    rc=$?
    local extra=""
    [ "$rc" -eq 124 ] && extra=", \"timed_out_after_s\": $limit"
    if [[ "$name" == tests_* ]]; then
        grep -E '(passed|failed|error|skipped|no tests ran)' "$LOGS/$name.out" | tail -1 | sed 's/^=* *//;s/ *=*$//' >"$LOGS/$name.summary"
        extra="$extra, \"summary\": \"$(clean "$LOGS/$name.summary")\""
    else
        extra="$extra, \"result\": $(json_objects "$LOGS/$name.out" "$rc")"
    fi
    if [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ]; then
        extra="$extra, \"error\": \"$(clean "$LOGS/$name.err")\""
    fi
    printf '{"step": "%s", "arch": "%s", "rc": %s, "seconds": %s%s}\n' "$name" "$ARCH" "$rc" $((SECONDS - t0)) "$extra"
}

if [ "$ARCH" = "cuda" ]; then
    gpu=$(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null | head -1 | tr -d '"')
    printf '{"step": "device", "arch": "cuda", "gpu": "%s"}\n' "${gpu:-nvidia-smi not found}"
fi

# 1-2. Tests.  The f64 gradient subset: the tests that compare a Tape gradient with finite
# differences (or checkpointed / fused / parallel gradients with the plain ones) for particles,
# FEM, cloth, rigid bodies, contact laws, force terms and the renderer (-k matches test and
# module names).
# test_fem.py first: its corotated tests compile longest on cuda (see below), so they start first.
GRAD_TESTS=(tests/test_fem.py tests/test_core.py tests/test_cloth.py tests/test_rigid_grad.py
            tests/test_contact_laws.py tests/test_force_terms.py tests/test_render_grad.py
            tests/test_render_composite.py)
GRAD_K="grad or finite or fd"
F32_TESTS=(tests/test_render_f32.py tests/test_materials_f32.py tests/test_core.py)
F32_K="f32 or float32"
if [ "$QUICK" = "1" ]; then
    GRAD_TESTS=(tests/test_core.py)
    GRAD_K="test_external_force_gradient"
    F32_TESTS=(tests/test_core.py)
    F32_K="test_f32_runs"
fi
# On a machine with many cores (the GPU machines have 16), the tests run in parallel (pytest-xdist,
# 8 workers, tests dealt out one by one): on a fresh machine most of their time is compiling kernels
# on the CPU (and the driver's PTX compiler), and test_render_grad.py alone takes 100 s to compile
# and run on one worker of a 2-core CPU with an empty kernel cache, so files are not kept together.
# Each test's name and outcome and the slowest ones go to the step's log (-v -rfE --durations; not
# with -q, which cancels -v); with pytest-timeout installed, a test that runs past 180 s (the slowest
# takes 18 s on two CPU cores compiling from an empty cache) fails with its stack instead of the
# step timing out with no summary.  The limit is 180 s, not less: on the H200 (2026-12-04, 8 workers,
# empty kernel cache) test_fem.py::test_two_materials_fused_and_per_step_gradients took 141 s; at the
# limit its stack was in Taichi's compile of a reverse step kernel (float64, neo-Hookean and corotated,
# whose polar rotation is unrolled Newton iterations).  Run again alone on the same machine it passed in
# 11-15 s; under the earlier 120 s limit it failed for time alone (61 of 62 passed).
PYTEST=(-m pytest -v -rfE --durations=10 -p no:cacheprovider)
cores=$(nproc 2>/dev/null || echo 1)
if [ "$cores" -ge 8 ] && "$PY" -c "import xdist" 2>/dev/null; then
    PYTEST+=(-n 8 --dist load)
fi
if "$PY" -c "import pytest_timeout" 2>/dev/null; then
    PYTEST+=(--timeout 180)
fi
export TIGRADSIM_ARCH=$ARCH
run_step tests_f64_gradients 240 "$PY" "${PYTEST[@]}" -k "$GRAD_K" "${GRAD_TESTS[@]}"
run_step tests_f32 60 "$PY" "${PYTEST[@]}" -k "$F32_K" "${F32_TESTS[@]}"
unset TIGRADSIM_ARCH

# 3. Benchmarks at 10x the CPU sizes (QUICK: toy sizes).
if [ "$QUICK" = "1" ]; then
    VS=(--tiny --repeat 1 --scenes fem16,cloth32,rigid1)
    MEM=(--res 32 --steps 256 --every 32 --checkpoint 64 --resolution 1)
    REN=(--reps 1)
else
    VS=(--scale 10 --repeat 2)
    MEM=()
    REN=(--reps 5)
fi
# With Warp (warp-lang importable) the step compiles and times both libraries: on the H200 it took
# about 245 s (2026-12-04), tigradsim alone within 130 s.  The overall budget still holds: a later
# step that would start with under 20 s left is skipped and says so.
if "$PY" -c "import warp" 2>/dev/null; then
    LIBS=tigradsim,warp
    VS_LIMIT=270
else
    LIBS=tigradsim
    VS_LIMIT=130
fi
run_step vs_warp_x10 "$VS_LIMIT" "$PY" benchmarks/vs_warp.py --arch "$ARCH" --libraries "$LIBS" "${VS[@]}"
run_step memory_ball_3840_steps 60 "$PY" benchmarks/bench_memory.py --arch "$ARCH" "${MEM[@]}"
run_step render 40 "$PY" benchmarks/bench_render.py --arch "$ARCH" "${REN[@]}"
printf '{"step": "done", "arch": "%s", "seconds": %s, "logs": "%s"}\n' "$ARCH" $((SECONDS - START)) "$LOGS"
