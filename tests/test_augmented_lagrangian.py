"""The augmented-Lagrangian FDDP (``solve_constrained``): LQ problems with linear equality and inequality constraints
against cvxpy's QP solution, the statuses of infeasible and contradictory requests, and what carries over from FDDP
(control boxes, DDP's term, infeasible guesses)."""

from __future__ import annotations

import contextlib
import io

import cvxpy as cp
import numpy as np
import pytest

from lietraj.dynamics.lie.state import State
from lietraj.optimal_control import (
    ActionModel,
    Constraint,
    ConstraintOptions,
    ConstraintSet,
    ControlResidual,
    CostSum,
    LinearDynamics,
    Problem,
    SolverOptions,
    StateResidual,
    control_regularization,
    solve_constrained,
    solve_fddp,
    state_regularization,
)
from test_problem import linear_system

TIGHT = ConstraintOptions(stationarity_tol=1e-11, feasibility_tol=1e-11, complementarity_tol=1e-11)
N, NU, T = 2, 2, 30


def lq_problem(seed=2, u_max=0.8, s_min=0.1, goal=(0.3, 0.2), box=False, terminal=True):
    """A random oscillator pair driven to ``goal`` (a terminal equality) with ``|u| ≤ u_max`` (a constraint, or the
    models' control box with ``box``) and ``s_0 ≥ s_min`` at every running knot; quadratic cost. Seed 2 makes a
    feasible problem whose inequalities are active (17 control and 6 state rows at the optimum), seed 3 an
    infeasible one."""
    A, B, c = linear_system(np.random.default_rng(seed), N, NU)
    dynamics = LinearDynamics(A, B, c, 0.1)
    space = dynamics.state_space
    zero = State(None, np.zeros(N), np.zeros(N))
    cost = CostSum(space, NU)
    cost.add("state", state_regularization(space, zero, 1.0, NU))
    cost.add("control", control_regularization(NU, 0.1 * np.ones(NU)))
    constraints = ConstraintSet(space, NU)
    if not box:
        constraints.add("control limit", Constraint(ControlResidual(NU, None, space), -u_max, u_max))
    constraints.add("s0 floor", Constraint(StateResidual(space, zero, NU), lower=[s_min, -np.inf, -np.inf, -np.inf]))
    final = None
    if terminal:
        final = ConstraintSet(space, 0).add("goal", Constraint(StateResidual(space, State(None, np.array(goal),
                                                                                            np.zeros(N)), 0)))
    bounds = (-u_max, u_max) if box else (None, None)
    x0 = State(None, np.array([1.0, -0.5]), np.array([0.0, 0.3]))
    problem = Problem(x0, ActionModel(dynamics, cost, *bounds, constraints=constraints),
                      state_regularization(space, zero, 1.0, 0), horizon=T, terminal_constraints=final)
    return problem, (A, B, c, x0, u_max, s_min, goal)


def cvxpy_solution(data, terminal=True):
    A, B, c, x0, u_max, s_min, goal = data
    X, U = cp.Variable((T + 1, 2 * N)), cp.Variable((T, NU))
    constraints = [X[0] == np.r_[x0.s, x0.v]]
    for k in range(T):
        constraints += [X[k + 1] == A @ X[k] + B @ U[k] + c, cp.abs(U[k]) <= u_max, X[k, 0] >= s_min]
    if terminal:
        constraints.append(X[T] == np.r_[goal, np.zeros(N)])
    qp = cp.Problem(cp.Minimize(0.5 * cp.sum_squares(X) + 0.05 * cp.sum_squares(U)), constraints)
    qp.solve(solver=cp.CLARABEL, tol_gap_abs=1e-12, tol_gap_rel=1e-12, tol_feas=1e-12)
    return X.value, U.value, qp.value, constraints, qp.status


@pytest.mark.parametrize("box", [False, True])
def test_lq_with_equality_and_inequalities_matches_cvxpy(box):
    problem, data = lq_problem(box=box)
    result = solve_constrained(problem, options=SolverOptions(max_iter=200), constraint_options=TIGHT)
    X, U, value, qp_constraints, status = cvxpy_solution(data)
    assert status == "optimal" and result.status == "converged", result
    assert np.abs(result.us - U).max() < 1e-8
    assert np.abs(np.c_[result.xs.s, result.xs.v] - X).max() < 1e-8
    assert abs(result.cost - value) < 1e-8 * abs(value)
    assert result.max_violation < 1e-10
    # both kinds of inequality are active somewhere, so this is not an equality-constrained problem in disguise
    assert (np.abs(U) > data[4] - 1e-6).any() and (X[:T, 0] < data[5] + 1e-6).any()
    # the multipliers: the goal's is cvxpy's dual (both of the Lagrangian f + λᵀ r)
    goal = result.multipliers["goal"]
    assert goal.knots.tolist() == [T]
    assert np.abs(goal.values[0] - qp_constraints[-1].dual_value).max() < 1e-6 * max(1.0, np.abs(goal.values).max())
    assert result.kkt.stationarity < 1e-11 and result.kkt.feasibility < 1e-11 and result.kkt.complementarity < 1e-11


