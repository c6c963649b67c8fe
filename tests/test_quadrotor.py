"""The quadrotor example (examples/quadrotor.py): plug-in dynamics on SE(3) x R^6 against Pinocchio's free-flyer
dynamics and integrator, its derivatives against finite differences on the group, and iLQR / DDP / FDDP on its
fly-to-pose problem."""

import importlib.util
from pathlib import Path

import numpy as np
import pinocchio as pin
import pytest

from conftest import relative_error
from lietraj.dynamics import se3
from lietraj.dynamics.lie.finite_differences import numerical_jacobian
from lietraj.dynamics.lie.state import State, Trajectory
from lietraj.optimal_control.dynamics.discrete_dynamics import DiscreteDerivatives

_spec = importlib.util.spec_from_file_location("quadrotor_example",
                                               Path(__file__).resolve().parents[1] / "examples" / "quadrotor.py")
quadrotor = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(quadrotor)
Quadrotor = quadrotor.Quadrotor

# A full inertia matrix (products of inertia), so that no term hides behind a diagonal.
INERTIA = np.array([[0.012, 0.001, -0.002], [0.001, 0.015, 0.0015], [-0.002, 0.0015, 0.022]])


def quad(dt=0.05):
    return Quadrotor(mass=1.3, inertia=INERTIA, arm_length=0.22, yaw_coefficient=0.016, dt=dt)


def states(rng, N):
    """Random knots: uniform rotations, plus upside down and a rotation by almost pi; fast turns (|ω| ~ 5 rad/s),
    thrusts around hover."""
    X = quad().state_space.random_trajectory(N, rng)
    X.H[0, :3, :3] = se3.exp(np.array([0, 0, 0, np.pi, 0, 0]))[:3, :3]
    X.H[1, :3, :3] = se3.exp(np.array([0, 0, 0, 0, 0.6, 0.8]) * (np.pi - 1e-3))[:3, :3]
    X.v[:, 3:] *= 3.0
    return X, 3.2 + 2.0 * rng.normal(size=(N, 4))


def one(X, k):
    return State(X.H[k].copy(), X.s[k].copy(), X.v[k].copy())


# ---- the dynamics are the rigid-body equations and the Euler step on the group ---------------------------------

def pin_free_body(q: Quadrotor):
    model = pin.Model()
    joint = model.addJoint(0, pin.JointModelFreeFlyer(), pin.SE3.Identity(), "base")
    model.appendBodyToJoint(joint, pin.Inertia(q.mass, np.zeros(3), q.J), pin.SE3.Identity())
    return model, model.createData()


def test_step_matches_pinocchio_free_flyer(rng):
    """ν̇ = Pinocchio's ABA of a free body under the rotor wrench (in the body frame); the step = Pinocchio's
    integrate of dt ν⁺, all knots in one batched call."""
    q = quad()
    model, data = pin_free_body(q)
    X, U = states(rng, 8)
    A, Y = q.acceleration(X, U), q.step_trajectory(X, U)
    L, k = 0.22, 0.016
    for n in range(len(X)):
        u = U[n]
        wrench = np.array([0, 0, u.sum(), L * (u[1] - u[3]), L * (u[2] - u[0]), k * (u[0] - u[1] + u[2] - u[3])])
        fext = pin.StdVec_Force()
        fext.extend([pin.Force.Zero(), pin.Force(wrench)])
        H = X.H[n]
        qp = np.concatenate([H[:3, 3], pin.Quaternion(H[:3, :3]).coeffs()])
        a = np.array(pin.aba(model, data, qp, X.v[n], np.zeros(6), fext))
        assert relative_error(A[n], a) < 1e-12
        v_next = X.v[n] + q.dt * a
        q_next = pin.integrate(model, qp, q.dt * v_next)
        H_next = np.eye(4)
        H_next[:3, :3], H_next[:3, 3] = pin.Quaternion(q_next[3:]).toRotationMatrix(), q_next[:3]
        assert relative_error(Y.v[n], v_next) < 1e-12 and relative_error(Y.H[n], H_next) < 1e-12


# ---- derivatives --------------------------------------------------------------------------------------------

def test_jacobians_match_finite_differences(rng):
    """F_x, F_u of all knots from one call (into given arrays) equal geometric central differences of step."""
    q = quad()
    X, U = states(rng, 6)
    out = DiscreteDerivatives(np.full((6, 12, 12), np.nan), np.full((6, 12, 4), np.nan))
    assert q.trajectory_derivatives(X, U, out=out) is out
    worst = 0.0
    for n in range(len(X)):
        J_x, J_u = numerical_jacobian(lambda x, u: q.step(x, u), one(X, n), U[n])
        worst = max(worst, relative_error(out.F_x[n], J_x), relative_error(out.F_u[n], J_u))
        assert relative_error(out.F_x[n], J_x) < 1e-6 and relative_error(out.F_u[n], J_u) < 1e-6
    print(f"max relative error of F_x, F_u vs FD: {worst:.1e}")


