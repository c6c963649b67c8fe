"""Discrete dynamics as a field times an integrator: a user's field written in Python (two pendulums coupled by a
spring, with damping) through semi-implicit Euler, RK4 and DDP; the built-in fields composed by hand equal
RobotDynamics; the contact field through RK4 (Jacobians and DDP's term against finite differences, the compiled
rollout against the knot-by-knot one); a subclass of a built-in field is evaluated in Python; and a gait whose
phases have different dynamics objects rolls out in compiled runs, as the knot-by-knot loop does."""

import numpy as np
import pytest

import lietraj
from conftest import relative_error
from lietraj.dynamics import Contact, frame_placement
from lietraj.optimal_control import (
    ActionModel,
    ContactRobotDynamics,
    CostSum,
    Field,
    FieldDerivatives,
    FieldHessian,
    FreeField,
    IntegratedDynamics,
    Problem,
    RobotDynamics,
    SemiImplicitEuler,
    SolverOptions,
    check_derivatives,
    control_regularization,
    solve_ddp,
    solve_ilqr,
    state_regularization,
)
from lietraj.optimal_control.solvers import forward_pass
from lietraj.optimal_control.solvers.forward_pass import rollout_policy, rollout_policy_per_knot
from test_euler_second_order import numerical_hessian
from test_rollout import max_error, policy, reference_rollout


class SpringPendulums(Field):
    """Two pendulums coupled by a spring, with viscous damping, driven by torques:
    ``a = -w sin q - c v - L q + u`` with ``L = k [[1, -1], [-1, 1]]``."""

    def __init__(self, w=9.81, c=0.1, k=2.0):
        self.state_space, self.nu = lietraj.StateSpace(2, floating_base=False), 2
        self.w, self.c, self.L = w, c, k * np.array([[1.0, -1.0], [-1.0, 1.0]])

    def acceleration(self, X, U):
        return -self.w * np.sin(X.s) - self.c * X.v - X.s @ self.L + U

    def derivatives(self, X, U, stage=0):
        N, eye = len(X), np.eye(2)
        da_dq = -self.w * np.cos(X.s)[:, :, None] * eye - self.L
        return FieldDerivatives(self.acceleration(X, U), da_dq, np.tile(-self.c * eye, (N, 1, 1)), np.tile(eye, (N, 1, 1)))

    def hessian_contraction(self, X, U, MU):
        zero = np.zeros((len(X), 2, 2))
        return FieldHessian(self.w * (MU * np.sin(X.s))[:, :, None] * np.eye(2), zero, zero, zero)


@pytest.mark.parametrize("integrator", ["euler", "rk4"])
def test_a_user_field_through_each_integrator(integrator, rng):
    dyn = IntegratedDynamics(SpringPendulums(), 0.05, integrator)
    assert dyn.compiled_step() is None
    x, u, lam = dyn.state_space.random(rng, 1.0), rng.normal(size=2), rng.normal(size=4)
    report = check_derivatives(dyn, x, u)
    assert report.ok, report
    H = dyn.hessian_contraction(x, u, lam)
    assert relative_error(np.block([[H.xx, H.xu], [H.xu.T, H.uu]]), numerical_hessian(dyn, x, u, lam)) < 1e-6
    # Euler is the design's step; RK4 is fourth order: halving dt cuts its one-step error 32 times.
    y = dyn.step(x, u)
    if integrator == "euler":
        v = x.v + 0.05 * SpringPendulums().acceleration(lietraj.Trajectory(None, x.s[None], x.v[None]), u[None])[0]
        np.testing.assert_allclose(y.v, v, rtol=1e-15)
        np.testing.assert_allclose(y.s, x.s + 0.05 * v, rtol=1e-15)
    x0, X_ref, U_ref, k, K, gaps = policy(dyn, rng)
    r = dyn.rollout_policy(x0, X_ref, U_ref, k, K, 0.5, gaps, -0.5, 0.5)
    assert r.ok
    ref = reference_rollout(dyn, x0, X_ref, U_ref, k, K, 0.5, gaps, np.full((len(U_ref), 2), -0.5),
                            np.full((len(U_ref), 2), 0.5))
    assert max_error((r.X, r.U, r.DX), ref) < 1e-14


