"""Hard constraints (``lietraj.optimal_control.constraints``) and the augmented-Lagrangian term that meets them.

- Every built-in constraint's ``R_x``, ``R_u`` against geometric central differences of its ``value`` through
  ``check_derivatives`` (the checker users call), at random states: UR5 and Panda for the joint, frame and CoM
  constraints; Solo12 (four 3d feet) and Talos (two 6d soles) with their ``ContactRobotDynamics`` for the friction
  cone, the centre of pressure and the wrench cone, built as ``test_contact_residuals`` builds its cases. The
  checker itself is shown to fail on wrong residual derivatives.
- ``AugmentedLagrangianActivation``: value by hand, gradient and (diagonal) Hessian against finite differences of
  its value inside, outside and across the bounds of equality, one-sided, two-sided and free rows, with non-zero
  multipliers and a scale ≠ 1; a ``ResidualCost`` of it through ``check_derivatives``.
- Construction errors, each with its message; ``Problem.violations`` and ``Problem.contradictory_constraints`` on
  small problems against hand-computed expectations.

Tolerance of the finite-difference checks (``FD_TOL``): central differences of step ``eps = 1e-6`` have a truncation
error ``~ eps² |r'''| ~ 1e-12`` and a round-off error ``~ 1e-16 |r| / eps = 1e-10 |r|``; the contact forces (up to
~1e3 N on Talos) give ~1e-7 absolute on Jacobian entries of ~1e2 (measured: ``R_x`` ≤ 1e-9 relative everywhere,
``R_u`` ≤ 4e-8 on Talos, whose torque columns are small next to the largest entry; the arms ≤ 1e-9). 1e-6 leaves over
an order of margin and is the bound of ``test_costs`` and ``test_contact_residuals``; the wrong derivatives of
``test_the_checker_flags_wrong_residual_and_constraint_derivatives`` show at 1e-3 and above.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from lietraj.dynamics.kinematics.kinematics import frame_placement as placement_of
from lietraj.dynamics.lie.state import State, StateSpace, Trajectory
from lietraj.dynamics.contacts.contact_dynamics import contact_dynamics
from lietraj.optimal_control.constraints import (
    GRAVITY,
    Constraint,
    ConstraintSet,
    Violation,
    center_of_pressure,
    com_position,
    frame_placement,
    frame_position,
    friction_cone,
    joint_position_limits,
    joint_velocity_limits,
    normal_forces,
    torque_limits,
    wrench_cone,
)
from lietraj.optimal_control.costs.costs import ResidualCost, control_regularization, state_regularization
from lietraj.optimal_control.costs.derivative_check import check_derivatives
from lietraj.optimal_control.costs.residuals import (
    CenterOfMassResidual,
    ControlResidual,
    JointPositionResidual,
    JointTorqueResidual,
    Residual,
    ResidualDerivatives,
)
from lietraj.optimal_control.dynamics.contact_robot_dynamics import ContactRobotDynamics
from lietraj.optimal_control.dynamics.discrete_dynamics import RobotDynamics
from lietraj.optimal_control.problem import ActionModel, Problem
from lietraj.optimal_control.costs.activations import AugmentedLagrangianActivation
from test_contact_residuals import HALF_LENGTH, HALF_WIDTH, MU, case, robot

FD_TOL = 1e-6
FRAMES = {"ur5": "tool0", "panda": "panda_hand"}
ARMS = list(FRAMES)


# ---------------------------------------------------------------- the built-ins pass the derivative checker


def arm_constraints(model, rng) -> dict[str, Constraint]:
    """Every built-in on an arm's state or torques, running (nu = n) and terminal (nu = 0) where both exist; targets
    at another random state, so that the residuals are of moderate size."""
    frame = FRAMES[model.name]
    other = placement_of(model, model.state_space.random(rng, scale=0.5), frame)
    return {
        "joint position limits": joint_position_limits(model),
        "joint position limits, margin, terminal": joint_position_limits(model, nu=0, margin=0.1),
        "joint velocity limits": joint_velocity_limits(model, fraction=0.5),
        "joint velocity limits, terminal": joint_velocity_limits(model, nu=0),
        "torque limits": torque_limits(model),
        "frame position": frame_position(model, frame, other[:3, 3]),
        "frame position, terminal": frame_position(model, frame, other[:3, 3] + 0.1 * rng.standard_normal(3), nu=0),
        "frame placement": frame_placement(model, frame, other),
        "frame placement, terminal": frame_placement(model, frame, other, nu=0),
        "com position": com_position(model, 0.3 * rng.standard_normal(3)),
        "com position, terminal": com_position(model, 0.3 * rng.standard_normal(3), nu=0),
    }


def assert_passes(report, blocks: set[str]):
    assert report.ok, str(report)
    assert {b.name for b in report.blocks} == blocks, str(report)
    assert report.worst.relative_error <= FD_TOL, str(report)


@pytest.mark.parametrize("name", ARMS)
def test_arm_constraints_pass_the_derivative_checker(name, rng):
    model = robot(name)
    X = model.state_space.random_trajectory(3, rng, scale=0.5)
    U = 10.0 * rng.standard_normal((3, model.n))
    for kind, c in arm_constraints(model, rng).items():
        report = check_derivatives(c, X, None if c.nu == 0 else U)
        uses_u = "torque" in kind
        assert_passes(report, {"r", "R_x", "R_u"} if uses_u else {"r", "R_x"})
        if not uses_u:  # nothing to compare: the skip says why
            assert report.skipped["R_u"] == ("no controls (nu = 0)" if c.nu == 0
                                             else "uses_u is False and the differences in u are zero"), kind
        # the residual alone is checked the same way
        alone = check_derivatives(c.residual, X, None if c.nu == 0 else U)
        assert alone.ok and [b.relative_error for b in alone.blocks] == [b.relative_error for b in report.blocks], kind


def contact_constraints(name: str, rng):
    """(dynamics, X, U, constraints) of ``test_contact_residuals.case`` (Baumgarte gains on, two neighbouring knots,
    random torques) with every contact built-in on its ``ContactRobotDynamics``."""
    model, contacts, X, U = case(name, rng)
    dyn = ContactRobotDynamics(model, 0.01, contacts)
    out = {
        "friction cone, 4 facets": friction_cone(dyn, 1, MU),
        "friction cone, 6 facets": friction_cone(dyn, 0, MU, facets=6),
        "friction cone, exact": friction_cone(dyn, len(contacts) - 1, MU, facets=None),
        "normal forces": normal_forces(dyn, 0.05),
    }
    if name == "talos":
        out["centre of pressure, left"] = center_of_pressure(dyn, 0, HALF_LENGTH, HALF_WIDTH)
        out["centre of pressure, right"] = center_of_pressure(dyn, 1, HALF_LENGTH, 0.5 * HALF_WIDTH)
        out["wrench cone"] = wrench_cone(dyn, MU, {c.frame: (HALF_LENGTH, HALF_WIDTH) for c in dyn.contacts})
    else:
        out["wrench cone"] = wrench_cone(dyn, MU)
    return dyn, X, U, out


@pytest.mark.parametrize("name", ["solo12", "talos"])
def test_contact_constraints_pass_the_derivative_checker(name, rng):
    dyn, X, U, constraints = contact_constraints(name, rng)
    weight = dyn.model.total_mass * GRAVITY
    for kind, c in constraints.items():
        pushing = kind == "normal forces"  # f_z >= minimum; the others are rows <= 0
        assert c.scale == pytest.approx(weight) and (pushing or (c.upper == 0.0).all() and np.isneginf(c.lower).all())
        assert_passes(check_derivatives(c, X, U), {"r", "R_x", "R_u"})


# ---------------------------------------------------------------- the checker on residuals and constraints


class Toy(Residual):
    """``r = [sin s0 + u0 s1, ṡ1² + u1]`` on a fixed base of 2 joints with 2 controls; ``wrong`` breaks one part:
    "R_x", "R_u", "r" (derivatives' r differs from value) or "uses_u" (says it ignores u, which it uses)."""

    nr, nu = 2, 2

    def __init__(self, wrong: str | None = None):
        self.state_space, self.wrong = StateSpace(2, False), wrong
        self.uses_u = wrong != "uses_u"

    def __repr__(self) -> str:
        return f"Toy({self.wrong})"

    def value(self, X, U):
        _, U = self._check(X, U)
        return np.stack([np.sin(X.s[:, 0]) + U[:, 0] * X.s[:, 1], X.v[:, 1] ** 2 + U[:, 1]], axis=1)

    def derivatives(self, X, U):
        r = self.value(X, U)
        _, U = self._check(X, U)
        N = len(X)
        R_x, R_u = np.zeros((N, 2, 4)), np.zeros((N, 2, 2))
        R_x[:, 0, 0], R_x[:, 0, 1], R_x[:, 1, 3] = np.cos(X.s[:, 0]), U[:, 0], 2.0 * X.v[:, 1]
        R_u[:, 0, 0], R_u[:, 1, 1] = X.s[:, 1], 1.0
        if self.wrong == "R_x":
            R_x[:, 1, 3] = X.v[:, 1]
        if self.wrong == "R_u":
            R_u[:, 0, 0] *= -1.0
        if self.wrong == "r":
            r = r + 1e-3
        return ResidualDerivatives(r, R_x, R_u)


def test_the_checker_flags_wrong_residual_and_constraint_derivatives(rng):
    space = StateSpace(2, False)
    X, U = space.random_trajectory(3, rng), rng.standard_normal((3, 2))
    for obj in (Toy(), Constraint(Toy(), upper=1.0)):
        assert_passes(check_derivatives(obj, X, U), {"r", "R_x", "R_u"})
    for wrong, block in [("R_x", "R_x"), ("R_u", "R_u"), ("r", "r"), ("uses_u", "R_u")]:
        for obj in (Toy(wrong), Constraint(Toy(wrong), lower=-1.0, upper=1.0, scale=3.0)):
            report = check_derivatives(obj, X, U)
            assert not report.ok and [b.name for b in report.blocks if not b.ok] == [block], f"{wrong}\n{report}"
            assert report[block].relative_error > 1e-4, str(report)
            assert "WRONG" in str(report)
    # uses_u False: the costs ignore R_u, so a residual that does depend on u fails where the dependence is
    report = check_derivatives(Toy("uses_u"), X[0], U[0])
    assert report["R_u"].component.endswith("(uses_u is False)") and report["R_u"].analytic == 0.0
    # the residual's state space and control size rule the inputs
    with pytest.raises(ValueError, match="u is required"):
        check_derivatives(Constraint(Toy()), X)
    with pytest.raises(ValueError, match=r"u must have shape \(2,\) for a State"):
        check_derivatives(Constraint(Toy()), X[0], np.zeros(3))
    with pytest.raises(TypeError, match="a Residual, a Constraint, a CostModel or a DiscreteDynamics, got Violation"):
        check_derivatives(Violation(0.0, 0, 1.0), X)


# ---------------------------------------------------------------- the augmented-Lagrangian activation

# rows: an equality, an upper bound, a lower bound, a two-sided row and a free row; scale 2.5
LOWER = np.array([0.5, -np.inf, -1.0, -1.0, -np.inf])
UPPER = np.array([0.5, 1.0, np.inf, 2.0, np.inf])
SCALE, RHO = 2.5, 7.0


def al_activation(multipliers: np.ndarray) -> AugmentedLagrangianActivation:
    return AugmentedLagrangianActivation(Constraint(ControlResidual(5), LOWER, UPPER, SCALE), multipliers,
                                         np.array([RHO]))


def kinks(lam: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The residuals (N, nr) where the shifted ``ŝ = r/σ + λ/ρ`` meets the lower and the upper bound."""
    return LOWER - SCALE * lam / RHO, UPPER - SCALE * lam / RHO


def column(f, r: np.ndarray, i: int, h: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """f(r − h eᵢ), f(r), f(r + h eᵢ): every knot's row i moved at once (each knot's value depends on its own row)."""
    e = np.zeros(r.shape[1])
    e[i] = h
    return f(r - e), f(r), f(r + e)


def test_augmented_lagrangian_value_by_hand():
    """One upper-bounded row, σ = 2, upper 1 (½ scaled), λ = 0.3, ρ = 10: at r = 2, ŝ = 1 + 0.03 = 1.03, the excess
    0.53, ψ = 5 · 0.53² − 0.09 / 20 = 1.4, ∇ψ = ρ · 0.53 / σ = 2.65, ∇²ψ = ρ / σ² = 2.5; inside (r = 0) ψ = −0.0045
    with zero derivatives; at the bound with the multiplier consistent (ŝ − Π(ŝ) = λ/ρ), λ⁺ = σ ∇ψ = λ."""
    c = Constraint(ControlResidual(1), upper=1.0, scale=2.0)
    a = AugmentedLagrangianActivation(c, np.array([[0.3], [0.3], [0.3]]), np.array([10.0]))
    r = np.array([[2.0], [0.0], [1.0]])
    d = a.derivatives(r)
    assert np.allclose(a.value(r), [1.4, -0.0045, 0.0], rtol=1e-13, atol=1e-15)
    assert np.array_equal(d.value, a.value(r))
    assert np.allclose(d.gradient[:, 0], [2.65, 0.0, 0.15], rtol=1e-13)
    assert np.allclose(2.0 * d.gradient[2, 0], 0.3, rtol=1e-13)  # the first-order update keeps a converged λ
    assert np.array_equal(d.diagonal[:, 0], [2.5, 0.0, 2.5])
    # exactly on its bound a row keeps its curvature ρ/σ², an equality (ψ is smooth there: a converged equality must
    # not lose its Hessian) and an inequality alike (a trial clipped at the bound stops there: the model must see
    # the bound it rests on); just inside, an inequality row has none
    c = Constraint(ControlResidual(2), lower=[1.0, -np.inf], upper=1.0, scale=2.0)
    a = AugmentedLagrangianActivation(c, np.zeros((1, 2)), np.array([10.0]))
    d = a.derivatives(np.array([[1.0, 1.0]]))
    assert np.array_equal(d.gradient, [[0.0, 0.0]]) and np.array_equal(d.diagonal, [[2.5, 2.5]])
    assert np.array_equal(a.derivatives(np.array([[1.0, 1.0 - 1e-12]])).diagonal, [[2.5, 0.0]])


def test_augmented_lagrangian_derivatives_match_finite_differences(rng):
    """Gradient and Hessian of ψ against differences of its value at 400 residuals spread across every row's bounds
    (inside, above, below), and at residuals within the step of a bound (the differences straddle the kink)."""
    N = 400
    lam = rng.uniform(-1.0, 1.0, (N, 5))
    a = al_activation(lam)
    low, up = kinks(lam)
    r = rng.uniform(-6.0, 6.0, (N, 5))
    # where the kinks are: inside, above and below every bounded row, and both sides of the equality
    s, lo, hi = r / SCALE + lam / RHO, LOWER / SCALE, UPPER / SCALE
    assert (s > hi).any(axis=0)[[0, 1, 3]].all()
    assert ((s < hi) & (s > lo)).any(axis=0)[[1, 2, 3]].all()
    assert (s < lo).any(axis=0)[[0, 2, 3]].all()
    d = a.derivatives(r)
    assert np.array_equal(d.value, a.value(r))
    # gradient: ψ is C¹ and piecewise quadratic, so central differences are exact but for round-off (|ψ| ≲ 50:
    # 1e-16 · 50 / h ≲ 1e-8) away from the kinks, and off by at most ρ h / (4 σ²) when they straddle one
    h = 1e-6
    grad_tol = RHO * h / SCALE ** 2 + 1e-8
    straddling = r.copy()  # the free row 4 stays where it is
    straddling[:, 0], straddling[:, 1], straddling[:, 2] = low[:, 0], up[:, 1], low[:, 2]
    straddling[:, 3] = np.where(rng.integers(0, 2, N) == 1, low[:, 3], up[:, 3])
    straddling += rng.uniform(-0.5 * h, 0.5 * h, (N, 5))
    for point in (r, straddling):
        g = a.derivatives(point).gradient
        for i in range(5):
            minus, _, plus = column(a.value, point, i, h)
            assert np.abs(g[:, i] - (plus - minus) / (2 * h)).max() <= grad_tol, i
    # the Hessian: second differences of the value, exact on a quadratic piece; step 1e-3, points at least 2e-3
    # from a kink (round-off 1e-16 · 50 / 1e-6 = 5e-9)
    h = 1e-3
    away = (np.abs(r - low) > 2 * h) & (np.abs(r - up) > 2 * h)
    assert away.mean() > 0.99
    for i in range(5):
        minus, mid, plus = column(a.value, r, i, h)
        second = (plus - 2.0 * mid + minus) / h ** 2
        ok = away[:, i]
        assert np.abs(d.diagonal[ok, i] - second[ok]).max() <= 1e-6, i
        outside = (r[:, i] < low[:, i]) | (r[:, i] > up[:, i]) | (LOWER[i] == UPPER[i])
        assert np.array_equal(d.diagonal[:, i], np.where(outside, RHO / SCALE ** 2, 0.0)), i
    # rows are separable: the mixed second differences vanish, so the diagonal is the whole Hessian
    for i, j in [(0, 1), (1, 3), (2, 3), (3, 4)]:
        ei, ej = np.eye(5)[i] * h, np.eye(5)[j] * h
        mixed = (a.value(r + ei + ej) - a.value(r + ei - ej) - a.value(r - ei + ej) + a.value(r - ei - ej)) / (4 * h * h)
        both = away[:, i] & away[:, j]
        assert np.abs(mixed[both]).max() <= 1e-6, (i, j)
    # the free row never counts; the gradient is the first-order multiplier estimate over σ
    assert (d.gradient[:, 4] == 0.0).all() and (d.diagonal[:, 4] == 0.0).all()
    e = s - np.clip(s, lo, hi)
    assert np.allclose(d.gradient * SCALE, RHO * e, rtol=1e-13, atol=1e-13)
    assert np.allclose(d.value, 0.5 * RHO * (e * e).sum(1) - (lam * lam).sum(1) / (2 * RHO), rtol=1e-13)


def test_augmented_lagrangian_cost_passes_the_derivative_checker():
    """``ResidualCost(JointPositionResidual, ψ)`` on UR5 (a linear residual: its Gauss–Newton Hessian is exact, and
    so are ψ's away from the kinks): one knot, as the checker evaluates the numeric side knot by knot and the
    multipliers are per knot. Joints 0..5: equality, upper, lower, two-sided above, two-sided inside, free."""
    model = robot("ur5")
    lower = np.array([0.2, -np.inf, 0.5, -0.3, -0.3, -np.inf])
    upper = np.array([0.2, 0.1, np.inf, 0.3, 0.3, np.inf])
    c = Constraint(JointPositionResidual(model), lower, upper, scale=0.5)
    lam = np.array([[0.4, 0.8, -0.6, 0.2, 0.3, 0.0]])
    x = State(None, np.array([0.7, 0.9, 0.1, 0.6, 0.05, 2.0]), np.array([0.3, -0.2, 0.1, 0.0, 0.5, -1.0]))
    cost = ResidualCost(c.residual, AugmentedLagrangianActivation(c, lam, np.array([20.0])))
    s = x.s / 0.5 + lam[0] / 20.0
    assert list(s - np.clip(s, lower / 0.5, upper / 0.5) != 0.0) == [True, True, True, True, False, False]
    report = check_derivatives(cost, x, np.zeros(model.n))
    assert report.ok and {"l", "l_x", "l_u", "l_xx", "l_xu", "l_uu"} <= {b.name for b in report.blocks}, str(report)
    assert report.worst.relative_error <= FD_TOL
    assert np.abs(cost.derivatives(Trajectory.repeat(x, 1), np.zeros((1, model.n))).l_x).max() > 1.0


# ---------------------------------------------------------------- construction errors


def test_constraints_reject_bad_input():
    model = robot("ur5")
    q = JointPositionResidual(model)
    with pytest.raises(TypeError, match="residual must be a Residual, got ResidualCost"):
        Constraint(control_regularization(6))
    with pytest.raises(TypeError, match="residual must be a Residual, got ndarray"):
        Constraint(np.zeros(6))
    with pytest.raises(ValueError, match=r"lower must be a number or an array of shape \(6,\).*got shape \(5,\)"):
        Constraint(q, lower=np.zeros(5))
    with pytest.raises(ValueError, match=r"upper must be a number or an array of shape \(6,\).*got shape \(2, 6\)"):
        Constraint(q, upper=np.zeros((2, 6)))
    with pytest.raises(ValueError, match=r"upper contains NaN \(row 3\)"):
        Constraint(q, upper=[1.0, 1.0, 1.0, np.nan, 1.0, 1.0])
    with pytest.raises(ValueError, match=r"lower contains NaN \(row 0\)"):
        Constraint(q, lower=np.nan)
    with pytest.raises(ValueError, match=r"lower = \+inf or upper = -inf can never be met"):
        Constraint(q, lower=[0.0, np.inf, 0.0, 0.0, 0.0, 0.0])
    with pytest.raises(ValueError, match=r"lower = \+inf or upper = -inf can never be met"):
        Constraint(q, upper=-np.inf)
    for scale in (0.0, -1.0, np.inf, np.nan, "1", None, np.ones(1)):
        with pytest.raises(ValueError, match="scale must be a finite number > 0"):
            Constraint(q, upper=1.0, scale=scale)
    with pytest.raises(ValueError, match="fraction must be in"):
        joint_velocity_limits(model, fraction=0.0)
    with pytest.raises(ValueError, match="fraction must be in"):
        torque_limits(model, fraction=1.5)
    # the contact built-ins take the knots' contact dynamics (model, contacts and solution come from it)
    with pytest.raises(TypeError, match="friction_cone: dynamics must be the ContactRobotDynamics of the knots, got "
                                        "RobotModel"):
        friction_cone(model, 0, MU)
    with pytest.raises(TypeError, match="wrench_cone: dynamics must be the ContactRobotDynamics .* got RobotDynamics"):
        wrench_cone(RobotDynamics(model, 0.01), MU)


def test_constraint_bounds_and_kinds():
    model = robot("panda")
    q = JointPositionResidual(model)
    c = Constraint(q)
    assert (c.lower == 0.0).all() and (c.upper == 0.0).all() and c.equality.all() and "equality" in repr(c)
    c = Constraint(q, upper=0.5)
    assert np.isneginf(c.lower).all() and (c.upper == 0.5).all() and not c.equality.any() and "inequality" in repr(c)
    c = Constraint(q, lower=[0.0] * 9, upper=[0.0] * 8 + [1.0])
    assert "mixed" in repr(c) and not c.contradictory.any()
    assert list(Constraint(q, lower=1.0, upper=[2.0] * 8 + [0.5]).contradictory) == [False] * 8 + [True]
    limits = joint_position_limits(model, margin=0.1)
    assert np.allclose(limits.lower, model.lower_limit + 0.1) and np.allclose(limits.upper, model.upper_limit - 0.1)
    velocity = joint_velocity_limits(model, fraction=0.5)
    assert np.allclose(velocity.upper, 0.5 * model.velocity_limit) and np.allclose(velocity.lower, -velocity.upper)
    assert np.allclose(torque_limits(model).upper, model.effort_limit)


def test_constraint_sets_reject_bad_input():
    ur5, panda = robot("ur5"), robot("panda")
    s = ConstraintSet(ur5.state_space, ur5.n).add("q", joint_position_limits(ur5))
    with pytest.raises(ValueError, match="a constraint called 'q' exists already"):
        s.add("q", torque_limits(ur5))
    with pytest.raises(ValueError, match=r"the constraint has nu = 0, the set nu = 6"):
        s.add("terminal q", joint_position_limits(ur5, nu=0))
    with pytest.raises(ValueError, match=r"the constraint has nu = 6, the set nu = 0 \(for the terminal knot, build "
                                         r"the residual with nu=0\)"):
        ConstraintSet(ur5.state_space, 0).add("q", joint_position_limits(ur5))
    with pytest.raises(ValueError, match=r"ConstraintSet.add\('panda q'\): the constraint is on .* the set on"):
        s.add("panda q", joint_position_limits(panda, nu=6))
    with pytest.raises(TypeError, match="expected a Constraint, got JointPositionResidual"):
        s.add("bare", JointPositionResidual(ur5))
    with pytest.raises(ValueError, match="name must be a non-empty string"):
        s.add("", torque_limits(ur5))
    with pytest.raises(TypeError, match="state_space must be a StateSpace, got RobotModel"):
        ConstraintSet(ur5, 6)
    for nu in (-1, 1.5, True):
        with pytest.raises(ValueError, match="nu must be an integer >= 0"):
            ConstraintSet(ur5.state_space, nu)
    assert list(s) == ["q"] and len(s) == 1 and s["q"].nr == 6 and "q: 6 row(s)" in repr(s)


def arm_problem(model, running_sets, terminal_set=None, T: int | None = None) -> Problem:
    """A problem on ``model`` with torque dynamics, a control cost, a state cost at the end, and the given sets (one
    per running knot, or one for all of ``T``)."""
    dyn, cost = RobotDynamics(model, 0.01), control_regularization(model.n)
    terminal = state_regularization(model.state_space, model.state_space.random(0), 1.0, 0)
    if T is not None:
        return Problem(model.state_space.random(0), ActionModel(dyn, cost, constraints=running_sets), terminal, T,
                       terminal_constraints=terminal_set)
    models = [ActionModel(dyn, cost, constraints=s) for s in running_sets]
    return Problem(model.state_space.random(0), models, terminal, terminal_constraints=terminal_set)


def test_problems_reject_constraints_of_the_wrong_size():
    model = robot("ur5")
    dyn, cost = RobotDynamics(model, 0.01), control_regularization(model.n)
    terminal_set = ConstraintSet(model.state_space, 0).add("q", joint_position_limits(model, nu=0))
    with pytest.raises(ValueError, match=r"ActionModel: the constraints have nu = 0, the dynamics have nu = 6"):
        ActionModel(dyn, cost, constraints=terminal_set)
    with pytest.raises(ValueError, match="ActionModel: constraints must be a ConstraintSet, got dict"):
        ActionModel(dyn, cost, constraints={"q": joint_position_limits(model)})
    other = ConstraintSet(StateSpace(6, True), model.n)
    with pytest.raises(ValueError, match="ActionModel: the constraints are on .* the dynamics on"):
        ActionModel(dyn, cost, constraints=other)
    running_set = ConstraintSet(model.state_space, model.n).add("q", joint_position_limits(model))
    with pytest.raises(ValueError, match=r"terminal_constraints: the constraints have nu = 6, the terminal knot takes nu = 0"):
        arm_problem(model, running_set, running_set, T=3)
    problem = arm_problem(model, running_set, terminal_set, T=3)
    assert problem.has_constraints
    assert problem.constraint_groups() == [(0, 3, running_set), (3, 4, terminal_set)]
    assert not arm_problem(model, None, None, T=3).has_constraints


# ---------------------------------------------------------------- violations, by hand


def test_problem_violations_are_the_largest_per_name_in_its_unit():
    """UR5, T = 3. Knots 0-1 share {q: s0 ≤ 0.5, s1 ≥ −0.2; tau: |u| ≤ 10 in units of 5}, knot 2 has {q: s ≤ 0.3},
    the terminal knot {q: s ≤ 0.5 in units of 2, com: c = target}. With

        s[0] = (0.2, 0, 0, 0, 0, 0)      u[0] = (12, 0, ...)     q 0,    tau 2/5 = 0.4
        s[1] = (0.9, −0.5, 0, ...)       u[1] = (0, −25, ...)    q 0.4,  tau 15/5 = 3
        s[2] = (0.1, 0, 0.45, 0, ...)    u[2] = (100, ...)       q 0.15 (no tau here)
        s[3] = (0, 0, 0, 1.6, 0, 0)                              q 1.1/2 = 0.55, com |(0.01, −0.02, 0)| = 0.02

    q's largest is the terminal one (unit 2), tau's at knot 1 (unit 5), com's at the terminal knot."""
    model = robot("ur5")
    n = model.n
    inf = np.inf
    q01 = Constraint(JointPositionResidual(model), [-inf, -0.2] + [-inf] * 4, [0.5] + [inf] * 5)
    tau = Constraint(JointTorqueResidual(model), -10.0, 10.0, scale=5.0)
    first = ConstraintSet(model.state_space, n).add("q", q01).add("tau", tau)
    second = ConstraintSet(model.state_space, n).add("q", Constraint(JointPositionResidual(model), upper=0.3))
    S = np.zeros((4, n))
    S[0, 0], S[1, :2], S[2, [0, 2]], S[3, 3] = 0.2, (0.9, -0.5), (0.1, 0.45), 1.6
    X = Trajectory(None, S, np.zeros((4, n)))
    target = CenterOfMassResidual(model, np.zeros(3), 0).value(X[3:], None)[0] - np.array([0.01, -0.02, 0.0])
    last = (ConstraintSet(model.state_space, 0).add("q", Constraint(JointPositionResidual(model, 0), upper=0.5, scale=2.0))
            .add("com", com_position(model, target, nu=0)))
    U = np.zeros((3, n))
    U[0, 0], U[1, 1], U[2, :] = 12.0, -25.0, 100.0
    problem = arm_problem(model, [first, first, second], last)
    assert problem.constraint_groups() == [(0, 2, first), (2, 3, second), (3, 4, last)]
    per_knot = first.violations(X[0:2], U[0:2])
    assert np.allclose(per_knot["q"], [0.0, 0.4], rtol=0, atol=1e-15) and np.allclose(per_knot["tau"], [0.4, 3.0])
    v = problem.violations(X, U)
    assert set(v) == {"q", "tau", "com"}
    assert v["q"].knot == 3 and v["q"].value == pytest.approx(0.55, abs=1e-15) and v["q"].unit == 2.0
    assert v["tau"] == Violation(pytest.approx(3.0), 1, 5.0)
    assert v["com"].knot == 3 and v["com"].value == pytest.approx(0.02, abs=1e-12) and v["com"].unit == 1.0
    # without the terminal set, q's largest is the running one at knot 1
    v = arm_problem(model, [first, first, second]).violations(X, U)
    assert (v["q"].knot, v["q"].unit) == (1, 1.0) and v["q"].value == pytest.approx(0.4, abs=1e-15)
    assert problem.contradictory_constraints() == []


def test_friction_cone_violations_are_in_units_of_the_robots_weight(rng):
    """Solo12 on its feet with random torques: the friction-cone violation of one foot at each knot is the largest
    positive part of its pyramid rows [f_x − μ f_z/√2, f_y − μ f_z/√2, −f_x − μ f_z/√2, −f_y − μ f_z/√2, −f_z],
    from the forces of ``contact_dynamics``, divided by m g."""
    model, contacts, X, U = case("solo12", rng, N=4)
    dyn = ContactRobotDynamics(model, 0.01, contacts)
    cone = friction_cone(dyn, 2, MU)
    running = ConstraintSet(model.state_space, model.n).add("cone", cone)
    problem = Problem(X[0], ActionModel(dyn, control_regularization(model.n), constraints=running),
                      state_regularization(model.state_space, X[0], 1.0, 0), 3)
    U = 5.0 * U[:3]
    tau = np.concatenate([np.zeros((3, 6)), U], axis=1)
    forces = contact_dynamics(model, X[:3], tau, dyn.contacts).lagrangian[:, 6:9]
    fx, fy, fz = forces.T
    c = MU * fz / math.sqrt(2.0)
    rows = np.stack([fx - c, fy - c, -fx - c, -fy - c, -fz], axis=1)
    per_knot = np.maximum(rows, 0.0).max(axis=1) / (model.total_mass * GRAVITY)
    assert per_knot.max() > 0.0  # a violated knot, so that the scale shows
    v = problem.violations(X, U)["cone"]
    assert v.knot == int(np.argmax(per_knot)) and v.unit == pytest.approx(model.total_mass * 9.81)
    assert v.value == pytest.approx(per_knot.max(), rel=1e-10)
    assert np.allclose(running.violations(X[:3], U)["cone"], per_knot, rtol=1e-10, atol=1e-14)


def test_normal_forces_bound_each_contacts_normal_row_only(rng):
    """Solo12 on its feet: ``normal_forces`` has lower bounds on the f_z rows of every contact (a fraction of the
    weight), nothing else, and its violation at a knot is the largest shortfall of a normal force, in weights."""
    model, contacts, X, U = case("solo12", rng, N=4)
    dyn = ContactRobotDynamics(model, 0.01, contacts)
    weight = model.total_mass * GRAVITY
    c = normal_forces(dyn, 0.3)
    expected = np.full(c.nr, -np.inf)
    expected[2::3] = 0.3 * weight
    np.testing.assert_array_equal(c.lower, expected)
    assert np.isposinf(c.upper).all() and c.scale == pytest.approx(weight)
    tau = np.concatenate([np.zeros((len(U), 6)), U], axis=1)
    fz = contact_dynamics(model, X[:len(U)], tau, dyn.contacts).lagrangian[:, 2::3]
    np.testing.assert_allclose(c.violation(X[:len(U)], U), np.maximum(0.3 * weight - fz, 0.0).max(axis=1) / weight,
                               rtol=1e-10, atol=1e-14)
    with pytest.raises(ValueError, match="normal_forces: minimum must be a finite number"):
        normal_forces(dyn, float("nan"))


def test_contradictory_constraints_are_named_with_their_knots_and_row():
    model = robot("ur5")
    n = model.n
    fine = ConstraintSet(model.state_space, n).add("q", joint_position_limits(model))
    bad = (ConstraintSet(model.state_space, n).add("tau", torque_limits(model))
           .add("q", Constraint(JointPositionResidual(model), [0.0, 0.0, 0.5, 0.0, 0.0, 0.0], 0.1)))
    last = (ConstraintSet(model.state_space, 0).add("q", joint_position_limits(model, nu=0))
            .add("v", Constraint(JointPositionResidual(model, 0), lower=[1.0] + [-1.0] * 5, upper=-1.0)))
    problem = arm_problem(model, [fine, bad, bad, fine], last)
    assert problem.contradictory_constraints() == ["q (knots 1-2, row 2: lower 0.5 > upper 0.1)",
                                                   "v (knots 4-4, row 0: lower 1 > upper -1)"]
    assert arm_problem(model, [fine] * 4, None).contradictory_constraints() == []
    # joint limits narrower than twice the margin cannot both hold: accepted at construction, reported here
    tight = ConstraintSet(model.state_space, n).add("limits", joint_position_limits(model, margin=3.5))
    assert arm_problem(model, tight, None, T=2).contradictory_constraints() == [
        "limits (knots 0-1, row 2: lower 0.358407 > upper -0.358407)"]


def test_a_contradictory_row_is_violated_wherever_the_residual_is():
    model = robot("ur5")
    c = Constraint(JointPositionResidual(model), lower=1.0, upper=0.0, scale=2.0)
    X = Trajectory(None, np.full((1, model.n), 0.5), np.zeros((1, model.n)))
    assert c.violation(X, np.zeros((1, model.n)))[0] == pytest.approx(0.25)  # max(0.5 − 0, 1 − 0.5) / 2


def test_a_set_without_a_state_space_is_checked_constraint_by_constraint():
    ur5, panda = robot("ur5"), robot("panda")
    loose = ConstraintSet(None, ur5.n).add("q", Constraint(JointPositionResidual(panda, nu=ur5.n)))
    with pytest.raises(ValueError, match="ActionModel: the constraint 'q' is on"):
        ActionModel(RobotDynamics(ur5, 0.01), control_regularization(ur5.n), constraints=loose)
    with pytest.raises(ValueError, match="scale must be a finite number > 0, got True"):
        Constraint(JointPositionResidual(ur5), scale=True)
