"""Many solves at once on Dask: each parameter point of a problem built and solved in a worker process, one row of
a table per solve.

``solve_many`` runs on a ``distributed.Client`` it is given, on the scheduler at an address it is given, or on a
``LocalCluster`` of its own (one single-threaded worker process per core). The points are dealt to the workers in
turn, one task each (``deal``); a task solves its points one after the other, building each problem in the worker
(only the builder's name or function and the points' parameters travel), for ``TASK_SECONDS`` after its first solve,
and sends back the rows of those it solved (and their solutions when they are asked for) with the points it did not
reach, which are dealt again as tasks of as many points as it solved in that time. Short solves thus take one task
per worker, long ones about one task each: a task costs Dask some 3 ms of the client's and scheduler's CPU, on the
cores the workers solve on, and the tasks of a batch are short enough for its progress to show and its tail to even
out. The client keeps no state a worker could lose. A task whose worker dies is run again elsewhere by the
scheduler, so every point yields exactly one row; one whose workers keep dying
(``distributed.scheduler.allowed-failures``) gives its points rows with the status "lost".

Row columns, after the point's parameters:

- ``status``: the solver's ("converged", "max_iterations", "failed", "infeasible"), "diverged" (a non-finite
  trajectory or cost), "error" (the build or the solve raised), or "lost"; ``message`` says why when it is not
  "converged" (the solver's reason, the exception);
- ``iterations``, ``cost``, ``stop``, ``gap_norm``: the solver's result (NaN where there is none);
- ``solve_time``: the solver's own seconds; ``wall_time``: the task's, build and metrics included; ``worker``;
- the problem's ``metrics`` (``ExampleProblem.metrics``), NaN where a row has none.

Kernels: numba's disk cache (``lietraj/_jit.py``) lives beside lietraj's sources, or in ``NUMBA_CACHE_DIR``,
which the local workers inherit from this process. Unless every worker's cache is stamped warm for a ready problem
(``lietraj.warmup.is_warm``), the kernels are compiled once before the batch: two tasks split the stages as
``lietraj.warmup`` does, then one solve of the first point compiles what the stages leave to a solve, and the solves
start as that ends (in the scheduler, with no round trip through this process). N workers thus do not each compile
them; workers on other machines share that work when their cache directory is on a shared file system. On a warm
cache the two tasks compile nothing (a builder of the user's, which has no stamp, pays a build and a load of its
kernels) and a fresh worker's first solve only loads the kernels from disk.
"""

from __future__ import annotations

import gc
import logging
import math
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace

import numba.core.event
import numpy as np
import pandas as pd

from lietraj.batch.grid import check_points, grid_points
from lietraj.optimal_control.solvers.solvers import SolverOptions, SolverResult
from lietraj.problems import PROBLEMS, SOLVERS, make_problem
from lietraj.warmup import Spec, is_warm, mark_warm, run_stages, split_stages, stages_for

# The solver's result, first in every row after the parameters.
RESULT_COLUMNS = ("status", "message", "iterations", "cost", "stop", "gap_norm", "solve_time", "wall_time", "worker")


@dataclass(eq=False)
class BatchResult:
    """``table``: one row per point, in the points' order (the DataFrame's index is the point's); ``solutions``:
    each point's ``SolverResult`` (None for a row without a finite one) when asked for, else empty;
    ``compile_time``: the wall seconds the workers spent compiling before the batch (0 on a warm cache);
    ``wall_time``: the batch's seconds from the first task submitted to the last row; ``tasks``: the solving tasks
    it took (the points dealt to the workers, then those a task did not reach dealt again)."""

    table: pd.DataFrame
    solutions: list[SolverResult | None] = field(default_factory=list)
    compile_time: float = 0.0
    wall_time: float = 0.0
    tasks: int = 0

    @property
    def failed(self) -> pd.DataFrame:
        """The rows whose status is not "converged"."""
        return self.table[self.table["status"] != "converged"]


def _build(problem: str | Callable, robot: str | None, parameters: Mapping):
    if isinstance(problem, str):
        return make_problem(problem, robot, **parameters)
    return problem(**parameters) if robot is None else problem(robot=robot, **parameters)


