"""The parts path's own checks (tigradsim.physics.parts): the parts cover every element once, the touch
bits are right, two material ranges share one set of buffers, a forward run after a backward pass gives
the same bits, and a model without gradients has no ports.  Equality with the serial path, finite
differences, checkpointing, activation control, bit-reproducibility across thread counts, no-gradient
models and Tape(validation=True) are tested for it and the colour path alike in tests/test_scatter_colour.py."""
import numpy as np
import pytest
import taichi as ti

import tigradsim as tgs
from tigradsim.physics.parts import PARTS, PartFill, PartGather, PartPorts, part_bounds

from test_parallel_elements import rollout
from test_scatter_colour import build


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


