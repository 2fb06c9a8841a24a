"""Built-in material plugins (imported as tigradsim.materials).

Each file registers one material through `tigradsim.core.registry.register_material`,
exactly as a third-party plugin would.  `linalg` holds differentiable helpers
(cofactor, determinant, polar rotation) that plugins may use.
"""
from ..core import linalg  # noqa: F401  (the shared helpers live in the core)
from . import neo_hookean, corotated, stvk, linear, membrane, stvk_membrane  # noqa: F401
from . import mpm_elastic, mpm_fluid, mpm_plastic  # noqa: F401  (kind "mpm": tigradsim.physics.mpm)