def _worker_name() -> str:
    try:
        from distributed import get_worker

        return get_worker().address
    except ValueError:  # not in a worker: a serial run
        return ""


def solve_one(problem: str | Callable, robot: str | None, parameters: Mapping, solver: str | None = None,
              options: Mapping | None = None, keep_solution: bool = True) -> tuple[dict, SolverResult | None]:
    """Build ``problem`` at ``parameters`` and solve it (one thread unless ``options`` says ``threads``): its row
    (module docstring, without the parameters) and, if ``keep_solution``, its solution (None unless finite; the history
    keeps its scalars, not its iterates). Never raises for the problem's sake: an exception is the row's "error"."""
    start = time.perf_counter()
    row, solution = _empty_row(status="error", worker=_worker_name()), None
    try:
        example = _build(problem, robot, parameters)
        chosen = replace(example.options, **{"threads": 1, **(options or {})})
        result = example.solve(solver, chosen)
        status, _, why = result.status.partition(": ")
        finite = bool(result.xs.is_finite() and np.isfinite(result.us).all() and np.isfinite(result.cost))
        row.update(status=status if finite else "diverged", message=why if finite else result.status,
                   iterations=int(result.iterations), cost=float(result.cost), stop=float(result.stop),
                   gap_norm=float(result.gap_norm), solve_time=float(result.total_time))
        if status == "max_iterations":
            row["message"] = f"max_iter = {chosen.max_iter} reached with stop = {result.stop:.3g} (tol = {chosen.tol:g})"
        elif status != "converged" and not row["message"]:
            row["message"] = status
        if finite:
            try:
                metrics = example.metrics(result)
            except (ValueError, ArithmeticError) as e:  # an unconverged iterate the contact model cannot evaluate
                row["message"] = f"{row['message']}; no metrics: {e}".lstrip("; ")
            else:
                row.update({k: float(v) for k, v in metrics.items() if k not in row and k != "converged"})
            if keep_solution:
                solution = replace(result, history=[replace(h, xs=None, us=None) for h in result.history])
    except Exception as e:  # the batch goes on: a failing solve is a row
        row["message"] = f"{type(e).__name__}: {e}"
    row["wall_time"] = time.perf_counter() - start
    return row, solution


def _empty_row(**values) -> dict:
    """A row of ``RESULT_COLUMNS`` with no result (NaN numbers), updated with ``values``."""
    return {**dict(status="", message="", iterations=0, cost=math.nan, stop=math.nan, gap_norm=math.nan,
                   solve_time=math.nan, wall_time=math.nan, worker=""), **values}


def _prime(problem: str | Callable, robot: str | None, parameters: Mapping, solver: str | None,
           stages: tuple[str, ...]) -> tuple[float, bool]:
    """Compile (into the disk cache) the kernels ``stages`` of ``solver`` call on ``problem`` at ``parameters``:
    the wall seconds if anything compiled (else 0), and whether the stages ran (the problem could be built). A ready
    problem whose cache is stamped warm is not even built."""
    if isinstance(problem, str) and is_warm(_spec(problem, robot, solver)):
        return 0.0, True
    start = time.perf_counter()
    with numba.core.event.install_recorder("numba:compile") as compiled:
        try:
            example = _build(problem, robot, parameters)
            run_stages(example.problem, example.xs0, example.us0, solver or example.solver, stages)
        except Exception:  # the solves report it, row by row, and compile what is left
            return time.perf_counter() - start if compiled.buffer else 0.0, False
    return time.perf_counter() - start if compiled.buffer else 0.0, True


