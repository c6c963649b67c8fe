"""The falling cat: a quadruped in free fall rolls its body about its long axis with its legs alone.

Solo12 floats in zero gravity (in free fall the motion about the centre of mass is the same: gravity exerts no
torque about it) with no contact, at rest in its standing posture. It must end, after ``horizon`` knots of ``dt``
seconds (default 100 of 15 ms), with its body rolled by ``angle`` degrees (default 15) about its own x axis (the
spine; a cat rights itself by this roll), in the same posture and at rest. The floating base is not actuated and
the total angular momentum stays zero: the body turns only by the reaction to the legs' motion, and it keeps the
angle gained only if the legs go round a closed loop (a leg moved and brought back along the same path gives the
rotation back).

- dynamics: the free robot (ABA, ``RobotDynamics``), semi-implicit Euler; the model has its actuators' documented
  limits (2.5 N m, 80 rad/s, ``lietraj.problems.actuators``) and the joint ranges the ODRI driver enforces
  (``JOINT_RANGES``);
- running cost, ``dt`` times: the joints towards the posture (weight 1) and the velocities towards zero (0.1), the
  torques ``1e-3 · ½|u|²``, and the joint-limit and torque-limit barriers of the other ready problems
  (``add_limit_costs``); the body's orientation and position are free on the way;
- terminal cost: the body's orientation at the goal (weight 1e3), the joints at the posture (1e2), every velocity
  zero (1e2); the body's position is free (it moves as the legs do, the centre of mass staying put);
- the legs must not hit each other: each hip abduction joint may turn its leg under the body by at most
  ``HIP_INWARD_LIMIT`` (0.4 rad, the range's bound on that side), so that the two legs of a pair never cross;
  ``leg_clearance_mm`` in the metrics checks it;
- the guess: rest (zero torques, their rollout).

Why DDP wins here. The body turns through the *curvature* of the map from the legs' motion to the body's rotation: to
first order about rest, the rotation is proportional to the legs' net displacement, zero for a loop; a loop turns the
body by an amount that grows with the area it encloses, a second-order effect (the Lie bracket of two leg motions). At
the optimum the terminal cost still pulls on the orientation, so the costate ``λ`` on it is not small, and ``λᵀ∂²f``,
the term Gauss–Newton drops, tells the loops that turn the body from those that do not. Without it FDDP (and iLQR)
creep along a valley of nearly equal costs: full steps at the smallest regularization, the cost within 0.13 % of the
optimum after 31 iterations but the legs' motion still 16° from the optimal one, 1.4° after 250; DDP, with the term,
converges quadratically (0.5° after 24 iterations, 0.006° after 27). Measured (2026-11-26, warm, one thread, median of
3, load average 1.6 to 2.0; the same stopping test Σ|Q_u|² < 1e-9 from the same guess): DDP 29 iterations and 0.80 s
(27.5 ms each), FDDP 398 and 2.72 s (6.8 ms each), iLQR 398 and 2.73 s, all to the cost 2.0571526 (relative
differences 1.5e-8).

The problem has many local optima (the legs can go round many loops). From rest both solvers reach the same one,
FDDP in 8 to 22 times as many iterations as DDP, at angles from 13° to 17° (and -15°), horizons from 90 to 110
knots and dt = 14 ms; with more time (120 knots) FDDP needs only 2.8 times as many; at 18°, or at dt = 16 ms, FDDP
finds in 36 iterations another loop, cheaper than the one DDP reaches (costs 1.92 and 1.55 against 2.59 and 1.89).
The metrics: ``roll_deg`` (the body's roll reached), ``orientation_error_deg`` (from the goal),
``posture_error_deg`` and ``final_joint_speed`` (at the end), ``joint_excursion_deg`` (the largest joint motion),
``joint_limit_margin_deg`` (to the ranges, the inward limit included; negative beyond), ``speed_ratio`` (the largest
joint speed over its limit) and ``leg_clearance_mm`` (the smallest distance between the thigh and shank axes of two
different legs).
"""

from __future__ import annotations

import itertools

import numpy as np

