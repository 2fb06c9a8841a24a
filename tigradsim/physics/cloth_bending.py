"""Cloth bending: dihedral-angle forces per interior edge (`physics.cloth` explains the physics and the fields).

The law is written once, over lists of per-lane values (`tigradsim.exec.lanes`, as `cloth_membrane`):
`dihedral` (theta and dtheta/dx of each corner, Bridson et al. 2003), `dtheta_dot` (dtheta/dt from the corner
velocities), `bending_moment` (c = -(k (theta - theta0) + k_d dtheta/dt)) and `bending_forces` (f_k = c
dtheta/dx_k).  `ClothBendingForces` calls it with one lane in `element` and with a lane group in `element_lanes`
(forward kernels on one thread) and `virtual_work` (reverse kernels in lanes, the work c sum_k dtheta/dx_k .
lambda_k of the same forces).
"""
import taichi as ti

from ..core.model import StepTerm, has_grad
from ..exec import lanes
from ..exec.lane_ports import LaneGroupPorts, virtual_work_field
from ..exec.lanes import LANES
from ..exec.loops import NO_PORTS, corner_put, corner_q, corner_qd, differentiating, for_each_element, reversing, \
    table_row
from .cloth_membrane import NORMAL_EPS, list3, store_corners

EDGE_EPS = 1e-24   # [m^2] under the squared edge length


# ---------------------------------------------------------------------------
# the law, over lists of per-lane values

@ti.func
def dihedral(x1, x2, x3, x4):
    """Signed dihedral angles theta and their gradients dtheta/dx1 .. dtheta/dx4 (Bridson et al. 2003) of L
    bending edges at once, each corner given as a lane triple (`exec.lanes`: a list of three L-vectors;
    three scalars for one edge): returns (theta (L-vector or scalar), [g1, g2, g3, g4] (lane triples)).
    x3, x4: the edge; x1, x2: the opposite corners."""
    n1 = lanes.cross(lanes.sub(x3, x1), lanes.sub(x4, x1))
    n2 = lanes.cross(lanes.sub(x4, x2), lanes.sub(x3, x2))
    edge = lanes.sub(x4, x3)
    el = ti.sqrt(lanes.dot(edge, edge) + EDGE_EPS)
    eh = lanes.scale(edge, 1.0 / el)
    theta = lanes.atan2_lanes(lanes.dot(lanes.cross(n2, n1), eh), lanes.dot(n1, n2))
    a1 = lanes.scale(n1, 1.0 / (lanes.dot(n1, n1) + NORMAL_EPS))
    a2 = lanes.scale(n2, 1.0 / (lanes.dot(n2, n2) + NORMAL_EPS))
    d14 = lanes.dot(lanes.sub(x1, x4), eh)
    d24 = lanes.dot(lanes.sub(x2, x4), eh)
    d31 = lanes.dot(lanes.sub(x3, x1), eh)
    d32 = lanes.dot(lanes.sub(x3, x2), eh)
    return theta, [lanes.scale(a1, el), lanes.scale(a2, el), [a1[c] * d14 + a2[c] * d24 for c in range(3)],
                   [a1[c] * d31 + a2[c] * d32 for c in range(3)]]


@ti.func
def dtheta_dot(g, v):
    """sum over the 4 corners k of g_k . v_k (g: dtheta/dx of the corners, v: 4 lane triples): dtheta/dt for
    the corner velocities, the work per unit moment for the force adjoints."""
    return lanes.dot(g[0], v[0]) + lanes.dot(g[1], v[1]) + lanes.dot(g[2], v[2]) + lanes.dot(g[3], v[3])


@ti.func
def bending_moment(theta, rest, stiffness, damping_moment):
    """c = -(k (theta - theta0) + k_d dtheta/dt) [N m] (damping_moment: k_d dtheta/dt)."""
    return -(stiffness * (theta - rest) + damping_moment)


@ti.func
def bending_forces(g, c):
    """The corner forces c dtheta/dx_k [N] (4 lane triples)."""
    return [lanes.scale(g[k], c) for k in range(4)]


# ---------------------------------------------------------------------------
# the force term