def swing_up(integrator):
    dyn = IntegratedDynamics(SpringPendulums(), 0.05, integrator)
    sp = dyn.state_space
    x0, goal = sp.neutral(), lietraj.State(None, np.array([2.5, -1.0]), np.zeros(2))
    running = CostSum(sp, 2)
    running.add("x", state_regularization(sp, goal, 1e-2, 2))
    running.add("u", control_regularization(2, 1e-3))
    return Problem(x0, ActionModel(dyn, running), state_regularization(sp, goal, 100.0, 0), horizon=40)


@pytest.mark.parametrize("integrator", ["euler", "rk4"])
def test_ddp_solves_a_problem_on_a_user_field(integrator):
    problem = swing_up(integrator)
    ddp, ilqr = solve_ddp(problem), solve_ilqr(problem)
    assert ddp.converged and ilqr.converged
    assert abs(ddp.cost - ilqr.cost) <= 1e-6 * ilqr.cost
    assert np.abs(ddp.xs.s[-1] - [2.5, -1.0]).max() < 0.05


@pytest.mark.parametrize("integrator", ["euler", "rk4"])
def test_the_free_field_composed_by_hand_is_robot_dynamics(integrator, rng):
    model = lietraj.load_robot("solo12")
    a, b = RobotDynamics(model, 0.01, integrator), IntegratedDynamics(FreeField(model), 0.01, integrator)
    X = model.state_space.random_trajectory(4, rng, 0.3)
    U, LAM = rng.normal(size=(4, model.n)), rng.normal(size=(4, model.state_space.ndx))
    ya, yb = a.step_trajectory(X, U), b.step_trajectory(X, U)
    for p, q in ((ya.H, yb.H), (ya.s, yb.s), (ya.v, yb.v)):
        np.testing.assert_array_equal(p, q)
    for p, q in zip(a.trajectory_derivatives(X, U), b.trajectory_derivatives(X, U)):
        np.testing.assert_array_equal(p, q)
    ha, hb = a.trajectory_hessian_contraction(X, U, LAM), b.trajectory_hessian_contraction(X, U, LAM)
    for name in ("xx", "xu", "uu"):
        np.testing.assert_array_equal(getattr(ha, name), getattr(hb, name))
    assert b.compiled_step().rk4 == (integrator == "rk4")
    with pytest.raises(ValueError, match="integrator"):
        IntegratedDynamics(FreeField(model), 0.01, "midpoint")
    with pytest.raises(ValueError, match="Field"):
        IntegratedDynamics(model, 0.01)
    assert IntegratedDynamics(FreeField(model), 0.01, SemiImplicitEuler()).integrator == "euler"


def test_the_compiled_step_is_made_once_and_again_when_what_it_holds_changes(rng):
    """A forward pass asks every run of knots for its compiled step: the dynamics keep it, make it again when its dt,
    its field's tables or an impact's coefficients change, and do not pickle it (work arrays of this process)."""
    import pickle

    from lietraj.optimal_control.dynamics.impulse_robot_dynamics import ImpulseRobotDynamics

    model = lietraj.load_robot("solo12")
    dyn = RobotDynamics(model, 0.01)
    step = dyn.compiled_step()
    assert dyn.compiled_step() is step and step.dt == 0.01
    dyn.dt = 0.02
    assert dyn.compiled_step().dt == 0.02
    before = dyn.compiled_step()
    dyn.field.tables = dyn.field.tables._replace()
    assert dyn.compiled_step() is not before and dyn.compiled_step().field is dyn.field.tables
    assert "_compiled" not in pickle.loads(pickle.dumps(dyn)).__dict__
    x0, X_ref, U_ref, k, K, _ = policy(dyn, rng)
    assert np.array_equal(dyn.rollout_policy(x0, X_ref, U_ref, k, K, 1.0).X.v,
                          RobotDynamics(model, 0.02).rollout_policy(x0, X_ref, U_ref, k, K, 1.0).X.v)

    feet = [Contact(f, "3d") for f in ("FL_FOOT", "FR_FOOT")]
    impact = ImpulseRobotDynamics(model, feet)
    step = impact.compiled_step()
    assert impact.compiled_step() is step and step.field.contacts[3] == 0.0
    impact.restitution = 0.5
    assert impact.compiled_step().field.contacts[3] == 0.5
    impact.contacts = tuple(feet[1:])
    assert impact.compiled_step().field.contacts[0].shape[0] == 1
    X = model.state_space.random_trajectory(2, rng, 0.3)
    F_x = impact.trajectory_derivatives(X, np.zeros((2, model.n))).F_x  # its derivatives follow the contacts too
    np.testing.assert_array_equal(F_x, ImpulseRobotDynamics(model, feet[1:], 0.5).trajectory_derivatives(
        X, np.zeros((2, model.n))).F_x)
    assert "_compiled" not in pickle.loads(pickle.dumps(impact)).__dict__


