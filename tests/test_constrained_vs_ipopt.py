"""``solve_constrained`` against IPOPT on the same NLP (``ipopt_oracle``: multiple shooting with lietraj's own values
and derivatives): the same optimum (cost to 1e-6 relative), the same active set, the same multipliers.

Two problems, each with a limit that binds, given once as a ``Constraint`` and once as the control box ``u_lb, u_ub``:

- the pendulum swing-up of ``test_problem`` with ``|u| ≤ 6`` (the free optimum reaches 10.3);
- a UR5 reach (T = 25, dt = 0.04, semi-implicit Euler on the joint torques) with the shoulder-pan joint limited to
  ``s_0 ≤ 0.3`` (the free motion goes to 0.39), torques within a quarter of the URDF's efforts (binding on three
  joints) and the tool frame on its target at the end (``frame_position``, an equality).

Tuning: the pendulum needs none. The UR5 needs ``feasibility_tol = 1e-8``: at the default 1e-6 the solve stops with
the terminal equality off by 6e-7 m, whose multiplier (~350) makes its cost 6e-6 (relative) below the optimum.
"""

from __future__ import annotations

import functools
from types import SimpleNamespace

import numpy as np
import pytest

import lietraj
from conftest import relative_error
from ipopt_oracle import assert_derivatives_are_differences, assert_same_active_sets, Transcription, solve_ipopt
from lietraj.dynamics.algorithms.rnea import rnea
from lietraj.dynamics.kinematics.kinematics import frame_placement
from lietraj.optimal_control import (
    ActionModel,
    Constraint,
    ConstraintSet,
    CostSum,
    FrameTranslationResidual,
    Problem,
    ResidualCost,
    RobotDynamics,
    control_regularization,
    frame_position,
    state_regularization,
    torque_limits,
)
from lietraj.optimal_control.costs.residuals import ControlResidual, JointPositionResidual
from lietraj.optimal_control.solvers.augmented_lagrangian import STALL, ConstraintOptions, solve_constrained
from lietraj.optimal_control.solvers.solvers import SolverOptions
from test_problem import pendulum_problem

U_MAX = 6.0  # pendulum torque limit
PAN_MAX, EFFORT_FRACTION = 0.3, 0.25  # UR5 limits
# The active sets are compared at 2e-7 of a bound: the solves must end closer than that (the complementarity at the
# default 1e-6 lets a pendulum torque rest 7e-7 inside its limit, its multiplier 0.07 times that away from zero).
OPTIONS = {"pendulum": ConstraintOptions(complementarity_tol=1e-8), "ur5": ConstraintOptions(feasibility_tol=1e-8)}


def pendulum(limit: str) -> SimpleNamespace:
    base = pendulum_problem(T=40)
    m = base.running[0]
    if limit == "constraint":
        torque = ConstraintSet(base.state_space, 1).add("torque", Constraint(ControlResidual(1), -U_MAX, U_MAX))
        model = ActionModel(m.dynamics, m.cost, constraints=torque)
    else:
        model = ActionModel(m.dynamics, m.cost, u_lb=-U_MAX, u_ub=U_MAX)
    return SimpleNamespace(problem=Problem(base.x0, model, base.terminal, horizon=40), xs0=None, us0=None)


def ur5(limit: str) -> SimpleNamespace:
    model = lietraj.load_robot("ur5")
    sp, n = model.state_space, model.n
    x0 = lietraj.State(None, np.array([0.0, -1.0, 1.5, -0.5, 1.57, 0.0]), np.zeros(n))
    hold = rnea(model, x0, np.zeros(n))  # the torques that hold x0
    target = frame_placement(model, x0, "tool0")[:3, 3] + np.array([-0.2, 0.2, 0.1])
    running = CostSum(sp, n)
    running.add("state", state_regularization(sp, x0, np.r_[np.ones(n), np.full(n, 0.3)], n), 3.0)
    running.add("control", control_regularization(n, reference=hold), 1e-3)
    running.add("goal", ResidualCost(FrameTranslationResidual(model, "tool0", target, n)), 100.0)
    terminal = CostSum(sp, 0)
    terminal.add("state", state_regularization(sp, x0, np.r_[np.zeros(n), np.ones(n)], 0), 1.0)
    terminal.add("goal", ResidualCost(FrameTranslationResidual(model, "tool0", target, 0)), 1e3)
    upper = model.upper_limit.copy()
    upper[0] = PAN_MAX
    joints = ConstraintSet(sp, n).add("joints", Constraint(JointPositionResidual(model, n), model.lower_limit, upper))
    final = ConstraintSet(sp, 0).add("joints", Constraint(JointPositionResidual(model, 0), model.lower_limit, upper))
    final.add("reach", frame_position(model, "tool0", target, 0))
    effort = EFFORT_FRACTION * model.effort_limit
    if limit == "constraint":
        joints.add("torque", torque_limits(model, EFFORT_FRACTION))
        action = ActionModel(RobotDynamics(model, 0.04), running, constraints=joints)
    else:
        action = ActionModel(RobotDynamics(model, 0.04), running, -effort, effort, constraints=joints)
    problem = Problem(x0, action, terminal, horizon=25, terminal_constraints=final)
    return SimpleNamespace(problem=problem, xs0=None, us0=np.tile(hold, (25, 1)))


