"""One model variant's fit in a Python process of its own (`compare_scene_variants`).

Why: Taichi 1.7.4 never frees a field (no handle to the SNode tree of a `ti.field` is kept, so no tree
can be destroyed) and its LLVM runtime has room for 512 SNode trees per program (kMaxNumSnodeTreesLlvm,
written without a bounds check: a 513th tree overwrites the runtime's next pointer and the next
parallel kernel crashes; Genesis-Embodied-AI/quadrants issue 814 describes it in Taichi's fork).  A
scene's fit builds its fields once per Scene: 78 trees for the 8-corner box of tests/test_cli.py, so
the 7th contact law of `tigradsim laws` ended in a segmentation fault inside the field allocation
(measured).  A fresh process per variant starts with an empty program, frees everything when it exits,
and leaves the caller's own Taichi program and fields untouched.

The child runs `tgs.init` with the caller's settings (`tigradsim.core.runtime.init_settings`), builds the
Scene, fits it (`law_compare.fit_variant`, the code the in-process path runs) and returns
(Identification, IoU, frames fitted, bounds) as a pickle; every line it prints goes through the caller's
printer.  The fits are seeded, so a variant's result is the one an in-process fit of it gives
(tests/test_law_selection.py compares them).  Cost: one interpreter start, import and `tgs.init`
per variant (a few seconds; compiled kernels come from Taichi's offline cache after the first).

    python3 -m tigradsim.scenes.variant_process JOB.pkl ANSWER.pkl     (what the parent runs)
"""
from __future__ import annotations

import os
import pickle
import subprocess
import sys
import tempfile
import traceback


def fit_in_own_process(label, variant, footage, printer, fit_overrides):
    """Fit one variant (a SceneSpec) in a child process; returns (Identification, iou or None, frames
    fitted or None, the fitted unknowns' bounds: `law_compare.fit_variant`).  An exception in the child is raised here again (its traceback printed on stderr);
    a child that dies without an answer (a crash) raises RuntimeError naming the variant and the exit
    status."""
    from ..core.runtime import init_settings

    job = {"init": init_settings(), "variant": variant, "footage": footage, "fit_overrides": dict(fit_overrides)}
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = dict(os.environ)
    # the child imports this same tigradsim, whichever way the caller found it
    env["PYTHONPATH"] = os.pathsep.join([root] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    with tempfile.TemporaryDirectory(prefix="tigradsim_variant_") as tmp:
        job_path, answer_path = os.path.join(tmp, "job.pkl"), os.path.join(tmp, "answer.pkl")
        with open(job_path, "wb") as fh:
            pickle.dump(job, fh)
        cmd = [sys.executable, "-m", "tigradsim.scenes.variant_process", job_path, answer_path]
        with subprocess.Popen(cmd, stdout=subprocess.PIPE, env=env, text=True, bufsize=1) as child:
            for line in child.stdout:                    # the fit's progress, as the caller prints it
                printer(line.rstrip("\n"))
            code = child.wait()
        if not os.path.exists(answer_path):
            raise RuntimeError(f"variant {label!r}: its fit process ended with exit status {code} and no result "
                               "(a negative status is the signal that killed it)")
        with open(answer_path, "rb") as fh:
            answer = pickle.load(fh)
    if "error" in answer:
        print(answer["traceback"], file=sys.stderr)
        raise answer["error"]
    return answer["result"], answer["iou"], answer["frames_fitted"], answer["bounds"]


def _child(job_path, answer_path):
    from ..core.runtime import init
    from .law_compare import fit_variant

    with open(job_path, "rb") as fh:
        job = pickle.load(fh)
    try:
        if job["init"]:
            init(**job["init"])
        printer = lambda *a, **k: print(*a, **{**k, "flush": True})      # noqa: E731
        result, iou, frames, bounds = fit_variant(job["variant"], job["footage"], printer, job["fit_overrides"])
        answer = {"result": result, "iou": iou, "frames_fitted": frames, "bounds": bounds}
        data = pickle.dumps(answer)
    except Exception as exc:          # handed to the parent, which raises it
        try:
            pickle.loads(pickle.dumps(exc))
            error = exc
        except Exception:
            error = RuntimeError(f"{type(exc).__name__}: {exc}")
        data = pickle.dumps({"error": error, "traceback": traceback.format_exc()})
    with open(answer_path + ".part", "wb") as fh:
        fh.write(data)
    os.replace(answer_path + ".part", answer_path)


if __name__ == "__main__":
    _child(sys.argv[1], sys.argv[2])
