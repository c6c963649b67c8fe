"""A sweep of 24 solo12 squats (depths from 1 to 5 cm), solved one after the other in this process and then on 2
local Dask workers (``lietraj.batch.solve_many``), in one run: wall times, the speed-up, Dask's overhead per task
as a fraction of a solve, and the load average.

Compiling is in neither figure: the cache is warmed first (``lietraj.warmup``; the workers load the kernels from
the same disk cache), and each worker solves one squat before the clock starts (``client.run``), loading the
kernels and the robot (that first solve of a fresh worker on a warm machine is printed on its own). Both runs do the same work per
point, ``solve_one``: build the problem, solve it on one thread, compute its metrics.

Dask's overhead per task is read from the workers' task stream: on each worker, the time between the end of one
task's computation and the start of the next (scheduling, moving the parameters in and the row and solution out),
summed over workers and divided by the tasks; the tail, when one worker has finished and the other still
computes, is printed apart. Run:

    python benchmarks/bench_sweep.py            # 24 squats, 2 workers
    python benchmarks/bench_sweep.py --quick    # 8 squats
"""

from __future__ import annotations

import argparse
import io
import time

import numpy as np
from distributed import Client, get_task_stream
from machine import Quietness, describe

from lietraj.batch import local_cluster, solve_many, solve_one
from lietraj.warmup import Spec, warm_up

PROBLEM, ROBOT = "squat", "solo12"


def points(count: int) -> list[dict]:
    return [{"depth": float(d)} for d in np.linspace(0.01, 0.05, count)]


def serial(batch: list[dict]) -> tuple[float, float]:
    """Wall seconds of the batch solved here one point after the other, and the mean seconds per point."""
    start = time.perf_counter()
    walls = [solve_one(PROBLEM, ROBOT, p)[0]["wall_time"] for p in batch]
    return time.perf_counter() - start, float(np.mean(walls))


def overheads(stream: list[dict], tasks: int) -> tuple[float, float, float, float]:
    """From the task stream of the solves: (seconds between one task's computation and the next on a worker, per
    task; seconds of the tail, from the first worker's last end to the last one's; mean computation seconds; the
    first computation's start, in the stream's clock)."""
    computes: dict[str, list[tuple[float, float]]] = {}
    for record in stream:
        if not record["key"].startswith(("solve_one", "_solve_after")):
            continue
        for part in record["startstops"]:
            if part["action"] == "compute":
                computes.setdefault(record["worker"], []).append((part["start"], part["stop"]))
    gaps, ends, durations = 0.0, [], []
    for spans in computes.values():
        spans.sort()
        gaps += sum(b[0] - a[1] for a, b in zip(spans, spans[1:]))
        ends.append(spans[-1][1])
        durations += [b - a for a, b in spans]
    return gaps / tasks, max(ends) - min(ends), float(np.mean(durations)), min(s[0][0] for s in computes.values())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="8 squats instead of 24")
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    batch = points(8 if args.quick else 24)
    print(f"start: {describe()}")
    print(f"{len(batch)} {ROBOT} {PROBLEM}s, depths {batch[0]['depth']:g} to {batch[-1]['depth']:g} m; compiling "
          "in neither figure (warm cache, workers warmed by one solve each)")
    warm_up([Spec(PROBLEM, ROBOT)], stream=io.StringIO())  # compiles what the cache lacks, marks it warm
    row, _ = solve_one(PROBLEM, ROBOT, batch[0])  # loads the kernels in this process
    assert row["status"] == "converged", row

    started = time.perf_counter()
    cluster = local_cluster(args.workers)
    with Client(cluster) as client:
        up = time.perf_counter() - started
        first = [row["wall_time"] for row, _ in client.run(solve_one, PROBLEM, ROBOT, batch[0]).values()]
        print(f"cluster of {args.workers} workers up in {up:.2f} s; a fresh worker's first solve on a warm machine: "
              f"{', '.join(f'{t:.2f}' for t in first)} s (kernels and robot loaded from disk)")
        quiet = Quietness(threads=args.workers)
        t_serial, per_solve = serial(batch)
        with get_task_stream(client) as stream:
            start, clock = time.perf_counter(), time.time()
            result = solve_many(PROBLEM, batch, ROBOT, client=client)
            t_dask = time.perf_counter() - start
        gap, tail, compute, first_start = overheads(stream.data, len(batch))
    cluster.close()
    table = result.table
    assert (table["status"] == "converged").all(), table[["depth", "status", "message"]]
    print(f"{'run':28s} {'wall s':>8s} {'per solve ms':>12s}")
    print(f"{'serial, this process':28s} {t_serial:8.3f} {1e3 * per_solve:12.1f}")
    print(f"{f'Dask, {args.workers} local workers':28s} {t_dask:8.3f} {1e3 * table['wall_time'].mean():12.1f}")
    print(f"speed-up {t_serial / t_dask:.2f}x (goal >= 1.8x on 2 cores)")
    print(f"Dask overhead per task: {1e3 * gap:.2f} ms between tasks on a worker = {100 * gap / compute:.1f} % of a "
          f"solve's {1e3 * compute:.1f} ms (goal <= 5 %); tail {1e3 * tail:.0f} ms with one worker idle; "
          f"first solve started {1e3 * (first_start - clock):.0f} ms after the call (the cache's check included)")
    verdict = "quiet" if quiet.quiet else ("BUSY: another process took CPU during the run, which slows the workers' "
                                           "solves more than the serial ones: the speed-up is understated")
    print(f"end: {describe()}; {verdict}")


if __name__ == "__main__":
    main()
