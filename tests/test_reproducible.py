"""Same command, same result: on the CPU in float64 (`tigradsim.runtime.deterministic()` is
True there by default) a rollout, its rendered frames, the gradient and a short image fit
(Adam, then BFGS, through the soft rasterizer) are bit-identical in two fresh processes."""
import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Run in a fresh interpreter: a rigid box pushed along the ground (the rigid-mass demo's scene,
# small), its mass fitted from 16x16 silhouettes.  Every float is printed as float.hex().
FIT = r"""
import argparse, hashlib, json, os, sys
import numpy as np
sys.path.insert(0, os.path.join(os.getcwd(), "demos"))
import tigradsim as tgs
import sysid_rigid_mass

tgs.init(precision="f64")
assert tgs.deterministic()
ns = argparse.Namespace(push=20.0, duration=0.2, dt=1 / 240, every=12, res=16, sigma=1e-3, checkpoint=None)
sc = sysid_rigid_mass.Scene("box", ns)
sc.model.set("body_mass", [1.6])
target = sc.fit.render()
digest = lambda a: hashlib.sha256(np.ascontiguousarray(a).tobytes()).hexdigest()
out = {"target": digest(target), "vertices": digest(sc.surface.numpy())}
sc.model.set("body_mass", [0.9])
sc.fit.set_target(target)
g = tgs.check_gradient  # noqa: F841  (imported: the package is complete)
hist = sc.fit.fit(target, iters=3, optimizer=tgs.Adam([sc.mass], lr=0.1), log_every=0)
hist = sc.fit.fit(target, iters=3, optimizer=tgs.BFGS([sc.mass], lr=0.1), log_every=0)
out["loss"] = [float(x).hex() for x in hist.loss]
out["mass"] = float(sc.model.get("body_mass")[0]).hex()
out["grad"] = float(sc.model.body_mass.grad.to_numpy()[0]).hex()
out["frames"] = digest(sc.renderer.image.to_numpy())
print(json.dumps(out))
"""


def _run():
    r = subprocess.run([sys.executable, "-c", FIT], cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_image_fit_is_bit_identical_in_two_processes():
    a, b = _run(), _run()
    assert len(a["loss"]) >= 6 and float.fromhex(a["loss"][-1]) < float.fromhex(a["loss"][0])
    assert a == b
