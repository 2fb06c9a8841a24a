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
