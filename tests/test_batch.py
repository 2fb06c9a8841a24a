"""Batched scenes (tgs.batched, tgs.BatchFit): B copies in one Model behave, render and differentiate
exactly like B unbatched scenes, in float64.

The scene: one box per copy on the ground, pushed along +x for the first 0.04 s, 0.2 s at 2 ms, rendered
every 10 steps at 24x24 px.  The copies get different masses, contact stiffnesses and initial velocities
(`Batch.set`), and overlap in space (nothing couples two bodies).  The unbatched references are built with
the plain library path (SceneBuilder, Simulator, RigidSurface, SoftRasterizer, VideoFit).
"""
import numpy as np
import pytest
import taichi as ti

import tigradsim as tgs
from tigradsim.sim.batch import batched
from tigradsim.fitting.batch import PerCopy, RowsParam
from tigradsim.fitting.batch_fit import BatchFit
from tigradsim.fitting.sysid import VideoFit, render_surface
from tigradsim.io import meshes
from tigradsim.physics.rigid import RigidSurface, add_body_force
from tigradsim.renderers import Camera, SoftRasterizer

B = 3
DT, STEPS, EVERY, RES, SIGMA = 2e-3, 100, 10, 24, 1e-3
MASS = [0.8, 1.3, 2.0]
KE = [8e3, 1e4, 1.2e4]
QD0 = [[0.0, 0.0, 0.0, 0.2, 0.0, 0.0], [0.0, 0.5, 0.0, 0.0, 0.0, 0.1], [0.3, 0.0, 0.0, 0.4, 0.0, -0.1]]


def build(b, copy):
    # kd = 21, not 20: with ke dt = kd the capped damping min(kd |v_n|, ke |c|) ties exactly at the first
    # penetration step of a box resting at c = 0 (|c| = |v_n| dt there), a kink of the loss in ke at
    # which the Tape gives one one-sided derivative and central differences their mean (6 % apart)
    b.add_ground(ke=1e4, kd=21.0, kf=30.0, mu=0.3)
    v, f = meshes.box_surface((0.3, 0.2, 0.2))
    body = b.add_rigid_body(v, f, mass=1.0, position=(0.0, 0.1, 0.0), ke=1e4, kd=21.0, kf=30.0, mu=0.3)
    add_body_force(b, body, force=(15.0, 0.0, 0.0), start=0.0, end=0.04)
    return body


def camera():
    return Camera(eye=(0.1, 0.7, 1.3), target=(0.1, 0.05, 0.0), fov=45, width=RES, height=RES)


def _batch_scene(supervision):
    batch = batched(build, copies=B)
    sim = tgs.Simulator(batch.model, dt=DT, steps=STEPS)
    params = [[m, k] for m, k in zip(batch.params("body_mass", "mass", lower=0.05, upper=50.0, log_space=True),
                                     batch.params("body_ke", "ke", lower=1e2, log_space=True))]
    fit = BatchFit(batch, sim, params, camera=camera() if supervision == "image" else None, every=EVERY,
                   supervision=supervision, sigma=SIGMA)
    return batch, sim, fit


def _single_scene(supervision):
    """One copy alone, by the unbatched library path."""
    b = tgs.SceneBuilder()
    build(b, 0)
    model = b.finalize()
    sim = tgs.Simulator(model, dt=DT, steps=STEPS)
    params = [tgs.Param(model.body_mass, "mass", lower=0.05, upper=50.0, log_space=True),
              tgs.Param(model.body_ke, "ke", lower=1e2, log_space=True)]
    if supervision == "state":
        rec = tgs.BodyRecorder(sim, every=EVERY)
        return model, sim, VideoFit(sim, None, params, supervision="state", state_source=rec.positions)
    surface = RigidSurface(sim, every=EVERY)
    ren = SoftRasterizer(camera(), surface.faces, surface.vertex_count, frames=surface.frames, sigma=SIGMA,
                         gamma=1e-4, shading="silhouette")
    render_surface(sim, ren, surface, EVERY)
    return model, sim, VideoFit(sim, ren, params)


@pytest.fixture(scope="module")
def scenes():
    """Taichi in float64 and the scenes, built (and their kernels compiled) once for the module: the
    batched scene and one unbatched copy, for image and for state supervision."""
    tgs.init(arch="cpu", precision="f64")
    return {sup: (_batch_scene(sup), _single_scene(sup)) for sup in ("image", "state")}