@ti.data_oriented
class ClothBendingForces(StepTerm):
    """Dihedral-angle bending: f = -(k (theta - theta0) + k_d dtheta/dt) dtheta/dx.

    path, in_lanes, forward_lanes, reverse_threads: as `ClothMembraneForces`."""

    def __init__(self, model, path="serial", ports=None, in_lanes=False, forward_lanes=LANES, reverse_threads=False):
        super().__init__(model)
        self.path = path
        self.serial = path == "serial"
        self.ports = NO_PORTS if ports is None else ports
        self.in_lanes = in_lanes and self.serial
        self.forward_lanes = forward_lanes       # edges per iteration of the forward lanes (the reverse: LANES)
        self.lane_forces = lanes.LaneForces(4, forward_lanes) if self.in_lanes else None
        self.reverse_in_lanes = self.in_lanes and model.requires_grad
        self.reverse_ports = None
        if self.reverse_in_lanes:
            self.work = virtual_work_field(model.cloth_edge_count)
            self.reverse_ports = LaneGroupPorts(model, model.cloth_bend_indices.to_numpy(), reverse_threads)
            self.parallel_reverse = self.reverse_ports.parallel

    @property
    def element_range(self):
        """[start, end) of the bending edges this term loops over (`parts.merge_part_loops`)."""
        return 0, self.model.cloth_edge_count

    @ti.func
    def apply_forces(self, state: ti.template(), s: ti.template(), t: ti.template()):
        if ti.static(self.reverse_in_lanes and reversing()):
            self.virtual_work(state, s)
        else:
            for_each_element(self, state, s, t, 0, self.model.cloth_edge_count)

    @ti.func
    def element(self, state: ti.template(), s: ti.template(), t: ti.template(), e, b):
        """Bending edge e's corner forces, added at slot s; b: its block (`exec.loops.for_each_element`).  The
        law with one lane: every lane value a scalar."""
        if ti.static(self.ports.active):     # parts path: inputs through ports (exec.ports)
            self.ports.stop(state)
            self.ports.open(e)
        q = self.model.cloth_bend_indices[e]
        x = [list3(corner_q(self.ports, state, s, e, b, k, q[k])) for k in ti.static(range(4))]
        theta, g = dihedral(x[0], x[1], x[2], x[3])
        r = self.model.cloth_bend_row[e]
        c = bending_moment(theta, self.model.cloth_bend_rest_angle[e],
                           table_row(self.ports, 0, self.model.cloth_bending_stiffness, e, b, r),
                           self.damping_moment(state, s, e, b, q, g,
                                               table_row(self.ports, 1, self.model.cloth_bending_damping, e, b, r)))
        f = bending_forces(g, c)
        for k in ti.static(range(4)):
            corner_put(self.ports, state, s, e, b, k, q[k], ti.Vector(f[k]))

    @ti.func
    def element_lanes(self, state: ti.template(), s: ti.template(), t: ti.template(), base, end: ti.template()):
        """`element` of the forward_lanes edges base, base + 1, ... (below end) at once, on one thread, in
        forward kernels (`exec.loops.for_each_element`): the law with a lane group.  Lanes past the last edge
        repeat it with their forces multiplied by 0."""
        n = ti.static(self.forward_lanes)
        e, live, q = self.edge_lanes(base, end, n)
        out = self.lane_forces
        theta, g = dihedral(out.corner(state.particle_q, s, q, 0), out.corner(state.particle_q, s, q, 1),
                            out.corner(state.particle_q, s, q, 2), out.corner(state.particle_q, s, q, 3))
        stiffness, kd, rest = self.params_lanes(e, n)
        m = kd * 0.0
        if lanes.any_nonzero(kd):            # the velocities are read only where some lane is damped
            m = kd * dtheta_dot(g, [out.corner(state.particle_qd, s, q, k) for k in ti.static(range(4))])
        store_corners(out, bending_forces(g, bending_moment(theta, rest, stiffness, m) * live), False)
        out.add(state, s, q)

    @ti.func
    def virtual_work(self, state: ti.template(), s: ti.template()):
        """The loop that stands for the bending forces in the reverse kernel (`apply_forces`; the reverse is
        what runs): W = sum over edges and corners k of lambda_k . f_k(q, qd, p), with lambda_k =
        particle_f.grad[s] at corner k read as a constant, so that W's reverse adds (df/dq)^T lambda,
        (df/dqd)^T lambda and (df/dp)^T lambda into the adjoints of the state and the parameters: the reverse
        of the force term.  Reverse kernels run loop by loop backwards, so lambda is read after the
        integrator's reverse has made it.  The edges go LANES at a time (`exec.lanes`; Taichi's reverse of
        the forward loop itself would be scalar: benchmarks/MEASURED.md, "Retired prototypes"), their positions and velocities
        read as stop_grad(state) + port, the ports of the lane group (`LaneGroupPorts`), which take the
        adjoints side by side; the ports' own loop, before this one, adds them into the particles' in its
        reverse.  Each lane group writes only its own ports, so the loop runs on threads
        (`LaneGroupPorts.parallel`)."""
        count = ti.static(self.model.cloth_edge_count)
        ports = self.reverse_ports
        ti.loop_config(serialize=not ports.parallel)
        for g in range((count + LANES - 1) // LANES):
            ti.stop_grad(state.particle_q)       # the state's adjoints go through the ports
            ti.stop_grad(state.particle_qd)
            # W's adjoint is 1 (a Tape clears it) and the group's port adjoints start from 0: stores to .grad
            # fields stay in place in the reverse kernel, ahead of the adjoints that read or add to them.  W has
            # an entry per lane group (`virtual_work_field`)
            self.work.grad[g] = 1.0
            ports.open(g)
            e, live, q = self.edge_lanes(g * LANES, count, LANES)
            x = [lanes.add3(lanes.corner(state.particle_q, s, q, k, LANES), ports.corner(ports.qport, g, k))
                 for k in ti.static(range(4))]
            theta, gr = dihedral(x[0], x[1], x[2], x[3])
            stiffness, kd, rest = self.params_lanes(e, LANES)
            v = [lanes.add3(lanes.corner(state.particle_qd, s, q, k, LANES), ports.corner(ports.qdport, g, k))
                 for k in ti.static(range(4))]
            c = bending_moment(theta, rest, stiffness, kd * dtheta_dot(gr, v)) * live
            adj = [lanes.corner(state.particle_f.grad, s, q, k, LANES) for k in ti.static(range(4))]
            self.work[g] += (c * dtheta_dot(gr, adj)).sum()      # sum_k lambda_k . bending_forces(gr, c)_k

    @ti.func
    def edge_lanes(self, base, end, n: ti.template()):
        """The n edges from base below end: (their indices, 1 on live lanes and 0 on lanes past the last
        edge, which repeat it, the (4, n) particle indices)."""
        e, live = lanes.element_indices(base, end, n)
        q = ti.Matrix([[self.model.cloth_bend_indices[e[l]][k] for l in ti.static(range(n))]
                       for k in ti.static(range(4))])
        return e, live, q

    @ti.func
    def params_lanes(self, e, n: ti.template()):
        """(stiffness, damping, rest angle) of the n edges e, n-vectors."""
        r = ti.Vector([self.model.cloth_bend_row[e[l]] for l in ti.static(range(n))])
        return ti.Vector([self.model.cloth_bending_stiffness[r[l]] for l in ti.static(range(n))]), \
            ti.Vector([self.model.cloth_bending_damping[r[l]] for l in ti.static(range(n))]), \
            ti.Vector([self.model.cloth_bend_rest_angle[e[l]] for l in ti.static(range(n))])

    @ti.func
    def damping_moment(self, state: ti.template(), s: ti.template(), e, b, q, g, kd):
        """kd dtheta/dt [N m] of bending edge e (g: dtheta/dx of its corners).  The forward kernel skips the
        four velocity reads where kd = 0 (the default); derivative kernels do too unless kd has a gradient,
        since d/dkd at 0 is dtheta/dt."""
        if ti.static(differentiating() and has_grad(self.model.cloth_bending_damping)):
            return kd * dtheta_dot(g, self.velocities(state, s, e, b, q))
        else:
            m = 0.0
            if kd != 0.0:
                m = kd * dtheta_dot(g, self.velocities(state, s, e, b, q))
            return m

    @ti.func
    def velocities(self, state: ti.template(), s: ti.template(), e, b, q):
        """The corner velocities [m/s] of bending edge e, one lane."""
        return [list3(corner_qd(self.ports, state, s, e, b, k, q[k])) for k in ti.static(range(4))]
