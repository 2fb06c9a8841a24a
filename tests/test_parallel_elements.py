"""Element loops on every thread without atomic adds (tigradsim.exec.parts): the parts path gives the
serial path's forces and gradients (float64, to 1e-12), finite differences agree with its gradients,
checkpointed runs, models without gradients and Tape(validation=True) work on it, and its results are
the same bits run to run and for 1 or 2 threads; which path "auto" picks (tigradsim.exec.loops).  The
parts path's own mechanics: tests/test_scatter_parts.py."""
import numpy as np
import pytest
import taichi as ti

import tigradsim as tgs
from tigradsim import fem
from tigradsim.exec.loops import PARTS_MIN_ELEMENTS, element_path
from tigradsim.exec.parts import PartFill, PartGather, PartPorts


MATERIALS = ("neo_hookean", "neo_hookean")     # two meshes: a shared row and per-tet rows


def fem_scene():
    """A 3x2x1-cell box (two materials: two tet terms sharing one set of ports) thrown at the ground."""
    b = tgs.SceneBuilder()
    b.add_ground(ke=2e3, kd=5.0, kf=50.0, mu=0.4)
    rng = np.random.default_rng(3)
    for k, material in enumerate(MATERIALS):
        v, t = tgs.meshes.tet_box(3, 2, 1, size=(0.3, 0.2, 0.1), origin=(0.4 * k, 0.045, 0.0))
        vel = np.array([0.5, -1.2, 0.3 - k]) + rng.normal(size=(len(v), 3)) * 0.3
        b.add_soft_mesh((v, t), material=material, params={"mu": 5e3, "lam": 8e3}, density=6000.0, damping=2.0,
                        velocity=vel, radius=0.02, share_params=(k == 0))
    model = b.finalize()
    model.tet_activation.from_numpy(np.linspace(-0.05, 0.08, model.tet_count))
    return model, ["tet_params", "tet_activation", "particle_qd0", "particle_mass"]


def cloth_scene():
    """A 5x4 cloth with membrane, bending, drag, lift and wind, falling on the ground."""
    v, f = tgs.meshes.cloth_grid(5, 4, cell=0.1, origin=(0.0, 0.05, 0.0), plane="xz")
    v = v + np.random.default_rng(2).normal(size=v.shape) * 0.01
    b = tgs.SceneBuilder()
    b.add_ground(ke=1e3, kd=1.0, kf=1.0, mu=0.5)
    b.add_cloth(v, f, material="membrane", params={"mu": 20.0, "lam": 30.0, "damping": 1e-2}, density=5.0,
                bending_stiffness=1e-3, bending_damping=1e-5, drag=1.0, lift=0.5, wind=(0.3, 0.0, -0.2),
                velocity=(0.2, -0.8, 0.1), share_params=False)
    model = b.finalize()
    return model, ["cloth_params", "cloth_drag", "cloth_lift", "cloth_wind", "cloth_bending_stiffness",
                   "cloth_bending_damping", "cloth_bend_rest_angle", "particle_qd0"]


def spring_scene():
    """A random spring network (varied stiffness, damping and rest lengths) bouncing on the ground."""
    rng = np.random.default_rng(5)
    x = rng.uniform(0.0, 0.3, size=(12, 3)) + np.array([0.0, 0.05, 0.0])
    pairs = np.array([(i, j) for i in range(12) for j in range(i + 1, 12) if rng.random() < 0.4])
    b = tgs.SceneBuilder()
    b.add_ground(ke=1e3, kd=1.0, kf=10.0, mu=0.5)
    b.add_particles(x, rng.normal(size=(12, 3)) * 0.5, rng.uniform(0.5, 1.5, 12))
    b.add_springs(pairs, rng.uniform(50, 150, len(pairs)), rng.uniform(0.1, 0.5, len(pairs)))
    return b.finalize(), ["spring_stiffness", "spring_damping", "spring_rest_length", "particle_qd0"]


SCENES = {"fem": fem_scene, "cloth": cloth_scene, "springs": spring_scene}


def build(scene, scatter):
    tgs.runtime.set_scatter(scatter)
    try:
        model, names = SCENES[scene]()
    finally:
        tgs.runtime.set_scatter("auto")
    return model, names


def rollout(model, steps=40, checkpoint_every=None):
    sim = tgs.Simulator(model, dt=1e-3, steps=steps, checkpoint_every=checkpoint_every)
    rec = tgs.ParticleRecorder(sim, every=10)
    sim.run()
    rng = np.random.default_rng(0)
    loss = tgs.MSELoss(rec.values, rec.numpy() + rng.normal(size=(rec.frames, rec.count, 3)) * 0.05)

    def run():
        loss.value[None] = 0
        sim.run()
        loss()

    return sim, rec, run, loss.value


def taped(model, names, **kw):
    sim, rec, run, loss = rollout(model, **kw)
    with ti.ad.Tape(loss):
        run()
    return rec.numpy(), {n: model.parameters()[n].grad.to_numpy().copy() for n in names}, float(loss[None])


