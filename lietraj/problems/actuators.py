"""The actuator limits the ready problems use where a robot's URDF carries placeholders instead of its motors' limits.

A URDF is data: ``lietraj.load_robot`` keeps its limits as written. The ODRI robots' URDFs give every joint
``effort="1000" velocity="1000"`` (robot_properties_solo's ``leg.xacro``, from which example-robot-data's
``solo12.urdf`` is generated): no motor of theirs comes near that, a torque barrier at 1000 N m never acts, and a 2 m
jump asking 52 N m of Solo12's 2.5 N m actuators reported its torques at 5 % of their limits. The ready problems load
their robot through ``load_robot_with_actuator_limits``, which puts there the limits the robot's makers document
(``ACTUATOR_LIMITS``, each number beside its source). On a model that still carries placeholders
(``has_placeholder_limits``), ``ExampleProblem.metrics`` reports the torque ratio as unknown.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from lietraj.dynamics.model.model import RobotModel
from lietraj.dynamics.model.robots import load_robot


@dataclass(frozen=True)
class ActuatorLimits:
    """The peak joint torque ``effort`` (N m) and the joint speed limit ``velocity`` (rad/s) of every actuated joint
    of a robot, as documented by ``source``."""

    effort: float
    velocity: float
    source: str


# The value the URDFs of these robots write for every joint's effort and velocity limit instead of their actuators'.
PLACEHOLDER_LIMITS: dict[str, float] = {"solo8": 1000.0, "solo12": 1000.0, "bolt": 1000.0}

ACTUATOR_LIMITS: dict[str, ActuatorLimits] = {
    # Solo12's twelve joints are driven by one actuator module (mechanics/quadruped_robot_12dof_v1/README.md: four
    # identical 3-DoF legs; mechanics/actuator_module_v1/README.md: "the same core components for all the robots"),
    # a T-Motor Antigravity 4004 300kV through a 9:1 dual-stage timing belt; the module is that of Grimminger et al.,
    # "An Open Torque-Controlled Modular Robot Architecture for Legged Locomotion Research", IEEE RA-L 5(2), 2020,
    # doi:10.1109/LRA.2020.2976639.
    "solo12": ActuatorLimits(
        # "The module [...] outputs 2,5Nm at 12A": https://github.com/open-dynamic-robot-initiative/
        # open_robot_actuator_hardware/blob/master/mechanics/actuator_module_v1/README.md (Description). The ideal
        # conversion of ODRI's drivers, torque = current x gear ratio x motor constant (odri_control_interface,
        # src/joint_modules.cpp) with 0.025 N m/A and 9 (demos/config_solo12.yaml), gives 2.7 N m at 12 A; the
        # measured module output, the smaller, is the limit.
        effort=2.5,
        # "max_joint_velocities: 80." in https://github.com/open-dynamic-robot-initiative/odri_control_interface/
        # blob/master/demos/config_solo12.yaml: JointModules::HasError (src/joint_modules.cpp) stops the robot when
        # a joint's speed (the motor's divided by the gear ratio) exceeds it.
        velocity=80.0,
        source="ODRI open_robot_actuator_hardware, actuator_module_v1/README.md (2.5 N m at 12 A); "
               "odri_control_interface demos/config_solo12.yaml (max_joint_velocities 80 rad/s)"),
}


def has_placeholder_limits(model: RobotModel) -> bool:
    """Whether ``model`` still carries its URDF's placeholder effort or velocity limits (``PLACEHOLDER_LIMITS``)."""
    value = PLACEHOLDER_LIMITS.get(model.name)
    return value is not None and bool(np.any(model.effort_limit == value) or np.any(model.velocity_limit == value))


def with_actuator_limits(model: RobotModel) -> RobotModel:
    """``model`` with its placeholder effort and velocity limits replaced by the documented ``ACTUATOR_LIMITS`` of its
    robot; ``model`` itself when it has no placeholders or no documented limits are known."""
    limits = ACTUATOR_LIMITS.get(model.name)
    if limits is None or not has_placeholder_limits(model):
        return model
    return model.replace(effort_limit=np.full(model.n, limits.effort), velocity_limit=np.full(model.n, limits.velocity))


@lru_cache(maxsize=None)
def load_robot_with_actuator_limits(name: str) -> RobotModel:
    """``load_robot(name)`` with the documented actuator limits where its URDF has placeholders (one cached model
    per robot, as ``load_robot``'s)."""
    return with_actuator_limits(load_robot(name))
