"""iLQR, DDP, FDDP and their box-constrained variants: exact on LQ problems (against cvxpy), quadratic convergence
of DDP, gap closing of FDDP, statuses instead of exceptions for diverging solves, and input checks."""

import io

import cvxpy as cp
import numpy as np
import pytest

import lietraj
from conftest import relative_error
from lietraj.dynamics import se3
from lietraj.dynamics.model.builder import chain
from lietraj.dynamics.lie.state import State, Trajectory
from lietraj.optimal_control.dynamics.discrete_dynamics import RobotDynamics
from lietraj.optimal_control.dynamics.linear_dynamics import LinearDynamics
from lietraj.optimal_control.problem import ActionModel, Problem
from lietraj.optimal_control.solvers.riccati import backward_pass, box_qp
from lietraj.optimal_control.solvers.solvers import (
    IterationInfo,
    LogTable,
    Solver,
    SolverOptions,
    _forward_pass,
    solve_ddp,
    solve_fddp,
    solve_ilqr,
)
from test_problem import FreeBody, StateControlCost, linear_system, pendulum_problem

T_LQ = 25


def stacked(X: Trajectory) -> np.ndarray:
    return np.concatenate([X.s, X.v], axis=1)


def lq_problem(rng, bounds=None, n=2, nu=2):
    """Linear dynamics with quadratic costs; weights: W (running state), R (control), W_f (terminal)."""
    A, B, c = linear_system(rng, n, nu)
    dyn = LinearDynamics(A, B, c, dt=0.1)
    sp = dyn.state_space
    M = rng.normal(size=(2 * n, 2 * n))
    W, W_f, R = np.diag(rng.uniform(0.5, 2.0, 2 * n)), 10.0 * np.eye(2 * n) + M @ M.T, np.diag(rng.uniform(0.5, 1.0, nu))
    x_ref = sp.random(rng)
    lb, ub = (None, None) if bounds is None else bounds
    running = ActionModel(dyn, StateControlCost(sp, nu, W, x_ref, R), u_lb=lb, u_ub=ub)
    prob = Problem(sp.random(rng), running, StateControlCost(sp, 0, W_f, x_ref), horizon=T_LQ)
    return prob, dict(A=A, B=B, c=c, W=W, W_f=W_f, R=R, z_ref=stacked(Trajectory(None, x_ref.s[None], x_ref.v[None]))[0])


def cvxpy_solution(prob, data, bounds=None):
    """The same LQ problem as a QP in (z_0..z_T, u_0..u_{T-1}), solved by Clarabel to tight tolerances."""
    T, nx, nu = prob.T, prob.ndx, prob.nu
    Z, U = cp.Variable((T + 1, nx)), cp.Variable((T, nu))
    z0 = np.concatenate([prob.x0.s, prob.x0.v])
    constraints = [Z[0] == z0] + [Z[k + 1] == data["A"] @ Z[k] + data["B"] @ U[k] + data["c"] for k in range(T)]
    if bounds is not None:
        constraints += [U >= bounds[0], U <= bounds[1]]
    e = Z - np.tile(data["z_ref"], (T + 1, 1))
    objective = sum(0.5 * cp.quad_form(e[k], data["W"]) + 0.5 * cp.quad_form(U[k], data["R"]) for k in range(T))
    objective += 0.5 * cp.quad_form(e[T], data["W_f"])
    cp.Problem(cp.Minimize(objective), constraints).solve(solver="CLARABEL", canon_backend=cp.SCIPY_CANON_BACKEND,
                                                          tol_gap_abs=1e-13, tol_gap_rel=1e-13, tol_feas=1e-13,
                                                          tol_ktratio=1e-10)
    return Z.value, U.value


def lq_gains(prob, data):
    """Independent Riccati recursion for the feedback gains of the unconstrained LQ problem."""
    A, B, R, P = data["A"], data["B"], data["R"], data["W_f"]
    K = np.empty((prob.T, prob.nu, prob.ndx))
    for t in range(prob.T - 1, -1, -1):
        K[t] = -np.linalg.solve(R + B.T @ P @ B, B.T @ P @ A)
        P = data["W"] + A.T @ P @ (A + B @ K[t])
    return K


# ---- LQ problems: one step, equal to the QP ----------------------------------------------------------------