def _primed(problem: str | Callable, robot: str | None, parameters: Mapping, solver: str | None, options: Mapping,
            *primes: tuple[float, bool]) -> float:
    """After the ``_prime`` tasks (their compiling seconds and whether their stages ran): if they compiled, solve
    the first point too, which compiles what the stages leave to a solve (the constrained solver's rollout, the
    metrics' kernels) once rather than in every worker; once every stage ran, a ready problem's cache is stamped
    warm (the next batch skips all this). The seconds spent compiling."""
    seconds = max(s for s, _ in primes)
    if seconds > 0:
        start = time.perf_counter()
        solve_one(problem, robot, parameters, solver, options, keep_solution=False)
        seconds += time.perf_counter() - start
    if isinstance(problem, str) and all(ran for _, ran in primes):
        mark_warm(_spec(problem, robot, solver))
    return seconds


TASK_SECONDS = 0.3
"""A task's budget: it solves no further point once this many seconds have passed since its first solve ended (the
first solve of a fresh worker loads the kernels and the robot, a second or more). 24 solo12 squats of 17-20 ms on 2
workers are one task each; a batch of 8 tasks of 3 squats took 30 ms of the client's and scheduler's CPU against 11
for 2 of 12, and its squats solved 13 % slower in the workers (whose event loops handle each task's messages beside
the solve): 1.46x against 1.72x over serial solves, in one interleaved run of ``benchmarks/bench_sweep.py``'s kind
(2026-11-27)."""


@dataclass(eq=False)
class ChunkResult:
    """What a task of ``solve_chunk`` hands back: ``rows``, ``(index, row, solution)`` for each point it solved,
    and ``rest``, the ``(index, point)`` pairs it did not reach within its budget."""

    rows: list[tuple[int, dict, SolverResult | None]]
    rest: list[tuple[int, Mapping]]


def solve_chunk(problem: str | Callable, robot: str | None, chunk: Sequence[tuple[int, Mapping]], solver: str | None,
                options: Mapping | None, keep_solution: bool, budget: float = TASK_SECONDS,
                compiled: float = 0.0) -> ChunkResult:
    """``solve_one`` at the points of ``chunk`` (``(index, point)`` pairs) in order, the first and then those that
    start within ``budget`` seconds after it: one task (after the compiling, ``compiled`` its seconds, when Dask is
    given that future). The first task of a worker process then moves what it loaded (modules, compiled kernels,
    robots: some 240 000 objects after a solo12 squat) out of the cyclic collector's sight (``_freeze_loaded``)."""
    rows, first_done = [], 0.0
    for i, point in chunk:
        if rows and time.perf_counter() - first_done >= budget:
            break
        rows.append((i, *solve_one(problem, robot, point, solver, options, keep_solution)))
        first_done = first_done or time.perf_counter()
    _freeze_loaded()
    return ChunkResult(rows, list(chunk[len(rows):]))


_loaded_frozen = False  # whether this process has frozen what it loaded (``_freeze_loaded``)


def _freeze_loaded() -> None:
    """Once per process: collect, then freeze what is left (``gc.freeze``). A full collection scanned the ~240 000
    objects a solo12 squat leaves loaded about once every 100 squats, a pause of 110 ms (six squats) in the middle
    of a batch, and a round's speed-up with one fell from 1.6 to 1.1 (``benchmarks/bench_sweep.py``). A flag, not
    ``gc.get_freeze_count``, which walks the frozen objects: 20 ms a call."""
    global _loaded_frozen
    if not _loaded_frozen:
        _loaded_frozen = True
        gc.collect()
        gc.freeze()


def deal(points: Sequence[tuple[int, Mapping]], tasks: int) -> list[list[tuple[int, Mapping]]]:
    """``points`` dealt in turn into ``tasks`` chunks (fewer for fewer points; one at least): a grid's neighbouring
    points, often alike in cost, go to different tasks, which then end together."""
    return [list(points[t::tasks]) for t in range(min(max(tasks, 1), len(points)))]


