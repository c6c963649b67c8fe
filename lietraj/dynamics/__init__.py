"""Rigid-body dynamics on Lie-group states: models from URDF, recursive algorithms, their derivatives.

Conventions (DESIGN.md): spatial vectors linear first; floating-base state ``x = (H, s, nu, sdot)`` in
SE(3) x R^n x R^6 x R^n with ``nu`` the body twist; generalized velocity ``v = [nu; sdot]``.
"""

from lietraj.dynamics.model import Frame, Posture, RobotModel, Visual
from lietraj.dynamics.rnea import generalized_gravity, nonlinear_effects, rnea
from lietraj.dynamics.robots import available_robots, load_robot
from lietraj.dynamics.state import State, StateSpace, Trajectory
from lietraj.dynamics.urdf import URDFError, load_urdf, read_srdf

__all__ = [
    "Frame", "Posture", "RobotModel", "State", "StateSpace", "Trajectory", "URDFError", "Visual",
    "available_robots", "generalized_gravity", "load_robot", "load_urdf", "nonlinear_effects", "read_srdf", "rnea",
]
