"""Compiled cost tables (``compiled_costs.CompiledCosts``, and ``Problem``'s costs, which go through them) against
the per-term path.

The oracle is each ``ResidualCost``'s own ``value`` / ``derivatives`` (its residual's kernels, its activation, the
Gauss–Newton products of ``ResidualCost``), summed with the terms' weights into their knots; at the problem level,
every running knot's cost evaluated term by term at that knot alone, and the terminal cost's terms at the last knot,
including the terms the table does not take (contact residuals, ``FunctionCost``, ``SmoothAbs``). Every residual
kind meets every activation kind on a fixed base (ur5) and floating bases (solo12, Talos), running (``nu = n``) and
terminal (``nu = 0``); the values and the six derivative blocks agree to 1e-12 relative. The last tests are the
bugs they found, fixed.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
import warnings
from functools import lru_cache

import numpy as np
import pytest

from conftest import relative_error
from lietraj.dynamics import se3
from lietraj.dynamics.contacts.contact_dynamics import Contact
from lietraj.dynamics.kinematics.center_of_mass import center_of_mass
from lietraj.dynamics.kinematics.kinematics import frame_placement
from lietraj.dynamics.lie.state import State, Trajectory
from lietraj.dynamics.model.robots import load_robot
from lietraj.optimal_control.constraints import Constraint
from lietraj.optimal_control.costs.activations import (
    AugmentedLagrangianActivation,
    Quadratic,
    QuadraticBarrier,
    SmoothAbs,
    WeightedQuadratic,
)
from lietraj.optimal_control.costs.compiled_costs import CompiledCosts, compilable, table_model
from lietraj.optimal_control.costs.contact_residuals import (
    CenterOfPressureResidual,
    ContactForceResidual,
    FrictionConeResidual,
    WrenchConeResidual,
)
from lietraj.optimal_control.costs.costs import CostDerivatives, CostSum, FunctionCost, ResidualCost
from lietraj.optimal_control.costs.residuals import (
    CenterOfMassResidual,
    ControlResidual,
    FramePlacementResidual,
    FrameRotationResidual,
    FrameTranslationResidual,
    JointPositionResidual,
    JointTorqueResidual,
    JointVelocityResidual,
    StateResidual,
)
from lietraj.optimal_control.dynamics.contact_robot_dynamics import ContactRobotDynamics
from lietraj.optimal_control.dynamics.discrete_dynamics import RobotDynamics
from lietraj.optimal_control.problem import ActionModel, Problem
from lietraj.problems import squat, talos_reach, trot
from lietraj.problems.support import HUMANOIDS, QUADRUPEDS, robot_with_feet

TOL = 1e-12
NAMES = ("l", "l_x", "l_u", "l_xx", "l_xu", "l_uu")
# a frame at the end of a limb and one nearer the root (fewer Jacobian columns), per robot
FRAMES = {"ur5": ("tool0", "forearm_link"), "solo12": ("FL_FOOT", "base_link"),
          "talos": ("gripper_left_joint", "torso_2_link")}
ACTIVATIONS = ("quadratic", "weighted", "matrix", "barrier")


@lru_cache(maxsize=None)
def robot(name: str, mimic: bool = False):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return load_robot(name, mimic=mimic)


def near(model, rng, scale: float = 0.4) -> State:
    """A state near the model's reference posture: its base pose moved by ``se3.exp`` of a random twist, its joints
    moved, random velocities."""
    x = model.reference_state()
    H = None if x.H is None else x.H @ se3.exp(scale * rng.standard_normal(6))
    return State(H, x.s + scale * rng.standard_normal(model.n), rng.standard_normal(model.nv))


def random_knots(model, rng, N: int) -> Trajectory:
    return Trajectory.from_states([near(model, rng) for _ in range(N)])


def residuals(model, nu: int, rng, N: int = 1) -> dict:
    """One residual of every compiled kind with random references: fixed ones, or per-knot ones of N rows when
    ``N > 1`` (for the kinds that take them)."""
    space, (tip, root) = model.state_space, FRAMES[model.name]
    x_ref = near(model, rng)
    T = frame_placement(model, x_ref, tip) @ se3.exp(0.3 * rng.standard_normal(6))
    c = center_of_mass(model, x_ref)
    out = {
        "state": StateResidual(space, x_ref if N == 1 else random_knots(model, rng, N), nu),
        "joint position": JointPositionResidual(model, nu),
        "joint velocity": JointVelocityResidual(model, nu),
        "frame placement": FramePlacementResidual(model, tip, T, nu),
        "root frame placement": FramePlacementResidual(
            model, root, frame_placement(model, near(model, rng), root), nu),
        "frame rotation": FrameRotationResidual(model, tip, T[:3, :3], nu),
        "frame translation": FrameTranslationResidual(
            model, tip, T[:3, 3] + (0.0 if N == 1 else 0.1 * rng.standard_normal((N, 3))), nu),
        "com": CenterOfMassResidual(model, c + 0.1 * rng.standard_normal(3 if N == 1 else (N, 3)), nu),
    }
    if nu:
        out["control"] = ControlResidual(nu, rng.standard_normal(nu if N == 1 else (N, nu)))
        out["joint torque"] = JointTorqueResidual(model)
    return out


def barrier_around(r: np.ndarray) -> QuadraticBarrier:
    """A box on the residuals' components that some knots leave and others do not: per component in turn, only an
    upper bound at the median (half the knots above it), only a lower bound at the median, both infinite, a narrow
    box about the median, a box containing every knot."""
    m = np.median(r, axis=0)
    lower, upper = np.empty(r.shape[1]), np.empty(r.shape[1])
    for i in range(r.shape[1]):
        lower[i], upper[i] = [(-np.inf, m[i]), (m[i], np.inf), (-np.inf, np.inf), (m[i] - 1e-3, m[i] + 1e-3),
                              (r[:, i].min() - 1.0, r[:, i].max() + 1.0)][i % 5]
    return QuadraticBarrier(lower, upper)


def activation(kind: str, residual, X, U, rng):
    nr = residual.nr
    if kind == "quadratic":
        return Quadratic()
    if kind == "weighted":
        return WeightedQuadratic(rng.uniform(0.1, 3.0, nr))
    if kind == "matrix":
        B = rng.standard_normal((nr, nr))
        return WeightedQuadratic(B @ B.T / nr)
    return barrier_around(residual.value(X, U))


def controls(nu: int, rng, N: int) -> np.ndarray | None:
    return rng.standard_normal((N, nu)) if nu else None


# ---- the oracle and the table, on the same items -----------------------------------------------------------------


def oracle(items, X, U, ndx: int, nu: int) -> CostDerivatives:
    """Each term's own derivatives at its knots, weighted, summed into the rows of the knots."""
    out = CostDerivatives.zeros(len(X), ndx, nu)
    for cost, weight, knots in items:
        d = cost.derivatives(X[knots], None if U is None else U[knots])
        for name in NAMES:
            getattr(out, name)[knots] += weight * getattr(d, name)
    return out


def oracle_values(items, X, U) -> np.ndarray:
    out = np.zeros(len(X))
    for cost, weight, knots in items:
        out[knots] += weight * cost.value(X[knots], None if U is None else U[knots])
    return out


