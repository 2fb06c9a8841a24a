"""Cloth: rest-state forces of every shell material, atan2 bending against finite
differences of its energy, gradients of a rollout w.r.t. every cloth parameter
(nearly flat and strongly bent cloth), pinning, settling, checkpointing, errors."""
import numpy as np
import pytest
import taichi as ti

import tigradsim as tgs
from tigradsim.physics.cloth import Cloths, bending_energy, dihedral_angles, interior_edges, rest_frames
from tigradsim.core.registry import MaterialNotFoundError, ShellMaterial, register_material, unregister_material
from atomic_order import ON_GPU

NO_MEMBRANE = dict(material="stvk_membrane", params={"mu": 0.0, "lam": 0.0})
# The lanes are cloth's one-thread CPU path; on a GPU (TIGRADSIM_ARCH, benchmarks/gpu_check.sh) cloth runs
# the parallel path, whose gradients the other tests check
cpu_lanes = pytest.mark.skipif(ON_GPU, reason="the lanes are the one-thread CPU path")


def curved_grid(nx=4, ny=3, cell=0.1, bend=2.0):
    """A grid rolled around the z axis (non-planar rest shape, dihedral angles ~ cell * bend)."""
    v, f = tgs.meshes.cloth_grid(nx, ny, cell=cell, plane="xz")
    u = v[:, 0] - v[:, 0].mean()
    r = 1.0 / bend
    v = np.stack([r * np.sin(u / r), 0.5 + r * (np.cos(u / r) - 1.0), v[:, 2]], 1)
    return v, f


def forces(model):
    """Particle forces at step 0 (one step, gravity included only through the scene's builder)."""
    sim = tgs.Simulator(model, dt=1e-4, steps=1)
    sim.run()
    return sim.state.particle_f.to_numpy()[0]


def fd_gradient(fn, x, h=1e-6):
    g = np.zeros_like(x)
    for i in range(x.shape[0]):
        for k in range(3):
            d = np.zeros_like(x)
            d[i, k] = h
            g[i, k] = (fn(x + d) - fn(x - d)) / (2 * h)
    return g


# -- rest state ---------------------------------------------------------------------
@pytest.mark.parametrize("name", tgs.list_materials("shell"))
def test_membrane_zero_force_at_rest_and_under_rotation(f64, name):
    v, f = curved_grid()
    b = tgs.SceneBuilder(gravity=(0, 0, 0))
    b.add_cloth(v, f, material=name, damping=0.5, density=0.3)
    model = b.finalize(requires_grad=False)
    assert np.abs(forces(model)).max() < 1e-9
    c, s = np.cos(0.7), np.sin(0.7)
    rot = np.array([[c, 0, s], [0, 1, 0], [-s, 0, c]]) @ np.array([[1, 0, 0], [0, c, -s], [0, s, c]])
    model.particle_q0.from_numpy(v @ rot.T + [0.3, -0.2, 1.0])
    assert np.abs(forces(model)).max() < 1e-9
    model.particle_q0.from_numpy(v * 1.05)          # stretched: non-zero restoring force
    assert np.abs(forces(model)).max() > 1e-3


def test_bending_zero_at_rest(f64):
    v, f = tgs.meshes.cloth_grid(4, 4, cell=0.1, plane="xz")
    b = tgs.SceneBuilder(gravity=(0, 0, 0))
    b.add_cloth(v, f, bending_stiffness=3.0, bending_damping=0.1, **NO_MEMBRANE)
    model = b.finalize(requires_grad=False)
    assert np.all(model.cloth_bend_rest_angle.to_numpy() == 0.0)
    assert np.abs(forces(model)).max() < 1e-12
    v, f = curved_grid(bend=8.0)
    b = tgs.SceneBuilder(gravity=(0, 0, 0))
    b.add_cloth(v, f, bending_stiffness=3.0, **NO_MEMBRANE)
    model = b.finalize(requires_grad=False)
    assert np.abs(model.cloth_bend_rest_angle.to_numpy()).max() > 0.5
    assert np.abs(forces(model)).max() < 1e-9


