"""Discrete dynamics under rigid contacts: the Euler step, its exact Jacobians, and a balancing solve.

Cases: Talos on both soles (6d) and solo12 on its four point feet (3d), with Baumgarte gains and targets off the
current foot poses; the Jacobians are checked against geometric finite differences of the step, the step against
a hand-written semi-implicit Euler around ``contact_dynamics``, and the contact forces at a static equilibrium
against ``static_equilibrium``'s wrenches. The compiled ``rollout_policy`` equals the knot-by-knot loop through
``step`` (``rollout_policy_per_knot``) and stops at the same knot with a status where that loop fails.
"""

from __future__ import annotations

import os
import subprocess
import sys
from functools import lru_cache

import numpy as np
import pytest

from conftest import relative_error
from lietraj.dynamics import se3
from lietraj.dynamics.contacts.contact_dynamics import Contact, contact_dynamics
from lietraj.dynamics.contacts.equilibrium import static_equilibrium
from lietraj.dynamics.lie.finite_differences import numerical_jacobian
from lietraj.dynamics.kinematics.kinematics import frame_placement
from lietraj.dynamics.model.robots import load_robot
from lietraj.dynamics.lie.state import State, Trajectory
from lietraj.optimal_control.dynamics.contact_robot_dynamics import ContactRobotDynamics
from lietraj.optimal_control.costs.costs import CostSum, control_regularization, state_regularization
from lietraj.optimal_control.dynamics.discrete_dynamics import DiscreteDerivatives
from lietraj.optimal_control.solvers.forward_pass import rollout_policy_per_knot
from lietraj.optimal_control.problem import ActionModel, Problem, knots
from lietraj.optimal_control.solvers.solvers import solve_ddp, solve_fddp, solve_ilqr

FEET = {
    "talos": (("left_sole_link", "right_sole_link"), "6d"),
    "solo12": (("FL_FOOT", "FR_FOOT", "HL_FOOT", "HR_FOOT"), "3d"),
}
POSTURE = {"talos": "half_sitting", "solo12": "standing"}
SOLES = {"left_sole_link": (0.1, 0.05), "right_sole_link": (0.1, 0.05)}
GAINS = (30.0, 8.0)
DT = 0.03
FD_TOL = 1e-6


@lru_cache(maxsize=None)
def robot(name: str):
    return load_robot(name)


def case(name: str, seed: int, reference: str = "local"):
    """(dynamics, x, u): a random state and torque, contacts on the feet with targets off the current poses."""
    model = robot(name)
    rng = np.random.default_rng(seed)
    x = model.state_space.random(rng, scale=0.5)
    u = rng.standard_normal(model.n)
    frames, kind = FEET[name]
    contacts = [Contact(f, kind, reference, GAINS, frame_placement(model, x, f) @ se3.exp(0.05 * rng.standard_normal(6)))
                for f in frames]
    return ContactRobotDynamics(model, DT, contacts), x, u


def euler_step(dyn: ContactRobotDynamics, x: State, u) -> State:
    """v+ = v + dt a, H+ = H exp(dt nu+), s+ = s + dt sdot+ with a from contact_dynamics."""
    model, dt = dyn.model, dyn.dt
    a = contact_dynamics(model, x, np.concatenate([np.zeros(6), u]), dyn.contacts).a
    v = x.v + dt * a
    return State(x.H @ se3.exp(dt * v[:6]), x.s + dt * v[6:], v)


@pytest.mark.parametrize("reference", ["local", "local_world_aligned"])
@pytest.mark.parametrize("name", list(FEET))
def test_jacobians_match_finite_differences(name, reference):
    dyn, x, u = case(name, 1, reference)
    F_x, F_u = dyn.derivatives(x, u)
    J_x, J_u = numerical_jacobian(lambda y, w: dyn.step(y, w), x, u)
    assert relative_error(F_x, J_x) <= FD_TOL
    assert relative_error(F_u, J_u) <= FD_TOL
    # The contacts matter: the same step by ABA (no contacts) has a different Jacobian.
    free = ContactRobotDynamics(dyn.model, DT, [])
    assert relative_error(free.derivatives(x, u).F_x, F_x) > 1e-3


