"""The feet of the robots the example problems know: which frames touch the ground, how, and how large the soles are.

A humanoid stands on two soles held by 6D contacts (forces and torques in the sole frame, LOCAL, whose z axis is the
sole normal); a quadruped on four point feet held by 3D contacts whose forces are given in world-aligned axes
(LOCAL_WORLD_ALIGNED), so that on flat ground the normal is the world z axis for every contact. The friction cone
and CoP checks of ``ExampleProblem.metrics`` rely on exactly these two conventions.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from lietraj.dynamics.contacts.contact_dynamics import Contact
from lietraj.dynamics.kinematics.kinematics import frame_placement
from lietraj.dynamics.model.model import Frame, Posture, RobotModel
from lietraj.dynamics.lie.state import State
from lietraj.optimal_control.constraints import ConstraintSet, joint_position_limits, torque_limits, wrench_cone
from lietraj.optimal_control.costs.activations import WeightedQuadratic
from lietraj.optimal_control.costs.contact_residuals import WrenchConeResidual, barrier_activation
from lietraj.optimal_control.dynamics.contact_robot_dynamics import ContactRobotDynamics
from lietraj.optimal_control.costs.costs import (
    CostSum,
    ResidualCost,
    control_regularization,
    joint_limit_cost,
    torque_limit_cost,
)
from lietraj.optimal_control.costs.residuals import CenterOfMassResidual, StateResidual
from lietraj.problems.actuators import load_robot_with_actuator_limits


@dataclass(frozen=True)
class Feet:
    """The ground-contact frames of a robot (``left``/``right`` first for a biped; ``front-left, front-right,
    hind-left, hind-right`` for a quadruped), their contact kind, and for soles their ``(half_length,
    half_width)``."""

    frames: tuple[str, ...]
    kind: str
    sole: tuple[float, float] | None = None
    placed: tuple[tuple[str, str, tuple[float, float, float]], ...] = ()
    """Sole frames the robot's URDF lacks, as ``(frame, parent frame, offset in it)``; axes parallel to the parent's."""
    standing: tuple[tuple[str, float], ...] = ()
    """Joint angles (rad) of a standing posture, for a robot whose loader has none: its ``"standing"`` posture, with
    the base upright at the height that puts the feet on the ground (z = 0)."""

    @property
    def reference(self) -> str:
        return "local" if self.kind == "6d" else "local_world_aligned"

    @property
    def soles(self) -> dict[str, tuple[float, float]]:
        """frame -> (half_length, half_width) of every sole (empty for point feet)."""
        return {f: self.sole for f in self.frames} if self.sole else {}

    def contacts(self, frames: tuple[str, ...] | None = None, baumgarte: tuple[float, float] = (0.0, 0.0),
                 targets=None) -> tuple[Contact, ...]:
        """Contacts on ``frames`` (default: all feet), with Baumgarte gains and optional target poses (one per frame)."""
        frames = self.frames if frames is None else frames
        targets = [None] * len(frames) if targets is None else targets
        return tuple(Contact(f, self.kind, self.reference, baumgarte, T) for f, T in zip(frames, targets))


_SOLES = Feet(("left_sole_link", "right_sole_link"), "6d", (0.1, 0.05))
# Unitree G1: each ankle-roll link touches the ground by four spheres of radius 5 mm at z = -0.03 m, x in
# [-0.05, 0.12] m and |y| <= 0.025-0.03 m (g1_29dof_rev_1_0.urdf): the sole is the rectangle under them, centred at
# x = 0.035 m, 0.085 m long and 0.025 m wide by half. The posture bends the legs by Unitree's default standing angles
# (hip pitch -0.1, knee 0.3, ankle pitch -0.2 rad: the pitches sum to zero, so the soles lie flat).
_G1_LEGS = (("hip_pitch_joint", -0.1), ("knee_joint", 0.3), ("ankle_pitch_joint", -0.2))
_G1 = Feet(("left_sole", "right_sole"), "6d", (0.085, 0.025),
           placed=tuple((f"{side}_sole", f"{side}_ankle_roll_link", (0.035, 0.0, -0.035)) for side in ("left", "right")),
           standing=tuple((f"{side}_{joint}", angle) for side in ("left", "right") for joint, angle in _G1_LEGS))
FEET: dict[str, Feet] = {
    "talos": _SOLES,
    "talos_legs": _SOLES,
    "solo12": Feet(("FL_FOOT", "FR_FOOT", "HL_FOOT", "HR_FOOT"), "3d"),
    "anymal": Feet(("LF_FOOT", "RF_FOOT", "LH_FOOT", "RH_FOOT"), "3d"),
    "hyq": Feet(("lf_foot", "rf_foot", "lh_foot", "rh_foot"), "3d"),
    "a1": Feet(("FL_foot", "FR_foot", "RL_foot", "RR_foot"), "3d"),
    "go1": Feet(("FL_foot", "FR_foot", "RL_foot", "RR_foot"), "3d"),
    "go2": Feet(("FL_foot", "FR_foot", "RL_foot", "RR_foot"), "3d"),
    "b1": Feet(("FL_foot", "FR_foot", "RL_foot", "RR_foot"), "3d"),
    "g1": _G1,
    "g1_with_hands": _G1,
}
HUMANOIDS = tuple(r for r, f in FEET.items() if f.kind == "6d")
QUADRUPEDS = tuple(r for r, f in FEET.items() if f.kind == "3d")


def robot_with_feet(robot: str, allowed: tuple[str, ...], problem: str):
    """``(model, feet)`` of a robot the problem supports, or a ValueError listing those it does; the model has its
    actuators' documented limits where its URDF has placeholders (``lietraj.problems.actuators``)."""
    if robot not in allowed:
        raise ValueError(f"{problem}: robot must be one of {', '.join(allowed)}, got {robot!r}")
    return _with_feet(robot), FEET[robot]


