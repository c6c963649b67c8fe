"""The closed-loop rollout of a policy (the solvers' forward pass): RobotDynamics' compiled rollout_policy equals the
knot-by-knot loop through ``step`` (floating and fixed base, Euler and RK4, gaps, bounds, α < 1), the generic
version equals the loop the solvers used before it, non-finite values end a rollout with a status, and the solver
rolls each run of knots sharing one dynamics object out in one compiled call."""

import numpy as np
import pytest

import lietraj
from conftest import relative_error
from lietraj.dynamics.lie.state import Trajectory
from lietraj.optimal_control.solvers import forward_pass, solvers
from lietraj.optimal_control.dynamics.discrete_dynamics import DiscreteDynamics, RobotDynamics
from lietraj.optimal_control.problem import ActionModel, Problem, knots, tangent_difference, tangent_integrate
from test_problem import FreeBody, StateControlCost

T = 30
U_MAX = 0.3


def reference_rollout(dyn, x0, X_ref, U_ref, k, K, alpha, gaps=None, lb=None, ub=None):
    """The solvers' forward pass as it was written before rollout_policy: Problem's chart functions, numpy, and one
    ``step`` call per knot."""
    sp, N = dyn.state_space, len(U_ref)
    X, U, DX = sp.trajectory(N + 1), np.empty((N, dyn.nu)), np.empty((N + 1, sp.ndx))
    X[0] = x0
    for t in range(N + 1):
        x = knots(X, t, t + 1)
        if gaps is not None and alpha != 1.0:
            tangent_integrate(x, (alpha - 1.0) * gaps[t:t + 1], out=x)
        tangent_difference(knots(X_ref, t, t + 1), x, DX[t:t + 1])
        if t == N:
            break
        u = U_ref[t] + alpha * k[t] + K[t] @ DX[t]
        if lb is not None:
            np.clip(u, lb[t], ub[t], out=u)
        U[t] = u
        X[t + 1] = dyn.step(X[t], u)
    return X, U, DX


def policy(dyn, rng, scale=1.0):
    """A reference trajectory near x0, controls, gains and gaps of the sizes a solver produces."""
    sp, nu = dyn.state_space, dyn.nu
    x0 = sp.random(rng, 0.1)
    X_ref = sp.integrate_trajectory(Trajectory(None if x0.H is None else np.repeat(x0.H[None], T + 1, axis=0),
                                               np.repeat(x0.s[None], T + 1, axis=0), np.repeat(x0.v[None], T + 1, axis=0)),
                                    0.05 * rng.normal(size=(T + 1, sp.ndx)))
    U_ref = 0.2 * rng.normal(size=(T, nu))
    k, K = 0.2 * rng.normal(size=(T, nu)), scale * 0.05 * rng.normal(size=(T, nu, sp.ndx))
    gaps = 0.02 * rng.normal(size=(T + 1, sp.ndx))
    return x0, X_ref, U_ref, k, K, gaps


def stacked(r) -> list[np.ndarray]:
    X, U, DX = r
    return [a for a in (X.H, X.s, X.v, U, DX) if a is not None and a.size]


def max_error(a, b) -> float:
    return max(relative_error(p, q) for p, q in zip(stacked(a), stacked(b)))


CASES = [("talos", "euler", False), ("talos", "euler", True), ("ur5", "euler", False), ("talos", "rk4", False),
         ("ur5", "rk4", False)]


