"""Discrete-time dynamics on the state group (semi-implicit Euler, commutator-free RK4) and their exact Jacobians."""

import os
import subprocess
import sys

import numpy as np
import pinocchio as pin
import pytest
from scipy.integrate import solve_ivp

import lietraj
from conftest import relative_error
from lietraj.dynamics import se3
from lietraj.dynamics.algorithms.aba import aba
from lietraj.dynamics.model.builder import ModelBuilder, random_tree
from lietraj.dynamics.lie.finite_differences import numerical_jacobian
from lietraj.dynamics.model.pinocchio_interop import to_pinocchio
from lietraj.dynamics.lie.se3 import _exp_blocks_batch as _se3_blocks_batch
from lietraj.dynamics.lie.state import State, StateSpace, Trajectory
from lietraj.optimal_control.dynamics.discrete_dynamics import (
    DiscreteDerivatives,
    DiscreteDynamics,
    RobotDynamics,
)
from lietraj.optimal_control.dynamics.euler import EulerStructure
from pin_oracle import pin_model, pin_model_from
from test_rnea_derivatives import pitched

DT = 0.01


def generalized(model, u):
    return np.concatenate([np.zeros(6), u]) if model.floating_base else u


def rigid_body(gravity=(0.0, 0.0, -9.81)):
    """One free-floating body with an asymmetric inertia and an offset centre of mass."""
    b = ModelBuilder("body", floating_base=True, base_mass=2.0, base_com=(0.1, -0.05, 0.2),
                     base_inertia=np.diag([0.1, 0.2, 0.35]), gravity=gravity)
    return b.build()


STATES = {
    "talos": lambda model, rng: model.state_space.random(rng, scale=0.5),
    "solo12 pitched +90": lambda model, rng: pitched(model, model.state_space.random(rng, scale=0.5), np.pi / 2),
    "solo12 pitched -90": lambda model, rng: pitched(model, model.state_space.random(rng, scale=0.5), -np.pi / 2),
    "ur5": lambda model, rng: model.state_space.random(rng),
    "panda": lambda model, rng: model.state_space.random(rng),
}


def test_se3_blocks_match_se3(rng):
    """The compiled exp, Ad_{exp(-xi)} and Jr(xi) equal se3's, on both sides of the series threshold |w| = 0.5."""
    XI = np.concatenate([rng.normal(size=(4, 6)) * 2.0, rng.normal(size=(4, 6)) * 0.1, 1e-9 * rng.normal(size=(2, 6)),
                         [[1.0, -2.0, 0.5, 0.0, 3.0, 0.0], np.zeros(6)]])
    N = len(XI)
    E, PHI, K = np.empty((N, 4, 4)), np.empty((N, 6, 6)), np.empty((N, 6, 6))
    _se3_blocks_batch(XI, E, PHI, K, True)
    for k in range(N):
        assert relative_error(E[k], se3.exp(XI[k])) < 1e-14
        assert relative_error(PHI[k], se3.Ad(se3.exp(-XI[k]))) < 1e-14
        assert relative_error(K[k], se3.right_jacobian(XI[k])) < 1e-14


@pytest.mark.parametrize("integrator", ["euler", "rk4"])
@pytest.mark.parametrize("case", list(STATES))
def test_jacobians_match_geometric_finite_differences(case, integrator, rng):
    """F_x, F_u of the discrete map (not A dt) against central differences on the group, the output measured with ⊖."""
    model = lietraj.load_robot(case.split()[0])
    dyn = RobotDynamics(model, DT, integrator)
    x, u = STATES[case](model, rng), rng.normal(size=model.n)
    d = dyn.derivatives(x, u)
    J_x, J_u = numerical_jacobian(lambda y, w: dyn.step(y, w), x, u)
    assert d.F_x.shape == (2 * model.nv, 2 * model.nv) and d.F_u.shape == (2 * model.nv, model.n)
    assert relative_error(d.F_x, J_x) < 1e-6
    assert relative_error(d.F_u, J_u) < 1e-6