def test_the_infeasible_lq_problem_is_infeasible_for_both():
    problem, data = lq_problem(seed=3)
    result = solve_constrained(problem, options=SolverOptions(max_iter=1000))
    assert cvxpy_solution(data)[-1] == "infeasible"
    assert result.status.startswith("infeasible: ") and "goal" in result.status, result.status
    # said once a larger penalty left the violation where it was, long before penalty_max
    assert "times larger penalty left" in result.status and result.penalty < 1e4 and result.iterations < 50


def test_without_constraints_it_is_fddp():
    problem, _ = lq_problem(terminal=False)
    for m in problem.running:
        m.constraints = None
    plain = Problem(problem.x0, problem.running, problem.terminal)
    ours, fddp = solve_constrained(plain), solve_fddp(plain)
    assert ours.status == fddp.status == "converged"
    assert np.abs(ours.us - fddp.us).max() < 1e-9 and ours.outer_iterations == 0 and ours.violations == {}


def test_second_order_and_an_infeasible_guess():
    problem, data = lq_problem()
    guess = problem.constant_trajectory()
    result = solve_constrained(problem, xs0=guess, options=SolverOptions(max_iter=200), constraint_options=TIGHT,
                               second_order=True)
    U = cvxpy_solution(data)[1]
    assert result.status == "converged" and result.solver == "AL-FDDP-SO"
    assert np.abs(result.us - U).max() < 1e-8 and result.gap_norm == 0.0


def test_unreachable_goal_is_infeasible_and_names_the_constraint():
    problem, _ = lq_problem(u_max=0.05, s_min=-10.0, goal=(3.0, -2.0), box=True)
    result = solve_constrained(problem, options=SolverOptions(max_iter=1000))
    assert result.status.startswith("infeasible: goal ("), result.status
    assert "s0 floor" not in result.status  # met: only what cannot be met is named
    assert result.violations["goal"].value > 0.1 and np.isfinite(result.cost)
    assert np.isfinite(result.us).all() and result.xs.is_finite()


def test_a_target_out_of_the_arms_reach_is_infeasible():
    """ur5's tool asked, as a terminal equality, to be 2 m away (its reach is under 1 m): infeasible, named, with
    the distance left."""
    import lietraj
    from lietraj.optimal_control import RobotDynamics, frame_position, joint_position_limits
    ur5 = lietraj.load_robot("ur5")
    space, x0 = ur5.state_space, ur5.state_space.neutral()
    running = CostSum(space, ur5.n)
    running.add("x", state_regularization(space, x0, 1e-2, ur5.n))
    running.add("u", control_regularization(ur5.n, 1e-3))
    limits = ConstraintSet(space, ur5.n).add("joints", joint_position_limits(ur5))
    reach = ConstraintSet(space, 0).add("tool", frame_position(ur5, "tool0", [2.0, 0.2, 0.5], nu=0))
    problem = Problem(x0, ActionModel(RobotDynamics(ur5, 0.02), running, -ur5.effort_limit, ur5.effort_limit,
                                      constraints=limits), state_regularization(space, x0, 1e-2, 0), horizon=50,
                      terminal_constraints=reach)
    result = solve_constrained(problem, options=SolverOptions(max_iter=1000))
    assert result.status.startswith("infeasible: ") and "tool (1.0" in result.status, result.status
    # 402 with a twentyfold penalty (308 with a tenfold one); a look-ahead that backtracked along its own direction
    # took 930
    assert result.iterations < 500, result
    assert 1.0 < result.violations["tool"].value < 1.2 and result.violations["tool"].knot == 50


def test_contradictory_bounds_end_at_once():
    problem, _ = lq_problem()
    running = problem.running[0].constraints
    running.add("impossible", Constraint(ControlResidual(NU, None, problem.state_space), [0.0, 1.0], [0.0, 0.5]))
    result = solve_constrained(problem)
    assert result.status.startswith("infeasible: lower > upper in impossible (knots 0-29, row 1")
    assert result.iterations == 0