@pytest.mark.parametrize("case", ["near_flat", "large"])
def test_bending_force_is_minus_energy_gradient(f64, case):
    rng = np.random.default_rng(3)
    v, f = tgs.meshes.cloth_grid(3, 3, cell=0.1, plane="xz")
    b = tgs.SceneBuilder(gravity=(0, 0, 0))
    k = 0.7
    b.add_cloth(v, f, bending_stiffness=k, **NO_MEMBRANE)
    model = b.finalize(requires_grad=False)
    if case == "near_flat":
        x = v + rng.normal(size=v.shape) * 1e-4
    else:
        x, _ = curved_grid(3, 3, bend=12.0)          # fold angles ~ 1.2 rad
        x = x + rng.normal(size=v.shape) * 0.02
    model.particle_q0.from_numpy(x)
    quads = interior_edges(f)
    theta = dihedral_angles(x, quads)
    assert (np.abs(theta).max() < 1e-2) if case == "near_flat" else (np.abs(theta).max() > 1.0)
    g = fd_gradient(lambda y: bending_energy(y, quads, k, 0.0), x)
    got = forces(model)
    assert np.abs(got + g).max() <= 1e-6 * max(np.abs(g).max(), 1e-3), (got, -g)


def test_dihedral_sign_and_rest_angle(f64):
    # two triangles folded up by 90 degrees along the x axis
    v = np.array([[0, 0, 0], [1, 0, 0], [0.5, 0, -1], [0.5, 1, 0.0]])
    quads = interior_edges([[0, 1, 2], [1, 0, 3]])
    assert quads.shape == (1, 4)
    assert abs(abs(dihedral_angles(v, quads)[0]) - np.pi / 2) < 1e-12


# -- mesh and mass ----------------------------------------------------------------------
def test_mass_from_density_and_obj_input(f64, tmp_path):
    v, f = tgs.meshes.cloth_grid(3, 2, cell=(0.2, 0.1), origin=(0, 1, 0), plane="xy")
    path = tmp_path / "cloth.obj"
    tgs.meshes.save_obj(path, v, f)
    v2, f2 = tgs.meshes.load_obj(path)
    b = tgs.SceneBuilder()
    b.add_particle((5, 5, 5), mass=2.0)
    h = b.add_cloth(v2, f2, density=0.5)
    model = b.finalize()
    mass = model.particle_mass.to_numpy()
    assert h.particle_start == 1 and h.particle_count == len(v) and h.triangle_count == len(f)
    assert h.faces.min() == 1 and h.faces.max() == len(v)
    np.testing.assert_allclose(mass[1:].sum(), 0.5 * 0.6 * 0.2, rtol=1e-12)
    _, area = rest_frames(v, f)
    expect = np.zeros(len(v))
    np.add.at(expect, f.reshape(-1), np.repeat(0.5 * area / 3, 3))
    np.testing.assert_allclose(mass[1:], expect, rtol=1e-12)


def test_user_registered_shell_material(f64, cloth_lanes):
    """A user's shell material with `stress` only (no `stress_columns`) runs one triangle at a time beside a
    built-in one in lanes (on a CPU), in one cloth set."""
    from tigradsim.physics.cloth import ClothMembraneForces

    @register_material("test_cloth_spring_shell")
    class Quad(ShellMaterial):
        params = {"k": 10.0}

        @ti.func
        def stress(self, F, p):   # Psi = k/4 |F^T F - I|^2
            return p[0] * F @ (F.transpose() @ F - ti.Matrix.identity(float, 2))

    try:
        v, f = curved_grid()
        b = tgs.SceneBuilder(gravity=(0, 0, 0))
        b.add_cloth(v, f, material="test_cloth_spring_shell", params={"k": 50.0})
        b.add_cloth(v + [0, 0, 1], f, material="membrane")
        model = b.finalize(requires_grad=False)
        groups = {t.group.material.name: t.in_lanes for t in model.force_terms if isinstance(t, ClothMembraneForces)}
        assert groups == {"test_cloth_spring_shell": False, "membrane": not ON_GPU}
        assert np.abs(forces(model)).max() < 1e-9
        model.particle_q0.from_numpy(np.concatenate([v * 1.1, v + [0, 0, 1]]))
        fr = forces(model)
        assert np.abs(fr[:len(v)]).max() > 1e-2 and np.abs(fr[len(v):]).max() < 1e-9
    finally:
        unregister_material("test_cloth_spring_shell")