def test_a_subclass_of_a_builtin_field_is_evaluated_in_python(rng):
    class Pushed(FreeField):
        def acceleration(self, X, U):
            return super().acceleration(X, U) + 1.0

    model = lietraj.load_robot("ur5")
    dyn = IntegratedDynamics(Pushed(model), 0.01)
    assert dyn.compiled_step() is None
    x0, X_ref, U_ref, k, K, gaps = policy(dyn, rng)
    r = dyn.rollout_policy(x0, X_ref, U_ref, k, K, 1.0)
    free = RobotDynamics(model, 0.01).rollout_policy(x0, X_ref, U_ref, k, K, 1.0)
    assert r.ok and np.abs(r.X.v[1] - free.X.v[1] - 0.01).max() < 1e-12


def standing_solo(integrator):
    model = lietraj.load_robot("solo12")
    xr = model.reference_state("standing")
    feet = ["FL_FOOT", "FR_FOOT", "HL_FOOT", "HR_FOOT"]
    contacts = [Contact(f, "3d", "local_world_aligned", (30.0, 8.0), frame_placement(model, xr, f)) for f in feet]
    return ContactRobotDynamics(model, 0.01, contacts, integrator=integrator), xr


def test_contact_dynamics_by_rk4(rng):
    dyn, xr = standing_solo("rk4")
    euler, _ = standing_solo("euler")
    x = dyn.state_space.integrate(xr, 0.01 * rng.normal(size=dyn.state_space.ndx))
    u, lam = rng.normal(size=dyn.nu), rng.normal(size=dyn.state_space.ndx)
    report = check_derivatives(dyn, x, u)
    assert report.ok, report
    H = dyn.hessian_contraction(x, u, lam)
    assert relative_error(np.block([[H.xx, H.xu], [H.xu.T, H.uu]]), numerical_hessian(dyn, x, u, lam)) < 1e-4
    assert 1e-9 < relative_error(dyn.step(x, u).v, euler.step(x, u).v) < 1e-2  # another, close, step
    x0, X_ref, U_ref, k, K, gaps = policy(dyn, rng, 0.1)
    x0 = dyn.state_space.integrate(xr, 0.01 * rng.normal(size=dyn.state_space.ndx))
    X_ref = lietraj.Trajectory.from_states([xr] * len(X_ref))
    for alpha, g in ((1.0, None), (0.5, 0.1 * gaps)):
        compiled = dyn.rollout_policy(x0, X_ref, U_ref, k, K, alpha, g)
        generic = rollout_policy_per_knot(dyn, x0, X_ref, U_ref, k, K, alpha, g)
        assert compiled.ok and generic.ok, (compiled.reason, generic.reason)
        assert max_error((compiled.X, compiled.U, compiled.DX), (generic.X, generic.U, generic.DX)) < 1e-12


def test_a_gait_rolls_out_in_compiled_runs_as_knot_by_knot(monkeypatch):
    from lietraj.problems import make_problem

    example = make_problem("trot", "solo12")
    problem = example.problem
    # A guess with gaps and a direction of the solver from it: two iterations of FDDP.
    result = example.solve("fddp", SolverOptions(max_iter=2))
    args = (problem.x0, result.xs, result.us, result.k, result.K, 0.5, 0.1 * problem.gaps(result.xs, result.us),
            problem.u_lb, problem.u_ub)
    calls = []
    kernel = forward_pass._rollout_kernel
    monkeypatch.setattr(forward_pass, "_rollout_kernel", lambda t0, t1, *a: calls.append((t0, t1)) or kernel(t0, t1, *a))
    compiled = rollout_policy(problem.dynamics_sequence, *args)
    generic = rollout_policy_per_knot(problem.dynamics_sequence, *args)
    assert compiled.ok and generic.ok, (compiled.reason, generic.reason)
    assert max_error((compiled.X, compiled.U, compiled.DX), (generic.X, generic.U, generic.DX)) < 1e-10
    T = problem.T
    impulses = sum(type(d).__name__ == "ImpulseRobotDynamics" for d in problem.dynamics_sequence)
    runs = sum(1 for t in range(T) if t == 0 or problem.dynamics_sequence[t] is not problem.dynamics_sequence[t - 1])
    assert impulses > 0 and len(calls) == runs < T // 4  # a compiled call per phase and per touchdown