def second_differences(q: Quadrotor, x: State, u: np.ndarray, lam: np.ndarray, h: float = 1e-4) -> np.ndarray:
    """Central second differences of λᵀ (f(x exp δx, u + δu) ⊖ f(x, u)) in δ = (δx, δu), all steps in one call."""
    space, m = q.state_space, 16
    E = np.eye(m) * h
    pairs = [(a, b) for a in range(m) for b in range(a, m)]
    D = np.array([d for a, b in pairs for d in (E[a] + E[b], E[a] - E[b], E[b] - E[a], -E[a] - E[b])])
    K = len(D)
    Xd = space.integrate_trajectory(Trajectory(np.repeat(x.H[None], K, 0), np.zeros((K, 0)), np.repeat(x.v[None], K, 0)),
                                    D[:, :12])
    Y = q.step_trajectory(Xd, u + D[:, 12:])
    y = q.step(x, u)
    g = (space.difference_trajectory(Trajectory(np.repeat(y.H[None], K, 0), np.zeros((K, 0)), np.repeat(y.v[None], K, 0)),
                                     Y) @ lam).reshape(-1, 4)
    H = np.empty((m, m))
    for (a, b), (pp, pm, mp, mm) in zip(pairs, g):
        H[a, b] = H[b, a] = (pp - pm - mp + mm) / (4 * h * h)
    return H


def test_hessian_contraction_matches_second_differences(rng):
    """The exact λᵀ ∂²f (gravity, Coriolis and gyroscopic terms plus the BCH terms of H exp(dt ν⁺)) of all knots
    from one call, relative to the size of the Hessian; dt = 0.1 so that the compose terms are large."""
    q = quad(dt=0.1)
    X, U = states(rng, 4)
    LAM = rng.normal(size=(4, 12))
    h = q.trajectory_hessian_contraction(X, U, LAM)
    worst = 0.0
    for n in range(len(X)):
        H = np.block([[h.xx[n], h.xu[n]], [h.xu[n].T, h.uu[n]]])
        np.testing.assert_array_equal(H, H.T)
        ref = second_differences(q, one(X, n), U[n], LAM[n])
        error = np.abs(H - ref).max() / np.abs(ref).max()
        worst = max(worst, error)
        assert error < 1e-5
    print(f"max error of the contraction vs second differences, relative to its size: {worst:.1e}")


def test_bad_inputs_raise_value_errors(rng):
    with pytest.raises(ValueError, match="inertia"):
        Quadrotor(inertia=np.diag([0.01, -0.01, 0.02]))
    with pytest.raises(ValueError, match="positive"):
        Quadrotor(dt=0.0)
    q, (X, U) = quad(), states(rng, 3)
    with pytest.raises(ValueError, match=r"shape \(3, 4\)"):
        q.step_trajectory(X, U[:, :3])
    with pytest.raises(ValueError, match="finite"):
        q.trajectory_derivatives(X, np.full((3, 4), np.nan))
    with pytest.raises(ValueError, match="LAM"):
        q.trajectory_hessian_contraction(X, U, np.zeros((3, 6)))


# ---- the solvers on the example's problem ---------------------------------------------------------------------

def test_ilqr_ddp_and_fddp_fly_to_the_target_pose():
    q = Quadrotor()
    H_goal = quadrotor.target_pose()
    problem = quadrotor.fly_to_pose(q, 30, H_goal)
    results = quadrotor.solve_all(problem, q)
    ilqr, ddp, fddp = results["iLQR"], results["DDP"], results["FDDP"]
    for r in results.values():
        assert r.status == "converged" and r.gap_norm == 0.0
        position, rotation = quadrotor.pose_error(r.xs.H[-1], H_goal)
        assert position < 0.01 and np.degrees(rotation) < 1.0
        assert np.all(r.us >= 0.0) and np.all(r.us <= 2.0 * q.hover_thrust)
        assert abs(r.cost - ddp.cost) < 1e-8 * ddp.cost
        assert np.abs(r.us - ddp.us).max() < 1e-3
    assert ddp.iterations <= ilqr.iterations
    assert fddp.history[0].gap_norm > 0.4  # it started infeasible: the rotors off, every knot at x0
    assert np.abs(problem.gaps(fddp.xs, fddp.us)).max() < 1e-12


def test_main_runs(capsys):
    results = quadrotor.main(["--quick"])
    table = capsys.readouterr().out
    for name in ("iLQR", "DDP", "FDDP"):
        assert results[name].converged and name in table
