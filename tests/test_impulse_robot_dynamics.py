"""The touchdown knot as discrete dynamics: exact Jacobians, the landing itself, and a flight-impact-stance solve.

Cases: Talos on both soles (6d) and solo12 on its four point feet (3d), LOCAL and LOCAL_WORLD_ALIGNED, with and
without restitution; the Jacobians are checked against geometric finite differences of the step, the step
against ``impulse_dynamics``, and the knot is used in a small ``Problem`` between a flight phase and a stance
phase of ``ContactRobotDynamics``.
"""

from __future__ import annotations

import numpy as np
import pytest

from conftest import relative_error
from lietraj.dynamics.contacts.contact_dynamics import Contact
from lietraj.dynamics.lie.finite_differences import numerical_jacobian
from lietraj.dynamics.contacts.impulse_dynamics import impulse_dynamics
from lietraj.dynamics.kinematics.kinematics import frame_placement, frame_velocity
from lietraj.dynamics.lie.state import State, Trajectory
from lietraj.optimal_control.dynamics.contact_robot_dynamics import ContactRobotDynamics
from lietraj.optimal_control.costs.costs import CostSum, control_regularization, state_regularization
from lietraj.optimal_control.dynamics.discrete_dynamics import DiscreteDerivatives, DiscreteDynamics
from lietraj.optimal_control.dynamics.impulse_robot_dynamics import ImpulseRobotDynamics
from lietraj.optimal_control.problem import ActionModel, Problem, knots
from lietraj.optimal_control.solvers.solvers import solve_fddp, solve_ilqr
from test_contact_dynamics import FEET, robot

FD_TOL = 1e-6


def case(name: str, seed: int, reference: str = "local", restitution: float = 0.0):
    """(dynamics, x, u): a random state and control, the impact on the feet."""
    model = robot(name)
    rng = np.random.default_rng(seed)
    x = model.state_space.random(rng, scale=0.5)
    frames, kind = FEET[name]
    return ImpulseRobotDynamics(model, [Contact(f, kind, reference) for f in frames], restitution), x, \
        rng.standard_normal(model.n)


def falling_solo12(height: float = 0.0) -> State:
    """solo12 at its standing posture, ``height`` above it, falling at 0.5 m/s with its joints moving."""
    model = robot("solo12")
    xr = model.reference_state("standing")
    H = xr.H.copy()
    H[2, 3] += height
    v = 0.5 * np.random.default_rng(3).standard_normal(model.nv)
    v[:6] = (0.1, 0.0, -0.5, 0.0, 0.2, 0.0)
    return State(H, xr.s.copy(), v)


@pytest.mark.parametrize("restitution", [0.0, 0.5])
@pytest.mark.parametrize("reference", ["local", "local_world_aligned"])
@pytest.mark.parametrize("name", list(FEET))
def test_jacobians_match_finite_differences(name, reference, restitution):
    dyn, x, u = case(name, 1, reference, restitution)
    F_x, F_u = dyn.derivatives(x, u)
    J_x, J_u = numerical_jacobian(lambda y, w: dyn.step(y, w), x, u)
    assert relative_error(F_x, J_x) <= FD_TOL
    assert not F_u.any() and not J_u.any()
    nv = dyn.model.nv
    assert np.array_equal(F_x[:nv], np.eye(nv, 2 * nv))  # the configuration passes through