def table_for(items, model, nu: int, N: int) -> CompiledCosts:
    costs = [cost for cost, _, _ in items]
    assert all(compilable(cost, model) for cost in costs)
    return CompiledCosts(items, model.state_space, nu, N, table_model(costs))


def filled(N: int, ndx: int, nu: int, fill) -> CostDerivatives:
    """Derivative arrays of N knots holding ``fill(shape)``."""
    d = CostDerivatives.zeros(N, ndx, nu)
    return CostDerivatives(*(fill(getattr(d, name).shape) for name in NAMES))


def evaluate(table: CompiledCosts, X, U, ndx: int, nu: int) -> tuple[CostDerivatives, np.ndarray]:
    """The table's derivatives and values, each into arrays full of NaN (``clear`` must write every row)."""
    N = len(X)
    d = filled(N, ndx, nu, lambda shape: np.full(shape, np.nan))
    table.add(X, U, d, clear=True)
    values = np.full(N, np.nan)
    table.add(X, U, values, clear=True)
    return d, values


def error(a, b) -> float:
    """``relative_error``, and 0 between two empty blocks of the same shape (a terminal cost's control blocks)."""
    a, b = np.asarray(a), np.asarray(b)
    assert a.shape == b.shape
    return 0.0 if a.size == 0 else relative_error(a, b)


def disagreements(d: CostDerivatives, values: np.ndarray, expected: CostDerivatives, expected_values,
                  what: str) -> list[str]:
    out = [f"{what}: {name} off by {error(getattr(d, name), getattr(expected, name)):.1e}"
           for name in NAMES if not error(getattr(d, name), getattr(expected, name)) <= TOL]
    if not relative_error(values, expected_values) <= TOL:
        out.append(f"{what}: values off by {relative_error(values, expected_values):.1e}")
    return out


def check_table(items, model, X, U, nu: int, what: str = "table") -> list[str]:
    ndx = model.state_space.ndx
    d, values = evaluate(table_for(items, model, nu, len(X)), X, U, ndx, nu)
    return disagreements(d, values, oracle(items, X, U, ndx, nu), oracle_values(items, X, U), what)


# ---- 1. every residual through every activation ---------------------------------------------------------------


@pytest.mark.parametrize("name, terminal", [("ur5", False), ("ur5", True), ("solo12", False), ("solo12", True),
                                            ("talos", False)])
def test_every_residual_through_every_activation_equals_its_own_derivatives(name, terminal, rng):
    """Each term alone (weight 0.7 at every knot), then all of them in one table with random weights at random
    knots (the terms share the knot's kinematics and the kernel's work arrays)."""
    model, N = robot(name), 4
    nu = 0 if terminal else model.n
    X, U = random_knots(model, rng, N), controls(nu, rng, N)
    every, failures = [], []
    terms = residuals(model, nu, rng)
    for kind, residual in terms.items():
        for act in ACTIVATIONS:
            cost = ResidualCost(residual, activation(act, residual, X, U, rng))
            items = [(cost, 0.7, np.arange(N))]
            if kind == "frame rotation":  # not alone: test_a_frame_rotation_alone_stays_in_its_work_arrays
                items.append((ResidualCost(terms["root frame placement"]), 0.2, np.arange(N)))
            failures += check_table(items, model, X, U, nu, f"{kind} x {act}")
            knots = np.sort(rng.choice(N, size=rng.integers(1, N + 1), replace=False)).astype(np.int64)
            every.append((cost, rng.uniform(0.1, 10.0), knots))
    rng.shuffle(every)
    failures += check_table(every, model, X, U, nu, f"all {len(every)} terms")
    assert not failures, "\n".join(failures)


def test_barriers_are_active_on_some_components_and_not_others(rng):
    """The barrier cases above are not vacuous: some components outside their box (gradient), some inside (none)."""
    model = robot("solo12")
    X, U = random_knots(model, rng, 4), controls(model.n, rng, 4)
    for residual in residuals(model, model.n, rng).values():
        d = ResidualCost(residual, barrier_around(residual.value(X, U))).derivatives(X, U)
        assert (d.l > 0).any() and np.abs(d.l_x).max() + np.abs(d.l_u).max() > 0
        a = barrier_around(residual.value(X, U)).derivatives(residual.value(X, U))
        assert (a.diagonal == 0).any() and (a.diagonal == 1).any()


def test_add_without_clear_adds_into_what_is_there(rng):
    model, N = robot("solo12"), 3
    X, U = random_knots(model, rng, N), controls(model.n, rng, N)
    items = [(ResidualCost(r), 2.0, np.arange(N, dtype=np.int64)) for r in residuals(model, model.n, rng).values()]
    table = table_for(items, model, model.n, N)
    before = filled(N, model.state_space.ndx, model.n, rng.standard_normal)
    d = CostDerivatives(*(getattr(before, name).copy() for name in NAMES))
    table.add(X, U, d)
    expected = oracle(items, X, U, model.state_space.ndx, model.n)
    for name in NAMES:
        assert relative_error(getattr(d, name), getattr(before, name) + getattr(expected, name)) < TOL, name


# ---- 2. per-knot references --------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["ur5", "solo12"])
def test_per_knot_references_are_read_at_the_terms_own_knots(name, rng):
    """Tracking references (a Trajectory, (n, nu) and (n, 3) arrays of one row per knot of the term) on a term at
    every knot, and on a term at the runs [0, 3) and [7, 9) of 9 knots: row i is read at knots[i], the knots
    between carry nothing."""
    model, N = robot(name), 9
    nu = model.n
    X, U = random_knots(model, rng, N), controls(nu, rng, N)
    runs = np.array([0, 1, 2, 7, 8], dtype=np.int64)
    failures = []
    for knots in (np.arange(N, dtype=np.int64), runs):
        terms = residuals(model, nu, rng, len(knots))
        tracking = {k: r for k, r in terms.items() if k in ("state", "control", "frame translation", "com")}
        for kind, residual in tracking.items():
            for act in ("quadratic", "matrix"):
                cost = ResidualCost(residual, activation(act, residual, X[knots], U[knots], rng))
                failures += check_table([(cost, 1.5, knots)], model, X, U, nu, f"{kind} x {act} at {knots}")
        items = [(ResidualCost(r), rng.uniform(0.5, 2.0), knots) for r in terms.values()]
        failures += check_table(items, model, X, U, nu, f"all at {knots}")
    # two tracking terms at different, overlapping knots, and a fixed one at every knot
    a, b = residuals(model, nu, rng, 5), residuals(model, nu, rng, 4)
    items = [(ResidualCost(a["state"]), 1.0, runs), (ResidualCost(b["com"]), 3.0, np.array([1, 2, 3, 4])),
             (ResidualCost(residuals(model, nu, rng)["frame placement"]), 0.5, np.arange(N))]
    failures += check_table(items, model, X, U, nu, "overlapping")
    assert not failures, "\n".join(failures)


