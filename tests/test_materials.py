"""Every registered material (built-ins and installed plugins): P = dPsi/dF, P at rest,
small-strain limit, frame indifference, Tape gradients; the differentiable polar rotation."""
import numpy as np
import pytest
import taichi as ti

import tigradsim as tgs
from tigradsim.core.registry import (evaluate_energy, evaluate_stress, get_material, lame_from_neo_hookean,
                                lame_from_young_poisson, list_materials, neo_hookean_from_lame)

MATERIALS = list_materials()


@pytest.fixture(scope="module", autouse=True)
def _taichi_f64():
    tgs.init(arch="cpu", precision="f64")
    yield


def _values(mat):
    return {k: (1.0 if d is None else d) for k, d in mat.params.items()}


def _rotation(rng):
    q = rng.standard_normal(4)
    w, x, y, z = q / np.linalg.norm(q)
    return np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
                     [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
                     [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)]])


def _sample_F(mat, rng, n_small=3, n_large=3):
    """F near the rest shape and F with large rotation + stretch (det > 0 for tets)."""
    rest = np.eye(*mat.F_shape)
    out = [rest + 0.05 * rng.standard_normal(mat.F_shape) for _ in range(n_small)]
    while len(out) < n_small + n_large:
        F = _rotation(rng) @ (rest + 0.3 * rng.standard_normal(mat.F_shape))
        if mat.F_shape == (3, 3) and np.linalg.det(F) < 0.2:
            continue
        out.append(F)
    return np.array(out)


def _rel(a, b, scale):
    return float(np.max(np.abs(np.asarray(a) - np.asarray(b)))) / scale


@pytest.mark.parametrize("name", MATERIALS)
def test_stress_is_energy_gradient(name):
    mat = get_material(name)
    if not mat.has_energy:
        pytest.skip(f"{name} defines no energy")
    rng = np.random.default_rng(1)
    values = _values(mat)
    Fs = _sample_F(mat, rng)
    nr, nc = mat.F_shape
    h = 1e-5
    pert = []
    for F in Fs:
        for a in range(nr):
            for b in range(nc):
                for s in (1, -1):
                    G = F.copy()
                    G[a, b] += s * h
                    pert.append(G)
    e = evaluate_energy(name, np.array(pert), values).reshape(len(Fs), nr, nc, 2)
    fd = (e[..., 0] - e[..., 1]) / (2 * h)
    P = evaluate_stress(name, Fs, values)
    scale = np.abs(P).max() + max(abs(v) for v in values.values())
    assert _rel(P, fd, scale) < 1e-7, (name, P - fd)


@pytest.mark.parametrize("name", MATERIALS)
def test_rest_state_is_stress_free(name):
    mat = get_material(name)
    values = _values(mat)
    rest = np.eye(*mat.F_shape)
    P = evaluate_stress(name, rest, values)
    scale = max(abs(v) for v in values.values())
    assert np.abs(P).max() <= 1e-10 * scale, P
    if mat.has_energy and mat.__module__.startswith("tigradsim.materials"):
        assert abs(float(evaluate_energy(name, rest, values))) <= 1e-10 * scale


def _linear_stress(H, mu, lam):
    nr, nc = H.shape
    eps = 0.5 * (H[:nc, :nc] + H[:nc, :nc].T)
    S = 2 * mu * eps + lam * np.trace(eps) * np.eye(nc)
    return np.vstack([S, np.zeros((nr - nc, nc))])


@pytest.mark.parametrize("name", MATERIALS)
def test_small_strain_limit_is_linear_elasticity(name):
    mat = get_material(name)
    if mat.kind not in ("tet", "shell"):
        pytest.skip(f"no linear reference for kind {mat.kind!r}")
    mu_l, lam_l = 1.0e3, 2.5e3
    try:
        values = mat.from_lame(mu_l, lam_l)
    except NotImplementedError:
        pytest.skip(f"{name} has no from_lame")
    rng = np.random.default_rng(2)
    delta = 1e-6
    rest = np.eye(*mat.F_shape)
    Hs = rng.standard_normal((4,) + mat.F_shape)
    P = evaluate_stress(name, rest + delta * Hs, values) / delta
    ref = np.array([_linear_stress(H, mu_l, lam_l) for H in Hs])
    assert _rel(P, ref, np.abs(ref).max()) < 1e-4, (name, P - ref)