@pytest.mark.parametrize("name", list(FEET))
def test_step_is_euler_on_contact_dynamics_and_batched_equals_per_knot(name):
    dyns, xs, us = zip(*(case(name, seed) for seed in range(3)))
    dyn = dyns[0]  # one contact set for all knots (the targets of knot 0)
    X, U = Trajectory.from_states(list(xs)), np.array(us)
    Y = dyn.step_trajectory(X, U)
    d = dyn.trajectory_derivatives(X, U)
    out = DiscreteDerivatives(np.empty_like(d.F_x), np.empty_like(d.F_u))
    assert dyn.trajectory_derivatives(X, U, out) is out
    forces = dyn.contact_forces(X, U)
    for k in range(len(X)):
        ref = euler_step(dyn, xs[k], us[k])
        y = Y[k]
        assert relative_error(y.H, ref.H) < 1e-13 and relative_error(y.s, ref.s) < 1e-13
        assert relative_error(y.v, ref.v) < 1e-13
        one = dyn.step(xs[k], us[k])
        assert np.allclose(one.H, y.H, rtol=0, atol=1e-14) and np.allclose(one.v, y.v, rtol=0, atol=1e-12)
        Fx, Fu = dyn.derivatives(xs[k], us[k])
        assert relative_error(d.F_x[k], Fx) < 1e-12 and relative_error(d.F_u[k], Fu) < 1e-12
        assert np.array_equal(out.F_x[k], d.F_x[k])
        lam = contact_dynamics(dyn.model, xs[k], np.concatenate([np.zeros(6), us[k]]), dyn.contacts).lagrangian
        assert forces.shape == (3, sum(c.dim for c in dyn.contacts))
        assert relative_error(forces[k], lam) < 1e-12


@pytest.mark.parametrize("name", list(FEET))
def test_a_receded_window_takes_its_inner_knots_contact_derivatives_from_the_last_evaluation(name, monkeypatch):
    """A warm start moved by a knot (a new first state, the last control repeated): the knots it shares with the last
    evaluation come from it, only the others are computed, and every result equals a fresh computation's to the
    bit; an unrelated trajectory is computed whole."""
    from lietraj.dynamics.contacts import contact_dynamics_derivatives as module

    dyns, xs, us = zip(*(case(name, seed) for seed in range(9)))
    dyn = dyns[0]
    X, U = Trajectory.from_states(list(xs[:8])), np.array(us[:8])
    moved = Trajectory.from_states([xs[8]] + list(xs[2:8]) + [xs[7]])  # knots 1-6: the last evaluation's 2-7
    U_moved = np.concatenate([U[1:], U[-1:]])
    kernel, computed = module.contact_derivatives_batch_kernel, []

    def counted(*args):
        computed.append(args[5].shape[0])  # the knots of the call
        return kernel(*args)

    monkeypatch.setattr(module, "contact_derivatives_batch_kernel", counted)
    dyn.field.contact_derivatives(X, U)
    assert computed == [8]
    d = dyn.field.contact_derivatives(moved, U_moved)
    assert computed == [8, 1, 1]  # knot 0 (the new state) and knot 7 (its control differs from knot 8's)
    fresh = ContactRobotDynamics(dyn.model, DT, dyn.contacts).field.contact_derivatives(moved, U_moved)
    for name_, rows in vars(d).items():
        assert np.array_equal(rows, getattr(fresh, name_)), name_
    others = [case(name, seed)[1:] for seed in range(10, 18)]
    dyn.field.contact_derivatives(Trajectory.from_states([x for x, _ in others]), np.array([u for _, u in others]))
    assert computed[-1] == 8


