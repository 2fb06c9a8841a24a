"""The differentiable SVD (`tigradsim.core.svd3`) and the MPM return mappings: factors, derivatives against
float64 central differences (distinct and repeated singular values), the plastic materials' parameters
through a few MPM steps, and their physics (plasticine keeps a dent, sand spreads into a pile)."""
import numpy as np
import pytest
import taichi as ti

import tigradsim as tgs
from tigradsim.core.svd3 import isotropic3, svd3
from mpm_scenes import StateLoss, block_scene, watch


@pytest.fixture(scope="module", autouse=True)
def _f64():
    tgs.init(arch="cpu", precision="f64")
    yield


@ti.data_oriented
class SVDProbe:
    def __init__(self, Fs, seed=0):
        n = len(Fs)
        rng = np.random.default_rng(seed)
        self.F = ti.Matrix.field(3, 3, float, shape=n, needs_grad=True)
        self.F.from_numpy(np.asarray(Fs, dtype=np.float64))
        self.out = ti.Matrix.field(3, 3, float, shape=(n, 3))
        self.W = ti.Matrix.field(3, 3, float, shape=n)
        self.W.from_numpy(rng.standard_normal((n, 3, 3)))
        self.w = ti.Vector.field(3, float, shape=n, needs_grad=True)
        self.w.from_numpy(rng.standard_normal((n, 3)))
        self.loss = ti.field(float, shape=(), needs_grad=True)

    @ti.kernel
    def factors(self):
        for i in range(self.F.shape[0]):
            U, sig, V = svd3(self.F[i])
            self.out[i, 0] = U
            self.out[i, 1] = ti.Matrix([[sig[0], 0, 0], [0, sig[1], 0], [0, 0, sig[2]]])
            self.out[i, 2] = V

    @ti.kernel
    def isotropic(self):
        """sum W : U diag(log sigma) V^T + w_0 |sigma|^2: smooth in F even where singular values repeat."""
        for i in range(self.F.shape[0]):
            G, sig = isotropic3(self.F[i], _log_of, self.w[i])
            self.loss[None] += (self.W[i] * G).sum() + self.w[i][0] * (sig * sig).sum()

    @ti.kernel
    def coupled(self):
        """sum W : U diag(g) V^T with g_i = exp(eps_i - k |dev eps| (eps_i - mean eps)), eps = log sigma: a
        return-mapping-like g whose components depend on all singular values (g_i = g_j at a repeated pair,
        and dg_i/dsigma_j != 0)."""
        for i in range(self.F.shape[0]):
            G, sig = isotropic3(self.F[i], _shrink_deviator, self.w[i])
            self.loss[None] += (self.W[i] * G).sum()

    @ti.kernel
    def factors_loss(self):
        """sum W : U + w . sigma + W^T : V (the factors themselves: distinct singular values only)."""
        for i in range(self.F.shape[0]):
            U, sig, V = svd3(self.F[i])
            self.loss[None] += (self.W[i] * U).sum() + self.w[i].dot(sig) + (self.W[i].transpose() * V).sum()


@ti.func
def _log_of(sig, p):
    return ti.log(sig)


@ti.func
def _shrink_deviator(sig, p):
    eps = ti.log(sig)
    dev = eps - eps.sum() / 3.0
    return ti.exp(eps - (0.3 + 0.1 * p[1]) * ti.sqrt(dev.dot(dev) + 1e-2) * dev)


def _rot(rng):
    q, _ = np.linalg.qr(rng.standard_normal((3, 3)))
    return q * np.sign(np.linalg.det(q))


def _distinct(rng, n=4):
    return [_rot(rng) @ np.diag(rng.uniform(0.5, 1.5, 3) + [0.6, 0.3, 0.0]) @ _rot(rng) for _ in range(n)]


def test_factors():
    rng = np.random.default_rng(0)
    Fs = _distinct(rng) + [np.diag([1.0, 1.0, 1.0]), _rot(rng) @ np.diag([1.2, 0.9, -0.7]) @ _rot(rng)]
    probe = SVDProbe(Fs)
    probe.factors()
    out = probe.out.to_numpy()
    for F, (U, S, V) in zip(Fs, out):
        assert np.abs(U @ S @ V.T - F).max() < 1e-10
        assert np.abs(U.T @ U - np.eye(3)).max() < 1e-10 and np.abs(V.T @ V - np.eye(3)).max() < 1e-10
        assert np.linalg.det(U) > 0 and np.linalg.det(V) > 0
        s = np.diag(S)
        assert s[0] >= s[1] >= abs(s[2]) - 1e-12 and np.sign(s[2]) == np.sign(np.linalg.det(F))
        assert np.allclose(np.abs(s), np.linalg.svd(F, compute_uv=False), atol=1e-10)


def test_derivative_of_the_factors():
    probe = SVDProbe(_distinct(np.random.default_rng(1)))
    tgs.check_gradient(probe.factors_loss, probe.loss, [probe.F], direction_count=3, eps=1e-6, rtol=1e-5).assert_ok()


def _near_repeated(rng):
    R1, R2 = _rot(rng), _rot(rng)
    return [R1 @ np.diag([1.0, 1.0 + 1e-9, 0.8]) @ R2, np.eye(3), R2 @ np.diag([1.3, 0.9, 0.9]) @ R1,
            R1 @ np.diag([1.1, 1.1, 1.1 - 3e-6]) @ R2]