def test_a_term_on_runs_carries_nothing_between_them(rng):
    """The knots between a term's runs are written (cleared) with zeros, not left as they were."""
    model, N = robot("ur5"), 9
    X, U = random_knots(model, rng, N), controls(model.n, rng, N)
    runs = np.array([0, 1, 2, 7, 8], dtype=np.int64)
    d, values = evaluate(table_for([(ResidualCost(residuals(model, model.n, rng, 5)["com"]), 1.0, runs)], model,
                                   model.n, N), X, U, model.state_space.ndx, model.n)
    assert (values[3:7] == 0).all() and (values[runs] > 0).all()
    assert all((getattr(d, name)[3:7] == 0).all() for name in NAMES)


# ---- 3. parameters changed after the first call ------------------------------------------------------------------


def _rotation(rng) -> np.ndarray:
    return se3.exp(np.concatenate([np.zeros(3), rng.standard_normal(3)]))[:3, :3]


def put(a: np.ndarray, index, value) -> None:
    a[index] = value


def changes(model, rng, N: int):
    """(what, the cost, a function changing one of its parameters) for every parameter a table reads."""
    nu = model.n
    r = residuals(model, nu, rng)
    tracked = residuals(model, nu, rng, N)
    w = WeightedQuadratic(rng.uniform(0.5, 2.0, 3))
    W = WeightedQuadratic(np.eye(6) + 0.1)
    lower, upper = -0.01 * np.ones(model.state_space.ndx), 0.01 * np.ones(model.state_space.ndx)
    barrier = QuadraticBarrier(lower, upper)

    def x_new():
        return near(model, rng)

    def set_trajectory_in_place(res):
        res.reference.s[1] += 0.3
        res.reference.v[2] -= 0.5
        if res.reference.H is not None:
            res.reference.H[0] = res.reference.H[0] @ se3.exp(0.2 * rng.standard_normal(6))

    translation, com, tip = r["frame translation"], r["com"], FRAMES[model.name][0]
    return [
        ("state reference set", ResidualCost(r["state"]), lambda: setattr(r["state"], "reference", x_new())),
        ("state trajectory set", ResidualCost(tracked["state"]),
         lambda: setattr(tracked["state"], "reference", random_knots(model, rng, N))),
        ("state trajectory in place", ResidualCost(tracked["state"]), lambda: set_trajectory_in_place(tracked["state"])),
        ("control reference set", ResidualCost(r["control"]),
         lambda: setattr(r["control"], "reference", rng.standard_normal(nu))),
        ("control reference in place", ResidualCost(tracked["control"]),
         lambda: put(tracked["control"].reference, 2, rng.standard_normal(nu))),
        ("translation target set", ResidualCost(translation, w),
         lambda: setattr(translation, "target", rng.standard_normal(3))),
        ("translation target in place", ResidualCost(translation, w),
         lambda: put(translation.target, slice(None), rng.standard_normal(3))),
        ("translation target (3,) -> (N, 3)", ResidualCost(translation, w),
         lambda: setattr(translation, "target", rng.standard_normal((N, 3)))),
        ("translation target (N, 3) -> (3,)", ResidualCost(tracked["frame translation"]),
         lambda: setattr(tracked["frame translation"], "target", rng.standard_normal(3))),
        ("com target (3,) -> (N, 3)", ResidualCost(com), lambda: setattr(com, "target", rng.standard_normal((N, 3)))),
        ("com target in place", ResidualCost(tracked["com"]),
         lambda: put(tracked["com"].target, (1, 2), 5.0)),
        ("placement target set", ResidualCost(r["frame placement"], W),
         lambda: setattr(r["frame placement"], "target",
                         frame_placement(model, x_new(), tip))),
        ("placement target in place", ResidualCost(r["frame placement"], W),
         lambda: put(r["frame placement"].target, (slice(0, 3), 3), rng.standard_normal(3))),
        ("rotation target set", ResidualCost(r["frame rotation"]),
         lambda: setattr(r["frame rotation"], "target", _rotation(rng))),
        ("rotation target in place", ResidualCost(r["frame rotation"]),
         lambda: put(r["frame rotation"].target, slice(None), _rotation(rng))),
        ("weights in place", ResidualCost(translation, w), lambda: put(w.weights, 1, 7.0)),
        ("weights set", ResidualCost(translation, w), lambda: setattr(w, "weights", rng.uniform(3.0, 4.0, 3))),
        ("weight matrix in place", ResidualCost(r["frame placement"], W),
         lambda: put(W.weights, slice(None), W.weights + np.diag(rng.uniform(1, 2, 6)))),
        ("barrier bounds in place", ResidualCost(r["state"], barrier),
         lambda: (put(barrier.lower, slice(None), -0.5), put(barrier.upper, 3, 0.0))),
        ("barrier bounds set", ResidualCost(r["state"], barrier),
         lambda: setattr(barrier, "upper", np.full(model.state_space.ndx, np.inf))),
    ]


@pytest.mark.parametrize("name", ["ur5", "solo12"])
def test_parameters_changed_after_the_first_call_are_seen(name, rng):
    """Each change, after a first evaluation of the table: the table's results change and equal the oracle's."""
    model, N = robot(name), 4
    ndx, nu = model.state_space.ndx, model.n
    X, U = random_knots(model, rng, N), controls(nu, rng, N)
    knots = np.arange(N, dtype=np.int64)
    # beside a fixed term of 6 rows: a frame rotation alone overflows the table's work arrays (xfail below)
    fixed = ResidualCost(residuals(model, nu, rng)["root frame placement"])
    failures = []
    for what, cost, change in changes(model, rng, N):
        items = [(cost, 1.3, knots), (fixed, 0.1, knots)]
        table = table_for(items, model, nu, N)
        before, _ = evaluate(table, X, U, ndx, nu)
        change()
        after, values = evaluate(table, X, U, ndx, nu)
        if np.allclose(before.l, after.l, rtol=1e-9, atol=0.0):
            failures.append(f"{what}: the value did not change")
        failures += disagreements(after, values, oracle(items, X, U, ndx, nu), oracle_values(items, X, U), what)
    assert not failures, "\n".join(failures)


def test_a_reference_set_to_another_number_of_knots_is_refused_at_the_next_call(rng):
    model, N = robot("ur5"), 4
    residual = FrameTranslationResidual(model, "tool0", np.zeros(3))
    table = table_for([(ResidualCost(residual), 1.0, np.arange(N))], model, model.n, N)
    X, U = random_knots(model, rng, N), controls(model.n, rng, N)
    table.add(X, U, np.zeros(N))
    residual.target = np.zeros((N + 1, 3))
    with pytest.raises(ValueError, match=r"FrameTranslationResidual\('ur5', 'tool0'\).*5 knots.*evaluated at 4"):
        table.add(X, U, np.zeros(N))


