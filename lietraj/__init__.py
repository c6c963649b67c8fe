"""lietraj: trajectory optimization for humanoids, quadrupeds and arms on Lie-group states.

Rigid-body dynamics with analytical derivatives (``lietraj.dynamics``), optimal control in the Lie algebra
(``lietraj.optimal_control``), ready-made problems (``lietraj.problems``) and browser visualization
(``lietraj.viz``).
"""

from lietraj.dynamics import (
    RobotModel,
    State,
    StateSpace,
    Trajectory,
    available_robots,
    load_mjcf,
    load_robot,
    load_urdf,
)

__version__ = "0.1.0"

__all__ = ["RobotModel", "State", "StateSpace", "Trajectory", "available_robots", "load_mjcf", "load_robot",
           "load_urdf"]