@lru_cache(maxsize=None)
def _with_feet(robot: str) -> RobotModel:
    """The robot with its actuator limits, the sole frames and the standing posture its ``FEET`` entry adds (one
    model per robot, so that what the kernels derive from it is built once)."""
    model = load_robot_with_actuator_limits(robot)
    feet = FEET[robot]
    if feet.placed:
        frames = list(model.frames)
        for name, parent, offset in feet.placed:
            f = model.frames[model.frame_index(parent)]
            frames.append(Frame(name, f.body, f.R.copy(), f.p + f.R @ np.asarray(offset, dtype=float), "fixed_joint"))
        model = model.replace(frames=tuple(frames))
    if feet.standing:
        s = np.zeros(model.n)
        for joint, angle in feet.standing:
            s[model.joint_index(joint)] = angle
        H = np.eye(4)
        on_ground = State(H, s, np.zeros(model.nv))
        H[2, 3] = -min(frame_placement(model, on_ground, f)[2, 3] for f in feet.frames)
        model = model.replace(reference_postures={"standing": Posture(H, s), **model.reference_postures})
    return model


# The fraction of the friction coefficient and of the sole size the wrench-cone barrier allows.
WRENCH_CONE_SAFETY = 0.8
# The fraction of the effort limits at which the torque barrier starts. A barrier is soft: started at the limits and
# weighted 1e3 dt, it let the gaits' solutions pass them by up to 0.3 % (a1, anymal, hyq, solo12's trot) and by 20 %
# (solo12's jump at its 2.5 N m); started 5 % inside and weighted ``TORQUE_LIMIT_WEIGHT`` dt, it keeps every ready
# problem's torques within their limits (at most 98 %, solo12's jump).
TORQUE_LIMIT_SAFETY = 0.95
# The weights (times dt) of the joint-limit and torque-limit barriers of ``add_limit_costs``.
JOINT_LIMIT_WEIGHT = 1e3
TORQUE_LIMIT_WEIGHT = 1e4
# A time constant of the contact error's decay, in knots: the Baumgarte gains follow dt.
CONTACT_TIME_CONSTANT = 4.0


def check_positive(**values) -> None:
    """Raise ValueError naming the first of ``values`` (name=value) that is not a finite positive number."""
    for name, value in values.items():
        if isinstance(value, bool) or not (isinstance(value, (int, float, np.integer, np.floating)) and
                                           np.isfinite(value) and value > 0):
            raise ValueError(f"{name} must be a finite positive number, got {value!r}")


def contact_gains(dt: float) -> tuple[float, float]:
    """Critically damped Baumgarte gains ``(Kp, Kv) = (ω², 2ω)`` with ``ω = 1 / (CONTACT_TIME_CONSTANT dt)``."""
    w = 1.0 / (CONTACT_TIME_CONSTANT * dt)
    return w * w, 2.0 * w


def posture_weights(model: RobotModel, base_orientation: float, joints: float, velocities: float) -> np.ndarray:
    """The diagonal of a state cost's weight: ``[0 (base position: free), base orientation, joints, velocities]``."""
    nh = 6 if model.floating_base else 0
    return np.concatenate([np.zeros(3 if nh else 0), np.full(3 if nh else 0, base_orientation), np.full(model.n, joints),
                           np.full(model.nv, velocities)])


CONSTRAINTS = ("soft", "hard")
"""How a ready problem keeps its limits: "soft", barrier costs started inside the limits (what penalty-based
solvers and Crocoddyl's users do); "hard", constraints at the limits themselves, met by ``solve_constrained``."""


def hard_constraints(constraints: str, problem: str) -> bool:
    """Whether ``constraints`` (one of ``CONSTRAINTS``) asks for hard constraints; a ValueError names the choices."""
    if constraints not in CONSTRAINTS:
        raise ValueError(f"{problem}: constraints must be one of {', '.join(map(repr, CONSTRAINTS))}, got "
                         f"{constraints!r}")
    return constraints == "hard"