def test_jacobians_with_external_wrenches_and_large_steps(rng):
    """Constant body-frame wrenches, and dt large enough that the SE(3) blocks are far from the identity."""
    model = lietraj.load_robot("solo12")
    fext = rng.normal(size=(model.nb, 6))
    for integrator in ("euler", "rk4"):
        dyn = RobotDynamics(model, 0.05, integrator, fext=fext)
        x, u = model.state_space.random(rng, scale=0.5), rng.normal(size=model.n)
        x.v[3:6] = [3.0, -2.0, 4.0]  # |dt nu+| ~ 0.27 rad: a visibly non-trivial Ad and Jr
        F_x, F_u = dyn.derivatives(x, u)
        J_x, J_u = numerical_jacobian(lambda y, w: dyn.step(y, w), x, u)
        assert relative_error(F_x, J_x) < 1e-6
        assert relative_error(F_u, J_u) < 1e-6
    a = aba(model, x, generalized(model, u), fext)
    assert relative_error(RobotDynamics(model, DT, fext=fext).step(x, u).v, x.v + DT * a) < 1e-14


@pytest.mark.parametrize("name", ["talos", "solo12", "ur5", "panda", "rigid body"])
def test_euler_step_matches_pinocchio(name, rng):
    """Crocoddyl's Euler step: a = pin.aba, v+ = v + dt a, q+ = pin.integrate(q, dt v+)."""
    if name == "rigid body":
        model = rigid_body(gravity=(0.0, 0.0, 0.0))
        pm = pin_model_from(model)
    else:
        model, pm = lietraj.load_robot(name), pin_model(name)
    data = pm.createData()
    dyn = RobotDynamics(model, DT)
    for _ in range(3):
        x, u = model.state_space.random(rng, scale=0.5), rng.normal(size=model.n)
        x.v[:] *= 4.0  # large enough rotations that H exp(dt nu+) differs from any first-order update
        q, v = to_pinocchio(model, x)
        v_next = v + DT * np.array(pin.aba(pm, data, q, v, generalized(model, u)))
        q_next = pin.integrate(pm, q, DT * v_next)
        y = dyn.step(x, u)
        assert np.abs(pin.difference(pm, q_next, to_pinocchio(model, y)[0])).max() < 1e-12
        assert relative_error(y.v, v_next) < 1e-12


@pytest.mark.parametrize("name", ["talos", "solo12", "ur5"])
def test_euler_jacobians_match_pinocchio(name, rng):
    """Crocoddyl's Euler calcDiff from Pinocchio's pieces: computeABADerivatives for da, dIntegrate for q+."""
    model, pm = lietraj.load_robot(name), pin_model(name)
    data, nv, dyn = pm.createData(), model.nv, RobotDynamics(model, DT)
    x, u = model.state_space.random(rng, scale=0.5), rng.normal(size=model.n)
    x.v[:] *= 4.0
    q, v = to_pinocchio(model, x)
    pin.computeABADerivatives(pm, data, q, v, generalized(model, u))
    dv_dx = np.hstack([DT * data.ddq_dq, np.eye(nv) + DT * data.ddq_dv])
    dv_du = DT * np.array(data.Minv)[:, nv - model.n:]
    dq = DT * (v + DT * np.array(data.ddq))
    J_q, J_dq = pin.dIntegrate(pm, q, dq, pin.ARG0), pin.dIntegrate(pm, q, dq, pin.ARG1)
    F_x = np.vstack([np.hstack([J_q, np.zeros((nv, nv))]) + DT * J_dq @ dv_dx, dv_dx])
    F_u = np.vstack([DT * J_dq @ dv_du, dv_du])
    d = dyn.derivatives(x, u)
    assert relative_error(d.F_x, F_x) < 1e-9
    assert relative_error(d.F_u, F_u) < 1e-9


def test_euler_step_equals_the_design_formulas(rng):
    model = lietraj.load_robot("solo12")
    x, u = model.state_space.random(rng), rng.normal(size=model.n)
    a = aba(model, x, generalized(model, u))
    nu_next, sdot_next = x.v[:6] + DT * a[:6], x.v[6:] + DT * a[6:]
    y = RobotDynamics(model, DT, "euler").step(x, u)
    assert relative_error(y.H, x.H @ se3.exp(DT * nu_next)) < 1e-14
    assert relative_error(y.s, x.s + DT * sdot_next) < 1e-14
    assert relative_error(y.v, np.concatenate([nu_next, sdot_next])) < 1e-14


