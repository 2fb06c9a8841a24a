"""Rigid bodies: exact mass properties, body placement, and input errors (numpy only, no kernels)."""
import numpy as np
import pytest

import tigradsim as tgs
from tigradsim import meshes
from tigradsim.physics.rigid import RigidBodies, add_body_force, quat_to_matrix_np
from tigradsim.physics.rigid_mass import mass_properties


def _body(builder, index=0):
    return builder.component(RigidBodies).bodies[index]


def test_box_mass_properties():
    v, f = meshes.box_surface((1.0, 2.0, 3.0))
    b = tgs.SceneBuilder()
    b.add_rigid_body(v, f, density=7.0)
    body = _body(b)
    assert body["volume"] == pytest.approx(6.0, rel=1e-14)
    assert body["mass"] == pytest.approx(42.0, rel=1e-14)
    expected = np.diag([2 ** 2 + 3 ** 2, 1 + 3 ** 2, 1 + 2 ** 2]) / 12.0
    np.testing.assert_allclose(body["inertia_unit"], expected, atol=1e-14)


def test_sphere_mass_properties():
    v, f = meshes.icosphere(4, radius=0.7)          # 2562 vertices; the inscribed polyhedron is 0.2% smaller
    volume, com, inertia = mass_properties(v, f)
    assert volume == pytest.approx(4.0 / 3.0 * np.pi * 0.7 ** 3, rel=3e-3)
    np.testing.assert_allclose(com, 0.0, atol=1e-12)
    np.testing.assert_allclose(inertia / volume, np.eye(3) * 0.4 * 0.7 ** 2, rtol=3e-3, atol=1e-12)


def test_cylinder_mass_properties_exact_for_prism():
    n, r, h = 48, 0.3, 1.1
    v, f = meshes.cylinder_surface(r, h, n)
    volume, com, inertia = mass_properties(v, f)
    # the mesh is a prism over a regular n-gon of circumradius r (axis y): exact formulas
    area = n / 2 * r * r * np.sin(2 * np.pi / n)
    polar = r * r / 6.0 * (1 + 2 * np.cos(np.pi / n) ** 2)     # polar moment per unit area
    assert volume == pytest.approx(area * h, rel=1e-12)
    np.testing.assert_allclose(inertia / volume, np.diag([polar / 2 + h * h / 12, polar, polar / 2 + h * h / 12]),
                               rtol=1e-10, atol=1e-14)
    # and close to the smooth cylinder
    np.testing.assert_allclose(np.diag(inertia / volume), [(3 * r * r + h * h) / 12, r * r / 2, (3 * r * r + h * h) / 12],
                               rtol=3e-3)


def test_translated_or_rotated_mesh_gives_the_same_body():
    v, f = meshes.cone_surface(0.4, 0.9, 12)
    rng = np.random.default_rng(1)
    q = rng.normal(size=4)
    q /= np.linalg.norm(q)
    R = quat_to_matrix_np(q)
    shift = np.array([0.3, -1.2, 2.0])
    b = tgs.SceneBuilder()
    b.add_rigid_body(v, f, density=3.0, position=(1.0, 2.0, 3.0), rotation=q)
    b.add_rigid_body(v + shift, f, density=3.0, position=np.array([1.0, 2.0, 3.0]) - R @ shift, rotation=q)
    b.add_rigid_body(v @ R.T, f, density=3.0, position=(1.0, 2.0, 3.0))       # mesh pre-rotated, identity pose
    b0, b1, b2 = (_body(b, i) for i in range(3))
    for other in (b1, b2):
        assert other["mass"] == pytest.approx(b0["mass"], rel=1e-13)
        np.testing.assert_allclose(other["q0"][:3], b0["q0"][:3], atol=1e-13)
    np.testing.assert_allclose(b1["q0"], b0["q0"], atol=1e-13)
    np.testing.assert_allclose(b1["inertia_unit"], b0["inertia_unit"], atol=1e-13)
    np.testing.assert_allclose(b1["vertices"], b0["vertices"], atol=1e-13)
    # world inertia of the pre-rotated mesh equals R I R^T of the rotated body
    np.testing.assert_allclose(b2["inertia_unit"], R @ b0["inertia_unit"] @ R.T, atol=1e-13)
    np.testing.assert_allclose(b2["vertices"], b0["vertices"] @ R.T, atol=1e-13)


# -- errors -------------------------------------------------------------------
def _box():
    return meshes.box_surface((0.2, 0.2, 0.2))


def test_open_mesh_rejected():
    v, f = _box()
    with pytest.raises(ValueError, match="faces.*not closed"):
        tgs.SceneBuilder().add_rigid_body(v, f[:-1], density=1.0)


def test_inconsistent_orientation_rejected():
    v, f = _box()
    f = f.copy()
    f[0] = f[0][::-1]
    with pytest.raises(ValueError, match="faces.*inconsistently oriented"):
        tgs.SceneBuilder().add_rigid_body(v, f, density=1.0)


def test_inward_mesh_rejected():
    v, f = _box()
    with pytest.raises(ValueError, match="faces.*non-positive volume"):
        tgs.SceneBuilder().add_rigid_body(v, f[:, ::-1], density=1.0)


@pytest.mark.parametrize("kwargs, match", [
    (dict(density=0.0), "density"),
    (dict(density=-2.0), "density"),
    (dict(mass=0.0), "mass"),
    (dict(mass=float("nan")), "mass"),
    (dict(density=1.0, mass=1.0), "density, mass"),
    (dict(position=(0.0, float("nan"), 0.0)), "position"),
    (dict(rotation=(0.0, 0.0, 0.0, 2.0)), "rotation.*unit norm"),
    (dict(rotation=(0.0, 0.0, float("nan"), 1.0)), "rotation"),
    (dict(velocity=(0.0, 0.0)), "velocity"),
    (dict(angular_velocity=(float("inf"), 0.0, 0.0)), "angular_velocity"),
    (dict(mu=-0.1), "mu"),
    (dict(ke=-1.0), "ke"),
    (dict(contact_radius=-0.01), "contact_radius"),
    (dict(contact_points=np.zeros((0, 3))), "contact_points"),
])
def test_bad_body_input_raises(kwargs, match):
    v, f = _box()
    with pytest.raises(ValueError, match=match):
        tgs.SceneBuilder().add_rigid_body(v, f, **kwargs)


def test_bad_vertices_and_forces_raise():
    v, f = _box()
    bad = v.copy()
    bad[3, 1] = np.nan
    with pytest.raises(ValueError, match="vertices"):
        tgs.SceneBuilder().add_rigid_body(bad, f)
    with pytest.raises(IndexError, match="faces"):
        tgs.SceneBuilder().add_rigid_body(v, f + 1)
    b = tgs.SceneBuilder()
    body = b.add_rigid_body(v, f)
    with pytest.raises(IndexError, match="body"):
        add_body_force(b, body + 1, force=(1.0, 0.0, 0.0))
    with pytest.raises(ValueError, match="start, end"):
        add_body_force(b, body, force=(1.0, 0.0, 0.0), start=0.5, end=0.1)
    with pytest.raises(ValueError, match="force"):
        add_body_force(b, body, force=(1.0, np.nan, 0.0))


def test_nearly_unit_quaternion_is_normalised():
    v, f = _box()
    b = tgs.SceneBuilder()
    b.add_rigid_body(v, f, rotation=(0.0, 0.0, 0.0, 1.0 + 5e-7))
    assert np.linalg.norm(_body(b)["q0"][3:]) == pytest.approx(1.0, abs=1e-15)