@pytest.mark.parametrize("name", list(FEET))
def test_static_equilibrium_is_a_fixed_point(name):
    """At rest with the equilibrium torques the robot does not move and the contact forces are the wrenches."""
    model = robot(name)
    x = model.reference_state(POSTURE[name])
    frames, kind = FEET[name]
    eq = static_equilibrium(model, x, list(frames), sole=SOLES if kind == "6d" else None)
    assert eq.feasible
    # static_equilibrium reports 3d forces in world-aligned axes, sole wrenches in the sole frame.
    reference = "local" if kind == "6d" else "local_world_aligned"
    dyn = ContactRobotDynamics(model, DT, [Contact(f, kind, reference) for f in frames])
    X = Trajectory.from_states([x])
    y = dyn.step_trajectory(X, eq.tau[None])[0]
    weight = model.total_mass * 9.81
    assert np.abs(y.v).max() < 1e-6 and np.abs(y.s - x.s).max() < 1e-7
    wrenches = np.concatenate([eq.wrenches[f] for f in frames])
    assert np.abs(dyn.contact_forces(X, eq.tau[None])[0] - wrenches).max() < 1e-6 * weight


def test_bad_input():
    dyn, x, u = case("solo12", 0)
    model = dyn.model
    with pytest.raises(ValueError, match="dt"):
        ContactRobotDynamics(model, 0.0, dyn.contacts)
    with pytest.raises(ValueError, match="damping"):
        ContactRobotDynamics(model, DT, dyn.contacts, damping=-1.0)
    with pytest.raises(ValueError, match="unknown contact frame"):
        ContactRobotDynamics(model, DT, [Contact("no_such_frame", "3d")])
    with pytest.raises(TypeError, match="Contact objects"):
        ContactRobotDynamics(model, DT, ["FL_FOOT"])
    with pytest.raises(ValueError, match="shape"):
        dyn.step(x, u[:-1])
    with pytest.raises(ValueError, match="NaN"):
        dyn.step(x, np.full(model.n, np.nan))
    # Two point contacts on one foot are redundant: clear error without damping, a step with it.
    redundant = ContactRobotDynamics(model, DT, dyn.contacts + (dyn.contacts[0],))
    with pytest.raises(ValueError, match="rank deficient"):
        redundant.step(x, u)
    damped = ContactRobotDynamics(model, DT, redundant.contacts, damping=1e-6)
    assert np.isfinite(damped.step(x, u).v).all()


@pytest.fixture(scope="module")
def talos_balance():
    """Talos on both soles starting with a joint-velocity kick compatible with the contacts, asked to come back
    to rest at half_sitting; controls regularized around the gravity-compensating torques."""
    model = robot("talos")
    xr = model.reference_state("half_sitting")
    eq = static_equilibrium(model, xr, list(SOLES), sole=SOLES)
    targets = {f: frame_placement(model, xr, f) for f in SOLES}
    contacts = [Contact(f, "6d", baumgarte=(25.0, 10.0), target=targets[f]) for f in SOLES]
    J = contact_dynamics(model, xr, np.zeros(model.nv), contacts).jacobian
    v = np.random.default_rng(0).standard_normal(model.nv)
    v -= np.linalg.pinv(J) @ (J @ v)  # no initial motion of the soles
    x0 = State(xr.H, xr.s, 0.5 * v / np.abs(v).max())
    dyn = ContactRobotDynamics(model, 0.03, contacts)
    w = np.concatenate([np.zeros(3), np.full(3, 10.0), np.ones(model.n), np.ones(model.nv)])
    running = CostSum(model.state_space, model.n)
    running.add("state", state_regularization(model.state_space, xr, w, model.n), 0.1)
    running.add("control", control_regularization(model.n, reference=eq.tau), 1e-3)
    terminal = CostSum(model.state_space, 0)
    terminal.add("state", state_regularization(model.state_space, xr, w, 0), 10.0)
    T = 20
    problem = Problem(x0, ActionModel(dyn, running), terminal, horizon=T)
    return problem, dyn, targets, np.tile(eq.tau, (T, 1))


