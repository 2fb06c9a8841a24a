"""tigradsim: differentiable multiphysics and rendering on Taichi.

Data flows one way: SceneBuilder -> Model -> Simulator (StateStore) ->
observers (recorders, tigradsim.renderers) -> losses -> optimizers.
"""
from .runtime import init, precision, deterministic, custom_op, no_grad
from .gradcheck import check_gradient, check_param_gradient, GradCheckReport
from .errors import SimulationError, GradientError
from .builder import SceneBuilder
from .model import Model, StateKind
from .state import StateStore
from .simulator import Simulator
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