def batch_scene(scenes, supervision="image"):
    """The batched scene with every copy at MASS, KE, QD0."""
    batch, sim, fit = scenes[supervision][0]
    batch.set("body_mass", MASS)
    batch.set("body_ke", KE)
    batch.set("body_qd0", QD0)
    return batch, sim, fit


def single_scene(scenes, copy, supervision="image"):
    """The unbatched scene set to copy `copy`'s parameters and initial state."""
    model, sim, fit = scenes[supervision][1]
    model.set("body_mass", [MASS[copy]])
    model.set("body_ke", [KE[copy]])
    model.set("body_qd0", [QD0[copy]])
    return model, sim, fit


def _grads(fit, params):
    """Run the fit's loss under a Tape; the loss and each Param's gradient dL/dvalue."""
    if fit._state_loss is not None:
        fit._state_loss.value[None] = 0.0
    with ti.ad.Tape(fit.loss):
        fit._forward()
    return float(fit.loss[None]), [p.grad().copy() for p in params]


def test_copies_follow_their_unbatched_trajectories_and_renders(scenes):
    batch, sim, fit = batch_scene(scenes)
    videos = fit.render()
    assert videos.shape == (B, STEPS // EVERY + 1, RES, RES, 1)
    q = sim.final_state("body_q")
    for copy in range(B):
        model, sim1, fit1 = single_scene(scenes, copy)
        video = fit1.render()
        np.testing.assert_allclose(q[copy], sim1.final_state("body_q")[0], rtol=0, atol=1e-13)
        assert np.abs(videos[copy] - video).max() < 1e-12
        assert video[-1].sum() > 20.0            # the box is in view
    # different parameters and initial states: different trajectories
    assert np.abs(q[0, :3] - q[1, :3]).max() > 1e-2 and np.abs(q[1, :3] - q[2, :3]).max() > 1e-2


@pytest.mark.parametrize("supervision", ["image", "state"])
def test_copy_gradient_equals_the_unbatched_gradient(scenes, supervision):
    batch, sim, fit = batch_scene(scenes, supervision)
    # targets: each copy at another mass and stiffness
    batch.set("body_mass", [1.0, 1.1, 1.7])
    batch.set("body_ke", [9e3, 9e3, 1.1e4])
    targets = fit.targets()
    batch.set("body_mass", MASS)
    batch.set("body_ke", KE)
    fit.video_fit.set_target(fit._target(targets))
    flat = [p for group in fit.params for p in group]
    total, grads = _grads(fit.video_fit, flat)
    losses = []
    for copy in range(B):
        model, sim1, fit1 = single_scene(scenes, copy, supervision)
        fit1.set_target(targets[copy])
        loss1, g1 = _grads(fit1, fit1.params)
        losses.append(loss1)
        for k, g in enumerate(g1):
            gb = grads[2 * copy + k]
            assert np.all(np.abs(g) > 0)
            np.testing.assert_allclose(gb, g, rtol=1e-10, atol=0)
    np.testing.assert_allclose(total, sum(losses), rtol=1e-12)
    np.testing.assert_allclose(fit.copy_losses(targets), losses, rtol=1e-10)


def test_batched_gradient_matches_finite_differences(scenes):
    batch, sim, fit = batch_scene(scenes)
    batch.set("body_mass", [1.0, 1.1, 1.7])
    targets = fit.render()
    batch.set("body_mass", MASS)
    vf = fit.video_fit
    vf.set_target(fit.atlas.tile_targets(targets))
    model = batch.model

    def run():
        vf._forward()

    # every copy at once, then copy 1 alone (its rows only)
    fields = [model.body_mass, model.body_qd0, model.body_ke]
    tgs.check_gradient(run, vf.loss, fields, n_dirs=2, rtol=1e-5).assert_ok()
    rows = np.zeros(B)
    rows[1] = 1.0
    tgs.check_gradient(run, vf.loss, fields, n_dirs=1, rtol=1e-5, seed=1,
                       masks=[rows, np.repeat(rows[:, None], 6, axis=1), rows]).assert_ok()


def test_batched_fit_equals_sequential_fits(scenes):
    """Per-copy Adam then per-copy BFGS (one Tape per iteration for all copies) end where B sequential
    VideoFit fits end, to float64 round-off."""
    batch, sim, fit = batch_scene(scenes)
    batch.set("body_mass", [1.0, 1.1, 1.7])
    targets = fit.render()
    starts = [0.7, 1.6, 1.2]
    batch.set("body_mass", starts)
    fit.fit(targets, iters=5, optimizer=lambda p: tgs.Adam(p, lr=0.1, lr_decay=0.9), log_every=0)
    fit.fit(targets, iters=3, optimizer=lambda p: tgs.BFGS(p, lr=0.05), log_every=0)
    batched_values = fit.values()
    assert set(fit.history.params) == {f"{n}[{b}]" for n in ("mass", "ke") for b in range(B)}
    for copy in range(B):
        model, sim1, fit1 = single_scene(scenes, copy)
        model.set("body_mass", [starts[copy]])
        fit1.fit(targets[copy], iters=5, optimizer=tgs.Adam(fit1.params, lr=0.1, lr_decay=0.9), log_every=0)
        fit1.fit(targets[copy], iters=3, optimizer=tgs.BFGS(fit1.params, lr=0.05), log_every=0)
        for k, p in enumerate(fit1.params):
            np.testing.assert_allclose(batched_values[copy][k], p.value(), rtol=1e-10)
        assert abs(batched_values[copy][0][0] - starts[copy]) > 1e-3      # the fit moved


def test_a_copy_leaving_its_tile_is_an_error(scenes):
    batch, sim, fit = batch_scene(scenes)
    batch.set("body_qd0", [QD0[0], [0, 0, 0, 6.0, 0, 0], QD0[2]])      # copy 1 slides out of view
    with pytest.raises(RuntimeError, match="copy 1 left its tile"):
        fit.render()


def _coupled(b, copy):
    i = b.add_particles([[0.0, 1.0, 0.0], [0.1, 1.0, 0.0]])
    b.add_springs([[0, i + 1]], 10.0)          # joins particle 0 (copy 0's) to this copy's


def test_bad_input_is_named_before_any_kernel_runs(scenes):
    with pytest.raises(ValueError, match="copies: expected an integer >= 1, got 0"):
        batched(build, copies=0)
    with pytest.raises(ValueError, match="copies"):
        batched(build, copies=2.5)
    with pytest.raises(TypeError, match="build: expected a callable"):
        batched(None, copies=2)
    with pytest.raises(ValueError, match="copy 1 added a spring between particles"):
        batched(_coupled, copies=2)
    with pytest.raises(ValueError, match="copy 0 added no particle"):
        batched(lambda b, c: None, copies=2)

    def other_ground(b, copy):
        build(b, copy)
        b.add_ground(ke=1e4 * (1 + copy))
    with pytest.raises(ValueError, match="copy 1 set the ground"):
        batched(other_ground, copies=2)

    def with_term(b, copy):
        build(b, copy)
        b.add_force_term(lambda model: None)
    with pytest.raises(ValueError, match="copy 0 added a user force term"):
        batched(with_term, copies=2)

    batch = batched(build, copies=2)
    with pytest.raises(ValueError, match=r"values: expected one entry per copy \(2\), got 3"):
        batch.set("body_mass", [1.0, 2.0, 3.0])
    with pytest.raises(ValueError, match=r"values\[1\]: shape \(2,\) does not broadcast"):
        batch.set("body_mass", [1.0, [1.0, 2.0]])
    with pytest.raises(ValueError, match="must be >= 0|negative|mass"):
        batch.set("body_mass", [1.0, -2.0])
    with pytest.raises(KeyError, match="unknown parameter 'body_nope'"):
        batch.params("body_nope")
    with pytest.raises(ValueError, match="per-copy rows are not known"):
        batch.params("ground_ke")
    with pytest.raises(IndexError, match="copy: expected an integer in"):
        batch.rows("bodies", 2)
    with pytest.raises(ValueError, match="rows must lie in"):
        RowsParam(batch.model.body_mass, [0, 5])
    with pytest.raises(ValueError, match="at least one optimizer"):
        PerCopy([])
    sim = tgs.Simulator(batch.model, dt=DT, steps=STEPS)
    masses = batch.params("body_mass")
    with pytest.raises(ValueError, match=r"params: 1 entries, expected one per copy \(2\)"):
        BatchFit(batch, sim, masses[:1], camera=camera(), every=EVERY)
    with pytest.raises(ValueError, match="camera: needed"):
        BatchFit(batch, sim, masses, every=EVERY)
    with pytest.raises(ValueError, match="names must be unique"):
        BatchFit(batch, sim, [masses[0], masses[0]], camera=camera(), every=EVERY)
    with pytest.raises(TypeError, match="BatchFit: edge_softness and sigma: give one"):   # sigma: the older name
        BatchFit(batch, sim, masses, camera=camera(), every=EVERY, edge_softness=SIGMA, sigma=SIGMA)
    fit = BatchFit(batch, sim, masses, camera=camera(), every=EVERY, edge_softness=SIGMA)
    with pytest.raises(ValueError, match=r"targets: expected one video per copy \(2\), got 1"):
        fit.fit([np.zeros((11, RES, RES))], iters=1)
    with pytest.raises(ValueError, match=r"targets\[1\]: shape \(11, 20, 24, 1\)"):
        fit.fit([np.zeros((11, RES, RES)), np.zeros((11, 20, RES))], iters=1)


# -- each batched kernel alone, against central finite differences (f64) -----------------------------
def test_copy_mse_loss_gradient_matches_finite_differences(scenes):
    """CopyMSELoss._accumulate: d loss / d source along random directions, items of 3 copies of
    different sizes (so the per-copy weights differ)."""
    from tigradsim.fitting.batch_fit import CopyMSELoss

    rng = np.random.default_rng(5)
    frames, items = 4, 6
    source = ti.Vector.field(3, float, shape=(frames, items), needs_grad=True)
    source.from_numpy(rng.normal(size=(frames, items, 3)))
    loss = CopyMSELoss(source, rng.normal(size=(frames, items, 3)), item_copy=[0, 0, 0, 1, 1, 2])
    rep = tgs.check_gradient(loss._accumulate, loss.value, [source], n_dirs=3, rtol=1e-7).assert_ok()
    assert min(abs(d) for d in rep.numeric) > 1e-3          # not a vacuous 0 == 0


def test_atlas_offsets_and_tiled_loss_gradient_matches_finite_differences(scenes):
    """AtlasRenderer (copies moved into their tiles by the renderer's pixel_offsets) then TiledSilhouetteMSE (`_mse_rows`)
    (gutters left out): d loss / d world vertices of two boxes, along random directions."""
    from tigradsim.fitting.batch_render import AtlasRenderer, TiledSilhouetteMSE

    v, f = meshes.box_surface((0.3, 0.2, 0.2))
    v = np.asarray(v, dtype=np.float64) + np.array([0.0, 0.1, 0.0])
    V = len(v)
    faces = np.concatenate([f, np.asarray(f) + V]).astype(np.int32)
    atlas = AtlasRenderer(camera(), faces, np.repeat([0, 1], V), copies=2, frames=1, sigma=SIGMA)
    verts = ti.Vector.field(3, float, shape=(1, 2 * V), needs_grad=True)
    verts.from_numpy(np.concatenate([v, v + np.array([0.03, 0.0, -0.02])])[None])
    atlas.render(verts, 0, 0)
    target = atlas.renderer.image.to_numpy()[..., -1]
    verts.from_numpy(np.concatenate([v * 1.05, v + np.array([0.0, 0.02, 0.0])])[None])
    mse = TiledSilhouetteMSE(atlas.renderer.image, target, atlas.mask(), RES * RES)
    loss = ti.field(float, shape=(), needs_grad=True)

    def run():
        atlas.render(verts, 0, 0)
        mse(loss)

    rep = tgs.check_gradient(run, loss, [verts], n_dirs=3, rtol=1e-5).assert_ok()
    assert loss[None] > 1e-4 and min(abs(d) for d in rep.numeric) > 1e-6     # not a vacuous 0 == 0


def test_optimize_reads_per_copy_values_once_and_retries_a_diverged_step(scenes):
    """`optimize` with `PerCopy` reads the copies' shared field once per history record (`reading()`),
    not once per copy, and its retry after a diverged rollout restores every copy's values, gradients
    and optimizer state: the same path, to the bit, as with the copies' values read one by one."""
    import tigradsim.fitting.batch as fb
    from tigradsim.core.errors import SimulationError
    from tigradsim.fitting.optim import optimize
    field = ti.field(float, shape=6, needs_grad=True)
    target = ti.field(float, shape=6)
    target.from_numpy(np.array([1.0, 2.0, 0.5, 1.5, 3.0, 0.8]))
    loss = ti.field(float, shape=(), needs_grad=True)

    @ti.kernel
    def squares():
        for i in range(6):
            loss[None] += (field[i] - target[i]) ** 2

    runs = []
    for cached in (True, False):
        field.from_numpy(np.array([0.5, 1.0, 2.0, 3.0, 0.7, 1.3]))
        params = [[RowsParam(field, [2 * b, 2 * b + 1], f"m[{b}]", lower=0.05, upper=50.0, log_space=True)]
                  for b in range(3)]
        per_copy = PerCopy.build(lambda p: tgs.Adam(p, lr=0.2), params)
        calls = {"forward": 0, "reads": 0}
        plain_to_numpy = field.to_numpy

        def counted(*a, **k):
            calls["reads"] += 1
            return plain_to_numpy(*a, **k)
        field.to_numpy = counted
        if not cached:
            fb._Tables.usable, usable = staticmethod(lambda ps: False), fb._Tables.usable
        try:
            def forward():
                calls["forward"] += 1
                squares()
                if calls["forward"] == 3:          # the second step's rollout "diverges" once
                    raise SimulationError("injected")
            hist = optimize(forward, loss, per_copy, iters=4, log_every=0)
        finally:
            del field.to_numpy
            if not cached:
                fb._Tables.usable = usable
        runs.append((field.to_numpy(), np.array(hist.loss), hist.retries, calls["reads"]))
    (vals, losses, retries, reads), (vals_u, losses_u, retries_u, reads_u) = runs
    assert retries == retries_u == 1
    np.testing.assert_array_equal(vals, vals_u)
    np.testing.assert_array_equal(losses, losses_u)
    assert losses[-1] < losses[0]
    # per iteration: one read for the record and one for the snapshot (and one per step), against
    # one per copy for each of them
    assert reads < reads_u / 2, (reads, reads_u)


@pytest.mark.parametrize("make", [lambda p: tgs.Adam(p, lr=0.1), lambda p: tgs.BFGS(p, lr=0.05)], ids=["adam", "bfgs"])
def test_per_copy_step_reads_each_table_once_and_steps_as_each_copy_alone(scenes, make, monkeypatch):
    """`PerCopy.step` reads a shared field's values and gradient once and writes it once (`_Tables`), and
    moves every copy's rows exactly as stepping the copies' optimizers one by one does."""
    import tigradsim.fitting.batch as fb
    field = ti.field(float, shape=6, needs_grad=True)
    start = np.array([0.5, 1.0, 2.0, 3.0, 0.7, 1.3])
    grads = [np.array([0.3, -0.2, 0.1, 0.4, -0.5, 0.25]), np.array([0.1, 0.2, -0.3, 0.05, 0.2, -0.1])]
    results = []
    for cached in (True, False):
        field.from_numpy(start)
        params = [[RowsParam(field, [0, 1], f"m[{b}]", lower=0.05, upper=50.0, log_space=b == 0)]
                  if b < 2 else [RowsParam(field, [4, 5], "m[2]")] for b in range(3)]
        per_copy = PerCopy.build(make, params)
        reads = []
        if not cached:
            monkeypatch.setattr(fb._Tables, "usable", staticmethod(lambda ps: False))
        orig = fb._Tables.values
        monkeypatch.setattr(fb._Tables, "values",
                            lambda self, f, dirty=False: (reads.append(id(f) not in self._values), orig(self, f, dirty))[1])
        for g in grads:
            field.grad.from_numpy(g)
            per_copy.step()
        results.append(field.to_numpy())
        if cached:           # the field read once a step, every other use served from the table
            assert sum(reads) == len(grads) < len(reads) and fb._Tables.active is None
        else:
            assert not reads
        monkeypatch.undo()
    np.testing.assert_array_equal(results[0], results[1])
    assert not np.allclose(results[0], start)
