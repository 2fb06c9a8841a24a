"""Built-in material plugins (imported as tigradsim.materials).

Each file registers one material through `tigradsim.registry.register_material`,
exactly as a third-party plugin would.  `linalg` holds differentiable helpers
(cofactor, determinant, polar rotation) that plugins may use.
"""
from . import linalg  # noqa: F401
from . import neo_hookean, corotated, stvk, linear, membrane, stvk_membrane  # noqa: F401
