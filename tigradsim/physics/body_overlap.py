"""Whether objects start inside a rigid body: the build-time check of body-body and particle-body contact.

The ground's check (`core.placement`) asks whether an object starts below y = 0; this one asks, for every
rigid body b and every other object o that can touch it (another body in its contact group, a block of
particles, a soft mesh, a cloth), how deep o's contact points (radius included) start inside b's shape
(`body_shapes`, numpy `shapes.shape_distance_np` at the initial pose).  With the ground's tolerance
(`placement.PENETRATION_TOLERANCE` absolute and `PENETRATION_FRACTION` of the smaller object's size, both
exceeded) a deeper start is not a resting contact but a misplaced object, which the penalty force would
throw out in the first steps: `InterpenetrationError` (a ValueError) naming both objects and the depth, raised
before any field or kernel is made (`rigid.RigidBodies.prepare`).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..core.placement import PENETRATION_FRACTION, PENETRATION_TOLERANCE, Placed, round_up
from .body_contact import contact_groups, groups_meet
from .body_shapes import body_shape
from .rigid_pose import quat_to_matrix_np
from .shapes import bounding_radius, shape_distance_np


class InterpenetrationError(ValueError):
    """Two objects start inside each other deeper than resting contact explains (`body_overlap`)."""


@dataclass
class Interpenetration:
    """`toucher` starts `depth` [m] inside rigid body `body` (label `body_label`)."""
    toucher: Placed
    body_label: str
    depth: float
    body_size: float

    def message(self) -> str:
        return (f"{self.toucher.label} starts {self.depth:.3g} m inside {self.body_label} (its deepest contact "
                f"point, radius included, is {self.depth:.3g} m inside that body's contact shape): move them apart "
                f"by at least {round_up(self.depth)} m.  Resting contact sinks only by the weight over the contact "
                f"stiffness (millimetres); a start deeper than {PENETRATION_TOLERANCE:g} m and "
                f"{PENETRATION_FRACTION:.0%} of the smaller object ({min(self.toucher.size, self.body_size):.3g} m) "
                "is taken as a misplaced object")


def _body_entry(body):
    if "table_entry" not in body:
        body["table_entry"] = body_shape(body["shape"], body["vertices"], body["faces"])
    return body["table_entry"]


def interpenetrations(builder, bodies) -> list:
    """Every `Interpenetration` of the scene's objects into the rigid bodies `bodies` (`RigidBodies.bodies`)."""
    B = len(bodies)
    placed = builder.placed()
    body_placed = [p for p in placed if p.particles is None and p.label.startswith("rigid body ")]
    particle_placed = [p for p in placed if p.particles is not None]
    body_groups = contact_groups(builder, "bodies", B)
    particle_groups = contact_groups(builder, "particles", builder.particle_count)
    if B == 0 or (B == 1 and not any(len(np.asarray(p.points).reshape(-1, 3)) for p in particle_placed)):
        return []
    found, seen = [], set()
    for b, body in enumerate(bodies):
        kind, size, grid = _body_entry(body)
        bound = bounding_radius(kind, size, grid)
        R = quat_to_matrix_np(body["q0"][3:])
        centre = body["q0"][:3]
        body_size = 2.0 * bound
        touchers = []
        for a, p in enumerate(body_placed):
            if a != b and (b, a) not in seen and groups_meet(body_groups[a], body_groups[b]):
                touchers.append((p, np.ones(len(np.asarray(p.points).reshape(-1, 3)), dtype=bool)))
        for p in particle_placed:
            idx = np.arange(p.particles.start, p.particles.stop)
            pts = np.asarray(p.points).reshape(-1, 3)
            if len(pts) == 0:
                continue
            # p.points holds the free particles of the block, in order
            free = idx[:len(pts)] if len(pts) == len(idx) else None
            keep = np.ones(len(pts), dtype=bool) if free is None else groups_meet(particle_groups[free], body_groups[b])
            touchers.append((p, keep))
        for p, keep in touchers:
            pts = np.asarray(p.points, dtype=np.float64).reshape(-1, 3)
            radius = np.broadcast_to(np.asarray(p.radius, dtype=np.float64), (len(pts),))
            near = keep & (np.linalg.norm(pts - centre, axis=1) < bound + radius)
            if not near.any():
                continue
            d, _ = shape_distance_np(kind, size, (pts[near] - centre) @ R, grid)
            depth = -float((d - radius[near]).min())
            if depth > PENETRATION_TOLERANCE and depth > PENETRATION_FRACTION * min(p.size, body_size):
                found.append(Interpenetration(p, f"rigid body {b}", depth, body_size))
                if p in body_placed:
                    seen.add((body_placed.index(p), b))      # one message per pair of bodies
    return found


def check_interpenetration(builder, bodies) -> None:
    """Raise `InterpenetrationError` naming every object that starts inside a rigid body (`interpenetrations`)."""
    found = interpenetrations(builder, bodies)
    if found:
        raise InterpenetrationError("; ".join(f.message() for f in found))
