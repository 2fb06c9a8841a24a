"""The plastic MPM laws' own cost: stress + return mapping (through `tigradsim.core.svd3.isotropic3`) of
4,096 deformation gradients near I, float32, 2 threads: the compile time of the Tape kernel (offline
cache off), then forward and forward+backward per call (min of 20).

    python benchmarks/bench_svd3.py [mpm_von_mises | mpm_drucker_prager]

Measured 2026-12-06 on the 2-vCPU VM (load average 4-8 from other jobs), mpm_von_mises: before (svd3's
clamped-gap U, V derivatives) compile 225 s, forward 0.95 ms, forward+backward 3.54 ms; after (isotropic3's
divided differences: fn evaluated 5 times, g, its detached value and 3 spread pairs) compile 241 s,
forward 2.30 ms, forward+backward 7.25 ms.
"""
import sys, time, numpy as np, taichi as ti
import tigradsim as tgs
tgs.init(arch="cpu", precision="f32", offline_cache=False)
from tigradsim.core.registry import get_material
mat = get_material(sys.argv[1] if len(sys.argv) > 1 else "mpm_von_mises")
n = 4096
rng = np.random.default_rng(0)
F = ti.Matrix.field(3, 3, float, shape=n, needs_grad=True)
F.from_numpy((np.eye(3) + 0.05 * rng.standard_normal((n, 3, 3))).astype(np.float32))
pv = mat.param_vector({**mat.params, "E": 1e5, "nu": 0.3})
p = ti.Vector.field(len(pv), float, shape=(), needs_grad=True)
p.from_numpy(pv.astype(np.float32))
W = ti.Matrix.field(3, 3, float, shape=n)
W.from_numpy(rng.standard_normal((n, 3, 3)).astype(np.float32))
loss = ti.field(float, shape=(), needs_grad=True)
@ti.kernel
def run(m: ti.template()):
    for i in F:
        P = m.stress(F[i], p[None])
        Fp, pl = m.project(F[i], 0.0, p[None])
        loss[None] += (P * W[i]).sum() * 1e-5 + (Fp * W[i]).sum() + pl
t0 = time.perf_counter()
with ti.ad.Tape(loss):
    run(mat)
compile_s = time.perf_counter() - t0
fw, fb = [], []
for _ in range(20):
    t0 = time.perf_counter(); run(mat); ti.sync(); fw.append(time.perf_counter() - t0)
    t0 = time.perf_counter()
    with ti.ad.Tape(loss):
        run(mat)
    ti.sync(); fb.append(time.perf_counter() - t0)
print(f"{mat.name}: first Tape call (compile) {compile_s:.1f} s; forward {min(fw)*1e3:.2f} ms, forward+backward {min(fb)*1e3:.2f} ms per {n} particles (min of 20)")
