"""Differentiable soft rasterizer (imported as tigradsim.renderers)."""
