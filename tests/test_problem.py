"""Problems of lietraj.optimal_control: grouped batched evaluation, gaps, errors, and the plug-in dynamics the solver
tests use (a linear system, a pendulum with a state-dependent actuator, a free rigid body on SE(3) x R^6)."""

import numpy as np
import pytest

from conftest import relative_error
from lietraj.dynamics import se3
from lietraj.dynamics.lie.finite_differences import numerical_jacobian
from lietraj.dynamics.lie.state import State, StateSpace, Trajectory
from lietraj.optimal_control.costs.costs import CostDerivatives, CostModel
from lietraj.optimal_control.dynamics.discrete_dynamics import DiscreteDerivatives, DiscreteDynamics
from lietraj.optimal_control.dynamics.euler_second_order import StepHessian
from lietraj.optimal_control.dynamics.linear_dynamics import LinearDynamics
from lietraj.optimal_control.problem import ActionModel, Problem, ProblemDerivatives


# ---- test costs and plug-in dynamics --------------------------------------------------------------------------

class StateControlCost(CostModel):
    """``½ rᵀ W r + ½ (u - u_ref)ᵀ R (u - u_ref)`` with ``r = x ⊖ x_ref``, Gauss–Newton in the state (exact on
    vector spaces, where the chart Jacobian of ⊖ is the identity); ``nu = 0`` for a terminal cost."""

    def __init__(self, space: StateSpace, nu: int, W, x_ref: State, R=None, u_ref=None):
        self.state_space, self.nu = space, nu
        self.W, self.x_ref = np.asarray(W, dtype=float), x_ref
        self.R = np.zeros((nu, nu)) if R is None else np.asarray(R, dtype=float)
        self.u_ref = np.zeros(nu) if u_ref is None else np.asarray(u_ref, dtype=float)

    def _residuals(self, X):
        sp = self.state_space
        r, J = np.empty((len(X), sp.ndx)), np.empty((len(X), sp.ndx, sp.ndx))
        for k in range(len(X)):
            r[k] = sp.difference(self.x_ref, X[k])
            J[k] = sp.difference_jacobians(self.x_ref, X[k])[1]
        return r, J

    def value(self, X, U):
        r, _ = self._residuals(X)
        v = 0.5 * np.einsum("ti,ij,tj->t", r, self.W, r)
        if self.nu:
            e = U - self.u_ref
            v += 0.5 * np.einsum("ti,ij,tj->t", e, self.R, e)
        return v

    def derivatives(self, X, U, out=None):
        N, ndx = len(X), self.state_space.ndx
        d = CostDerivatives.zeros(N, ndx, self.nu) if out is None else out
        r, J = self._residuals(X)
        Wr = r @ self.W
        d.l[:] = self.value(X, U)
        d.l_x[:] = np.einsum("tij,ti->tj", J, Wr)
        d.l_xx[:] = np.einsum("tki,kl,tlj->tij", J, self.W, J)
        d.l_xu[:] = 0.0
        if self.nu:
            d.l_u[:] = (U - self.u_ref) @ self.R
            d.l_uu[:] = self.R
        return d


