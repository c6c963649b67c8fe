"""Actuator limits of the ready problems (issue 15, item 4).

- ``lietraj.load_robot`` keeps a URDF's limits as written, placeholders included (solo12's 1000 N m, 1000 rad/s);
- the ready problems use the robot's documented actuator limits instead (``lietraj.problems.actuators``), so a 2 m
  solo12 jump with barriers shows torques far beyond its 2.5 N m actuators rather than at 5 % of a placeholder;
- the metrics say plainly when a model's torque limits are unknown;
- the ready problems' torques stay within their limits: as hard constraints (the default, to 1e-6), and with
  ``constraints="soft"`` because the barrier starts ``TORQUE_LIMIT_SAFETY`` inside them.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

import lietraj
from lietraj.problems import PROBLEMS, make_problem, squat
from lietraj.problems.actuators import ACTUATOR_LIMITS, has_placeholder_limits, load_robot_with_actuator_limits
from lietraj.optimal_control.costs.costs import torque_limit_cost
from lietraj.problems.support import TORQUE_LIMIT_SAFETY

READY_ROBOTS = sorted({robot for entry in PROBLEMS.values() for robot in entry.robots})


def test_load_robot_keeps_the_urdf_placeholders_and_the_ready_problems_use_solo12s_documented_limits():
    urdf = lietraj.load_robot("solo12")
    assert np.all(urdf.effort_limit == 1000.0) and np.all(urdf.velocity_limit == 1000.0)
    assert has_placeholder_limits(urdf)
    documented = ACTUATOR_LIMITS["solo12"]
    assert (documented.effort, documented.velocity) == (2.5, 80.0)
    for name in ("squat", "balance", "trot", "jump"):
        model = make_problem(name, "solo12").model
        assert np.all(model.effort_limit == 2.5) and np.all(model.velocity_limit == 80.0), name
        assert not has_placeholder_limits(model)
        # only the limits change: the same joints, masses and posture as the URDF's model
        assert model.joint_names == urdf.joint_names and np.array_equal(model.mass, urdf.mass)
        assert np.array_equal(model.lower_limit, urdf.lower_limit)


@pytest.mark.parametrize("robot", READY_ROBOTS)
def test_every_ready_robot_has_real_finite_limits(robot):
    model = load_robot_with_actuator_limits(robot)
    assert not has_placeholder_limits(model)
    for limit in (model.effort_limit, model.velocity_limit):
        assert np.all(np.isfinite(limit) & (limit > 0) & (limit < 1000.0)), robot
    if robot not in ACTUATOR_LIMITS:  # a URDF without placeholders is used as it is
        assert model is lietraj.load_robot(robot)


def test_metrics_say_the_torque_limits_are_unknown_on_placeholder_limits():
    example = squat("solo12", horizon=10)
    result = example.solve()
    known = example.metrics(result)
    assert 0.0 < known["torque_ratio"] <= 1.0 and "torque_limits_unknown" not in known
    unknown = dataclasses.replace(example, model=lietraj.load_robot("solo12")).metrics(result)
    assert math.isnan(unknown["torque_ratio"]) and unknown["torque_limits_unknown"] == 1.0


def test_a_2_m_solo12_jump_shows_torques_far_beyond_its_actuators():
    example = make_problem("jump", "solo12", height=2.0, constraints="soft")
    metrics = example.metrics(example.solve())
    assert metrics["apex_mm"] > 1000.0
    assert metrics["torque_ratio"] > 1.5  # 52 N m on the URDF's 1000 N m read 0.05


def test_the_torque_barrier_starts_inside_the_effort_limits():
    model = load_robot_with_actuator_limits("solo12")
    barrier = torque_limit_cost(model, TORQUE_LIMIT_SAFETY).activation
    assert np.allclose(barrier.upper, TORQUE_LIMIT_SAFETY * model.effort_limit)
    assert np.allclose(barrier.lower, -TORQUE_LIMIT_SAFETY * model.effort_limit)
    assert 0.9 <= TORQUE_LIMIT_SAFETY < 1.0


LIFTS = {"talos_legs": "right_sole_link", "talos": "right_sole_link", "solo12": "FL_FOOT", "anymal": "LF_FOOT",
         "hyq": "lf_foot", "a1": "FL_foot"}
WITHIN_LIMITS = (
    [pytest.param(name, robot, {}, id=f"{name}-{robot}") for name in ("squat", "balance") for robot in PROBLEMS[name].robots]
    + [pytest.param("balance", robot, {"lift": frame}, id=f"balance-{robot}-lift") for robot, frame in LIFTS.items()]
    + [pytest.param(name, robot, {}, id=f"{name}-{robot}") for name in ("trot", "jump") for robot in PROBLEMS[name].robots]
)


# talos_reach is Crocoddyl's problem term for term, with no torque barrier: its optimum asks 6.7 times an arm's limit.
@pytest.mark.parametrize("name, robot, parameters", WITHIN_LIMITS)
def test_the_ready_problems_keep_their_torques_within_the_limits(name, robot, parameters):
    example = make_problem(name, robot, **parameters)
    metrics = example.metrics(example.solve())
    assert metrics["converged"] == 1.0
    # hard limits hold to the solver's tolerance, 1e-6 of the limit; barriers keep them strictly (started inside)
    assert metrics["torque_ratio"] <= 1.0 + 1e-6