@functools.cache
def case(name: str, limit: str) -> SimpleNamespace:
    """The problem, its guess and IPOPT's solution from that guess (solved once per module)."""
    c = (pendulum if name == "pendulum" else ur5)(limit)
    c.ipopt = solve_ipopt(c.problem, c.xs0, c.us0)
    return c


CASES = [(name, limit) for name in ("pendulum", "ur5") for limit in ("constraint", "box")]


@pytest.mark.parametrize("second_order", [False, True], ids=["fddp", "ddp"])
@pytest.mark.parametrize("name, limit", CASES)
def test_same_optimum_active_set_and_multipliers_as_ipopt(name, limit, second_order):
    c = case(name, limit)
    oracle = c.ipopt
    assert oracle.success and oracle.defect < 1e-9, (oracle.status, oracle.defect)
    r = solve_constrained(c.problem, c.xs0, c.us0, SolverOptions(max_iter=200), OPTIONS[name],
                          second_order=second_order)
    assert r.status == "converged", (r.status, r.iterations, r.kkt)
    assert abs(r.cost - oracle.cost) <= 1e-6 * abs(oracle.cost), (r.cost, oracle.cost)

    assert_same_active_sets(c.problem, r, oracle)
    # The multipliers agree, and every active inequality row has one: the limits bind.
    for key, (knots, lam) in oracle.multipliers.items():
        assert np.array_equal(r.multipliers[key].knots, knots), key
        assert relative_error(r.multipliers[key].values, lam) < 1e-5, key
        assert np.all(np.abs(lam[oracle.active[key][1]]) > 1e-6), key
    assert np.all(np.abs(oracle.control_multipliers[oracle.active["controls"][1]]) > 1e-6)


def test_the_limits_bind_where_expected():
    """The active sets the comparison relies on are not empty, and the two forms of a limit are one optimum."""
    for name in ("pendulum", "ur5"):
        as_constraint, as_box = case(name, "constraint").ipopt, case(name, "box").ipopt
        assert abs(as_constraint.cost - as_box.cost) <= 1e-7 * as_box.cost
        torque = as_constraint.active["torque"][1]
        assert np.array_equal(torque, as_box.active["controls"][1]) and torque.sum() >= 3
    pan = case("ur5", "constraint").ipopt.active["joints"][1][:, 0]
    assert pan.sum() >= 2  # the shoulder-pan limit
    assert np.flatnonzero(case("ur5", "constraint").ipopt.active["torque"][1].any(axis=0)).tolist() == [0, 1, 3]


def test_the_transcription_s_derivatives_are_its_values(rng):
    """The oracle's ∇f and ∂g/∂w (lietraj's derivatives, placed in the NLP's layout) are the central differences of
    its f and g, at a point off the dynamics and off the bounds."""
    c = ur5("constraint")
    t = Transcription(c.problem)
    w = t.pack(c.problem.rollout(c.us0), c.us0) + 0.05 * rng.normal(size=t.nw)
    assert_derivatives_are_differences(t, w)


def test_a_stalled_inner_solve_ends_before_max_iter():
    """The UR5 reach with ``stationarity_tol = 1e-9``: at penalty 1e7 the augmented problem's relative
    stationarity cannot go below ~2e-8 (rounding in the penalty terms). Every later step would be null (expected
    decrease ~1e-23); the solve ends once ``STALL`` of them made no progress, with a status that says why, the
    constraints met and the KKT residuals reported."""
    c = case("ur5", "constraint")
    r = solve_constrained(c.problem, c.xs0, c.us0, SolverOptions(max_iter=100),
                          ConstraintOptions(feasibility_tol=1e-8, stationarity_tol=1e-9))
    assert r.status.startswith("failed: the stationarity stalled at") and "above stationarity_tol = 1e-09" in r.status
    assert r.iterations < 100 and all(h.expected < SolverOptions().min_expected for h in r.history[-STALL:])
    assert r.kkt.feasibility <= 1e-8 and 1e-9 < r.kkt.stationarity < 1e-7 and r.max_violation <= 1e-8
