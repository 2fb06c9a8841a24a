"""Cloth membrane and aerodynamic forces (`physics.cloth` explains the physics and the fields).

The law is written once, over lists of per-lane values (`tigradsim.exec.lanes`: a 3-vector is a list of three
values, each a scalar for one triangle or an L-vector for L triangles at once, as `ShellMaterial.stress_columns`
is written): `membrane_stress` (the material's P of F = [d1 d2] Dm^-1), `damping_stress` (damping * dF/dt),
`membrane_forces` (the corner forces -A P Dm^-T) and `aerodynamics`.  `ClothMembraneForces` calls it with one
lane in `element` (one triangle at a time: the serial and parts paths and Taichi's reverse of them) and with a
lane group in `element_lanes` (forward kernels on one thread) and `virtual_work` (reverse kernels in lanes),
which takes the work of the same forces against their adjoints (`membrane_work`, the transpose of
`membrane_forces`).
"""
import taichi as ti

from ..core.model import StepTerm, has_grad
from ..exec import lanes
from ..exec.lane_ports import LaneGroupPorts, virtual_work_field
from ..exec.lanes import LANES
from ..exec.loops import NO_PORTS, corner_put, corner_q, corner_qd, differentiating, for_each_element, reversing, \
    row_value, stopped_state, table_row

# Floors under squared lengths (norm() at 0 has a NaN gradient); far below any real cloth's |n|^2 = (2 area)^2
# even in f32.
NORMAL_EPS = 1e-30
AERO_EPS = 1e-12   # [m^2/s^2] under |v_tangential|


# ---------------------------------------------------------------------------
# the law, over lists of per-lane values

@ti.func
def list3(v):
    """A 3-vector as a list of its three components (`exec.lanes`' form for one element)."""
    return [v[0], v[1], v[2]]


@ti.func
def columns(d1, d2, B, c: ti.template()):
    """Column c of [d1 d2] B (d1, d2: lane triples; B: 2x2 nested lists of lane values)."""
    return [d1[r] * B[0][c] + d2[r] * B[1][c] for r in range(3)]


@ti.func
def membrane_stress(material: ti.template(), d1, d2, B, p):
    """Columns (P1, P2) [N/m] of the material's first Piola stress at F = [d1 d2] B (d1, d2: edge vectors
    x1 - x0, x2 - x0; B = Dm^-1; p: the parameter values).  A material that gives no `stress_columns` (a user's
    `stress` alone) serves one triangle at a time."""
    f1 = columns(d1, d2, B, 0)
    f2 = columns(d1, d2, B, 1)
    if ti.static(material.in_columns()):
        return material.stress_columns(f1, f2, p)
    else:
        P = material.stress(ti.Matrix.cols([ti.Vector(f1), ti.Vector(f2)]), ti.Vector(p))
        return [P[0, 0], P[1, 0], P[2, 0]], [P[0, 1], P[1, 1], P[2, 1]]


@ti.func
def damping_stress(w1, w2, B, kd):
    """Columns of the membrane damping stress kd dF/dt (w1, w2: the edge velocities v1 - v0, v2 - v0)."""
    return lanes.scale(columns(w1, w2, B, 0), kd), lanes.scale(columns(w1, w2, B, 1), kd)


@ti.func
def membrane_forces(P1, P2, B, area):
    """The corner forces [N] of a stress with columns P1, P2: f1, f2 the columns of -A P B^T, f0 = -(f1 + f2)
    (three lane triples)."""
    f1 = [-area * (P1[r] * B[0][0] + P2[r] * B[0][1]) for r in range(3)]
    f2 = [-area * (P1[r] * B[1][0] + P2[r] * B[1][1]) for r in range(3)]
    return [-(f1[r] + f2[r]) for r in range(3)], f1, f2


@ti.func
def membrane_work(P1, P2, m1, m2, B, area):
    """sum over corners k of lambda_k . f_k for the forces `membrane_forces(P1, P2, B, area)` and adjoints
    lambda_k (m1 = lambda_1 - lambda_0, m2 = lambda_2 - lambda_0), written as -A P : ([m1 m2] B)."""
    return -area * (lanes.dot(P1, columns(m1, m2, B, 0)) + lanes.dot(P2, columns(m1, m2, B, 1)))


