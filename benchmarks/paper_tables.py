"""The gradSim paper's tables, reproduced: system identification (Tables 1-3)
and control from pixels.  Each experiment demo runs at its default settings in
its own subprocess (image and state supervision; for control the image-loss
and 3D-loss methods, the random policy measured in every run), and a markdown
table of our numbers beside the paper's (DESIGN.md section 6) is written, with
seconds and peak memory.

    python benchmarks/paper_tables.py                        # everything (hours on 2 cores)
    python benchmarks/paper_tables.py --only sysid_rigid_mass --supervision image
    python benchmarks/paper_tables.py --only control_fem --extra "--seeds 6 --iters 40"
    python benchmarks/paper_tables.py --render               # rewrite the table from stored results

Results are kept in benchmarks/paper_tables.json, one entry per (experiment,
supervision) with the flags and date of its run; a run replaces only the
entries it measures, so experiments can be measured one at a time and the
table always shows the latest measurement of each.  --quick results are kept
apart (paper_tables_quick.*) so they never replace full ones.
"""
import argparse
import datetime
import json
import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# paper: absolute relative errors (image supervision) from gradSim, Tables 1-3
SYSID = {
    "sysid_rigid_mass": {"table": "1", "paper": {"mass": 9.01e-5}, "paper_state": {"mass": 5.17e-9},
                         "flags": ["--trials", "10"]},          # the target is over 10 trials
    "sysid_rigid_contact": {"table": "2", "paper": {"mass": 2.87e-4, "kd": 0.400, "ke": 0.003, "kf": 0.001,
                                                    "mu": 0.007}},
    "sysid_fem": {"table": "3", "paper": {"mu": 0.0054, "lam": 0.0056}, "flags": ["--estimate", "lame"]},
    "sysid_fem_mass": {"table": "3", "paper": {"mass": 0.048}, "script": "sysid_fem",
                       "flags": ["--estimate", "mass"]},
    "sysid_cloth": {"table": "3", "paper": {"velocity": 0.026}},
}
# paper: final centre-of-mass error of the image-loss controller and of a random policy (gradSim section 5.3)
CONTROL = {
    "control_walker": {"paper": "goal image reached in 3 iterations"},
    "control_fem": {"paper": "MSE 0.107 after 40 iterations, 6 seeds (random 3.5)"},
    "control_cloth": {"paper": "MSE 0.199 after 50 iterations, 5 seeds (random 8.07)"},
}
EXPERIMENTS = {**SYSID, **CONTROL}
# the flag value each kind of demo takes for image / 3D supervision
MODE_FLAG = {"sysid": ("--supervision", {"image": "image", "state": "state"}),
             "control": ("--method", {"image": "gradsim", "state": "state"})}


def kind(name):
    return "control" if name in CONTROL else "sysid"


def run_one(name, supervision, quick, extra, timeout):
    spec = EXPERIMENTS[name]
    script = os.path.join(ROOT, "demos", f"{spec.get('script', name)}.py")
    extra = list(spec.get("flags", [])) + list(extra)
    out = os.path.join(ROOT, "out", "paper_tables", f"{name}_{supervision}")
    flag, values = MODE_FLAG[kind(name)]
    cmd = [sys.executable, script, "--headless", flag, values[supervision], "--out", out] + list(extra)
    if quick:
        cmd.append("--quick")
    start = time.time()
    meta = {"flags": " ".join(os.path.relpath(c, ROOT) if c.startswith(ROOT) else c for c in cmd[1:]),
            "date": datetime.date.today().isoformat()}
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=ROOT)
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout} s", "wall_seconds": round(time.time() - start, 1), **meta}
    wall = round(time.time() - start, 1)
    lines = [ln for ln in proc.stdout.strip().splitlines() if ln.startswith("{")]
    if proc.returncode != 0 or not lines:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
        return {"error": f"exit {proc.returncode}: " + " | ".join(tail), "wall_seconds": wall, **meta}
    return {**json.loads(lines[-1]), "wall_seconds": wall, **meta}


def fmt(x):
    if x is None:
        return "—"
    if isinstance(x, str):
        return x
    return f"{x:.2e}" if (x != 0 and (abs(x) < 1e-2 or abs(x) >= 1e3)) else f"{x:.3g}"


def cell(res, key, sub=None):
    """One result's value (or its error message), formatted."""
    if not res:
        return "—"
    if "error" in res:
        return "failed: " + res["error"][:80]
    v = res.get(key)
    if sub is not None:
        v = (v or {}).get(sub)
    return fmt(v)


