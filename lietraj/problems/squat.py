"""A squat: the centre of mass goes down by a chosen depth and back up while every foot stays where it is.

Humanoids (``talos``, ``talos_legs``) stand on both soles (6D contacts), quadrupeds (``solo12``, ``anymal``, ...)
on their four feet (3D contacts, forces in world axes). The contacts carry Baumgarte terms towards the feet's
initial poses (``Kp = (2 / dt_c)²``-style gains, critically damped at a time constant of a few knots) so that the
Euler integration does not let the feet creep.

Costs, running ones ``dt`` times as in Crocoddyl's integrated models:

- CoM tracking ``½ w_com |c - c_ref(t)|²``, with ``c_ref(t) = c_0 - depth · (1 - cos 2πt/T) / 2 · e_z`` (down
  and back up, at rest at both ends);
- state regularization to the initial posture: base orientation and joints towards it, velocities towards zero,
  the base position free (it must move for the CoM to move);
- control regularization ``½ w_u |u - u_0|²`` about the quasi-static torques ``u_0`` of the initial posture;
- terminal: back in the initial state, at rest.

The initial guess is the initial posture at rest at every knot, held by ``u_0``: a state guess rather than the
rollout of ``u_0``, which leaves the (unstable) standing equilibrium as the contact solve's rounding grows, and falls
over a long horizon (talos at 100 knots). ``metrics`` adds the depth reached and the error from the asked depth.
"""

from __future__ import annotations

import numpy as np

from lietraj.dynamics.kinematics.center_of_mass import center_of_mass
from lietraj.dynamics.contacts.equilibrium import quasi_static_torques
from lietraj.dynamics.kinematics.kinematics import frame_placement
from lietraj.optimal_control.dynamics.contact_robot_dynamics import ContactRobotDynamics
from lietraj.optimal_control.problem import ActionModel, Problem
from lietraj.optimal_control.solvers.solvers import SolverOptions, SolverResult
from lietraj.problems.example_problem import ExampleProblem
from lietraj.problems.support import (
    FEET,
    at_rest_cost,
    contact_gains,
    hard_constraints,
    robot_with_feet,
    standing_constraints,
    standing_cost,
)


def squat(robot: str = "talos_legs", depth: float | None = None, horizon: int = 50, dt: float = 0.04,
          com_weight: float = 1e5, control_weight: float = 1e-3, friction: float = 0.7,
          constraints: str = "hard") -> ExampleProblem:
    """The squat of the module docstring for ``robot`` over ``horizon`` knots of ``dt`` seconds: the CoM goes
    ``depth`` metres down and back up (default: 12 % of the standing CoM height, about 10 cm for Talos and 3 cm
    for solo12). Weights: ``com_weight`` on the CoM error (m²), ``control_weight`` on the torques' deviation from
    holding the posture (N²m²). ``friction``: the Coulomb coefficient of the friction cones the forces are kept
    in (with the soles' centres of pressure) by constraints at the cones, soles, joint and
    torque limits themselves (``constraints="hard"``, the default: ``support.standing_constraints``, met by
    ``solve_constrained``), or with ``constraints="soft"`` by barrier costs started inside them."""
    hard = hard_constraints(constraints, "squat")
    model, feet = robot_with_feet(robot, tuple(FEET), "squat")
    x0 = model.reference_state()
    c0 = center_of_mass(model, x0)
    depth = 0.12 * c0[2] if depth is None else depth
    if not (np.isfinite(depth) and 0.0 < depth < 0.5 * c0[2]):
        raise ValueError(f"squat: depth must be in (0, {0.5 * c0[2]:.3f}) m (half the CoM height), got {depth!r}")
    contacts = feet.contacts(baumgarte=contact_gains(dt), targets=[frame_placement(model, x0, f) for f in feet.frames])
    u0 = quasi_static_torques(model, x0, contacts)
    t = np.arange(horizon) / horizon
    com_ref = c0 - np.outer(depth * 0.5 * (1.0 - np.cos(2.0 * np.pi * t)), [0.0, 0.0, 1.0])

    dynamics = ContactRobotDynamics(model, dt, contacts)
    running = standing_cost(dynamics, feet, x0, com_ref, u0, com_weight, control_weight, friction, barriers=not hard)
    terminal = at_rest_cost(model, x0, c0, com_weight, joint_weight=1.0)
    limits = standing_constraints(dynamics, feet, friction) if hard else None
    problem = Problem(x0, ActionModel(dynamics, running, constraints=limits), terminal, horizon=horizon)

    def checks(ex: ExampleProblem, result: SolverResult) -> dict[str, float]:
        reached = float(c0[2] - np.min(center_of_mass(model, result.xs)[:, 2]))
        return {"depth_mm": 1e3 * reached, "depth_error_mm": 1e3 * abs(reached - depth)}

    return ExampleProblem(
        "squat", model, problem, np.tile(u0, (horizon, 1)), problem.constant_trajectory(), solver="fddp",
        options=SolverOptions(max_iter=200),
        friction=friction,
        description=f"{robot} squats: CoM {100 * depth:g} cm down and back up, feet fixed",
        soles=feet.soles, checks=checks)