@pytest.mark.parametrize("robot, integrator, fext", CASES)
def test_compiled_rollout_equals_the_knot_by_knot_loop(robot, integrator, fext, rng):
    model = lietraj.load_robot(robot)
    wrenches = None
    if fext:  # a push on the base (light bodies under random wrenches spin up, and rounding differences with them)
        wrenches = np.zeros((model.nb, 6))
        wrenches[0] = 20.0 * rng.normal(size=6)
    dyn = RobotDynamics(model, 0.01, integrator, fext=wrenches)
    x0, X_ref, U_ref, k, K, gaps = policy(dyn, rng)
    lb, ub = np.full((T, model.n), -U_MAX), np.full((T, model.n), U_MAX)
    cases = [(0.5, gaps, lb, ub), (0.25, gaps, None, None), (1.0, gaps, lb, ub), (0.5, None, lb, None),
             (1.0, None, None, None)]
    for alpha, g, lo, hi in cases:
        compiled = dyn.rollout_policy(x0, X_ref, U_ref, k, K, alpha, g, lo, hi)
        generic = DiscreteDynamics.rollout_policy(dyn, x0, X_ref, U_ref, k, K, alpha, g, lo, hi)
        assert compiled.ok and generic.ok, (compiled.reason, generic.reason)
        clip = (lb if lo is not None else -np.full_like(lb, np.inf), ub if hi is not None else np.full_like(ub, np.inf))
        reference = reference_rollout(dyn, x0, X_ref, U_ref, k, K, alpha, g,
                                      *(clip if lo is not None or hi is not None else (None, None)))
        new = (compiled.X, compiled.U, compiled.DX)
        assert max_error(new, reference) < 1e-14
        assert max_error((generic.X, generic.U, generic.DX), reference) < 1e-14
        if model.floating_base:  # the only difference: numpy's 4x4 products in step against the kernel's
            assert max_error(new, (generic.X, generic.U, generic.DX)) < 1e-14
        else:
            for a, b in zip(stacked(new), stacked((generic.X, generic.U, generic.DX))):
                np.testing.assert_array_equal(a, b)
        if lo is not None:  # the bounds were active, and only where they hold
            assert np.any(compiled.U == -U_MAX) and np.all(compiled.U >= -U_MAX)
        if hi is not None:
            assert np.any(compiled.U == U_MAX) and np.all(compiled.U <= U_MAX)
        if g is not None and alpha != 1.0:  # the gaps moved the first state off x0
            assert np.abs(compiled.X.v[0] - x0.v).max() > 1e-4


def test_generic_rollout_of_a_plugin_equals_the_reference_loop(rng):
    """FreeBody (SE(3) x R^6, no override) runs the base-class loop: the chart steps of a floating base."""
    dyn = FreeBody(0.1)
    x0, X_ref, U_ref, k, K, gaps = policy(dyn, rng)
    r = dyn.rollout_policy(x0, X_ref, U_ref, k, K, 0.5, gaps, -0.25, 0.25)
    assert r.ok
    reference = reference_rollout(dyn, x0, X_ref, U_ref, k, K, 0.5, gaps, np.full((T, 6), -0.25), np.full((T, 6), 0.25))
    assert max_error((r.X, r.U, r.DX), reference) < 1e-14
    assert np.any(np.abs(r.U) == 0.25)


@pytest.mark.parametrize("robot", ["talos", "ur5"])
def test_non_finite_values_end_the_rollout_with_a_status(robot, rng):
    model = lietraj.load_robot(robot)
    dyn = RobotDynamics(model, 0.01)
    x0, X_ref, U_ref, k, K, gaps = policy(dyn, rng)

    def both(*args):
        compiled = dyn.rollout_policy(*args)
        generic = DiscreteDynamics.rollout_policy(dyn, *args)
        assert compiled.failed_at == generic.failed_at, (compiled.reason, generic.reason)
        return compiled, generic

    bad_k = k.copy()
    bad_k[7, 1] = np.nan
    identity = dyn.state_space.trajectory(T - 7)
    for r in both(x0, X_ref, U_ref, bad_k, K, 0.5, gaps):
        assert not r.ok and r.failed_at == 7 and "non-finite" in r.reason
        assert np.isfinite(r.X.v[:8]).all() and np.isfinite(r.U[:7]).all()
        after = r.X[8:]  # never reached: identity states, not what the arrays held
        assert np.array_equal(after.s, identity.s) and np.array_equal(after.v, identity.v)
        assert after.H is None or np.array_equal(after.H, identity.H)
    bad_gaps = gaps.copy()
    bad_gaps[T, 0] = np.inf  # only the last state is affected
    for r in both(x0, X_ref, U_ref, k, K, 0.5, bad_gaps):
        assert r.failed_at == T
    assert dyn.rollout_policy(x0, X_ref, U_ref, k, K, 1.0, bad_gaps).ok  # a full step ignores the gaps
    nan_x0 = x0.copy()
    nan_x0.v[0] = np.nan
    for r in both(nan_x0, X_ref, U_ref, k, K, 0.5, gaps):
        assert r.failed_at == 0
    # Gains that blow up: the states grow until they overflow; both paths stop at the same knot.
    compiled, _ = both(x0, X_ref, U_ref, k, 1e3 * K, 1.0)
    assert 0 < compiled.failed_at <= T
    assert np.isfinite(compiled.X.s[:compiled.failed_at]).all() and np.abs(compiled.X.v[compiled.failed_at - 1]).max() > 1e3


