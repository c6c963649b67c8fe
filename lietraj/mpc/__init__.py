"""Receding-horizon control: a ``Schedule`` of phases, the ``ModelPredictiveController`` that solves a window of it
every tick, and ``closed_loop``, which runs a controller against a plant (a simulator)."""

from lietraj.mpc.closed_loop import ClosedLoopLog, Plant, Push, closed_loop
from lietraj.mpc.controller import SOLVERS, ModelPredictiveController, MPCOptions, Plan, Tick
from lietraj.mpc.schedule import Phase, Schedule, Segment

__all__ = ["ClosedLoopLog", "MPCOptions", "ModelPredictiveController", "Phase", "Plan", "Plant", "Push", "SOLVERS",
           "Schedule", "Segment", "Tick", "closed_loop"]
