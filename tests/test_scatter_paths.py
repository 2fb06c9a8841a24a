"""Element loops on both cores without atomic adds into particles, by graph colouring
(tigradsim.physics.colour) and by per-part buffers (tigradsim.physics.parts): each path gives the
serial path's trajectories and gradients (float64, to 1e-12), finite differences agree with its
gradients, its results are the same bits run to run and for 1 or 2 threads, and the colouring is a
proper one (the parts path's own checks: tests/test_scatter_parts.py)."""
import numpy as np
import pytest
import taichi as ti

import tigradsim as tgs
from tigradsim import fem
from tigradsim.physics.colour import MIN_BLOCKS_PER_COLOUR, ROW_CHUNK, ChunkFill, ColourPorts, CornerFill, CornerGather, \
    RowFill, _Chunks, choose_blocks, colour_blocks
from tigradsim.physics.gather import _Table
from tigradsim.physics.gather import element_path
from tigradsim.physics.parts import PartGather

from test_parallel_elements import SCENES, check, rollout, taped


def build(scene, scatter):
    tgs.runtime.set_scatter(scatter)
    try:
        return SCENES[scene]()
    finally:
        tgs.runtime.set_scatter("auto")


# each path's per-particle force sum: the loop that marks a model built on it
PATHS = {"colour": CornerGather, "parts": PartGather}


@pytest.mark.parametrize("path", sorted(PATHS))
@pytest.mark.parametrize("scene", sorted(SCENES))
def test_path_equals_serial(f64, scene, path):
    """Same trajectory, loss and gradients as the serial scatter (only the order of each particle's sum differs)."""
    model, names = build(scene, path)
    assert any(isinstance(t, PATHS[path]) for t in model.force_terms)
    assert not tgs.Simulator(model, dt=1e-3, steps=2).fused
    x_colour, g_colour, l_colour = taped(model, names)
    model, names = build(scene, "serial")
    assert not any(isinstance(t, tuple(PATHS.values())) for t in model.force_terms)
    x_serial, g_serial, l_serial = taped(model, names)
    np.testing.assert_allclose(x_colour, x_serial, rtol=0, atol=1e-13)
    assert l_colour == pytest.approx(l_serial, rel=1e-12)
    for n in names:
        g = g_serial[n]
        assert np.any(g != 0), n
        np.testing.assert_allclose(g_colour[n], g, rtol=1e-12, atol=1e-12 * np.abs(g).max(), err_msg=n)


@pytest.mark.parametrize("path", sorted(PATHS))
@pytest.mark.parametrize("scene", sorted(SCENES))
def test_path_gradients_match_finite_differences(f64, scene, path):
    model, names = build(scene, path)
    sim, rec, run, loss = rollout(model, steps=30)
    for n in names:
        # several gradients are small (1e-9 .. 1e-8): a step of 1e-4 keeps FD above round-off; the
        # loss is nearly linear in the bending rest angles (gradient 1e-9) and round-off dominates
        # their FD until a step of ~3e-3 (the serial path's FD gives the same numbers)
        check(run, loss, model.parameters()[n], eps=3e-3 if n == "cloth_bend_rest_angle" else 1e-4)


@pytest.mark.parametrize("path", sorted(PATHS))
def test_path_checkpointed_and_activation_control(f64, path):
    """Checkpointed segments (the reverse pass re-runs the port loops) and per-step activations."""
    model, names = build("fem", path)
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


def _bits(scene, threads, path):
    tgs.init(precision="f64", cpu_max_num_threads=threads)
    model, names = build(scene, path)
    return taped(model, names)


@pytest.mark.parametrize("path", sorted(PATHS))
def test_path_bit_reproducible_run_to_run_and_across_thread_counts(path):
    try:
        x2, g2, l2 = _bits("cloth", 2, path)
        x2b, g2b, l2b = _bits("cloth", 2, path)
        x1, g1, l1 = _bits("cloth", 1, path)
    finally:
        tgs.init()
    for x, g, l in ((x2b, g2b, l2b), (x1, g1, l1)):
        assert l == l2 and np.array_equal(x, x2)
        for n in g2:
            assert np.array_equal(g[n], g2[n]), n


def _proper(indices, size, colours):
    for c in range(colours.max() + 1):
        verts = [np.unique(indices[b * size:(b + 1) * size]) for b in np.nonzero(colours == c)[0]]
        flat = np.concatenate(verts)
        assert len(flat) == len(np.unique(flat)), f"two blocks of colour {c} share a particle"


