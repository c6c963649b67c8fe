"""Hard constraints: a limit met exactly instead of a penalty tuned until it is nearly met.

Two things a user of penalty-based solvers asks for, done as constraints:

1. Talos reaches a point with its left gripper (``talos_reach``, Crocoddyl's example) and must end with its right
   hand at least ``LOW`` = 1 m high (it hangs at 0.76 m). ``examples/custom_cost.py`` writes this as a cost, whose
   weight decides how close to 1 m the hand gets; here it is the terminal constraint ``z ≥ LOW`` on the residual
   ``FrameTranslationResidual`` (the frame's world position: only the lower bound of its z row is finite). The solve
   reports the constraint's multiplier: what one more millimetre of height would cost.
2. solo12 jumps with its limits as barrier costs (``constraints="soft"``) and as constraints (the default): the
   barriers let the feet pull on the ground at take-off and stop the torques short of their limits; the constraints
   hold the friction cones and the limits to 1e-6 and reach a lower cost.

    python examples/constraints.py            # both, with the iteration logs
    python examples/constraints.py --quick    # both, quietly (what the tests run)
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from lietraj.dynamics.kinematics.kinematics import frame_placement
from lietraj.optimal_control import (
    ConstraintSet,
    Constraint,
    FrameTranslationResidual,
    Problem,
    solve_constrained,
)
from lietraj.problems import make_problem

RIGHT_HAND = "gripper_right_joint"
LOW = 1.0  # metres: the lowest the right hand may end


def reach_with_the_right_hand_up(verbose: bool) -> dict[str, float]:
    """talos_reach with the terminal constraint ``z(right hand) ≥ LOW``; returns what it reached."""
    example = make_problem("talos_reach")
    model, problem = example.model, example.problem
    height = Constraint(FrameTranslationResidual(model, RIGHT_HAND, np.zeros(3), nu=0), lower=[-np.inf, -np.inf, LOW])
    final = ConstraintSet(model.state_space, 0).add("right hand up", height)
    constrained = Problem(problem.x0, problem.running, problem.terminal, terminal_constraints=final)
    start = time.perf_counter()
    result = solve_constrained(constrained, example.xs0, example.us0, example.options, verbose=verbose)
    wall = time.perf_counter() - start
    hand = frame_placement(model, result.xs[len(result.xs) - 1], RIGHT_HAND)[2, 3]
    left = example.metrics(result)["target_distance_mm"]
    lam = result.multipliers["right hand up"].values[0, 2]  # of the z row, at the terminal knot
    print(f"talos_reach, right hand >= {LOW} m at the end: {result.status}, {result.iterations} iterations, "
          f"{wall:.2f} s; cost {result.cost:.6f}; right hand at {hand:.6f} m (was 0.76), left hand {left:.3f} mm from "
          f"its target; its multiplier {lam:.4g}: 1 mm more of LOW would cost {-1e-3 * lam:.3g} more")
    return {"converged": float(result.converged), "hand_height": float(hand), "cost": result.cost,
            "violation": result.max_violation, "multiplier": float(lam), "left_hand_mm": left}


def jump_with_barriers_and_with_constraints(verbose: bool) -> dict[str, dict[str, float]]:
    """solo12's jump both ways; returns each one's metrics."""
    out = {}
    for constraints in ("soft", "hard"):
        example = make_problem("jump", "solo12", constraints=constraints)
        start = time.perf_counter()
        result = example.solve(verbose=verbose)
        wall = time.perf_counter() - start
        m = example.metrics(result)
        print(f"solo12 jump, limits {constraints}: {result.status}, {result.iterations} iterations, {wall:.2f} s; "
              f"cost {result.cost:.4f}; friction margin {m['friction_margin']:.2g} and lowest normal force "
              f"{m['min_normal_force']:.2g} of the weight; torques at {100 * m['torque_ratio']:.1f} % of the limits")
        out[constraints] = m
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="no iteration logs")
    verbose = not parser.parse_args().quick
    reach_with_the_right_hand_up(verbose)
    jump_with_barriers_and_with_constraints(verbose)


if __name__ == "__main__":
    main()