def sysid_table(results):
    rows = ["| experiment (paper table) | parameter | paper (image) | ours, image | ours, state | initial guess "
            "| trials | iters | seconds (image / state) | peak MB (image / state) |",
            "|---|---|---|---|---|---|---|---|---|---|"]
    for name, spec in SYSID.items():
        img, st = results.get(name, {}).get("image", {}), results.get(name, {}).get("state", {})
        if not img and not st:
            continue
        any_res = img if "rel_err" in img else st
        params = list(spec["paper"])
        params += [k for k in (any_res.get("rel_err") or {}) if k not in params]
        for k, param in enumerate(params):
            paper = fmt(spec["paper"].get(param))
            if param in spec.get("paper_state", {}):
                paper += f" (state: {fmt(spec['paper_state'][param])})"
            cells = [f"{name} ({spec['table']})" if k == 0 else "", param, paper,
                     cell(img, "rel_err", param), cell(st, "rel_err", param),
                     cell(any_res, "rel_err_initial", param)]
            if k == 0:
                cells += [str(any_res.get("trials", "—")), str(any_res.get("iters", "—")),
                          f"{img.get('seconds', '—')} / {st.get('seconds', '—')}",
                          f"{img.get('peak_mem_mb', '—')} / {st.get('peak_mem_mb', '—')}"]
            else:
                cells += ["", "", "", ""]
            rows.append("| " + " | ".join(cells) + " |")
    return rows


def control_table(results):
    rows = ["| task | paper (image loss) | ours, image loss | ours, 3D loss | random policy | seeds | iters "
            "| seconds (image / 3D) | peak MB (image / 3D) |",
            "|---|---|---|---|---|---|---|---|---|"]
    for name, spec in CONTROL.items():
        img, st = results.get(name, {}).get("image", {}), results.get(name, {}).get("state", {})
        if not img and not st:
            continue
        any_res = img if "position_error" in img else st

        def both(res):
            if not res or "error" in res:
                return cell(res, "position_error")
            return f"{fmt(res['position_error'])} m (MSE {fmt(res.get('position_mse'))})"

        rand = (f"{fmt(any_res.get('position_error_random'))} m (MSE {fmt(any_res.get('position_mse_random'))})"
                if "position_error_random" in any_res else "—")
        rows.append("| " + " | ".join([
            name, spec["paper"], both(img), both(st), rand, str(any_res.get("seeds", "—")),
            str(any_res.get("iters", "—")), f"{img.get('seconds', '—')} / {st.get('seconds', '—')}",
            f"{img.get('peak_mem_mb', '—')} / {st.get('peak_mem_mb', '—')}"]) + " |")
    return rows


def table(results):
    text = "# gradSim's tables: ours beside the paper's\n\n"
    text += ("Written by `benchmarks/paper_tables.py` from paper_tables.json (each experiment's latest "
             "measurement; its flags and date are listed below).  CPU, 2 shared cores.\n\n")
    text += ("## System identification (Tables 1-3)\n\nMean absolute relative error over trials "
             "(|estimate - truth| / truth), each demo at its default settings unless its flags say otherwise; "
             "paper: image supervision.\n\n")
    text += "\n".join(sysid_table(results)) + "\n\n"
    text += ("## Control from pixels\n\nMean over seeds of the final centre-of-mass distance to the target's "
             "(m), and the mean squared distance (the paper's metric).\n\n")
    text += "\n".join(control_table(results)) + "\n\n## Runs\n\n"
    for name in EXPERIMENTS:
        for sup, res in results.get(name, {}).items():
            text += (f"- {name} ({sup}): {res.get('date', '?')}, wall {res.get('wall_seconds', '?')} s, "
                     f"`{res.get('flags', '?')}`" + (f"; {res['note']}" if res.get("note") else "") + "\n")
    return text


def load(path):
    if os.path.exists(path):
        with open(path) as fh:
            return json.load(fh)
    return {}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="each demo's --quick settings (kept in *_quick.*)")
    p.add_argument("--only", action="append", choices=list(EXPERIMENTS), help="run only this experiment (repeatable)")
    p.add_argument("--supervision", choices=("image", "state", "both"), default="both",
                   help="image / 3D supervision (for control: --method gradsim / state)")
    p.add_argument("--timeout", type=float, default=1800, help="seconds per run")
    p.add_argument("--extra", default="", help="extra flags passed to every demo, e.g. '--trials 2'")
    p.add_argument("--note", default="", help="a remark stored with these runs and shown in the table")
    p.add_argument("--render", action="store_true", help="only rewrite the markdown from the stored JSON")
    p.add_argument("--out", default=os.path.join(ROOT, "benchmarks", "paper_tables.md"))
    args = p.parse_args(argv)
    if args.quick:
        args.out = args.out.replace(".md", "_quick.md")
    json_path = os.path.splitext(args.out)[0] + ".json"
    results = load(json_path)
    if not args.render:
        names = args.only or list(EXPERIMENTS)
        sups = ("image", "state") if args.supervision == "both" else (args.supervision,)
        for name in names:
            for sup in sups:
                print(f"{name} ({sup}) ...", flush=True)
                res = run_one(name, sup, args.quick, args.extra.split(), args.timeout)
                if args.note:
                    res["note"] = args.note
                results = load(json_path)     # re-read: other sweeps may have written meanwhile
                results.setdefault(name, {})[sup] = res
                print("  " + json.dumps({k: res.get(k) for k in ("rel_err", "position_error", "position_error_random",
                                                                 "seconds", "peak_mem_mb", "error") if k in res}),
                      flush=True)
                with open(json_path, "w") as fh:  # after every run, so an interrupted sweep keeps what it measured
                    json.dump(results, fh, indent=1)
    text = table(results)
    with open(args.out, "w") as fh:
        fh.write(text)
    print(text)
    print(json.dumps({"written": args.out}))


if __name__ == "__main__":
    main()