# ---- 4. errors ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind, row", [("control", 3), ("state", 1), ("frame translation", 4), ("com", 0)])
def test_a_nan_written_into_a_reference_names_the_cost_and_the_knot(kind, row, rng):
    """A NaN written in place into row ``row`` of a per-knot reference of a term at the knots [0, 1, 2, 7, 8]: a
    ValueError naming the cost and the knot ``knots[row]``, from the values and from the derivatives."""
    model, N = robot("solo12"), 9
    knots = np.array([0, 1, 2, 7, 8], dtype=np.int64)
    residual = residuals(model, model.n, rng, len(knots))[kind]
    cost = ResidualCost(residual)
    other = ResidualCost(residuals(model, model.n, rng)["com"])
    table = table_for([(other, 1.0, np.arange(N)), (cost, 1.0, knots)], model, model.n, N)
    X, U = random_knots(model, rng, N), controls(model.n, rng, N)
    table.add(X, U, np.zeros(N))
    rows = {"state": lambda: residual.reference.s, "control": lambda: residual.reference}.get(kind, lambda: residual.target)
    rows()[row] = np.nan
    message = re.escape(repr(cost)) + f".*knot {knots[row]}\\b"
    with pytest.raises(ValueError, match=message):
        table.add(X, U, np.zeros(N))
    with pytest.raises(ValueError, match=message):
        table.add(X, U, CostDerivatives.zeros(N, model.state_space.ndx, model.n), clear=True)


def test_a_nan_in_a_fixed_target_names_the_first_knot_of_the_term(rng):
    model, N = robot("ur5"), 6
    residual = FramePlacementResidual(model, "tool0", np.eye(4))
    cost = ResidualCost(residual)
    table = table_for([(cost, 1.0, np.array([2, 4, 5]))], model, model.n, N)
    residual.target[0, 3] = np.nan
    X, U = random_knots(model, rng, N), controls(model.n, rng, N)
    with pytest.raises(ValueError, match=re.escape(repr(cost)) + r".*knot 2\b"):
        table.add(X, U, np.zeros(N))


@pytest.mark.parametrize("kind", ["state", "control", "frame translation", "com"])
def test_a_per_knot_reference_of_another_length_is_refused_when_the_table_is_built(kind, rng):
    model = robot("ur5")
    residual = residuals(model, model.n, rng, 5)[kind]
    with pytest.raises(ValueError, match=re.escape(repr(residual)) + r".*5 knots.*evaluated at 4"):
        table_for([(ResidualCost(residual), 1.0, np.arange(4))], model, model.n, 6)


# ---- 5. what compiles --------------------------------------------------------------------------------------------


def test_compilable_takes_the_built_in_terms_only(rng):
    model = robot("solo12")
    space, nu = model.state_space, model.n
    for residual in residuals(model, nu, rng).values():
        for act in (Quadratic(), WeightedQuadratic(np.ones(residual.nr)), WeightedQuadratic(np.eye(residual.nr)),
                    QuadraticBarrier(-np.ones(residual.nr), np.ones(residual.nr))):
            assert compilable(ResidualCost(residual, act), model) and compilable(ResidualCost(residual, act), None)
        assert not compilable(ResidualCost(residual, SmoothAbs(0.1)), model)

    class OwnStateResidual(StateResidual):
        pass

    class OwnQuadratic(Quadratic):
        pass

    class OwnCost(ResidualCost):
        pass

    x = model.reference_state()
    assert not compilable(ResidualCost(OwnStateResidual(space, x, nu)), model)
    assert not compilable(ResidualCost(StateResidual(space, x, nu), OwnQuadratic()), model)
    assert not compilable(OwnCost(StateResidual(space, x, nu)), model)
    assert not compilable(FunctionCost(space, nu, lambda x, u: float(x.s @ x.s)), model)
    contacts = [Contact("FL_FOOT", "3d", "local_world_aligned"), Contact("HR_FOOT", "3d", "local_world_aligned")]
    assert not compilable(ResidualCost(FrictionConeResidual(model, contacts, 0, 0.7)), model)
    assert not compilable(ResidualCost(WrenchConeResidual(model, contacts, 0.7)), model)
    # robot residuals on another model object than the table's; the state and controls are any model's
    other = model.replace(gravity=np.zeros(3))
    assert other is not model
    assert not compilable(ResidualCost(FrameTranslationResidual(other, "FL_FOOT", np.zeros(3))), model)
    assert not compilable(ResidualCost(JointPositionResidual(other)), model)
    assert compilable(ResidualCost(FrameTranslationResidual(other, "FL_FOOT", np.zeros(3))), other)
    assert compilable(ResidualCost(StateResidual(other.state_space, x, nu)), model)


def test_compilable_refuses_robot_residuals_of_models_with_mimic_joints():
    model = robot("panda", mimic=True)
    assert model.mimic
    frame = model.frames[-1].name
    for residual in (FrameTranslationResidual(model, frame, np.zeros(3)), CenterOfMassResidual(model, np.zeros(3)),
                     FramePlacementResidual(model, frame, np.eye(4)), JointPositionResidual(model),
                     JointVelocityResidual(model)):
        assert not compilable(ResidualCost(residual), None)
        assert not compilable(ResidualCost(residual), model)
    assert table_model([ResidualCost(CenterOfMassResidual(model, np.zeros(3)))]) is None
    # the same robot with its mimic joints independent compiles
    free = robot("panda")
    assert compilable(ResidualCost(FrameTranslationResidual(free, frame, np.zeros(3))), free)


def test_a_frame_rotation_alone_stays_in_its_work_arrays():
    """A table whose widest residual has 3 rows (a frame rotation with translations, the CoM: a terminal hand
    orientation) must not write outside its work arrays. Run without the JIT in a subprocess, where numpy checks the
    indices the compiled kernel does not: the compiled run corrupts the heap (seen as an abort, "munmap_chunk():
    invalid pointer", or garbage in other arrays)."""
    script = textwrap.dedent("""
        import numpy as np
        from lietraj.dynamics.model.robots import load_robot
        from lietraj.optimal_control.costs.compiled_costs import CompiledCosts
        from lietraj.optimal_control.costs.costs import ResidualCost
        from lietraj.optimal_control.costs.residuals import CenterOfMassResidual, FrameRotationResidual
        model = load_robot("ur5")
        X = model.state_space.random_trajectory(3, 0)
        costs = [ResidualCost(FrameRotationResidual(model, "tool0", np.eye(3), nu=0)),
                 ResidualCost(CenterOfMassResidual(model, np.zeros(3), nu=0))]
        values = np.zeros(3)
        CompiledCosts([(c, 1.0, np.arange(3)) for c in costs], model.state_space, 0, 3, model).add(X, None, values)
        assert abs(values - sum(c.value(X, None) for c in costs)).max() < 1e-12 * abs(values).max()
    """)
    run = subprocess.run([sys.executable, "-c", script], env={**os.environ, "NUMBA_DISABLE_JIT": "1"},
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]


# ---- 6. problems -------------------------------------------------------------------------------------------------


def weighted_terms(cost) -> list[tuple]:
    """A knot's cost as (term, weight) pairs: a sum's terms of non-zero weight, or the cost itself."""
    if isinstance(cost, CostSum):
        return [(term.cost, term.weight) for term in cost.costs.values() if term.weight != 0.0]
    return [(cost, 1.0)]


def tracks(cost) -> bool:
    """Whether a term's reference has one row per knot: it is then evaluated at all its knots in one call, its row
    i read at the i-th of them."""
    residual = getattr(cost, "residual", None)
    if isinstance(residual, StateResidual):
        return isinstance(residual.reference, Trajectory) and len(residual.reference) > 1
    if isinstance(residual, (ControlResidual, FrameTranslationResidual, CenterOfMassResidual)):
        return (residual.reference if isinstance(residual, ControlResidual) else residual.target).ndim == 2
    return False


