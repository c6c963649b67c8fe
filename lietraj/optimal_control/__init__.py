"""Optimal control on the robot's Lie-group state: discrete dynamics, costs, problems, and the iLQR / DDP / FDDP
solvers that share one Riccati backward pass.

Layers as in Crocoddyl, each batched over the knots of a trajectory: dynamics (``DiscreteDynamics``, a plug-in;
a continuous ``Field`` times an integrator, ``IntegratedDynamics``, with ``RobotDynamics`` and
``ContactRobotDynamics`` for robots; ``LinearDynamics``), costs (a residual through an activation, or any ``CostModel``),
a ``Problem`` of action models, solvers that know nothing about robots, LQR / TVLQR feedback on the Lie-algebra
error with closed-loop simulation, and lossless saving of solutions. This subpackage imports
``lietraj.dynamics`` and nothing above it.
"""

from lietraj.optimal_control.costs.activations import (
    Activation,
    ActivationDerivatives,
    AugmentedLagrangianActivation,
    Quadratic,
    QuadraticBarrier,
    SmoothAbs,
    WeightedQuadratic,
)
from lietraj.optimal_control.feedback.balance import BalanceController, balance_controller, constraint_basis, default_weights, push
from lietraj.optimal_control.costs.contact_residuals import (
    CenterOfPressureResidual,
    ContactForceResidual,
    FrictionConeResidual,
    WrenchConeResidual,
    barrier_activation,
)
from lietraj.dynamics.lie.se3 import exp_blocks
from lietraj.optimal_control.dynamics.contact_field import ContactField
from lietraj.optimal_control.dynamics.contact_robot_dynamics import ContactRobotDynamics
from lietraj.optimal_control.costs.costs import (
    CostDerivatives,
    CostModel,
    CostSum,
    CostTerm,
    FunctionCost,
    ResidualCost,
    control_regularization,
    joint_limit_cost,
    state_regularization,
    torque_limit_cost,
)
from lietraj.optimal_control.costs.derivative_check import BlockCheck, DerivativeReport, check_derivatives
from lietraj.optimal_control.dynamics.discrete_dynamics import (
    DiscreteDerivatives,
    DiscreteDynamics,
    IntegratedDynamics,
    RobotDynamics,
)
from lietraj.optimal_control.dynamics.euler import SemiImplicitEuler
from lietraj.optimal_control.dynamics.euler_second_order import StepHessian, euler_hessian_contraction
from lietraj.optimal_control.dynamics.field import Field, FieldDerivatives, FieldHessian
from lietraj.optimal_control.dynamics.free_field import FreeField
from lietraj.optimal_control.dynamics.impulse_robot_dynamics import ImpulseRobotDynamics
from lietraj.optimal_control.dynamics.linear_dynamics import LinearDynamics
from lietraj.optimal_control.dynamics.rk4 import RK4
from lietraj.optimal_control.feedback.lqr import (
    FeedbackPolicy,
    LQRController,
    Policy,
    Simulation,
    TVLQRController,
    lqr,
    simulate,
    tvlqr,
)
from lietraj.optimal_control.problem import ActionModel, Problem, ProblemDerivatives
from lietraj.optimal_control.constraints import (
    Constraint,
    ConstraintSet,
    Violation,
    center_of_pressure,
    com_position,
    frame_placement,
    frame_position,
    friction_cone,
    joint_position_limits,
    joint_velocity_limits,
    normal_forces,
    torque_limits,
    wrench_cone,
)
from lietraj.optimal_control.costs.residuals import (
    CenterOfMassResidual,
    ControlResidual,
    FramePlacementResidual,
    FrameRotationResidual,
    FrameTranslationResidual,
    FrameVelocityResidual,
    JointPositionResidual,
    JointTorqueResidual,
    JointVelocityResidual,
    Residual,
    ResidualDerivatives,
    StateResidual,
)
from lietraj.optimal_control.solvers.forward_pass import PolicyRollout
from lietraj.optimal_control.solvers.riccati import BackwardPass, BoxQPResult, backward_pass, box_qp
from lietraj.optimal_control.solvers.progress import ProgressDisplay
from lietraj.optimal_control.solvers.augmented_lagrangian import (
    ConstrainedLogTable,
    ConstrainedResult,
    ConstrainedSolver,
    ConstraintOptions,
    KKTResiduals,
    Multipliers,
    solve_constrained,
)
from lietraj.optimal_control.solution_io import SavedSolution, load_solution, save_solution
from lietraj.optimal_control.solvers.solvers import (
    IterationInfo,
    LogTable,
    SolverOptions,
    SolverResult,
    solve_ddp,
    solve_fddp,
    solve_ilqr,
)

__all__ = [
    "ActionModel", "Activation", "ActivationDerivatives", "AugmentedLagrangianActivation", "BackwardPass",
    "BalanceController", "BlockCheck", "BoxQPResult", "CenterOfMassResidual", "CenterOfPressureResidual",
    "ConstrainedLogTable", "ConstrainedResult", "ConstrainedSolver", "Constraint", "ConstraintOptions",
    "ConstraintSet", "ContactField", "ContactForceResidual", "ContactRobotDynamics", "ControlResidual",
    "CostDerivatives", "CostModel", "CostSum", "CostTerm", "DerivativeReport", "DiscreteDerivatives",
    "DiscreteDynamics", "FeedbackPolicy", "Field", "FieldDerivatives", "FieldHessian", "FramePlacementResidual",
    "FrameRotationResidual", "FrameTranslationResidual", "FrameVelocityResidual", "FreeField", "FrictionConeResidual",
    "FunctionCost", "ImpulseRobotDynamics", "IntegratedDynamics", "IterationInfo", "JointPositionResidual",
    "JointTorqueResidual", "JointVelocityResidual", "KKTResiduals", "LQRController", "LinearDynamics", "LogTable",
    "Multipliers", "Policy", "PolicyRollout", "Problem", "ProblemDerivatives", "ProgressDisplay", "Quadratic",
    "QuadraticBarrier", "RK4", "Residual", "ResidualCost", "ResidualDerivatives", "RobotDynamics", "SavedSolution",
    "SemiImplicitEuler", "Simulation", "SmoothAbs", "SolverOptions", "SolverResult", "StateResidual", "StepHessian",
    "TVLQRController", "Violation", "WeightedQuadratic", "WrenchConeResidual", "backward_pass", "balance_controller",
    "barrier_activation", "box_qp", "center_of_pressure", "check_derivatives", "com_position", "constraint_basis",
    "control_regularization", "default_weights", "euler_hessian_contraction", "exp_blocks", "frame_placement",
    "frame_position", "friction_cone", "joint_limit_cost", "joint_position_limits", "joint_velocity_limits",
    "load_solution", "normal_forces", "lqr", "push", "save_solution", "simulate", "solve_constrained", "solve_ddp", "solve_fddp",
    "solve_ilqr", "state_regularization", "torque_limit_cost", "torque_limits", "tvlqr", "wrench_cone",
]
