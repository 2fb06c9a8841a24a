"""The soft rasterizer (moved here from renderers/softras.py; split into stage modules next)."""
from .rasterizer import SoftRasterizer, RendererWarning, sigma_for_edge, SHADINGS, COLOR_MODES, NORMALS, BLENDS