def problem_oracle(problem: Problem, X, U) -> tuple[CostDerivatives, CostDerivatives]:
    """The running and terminal cost derivatives term by term: every term at each knot alone, weighted, summed into
    the knot; a tracking term at all the knots holding it (with that weight) in one call."""
    T, ndx, nu = problem.T, problem.ndx, problem.nu
    running, tracked = CostDerivatives.zeros(T, ndx, nu), {}
    for k, m in enumerate(problem.running):
        for cost, weight in weighted_terms(m.cost):
            if tracks(cost):
                tracked.setdefault((id(cost), weight), (cost, weight, []))[2].append(k)
                continue
            d = cost.derivatives(X[k:k + 1], U[k:k + 1])
            for name in NAMES:
                getattr(running, name)[k] += weight * getattr(d, name)[0]
    for cost, weight, knots in tracked.values():
        d = cost.derivatives(X[knots], U[knots])
        for name in NAMES:
            getattr(running, name)[knots] += weight * getattr(d, name)
    terminal = CostDerivatives.zeros(1, ndx, 0)
    for cost, weight in weighted_terms(problem.terminal):
        d = cost.derivatives(X[T:T + 1], None)
        for name in NAMES:
            getattr(terminal, name)[...] += weight * getattr(d, name)
    return running, terminal


def check_problem(problem: Problem, X, U, what: str) -> list[str]:
    """``cost``, ``running_costs``, ``terminal_cost``, ``cost_derivatives`` (into arrays of NaN) and the cost part of
    ``derivatives`` against ``problem_oracle``."""
    running, terminal = problem_oracle(problem, X, U)
    failures = []
    out = problem.empty_derivatives()
    for d in (out.running, out.terminal):
        for name in NAMES:
            getattr(d, name)[...] = np.nan
    problem.cost_derivatives(X, U, out)
    for part, d, expected in (("running", out.running, running), ("terminal", out.terminal, terminal)):
        failures += [f"{what}: {part} {name} off by {error(getattr(d, name), getattr(expected, name)):.1e}"
                     for name in NAMES if not error(getattr(d, name), getattr(expected, name)) <= TOL]
    total = running.l.sum() + terminal.l[0]
    for name, value, expected in (("cost", problem.cost(X, U), total),
                                  ("running_costs", problem.running_costs(X, U), running.l),
                                  ("terminal_cost", problem.terminal_cost(X), terminal.l[0]),
                                  ("derivatives", problem.derivatives(X, U).cost, total)):
        if not error(value, expected) <= TOL:
            failures.append(f"{what}: {name} off by {error(value, expected):.1e}")
    return failures


PROBLEMS = {
    "trot crocoddyl": lambda: trot("solo12", formulation="crocoddyl"),
    "trot": lambda: trot("solo12"),
    "talos_reach": lambda: talos_reach(),
    "squat": lambda: squat(horizon=12),
    "squat soft": lambda: squat("solo12", horizon=12, constraints="soft"),
}


@lru_cache(maxsize=None)
def example(name: str):
    return PROBLEMS[name]()


def perturbed_guess(problem: Problem, xs0, us0, rng) -> tuple[Trajectory, np.ndarray]:
    X0 = problem.rollout(us0) if xs0 is None else xs0
    Z = 0.05 * rng.standard_normal((len(X0), problem.ndx))
    return problem.state_space.integrate_trajectory(X0, Z), us0 + 0.1 * rng.standard_normal(us0.shape)


@pytest.mark.parametrize("name", list(PROBLEMS))
def test_ready_problems_costs_equal_the_terms_own(name, rng):
    ex = example(name)
    X, U = perturbed_guess(ex.problem, ex.xs0, ex.us0, rng)
    assert ex.problem._cost_plan().compiled is not None  # the table is in use
    failures = check_problem(ex.problem, X, U, name)
    assert not failures, "\n".join(failures)


def _sums(problem: Problem) -> list[CostSum]:
    """The distinct running cost sums, in knot order."""
    seen = {}
    for m in problem.running:
        seen.setdefault(id(m.cost), m.cost)
    return list(seen.values())


def test_weight_changes_are_seen_at_the_next_call(rng):
    """Crocoddyl's trot: a running term's weight scaled, then set to 0, in every sum holding it; a terminal term's
    weight set to 0, then all of them (no terminal table); then a term switched back on."""
    ex = trot("solo12", formulation="crocoddyl")
    problem = ex.problem
    X, U = perturbed_guess(problem, ex.xs0, ex.us0, rng)
    failures = check_problem(problem, X, U, "as built")
    running, terminal = _sums(problem), [problem.terminal]
    steps = [("com x 3", running, ("com",), lambda w: 3.0 * w), ("com 0", running, ("com",), lambda w: 0.0),
             ("control 0 in one sum", running[1:2], ("control",), lambda w: 0.0),
             ("terminal all 0", terminal, ("posture", "state bounds"), lambda w: 0.0),
             ("terminal posture 5", terminal, ("posture",), lambda w: 5.0),
             ("com 1", running, ("com",), lambda w: 1.0)]
    for what, sums, names, weight in steps:
        before = problem.cost(X, U)
        for s in sums:
            for name in names:
                if name in s.costs:
                    s.costs[name].weight = weight(s.costs[name].weight)
        if before == problem.cost(X, U):
            failures.append(f"{what}: the cost did not change")
        failures += check_problem(problem, X, U, what)
        if what == "terminal all 0" and problem.terminal_cost(X) != 0.0:
            failures.append(f"{what}: the terminal cost is {problem.terminal_cost(X)}")
    assert not failures, "\n".join(failures)