def check(run, loss, fld, **kw):
    report = tgs.check_gradient(run, loss, [fld], n_dirs=1, eps=kw.pop("eps", 1e-5), rtol=1e-5, **kw)
    assert report.ok, f"{fld}: {report}"
    assert max(abs(a) for a in report.analytic) > 1e-12, "zero gradient"


@pytest.mark.parametrize("scene", sorted(SCENES))
def test_parts_path_equals_serial(f64, scene):
    """Same trajectory, loss and gradients as the serial scatter (only the order of each particle's sum differs)."""
    model, names = build(scene, "parts")
    assert any(isinstance(t, PartGather) for t in model.force_terms)
    assert not tgs.Simulator(model, dt=1e-3, steps=2).fused
    x_parts, g_parts, l_parts = taped(model, names)
    model, names = build(scene, "serial")
    assert not any(isinstance(t, PartGather) for t in model.force_terms)
    x_serial, g_serial, l_serial = taped(model, names)
    np.testing.assert_allclose(x_parts, x_serial, rtol=0, atol=1e-13)
    assert l_parts == pytest.approx(l_serial, rel=1e-12)
    for n in names:
        g = g_serial[n]
        assert np.any(g != 0), n
        np.testing.assert_allclose(g_parts[n], g, rtol=1e-12, atol=1e-12 * np.abs(g).max(), err_msg=n)


@pytest.mark.parametrize("scene", sorted(SCENES))
def test_parts_path_gradients_match_finite_differences(f64, scene):
    model, names = build(scene, "parts")
    sim, rec, run, loss = rollout(model, steps=30)
    for n in names:
        # several gradients are small (1e-9 .. 1e-8): a step of 1e-4 keeps FD above round-off; the
        # loss is nearly linear in the bending rest angles (gradient 1e-9) and round-off dominates
        # their FD until a step of ~3e-3 (the serial path's FD gives the same numbers)
        check(run, loss, model.parameters()[n], eps=3e-3 if n == "cloth_bend_rest_angle" else 1e-4)


def test_parts_path_checkpointed_and_activation_control(f64):
    """Checkpointed segments (the reverse pass re-runs the port loops) and per-step activations."""
    model, names = build("fem", "parts")
    act_t = fem.enable_activation_control(model, 30)
    act_t.from_numpy(np.random.default_rng(1).normal(size=(30, model.tet_count)) * 0.05)
    _, full, _ = taped(model, names + ["tet_activation_t"], steps=30)
    _, ck, _ = taped(model, names + ["tet_activation_t"], steps=30, checkpoint_every=7)
    model_s, _ = build("fem", "serial")
    act_s = fem.enable_activation_control(model_s, 30)
    act_s.from_numpy(act_t.to_numpy())
    _, serial, _ = taped(model_s, names + ["tet_activation_t"], steps=30)
    for n in full:
        assert np.any(full[n] != 0), n
        np.testing.assert_allclose(ck[n], full[n], rtol=1e-12, atol=1e-12 * np.abs(full[n]).max(), err_msg=n)
        np.testing.assert_allclose(full[n], serial[n], rtol=1e-12, atol=1e-12 * np.abs(full[n]).max(), err_msg=n)
    sim, rec, run, loss = rollout(model, steps=30)
    check(run, loss, act_t, scale=[0.05])


def _bits(scene, threads):
    tgs.init(precision="f64", cpu_max_num_threads=threads)
    model, names = build(scene, "parts")
    return taped(model, names)


def test_parts_path_bit_reproducible_run_to_run_and_across_thread_counts():
    try:
        x2, g2, l2 = _bits("cloth", 2)
        x2b, g2b, l2b = _bits("cloth", 2)
        x1, g1, l1 = _bits("cloth", 1)
    finally:
        tgs.init()
    for x, g, l in ((x2b, g2b, l2b), (x1, g1, l1)):
        assert l == l2 and np.array_equal(x, x2)
        for n in g2:
            assert np.array_equal(g[n], g2[n]), n


def test_parts_path_without_gradients(f64):
    """A model built without gradients: no ports, the same forward trajectory as serial."""
    out = {}
    for mode in ("parts", "serial"):
        tgs.runtime.set_scatter(mode)
        try:
            v, f = tgs.meshes.cloth_grid(4, 3, cell=0.1, origin=(0.0, 0.05, 0.0), plane="xz")
            b = tgs.SceneBuilder()
            b.add_ground(ke=1e3, kd=1.0, kf=1.0, mu=0.5)
            b.add_cloth(v, f, params={"mu": 20.0, "lam": 30.0}, density=5.0, bending_stiffness=1e-3,
                        velocity=(0.2, -0.8, 0.1))
            model = b.finalize(requires_grad=False)
        finally:
            tgs.runtime.set_scatter("auto")
        sim = tgs.Simulator(model, dt=1e-3, steps=30)
        sim.run()
        out[mode] = sim.final_state()
    np.testing.assert_allclose(out["parts"], out["serial"], rtol=0, atol=1e-13)
    assert element_path(10) == "serial"


