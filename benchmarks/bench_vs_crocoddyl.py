"""Crocoddyl's example problems solved by lietraj's FDDP and by Crocoddyl's FDDP on the same machine in one run.

Each problem is built by Crocoddyl as its example builds it (``tests/croc_oracle.py``) and by lietraj term for
term; both start from the example's guess (constant states, quasi-static controls) with the example's solver
settings:

- ``talos_reach``: Crocoddyl 3.2.1's ``examples/humanoid_manipulation.py`` (Talos on both soles reaching
  (0.4, 0, 1.2) with the left gripper, T = 60, dt = 0.05; ``lietraj.problems.talos_reach``), regularization 0.1, at
  most 500 iterations;
- ``trot_solo12``: the trot of ``examples/quadrupedal_gaits_fwddyn.py`` (``createTrottingProblem``) on solo12, two
  steps with contact switches and touchdown impulses, T = 56, dt = 0.01
  (``lietraj.problems.trot("solo12", formulation="crocoddyl")``), at most 100 iterations, Crocoddyl's default
  regularization;
- ``trot_anymal``: the same example's trot on the example's own robot, ANYmal, with its step (0.15 m long, 0.1 m
  high; ``trot("anymal", formulation="crocoddyl", step_length=0.15, step_height=0.1)``), settings as the solo12 trot;

all stopping at 1e-9. Printed per problem: final costs and their relative difference, iterations (the
backward passes of a solve in both libraries, ``croc_oracle.iterations``), wall-clock
medians over the repeats and their ratio. Crocoddyl runs without callbacks. Each problem and thread count runs in
a fresh process with ``OMP_NUM_THREADS`` set to the thread count (Crocoddyl's OpenMP threads and the BLAS of
lietraj's Riccati sweep read it when they start) and lietraj's ``SolverOptions.threads`` equal to it; the machine,
its load average before and after, and whether the run was quiet (``benchmarks/machine.py``) are printed with the
figures::

    python benchmarks/bench_vs_crocoddyl.py                 # all problems, 1 and 2 threads, 5 solves each, interleaved
    python benchmarks/bench_vs_crocoddyl.py --repeats 1 --threads 1 --problem trot_solo12
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import argparse  # noqa: E402
import dataclasses  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable  # noqa: E402
from functools import partial  # noqa: E402
from pathlib import Path  # noqa: E402

import crocoddyl  # noqa: E402
import numpy as np  # noqa: E402

from lietraj.problems import ExampleProblem, talos_reach, trot  # noqa: E402
from machine import Quietness, crocoddyl_threads, describe, settled_environment  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from croc_oracle import iterations, talos_reach_problem, trot_anymal_problem, trot_solo12_problem  # noqa: E402


@dataclasses.dataclass(frozen=True)
class Pair:
    """One problem in both libraries: lietraj's builder, Crocoddyl's (``(problem, xs, us)`` with the example's
    guess), and the arguments after the guess of the example's ``SolverFDDP.solve`` call."""

    ours: Callable[[], ExampleProblem]
    theirs: Callable[[], tuple]
    solve_arguments: tuple


PAIRS = {
    # humanoid_manipulation.py: solver.solve(xs, us, 500, False, 0.1)
    "talos_reach": Pair(talos_reach, talos_reach_problem, (500, False, 0.1)),
    # quadrupedal_gaits_fwddyn.py: solver[i].solve(xs, us, 100, False)
    "trot_solo12": Pair(partial(trot, "solo12", formulation="crocoddyl"), trot_solo12_problem, (100, False)),
    # the same example's trot with its own robot and step: solver[i].solve(xs, us, 100, False)
    "trot_anymal": Pair(partial(trot, "anymal", formulation="crocoddyl", step_length=0.15, step_height=0.1),
                        trot_anymal_problem, (100, False)),
}


def compare(name: str, repeats: int) -> None:
    """The comparison of problem ``name`` in this process, with its ``OMP_NUM_THREADS``."""
    threads = int(os.environ["OMP_NUM_THREADS"])
    quietness = Quietness.started_by_parent(threads)
    pair = PAIRS[name]
    example = pair.ours()
    croc, xs, us = pair.theirs()
    crocoddyl_threads(croc)
    options = dataclasses.replace(example.options, threads=threads)  # lietraj uses as many threads as Crocoddyl
    example.solve(options=options)  # compile (numba caches make later runs start warm)
    ours, theirs, result, solver = [], [], None, None
    for _ in range(repeats):
        # the same iterates as the last solve's, bit for bit: without this its contact fields would recall the
        # derivatives they kept of its last passes (up to 8 a field) instead of computing them
        example.problem.forget_evaluations()
        t = time.perf_counter()
        result = example.solve(options=options)
        ours.append(time.perf_counter() - t)
        solver = crocoddyl.SolverFDDP(croc)
        t = time.perf_counter()
        converged = solver.solve(xs, us, *pair.solve_arguments)
        theirs.append(time.perf_counter() - t)
    t_ours, t_theirs = float(np.median(ours)), float(np.median(theirs))
    print(f"{name} (T = {example.problem.T}, dt = {example.dt}), median of {repeats} solve(s), "
          f"OMP_NUM_THREADS={threads}")
    print(f"{'':10s} {'cost':>14s} {'iterations':>10s} {'wall [s]':>9s} {'ms/iteration':>12s}")
    m = result.iterations + (1 if result.converged else 0)  # backward passes, as Crocoddyl's are counted
    print(f"{'lietraj':10s} {result.cost:14.9f} {m:10d} {t_ours:9.3f} {1e3 * t_ours / m:12.2f}")
    n = iterations(solver, converged)
    print(f"{'crocoddyl':10s} {solver.cost:14.9f} {n:10d} {t_theirs:9.3f} {1e3 * t_theirs / n:12.2f}")
    print(f"cost difference {abs(result.cost - solver.cost) / solver.cost:.2e} (relative); "
          f"wall time ratio lietraj / crocoddyl = {t_ours / t_theirs:.2f} [{quietness.verdict()}]")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", default="1,2", help="thread counts, comma-separated (default 1,2)")
    parser.add_argument("--problem", default=",".join(PAIRS),
                        help=f"problems, comma-separated (default {','.join(PAIRS)})")
    parser.add_argument("--in-process", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    names = [n.strip() for n in args.problem.split(",")]
    unknown = [n for n in names if n not in PAIRS]
    if unknown:
        parser.error(f"unknown problem(s) {', '.join(unknown)}; known: {', '.join(PAIRS)}")
    if args.in_process:
        compare(names[0], args.repeats)
        return
    print(describe())
    for threads in args.threads.split(","):
        for name in names:
            print()
            subprocess.run([sys.executable, __file__, "--repeats", str(args.repeats), "--problem", name,
                            "--in-process"], check=True,
                           env=settled_environment(dict(os.environ, OMP_NUM_THREADS=threads.strip())))
    print()
    print(describe())


if __name__ == "__main__":
    main()