def arm_problem(rng, terminal_compiles: bool) -> tuple[Problem, dict]:
    """ur5 over 8 knots in three runs (sums A at 0-2, B at 3-5, a second sum C like A at 6-7) that share term objects
    with the same weights: a posture (twice in B, under two names), a control term, a tool path tracked over the 5
    knots of A and C, a FunctionCost and a SmoothAbs term (which the table does not take), a joint barrier in B; the
    terminal cost all compiled terms, or with a FunctionCost among them."""
    model, T = robot("ur5"), 8
    space, nu = model.state_space, model.n
    x_ref = near(model, rng)
    tip = frame_placement(model, x_ref, "tool0")[:3, 3]
    terms = {
        "posture": ResidualCost(StateResidual(space, x_ref, nu), WeightedQuadratic(rng.uniform(0.5, 2.0, space.ndx))),
        "control": ResidualCost(ControlResidual(nu, rng.standard_normal(nu))),
        "tool": ResidualCost(FrameTranslationResidual(model, "tool0", tip + 0.1 * rng.standard_normal((5, 3)))),
        "function": FunctionCost(space, nu, lambda x, u: float(np.sin(x.s).sum() + 0.1 * u @ u + 0.5 * x.v @ x.v),
                                 lambda x, u: (np.concatenate([np.cos(x.s), x.v]), 0.2 * u),
                                 lambda x, u: (np.diag(np.concatenate([-np.sin(x.s), np.ones(nu)])),
                                               np.zeros((space.ndx, nu)), 0.2 * np.eye(nu))),
        "smooth": ResidualCost(StateResidual(space, near(model, rng), nu), SmoothAbs(0.1)),
        "limits": ResidualCost(JointPositionResidual(model), QuadraticBarrier(-0.2 * np.ones(nu), 0.2 * np.ones(nu))),
        "rotation": ResidualCost(FrameRotationResidual(model, "tool0", _rotation(rng))),
    }

    def cost_sum(names):
        s = CostSum(space, nu)
        for name in names:
            s.add(name, terms[name], {"control": 1e-2, "tool": 10.0, "function": 0.5}.get(name, 1.0))
        return s

    A, B, C = (cost_sum(["posture", "control", "tool", "function"]),
               cost_sum(["posture", "control", "smooth", "limits", "rotation"]),
               cost_sum(["posture", "control", "tool", "function"]))
    B.add("posture again", terms["posture"])
    dynamics = RobotDynamics(model, 0.05)
    running = [ActionModel(dynamics, s) for s in (A, A, A, B, B, B, C, C)]
    terminal = CostSum(space, 0)
    terminal.add("posture", ResidualCost(StateResidual(space, x_ref, 0)), 3.0)
    terminal.add("tool", ResidualCost(FramePlacementResidual(model, "tool0", frame_placement(model, x_ref, "tool0"),
                                                             nu=0)), 2.0)
    if not terminal_compiles:
        terminal.add("function", FunctionCost(space, 0, lambda x, u: float(x.s @ x.s),
                                              lambda x, u: np.concatenate([2.0 * x.s, np.zeros(space.nv)]),
                                              lambda x, u: np.diag(np.concatenate([2.0 * np.ones(nu),
                                                                                   np.zeros(space.nv)]))))
    return Problem(x_ref, running, terminal, horizon=T), terms


@pytest.mark.parametrize("terminal_compiles", [True, False])
def test_terms_shared_by_runs_and_terms_the_table_does_not_take_count_once(terminal_compiles, rng):
    problem, _ = arm_problem(rng, terminal_compiles)
    model = robot("ur5")
    X, U = random_knots(model, rng, problem.T + 1), controls(model.n, rng, problem.T)
    plan = problem._cost_plan()
    assert plan.compiled is not None and plan.groups  # some terms in the table, some by their own calls
    assert (problem._terminal_table() is not None) == terminal_compiles
    failures = check_problem(problem, X, U, "arm")
    assert not failures, "\n".join(failures)


def test_a_running_cost_the_table_does_not_take_still_works(rng):
    """Every knot's cost a FunctionCost, the terminal one too: no table at all."""
    model = robot("ur5")
    space, nu = model.state_space, model.n
    running = FunctionCost(space, nu, lambda x, u: float(np.cos(x.s).sum() + u @ u))
    terminal = FunctionCost(space, 0, lambda x, u: float(x.v @ x.v))
    problem = Problem(model.reference_state(), ActionModel(RobotDynamics(model, 0.05), running), terminal, horizon=3)
    assert problem._cost_plan().compiled is None and problem._terminal_table() is None
    X, U = random_knots(model, rng, 4), controls(nu, rng, 3)
    failures = check_problem(problem, X, U, "function cost")
    assert not failures, "\n".join(failures)


def test_shift_keeps_the_costs_equal_to_the_terms_own(rng):
    """MPC's receding horizon: the arm problem and Crocoddyl's trot shifted, each shift followed by a check at new
    knots; the model shifted in is one of the last run (which grows) or of the first (a new run)."""
    problem, terms = arm_problem(rng, True)
    terms["tool"].residual.target = terms["tool"].residual.target[0]  # a path of 5 knots would not survive a shift
    model = robot("ur5")
    failures = []
    for i, incoming in enumerate([problem.running[-1], problem.running[3], problem.running[3]]):
        problem.shift(incoming)
        X, U = random_knots(model, rng, problem.T + 1), controls(model.n, rng, problem.T)
        failures += check_problem(problem, X, U, f"arm shift {i + 1}")
    ex = trot("solo12", formulation="crocoddyl")
    problem = ex.problem
    X, U = perturbed_guess(problem, ex.xs0, ex.us0, rng)
    failures += check_problem(problem, X, U, "trot")
    for i, incoming in enumerate([problem.running[-1], problem.running[0]]):
        problem.shift(incoming)
        X, U = perturbed_guess(problem, ex.xs0, ex.us0, rng)
        failures += check_problem(problem, X, U, f"trot shift {i + 1}")
    assert not failures, "\n".join(failures)


def test_terms_added_removed_or_replaced_in_a_sum_are_seen(rng):
    problem, terms = arm_problem(rng, True)
    model = robot("ur5")
    X, U = random_knots(model, rng, problem.T + 1), controls(model.n, rng, problem.T)
    A, B = problem.running[0].cost, problem.running[3].cost
    failures = check_problem(problem, X, U, "as built")
    B.add("com", ResidualCost(CenterOfMassResidual(model, np.zeros(3))), 4.0)
    failures += check_problem(problem, X, U, "a term added to B")
    A.remove("function")
    failures += check_problem(problem, X, U, "a term removed from A")
    B.costs["control"].weight = 0.5
    failures += check_problem(problem, X, U, "the control term shared by A, B and C weighs more in B")
    A.costs["control"].cost = ResidualCost(ControlResidual(model.n, rng.standard_normal(model.n)))
    failures += check_problem(problem, X, U, "A's control term replaced")
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize("problem_name, term, row, knot", [("squat", "com", 4, 4), ("arm", "tool", 3, 6)])
def test_a_nan_in_a_problems_reference_names_the_term_and_the_problems_knot(problem_name, term, row, knot, rng):
    """The arm problem's tool path is tracked at the knots 0, 1, 2, 6, 7: its row 3 is knot 6."""
    if problem_name == "squat":
        ex = squat(horizon=8)
        problem, cost = ex.problem, ex.problem.running[0].cost.costs[term].cost
        X, U = perturbed_guess(problem, ex.xs0, ex.us0, rng)
    else:
        problem, terms = arm_problem(rng, True)
        cost = terms[term]
        X, U = random_knots(robot("ur5"), rng, problem.T + 1), controls(robot("ur5").n, rng, problem.T)
    problem.cost(X, U)
    cost.residual.target[row, 0] = np.nan
    message = re.escape(repr(cost)) + f".*knot {knot}\\b"
    with pytest.raises(ValueError, match=message):
        problem.cost(X, U)
    with pytest.raises(ValueError, match=message):
        problem.cost_derivatives(X, U, problem.empty_derivatives())


