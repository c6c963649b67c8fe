"""A cost written as a plain Python function of one knot (``FunctionCost``), as README.md and
examples/custom_cost.py teach it on Talos: a hinge on the right hand's height. Its finite differences on the state
group against its analytic gradient, the checker on it, its equality with the built-in residual cost it duplicates,
and its place in a ready problem's cost sums."""

import numpy as np
import pytest

from conftest import relative_error
from lietraj.dynamics import frame_jacobian, frame_placement
from lietraj.dynamics.lie.state import Trajectory
from lietraj.optimal_control import (FrameTranslationResidual, FunctionCost, QuadraticBarrier, ResidualCost,
                                     check_derivatives)
from lietraj.problems import make_problem

HAND = "gripper_right_joint"


@pytest.fixture(scope="module")
def reach():
    return make_problem("talos_reach", horizon=4)


def hinge(model, power: int, low: float = 1.0):
    """``max(low − z, 0)^power`` of the right hand's height z; its gradient ``−power r^(power−1) dz`` and its
    Gauss–Newton Hessian ``power (power−1) r^(power−2) dzᵀdz`` (the curvature of z(x) left out), for any nu."""
    nv = model.nv

    def height_and_slope(x):
        r = max(low - frame_placement(model, x, HAND)[2, 3], 0.0)
        return r, frame_jacobian(model, x, HAND, "local_world_aligned")[2]

    def fn(x, u):
        return max(low - frame_placement(model, x, HAND)[2, 3], 0.0) ** power

    def gradient(x, u):
        r, dz = height_and_slope(x)
        return np.concatenate([-power * r ** (power - 1) * dz, np.zeros(nv)]), np.zeros(len(u))

    def gauss_newton(x, u):
        r, dz = height_and_slope(x)
        l_xx = np.zeros((2 * nv, 2 * nv))
        if r > 0.0:  # zero where the hand is above low
            l_xx[:nv, :nv] = power * (power - 1) * r ** (power - 2) * np.outer(dz, dz)
        return l_xx, np.zeros((2 * nv, len(u))), np.zeros((len(u), len(u)))

    return fn, gradient, gauss_newton


def knots(reach, rng, count: int) -> Trajectory:
    """The initial state and states around it (joints moved by ~0.05 rad, the base by ~5 cm, velocities ~0.05):
    the right hand stays below 1 m, where the hinge is active."""
    space, x0 = reach.model.state_space, reach.problem.x0
    return Trajectory.from_states([x0] + [space.integrate(x0, 0.05 * rng.standard_normal(space.ndx))
                                          for _ in range(count - 1)])


def test_differences_of_the_plain_cost_match_its_gradient(reach, rng):
    """The cubic hinge given as a bare function: its central differences on the group (value differences for the
    Hessian) match the analytic gradient and the Hessian differenced from that gradient."""
    model = reach.model
    fn, gradient, _ = hinge(model, 3)
    X = knots(reach, rng, 3)
    plain = FunctionCost(model.state_space, 0, fn).derivatives(X, None)
    given = FunctionCost(model.state_space, 0, fn, gradient).derivatives(X, None)
    exact = np.array([gradient(x, np.zeros(0))[0] for x in X])
    assert np.all(plain.l > 0) and relative_error(plain.l, given.l) == 0.0
    assert relative_error(plain.l_x, exact) <= 1e-9 and relative_error(given.l_x, exact) == 0.0
    assert relative_error(plain.l_xx, given.l_xx) <= 1e-6
    assert relative_error(given.l_xx, np.swapaxes(given.l_xx, 1, 2)) == 0.0
    # A running knot (nu = 32): the controls do not enter, so their blocks vanish up to the differences' noise.
    U = rng.standard_normal((1, model.n))
    running = FunctionCost(model.state_space, model.n, fn).derivatives(X[:1], U)
    assert relative_error(running.l_x, exact[:1]) <= 1e-9
    assert np.abs(running.l_u).max() <= 1e-9 and np.abs(running.l_uu).max() <= 1e-6
    assert relative_error(running.l_xx, plain.l_xx[:1]) <= 1e-6