# -- gradients ----------------------------------------------------------------------------
def grad_scene(kind):
    """'flat': an unpinned flat cloth falling nearly flat (acos fails here); 'bent': a rolled
    cloth pinned at two corners with an anchor spring, wind, large dihedral angles."""
    rng = np.random.default_rng(7)
    b = tgs.SceneBuilder()
    if kind == "flat":
        v, f = tgs.meshes.cloth_grid(3, 3, cell=0.1, origin=(0, 1, 0), plane="xz")
        vel = np.array([0.3, -0.4, 0.1]) + rng.normal(size=v.shape) * 1e-3
        h = b.add_cloth(v, f, params={"mu": 40.0, "lam": 60.0, "damping": 0.05}, density=1.0,
                        bending_stiffness=0.05, bending_damping=0.002, drag=2.0, lift=1.5, velocity=vel)
    else:
        v, f = curved_grid(3, 3, bend=6.0)
        x0 = v.copy()
        vel = rng.normal(size=v.shape) * 0.3
        h = b.add_cloth(v, f, material="stvk_membrane", params={"mu": 30.0, "lam": 20.0, "damping": 0.05},
                        density=1.0, bending_stiffness=0.05, bending_damping=0.002, drag=2.0, lift=1.5,
                        wind=(1.0, 0.2, -0.5), velocity=vel, pinned=[0, 3])
        b.component(Cloths).attach(b, h, [15], stiffness=20.0, damping=0.1, positions=x0[[15]] + [0, 0.05, 0])
    model = b.finalize()
    if kind == "bent":   # start away from the rest shape so every term acts
        model.particle_q0.from_numpy(x0 + rng.normal(size=x0.shape) * 0.01 * (model.particle_mass.to_numpy() > 0)[:, None])
    return model, h


def rollout(model, steps=40, checkpoint_every=None):
    sim = tgs.Simulator(model, dt=2e-3, steps=steps, checkpoint_every=checkpoint_every)
    rec = tgs.ParticleRecorder(sim, every=10)
    sim.run()
    rng = np.random.default_rng(0)
    loss = tgs.MSELoss(rec.values, rec.numpy() + rng.normal(size=(rec.frames, rec.count, 3)) * 0.01)

    def run():
        sim.run()
        loss()

    return sim, run, loss.value


CLOTH_PARAMS = ["cloth_params", "cloth_bending_stiffness", "cloth_bending_damping", "cloth_drag", "cloth_lift",
                "particle_mass", "particle_qd0", "particle_q0"]


@pytest.mark.parametrize("kind", ["flat", "bent"])
def test_rollout_gradients(f64, kind):
    model, h = grad_scene(kind)
    sim, run, loss = rollout(model)
    q = sim.state.particle_q.to_numpy()
    theta = dihedral_angles(q[-1], h.bend_edges)
    if kind == "flat":
        assert np.abs(theta).max() < 0.05          # nearly flat the whole time
    else:
        assert np.abs(theta).max() > 0.4
    names = CLOTH_PARAMS + (["cloth_wind", "cloth_anchor_position", "cloth_anchor_stiffness",
                             "cloth_anchor_damping", "cloth_bend_rest_angle"] if kind == "bent" else [])
    free = (model.particle_mass.to_numpy() > 0).astype(float)
    for name in names:
        fld = getattr(model, name)
        masks = [free] if name in ("particle_mass", "particle_q0", "particle_qd0") else None
        # bent, eps 1e-6: the (mu, lam, damping) table mixes scales 30 and 0.05, and a step of
        # 1e-5 * RMS in damping leaves an O(eps^2) truncation error of ~3e-5 (measured).
        report = tgs.check_gradient(run, loss, [fld], n_dirs=2, eps=1e-6 if kind == "bent" else 1e-5,
                                    rtol=1e-5, masks=masks)
        assert report.ok, f"{kind} / {name}:\n{report}"
        assert max(abs(a) for a in report.analytic) > 1e-10, f"{kind} / {name}: gradient is zero"


