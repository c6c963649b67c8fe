"""``trot(formulation="crocoddyl")`` is Crocoddyl's solo12 trot term for term (the oracle is Crocoddyl itself,
``croc_oracle.trot_solo12_problem``): the same guess, the same cost at every knot of the guess and of a perturbed
trajectory whose contact forces leave their cones and whose joints pass their bounds, and the same FDDP solve; and
the example's own trot of ANYmal (``croc_oracle.trot_anymal_problem``), which ``bench_vs_crocoddyl`` times too."""

from __future__ import annotations

import crocoddyl
import numpy as np

from croc_oracle import perturbed_states, trot_anymal_problem, trot_solo12_problem
from lietraj.dynamics.model.pinocchio_interop import to_pinocchio
from lietraj.optimal_control.dynamics.impulse_robot_dynamics import ImpulseRobotDynamics
from lietraj.problems import make_problem


def croc_trajectory(ex, X, U, croc_us) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """``(xs, us)`` in Crocoddyl's layout: ``(q with an xyzw quaternion, v)`` per knot, and no control at the knots
    where Crocoddyl has none (its impulse knots)."""
    xs = [np.concatenate(to_pinocchio(ex.model, X[k])) for k in range(len(X))]
    return xs, [U[k] if len(u) else np.zeros(0) for k, u in enumerate(croc_us)]


def assert_same_costs(ex, croc, X, U, croc_us) -> None:
    """lietraj's cost of every running knot and of the terminal knot equals Crocoddyl's to 1e-9 relative."""
    total = croc.calc(*croc_trajectory(ex, X, U, croc_us))
    theirs = np.array([d.cost for d in croc.runningDatas] + [croc.terminalData.cost])
    ours = np.append(ex.problem.running_costs(X, U), ex.problem.terminal_cost(X))
    assert np.all(np.abs(ours - theirs) <= 1e-9 * np.abs(theirs)), np.abs(ours - theirs) / np.abs(theirs)
    assert abs(ex.problem.cost(X, U) - total) <= 1e-9 * total


def assert_same_problem_and_guess(ex, croc, xs, us) -> list[int]:
    """The same horizon, impulse knots and guess (the standing state at every knot, Crocoddyl's quasiStatic controls,
    none at the impulses) and the same costs at the guess; returns the impulse knots."""
    assert ex.problem.T == croc.T
    impulses = [k for k, m in enumerate(ex.problem.running) if isinstance(m.dynamics, ImpulseRobotDynamics)]
    assert impulses == [k for k, u in enumerate(us) if len(u) == 0]
    assert np.abs(np.concatenate(to_pinocchio(ex.model, ex.xs0[0])) - xs[0]).max() < 1e-12
    assert np.abs(np.delete(ex.us0, impulses, axis=0) - np.array([u for u in us if len(u)])).max() < 1e-9
    assert not ex.us0[impulses].any()
    assert_same_costs(ex, croc, ex.xs0, ex.us0, us)
    return impulses


def test_crocoddyl_trot_is_crocoddyls_problem_and_reaches_its_optimum():
    ex = make_problem("trot", "solo12", formulation="crocoddyl")
    croc, xs, us = trot_solo12_problem()
    impulses = assert_same_problem_and_guess(ex, croc, xs, us)

    # A perturbed trajectory (costs are defined off the dynamics too): forces out of their friction cones at some
    # knots, and joints past the URDF's position and velocity bounds at others, so that every barrier acts.
    rng = np.random.default_rng(0)
    X = perturbed_states(ex.problem, rng)
    X.s[np.arange(5, 56, 11), 1] = 10.2 * np.sign(rng.standard_normal(5))
    X.v[np.arange(8, 56, 11), 9] = 1000.5 * np.sign(rng.standard_normal(5))
    X.s[-1, 2], X.v[-1, -1] = -10.1, 1000.2
    U = ex.us0 + rng.normal(scale=1.0, size=ex.us0.shape)  # the impulse knots' controls act on nothing
    barriers = {name: sum(float(m.cost.costs[name].cost.value(X[k:k + 1], U[k:k + 1])[0])
                          for k, m in enumerate(ex.problem.running) if name in m.cost.costs)
                for name in ("friction cone", "state bounds")}
    assert all(value > 0.0 for value in barriers.values()), barriers
    assert_same_costs(ex, croc, X, U, us)

    # FDDP from the same guess with the example's settings reaches the same optimum.
    result = ex.solve()
    assert result.converged
    solver = crocoddyl.SolverFDDP(croc)
    solver.solve(xs, us, 100, False)
    assert abs(result.cost - solver.cost) <= 1e-9 * solver.cost
    assert result.iterations == solver.iter
    assert not result.us[impulses].any()
    m = ex.metrics(result)
    assert m["landing_error_mm"] < 1.0 and m["foot_drift_mm"] < 1.0


def test_anymal_trot_of_crocoddyls_example_is_its_problem_and_reaches_its_optimum():
    """The example's own robot and step (0.15 m long, 0.1 m high): the same costs on the guess and off the dynamics,
    and FDDP from the same guess to the same optimum along the same steps. The solves end one iteration apart: at the
    seventh backward pass the stationarity measure is 4e-10 at lietraj's iterate (Crocoddyl's own formula agrees
    there) and 3.7e-9 at Crocoddyl's, whose iterates differ by rounding that Σ|Q_u|² near 1e-9 amplifies: on either
    side of the tolerance, so Crocoddyl takes one more step of length 1, which moves the cost by 4e-12."""
    ex = make_problem("trot", "anymal", formulation="crocoddyl", step_length=0.15, step_height=0.1)
    croc, xs, us = trot_anymal_problem()
    assert_same_problem_and_guess(ex, croc, xs, us)
    rng = np.random.default_rng(1)
    assert_same_costs(ex, croc, perturbed_states(ex.problem, rng), ex.us0 + rng.normal(size=ex.us0.shape), us)

    result = ex.solve()
    assert result.converged
    solver = crocoddyl.SolverFDDP(croc)
    steps = []
    solver.setCallbacks([_StepLengths(steps)])
    assert solver.solve(xs, us, 100, False)
    assert abs(result.cost - solver.cost) <= 1e-9 * solver.cost
    assert [h.step for h in result.history] == steps[:result.iterations]
    assert solver.iter - result.iterations in (0, 1)


class _StepLengths(crocoddyl.CallbackAbstract):
    """Records the step length of every iteration of a Crocoddyl solve."""

    def __init__(self, steps: list):
        crocoddyl.CallbackAbstract.__init__(self)
        self.steps = steps

    def __call__(self, solver):
        self.steps.append(solver.stepLength)