def exact_flow(model, x, u, T):
    """The continuous flow H' = H hat(nu), s' = sdot, v' = FD(x, u) by an adaptive integrator on (R, p, s, v)."""
    n, nv = model.n, model.nv

    def rhs(_, y):
        R, p, s, v = y[:9].reshape(3, 3), y[9:12], y[12:12 + n], y[12 + n:]
        H = np.eye(4)
        U, _, Vt = np.linalg.svd(R)  # the solver's trial stages drift off SO(3) by its tolerance
        H[:3, :3], H[:3, 3] = U @ Vt, p
        a = aba(model, State(H, s, v), generalized(model, u))
        return np.concatenate([(R @ se3.hat(v[:6])[:3, :3]).ravel(), R @ v[:3], v[6:], a])

    y0 = np.concatenate([x.H[:3, :3].ravel(), x.H[:3, 3], x.s, x.v])
    y = solve_ivp(rhs, (0.0, T), y0, method="DOP853", rtol=1e-13, atol=1e-13).y[:, -1]
    H = np.eye(4)
    H[:3, :3], H[:3, 3] = y[:9].reshape(3, 3), y[9:12]
    U, _, Vt = np.linalg.svd(H[:3, :3])
    H[:3, :3] = U @ Vt
    return State(H, y[12:12 + n], y[12 + n:12 + n + nv])


@pytest.mark.parametrize("model_name, h", [("rigid body", 0.1), ("random tree", 0.02)])
def test_rk4_is_fourth_order_and_euler_first_order(model_name, h, rng):
    """One-step error against an independent adaptive solution of the group ODE: halving dt divides it by ~32 for
    RK4 (local error O(dt^5)) and by ~4 for Euler (O(dt^2))."""
    model = rigid_body() if model_name == "rigid body" else random_tree(5, 3, floating_base=True)
    space = model.state_space
    x, u = space.random(rng, scale=1.0), rng.normal(size=model.n)
    ratios = {}
    for integrator in ("rk4", "euler"):
        errors = []
        for dt in (h, h / 2):
            y = RobotDynamics(model, dt, integrator).step(x, u)
            errors.append(np.abs(space.difference(exact_flow(model, x, u, dt), y)).max())
        ratios[integrator] = errors[0] / errors[1]
    assert 26 < ratios["rk4"] < 40, ratios
    assert 3.5 < ratios["euler"] < 4.5, ratios


@pytest.mark.parametrize("integrator", ["euler", "rk4"])
@pytest.mark.parametrize("name", ["talos", "ur5"])
def test_batched_equals_per_state(name, integrator, rng):
    model = lietraj.load_robot(name)
    dyn = RobotDynamics(model, DT, integrator)
    X = model.state_space.random_trajectory(4, rng, scale=0.5)
    U = rng.normal(size=(4, model.n))
    Y, d = dyn.step_trajectory(X, U), dyn.derivatives(X, U)
    assert d.F_x.shape == (4, 2 * model.nv, 2 * model.nv) and d.F_u.shape == (4, 2 * model.nv, model.n)
    for k in range(4):
        y, dk = dyn.step(X[k], U[k]), dyn.derivatives(X[k], U[k])
        for a, b in ((Y[k].s, y.s), (Y[k].v, y.v), (d.F_x[k], dk.F_x), (d.F_u[k], dk.F_u)):
            np.testing.assert_allclose(a, b, rtol=0, atol=1e-13 * max(np.abs(b).max(), 1.0))
        if model.floating_base:
            np.testing.assert_allclose(Y[k].H, y.H, rtol=0, atol=1e-14)
    out = DiscreteDerivatives(np.zeros_like(d.F_x), np.zeros_like(d.F_u))
    assert dyn.derivatives(X, U, out=out) is out
    np.testing.assert_array_equal(out.F_x, d.F_x)
    single = DiscreteDerivatives(np.zeros_like(d.F_x[0]), np.zeros_like(d.F_u[0]))
    assert dyn.derivatives(X[1], U[1], out=single) is single
    np.testing.assert_array_equal(single.F_u, d.F_u[1])


