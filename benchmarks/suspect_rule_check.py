"""One fit's suspect rule (tigradsim/fitting/bound_hits.mark_suspect) applied to stored `tigradsim fit` outputs:
which "ok" estimates it would mark "suspect", and whether their 95 % intervals held the truth (the clips'
truth.json, read here only to score).  Prints one row per "ok" estimate and the counts.

    python3 benchmarks/suspect_rule_check.py DIR [DIR ...]     # each DIR/<clip>_<variant>_<mode>/fit/estimates.json

A directory name's clip is what is left after dropping the words clean, noisy, camera, assume, nuisance, auto
(coverage.py's naming); box clips only (box.mass, box.mu).
"""
import glob
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
from tigradsim.fitting.bound_hits import output_bound_hits
rows = []
for d in sorted(f for root in sys.argv[1:] for f in glob.glob(os.path.join(root, '*', 'fit'))):
    name = d.rstrip('/').split('/')[-2]
    parts = name.split('_')
    clip = '_'.join(p for p in parts if p not in ('clean', 'noisy', 'camera', 'assume', 'nuisance', 'auto'))
    e = json.load(open(d + '/estimates.json'))
    truth = json.load(open(os.path.join(ROOT, 'benchmarks', 'footage', clip, 'truth.json')))['truth']
    u = e['unknowns']
    hits = output_bound_hits(u)
    for k in ('box.mass', 'box.mu'):
        if k not in u: continue
        m = u[k]; t = truth[k.split('.')[1]]
        ci = m.get('ci95')
        holds = None if ci is None else (ci[0] <= t <= ci[1])
        rows.append((os.path.dirname(os.path.dirname(d)), name, k, m['status'], holds, bool(hits), '; '.join(hits)[:80]))
ok = [r for r in rows if r[3] == 'ok']
print('estimates', len(rows), 'ok', len(ok))
print('ok & excludes truth:', sum(r[4] is False for r in ok), ' of which flagged suspect:', sum(r[4] is False and r[5] for r in ok))
print('ok & holds truth:', sum(r[4] is True for r in ok), ' of which flagged suspect:', sum(r[4] is True and r[5] for r in ok))
for r in ok:
    print(r)