@pytest.mark.parametrize("solver", ["ilqr", "ddp", "fddp"])
def test_lq_problem_is_solved_in_one_iteration_and_equals_the_qp(solver, rng):
    prob, data = lq_problem(rng)
    Z, U = cvxpy_solution(prob, data)
    if solver == "fddp":
        r = solve_fddp(prob, prob.constant_trajectory(), rng.normal(size=(prob.T, prob.nu)))
    else:
        r = {"ilqr": solve_ilqr, "ddp": solve_ddp}[solver](prob, rng.normal(size=(prob.T, prob.nu)))
    assert r.status == "converged" and r.iterations == 1
    assert relative_error(r.us, U) < 1e-8
    assert relative_error(stacked(r.xs), Z) < 1e-8
    assert r.gap_norm == 0.0 and np.abs(prob.gaps(r.xs, r.us)).max() < 1e-13
    assert relative_error(r.K, lq_gains(prob, data)) < 1e-7
    assert relative_error(r.k, np.zeros_like(r.k)) < 1e-7  # at the optimum only feedback is left


def test_expected_improvement_is_exact_on_lq_problems(rng):
    """The model ΔJ(α) of riccati.py equals the actual change of an LQ cost for every step length, with gaps
    (FDDP's gap-closing forward pass) and with clamped controls (unclipped forward pass)."""
    prob, _ = lq_problem(rng)
    X, U = prob.constant_trajectory(), rng.normal(size=(prob.T, prob.nu))
    bp = backward_pass(prob.derivatives(X, U), 0.0, prob.gaps(X, U))
    boxed, _ = lq_problem(np.random.default_rng(5), bounds=(-0.5, 0.5))
    Ub = np.clip(rng.normal(size=(boxed.T, boxed.nu)), -0.5, 0.5)
    Xb = boxed.rollout(Ub)
    bpb = backward_pass(boxed.derivatives(Xb, Ub), 0.0, None, du_lb=boxed.u_lb - Ub, du_ub=boxed.u_ub - Ub)
    assert 0 < bpb.free.sum() < bpb.free.size  # some controls clamped, some free
    boxed.has_control_limits = False  # forward pass without clipping: the LQ model's policy exactly
    for problem, bp_, X_, U_, gaps in ((prob, bp, X, U, prob.gaps(X, U)), (boxed, bpb, Xb, Ub, None)):
        # the compiled sums against their formulas (module docstring of riccati.py)
        g1 = np.sum(bp_.Q_u * bp_.k) + (0.0 if gaps is None else np.sum(bp_.lam * gaps))
        g2 = np.einsum("ti,tij,tj->", bp_.k, bp_.Q_uu, bp_.k) - (
            0.0 if gaps is None else np.einsum("ti,tij,tj->", gaps, bp_.V_xx, gaps))
        assert relative_error(np.array(bp_.improvement_terms()), np.array([g1, g2])) < 1e-12
        assert abs(bp_.stationarity() - np.sum(np.where(bp_.free, bp_.Q_u, 0.0) ** 2)) < 1e-12 * bp_.stationarity()
        J0 = problem.cost(X_, U_)
        for alpha in (1.0, 0.5, 0.2, 0.01):
            _, _, DX, J = _forward_pass(problem, X_, U_, bp_, alpha, gaps)
            assert abs((J0 - J) - bp_.expected_improvement(alpha, DX)) < 1e-9 * abs(J0)


@pytest.mark.parametrize("solver", ["ilqr", "ddp", "fddp"])
def test_box_constrained_lq_keeps_controls_in_bounds_and_equals_the_qp(solver, rng):
    bounds = (np.array([-0.6, -0.4]), np.array([0.5, 0.7]))
    prob, data = lq_problem(rng, bounds=bounds)
    Z, U = cvxpy_solution(prob, data, bounds)
    active = (np.abs(U - bounds[0]) < 1e-7) | (np.abs(U - bounds[1]) < 1e-7)
    assert 3 <= active.sum() < active.size - 3  # a genuinely constrained problem
    seen = []

    def in_bounds(info: IterationInfo):
        seen.append(bool(np.all(info.us >= bounds[0]) and np.all(info.us <= bounds[1])))

    us0 = 3.0 * rng.normal(size=(prob.T, prob.nu))  # out of bounds: clipped first
    if solver == "fddp":
        r = solve_fddp(prob, prob.constant_trajectory(), us0, callback=in_bounds)
    else:
        r = {"ilqr": solve_ilqr, "ddp": solve_ddp}[solver](prob, us0, callback=in_bounds)
    assert r.status == "converged" and all(seen) and len(seen) == r.iterations
    assert np.all(r.us >= bounds[0]) and np.all(r.us <= bounds[1])
    assert relative_error(r.us, U) < 1e-8
    assert relative_error(stacked(r.xs), Z) < 1e-8
    assert np.all(r.K[active] == 0.0)  # no feedback on clamped controls


