"""Your own cost: a plain Python function of one knot, added to a ready problem, solved, checked, plotted, then
made fast by giving its derivatives.

Talos reaches a point with its left gripper (``talos_reach``, Crocoddyl's example). We ask for one thing more: at
the end, its right hand is at least ``LOW`` = 1 m high (it hangs at 0.76 m). The cost of a knot is

    l(x) = max(LOW − z(x), 0)³,    z = the height of the right gripper frame (``frame_placement``),

zero above ``LOW``, growing smoothly below it: cubed, not squared, because the finite differences that stand in
for the derivatives of a plain function need it twice differentiable where the solver goes (the second derivative
of a squared hinge jumps at ``z = LOW``, right where such an optimum lies, and the differenced Hessian is then
wrong there: that solve stalls).

Four forms of the same cost, each added to the problem's terminal ``CostSum`` in turn and solved by FDDP:

1. the plain function: ``FunctionCost(space, 0, hand_low)``. The solver's derivatives are central differences on
   the state group, about ``2 m²`` calls of the function per knot and iteration (``m = ndx + nu``): slow on Talos;
2. with its gradient, ``−3 r² ∂z/∂x`` (``r = max(LOW − z, 0)``; ``∂z/∂x`` is the z row of the frame's Jacobian in
   the world-aligned frame for the position coordinates, 0 for the velocities): the Hessian is differenced from the
   gradient, ``2 m`` calls. ``check_derivatives`` compares the gradient with differences of the function;
3. with a Gauss–Newton Hessian ``6 r ∂z/∂xᵀ ∂z/∂x`` too (the term ``−3 r² ∂²z`` dropped): two calls per knot.
   It is not the exact second derivative, so the cost says so (``exact_hessian = False``) and the checker leaves it
   out;
4. for comparison of what one knot costs (not solved here: it is the squared hinge), the built-in residual cost
   ``ResidualCost(FrameTranslationResidual(...), QuadraticBarrier(...))``, compiled and batched over all knots in
   one call: the fast path when a cost is a residual through an activation.

The script prints the checks, the solves (iterations, wall time, where the hand ends), what each form costs per
knot as a terminal and as a running cost, and writes a figure: the heights of both grippers over time without and
with the cost (``lietraj.viz.plot_com_and_feet``).

Run: python examples/custom_cost.py [--quick] [--plot FILE]
(``--quick``: a 20-knot horizon and at most 8 iterations per solve, for CI.)
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np
from matplotlib.figure import Figure

from lietraj.dynamics import frame_jacobian, frame_placement
from lietraj.optimal_control import (FrameTranslationResidual, FunctionCost, QuadraticBarrier, ResidualCost,
                                     SolverOptions, check_derivatives)
from lietraj.problems import make_problem
from lietraj.viz import plot_com_and_feet

HAND, OTHER_HAND = "gripper_right_joint", "gripper_left_joint"
LOW = 1.0        # m: the right hand ends above this height
WEIGHT = 1e4     # of the terminal term (the problem's own terms: gripper 1e2, posture and velocities ~1e-3 to 10)


def build(horizon: int):
    """The ready problem and the three Python forms of the cost for its robot."""
    reach = make_problem("talos_reach", horizon=horizon)
    talos = reach.model
    nv = talos.nv

    def hand_low(x, u):
        """max(LOW − z, 0)³ for the height z of the right hand; ``u`` is the knot's controls ((0,) at the end)."""
        return max(LOW - frame_placement(talos, x, HAND)[2, 3], 0.0) ** 3

    def hand_low_gradient(x, u):
        """(l_x, l_u) in the chart x exp(dx), u + du: the hand's height moves with the position coordinates only."""
        r = max(LOW - frame_placement(talos, x, HAND)[2, 3], 0.0)
        dz = frame_jacobian(talos, x, HAND, "local_world_aligned")[2]  # dz / d(z_H, z_s), (nv,)
        return np.concatenate([-3.0 * r * r * dz, np.zeros(nv)]), np.zeros(len(u))

    def hand_low_hessian(x, u):
        """(l_xx, l_xu, l_uu), Gauss–Newton: 6 r dzᵀdz on the positions, the curvature of z(x) left out."""
        r = max(LOW - frame_placement(talos, x, HAND)[2, 3], 0.0)
        dz = frame_jacobian(talos, x, HAND, "local_world_aligned")[2]
        l_xx = np.zeros((2 * nv, 2 * nv))
        l_xx[:nv, :nv] = 6.0 * r * np.outer(dz, dz)
        return l_xx, np.zeros((2 * nv, len(u))), np.zeros((len(u), len(u)))

    return reach, hand_low, hand_low_gradient, hand_low_hessian


def forms(reach, hand_low, gradient, hessian, nu: int) -> dict:
    """The four forms of the cost on knots with ``nu`` controls (0: terminal)."""
    space = reach.model.state_space
    gauss_newton = FunctionCost(space, nu, hand_low, gradient, hessian)
    gauss_newton.exact_hessian = False  # says the Hessian is an approximation: check_derivatives skips it
    squared_hinge = ResidualCost(FrameTranslationResidual(reach.model, HAND, [0.0, 0.0, LOW], nu=nu),
                                 QuadraticBarrier([-np.inf, -np.inf, 0.0], [np.inf] * 3))
    return {"plain function": FunctionCost(space, nu, hand_low),
            "+ gradient": FunctionCost(space, nu, hand_low, gradient),
            "+ gradient, Gauss-Newton Hessian": gauss_newton,
            "built-in residual (squared hinge)": squared_hinge}