def test_checker_passes_the_gradient_and_names_what_it_skips(reach, rng):
    """check_derivatives checks the gradient the user gives against differences of the function, lists the
    blocks FunctionCost differences itself or that are Gauss–Newton, and flags a wrong factor in the gradient."""
    model = reach.model
    space = model.state_space
    fn, gradient, gauss_newton = hinge(model, 3)
    X = knots(reach, rng, 2)
    report = check_derivatives(FunctionCost(space, 0, fn, gradient), X)
    assert report.ok and report["l_x"].relative_error <= 1e-8 and set(report.skipped) == {"l_xx"}
    report = check_derivatives(FunctionCost(space, 0, fn), X)
    assert report.ok and [b.name for b in report.blocks] == ["l"] and set(report.skipped) == {"l_x", "l_xx"}
    approximate = FunctionCost(space, 0, fn, gradient, gauss_newton)
    assert not check_derivatives(approximate, X).ok  # a Gauss–Newton Hessian is not the second derivative...
    approximate.exact_hessian = False                # ...and the cost says so: the checker leaves it out
    report = check_derivatives(approximate, X)
    assert report.ok and "Gauss-Newton" in report.skipped["l_xx"]

    def wrong_gradient(x, u):  # 2 r² instead of 3 r²
        l_x, l_u = gradient(x, u)
        return 2.0 / 3.0 * l_x, l_u

    report = check_derivatives(FunctionCost(space, 0, fn, wrong_gradient), X)
    assert not report.ok and not report["l_x"].ok and "WRONG" in str(report)


@pytest.mark.parametrize("low", [1.0, 0.5])
def test_squared_hinge_equals_the_builtin_residual_cost(reach, rng, low):
    """The squared hinge with its gradient and Gauss–Newton Hessian is, block for block, the built-in
    ``ResidualCost(FrameTranslationResidual, QuadraticBarrier)`` (whose Hessian is Gauss–Newton): active with the
    hand below ``low`` = 1 m, zero above ``low`` = 0.5 m; on terminal and running knots."""
    model = reach.model
    fn, gradient, gauss_newton = hinge(model, 2, low)
    X = knots(reach, rng, 3)
    for nu in (0, model.n):
        U = rng.standard_normal((len(X), nu)) if nu else None
        mine = FunctionCost(model.state_space, nu, lambda x, u: 0.5 * fn(x, u),
                            lambda x, u: tuple(0.5 * g for g in gradient(x, u)),
                            lambda x, u: tuple(0.5 * h for h in gauss_newton(x, u))).derivatives(X, U)
        builtin = ResidualCost(FrameTranslationResidual(model, HAND, [0.0, 0.0, low], nu=nu),
                               QuadraticBarrier([-np.inf, -np.inf, 0.0], [np.inf] * 3)).derivatives(X, U)
        for block in ("l", "l_x", "l_u", "l_xx", "l_xu", "l_uu"):
            a, b = getattr(mine, block), getattr(builtin, block)
            assert a.shape == b.shape and (a.size == 0 or relative_error(a, b) <= 1e-12), (nu, block)
        assert (mine.l > 0).all() if low == 1.0 else not mine.l.any()


def test_a_function_term_in_a_ready_problem(reach):
    """Added to the running sum (shared by every knot) and to the terminal sum of a ready problem, a function term
    adds its weighted value and derivatives at every knot; removed, the problem is as before."""
    model, problem = reach.model, reach.problem
    fn, gradient, gauss_newton = hinge(model, 3)
    X, U = problem.constant_trajectory(), reach.us0
    before, d_before = problem.cost(X, U), problem.derivatives(X, U)
    before_lx = d_before.running.l_x.copy(), d_before.terminal.l_x.copy()
    running = problem.running[0].cost
    running.add("hand", FunctionCost(model.state_space, model.n, fn, gradient, gauss_newton), 2.0)
    problem.terminal.add("hand", FunctionCost(model.state_space, 0, fn, gradient), 5.0)
    try:
        l0, g0 = fn(X[0], U[0]), gradient(X[0], U[0])[0]  # X holds x0 at every knot
        assert problem.cost(X, U) == pytest.approx(before + (2.0 * problem.T + 5.0) * l0, rel=1e-12)
        d = problem.derivatives(X, U)
        assert relative_error(d.running.l_x - before_lx[0], np.tile(2.0 * g0, (problem.T, 1))) <= 1e-12
        assert relative_error(d.terminal.l_x - before_lx[1], 5.0 * g0[None]) <= 1e-12
    finally:
        running.remove("hand")
        problem.terminal.remove("hand")
    assert problem.cost(X, U) == before
