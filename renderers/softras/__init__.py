"""The soft rasterizer as stages (`rasterizer.py` is the facade; each module's docstring says its part):

    options.py     the option objects (Coverage, Surface, Blending, VertexMap, Schedule) and their checks
    coverage.py    distances, the coverage law and its adjoints (once)
    projection.py  the camera, its correction, the projection and per-face geometry   (Projector)
    shading.py     colours, lights, the per-pixel blend                                 (Shader)
    binning.py     faces into tiles                                                     (Binner)
    pairs.py       the (pixel, face) pair list: composite and backward                  (PairList)
    lanes.py       silhouettes in SIMD pixel lanes, no pair list                        (PixelLanes)
    kept.py        what the backward pass needs of each frame                           (KeptFrames)
    reference.py   a slow numpy float64 rasterizer of the same model, for the tests
"""
from .options import (BLENDS, COLOR_MODES, KEEP_FRAMES_MAX_BYTES, NORMALS, PIXEL_LANES_MIN, SHADINGS, Blending,
                      Coverage, RendererWarning, Schedule, Surface, VertexMap, edge_softness_for_edge,
                      sigma_for_edge)
from .rasterizer import SoftRasterizer

__all__ = ["SoftRasterizer", "RendererWarning", "edge_softness_for_edge", "sigma_for_edge", "SHADINGS", "COLOR_MODES", "NORMALS", "BLENDS",
           "KEEP_FRAMES_MAX_BYTES", "PIXEL_LANES_MIN", "Coverage", "Surface", "Blending", "VertexMap", "Schedule"]
