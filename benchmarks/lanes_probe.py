"""Would element loops run faster written "in lanes"?  A measurement for issue 17's cloth target, on kernels
of its own; the library uses the layout for the cloth bending term on one thread, forward
(`ClothBendingForces.element_lanes`) and reverse through per-element ports (`ClothBendingForces.virtual_work`;
`tigradsim/physics/lanes.py`).

Taichi 1.7.4 compiles an element loop one element at a time, as scalar code.  LLVM's SLP vectorizer
packs isomorphic operations into SIMD instructions when it finds them side by side and ending in stores
to consecutive addresses.  Written in lanes, a loop iteration handles L elements, every quantity is an
L-vector (lane l = element base + l) and the results go to a structure-of-arrays buffer, so each
operation of the element's formula is L adjacent operations ending in L adjacent stores.

The probe takes the dihedral bending force of `tigradsim.physics.cloth.ClothBendingForces` (same
formulas, `fastmath.atan2`, same floors) on the interior edges of a cloth_grid(n, n), writes the four
corner forces of each edge to a (12, E) buffer, and times, on one thread:
  forward   scalar against lanes;
  reverse   the kernels' `.grad()`, the inputs read two ways: q[idx] + 0 with the gradient going to the
            particle positions (the adjoint adds scatter into q.grad, as the element loops' do today), or
            stop_grad(q[idx]) + port with per-element input ports in the same structure-of-arrays layout
            (exact zeros; the adjoint stores land side by side).
It checks that the lanes give the scalar loop's forces and adjoints (float rounding) and prints us per
call, best of --repeat, and one JSON object on its last line:
{"n", "edges", "lanes", "precision", "forward_us": {"scalar", "lanes"}, "reverse_scatter_us": {...},
 "reverse_ports_us": {...}, "max_force_diff", "max_adjoint_rel_diff"}.

    python benchmarks/lanes_probe.py [--n 64] [--lanes 4] [--repeat 30] [--precision f32]

On an Intel Xeon with AVX-512 (2026-12-05, third session; LLVM vectorizes 32 bytes wide there, `core.simd`;
best of 20): lanes of 4: forward 419 scalar against 154 lanes, reverse through ports 1,341 against 386; lanes
of 8: 549 / 152, 1,526 / 301 (the scalar columns are the same code: the machine's noise).
Measured on the shared 2-core machine (2026-12-04 night, 12,160 edges, us per call, best of 30 and of
20): lanes of 4: forward 324 scalar against 92 lanes, reverse scatter 803 against 798, reverse through
ports 939 against 243; lanes of 8: 310 / 86, 776 / 958, 902 / 240.  In Taichi's optimized LLVM IR the
lanes' forward and their reverse through ports are 4-wide SIMD (354 and 814 `<4 x float>` operations),
their reverse with scattered adjoint adds mostly 2-wide: with the adjoints going to scattered addresses
LLVM finds no consecutive stores to start from.  So a lanes path needs per-element ports for its
reverse pass (the gather path's design, `tigradsim.physics.gather`, in structure-of-arrays layout) and
the per-particle sums on top; what it would gain after those is not measured here.  These kernels are
serial; in a parallel loop Taichi makes an add atomic unless every access to that field in the task uses
one index expression, so lanes adding into shared per-part buffers (the parts path) need one buffer per
lane (measured: a lanes bending term on the parts path ran 1.8x slower forward, 2.7x slower forward +
backward, its adds all atomic).

In float64 the lanes agree with the scalar loop to ~1e-8 only: Taichi 1.7.4 evaluates `ti.atan2` of a
Vector (and scalar atan2 results gathered into one) to ~3e-8 rad in f64 builds, measured against
numpy, where the scalar call is exact.  The library calls atan2 on scalars only.
"""
import argparse
import json
import time
import warnings

import numpy as np


