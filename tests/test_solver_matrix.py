"""Every solver on every ready problem and robot, long horizons, and rollouts that say where and why they fail.

iLQR and DDP start from a problem's state guess as Crocoddyl's SolverDDP does (their first step is the closed-loop
rollout of the policy computed about it), so that they solve the contact problems whose open-loop guess falls; all
three solvers reach the same optimum. A squat at four times its default horizon starts from the posture held at
rest, not from the rollout of the holding torques, which leaves the unstable standing equilibrium.
"""

import numpy as np
import pytest

import lietraj
from lietraj.optimal_control import (
    ActionModel,
    ConstraintOptions,
    Problem,
    RobotDynamics,
    solve_constrained,
    solve_ilqr,
    state_regularization,
)
from lietraj.problems import PROBLEMS, make_problem

CASES = [(name, robot) for name, entry in PROBLEMS.items() for robot in entry.robots]


@pytest.mark.parametrize("name, robot", CASES, ids=[f"{n}-{r}" for n, r in CASES])
def test_every_solver_converges_to_the_same_optimum(name, robot):
    """With the problem's default limits: hard constraints (squat, balance, trot, jump) are met by the
    augmented-Lagrangian FDDP and by its DDP variant, barriers (talos_reach, falling_cat) by FDDP, iLQR and DDP."""
    example = make_problem(name, robot)
    if example.problem.has_constraints:
        # the default tolerances (1e-6 on each KKT residual) leave costs up to ~1e-5 apart (Talos's balance): tighter
        # ones, so that the comparison is of the optima, not of where each solver stopped
        tight = ConstraintOptions(feasibility_tol=1e-8, complementarity_tol=1e-8)
        results = {solver: solve_constrained(example.problem, example.xs0, example.us0, example.options, tight,
                                             second_order=solver == "ddp") for solver in ("fddp", "ddp")}
    else:
        results = {solver: example.solve(solver) for solver in ("fddp", "ilqr", "ddp")}
    assert all(r.converged for r in results.values()), {s: r.status for s, r in results.items()}
    costs = np.array([r.cost for r in results.values()])
    assert np.ptp(costs) < 1e-5 * costs.min(), costs


SOFT = [(name, PROBLEMS[name].robots[0]) for name in ("squat", "balance", "trot", "jump")]


@pytest.mark.parametrize("name, robot", SOFT, ids=[f"{n}-{r}" for n, r in SOFT])
def test_every_solver_converges_to_the_same_optimum_with_barriers(name, robot):
    example = make_problem(name, robot, constraints="soft")
    results = {solver: example.solve(solver) for solver in ("fddp", "ilqr", "ddp")}
    assert all(r.converged for r in results.values()), {s: r.status for s, r in results.items()}
    costs = np.array([r.cost for r in results.values()])
    assert np.ptp(costs) < 1e-5 * costs.min(), costs


@pytest.mark.parametrize("robot", PROBLEMS["squat"].robots)
def test_a_squat_four_times_longer_converges(robot):
    horizon = 4 * 50
    example = make_problem("squat", robot, horizon=horizon)
    result = example.solve()
    assert result.converged, result.status
    assert example.metrics(result)["depth_error_mm"] < 1.0


def test_a_long_squat_by_ddp():
    assert make_problem("squat", "talos_legs", horizon=200).solve("ddp").converged


def arm_falling_with_a_long_step(T=30):
    """ur5 from a bent posture under zero torques, semi-implicit Euler at dt = 0.3 s: the rollout diverges."""
    model = lietraj.load_robot("ur5")
    space = model.state_space
    x0 = space.neutral()
    x0.s[:] = [0.0, -1.0, 1.0, 0.0, 1.0, 0.0]
    running = ActionModel(RobotDynamics(model, 0.3), state_regularization(space, x0, 1.0, model.n))
    return Problem(x0, running, state_regularization(space, x0, 1.0, 0), horizon=T), model


def test_a_diverging_rollout_names_the_knot_and_the_cause():
    problem, model = arm_falling_with_a_long_step()
    with pytest.raises(ValueError) as error:
        problem.rollout(np.zeros((problem.T, model.n)))
    message = str(error.value)
    assert "at knot 13" in message and "knot 0:" not in message
    assert "diverged" in message and "dt = 0.3 s" in message
    result = solve_ilqr(problem, np.zeros((problem.T, model.n)))
    assert not result.converged and "at knot 13" in result.status and "diverged" in result.status


def test_a_rollout_under_contacts_names_the_knot_it_fails_at():
    """The holding torques of talos' squat, rolled out open loop over 200 knots: the robot leaves its unstable
    equilibrium and folds; the error names a late knot and the divergence, not knot 0 of one step."""
    example = make_problem("squat", "talos", horizon=200)
    with pytest.raises(ValueError) as error:
        example.problem.rollout(example.us0)
    message = str(error.value)
    knot = int(message.split("at knot ")[1].split(",")[0].split(" ")[0])
    assert knot > 20, message