# ---- bugs found ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["function", "smooth abs"])
def test_a_term_under_two_names_of_a_sum_counts_twice(kind, rng):
    model = robot("ur5")
    space, nu = model.state_space, model.n
    term = FunctionCost(space, nu, lambda x, u: float(np.cos(x.s).sum() + u @ u)) if kind == "function" else \
        ResidualCost(StateResidual(space, near(model, rng), nu), SmoothAbs(0.1))
    running = CostSum(space, nu)
    running.add("a", term)
    running.add("b", term)
    running.add("control", ResidualCost(ControlResidual(nu)))
    problem = Problem(model.reference_state(), ActionModel(RobotDynamics(model, 0.05), running),
                      ResidualCost(StateResidual(space, model.reference_state(), 0)), horizon=3)
    X, U = random_knots(model, rng, 4), controls(nu, rng, 3)
    assert relative_error(problem.running_costs(X, U), running.value(X[:3], U)) < TOL
    failures = check_problem(problem, X, U, kind)
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize("replaced", ["activation", "residual", "activation the table does not take"])
def test_a_residual_costs_activation_or_residual_set_after_the_first_call_is_seen(replaced, rng):
    problem, terms = arm_problem(rng, True)
    model = robot("ur5")
    X, U = random_knots(model, rng, problem.T + 1), controls(model.n, rng, problem.T)
    problem.cost(X, U)
    if replaced == "activation":
        terms["posture"].activation = Quadratic()
    elif replaced == "residual":
        terms["control"].residual = ControlResidual(model.n, np.ones(model.n))
    else:  # the problem evaluates the term by its own calls from then on
        terms["posture"].activation = SmoothAbs(0.1)
    failures = check_problem(problem, X, U, f"{replaced} set")
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize("kind", ["frame translation", "com", "control"])
def test_a_one_row_reference_on_several_knots_is_refused_as_the_residual_refuses_it(kind, rng):
    model, N = robot("ur5"), 4
    residual = residuals(model, model.n, rng, 1)[kind]
    if kind == "control":
        residual.reference = residual.reference[None]
    else:
        residual.target = residual.target[None]
    cost = ResidualCost(residual)
    X, U = random_knots(model, rng, N), controls(model.n, rng, N)
    with pytest.raises(ValueError):
        cost.value(X, U)
    with pytest.raises(ValueError, match=re.escape(repr(residual))):
        table_for([(cost, 1.0, np.arange(N))], model, model.n, N).add(X, U, np.zeros(N))


@pytest.mark.parametrize("name", ["ur5", "solo12"])
def test_augmented_lagrangian_terms_equal_their_own_derivatives(name, rng):
    """A constraint's term in an augmented Lagrangian (``AugmentedLagrangianActivation``: bounds, a scale, per-knot
    multipliers, a penalty the solver changes in place) on residuals of each kind of the table."""
    model, N = robot(name), 6
    nu = model.n
    X, U = random_knots(model, rng, N), controls(nu, rng, N)
    penalty = np.array([37.0])
    items = []
    for kind in ("joint position", "control", "frame translation", "state"):
        residual = residuals(model, nu, rng)[kind]
        r = residual.value(X, U)
        # bounds around the middle of the values: some rows inside, some past a bound; the translation an equality
        lower, upper = (r.mean(axis=0), r.mean(axis=0)) if kind == "frame translation" else \
            (r.mean(axis=0) - 0.1 * r.std(axis=0), r.mean(axis=0) + 0.1 * r.std(axis=0))
        constraint = Constraint(residual, lower, upper, scale=float(rng.uniform(0.5, 2.0)))
        activation = AugmentedLagrangianActivation(constraint, rng.normal(size=(N, residual.nr)), penalty)
        items.append((ResidualCost(residual, activation), float(rng.uniform(0.5, 2.0)), np.arange(N)))
    table = table_for(items, model, nu, N)
    failures = check_table(items, model, X, U, nu, "augmented Lagrangian")
    penalty[0] = 370.0
    multipliers = items[0][0].activation.multipliers
    multipliers[...] = rng.normal(size=multipliers.shape)
    after, values = evaluate(table, X, U, model.state_space.ndx, nu)
    failures += disagreements(after, values, oracle(items, X, U, model.state_space.ndx, nu),
                              oracle_values(items, X, U), "penalty and multipliers changed in place")
    assert not failures, "\n".join(failures)


def test_knots_outside_the_table_and_too_few_states_are_refused(rng):
    model = robot("ur5")
    cost = ResidualCost(residuals(model, model.n, rng)["control"])
    with pytest.raises(ValueError, match=r"knots outside \[0, 4\)"):
        table_for([(cost, 1.0, np.array([0, 7]))], model, model.n, 4)
    table = table_for([(cost, 1.0, np.arange(4))], model, model.n, 4)
    with pytest.raises(ValueError, match="3 states and 3 controls for 4 knots"):
        table.add(random_knots(model, rng, 3), controls(model.n, rng, 3), np.zeros(4))


def contact_terms(name: str, rng, N: int):
    """The model, a contact dynamics of its feet, knots and controls, and every contact residual that reads that
    dynamics (the linear maps of the contact forces a table takes)."""
    model, feet = robot_with_feet(name, HUMANOIDS + QUADRUPEDS, "test")
    dynamics = ContactRobotDynamics(model, 0.01, feet.contacts(baumgarte=(0.0, 10.0)))
    X, U = random_knots(model, rng, N), controls(model.n, rng, N)
    contacts = dynamics.contacts
    terms = {"wrench cone": WrenchConeResidual(model, contacts, 0.7, soles=feet.soles or None, dynamics=dynamics),
             "friction cone": FrictionConeResidual(model, contacts, 1, 0.6, facets=6, dynamics=dynamics),
             "force": ContactForceResidual(model, contacts, rng.standard_normal((N, dynamics.nc)), dynamics=dynamics)}
    if feet.soles:
        terms["centre of pressure"] = CenterOfPressureResidual(model, contacts, 0, *feet.sole, dynamics=dynamics)
    return model, dynamics, X, U, terms


@pytest.mark.parametrize("name", ["solo12", "talos"])
def test_contact_terms_read_their_dynamics_forces_and_equal_their_own_derivatives(name, rng):
    """Residuals of the contact forces (``r = G λ − b``, their Jacobians ``G ∂λ``, with ``l_xu`` and ``l_uu`` from
    ``∂λ/∂u``) through every activation, the forces gathered from the dynamics of their knots."""
    N = 5
    model, dynamics, X, U, terms = contact_terms(name, rng, N)
    ndx, nu = model.state_space.ndx, model.n
    failures = []
    for what, residual in terms.items():
        for kind in ("quadratic", "weighted", "matrix", "barrier"):
            # the bounds 1e-6 off the knots' values: the table's G λ and numpy's differ in the last bits, which
            # decide whether a component exactly on a bound is past it
            act = barrier_around(residual.value(X, U) + 1e-6) if kind == "barrier" else \
                activation(kind, residual, X, U, rng)
            items = [(ResidualCost(residual, act), 0.7, np.arange(N))]
            assert compilable(items[0][0], model)
            table = CompiledCosts(items, model.state_space, nu, N, model, dynamics_runs=[(0, N, dynamics)])
            d, values = evaluate(table, X, U, ndx, nu)
            failures += disagreements(d, values, oracle(items, X, U, ndx, nu), oracle_values(items, X, U),
                                      f"{what} through {kind}")
    assert not failures, "\n".join(failures)