@pytest.mark.parametrize("name", ["solo12", "ur5"])
def test_euler_structure_rebuilds_the_jacobians(name, rng):
    """What the Euler step records for the Riccati sweep (``EulerStructure``) rebuilds its F_x, F_u from their
    velocity rows; RK4's Jacobians are marked as not so built."""
    model = lietraj.load_robot(name)
    nv, nh, N = model.nv, 6 if model.floating_base else 0, 4
    X = model.state_space.random_trajectory(N, rng, scale=0.5)
    U = rng.normal(size=(N, model.n))
    out = DiscreteDerivatives(np.empty((N, 2 * nv, 2 * nv)), np.empty((N, 2 * nv, model.n)), EulerStructure.empty(N, nh))
    d = RobotDynamics(model, DT, "euler").derivatives(X, U, out=out)
    S = d.structure
    assert np.all(S.dt == DT)
    Phi, J = np.tile(np.eye(nv), (N, 1, 1)), np.tile(np.eye(nv), (N, 1, 1))
    Phi[:, :nh, :nh], J[:, :nh, :nh] = S.Phi, S.Jr
    G, B = d.F_x[:, nv:], d.F_u[:, nv:]
    top = DT * J @ G
    top[:, :, :nv] += Phi
    assert relative_error(d.F_x[:, :nv], top) < 1e-14 and relative_error(d.F_u[:, :nv], DT * J @ B) < 1e-14
    RobotDynamics(model, DT, "rk4").derivatives(X, U, out=out)
    assert np.all(np.isnan(out.structure.dt))


def test_rollout_chains_steps(rng):
    model = lietraj.load_robot("ur5")
    dyn = RobotDynamics(model, DT, "rk4")
    x0, U = model.state_space.random(rng), rng.normal(size=(3, model.n))
    X = dyn.rollout(x0, U)
    assert len(X) == 4
    np.testing.assert_array_equal(X[3].v, dyn.step(dyn.step(dyn.step(x0, U[0]), U[1]), U[2]).v)



@pytest.mark.parametrize("name", ["solo12", "ur5"])
def test_the_compiled_rollout_and_the_knot_wise_euler_step_give_the_same_states_to_the_bit(rng, name):
    """The gaps a problem measures (``step_trajectory``) and those the forward pass closes are the same numbers."""
    model = lietraj.load_robot(name)
    dyn = RobotDynamics(model, DT)
    x0, U = model.state_space.random(rng), 0.3 * rng.normal(size=(5, model.n))
    X = dyn.rollout(x0, U)
    stepped = dyn.step_trajectory(X[:5], U)
    for k in range(5):
        np.testing.assert_array_equal(stepped.v[k], X.v[k + 1])
        np.testing.assert_array_equal(stepped.s[k], X.s[k + 1])
        if X.H is not None:
            np.testing.assert_array_equal(stepped.H[k], X.H[k + 1])


class PointMass(DiscreteDynamics):
    """A user plug-in: a 1-D point mass (s, sdot) pushed by a force, exact zero-order-hold discretization."""

    def __init__(self, dt):
        self.state_space, self.nu, self.dt = StateSpace(1, floating_base=False), 1, dt

    def step_trajectory(self, X, U):
        U = np.asarray(U)
        return Trajectory(None, X.s + self.dt * X.v + 0.5 * self.dt ** 2 * U, X.v + self.dt * U)

    def trajectory_derivatives(self, X, U, out=None):
        N, dt = len(X), self.dt
        return DiscreteDerivatives(np.tile([[1.0, dt], [0.0, 1.0]], (N, 1, 1)), np.tile([[0.5 * dt ** 2], [dt]], (N, 1, 1)))


def test_plugin_interface_gives_single_state_methods_and_rollout():
    dyn = PointMass(0.1)
    x = State(None, np.array([1.0]), np.array([2.0]))
    F_x, F_u = dyn.derivatives(x, [3.0])
    J_x, J_u = numerical_jacobian(lambda y, w: dyn.step(y, w), x, np.array([3.0]))
    assert relative_error(F_x, J_x) < 1e-9 and relative_error(F_u, J_u) < 1e-9
    X = dyn.rollout(x, np.ones((10, 1)))
    assert relative_error(X[10].s, [1.0 + 2.0 + 0.5]) < 1e-12