class Pendulum(DiscreteDynamics):
    """``θ̈ = -a sin θ - b θ̇ + κ (1 + ε cos θ) u`` by semi-implicit Euler (``v⁺ = v + dt θ̈``, ``s⁺ = s + dt v⁺``),
    with analytic Jacobians and second-order contraction (``θ̈`` is nonlinear in θ and couples θ with u)."""

    def __init__(self, dt=0.05, a=9.81, b=0.1, kappa=1.0, eps=0.3, blow_up=np.inf):
        self.state_space, self.nu, self.dt = StateSpace(1, False), 1, dt
        self.a, self.b, self.kappa, self.eps, self.blow_up = a, b, kappa, eps, blow_up

    def _acc(self, s, v, u):
        return -self.a * np.sin(s) - self.b * v + self.kappa * (1.0 + self.eps * np.cos(s)) * u

    def step_trajectory(self, X, U):
        s, v, u = X.s[:, 0], X.v[:, 0], np.asarray(U, dtype=float)[:, 0]
        v_next = v + self.dt * self._acc(s, v, u)
        s_next = s + self.dt * v_next
        s_next = np.where(np.abs(s_next) > self.blow_up, np.nan, s_next)  # a model that diverges past a bound
        return Trajectory(None, s_next[:, None], v_next[:, None])

    def trajectory_derivatives(self, X, U, out=None):
        s, u, dt = X.s[:, 0], np.asarray(U, dtype=float)[:, 0], self.dt
        acc_s = -self.a * np.cos(s) - self.kappa * self.eps * np.sin(s) * u
        acc_v, acc_u = -self.b, self.kappa * (1.0 + self.eps * np.cos(s))
        N = len(X)
        F_x, F_u = np.empty((N, 2, 2)), np.empty((N, 2, 1))
        F_x[:, 1, 0], F_x[:, 1, 1], F_u[:, 1, 0] = dt * acc_s, 1.0 + dt * acc_v, dt * acc_u
        F_x[:, 0, 0], F_x[:, 0, 1], F_u[:, 0, 0] = 1.0 + dt * F_x[:, 1, 0], dt * F_x[:, 1, 1], dt * F_u[:, 1, 0]
        if out is None:
            return DiscreteDerivatives(F_x, F_u)
        out.F_x[...], out.F_u[...] = F_x, F_u
        return out

    def trajectory_hessian_contraction(self, X, U, LAM):
        s, u, dt = X.s[:, 0], np.asarray(U, dtype=float)[:, 0], self.dt
        w = dt * LAM[:, 1] + dt * dt * LAM[:, 0]  # λᵀ d(x⁺)/d(θ̈)
        N = len(X)
        xx, xu, uu = np.zeros((N, 2, 2)), np.zeros((N, 2, 1)), np.zeros((N, 1, 1))
        xx[:, 0, 0] = w * (self.a * np.sin(s) - self.kappa * self.eps * np.cos(s) * u)
        xu[:, 0, 0] = w * (-self.kappa * self.eps * np.sin(s))
        return StepHessian(xx, xu, uu)


class FreeBody(DiscreteDynamics):
    """A unit-inertia free body on SE(3) x R^6 driven by its body acceleration: ``ν⁺ = ν + dt u``,
    ``H⁺ = H exp(dt ν⁺)``, with ``F_x = [[Ad_{exp(-ξ)}, dt Jr(ξ)], [0, I]]``, ``F_u = [dt² Jr(ξ); dt I]``, ``ξ = dt ν⁺``."""

    def __init__(self, dt=0.1):
        self.state_space, self.nu, self.dt = StateSpace(0, True), 6, dt

    def step_trajectory(self, X, U):
        V = X.v + self.dt * np.asarray(U, dtype=float)
        H = np.stack([X.H[k] @ se3.exp(self.dt * V[k]) for k in range(len(X))])
        return Trajectory(H, np.zeros((len(X), 0)), V)

    def trajectory_derivatives(self, X, U, out=None):
        dt, N = self.dt, len(X)
        V = X.v + dt * np.asarray(U, dtype=float)
        F_x, F_u = np.zeros((N, 12, 12)), np.zeros((N, 12, 6))
        for k in range(N):
            Jr = se3.right_jacobian(dt * V[k])
            F_x[k, :6, :6] = se3.Ad(se3.exp(-dt * V[k]))
            F_x[k, :6, 6:] = dt * Jr
            F_u[k, :6] = dt * dt * Jr
        F_x[:, 6:, 6:] = np.eye(6)
        F_u[:, 6:] = dt * np.eye(6)
        if out is None:
            return DiscreteDerivatives(F_x, F_u)
        out.F_x[...], out.F_u[...] = F_x, F_u
        return out


class CountingDynamics(DiscreteDynamics):
    """Wraps dynamics and records each batched call as (method, number of knots)."""

    def __init__(self, inner):
        self.inner, self.calls = inner, []
        self.state_space, self.nu, self.dt = inner.state_space, inner.nu, inner.dt

    def step_trajectory(self, X, U):
        self.calls.append(("step", len(X)))
        return self.inner.step_trajectory(X, U)

    def trajectory_derivatives(self, X, U, out=None):
        self.calls.append(("derivatives", len(X)))
        return self.inner.trajectory_derivatives(X, U, out)

    def trajectory_hessian_contraction(self, X, U, LAM):
        self.calls.append(("contraction", len(X)))
        return self.inner.trajectory_hessian_contraction(X, U, LAM)


class CountingCost(CostModel):
    """Wraps a cost and records each batched call as (method, number of knots)."""

    def __init__(self, inner):
        self.inner, self.calls = inner, []
        self.state_space, self.nu = inner.state_space, inner.nu

    def value(self, X, U):
        self.calls.append(("value", len(X)))
        return self.inner.value(X, U)

    def derivatives(self, X, U, out=None):
        self.calls.append(("cost derivatives", len(X)))
        return self.inner.derivatives(X, U, out)