@pytest.mark.parametrize("scatter", ["serial", pytest.param("lanes", marks=cpu_lanes), "parts"])
def test_gradients_at_zero_damping_drag_and_lift(f64, scatter, monkeypatch):
    """The forward kernel skips a triangle's velocity terms where its damping, drag and lift are all
    0, and a bending edge's where its damping is 0 (the defaults); their derivatives there are not 0
    and must match finite differences.  The derivative kernel evaluates the aerodynamics there with
    the positions, velocities and wind read without a gradient path (`aerodynamics_at_zero`): the
    wind's gradient is exactly 0, and the initial velocity's still matches finite differences.  On
    the serial path, one element at a time and in lanes (`virtual_work`), and on the parts path (ports)."""
    if scatter == "lanes":
        from tigradsim.physics import cloth
        monkeypatch.setattr(cloth, "CLOTH_LANES_MIN_TRIANGLES", 0)
        scatter = "serial"
    rng = np.random.default_rng(11)
    v, f = tgs.meshes.cloth_grid(3, 3, cell=0.1, origin=(0, 1, 0), plane="xz")
    b = tgs.SceneBuilder()
    b.add_cloth(v, f, params={"mu": 40.0, "lam": 60.0}, density=1.0, bending_stiffness=0.05,
                velocity=np.array([0.3, -0.4, 0.1]) + rng.normal(size=v.shape) * 0.05)
    tgs.runtime.set_scatter(scatter)
    try:
        model = b.finalize()
    finally:
        tgs.runtime.set_scatter("auto")
    assert not np.any(model.cloth_drag.to_numpy()) and not np.any(model.cloth_lift.to_numpy())
    sim, run, loss = rollout(model)
    damping_col = np.zeros((1, model.cloth_params.shape[1]))
    damping_col[0, -1] = 1
    # eps: the loss curves strongly in the damping (truncation error 3e-5 at a step of 1e-5,
    # 3e-7 at 1e-6, measured) and hardly in drag and lift (round-off dominates below 1e-3).
    assert not np.any(model.cloth_bending_damping.to_numpy())
    for fld, masks, eps in ((model.cloth_params, [damping_col], 1e-6), (model.cloth_drag, None, 1e-3),
                            (model.cloth_lift, None, 1e-3), (model.cloth_bending_damping, None, 1e-6),
                            (model.particle_qd0, None, 1e-6)):
        report = tgs.check_gradient(run, loss, [fld], n_dirs=2, eps=eps, rtol=1e-5, masks=masks)
        assert report.ok, str(report)
        assert max(abs(a) for a in report.analytic) > 1e-10, "zero gradient"
    with tgs.tape(loss):
        run()
    assert not np.any(model.cloth_wind.grad.to_numpy()), "d/d(wind) at drag = lift = 0 is exactly 0"
    assert np.any(model.cloth_drag.grad.to_numpy())


@pytest.fixture
def cloth_lanes(monkeypatch):
    """Cloth of any size goes LANES elements at a time on one thread (the library does from
    CLOTH_LANES_MIN_TRIANGLES triangles, to keep small cloths' compile time down)."""
    from tigradsim.physics import cloth
    monkeypatch.setattr(cloth, "CLOTH_LANES_MIN_TRIANGLES", 0)


def _lanes_scene(scatter, requires_grad=True):
    """Two cloths, two material groups (membrane: 10 triangles, a part-filled last lane group whose lanes run
    into the next group; stvk_membrane: 12), per-triangle membrane parameters, damping, drag and lift that are
    0 on whole lane groups and mixed on others, wind, per-edge bending parameters with damping 0 on most
    edges, and an edge count that is not a multiple of LANES."""
    rng = np.random.default_rng(21)
    va, fa = curved_grid(5, 1, bend=6.0)
    vb, fb = curved_grid(3, 2, bend=4.0)
    ta, ne = len(fa), len(interior_edges(fa))
    damping, drag, lift = np.zeros((3, ta))
    damping[[1, 8, 9]] = [0.05, 0.03, 0.04]
    drag[[2, 9]] = [1.5, 2.0]
    lift[[5]] = 1.0
    bending_damping = np.zeros(ne)
    bending_damping[[1, ne - 1]] = [0.003, 0.002]
    b = tgs.SceneBuilder(gravity=(0, -2.0, 0))
    b.add_cloth(va, fa, density=1.0, params={"mu": 30.0 * (1.0 + rng.random(ta)), "lam": 60.0}, damping=damping,
                drag=drag, lift=lift, wind=(0.5, 0.1, -0.3), bending_stiffness=0.05 * (1.0 + rng.random(ne)),
                bending_damping=bending_damping, velocity=rng.normal(size=va.shape) * 0.3, share_params=False)
    b.add_cloth(vb + [0.0, 0.0, 0.5], fb, material="stvk_membrane", params={"mu": 20.0, "lam": 30.0}, damping=0.02,
                density=1.0, bending_stiffness=0.03, velocity=rng.normal(size=vb.shape) * 0.3)
    tgs.runtime.set_scatter(scatter)
    try:
        model = b.finalize(requires_grad=requires_grad)
    finally:
        tgs.runtime.set_scatter("auto")
    x0 = np.concatenate([va, vb + [0.0, 0.0, 0.5]])
    model.particle_q0.from_numpy(x0 + rng.normal(size=x0.shape) * 0.01)     # away from the rest shape
    return model, model.cloth_edge_count