def test_box_qp_matches_cvxpy(rng):
    for trial in range(12):
        n = 1 + trial % 5
        M = rng.normal(size=(n, n))
        H, q = M @ M.T + 0.1 * np.eye(n), 3.0 * rng.normal(size=n)
        lb, ub = -rng.uniform(0.0, 1.0, n), rng.uniform(0.0, 1.0, n)
        if trial == 0:
            lb, ub = -np.full(n, 1e3), np.full(n, 1e3)  # nothing clamped: the Newton step
        r = box_qp(H, q, lb, ub, x0=rng.normal(size=n))
        x = cp.Variable(n)
        cp.Problem(cp.Minimize(0.5 * cp.quad_form(x, H) + q @ x), [x >= lb, x <= ub]).solve(
            solver="CLARABEL", tol_gap_abs=1e-13, tol_gap_rel=1e-13, tol_feas=1e-13)
        assert r.ok and relative_error(r.x, x.value) < 1e-7
        g = q + H @ r.x
        assert np.all(r.x >= lb) and np.all(r.x <= ub) and np.abs(g[r.free]).max(initial=0.0) < 1e-10
        if trial == 0:
            assert r.free.all() and relative_error(r.x, -np.linalg.solve(H, q)) < 1e-12
    r = box_qp(-np.eye(2), np.zeros(2), -np.ones(2), np.ones(2), np.array([0.5, 0.0]))
    assert not r.ok  # not positive definite on the free set


# ---- nonlinear problems ---------------------------------------------------------------------------------------

def test_ddp_converges_quadratically_and_needs_fewer_iterations_than_ilqr():
    prob = pendulum_problem(T=40)
    ilqr, ddp = solve_ilqr(prob, options=SolverOptions(max_iter=300)), solve_ddp(prob)
    assert ilqr.status == ddp.status == "converged"
    assert ddp.iterations <= ilqr.iterations
    assert abs(ddp.cost - ilqr.cost) < 1e-8 * ddp.cost
    # the iterates of a run past convergence, against its own limit
    run = solve_ddp(prob, options=SolverOptions(tol=0.0, max_iter=ddp.iterations + 3))
    u_star = run.us
    errors = [np.abs(h.us - u_star).max() for h in run.history]
    tail = [(e0, e1) for e0, e1 in zip(errors, errors[1:]) if 1e-12 < e1 and e0 < 0.5]
    assert len(tail) >= 3 and tail[-1][1] < 1e-10
    for e0, e1 in tail:
        assert e1 <= 10.0 * e0 ** 2  # ‖u_{k+1} - u*‖ <= C ‖u_k - u*‖²
    assert all(h.step == 1.0 for h in run.history[-5:])
    # iLQR is only linear here: its error ratio near the optimum stays far from zero
    run = solve_ilqr(prob, options=SolverOptions(tol=0.0, max_iter=ilqr.iterations))
    e = [np.abs(h.us - u_star).max() for h in run.history[-4:]]
    assert min(e1 / e0 for e0, e1 in zip(e, e[1:])) > 0.3


def test_fddp_solves_a_nonlinear_problem_from_a_constant_state_guess():
    prob = pendulum_problem(T=40)
    ref = solve_ddp(prob, options=SolverOptions(tol=1e-20))
    for second_order in (False, True):
        us0 = np.full((prob.T, 1), 5.0)  # with xs0 = x0 everywhere: large gaps
        r = solve_fddp(prob, prob.constant_trajectory(), us0, second_order=second_order,
                       options=SolverOptions(max_iter=300, tol=1e-20 if second_order else 1e-9))
        assert r.status == "converged" and r.gap_norm == 0.0
        assert r.history[0].gap_norm > 0.01  # it started infeasible
        assert np.abs(prob.gaps(r.xs, r.us)).max() < 1e-12
        assert relative_error(stacked(prob.rollout(r.us)), stacked(r.xs)) < 1e-12
        assert abs(r.cost - ref.cost) < 1e-7 * ref.cost
        assert relative_error(r.us, ref.us) < (1e-3 if not second_order else 1e-8)