def test_a_robot_field_keeps_its_last_derivatives_for_equal_inputs(monkeypatch, rng):
    """The Jacobians and DDP's term of one iteration ask for the first-order derivatives at the same knots: the free
    field computes them once (and again for other knots), and its contraction with them kept equals the one that
    computes them."""
    from lietraj.dynamics.algorithms.aba_second_order import aba_hessian_contraction
    from lietraj.optimal_control.dynamics import free_field

    model = lietraj.load_robot("solo12")
    field = FreeField(model)
    X = model.state_space.random_trajectory(5, rng, scale=0.3)
    U, MU = rng.normal(size=(5, model.n)), rng.normal(size=(5, model.nv))
    calls = []
    computed = free_field.aba_derivatives_of_checked
    monkeypatch.setattr(free_field, "aba_derivatives_of_checked", lambda *a, **k: calls.append(1) or computed(*a, **k))
    first = field.derivatives(X, U)
    again = field.derivatives(X.copy(), U.copy())
    assert len(calls) == 1 and again.da_dq is first.da_dq
    H = field.hessian_contraction(X, U, MU)
    assert len(calls) == 1
    fresh = aba_hessian_contraction(model, X, np.hstack([np.zeros((5, 6)), U]), MU)
    for a, b in ((H.qq, fresh.qq), (H.qv, fresh.qv), (H.vv, fresh.vv), (H.qu, fresh.qtau[..., 6:])):
        assert relative_error(a, b) < 1e-13
    steps = []
    computed_aba = free_field.aba
    monkeypatch.setattr(free_field, "aba", lambda *a, **k: steps.append(1) or computed_aba(*a, **k))
    a = field.acceleration(X, U)
    assert not steps and np.array_equal(a, computed_aba(model, X, np.hstack([np.zeros((5, 6)), U])))
    U[0, 0] += 1e-3
    field.derivatives(X, U)
    assert len(calls) == 2


def test_a_receded_window_takes_its_inner_knots_derivatives_from_the_free_fields_last_evaluation(monkeypatch, rng):
    """The warm start of a tick after one that linearized at its plan: the plan moved by a knot, a new first state,
    the last control repeated. The free field computes its first and last knots only; every row equals a fresh
    computation's to the bit."""
    from lietraj.optimal_control.dynamics import free_field

    model = lietraj.load_robot("ur5")
    field = FreeField(model)
    X, U = model.state_space.random_trajectory(9, rng, scale=0.3), rng.normal(size=(9, model.n))
    knots = []
    computed = free_field.aba_derivatives_of_checked
    monkeypatch.setattr(free_field, "aba_derivatives_of_checked",
                        lambda m, x, *a, **k: knots.append(len(x)) or computed(m, x, *a, **k))
    field.derivatives(X[:8], U[:8])
    moved = model.state_space.trajectory(8)
    moved[0], moved[1:8] = model.state_space.random(rng), X[2:9]
    U_moved = np.concatenate([U[1:8], U[7:8]])  # knots 1-6 are the last evaluation's 2-7; knot 7 is not
    d = field.derivatives(moved, U_moved)
    assert knots == [8, 1, 1]
    fresh = FreeField(model).derivatives(moved, U_moved)
    for name in ("a", "da_dq", "da_dv", "da_du"):
        assert np.array_equal(getattr(d, name), getattr(fresh, name)), name