@pytest.mark.parametrize("name", list(FEET))
def test_step_is_the_impact_and_batched_equals_per_knot(name):
    dyn, _, _ = case(name, 0, "local_world_aligned", 0.3)
    model = dyn.model
    X = model.state_space.random_trajectory(3, np.random.default_rng(7), scale=0.5)
    U = np.random.default_rng(8).standard_normal((3, model.n))
    Y = dyn.step_trajectory(X, U)
    assert np.array_equal(Y.H, X.H) and np.array_equal(Y.s, X.s) and Y.H is not X.H
    r = impulse_dynamics(model, X, dyn.contacts, 0.3)
    assert np.array_equal(Y.v, r.v_plus)
    assert np.array_equal(dyn.impulses(X), r.lagrangian) and dyn.impulses(X).shape == (3, dyn.nc)
    d = dyn.trajectory_derivatives(X, U)
    out = DiscreteDerivatives(np.full_like(d.F_x, np.nan), np.full_like(d.F_u, np.nan))
    assert dyn.trajectory_derivatives(X, U, out) is out
    assert np.array_equal(out.F_x, d.F_x) and np.array_equal(out.F_u, d.F_u)
    for k in range(3):
        y = dyn.step(X[k], U[k])
        assert relative_error(y.v, Y.v[k]) <= 1e-12
        Fx, Fu = dyn.derivatives(X[k], U[k])
        assert relative_error(d.F_x[k], Fx) <= 1e-12 and not Fu.any()


@pytest.mark.parametrize("reference", ["local", "local_world_aligned"])
def test_falling_solo12_lands_with_still_feet(reference):
    x = falling_solo12()
    model = robot("solo12")
    feet = FEET["solo12"][0]
    dyn = ImpulseRobotDynamics(model, [Contact(f, "3d", reference) for f in feet])
    y = dyn.step(x, np.zeros(model.n))
    for f in feet:
        assert np.abs(frame_velocity(model, x, f, "local")[:3]).max() > 0.1
        assert np.abs(frame_velocity(model, y, f, "local")[:3]).max() < 1e-12
    assert np.array_equal(y.H, x.H) and np.array_equal(y.s, x.s)
    lam = dyn.impulses(Trajectory.from_states([x]))[0]
    if reference == "local_world_aligned":
        assert (lam[2::3] > 0).all()  # the ground pushes the falling feet up


def test_bad_input():
    dyn, x, u = case("solo12", 0)
    model = dyn.model
    with pytest.raises(ValueError, match="restitution"):
        ImpulseRobotDynamics(model, dyn.contacts, restitution=-0.1)
    with pytest.raises(ValueError, match="damping"):
        ImpulseRobotDynamics(model, dyn.contacts, damping=np.inf)
    with pytest.raises(ValueError, match="unknown contact frame"):
        ImpulseRobotDynamics(model, [Contact("no_such_frame", "3d")])
    with pytest.raises(TypeError, match="Contact objects"):
        ImpulseRobotDynamics(model, ["FL_FOOT"])
    with pytest.raises(ValueError, match="shape"):
        dyn.step(x, u[:-1])
    with pytest.raises(ValueError, match="NaN"):
        dyn.derivatives(x, np.full(model.n, np.nan))
    redundant = ImpulseRobotDynamics(model, dyn.contacts + (dyn.contacts[0],))
    with pytest.raises(ValueError, match="rank deficient"):
        redundant.step(x, u)
    assert np.isfinite(ImpulseRobotDynamics(model, redundant.contacts, damping=1e-6).step(x, u).v).all()
    assert ImpulseRobotDynamics(model, dyn.contacts).dt == 0.0 and dyn.nu == model.n


