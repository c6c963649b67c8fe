"""Rigid-body dynamics on Lie-group states: models from URDF, recursive algorithms, their derivatives.

Conventions (README): spatial vectors linear first; floating-base state ``x = (H, s, nu, sdot)`` in
SE(3) x R^n x R^6 x R^n with ``nu`` the body twist; generalized velocity ``v = [nu; sdot]``. Every
algorithm takes a ``State``, or a ``Trajectory`` to evaluate all its knots in one compiled call, and an optional
``workspace`` (a ``Workspace(model)``, Pinocchio's ``Data``) whose work arrays it reuses; the model itself is
read-only, so threads may share it.
"""

from lietraj.dynamics.lie import se3, so3
from lietraj.dynamics.algorithms.aba import aba, forward_dynamics
from lietraj.dynamics.algorithms.aba_derivatives import ForwardDynamicsDerivatives, aba_derivatives
from lietraj.dynamics.algorithms.aba_second_order import (
    ForwardDynamicsHessian,
    ForwardDynamicsSecondOrder,
    aba_hessian_contraction,
    aba_second_order_derivatives,
)
from lietraj.dynamics.kinematics.center_of_mass import (
    center_of_mass,
    center_of_mass_jacobian,
    center_of_mass_velocity,
)
from lietraj.dynamics.contacts.contact_dynamics import Contact, ContactDynamicsResult, contact_dynamics
from lietraj.dynamics.contacts.contact_dynamics_derivatives import ContactDynamicsDerivatives, contact_dynamics_derivatives
from lietraj.dynamics.contacts.contact_linearization import ContactLinearization, contact_linearization
from lietraj.dynamics.algorithms.crba import mass_matrix
from lietraj.dynamics.contacts.equilibrium import EquilibriumResult, quasi_static_torques, static_equilibrium
from lietraj.dynamics.algorithms.extended_inverse_dynamics import (
    ExtendedIDDerivatives,
    ExtendedIDResult,
    extended_inverse_dynamics,
    extended_inverse_dynamics_derivatives,
)
from lietraj.dynamics.contacts.contact_dynamics_second_order import (
    ImpulseDynamicsHessian,
    contact_hessian_contraction,
    impulse_hessian_contraction,
)
from lietraj.dynamics.lie.finite_differences import numerical_jacobian
from lietraj.dynamics.algorithms.hybrid_dynamics import HybridResult, hybrid_dynamics
from lietraj.dynamics.algorithms.hybrid_dynamics_derivatives import HybridDerivatives, hybrid_dynamics_derivatives
from lietraj.dynamics.contacts.impulse_dynamics import (
    ImpulseDynamicsDerivatives,
    ImpulseDynamicsResult,
    impulse_dynamics,
    impulse_dynamics_derivatives,
)
from lietraj.dynamics.algorithms.inverse_mass_matrix import inverse_mass_matrix
from lietraj.dynamics.kinematics.kinematics_derivatives import (
    CenterOfMassDerivatives,
    FrameAccelerationDerivatives,
    FramePlacementError,
    center_of_mass_derivatives,
    frame_acceleration_derivatives,
    frame_placement_error,
    frame_velocity_derivatives,
)
from lietraj.dynamics.algorithms.linearization import Linearization, linearize
from lietraj.dynamics.kinematics.kinematics import (
    body_placements,
    frame_acceleration,
    frame_jacobian,
    frame_placement,
    frame_placements,
    frame_velocity,
)
from lietraj.dynamics.model.mjcf import MJCFError, ball_angles, ball_quaternion, ball_rate_map, load_mjcf
from lietraj.dynamics.model.model import Frame, Mimic, MimicNotSupported, ModelArrays, Posture, RobotModel, Visual
from lietraj.dynamics.model.workspace import Workspace
from lietraj.dynamics.algorithms.rnea import generalized_gravity, nonlinear_effects, rnea
from lietraj.dynamics.algorithms.rnea_derivatives import (
    InverseDynamicsDerivatives,
    rnea_derivatives,
)
from lietraj.dynamics.algorithms.rnea_second_order import (
    InverseDynamicsHessian,
    InverseDynamicsSecondOrder,
    rnea_second_order_contraction,
    rnea_second_order_derivatives,
)
from lietraj.dynamics.model.robots import available_robots, load_robot
from lietraj.dynamics.lie.state import State, StateSpace, Trajectory
from lietraj.dynamics.model.urdf import URDFError, load_urdf, read_srdf

__all__ = [
    "CenterOfMassDerivatives", "Contact", "ContactDynamicsDerivatives", "ContactDynamicsResult",
    "ContactLinearization", "EquilibriumResult", "ExtendedIDDerivatives", "ExtendedIDResult",
    "ForwardDynamicsDerivatives", "ForwardDynamicsHessian", "ForwardDynamicsSecondOrder", "Frame",
    "FrameAccelerationDerivatives", "FramePlacementError", "HybridDerivatives", "HybridResult",
    "ImpulseDynamicsDerivatives", "ImpulseDynamicsHessian", "ImpulseDynamicsResult", "InverseDynamicsDerivatives",
    "InverseDynamicsHessian", "InverseDynamicsSecondOrder", "Linearization", "MJCFError", "Mimic", "MimicNotSupported",
    "ModelArrays", "Posture", "RobotModel",
    "State", "StateSpace", "Trajectory", "URDFError", "Visual", "Workspace", "aba", "aba_derivatives", "aba_hessian_contraction",
    "aba_second_order_derivatives", "available_robots", "ball_angles", "ball_quaternion", "ball_rate_map",
    "body_placements", "center_of_mass",
    "center_of_mass_derivatives", "center_of_mass_jacobian", "center_of_mass_velocity", "contact_dynamics",
    "contact_dynamics_derivatives", "contact_hessian_contraction", "contact_linearization",
    "extended_inverse_dynamics", "extended_inverse_dynamics_derivatives", "forward_dynamics", "frame_acceleration",
    "frame_acceleration_derivatives", "frame_jacobian", "frame_placement", "frame_placement_error",
    "frame_placements", "frame_velocity", "frame_velocity_derivatives", "generalized_gravity", "hybrid_dynamics",
    "hybrid_dynamics_derivatives", "impulse_dynamics", "impulse_dynamics_derivatives",
    "impulse_hessian_contraction", "inverse_mass_matrix", "linearize", "load_mjcf", "load_robot", "load_urdf", "mass_matrix",
    "nonlinear_effects", "numerical_jacobian", "quasi_static_torques", "read_srdf", "rnea", "rnea_derivatives",
    "rnea_second_order_contraction", "rnea_second_order_derivatives", "se3", "so3", "static_equilibrium",
]
