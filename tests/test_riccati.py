"""The Riccati recursion as one knot's step plus a loop: ``riccati_step`` computes the textbook blocks of one knot
(with DDP's term, a gap and bounds), the compiled ``riccati_sweep`` is that step at every knot, and a failing knot
says why."""

import numpy as np
import pytest

from conftest import relative_error
from lietraj.optimal_control.costs.costs import CostDerivatives
from lietraj.optimal_control.dynamics.discrete_dynamics import DiscreteDerivatives
from lietraj.optimal_control.dynamics.euler import EulerStructure
from lietraj.optimal_control.dynamics.euler_second_order import StepHessian
from lietraj.optimal_control.problem import ProblemDerivatives
from lietraj.optimal_control.solvers.riccati import (
    STEP_OK,
    ActionValue,
    Gains,
    LocalModel,
    SweepSettings,
    SweepWork,
    ValueFunction,
    _add_block_times,
    _add_times_block,
    backward_pass,
    policy_gradient,
    riccati_step,
)

T, NDX, NU = 6, 5, 3


def spd(rng, n, scale=1.0):
    M = rng.normal(size=(n, n))
    return scale * (M @ M.T + n * np.eye(n))


def local_model(rng) -> tuple[ProblemDerivatives, StepHessian, np.ndarray]:
    """Random derivatives of a problem with convex costs, a small symmetric second-order term and gaps."""
    F = DiscreteDerivatives(np.eye(NDX) + 0.1 * rng.normal(size=(T, NDX, NDX)), rng.normal(size=(T, NDX, NU)))
    l_xu = 0.1 * rng.normal(size=(T, NDX, NU))
    running = CostDerivatives(np.zeros(T), rng.normal(size=(T, NDX)), rng.normal(size=(T, NU)),
                              np.stack([spd(rng, NDX) for _ in range(T)]), l_xu, np.stack([spd(rng, NU) for _ in range(T)]))
    terminal = CostDerivatives(np.zeros(1), rng.normal(size=(1, NDX)), np.zeros((1, 0)), spd(rng, NDX)[None],
                               np.zeros((1, NDX, 0)), np.zeros((1, 0, 0)))
    H = np.stack([0.01 * spd(rng, NDX + NU) for _ in range(T)])
    hessian = StepHessian(H[:, :NDX, :NDX].copy(), H[:, :NDX, NDX:].copy(), H[:, NDX:, NDX:].copy())
    return ProblemDerivatives(F, running, terminal), hessian, 0.1 * rng.normal(size=(T + 1, NDX))


def knot_outputs():
    """The sweep's outputs at every knot (the value function at T + 1), zero."""
    return (ActionValue(np.zeros((T, NU)), np.zeros((T, NU, NU)), np.zeros((T, NDX))),
            Gains(np.zeros((T, NU)), np.zeros((T, NU, NDX)), np.ones((T, NU), dtype=np.bool_)),
            ValueFunction(np.zeros((T + 1, NDX)), np.zeros((T + 1, NDX, NDX)), np.zeros((T + 1, NDX))))


def test_riccati_step_computes_the_textbook_blocks_of_one_knot(rng):
    """Without bounds: Q from the next value function, k = -Q_uu⁻¹ Q_u, K = -Q_uu⁻¹ Q_ux, V and λ at the gap."""
    d, hessian, gaps = local_model(rng)
    model, t, reg = LocalModel.along(d, hessian, gaps), 2, 1e-3
    knot = LocalModel(*(a[t] for a in model))
    P = spd(rng, NDX)
    lam_next = rng.normal(size=NDX)
    q, gains, value = knot_outputs()
    value.V_xx[t + 1], value.lam[t + 1] = P, lam_next
    why = riccati_step(model, value, t, SweepSettings(reg, True, 1e-12, 100), q, gains, SweepWork.empty(NDX, NU))
    assert why == STEP_OK
    q, gains, value = (type(a)(*(b[t] for b in a)) for a in (q, gains, value))
    F_x, F_u = knot.F_x, knot.F_u
    Q_x, Q_u = knot.l_x + F_x.T @ lam_next, knot.l_u + F_u.T @ lam_next
    Q_xx = knot.l_xx + F_x.T @ P @ F_x + knot.H_xx
    Q_xu = knot.l_xu + F_x.T @ P @ F_u + knot.H_xu
    Q_uu = knot.l_uu + F_u.T @ P @ F_u + knot.H_uu + reg * np.eye(NU)
    k, K = -np.linalg.solve(Q_uu, Q_u), -np.linalg.solve(Q_uu, Q_xu.T)
    V_x = Q_x + K.T @ Q_u
    V_xx = Q_xx + K.T @ Q_uu @ K + Q_xu @ K + K.T @ Q_xu.T + reg * np.eye(NDX)
    assert relative_error(q.Q_u, Q_u) < 1e-13 and relative_error(q.Q_uu, Q_uu) < 1e-13
    assert relative_error(gains.k, k) < 1e-12 and relative_error(gains.K, K) < 1e-12
    assert relative_error(q.c, np.zeros(NDX)) < 1e-12  # no clamped control: V_x has no extra term
    assert relative_error(value.V_x, V_x) < 1e-12 and relative_error(value.V_xx, V_xx) < 1e-12
    assert relative_error(value.lam, V_x + V_xx @ knot.gaps) < 1e-12