@pytest.mark.parametrize("restitution", [0.0, 0.4])
def test_compiled_rollout_equals_the_knot_by_knot_loop(restitution):
    """The impact's compiled step in the rollout kernel against ``step`` knot by knot (``DiscreteDynamics``'
    generic rollout), with gaps shrunk at α < 1 and feedback; a redundant contact set fails at the same knot."""
    dyn, _, _ = case("solo12", 2, "local_world_aligned", restitution)
    model, rng, N = dyn.model, np.random.default_rng(5), 4
    sp = model.state_space
    x0 = falling_solo12()
    X_ref = sp.integrate_trajectory(Trajectory.repeat(x0, N + 1), 0.02 * rng.standard_normal((N + 1, sp.ndx)))
    U_ref, k = rng.standard_normal((N, model.n)), rng.standard_normal((N, model.n))
    K, gaps = 0.05 * rng.standard_normal((N, model.n, sp.ndx)), 0.01 * rng.standard_normal((N + 1, sp.ndx))
    compiled = dyn.rollout_policy(x0, X_ref, U_ref, k, K, 0.5, gaps)
    generic = DiscreteDynamics.rollout_policy(dyn, x0, X_ref, U_ref, k, K, 0.5, gaps)
    assert compiled.ok and generic.ok, (compiled.reason, generic.reason)
    for a, b in ((compiled.X.H, generic.X.H), (compiled.X.s, generic.X.s), (compiled.U, generic.U),
                 (compiled.DX, generic.DX)):
        np.testing.assert_array_equal(a, b)
    assert relative_error(compiled.X.v, generic.X.v) <= 1e-14
    redundant = ImpulseRobotDynamics(model, dyn.contacts + (dyn.contacts[0],), restitution)
    failed = redundant.rollout_policy(x0, X_ref, U_ref, k, K, 1.0)
    assert failed.failed_at == DiscreteDynamics.rollout_policy(redundant, x0, X_ref, U_ref, k, K, 1.0).failed_at == 1
    assert "rank-deficient" in failed.reason and "ImpulseRobotDynamics" in failed.reason


@pytest.fixture(scope="module")
def landing():
    """solo12 1 cm above its standing posture, falling: 3 knots of flight, the impact on four feet, 4 knots of
    stance (velocity-level Baumgarte), back to the standing posture at rest; controls regularized around zero."""
    model = robot("solo12")
    xr = model.reference_state("standing")
    feet = FEET["solo12"][0]
    contacts = [Contact(f, "3d", "local_world_aligned", (0.0, 10.0)) for f in feet]
    dt = 0.01
    flight, impact = ContactRobotDynamics(model, dt, []), ImpulseRobotDynamics(model, contacts)
    stance = ContactRobotDynamics(model, dt, contacts)
    w = np.concatenate([np.full(6, 10.0), np.ones(model.n), np.full(model.nv, 0.1)])
    cost = CostSum(model.state_space, model.n)
    cost.add("state", state_regularization(model.state_space, xr, w, model.n), 1.0)
    cost.add("control", control_regularization(model.n), 1e-2)
    terminal = CostSum(model.state_space, 0)
    terminal.add("state", state_regularization(model.state_space, xr, w, 0), 10.0)
    running = [ActionModel(flight, cost)] * 3 + [ActionModel(impact, cost)] + [ActionModel(stance, cost)] * 4
    return Problem(falling_solo12(0.01), running, terminal), feet


@pytest.mark.parametrize("solver", [solve_fddp, solve_ilqr])
def test_flight_impact_stance_problem_solves(landing, solver):
    problem, feet = landing
    model = problem.running[0].dynamics.model
    r = solver(problem)
    assert r.converged, r
    assert r.iterations >= 2
    k = 3  # the impact knot: x_4 = impact(x_3), its control has no effect and goes to the regularization's minimum
    assert np.abs(r.us[k]).max() < 1e-6 * max(1.0, np.abs(r.us).max())
    before, after = r.xs[k], r.xs[k + 1]
    assert np.array_equal(after.s, before.s) and relative_error(after.H, before.H) < 1e-12
    for f in feet:
        assert np.abs(frame_velocity(model, before, f, "local")[:3]).max() > 0.05
        assert np.abs(frame_velocity(model, after, f, "local")[:3]).max() < 1e-8
        p = frame_placement(model, knots(r.xs, k + 1, len(r.xs)), f)[:, :3, 3]
        assert np.abs(p - p[0]).max() < 2e-3, f  # the feet stay (up to the Euler steps' drift)
    assert r.gap_norm < 1e-8


def test_solver_forward_pass_steps_no_impact_in_python(landing, monkeypatch):
    problem, _ = landing
    monkeypatch.setattr(ImpulseRobotDynamics, "step", lambda *a: pytest.fail("the impact stepped in Python"))
    assert solve_fddp(problem).converged
