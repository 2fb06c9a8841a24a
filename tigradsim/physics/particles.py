"""Particle physics terms: damped springs, per-step external forces, and the
semi-implicit Euler integrator.

Integrator, per particle with mass m (m = 0: fixed particle):
    v1 = v0 + (f / m + g [m > 0]) dt ;  x1 = x0 + v1 dt
"""

import taichi as ti

from ..exec.loops import NO_PORTS, corner_put, corner_q, corner_qd, element_path, for_each_element, make_ports, wrap_terms
from ..core.model import StepTerm

# Floor under |x_i - x_j| in spring directions: norm() at 0 has a NaN gradient.
LENGTH_EPS = 1e-12


def spring_terms(model) -> list:
    """The force terms of the model's springs, in order: `SpringForces` alone (serial or parallel
    scatter), or with the parts path's port and sum loops around it (`tigradsim.exec.parts`)."""
    path = element_path(model.spring_count)
    ports = make_ports(path, model, model.spring_indices.to_numpy())
    return wrap_terms(ports, [SpringForces(model, path, ports)])


@ti.data_oriented
class SpringForces(StepTerm):
    """Damped springs f = (ke (l - l0) + kd dl/dt) along the spring, equal and opposite.

    path: `exec.loops.element_path` ("serial", "parallel", or "parts" with `ports`); None: serial or
    parallel as `runtime.serial_scatter` says.  Per-spring coefficients are read at the loop index,
    so the parts path needs no parameter ports."""

    def __init__(self, model, path=None, ports=None):
        super().__init__(model)
        self.path = path or ("serial" if self.serial else "parallel")
        self.serial = self.path == "serial"
        self.ports = NO_PORTS if ports is None else ports

    @property
    def element_range(self):
        """[start, end) of the springs this term loops over (`parts.merge_part_loops`)."""
        return 0, self.model.spring_count

    @ti.func
    def apply_forces(self, state: ti.template(), s: ti.template(), t: ti.template()):
        for_each_element(self, state, s, t, 0, self.model.spring_count)

    @ti.func
    def element(self, state: ti.template(), s: ti.template(), t: ti.template(), k, b):
        """Spring k's force on its two particles, added at slot s; b: its block (`exec.loops.for_each_element`)."""
        if ti.static(self.ports.active):
            self.ports.stop(state)
            self.ports.open(k)
        i = self.model.spring_indices[k][0]
        j = self.model.spring_indices[k][1]
        xij = corner_q(self.ports, state, s, k, b, 0, i) - corner_q(self.ports, state, s, k, b, 1, j)
        vij = corner_qd(self.ports, state, s, k, b, 0, i) - corner_qd(self.ports, state, s, k, b, 1, j)
        length = ti.sqrt(xij.dot(xij) + LENGTH_EPS)
        direction = xij / length
        stretch = length - self.model.spring_rest_length[k]
        rate = direction.dot(vij)
        fs = direction * (self.model.spring_stiffness[k] * stretch + self.model.spring_damping[k] * rate)
        corner_put(self.ports, state, s, k, b, 0, i, -fs)
        corner_put(self.ports, state, s, k, b, 1, j, fs)


@ti.data_oriented
class ExternalParticleForce(StepTerm):
    """Adds a per-step force field `force[t, i]` [N] (known impulses, controls)."""

    def __init__(self, model, force_field):
        super().__init__(model)
        self.force = force_field

    @ti.func
    def apply_forces(self, state: ti.template(), s: ti.template(), t: ti.template()):
        ti.loop_config(serialize=self.serial)
        for i in range(self.model.particle_count):
            state.particle_f[s, i] += self.force[t, i]


@ti.data_oriented
class ParticleIntegrator(StepTerm):
    """Semi-implicit Euler for particles; fixed particles (mass 0) do not move."""

    @ti.func
    def integrate(self, state: ti.template(), s: ti.template(), t: ti.template(), dt: ti.template()):
        ti.loop_config(serialize=self.serial)
        for i in range(self.model.particle_count):
            mass = self.model.particle_mass[i]
            free = ti.select(mass > 0.0, 1.0, 0.0)
            inv_mass = free / ti.max(mass, 1e-30)
            v1 = state.particle_qd[s, i] + (state.particle_f[s, i] * inv_mass + self.model.gravity[None] * free) * dt
            state.particle_qd[s + 1, i] = v1
            state.particle_q[s + 1, i] = state.particle_q[s, i] + v1 * dt