def test_local_model_marks_absent_terms_by_empty_blocks(rng):
    d, _, _ = local_model(rng)
    model = LocalModel.along(d)
    assert model.H_xx.shape == (T, 0, 0) and model.gaps.shape == (T + 1, 0) and model.du_lb.shape == (T, 0)
    knot = LocalModel(*(a[0] for a in model))
    assert knot.H_uu.shape == (0, 0) and knot.gaps.shape == (0,) and knot.du_ub.shape == (0,)


@pytest.mark.parametrize("terms", ["gauss-newton", "second order and gaps", "bounds"])
def test_the_compiled_sweep_is_the_knot_step_at_every_knot(terms, rng):
    d, hessian, gaps = local_model(rng)
    reg = 1e-6
    kwargs = {"gauss-newton": {}, "second order and gaps": dict(hessian=hessian, gaps=gaps),
              "bounds": dict(du_lb=np.full((T, NU), -0.05), du_ub=np.full((T, NU), 0.05))}[terms]
    bp = backward_pass(d, reg, **kwargs)
    assert bp.ok
    if terms == "bounds":
        assert 0 < bp.free.sum() < bp.free.size
    # the same recursion, knot by knot from Python (riccati_step runs as plain Python there)
    model = LocalModel.along(d, kwargs.get("hessian"), kwargs.get("gaps"), kwargs.get("du_lb"), kwargs.get("du_ub"))
    V_x, V_xx, lam = bp.V_x.copy(), bp.V_xx.copy(), bp.lam.copy()
    V_x[:T], V_xx[:T], lam[:T] = 0.0, 0.0, 0.0  # keep only the terminal knot
    k, K = np.zeros((T, NU)), np.zeros((T, NU, NDX))
    Q_u, Q_uu, c, free = np.zeros((T, NU)), np.zeros((T, NU, NU)), np.zeros((T, NDX)), np.ones((T, NU), dtype=np.bool_)
    work = SweepWork.empty(NDX, NU)
    for t in range(T - 1, -1, -1):
        why = riccati_step(model, ValueFunction(V_x, V_xx, lam), t, SweepSettings(reg, True, 1e-12, 100),
                           ActionValue(Q_u, Q_uu, c), Gains(k, K, free), work)
        assert why == STEP_OK
    for ours, theirs in ((k, bp.k), (K, bp.K), (V_x, bp.V_x), (V_xx, bp.V_xx), (lam, bp.lam), (Q_u, bp.Q_u),
                         (Q_uu, bp.Q_uu), (c, bp.c)):
        assert relative_error(ours, theirs) < 1e-12
    np.testing.assert_array_equal(free, bp.free)


def euler_derivatives(rng, nv: int, nh: int, nu: int, dense_knots=()) -> DiscreteDerivatives:
    """Jacobians built as a semi-implicit Euler step's (riccati's module docstring) from random velocity rows ``G``,
    ``B`` and base blocks ``Phi``, ``Jr``, with their ``EulerStructure``; ``dense_knots`` are marked as not so built."""
    dt, ndx = 0.05, 2 * nv
    G, B = rng.normal(size=(T, nv, ndx)), rng.normal(size=(T, nv, nu))
    S = EulerStructure(np.full(T, dt), np.eye(nh) + 0.1 * rng.normal(size=(T, nh, nh)),
                       np.eye(nh) + 0.1 * rng.normal(size=(T, nh, nh)))
    Phi, J = np.tile(np.eye(nv), (T, 1, 1)), np.tile(np.eye(nv), (T, 1, 1))
    Phi[:, :nh, :nh], J[:, :nh, :nh] = S.Phi, S.Jr
    F_x, F_u = np.concatenate([dt * J @ G, G], axis=1), np.concatenate([dt * J @ B, B], axis=1)
    F_x[:, :nv, :nv] += Phi
    S.dt[list(dense_knots)] = np.nan
    return DiscreteDerivatives(F_x, F_u, S)


