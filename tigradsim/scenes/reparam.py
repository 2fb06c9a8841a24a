"""Reparametrisations of per-particle fields for coarse-to-fine fits from video.

A video sees a soft body's masses or a cloth's initial velocities only through a few
smooth modes (the outline's motion); fitting every particle's value directly fills the
modes it cannot see with noise.  These `Param`s map a few numbers, or smoothed steps,
onto a whole field:

- `UniformLogMass`: all masses times one factor (1 number);
- `PolynomialLogMass`: log-masses as a low-degree polynomial of the rest position (10 numbers);
- `SmoothedLogMass`: every particle's log-mass, with steps smoothed over the rest shape;
- `RigidVelocity` / `AffineVelocity`: a rigid throw (6 numbers) / an affine field (12);
- `SmoothedVelocity`: every particle's velocity, with smoothed steps.

Each one's hand-written `internal_grad` (the chain rule of the per-particle gradient) is
checked against finite differences in tests/test_sysid_fem.py and tests/test_sysid_cloth.py.
"""
import itertools

import numpy as np

from ..fitting.optim import BasisParam, Param, smoothing_matrix


class SmoothedLogMass(BasisParam):
    """Per-particle masses m = m0 exp(B z): one unknown per particle (z, N numbers),
    where m0 are the masses when the Param is made (the initial guess) and B a
    Gaussian smoothing matrix over the rest positions `rest` (N, 3) [m] (length
    `length` [m]).  The optimiser's steps are smoothed log-space gradients (B (m g)): a
    Sobolev-type preconditioner that keeps them out of particle-to-particle
    patterns the video cannot see, which per-value steps fill with noise.
    Masses are clipped to [lower, upper] [kg]."""

    def __init__(self, field, rest, length, lower=1e-6, upper=10.0, name="mass_z"):
        super().__init__(field, smoothing_matrix(rest, length), name, multiplicative=True,
                         lower=lower, upper=upper)


class UniformLogMass(BasisParam):
    """Coarse stage: all masses scaled by one factor, m = m0 exp(z) (z: 1 number)."""

    def __init__(self, field, name="mass_scale"):
        super().__init__(field, np.ones((field.shape[0], 1)), name, multiplicative=True, lower=1e-6, upper=10.0)


def polynomial_basis(rest, degree):
    """The monomials of degree 0..`degree` in the centred rest positions `rest` (N, 3) [m],
    scaled by their largest distance from the centre so that every column is O(1):
    (N, C(degree + 3, 3)) (1, 4, 10, 20 columns for degree 0..3)."""
    x = np.asarray(rest, dtype=np.float64)
    x = x - x.mean(0)
    x = x / max(float(np.max(np.linalg.norm(x, axis=1))), 1e-12)
    cols = [np.prod(x[:, list(c)], axis=1) for d in range(int(degree) + 1)
            for c in itertools.combinations_with_replacement(range(3), d)]
    return np.stack(cols, 1)


class PolynomialLogMass(BasisParam):
    """Middle stage: masses m = m0 exp(P z), P the monomials of degree <= `degree` in the rest
    positions `rest` (N, 3) [m] (`polynomial_basis`; 10 numbers at degree 2): a smooth density
    described by few enough numbers for Levenberg-Marquardt with a finite-difference Jacobian."""

    def __init__(self, field, rest, degree=2, name="mass_poly"):
        super().__init__(field, polynomial_basis(rest, degree), name, multiplicative=True, lower=1e-6, upper=10.0)


