"""LQR and TVLQR in the Lie algebra: equal to independent Riccati recursions on linear systems, equal to iLQR's gains,
stabilizing nonlinear robots (a swinging ur5, an upright pendulum and double pendulum, a free body on SE(3)) where the
open loop drifts away; closed-loop simulation with disturbances and divergence statuses; input checks."""

import numpy as np
import pytest

import lietraj
from conftest import relative_error
from lietraj.dynamics import generalized_gravity, rnea, se3
from lietraj.dynamics.model.builder import ModelBuilder, chain, placement
from lietraj.dynamics.lie.state import State, StateSpace, Trajectory
from lietraj.optimal_control.dynamics.discrete_dynamics import RobotDynamics
from lietraj.optimal_control.dynamics.linear_dynamics import LinearDynamics
from lietraj.optimal_control.feedback.lqr import FeedbackPolicy, Policy, TVLQRController, lqr, simulate, tvlqr
from lietraj.optimal_control.problem import ActionModel, Problem, tangent_difference
from lietraj.optimal_control.solvers.solvers import SolverOptions, solve_ilqr
from test_problem import FreeBody, StateControlCost, linear_system, pendulum_problem


def stacked(X: Trajectory) -> np.ndarray:
    return np.concatenate([X.s, X.v], axis=1)


def constant(x: State, N: int) -> Trajectory:
    return Trajectory(None if x.H is None else np.repeat(x.H[None], N, axis=0), np.repeat(x.s[None], N, axis=0),
                      np.repeat(x.v[None], N, axis=0))


def errors(X_ref: Trajectory, X: Trajectory, components: int | None = None) -> np.ndarray:
    """|X[k] ⊖ X_ref[k]|∞ per knot, over the first ``components`` of the tangent (default all)."""
    return np.abs(tangent_difference(X_ref, X)[:, :components]).max(axis=1)


def riccati_iteration(A, B, Q, R, N=None, iterations=100000):
    """The DARE solution by iterating the Riccati map from P = Q to a fixed point (no scipy), and its gain."""
    N = np.zeros(B.shape) if N is None else N
    P = Q.copy()
    for _ in range(iterations):
        G = B.T @ P @ A + N.T
        P_next = Q + A.T @ P @ A - G.T @ np.linalg.solve(R + B.T @ P @ B, G)
        P_next = 0.5 * (P_next + P_next.T)
        if np.abs(P_next - P).max() <= 1e-15 * np.abs(P).max():
            break
        P = P_next
    return P_next, -np.linalg.solve(R + B.T @ P_next @ B, B.T @ P_next @ A + N.T)


def riccati_recursion(A, B, Qs, Rs, Qf):
    """Finite-horizon gains K_k and cost-to-go Hessians P_k by the textbook backward recursion."""
    T = len(Qs)
    K, P = np.empty((T,) + B.T.shape), np.empty((T + 1,) + A.shape)
    P[T] = Qf
    for t in range(T - 1, -1, -1):
        K[t] = -np.linalg.solve(Rs[t] + B.T @ P[t + 1] @ B, B.T @ P[t + 1] @ A)
        P[t] = Qs[t] + A.T @ P[t + 1] @ (A + B @ K[t])
    return K, P


def unstable_linear_system(rng, n=2, nu=2):
    A, B, c = linear_system(rng, n, nu)
    A *= 1.08  # spectral radius > 1: the open loop diverges
    assert np.abs(np.linalg.eigvals(A)).max() > 1.02
    return LinearDynamics(A, B, c, dt=0.1)


def random_weights(rng, m, definite=True):
    M = rng.normal(size=(m, m))
    return M @ M.T + (0.5 if definite else 0.0) * np.eye(m)


# ---- LQR ------------------------------------------------------------------------------------------------------