@pytest.mark.parametrize("nh", [6, 3, 0], ids=["floating base", "other block", "fixed base"])
def test_the_block_products_of_the_euler_structure(nh, rng):
    """``X diag(W, I)`` and ``diag(W, I)ᵀ X`` over the first ``n`` columns or rows, added into an output: the 6x6
    block of a floating base in registers, any other size by loops (called here as plain Python; compiled, inside
    the sweep, in the next test)."""
    n, alpha = 8, 0.3
    X, W = rng.normal(size=(10, 10)), rng.normal(size=(nh, nh))
    D = np.eye(n)
    D[:nh, :nh] = W
    out = rng.normal(size=(10, n))
    expected = out + alpha * X[:, :n] @ D
    _add_times_block(X, W, n, alpha, out)
    assert relative_error(out, expected) < 1e-14
    out = rng.normal(size=(n, 10))
    expected = out + alpha * D.T @ X[:n]
    _add_block_times(W, X, n, alpha, out)
    assert relative_error(out, expected) < 1e-14


@pytest.mark.parametrize("nh", [6, 0], ids=["floating base", "fixed base"])
@pytest.mark.parametrize("terms", ["gauss-newton", "second order, gaps and bounds"])
def test_euler_structured_products_equal_the_dense_ones(nh, terms, rng):
    """At the knots of an Euler step the sweep multiplies through the velocity rows; its results equal the dense
    products' (the same Jacobians without their structure), at every knot, mixed with knots without it."""
    nv, nu = 8, 3
    F = euler_derivatives(rng, nv, nh, nu, dense_knots=(1, 4))
    d, _, gaps = local_model(rng)
    ndx = 2 * nv
    running = CostDerivatives(np.zeros(T), rng.normal(size=(T, ndx)), d.running.l_u,
                              np.stack([spd(rng, ndx) for _ in range(T)]), 0.1 * rng.normal(size=(T, ndx, nu)),
                              d.running.l_uu)
    terminal = CostDerivatives(np.zeros(1), rng.normal(size=(1, ndx)), np.zeros((1, 0)), spd(rng, ndx)[None],
                               np.zeros((1, ndx, 0)), np.zeros((1, 0, 0)))
    H = np.stack([0.01 * spd(rng, ndx + nu) for _ in range(T)])
    kwargs = {} if terms == "gauss-newton" else dict(
        hessian=StepHessian(H[:, :ndx, :ndx].copy(), H[:, :ndx, ndx:].copy(), H[:, ndx:, ndx:].copy()),
        gaps=0.1 * rng.normal(size=(T + 1, ndx)), du_lb=np.full((T, nu), -0.05), du_ub=np.full((T, nu), 0.05))
    structured = backward_pass(ProblemDerivatives(F, running, terminal), 1e-6, **kwargs)
    dense = backward_pass(ProblemDerivatives(DiscreteDerivatives(F.F_x, F.F_u), running, terminal), 1e-6, **kwargs)
    assert structured.ok and dense.ok
    for name in ("k", "K", "V_x", "V_xx", "lam", "Q_u", "Q_uu", "c"):
        assert relative_error(getattr(structured, name), getattr(dense, name)) < 1e-11, name
    np.testing.assert_array_equal(structured.free, dense.free)


def test_a_failing_knot_says_why(rng):
    d, _, _ = local_model(rng)
    d.running.l_uu[3] = -10.0 * np.eye(NU)
    bp = backward_pass(d, 0.0)
    assert bp.failed_at == 3 and "Q_uu not positive definite at knot 3" in bp.reason
    d, _, _ = local_model(rng)
    d.running.l_u[4, 1] = np.nan
    bp = backward_pass(d, 0.0)
    assert bp.failed_at == 4 and "non-finite Q-function" in bp.reason
    d, _, _ = local_model(rng)
    d.running.l_xx[5, 0, 0] = np.inf  # enters V_xx only: Q_u, Q_uu, Q_xu and V_x stay finite at that knot
    bp = backward_pass(d, 0.0)
    assert bp.failed_at == 5 and "non-finite value function" in bp.reason