def assert_same_forces(model, reference):
    """The forces of `model` equal those of `reference` (the same scene on another path) to rounding."""
    f, f_ref = forces(model), forces(reference)
    assert np.abs(f_ref).max() > 1e-3
    np.testing.assert_allclose(f, f_ref, rtol=0, atol=1e-13 * np.abs(f_ref).max())


@pytest.mark.slow
@cpu_lanes
def test_cloth_in_lanes_equals_one_element_at_a_time_and_finite_differences(f64, cloth_lanes):
    """On the serial path the membrane and bending run LANES elements at a time: forward kernels through
    `element_lanes`, reverse kernels through `virtual_work` and the ports of `LaneGroupPorts`; the parts path
    runs one element at a time (`element`, and Taichi's reverse of it).  The forces, a rollout and the Tape
    gradients of every parameter agree to rounding, and the serial path's Tape gradients match central
    differences."""
    from tigradsim.physics.cloth import ClothBendingForces, ClothMembraneForces, LaneGroupPorts
    from tigradsim.exec.lanes import LANES
    lanes_model, ne = _lanes_scene("serial")
    one_model, _ = _lanes_scene("parts")
    assert ne % LANES != 0 and ne > 2 * LANES
    terms = [t for t in lanes_model.force_terms if isinstance(t, (ClothBendingForces, ClothMembraneForces))]
    assert len(terms) == 3 and all(t.lane_forces is not None and t.reverse_in_lanes for t in terms)
    # every parameter has a gradient here: the reverse in lanes stays on one thread
    assert all(not t.parallel_reverse for t in terms)
    assert sum(isinstance(t, LaneGroupPorts) for t in lanes_model.force_terms) == 3
    assert all(t.lane_forces is None and not t.reverse_in_lanes for t in one_model.force_terms
               if isinstance(t, (ClothBendingForces, ClothMembraneForces)))
    assert_same_forces(lanes_model, one_model)
    runs = {}
    for name, model in (("lanes", lanes_model), ("one", one_model)):
        sim, run, loss = rollout(model, steps=20)
        runs[name] = (sim.state.particle_q.to_numpy(), run, loss, model)
    np.testing.assert_allclose(runs["lanes"][0], runs["one"][0], rtol=0, atol=1e-12)
    grads = {}
    for key, (_, run, loss, model) in runs.items():
        with tgs.tape(loss):
            run()
        grads[key] = {n: p.grad.to_numpy().copy() for n, p in model.parameters().items()}
    for n, g in grads["one"].items():
        if n != "gravity":
            assert np.abs(g).max() > 1e-8, n
        np.testing.assert_allclose(grads["lanes"][n], g, rtol=0, atol=1e-11 * np.abs(g).max(), err_msg=n)
    _, run, loss, model = runs["lanes"]
    for name in ("cloth_params", "cloth_drag", "cloth_lift", "cloth_wind", "cloth_bending_stiffness",
                 "cloth_bending_damping", "cloth_bend_rest_angle", "particle_qd0", "particle_q0"):
        report = tgs.check_gradient(run, loss, [getattr(model, name)], n_dirs=2, eps=1e-6, rtol=1e-5)
        assert report.ok, f"{name}:\n{report}"
        assert max(abs(a) for a in report.analytic) > 1e-10, f"{name}: gradient is zero"