def test_lqr_on_a_linear_system_equals_the_riccati_fixed_point_and_is_stable(rng):
    dyn = unstable_linear_system(rng)
    nx, nu = 4, 2
    u_eq = rng.normal(size=nu)
    z_eq = np.linalg.solve(np.eye(nx) - dyn.A, dyn.B @ u_eq + dyn.c)  # x = A x + B u + c
    x_eq = State(None, z_eq[:2], z_eq[2:])
    worst = 0.0
    for Q, R, N in ((random_weights(rng, nx), random_weights(rng, nu), None),
                    (np.diag(rng.uniform(0.5, 2.0, nx)), rng.uniform(0.5, 2.0, nu), None),
                    (random_weights(rng, nx) + 5 * np.eye(nx), random_weights(rng, nu) + 5 * np.eye(nu),
                     0.3 * rng.normal(size=(nx, nu)))):
        c = lqr(dyn, x_eq, u_eq, Q, R, N)
        P_ref, K_ref = riccati_iteration(dyn.A, dyn.B, np.diag(Q) if np.ndim(Q) == 1 else Q,
                                         np.diag(R) if np.ndim(R) == 1 else R, N)
        worst = max(worst, relative_error(c.P, P_ref), relative_error(c.K, K_ref))
        assert relative_error(c.A, dyn.A) == 0 and relative_error(c.B, dyn.B) == 0
        assert c.spectral_radius < 1.0
        assert np.abs(np.linalg.eigvals(dyn.A + dyn.B @ K_ref)).max() == pytest.approx(c.spectral_radius, rel=1e-9)
        # u = u_eq + K (x - x_eq), one state and a batch
        X = Trajectory(None, rng.normal(size=(5, 2)), rng.normal(size=(5, 2)))
        U = c.batch(0, X)
        for k in range(5):
            assert relative_error(c(k, X[k]), u_eq + K_ref @ (stacked(X)[k] - z_eq)) < 1e-9
            assert relative_error(U[k], c(k, X[k])) < 1e-15
    assert worst < 1e-11


def test_lqr_errors_name_the_cause(rng):
    dyn = unstable_linear_system(rng)
    x = State(None, np.ones(2), np.zeros(2))
    with pytest.raises(ValueError, match="not an equilibrium"):
        lqr(dyn, x, np.zeros(2), np.eye(4), np.eye(2))
    # an unstable mode that no control reaches
    A = np.diag([1.1, 0.5, 0.9, 0.3])
    B = np.array([[0.0], [1.0], [1.0], [0.0]])
    stuck = LinearDynamics(A, B)
    rest = StateSpace(2, False).neutral()
    with pytest.raises(ValueError, match="stabilizable"):
        lqr(stuck, rest, np.zeros(1), np.eye(4), np.eye(1))
    # a free-floating arm in zero gravity: its momentum, hence the base position, cannot be controlled
    b = ModelBuilder("floating arm", floating_base=True, gravity=(0.0, 0.0, 0.0))
    b.add_body("link", "base", axis=(0.0, 1.0, 0.0), com=(0.0, 0.0, -0.15))
    floating = RobotDynamics(b.build(), 0.01)
    with pytest.raises(ValueError, match="stabilizable"):
        lqr(floating, floating.state_space.neutral(), np.zeros(1), np.ones(floating.state_space.ndx), np.ones(1))
    x_eq = State(None, np.zeros(2), np.zeros(2))
    free = LinearDynamics(np.eye(4), np.eye(4, 2))
    for Q, R, match in ((np.eye(3), np.eye(2), "Q"), (-np.eye(4), np.eye(2), "semidefinite"),
                        (np.eye(4), np.zeros((2, 2)), "positive definite"), (np.triu(np.ones((4, 4))), np.eye(2), "symmetric"),
                        (np.eye(4), [1.0, np.nan], "R")):
        with pytest.raises(ValueError, match=match):
            lqr(free, x_eq, np.zeros(2), Q, R)
    with pytest.raises(ValueError, match="u_eq"):
        lqr(free, x_eq, np.zeros(3), np.eye(4), np.eye(2))
    with pytest.raises(ValueError, match="N must"):
        lqr(free, x_eq, np.zeros(2), np.eye(4), np.eye(2), N=np.zeros((2, 4)))


def planar_double_pendulum():
    b = ModelBuilder("double pendulum")
    b.add_body("link1", None, axis=(0.0, 1.0, 0.0), com=(0.0, 0.0, -0.15))
    b.add_body("link2", "link1", axis=(0.0, 1.0, 0.0), joint_placement=placement((0.0, 0.0, -0.3)),
               com=(0.0, 0.0, -0.15))
    return b.build()


