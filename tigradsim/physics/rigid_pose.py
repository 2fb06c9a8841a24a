"""Poses of rigid bodies: unit quaternions (x, y, z, w order, as in Warp) and the vec7 pose / vec6 spatial
vectors of `tigradsim.physics.rigid`, as Taichi functions (and one numpy helper).

Conventions: a pose `q` is vec7 (px, py, pz, qx, qy, qz, qw), the centre-of-mass position [m] and the unit
quaternion rotating body coordinates to world coordinates; a spatial vector is vec6 (angular, linear), e.g.
`body_qd` (w [rad/s], v [m/s]) or `body_f` (torque [N m], force [N]).

A module of its own so that the rigid-body physics (`tigradsim.physics.rigid`, which re-exports these names) and its
observers (`tigradsim.physics.rigid_observers`, re-exported by `tigradsim.physics.rigid`) share them without an import cycle.
"""
import numpy as np
import taichi as ti


def quat_to_matrix_np(q):
    """Rotation matrix of a unit quaternion (x, y, z, w) (numpy)."""
    x, y, z, w = q
    return np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
                     [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
                     [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)]])


def quat_from_axis_angle(axis, angle):
    """Unit quaternion (x, y, z, w) of a rotation by `angle` [rad] about `axis` (3,) (any length > 0), right
    hand rule (numpy).  E.g. a ramp rising towards +x at 20 degrees: a plane collider with
    rotation=quat_from_axis_angle((0, 0, 1), np.radians(20)) (its normal +y turns to (-sin, cos, 0))."""
    a = np.asarray(axis, dtype=np.float64).reshape(-1)
    length = float(np.linalg.norm(a)) if a.shape == (3,) else 0.0
    if not (np.all(np.isfinite(a)) and length > 0):
        raise ValueError(f"axis: expected a finite nonzero 3-vector, got {axis!r}")
    if not np.isfinite(angle):
        raise ValueError(f"angle: expected a finite number [rad], got {angle!r}")
    half = 0.5 * float(angle)
    return np.concatenate([a / length * np.sin(half), [np.cos(half)]])


def quat_from_normal(normal):
    """Unit quaternion (x, y, z, w) of the shortest rotation taking +y to `normal` (3,) (any length > 0) (numpy):
    the rotation of a plane collider whose outward normal is `normal` (a wall: (-1, 0, 0))."""
    n = np.asarray(normal, dtype=np.float64).reshape(-1)
    length = float(np.linalg.norm(n)) if n.shape == (3,) else 0.0
    if not (np.all(np.isfinite(n)) and length > 0):
        raise ValueError(f"normal: expected a finite nonzero 3-vector, got {normal!r}")
    n = n / length
    axis = np.cross([0.0, 1.0, 0.0], n)
    s = float(np.linalg.norm(axis))
    if s < 1e-12:                   # +y itself, or -y: half a turn about x
        return np.array([0.0, 0.0, 0.0, 1.0]) if n[1] > 0 else np.array([1.0, 0.0, 0.0, 0.0])
    return quat_from_axis_angle(axis, np.arctan2(s, n[1]))


# -- Taichi helpers (quaternions are vec4 (x, y, z, w)) -----------------------
@ti.func
def body_rotation(q):
    """Unit quaternion (vec4) of a vec7 body pose."""
    return ti.Vector([q[3], q[4], q[5], q[6]])


@ti.func
def body_position(q):
    return ti.Vector([q[0], q[1], q[2]])


@ti.func
def quat_rotate(r, v):
    """Rotate vec3 v by unit quaternion r (x, y, z, w)."""
    u = ti.Vector([r[0], r[1], r[2]])
    w = r[3]
    return v * (2.0 * w * w - 1.0) + u.cross(v) * (2.0 * w) + u * (2.0 * u.dot(v))


@ti.func
def quat_rotate_inv(r, v):
    """Rotate vec3 v by the inverse of unit quaternion r."""
    u = ti.Vector([r[0], r[1], r[2]])
    w = r[3]
    return v * (2.0 * w * w - 1.0) - u.cross(v) * (2.0 * w) + u * (2.0 * u.dot(v))


@ti.func
def skew(a):
    return ti.Matrix([[0.0, -a[2], a[1]], [a[2], 0.0, -a[0]], [-a[1], a[0], 0.0]])


@ti.func
def spatial(a, b):
    """vec6 (a, b) from two vec3."""
    return ti.Vector([a[0], a[1], a[2], b[0], b[1], b[2]])


@ti.func
def top(a):
    return ti.Vector([a[0], a[1], a[2]])


@ti.func
def bottom(a):
    return ti.Vector([a[3], a[4], a[5]])


@ti.func
def world_point(q, p):
    """World position of body-frame point p for pose q (vec7)."""
    return body_position(q) + quat_rotate(body_rotation(q), p)