@pytest.mark.slow
@cpu_lanes
def test_cloth_reverse_on_threads_same_bits_and_finite_differences(f64, cloth_lanes, monkeypatch):
    """Where only the state has gradients, the membrane's and bending's reverse in lanes run on threads
    (`LaneGroupPorts`: each lane group's own ports, then a per-particle gather), and the backward pass
    launches each step's reverse on its own (`Simulator.reverse_per_step`) while the forward stays fused.
    The gradients are the same bits run to run and checkpointed, equal the reverse on one thread
    (`scatter="serial"`, the fused kernel's reverse) and the one element at a time path's to rounding, and
    match central differences."""
    from taichi.lang import impl
    from tigradsim.physics import cloth
    if impl.current_cfg().cpu_max_num_threads < 2:
        pytest.skip("one CPU thread: the reverse has no threads to run on")
    named = {"particle_q0", "particle_qd0"}
    monkeypatch.setattr(cloth, "CLOTH_REVERSE_THREADS_MIN_TRIANGLES", 0)
    threaded, _ = _lanes_scene("auto", named)          # "auto": cloth this small runs in lanes, not on parts
    terms = [t for t in threaded.force_terms if isinstance(t, (cloth.ClothBendingForces, cloth.ClothMembraneForces))]
    assert len(terms) == 3 and all(t.in_lanes and t.parallel_reverse and t.reverse_ports.parallel for t in terms)
    one_thread, _ = _lanes_scene("serial", named)      # scatter="serial": one thread, the reverse too
    assert not any(getattr(t, "parallel_reverse", False) for t in one_thread.force_terms)
    one_at_a_time, _ = _lanes_scene("parts", named)
    grads = {}
    for key, model, ck in (("threads", threaded, None), ("threads, again", threaded, None),
                           ("threads, checkpointed", threaded, 7), ("one thread", one_thread, None),
                           ("one at a time", one_at_a_time, None)):
        sim, run, loss = rollout(model, steps=20, checkpoint_every=ck)
        if key == "threads":
            assert sim.fused and sim.reverse_per_step
        with tgs.tape(loss):
            run()
        grads[key] = {n: getattr(model, n).grad.to_numpy().copy() for n in sorted(named)}
        if key == "threads":
            report = tgs.check_gradient(run, loss, [model.particle_q0, model.particle_qd0], n_dirs=2, eps=1e-6,
                                        rtol=1e-5)
            assert report.ok, str(report)
            assert max(abs(a) for a in report.analytic) > 1e-10, "zero gradient"
    for n in named:
        g = grads["threads"][n]
        assert np.abs(g).max() > 1e-8, n
        np.testing.assert_array_equal(grads["threads, again"][n], g, err_msg=f"{n}: threads, run to run")
        np.testing.assert_array_equal(grads["threads, checkpointed"][n], g, err_msg=f"{n}: checkpointed")
        # the one-thread run differentiates the fused kernel (its own compiled code): rounding apart
        for other in ("one thread", "one at a time"):
            np.testing.assert_allclose(grads[other][n], g, rtol=0, atol=1e-11 * np.abs(g).max(), err_msg=f"{n}: {other}")


@pytest.mark.slow
@cpu_lanes
def test_cloth_wide_forward_lanes_equal_one_at_a_time(f64, cloth_lanes, monkeypatch):
    """A large cloth's forward lanes are one SIMD register wide (`cloth.forward_lanes`: 8 in float32 on AVX2;
    forced to 8 here, in float64): its forces and a rollout equal the one element at a time path's to
    rounding, and the Tape gradients (the reverse in lanes of LANES) match them and central differences."""
    from tigradsim.exec.simd import lane_count
    from tigradsim.physics import cloth
    from tigradsim.exec.lanes import LANES
    assert cloth.forward_lanes(cloth.CLOTH_WIDE_LANES_MIN_TRIANGLES - 1) == LANES
    assert cloth.forward_lanes(cloth.CLOTH_WIDE_LANES_MIN_TRIANGLES) == max(LANES, lane_count(8))
    monkeypatch.setattr(cloth, "forward_lanes", lambda triangle_count: 8)
    wide, _ = _lanes_scene("serial")
    one, _ = _lanes_scene("parts")
    terms = [t for t in wide.force_terms if isinstance(t, (cloth.ClothBendingForces, cloth.ClothMembraneForces))]
    assert len(terms) == 3 and all(t.in_lanes and t.forward_lanes == 8 for t in terms)
    assert_same_forces(wide, one)
    grads = {}
    for key, model in (("wide", wide), ("one", one)):
        sim, run, loss = rollout(model, steps=20)
        with tgs.tape(loss):
            run()
        grads[key] = (sim.state.particle_q.to_numpy(), model.particle_qd0.grad.to_numpy().copy())
        if key == "wide":
            report = tgs.check_gradient(run, loss, [model.particle_qd0, model.cloth_bending_stiffness], n_dirs=2,
                                        eps=1e-6, rtol=1e-5)
            assert report.ok, str(report)
    np.testing.assert_allclose(grads["wide"][0], grads["one"][0], rtol=0, atol=1e-12)
    g = grads["one"][1]
    assert np.abs(g).max() > 1e-8
    np.testing.assert_allclose(grads["wide"][1], g, rtol=0, atol=1e-11 * np.abs(g).max())


