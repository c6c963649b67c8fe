"""The second-order term of the Euler step on the group against second differences of the step itself, its
trajectory form, and the input checks of the second-order API (shared by both integrators)."""

import numpy as np
import pytest

import lietraj
from conftest import relative_error
from lietraj.dynamics import se3
from lietraj.dynamics.model.builder import chain
from lietraj.dynamics.lie.state import Trajectory
from lietraj.optimal_control import RobotDynamics
from lietraj.optimal_control.dynamics.discrete_dynamics import DiscreteDynamics
from lietraj.dynamics.lie.se3 import right_jacobian_derivative_contraction as _right_jacobian_derivative_contraction
from lietraj.optimal_control.dynamics.euler_second_order import euler_hessian_contraction
from test_rnea_derivatives import pitched

DT = 0.02
MODELS = {"talos": lambda: lietraj.load_robot("talos"), "solo12": lambda: lietraj.load_robot("solo12"),
          "ur5": lambda: lietraj.load_robot("ur5"), "panda": lambda: lietraj.load_robot("panda"),
          "chain": lambda: chain(5, "RRP"), "floating chain": lambda: chain(4, "RP", floating_base=True)}
CASES = ["talos", "solo12 pitched +90", "solo12 pitched -90", "ur5", "panda", "chain", "floating chain"]


def case(name, rng):
    """Model, state, torques and covector of a test case; a floating base turns fast, so that the curvature of exp
    on SE(3) matters (leaving out the compose terms then costs 1e-4 to 1e-2 relative)."""
    words = name.split()
    model = MODELS[" ".join(words[:2]) if words[0] == "floating" else words[0]]()
    x = model.state_space.random(rng, scale=0.5)
    if "pitched" in words:
        x = pitched(model, x, float(words[2]) * np.pi / 180)
    if model.floating_base:
        x.v[:6] *= 6.0
    return model, x, rng.normal(size=model.n), rng.normal(size=model.state_space.ndx)


def repeated(x, K):
    return Trajectory(None if x.H is None else np.repeat(x.H[None], K, 0), np.repeat(x.s[None], K, 0),
                      np.repeat(x.v[None], K, 0))


def numerical_hessian(dyn, x, u, lam, h=1e-4):
    """Central second differences of lam^T log(x'^-1 f(x exp dx, u + du)) in d = (dx, du), all steps in one call."""
    space = dyn.state_space
    ndx, m = space.ndx, space.ndx + u.shape[0]
    E = np.eye(m) * h
    pairs = [(a, b) for a in range(m) for b in range(a, m)]
    D = np.array([d for a, b in pairs for d in (E[a] + E[b], E[a] - E[b], E[b] - E[a], -E[a] - E[b])])
    K = len(D)
    Y = dyn.step_trajectory(space.integrate_trajectory(repeated(x, K), D[:, :ndx]), u + D[:, ndx:])
    g = (space.difference_trajectory(repeated(dyn.step(x, u), K), Y) @ lam).reshape(-1, 4)
    H = np.empty((m, m))
    for (a, b), (pp, pm, mp, mm) in zip(pairs, g):
        H[a, b] = H[b, a] = (pp - pm - mp + mm) / (4 * h * h)
    return H


def check_against_second_differences(integrator, name, rng):
    model, x, u, lam = case(name, rng)
    dyn = RobotDynamics(model, DT, integrator)
    H = dyn.hessian_contraction(x, u, lam)
    ndx = model.state_space.ndx
    assert H.xx.shape == (ndx, ndx) and H.xu.shape == (ndx, model.n) and H.uu.shape == (model.n, model.n)
    np.testing.assert_array_equal(H.xx, H.xx.T)
    np.testing.assert_array_equal(H.uu, H.uu.T)
    ref = numerical_hessian(dyn, x, u, lam)
    assert relative_error(np.block([[H.xx, H.xu], [H.xu.T, H.uu]]), ref) < 1e-5
    assert relative_error(H.xx, ref[:ndx, :ndx]) < 1e-5


def check_trajectory_equals_knots(integrator, name, rng, N=5):
    """N knots in one call (crossing the chunks of the RK4 chain rule on talos) equal N single-state calls."""
    model = MODELS[name]()
    dyn = RobotDynamics(model, DT, integrator)
    X = model.state_space.random_trajectory(N, rng, scale=0.5)
    U, LAM = rng.normal(size=(N, model.n)), rng.normal(size=(N, model.state_space.ndx))
    H = dyn.trajectory_hessian_contraction(X, U, LAM)
    assert H.xx.shape == (N, 2 * model.nv, 2 * model.nv) and H.uu.shape == (N, model.n, model.n)
    for k in range(N):
        Hk = dyn.hessian_contraction(X[k], U[k], LAM[k])
        for block, ref in ((H.xx[k], Hk.xx), (H.xu[k], Hk.xu), (H.uu[k], Hk.uu)):
            assert relative_error(block, ref) < 1e-13


@pytest.mark.parametrize("name", CASES)
def test_matches_second_differences_of_the_step(name, rng):
    check_against_second_differences("euler", name, rng)


@pytest.mark.parametrize("name", ["talos", "ur5"])
def test_trajectory_equals_single_states(name, rng):
    check_trajectory_equals_knots("euler", name, rng)


def test_standalone_function_equals_robot_dynamics(rng):
    model, x, u, lam = case("solo12", rng)
    H, ref = euler_hessian_contraction(model, DT, x, u, lam), RobotDynamics(model, DT).hessian_contraction(x, u, lam)
    assert relative_error(H.xx, ref.xx) < 1e-13 and relative_error(H.xu, ref.xu) < 1e-13
    with pytest.raises(ValueError, match="lam"):
        euler_hessian_contraction(model, DT, x, u, lam[:3])


