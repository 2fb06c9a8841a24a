"""Differentiable soft rasterizer (imported as tigradsim.renderers).

    cam = Camera(eye=(0, 0, 3), target=(0, 0, 0), fov=60, width=64, height=64)
    ren = SoftRasterizer(cam, faces, vertex_count, frames=1, shading="lambert")
    ren.render(verts_field, slot, frame)      # one differentiable Tape entry
    ImageMSE(ren.image, target)(loss)          # loss[None] += mean squared error

    cam = Camera.from_opencv(K, R, t, width, height)   # a calibrated camera (OpenCV pinhole)
    ren.set_background(plate)                  # RGB = A C + (1 - A) plate (blend="coverage")
    tgs.Param(ren.camera_delta, "camera_pose")  # differentiable camera refinement

Conventions (OpenCV and look-at cameras, NDC, pixel centres, winding) are
documented in `camera.py`; the rasterizer's formulas (coverage and softmax
blending, the camera correction) and kernel structure in the `softras/` package, one module per stage
(its `__init__` lists them); options as small objects (`Coverage`, `Surface`, `Blending`, `VertexMap`,
`Schedule`) or, as before, keywords.  `ParticleSplatter` (splats.py) draws point-sampled matter (MPM
particles) as soft discs, with the rasterizer's silhouette image layout.
"""
from .camera import Camera, rodrigues, rotation_vector
from .softras import (SoftRasterizer, RendererWarning, edge_softness_for_edge, sigma_for_edge, SHADINGS, COLOR_MODES, NORMALS, BLENDS,
                      Coverage, Surface, Blending, VertexMap, Schedule)
from .losses import ImageMSE, SilhouetteMSE, SoftIoU, load_target
from .blurred import BlurredImageMSE, gaussian_blur
from .splats import ParticleSplatter, splat_silhouette_np
from ._mesh import icosphere, box, load_obj

__all__ = ["Camera", "rodrigues", "rotation_vector", "SoftRasterizer", "RendererWarning", "edge_softness_for_edge", "sigma_for_edge", "SHADINGS", "COLOR_MODES",
           "NORMALS", "BLENDS", "Coverage", "Surface", "Blending", "VertexMap", "Schedule", "ImageMSE", "SilhouetteMSE", "SoftIoU",
           "BlurredImageMSE", "gaussian_blur", "ParticleSplatter", "splat_silhouette_np", "load_target", "icosphere", "box", "load_obj"]