@pytest.mark.slow
@cpu_lanes
def test_lanes_reverse_same_with_steps_launched_one_by_one(f64, cloth_lanes):
    """The membrane's and bending's reverse in lanes (`virtual_work`) run inside whichever step kernel the
    Simulator launches: the fused one (a run of steps per launch) or one launch per step (`fuse_steps=False`,
    and any model with a loop on threads).  Both give the same gradients (the bent scene: every cloth term
    acts), checkpointed too."""
    for kind in ("bent",):
        grads = {}
        for fuse, ck in ((None, None), (False, None), (False, 7)):
            model, _ = grad_scene(kind)
            assert any(getattr(t, "reverse_in_lanes", False) for t in model.force_terms)
            sim = tgs.Simulator(model, dt=2e-3, steps=30, fuse_steps=fuse, checkpoint_every=ck)
            assert sim.fused == (fuse is None)
            rec = tgs.ParticleRecorder(sim, every=10)
            sim.run()
            noise = np.random.default_rng(1).normal(size=(rec.frames, rec.count, 3)) * 0.01
            loss = tgs.MSELoss(rec.values, rec.numpy() + noise)
            with tgs.tape(loss.value):
                sim.run()
                loss()
            grads[fuse, ck] = {n: p.grad.to_numpy().copy() for n, p in model.parameters().items()}
        for key in ((False, None), (False, 7)):
            for name, g in grads[None, None].items():
                np.testing.assert_allclose(grads[key][name], g, rtol=1e-11, atol=1e-14, err_msg=f"{kind} {key}: {name}")
        assert np.abs(grads[None, None]["cloth_bending_stiffness"]).max() > 0


def test_atan2_lanes_is_exact_in_f64(f64):
    """`lanes.atan2_lanes` takes the scalar atan2 of every lane (Taichi's atan2 of a whole Vector is accurate to
    ~3e-8 rad in float64): on a Vector built from values and on one that is the result of arithmetic."""
    from tigradsim.exec import lanes
    rng = np.random.default_rng(3)
    y, x = rng.normal(size=(2, 4)) * [[1.0], [1e-3]]
    yf, xf = ti.field(float, shape=4), ti.field(float, shape=4)
    yf.from_numpy(y)
    xf.from_numpy(x)
    out = ti.field(float, shape=(2, 4))

    @ti.kernel
    def angles():
        yv = ti.Vector([yf[l] for l in ti.static(range(4))])
        xv = ti.Vector([xf[l] for l in ti.static(range(4))])
        built = lanes.atan2_lanes(yv, xv)
        computed = lanes.atan2_lanes(lanes.dot([yv, xv, xv], [xv * 0.0 + 1.0, xv * 0.0, xv * 0.0]),
                                     lanes.dot([yv, xv, yv], [yv * 0.0, xv * 0.0 + 1.0, yv * 0.0]))
        for l in ti.static(range(4)):
            out[0, l] = built[l]
            out[1, l] = computed[l]

    angles()
    for row in out.to_numpy():
        np.testing.assert_allclose(row, np.arctan2(y, x), rtol=0, atol=4e-16)


def test_per_triangle_parameters_gradient(f64):
    v, f = tgs.meshes.cloth_grid(2, 2, cell=0.1, origin=(0, 1, 0), plane="xy")
    b = tgs.SceneBuilder()
    b.add_cloth(v, f, params={"mu": np.linspace(30, 50, len(f)), "lam": 60.0}, damping=0.02, density=1.0,
                bending_stiffness=0.05, drag=np.linspace(1, 2, len(f)), lift=1.0, pinned=[6, 8],
                velocity=(0.2, 0.1, 0.5), share_params=False)
    model = b.finalize()
    assert model.cloth_params.shape[0] == len(f) and model.cloth_drag.shape == (len(f),)
    assert model.cloth_bending_stiffness.shape == (model.cloth_edge_count,)
    sim, run, loss = rollout(model)
    for name in ["cloth_params", "cloth_drag", "cloth_bending_stiffness"]:
        report = tgs.check_gradient(run, loss, [getattr(model, name)], n_dirs=2, eps=1e-5, rtol=1e-5)
        assert report.ok, f"{name}:\n{report}"


def test_checkpointed_and_parallel_gradients_equal_full(f64):
    """Checkpointing, and parallel (atomic) instead of serial scatter, give the same gradients."""
    grads = {}
    for ck, scatter in ((None, "serial"), (7, "serial"), (None, "parallel")):
        tgs.runtime.set_scatter(scatter)
        model, _ = grad_scene("bent")
        tgs.runtime.set_scatter("auto")
        sim, run, loss = rollout(model, checkpoint_every=ck)
        with ti.ad.Tape(loss):
            run()
        grads[ck, scatter] = {n: p.grad.to_numpy().copy() for n, p in model.parameters().items()}
        grads[ck, scatter]["loss"] = loss[None]
    for key in ((7, "serial"), (None, "parallel")):
        for name, g in grads[None, "serial"].items():
            np.testing.assert_allclose(grads[key][name], g, rtol=1e-11, atol=1e-14, err_msg=f"{key}: {name}")


