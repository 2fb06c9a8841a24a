"""The gradSim paper's system-identification tables (Tables 1-3): run each
experiment demo at its default settings, with image and with state
supervision, each in its own subprocess, and write a markdown table of our
errors beside the paper's (DESIGN.md section 6), with seconds and peak memory.

    python benchmarks/paper_tables.py                 # all experiments, both supervisions
    python benchmarks/paper_tables.py --quick         # each demo's --quick settings
    python benchmarks/paper_tables.py --only sysid_rigid_mass --supervision image

Experiments whose demo is missing from demos/ are skipped with a note.  The
table goes to benchmarks/paper_tables.md (--out); the raw JSON lines to
--out with .json.
"""
import argparse
import json
import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# paper: absolute relative errors (image supervision) from gradSim, Tables 1-3
EXPERIMENTS = {
    "sysid_rigid_mass": {"table": "1", "paper": {"mass": 9.01e-5}, "paper_state": {"mass": 5.17e-9}},
    "sysid_rigid_contact": {"table": "2", "paper": {"mass": 2.87e-4, "kd": 0.400, "ke": 0.003, "kf": 0.001,
                                                    "mu": 0.007}},
    "sysid_fem": {"table": "3", "paper": {"mass": 0.048, "mu": 0.0054, "lam": 0.0056}},
    "sysid_cloth": {"table": "3", "paper": {"velocity": 0.026}},
}


def run_one(name, supervision, quick, extra, timeout):
    script = os.path.join(ROOT, "demos", f"{name}.py")
    out = os.path.join(ROOT, "out", "paper_tables", f"{name}_{supervision}")
    cmd = [sys.executable, script, "--headless", "--supervision", supervision, "--out", out] + list(extra)
    if quick:
        cmd.append("--quick")
    start = time.time()
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=ROOT)
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout} s", "wall_seconds": round(time.time() - start, 1)}
    wall = round(time.time() - start, 1)
    lines = [ln for ln in proc.stdout.strip().splitlines() if ln.startswith("{")]
    if proc.returncode != 0 or not lines:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
        return {"error": f"exit {proc.returncode}: " + " | ".join(tail), "wall_seconds": wall}
    result = json.loads(lines[-1])
    result["wall_seconds"] = wall
    return result


def fmt(x):
    if x is None:
        return "—"
    return f"{x:.2e}" if (x != 0 and (abs(x) < 1e-2 or abs(x) >= 1e3)) else f"{x:.3g}"


def table(results, notes):
    rows = ["| experiment (paper table) | parameter | paper (image) | ours, image | ours, state | initial guess "
            "| trials | iters | seconds (image / state) | peak MB (image / state) |",
            "|---|---|---|---|---|---|---|---|---|---|"]
    for name, spec in EXPERIMENTS.items():
        if name not in results:
            continue
        res = results[name]
        img, st = res.get("image", {}), res.get("state", {})
        any_res = img if "rel_err" in img else st
        params = list(spec["paper"])
        for key in (any_res.get("rel_err") or {}):
            if key not in params:
                params.append(key)
        for k, param in enumerate(params):
            first = k == 0
            paper = spec["paper"].get(param)
            if "paper_state" in spec and param in spec["paper_state"]:
                paper_txt = f"{fmt(paper)} (state: {fmt(spec['paper_state'][param])})"
            else:
                paper_txt = fmt(paper)
            cells = [f"{name} ({spec['table']})" if first else "", param, paper_txt,
                     fmt((img.get("rel_err") or {}).get(param)) if "rel_err" in img else img.get("error", "—")
                     if first else "",
                     fmt((st.get("rel_err") or {}).get(param)) if "rel_err" in st else st.get("error", "—")
                     if first else "",
                     fmt((any_res.get("rel_err_initial") or {}).get(param))]
            if first:
                cells += [str(any_res.get("trials", "—")), str(any_res.get("iters", "—")),
                          f"{img.get('seconds', '—')} / {st.get('seconds', '—')}",
                          f"{img.get('peak_mem_mb', '—')} / {st.get('peak_mem_mb', '—')}"]
            else:
                cells += ["", "", "", ""]
            rows.append("| " + " | ".join(str(c) for c in cells) + " |")
    text = "# gradSim system-identification tables: ours beside the paper's\n\n"
    text += ("Mean absolute relative error over trials (|estimate - truth| / truth), each experiment at its demo's "
             "default settings (see each demo's docstring for scenes, ranges and optimiser), f64, CPU.  "
             "Paper: gradSim (ICLR 2021) Tables 1-3, image supervision.\n\n")
    text += "\n".join(rows) + "\n"
    if notes:
        text += "\nNotes:\n" + "".join(f"- {n}\n" for n in notes)
    return text


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="each demo's --quick settings")
    p.add_argument("--only", action="append", choices=list(EXPERIMENTS), help="run only this experiment (repeatable)")
    p.add_argument("--supervision", choices=("image", "state", "both"), default="both")
    p.add_argument("--timeout", type=float, default=900, help="seconds per run")
    p.add_argument("--extra", default="", help="extra flags passed to every demo, e.g. '--trials 2'")
    p.add_argument("--out", default=os.path.join(ROOT, "benchmarks", "paper_tables.md"))
    args = p.parse_args(argv)
    names = args.only or list(EXPERIMENTS)
    sups = ("image", "state") if args.supervision == "both" else (args.supervision,)
    results, notes = {}, []
    if args.quick:
        notes.append("--quick: the demos' small test settings, not the defaults")
    if args.extra:
        notes.append(f"extra flags: `{args.extra}`")
    for name in names:
        if not os.path.exists(os.path.join(ROOT, "demos", f"{name}.py")):
            notes.append(f"{name}: demos/{name}.py not present; skipped")
            print(f"{name}: missing, skipped", flush=True)
            continue
        results[name] = {}
        for sup in sups:
            print(f"{name} ({sup}) ...", flush=True)
            res = run_one(name, sup, args.quick, args.extra.split(), args.timeout)
            results[name][sup] = res
            print(f"  {json.dumps({k: res.get(k) for k in ('rel_err', 'seconds', 'peak_mem_mb', 'error')})}",
                  flush=True)
    text = table(results, notes)
    with open(args.out, "w") as fh:
        fh.write(text)
    with open(os.path.splitext(args.out)[0] + ".json", "w") as fh:
        json.dump(results, fh, indent=1)
    print(text)
    print(json.dumps({"written": args.out}))


if __name__ == "__main__":
    main()
