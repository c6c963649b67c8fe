"""A closed-loop scenario: a robot, a task as a receding-horizon controller, and what to measure, run on a plant.

``Scenario`` is the data (its controller, the state it starts from, the pushes, how long, how to tell a fall, what
tracking errors mean for the task); ``run_scenario`` builds the MuJoCo plant from the robot's own URDF (unless a
plant is given), runs ``mpc.closed_loop`` and returns a ``ScenarioReport``: the loop's log, the tick-time
statistics, the real-time factor, the task's tracking errors and whether the robot fell.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from lietraj.dynamics.lie.state import State
from lietraj.dynamics.model.model import RobotModel
from lietraj.mpc.closed_loop import ClosedLoopLog, Plant, Push, closed_loop
from lietraj.mpc.controller import ModelPredictiveController


@dataclass(eq=False)
class Scenario:
    """``controller`` runs ``robot`` from ``x0`` for ``duration`` seconds with ``pushes``; ``fell(state)`` returns why
    the robot fell (None while it stands; ends the run); ``tracking(log)`` the task's errors by name (in the units
    their names say); the point the task moves, ``tracked`` (its name), is ``measure(state)`` (3,) and should be at
    ``reference(t)`` (3,) (world frame, m); ``plant_options`` go to ``MujocoPlant``; ``inner_period`` is the feedback
    loop's period."""

    name: str
    description: str
    robot: RobotModel
    controller: ModelPredictiveController
    x0: State
    duration: float
    pushes: Sequence[Push] = ()
    fell: Callable[[State], str | None] | None = None
    tracking: Callable[[ClosedLoopLog], dict[str, float]] | None = None
    tracked: str = ""
    measure: Callable[[State], np.ndarray] | None = None
    reference: Callable[[float], np.ndarray] | None = None
    plant_options: dict = field(default_factory=dict)
    inner_period: float = 0.001


@dataclass(eq=False)
class ScenarioReport:
    """The run's ``log``, its ``statistics`` (``ClosedLoopLog.statistics``) and ``tracking`` errors, ``fell``: the
    reason the robot fell ("" if it did not), and the plant's ``contact_forces`` at every tick (contact geometry ->
    normal force, N; empty dicts when the plant has no such method)."""

    scenario: Scenario
    log: ClosedLoopLog
    statistics: dict[str, float]
    tracking: dict[str, float]
    fell: str
    contact_forces: list[dict[str, float]] = field(default_factory=list)

    def series(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(t, actual, reference)``: the tick times (N,) and the tracked point measured and asked for, (N, 3) each
        (empty without a tracked point)."""
        sc, t = self.scenario, np.array(self.log.times)
        if sc.measure is None or sc.reference is None or not len(t):
            return t, np.zeros((len(t), 3)), np.zeros((len(t), 3))
        return t, np.array([sc.measure(x) for x in self.log.states]), np.array([sc.reference(ti) for ti in t])

    @property
    def ok(self) -> bool:
        """Whether the whole duration ran: no fall, no plant failure."""
        return not self.fell and not self.log.error

    def lines(self) -> list[str]:
        """The report as text lines: tick times, deadline overruns, failed ticks, real-time factor, tracking."""
        s = self.statistics
        out = [f"{self.scenario.description}",
               f"simulated {self.log.simulated_time:.2f} s in {self.log.wall_time:.2f} s of wall time "
               f"(real-time factor {s['real_time_factor']:.2f}), {s['ticks']} ticks",
               f"tick time: median {s['tick_median_ms']:.2f} ms, 99th percentile {s['tick_p99_ms']:.2f} ms, max "
               f"{s['tick_max_ms']:.2f} ms; deadline overruns {s['overruns']}, failed ticks {s['failed_ticks']}"]
        if not math.isnan(s["prepare_median_ms"]):  # a real-time iteration: the ticks' other half
            out.append(f"preparation (before each state is measured): median {s['prepare_median_ms']:.2f} ms; the tick "
                       "times above are the delays from measurement to control")
        out += [f"{name}: {value:.4g}" for name, value in self.tracking.items()]
        if self.log.error:
            out.append(f"the simulation stopped: {self.log.error}")
        out.append(f"fell: {self.fell}" if self.fell else "fell: no")
        return out


def run_scenario(scenario: Scenario, plant: Plant | None = None, on_tick=None) -> ScenarioReport:
    """Run ``scenario`` on ``plant`` (default: a ``lietraj.sim.MujocoPlant`` of its robot, reset to ``x0``);
    ``on_tick(tick, state)`` as ``closed_loop``'s."""
    if plant is None:
        from lietraj.sim import MujocoPlant  # MuJoCo loads when a scenario runs on it, not when one is built
        plant = MujocoPlant(scenario.robot, **scenario.plant_options)
        plant.reset(scenario.x0)
    forces: list[dict[str, float]] = []
    measure = getattr(plant, "contact_forces", None)

    def record(tick, x) -> None:
        forces.append(measure() if measure is not None else {})
        if on_tick is not None:
            on_tick(tick, x)

    log = closed_loop(scenario.controller, plant, scenario.duration, inner_period=scenario.inner_period,
                      pushes=scenario.pushes, stop=scenario.fell, on_tick=record)
    tracking = scenario.tracking(log) if scenario.tracking is not None and log.ticks else {}
    return ScenarioReport(scenario, log, log.statistics(), tracking, log.stopped, forces)


def distance_errors(name: str, measure: Callable[[State], np.ndarray], reference: Callable[[float], np.ndarray],
                    settle: float = 0.0) -> Callable[[ClosedLoopLog], dict[str, float]]:
    """A ``Scenario.tracking``: the median and largest distance (mm) of the point ``measure(state)`` from
    ``reference(t)`` at the ticks from ``settle`` seconds on, as "<name> error median (mm)" and "... max (mm)"."""
    def tracking(log: ClosedLoopLog) -> dict[str, float]:
        errors = np.array([np.linalg.norm(measure(x) - reference(t)) for t, x in zip(log.times, log.states)
                           if t >= settle])
        if errors.size == 0:
            return {}
        return {f"{name} error median (mm)": 1e3 * float(np.median(errors)),
                f"{name} error max (mm)": 1e3 * float(errors.max())}
    return tracking


def check_knots(**values) -> None:
    """Raise ValueError naming the first of ``values`` (name=value) that is not a positive integer (knot counts)."""
    for name, value in values.items():
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
            raise ValueError(f"{name} must be a positive integer number of knots, got {value!r}")


def fell_below(model: RobotModel, height: float, tilt: float = np.radians(60.0)) -> Callable[[State], str | None]:
    """A fall test: the base below ``height`` (m) or tilted more than ``tilt`` (rad) from upright."""
    def fell(x: State) -> str | None:
        if x.H[2, 3] < height:
            return f"the base is {x.H[2, 3]:.3f} m high (below {height:.3f} m)"
        angle = float(np.arccos(np.clip(x.H[2, 2], -1.0, 1.0)))
        if angle > tilt:
            return f"the base is tilted {np.degrees(angle):.0f} degrees"
        return None
    return fell
