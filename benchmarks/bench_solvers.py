"""iLQR, DDP and FDDP on two problems, next to Crocoddyl's DDP and FDDP solving the same problems.

- ``ur5 reach``: the fixed-base arm brings its tool frame to a target pose (terminal frame-placement cost) with
  state and control regularization, T = 100 knots of 10 ms, semi-implicit Euler.
- ``solo12 reorient``: the free-floating quadruped in zero gravity (no contacts) turns its base by 20° about the
  vertical and brings its legs to a new posture, with the base moved only through its legs (a falling cat's problem):
  terminal state cost, state and control regularization, T = 100 knots of 10 ms.

The running costs are ``dt`` times the weighted costs, as Crocoddyl's integrated action models define them.

Both libraries start from the same guess (the controls that hold the initial posture against gravity, and their
rollout) and stop on the same stationarity measure (Σ|Q_u|², Crocoddyl's
``stoppingCriteria``) below ``1e-9``. Crocoddyl's DDP drops the dynamics' second-order term (it is iLQR), so its
column sits next to both. Times are wall-clock medians over repeated solves, the five solvers taking turns (one
solve of each per round), on this machine; compare ratios. ``iters`` counts the backward passes of a solve in
both libraries (``directions``, ``croc_oracle.iterations``), ``ms/iter`` is the median solve's time over them. Each
thread count runs in a fresh process with ``OMP_NUM_THREADS`` set to it; the machine, its load average and whether
the run was quiet (``benchmarks/machine.py``) are printed with the figures::

    python benchmarks/bench_solvers.py                        # both problems, 1 and 2 threads, 5 rounds
    python benchmarks/bench_solvers.py --quick --threads 1    # 1 round
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import argparse  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import crocoddyl  # noqa: E402
import numpy as np  # noqa: E402
import pinocchio as pin  # noqa: E402

import lietraj  # noqa: E402
from lietraj.dynamics import frame_placement, generalized_gravity  # noqa: E402
from lietraj.dynamics.model.pinocchio_interop import to_pinocchio  # noqa: E402
from lietraj.optimal_control import (  # noqa: E402
    ActionModel,
    CostSum,
    FramePlacementResidual,
    Problem,
    ResidualCost,
    RobotDynamics,
    SolverOptions,
    control_regularization,
    solve_ddp,
    solve_fddp,
    solve_ilqr,
    state_regularization,
)

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from machine import Quietness, crocoddyl_threads, describe, settled_environment  # noqa: E402
from croc_oracle import iterations  # noqa: E402
from pin_oracle import pin_model  # noqa: E402

T, DT, TOL = 100, 0.01, 1e-9
X_WEIGHT, U_WEIGHT, GOAL_WEIGHT = 1e-2, 1e-3, 1e2


def problems():
    """(name, model, x0, goal state, tool frame or None, target pose or None) of each benchmark problem."""
    rng = np.random.default_rng(0)
    ur5 = lietraj.load_robot("ur5")
    x0 = ur5.state_space.neutral()
    x0.s[:] = [0.0, -1.0, 1.0, 0.0, 1.0, 0.0]
    reach = ur5.state_space.neutral()
    reach.s[:] = x0.s + rng.normal(scale=0.4, size=ur5.n)
    tool = ur5.frames[-1].name
    yield "ur5 reach", ur5, x0, x0, tool, frame_placement(ur5, reach, tool)
    solo = lietraj.load_robot("solo12").replace(gravity=np.zeros(3))
    x0 = solo.state_space.neutral()
    goal = solo.state_space.neutral()
    goal.s[:] = rng.normal(scale=0.3, size=solo.n)
    c, s = np.cos(np.radians(20.0)), np.sin(np.radians(20.0))
    goal.H[:2, :2] = [[c, -s], [s, c]]
    yield "solo12 reorient", solo, x0, goal, None, None


def lietraj_problem(model, x0, goal, tool, target) -> Problem:
    sp, n = model.state_space, model.n

    def costs(nu):
        c = CostSum(sp, nu)
        c.add("x", state_regularization(sp, goal, DT * X_WEIGHT if nu else X_WEIGHT if tool else GOAL_WEIGHT, nu))
        if nu:
            c.add("u", control_regularization(nu, DT * U_WEIGHT, state_space=sp))
        elif tool:
            c.add("tool", ResidualCost(FramePlacementResidual(model, tool, target, nu=0)), GOAL_WEIGHT)
        return c

    return Problem(x0, ActionModel(RobotDynamics(model, DT), costs(n)), costs(0), horizon=T)


def crocoddyl_problem(model, x0, goal, tool, target) -> crocoddyl.ShootingProblem:
    pm = pin_model(model.name)
    pm.gravity.linear = model.gravity
    state = crocoddyl.StateMultibody(pm)
    actuation = (crocoddyl.ActuationModelFloatingBase(state) if model.floating_base
                 else crocoddyl.ActuationModelFull(state))
    x_goal = np.concatenate(to_pinocchio(model, goal))

    def costs(terminal):
        c = crocoddyl.CostModelSum(state, actuation.nu)
        w = GOAL_WEIGHT if terminal and not tool else X_WEIGHT
        c.addCost("x", crocoddyl.CostModelResidual(state, crocoddyl.ActivationModelWeightedQuad(np.full(state.ndx, w)),
                                                   crocoddyl.ResidualModelState(state, x_goal, actuation.nu)), 1.0)
        if not terminal:
            c.addCost("u", crocoddyl.CostModelResidual(
                state, crocoddyl.ActivationModelWeightedQuad(np.full(actuation.nu, U_WEIGHT)),
                crocoddyl.ResidualModelControl(state, actuation.nu)), 1.0)
        elif tool:
            residual = crocoddyl.ResidualModelFramePlacement(state, pm.getFrameId(tool), pin.SE3(target[:3, :3],
                                                                                                 target[:3, 3]),
                                                            actuation.nu)
            c.addCost("tool", crocoddyl.CostModelResidual(state, residual), GOAL_WEIGHT)
        return c

    def action(terminal):
        dam = crocoddyl.DifferentialActionModelFreeFwdDynamics(state, actuation, costs(terminal))
        return crocoddyl.IntegratedActionModelEuler(dam, 0.0 if terminal else DT)

    return crocoddyl_threads(crocoddyl.ShootingProblem(np.concatenate(to_pinocchio(model, x0)), [action(False)] * T,
                                                      action(True)))


def initial_controls(model, x0) -> np.ndarray:
    """The joint torques that hold x0's posture still, at every knot."""
    return np.tile(generalized_gravity(model, x0)[model.nv - model.n:], (T, 1))


