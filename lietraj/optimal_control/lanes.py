"""Work shared by the calling thread and a solver's second thread (``SolverOptions.threads = 2``).

A solver with two threads hands its second one, an ``Executor`` of one worker, the costs' derivatives of an
iteration, and computes the dynamics' in the calling thread; the dynamics' knots are cut into pieces that both
threads take in turn (``share``), so that the second thread helps with them as soon as the costs are done and
neither waits for the other while pieces are left. Each thread is a *lane* (0: the calling thread, 1: the
executor's) and computes with the work arrays of its lane, so that no work array is written by two threads.

Pieces are contiguous runs of knots (``knot_pieces``), every knot's result independent of how the knots are cut:
a solve with two threads is bit-identical to the solve with one. A piece costs the Python of one batched call
(tens of microseconds), so the knots are cut only where the work pays for it.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Executor

PIECES = 4
"""Pieces per shared computation: enough for the lanes to end together when one joins late, few enough that the
Python per piece stays small."""

MIN_PIECE_WORK = 8000
"""Knots times the square of the velocity dimension below which a piece costs more Python than it saves (ur5's
100 knots, 3600, are not cut; solo12's, 32400, and Talos's, 86640, are)."""

MIN_SHARED_WORK = 15000
"""Knots times the square of half the state tangent (``T (ndx / 2)²``, the velocity dimension's square for a robot)
below which a solver keeps to one thread: the second thread's gain is the dynamics' kernels it takes, its cost the
hand-over of every call and the Global Interpreter Lock the two threads' Python contends for. Measured with two
threads against one (2026-11-26): ur5 reach (3600) 1.26 times slower, solo12 reorientation (32400) 1.07 times
faster, talos_reach (86640) 1.1 to 1.3 times faster; the solo12 and anymal trots of Crocoddyl's example (18144)
1.04 to 1.19 times slower while the contact costs gathered the runs' contact derivatives in the dynamics' order,
1.10 times faster since they gather them from the last run (2026-11-27)."""


def worth_a_second_thread(T: int, ndx: int) -> bool:
    """Whether a problem of ``T`` knots on a state tangent of size ``ndx`` has the work for two threads
    (``MIN_SHARED_WORK``)."""
    return T * (ndx // 2) ** 2 >= MIN_SHARED_WORK


def knot_pieces(N: int, nv: int, executor: Executor | None) -> list[tuple[int, int]]:
    """``[(start, stop), ...]`` covering the knots ``0 .. N-1`` in order: one piece without an executor or for
    little work, else up to ``PIECES`` of about equal length."""
    if executor is None:
        return [(0, N)] if N > 0 else []
    count = max(1, min(PIECES, N, N * nv * nv // MIN_PIECE_WORK))
    bounds = [round(i * N / count) for i in range(count + 1)]
    return [(a, b) for a, b in zip(bounds[:-1], bounds[1:]) if b > a]


def knot_rows(result, a: int, b: int):
    """Knots ``a .. b - 1`` of a per-knot result dataclass (each field an array with a leading knot axis), as views:
    the part of a whole result a piece reads or writes."""
    return type(result)(*(x[a:b] for x in vars(result).values()))


def share(tasks: Sequence[Callable[[int], None]], executor: Executor | None) -> None:
    """Run every task once, each called with the lane that runs it. Without an executor, or for one task, the
    calling thread runs them all (lane 0). Otherwise both lanes take the next task nobody has taken until none is
    left: the second lane joins once its earlier work (the costs) is done, or not at all, and the calling thread
    waits only for the tasks the second lane took, never for work queued behind it. That keeps a task free to wait
    for what the second lane is computing (a contact cost waiting for the contact dynamics' derivatives): the
    calling thread finishes the pieces alone meanwhile. Returns once every task has run; re-raises the first
    exception in task order."""
    if executor is None or len(tasks) < 2:
        for task in tasks:
            task(0)
        return
    taken = itertools.count()  # next() on it is atomic: each index goes to one lane
    done = [threading.Event() for _ in tasks]
    errors: list[BaseException | None] = [None] * len(tasks)

    def drain(lane: int) -> None:
        while (i := next(taken)) < len(tasks):
            try:
                tasks[i](lane)
            except BaseException as e:  # re-raised in the calling thread, in task order
                errors[i] = e
            finally:
                done[i].set()

    executor.submit(drain, 1)
    drain(0)
    for event in done:
        event.wait()
    for error in errors:
        if error is not None:
            raise error