def test_derivative_near_repeated_singular_values():
    """sigma = (1, 1 + 1e-9, 0.8), F = I, (1.3, 0.9, 0.9) and a triple within 3e-6: the
    derivative of the isotropic U diag(log sigma) V^T (`isotropic3`: divided differences; the clamped-gap
    Omega of `svd3` was 23-70 % off here), at float64 FD tolerance 1e-5."""
    probe = SVDProbe(_near_repeated(np.random.default_rng(2)))
    tgs.check_gradient(probe.isotropic, probe.loss, [probe.F], direction_count=3, eps=1e-6, rtol=1e-5).assert_ok()


def test_derivative_of_a_coupled_isotropic_function():
    """A g whose components couple (a shrunk deviator of log sigma), at repeated, nearly repeated and
    distinct singular values, and in its parameter (through p = w_i)."""
    rng = np.random.default_rng(3)
    probe = SVDProbe(_near_repeated(rng) + _distinct(rng, 2))
    tgs.check_gradient(probe.coupled, probe.loss, [probe.F, probe.w], direction_count=3, eps=1e-6,
                       rtol=1e-5).assert_ok()


@pytest.mark.slow           # the probe compiled twice
def test_float32_derivative_at_repeated_singular_values():
    """In float32 (pairs closer than 3e-3 take the spread secant) the Tape derivative of the coupled
    isotropic function, at F = I and nearly repeated singular values, is finite and within 1e-3 (relative
    to its largest entry) of the float64 one."""
    rng = np.random.default_rng(5)
    Fs = _near_repeated(rng) + _distinct(rng, 1)
    grads = {}
    for precision in ("f32", "f64"):
        tgs.init(arch="cpu", precision=precision)
        probe = SVDProbe(Fs)
        with ti.ad.Tape(probe.loss):
            probe.coupled()
        grads[precision] = probe.F.grad.to_numpy().astype(np.float64)
    g32, g64 = grads["f32"], grads["f64"]
    assert np.all(np.isfinite(g32))
    assert np.abs(g32 - g64).max() < 1e-3 * np.abs(g64).max(), np.abs(g32 - g64).max() / np.abs(g64).max()


@pytest.mark.slow           # ~260 s each from an empty cache in the suite with Taichi's IR passes, 70-85 s without
@pytest.mark.parametrize("material,params", [
    ("mpm_von_mises", {"E": 2e3, "nu": 0.3, "yield_stress": 20.0}),
    ("mpm_drucker_prager", {"E": 2e3, "nu": 0.3, "friction_angle": 35.0}),
])
def test_return_mapping_gradients(material, params, f64_without_ir_passes):
    """A block hitting the floor hard enough to yield: d loss / d (E, nu, yield or friction angle, density,
    initial velocity) through the return mapping, at float64 FD tolerance 1e-5."""
    model, obj = block_scene(material, params, box=((0.375, 0.0, 0.375), (0.625, 0.25, 0.625)),
                             velocity=(0.4, -1.5, 0.2))
    sim = tgs.Simulator(model, dt=1e-3, steps=8)
    loss = StateLoss(model)
    watch(sim, loss)
    sim.run()
    assert np.abs(sim.final_state("mpm_plastic")).max() > 1e-6      # the return mapping did act
    tgs.check_gradient(sim.run, loss.loss, [model.mpm_params, model.mpm_density, model.mpm_v0],
                       direction_count=2, eps=1e-6, rtol=1e-5).assert_ok()


def test_bad_friction_angle():
    b = tgs.SceneBuilder()
    b.add_mpm_grid(lower=(0, 0, 0), upper=(1, 1, 1), resolution=8)
    with pytest.raises(ValueError, match=r"'friction_angle'.*\(0, 90\), got 95"):
        b.add_mpm(box=((0.25, 0.25, 0.25), (0.75, 0.75, 0.75)), material="mpm_drucker_prager",
                  params={"friction_angle": 95.0})


def _drop(material, params, steps, velocity=(0.0, -2.0, 0.0)):
    b = tgs.SceneBuilder(gravity=(0, -9.8, 0))
    b.add_mpm_grid(lower=(0, 0, 0), upper=(1, 1, 1), resolution=16, mu=0.5)
    b.add_mpm(box=((0.375, 0.0, 0.375), (0.625, 0.25, 0.625)), material=material, params=params,
              density=1000.0, velocity=velocity, particles_per_cell=8)
    model = b.finalize(requires_grad=False)
    sim = tgs.Simulator(model, dt=5e-4, steps=steps)
    x0 = model.get("mpm_x0")
    sim.run()
    return x0, sim.final_state("mpm_x"), sim


@pytest.mark.slow          # two 600-step rollouts of 1,000 particles
def test_plasticine_keeps_a_dent_and_sand_spreads():
    """Pushed down at 2 m/s onto the floor: elastic jelly springs back higher than plasticine, whose
    squash stays; sand (no cohesion) spreads wider than it started."""
    x0, jelly, _ = _drop("mpm_fixed_corotated", {"E": 5e4, "nu": 0.3}, 600)
    _, plasticine, _ = _drop("mpm_von_mises", {"E": 5e4, "nu": 0.3, "yield_stress": 300.0}, 600)
    _, sand, _ = _drop("mpm_drucker_prager", {"E": 5e4, "nu": 0.3, "friction_angle": 30.0}, 600)
    top = lambda x: np.percentile(x[:, 1], 95)
    width = lambda x: np.percentile(x[:, 0], 95) - np.percentile(x[:, 0], 5)
    assert top(plasticine) < top(jelly) - 0.02
    assert width(sand) > width(x0) + 0.05
