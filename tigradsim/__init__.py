"""tigradsim: differentiable multiphysics and rendering on Taichi.

Data flows one way: SceneBuilder -> Model -> Simulator (StateStore) ->
observers (recorders, tigradsim.renderers) -> losses -> optimizers.
"""
import contextlib as _contextlib
import os as _os
import sys as _sys

if "taichi" not in _sys.modules:
    # Taichi prints its version banner on stdout when first imported; demos and scripts promise
    # machine-readable stdout (a JSON last line), so the banner goes to stderr instead.  Its own
    # switch turns the print off during the import (restored after, so child processes are
    # unaffected); redirecting stdout during the import instead would make Taichi think it runs
    # in a graphical shell and buffer kernel prints through Python on every launch.
    _had_flag = "ENABLE_TAICHI_HEADER_PRINT" in _os.environ
    _flag = _os.environ.get("ENABLE_TAICHI_HEADER_PRINT", "True")
    _os.environ["ENABLE_TAICHI_HEADER_PRINT"] = "0"
    try:
        import taichi as _taichi  # noqa: F401
    finally:
        if _had_flag:
            _os.environ["ENABLE_TAICHI_HEADER_PRINT"] = _flag
        else:
            del _os.environ["ENABLE_TAICHI_HEADER_PRINT"]
    if _flag.lower() not in ("false", "0", "f"):
        try:
            from taichi._lib.utils import _print_taichi_header
            with _contextlib.redirect_stdout(_sys.stderr):
                _print_taichi_header()
        except Exception:   # a private Taichi helper: losing the banner is harmless
            pass

from .runtime import init, precision, deterministic, custom_op, no_grad
from .gradcheck import check_gradient, check_param_gradient, GradCheckReport
from .errors import SimulationError, GradientError, StabilityWarning, StabilityError
from .builder import SceneBuilder
from .model import Model, StateKind, ForceTerm
from .contact import ContactLaw
from .timing import substeps_per_frame
from .state import StateStore
from .simulator import Simulator
from .stability import stability_report, StabilityReport
from .observers import ParticleRecorder, CenterOfMassRecorder
from .losses import MSELoss
from .optim import (Param, BasisParam, ColumnParam, RatioParam, TiedParam, smoothing_matrix, Adam, SGD, BFGS,
                    History, StopCriteria, optimize, least_squares)
from .uncertainty import fit_report, residual_jacobian, FitReport, Estimate, PIXEL_8BIT_VARIANCE
from .identify import identify, Identification, latin_hypercube
from .registry import (register_material, get_material, list_materials, Material, TetMaterial, ShellMaterial,
                       lame_from_young_poisson, neo_hookean_from_lame)
from . import meshes, fem, cloth, rigid, sysid, control
from .rigid import RigidSurface, BodyRecorder, add_body_force, add_body_controls
from .sysid import VideoFit
from . import footage
from .footage import Footage, load_footage

__version__ = "0.1.0"