@ti.func
def relative_velocity(v0, w1, w2, wind):
    """Mean corner velocity minus the wind (lane triples; w1, w2: v1 - v0, v2 - v0)."""
    return [(3.0 * v0[c] + w1[c] + w2[c]) / 3.0 - wind[c] for c in range(3)]


@ti.func
def aerodynamics(d1, d2, area, v, drag, lift):
    """A triangle's aerodynamic force per corner [N]: drag and lift on its mean velocity relative to the wind,
    v [m/s] (d1, d2: its edge vectors from corner 0, area [m^2] its rest area); lane triples and lane values
    (`exec.lanes`), or lists of three scalars and scalars for one triangle."""
    n = lanes.cross(d1, d2)
    nh = lanes.scale(n, 1.0 / ti.sqrt(lanes.dot(n, n) + NORMAL_EPS))
    vn = lanes.dot(nh, v)
    vt = lanes.sub(v, lanes.scale(nh, vn))
    attack = lanes.atan2_lanes(vn, ti.sqrt(lanes.dot(vt, vt) + AERO_EPS))
    return lanes.add3(lanes.scale(v, -(drag * area / 3.0) * ti.abs(vn)),
                      lanes.scale(nh, -(lift * area / 3.0) * attack * lanes.dot(v, v)))


@ti.func
def store_corners(out: ti.template(), f, add: ti.template()):
    """Store the corner forces f (a lane triple per corner) into `out` (a `lanes.LaneForces`), or add them to
    what it holds (add=True)."""
    for k in ti.static(range(out.corners)):
        if ti.static(add):
            out.accumulate(k, f[k][0], f[k][1], f[k][2])
        else:
            out.put(k, f[k][0], f[k][1], f[k][2])


# ---------------------------------------------------------------------------
# the force term

