"""An arm tracks a moving target: ``arm_tracking``.

The tool frame follows a circle of ``radius`` in a vertical plane in front of the arm, once every ``period`` seconds,
from the arm's reference posture. The controller's window (``horizon`` knots of ``dt``) tracks the target's future
positions at its knots (reset every tick from the schedule's clock: ``update``), with the state regularized
towards the start posture, the torques within the URDF's efforts (the models' box), and a terminal cost on the last
knot's target. Pushes on the wrist test the feedback. Tracking: the tool's distance from the target at the ticks
(median and largest, after the first ``settle`` seconds in which the arm joins the circle).
"""

from __future__ import annotations

import numpy as np

from lietraj.dynamics.kinematics.kinematics import frame_placement
from lietraj.dynamics.model.robots import load_robot
from lietraj.mpc.closed_loop import Push
from lietraj.mpc.controller import ModelPredictiveController, MPCOptions
from lietraj.mpc.schedule import Schedule
from lietraj.optimal_control.costs.costs import CostSum, ResidualCost, control_regularization, state_regularization
from lietraj.optimal_control.costs.residuals import FrameTranslationResidual
from lietraj.optimal_control.dynamics.discrete_dynamics import RobotDynamics
from lietraj.optimal_control.problem import ActionModel

from lietraj.problems.support import check_positive

from .scenario import Scenario, check_knots, distance_errors

ARMS = {"ur5": ("tool0", [0.0, -1.0, 1.0, -1.5, -1.5, 0.0], "wrist_3_link"),
        "panda": ("panda_hand", None, "panda_link7")}


def arm_tracking(robot: str = "ur5", duration: float = 5.0, radius: float = 0.15, period: float = 3.0,
                 horizon: int = 30, dt: float = 0.01, iterations: int = 1, solver: str = "fddp",
                 push: float = 20.0, settle: float = 1.0) -> Scenario:
    """The scenario of the module docstring on ``robot`` ("ur5" or "panda"); ``push``: the force (N) of two pushes
    on the wrist, 0.1 s each, at a third and two thirds of the run."""
    if robot not in ARMS:
        raise ValueError(f"arm_tracking: robot must be one of {', '.join(ARMS)}, got {robot!r}")
    check_positive(duration=duration, radius=radius, period=period, dt=dt)
    check_knots(horizon=horizon)
    if not (np.isfinite(push) and push >= 0) or not (np.isfinite(settle) and settle >= 0):
        raise ValueError(f"arm_tracking: push and settle must be 0 or more, got {push!r} and {settle!r}")
    tool, posture, wrist = ARMS[robot]
    model = load_robot(robot)
    space, n = model.state_space, model.n
    x0 = model.reference_state() if posture is None else space.neutral()
    if posture is not None:
        x0.s[:] = posture
    centre = frame_placement(model, x0, tool)[:3, 3] - [0.0, radius, 0.0]

    def target(t) -> np.ndarray:
        phase = 2.0 * np.pi * np.asarray(t, dtype=float) / period
        return centre + radius * np.stack([np.zeros_like(phase), np.cos(phase), np.sin(phase)], axis=-1)

    reach = FrameTranslationResidual(model, tool, np.tile(target(0.0), (horizon, 1)), nu=n)
    running = CostSum(space, n)
    running.add("tool", ResidualCost(reach), 1e4 * dt)
    running.add("posture", state_regularization(space, x0, np.r_[np.full(n, 1.0), np.full(n, 0.3)], n), dt)
    running.add("control", control_regularization(n), 1e-3 * dt)
    final = FrameTranslationResidual(model, tool, target(horizon * dt), nu=0)
    terminal = CostSum(space, 0)
    terminal.add("tool", ResidualCost(final), 1e4 * dt)
    terminal.add("posture", state_regularization(space, x0, np.r_[np.full(n, 1.0), np.full(n, 1.0)], 0), 1.0)
    limit = np.where(model.effort_limit > 0, model.effort_limit, np.inf)
    schedule = Schedule.constant(ActionModel(RobotDynamics(model, dt), running, -limit, limit), terminal)

    def update(controller: ModelPredictiveController) -> None:
        times = controller.time + dt * np.arange(horizon + 1)
        reach.target = target(times[:-1])
        final.target = target(times[-1])

    controller = ModelPredictiveController(schedule, x0, MPCOptions(horizon, solver=solver, iterations=iterations,
                                                                    deadline=dt, relinearize=False), update=update)

    def measure(x):
        return frame_placement(model, x, tool)[:3, 3]

    pushes = [Push(duration / 3.0, wrist, [0.0, push, 0.0]), Push(2.0 * duration / 3.0, wrist, [0.0, 0.0, -push])]
    return Scenario("arm", f"{robot} tracks a circle of {100 * radius:.0f} cm radius every {period:g} s, pushed twice "
                    f"({push:g} N at the wrist)", model, controller, x0, duration, pushes, None,
                    distance_errors("tool", measure, target, settle), tracked="tool", measure=measure, reference=target)