from lietraj.dynamics.kinematics.kinematics import frame_placement, frame_placements
from lietraj.dynamics.lie import so3
from lietraj.dynamics.model.model import RobotModel
from lietraj.optimal_control.costs.costs import CostSum, control_regularization, state_regularization
from lietraj.optimal_control.dynamics.discrete_dynamics import RobotDynamics
from lietraj.optimal_control.problem import ActionModel, Problem
from lietraj.optimal_control.solvers.solvers import SolverOptions, SolverResult
from lietraj.problems.actuators import load_robot_with_actuator_limits
from lietraj.problems.example_problem import ExampleProblem
from lietraj.problems.support import FEET, add_limit_costs, posture_weights

ROBOTS = ("solo12",)
# The joint ranges (rad) of Solo12's HAA, HFE and KFE joints, the same on every leg: "lower_joint_limits: [-1.2, -1.7,
# -3.4, ...]" and "upper_joint_limits: [1.2, 1.7, +3.4, ...]" in https://github.com/open-dynamic-robot-initiative/
# odri_control_interface/blob/master/demos/config_solo12.yaml; JointModules::HasError (src/joint_modules.cpp) stops
# the robot when a joint leaves them. Its URDF gives every joint ±10 rad.
JOINT_RANGES: dict[str, tuple[tuple[float, float], ...]] = {
    "solo12": ((-1.2, 1.2), (-1.7, 1.7), (-3.4, 3.4)) * 4,
}
# How far (rad) a hip abduction joint may turn its leg under the body from its zero (where the leg's plane is parallel
# to the body's sagittal plane): with both legs of a pair there, in the standing posture, their thigh and shank axes
# are 11 cm apart.
HIP_INWARD_LIMIT = 0.4
# Weights: running (times dt) on the joints, the velocities and the torques; terminal on the body's orientation, the
# joints and the velocities.
JOINT_WEIGHT, VELOCITY_WEIGHT, CONTROL_WEIGHT = 1.0, 0.1, 1e-3
GOAL_ORIENTATION_WEIGHT, GOAL_JOINT_WEIGHT, GOAL_VELOCITY_WEIGHT = 1e3, 1e2, 1e2


def falling_cat(robot: str = "solo12", angle: float = 15.0, horizon: int = 100, dt: float = 0.015) -> ExampleProblem:
    """The falling cat of the module docstring: ``robot`` in zero gravity rolls its body by ``angle`` degrees (either
    sign, at most 90) about its long axis with its legs, in ``horizon`` knots of ``dt`` seconds, ending in its
    initial posture at rest. Solved by DDP by default (FDDP and iLQR take 14 times as many iterations)."""
    if robot not in ROBOTS:
        raise ValueError(f"falling_cat: robot must be one of {', '.join(ROBOTS)}, got {robot!r}")
    if not (np.isfinite(angle) and 0.0 < abs(angle) <= 90.0):
        raise ValueError(f"falling_cat: angle must be a number of degrees in [-90, 90] other than 0, got {angle!r}")
    x0 = load_robot_with_actuator_limits(robot).reference_state()
    model = _free_model(robot, x0)
    space, n = model.state_space, model.n
    goal = x0.copy()
    goal.H[:3, :3] = x0.H[:3, :3] @ so3.exp(np.radians(angle) * np.array([1.0, 0.0, 0.0]))

    running = CostSum(space, n)
    running.add("posture", state_regularization(space, goal, posture_weights(model, 0.0, JOINT_WEIGHT, VELOCITY_WEIGHT),
                                                n), dt)
    running.add("control", control_regularization(n, state_space=space), dt * CONTROL_WEIGHT)
    add_limit_costs(running, model, dt)
    terminal = CostSum(space, 0)
    terminal.add("goal", state_regularization(space, goal, posture_weights(
        model, GOAL_ORIENTATION_WEIGHT, GOAL_JOINT_WEIGHT, GOAL_VELOCITY_WEIGHT), 0))
    problem = Problem(x0, ActionModel(RobotDynamics(model, dt), running), terminal, horizon=horizon)
    legs = _leg_bodies(model, FEET[robot].frames)

    def checks(ex: ExampleProblem, result: SolverResult) -> dict[str, float]:
        xs = result.xs
        xT = xs[len(xs) - 1]
        turned = so3.log(x0.H[:3, :3].T @ xT.H[:3, :3])
        error = so3.log(goal.H[:3, :3].T @ xT.H[:3, :3])
        margin = np.minimum(xs.s - model.lower_limit, model.upper_limit - xs.s)
        return {"roll_deg": float(np.degrees(turned[0])),
                "orientation_error_deg": float(np.degrees(np.linalg.norm(error))),
                "posture_error_deg": float(np.degrees(np.max(np.abs(xT.s - x0.s)))),
                "final_joint_speed": float(np.max(np.abs(xT.v[6:]))),
                "joint_excursion_deg": float(np.degrees(np.max(np.abs(xs.s - x0.s)))),
                "joint_limit_margin_deg": float(np.degrees(np.min(margin))),
                "speed_ratio": float(np.max(np.abs(xs.v[:, 6:]) / model.velocity_limit)),
                "leg_clearance_mm": 1e3 * leg_clearance(model, xs, legs)}

    return ExampleProblem(
        "falling_cat", model, problem, np.zeros((horizon, n)), solver="ddp", options=SolverOptions(max_iter=1000),
        description=f"{robot} in zero gravity rolls its body {angle:g}° with its legs alone and ends as it began",
        checks=checks)