def free_body_problem(T=30):
    dyn = FreeBody(dt=0.1)
    sp = dyn.state_space
    H_goal = se3.exp(np.array([0.5, -0.3, 0.2, 0.0, 0.0, 2.0]))  # 115° about z, and a translation
    goal = State(H_goal, np.zeros(0), np.zeros(6))
    running = ActionModel(dyn, StateControlCost(sp, 6, 1e-3 * np.eye(12), goal, R=0.1 * np.eye(6)))
    terminal = StateControlCost(sp, 0, 100.0 * np.eye(12), goal)
    return Problem(sp.neutral(), running, terminal, horizon=T), H_goal


def test_ilqr_and_fddp_reorient_a_free_body_on_se3():
    """A floating-base state (SE(3) x R^6): the solvers work in the Lie algebra, from a rollout and from the
    constant initial pose."""
    prob, H_goal = free_body_problem()
    a = solve_ilqr(prob)
    b = solve_fddp(prob, prob.constant_trajectory())
    assert a.status == b.status == "converged" and b.gap_norm == 0.0
    assert np.abs(prob.gaps(b.xs, b.us)).max() < 1e-12
    assert abs(a.cost - b.cost) < 1e-6 * a.cost and relative_error(a.us, b.us) < 1e-4
    assert np.abs(se3.log(np.linalg.inv(H_goal) @ a.xs.H[-1])).max() < 0.02


def test_solvers_on_robot_dynamics():
    """RobotDynamics (a two-link arm from the model builder) is a plug-in like any other."""
    model = chain(2)
    dyn = RobotDynamics(model, 0.02)
    sp = model.state_space
    goal = State(None, np.array([0.8, -0.5]), np.zeros(2))
    running = ActionModel(dyn, StateControlCost(sp, 2, 1e-2 * np.eye(4), goal, R=1e-3 * np.eye(2)))
    prob = Problem(sp.neutral(), running, StateControlCost(sp, 0, 100.0 * np.eye(4), goal), horizon=30)
    a, b = solve_ilqr(prob), solve_fddp(prob, prob.constant_trajectory())
    assert a.status == b.status == "converged"
    assert abs(a.cost - b.cost) < 1e-6 * a.cost
    assert np.abs(b.xs.s[-1] - goal.s).max() < 0.05
    if not hasattr(RobotDynamics, "trajectory_hessian_contraction"):
        with pytest.raises(ValueError, match="solve_ilqr"):
            solve_ddp(prob)
        return
    c = solve_ddp(prob)
    assert c.status == "converged" and c.iterations <= a.iterations and abs(c.cost - a.cost) < 1e-6 * a.cost


# ---- failures are statuses, bad inputs are errors ------------------------------------------------------------

def test_diverging_rollouts_give_a_status_not_an_exception():
    prob = pendulum_problem(T=20, blow_up=3.5)
    r = solve_ilqr(prob, np.full((20, 1), 1e3))
    assert r.status.startswith("failed:") and "initial rollout" in r.status and r.iterations == 0
    r = solve_ilqr(prob, options=SolverOptions(max_iter=300))  # trial steps past the bound diverge; others do not
    assert r.status == "converged"
    stuck = pendulum_problem(T=20, blow_up=0.0)  # every step away from the initial rest diverges
    r = solve_fddp(stuck)
    assert r.status.startswith("failed:") and "reg_max" in r.status
    assert r.iterations > 0 and all(h.step == 0.0 for h in r.history)
    model = lietraj.load_robot("ur5")
    sp = model.state_space
    goal = sp.neutral()
    running = ActionModel(RobotDynamics(model, 0.01), StateControlCost(sp, model.n, np.eye(sp.ndx), goal, np.eye(model.n)))
    robot = Problem(sp.neutral(), running, StateControlCost(sp, 0, np.eye(sp.ndx), goal), horizon=5)
    r = solve_ilqr(robot, np.full((5, model.n), 1e200))
    assert r.status.startswith("failed:") and r.iterations == 0


