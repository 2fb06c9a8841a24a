"""The three loops of an MLS-MPM step (Hu et al. 2018), as integrators of the Simulator's step:

  1. `ParticleStress`, then `ParticleToGrid` (one each per MPM object; P2G over its particles, 27 nodes each):
     quadratic B-spline weights w_ijk of the 27 nodes around x_p, and into grid slot s
         m_i  += w m_p,      (m v)_i += w (m_p v_p + A_p (x_i - x_p)),
         A_p = m_p C_p - dt V_p (4 / dx^2) tau_p,   tau_p = P(F_p) F_p^T + viscous(F_p, C_p)
     (APIC's affine momentum and MLS-MPM's stress in one matrix; tau the Kirchhoff stress [Pa]).
  2. `GridUpdate` (over the grid cells; those without mass get v_i = 0 and are otherwise skipped):
     v_i = (m v)_i / m_i + dt g, then the walls and the ground
     (`boundary_velocity`: no inflow, Coulomb friction mu on the tangential velocity).
  3. `GridGather` over the particles (27 nodes each), then `GridToParticle` (one each per object):
     v_p = sum w v_i, C_p = (4 / dx^2) sum w v_i (x_i - x_p)^T,
     x_p += dt v_p, F_p = project((I + dt C_p) F_p), the material's return mapping.

Why the grid is stored per step slot (`mpm_grid_mv[s, c]`, `mpm_grid_v[s, c]`, accumulator state kinds:
zeroed at each segment start, never checkpointed): Taichi's reverse mode re-reads in the backward pass
whatever the forward pass read, so a grid reused by every step would hold the last step's values when
step k is reversed.  With one grid per slot nothing read is overwritten, the fused multi-step kernel and
checkpointing work unchanged, and the memory is (checkpoint_every + 1) grids (`mpm.grid_nbytes`).
The other choice, one grid recomputed per step in the backward pass (DiffTaichi's), needs its own
backward driver and gives up the fused kernel; it saves memory only where segments are long.

Rules of the one-loop terms (model.py): each term runs exactly one loop, inner loops are `ti.static`.
"""
import taichi as ti

from ..core.linalg import matmul, matvec
from ..core.model import StepTerm
from ..core.runtime import serial_scatter

# Cells of padding outside the user's domain on every side: a particle's 3x3x3 stencil reaches 1.5 cells
# beyond it, and particles may drift a little past a wall (its velocity is projected at the nodes).
PAD = 3


@ti.func
def stencil(x, origin, inv_dx, res_hi):
    """Base node (ivec3, clamped to the grid) and fractional position fx (vec3, in cells) of x [m]."""
    local = (x - origin) * inv_dx
    base = ti.cast(ti.floor(local - 0.5), ti.i32)
    base = ti.max(ti.min(base, res_hi), 0)        # a NaN or escaped particle must not write out of bounds
    return base, local - ti.cast(base, float)


@ti.func
def bspline_weights(fx):
    """The quadratic B-spline weights at fractional position fx (vec3, in cells), once per particle: a tuple w of
    three vec3, w[o][d] the weight of node offset o (0, 1, 2) along axis d; node base + (i, j, k) of the 27
    (compile-time offsets) weighs w[i][0] w[j][1] w[k][2]."""
    return 0.5 * (1.5 - fx) ** 2, 0.75 - (fx - 1.0) ** 2, 0.5 * (fx - 0.5) ** 2


@ti.func
def wall(v, n, mu):
    """Velocity v after a wall of inward unit normal n: no inflow, and the tangential velocity reduced by
    mu |v_n| (Coulomb), to zero at most.  sqrt(|v_t|^2 + eps) keeps the derivative finite at v_t = 0."""
    vn = v.dot(n)
    vt = v - vn * n
    speed = ti.sqrt(vt.dot(vt) + 1e-20)
    # select, not `if`: a local stored under a branch goes on an AD stack in the reverse kernel
    return ti.select(vn < 0, vt * ti.max(0.0, 1.0 + mu * vn / speed), v)


