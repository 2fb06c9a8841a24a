"""Element arithmetic in lanes: LANES elements per loop iteration, so that LLVM packs it into SIMD.

Taichi 1.7.4 compiles an element loop one element at a time, as scalar code, and the cloth's loops are
latency-bound.  Written in lanes, every quantity of an element's formula is a LANES-vector (lane l = element
base + l), a 3-vector of the formula a "lane triple" (a list of three LANES-vectors), and each operation is
LANES adjacent operations.  LLVM's SLP vectorizer packs such a tree into SIMD instructions where it ends in
stores to consecutive addresses (a several-fold faster forward: benchmarks/MEASURED.md, "Retired prototypes" and
"Moved from the code").  So a term evaluated in lanes stores its corner forces to a small buffer laid out (row,
lane) before adding them into the particles (`LaneForces`).

Reverse kernels: Taichi's reverse of such a loop gains nothing while the adjoints go to the particles' scattered
addresses, and several-fold when the inputs come through per-element ports laid out (row, element).  The cloth
bending and membrane terms do that (`cloth.ClothBendingForces.virtual_work`,
`cloth.ClothMembraneForces.virtual_work`): in the reverse kernel their loops compute, in lanes, the virtual work
of their forces against the force adjoints, through zero-valued ports, one vector of them per lane group, whose
own loop's reverse adds the ports' adjoints into the particles' (`exec.lane_ports.LaneGroupPorts`) (figures:
benchmarks/MEASURED.md, "Moved from the code").  A registered shell material takes part through
`stress_columns`, one formula over lists of values (`core.registry.ShellMaterial`).  Lanes are lists of vectors
("lane triples"), not (3, LANES) matrices, which Taichi compiled several times slower.

Forward lanes only in loops that run on one thread: in a parallel loop Taichi makes an add atomic unless every
access to that field in the task uses one index expression, and LANES lanes adding into one buffer use LANES
(every add atomic: slower, benchmarks/MEASURED.md).  The reverse loops can run on threads because each lane
group's ports are one vector field entry, read and added to at the loop's own index
(`exec.lane_ports.LaneGroupPorts`).
"""
import taichi as ti
from taichi.lang.expr import Expr

from ..core.fastmath import atan2

# Elements per loop iteration: 4, whatever `exec.simd.lane_count` says: lanes of 8 are no faster on a 16-byte
# (SSE2) CPU and, on wider ones, faster by less than their much longer compile costs, except in the forward
# kernels of a large cloth (`cloth.forward_lanes`, from `cloth.CLOTH_WIDE_LANES_MIN_TRIANGLES`); the renderer's
# pixel lanes, far smaller kernels, take 8 there too (figures: benchmarks/MEASURED.md, "Moved from the code").
LANES = 4


# A 3-vector of L elements at once is a list of three L-vectors (x, y, z components: a "lane triple"); one
# element's 3-vector may be given as a list of three scalars.  Taichi functions take and return such lists.


@ti.func
def sub(a, b):
    """a - b, lane triples."""
    return [a[c] - b[c] for c in range(3)]


@ti.func
def add3(a, b):
    """a + b, lane triples."""
    return [a[c] + b[c] for c in range(3)]


@ti.func
def dot(a, b):
    """Lane-wise dot product of two lane triples: an L-vector (a scalar for one element)."""
    return a[0] * b[0] + a[1] * b[1] + a[2] * b[2]


@ti.func
def cross(a, b):
    """Lane-wise cross product of two lane triples."""
    return [a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0]]


@ti.func
def scale(a, f):
    """Each lane's 3-vector times that lane's entry of f (an L-vector, or a scalar for one element)."""
    return [a[c] * f for c in range(3)]


def _is_lanes(v) -> bool:
    """Whether v is an L-vector (a Taichi vector expression), not a scalar.  Used at compile time."""
    return isinstance(v, ti.Matrix) or (isinstance(v, Expr) and v.ptr.is_tensor())


@ti.func
def atan2_lanes(y, x):
    """`fastmath.atan2` of every lane (L-vectors in, an L-vector out; scalars for one element), one scalar
    call per lane: in float64 builds Taichi 1.7.4's atan2 of whole Vectors is accurate to ~3e-8 rad only
    (measured), its scalar atan2 to the last bit."""
    if ti.static(_is_lanes(y)):
        return ti.Vector([atan2(y[l], x[l]) for l in ti.static(range(y.n))])
    else:
        return atan2(y, x)


@ti.func
def element_indices(base, end, n: ti.template()):
    """The n elements from base below end: their indices (lanes past the last element repeat it) and an
    n-vector that is 1 on live lanes and 0 on those past the end (multiply their contributions by it)."""
    last = end - 1
    return ti.Vector([ti.min(base + l, last) for l in ti.static(range(n))]), \
        ti.Vector([ti.cast(base + l <= last, float) for l in ti.static(range(n))])


@ti.func
def corner(field: ti.template(), s, idx, k: ti.template(), n: ti.template()):
    """Corner k's values of a per-particle vec3 field (particle_q, particle_qd, particle_f.grad) at slot s
    on n lanes, a lane triple (idx: the (corners, n) particle indices)."""
    return ti.Vector([field[s, idx[k, l]][0] for l in ti.static(range(n))]), \
        ti.Vector([field[s, idx[k, l]][1] for l in ti.static(range(n))]), \
        ti.Vector([field[s, idx[k, l]][2] for l in ti.static(range(n))])


@ti.func
def any_nonzero(v):
    """1 where some lane of the LANES-vector v is not 0, else 0."""
    count = 0
    for l in ti.static(range(v.n)):
        count += ti.cast(v[l] != 0.0, ti.i32)
    return count > 0


@ti.data_oriented
class LaneForces:
    """The corner forces of `lanes` elements of `corners` corners, stored as force[3 k + c, l] (component c
    of corner k on lane l) so that the lanes' arithmetic ends in stores to consecutive addresses, then
    added into the particles element by element (`add`)."""

    def __init__(self, corners: int, lanes: int = LANES):
        self.corners = corners
        self.lanes = lanes
        self.force = ti.field(float, shape=(3 * corners, lanes))

    @ti.func
    def corner(self, field: ti.template(), s, idx, k: ti.template()):
        """`corner` of `lanes` elements."""
        return corner(field, s, idx, k, self.lanes)

    @ti.func
    def put(self, k: ti.template(), fx, fy, fz):
        """Store corner k's forces on every lane (the lane triple fx, fy, fz)."""
        for l in ti.static(range(self.lanes)):
            self.force[3 * k, l] = fx[l]
            self.force[3 * k + 1, l] = fy[l]
            self.force[3 * k + 2, l] = fz[l]

    @ti.func
    def accumulate(self, k: ti.template(), fx, fy, fz):
        """Add the lane triple fx, fy, fz to corner k's stored forces on every lane."""
        for l in ti.static(range(self.lanes)):
            self.force[3 * k, l] += fx[l]
            self.force[3 * k + 1, l] += fy[l]
            self.force[3 * k + 2, l] += fz[l]

    @ti.func
    def add(self, state: ti.template(), s, idx):
        """Add the stored forces into the particles, lane by lane (element order) and corner by corner."""
        for l in ti.static(range(self.lanes)):
            for k in ti.static(range(self.corners)):
                state.particle_f[s, idx[k, l]] += ti.Vector([self.force[3 * k + c, l] for c in ti.static(range(3))])