class AffineVelocity(Param):
    """Coarse stage: the velocity field (N, 3) [m/s] restricted to v_i = a + A (x_i - c)
    (12 numbers: a, then A row by row), with x_i the rest positions `rest` (N, 3) [m]
    and c their mean, written into every particle of `field`; its gradient is the
    chain rule of the per-particle gradient (a sum over particles)."""

    def __init__(self, field, rest, name="velocity_affine"):
        self.x = np.asarray(rest, dtype=np.float64) - np.mean(rest, axis=0)
        super().__init__(field, name)

    def __post_init__(self):
        pass        # no Param bounds: the coordinates are not the field's values

    def _basis(self, g):                       # g: (N, 3) -> (12,) = B^T g
        return np.concatenate([g.sum(0), (g[:, :, None] * self.x[:, None, :]).sum(0).reshape(-1)])

    def value(self):
        v = self.field.to_numpy().astype(np.float64)
        # least-squares fit of the affine field to the current velocities
        X = np.concatenate([np.ones((len(self.x), 1)), self.x], 1)
        coef, *_ = np.linalg.lstsq(X, v, rcond=None)          # (4, 3)
        return np.concatenate([coef[0], coef[1:].T.reshape(-1)])

    def internal_grad(self):
        return self._basis(self.field_grad())

    def write(self, value):
        value = np.asarray(value, dtype=np.float64)
        a, A = value[:3], value[3:].reshape(3, 3)
        v = a + self.x @ A.T
        self.field.from_numpy(v.astype(self.field.to_numpy().dtype))


class RigidVelocity(AffineVelocity):
    """Coarse stage: a rigid throw v_i = a + w x (x_i - c) (6 numbers: velocity a of
    the centre [m/s] and angular velocity w [rad/s]), written into every particle of `field`."""

    def __init__(self, field, rest, name="velocity_rigid"):
        super().__init__(field, rest, name)

    def _basis(self, g):                       # (N, 3) -> (6,): sum g, sum x cross g
        return np.concatenate([g.sum(0), np.cross(self.x, g).sum(0)])

    def value(self):
        v = self.field.to_numpy().astype(np.float64)
        a = v.mean(0)
        # least squares for w in v - a = w x x  (i.e. -[x]_x w)
        M = np.concatenate([-_skew(x) for x in self.x])
        w, *_ = np.linalg.lstsq(M, (v - a).reshape(-1), rcond=None)
        return np.concatenate([a, w])

    def write(self, value):
        value = np.asarray(value, dtype=np.float64)
        v = value[:3] + np.cross(value[3:], self.x)
        self.field.from_numpy(v.astype(self.field.to_numpy().dtype))


def best_affine(rest, velocity):
    """The affine field (N, 3) closest (least squares) to `velocity` (N, 3) [m/s] over
    the rest positions `rest` (N, 3) [m]: the floor of an `AffineVelocity` stage."""
    x = np.asarray(rest, dtype=np.float64) - np.mean(rest, axis=0)
    X = np.concatenate([np.ones((len(x), 1)), x], 1)
    return X @ np.linalg.lstsq(X, velocity, rcond=None)[0]


def best_rigid(rest, velocity):
    """The rigid throw (N, 3) closest (least squares) to `velocity` (N, 3) [m/s]: the
    floor of a `RigidVelocity` stage."""
    x = np.asarray(rest, dtype=np.float64) - np.mean(rest, axis=0)
    M = np.concatenate([np.eye(3)[None].repeat(len(x), 0), np.stack([-_skew(p) for p in x])], 2).reshape(-1, 6)
    return (M @ np.linalg.lstsq(M, np.asarray(velocity).reshape(-1), rcond=None)[0]).reshape(-1, 3)


def _skew(x):
    return np.array([[0.0, -x[2], x[1]], [x[2], 0.0, -x[0]], [-x[1], x[0], 0.0]])


class SmoothedVelocity(BasisParam):
    """Fine stage: every particle's own velocity (N, 3) [m/s], v = v0 + B z, where v0
    is the field when the stage starts and B a Gaussian smoothing matrix over the
    rest positions `rest` (N, 3) [m] (length `length` [m]; 0: B = I, plain
    per-particle values), clipped to +-20 m/s.  The optimiser works on z (3 N
    numbers), so its steps are smoothed gradients (B g): a Sobolev-type
    preconditioner that keeps the steps out of the velocity patterns the video
    cannot see (sub-pixel, quickly damped particle-scale jitter), which plain
    per-particle Adam fills with noise."""

    def __init__(self, field, rest, length, name="velocity"):
        self.length = float(length)
        super().__init__(field, smoothing_matrix(rest, length), name, lower=-20.0, upper=20.0)