def test_iteration_limit_and_log():
    problem, _ = lq_problem()
    log = io.StringIO()
    from lietraj.optimal_control import ConstrainedLogTable, ConstrainedSolver
    solver = ConstrainedSolver(problem, SolverOptions(max_iter=6), callback=ConstrainedLogTable(log))
    result = solver.solve()
    assert result.status == "max_iterations" and result.iterations == 6
    lines = log.getvalue().splitlines()
    assert lines[0].split()[-5:] == ["stat", "viol", "comp", "penalty", "worst"] and len(lines) == 7
    assert result.max_violation == max(v.value for v in problem.violations(result.xs, result.us).values())
    assert result.cost == pytest.approx(problem.cost(result.xs, result.us), rel=1e-14)


def test_a_warm_start_from_the_solution_ends_at_once():
    """Solved again from its own solution, with its multipliers and penalty, the LQ problem converges at the first
    outer update with the same controls; from the solution alone (zero multipliers) it needs the outer loop again."""
    problem, _ = lq_problem()
    options = SolverOptions(max_iter=200)
    first = solve_constrained(problem, options=options, constraint_options=TIGHT)
    warm = solve_constrained(problem, first.xs, first.us, options, TIGHT, warm_start=first)
    cold = solve_constrained(problem, first.xs, first.us, options, TIGHT)
    assert first.converged and warm.converged and cold.converged
    assert warm.iterations <= 1 and warm.outer_iterations <= 3, warm  # updates at one guess, tested before its sweep
    assert cold.iterations + cold.outer_iterations > 3 * (warm.iterations + warm.outer_iterations), cold
    assert np.abs(warm.us - first.us).max() < 1e-9
    for name, m in first.multipliers.items():
        np.testing.assert_allclose(warm.multipliers[name].values, m.values, rtol=1e-6, atol=1e-9)
    with pytest.raises(ValueError, match="warm_start takes a ConstrainedResult"):
        solve_constrained(problem, warm_start=object())


def test_bad_arguments():
    with pytest.raises(ValueError, match="penalty_factor"):
        ConstraintOptions(penalty_factor=1.0)
    with pytest.raises(ValueError, match="expected a Problem"):
        solve_constrained("problem")


def test_the_constraints_example():
    """examples/constraints.py: Talos ends with its right hand exactly at the 1 m it must at least reach (the bound
    active, its multiplier pushing up), its left hand still on target; solo12's jump with barriers lets the forces
    leave the cones and stops the torques at 98 % of their limits, with constraints every limit holds to 1e-6 and the
    cost is lower (the limits are used whole)."""
    import sys
    from pathlib import Path
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
    import constraints as example
    reach = example.reach_with_the_right_hand_up(False)
    assert reach["converged"] == 1.0 and reach["violation"] <= 1e-6
    assert abs(reach["hand_height"] - example.LOW) <= 1e-6 and reach["multiplier"] < 0.0
    assert reach["left_hand_mm"] < 0.1
    jump = example.jump_with_barriers_and_with_constraints(False)
    hard, soft = jump["hard"], jump["soft"]
    assert hard["converged"] == soft["converged"] == 1.0
    assert hard["constraint_violation"] <= 1e-6 and hard["torque_ratio"] <= 1.0 + 1e-6
    assert hard["friction_margin"] >= -1e-6 and hard["min_normal_force"] >= -1e-6
    assert soft["friction_margin"] < -1e-4 and hard["cost"] < soft["cost"]
    from lietraj.problems import make_problem
    with pytest.raises(ValueError, match="solver 'fddp', or 'ddp'"):
        make_problem("jump", "solo12").solve("ilqr")


