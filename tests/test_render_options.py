"""The rasterizer's option objects (`Coverage`, `Surface`, `Blending`, `VertexMap`, `Schedule`) and the
keywords they replace: the same renderer either way, a keyword replaces its field, clear errors."""
import numpy as np
import pytest

from tigradsim.renderers import Blending, Camera, Coverage, Schedule, SoftRasterizer, Surface, VertexMap

FACES = np.array([[0, 1, 2], [0, 2, 3]])
VERTS = np.array([[-0.5, -0.4, 0.0], [0.5, -0.5, 0.1], [0.4, 0.5, 0.0], [-0.4, 0.4, -0.1]])


def _cam():
    return Camera(eye=(0.1, 0.2, 2.5), width=12, height=10)


def test_option_objects_and_keywords_make_the_same_renderer():
    a = SoftRasterizer(_cam(), FACES, 4, coverage=Coverage(edge_softness=3e-3),
                       surface=Surface(shading="color", vertex_colors=(0.2, 0.5, 0.7)),
                       blending=Blending(gamma=0.05, background=(0.1, 0.1, 0.1)), vertex_map=VertexMap(),
                       schedule=Schedule(keep_frames=False))
    b = SoftRasterizer(_cam(), FACES, 4, sigma=3e-3, shading="color", vertex_colors=(0.2, 0.5, 0.7), gamma=0.05,
                       background=(0.1, 0.1, 0.1), keep_frames=False)
    assert a.options == b.options
    assert a.sigma == a.edge_softness == 3e-3 and not a.keep_frames and a.shading == "color"
    img = a.render_numpy(VERTS)
    assert img[..., 3].max() > 0.5
    np.testing.assert_array_equal(img, b.render_numpy(VERTS))
    # the counts are `*_count`; the older `num_*` names (keyword and attributes) still work
    c = SoftRasterizer(_cam(), FACES, num_vertices=4, sigma=3e-3, shading="color", vertex_colors=(0.2, 0.5, 0.7),
                       gamma=0.05, background=(0.1, 0.1, 0.1), keep_frames=False)
    np.testing.assert_array_equal(img, c.render_numpy(VERTS))
    assert (c.vertex_count, c.face_count, c.light_count) == (c.num_vertices, c.num_faces, c.num_lights) == (4, 2, 1)
    assert c.num_pairs == c.pair_count


def test_a_keyword_replaces_its_field_of_an_option_object():
    ren = SoftRasterizer(_cam(), FACES, 4, coverage=Coverage(edge_softness=1e-3, coverage_eps=1e-3), sigma=2e-3)
    assert ren.sigma == 2e-3 and ren.coverage_eps == 1e-3
    assert ren.options["coverage"] == Coverage(edge_softness=2e-3, coverage_eps=1e-3)


def test_option_errors_name_the_option():
    with pytest.raises(TypeError, match="unknown option sigmaa=0.001"):
        SoftRasterizer(_cam(), FACES, 4, sigmaa=1e-3)
    with pytest.raises(TypeError, match="sigma and edge_softness"):
        SoftRasterizer(_cam(), FACES, 4, sigma=1e-3, edge_softness=1e-3)
    with pytest.raises(TypeError, match="SoftRasterizer: vertex_count and num_vertices: give one"):
        SoftRasterizer(_cam(), FACES, 4, num_vertices=4)
    with pytest.raises(ValueError, match="SoftRasterizer: vertex_count=None must be a positive integer"):
        SoftRasterizer(_cam(), FACES)
    with pytest.raises(TypeError, match="coverage=.* must be a Coverage"):
        SoftRasterizer(_cam(), FACES, 4, coverage=Surface())
    with pytest.raises(ValueError, match="edge_softness|sigma"):
        SoftRasterizer(_cam(), FACES, 4, coverage=Coverage(edge_softness=-1.0))
