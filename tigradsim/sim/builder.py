"""SceneBuilder: collect particles, springs, ground and other elements in numpy,
validate them, then `finalize()` them into a Model of Taichi fields.

Other kinds of element (tet meshes, cloth, rigid bodies) are added by
components: objects with `finalize(builder, model)` that create their fields
and terms on the model.  `add_component` is how modules extend the builder.
"""
from __future__ import annotations

import numpy as np
import taichi as ti

from ..physics.contact import DEFAULT_LAW, ContactLaw, ParticleGroundContact
from ..core.errors import as_array, check_indices, check_positive
from ..core.placement import Placed, check_ground_clearance
from ..core.model import ForceTerm, Model, StateKind, check_force_term
from ..exec.parts import merge_part_loops
from ..physics.cloth import Cloths
from ..physics.colliders import Colliders
from ..physics.fem import TetMeshes
from ..physics.rigid import RigidBodies
from ..physics.mpm import MPMBodies
from ..physics.particles import ParticleIntegrator, spring_terms
from ..core.runtime import ensure_init, np_float




class SceneBuilder:
    """Builds a scene.  Units: metres, kilograms, seconds.

    Args:
        gravity: (3,) acceleration [m/s^2] applied to every free particle/body.
    """

    def __init__(self, gravity=(0.0, -9.8, 0.0)):
        self.gravity = as_array("gravity", gravity, shape=(3,))
        self._q, self._qd, self._mass, self._radius = [], [], [], []
        self._springs, self._spring_ke, self._spring_kd, self._spring_rest = [], [], [], []
        self.ground = None
        self.ground_law = DEFAULT_LAW
        self.components = []
        self._force_term_factories = []
        self._finalized = False
        # {"bodies": (B,) int, "particles": (N,) int} or None: contact groups (`physics.body_contact`; objects
        # touch within a group, group -1 touches all; `tgs.batched` makes each copy a group); None: one group
        self.contact_groups = None
        # how contact between points and rigid bodies finds its pairs (`physics.broadphase`): "grid" (candidate
        # pairs from a uniform grid each step, near-linear cost) or "flat" (every (point, body) pair tested); and
        # the pair list's capacity per contact point or particle (None: broadphase.DEFAULT_PAIRS_PER_TOUCHER)
        self.broad_phase = "grid"
        self.broad_phase_capacity = None

    # -- particles ----------------------------------------------------------
    @property
    def particle_count(self) -> int:
        return int(sum(len(q) for q in self._q))

    def add_particle(self, position, velocity=(0.0, 0.0, 0.0), mass=1.0, radius=0.01, fixed=False) -> int:
        """Add one particle; returns its index.  `fixed=True` pins it (mass is then 0)."""
        return self.add_particles([position], [velocity], mass, radius, fixed)

    def add_particles(self, positions, velocities=None, masses=1.0, radius=0.01, fixed=False) -> int:
        """Add N particles; returns the index of the first.

        Args:
            positions: (N, 3) [m].  velocities: (N, 3) [m/s] or None for zero.
            masses: scalar or (N,) [kg], > 0.  radius: scalar or (N,) contact radius [m], >= 0.
            fixed: bool or (N,) bool; fixed particles have mass 0 and never move.
        """
        q = as_array("positions", positions, shape=(None, 3))
        n = len(q)
        qd = np.zeros((n, 3)) if velocities is None else as_array("velocities", velocities, shape=(n, 3))
        fixed = np.broadcast_to(np.asarray(fixed, dtype=bool), (n,))
        mass = as_array("masses", masses, shape=(n,))
        check_positive("masses", mass[~fixed]) if np.any(~fixed) else None
        mass = np.where(fixed, 0.0, mass)
        rad = check_positive("radius", as_array("radius", radius, shape=(n,)), allow_zero=True)
        start = self.particle_count
        self._q.append(q), self._qd.append(qd), self._mass.append(mass), self._radius.append(rad)
        return start

    # -- springs ------------------------------------------------------------
    def add_spring(self, i: int, j: int, stiffness: float, damping: float = 0.0, rest_length=None) -> int:
        """Add a spring between particles i and j; returns its index."""
        return self.add_springs([[i, j]], stiffness, damping, None if rest_length is None else [rest_length])

    def add_springs(self, indices, stiffness, damping=0.0, rest_length=None) -> int:
        """Add springs; returns the index of the first.

        Args:
            indices: (S, 2) particle indices.  stiffness: scalar or (S,) [N/m], >= 0.
            damping: scalar or (S,) [N s/m], >= 0.
            rest_length: (S,) [m], > 0, or None for the current distance.
        """
        idx = check_indices("spring indices", indices, self.particle_count, 2)
        same = np.nonzero(idx[:, 0] == idx[:, 1])[0]
        if len(same):
            raise ValueError(f"spring indices[{same[0]}] = {idx[same[0]].tolist()}: a spring needs two different particles")
        s = len(idx)
        ke = check_positive("stiffness", as_array("stiffness", stiffness, shape=(s,)), allow_zero=True)
        kd = check_positive("damping", as_array("damping", damping, shape=(s,)), allow_zero=True)
        if rest_length is None:
            q = np.concatenate(self._q)
            rest = np.linalg.norm(q[idx[:, 0]] - q[idx[:, 1]], axis=1)
            zero = np.nonzero(rest <= 0)[0]
            if len(zero):
                raise ValueError(f"spring indices[{zero[0]}] = {idx[zero[0]].tolist()}: the particles coincide, "
                                 "so the rest length would be 0; pass rest_length > 0")
        else:
            rest = check_positive("rest_length", as_array("rest_length", rest_length, shape=(s,)))
        start = sum(len(a) for a in self._springs)
        self._springs.append(idx), self._spring_ke.append(ke), self._spring_kd.append(kd), self._spring_rest.append(rest)
        return start

    # -- ground -------------------------------------------------------------
    def add_ground(self, ke=1e4, kd=10.0, kf=10.0, mu=0.5, damping="capped", friction="capped",
                   friction_velocity=None, damping_integration="explicit"):
        """Ground plane y = 0 with penalty stiffness ke [N/m], damping kd [N s/m],
        friction regularisation kf [N s/m] and Coulomb coefficient mu.

        damping: "capped" (default; continuous at touchdown) or "uncapped" (dflex / Warp: kd |v_n|
            from the first penetrating step; gradients disagree with finite differences across
            touchdowns).  friction: "capped" (default; min(kf, mu fn / |v_t|)) or "huber"
            (pseudo-Huber-smoothed Coulomb friction, smooth everywhere) with `friction_velocity`
            [m/s] > 0 (default 1e-3).  damping_integration: "explicit" (default) or "implicit" (kd and kf
            stepped by local backward Euler, k / (1 + dt k / m): unconditionally stable on light vertices; a rigid
            body's contact point takes its effective mass along the normal or the slip for m,
            `tigradsim.physics.body_effective_mass`).  Formulas: `tigradsim.physics.contact`.
            The law applies to every particle and to every rigid body that does not set its own.
        The ground is the plane collider y = 0 (`add_collider("plane")`) with fields of its own (ground_ke,
        ground_kd, ground_kf, ground_mu) and a fast path of its own (one comparison per point).
        """
        self.ground_law = ContactLaw(damping, friction, friction_velocity, damping_integration)
        self.ground = {name: float(check_positive(name, as_array(name, v, shape=()), allow_zero=True))
                       for name, v in dict(ke=ke, kd=kd, kf=kf, mu=mu).items()}

    # -- user force terms -------------------------------------------------------
    def add_force_term(self, factory) -> int:
        """Add a user's force term (`tgs.ForceTerm`; its docstring has the rules and an example).

        factory: a callable taking the Model and returning a ForceTerm built on it (the ForceTerm
            subclass itself, or e.g. `lambda model: QuadraticDrag(model, c=0.1)`); it is called in
            `finalize()`, after every built-in element, so the term can read any model field.
        Returns the term's index in `model.user_force_terms`.  Call before `finalize()`.
        """
        if self._finalized:
            raise RuntimeError("add_force_term: this builder was already finalized, and the Model it made would "
                               "not get the term; add force terms before finalize()")
        if isinstance(factory, ForceTerm):
            raise TypeError(f"factory: got a {type(factory).__name__} instance; pass a factory that builds it from "
                            "the Model at finalize (the class, or `lambda model: "
                            f"{type(factory).__name__}(model, ...)`)")
        if not callable(factory):
            raise TypeError(f"factory: expected a callable taking the Model and returning a tgs.ForceTerm, "
                            f"got {factory!r}")
        self._force_term_factories.append(factory)
        return len(self._force_term_factories) - 1

    # -- other elements (each lives in its own module as a component) ------------
    def add_soft_mesh(self, *args, **kwargs):
        """Add a tetrahedral FEM solid; see `tigradsim.physics.fem.TetMeshes.add`."""
        return self.component(TetMeshes).add(self, *args, **kwargs)

    def add_cloth(self, *args, **kwargs):
        """Add a cloth (triangle mesh shell); see `tigradsim.physics.cloth.Cloths.add`."""
        return self.component(Cloths).add(self, *args, **kwargs)

    def set_cloth_soft_contact(self, cloth=None, soft=None, **constants):
        """Constants of the contact between cloths and soft meshes (`tigradsim.physics.cloth_soft_contact`; it is
        on wherever a cloth and a soft mesh share a contact group, with `cloth_soft_contact.DEFAULT_PARAMS`).

        cloth: a ClothHandle (`add_cloth`) or None (every cloth); soft: a SoftMesh (`add_soft_mesh`) or None
            (every soft mesh).  constants: some of ke [N/m] > 0, kd [N s/m], kf [N s/m], mu >= 0.
        Later calls override earlier ones where they overlap.  The fitted fields are `cloth_soft_ke`, ... with one
        row per (cloth, soft mesh) pair, row = cloth.index x (soft mesh count) + soft.index.
        """
        from ..physics.cloth import ClothHandle
        from ..physics.cloth_soft_contact import check_cloth_soft_params
        from ..physics.fem import SoftMesh
        if cloth is not None and not isinstance(cloth, ClothHandle):
            raise TypeError(f"cloth: expected a ClothHandle from add_cloth or None (every cloth), got {cloth!r}")
        if soft is not None and not isinstance(soft, SoftMesh):
            raise TypeError(f"soft: expected a SoftMesh from add_soft_mesh or None (every soft mesh), got {soft!r}")
        constants = check_cloth_soft_params(constants)
        if not hasattr(self, "cloth_soft_params"):
            self.cloth_soft_params = {}
        key = (None if cloth is None else cloth.index, None if soft is None else soft.index)
        self.cloth_soft_params.setdefault(key, {}).update(constants)
        # re-insert so that this call's entry comes after the earlier ones it overrides
        self.cloth_soft_params[key] = self.cloth_soft_params.pop(key)

    def add_rigid_body(self, *args, **kwargs):
        """Add a rigid body; see `tigradsim.physics.rigid.RigidBodies.add`."""
        return self.component(RigidBodies).add(self, *args, **kwargs)

    def add_collider(self, kind, *args, **kwargs) -> int:
        """Add a static collider ("plane", "sphere", "box", "capsule" or "mesh", placed by a pose, with its own
        ke, kd, kf, mu and contact law) that every particle and rigid body touches; returns its index.  See
        `tigradsim.physics.colliders.Colliders.add` (ramps and walls: `tgs.quat_from_axis_angle`,
        `tgs.quat_from_normal`)."""
        return self.component(Colliders).add(self, kind, *args, **kwargs)

    def add_mpm_grid(self, *args, **kwargs):
        """Set the MPM domain and grid; see `tigradsim.physics.mpm.MPMBodies.set_grid`."""
        return self.component(MPMBodies).set_grid(self, *args, **kwargs)

    def add_mpm(self, *args, **kwargs):
        """Add MPM matter (a box, a closed mesh or particles); see `tigradsim.physics.mpm.MPMBodies.add`."""
        return self.component(MPMBodies).add(self, *args, **kwargs)

    # -- components -----------------------------------------------------------
    def add_component(self, component):
        """Register an element component (an object with `finalize(builder, model)`)."""
        if component not in self.components:
            self.components.append(component)
        return component

    def component(self, cls):
        """The builder's component of type `cls`, created on first use."""
        for c in self.components:
            if type(c) is cls:
                return c
        return self.add_component(cls())

    # -- where the objects start ---------------------------------------------
    def placed(self) -> list:
        """Every object's contact points at t = 0 (`tigradsim.core.placement.Placed`): the
        components' (rigid bodies, soft meshes, cloths), then each block of particles added
        directly ("particles i..j"); pinned particles, which never move, are left out."""
        q = np.concatenate(self._q) if self._q else np.zeros((0, 3))
        radius = np.concatenate(self._radius) if self._radius else np.zeros(0)
        free = np.concatenate(self._mass) > 0 if self._mass else np.zeros(0, dtype=bool)
        out, owned = [], np.zeros(len(q), dtype=bool)
        for comp in self.components:
            out += comp.placed(self) if hasattr(comp, "placed") else []
        for p in out:
            if p.particles is not None:
                owned[p.particles.start:p.particles.stop] = True
        start = 0
        for block in self._q:
            stop = start + len(block)
            if not owned[start:stop].any():
                out.append(Placed(f"particles {start}..{stop - 1}" if stop - start > 1 else f"particle {start}",
                                  None, particles=range(start, stop)))
            start = stop
        for p in out:
            if p.particles is not None:
                keep = np.arange(p.particles.start, p.particles.stop)
                keep = keep[free[keep]]
                p.points, p.radius = q[keep], radius[keep]
        return out

    # -- finalize -----------------------------------------------------------
    def finalize(self, requires_grad=True) -> Model:
        """Create the Model's Taichi fields.  Call after `tgs.init(...)`.

        requires_grad: True (every parameter field gets a gradient), False (none: a forward-only
        model), or the names of the parameters to differentiate, e.g. {"particle_qd0"} or
        ("tet_params", "particle_mass") (`model.parameters()` lists them).  Naming them is faster where
        a damping, drag or lift coefficient is 0 and not named: the backward pass then skips its term
        (exact: at 0 it moves nothing else), where otherwise it must compute d/d(coefficient).
        """
        placed = self.placed()
        if self.ground is not None:
            check_ground_clearance(placed)         # before any field or kernel
        ensure_init()
        for comp in self.components:
            if hasattr(comp, "prepare"):
                comp.prepare(self)
        model = Model(requires_grad)
        vec3 = ti.types.vector(3, float)  # made after init, so `float` is the chosen precision
        n = self.particle_count
        model.particle_count = n
        f = np_float()
        model.add_field("gravity", vec3, (), self.gravity.astype(f))
        # the running Simulator's dt [s] (`Model.use_dt`): contact laws with damping_integration="implicit" read it
        model.add_field("step_dt", float, (), 0.0, param=False)
        if n:
            model.add_field("particle_q0", vec3, (n,), np.concatenate(self._q))
            model.add_field("particle_qd0", vec3, (n,), np.concatenate(self._qd))
            model.add_field("particle_mass", float, (n,), np.concatenate(self._mass))
            model.add_field("particle_radius", float, (n,), np.concatenate(self._radius), param=False)
            model.state_kinds += [
                StateKind("particle_q", vec3, n, initial=model.particle_q0),
                StateKind("particle_qd", vec3, n, initial=model.particle_qd0),
                StateKind("particle_f", vec3, n, accumulator=True),
            ]
            model.integrators.append(ParticleIntegrator(model))
        s = sum(len(a) for a in self._springs)
        model.spring_count = s
        if s:
            model.add_field("spring_indices", ti.types.vector(2, ti.i32), (s,), np.concatenate(self._springs), param=False)
            model.add_field("spring_stiffness", float, (s,), np.concatenate(self._spring_ke))
            model.add_field("spring_damping", float, (s,), np.concatenate(self._spring_kd))
            model.add_field("spring_rest_length", float, (s,), np.concatenate(self._spring_rest))
            model.force_terms.extend(spring_terms(model))
        if self.ground is not None:
            model.has_ground = True
            for name, value in self.ground.items():
                model.add_field(f"ground_{name}", float, (), value)
            if n:
                model.force_terms.append(ParticleGroundContact(model, self.ground_law))
        # a component that reads others' fields (MPM's grid boundary: colliders, bodies) finalizes after them
        for comp in sorted(self.components, key=lambda c: bool(getattr(c, "finalize_last", False))):
            comp.finalize(self, model)
        model.force_terms = merge_part_loops(model, model.force_terms)
        model.user_force_terms = [check_force_term(factory(model), model) for factory in self._force_term_factories]
        model.force_terms += model.user_force_terms
        model.check_grad_params()
        model.placed = placed                      # where the objects start (VideoFit's view check)
        self._finalized = True
        return model