def test_bad_inputs_raise(rng):
    model = lietraj.load_robot("solo12")
    for dt in (0.0, -0.01, np.nan, np.inf, "0.01"):
        with pytest.raises(ValueError, match="dt"):
            RobotDynamics(model, dt)
    with pytest.raises(ValueError, match="integrator"):
        RobotDynamics(model, DT, "rk45")
    with pytest.raises(ValueError, match="fext"):
        RobotDynamics(model, DT, fext=np.zeros((3, 6)))
    dyn = RobotDynamics(model, DT, "rk4")
    x, u = model.state_space.random(rng), rng.normal(size=model.n)
    for bad_u in (np.zeros(model.n + 1), np.zeros(model.nv), np.full(model.n, np.nan)):
        for call in (dyn.step, dyn.derivatives):
            with pytest.raises(ValueError, match="u "):
                call(x, bad_u)
    bad_x = x.copy()
    bad_x.v[2] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        dyn.step(bad_x, u)
    X = model.state_space.random_trajectory(3, rng)
    with pytest.raises(ValueError, match="u must have shape"):
        dyn.derivatives(X, np.zeros((2, model.n)))
    with pytest.raises(ValueError, match="diverged"):
        RobotDynamics(model, 1e10).step(x, np.full(model.n, 1e300))


def test_kernels_run_without_jit():
    """NUMBA_DISABLE_JIT=1 (pure Python): the Euler and SE(3) kernels give the compiled result."""
    code = ("import numpy as np, lietraj; from lietraj.optimal_control.dynamics.discrete_dynamics import RobotDynamics;"
            "m = lietraj.load_robot('solo12'); rng = np.random.default_rng(0); x = m.state_space.random(rng);"
            "u = rng.normal(size=m.n); d = RobotDynamics(m, 0.01).derivatives(x, u);"
            "print(repr(np.concatenate([d.F_x, d.F_u], axis=1).tolist()))")
    env = dict(os.environ, NUMBA_DISABLE_JIT="1")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
    model = lietraj.load_robot("solo12")
    rng = np.random.default_rng(0)
    x = model.state_space.random(rng)
    d = RobotDynamics(model, 0.01).derivatives(x, rng.normal(size=model.n))
    expected = np.concatenate([d.F_x, d.F_u], axis=1)
    np.testing.assert_allclose(eval(out), expected, rtol=0, atol=1e-12 * np.abs(expected).max())


@pytest.mark.parametrize("integrator", ["euler", "rk4"])
@pytest.mark.parametrize("name", ["solo12", "ur5"])
def test_the_step_written_with_the_jacobians_is_the_step(name, integrator, rng):
    """``out.stepped``: the Euler step writes ``f(X[k], U[k])`` with its Jacobians, equal to the bit to
    ``step_trajectory`` (the same operations on the same accelerations); RK4 does not step with them and leaves it."""
    model = lietraj.load_robot(name)
    dyn = RobotDynamics(model, DT, integrator)
    X = model.state_space.random_trajectory(5, rng, 0.5)
    U = rng.normal(size=(5, model.n))
    out = DiscreteDerivatives(np.empty((5, 2 * model.nv, 2 * model.nv)), np.empty((5, 2 * model.nv, model.n)),
                              stepped=model.state_space.trajectory(5))
    dyn.trajectory_derivatives(X, U, out=out)
    expected = dyn.step_trajectory(X, U) if integrator == "euler" else model.state_space.trajectory(5)
    assert dyn.steps_with_derivatives == (integrator == "euler")
    for a, b in ((out.stepped.s, expected.s), (out.stepped.v, expected.v), (out.stepped.H, expected.H)):
        assert b is None or np.array_equal(a, b)
    assert np.array_equal(out.F_x, dyn.trajectory_derivatives(X, U).F_x)


def test_a_dynamics_with_its_own_step_does_not_step_with_the_jacobians():
    """A subclass whose ``step_trajectory`` is not the integrator's is stepped by it, not by the Jacobians' pass."""

    class Damped(RobotDynamics):
        def step_trajectory(self, X, U):
            return super().step_trajectory(X, 0.5 * U)

    model = lietraj.load_robot("ur5")
    assert RobotDynamics(model, DT).steps_with_derivatives and not Damped(model, DT).steps_with_derivatives
