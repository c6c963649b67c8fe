"""A sweep of 24 solo12 squats (depths from 1 to 5 cm), solved one after the other in this process and then on 2
local Dask workers (``lietraj.batch.solve_many``), in one run: wall times, the speed-up, Dask's overhead per task
as a fraction of a solve, and the load average.

Compiling is in neither figure: the cache is warmed first (``lietraj.warmup``; the workers load the kernels from
the same disk cache), and each worker solves one squat before the clock starts (``client.run``), loading the
kernels and the robot (that first solve of a fresh worker on a warm machine is printed on its own), then a batch
of two points runs through ``solve_many`` (a client's first batch waits ~80 ms longer for its first result, once,
like the cluster's start, which is left out too). Both runs do the same work per point, ``solve_one``: build the
problem, solve it on one thread, compute its metrics; and each process moves what it loaded out of the cyclic
collector's sight after its first solve, as ``solves.solve_chunk`` does in a worker (a full collection of the ~240 000
objects a solve leaves loaded takes ~110 ms, once in some 100 squats: one in a round made the round's ratio 1.1).

The machine's speed drifts by tens of per cent over seconds when other sessions share it, so the runs alternate,
round after round (each run first, second and third in turn), and the medians are printed with each round's ratio;
21 rounds by default, as rounds of one quiet run ranged from 1.4x to 2.8x (five rounds gave medians from 1.65x to
2.06x in three runs in a row). A third run, two plain processes (no Dask) each solving a fixed half of the batch,
shows what the machine gives two processes solving side by side: Dask's figure is to be read against it.

Two overheads, both measured on one clock per process (the task stream's times are shifted by Dask's estimate of
each worker's clock offset, which jitters by milliseconds):

- Dask's own cost per task: 200 tasks that do nothing, mapped on the same workers, their wall time times the
  workers over their number; a task of ``solve_many`` solves several points (as many as ``solves.TASK_SECONDS``
  allows: the batch's tasks are counted), so its cost per solve is that over the points a task;
- the batch's time not spent solving: the workers' wall time (their number times the batch's) less the solves'
  own wall times (measured in the workers), per solve: Dask's cost, the batch's start (the warm-cache check,
  submitting) and its tail (one worker idle while the other ends its last task).

Run:

    python benchmarks/bench_sweep.py            # 24 squats, 2 workers, 21 interleaved rounds (~30 s)
    python benchmarks/bench_sweep.py --quick    # 8 squats, 2 rounds
"""

from __future__ import annotations

import argparse
import io
import multiprocessing
import time
from concurrent.futures import ProcessPoolExecutor

import numpy as np
from distributed import Client
from machine import Quietness, describe

from lietraj.batch import local_cluster, solve_many, solve_one
from lietraj.batch.solves import _freeze_loaded, solve_chunk
from lietraj.warmup import Spec, warm_up

PROBLEM, ROBOT = "squat", "solo12"


def points(count: int) -> list[dict]:
    return [{"depth": float(d)} for d in np.linspace(0.01, 0.05, count)]


def serial(batch: list[dict]) -> tuple[float, float]:
    """Wall seconds of the batch solved here one point after the other, and the mean seconds per point."""
    start = time.perf_counter()
    walls = [solve_one(PROBLEM, ROBOT, p)[0]["wall_time"] for p in batch]
    return time.perf_counter() - start, float(np.mean(walls))


def solve_all(batch: list[dict]) -> float:
    """Solve ``batch`` here (in a plain worker process); the mean seconds per point. What it loaded is then frozen
    out of the collector's sight, once, as ``solve_chunk`` does in a Dask worker."""
    walls = [solve_one(PROBLEM, ROBOT, p, keep_solution=False)[0]["wall_time"] for p in batch]
    _freeze_loaded()
    return float(np.mean(walls))


def plain_processes(pool, batch: list[dict], workers: int) -> tuple[float, float]:
    """Wall seconds of ``batch`` split in ``workers`` fixed shares solved by plain processes (no Dask), and their
    mean seconds per point: what the machine gives two processes that solve side by side."""
    start = time.perf_counter()
    means = list(pool.map(solve_all, [batch[i::workers] for i in range(workers)]))
    return time.perf_counter() - start, float(np.mean(means))


def nothing(i: int) -> int:
    return i


