"""A sweep kept in a directory: the solves of a parameter grid, their table, their solutions and a summary figure,
written as each solve ends, so that a sweep that was stopped resumes where it was. The directory holds::

    sweep.json              what is swept (problem, robot, solver, options); a run on a directory of another is refused
    rows/<key>.json         each finished row, written once its solution is (atomically): what a resumed run skips
    solutions/<key>.npz     each finite solution, as ``lietraj solve --save`` writes it (``load_solution``), its
                            metadata the problem, robot, parameters and key
    results.parquet         every row (``solve_many``'s columns, with ``key`` and ``solution``, the file's name),
                            rewritten from rows/ when a run ends or stops: ``pandas.read_parquet``,
                            ``dask.dataframe.read_parquet``
    summary.png             the cost, iterations, wall time and the problem's metrics over the grid

A row's ``key`` is a hash of its parameters: the same point in a later run, in whatever grid, is the same row. Rows
with the status "lost" (their workers kept dying) are solved again by the next run; every other status is a
property of the problem and is kept.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import threading
from collections.abc import Callable, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from lietraj.batch.solves import RESULT_COLUMNS, check_batch, connect, solve_many, table_of
from lietraj.optimal_control.solution_io import save_solution

SWEEP_FILE = "sweep.json"
TABLE_FILE = "results.parquet"
FIGURE_FILE = "summary.png"
# Columns of a row that are neither parameters nor metrics.
_BOOKKEEPING = (*RESULT_COLUMNS, "key", "solution")


@dataclass(eq=False)
class SweepResult:
    """``table``: every row of the directory (``read_table``); ``solved`` rows this run solved, ``skipped`` points
    found done; the workers' ``compile_time`` and the batch's ``wall_time`` (seconds; 0 when nothing was left)."""

    directory: Path
    table: pd.DataFrame
    solved: int
    skipped: int
    compile_time: float = 0.0
    wall_time: float = 0.0


def point_key(parameters: Mapping) -> str:
    """A name for the point ``parameters``, the same in every run: a hash of its sorted JSON."""
    text = json.dumps({k: _plain(v) for k, v in parameters.items()}, sort_keys=True)
    return hashlib.sha1(text.encode()).hexdigest()[:16]


def _plain(value):
    """``value`` as JSON holds it: numpy scalars and arrays as Python numbers and lists, tuples as lists."""
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, (tuple, list, np.ndarray)):
        return [_plain(v) for v in value]
    return value


def _write_atomically(path: Path, write: Callable[[Path], None]) -> None:
    """``write(temporary)`` then renamed to ``path``: a reader, or a run stopped half-way, never sees half a file."""
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    write(temporary)
    os.replace(temporary, path)


@contextmanager
def _interrupt_after():
    """Ctrl-C (SIGINT) during the block takes effect as it ends: a row and its solution are written whole. Inside
    ``np.savez`` it was lost: zipfile's clean-up raised a ValueError in its place (a CLI error, not a stop). The
    handler is swapped rather than the signal blocked: another thread would receive a blocked signal for the
    process, and Python runs its handlers in the main thread anyway."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught = []
    previous = signal.signal(signal.SIGINT, lambda signum, frame: caught.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
    if caught and callable(previous):
        previous(signal.SIGINT, None)
    elif caught and previous == signal.SIG_DFL:
        raise KeyboardInterrupt


def _open(directory: Path, what: dict) -> None:
    """Create ``directory`` for the sweep ``what``, or check that it holds that sweep."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "rows").mkdir(exist_ok=True)
    (directory / "solutions").mkdir(exist_ok=True)
    record = directory / SWEEP_FILE
    if record.exists():
        try:
            held = json.loads(record.read_text())
        except (OSError, ValueError) as e:
            raise ValueError(f"{record}: not a sweep's record ({e}); use another --out directory") from e
        differ = [f"{k} {held.get(k)!r} (now {v!r})" for k, v in what.items() if held.get(k) != v]
        if differ:
            raise ValueError(f"{directory} holds another sweep: {', '.join(differ)}; use another directory")
    else:
        _write_atomically(record, lambda p: p.write_text(json.dumps(what, indent=1) + "\n"))


def finished_rows(directory: str | os.PathLike) -> dict[str, dict]:
    """key -> row of every row written in ``directory``'s rows/ (a file a stopped run left unreadable is not a
    row)."""
    rows = {}
    for path in sorted(Path(directory, "rows").glob("*.json")):
        try:
            row = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        rows[path.stem] = row
    return rows


def read_table(directory: str | os.PathLike) -> pd.DataFrame:
    """Every finished row of the sweep in ``directory``, as ``results.parquet`` holds them after a run (this reads
    rows/ and so includes the rows of a run still going)."""
    rows = list(finished_rows(directory).values())
    parameters = list(dict.fromkeys(k for row in rows for k in row.get("parameters", ())))
    return table_of([{**row["parameters"], **{k: v for k, v in row.items() if k != "parameters"}} for row in rows],
                    parameters)


def _parquet_ready(table: pd.DataFrame) -> pd.DataFrame:
    """``table`` with each column of mixed Python types (a parameter that is None at some points and a name at
    others) as their texts, which Parquet can hold."""
    out = table.copy()
    for column in out.columns:
        if out[column].dtype == object:
            kinds = {type(v) for v in out[column] if v is not None and not (isinstance(v, float) and np.isnan(v))}
            if len(kinds) > 1:
                out[column] = [None if v is None else repr(v) for v in out[column]]
    return out


def run_sweep(directory: str | os.PathLike, problem: str, points: Sequence[Mapping] | Mapping[str, Sequence],
              robot: str | None = None, *, solver: str | None = None, options: Mapping | None = None, client=None,
              workers: int | None = None, on_result: Callable[[int, int, dict], None] | None = None,
              figure: bool = True) -> SweepResult:
    """Solve ``problem`` at each of ``points`` (as ``solve_many`` takes them; a point given twice is one row) that
    ``directory`` does not hold yet, writing each row and solution there as it ends, then the table and (``figure``)
    the summary figure (module docstring). ``on_result(done, total, row)`` is called after each row is written
    (``done`` counts the rows found finished too). Everything is checked before any worker starts: a ValueError
    names what is wrong. Stopped (Ctrl-C), the table is written with the rows finished so far and KeyboardInterrupt
    raised again."""
    points = list({point_key(p): p for p in check_batch(problem, points, robot, solver, options)}.values())
    directory = Path(directory)
    own = connect(client) if isinstance(client, str) else None  # before the directory: a wrong address leaves none
    try:
        return _sweep(directory, problem, points, robot, solver, options, own or client, workers, on_result, figure)
    finally:
        if own is not None:
            own.close()


def _sweep(directory, problem, points, robot, solver, options, client, workers, on_result, figure) -> SweepResult:
    """``run_sweep`` once its points are checked and its client connected."""
    _open(directory, {"problem": problem, "robot": robot, "solver": solver, "options": dict(options or {})})
    finished = {k for k, row in finished_rows(directory).items() if row.get("status") != "lost"}
    todo = [(point_key(p), p) for p in points if point_key(p) not in finished]
    done = len(points) - len(todo)

    def record(i: int, row: dict, solution) -> None:
        nonlocal done
        key, parameters = todo[i]
        name = "" if solution is None else f"{key}.npz"
        entry = {"parameters": _plain(parameters), "key": key, "solution": name,
                 **{k: _plain(v) for k, v in row.items() if k not in parameters}}
        with _interrupt_after():
            if solution is not None:
                save_solution(directory / "solutions" / name, solution,
                              metadata={"problem": problem, "robot": robot, "parameters": _plain(parameters), "key": key})
            _write_atomically(directory / "rows" / f"{key}.json", lambda p: p.write_text(json.dumps(entry) + "\n"))
        done += 1
        if on_result is not None:
            on_result(done, len(points), row)

    batch = None
    try:
        if todo:
            batch = solve_many(problem, [p for _, p in todo], robot, solver=solver, options=options, client=client,
                               workers=workers, on_result=record)
    finally:
        table = read_table(directory)
        _write_atomically(directory / TABLE_FILE, lambda p: _parquet_ready(table).to_parquet(p, index=False))
    if figure and len(table):
        title = f"{problem}" + (f" on {robot}" if robot else "")
        _write_atomically(directory / FIGURE_FILE,
                          lambda p: summary_figure(table, title).savefig(p, format="png", dpi=110))
    return SweepResult(directory, table, len(todo), len(points) - len(todo),
                       0.0 if batch is None else batch.compile_time, 0.0 if batch is None else batch.wall_time)


def _swept(table: pd.DataFrame) -> list[str]:
    """The parameters that take more than one value in ``table``."""
    parameters = [c for c in table.columns if c not in _BOOKKEEPING and not _is_metric(table, c)]
    return [c for c in parameters if table[c].map(repr).nunique() > 1]


def _is_metric(table: pd.DataFrame, column: str) -> bool:
    """A column after ``worker``: ``table_of`` puts the metrics there."""
    columns = list(table.columns)
    return "worker" in columns and columns.index(column) > columns.index("worker") and column not in _BOOKKEEPING


def summary_figure(table: pd.DataFrame, title: str = ""):
    """A figure of the sweep's ``table``: one panel per quantity (cost, iterations, wall time, then each metric of
    the problem), drawn over the first parameter that varies, one line for each combination of the others; a solve
    that did not converge is a red cross (its values are the iterate's), one without a result is left out. Drawn
    into a new ``matplotlib.figure.Figure`` (no pyplot)."""
    from matplotlib.figure import Figure

    swept = _swept(table)
    x_name = swept[0] if swept else None
    quantities = ["cost", "iterations", "wall_time"] + [c for c in table.columns if _is_metric(table, c)
                                                        and pd.api.types.is_numeric_dtype(table[c])
                                                        and table[c].notna().any()]
    columns = min(3, len(quantities))
    rows = -(-len(quantities) // columns)
    fig = Figure(figsize=(4.2 * columns, 2.9 * rows + 0.6), layout="constrained")
    axes = fig.subplots(rows, columns, squeeze=False).ravel()
    order = table.sort_values(x_name, key=lambda s: s.map(_sort_key)) if x_name else table
    groups = order.groupby([order[c].map(repr) for c in swept[1:]], sort=True) if swept[1:] else [((), order)]
    numeric_x = x_name is not None and pd.api.types.is_numeric_dtype(table[x_name])
    if x_name is not None and not numeric_x:
        positions = {v: i for i, v in enumerate(dict.fromkeys(order[x_name].map(repr)))}
    for ax, quantity in zip(axes, quantities):
        for label, group in groups:
            if x_name is None:
                x = np.arange(len(group))
            elif numeric_x:
                x = group[x_name].to_numpy(dtype=float)
            else:
                x = group[x_name].map(repr).map(positions).to_numpy()
            y = pd.to_numeric(group[quantity], errors="coerce").to_numpy(dtype=float)
            name = ", ".join(f"{c}={v}" for c, v in zip(swept[1:], label if isinstance(label, tuple) else (label,)))
            ax.plot(x, y, marker="o", markersize=3, label=name or None)
            bad = (group["status"] != "converged").to_numpy()
            ax.plot(x[bad], y[bad], "x", color="red", markersize=7, label=None)
        ax.set_title(quantity)
        ax.set_xlabel(x_name or "solve")
        if x_name is not None and not numeric_x:
            ax.set_xticks(list(positions.values()), list(positions))
        ax.grid(alpha=0.3)
    for ax in axes[len(quantities):]:
        ax.set_visible(False)
    if swept[1:] and len(groups) <= 8:
        axes[0].legend(fontsize=7)
    converged = int((table["status"] == "converged").sum())
    fig.suptitle(f"{title}: {len(table)} solves, {converged} converged (red crosses: not converged)".lstrip(": "))
    return fig


def _sort_key(value):
    """Numbers by value, anything else by its text after them."""
    return (0, value, "") if isinstance(value, (int, float)) and not isinstance(value, bool) else (1, 0, repr(value))