def pendulum_problem(T=40, dt=0.05, **kwargs):
    dyn = Pendulum(dt, **kwargs)
    sp = dyn.state_space
    goal = State(None, np.array([np.pi]), np.zeros(1))
    running = ActionModel(dyn, StateControlCost(sp, 1, np.diag([0.1, 0.01]), goal, R=0.05 * np.eye(1)))
    terminal = StateControlCost(sp, 0, np.diag([100.0, 10.0]), goal)
    return Problem(State(None, np.zeros(1), np.zeros(1)), running, terminal, horizon=T)


def linear_system(rng, n=2, nu=2, dt=0.1):
    """A lightly damped random oscillator pair: x⁺ = A x + B u + c, x = [s; v]."""
    K = rng.normal(size=(n, n))
    A = np.block([[np.eye(n), dt * np.eye(n)], [-dt * (K @ K.T + np.eye(n)), 0.98 * np.eye(n)]])
    A[:n] += dt * A[n:]  # semi-implicit: s⁺ = s + dt v⁺
    B = np.vstack([dt * dt * np.eye(n, nu), dt * np.eye(n, nu)]) + 0.01 * rng.normal(size=(2 * n, nu))
    return A, B, 0.01 * rng.normal(size=2 * n)


def space_of(n, floating=False):
    return StateSpace(n, floating)


# ---- Problem -------------------------------------------------------------------------------------------------

def test_rollout_cost_and_gaps_match_knot_by_knot_evaluation(rng):
    prob = pendulum_problem(T=12)
    U = rng.normal(size=(12, 1))
    X = prob.rollout(U)
    x = prob.x0
    for k in range(12):
        x = prob.running[k].dynamics.step(x, U[k])
        assert relative_error(np.concatenate([X[k + 1].s, X[k + 1].v]), np.concatenate([x.s, x.v])) < 1e-15
    expected = sum(prob.running[k].cost.value(Trajectory(None, X.s[k:k + 1], X.v[k:k + 1]), U[k:k + 1])[0]
                   for k in range(12))
    expected += prob.terminal.value(Trajectory(None, X.s[12:], X.v[12:]), None)[0]
    assert abs(prob.cost(X, U) - expected) < 1e-12 * abs(expected)
    assert np.abs(prob.gaps(X, U)).max() == 0.0
    Y = Trajectory(None, X.s + rng.normal(size=X.s.shape), X.v.copy())
    g = prob.gaps(Y, U)
    assert relative_error(g[0], np.concatenate([prob.x0.s - Y.s[0], prob.x0.v - Y.v[0]])) < 1e-15
    for k in range(12):
        y = prob.running[k].dynamics.step(Y[k], U[k])
        assert relative_error(g[k + 1], np.concatenate([y.s - Y.s[k + 1], y.v - Y.v[k + 1]])) < 1e-15
    # a plug-in that does not step with its Jacobians is stepped for the gaps of a linearization
    assert np.array_equal(prob.gaps(Y, U, prob.derivatives(Y, U)), g)


def test_knots_sharing_a_model_are_evaluated_in_one_batched_call(rng):
    """Runs of consecutive knots that share a dynamics object make one call each, with all their knots; a cost object
    makes one call with all the knots of every run that holds it (Problem._term_groups)."""
    base = Pendulum()
    sp = base.state_space
    goal = State(None, np.array([1.0]), np.zeros(1))
    dyn = CountingDynamics(base)
    cost_a = CountingCost(StateControlCost(sp, 1, np.eye(2), goal, np.eye(1)))
    cost_b = CountingCost(StateControlCost(sp, 1, 2 * np.eye(2), goal, np.eye(1)))
    a, b = ActionModel(dyn, cost_a), ActionModel(dyn, cost_b)
    models = [a] * 3 + [b] * 2 + [a] * 4
    prob = Problem(State(None, np.zeros(1), np.zeros(1)), models, StateControlCost(sp, 0, np.eye(2), goal))
    U = rng.normal(size=(9, 1))
    X = prob.rollout(U)
    dyn.calls.clear()
    d = prob.derivatives(X, U)
    prob.dynamics_contraction(X, U, rng.normal(size=(9, 2)))
    prob.gaps(X, U)
    assert dyn.calls == [("derivatives", 9), ("contraction", 9), ("step", 9)]
    assert cost_a.calls == [("cost derivatives", 7)]
    assert cost_b.calls == [("cost derivatives", 2)]
    for k in range(9):
        F = base.derivatives(X[k], U[k])
        assert relative_error(d.dynamics.F_x[k], F.F_x) < 1e-15 and relative_error(d.dynamics.F_u[k], F.F_u) < 1e-15
        one = Trajectory(None, X.s[k:k + 1], X.v[k:k + 1])
        c = models[k].cost.inner.derivatives(one, U[k:k + 1])
        for name in ("l", "l_x", "l_u", "l_xx", "l_xu", "l_uu"):
            assert relative_error(getattr(d.running, name)[k], getattr(c, name)[0]) < 1e-15
    assert relative_error(d.terminal.l_x[0], prob.terminal.derivatives(Trajectory(None, X.s[9:], X.v[9:]), None).l_x[0]) == 0