def closed_loop_cost(d: ProblemDerivatives, K: np.ndarray, dk: np.ndarray) -> float:
    """The local model's cost along the closed loop ``δu = δk + K δx`` from ``δx_0 = 0``."""
    x, J, r = np.zeros(NDX), 0.0, d.running
    for t in range(T):
        u = dk[t] + K[t] @ x
        J += r.l_x[t] @ x + r.l_u[t] @ u + 0.5 * (x @ r.l_xx[t] @ x + u @ r.l_uu[t] @ u) + x @ r.l_xu[t] @ u
        x = d.dynamics.F_x[t] @ x + d.dynamics.F_u[t] @ u
    return J + d.terminal.l_x[0] @ x + 0.5 * x @ d.terminal.l_xx[0] @ x


def test_the_policy_gradient_is_the_closed_loop_cost_s_and_a_sweep_s_Q_u(rng):
    """``policy_gradient`` against central differences of the cost along the closed loop of random gains, and with
    a sweep's own gains (no bounds) it is that sweep's ``Q_u``."""
    d, _, _ = local_model(rng)
    K, h = rng.normal(size=(T, NU, NDX)), 1e-6
    fd = np.zeros((T, NU))
    for t in range(T):
        for j in range(NU):
            e = np.zeros((T, NU))
            e[t, j] = h
            fd[t, j] = (closed_loop_cost(d, K, e) - closed_loop_cost(d, K, -e)) / (2 * h)
    assert relative_error(policy_gradient(d, K), fd) < 1e-8
    bp = backward_pass(d, 1e-3)
    assert relative_error(policy_gradient(d, bp.K), bp.Q_u) < 1e-12


def test_without_gains_the_policy_gradient_is_the_gradient_of_a_robot_s_rollout_cost(rng):
    """K = 0: the reduced gradient, against central differences of the cost of ur5's rollouts."""
    import lietraj
    from lietraj.optimal_control import ActionModel, CostSum, Problem, RobotDynamics, control_regularization, \
        state_regularization
    ur5 = lietraj.load_robot("ur5")
    space, horizon = ur5.state_space, 8
    target = space.random(rng)
    running = CostSum(space, ur5.n)
    running.add("x", state_regularization(space, target, 1.0, ur5.n))
    running.add("u", control_regularization(ur5.n, 1e-2))
    problem = Problem(space.neutral(), ActionModel(RobotDynamics(ur5, 0.02), running),
                      state_regularization(space, target, 10.0, 0), horizon=horizon)
    us = rng.normal(size=(horizon, ur5.n))
    d = problem.empty_derivatives()
    problem.derivatives(problem.rollout(us), us, out=d)
    h, fd = 1e-6, np.zeros_like(us)
    for t in range(horizon):
        for j in range(ur5.n):
            up, down = us.copy(), us.copy()
            up[t, j] += h
            down[t, j] -= h
            fd[t, j] = (problem.cost(problem.rollout(up), up) - problem.cost(problem.rollout(down), down)) / (2 * h)
    assert relative_error(policy_gradient(d, np.zeros((horizon, ur5.n, space.ndx))), fd) < 1e-7


@pytest.mark.parametrize("terms", ["plain", "gaps, bounds and DDP's term"])
def test_a_sweep_from_a_previous_one_visits_the_changed_knots_only_and_equals_a_full_sweep(terms, rng):
    d, hessian, gaps = local_model(rng)
    options = {} if terms == "plain" else dict(gaps=gaps, hessian=hessian, du_lb=-np.ones((T, NU)),
                                                   du_ub=np.ones((T, NU)))
    before = backward_pass(d, 1e-3, **options)
    n = 3
    d.running.l_x[:n] += rng.normal(size=(n, NDX))
    d.running.l_xx[:n] += np.stack([spd(rng, NDX, 0.1) for _ in range(n)])
    full = backward_pass(d, 1e-3, **options)
    partial = backward_pass(d, 1e-3, **options, previous=before, first_unchanged=n)
    assert full.ok and partial.ok
    for name in ("k", "K", "V_x", "V_xx", "lam", "Q_u", "Q_uu", "c", "free"):
        np.testing.assert_array_equal(getattr(partial, name), getattr(full, name), err_msg=name)
    assert not np.array_equal(full.k[:n], before.k[:n])