@pytest.mark.parametrize("robot", ["pendulum", "double pendulum"])
def test_lqr_balances_a_builder_pendulum_upright(robot):
    model = chain(1) if robot == "pendulum" else planar_double_pendulum()
    n = model.n
    dyn = RobotDynamics(model, 0.01)
    x_eq = State(None, np.r_[np.pi, np.zeros(n - 1)], np.zeros(n))
    u_eq = generalized_gravity(model, x_eq)
    c = lqr(dyn, x_eq, u_eq, np.r_[100.0 * np.ones(n), 10.0 * np.ones(n)], 0.1 * np.ones(n))
    assert c.spectral_radius < 1.0
    x0 = State(None, x_eq.s + np.r_[0.25, -0.3 * np.ones(n - 1)], np.r_[-0.5, np.zeros(n - 1)])
    T = 400
    closed, opened = simulate(dyn, c, x0, T), simulate(dyn, lambda k, x: u_eq, x0, T)
    assert closed.completed and opened.completed
    e_closed, e_open = errors(constant(x_eq, T + 1), closed.xs), errors(constant(x_eq, T + 1), opened.xs)
    assert e_closed.max() < 2.0 * e_closed[0] and e_closed[-1] < 1e-4 * e_closed[0]
    assert e_open.max() > 5.0  # it falls
    # the infinite-horizon gain is the fixed point of the shared finite-horizon recursion started at P
    tv = tvlqr(dyn, constant(x_eq, 61), np.repeat(u_eq[None], 60, axis=0), np.r_[100.0 * np.ones(n), 10.0 * np.ones(n)],
               0.1 * np.ones(n), c.P)
    assert relative_error(tv.K, np.broadcast_to(c.K, tv.K.shape)) < 1e-11
    assert relative_error(tv.P, np.broadcast_to(c.P, tv.P.shape)) < 1e-11


def test_lqr_stabilizes_a_pose_on_se3():
    """A floating-base state: the error x_eq⁻¹ x includes the SE(3) pose; from 1.8 rad off it returns to rest."""
    dyn = FreeBody(dt=0.1)
    rng = np.random.default_rng(3)
    x_eq = State(se3.random(rng), np.zeros(0), np.zeros(6))
    c = lqr(dyn, x_eq, np.zeros(6), np.ones(12), np.ones(6))
    assert c.spectral_radius < 1.0
    z0 = np.array([0.3, -0.2, 0.1, 1.0, -1.5, 0.5, 0.3, 0.3, -0.3, 0.2, 0.1, 0.0])
    x0 = dyn.state_space.integrate(x_eq, z0)
    run = simulate(dyn, c, x0, 150)
    e = errors(constant(x_eq, 151), run.xs)
    assert run.completed and e[0] == pytest.approx(1.5) and e[-1] < 1e-5
    assert relative_error(c.error(x0), z0) < 1e-12
    assert relative_error(c(0, x0), c.K @ z0) < 1e-12


# ---- TVLQR ----------------------------------------------------------------------------------------------------

def lq_problem(rng, T=25):
    A, B, c = linear_system(rng, 2, 2)
    dyn = LinearDynamics(A, B, c, dt=0.1)
    sp = dyn.state_space
    W, W_f, R = np.diag(rng.uniform(0.5, 2.0, 4)), random_weights(rng, 4) + 10.0 * np.eye(4), np.diag(rng.uniform(0.5, 1, 2))
    x_ref = sp.random(rng)
    running = ActionModel(dyn, StateControlCost(sp, 2, W, x_ref, R))
    return Problem(sp.random(rng), running, StateControlCost(sp, 0, W_f, x_ref), horizon=T), dyn, W, R, W_f


def test_tvlqr_on_a_linear_system_equals_the_finite_horizon_lq_solution(rng):
    prob, dyn, W, R, W_f = lq_problem(rng)
    r = solve_ilqr(prob, options=SolverOptions(reg_init=0.0, reg_min=1e-300))
    assert r.converged and r.iterations == 1
    c = tvlqr(dyn, r.xs, r.us, W, R, W_f)
    K_ref, P_ref = riccati_recursion(dyn.A, dyn.B, [W] * prob.T, [R] * prob.T, W_f)
    assert isinstance(c, TVLQRController) and isinstance(c, Policy)
    assert relative_error(c.K, r.K) < 1e-12
    assert relative_error(c.K, K_ref) < 1e-12 and relative_error(c.P, P_ref) < 1e-12
    # the policy reproduces the optimal trajectory (it is its own feedback law) and its controls
    run = simulate(dyn, c, prob.x0, prob.T)
    assert relative_error(stacked(run.xs), stacked(r.xs)) < 1e-12 and relative_error(run.us, r.us) < 1e-12
    # time-varying weights, in every accepted form
    scale = rng.uniform(0.5, 2.0, prob.T)
    Qs, Rs = scale[:, None, None] * W, (1.0 / scale)[:, None, None] * R
    K_tv, P_tv = riccati_recursion(dyn.A, dyn.B, Qs, Rs, W_f)
    for Q_arg, R_arg in ((Qs, Rs), (np.einsum("tii->ti", Qs), np.einsum("tii->ti", Rs))):
        c = tvlqr(dyn, r.xs, r.us, Q_arg, R_arg, W_f)
        assert relative_error(c.K, K_tv) < 1e-12 and relative_error(c.P, P_tv) < 1e-12
    c = tvlqr(dyn, r.xs, r.us, np.diag(W), np.diag(R), W_f)
    assert relative_error(c.K, K_ref) < 1e-12