@pytest.mark.parametrize("solver", [solve_fddp, solve_ilqr])
def test_talos_balance_solve(talos_balance, solver):
    problem, dyn, targets, U0 = talos_balance
    r = solver(problem, us0=U0)
    assert r.converged, r
    assert r.iterations >= 2  # the kick makes it a real problem
    passive = dyn.rollout(problem.x0, U0)  # holding the equilibrium torques
    xr = dyn.model.reference_state("half_sitting")
    sp = dyn.state_space
    assert np.linalg.norm(sp.difference(xr, r.xs[-1])) < 0.5 * np.linalg.norm(sp.difference(xr, passive[-1]))
    for f, T in targets.items():
        drift = np.linalg.norm(frame_placement(dyn.model, r.xs, f)[:, :3, 3] - T[:3, 3], axis=1).max()
        assert drift < 1e-3, (f, drift)
    normal = dyn.contact_forces(knots(r.xs, 0, len(r.us)), r.us)[:, [2, 8]]
    assert (normal > 0).all()  # the soles push on the ground
    if solver is solve_fddp:  # DDP, with the contact dynamics' second-order term, reaches the same optimum
        rd = solve_ddp(problem, us0=U0)
        assert rd.converged and abs(rd.cost - r.cost) <= 1e-6 * abs(r.cost)


ROLLOUT_T = 30


def rollout_case(name: str, reference: str, seed: int = 0):
    """(dynamics, x0, X_ref, U_ref, k, K, gaps, bounds): contacts holding the feet where they are at the reference
    posture, a start and a reference trajectory near it, controls around the equilibrium torques, and gains, gaps
    and bounds of the sizes a solver produces (the bounds active at some knots)."""
    model = robot(name)
    rng = np.random.default_rng(seed)
    xr = model.reference_state(POSTURE[name])
    frames, kind = FEET[name]
    dyn = ContactRobotDynamics(model, 0.01, [Contact(f, kind, reference, GAINS, frame_placement(model, xr, f))
                                             for f in frames])
    sp, T, n = dyn.state_space, ROLLOUT_T, model.n
    x0 = sp.integrate(xr, 0.01 * rng.standard_normal(sp.ndx))
    X_ref = sp.integrate_trajectory(Trajectory.from_states([xr] * (T + 1)), 0.01 * rng.standard_normal((T + 1, sp.ndx)))
    tau = static_equilibrium(model, xr, list(frames), sole=SOLES if kind == "6d" else None).tau
    U_ref = tau + 0.2 * rng.standard_normal((T, n))
    k, K = 0.2 * rng.standard_normal((T, n)), 0.005 * rng.standard_normal((T, n, sp.ndx))
    gaps = 0.01 * rng.standard_normal((T + 1, sp.ndx))
    return dyn, x0, X_ref, U_ref, k, K, gaps, (tau - 0.2, tau + 0.2)


def rollout_error(a, b) -> float:
    pairs = [(a.X.H, b.X.H), (a.X.s, b.X.s), (a.X.v, b.X.v), (a.U, b.U), (a.DX, b.DX)]
    return max(relative_error(p, q) for p, q in pairs)