# -- behaviour ------------------------------------------------------------------------------
def test_hanging_cloth_pinned_and_settles(f64):
    v, f = tgs.meshes.cloth_grid(6, 6, cell=0.05, origin=(0, 1, 0), plane="xy")
    b = tgs.SceneBuilder()
    b.add_ground()
    h = b.add_cloth(v, f, params={"mu": 40.0, "lam": 60.0}, damping=0.2, density=0.5, bending_stiffness=1e-3,
                    bending_damping=1e-4, drag=0.5, pinned=[42, 48])
    model = b.finalize(requires_grad=False)
    sim = tgs.Simulator(model, dt=1e-3, steps=1500)
    sim.run()
    q = sim.state.particle_q.to_numpy()
    qd = sim.state.particle_qd.to_numpy()
    assert np.all(np.isfinite(q))
    pins = h.pinned
    assert np.array_equal(q[:, pins], np.broadcast_to(v[[42, 48]], q[:, pins].shape))
    mass = model.particle_mass.to_numpy()
    ke = 0.5 * np.einsum("i,tij->t", mass, qd ** 2)
    assert ke.max() > 1e-4
    assert ke[-100:].max() < 0.05 * ke.max()
    assert q[-1, :, 1].min() > 0.5            # hangs, does not fall


# -- errors --------------------------------------------------------------------------------
def test_errors(f64):
    v, f = tgs.meshes.cloth_grid(2, 2, cell=0.1, plane="xz")
    b = tgs.SceneBuilder()
    with pytest.raises(IndexError, match=r"triangles\[1\] = \[1, 2, 99\]: index 99 is out of range for 9 vertices"):
        b.add_cloth(v, [[0, 1, 4], [1, 2, 99]])
    with pytest.raises(ValueError, match=r"triangles\[0\] = \[0, 1, 2\]: degenerate \(zero-area\)"):
        b.add_cloth(v, [[0, 1, 2], [0, 1, 4]])
    with pytest.raises(ValueError, match=r"triangles\[1\].*degenerate"):
        b.add_cloth(v, [[0, 1, 4], [3, 3, 4]])
    with pytest.raises(MaterialNotFoundError, match=r"material='silk': unknown material.*membrane"):
        b.add_cloth(v, f, material="silk")
    with pytest.raises(ValueError, match="kind 'tet'"):
        b.add_cloth(v, f, material="neo_hookean")
    with pytest.raises(ValueError, match=r"membrane.*unknown parameter"):
        b.add_cloth(v, f, params={"young": 1.0})
    with pytest.raises(IndexError, match=r"pinned\[1\] = 9: out of range for 9 vertices"):
        b.add_cloth(v, f, pinned=[0, 9])
    with pytest.raises(ValueError, match="density: must be > 0"):
        b.add_cloth(v, f, density=0.0)
    with pytest.raises(ValueError, match="bending_stiffness: must be >= 0"):
        b.add_cloth(v, f, bending_stiffness=-1.0)
    with pytest.raises(ValueError, match="drag: must be >= 0"):
        b.add_cloth(v, f, drag=-1.0)
    with pytest.raises(ValueError, match=r"vertices: vertex 2 belongs to no triangle, so its mass would be 0"):
        b.add_cloth(v, [[0, 1, 4], [0, 4, 3]])
    # an edge shared by three triangles: reported for bending, fine without bending
    fan = np.array([[0, 1, 3], [1, 0, 4], [0, 1, 5]])
    x = np.array([[0, 0, 0], [1, 0, 0], [0, 0, 0.1], [0.5, 1, 0], [0.5, -1, 0], [0.5, 0, 1]], dtype=float)
    with pytest.raises(ValueError, match=r"non-manifold edge.*\(0, 1\) in triangles \[0, 1, 2\]"):
        b.add_cloth(x, fan, bending_stiffness=1.0, pinned=[2])
    b.add_cloth(x, fan, pinned=[2])
    assert b.particle_count == 6           # nothing was added by the failed calls


def test_validation_mode_passes(f64):
    """Taichi's debug mode + Tape(validation=True) find no read-then-overwrite in the cloth terms."""
    tgs.init(precision="f64", debug=True)
    model, _ = grad_scene("bent")
    sim, run, loss = rollout(model, steps=12, checkpoint_every=5)
    with ti.ad.Tape(loss, validation=True):
        run()
    assert np.any(model.cloth_params.grad.to_numpy() != 0)
    assert np.any(model.cloth_bending_stiffness.grad.to_numpy() != 0)