def test_block_colouring_is_proper():
    rng = np.random.default_rng(0)
    idx = rng.integers(0, 30, size=(200, 4))
    for size in (1, 3, 16):
        col = colour_blocks(idx, size)
        assert col.shape == (-(-200 // size),) and col.min() == 0
        _proper(idx, size, col)
    v, t = tgs.meshes.tet_box(16, 8, 8)
    degree = np.bincount(t.reshape(-1)).max()
    assert degree <= colour_blocks(t, 1).max() + 1 <= 2 * degree
    size, col = choose_blocks(t)
    _proper(t, size, col)
    assert np.bincount(col).min() >= MIN_BLOCKS_PER_COLOUR and col.max() + 1 <= 4     # 5,120 tets: 4 colours
    v, t = tgs.meshes.tet_box(2, 1, 1)                     # too small for 8 blocks a colour: most blocks
    size, col = choose_blocks(t)
    assert size == 16 and col.tolist() == [0]
    with pytest.raises(ValueError, match=r"indices: expected shape \(E, K\)"):
        colour_blocks(np.zeros(5, dtype=int), 1)
    with pytest.raises(ValueError, match=r"size: expected an integer >= 1, got 0"):
        colour_blocks(idx, 0)


def test_parameter_rows_cut_into_chunks():
    """A row used by more than ROW_CHUNK elements is cut into chunks that cover its elements once."""
    rows = np.r_[np.zeros(2 * ROW_CHUNK + 100, dtype=int), np.full(7, 2)]        # row 1 unused
    ch = _Chunks(_Table(ti.field(float, shape=(3,), needs_grad=True), rows, len(rows)))
    assert ch.count == 4
    assert ch.row_first.to_numpy().tolist() == [0, 3, 3, 4]
    lo, hi = ch.lo.to_numpy(), ch.hi.to_numpy()
    assert lo.tolist() == [0, ROW_CHUNK, 2 * ROW_CHUNK, 2 * ROW_CHUNK + 100]
    assert hi.tolist() == [ROW_CHUNK, 2 * ROW_CHUNK, 2 * ROW_CHUNK + 100, 2 * ROW_CHUNK + 107]


def test_colour_ports_blocks_and_order(f64):
    """Each material group's colour loops cover its elements once, blocks of a colour share no
    particle, and the terms sit between the port loops."""
    model, _ = build("fem", "colour")
    ports = model.tet_forces[0].ports
    assert isinstance(ports, ColourPorts)
    lo, hi = ports.block_lo.to_numpy(), ports.block_hi.to_numpy()
    tets = model.tet_indices.to_numpy()
    for term in model.tet_forces:
        g = term.group
        spans = ports.spans(g.start, g.end)
        covered = np.concatenate([np.arange(lo[b], hi[b]) for a, z in spans for b in range(a, z)])
        assert sorted(covered.tolist()) == list(range(g.start, g.end))
        for a, z in spans:
            verts = np.concatenate([np.unique(tets[lo[b]:hi[b]]) for b in range(a, z)])
            assert len(verts) == len(np.unique(verts))
    kinds = [type(t).__name__ for t in model.force_terms]
    assert kinds.index("CornerFill") < kinds.index("RowFill") < kinds.index("ChunkFill") < kinds.index("TetForces") \
        < kinds.index("CornerGather")
    ports_loops = [t for t in model.force_terms if isinstance(t, (CornerFill, RowFill, ChunkFill, CornerGather))]
    assert len(ports_loops) == 4 and all(t.stability_limits() == [] for t in ports_loops)
    assert all(t.reverse_only for t in ports_loops if isinstance(t, (RowFill, ChunkFill)))
    # the parameter rows' chunks cover each row's elements once (the shared row and the per-tet rows)
    tb, ch = ports.table_chunks[0]
    start, lo, hi, first = (f.to_numpy() for f in (tb.row_start, ch.lo, ch.hi, ch.row_first))
    for r in range(tb.row_count):
        pieces = [np.arange(lo[c], hi[c]) for c in range(first[r], first[r + 1])]
        assert np.array_equal(np.concatenate(pieces), np.arange(start[r], start[r + 1]))
        assert all(len(p) <= ROW_CHUNK for p in pieces)
    with pytest.raises(IndexError, match=r"particle indices must lie in \[0, \d+\)"):
        ColourPorts(model, np.array([[0, 10 ** 6]]))
    with pytest.raises(ValueError, match=r"ranges: \[3, 3\) is not a non-empty range"):
        ColourPorts(model, tets, ranges=[(3, 3)])


@pytest.mark.parametrize("path", sorted(PATHS))
def test_path_without_gradients(f64, path):
    """A model built without gradients: no ports, the same forward trajectory as serial."""
    out = {}
    for mode in (path, "serial"):
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
    np.testing.assert_allclose(out[path], out["serial"], rtol=0, atol=1e-13)
    assert element_path(10) == "serial"


@pytest.mark.parametrize("path", sorted(PATHS))
def test_path_under_debug_and_validation(path):
    """Debug mode (bounds checks) and Tape(validation=True): the checked forward kernel adds straight
    into the particles (no reused buffers for Taichi's data access rule to reject), the reverse kernel
    still gives the serial path's gradients."""
    tgs.init(precision="f64", debug=True)
    try:
        grads = {}
        for mode in (path, "serial"):
            model, names = build("cloth", mode)
            sim, rec, run, loss = rollout(model, steps=10)
            with ti.ad.Tape(loss, validation=True):
                run()
            grads[mode] = {n: model.parameters()[n].grad.to_numpy().copy() for n in names}
        for n, g in grads["serial"].items():
            # rounding: the forward sums in block order (1e-11 relative seen on bending stiffness)
            assert np.any(g != 0), n
            np.testing.assert_allclose(grads[path][n], g, rtol=1e-9, atol=1e-9 * np.abs(g).max(), err_msg=n)
    finally:
        tgs.init()
