"""Element loops on both cores with per-part force buffers (tigradsim.physics.parts): the parts path gives
the serial path's trajectories and gradients (float64, to 1e-12), finite differences agree with its
gradients, its results are the same bits run to run and for 1 or 2 threads, the parts cover every
element once, and a model without gradients or under Tape(validation=True) still works."""
import numpy as np
import pytest
import taichi as ti

import tigradsim as tgs
from tigradsim import fem
from tigradsim.physics.parts import PARTS, PartFill, PartGather, PartPorts, part_bounds

from test_parallel_elements import SCENES, check, rollout, taped


def build(scene, scatter):
    tgs.runtime.set_scatter(scatter)
    try:
        return SCENES[scene]()
    finally:
        tgs.runtime.set_scatter("auto")


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
        # small gradients (1e-9 .. 1e-8) need a step of 1e-4 to stay above round-off; the loss is nearly
        # linear in the bending rest angles and round-off dominates their FD until ~3e-3 (as on serial)
        check(run, loss, model.parameters()[n], eps=3e-3 if n == "cloth_bend_rest_angle" else 1e-4)


def test_parts_path_checkpointed_and_activation_control(f64):
    """Checkpointed segments (the reverse pass re-runs the part loops) and per-step activations."""
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


def _two_materials():
    """Two meshes of different materials: two tet terms (element ranges) on one set of ports."""
    b = tgs.SceneBuilder()
    b.add_ground(ke=2e3, kd=5.0, kf=50.0, mu=0.4)
    rng = np.random.default_rng(4)
    for k, material in enumerate(("neo_hookean", "corotated")):
        v, t = tgs.meshes.tet_box(3, 2, 2, size=(0.3, 0.2, 0.2), origin=(0.4 * k, 0.045, 0.0))
        b.add_soft_mesh((v, t), material=material, params={"mu": 5e3, "lam": 8e3}, density=6000.0, damping=1.0,
                        velocity=np.array([0.4, -1.0, 0.2]) + rng.normal(size=(len(v), 3)) * 0.3, radius=0.02)
    return b.finalize(), ["tet_params", "particle_qd0"]


def test_parts_path_two_materials_equals_serial(f64):
    grads, xs = {}, {}
    for mode in ("parts", "serial"):
        tgs.runtime.set_scatter(mode)
        try:
            model, names = _two_materials()
        finally:
            tgs.runtime.set_scatter("auto")
        assert len(model.tet_forces) == 2
        if mode == "parts":
            ports = model.tet_forces[0].ports
            assert ports is model.tet_forces[1].ports and len(ports.part_lo.to_numpy()) == 2
        sim, rec, run, loss = rollout(model)
        with ti.ad.Tape(loss):
            run()
        xs[mode] = rec.numpy()
        grads[mode] = {n: model.parameters()[n].grad.to_numpy().copy() for n in names}
        run()                                   # after a backward pass the buffers are clean: same bits again
        assert np.array_equal(rec.numpy(), xs[mode])
    np.testing.assert_allclose(xs["parts"], xs["serial"], rtol=0, atol=1e-13)
    for n, g in grads["serial"].items():
        assert np.any(g != 0), n
        np.testing.assert_allclose(grads["parts"][n], g, rtol=1e-12, atol=1e-12 * np.abs(g).max(), err_msg=n)


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


def test_part_bounds_and_ports(f64):
    """Each material group's parts cover its elements once and in order; a particle's touch bits name
    exactly the parts whose elements use it; the terms sit between the part loops; bad input is named."""
    assert part_bounds(0, 10, 4).tolist() == [0, 2, 5, 7, 10]
    assert part_bounds(3, 5, 4).tolist() == [3, 3, 4, 4, 5]            # empty parts are fine
    with pytest.raises(ValueError, match="parts: expected an integer >= 1, got 0"):
        part_bounds(0, 10, 0)
    model, _ = build("fem", "parts")
    ports = model.tet_forces[0].ports
    assert isinstance(ports, PartPorts) and ports.parts == PARTS
    lo, hi, touch = ports.part_lo.to_numpy(), ports.part_hi.to_numpy(), ports.touch.to_numpy()
    tets = model.tet_indices.to_numpy()
    expect = np.zeros(model.particle_count, dtype=np.int64)
    for term in model.tet_forces:
        g = term.group
        r = ports.range_index(g.start, g.end)
        assert lo[r, 0] == g.start and hi[r, -1] == g.end and np.array_equal(lo[r, 1:], hi[r, :-1])
        for p in range(PARTS):
            expect[np.unique(tets[lo[r, p]:hi[r, p]])] |= 1 << p
    assert np.array_equal(touch, expect)
    kinds = [type(t).__name__ for t in model.force_terms]
    assert kinds.index("PartFill") < kinds.index("TetForces") < kinds.index("PartGather")
    loops = [t for t in model.force_terms if isinstance(t, (PartFill, PartGather))]
    assert len(loops) == 2 and all(t.serial and t.stability_limits() == [] for t in loops)
    with pytest.raises(IndexError, match=r"particle indices must lie in \[0, \d+\)"):
        PartPorts(model, np.array([[0, 10 ** 6]]))
    with pytest.raises(ValueError, match=r"ranges: \[3, 3\) is not a non-empty range"):
        PartPorts(model, tets, ranges=[(3, 3)])
    with pytest.raises(ValueError, match=r"tables\[0\]: expected one row per element"):
        PartPorts(model, tets, tables=[(model.tet_params, np.zeros(3, dtype=int))])


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
        if mode == "parts":
            ports = model.force_terms[[type(t).__name__ for t in model.force_terms].index("PartFill")].ports
            assert ports.qport == [] and ports.tables == []
        sim = tgs.Simulator(model, dt=1e-3, steps=30)
        sim.run()
        out[mode] = sim.final_state()
    np.testing.assert_allclose(out["parts"], out["serial"], rtol=0, atol=1e-13)


def test_parts_path_under_debug_and_validation():
    """Debug mode (bounds checks) and Tape(validation=True): the checked forward kernel adds straight
    into the particles, the reverse kernel still gives the serial path's gradients."""
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
            assert np.any(g != 0), n
            np.testing.assert_allclose(grads["parts"][n], g, rtol=1e-9, atol=1e-9 * np.abs(g).max(), err_msg=n)
    finally:
        tgs.init()