def test_dense_terms_add_exactly_symmetric_blocks_for_weights_of_either_sign(rng):
    """The contact and centre-of-mass terms add their Gauss–Newton blocks as outer products of scaled rows
    (``_add_dense_gauss_newton``): equal to the terms' own derivatives for a positive and a negative weight, and
    ``l_xx``, ``l_uu`` symmetric to the bit (the rows are scaled by ``sqrt(|w D|)``, the sign applied apart)."""
    N = 4
    model, dynamics, X, U, terms = contact_terms("solo12", rng, N)
    ndx, nu = model.state_space.ndx, model.n
    com = residuals(model, nu, rng)["com"]
    failures = []
    for weight in (0.7, -0.3):
        items = [(ResidualCost(terms["friction cone"], barrier_around(terms["friction cone"].value(X, U) + 1e-6)),
                  weight, np.arange(N)),
                 (ResidualCost(terms["force"]), 2.0 * weight, np.arange(N)),
                 (ResidualCost(com), weight, np.arange(N))]
        table = CompiledCosts(items, model.state_space, nu, N, model, dynamics_runs=[(0, N, dynamics)])
        d, values = evaluate(table, X, U, ndx, nu)
        failures += disagreements(d, values, oracle(items, X, U, ndx, nu), oracle_values(items, X, U),
                                  f"weight {weight}")
        assert np.array_equal(d.l_xx, d.l_xx.transpose(0, 2, 1))
        assert np.array_equal(d.l_uu, d.l_uu.transpose(0, 2, 1))
    assert not failures, "\n".join(failures)


def test_contact_terms_the_table_does_not_take(rng):
    """The exact cone is not a linear map of the forces, a residual without dynamics solves its own, and a table
    refuses a residual whose knots have another dynamics (a problem keeps such terms to their own calls)."""
    N = 3
    model, dynamics, X, U, terms = contact_terms("solo12", rng, N)
    exact = FrictionConeResidual(model, dynamics.contacts, 0, 0.7, facets=None, dynamics=dynamics)
    assert not compilable(ResidualCost(exact), model)
    assert not compilable(ResidualCost(WrenchConeResidual(model, dynamics.contacts, 0.7)), model)
    other = ContactRobotDynamics(model, 0.01, dynamics.contacts)
    cost = ResidualCost(terms["wrench cone"])
    with pytest.raises(ValueError, match="reads the contact forces of dynamics its knots do not have"):
        CompiledCosts([(cost, 1.0, np.arange(N))], model.state_space, model.n, N, model,
                      dynamics_runs=[(0, N, other)])


def test_a_receding_horizon_coming_back_to_a_window_reuses_its_table_and_sees_what_changed(rng):
    """A cyclic gait of three phases shifted through two cycles: the windows come back (``Problem`` keeps their
    groupings and tables), each check at new knots and with the moving targets set anew; a weight changed while a
    window is kept, and a kept window's target set to another value, are seen."""
    model = robot("ur5")
    space, nu = model.state_space, model.n
    dynamics = RobotDynamics(model, 0.05)
    x_ref = near(model, rng)
    posture = ResidualCost(StateResidual(space, x_ref, nu), WeightedQuadratic(rng.uniform(0.5, 2.0, space.ndx)))
    tool = FrameTranslationResidual(model, "tool0", np.zeros(3))
    phases = []
    for i in range(3):
        s = CostSum(space, nu)
        s.add("posture", posture)
        s.add("control", ResidualCost(ControlResidual(nu, rng.standard_normal(nu))), 1e-2 * (i + 1))
        if i == 1:
            s.add("tool", ResidualCost(tool), 10.0)
        phases.append(ActionModel(dynamics, s))
    cycle = [phases[0]] * 2 + [phases[1]] * 3 + [phases[2]] * 2
    problem = Problem(x_ref, cycle[:5], ResidualCost(StateResidual(space, x_ref, 0)))
    failures, tables = [], []
    for k in range(2 * len(cycle)):
        problem.shift(cycle[(k + 5) % len(cycle)])
        tool.target = frame_placement(model, near(model, rng), "tool0")[:3, 3]
        if k == 9:
            phases[2].cost.costs["control"].weight = 7.0
        X, U = random_knots(model, rng, problem.T + 1), controls(nu, rng, problem.T)
        failures += check_problem(problem, X, U, f"shift {k + 1}")
        tables.append(problem._cost_plan().compiled)
    assert not failures, "\n".join(failures)
    # a cycle later, the same window and the same table (until the weight changed)
    assert tables[0] is tables[7] and tables[1] is tables[8] and tables[2] is not tables[9]


def test_a_nan_written_into_an_activations_weights_is_an_error_not_a_nan_cost(rng):
    """An activation's parameters edited in place after the table was built (they are read at every call): a NaN
    weight or bound names the cost and the knot, as a NaN reference does."""
    model, N = robot("ur5"), 4
    X, U = random_knots(model, rng, N), controls(model.n, rng, N)
    residual = residuals(model, model.n, rng)["frame translation"]
    weighted = ResidualCost(residual, WeightedQuadratic(np.ones(3)))
    barrier = ResidualCost(residual, QuadraticBarrier(-np.ones(3), np.ones(3)))
    for cost, values in ((weighted, weighted.activation.weights), (barrier, barrier.activation.lower)):
        table = table_for([(cost, 1.0, np.arange(N))], model, model.n, N)
        table.add(X, U, np.zeros(N))
        values[1] = np.nan
        with pytest.raises(ValueError, match=re.escape(repr(cost)) + r": NaN or inf at knot 0.*activation"):
            table.add(X, U, np.zeros(N))


def test_a_scope_of_unchanged_parameters_copies_them_once_until_told_of_a_change():
    """Inside ``Problem.unchanged_parameters`` a table copies the parameters at its first evaluation only: a target
    set afterwards is seen after ``parameters_changed``, or outside the scope, as at every evaluation there."""
    problem = squat(horizon=12).problem
    X, U = problem.initial_guess()
    com = problem.running[0].cost.costs["com"].cost.residual
    before = problem.cost(X, U)
    moved = com.target + np.array([0.0, 0.0, 0.05])
    with problem.unchanged_parameters():
        assert problem.cost(X, U) == before
        com.target = moved
        assert problem.cost(X, U) == before
        problem.parameters_changed()
        after = problem.cost(X, U)
    assert after != before and problem.cost(X, U) == after
    com.target = moved - np.array([0.0, 0.0, 0.05])
    assert problem.cost(X, U) == before


def test_a_scope_of_unchanged_parameters_keeps_the_grouping_of_the_terms_until_told_of_a_change():
    """The tables found at the first evaluation inside ``Problem.unchanged_parameters`` serve the scope: a term's
    weight changed inside (which regroups the terms) is seen after ``parameters_changed``, or outside, as at every
    evaluation there; the terminal cost's likewise."""
    problem = squat(horizon=12).problem
    X, U = problem.initial_guess()
    term = problem.running[0].cost.costs["com"]
    final = next(iter(problem.terminal.costs.values()))
    before = problem.cost(X, U)
    with problem.unchanged_parameters():
        assert problem.cost(X, U) == before
        term.weight *= 2.0
        final.weight *= 2.0
        assert problem.cost(X, U) == before
        problem.parameters_changed()
        after = problem.cost(X, U)
        assert problem.derivatives(X, U).running.l_x.any()
    assert after != before and problem.cost(X, U) == after
    term.weight /= 2.0
    assert problem.cost(X, U) != after
    final.weight /= 2.0
    assert problem.cost(X, U) == before