def dask_cost(client, workers: int, tasks: int = 200) -> float:
    """Seconds of a worker per task of ``tasks`` no-op tasks mapped on the cluster (median of 3 rounds)."""
    walls = []
    for _ in range(3):
        start = time.perf_counter()
        client.gather(client.map(nothing, range(tasks), pure=False))
        walls.append(time.perf_counter() - start)
    return float(np.median(walls)) * workers / tasks


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="8 squats instead of 24, 2 rounds")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=21, help="rounds of the three runs, interleaved (median)")
    args = parser.parse_args()
    batch = points(8 if args.quick else 24)
    args.rounds = 2 if args.quick else args.rounds
    print(f"start: {describe()}")
    print(f"{len(batch)} {ROBOT} {PROBLEM}s, depths {batch[0]['depth']:g} to {batch[-1]['depth']:g} m; compiling "
          "in neither figure (warm cache, workers warmed by one solve each)")
    warm_up([Spec(PROBLEM, ROBOT)], stream=io.StringIO())  # compiles what the cache lacks, marks it warm
    row, _ = solve_one(PROBLEM, ROBOT, batch[0])  # loads the kernels in this process
    assert row["status"] == "converged", row
    _freeze_loaded()  # as in the workers

    started = time.perf_counter()
    cluster = local_cluster(args.workers)
    with Client(cluster) as client:
        up = time.perf_counter() - started
        # through solve_chunk, as a batch's tasks: a worker's first task freezes what it loaded (solves._freeze_loaded)
        first = [task.rows[0][1]["wall_time"] for task in client.run(solve_chunk, PROBLEM, ROBOT, [(0, batch[0])],
                                                                       None, None, False).values()]
        print(f"cluster of {args.workers} workers up in {up:.2f} s; a fresh worker's first solve on a warm machine: "
              f"{', '.join(f'{t:.2f}' for t in first)} s (kernels and robot loaded from disk)")
        solve_many(PROBLEM, batch[:2], ROBOT, client=client)  # a client's first batch pays ~80 ms once
        quiet = Quietness(threads=args.workers)
        rounds, tasks = [], []
        with ProcessPoolExecutor(args.workers, mp_context=multiprocessing.get_context("spawn")) as pool:
            list(pool.map(solve_all, [batch[:1]] * args.workers))  # loads the kernels in each

            def on_dask() -> tuple[float, float, float]:
                start = time.perf_counter()
                result = solve_many(PROBLEM, batch, ROBOT, client=client)
                wall = time.perf_counter() - start
                assert (result.table["status"] == "converged").all(), result.table[["depth", "status", "message"]]
                tasks.append(result.tasks)
                solving = float(result.table["wall_time"].sum())
                return wall, solving / len(batch), (args.workers * wall - solving) / len(batch)

            runs = (lambda: serial(batch), lambda: plain_processes(pool, batch, args.workers), on_dask)
            for r in range(args.rounds):
                # each run goes first, second and third in turn: whatever the one before leaves (warm caches, a
                # core's clock) falls on all three alike
                order = [(r + k) % len(runs) for k in range(len(runs))]
                done = dict(zip(order, (runs[k]() for k in order)))
                rounds.append((*done[0], *done[1], *done[2]))
        per_task = dask_cost(client, args.workers)
    cluster.close()
    t_serial, per_solve, t_plain, per_plain, t_dask, mean, idle = (float(np.median(c)) for c in zip(*rounds))
    print(f"median of {args.rounds} rounds, each the serial run, the plain processes' and the Dask one")
    print(f"{'run':34s} {'wall s':>8s} {'per solve ms':>12s} {'speed-up':>8s}")
    print(f"{'serial, this process':34s} {t_serial:8.3f} {1e3 * per_solve:12.1f} {1.0:8.2f}")
    print(f"{f'{args.workers} plain processes, no Dask':34s} {t_plain:8.3f} {1e3 * per_plain:12.1f} "
          f"{t_serial / t_plain:8.2f}")
    print(f"{f'Dask, {args.workers} local workers':34s} {t_dask:8.3f} {1e3 * mean:12.1f} {t_serial / t_dask:8.2f}")
    ratios = ", ".join(f"{r[0] / r[4]:.2f}" for r in rounds)
    print(f"speed-up of Dask {float(np.median([r[0] / r[4] for r in rounds])):.2f}x (rounds: {ratios}; goal >= 1.8x "
          f"on 2 cores); Dask against the plain processes: {t_plain / t_dask:.2f}")
    size = len(batch) / float(np.median(tasks))
    print(f"Dask's cost per task (no-op tasks): {1e3 * per_task:.2f} ms; {size:.3g} point(s) a task "
          f"(solves.TASK_SECONDS), so {1e3 * per_task / size:.2f} ms = {100 * per_task / size / mean:.1f} % of a solve "
          f"(goal <= 5 %); the batch's time not spent solving: {1e3 * idle:.1f} ms per solve = "
          f"{100 * idle / mean:.1f} % (start and tail included)")
    verdict = "quiet" if quiet.quiet else ("BUSY: another process took CPU during the run, which slows the workers' "
                                           "solves more than the serial ones: the speed-up is understated")
    print(f"end: {describe()}; {verdict}")


if __name__ == "__main__":
    main()