@ti.data_oriented
class ClothMembraneForces(StepTerm):
    """Membrane (registered shell material + dF/dt damping) and aerodynamics, per triangle of
    one material group (one term per group: a term runs one loop, see model.py).

    path: `exec.loops.element_path` ("serial", "parallel", or "parts" with `ports`).  in_lanes: on one thread
    the forward kernels take `forward_lanes` triangles per iteration (`element_lanes`) where the material gives
    `stress_columns`, and so does the reverse kernel (LANES, `virtual_work`, through `reverse_ports`) where the
    model has gradients; reverse_threads: that reverse runs on threads (`LaneGroupPorts`; the builder decides,
    `cloth.reverse_threads`)."""

    def __init__(self, model, group, damping_column, path="serial", ports=None, in_lanes=False, forward_lanes=LANES,
                 reverse_threads=False):
        super().__init__(model)
        self.group = group
        self.damping_column = damping_column
        self.path = path
        self.serial = path == "serial"
        self.ports = NO_PORTS if ports is None else ports
        self.in_lanes = in_lanes and self.serial and group.material.in_columns()
        self.forward_lanes = forward_lanes       # elements per iteration of the forward lanes (the reverse: LANES)
        self.lane_forces = lanes.LaneForces(3, forward_lanes) if self.in_lanes else None
        self.reverse_in_lanes = self.in_lanes and model.requires_grad
        self.reverse_ports = None
        if self.reverse_in_lanes:
            self.work = virtual_work_field(group.end - group.start)
            self.reverse_ports = LaneGroupPorts(model, model.cloth_indices.to_numpy()[group.start:group.end],
                                                reverse_threads)
            self.parallel_reverse = self.reverse_ports.parallel

    @property
    def element_range(self):
        """[start, end) of the triangles this term loops over (`parts.merge_part_loops`)."""
        return self.group.start, self.group.end

    @ti.func
    def apply_forces(self, state: ti.template(), s: ti.template(), t: ti.template()):
        if ti.static(self.reverse_in_lanes and reversing()):
            self.virtual_work(state, s)
        else:
            for_each_element(self, state, s, t, self.group.start, self.group.end)

    @ti.func
    def element(self, state: ti.template(), s: ti.template(), t: ti.template(), e, b):
        """Triangle e's membrane and aerodynamic corner forces, added at slot s; b: its block
        (`exec.loops.for_each_element`).  The law with one lane: every lane value a scalar."""
        if ti.static(self.ports.active):     # parts path: inputs through ports (exec.ports)
            self.ports.stop(state)
            self.ports.open(e)
        tri = self.model.cloth_indices[e]
        i, j, k = tri[0], tri[1], tri[2]
        x0 = corner_q(self.ports, state, s, e, b, 0, i)
        d1 = list3(corner_q(self.ports, state, s, e, b, 1, j) - x0)
        d2 = list3(corner_q(self.ports, state, s, e, b, 2, k) - x0)
        R = self.model.cloth_rest_inv[e]
        B = [[R[0, 0], R[0, 1]], [R[1, 0], R[1, 1]]]
        area = self.model.cloth_area[e]
        pr = table_row(self.ports, 0, self.model.cloth_params, e, b, self.model.cloth_param_row[e])
        P1, P2 = membrane_stress(self.group.material, d1, d2, B, [pr[c] for c in ti.static(range(self.group.param_count))])
        f = membrane_forces(P1, P2, B, area)
        f0 = ti.Vector(f[0])
        f1 = ti.Vector(f[1])
        f2 = ti.Vector(f[2])
        kd = pr[self.damping_column]
        drag = table_row(self.ports, 1, self.model.cloth_drag, e, b, self.model.cloth_aero_row[e])
        lift = table_row(self.ports, 2, self.model.cloth_lift, e, b, self.model.cloth_aero_row[e])
        fa = ti.Vector([0.0, 0.0, 0.0])
        # The forward kernel skips the damping where kd = 0, and the aerodynamics where drag and lift
        # are 0 (the defaults: together 30 % of a 64x64 cloth step, measured).  A derivative kernel
        # evaluates a term whenever its coefficients have a gradient (d/dkd, d/ddrag and d/dlift at 0
        # are not 0), and skips it like the forward kernel where they have none.
        # Bitwise | on the comparisons, not `or`: Taichi compiles `or` to a branch that stores into a
        # local twice, and its reverse pass keeps such a local on an AD stack (pushed and popped per
        # triangle; 615 stack allocations in the printed IR of a cloth step, none with `|`)
        damped = (kd != 0.0) | ti.static(differentiating() and has_grad(self.model.cloth_params))
        aero = (drag != 0.0) | (lift != 0.0)
        if damped | aero:
            v0 = corner_qd(self.ports, state, s, e, b, 0, i)
            w1 = list3(corner_qd(self.ports, state, s, e, b, 1, j) - v0)
            w2 = list3(corner_qd(self.ports, state, s, e, b, 2, k) - v0)
            if damped:
                D1, D2 = damping_stress(w1, w2, B, kd)
                fd = membrane_forces(D1, D2, B, area)
                f0 += ti.Vector(fd[0])
                f1 += ti.Vector(fd[1])
                f2 += ti.Vector(fd[2])
            if aero:
                wind = table_row(self.ports, 3, self.model.cloth_wind, e, b, self.model.cloth_aero_row[e])
                fa = ti.Vector(aerodynamics(d1, d2, area, relative_velocity(list3(v0), w1, w2, list3(wind)), drag, lift))
        if ti.static(differentiating() and (has_grad(self.model.cloth_drag) or has_grad(self.model.cloth_lift))):
            if aero == 0:           # drag = lift = 0 here
                fa = self.aerodynamics_at_zero(state, s, e, i, j, k, area, drag, lift)
        corner_put(self.ports, state, s, e, b, 0, i, f0 + fa)
        corner_put(self.ports, state, s, e, b, 1, j, f1 + fa)
        corner_put(self.ports, state, s, e, b, 2, k, f2 + fa)

    @ti.func
    def element_lanes(self, state: ti.template(), s: ti.template(), t: ti.template(), base, end: ti.template()):
        """`element` of the forward_lanes triangles base, base + 1, ... (below end) at once, on one thread, in
        forward kernels (`exec.loops.for_each_element`): the law with a lane group, the material's stress by
        columns.  Lanes past the last triangle repeat it with their forces multiplied by 0."""
        arow, idx, B, area, p, kd, drag, lift = self.triangle_lanes(base, end, self.forward_lanes)
        out = self.lane_forces
        x0 = out.corner(state.particle_q, s, idx, 0)
        d1 = lanes.sub(out.corner(state.particle_q, s, idx, 1), x0)
        d2 = lanes.sub(out.corner(state.particle_q, s, idx, 2), x0)
        P1, P2 = membrane_stress(self.group.material, d1, d2, B, p)
        store_corners(out, membrane_forces(P1, P2, B, area), False)
        damped = lanes.any_nonzero(kd)
        aero = lanes.any_nonzero(drag) | lanes.any_nonzero(lift)
        if damped | aero:
            v0 = out.corner(state.particle_qd, s, idx, 0)
            w1 = lanes.sub(out.corner(state.particle_qd, s, idx, 1), v0)
            w2 = lanes.sub(out.corner(state.particle_qd, s, idx, 2), v0)
            if damped:
                D1, D2 = damping_stress(w1, w2, B, kd)
                store_corners(out, membrane_forces(D1, D2, B, area), True)
            if aero:
                wind = self.wind_lanes(arow, self.forward_lanes)
                fa = aerodynamics(d1, d2, area, relative_velocity(v0, w1, w2, wind), drag, lift)
                store_corners(out, [fa, fa, fa], True)
        out.add(state, s, idx)

    @ti.func
    def virtual_work(self, state: ti.template(), s: ti.template()):
        """The loop that stands for the membrane and aerodynamic forces in the reverse kernel (`apply_forces`),
        as `ClothBendingForces.virtual_work` does for bending: W = sum over triangles and corners k of
        lambda_k . f_k, lambda = particle_f.grad[s] read as a constant, LANES triangles at a time, positions
        and velocities through `reverse_ports` (on threads where `LaneGroupPorts.parallel`): the law with a lane
        group, its forces' work taken by `membrane_work`, plus (lambda_0 + lambda_1 + lambda_2) . f_aero."""
        start = ti.static(self.group.start)
        end = ti.static(self.group.end)
        ports = self.reverse_ports
        ti.loop_config(serialize=not ports.parallel)
        for g in range((end - start + LANES - 1) // LANES):
            ti.stop_grad(state.particle_q)       # the state's adjoints go through the ports
            ti.stop_grad(state.particle_qd)
            base = start + g * LANES
            self.work.grad[g] = 1.0              # W's adjoint (see ClothBendingForces.virtual_work)
            ports.open(g)
            arow, idx, B, area, p, kd, drag, lift = self.triangle_lanes(base, end, LANES)
            x = [lanes.add3(lanes.corner(state.particle_q, s, idx, k, LANES), ports.corner(ports.qport, g, k))
                 for k in ti.static(range(3))]
            d1 = lanes.sub(x[1], x[0])
            d2 = lanes.sub(x[2], x[0])
            adj = [lanes.corner(state.particle_f.grad, s, idx, k, LANES) for k in ti.static(range(3))]
            m1 = lanes.sub(adj[1], adj[0])
            m2 = lanes.sub(adj[2], adj[0])
            P1, P2 = membrane_stress(self.group.material, d1, d2, B, p)
            self.work[g] += membrane_work(P1, P2, m1, m2, B, area).sum()
            # A derivative kernel evaluates a term whose coefficients have gradients even where they are 0
            # (see `element`); where they are 0 on every lane, the derivatives in everything but them are 0, and
            # the state (without its ports) and the wind are read as constants (`aerodynamics_at_zero`)
            damp_grad = ti.static(has_grad(self.model.cloth_params))
            aero_grad = ti.static(has_grad(self.model.cloth_drag) or has_grad(self.model.cloth_lift))
            damped = lanes.any_nonzero(kd)
            aero = lanes.any_nonzero(drag) | lanes.any_nonzero(lift)
            adj_sum = lanes.add3(lanes.add3(adj[0], adj[1]), adj[2])
            if damped | aero:
                v = [lanes.add3(lanes.corner(state.particle_qd, s, idx, k, LANES), ports.corner(ports.qdport, g, k))
                     for k in ti.static(range(3))]
                self.velocity_work(g, arow, B, area, kd, drag, lift, m1, m2, adj_sum, d1, d2, v,
                                   damped | ti.static(damp_grad), aero | ti.static(aero_grad))
            elif ti.static(damp_grad or aero_grad):
                ti.stop_grad(self.model.cloth_wind)
                x0 = lanes.corner(state.particle_q, s, idx, 0, LANES)
                self.velocity_work(g, arow, B, area, kd, drag, lift, m1, m2, adj_sum,
                                   lanes.sub(lanes.corner(state.particle_q, s, idx, 1, LANES), x0),
                                   lanes.sub(lanes.corner(state.particle_q, s, idx, 2, LANES), x0),
                                   [lanes.corner(state.particle_qd, s, idx, k, LANES) for k in ti.static(range(3))],
                                   ti.static(damp_grad), ti.static(aero_grad))

    @ti.func
    def velocity_work(self, g, arow, B, area, kd, drag, lift, m1, m2, adj_sum, d1, d2, v, damped, aero):
        """Add the virtual work of the damping (where `damped`) and aerodynamic (where `aero`) forces of
        the LANES triangles of lane group g (arow: their aerodynamics rows) to W's entry g (`virtual_work`; v: their
        corner velocities, three lane triples; m1, m2, adj_sum: the force adjoints' differences and sum)."""
        w1 = lanes.sub(v[1], v[0])
        w2 = lanes.sub(v[2], v[0])
        if damped:
            D1, D2 = damping_stress(w1, w2, B, kd)
            self.work[g] += membrane_work(D1, D2, m1, m2, B, area).sum()
        if aero:
            fa = aerodynamics(d1, d2, area, relative_velocity(v[0], w1, w2, self.wind_lanes(arow, LANES)), drag, lift)
            self.work[g] += lanes.dot(fa, adj_sum).sum()

    @ti.func
    def triangle_lanes(self, base, end, n: ti.template()):
        """The n triangles from base below end: their aerodynamics rows, the (3, n) particle indices, B = Dm^-1
        (2x2 nested lists of lane values), the rest areas times 1 on live lanes and 0 on lanes past the last
        triangle (which repeat it), the material parameters (a list of lane values), the membrane damping, the
        drag and the lift."""
        e, live = lanes.element_indices(base, end, n)
        idx = ti.Matrix([[self.model.cloth_indices[e[l]][k] for l in ti.static(range(n))] for k in ti.static(range(3))])
        B = [[ti.Vector([self.model.cloth_rest_inv[e[l]][r, c] for l in ti.static(range(n))]) for c in ti.static(range(2))]
             for r in ti.static(range(2))]
        area = ti.Vector([self.model.cloth_area[e[l]] for l in ti.static(range(n))]) * live
        row = ti.Vector([self.model.cloth_param_row[e[l]] for l in ti.static(range(n))])
        p = [ti.Vector([self.model.cloth_params[row[l], c] for l in ti.static(range(n))])
             for c in ti.static(range(self.group.param_count))]
        kd = ti.Vector([self.model.cloth_params[row[l], self.damping_column] for l in ti.static(range(n))])
        arow = ti.Vector([self.model.cloth_aero_row[e[l]] for l in ti.static(range(n))])
        drag = ti.Vector([self.model.cloth_drag[arow[l]] for l in ti.static(range(n))])
        lift = ti.Vector([self.model.cloth_lift[arow[l]] for l in ti.static(range(n))])
        return arow, idx, B, area, p, kd, drag, lift

    @ti.func
    def wind_lanes(self, arow, n: ti.template()):
        """The wind of n triangles with aerodynamics rows arow, a lane triple."""
        return [ti.Vector([self.model.cloth_wind[arow[l]][c] for l in ti.static(range(n))]) for c in ti.static(range(3))]

    @ti.func
    def aerodynamics_at_zero(self, state: ti.template(), s: ti.template(), e, i, j, k, area, drag, lift):
        """`aerodynamics` of triangle e where drag = lift = 0, for a derivative kernel that needs d/d(drag)
        and d/d(lift) there (not 0).  Its value is 0, and so is its derivative in every other input
        (each term is a multiple of drag or lift), so the positions, velocities and wind are read
        without a gradient path: Taichi then carries adjoints only to drag and lift, not back through
        the normal, the angle of attack and the reads (cloth32 with every gradient: 100 of the
        backward's ~400 us per step went there)."""
        x0, v0 = stopped_state(state, s, i)
        x1, v1 = stopped_state(state, s, j)
        x2, v2 = stopped_state(state, s, k)
        ti.stop_grad(self.model.cloth_wind)
        wind = row_value(self.model.cloth_wind, self.model.cloth_aero_row[e])
        return ti.Vector(aerodynamics(list3(x1 - x0), list3(x2 - x0), area, list3((v0 + v1 + v2) / 3.0 - wind), drag, lift))
