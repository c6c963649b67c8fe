"""``solve_constrained`` against IPOPT on a floating-base problem (``ipopt_oracle`` in a local chart of SE(3) × R^k:
the NLP's variables are tangent increments ``z_k`` about the guess, ``x_k = x̄_k exp(z_k)``): the same optimum (cost
to 1e-6 relative), the same active set, the same multipliers.

The problem: solo12 squats over 12 knots of 0.04 s (``squat("solo12", horizon=12, constraints="hard")``: hard
wrench-cone, joint-limit and torque-limit constraints at every running knot) with a friction coefficient of 0.07
and the torques' regularization weighted 10 (instead of 1e-3). With the squat's defaults no constraint binds: the
torques peak at a third of solo12's 2.5 N m, the joints are far from their limits, and the friction cone binds only
when the squat is so deep or fast that a foot unloads (every row of its pyramid active at ``f = 0``, a degenerate
vertex) or, with a low coefficient, only weakly: at a control weight of 1e-3 the tangential (internal) forces cost
next to nothing, the cone's multipliers are ~1e-6 per newton and the cone changes the cost by ~5e-6 relative,
less than the comparison could see. Weighting the torques makes the internal forces matter: at ``friction=0.07``
the cone binds on 32 facet rows at 7 knots (the front feet pushed back, the hind feet forward, and on an edge of
the pyramid at the last knot), with multipliers 0.007 - 0.12 in units of the robot's weight, every other row at
least 8.6e-5 (of the weight) inside its bound, no foot unloading, and a cost 0.4 % above that of the free cones.

Tuning: ``complementarity_tol = 1e-8``. At the default 1e-6 ``solve_constrained`` reports "converged" (relative
complementarity 2.5e-7) with the 32 active rows 0.4 - 2.4e-6 (of the weight) inside their bounds, each still
carrying its multiplier, and a cost 2.5e-6 (relative) above IPOPT's; the active set at 2e-7 differs from IPOPT's.
The stopping test bounds the largest ``|λᵢ| |ĉᵢ − bᵢ|`` (relative to ``1 + max |λ|``), while the cost error is their
sum over the active rows (here 32): a 1e-6 complementarity does not give a 1e-6 cost. At 1e-8 both FDDP and DDP
stop 2.6e-8 (relative) above IPOPT with the same active set. Reproducer::

    ex = squat("solo12", horizon=12, constraints="hard", friction=0.07, control_weight=10.0)
    r = solve_constrained(ex.problem, ex.xs0, ex.us0, SolverOptions(max_iter=200))   # cost 1.19688514
    solve_ipopt(ex.problem, ex.xs0, ex.us0).cost                                     # cost 1.19688217

IPOPT (difference Hessian) meets ``tol = 1e-10`` in 14 iterations (~3 s); its limited-memory Hessian does not
converge in 500 iterations here (cost 1e-4 above the optimum, dual infeasibility 0.7). The chart's reference does
not matter: about lietraj's solution instead of the guess, IPOPT's cost is the same to 1e-14.
"""

from __future__ import annotations

import functools
from types import SimpleNamespace

import numpy as np
import pytest

from conftest import relative_error
from ipopt_oracle import assert_derivatives_are_differences, assert_same_active_sets, Transcription, active_set, solve_ipopt
from lietraj.dynamics.lie.state import tangent_difference, tangent_integrate
from lietraj.optimal_control.solvers.augmented_lagrangian import ConstraintOptions, solve_constrained
from lietraj.optimal_control.solvers.solvers import SolverOptions
from lietraj.problems import squat

HORIZON, FRICTION, CONTROL_WEIGHT = 12, 0.07, 10.0
# The multipliers are as precise as the KKT conditions are met (λ⁺ = λ + ρ ĉ; the stationarity fixes them): at the
# default tolerances (1e-6) they agreed with IPOPT's (tol 1e-8) to 2e-5-3e-5 of the largest, at 1e-8 to 2e-6.
OPTIONS = ConstraintOptions(stationarity_tol=1e-8, feasibility_tol=1e-8, complementarity_tol=1e-8)
CONE = "wrench cone"


def example(horizon: int = HORIZON, friction: float = FRICTION):
    return squat("solo12", horizon=horizon, constraints="hard", friction=friction, control_weight=CONTROL_WEIGHT)


@functools.cache
def case() -> SimpleNamespace:
    """The squat, its guess (the standing posture at every knot, held by the quasi-static torques) and IPOPT's
    solution from that guess, in the chart about it (solved once per module)."""
    ex = example()
    return SimpleNamespace(problem=ex.problem, xs0=ex.xs0, us0=ex.us0, ipopt=solve_ipopt(ex.problem, ex.xs0, ex.us0))