def test_derivatives_write_into_out_and_contraction_matches_each_knot(rng):
    prob = pendulum_problem(T=6)
    U = rng.normal(size=(6, 1))
    X = prob.rollout(U)
    out = ProblemDerivatives.empty(6, 2, 1)
    assert prob.derivatives(X, U, out=out) is out
    LAM = rng.normal(size=(6, 2))
    H = prob.dynamics_contraction(X, U, LAM)
    dyn = prob.running[0].dynamics
    for k in range(6):
        h = dyn.trajectory_hessian_contraction(Trajectory(None, X.s[k:k + 1], X.v[k:k + 1]), U[k:k + 1], LAM[k:k + 1])
        assert relative_error(H.xx[k], h.xx[0]) == 0 and relative_error(H.xu[k], h.xu[0]) == 0
    with pytest.raises(ValueError, match="LAM"):
        prob.dynamics_contraction(X, U, LAM[:3])


def test_problem_rejects_mismatched_models():
    dyn = Pendulum()
    sp, goal = dyn.state_space, State(None, np.zeros(1), np.zeros(1))
    x0 = goal
    run = ActionModel(dyn, StateControlCost(sp, 1, np.eye(2), goal))
    term = StateControlCost(sp, 0, np.eye(2), goal)
    other = space_of(2)
    goal2 = State(None, np.zeros(2), np.zeros(2))
    with pytest.raises(ValueError, match="state space"):
        ActionModel(dyn, StateControlCost(other, 1, np.eye(4), goal2))
    with pytest.raises(ValueError, match="nu"):
        ActionModel(dyn, StateControlCost(sp, 2, np.eye(2), goal))
    with pytest.raises(ValueError, match="u_lb must not exceed"):
        ActionModel(dyn, run.cost, u_lb=1.0, u_ub=-1.0)
    with pytest.raises(ValueError, match="horizon is required"):
        Problem(x0, run, term)
    with pytest.raises(ValueError, match="horizon"):
        Problem(x0, run, term, horizon=0)
    with pytest.raises(ValueError, match="horizon = 3 but 2"):
        Problem(x0, [run, run], term, horizon=3)
    with pytest.raises(ValueError, match="terminal cost must have nu = 0"):
        Problem(x0, run, run.cost, horizon=3)
    with pytest.raises(ValueError, match="terminal cost's state space"):
        Problem(x0, run, StateControlCost(other, 0, np.eye(4), goal2), horizon=3)
    lin = LinearDynamics(np.eye(2), np.ones((2, 2)))
    with pytest.raises(ValueError, match="nu = 2"):
        Problem(x0, [run, ActionModel(lin, StateControlCost(sp, 2, np.eye(2), goal))], term)
    with pytest.raises(ValueError, match="State.s"):
        Problem(goal2, run, term, horizon=3)
    prob = Problem(x0, run, term, horizon=3)
    with pytest.raises(ValueError, match=r"shape \(3, 1\)"):
        prob.rollout(np.zeros((4, 1)))
    with pytest.raises(ValueError, match="NaN"):
        prob.rollout(np.full((3, 1), np.nan))
    with pytest.raises(ValueError, match="T \\+ 1 = 4 knots"):
        prob.check_trajectory(sp.trajectory(3))


# ---- plug-in dynamics ----------------------------------------------------------------------------------------