def directions(result) -> int:
    """The backward passes a lietraj solve computed: one per iteration (each then steps), and the last one of a
    converged solve, whose direction met the tolerance and took no step. Crocoddyl's count
    (``croc_oracle.iterations``) is the same for the same iterates: its loop steps before it tests the tolerance."""
    return result.iterations + (1 if result.converged else 0)


def lietraj_solve(solve, problem, us0):
    """One solve: (seconds, backward passes, cost, status), without the evaluations the last solve left kept (its
    iterates are this one's)."""
    problem.forget_evaluations()
    t = time.perf_counter()
    result = solve(problem, us0=us0, options=SolverOptions(tol=TOL, max_iter=500,
                                                           threads=int(os.environ["OMP_NUM_THREADS"])))
    elapsed = time.perf_counter() - t
    n = directions(result)
    return elapsed, n, result.cost, result.status


def crocoddyl_solve(cls, problem, us0):
    """One solve from the rollout of ``us0`` (the rollout timed with it): as ``lietraj_solve``."""
    solver = cls(problem)
    solver.th_stop = TOL
    us = list(us0)
    t = time.perf_counter()
    converged = solver.solve(problem.rollout(us), us, 500, False)
    elapsed = time.perf_counter() - t
    n = iterations(solver, converged)
    return elapsed, n, solver.cost, "converged" if converged else "not converged"


def compare(repeats: int) -> None:
    """The comparison in this process, with its ``OMP_NUM_THREADS``."""
    threads = int(os.environ["OMP_NUM_THREADS"])
    # from the parent's settling: this process's start and the problems before the last one load the machine as expected
    quietness = Quietness.started_by_parent(threads)
    print(f"lietraj {lietraj.__version__}, crocoddyl {crocoddyl.__version__}, pinocchio {pin.__version__}; "
          f"T={T}, dt={DT}, tol={TOL}; median of {repeats} round(s); OMP_NUM_THREADS={threads}")
    print(f"{'problem':16s} {'solver':16s} {'iters':>6s} {'cost':>12s} {'total ms':>10s} {'ms/iter':>9s}  status")
    for name, model, x0, goal, tool, target in problems():
        ours = lietraj_problem(model, x0, goal, tool, target)
        theirs = crocoddyl_problem(model, x0, goal, tool, target)
        us0 = initial_controls(model, x0)
        runs = {f"lietraj {label}": (lambda solve=solve: lietraj_solve(solve, ours, us0))
                for label, solve in (("iLQR", solve_ilqr), ("DDP", solve_ddp), ("FDDP", solve_fddp))}
        runs |= {f"crocoddyl {label}": (lambda cls=cls: crocoddyl_solve(cls, theirs, us0))
                 for label, cls in (("DDP", crocoddyl.SolverDDP), ("FDDP", crocoddyl.SolverFDDP))}
        for run in runs.values():  # compile, warm the caches
            run()
        solves = {label: [] for label in runs}
        for _ in range(repeats):
            for label, run in runs.items():
                solves[label].append(run())
        total = {}
        for label, results in solves.items():
            _, iters, cost, status = results[-1]
            total[label] = float(np.median([r[0] for r in results]))
            print(f"{name:16s} {label:16s} {iters:6d} {cost:12.6g} {1e3 * total[label]:10.1f} "
                  f"{1e3 * total[label] / max(iters, 1):9.2f}  {status}")
        print(f"{name:16s} wall time ratios: FDDP lietraj / crocoddyl = "
              f"{total['lietraj FDDP'] / total['crocoddyl FDDP']:.2f}, DDP lietraj / FDDP crocoddyl = "
              f"{total['lietraj DDP'] / total['crocoddyl FDDP']:.2f} [{quietness.verdict()}]")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="one round")
    parser.add_argument("--threads", default="1,2", help="thread counts, comma-separated (default 1,2)")
    parser.add_argument("--in-process", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    repeats = 1 if args.quick else 5
    if args.in_process:
        compare(repeats)
        return
    print(describe())
    for threads in args.threads.split(","):
        print()
        subprocess.run([sys.executable, __file__, "--in-process"] + (["--quick"] if args.quick else []), check=True,
                       env=settled_environment(dict(os.environ, OMP_NUM_THREADS=threads.strip())))
    print()
    print(describe())


if __name__ == "__main__":
    main()
