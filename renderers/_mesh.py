"""Mesh helpers re-exported for renderer users: the implementations live in
`tigradsim.io.meshes` (one copy for the whole library)."""
from tigradsim.io.meshes import box_surface as box, icosphere, load_obj

__all__ = ["icosphere", "box", "load_obj"]