def final_height(reach, result, frame: str) -> float:
    return float(frame_placement(reach.model, result.xs[-1], frame)[2, 3])


def seconds_per_knot(cost, reach, nu: int, knots: int, repeats: int) -> float:
    """Wall time of ``cost.derivatives`` per knot, over ``knots`` knots at the initial state (best of ``repeats``)."""
    X = reach.problem.constant_trajectory()[:knots]
    U = np.tile(reach.us0[0], (knots, 1)) if nu else None
    best = np.inf
    for _ in range(repeats):
        start = time.perf_counter()
        cost.derivatives(X, U)
        best = min(best, time.perf_counter() - start)
    return best / knots


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="20 knots, at most 8 iterations per solve (for CI)")
    parser.add_argument("--plot", default="custom_cost.png", help="where to write the figure (.png or .pdf)")
    args = parser.parse_args(argv)
    horizon = 20 if args.quick else 60
    reach, hand_low, gradient, hessian = build(horizon)
    options = SolverOptions(max_iter=8 if args.quick else 500, reg_init=reach.options.reg_init)
    talos, x0 = reach.model, reach.problem.x0
    terminal = reach.problem.terminal

    print(f"talos_reach, T = {horizon}; load average {os.getloadavg()[0]:.2f} at the start")
    reach.solve(options=options)  # loads the compiled kernels once, so that the timings below are warm
    start = time.perf_counter()
    baseline = reach.solve(options=options)
    baseline_seconds = time.perf_counter() - start
    print(f"without the cost: {baseline}, right hand ends at {final_height(reach, baseline, HAND):.3f} m")

    # -- the checks: the gradient against differences of the function, then the finite differences themselves
    costs = forms(reach, hand_low, gradient, hessian, nu=0)
    print(check_derivatives(costs["+ gradient"], x0))
    print(check_derivatives(costs["+ gradient, Gauss-Newton Hessian"], x0))
    plain_d = costs["plain function"].derivatives(reach.problem.constant_trajectory()[:1], None)
    exact_d = costs["+ gradient"].derivatives(reach.problem.constant_trajectory()[:1], None)
    print(f"the plain function's differenced derivatives at x0, against those from the gradient: l_x within "
          f"{np.abs(plain_d.l_x - exact_d.l_x).max():.1e} (|l_x| {np.abs(exact_d.l_x).max():.2g}), l_xx within "
          f"{np.abs(plain_d.l_xx - exact_d.l_xx).max():.1e} (|l_xx| {np.abs(exact_d.l_xx).max():.2g})")

    # -- the solves: each form in turn as the terminal term "right hand up"
    print(f"\n{'terminal cost':<36} {'iterations':>10} {'solve [s]':>10} {'cost':>12} {'right hand [m]':>15} "
          f"{'left to target [mm]':>20}")
    print(f"{'(none)':<36} {baseline.iterations:>10} {baseline_seconds:>10.2f} {baseline.cost:>12.7g} "
          f"{final_height(reach, baseline, HAND):>15.4f} {reach.metrics(baseline)['target_distance_mm']:>20.3f}")
    results, seconds = {}, {}
    for name, cost in list(costs.items())[:3]:
        terminal.add("right hand up", cost, WEIGHT)
        start = time.perf_counter()
        results[name] = result = reach.solve(options=options)
        seconds[name] = time.perf_counter() - start
        terminal.remove("right hand up")
        print(f"{name:<36} {result.iterations:>10} {seconds[name]:>10.2f} {result.cost:>12.7g} "
              f"{final_height(reach, result, HAND):>15.4f} {reach.metrics(result)['target_distance_mm']:>20.3f}")
    plain, fast, fastest = seconds.values()
    print(f"giving the gradient: {plain:.2f} s -> {fast:.2f} s ({plain / fast:.1f}x faster); and a Gauss-Newton "
          f"Hessian: {fastest:.2f} s ({plain / fastest:.1f}x); without the cost {baseline_seconds:.2f} s")

    # -- what each form costs per knot and iteration: terminal (nu = 0) and running (nu = 32) knots
    print(f"\n{'derivatives of one knot':<36} {'terminal [ms]':>14} {'running [ms]':>14}")
    running = forms(reach, hand_low, gradient, hessian, nu=talos.n)
    for name in costs:
        knots, repeats = (1, 1) if name == "plain function" else (horizon, 3)
        per_knot = [seconds_per_knot(c[name], reach, nu, knots, repeats) for c, nu in ((costs, 0), (running, talos.n))]
        print(f"{name:<36} {1e3 * per_knot[0]:>14.3f} {1e3 * per_knot[1]:>14.3f}")

    # -- the figure: the grippers' heights without and with the cost (Gauss-Newton form)
    fig = Figure(layout="constrained", figsize=(11.0, 8.0))
    axes = fig.subplots(2, 2, width_ratios=(1.0, 1.3))
    for row, (title, result) in enumerate((("without the cost", baseline),
                                           ("with the right hand up", results["+ gradient, Gauss-Newton Hessian"]))):
        plot_com_and_feet(reach, result, frames=[OTHER_HAND, HAND], axes=axes[row])
        axes[row, 1].axhline(LOW, color="0.4", ls=":", lw=1.0)
        axes[row, 0].set_title(f"CoM and grippers, top view, {title}")
        axes[row, 1].set_title(f"heights, {title}")
    fig.savefig(args.plot, dpi=100)
    print(f"\nwrote {args.plot}")


if __name__ == "__main__":
    main()