def ur5_swing(dynamics: RobotDynamics, T: int):
    """A smooth swing of every joint whose torques make the semi-implicit Euler rollout follow it exactly."""
    dt = dynamics.dt
    t = dt * np.arange(T + 1)
    q = np.array([0.0, -1.2, 1.0, -0.5, 0.3, 0.0]) + np.outer(0.5 * (1.0 - np.cos(np.pi * t / t[-1])),
                                                               [1.0, 0.8, -1.0, 0.7, 0.5, 0.5])
    v = np.vstack([np.zeros((1, 6)), np.diff(q, axis=0) / dt])  # s⁺ = s + dt v⁺
    U = rnea(dynamics.model, Trajectory(None, q[:-1], v[:-1]), np.diff(v, axis=0) / dt)
    X = dynamics.rollout(State(None, q[0], v[0]), U)
    assert np.abs(X.s - q).max() < 1e-9
    return X, U


def test_tvlqr_stabilizes_a_perturbed_ur5_swing_where_the_open_loop_drifts_away():
    model = lietraj.load_robot("ur5")
    dyn = RobotDynamics(model, 0.01)
    T = 200
    X, U = ur5_swing(dyn, T)
    weights = np.r_[100.0 * np.ones(6), np.ones(6)]
    c = tvlqr(dyn, X, U, weights, 1e-2 * np.ones(6), weights)
    x0 = State(None, X.s[0] + 0.05, X.v[0].copy())
    noise = np.r_[np.zeros(6), 1e-3 * np.ones(6)]  # velocity kicks at every step
    closed = simulate(dyn, c, x0, T, disturbance=noise, rng=1)
    opened = simulate(dyn, lambda k, x: U[k], x0, T, disturbance=noise, rng=1)
    assert closed.completed and opened.completed
    assert np.array_equal(closed.disturbances, opened.disturbances)
    e_closed, e_open = errors(X, closed.xs, 6), errors(X, opened.xs, 6)
    assert e_closed[0] == pytest.approx(0.05)
    assert e_closed.max() <= 1.01 * e_closed[0] and e_closed[-50:].max() < 0.05 * e_closed[0]
    assert e_open[-1] > 50.0 * e_open[0]
    # the batched form, at the states visited
    assert relative_error(c.batch(np.arange(T), Trajectory(None, closed.xs.s[:-1], closed.xs.v[:-1])), closed.us) < 1e-12


def test_feedback_policy_of_an_ilqr_result_tracks_a_pendulum_swing_up():
    prob = pendulum_problem(T=60)
    r = solve_ilqr(prob)
    assert r.converged
    policy = FeedbackPolicy.from_result(r)
    dyn = prob.running[0].dynamics
    for k in (0, 17, 59):
        assert relative_error(policy(k, r.xs[k]), r.us[k]) < 1e-15
    x0 = State(None, np.array([0.15]), np.array([-0.3]))
    closed, opened = simulate(dyn, policy, x0, 60), simulate(dyn, lambda k, x: r.us[k], x0, 60)
    e_closed, e_open = errors(r.xs, closed.xs), errors(r.xs, opened.xs)
    assert e_closed[-1] < 0.1 * e_closed[0] and e_open[-1] > 3.0 * e_open[0]
    with pytest.raises(ValueError, match=r"\[0, 60\)"):
        policy(60, r.xs[60])
    with pytest.raises(ValueError, match="expected a state"):
        policy(0, State(np.eye(4), np.zeros(1), np.zeros(7)))
    with pytest.raises(ValueError, match="integers"):
        policy.batch(np.full(61, 0.5), r.xs)


# ---- simulation -----------------------------------------------------------------------------------------------

