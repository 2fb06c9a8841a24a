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

from .core.runtime import init, precision, deterministic, custom_op, no_grad
from .core.affinity import pinned_threads
from .core.tape import tape
from .fitting.gradcheck import check_gradient, check_param_gradient, GradCheckReport
from .core.errors import SimulationError, GradientError, StabilityWarning, StabilityError, FootageError, FootageWarning
from .sim.builder import SceneBuilder
from .core.model import Model, StateKind, ForceTerm
from .physics.contact import ContactLaw
from .sim.timing import substeps_per_frame
from .core.state import StateStore
from .sim.simulator import Simulator
from .core.stability import stability_report, StabilityReport
from .core.observers import ParticleRecorder, CenterOfMassRecorder
from .fitting.losses import MSELoss
from .fitting.optim import (Param, BasisParam, ColumnParam, RatioParam, TiedParam, smoothing_matrix, Adam,
                            SGD, BFGS, History, StopCriteria, optimize, least_squares)
from .fitting.soft_mass import SoftMassParam
from .fitting.uncertainty import fit_report, residual_jacobian, FitReport, Estimate, PIXEL_8BIT_VARIANCE
from .fitting.identify import identify, latin_hypercube
from .fitting.identification import Identification
from .fitting.sensitivity import (assumption_sensitivity, fit_quality, image_noise_floor, AssumedConstant,
                                  Sensitivity, FitQuality, PRIOR_RANGES, nuisance_sensitivity,
                                  intervals_with_assumptions)
from .fitting.discrepancy import (frame_statistics, block_jackknife, discrepancy_intervals, FrameStatistics,
                                  Discrepancy, DISCREPANCY_BLOCKS)
# the footage-fit engine (step-doubling horizons, time-step and MPM-grid bias, residual clusters, camera correction)
from .fitting.horizons import predictability, Predictability, silhouette_disagreement, copy_values
from .fitting.time_step_bias import time_step_systematics
from .fitting.grid_bias import grid_systematics
from .fitting.refined_model import Refinement
from .fitting.residual_groups import residual_groups, frame_blocks, interval_blocks
from .fitting.camera_prior import CameraPrior, CameraPriors, camera_params, camera_report, view_camera_params
from .core.registry import (register_material, get_material, list_materials, Material, TetMaterial,
                            ShellMaterial, lame_from_young_poisson, neo_hookean_from_lame)
from . import materials  # noqa: F401  (registers the built-in materials, as a user's plugin would)
# module namespaces that stay public as tgs.<name> (the layer folders are an implementation layout)
from .core import runtime, registry
from .io import meshes, footage
from .physics import fem, cloth, rigid
from .fitting import sysid, control, gradcheck
from .physics.rigid import RigidSurface, BodyRecorder, add_body_force, add_body_controls
from .physics.rigid_pose import quat_from_axis_angle, quat_from_normal
from .physics.body_overlap import InterpenetrationError
from .fitting.sysid import VideoFit
from .fitting.views import View
from .sim.batch import Batch, batched
from .fitting.batch import PerCopy, RowsParam
from .fitting.batch_fit import BatchFit
from .io.footage import Footage, load_footage
from .io.mask_checks import check_masks, check_initial_pose

__version__ = "0.1.0"