def test_the_look_ahead_holds_the_rows_a_trial_carried_past_their_bounds():
    """``_Lookahead.hold`` on the LQ problem (linear residuals: the Gauss–Newton model is exact): at a guess with
    multipliers, the rows inside their bounds there and past them at a trial get exactly the derivatives of
    ``ρ/2 (ŝ − b)²`` (central differences of that sum in ``(x, u)`` at each knot), the others nothing, and ``held``
    is that sum at the guess."""
    from lietraj.optimal_control.solvers.augmented_lagrangian import ConstrainedSolver, _Lookahead
    problem, (_, _, _, _, u_max, s_min, _) = lq_problem()
    solver = ConstrainedSolver(problem)
    aug = solver.augmented
    aug.penalty[0] = 30.0
    rng = np.random.default_rng(5)
    for slot in aug.slots:
        slot.multipliers[...] = rng.uniform(-0.2, 0.2, slot.multipliers.shape)
    state = solver.start(problem.constant_trajectory(), np.zeros((T, NU)))
    solver.linearize(state)
    base = solver._local_copy(state.derivatives)
    before = {name: getattr(base.running, name).copy() for name in ("l_x", "l_u", "l_xx", "l_xu", "l_uu")}
    lookahead = _Lookahead(aug, state, base)
    X, U = state.xs.copy(), state.us.copy()
    X.s[3:7, 0] = s_min - 0.5  # the floor, crossed at knots 3..6
    U[10:12, 1] = 2.0 * u_max  # the control limit's upper row, crossed at knots 10, 11
    assert lookahead.hold(X, U) and not lookahead.hold(X, U)  # a row is held once

    rho = aug.penalty[0]

    def held_sum(k, x, u):
        """ρ/2 (ŝ − b)² over the rows of knot k that the trial carried past (their bound: the one crossed)."""
        total = 0.0
        for slot in aug.slots:
            if not slot.start <= k < slot.start + slot.multipliers.shape[0]:
                continue
            c = slot.constraint
            row = k - slot.start
            xk = state.xs[k:k + 1].copy()
            xk.s[0], xk.v[0] = x[:N], x[N:]
            s = c.value(xk, u[None])[0] / c.scale + slot.multipliers[row] / rho
            past = c.value(X[k:k + 1], U[k:k + 1])[0] / c.scale + slot.multipliers[row] / rho
            above, below = past > slot.activation.upper, past < slot.activation.lower
            s0 = c.value(state.xs[k:k + 1], state.us[k:k + 1])[0] / c.scale + slot.multipliers[row] / rho
            crossed = ((s0 > slot.activation.lower) & (s0 < slot.activation.upper)) & (above | below)
            b = np.where(above, slot.activation.upper, slot.activation.lower)
            total += 0.5 * rho * float(np.sum(np.where(crossed, (s - b) ** 2, 0.0)))
        return total

    h = 1e-5
    expected_held = 0.0
    for k in range(T):
        z0 = np.r_[state.xs.s[k], state.xs.v[k], state.us[k]]
        f = lambda z: held_sum(k, z[:2 * N], z[2 * N:])  # noqa: E731
        expected_held += f(z0)
        n = z0.size
        grad, hess = np.zeros(n), np.zeros((n, n))
        for i in range(n):
            e = np.zeros(n)
            e[i] = h
            grad[i] = (f(z0 + e) - f(z0 - e)) / (2 * h)
            for j in range(n):
                d = np.zeros(n)
                d[j] = h
                hess[i, j] = (f(z0 + e + d) - f(z0 + e - d) - f(z0 - e + d) + f(z0 - e - d)) / (4 * h * h)
        r = base.running
        added_grad = np.r_[r.l_x[k] - before["l_x"][k], r.l_u[k] - before["l_u"][k]]
        added_hess = np.block([[r.l_xx[k] - before["l_xx"][k], r.l_xu[k] - before["l_xu"][k]],
                               [(r.l_xu[k] - before["l_xu"][k]).T, r.l_uu[k] - before["l_uu"][k]]])
        np.testing.assert_allclose(added_grad, grad, atol=1e-7, err_msg=f"knot {k}")
        np.testing.assert_allclose(added_hess, hess, atol=1e-4, err_msg=f"knot {k}")
        assert (np.abs(added_grad).max() > 0) == (k in (3, 4, 5, 6, 10, 11)), k
    assert lookahead.held == pytest.approx(expected_held, rel=1e-12)


def test_the_look_ahead_spares_the_line_search_its_short_steps(monkeypatch):
    """On the LQ problem FDDP's full step carries inequality rows past their bounds, where the Gauss–Newton model of
    the penalty had no curvature: without the look-ahead two steps are cut; with it every step is whole, fewer
    iterations reach the same optimum (cvxpy's, checked in the first test)."""
    import lietraj.optimal_control.solvers.augmented_lagrangian as al
    problem, _ = lq_problem()
    options = SolverOptions(max_iter=200)
    ours = solve_constrained(problem, options=options, constraint_options=TIGHT)
    monkeypatch.setattr(al, "LOOKAHEAD", 0)
    plain = solve_constrained(problem, options=options, constraint_options=TIGHT)
    assert ours.converged and plain.converged
    assert [h.step for h in ours.history if h.step < 1.0] == []
    assert len([h.step for h in plain.history if h.step < 1.0]) >= 2
    assert ours.iterations < plain.iterations
    assert np.abs(ours.us - plain.us).max() < 1e-8