def test_simulate_applies_disturbances_on_the_group(rng):
    dyn = unstable_linear_system(rng)
    x0 = StateSpace(2, False).random(rng)
    W = rng.normal(size=(10, 4))
    run = simulate(dyn, lambda k, x: np.full(2, 0.1 * k), x0, 10, disturbance=lambda k, x: W[k])
    X, U = run
    z = stacked(X)
    for k in range(10):
        assert relative_error(z[k + 1], dyn.A @ z[k] + dyn.B @ U[k] + dyn.c + W[k]) < 1e-14
    assert np.array_equal(run.disturbances, W) and np.array_equal(U[:, 0], 0.1 * np.arange(10))
    # a noise scale per component, reproducible from the seed
    scale = np.array([0.0, 0.0, 1e-2, 1e-3])
    a, b = (simulate(dyn, lambda k, x: np.zeros(2), x0, 10, disturbance=scale, rng=7) for _ in range(2))
    assert np.array_equal(a.disturbances, b.disturbances) and np.all(a.disturbances[:, :2] == 0.0)
    assert np.all(a.disturbances[:, 2:] != 0.0)
    # on SE(3): x⁺ = f(x, u) exp(w)
    body = FreeBody()
    w = np.r_[0.1, 0.2, -0.3, 0.4, -0.2, 0.1, np.zeros(6)]
    x = State(se3.random(rng), np.zeros(0), rng.normal(size=6))
    run = simulate(body, lambda k, x: np.ones(6), x, 1, disturbance=lambda k, x: w)
    expected = body.state_space.integrate(body.step(x, np.ones(6)), w)
    assert relative_error(run.xs.H[1], expected.H) < 1e-14 and relative_error(run.xs.v[1], expected.v) < 1e-15


def test_simulate_reports_divergence_as_a_status():
    exploding = LinearDynamics(1e80 * np.eye(2), np.eye(2, 1))
    x0 = State(None, np.ones(1), np.ones(1))
    run = simulate(exploding, lambda k, x: np.zeros(1), x0, 10)
    assert run.status.startswith("diverged at step 3") and not run.completed
    assert len(run.xs) == 4 and len(run.us) == 3 and np.isfinite(run.xs.s).all()
    run = simulate(exploding, lambda k, x: np.full(1, np.nan), x0, 10)
    assert run.status == "diverged at step 0: non-finite control or disturbance" and len(run.xs) == 1
    robot = RobotDynamics(chain(1), 0.01)
    run = simulate(robot, lambda k, x: np.full(1, 1e300), robot.state_space.neutral(), 5)
    assert run.status.startswith("diverged at step") and "non-finite" in run.status


def test_bad_inputs_raise_value_errors(rng):
    prob, dyn, W, R, W_f = lq_problem(rng, T=5)
    X, U = prob.rollout(np.zeros((5, 2))), np.zeros((5, 2))
    with pytest.raises(ValueError, match="T \\+ 1"):
        tvlqr(dyn, X, U[:4], W, R, W_f)
    with pytest.raises(ValueError, match="U must"):
        tvlqr(dyn, X, np.zeros((5, 3)), W, R, W_f)
    with pytest.raises(ValueError, match="leading axis"):
        tvlqr(dyn, X, U, np.repeat(W[None], 4, axis=0), R, W_f)
    with pytest.raises(ValueError, match=r"R\[2\] must be positive definite"):
        tvlqr(dyn, X, U, W, np.array([R, R, np.zeros((2, 2)), R, R]), W_f)
    with pytest.raises(ValueError, match="Qf"):
        tvlqr(dyn, X, U, W, R, np.eye(3))
    bad = Trajectory(None, X.s.copy(), X.v.copy())
    bad.s[2, 0] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        tvlqr(dyn, bad, U, W, R, W_f)
    with pytest.raises(ValueError, match="DiscreteDynamics"):
        tvlqr(object(), X, U, W, R, W_f)
    policy = lambda k, x: np.zeros(2)  # noqa: E731
    with pytest.raises(ValueError, match="disturbance"):
        simulate(dyn, policy, prob.x0, 3, disturbance=-1.0)
    with pytest.raises(ValueError, match="shape"):
        simulate(dyn, lambda k, x: np.zeros(3), prob.x0, 3)
    with pytest.raises(ValueError, match="T must"):
        simulate(dyn, policy, prob.x0, -1)
    with pytest.raises(ValueError, match="State.H"):
        simulate(dyn, policy, State(np.eye(4), np.zeros(2), np.zeros(8)), 3)
    with pytest.raises(ValueError, match="K"):
        FeedbackPolicy(X, U, np.zeros((5, 2, 3)))
