"""Ready-made problems for real robots: reaching while balancing, squats, balancing, quadruped gaits (a trot and a
jump, with contact switches and touchdown impacts), each a function returning an ``ExampleProblem`` (the problem,
its default guess and solver, and the numbers that check its solution).

A problem is data built from ``lietraj.dynamics`` and ``lietraj.optimal_control`` and draws nothing. ``PROBLEMS``
maps each name to its builder and the robots it supports (the command line's ``lietraj list``).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from lietraj.problems.balance import balance
from lietraj.problems.example_problem import SOLVERS, ExampleProblem
from lietraj.problems.falling_cat import falling_cat
from lietraj.problems.gaits import jump, trot
from lietraj.problems.squat import squat
from lietraj.problems.support import FEET, HUMANOIDS, QUADRUPEDS, Feet
from lietraj.problems.talos_reach import talos_reach


@dataclass(frozen=True)
class ProblemEntry:
    """A problem builder, the robots it takes (the first is the default), a line saying what it is and the solver
    its ``ExampleProblem`` names (the command compiles that one ahead of a first solve)."""

    build: Callable[..., ExampleProblem]
    robots: tuple[str, ...]
    summary: str
    solver: str = "fddp"


PROBLEMS: dict[str, ProblemEntry] = {
    "talos_reach": ProblemEntry(talos_reach, ("talos",),
                                "Talos on both feet reaches (0.4, 0, 1.2) with its left gripper (Crocoddyl's example)"),
    "squat": ProblemEntry(squat, ("talos_legs",) + tuple(r for r in FEET if r != "talos_legs"),
                          "the CoM goes down and back up, feet fixed, forces in the friction cones"),
    "balance": ProblemEntry(balance, ("talos_legs",) + tuple(r for r in FEET if r != "talos_legs"),
                            "recover from a push on all feet, or lift one foot (lift=FRAME)"),
    "trot": ProblemEntry(trot, QUADRUPEDS, "two trotting steps: diagonal feet swing in turn and land with an impact"),
    "jump": ProblemEntry(jump, QUADRUPEDS, "take off from four feet, fly, land with an impact a step ahead"),
    "falling_cat": ProblemEntry(falling_cat, ("solo12",),
                                "in zero gravity, roll the body 15° about its spine with the legs alone, as a falling "
                                "cat (DDP)", solver="ddp"),
}


def make_problem(name: str, robot: str | None = None, **parameters) -> ExampleProblem:
    """``PROBLEMS[name]`` built for ``robot`` (default: the problem's first robot) with the builder's keyword
    ``parameters`` (e.g. ``horizon``, ``dt``)."""
    return build_entry(PROBLEMS, "problem", name, robot, parameters)


def build_entry(registry: Mapping, kind: str, name: str, robot: str | None, parameters: dict):
    """``registry[name].build(robot=..., **parameters)``: a ValueError names the ``kind`` ("problem", "scenario") and
    what it takes when the name, the robot (default: the entry's first) or a parameter is unknown."""
    if name not in registry:
        raise ValueError(f"unknown {kind} {name!r}; known: {', '.join(registry)}")
    entry = registry[name]
    robot = entry.robots[0] if robot is None else robot
    if robot not in entry.robots:
        raise ValueError(f"{kind} {name!r} takes the robots {', '.join(entry.robots)}; got {robot!r}")
    accepted = [p for p in inspect.signature(entry.build).parameters if p != "robot"]
    unknown = [k for k in parameters if k not in accepted]
    if unknown:
        raise ValueError(f"{kind} {name!r} has no parameter {', '.join(map(repr, unknown))}; its parameters: "
                         f"{', '.join(accepted)}")
    return entry.build(robot=robot, **parameters)


__all__ = ["ExampleProblem", "FEET", "Feet", "HUMANOIDS", "PROBLEMS", "ProblemEntry", "QUADRUPEDS", "SOLVERS", "balance",
           "falling_cat", "jump", "make_problem", "squat", "talos_reach", "trot"]
