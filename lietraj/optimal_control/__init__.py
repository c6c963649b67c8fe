"""Optimal control on the robot's Lie-group state: discrete dynamics, and (issue 5) problems, costs, iLQR / DDP /
FDDP, LQR and TVLQR.

This subpackage imports ``lietraj.dynamics`` and nothing above it. Dynamics are a plug-in: a solver sees a
``DiscreteDynamics`` (step, batched step, Jacobians in the Lie algebra); ``RobotDynamics`` is the one for robots.
"""

from lietraj.optimal_control.discrete_dynamics import DiscreteDerivatives, DiscreteDynamics, RobotDynamics
from lietraj.optimal_control.euler_second_order import StepHessian, euler_hessian_contraction

__all__ = ["DiscreteDerivatives", "DiscreteDynamics", "RobotDynamics", "StepHessian", "euler_hessian_contraction"]