def deal_rest(rest: Sequence[tuple[int, Mapping]], solved: int) -> list[list[tuple[int, Mapping]]]:
    """The points a task that solved ``solved`` did not reach, dealt again (``deal``) into tasks of as many points
    as it solved after its first, in its budget (one at least): tasks of short solves do not multiply (a sweep's
    first task on a fresh worker solves its first point in a second or more, then some fifteen squats), and those
    of long ones keep one point each."""
    per_task = max(1, solved - 1)
    return deal(rest, -(-len(rest) // per_task))


def _spec(problem: str, robot: str | None, solver: str | None) -> Spec:
    return Spec(problem, robot, solver or PROBLEMS[problem].solver)


# Dask's periodic callbacks, slowed for a cluster whose processes share this machine's cores with the solves: the
# event loops' 20 ms tick (it only times their responsiveness), the system monitor's 0.5 s sampling (the dashboard's
# plots) and the memory monitor's 0.1 s poll. The scheduler and the nannies live in this process: idle, it used
# 45 ms of CPU a second (15 with these), its workers 25 each (5); a batch of 24 squats took 40-60 ms of it (30-40).
_QUIET_TIMERS = {"distributed.admin.tick.interval": "1s", "distributed.admin.system-monitor.interval": "5s",
                 "distributed.worker.memory.monitor-interval": "1s"}
# The scheduler hands every task to a worker at once (work stealing evens them out) instead of queueing them and
# sending one as each finishes (``worker-saturation`` 1.0, the default): a round trip to the scheduler between two
# tasks of a worker. Dask's cost per task (200 no-op tasks on 2 workers) 3.4 -> 1.1 ms.
_NO_QUEUE = {"distributed.scheduler.worker-saturation": "inf"}


def local_cluster(workers: int | None = None):
    """A ``distributed.LocalCluster`` of ``workers`` single-threaded worker processes (default: one per core),
    its logs at ERROR level; its scheduler serves on a free port (never the default 8787, which another cluster on
    the machine may hold); its workers leave Ctrl-C to this process (``worker_setup``), do not profile their tasks
    (Dask samples a task's stack every 10 ms, holding the GIL: the solves ran 6-10 % slower,
    ``benchmarks/bench_sweep.py``) and keep glibc's own trimming of freed memory (Dask sets its threshold to 64 KiB,
    which handed every freed array back to the system: a solo12 squat took 730-1110 page faults in a worker against
    0-610 without it and ~230 in a plain process)."""
    import dask
    from distributed import LocalCluster

    workers = (os.cpu_count() or 1) if workers is None else workers
    if workers < 1:
        raise ValueError(f"solve_many: workers must be at least 1, got {workers}")
    # the nannies hand these to their workers (None: the variable is not set in the worker's environment)
    with dask.config.set({"distributed.worker.profile.enabled": False,
                          "distributed.nanny.pre-spawn-environ.MALLOC_TRIM_THRESHOLD_": None, **_QUIET_TIMERS,
                          **_NO_QUEUE}):
        return LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=":0",
                            silence_logs=logging.ERROR, preload=["lietraj.batch.worker_setup"])


def connect(address: str, timeout: float = 10.0):
    """A ``distributed.Client`` of the scheduler at ``address`` (e.g. ``"tcp://host:8786"``); a ValueError names
    the address when no scheduler answers there within ``timeout`` seconds."""
    from distributed import Client

    try:
        return Client(address, timeout=timeout)
    except (OSError, ValueError, TypeError) as e:
        raise ValueError(f"no Dask scheduler answers at {address!r} ({e})") from e


def solve_many(problem: str | Callable, points: Sequence[Mapping] | Mapping[str, Sequence], robot: str | None = None,
               *, solver: str | None = None, options: Mapping | None = None, client=None, workers: int | None = None,
               keep_solutions: bool = False, on_result: Callable[[int, dict, SolverResult | None], None] | None = None
               ) -> BatchResult:
    """Solve ``problem`` (a ready problem's name, built by ``make_problem`` for ``robot``; or a builder function
    taking the parameters as keywords, and ``robot=`` if given) at each of ``points``: a list of parameter dicts, or
    a grid (parameter -> values, every combination; ``grid_points``). ``solver`` (default: the problem's) and
    ``options`` (fields of its ``SolverOptions`` to change, e.g. ``{"max_iter": 50}``) apply to every solve.

    Runs on ``client`` (a ``distributed.Client``, or a scheduler's address such as ``"tcp://host:8786"``), else on a
    ``LocalCluster`` of ``workers`` processes (default: one per core) started and closed here. ``on_result(index,
    row, solution)`` is called in this process as each solve ends (in the order they end); ``keep_solutions`` keeps
    every solution in the result. The arguments and points are checked before anything starts: a ValueError (a
    GridError for the points) names the bad one. A solve that fails is a row (module docstring), never an
    exception."""
    points = check_batch(problem, points, robot, solver, options)
    from distributed import Client

    cluster, own_client = None, None
    if client is None:
        cluster = local_cluster(workers)
        client = own_client = Client(cluster)
    elif isinstance(client, str):
        client = own_client = connect(client)
    try:
        return _run(client, problem, robot, points, solver, dict(options or {}), keep_solutions, on_result)
    except KeyboardInterrupt:
        _drop_reports_of_closed_gathers()
        raise
    finally:
        if own_client is not None:
            own_client.close()
        if cluster is not None:
            cluster.close()


class _ClosedGather(logging.Filter):
    """Drops tornado's report of a result Dask's thread was still gathering when its connection closed: a terminal's
    Ctrl-C stops the workers of the command's process group too, and distributed 2026.8 then logs that tracking
    task's CommClosedError with a traceback, after the command has said it was interrupted."""

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        return not (type(error).__name__ == "CommClosedError" and "_track_future" in record.getMessage())


def _drop_reports_of_closed_gathers() -> None:
    logger = logging.getLogger("tornado.application")
    if not any(isinstance(f, _ClosedGather) for f in logger.filters):
        logger.addFilter(_ClosedGather())


def check_batch(problem: str | Callable, points: Sequence[Mapping] | Mapping[str, Sequence], robot: str | None,
                solver: str | None, options: Mapping | None) -> list[dict]:
    """The points of ``solve_many``'s arguments as a list of dicts, once the problem, robot, solver, options and
    every point are known to be ones it can solve (ValueError, or GridError for the points, naming the bad one)."""
    if isinstance(problem, str):
        if problem not in PROBLEMS:
            raise ValueError(f"unknown problem {problem!r}; known: {', '.join(PROBLEMS)}")
        build, what = PROBLEMS[problem].build, f"problem {problem!r}"
        robots = PROBLEMS[problem].robots
        if robot is not None and robot not in robots:
            raise ValueError(f"{what} takes the robots {', '.join(robots)}; got {robot!r}")
    elif callable(problem):
        build, what = problem, f"builder {getattr(problem, '__qualname__', repr(problem))}"
    else:
        raise ValueError(f"solve_many: problem must be a ready problem's name or a builder function, got {problem!r}")
    if solver is not None and solver not in SOLVERS:
        raise ValueError(f"solve_many: solver must be one of {', '.join(SOLVERS)}, got {solver!r}")
    try:
        replace(SolverOptions(), **dict(options or {}))
    except TypeError as e:
        raise ValueError(f"solve_many: options must be fields of SolverOptions ({e})") from e
    points = grid_points(points) if isinstance(points, Mapping) else [dict(p) if isinstance(p, Mapping) else p
                                                                       for p in points]
    check_points(build, points, what)
    return points


def _all_warm(client, spec: Spec) -> bool:
    """Whether every worker's kernel cache is stamped warm for ``spec``: asked of the workers (a round trip, 4 ms
    on ``local_cluster``, half of a batch's start), or of this process's cache for a ``distributed.LocalCluster``,
    whose workers this process started and which read its cache."""
    from distributed import LocalCluster

    if isinstance(getattr(client, "cluster", None), LocalCluster):
        return is_warm(spec)
    return all(client.run(is_warm, spec).values())


def _run(client, problem, robot, points, solver, options, keep_solutions, on_result) -> BatchResult:
    from distributed import as_completed
    from distributed.scheduler import KilledWorker

    start = time.perf_counter()
    send = keep_solutions or on_result is not None
    threads = [address for address, n in client.nthreads().items() for _ in range(n)]
    workers = len(threads)
    tasks: dict = {}  # future -> its chunk of (index, point) pairs
    submitted = 0

    def submit(chunks: list, *after) -> list:
        """One task per chunk; ``after``: futures the tasks wait for. Tasks that wait for none go in one message to
        the scheduler; those that do each to a worker thread of its own, preferred, not required: the scheduler
        would otherwise run them all where that future's result is (its data), the other workers idle."""
        nonlocal submitted
        n = len(chunks)
        # A solution crosses the network only when it is asked for: a row is a few hundred bytes, a solution ~100 kB.
        if after and threads:
            mapped = [client.submit(solve_chunk, problem, robot, chunk, solver, options, send, TASK_SECONDS, *after,
                                    workers=[threads[j % workers]], allow_other_workers=True, pure=False)
                      for j, chunk in enumerate(chunks)]
        else:
            mapped = client.map(solve_chunk, [problem] * n, [robot] * n, chunks, [solver] * n, [options] * n,
                                [send] * n, [TASK_SECONDS] * n, *([future] * n for future in after), pure=False)
        tasks.update(zip(mapped, chunks))
        submitted += n
        return mapped

    primed = None
    dealt = deal(list(enumerate(points)), workers)
    if not isinstance(problem, str) or not _all_warm(client, _spec(problem, robot, solver)):
        stages = stages_for(solver or (PROBLEMS[problem].solver if isinstance(problem, str) else "fddp"))
        primes = [client.submit(_prime, problem, robot, points[0], solver, part, pure=False)
                  for part in split_stages(stages)]
        # the solves wait for the compiling in the scheduler, which starts them as it ends, not in this process
        primed = client.submit(_primed, problem, robot, points[0], solver, options, *primes, pure=False)
        submit(dealt, primed)
    else:  # every worker's cache is stamped warm for this problem: nothing to wait for
        submit(dealt)
    rows: list[dict] = [{}] * len(points)
    solutions: list[SolverResult | None] = [None] * len(points)
    # The results come with the futures, gathered by Dask's own thread: nothing in this loop waits on the cluster, so
    # that Ctrl-C lands here or in on_result, never inside a call to the scheduler (distributed 2026.8 then logs a
    # NameError's traceback from its clean-up).
    finished = as_completed(list(tasks), with_results=True, raise_errors=False)
    try:
        for future, outcome in finished:
            chunk = tasks.pop(future)
            # the outcome tells, not the future's status: a result already gathered stays good when its worker dies
            # afterwards (the scheduler then sets the future back to pending to compute it again)
            if isinstance(outcome, ChunkResult):
                results, rest = outcome.rows, outcome.rest
            else:  # its workers kept dying (KilledWorker), or the task could not run at all
                error = outcome[1] if isinstance(outcome, tuple) else outcome
                row = _empty_row(status="lost" if isinstance(error, KilledWorker) else "error",
                                 message=f"{type(error).__name__}: {error}")
                results, rest = [(i, row, None) for i, _ in chunk], []
            future.release()
            if rest:  # dealt again before on_result runs, so that no worker waits for it
                for task in submit(deal_rest(rest, len(results))):
                    finished.add(task)
            for i, row, solution in results:
                rows[i] = {**points[i], **row}
                if keep_solutions:
                    solutions[i] = solution
                if on_result is not None:
                    on_result(i, rows[i], solution)
    finally:  # stopped (Ctrl-C, an on_result that raised): the cluster forgets what is left
        finished.clear()
        for future in tasks:
            future.release()
    parameters = list(dict.fromkeys(k for p in points for k in p))
    return BatchResult(table_of(rows, parameters), solutions if keep_solutions else [],
                       primed.result() if primed is not None and primed.status == "finished" else 0.0,
                       time.perf_counter() - start, submitted)


def table_of(rows: Sequence[Mapping], parameters: Sequence[str]) -> pd.DataFrame:
    """The rows as a DataFrame: the ``parameters`` first, then ``RESULT_COLUMNS``, then the metrics in the order
    they first appear (NaN where a row has none)."""
    table = pd.DataFrame(list(rows))
    first = [c for c in (*parameters, *RESULT_COLUMNS) if c in table.columns]
    return table[first + [c for c in table.columns if c not in first]]
