"""Closed-loop scenarios: a robot, a task as a receding-horizon controller, pushes, and what to measure, run against
MuJoCo (``run_scenario``): an arm tracking a moving target, a humanoid balancing and squatting, a quadruped trotting."""

from lietraj.scenarios.arm import arm_tracking
from lietraj.scenarios.scenario import Scenario, ScenarioReport, fell_below, run_scenario
from lietraj.scenarios.trot import quadruped_trot

__all__ = ["Scenario", "ScenarioReport", "arm_tracking", "fell_below", "quadruped_trot", "run_scenario"]
