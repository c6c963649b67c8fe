"""Where a solver iteration's time goes, stage by stage, in lietraj and in Crocoddyl on the same problems.

At each problem's solution (FDDP's, where both libraries' iterations are alike), every stage of an iteration is
timed alone, the median of repeated calls:

- derivatives: of the dynamics (``trajectory_derivatives`` of the problem's one dynamics group) and of the costs
  (running and terminal ``derivatives``); Crocoddyl computes both in ``ShootingProblem.calcDiff``;
- backward pass: the Riccati sweep (``riccati.backward_pass``; Crocoddyl's ``backwardPass``);
- forward pass: the rollout of the policy at a full step (``forward_pass.rollout_policy``) and the cost of the trial
  (``Problem.cost``); Crocoddyl's ``forwardPass(1)`` does both;
- DDP's second-order term (``Problem.dynamics_contraction``; Crocoddyl has none).

The iteration is a solve's time over its backward passes, in both libraries (the solve from the guess, so it
includes the line search's extra trials of the first iterations); what the stages, timed at the solution, do not
account for is Python between them and those extra trials.
The problems are ``bench_solvers.py``'s two and ``bench_vs_crocoddyl.py``'s ``talos_reach`` and ``trot_solo12`` (six
groups of knots, each stage timed over all of them)::

    python benchmarks/bench_iteration.py
"""

from __future__ import annotations

import itertools
import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import crocoddyl  # noqa: E402
import numpy as np  # noqa: E402

import bench_solvers  # noqa: E402
from lietraj.optimal_control import SolverOptions, solve_fddp  # noqa: E402
from lietraj.optimal_control.solvers.forward_pass import rollout_policy  # noqa: E402
from lietraj.optimal_control.solvers.riccati import backward_pass  # noqa: E402
from lietraj.problems import talos_reach, trot  # noqa: E402
from machine import Quietness, crocoddyl_threads, describe  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from croc_oracle import iterations, talos_reach_problem, trot_solo12_problem  # noqa: E402


def median_time(call, repeats: int = 21) -> float:
    """The median wall time of ``call()`` in seconds, after one call to warm it."""
    call()
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        call()
        times.append(time.perf_counter() - t)
    return float(np.median(times))


def cases():
    """(name, lietraj problem, its guess (xs0 or None, us0), Crocoddyl problem, its guess (xs, us), Crocoddyl's
    solve arguments after the guess)."""
    for name, model, x0, goal, tool, target in bench_solvers.problems():
        us0 = bench_solvers.initial_controls(model, x0)
        croc = bench_solvers.crocoddyl_problem(model, x0, goal, tool, target)
        yield name, bench_solvers.lietraj_problem(model, x0, goal, tool, target), (None, us0), croc, \
            (croc.rollout(list(us0)), list(us0)), (500, False, 0.1)
    example = talos_reach()
    croc, xs, us = talos_reach_problem()
    yield "talos_reach", example.problem, (example.xs0, example.us0), croc, (xs, us), (500, False, 0.1)
    example = trot("solo12", formulation="crocoddyl")
    croc, xs, us = trot_solo12_problem()
    yield "trot_solo12", example.problem, (example.xs0, example.us0), croc, (xs, us), (100, False)


def lietraj_stages(problem, guess) -> dict[str, float]:
    solve_fddp(problem, *guess, SolverOptions(max_iter=500))  # compile (or load the kernels from the cache)
    problem.forget_evaluations()  # the timed solve repeats the first's iterates: nothing recalled from it
    t = time.perf_counter()
    result = solve_fddp(problem, *guess, SolverOptions(max_iter=500))
    iteration = (time.perf_counter() - t) / max(bench_solvers.directions(result), 1)
    xs, us = result.xs, result.us
    D = problem.derivatives(xs, us, out=problem.empty_derivatives())
    bp = backward_pass(D, 1e-9)
    # a robot field keeps its last derivatives (a contact field several: RUNS_KEPT) and returns them for the same
    # knots: time them at knots never seen before, then leave them kept at the solution, as an iteration's Jacobians
    # leave them for DDP's term; the problem's own halves of Problem.derivatives, each over every group of knots
    controls = (us + 1e-9 * i for i in itertools.count(1))
    dynamics = median_time(lambda: problem._dynamics_derivatives(xs, next(controls), D.dynamics))
    problem._dynamics_derivatives(xs, us, D.dynamics)
    stages = {
        "dynamics derivatives": dynamics,
        "cost derivatives": median_time(lambda: problem.cost_derivatives(xs, us, D)),
        "backward pass": median_time(lambda: backward_pass(D, 1e-9)),
        "forward pass: rollout": median_time(lambda: rollout_policy(problem.dynamics_sequence, problem.x0, xs, us,
                                                                    bp.k, bp.K, 1.0)),
        "forward pass: cost": median_time(lambda: problem.cost(xs, us)),
    }
    try:
        stages["DDP's second-order term"] = median_time(lambda: problem.dynamics_contraction(xs, us, bp.lam[1:]),
                                                        repeats=5)
    except NotImplementedError:
        pass
    stages["iteration (FDDP)"] = iteration
    return stages


def crocoddyl_stages(problem, guess, arguments) -> dict[str, float]:
    solver = crocoddyl.SolverFDDP(crocoddyl_threads(problem))
    xs, us = guess
    t = time.perf_counter()
    converged = solver.solve(xs, us, *arguments)
    iteration = (time.perf_counter() - t) / max(iterations(solver, converged), 1)
    xs, us = list(solver.xs), list(solver.us)

    def derivatives():
        problem.calc(xs, us)
        problem.calcDiff(xs, us)

    calc = median_time(lambda: problem.calc(xs, us))
    stages = {"derivatives (calc + calcDiff) - calc": median_time(derivatives) - calc}
    solver.setCandidate(xs, us, True)
    derivatives()
    stages["backward pass"] = median_time(solver.backwardPass)
    stages["forward pass (rollout and cost)"] = median_time(lambda: solver.forwardPass(1.0))
    stages["iteration (FDDP)"] = iteration
    return stages


def main() -> None:
    print(describe())
    quietness = Quietness(1)
    for name, problem, guess, croc, croc_guess, croc_arguments in cases():
        ours, theirs = lietraj_stages(problem, guess), crocoddyl_stages(croc, croc_guess, croc_arguments)
        print(f"\n{name} (T = {problem.T}), ms, OMP_NUM_THREADS={os.environ['OMP_NUM_THREADS']}")
        accounted = 0.0
        for stage, seconds in ours.items():
            if stage == "iteration (FDDP)":
                print(f"  lietraj   {'Python and the rest':38s} {1e3 * (seconds - accounted):8.3f}")
            elif not stage.startswith("DDP"):
                accounted += seconds
            print(f"  lietraj   {stage:38s} {1e3 * seconds:8.3f}")
        for stage, seconds in theirs.items():
            print(f"  crocoddyl {stage:38s} {1e3 * seconds:8.3f}")
        print(f"  iteration ratio lietraj / crocoddyl = {ours['iteration (FDDP)'] / theirs['iteration (FDDP)']:.2f} "
              f"[{quietness.verdict()}]")
    print()
    print(describe())


if __name__ == "__main__":
    main()