@pytest.mark.parametrize("name", MATERIALS)
def test_frame_indifference(name):
    mat = get_material(name)
    if not mat.rotation_invariant:
        pytest.skip(f"{name} is not rotation invariant (by design)")
    rng = np.random.default_rng(3)
    values = _values(mat)
    Fs = _sample_F(mat, rng)
    Qs = np.array([_rotation(rng) for _ in Fs])
    QF = np.einsum("kij,kjl->kil", Qs, Fs)
    P, PQ = evaluate_stress(name, Fs, values), evaluate_stress(name, QF, values)
    assert _rel(PQ, np.einsum("kij,kjl->kil", Qs, P), np.abs(P).max()) < 1e-9
    if mat.has_energy:
        e, eQ = evaluate_energy(name, Fs, values), evaluate_energy(name, QF, values)
        assert _rel(eQ, e, np.abs(e).max()) < 1e-9


@pytest.mark.parametrize("name", MATERIALS)
def test_tape_gradient_of_stress(name):
    """d/dF and d/dp of sum_i P(F_i, p) : W_i through ti.ad.Tape against finite differences."""
    mat = get_material(name)
    rng = np.random.default_rng(4)
    nr, nc = mat.F_shape
    npar = max(mat.param_count, 1)
    Fs = _sample_F(mat, rng, 2, 2)
    n = len(Fs)
    F = ti.Matrix.field(nr, nc, float, shape=n, needs_grad=True)
    W = ti.Matrix.field(nr, nc, float, shape=n)
    p = ti.Vector.field(npar, float, shape=(), needs_grad=True)
    loss = ti.field(float, shape=(), needs_grad=True)
    F.from_numpy(Fs)
    W.from_numpy(rng.standard_normal((n, nr, nc)))
    pv = mat.param_vector(_values(mat)) if mat.param_count else np.ones(1)
    p.from_numpy(pv * rng.uniform(0.8, 1.2, size=pv.shape))

    @ti.kernel
    def run_kernel(mat: ti.template()):
        for i in F:
            P = mat.stress(F[i], p[None])
            loss[None] += (P * W[i]).sum()

    # each parameter stepped relative to its own size (E ~ 1e4 and nu ~ 0.3 in one vector: a step of 1e4 x eps
    # on nu would measure the curvature in 1 - 2 nu, not the derivative)
    scale = np.maximum(np.abs(pv), 1e-3) if mat.param_count else 1.0
    tgs.check_gradient(lambda: run_kernel(mat), loss, [F, p], n_dirs=3, eps=1e-6, rtol=1e-5,
                       scale=[1.0, scale]).assert_ok()


# ---------------------------------------------------------------------------
# polar rotation

from tigradsim.core.linalg import polar_rotation  # noqa: E402


def _polar_np(F):
    U, _, Vt = np.linalg.svd(F)
    R = U @ Vt
    return R


def _polar_rotations(Fs):
    """`polar_rotation` of each (3, 3) matrix in Fs (n, 3, 3), computed in a Taichi kernel."""
    Fin = ti.Matrix.field(3, 3, float, shape=len(Fs))
    Rout = ti.Matrix.field(3, 3, float, shape=len(Fs))
    Fin.from_numpy(Fs)

    @ti.kernel
    def k():
        for i in Fin:
            Rout[i] = polar_rotation(Fin[i])

    k()
    return Rout.to_numpy().astype(np.float64)


def test_polar_rotation_accuracy():
    rng = np.random.default_rng(5)
    Fs = []
    while len(Fs) < 64:
        F = _rotation(rng) @ (np.eye(3) + 0.5 * rng.standard_normal((3, 3)))
        s = np.linalg.svd(F, compute_uv=False)
        if np.linalg.det(F) > 0 and s.min() > 0.05 and s.max() < 5:
            Fs.append(F)
    Fs.append(np.diag([0.5, 1.0, -1.2]))  # inverted: a reflection, but finite
    Fs = np.array(Fs)
    R = _polar_rotations(Fs)
    assert np.all(np.isfinite(R))
    good, inv = R[:-1], R[-1]
    I = np.eye(3)
    assert np.abs(np.einsum("kji,kjl->kil", good, good) - I).max() < 1e-12
    assert np.abs(np.linalg.det(good) - 1).max() < 1e-12
    S = np.einsum("kji,kjl->kil", good, Fs[:-1])
    assert np.abs(S - np.transpose(S, (0, 2, 1))).max() < 1e-11
    assert np.all(np.linalg.eigvalsh(S) > 0)
    assert np.abs(good - np.array([_polar_np(F) for F in Fs[:-1]])).max() < 1e-11
    assert np.allclose(inv, np.diag([1.0, 1.0, -1.0]))