def test_the_contact_field_solves_the_knots_of_its_kept_derivatives_from_them(monkeypatch):
    """A solver's gaps step the knots it has just linearized: the contact field answers from the derivatives it
    kept, bit-identical to a new solve."""
    from lietraj.optimal_control.dynamics import contact_field
    from lietraj.problems import talos_reach

    example = talos_reach(horizon=8)
    field = example.problem.running[0].dynamics.field
    X, U = example.xs0[:-1], example.us0
    A, F = field.solve(X, U)
    field.contact_derivatives(X, U)
    solves = []
    computed = contact_field.solve_contact_dynamics
    monkeypatch.setattr(contact_field, "solve_contact_dynamics", lambda *a: solves.append(1) or computed(*a))
    A2, F2 = field.solve(X, U)
    assert not solves and np.array_equal(A, A2) and np.array_equal(F, F2)
    field.solve(X, U + 1.0)
    assert len(solves) == 1


def test_the_contact_field_linearizes_a_rollout_from_the_contact_solution_it_computed(monkeypatch):
    """The solver linearizes at the rollout it accepts: the contact field kept the solution the rollout computed at
    its knots and derives from it, bit-identical to solving the contact dynamics again."""
    from lietraj.dynamics.contacts import contact_dynamics as solver_module
    from lietraj.dynamics.contacts.contact_dynamics_derivatives import contact_dynamics_derivatives
    from lietraj.problems import talos_reach

    example = talos_reach(horizon=8)
    dyn = example.problem.running[0].dynamics
    field, model = dyn.field, example.model
    N = example.problem.T
    rng = np.random.default_rng(2)
    K = 0.01 * rng.normal(size=(N, field.nu, model.state_space.ndx))
    trial = dyn.rollout_policy(example.problem.x0, example.xs0, example.us0, np.zeros((N, field.nu)), K, 1.0)
    X, U = trial.X[:-1], trial.U
    solves = []
    computed = solver_module.solve_contact_dynamics
    monkeypatch.setattr(solver_module, "solve_contact_dynamics", lambda *a, **k: solves.append(1) or computed(*a, **k))
    d = field.contact_derivatives(X, U)
    A, F = field.solve(X, U + 0.0)
    assert not solves
    tau = np.hstack([np.zeros((N, 6)), U])
    fresh = contact_dynamics_derivatives(model, X, tau, field.contacts)
    assert solves  # the fresh evaluation solved the contact dynamics
    for name in ("a", "forces", "da_dq", "da_dv", "da_dtau", "df_dq", "df_dv", "df_dtau"):
        assert np.array_equal(getattr(d, name), getattr(fresh, name)), name
    assert np.array_equal(A, fresh.a) and np.array_equal(F, fresh.forces)
    trial = dyn.rollout_policy(example.problem.x0, example.xs0, example.us0, np.zeros((N, field.nu)), 2 * K, 1.0)
    solves.clear()
    A, F = field.solve(trial.X[:-1], trial.U)  # stepping the knots of the last rollout (gaps) solves nothing again
    assert not solves
    fresh = solver_module.contact_dynamics(model, trial.X[:-1], np.hstack([np.zeros((N, 6)), trial.U]), field.contacts)
    assert np.array_equal(A, fresh.a) and np.array_equal(F, fresh.lagrangian)


@pytest.mark.parametrize("integrator", ["euler", "rk4"])
@pytest.mark.parametrize("bad", [np.inf, np.nan])
def test_non_finite_jacobians_are_an_error_naming_the_dynamics(integrator, bad, rng):
    """A field whose derivatives hold an infinity or a NaN at one knot gives Jacobians that are reported, not
    passed on (the Euler step tests its entries as it writes them, RK4 its arrays)."""

    class Broken(SpringPendulums):
        def derivatives(self, X, U, stage=0):
            d = super().derivatives(X, U, stage)
            d.da_dv[3, 1, 0] = bad
            return d

    dynamics = IntegratedDynamics(Broken(), 0.05, integrator)
    X = dynamics.state_space.random_trajectory(5, rng)
    with pytest.raises(ValueError, match=r"IntegratedDynamics\.derivatives: non-finite"):
        dynamics.trajectory_derivatives(X, rng.normal(size=(5, 2)))
    assert np.all(np.isfinite(IntegratedDynamics(SpringPendulums(), 0.05, integrator).trajectory_derivatives(
        X, rng.normal(size=(5, 2))).F_x))
