"""Element arithmetic in lanes: LANES elements per loop iteration, so that LLVM packs it into SIMD.

Taichi 1.7.4 compiles an element loop one element at a time, as scalar code, and the cloth's loops are
latency-bound.  Written in lanes, every quantity of an element's formula is a LANES-vector (lane l =
element base + l), a 3-vector of the formula a (3, LANES) matrix, and each operation is LANES adjacent
operations.  LLVM's SLP vectorizer packs such a tree into SIMD instructions where it ends in stores to
consecutive addresses (`benchmarks/lanes_probe.py`: cloth bending, 12,160 edges, one thread: forward
324 -> 92 us).  So a term evaluated in lanes stores its corner forces to a small buffer laid out (row,
lane) before adding them into the particles (`LaneForces`).

Forward kernels only.  The reverse pass would gain too (the probe: 939 -> 243 us) only with its inputs
read through per-element ports laid out the same way; on the serial path's fused step kernel such a
lanes body made Taichi's reverse kernel compile in 65 s instead of about 3, for 10 % less reverse time
(cloth 32x32, measured), so derivative kernels evaluate the same formulas one element at a time.

Only in loops that run on one thread: in a parallel loop Taichi makes an add atomic unless every access
to that field in the task uses one index expression, and LANES lanes adding into one buffer use LANES
(measured on the parts path: every add atomic, 1.8x slower forward).
"""
import taichi as ti

from ..core.fastmath import atan2

# Elements per loop iteration: the machine's 4-wide float SIMD (lanes of 8 measured no faster,
# `benchmarks/lanes_probe.py`).
LANES = 4


@ti.func
def row(a, c: ti.template()):
    """Row c of a (3, L) lane matrix: component c of every lane, an L-vector."""
    return ti.Vector([a[c, l] for l in ti.static(range(a.m))])


@ti.func
def dot(a, b):
    """Lane-wise dot product of two (3, L) lane matrices: an L-vector."""
    p = a * b                            # element-wise
    return row(p, 0) + row(p, 1) + row(p, 2)


@ti.func
def cross(a, b):
    """Lane-wise cross product of two (3, L) lane matrices."""
    return ti.Matrix.rows([row(a, 1) * row(b, 2) - row(a, 2) * row(b, 1),
                           row(a, 2) * row(b, 0) - row(a, 0) * row(b, 2),
                           row(a, 0) * row(b, 1) - row(a, 1) * row(b, 0)])


@ti.func
def scale(a, s):
    """Each lane's 3-vector of a (3, L) lane matrix times that lane's entry of the L-vector s."""
    return ti.Matrix.rows([row(a, 0) * s, row(a, 1) * s, row(a, 2) * s])


@ti.func
def atan2_lanes(y, x):
    """`fastmath.atan2` of every lane (L-vectors in, an L-vector out), one scalar call per lane: in float64
    builds Taichi 1.7.4's atan2 of whole Vectors is accurate to ~3e-8 rad only (measured), its scalar
    atan2 to the last bit."""
    return ti.Vector([atan2(y[l], x[l]) for l in ti.static(range(y.n))])


@ti.func
def one_lane(v):
    """A 3-vector as a (3, 1) lane matrix (one element through a lanes formula)."""
    return ti.Matrix([[v[0]], [v[1]], [v[2]]])


@ti.func
def lane(a, l: ti.template()):
    """Lane l of a (3, L) lane matrix as a 3-vector."""
    return ti.Vector([a[0, l], a[1, l], a[2, l]])


@ti.func
def any_nonzero(v):
    """1 where some lane of the LANES-vector v is not 0, else 0."""
    count = 0
    for l in ti.static(range(v.n)):
        count += ti.cast(v[l] != 0.0, ti.i32)
    return count > 0


@ti.data_oriented
class LaneForces:
    """The corner forces of LANES elements of `corners` corners, stored as force[3 k + c, l] (component c
    of corner k on lane l) so that the lanes' arithmetic ends in stores to consecutive addresses, then
    added into the particles element by element (`add`)."""

    def __init__(self, corners: int):
        self.corners = corners
        self.force = ti.field(float, shape=(3 * corners, LANES))

    @ti.func
    def corner(self, field: ti.template(), s, idx, k: ti.template()):
        """Corner k's values of a per-particle vec3 state field (particle_q, particle_qd) at slot s on every
        lane, a (3, LANES) matrix (idx: the (corners, LANES) particle indices)."""
        return ti.Matrix([[field[s, idx[k, l]][c] for l in ti.static(range(LANES))] for c in ti.static(range(3))])

    @ti.func
    def put(self, k: ti.template(), f):
        """Store corner k's forces on every lane, f (3, LANES)."""
        for c in ti.static(range(3)):
            for l in ti.static(range(LANES)):
                self.force[3 * k + c, l] = f[c, l]

    @ti.func
    def add(self, state: ti.template(), s, idx):
        """Add the stored forces into the particles, lane by lane (element order) and corner by corner."""
        for l in ti.static(range(LANES)):
            for k in ti.static(range(self.corners)):
                state.particle_f[s, idx[k, l]] += ti.Vector([self.force[3 * k + c, l] for c in ti.static(range(3))])
