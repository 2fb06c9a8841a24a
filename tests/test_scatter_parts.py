"""The parts path's own checks (tigradsim.exec.parts): the parts cover every element once, the touch
bits are right, two material ranges share one set of buffers, a forward run after a backward pass gives
the same bits, a model without gradients has no ports, and several element sets share one loop
(PartLoop) with the bits of one loop per set.  Equality with the serial path, finite
differences, checkpointing, activation control, bit-reproducibility across thread counts, no-gradient
models and Tape(validation=True) are tested in tests/test_parallel_elements.py."""
import numpy as np
import pytest
import taichi as ti

import tigradsim as tgs
import tigradsim.sim.builder as builder
from tigradsim.exec.parts import PARTS, PartFill, PartGather, PartLoop, PartPorts, part_bounds
from atomic_order import assert_same_sums

from test_parallel_elements import build, check, rollout, taped


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
    # each part's row of a table port lies at least 64 bytes (a cache line) from the next part's: the
    # reverse pass adds into it once per element, and one shared line made the two threads take turns
    # (fem32 with every gradient: 2,312-2,331 us forward + backward per step side by side, 2,043 apart)
    assert ports.tables
    for tb in ports.tables:
        entry_bytes = tb.port.to_numpy().dtype.itemsize * max(tb.width, 1)
        assert tb.port.shape[0] == PARTS and (tb.port.shape[1] - tb.row_count) * entry_bytes >= 64
    kinds = [type(t).__name__ for t in model.force_terms]
    assert kinds.index("PartFill") < kinds.index("TetForces") < kinds.index("PartGather")
    loops = [t for t in model.force_terms if isinstance(t, (PartFill, PartGather))]
    assert len(loops) == 2 and all(t.serial and t.stability_limits() == [] for t in loops)
    with pytest.raises(IndexError, match=r"particle indices must lie in \[0, \d+\)"):
        PartPorts(model, np.array([[0, 10 ** 6]]))
    with pytest.raises(ValueError, match=r"parts: expected an integer in \[1, 30\]"):
        PartPorts(model, tets, parts=31)
    with pytest.raises(ValueError, match=r"ranges: \[3, 3\) is not a non-empty range"):
        PartPorts(model, tets, ranges=[(3, 3)])
    with pytest.raises(ValueError, match=r"tables\[0\]: expected one row per element"):
        PartPorts(model, tets, tables=[(model.tet_params, np.zeros(3, dtype=int))])
    tgs.runtime.set_scatter("parts")
    try:
        v, t = tgs.meshes.tet_box(2, 1, 1)
        b = tgs.SceneBuilder()
        b.add_soft_mesh((v, t), params={"mu": 1e3, "lam": 1e3}, density=100.0)
        plain = b.finalize(requires_grad=False)
    finally:
        tgs.runtime.set_scatter("auto")
    ports = plain.tet_forces[0].ports
    assert isinstance(ports, PartPorts) and ports.qport == [] and ports.tables == [] and not ports.grad




def test_element_sets_share_one_part_loop(f64, monkeypatch):
    """A cloth on the parts path has two element sets (triangles, bending edges): their loops run in
    one PartLoop (one thread-pool hand-off per step and direction instead of two), after both sets'
    PartFill and before both PartGathers, with the same trajectory and gradients, bit for bit, as one
    loop per set, and the gradients match finite differences in float64 (against the serial path:
    tests/test_parallel_elements.py)."""
    model, names = build("cloth", "parts")
    loops = [t for t in model.force_terms if isinstance(t, PartLoop)]
    assert len(loops) == 1
    assert [type(t).__name__ for t in loops[0].terms] == ["ClothMembraneForces", "ClothBendingForces"]
    assert all(t.merged for t in loops[0].terms)
    kinds = [type(t).__name__ for t in model.force_terms]
    assert kinds.index("PartLoop") == max(k for k, n in enumerate(kinds) if n == "PartFill") + 1
    assert tgs.Simulator(model, dt=1e-3, steps=2).stability_report().rows      # the merged terms are still checked
    monkeypatch.setattr(builder, "merge_part_loops", lambda model, terms: list(terms))
    apart, _ = build("cloth", "parts")
    assert not any(isinstance(t, PartLoop) for t in apart.force_terms)
    (x_merged, g_merged, l_merged), (x_apart, g_apart, l_apart) = (taped(m, names, steps=20) for m in (model, apart))
    assert_same_sums(x_merged, x_apart)
    assert_same_sums(l_merged, l_apart)
    for n in names:
        assert np.any(g_apart[n] != 0), n
        assert_same_sums(g_merged[n], g_apart[n], err_msg=n)
    sim, rec, run, loss = rollout(model, steps=20)       # PartLoop's own Tape gradient against finite differences
    for n in ("particle_qd0", "cloth_params", "cloth_bending_stiffness"):
        check(run, loss, model.parameters()[n], eps=1e-4)


def test_merge_part_loops_order():
    """Which terms `merge_part_loops` merges and where it puts the loop: the first term of each set
    on the parts path (a set's second term, e.g. a second material, keeps its loop: two loops writing
    one set's buffers in one struct-for would make the adds atomic), every merged set's PartFill
    before the loop, every PartGather after the last element term; nothing moves with one set."""
    from types import SimpleNamespace
    from tigradsim.exec.parts import merge_part_loops

    def element(name, ports):
        return SimpleNamespace(name=name, ports=ports, element_range=(0, 1), merged=False)

    a, c = (SimpleNamespace(parted=True, parts=PARTS, cells=object(), name=n) for n in "ac")
    serial = SimpleNamespace(parted=False)
    fa, ga, fc, gc = PartFill(None, a), PartGather(None, a), PartFill(None, c), PartGather(None, c)
    a1, a2, c1 = element("a1", a), element("a2", a), element("c1", c)
    ground, springs = SimpleNamespace(name="ground"), element("springs", serial)
    terms = [ground, fa, a1, a2, ga, springs, fc, c1, gc]
    merged = merge_part_loops(None, terms)
    loop = next(t for t in merged if isinstance(t, PartLoop))
    assert loop.terms == [a1, c1] and a1.merged and c1.merged and not a2.merged and not springs.merged
    assert merged == [ground, fa, fc, loop, a1, a2, springs, c1, ga, gc]
    assert merge_part_loops(None, [ground, fa, a1, a2, ga]) == [ground, fa, a1, a2, ga]