def test_an_outer_update_that_changes_nothing_keeps_the_local_model():
    """With bounds that never bind (the LQ problem's with room to spare) every outer update leaves the multipliers at
    zero and the penalty where it was: the costs are those of the local model, so no update sweeps again at the same
    guess (one backward pass per iteration and one for the last test), and the solution is FDDP's."""
    from lietraj.optimal_control import ConstrainedSolver
    problem, _ = lq_problem(u_max=1e3, s_min=-1e3, terminal=False)
    solver = ConstrainedSolver(problem, SolverOptions(max_iter=50), TIGHT)
    sweeps = []
    backward = solver.backward_pass
    solver.backward_pass = lambda *args, **kwargs: sweeps.append(1) or backward(*args, **kwargs)
    result = solver.solve()
    plain = solve_fddp(problem, options=SolverOptions(tol=1e-24))
    assert result.converged and result.outer_iterations >= 1, result
    assert len(sweeps) == result.iterations + 1, (len(sweeps), result.iterations, result.outer_iterations)
    assert np.abs(result.us - plain.us).max() < 1e-9



def test_outer_updates_are_tested_before_the_sweep_and_cost_none():
    """The LQ problem with active limits: each outer update is decided on the ``Q_u`` predicted along the last gains
    before the sweep at its guess, so that the full sweeps are one per iteration and one for the last test (with the
    test after the sweep only, each update that changed the costs cost one more); the look-ahead's partial sweeps
    are not counted."""
    from lietraj.optimal_control import ConstrainedSolver
    problem, _ = lq_problem()
    solver = ConstrainedSolver(problem, SolverOptions(max_iter=200))
    full = []
    backward = solver.backward_pass
    solver.backward_pass = lambda *args, **kwargs: (full.append(1) if len(args) < 4 or args[3] is None else None) \
        or backward(*args, **kwargs)
    result = solver.solve()
    assert result.converged and result.outer_iterations >= 5, result
    assert len(full) == result.iterations + 1, (len(full), result.iterations, result.outer_iterations)


def test_trials_clip_a_torque_row_where_its_penalty_starts():
    """Rows inside their bounds are clipped in the trials at the bound, or past it where a multiplier pushing the
    other way moves the start of the penalty there (ŝ = c/σ + λ/ρ on the bound)."""
    from lietraj.optimal_control import ConstrainedSolver
    problem, data = lq_problem()
    u_max = data[4]
    solver = ConstrainedSolver(problem, SolverOptions(max_iter=200))
    state = solver.start()
    slot = next(s for s in solver.augmented.slots if s.name == "control limit")
    shift = slot.constraint.scale * 0.5 / float(solver.augmented.penalty[0])
    lam = np.zeros_like(slot.multipliers)
    lam[3, 0], lam[4, 0] = -0.5, 0.5  # pushing toward the lower bound / toward the upper one
    slot.multipliers[...] = lam
    solver.outer_iterations += 1  # a new outer iteration: the bounds are computed again
    lb, ub = solver.control_bounds(state)
    assert np.all(np.abs(state.us) < u_max)  # every row inside its bounds at this guess
    assert ub[3, 0] == pytest.approx(u_max + shift) and lb[3, 0] == -u_max
    assert lb[4, 0] == pytest.approx(-u_max - shift) and ub[4, 0] == u_max
    assert np.all(ub[:3] == u_max) and np.all(lb[:3] == -u_max)


def test_a_solve_shares_one_copy_of_the_parameters_an_iteration_and_sees_its_own_updates(monkeypatch):
    """Within an iteration the compiled tables copy the costs' parameters once (``Problem.unchanged_parameters``),
    and again after the outer loop changes its multipliers and penalty in place (``Problem.parameters_changed``):
    the solve is the one of tables that copy them at every evaluation, to the bit."""
    problem, _ = lq_problem()
    shared = solve_constrained(problem, constraint_options=TIGHT)
    monkeypatch.setattr(Problem, "unchanged_parameters", lambda self: contextlib.nullcontext())
    problem, _ = lq_problem()
    every = solve_constrained(problem, constraint_options=TIGHT)
    assert shared.status == every.status == "converged" and shared.outer_iterations > 1
    assert shared.iterations == every.iterations and shared.cost == every.cost
    assert np.array_equal(shared.us, every.us) and np.array_equal(shared.xs.s, every.xs.s)