def test_bad_shapes_raise_value_errors(rng):
    model = lietraj.load_robot("ur5")
    dyn = RobotDynamics(model, 0.01)
    x0, X_ref, U_ref, k, K, gaps = policy(dyn, rng)
    talos = lietraj.load_robot("talos").state_space
    bad = [(dict(x0=talos.neutral()), "x0"), (dict(X_ref=knots(X_ref, 0, T)), "X_ref"), (dict(U_ref=U_ref[:, 1:]), "U_ref"),
           (dict(k=k[1:]), "k"), (dict(K=K[:, :, 1:]), "K"), (dict(gaps=gaps[1:]), "gaps"),
           (dict(u_lb=np.zeros(3)), "u_lb")]
    for change, name in bad:
        args = dict(x0=x0, X_ref=X_ref, U_ref=U_ref, k=k, K=K, alpha=0.5, gaps=gaps) | change
        with pytest.raises(ValueError, match=name):
            dyn.rollout_policy(**args)
        with pytest.raises(ValueError, match=name):
            DiscreteDynamics.rollout_policy(dyn, **args)


def test_solver_forward_pass_rolls_each_run_of_shared_dynamics_out_in_one_compiled_call(rng, monkeypatch):
    model = lietraj.load_robot("ur5")
    sp = model.state_space
    dyn, other = RobotDynamics(model, 0.01), RobotDynamics(model, 0.01)
    x0, X_ref, U_ref, k, K, gaps = policy(dyn, rng)
    cost = StateControlCost(sp, model.n, np.eye(sp.ndx), x0, np.eye(model.n))
    terminal = StateControlCost(sp, 0, np.eye(sp.ndx), x0)
    shared = Problem(x0, ActionModel(dyn, cost, u_lb=-U_MAX, u_ub=U_MAX), terminal, horizon=T)
    runs = [dyn] * 10 + [other] * 15 + [dyn] * 5
    mixed = Problem(x0, [ActionModel(d, cost, u_lb=-U_MAX, u_ub=U_MAX) for d in runs], terminal)
    bp = type("Policy", (), dict(k=k, K=K))()
    calls = []
    kernel = forward_pass._rollout_kernel
    monkeypatch.setattr(forward_pass, "_rollout_kernel", lambda t0, t1, *a: calls.append((t0, t1)) or kernel(t0, t1, *a))
    monkeypatch.setattr(RobotDynamics, "step", lambda *a: pytest.fail("a compiled dynamics stepped in Python"))
    a = solvers._forward_pass(shared, X_ref, U_ref, bp, 0.5, gaps)
    assert calls == [(0, T + 1)]
    b = solvers._forward_pass(mixed, X_ref, U_ref, bp, 0.5, gaps)
    assert calls[1:] == [(0, 10), (10, 25), (25, T + 1)]  # one call per run, the last one with the final knot
    monkeypatch.undo()
    for p, q in zip(stacked(a[:3]), stacked(b[:3])):  # a fixed base: the two paths round alike
        np.testing.assert_array_equal(p, q)
    assert a[3] == b[3] == shared.cost(a[0], a[1])
    reference = reference_rollout(dyn, x0, X_ref, U_ref, k, K, 0.5, gaps, shared.u_lb, shared.u_ub)
    assert max_error(a[:3], reference) < 1e-14
    bad_k = k.copy()
    bad_k[3, 0] = np.nan  # np.clip keeps a NaN: the trial fails
    assert solvers._forward_pass(shared, X_ref, U_ref, type("Policy", (), dict(k=bad_k, K=K))(), 1.0, None) is None


def test_control_bounds_reach_the_kernel_as_writeable_arrays():
    """The bounds of every shape a solver passes (a problem's (T, nu) rows, one vector, one side None) reach the
    rollout kernel writeable and C-contiguous: numba types a read-only array apart, and a constrained solve's first
    iteration compiled the kernel again for it (3 s of a cold ``lietraj solve trot``)."""
    from lietraj.optimal_control.solvers.forward_pass import _bounds

    N, nu = 4, 3
    U = np.zeros((N, nu))
    rows = np.ones((N, nu))
    for lower, upper in ((-rows, rows), (-1.0 * np.ones(nu), None), (None, rows), (-rows, np.inf)):
        bounds = _bounds(lower, upper, N, nu, U)
        for b in bounds[:2]:
            assert b.shape == (N, nu) and b.flags.writeable and b.flags.c_contiguous
