"""Where a scene's objects start, and whether they start inside the ground (or a collider: `deepest_starts`).

One check, run before any kernel by both ways of making a scene: `SceneBuilder.finalize` (the
Python API) and the scene file (`tigradsim.scenes.scene_sanity`).  An object is described by a
`Placed`: its contact points in the y-up world at t = 0 and their contact radii.

Tolerance: a body resting on the penalty ground sinks by its weight over the contact stiffness,
m g / ke: millimetres for the scenes the library and its tests build (the box_push clip: 1.3 kg on
four corners of ke = 2500 N/m, 1.3 mm).  A start deeper than `PENETRATION_TOLERANCE` (absolute)
and than `PENETRATION_FRACTION` of the object's size is not a resting contact but a misplaced
object: the ground would throw it out in the first steps.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np

__all__ = ["Placed", "GroundPenetration", "ground_penetrations", "check_ground_clearance", "round_up",
           "deepest_starts", "PENETRATION_TOLERANCE", "PENETRATION_FRACTION"]

# Largest start below the ground taken as resting contact [m], and as a fraction of the object's size
# (the largest side of its bounding box): both must be exceeded for an error.
PENETRATION_TOLERANCE = 0.01
PENETRATION_FRACTION = 0.1


@dataclass
class Placed:
    """An object's contact points at t = 0.

    label: how errors name it ("rigid body 0", "soft mesh 1", "objects.box").
    points: (N, 3) world positions [m], y up.  radius: (N,) or scalar contact radius [m].
    particles: the particle indices it owns (None for a rigid body).
    """
    label: str
    points: np.ndarray
    radius: object = 0.0
    particles: Optional[range] = None

    @property
    def size(self) -> float:
        """The largest side of the points' bounding box [m] (at least twice the largest radius)."""
        p = np.asarray(self.points, dtype=np.float64).reshape(-1, 3)
        side = float(np.ptp(p, axis=0).max()) if len(p) else 0.0
        return max(side, 2.0 * float(np.max(self.radius, initial=0.0)))


@dataclass
class GroundPenetration:
    """`Placed` object `placed` starts `depth` [m] inside the ground plane y = 0: its lowest contact
    point (with its radius) is at height `lowest` [m]; lifting it by `depth` puts it on the ground."""
    placed: Placed
    depth: float
    lowest: float

    def message(self, lift_hint=None) -> str:
        """What is wrong and what was probably meant ("lift it by ... m ..."); lift_hint: more
        words for the remedy (e.g. ": position = [...]", the corrected position in a scene file)."""
        p = self.placed
        hint = f"lift it by {round_up(self.depth)} m so that it starts on the ground" + (lift_hint or "")
        return (f"{p.label} starts {self.depth:.3g} m inside the ground (its lowest contact point, radius included, "
                f"is at height {self.lowest:.3g} m; the ground is the plane at 0): {hint}.  A body resting on the "
                f"ground sinks only by its weight over the contact stiffness (m g / "
                f"ke, millimetres); a start deeper than {PENETRATION_TOLERANCE:g} m and "
                f"{PENETRATION_FRACTION:.0%} of its size ({p.size:.3g} m) is taken as a misplaced object")


def ground_penetrations(objects) -> list:
    """The `GroundPenetration` of every `Placed` in `objects` that starts deeper in the ground
    plane y = 0 than resting contact explains (module docstring), in the given order."""
    return [GroundPenetration(p, depth, -depth) for p, depth, _ in deepest_starts(objects, lambda x: x[:, 1])]


def deepest_starts(objects, signed_distance) -> list:
    """(placed, depth [m], index of its deepest point) for every `Placed` in `objects` that starts deeper inside
    a surface than resting contact explains (module docstring), in the given order.  signed_distance: (N, 3)
    world points -> (N,) signed distance [m] to the surface, negative inside (the ground: the height; a
    collider: `tigradsim.physics.shapes.shape_distance_np` in its frame); the contact radius is subtracted here."""
    out = []
    for p in objects:
        pts = np.asarray(p.points, dtype=np.float64).reshape(-1, 3)
        if not len(pts):
            continue
        low = np.asarray(signed_distance(pts), dtype=np.float64) - np.broadcast_to(
            np.asarray(p.radius, dtype=np.float64), (len(pts),))
        k = int(np.argmin(low))
        depth = -float(low[k])
        if depth > PENETRATION_TOLERANCE and depth > PENETRATION_FRACTION * p.size:
            out.append((p, depth, k))
    return out


def round_up(x: float) -> str:
    """x rounded up to 3 significant digits, as text (a lift that surely clears the ground)."""
    if x <= 0:
        return "0"
    e = int(np.floor(np.log10(x))) - 2
    return f"{np.ceil(x / 10.0 ** e - 1e-6) * 10.0 ** e:.3g}"      # - 1e-6: 0.37 stays 0.37 through rounding


def check_ground_clearance(objects) -> None:
    """Raise ValueError naming every object of `objects` (`Placed`) that starts inside the
    ground plane y = 0 (`ground_penetrations`); the Python API's form of the check."""
    found = ground_penetrations(objects)
    if found:
        raise ValueError("; ".join(g.message() for g in found))