class _MPMTerm(StepTerm):
    # Gathers (stress, grid update, G2P's last loop) write only their own entries: parallel and deterministic
    # on any thread count.
    # Being parallel, they also keep an MPM step out of the fused multi-step kernel (`Simulator.fused`): its
    # reverse nests the step loop, and Taichi then keeps the many locals of a 27-node stencil on AD stacks
    # (compiling the reverse of a fused MPM step took minutes; one launch per step costs ~50 us, little
    # against an MPM step).  P2G, a scatter, follows `runtime.serial_scatter` like every element loop.
    parallel = True

    def __init__(self, model):
        super().__init__(model)
        if self.parallel:
            self.serial = False
        g = model.mpm_grid
        self.res = g.res                            # (3,) cells per axis (nodes: the same, 0..res-1)
        self.dx, self.inv_dx = g.dx, 1.0 / g.dx
        self.origin = tuple(float(o) for o in g.origin)
        self.res_hi = tuple(int(r) - 3 for r in g.res)

    @ti.func
    def cell(self, node):
        return (node[0] * self.res[1] + node[1]) * self.res[2] + node[2]

    @ti.func
    def particle_stencil(self, x):
        """Of a particle at x [m]: the flat index of its 3 x 3 x 3 stencil's first node, its offset fx from
        that node [cells] and its quadratic B-spline weights (`bspline_weights`), computed once per particle.
        Called inside the particle loop (the origin vector built there: a launch is loops only, reverse mode)."""
        origin = ti.Vector(self.origin, dt=float)
        base, fx = stencil(x, origin, self.inv_dx, ti.Vector(self.res_hi))
        return self.cell(base), fx, bspline_weights(fx)


@ti.data_oriented
class ParticleStress(_MPMTerm):
    """The affine matrix of each particle of one object (rows [start, stop), material row `row`), into
    `mpm_affine[s, q]`: A = m_p C_p - dt V_p (4 / dx^2) tau_p (kg/s).  A loop of its own: it runs in
    parallel (the SVD is most of a step's per-particle work) where P2G, a scatter, may be serial."""
    parallel = True

    def __init__(self, model, obj, material):
        super().__init__(model)
        self.start, self.stop, self.row = obj.particle_start, obj.particle_start + obj.particle_count, obj.row
        self.material = material

    def check_parameter(self, name, arr):
        """`model.set`'s check of this object's row of `mpm_params` (the material's rules) and density."""
        import numpy as np
        row = np.asarray(arr, dtype=np.float64)
        if name == "mpm_params":
            mat = type(self.material)
            try:
                mat.check_values({k: row[self.row, c] for c, k in enumerate(mat.params)})
            except ValueError as exc:
                raise ValueError(f"mpm_params values: row {self.row} (material {mat.name!r}): {exc}") from None
        elif name == "mpm_density" and not row[self.row] > 0:
            raise ValueError(f"mpm_density values: row {self.row} must be > 0 (kg/m^3), got {row[self.row]:g}")

    def stability_limits(self):
        """The pre-flight's row of this object (`tigradsim.core.stability`): an elastic (or pressure) wave must
        not cross a grid cell in one step, dt <= dx / c with c = sqrt(M / rho) (M the material's P-wave
        modulus at rest, `wave_modulus`; rho the density): the mode omega = 2 c / dx, whose explicit limit
        2 / omega is that CFL bound (safe: half of it)."""
        import math
        from ..core.stability import StabilityRow, explicit_dt_limit
        mat = type(self.material)
        row = self.model.get("mpm_params")[self.row]
        rho = float(self.model.get("mpm_density")[self.row])
        name = f"{type(self).__name__}[object {self.row}]"
        try:
            modulus = float(mat.wave_modulus({k: float(row[c]) for c, k in enumerate(mat.params)}))
        except (KeyError, NotImplementedError):
            return [StabilityRow(name, "-", 0.0, 0.0, math.inf,
                                 f"material {mat.name!r} declares no wave_modulus: not checked")]
        c = math.sqrt(max(modulus, 0.0) / rho)
        omega = 2.0 * c / self.dx
        return [StabilityRow(name, f"MPM object {self.row}", omega, 0.0, float(explicit_dt_limit(omega, 0.0)),
                             f"material {mat.name!r}, wave modulus {modulus:.4g} Pa, density {rho:.4g} kg/m^3: "
                             f"wave speed {c:.4g} m/s across cells of {self.dx:.4g} m")]

    @ti.func
    def params(self):
        p = ti.Vector.zero(float, ti.static(max(1, self.material.param_count)))
        for k in ti.static(range(self.material.param_count)):
            p[k] = self.model.mpm_params[self.row, k]
        return p

    @ti.func
    def integrate(self, state: ti.template(), s: ti.template(), t: ti.template(), dt: ti.template()):
        ti.loop_config(serialize=self.serial)
        for q in range(self.start, self.stop):
            C, F = state.mpm_C[s, q], state.mpm_F[s, q]
            p = self.params()
            vol = self.model.mpm_particle_volume[self.row]
            tau = matmul(self.material.stress(F, p), F.transpose())
            if ti.static(self.material.has_viscosity):
                tau += self.material.viscous(F, C, p)
            state.mpm_affine[s, q] = (-dt * vol * 4.0 * self.inv_dx * self.inv_dx) * tau \
                + (self.model.mpm_density[self.row] * vol) * C