def test_linear_dynamics_is_exact_and_checks_its_inputs(rng):
    A, B, c = linear_system(rng, n=3, nu=2)
    dyn = LinearDynamics(A, B, c, dt=0.1)
    x, u = dyn.state_space.random(rng), rng.normal(size=2)
    y = dyn.step(x, u)
    assert relative_error(np.concatenate([y.s, y.v]), A @ np.concatenate([x.s, x.v]) + B @ u + c) < 1e-15
    F_x, F_u = dyn.derivatives(x, u)
    J_x, J_u = numerical_jacobian(lambda z, w: dyn.step(z, w), x, u)
    assert relative_error(F_x, J_x) < 1e-8 and relative_error(F_u, J_u) < 1e-8
    X = dyn.state_space.random_trajectory(4, rng)
    H = dyn.trajectory_hessian_contraction(X, rng.normal(size=(4, 2)), rng.normal(size=(4, 6)))
    assert H.xx.shape == (4, 6, 6) and not H.xx.any() and not H.xu.any() and not H.uu.any()
    with pytest.raises(ValueError, match="even size"):
        LinearDynamics(np.eye(3), np.ones((3, 1)))
    with pytest.raises(ValueError, match="B must"):
        LinearDynamics(np.eye(2), np.ones((3, 1)))
    with pytest.raises(ValueError, match="dt"):
        LinearDynamics(np.eye(2), np.ones((2, 1)), dt=0.0)
    with pytest.raises(ValueError, match="NaN"):
        dyn.step(x, np.full(2, np.nan))


def _second_difference(phi, n, eps=1e-4):
    """Central second differences of a scalar function of an n-vector."""
    H = np.empty((n, n))
    E = np.eye(n) * eps
    for i in range(n):
        for j in range(n):
            H[i, j] = (phi(E[i] + E[j]) - phi(E[i] - E[j]) - phi(E[j] - E[i]) + phi(-E[i] - E[j])) / (4 * eps * eps)
    return H


@pytest.mark.parametrize("dynamics", ["pendulum", "free body"])
def test_plugin_dynamics_derivatives_match_finite_differences(dynamics, rng):
    """The test plug-ins are correct: F_x, F_u by geometric FD; the pendulum's contraction by second differences
    of λᵀ (f(x ⊕ dx, u + du) ⊖ f(x, u))."""
    dyn = Pendulum() if dynamics == "pendulum" else FreeBody()
    sp = dyn.state_space
    x, u = sp.random(rng), rng.normal(size=dyn.nu)
    F_x, F_u = dyn.derivatives(x, u)
    J_x, J_u = numerical_jacobian(lambda z, w: dyn.step(z, w), x, u)
    assert relative_error(F_x, J_x) < 1e-7 and relative_error(F_u, J_u) < 1e-7
    if dynamics == "free body":
        return
    lam = rng.normal(size=2)
    y = dyn.step(x, u)
    X1, U1 = Trajectory(None, x.s[None], x.v[None]), u[None]

    def phi(z):
        return lam @ sp.difference(y, dyn.step(sp.integrate(x, z[:2]), u + z[2:]))

    H_num = _second_difference(phi, 3)
    h = dyn.trajectory_hessian_contraction(X1, U1, lam[None])
    H = np.block([[h.xx[0], h.xu[0]], [h.xu[0].T, h.uu[0]]])
    assert relative_error(H, H_num) < 1e-6


def test_forget_evaluations_makes_a_repeated_solve_compute_again(monkeypatch):
    """A contact field keeps its last evaluations and a solve repeated from the same guess repeats its iterates bit
    for bit, so it would recall them: after ``forget_evaluations`` it computes every one again, to the same result."""
    from lietraj.dynamics.contacts import contact_dynamics_derivatives as module
    from lietraj.problems import make_problem

    # ANYmal's trot converges in 7 passes: every evaluation of its fields stays kept (8 a field) for the next solve
    example = make_problem("trot", "anymal", formulation="crocoddyl", step_length=0.15, step_height=0.1)
    first = example.solve()
    kernel, calls = module.contact_derivatives_batch_kernel, []
    monkeypatch.setattr(module, "contact_derivatives_batch_kernel", lambda *a: calls.append(1) or kernel(*a))
    again = example.solve()
    recalled = len(calls)
    example.problem.forget_evaluations()
    calls.clear()
    fresh = example.solve()
    assert fresh.cost == again.cost == first.cost and fresh.iterations == first.iterations
    assert recalled == 0 and len(calls) > 20  # the repeated solve had recalled every one
