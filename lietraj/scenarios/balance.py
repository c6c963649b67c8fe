"""A humanoid balances, or squats, on both soles under pushes: ``humanoid_balance``.

One phase at every knot: both soles in 6d contact (velocity-only Baumgarte terms: the plant decides where the feet
are), the CoM tracking ``com0 − depth (1 − cos 2πt/period)/2 ẑ`` (``depth = 0``: hold it), the posture regularized
towards the reference posture, the torques about the quasi-static ones, and barrier costs keeping the contact
wrenches in their friction cones and the centres of pressure in the soles, the joints and torques within their
limits (``support.standing_cost``); at the end of the window the CoM at its reference and the robot at rest. The
CoM reference is a function of the schedule's clock (``Phase.references``), so each window sees the squat's next
part. Pushes on the torso, forwards, sideways and backwards.

Tracking: the CoM's distance from its reference at the ticks (median, largest), and the largest CoM excursion
after a push; the robot fell if its base dropped below 70 % of its standing height or tilted past 45 degrees.
"""

from __future__ import annotations

import numpy as np

from lietraj.dynamics.contacts.equilibrium import quasi_static_torques
from lietraj.dynamics.kinematics.center_of_mass import center_of_mass
from lietraj.mpc.closed_loop import Push
from lietraj.mpc.controller import ModelPredictiveController, MPCOptions
from lietraj.mpc.schedule import Phase, Schedule
from lietraj.optimal_control.dynamics.contact_robot_dynamics import ContactRobotDynamics
from lietraj.optimal_control.problem import ActionModel
from lietraj.problems.support import (
    HUMANOIDS,
    at_rest_cost,
    check_positive,
    contact_gains,
    robot_with_feet,
    standing_cost,
)

from .scenario import Scenario, check_knots, distance_errors, fell_below

TORSO = {"talos": "torso_2_link", "talos_legs": "base_link", "g1": "torso_link"}


def humanoid_balance(robot: str = "talos", duration: float = 6.0, depth: float = 0.0, period: float = 2.0,
                     horizon: int = 20, dt: float = 0.03, push: float | None = None, friction: float = 0.7,
                     iterations: int = 1, solver: str = "fddp") -> Scenario:
    """The scenario of the module docstring. ``depth`` (m): how far the CoM goes down in a squat of ``period``
    seconds, repeated (0: balance); ``push``: the force (N) of three pushes on the torso, 0.1 s each, at a quarter,
    a half and three quarters of the run (default 10 % of the robot's weight)."""
    model, feet = robot_with_feet(robot, HUMANOIDS, "humanoid_balance")
    check_positive(duration=duration, period=period, dt=dt, friction=friction)
    check_knots(horizon=horizon)
    for name, value in (("depth", depth), ("push", push)):
        if value is not None and not (np.isfinite(value) and value >= 0):
            raise ValueError(f"humanoid_balance: {name} must be 0 or more, got {value!r}")
    x0 = model.reference_state()
    com0 = center_of_mass(model, x0).copy()
    weight = model.total_mass * 9.81
    push = 0.1 * weight if push is None else float(push)
    contacts = feet.contacts(baumgarte=(0.0, contact_gains(dt)[1]))
    dynamics = ContactRobotDynamics(model, dt, contacts)
    u_ref = quasi_static_torques(model, x0, contacts)

    def com_path(times: np.ndarray) -> np.ndarray:
        down = 0.5 * depth * (1.0 - np.cos(2.0 * np.pi * np.asarray(times) / period))
        return com0 - np.outer(down, [0.0, 0.0, 1.0])

    running = standing_cost(dynamics, feet, x0, np.tile(com0, (1, 1)), u_ref, com_weight=1e4, control_weight=1e-3,
                            friction=friction)
    com = running.costs["com"].cost.residual
    terminal = at_rest_cost(model, x0, com0, com_weight=1e4, joint_weight=0.01)
    final = terminal.costs["com"].cost.residual
    schedule = Schedule([Phase(ActionModel(dynamics, running), 1, [(com, "target", com_path)], "stand")], terminal)

    def update(controller: ModelPredictiveController) -> None:
        final.target = com_path(schedule.times([controller.knot + horizon]))[0]

    # the gains at the new plan (a pushed g1 falls with the iteration's own), swept over the first knots only: the
    # 120 ms the plant's feedback may run ahead; the knots after them keep the iteration's sweep
    controller = ModelPredictiveController(schedule, x0, MPCOptions(horizon, solver=solver, iterations=iterations,
                                                                    deadline=dt, gains_knots=4), update=update,
                                           us0=np.tile(u_ref, (horizon, 1)))

    def measure(x):
        return center_of_mass(model, x)

    def reference(t):
        return com_path([t])[0]

    directions = ([1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [-1.0, 0.0, 0.0])
    pushes = [Push(duration * (i + 1) / 4.0, TORSO.get(robot, model.body_names[0]), list(push * np.array(d)))
              for i, d in enumerate(directions)]
    task = f"squats {100 * depth:.0f} cm every {period:g} s" if depth > 0 else "balances"
    return Scenario("balance", f"{robot} {task} for {duration:g} s, pushed three times ({push:.3g} N on the torso, "
                    "0.1 s)", model, controller, x0, duration, pushes,
                    fell_below(model, 0.7 * float(x0.H[2, 3]), np.radians(45.0)),
                    distance_errors("CoM", measure, reference), tracked="CoM", measure=measure, reference=reference)


def humanoid_squat(robot: str = "talos", duration: float = 6.0, depth: float = 0.05, period: float = 2.0,
                   horizon: int = 20, dt: float = 0.03, push: float | None = None, friction: float = 0.7,
                   iterations: int = 1, solver: str = "fddp") -> Scenario:
    """``humanoid_balance`` squatting: the CoM goes ``depth`` (m) down and back up every ``period`` seconds."""
    if not depth > 0:
        raise ValueError(f"humanoid_squat: depth must be a positive number of metres, got {depth!r}")
    return humanoid_balance(robot, duration, depth, period, horizon, dt, push, friction, iterations, solver)