def test_parts_path_under_debug_and_validation():
    """Debug mode (bounds checks) and Tape(validation=True): the checked forward kernel adds straight
    into the particles (no reused buffers for Taichi's data access rule to reject), the reverse kernel
    still gives the serial path's gradients."""
    tgs.init(precision="f64", debug=True)
    try:
        grads = {}
        for mode in ("parts", "serial"):
            model, names = build("cloth", mode)
            sim, rec, run, loss = rollout(model, steps=10)
            with ti.ad.Tape(loss, validation=True):
                run()
            grads[mode] = {n: model.parameters()[n].grad.to_numpy().copy() for n in names}
        for n, g in grads["serial"].items():
            # rounding: the forward sums in block order (1e-11 relative seen on bending stiffness)
            assert np.any(g != 0), n
            np.testing.assert_allclose(grads["parts"][n], g, rtol=1e-9, atol=1e-9 * np.abs(g).max(), err_msg=n)
    finally:
        tgs.init()

@pytest.mark.parametrize("n, threads, path", [(16, 2, "serial"), (64, 2, "serial"), (100, 2, "serial"),
                                               (64, 4, "serial"), (100, 4, "parts")])
def test_cloth_sets_share_one_path_chosen_by_triangle_count(n, threads, path):
    """"auto": a cloth's triangles and bending edges take one path: on 2 threads serial at any size (one
    thread in lanes is faster); with 3 or more, serial below cloth.CLOTH_PARTS_MIN_TRIANGLES triangles (64 x
    64: 8,192 triangles, 12,160 edges, both sets past PARTS_MIN_ELEMENTS), parts from there (100 x 100:
    20,000).  On the serial path both go in lanes both ways from CLOTH_LANES_MIN_TRIANGLES (16 x 16: 512
    triangles, one at a time)."""
    from tigradsim.physics.cloth import CLOTH_LANES_MIN_TRIANGLES, CLOTH_PARTS_MIN_THREADS, \
        CLOTH_PARTS_MIN_TRIANGLES, ClothBendingForces, ClothMembraneForces
    tgs.init(precision="f32", cpu_max_num_threads=threads)
    try:
        b = tgs.SceneBuilder()
        v, f = tgs.meshes.cloth_grid(n, n, cell=1.0 / n, origin=(0.0, 0.5, 0.0), plane="xz")
        b.add_cloth(v, f, params={"mu": 10.0, "lam": 20.0}, density=1.0, bending_stiffness=1e-4)
        model = b.finalize()
        assert (len(f) >= CLOTH_PARTS_MIN_TRIANGLES and threads >= CLOTH_PARTS_MIN_THREADS) == (path == "parts")
        terms = [t for t in model.force_terms if isinstance(t, (ClothMembraneForces, ClothBendingForces))]
        assert len(terms) >= 2 and all(t.path == path for t in terms)
        in_lanes = path == "serial" and len(f) >= CLOTH_LANES_MIN_TRIANGLES
        assert in_lanes == (n >= 64 and path == "serial") and all(t.reverse_in_lanes == in_lanes for t in terms)
    finally:
        tgs.init(precision="f64")


def test_element_path_choice(f64):
    """Explicit modes are obeyed; "auto" keeps small element sets serial on this CPU and runs large ones
    on the parts path with 2 or more threads (see loops.PARTS_MIN_ELEMENTS)."""
    for mode in ("serial", "parallel", "parts"):
        tgs.runtime.set_scatter(mode)
        try:
            assert element_path(10 ** 6) == mode
        finally:
            tgs.runtime.set_scatter("auto")
    assert element_path(PARTS_MIN_ELEMENTS - 1) == "serial"
    threads = ti.lang.impl.current_cfg().cpu_max_num_threads
    assert element_path(PARTS_MIN_ELEMENTS) == ("parts" if threads >= 2 else "serial")
    assert element_path(PARTS_MIN_ELEMENTS, parts_min_elements=PARTS_MIN_ELEMENTS + 1) == "serial"
    assert element_path(PARTS_MIN_ELEMENTS, parts_min_threads=threads + 1) == "serial"
    tgs.init(precision="f64", cpu_max_num_threads=1)
    try:
        assert element_path(10 ** 6) == "serial"          # one thread: nothing to share the work with
    finally:
        tgs.init(precision="f64")
    with pytest.raises(ValueError, match=r"set_scatter: mode='gather' is not one of"):
        tgs.runtime.set_scatter("gather")              # retired (benchmarks/MEASURED.md)
    model, _ = build("springs", "parts")
    kinds = [type(t).__name__ for t in model.force_terms]
    assert kinds.index("PartFill") < kinds.index("SpringForces") < kinds.index("PartGather")
    assert all(t.stability_limits() == [] for t in model.force_terms if isinstance(t, (PartFill, PartGather)))
    with pytest.raises(IndexError, match=r"particle indices must lie in \[0, 12\)"):
        PartPorts(model, np.array([[0, 12]]))
    with pytest.raises(ValueError, match=r"indices: expected shape \(E, K\)"):
        PartPorts(model, np.zeros((0, 2), dtype=int))