def test_bad_inputs_raise_value_errors():
    prob = pendulum_problem(T=10)
    with pytest.raises(ValueError, match=r"shape \(10, 1\)"):
        solve_ilqr(prob, np.zeros((9, 1)))
    with pytest.raises(ValueError, match="NaN"):
        solve_ddp(prob, np.full((10, 1), np.nan))
    with pytest.raises(ValueError, match="11 knots"):
        solve_fddp(prob, prob.state_space.trajectory(10))
    with pytest.raises(ValueError, match="expected a Problem"):
        solve_ilqr("problem")
    with pytest.raises(ValueError, match="reg_factor"):
        SolverOptions(reg_factor=1.0)
    with pytest.raises(ValueError, match="alphas"):
        SolverOptions(alphas=(0.5, 1.0))
    with pytest.raises(ValueError, match="callback"):
        solve_ilqr(prob, callback=3)
    body, _ = free_body_problem(T=3)
    with pytest.raises(ValueError, match="use solve_ilqr"):
        solve_ddp(body)


def test_callback_and_log_table():
    prob = pendulum_problem(T=20)
    infos = []
    stream = io.StringIO()
    table = LogTable(stream)
    r = solve_ddp(prob, callback=lambda info: (infos.append(info), table(info)))
    assert [i.iteration for i in infos] == list(range(1, r.iterations + 1)) and r.history == infos
    assert all(i.solver == "DDP" and i.time > 0 and i.regularization > 0 for i in infos)
    assert infos[-1].cost == r.cost and infos[-1].us is r.us
    assert np.all(np.diff([i.cost for i in infos]) <= 1e-12)  # a feasible descent method
    lines = stream.getvalue().splitlines()
    assert lines[0].split()[:3] == ["iter", "cost", "stop"] and len(lines) == r.iterations + 1
    assert r.total_time >= sum(i.time for i in infos)


# ---- the solver as named steps ---------------------------------------------------------------------------------

def test_the_steps_run_by_hand_are_the_solve():
    """``start``, ``iterate`` until a status, ``result``: the same iterates as ``solve_fddp``, to the last bit."""
    prob = pendulum_problem(T=20)
    xs0, us0 = prob.constant_trajectory(), np.full((prob.T, 1), 2.0)
    reference = solve_fddp(prob, xs0, us0)
    solver = Solver(prob)
    state = solver.start(xs0, us0)
    assert state.status == "" and not state.feasible and state.iteration == 0
    costs = []
    while not state.status:
        solver.iterate(state)
        costs.append(state.cost)
    r = solver.result(state)
    assert r.solver == "FDDP" and r.status == reference.status == "converged" and r.iterations == reference.iterations
    assert r.cost == reference.cost and costs[:-1] == [h.cost for h in reference.history]
    for a, b in ((r.us, reference.us), (r.xs.s, reference.xs.s), (r.xs.v, reference.xs.v), (r.K, reference.K)):
        np.testing.assert_array_equal(a, b)


def test_a_state_guess_is_costed_once_with_its_derivatives():
    """From ``xs0`` the guess's cost is read from the first linearization's ``l`` (not evaluated apart, which an MPC
    tick paid twice): it equals ``Problem.cost`` of the guess; a solve that ends before linearizing costs its guess
    itself; a guess whose cost overflows ends in a named failure."""
    prob = pendulum_problem(T=20)
    xs0, us0 = prob.constant_trajectory(), np.full((prob.T, 1), 2.0)
    solver = Solver(prob)
    state = solver.start(xs0, us0)
    assert state.cost_pending and np.isnan(state.cost)
    solver.linearize(state)
    assert not state.cost_pending and state.cost == pytest.approx(prob.cost(xs0, us0), rel=1e-14)
    assert solver.result(solver.start(xs0, us0)).cost == pytest.approx(prob.cost(xs0, us0), rel=1e-14)
    assert not solver.start(None, us0).cost_pending  # a rollout's cost is known at once
    huge = xs0.copy()
    huge.v[5] = 1e200
    r = solve_fddp(prob, huge, us0)
    assert r.status == "failed: the cost of the guess is not finite", r.status


def test_a_subclass_adds_a_status_to_the_termination_rule():
    """The hook a deadline (MPC) uses: the solve ends with its status after the iterations it allowed."""
    prob = pendulum_problem(T=20)

    class ThreeSteps(Solver):
        def termination(self, state):
            return super().termination(state) or ("out of budget" if state.iteration >= 3 else "")

    full = solve_ilqr(prob)
    r = ThreeSteps(prob, fddp=False).solve()
    assert r.status == "out of budget" and r.iterations == 3 < full.iterations
    assert r.cost == full.history[2].cost and r.us is r.history[-1].us