def _free_model(robot: str, x0) -> RobotModel:
    """The robot without gravity, with its documented joint ranges and the hip abduction joints kept from swinging
    their legs under the body by more than ``HIP_INWARD_LIMIT``."""
    model = load_robot_with_actuator_limits(robot)
    lower, upper = np.array(JOINT_RANGES[robot]).T
    for foot in FEET[robot].frames:
        hip = _leg_bodies(model, (foot,))[0][0]
        j = model.joint_index(model.joint_names[hip])
        # the direction of the hip joint that brings the foot towards the body's sagittal plane
        moved = x0.copy()
        moved.s[j] += 1e-3
        lateral = [abs((x.H[:3, :3].T @ (frame_placement(model, x, foot)[:3, 3] - x.H[:3, 3]))[1]) for x in (x0, moved)]
        if lateral[1] < lateral[0]:
            upper[j] = min(upper[j], HIP_INWARD_LIMIT)
        else:
            lower[j] = max(lower[j], -HIP_INWARD_LIMIT)
    return model.replace(gravity=np.zeros(3), lower_limit=lower, upper_limit=upper)


def _leg_bodies(model: RobotModel, feet) -> list[tuple[int, ...]]:
    """For each foot frame, the bodies of its leg from the one the base carries to the foot's."""
    legs = []
    for foot in feet:
        chain = [model.frames[model.frame_index(foot)].body]
        while model.parent[chain[-1]] > 0:
            chain.append(int(model.parent[chain[-1]]))
        legs.append(tuple(reversed(chain)))
    return legs


def leg_clearance(model: RobotModel, xs, legs: list[tuple[int, ...]]) -> float:
    """The smallest distance (m) over the knots of ``xs`` between the segments of two different legs, each leg the
    polyline of its bodies' origins after the first (the hip's) and its foot: thigh and shank."""
    poses = frame_placements(model, xs)
    origin: dict[int, int] = {}  # body -> its own frame (the first "body" frame on it: a merged link's comes after)
    for k, f in enumerate(model.frames):
        if f.kind == "body":
            origin.setdefault(f.body, k)
    segments = []
    for leg, foot in zip(legs, FEET[model.name].frames):
        points = [poses[:, origin[b], :3, 3] for b in leg[1:]] + [poses[:, model.frame_index(foot), :3, 3]]
        segments.append([(p, q) for p, q in zip(points, points[1:])])
    return min(float(np.min(_segment_distance(*a, *b))) for one, other in itertools.combinations(segments, 2)
               for a in one for b in other)


def _segment_distance(p1, q1, p2, q2) -> np.ndarray:
    """Distance between the segments ``[p1, q1]`` and ``[p2, q2]`` of non-zero length, row by row (N, 3)."""
    d1, d2, r = q1 - p1, q2 - p2, p1 - p2
    a, e, b = np.sum(d1 * d1, 1), np.sum(d2 * d2, 1), np.sum(d1 * d2, 1)
    c, f = np.sum(d1 * r, 1), np.sum(d2 * r, 1)
    denominator = a * e - b * b
    s = np.where(denominator > 1e-12 * a * e, np.clip((b * f - c * e) / np.where(denominator > 0, denominator, 1), 0, 1),
                 0.0)
    t = (b * s + f) / e
    s = np.where(t < 0, np.clip(-c / a, 0, 1), np.where(t > 1, np.clip((b - c) / a, 0, 1), s))
    t = np.clip(t, 0, 1)
    return np.linalg.norm(r + d1 * s[:, None] - d2 * t[:, None], axis=1)