@ti.data_oriented
class ParticleToGrid(ParticleStress):
    """P2G of one object: one loop over its particles, each adding w (m_p v_p + A_p (x_i - x_p), w m_p) to the 27
    nodes of its stencil, the weights computed once per particle (`bspline_weights`).  The stencil is unrolled
    (`ti.static`): Taichi 1.7.4's reverse of a runtime inner loop gets the adjoints of the particle's locals
    wrong (measured: 5-14 % off the finite differences); an unrolled one is straight-line code, whose reverse
    keeps every adjoint in registers and adds each particle's gradient once."""
    stability_limits = None      # the object's ParticleStress reports its row, once
    parallel = False

    @ti.func
    def integrate(self, state: ti.template(), s: ti.template(), t: ti.template(), dt: ti.template()):
        ti.loop_config(serialize=self.serial)
        for q in range(self.start, self.stop):
            first, fx, w = self.particle_stencil(state.mpm_x[s, q])
            mass = self.model.mpm_density[self.row] * self.model.mpm_particle_volume[self.row]
            A = state.mpm_affine[s, q]
            # m_p v_p + A_p (x_i - x_p) = (m_p v_p - A_p fx dx) + A_p offset dx: the first part once per particle
            momentum = mass * state.mpm_v[s, q] - matvec(A, fx * self.dx)
            for i, j, k in ti.static(ti.ndrange(3, 3, 3)):
                weight = w[i][0] * w[j][1] * w[k][2]
                mv = weight * (momentum + self.dx * (i * A[:, 0] + j * A[:, 1] + k * A[:, 2]))
                state.mpm_grid_mv[s, first + (i * self.res[1] + j) * self.res[2] + k] += \
                    ti.Vector([mv[0], mv[1], mv[2], weight * mass])


@ti.data_oriented
class GridUpdate(_MPMTerm):
    """Grid velocities of slot s from its momenta, gravity, the domain walls and the ground, then the colliders
    and rigid bodies (`obstacles`, a `mpm_boundary.GridObstacles` or None), whose reaction goes to body_f."""

    def __init__(self, model, obstacles=None):
        super().__init__(model)
        self.ground = bool(model.mpm_grid.ground)
        self.cell_count = int(model.mpm_grid.cell_count)
        self.obstacles = obstacles
        self.has_obstacles = obstacles is not None and obstacles.count > 0
        if self.has_obstacles and obstacles.body_count:
            self.serial = serial_scatter()           # the reaction is a scatter into body_f

    @ti.func
    def boundary_velocity(self, v, node):
        mu = self.model.mpm_mu[None]
        out = v
        for d in ti.static(range(3)):
            n = ti.Vector([1.0 if e == d else 0.0 for e in ti.static(range(3))])
            out = ti.select(node[d] <= PAD, wall(out, n, mu), out)                   # at or beyond the lower face
            out = ti.select(node[d] >= self.res[d] - PAD, wall(out, -n, mu), out)    # at or beyond the upper face
        if ti.static(self.ground):
            out = ti.select(self.origin[1] + node[1] * self.dx <= 0.0, wall(out, ti.Vector([0.0, 1.0, 0.0]), mu), out)
        return out

    @ti.func
    def integrate(self, state: ti.template(), s: ti.template(), t: ti.template(), dt: ti.template()):
        ti.loop_config(serialize=self.serial)
        for c in range(self.cell_count):
            mv = state.mpm_grid_mv[s, c]
            # Most nodes of the padded grid are empty (grid 32, one 0.24 m box: ~2 % hold mass): an empty node's
            # velocity is 0, and nothing it would compute (walls, obstacles: a body's reaction needs mass > 0)
            # reaches the result, nor its derivative.  So the branch skips them; the nodes with mass compute
            # exactly what they did without it (the same expressions, mass clamped as before).
            if mv[3] > 0:
                mass = ti.max(mv[3], 1e-30)
                v = ti.Vector([mv[0], mv[1], mv[2]]) / mass + dt * self.model.gravity[None]
                node = ti.Vector([c // (self.res[1] * self.res[2]), (c // self.res[2]) % self.res[1],
                                  c % self.res[2]])
                v = self.boundary_velocity(v, node)
                if ti.static(self.has_obstacles):
                    x = ti.Vector(self.origin, dt=float) + self.dx * ti.cast(node, float)
                    v = self.obstacles.apply(state, s, v, mv[3], x, dt)
                state.mpm_grid_v[s, c] = v
            else:
                state.mpm_grid_v[s, c] = ti.Vector.zero(float, 3)


