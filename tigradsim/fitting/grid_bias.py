"""The MPM grid's bias on a fit's estimate, as a systematic for `fit_report(systematics=...)`.

A fit of MPM matter at grid resolution n (cells along the domain's largest extent, dx = extent / n)
estimates the parameters of the dx model.  Its residuals at the same values but at the finer
resolution round(n * GRID_REFINEMENT), times the Richardson factor q^p / (q^p - 1) (q = the ratio of
the two spacings, p = GRID_ORDER), estimate how far the dx model's estimate sits from the converged
model's: `tigradsim.fitting.refined_model.Refinement`, the same mechanism as the time step's
(tigradsim/fitting/time_step_bias.py).  Used by scene files' [fit] grid_bias (on by default in scenes
of MPM matter; tigradsim/scenes/scene_refined.py, which also says what the finer scene does with the
particles: sampled per cell, they are resampled at the finer cells).

Why 4/3 and not 2: the refined scene keeps the fit's time step (the time step has its own systematic),
and the explicit MPM step's stability limit shrinks with dx (dt <= dx / (2 c)); at 4/3 the finer grid
keeps 3/4 of the coarse one's margin, at 2 only half (the PAC-NeRF elastic fit's estimate, E 9.7e4 Pa at
nu 0.44, has a P-wave speed of 17 m/s: within the safe step of its 50 substeps at 32 cells, 18.8 m/s, and
past it at 48, 12.5 m/s).  It also costs (4/3)^3 = 2.4x one coarse rollout (the
particles are sampled per cell) instead of 8x.

GRID_ORDER = 1, and what was measured: MLS-MPM with quadratic B-splines is second order in dx for smooth
fields in theory, but a silhouette fit sees particles sampled on a per-cell lattice (their boundary's
staircase, and the splats' footprint, are O(dx)) moving through a grid whose wall and contact conditions act
cell-wise (O(dx)).  On the PAC-NeRF elastic clip (Genesis footage, 11 views, 50 substeps) at the truth
(E 1e5 Pa, nu 0.3), the linearised refit from resolution 24 (Jacobian by central differences) moves
(log E, log nu) by (+0.066, -0.213) to resolution 16, (-0.092, +0.164) to 32 and (-0.048, +0.049) to 48.
The signs agree (a finer grid lowers E and raises nu) but the sequence is not monotone (32 moves the
estimate twice as far as 48), so these resolutions are not in the asymptotic range where an order can be
read off: a rotated box's lattice gains or loses whole rows of particles from one resolution to the next.
The plasticine clip agrees: its nu moves the same way from 24 to 16 and to 32.
p = 1 is the order of the O(dx) parts and the more cautious of the two (factor 4 at q = 4/3, against 2.29
for p = 2); against the 48 grid it over-estimates (4 x the 24 -> 32 shift is 4-7x the 24 -> 48 one
times 2).  benchmarks/RESULTS.md ("MPM grid bias") has the fits with it.
"""
from __future__ import annotations

import numpy as np

from .refined_model import Refinement

__all__ = ["GRID_ORDER", "GRID_REFINEMENT", "grid_label", "finer_resolution", "grid_refinement", "grid_systematics"]

# the spacing's order of convergence of what a silhouette fit sees of MLS-MPM (module docstring)
GRID_ORDER = 1
# the refined grid's spacing is dx / GRID_REFINEMENT (resolution n -> round(n * GRID_REFINEMENT))
GRID_REFINEMENT = 4.0 / 3.0


def _check_resolution(name, n):
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise ValueError(f"{name}: expected a grid resolution (cells along the largest extent, an integer >= 1), "
                         f"got {n!r}")
    return int(n)


def finer_resolution(resolution, refinement=GRID_REFINEMENT) -> int:
    """The refined grid's resolution: round(resolution * refinement), at least resolution + 1."""
    n = _check_resolution("resolution", resolution)
    if isinstance(refinement, bool) or not isinstance(refinement, (int, float, np.floating)) or \
            not (np.isfinite(refinement) and refinement > 1):
        raise ValueError(f"refinement: expected a ratio > 1 of the coarse grid's spacing to the fine one's, "
                         f"got {refinement!r}")
    return max(n + 1, int(round(n * refinement)))


def grid_label(resolution, fine_resolution) -> str:
    """The name the report gives the grid's systematic."""
    return f"MPM grid (resolution {int(resolution)} against {int(fine_resolution)})"


def grid_refinement(resolution, fine_resolution=None, order=GRID_ORDER) -> Refinement:
    """The `Refinement` from the grid of `resolution` cells to that of `fine_resolution` (default
    `finer_resolution(resolution)`): ratio fine / coarse (of the spacings: the domain is the same)."""
    n = _check_resolution("resolution", resolution)
    fine = finer_resolution(n) if fine_resolution is None else _check_resolution("fine_resolution", fine_resolution)
    if fine <= n:
        raise ValueError(f"fine_resolution: expected more cells than the fit's resolution {n}, got {fine}")
    return Refinement(grid_label(n, fine), fine / n, order)


def grid_systematics(fine_residuals, resolution, fine_resolution=None, order=GRID_ORDER) -> dict:
    """{label: (residuals, factor)} for `fit_report(systematics=...)`: `fine_residuals`, the residuals
    (N,) of the fit at the finer grid `fine_resolution` (default `finer_resolution(resolution)`) at the
    current values and on the frames fitted now (an array, or a callable that returns it: one forward
    rollout at the finer grid), with the Richardson factor q^p / (q^p - 1), q = fine / resolution."""
    return grid_refinement(resolution, fine_resolution, order).systematics(fine_residuals)