def weight(problem) -> float:
    """The unit of the cone's rows (the robot's weight, N)."""
    return problem.running[0].constraints[CONE].scale


@pytest.mark.parametrize("second_order", [False, True], ids=["fddp", "ddp"])
def test_same_optimum_active_set_and_multipliers_as_ipopt(second_order):
    c = case()
    oracle = c.ipopt
    assert oracle.success and oracle.defect < 1e-9, (oracle.status, oracle.defect)
    r = solve_constrained(c.problem, c.xs0, c.us0, SolverOptions(max_iter=200), OPTIONS, second_order=second_order)
    assert r.status == "converged", (r.status, r.iterations, r.kkt)
    assert abs(r.cost - oracle.cost) <= 1e-6 * abs(oracle.cost), (r.cost, oracle.cost)

    assert_same_active_sets(c.problem, r, oracle)
    # The multipliers agree: the cone's to 2e-5 of the largest (they are ~0.005 per newton), the inactive
    # constraints' are zero (IPOPT's interior-point ones below 1e-9).
    for key, (knots, lam) in oracle.multipliers.items():
        assert np.array_equal(r.multipliers[key].knots, knots), key
        scale = np.abs(lam).max()
        if oracle.active[key][1].any():
            assert np.abs(r.multipliers[key].values - lam).max() <= 2e-5 * scale, key
        else:
            assert scale < 1e-9 and np.abs(r.multipliers[key].values).max() < 1e-9, key


def test_the_friction_cone_binds():
    """What the comparison relies on: the cone's facet rows bind at several knots with multipliers well away from
    zero (strict complementarity), no foot unloads (the unilateral rows ``−f_z ≤ 0``, the last of each contact's
    five, stay inactive), nothing else binds, and the cone changes the optimum by far more than the comparison's
    1e-6: the squat with the cones of ``friction=0.7``, which do not bind, costs 0.4 % less."""
    c = case()
    oracle = c.ipopt
    knots, active = oracle.active[CONE]
    assert active.sum() >= 20 and np.unique(np.nonzero(active)[0]).size >= 5
    assert not active[:, 4::5].any()
    lam = oracle.multipliers[CONE][1] * weight(c.problem)  # per unit of weight
    assert lam[active].min() > 1e-3
    assert not any(a.any() for key, (_, a) in oracle.active.items() if key != CONE)
    free = example(friction=0.7)
    r = solve_constrained(free.problem, free.xs0, free.us0, SolverOptions(max_iter=200), OPTIONS)
    assert r.status == "converged" and not active_set(free.problem, r.xs, r.us)[CONE][1].any()
    assert oracle.cost - r.cost > 1e-3 * oracle.cost


def test_the_chart_s_derivatives_are_its_values(rng):
    """The oracle's ∇f and ∂g/∂w on a floating base (lietraj's derivatives chained with ``Jr`` of the chart and
    ``Jr⁻¹`` of the defects) are the central differences of its f and g, about a reference far from the point
    (base rotations of up to ~1 rad between them) and off the dynamics; lietraj's unchained derivatives are not.
    ``pack`` and ``unpack`` are inverse."""
    ex = example(horizon=4)
    problem = ex.problem
    us = ex.us0 + 0.1 * rng.normal(size=(4, problem.nu))
    xs = problem.rollout(us)
    reference = tangent_integrate(xs, 0.3 * rng.normal(size=(5, problem.ndx)))
    t = Transcription(problem, reference)
    back = t.unpack(t.pack(xs, us))
    assert np.abs(tangent_difference(back[0], xs)).max() < 1e-12 and np.array_equal(back[1], us)
    w = t.pack(xs, us) + 0.2 * rng.normal(size=t.nw)
    assert np.linalg.norm(t.tangents(w)[:, 3:6], axis=1).max() > 0.5
    grad, jac, dense = assert_derivatives_are_differences(t, w)
    assert np.array_equal(dense, t.jacobian(w))
    lam = rng.normal(size=t.ng)
    assert relative_error(t.lagrangian_gradient(w, 0.5, lam), 0.5 * grad + jac.T @ lam) < 1e-6
    X, U = t.unpack(w)
    d = problem.derivatives(X, U)
    plain = np.concatenate([np.hstack([d.running.l_x, d.running.l_u]).ravel(), d.terminal.l_x[0]])
    assert relative_error(plain, grad) > 1e-3  # the chain rule through the chart matters