def standing_constraints(dynamics, feet: Feet, friction: float | None) -> ConstraintSet:
    """The hard counterparts of ``add_wrench_cone_cost`` and ``add_limit_costs`` at the knots of ``dynamics``: the
    contacts' forces in their friction pyramids of coefficient ``friction`` and the soles' centres of pressure in
    the whole soles ("wrench cone", when ``friction`` is given and the dynamics has contacts), the joint positions
    ("joint limits") and the torques ("torque limits") within the model's limits."""
    model = dynamics.model
    constraints = ConstraintSet(model.state_space, model.n)
    if friction is not None and isinstance(dynamics, ContactRobotDynamics):
        _check_friction(friction)
        soles = {c.frame: feet.sole for c in dynamics.contacts} if feet.sole else None
        constraints.add("wrench cone", wrench_cone(dynamics, friction, soles))
    constraints.add("joint limits", joint_position_limits(model, model.n))
    constraints.add("torque limits", torque_limits(model))
    return constraints


def _check_friction(friction: float) -> None:
    if not (np.isfinite(friction) and friction > 0.0):
        raise ValueError(f"the friction coefficient must be a positive number, got {friction!r}")


def add_limit_costs(costs: CostSum, model: RobotModel, dt: float) -> None:
    """Add to the running cost ``costs`` the barriers on the joint limits (``joint_limit_cost``, weight
    ``JOINT_LIMIT_WEIGHT dt``) and on the torques (``torque_limit_cost``, ``TORQUE_LIMIT_WEIGHT dt``), under the
    names "joint limits" and "torque limits"; the torque barrier starts at ``TORQUE_LIMIT_SAFETY`` of the limits."""
    costs.add("joint limits", joint_limit_cost(model, nu=model.n), dt * JOINT_LIMIT_WEIGHT)
    costs.add("torque limits", torque_limit_cost(model, TORQUE_LIMIT_SAFETY), dt * TORQUE_LIMIT_WEIGHT)


def add_wrench_cone_cost(costs: CostSum, dynamics: ContactRobotDynamics, feet: Feet, friction: float,
                         scale: float) -> None:
    """Add to ``costs`` a barrier on leaving the friction pyramids and, for soles, the CoP rectangles of the contacts
    of ``dynamics`` (``WrenchConeResidual``, sharing the dynamics' contact derivatives), weighted
    ``scale · 1e4 / (m g)²``: a violation of 1 % of the robot's weight then costs as much as 1 cm of CoM error at a
    CoM weight of ``1e4 · scale``. A barrier is soft, so it is placed ``WRENCH_CONE_SAFETY`` inside the true limits
    (friction coefficient and sole size), which the solutions then respect."""
    _check_friction(friction)
    model, contacts = dynamics.model, dynamics.contacts
    soles = {c.frame: tuple(WRENCH_CONE_SAFETY * np.array(feet.sole)) for c in contacts} if feet.sole else None
    residual = WrenchConeResidual(model, contacts, WRENCH_CONE_SAFETY * friction, soles, dynamics=dynamics)
    weight = model.total_mass * float(np.linalg.norm(model.gravity))
    costs.add("wrench cone", ResidualCost(residual, barrier_activation(residual.nr)), scale * 1e4 / weight ** 2)


def standing_cost(dynamics: ContactRobotDynamics, feet: Feet, posture: State, com_ref, u_ref, com_weight: float,
                  control_weight: float, friction: float, barriers: bool = True) -> CostSum:
    """The running cost of a robot standing on the contacts of ``dynamics``, ``dt`` times (Crocoddyl's integrated
    models): the CoM tracking ``com_ref`` ((3,) or one point per knot) weighted ``com_weight``, the state regularized
    towards ``posture`` (base orientation 10, joints 0.01, velocities 1; base position free), the torques towards
    ``u_ref`` weighted ``control_weight``, and with ``barriers`` the wrench-cone barrier of ``add_wrench_cone_cost``
    and the barriers on the joint and torque limits of ``add_limit_costs`` (without: ``standing_constraints``
    keeps them)."""
    model, dt = dynamics.model, dynamics.dt
    space, n = model.state_space, model.n
    c = CostSum(space, n)
    c.add("com", ResidualCost(CenterOfMassResidual(model, com_ref, nu=n)), dt * com_weight)
    regularization = WeightedQuadratic(posture_weights(model, 10.0, 0.01, 1.0))
    c.add("posture", ResidualCost(StateResidual(space, posture, n), regularization), dt)
    c.add("control", control_regularization(n, reference=u_ref, state_space=space), dt * control_weight)
    if barriers:
        add_wrench_cone_cost(c, dynamics, feet, friction, dt * com_weight / 1e4)
        add_limit_costs(c, model, dt)
    return c


def at_rest_cost(model: RobotModel, posture: State, com_goal, com_weight: float, joint_weight: float) -> CostSum:
    """The terminal cost of a robot that must end at rest in ``posture`` (base orientation 10, joints
    ``joint_weight``, velocities 10, all times 10) with its CoM at ``com_goal`` (weight ``com_weight``)."""
    space = model.state_space
    c = CostSum(space, 0)
    c.add("com", ResidualCost(CenterOfMassResidual(model, com_goal, nu=0)), com_weight)
    c.add("posture", ResidualCost(StateResidual(space, posture, 0),
                                  WeightedQuadratic(posture_weights(model, 10.0, joint_weight, 10.0))), 10.0)
    return c