@pytest.mark.parametrize("reference", ["local", "local_world_aligned"])
@pytest.mark.parametrize("name", list(FEET))
def test_compiled_rollout_equals_the_knot_by_knot_loop(name, reference):
    dyn, x0, X_ref, U_ref, k, K, gaps, (lb, ub) = rollout_case(name, reference)
    for alpha, g, lo, hi in [(1.0, None, None, None), (0.5, gaps, lb, ub), (0.25, gaps, None, ub)]:
        compiled = dyn.rollout_policy(x0, X_ref, U_ref, k, K, alpha, g, lo, hi)
        generic = rollout_policy_per_knot(dyn, x0, X_ref, U_ref, k, K, alpha, g, lo, hi)
        assert compiled.ok and generic.ok, (compiled.reason, generic.reason)
        assert rollout_error(compiled, generic) <= 1e-12
        assert np.abs(compiled.X.v).max() > 1.0  # the robot moves: the policy and the contacts were exercised
        if hi is not None:
            assert np.any(compiled.U == hi) and np.all(compiled.U <= hi)
        if lo is not None:
            assert np.any(compiled.U == lo) and np.all(compiled.U >= lo)
        if g is not None:  # the gaps moved the first state off x0
            assert np.abs(compiled.X.v[0] - x0.v).max() > 1e-4


def test_failed_rollouts_stop_at_the_knot_of_the_knot_by_knot_loop():
    dyn, x0, X_ref, U_ref, k, K, gaps, _ = rollout_case("solo12", "local")

    def both(d, *args):
        compiled = d.rollout_policy(*args)
        generic = rollout_policy_per_knot(d, *args)
        assert compiled.failed_at == generic.failed_at, (compiled.reason, generic.reason)
        return compiled

    bad_k = k.copy()
    bad_k[7, 1] = np.nan
    r = both(dyn, x0, X_ref, U_ref, bad_k, K, 0.5, gaps)
    assert r.failed_at == 7 and "non-finite state or control at knot 7" in r.reason
    assert np.isfinite(r.X.v[:8]).all() and np.isfinite(r.U[:7]).all()
    nan_x0 = x0.copy()
    nan_x0.v[0] = np.nan
    assert both(dyn, nan_x0, X_ref, U_ref, k, K, 0.5, gaps).failed_at == 0
    redundant = ContactRobotDynamics(dyn.model, dyn.dt, dyn.contacts + (dyn.contacts[0],))
    r = both(redundant, x0, X_ref, U_ref, k, K, 1.0)
    assert r.failed_at == 1 and "redundant contacts" in r.reason
    damped = ContactRobotDynamics(dyn.model, dyn.dt, redundant.contacts, damping=1e-8)
    assert damped.rollout_policy(x0, X_ref, U_ref, k, K, 1.0).ok
    # Gains that blow up: the states grow until the step fails; both paths stop at the same knot.
    r = both(dyn, x0, X_ref, U_ref, k, 1e3 * K, 1.0)
    assert 0 < r.failed_at <= ROLLOUT_T
    assert np.isfinite(r.X.s[:r.failed_at]).all()


def test_rollout_kernel_runs_without_jit():
    """NUMBA_DISABLE_JIT=1 (for debugging in pure Python): the compiled rollout's result."""
    code = ("import sys; sys.path.insert(0, 'tests'); import numpy as np;"
            "from test_contact_robot_dynamics import rollout_case;"
            "dyn, x0, X_ref, U_ref, k, K, gaps, (lb, ub) = rollout_case('solo12', 'local_world_aligned');"
            "r = dyn.rollout_policy(x0, X_ref, U_ref, k, K, 0.5, gaps, lb, ub);"
            "print(repr(np.concatenate([r.X.H.ravel(), r.X.v.ravel(), r.U.ravel(), r.DX.ravel()]).tolist()))")
    env = dict(os.environ, NUMBA_DISABLE_JIT="1")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True,
                         cwd=root).stdout
    dyn, x0, X_ref, U_ref, k, K, gaps, (lb, ub) = rollout_case("solo12", "local_world_aligned")
    r = dyn.rollout_policy(x0, X_ref, U_ref, k, K, 0.5, gaps, lb, ub)
    assert r.ok
    expected = np.concatenate([r.X.H.ravel(), r.X.v.ravel(), r.U.ravel(), r.DX.ravel()])
    assert relative_error(np.array(eval(out)), expected) <= 1e-12