@pytest.mark.parametrize("precision", ["f32", "f64"])
def test_polar_rotation_converged_at_its_iteration_count(precision, request, monkeypatch):
    """The Newton iterations `polar_rotation` unrolls (6 in float32, 7 in float64) have converged for
    singular values across [0.01, 10]: 12 iterations change R only by rounding, and R is U V^T of
    the SVD to within the float's precision times the conditioning."""
    request.getfixturevalue(precision)
    request.addfinalizer(lambda: tgs.init(arch="cpu", precision="f64"))     # this module's default
    from tigradsim.core import linalg
    rng = np.random.default_rng(11)
    n = 300
    s = np.exp(rng.uniform(np.log(0.01), np.log(10.0), (n, 3)))
    s[::3, 0], s[::3, 1] = 0.01, 10.0
    U = np.array([_rotation(rng) for _ in range(n)])
    V = np.array([_rotation(rng) for _ in range(n)])
    Fs = np.einsum("kij,kj,klj->kil", U, s, V)
    truth = np.einsum("kij,klj->kil", U, V)
    assert linalg.polar_iterations() == {"f32": 6, "f64": 7}[precision]
    R = _polar_rotations(Fs)
    monkeypatch.setitem(linalg.POLAR_ITERS, precision, 12)
    R12 = _polar_rotations(Fs)
    rounding = {"f32": 1e-6, "f64": 1e-14}[precision]
    assert np.abs(R - R12).max() < rounding
    assert np.abs(R - truth).max() < {"f32": 2e-5, "f64": 1e-13}[precision]     # measured 7e-6, 1.1e-14


@pytest.mark.parametrize("spread", ["moderate", "wide"])
def test_polar_rotation_gradient(spread):
    """Tape gradient of polar_rotation (float64, `polar_iterations()` = 7) against central finite
    differences along random directions: moderate deformations, and singular values across [0.1, 5]."""
    rng = np.random.default_rng(6)
    n = 4
    if spread == "moderate":
        Fs = np.array([_rotation(rng) @ (np.eye(3) + 0.3 * rng.standard_normal((3, 3))) for _ in range(n)])
        Fs[np.linalg.det(Fs) < 0] *= -1
    else:
        s = np.exp(rng.uniform(np.log(0.1), np.log(5.0), (n, 3)))
        s[0, :2] = 0.1, 5.0
        Fs = np.array([_rotation(rng) @ np.diag(si) @ _rotation(rng).T for si in s])
    F = ti.Matrix.field(3, 3, float, shape=n, needs_grad=True)
    W = ti.Matrix.field(3, 3, float, shape=n)
    loss = ti.field(float, shape=(), needs_grad=True)
    F.from_numpy(Fs)
    W.from_numpy(rng.standard_normal((n, 3, 3)))

    @ti.kernel
    def run():
        for i in F:
            R = polar_rotation(F[i])
            loss[None] += (R * W[i]).sum()

    tgs.check_gradient(run, loss, F, n_dirs=4, eps=1e-6, rtol=1e-6).assert_ok()


def test_inverted_elements_give_finite_stress():
    F = np.diag([0.5, 0.8, -0.3])
    for name in ("neo_hookean", "corotated", "stvk", "linear"):
        P = evaluate_stress(name, F, {})
        assert np.all(np.isfinite(P)), name
    # stable neo-Hookean pushes an inverted element back: the energy decreases towards J > 0
    P = evaluate_stress("neo_hookean", F, {})
    assert P[2, 2] < 0  # increasing F33 (towards positive J) lowers the energy
    assert np.all(np.isfinite(evaluate_stress("neo_hookean", np.zeros((3, 3)), {})))
    assert np.all(np.isfinite(evaluate_stress("membrane", np.zeros((3, 2)), {})))


# ---------------------------------------------------------------------------
# elastic constants

def test_lame_conversions():
    mu, lam = lame_from_young_poisson(2.5, 0.25)
    assert np.isclose(mu, 1.0) and np.isclose(lam, 1.0)
    E, nu = 1e4, 0.3
    mu, lam = lame_from_young_poisson(E, nu)
    assert np.isclose(E, mu * (3 * lam + 2 * mu) / (lam + mu)) and np.isclose(nu, lam / (2 * (lam + mu)))
    with pytest.raises(ValueError):
        lame_from_young_poisson(1.0, 0.5)
    m, l = neo_hookean_from_lame(3.0, 5.0)
    assert np.isclose(m, 4.0) and np.isclose(l, 7.5)
    assert np.allclose(lame_from_neo_hookean(m, l), (3.0, 5.0))
    assert get_material("neo_hookean").from_lame(3.0, 5.0) == {"mu": 4.0, "lam": 7.5}
    assert get_material("membrane").from_lame(3.0, 5.0) == {"mu": 3.0, "lam": 8.0}
    assert get_material("corotated").from_lame(3.0, 5.0) == {"mu": 3.0, "lam": 5.0}