@ti.data_oriented
class GridGather(ParticleStress):
    """G2P's sums of one object, one loop over its particles (the stencil unrolled, for the reason
    `ParticleToGrid` gives): mpm_gather_v[s, q] = sum w v_i,
    mpm_gather_C[s, q] = (4 / dx^2) sum w v_i (x_i - x_p)^T."""
    stability_limits = None      # the object's ParticleStress reports its row, once
    # a gather forward, but its reverse scatters into mpm_grid_v's adjoint: it follows `runtime.serial_scatter`
    # like P2G (measured, 32,768 particles, 2 cores: forward+backward 103 ms/step serial, 116 ms parallel)
    parallel = False

    @ti.func
    def integrate(self, state: ti.template(), s: ti.template(), t: ti.template(), dt: ti.template()):
        ti.loop_config(serialize=self.serial)
        for q in range(self.start, self.stop):
            first, fx, w = self.particle_stencil(state.mpm_x[s, q])
            v = ti.Vector.zero(float, 3)
            vo = ti.Matrix.zero(float, 3, 3)          # sum w v_i offset^T (offset in cells)
            for i, j, k in ti.static(ti.ndrange(3, 3, 3)):
                wv = w[i][0] * w[j][1] * w[k][2] * state.mpm_grid_v[s, first + (i * self.res[1] + j) * self.res[2] + k]
                v += wv
                vo += wv.outer_product(ti.Vector([i, j, k], dt=float))
            # x_i - x_p = (offset - fx) dx: the fx part once per particle
            state.mpm_gather_v[s, q] += v
            state.mpm_gather_C[s, q] += (4.0 * self.inv_dx) * (vo - v.outer_product(fx))


@ti.data_oriented
class GridToParticle(ParticleStress):
    """The end of G2P for one object: v_p, C_p from the gathered sums, x_p += dt v_p, and the (projected)
    deformation gradient F_p = project((I + dt C_p) F_p)."""
    stability_limits = None      # the object's ParticleStress reports its row, once

    @ti.func
    def integrate(self, state: ti.template(), s: ti.template(), t: ti.template(), dt: ti.template()):
        ti.loop_config(serialize=self.serial)
        for q in range(self.start, self.stop):
            v1, B, F = state.mpm_gather_v[s, q], state.mpm_gather_C[s, q], state.mpm_F[s, q]
            F1 = F + dt * matmul(B, F)
            plastic = state.mpm_plastic[s, q]
            if ti.static(self.material.has_return_mapping):
                F1, plastic = self.material.project(F1, plastic, self.params())
            x1 = state.mpm_x[s, q] + dt * v1
            # a particle whose stencil left the grid (a blow-up: walls keep sound motion inside) is made
            # non-finite, so that the Simulator's finite check names the step (a stencil clamped to the grid
            # would otherwise hold it, still and finite, wherever it flew to)
            local = (x1 - ti.Vector(self.origin, dt=float)) * self.inv_dx - 0.5
            out = (local < 0.0).any() | (local >= ti.Vector(self.res_hi, dt=float) + 1.0).any()
            state.mpm_x[s + 1, q] = ti.select(out, ti.math.inf, x1)
            state.mpm_v[s + 1, q] = v1
            state.mpm_C[s + 1, q] = B
            state.mpm_F[s + 1, q] = F1
            state.mpm_plastic[s + 1, q] = plastic