def test_right_jacobian_derivative_series(rng):
    """K[i, j] = lam^T (dJr(c)/dc_i) e_j, summed from the series, against central differences of se3.right_jacobian;
    one call for several (c, lam) equals the calls one by one."""
    C, LAM, h = np.concatenate([s * rng.normal(size=(2, 6)) for s in (1e-3, 0.5, 2.5)]), rng.normal(size=(6, 6)), 1e-6
    K = _right_jacobian_derivative_contraction(C, LAM)
    for c, lam, Kc in zip(C, LAM, K):
        ref = np.array([lam @ (se3.right_jacobian(c + h * e) - se3.right_jacobian(c - h * e)) / (2 * h)
                        for e in np.eye(6)])
        assert relative_error(Kc, ref) < 1e-8
        assert relative_error(_right_jacobian_derivative_contraction(c, lam), Kc) < 1e-13


@pytest.mark.parametrize("integrator", ["euler", "rk4"])
def test_bad_inputs_raise(integrator, rng):
    model = lietraj.load_robot("solo12")
    dyn, N, ndx = RobotDynamics(model, DT, integrator), 3, model.state_space.ndx
    X = model.state_space.random_trajectory(N, rng)
    U, LAM = rng.normal(size=(N, model.n)), rng.normal(size=(N, ndx))
    with pytest.raises(ValueError, match="lam"):
        dyn.trajectory_hessian_contraction(X, U, LAM[:, 1:])
    with pytest.raises(ValueError, match="lam"):
        dyn.trajectory_hessian_contraction(X, U, LAM[1:])
    with pytest.raises(ValueError, match="lam"):
        dyn.hessian_contraction(X[0], U[0], np.where(np.arange(ndx) == 4, np.nan, LAM[0]))
    with pytest.raises(ValueError, match="u "):
        dyn.trajectory_hessian_contraction(X, U[:, 1:], LAM)
    with pytest.raises(ValueError, match="NaN"):
        dyn.trajectory_hessian_contraction(X, np.where(U > 1.0, np.inf, U), LAM)
    X.v[1, 3] = np.nan
    with pytest.raises(ValueError):
        dyn.trajectory_hessian_contraction(X, U, LAM)
    with pytest.raises(TypeError):
        dyn.trajectory_hessian_contraction(X[0], U, LAM)
    with pytest.raises(NotImplementedError, match="external wrenches"):
        RobotDynamics(model, DT, integrator, fext=np.zeros((model.nb, 6))).hessian_contraction(X[0], U[0], LAM[0])


def test_dynamics_without_second_order_term_point_to_ilqr(rng):
    class Linear(DiscreteDynamics):
        def __init__(self):
            self.state_space, self.nu, self.dt = lietraj.StateSpace(1, floating_base=False), 1, 0.1

        def step_trajectory(self, X, U):
            return Trajectory(None, X.s + self.dt * X.v, X.v + self.dt * U)

        def trajectory_derivatives(self, X, U, out=None):
            raise AssertionError("not needed")

    dyn = Linear()
    x = dyn.state_space.random(rng)
    with pytest.raises(NotImplementedError, match="Linear.*iLQR"):
        dyn.hessian_contraction(x, np.zeros(1), np.zeros(2))
    with pytest.raises(NotImplementedError, match="iLQR"):
        dyn.trajectory_hessian_contraction(Trajectory(None, x.s[None], x.v[None]), np.zeros((1, 1)), np.zeros((1, 2)))


@pytest.mark.parametrize("integrator", ["euler", "rk4"])
def test_blocks_written_into_out(integrator, rng):
    """``out`` receives the same blocks a fresh call returns (a problem passes its own rows, and the Euler step writes
    them directly); blocks of other shapes are refused."""
    model = lietraj.load_robot("solo12")
    dyn, N, ndx, nu = RobotDynamics(model, DT, integrator), 4, model.state_space.ndx, model.n
    X = model.state_space.random_trajectory(N, rng)
    U, LAM = rng.normal(size=(N, nu)), rng.normal(size=(N, ndx))
    fresh = dyn.trajectory_hessian_contraction(X, U, LAM)
    out = type(fresh)(np.full((N, ndx, ndx), np.nan), np.full((N, ndx, nu), np.nan), np.full((N, nu, nu), np.nan))
    assert dyn.trajectory_hessian_contraction(X, U, LAM, out=out) is out
    for a, b in ((out.xx, fresh.xx), (out.xu, fresh.xu), (out.uu, fresh.uu)):
        np.testing.assert_array_equal(a, b)
    assert np.array_equal(out.xx, np.swapaxes(out.xx, 1, 2)) and np.array_equal(out.uu, np.swapaxes(out.uu, 1, 2))
    with pytest.raises(ValueError, match="out must hold"):
        dyn.trajectory_hessian_contraction(X, U, LAM, out=type(fresh)(out.xx[1:], out.xu[1:], out.uu[1:]))


def test_finite_check_tells_overflowing_sums_from_non_finite_entries():
    """The result check sums each block first: a sum that overflows from finite entries is no error, a NaN is."""
    dyn = RobotDynamics(lietraj.load_robot("ur5"), DT)
    dyn._finite([np.full((3, 4), 1e308), -np.full(5, 1e308)], "hessian_contraction")
    with pytest.raises(ValueError, match="non-finite"):
        dyn._finite([np.full((3, 4), 1e308), np.array([1.0, np.nan])], "hessian_contraction")
    with pytest.raises(ValueError, match="non-finite"):
        dyn._finite([np.array([np.inf, -np.inf])], "hessian_contraction")