def build(n, lanes):
    """Kernels and fields of the probe (after `tgs.init`)."""
    import taichi as ti
    import tigradsim as tgs
    from tigradsim.core.fastmath import atan2
    from tigradsim.physics.cloth import EDGE_EPS, NORMAL_EPS, interior_edges

    vertices, faces = tgs.meshes.cloth_grid(n, n, cell=1.0 / n, origin=(0.0, 0.6, 0.0), plane="xz")
    quads = interior_edges(faces)
    count = len(quads) // lanes * lanes            # whole groups only: a probe, not a loop driver
    rng = np.random.default_rng(0)
    positions = np.asarray(vertices) + 0.02 / n * rng.standard_normal((len(vertices), 3))
    V = len(vertices)
    q = ti.Vector.field(3, float, shape=V, needs_grad=True)
    q.from_numpy(positions)
    idx = ti.field(ti.i32, shape=(4, count))
    idx.from_numpy(np.ascontiguousarray(quads[:count].T).astype(np.int32))
    stiffness = ti.field(float, shape=count)
    stiffness.from_numpy(1e-4 * (1.0 + rng.random(count)))
    rest = ti.field(float, shape=count)
    rest.from_numpy(0.1 * rng.standard_normal(count))
    out = ti.field(float, shape=(12, count), needs_grad=True)      # corner k, component c: row 3 k + c
    port = ti.field(float, shape=(12, count), needs_grad=True)     # input ports: exact zeros
    no_port = ti.field(float, shape=(12, count))                   # the same zeros without an adjoint

    def cross(a, b):
        return [a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0]]

    def dot(a, b):
        return a[0] * b[0] + a[1] * b[1] + a[2] * b[2]

    def sub(a, b):
        return [a[c] - b[c] for c in range(3)]

    def scale(a, s):
        return [a[c] * s for c in range(3)]

    def forces(x1, x2, x3, x4, k, theta0):
        """Corner forces of one edge (scalars) or of L edges (L-vectors), as lists of 3 components."""
        n1 = cross(sub(x3, x1), sub(x4, x1))
        n2 = cross(sub(x4, x2), sub(x3, x2))
        edge = sub(x4, x3)
        el = ti.sqrt(dot(edge, edge) + EDGE_EPS)
        eh = scale(edge, 1.0 / el)
        theta = atan2(dot(cross(n2, n1), eh), dot(n1, n2))
        a1 = scale(n1, 1.0 / (dot(n1, n1) + NORMAL_EPS))
        a2 = scale(n2, 1.0 / (dot(n2, n2) + NORMAL_EPS))
        d14, d24, d31, d32 = dot(sub(x1, x4), eh), dot(sub(x2, x4), eh), dot(sub(x3, x1), eh), dot(sub(x3, x2), eh)
        moment = -k * (theta - theta0)
        return [[moment * a1[c] * el for c in range(3)], [moment * a2[c] * el for c in range(3)],
                [moment * (a1[c] * d14 + a2[c] * d24) for c in range(3)],
                [moment * (a1[c] * d31 + a2[c] * d32) for c in range(3)]]

    def make_scalar(ported):
        P = port if ported else no_port

        @ti.kernel
        def scalar():
            ti.loop_config(serialize=True)
            for e in range(count):
                if ti.static(ported):
                    ti.stop_grad(q)          # the gradient goes to the ports only
                xs = [[q[idx[k, e]][c] + P[3 * k + c, e] for c in ti.static(range(3))] for k in ti.static(range(4))]
                f = forces(xs[0], xs[1], xs[2], xs[3], stiffness[e], rest[e])
                for k in ti.static(range(4)):
                    for c in ti.static(range(3)):
                        out[3 * k + c, e] = f[k][c]
        return scalar

    def make_lanes(ported):
        P = port if ported else no_port

        @ti.kernel
        def laned():
            ti.loop_config(serialize=True)
            for g in range(count // lanes):
                base = g * lanes
                if ti.static(ported):
                    ti.stop_grad(q)
                xs = [[ti.Vector([q[idx[k, base + l]][c] + P[3 * k + c, base + l] for l in ti.static(range(lanes))])
                       for c in ti.static(range(3))] for k in ti.static(range(4))]
                kk = ti.Vector([stiffness[base + l] for l in ti.static(range(lanes))])
                th0 = ti.Vector([rest[base + l] for l in ti.static(range(lanes))])
                f = forces(xs[0], xs[1], xs[2], xs[3], kk, th0)
                for k in ti.static(range(4)):
                    for c in ti.static(range(3)):
                        for l in ti.static(range(lanes)):
                            out[3 * k + c, base + l] = f[k][c][l]
        return laned

    kernels = {(layout, kind): (make_scalar if kind == "scalar" else make_lanes)(layout == "ports")
               for layout in ("scatter", "ports") for kind in ("scalar", "lanes")}
    return dict(kernels=kernels, q=q, out=out, port=port, count=count)


def best_us(fn, repeat):
    import taichi as ti
    ts = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        ti.sync()
        ts.append(time.perf_counter() - t0)
    return min(ts) * 1e6


def run_reverse(probe, kernel, weights):
    """The adjoint of sum(weights * out) in q (layout "scatter") or in the ports ("ports")."""
    probe["q"].grad.fill(0)
    probe["port"].grad.fill(0)
    kernel()
    probe["out"].grad.from_numpy(weights)     # the reverse of a store zeroes its adjoint: set it each time
    kernel.grad()


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=64, help="cloth_grid cells per side")
    ap.add_argument("--lanes", type=int, default=4, help="elements per loop iteration")
    ap.add_argument("--repeat", type=int, default=30)
    ap.add_argument("--precision", choices=("f32", "f64"), default="f32")
    args = ap.parse_args(argv)
    if args.n < 2 or args.lanes < 1 or args.repeat < 1:
        ap.error(f"--n must be >= 2, --lanes and --repeat >= 1 (got {args.n}, {args.lanes}, {args.repeat})")
    import taichi as ti
    import tigradsim as tgs
    # the formulas are plain Python functions over Taichi expressions (one text for scalars and lanes),
    # which Taichi warns about at compile time
    warnings.filterwarnings("ignore", message=".*non-taichi function", category=SyntaxWarning)
    tgs.init(arch="cpu", precision=args.precision, cpu_max_num_threads=1)
    probe = build(args.n, args.lanes)
    k = probe["kernels"]
    weights = np.random.default_rng(1).random((12, probe["count"])).astype(np.float64)

    results = {}
    for kind in ("scalar", "lanes"):
        k[("scatter", kind)]()
        results[("force", kind)] = probe["out"].to_numpy()
        for layout in ("scatter", "ports"):
            run_reverse(probe, k[(layout, kind)], weights)
            field = probe["q"] if layout == "scatter" else probe["port"]
            results[(layout, kind)] = field.grad.to_numpy()
    force_diff = float(np.abs(results[("force", "scalar")] - results[("force", "lanes")]).max())
    adjoint_diff = max(float(np.abs(results[(lay, "scalar")] - results[(lay, "lanes")]).max()
                             / max(np.abs(results[(lay, "scalar")]).max(), 1e-300)) for lay in ("scatter", "ports"))

    timing = {"forward_us": {}, "reverse_scatter_us": {}, "reverse_ports_us": {}}
    for kind in ("scalar", "lanes"):
        timing["forward_us"][kind] = round(best_us(k[("scatter", kind)], args.repeat), 1)
        for layout in ("scatter", "ports"):
            kernel = k[(layout, kind)]
            probe["out"].grad.from_numpy(weights)
            timing[f"reverse_{layout}_us"][kind] = round(best_us(kernel.grad, args.repeat), 1)
    edges = probe["count"]
    print(f"bending forces of {edges} edges (cloth_grid {args.n}x{args.n}), {args.precision}, 1 thread, "
          f"lanes of {args.lanes}; us per call, best of {args.repeat}")
    for name, row in timing.items():
        print(f"  {name[:-3]:<16} scalar {row['scalar']:>9.1f}   lanes {row['lanes']:>9.1f}   "
              f"{row['scalar'] / row['lanes']:.2f}x")
    print(f"  largest force difference {force_diff:.3g} N, largest relative adjoint difference {adjoint_diff:.3g}")
    print(json.dumps({"n": args.n, "edges": edges, "lanes": args.lanes, "precision": args.precision, **timing,
                      "max_force_diff": force_diff, "max_adjoint_rel_diff": adjoint_diff}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
