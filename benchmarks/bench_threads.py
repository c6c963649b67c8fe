"""Two problems on one cached robot solved one after the other, then in two threads at once: wall times and ratio.

The robot model is read-only and shared; each problem computes in its own workspaces, and the kernels release the
GIL, so the two solves overlap wherever they are in compiled code. What stays serial is the Python and numpy work
between kernel calls (the solver's loop, the cost terms, small array operations), which holds the GIL. Each pair
is solved once first to compile. The load average is printed: on a shared 2-core machine, other processes take
the second core: the last column, the process's CPU time over the wall time of the threaded solves, shows how
much of the two solves did overlap whatever the load (1: none, 2: all). Run:

    python benchmarks/bench_threads.py            # solo12 and talos_legs squats, talos_reach
    python benchmarks/bench_threads.py --quick    # solo12 squats only, fewer rounds
"""

from __future__ import annotations

import argparse
import os
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from lietraj.problems import squat, talos_reach

PAIRS = {
    "solo12 squats": lambda: (squat("solo12", depth=0.02, horizon=30), squat("solo12", depth=0.03, horizon=30)),
    "talos_legs squats": lambda: (squat("talos_legs", depth=0.08), squat("talos_legs", depth=0.1)),
    "talos_reach": lambda: (talos_reach(), talos_reach(target=(0.4, 0.1, 1.1))),
}


def _solve(example):
    return example.solve()


def time_pair(make, rounds: int) -> tuple[float, float, float, int]:
    """Median wall times (s) of the pair one after the other and in two threads, the threaded solves' CPU time over
    their wall time, and the iterations solved."""
    results = [_solve(e) for e in make()]  # compiles
    sequential, threaded, overlap = [], [], []
    for _ in range(rounds):
        examples = make()
        start = time.perf_counter()
        for e in examples:
            _solve(e)
        sequential.append(time.perf_counter() - start)
        examples = make()
        start, cpu = time.perf_counter(), time.process_time()
        with ThreadPoolExecutor(max_workers=2) as pool:
            list(pool.map(_solve, examples))
        threaded.append(time.perf_counter() - start)
        overlap.append((time.process_time() - cpu) / threaded[-1])
    return (float(np.median(sequential)), float(np.median(threaded)), float(np.median(overlap)),
            sum(r.iterations for r in results))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="solo12 squats only, fewer rounds")
    args = parser.parse_args()
    names, rounds = (["solo12 squats"], 3) if args.quick else (list(PAIRS), 3)
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}; median of {rounds} rounds")
    print(f"{'pair':18s} {'iterations':>10s} {'one thread s':>12s} {'two threads s':>13s} {'speed-up':>8s} "
          f"{'CPU/wall (2 threads)':>20s}")
    for name in names:
        t1, t2, overlap, iterations = time_pair(PAIRS[name], rounds)
        print(f"{name:18s} {iterations:10d} {t1:12.3f} {t2:13.3f} {t1 / t2:8.2f} {overlap:20.2f}")
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
