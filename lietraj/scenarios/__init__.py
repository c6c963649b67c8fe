"""Closed-loop scenarios: a robot, a task as a receding-horizon controller, pushes, and what to measure, run against
MuJoCo (``run_scenario``): an arm tracking a moving target, a humanoid balancing and squatting, a quadruped trotting.
``SCENARIOS`` lists them for the ``lietraj mpc`` command, ``make_scenario`` builds one by name."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from lietraj.problems import build_entry
from lietraj.scenarios.arm import ARMS, arm_tracking
from lietraj.scenarios.balance import humanoid_balance, humanoid_squat
from lietraj.scenarios.scenario import Scenario, ScenarioReport, fell_below, run_scenario
from lietraj.scenarios.trot import DEFAULT_VELOCITY, quadruped_trot


@dataclass(frozen=True)
class ScenarioEntry:
    """A scenario builder, the robots it takes (the first is the default) and a line saying what it is."""

    build: Callable[..., Scenario]
    robots: tuple[str, ...]
    summary: str


SCENARIOS: dict[str, ScenarioEntry] = {
    "trot": ScenarioEntry(quadruped_trot, tuple(DEFAULT_VELOCITY),
                          "a quadruped trots at a commanded velocity (velocity=...) and is pushed sideways three times"),
    "balance": ScenarioEntry(humanoid_balance, ("talos", "talos_legs", "g1"),
                             "a humanoid balances on both feet, pushed forwards, sideways and backwards"),
    "squat": ScenarioEntry(humanoid_squat, ("talos", "talos_legs", "g1"),
                           "a humanoid squats (depth=...) on both feet, pushed three times"),
    "arm": ScenarioEntry(arm_tracking, tuple(ARMS), "an arm's tool tracks a moving circle, pushed twice at the wrist"),
}


def make_scenario(name: str, robot: str | None = None, **parameters) -> Scenario:
    """``SCENARIOS[name]`` built for ``robot`` (default: the scenario's first robot) with the builder's keyword
    ``parameters`` (e.g. ``duration``, ``velocity``)."""
    return build_entry(SCENARIOS, "scenario", name, robot, parameters)


__all__ = ["SCENARIOS", "Scenario", "ScenarioEntry", "ScenarioReport", "arm_tracking", "fell_below", "humanoid_balance",
           "humanoid_squat", "make_scenario", "quadruped_trot", "run_scenario"]
