"""Many solves at once (issue 20): ``solve_many`` on a real ``dask.distributed`` cluster of worker processes gives
each point's solve as solving it here does, a failing solve is a row, a worker killed in the middle loses nothing,
a bad grid stops everything before a worker starts; ``lietraj sweep`` writes its table, solutions and figure, and
resumes a stopped sweep. The problems are solo12 squats over a few knots (tens of milliseconds a solve)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

import lietraj.batch.solves as batch_module
import lietraj.batch.sweep as sweep_module
import lietraj.cli as cli
from lietraj.batch import (GridError, grid_points, local_cluster, parse_axis, read_table, run_sweep, solve_many,
                           summary_figure)
from lietraj.cli import main
from lietraj.optimal_control.solution_io import load_solution
from lietraj.problems import make_problem, squat
from lietraj.warmup import Spec, _stamp, is_warm, mark_warm

SQUAT = dict(problem="squat", robot="solo12")


@pytest.fixture(scope="module")
def client():
    from distributed import Client

    cluster = local_cluster(2)
    with Client(cluster) as c:
        yield c
    cluster.close()


@pytest.fixture
def no_worker(monkeypatch):
    """Fail the test if a cluster is started or a batch submitted."""

    def refuse(*args, **kwargs):
        raise AssertionError("a worker was started before the grid was checked")

    monkeypatch.setattr(batch_module, "local_cluster", refuse)
    monkeypatch.setattr(batch_module, "_run", refuse)


def serial(parameters: dict, **options):
    """The oracle: the same problem built and solved in this process, one thread, as ``lietraj solve`` would."""
    example = make_problem("squat", "solo12", **parameters)
    return example, example.solve(options=replace(example.options, threads=1, **options))


# ---- grids ------------------------------------------------------------------------------------------------------

def test_grid_is_every_combination_first_parameter_slowest():
    points = grid_points({"depth": np.array([0.02, 0.03]), "horizon": [8, 10, 12]})
    assert points == [{"depth": d, "horizon": h} for d in (0.02, 0.03) for h in (8, 10, 12)]
    assert type(points[0]["depth"]) is float  # numpy scalars become Python numbers (JSON metadata, messages)


def test_parse_axis_ranges_and_lists():
    assert parse_axis("depth=0.01:0.03:3") == ("depth", [0.01, 0.02, 0.03])
    assert set(parse_axis("depth=0.01:0.05:5")[1]) <= set(parse_axis("depth=0.01:0.05:9")[1])  # same points
    key, values = parse_axis("horizon=10:20:3")
    assert (key, values) == ("horizon", [10, 15, 20]) and all(type(v) is int for v in values)
    assert parse_axis("horizon=10:15:3")[1] == [10.0, 12.5, 15.0]  # not integers: numbers, rejected later for an int
    assert parse_axis("lift=None,FL_FOOT") == ("lift", [None, "FL_FOOT"])
    assert parse_axis("target=(0.4,0,1.2),(0.5,0,1.1)") == ("target", [(0.4, 0, 1.2), (0.5, 0, 1.1)])
    assert parse_axis("depth=0.02:0.02:1") == ("depth", [0.02])
    for text, message in [("depth", "expected KEY="), ("depth=", "no values"), ("depth=0.1:0.2:0", "COUNT must be"),
                          ("depth=0.1:0.2:2.5", "COUNT must be"), ("depth=0.1:0.1:3", "empty range"),
                          ("depth=0.1:0.2:1", "needs START = STOP"), ("depth=a:0.2:3", "START and STOP numbers"),
                          ("depth=0.1,0.2,0.1", "0.1 given more than once"), ("depth=0.1:1e999:3", "finite")]:
        with pytest.raises(GridError, match=message):
            parse_axis(text)


@pytest.mark.parametrize("points, message", [
    ({"dept": [0.02]}, "problem 'squat' has no parameter 'dept'; its parameters: depth, horizon"),
    ({"depth": []}, "'depth' has no values"),
    ({"depth": ["deep"]}, r"depth='deep' \(point 0\): expected a finite number or None"),
    ({"horizon": [8, 9.5]}, r"horizon=9.5 \(point 1\): expected an integer"),
    ({"depth": [float("nan")]}, "expected a finite number"),
    ([], "no parameter points"),
    ([{"robot": "anymal"}], "the robot is an argument of its own"),
])
def test_bad_grid_is_an_error_before_any_worker_starts(no_worker, points, message):
    with pytest.raises(GridError, match=message):
        solve_many("squat", points, "solo12")


def test_bad_arguments_are_errors_before_any_worker_starts(no_worker):
    with pytest.raises(ValueError, match="takes the robots"):
        solve_many("squat", [{}], "ur5")
    with pytest.raises(ValueError, match="unknown problem 'sqat'"):
        solve_many("sqat", [{}])
    with pytest.raises(ValueError, match="solver must be one of"):
        solve_many("squat", [{}], solver="newton")
    with pytest.raises(ValueError, match="fields of SolverOptions"):
        solve_many("squat", [{}], options={"max_iters": 3})
    with pytest.raises(ValueError, match="max_iter=-1"):
        solve_many("squat", [{}], options={"max_iter": -1})


# ---- solve_many on a cluster --------------------------------------------------------------------------------------

def test_each_row_is_the_solve_done_here(client):
    """Every row and kept solution equals the same problem solved in this process (same kernels, one thread)."""
    grid = {"depth": [0.02, 0.03], "horizon": [8, 10]}
    batch = solve_many("squat", grid, "solo12", client=client, keep_solutions=True)
    table = batch.table
    assert list(table.columns[:4]) == ["depth", "horizon", "status", "message"]
    assert len(table) == 4 and len(batch.solutions) == 4
    assert set(table["worker"]) <= set(client.scheduler_info()["workers"])
    for (i, row), point in zip(table.iterrows(), grid_points(grid)):
        assert (row["depth"], row["horizon"]) == (point["depth"], point["horizon"])
        example, result = serial(point)
        assert row["status"] == "converged" and row["iterations"] == result.iterations
        assert row["cost"] == pytest.approx(result.cost, rel=1e-12)
        metrics = example.metrics(result)
        assert row["depth_mm"] == pytest.approx(metrics["depth_mm"], rel=1e-9)
        assert row["foot_drift_mm"] == pytest.approx(metrics["foot_drift_mm"], rel=1e-6, abs=1e-9)
        np.testing.assert_allclose(batch.solutions[i].us, result.us, rtol=1e-9, atol=1e-9)
        assert all(h.xs is None for h in batch.solutions[i].history)  # the iterates stay in the worker
        assert 0 < row["solve_time"] <= row["wall_time"]


def test_a_workers_first_task_freezes_what_it_loaded_once(client):
    """After its first task a worker has its loaded objects frozen out of the collector's sight, and later tasks do
    not collect again (``gc.get_freeze_count`` is not asked either: it walks the frozen objects, 20 ms a call)."""
    ran = sorted(set(solve_many("squat", {"depth": [0.02, 0.03]}, "solo12", client=client).table["worker"]))
    code = ("import gc; import lietraj.batch.solves as s; full = []\n"
            "gc.callbacks.append(lambda phase, info: phase == 'start' and info['generation'] == 2 and full.append(1))\n"
            "s._freeze_loaded(); frozen = gc.get_freeze_count(); s._freeze_loaded()\n"
            "print(frozen, len(full), gc.get_freeze_count() == frozen)")
    frozen, collections, unchanged = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                                                    check=True).stdout.split()
    assert int(frozen) > 1000 and collections == "1" and unchanged == "True"
    assert all(client.run(lambda: batch_module._loaded_frozen, workers=ran).values())  # the workers that solved


def test_a_local_clusters_warm_check_reads_this_process_cache_as_its_workers_do(client):
    """On a LocalCluster the warm-cache check reads this process's cache, without asking the workers, and agrees
    with them; a client of a scheduler's address asks the workers."""
    from distributed import Client

    spec = Spec("squat", "hyq", "ilqr")
    try:
        for warm in (False, True):
            if warm:
                mark_warm(spec)
            else:
                _stamp(spec).unlink(missing_ok=True)
            asked = all(client.run(is_warm, spec).values())
            assert batch_module._all_warm(client, spec) is warm and asked is warm
            with Client(client.scheduler.address) as remote:
                assert getattr(remote, "cluster", None) is None and batch_module._all_warm(remote, spec) is warm
    finally:
        _stamp(spec).unlink(missing_ok=True)


def test_a_failing_solve_is_a_row_and_the_batch_goes_on(client):
    def fragile_squat(depth: float, com_weight: float = 1e5):
        if depth < 0:
            raise RuntimeError("this builder refuses negative depths")
        return squat("solo12", depth=depth, horizon=8, com_weight=com_weight)

    points = [{"depth": 0.02}, {"depth": -1.0}, {"depth": 0.02, "com_weight": 1e300}, {"depth": 0.9}]
    batch = solve_many(fragile_squat, points, client=client)
    table = batch.table
    assert list(batch.failed.index) == [1, 2, 3]
    assert list(table["status"]) == ["converged", "error", "failed", "error"]
    assert table["message"][1] == "RuntimeError: this builder refuses negative depths"
    assert "Q_uu not positive definite" in table["message"][2] and np.isfinite(table["cost"][2])
    assert table["message"][3].startswith("ValueError: squat: depth must be in")
    assert table["cost"][[1, 3]].isna().all() and table["depth_mm"][[1, 3]].isna().all()
    unconverged = solve_many("squat", [{"horizon": 8}], "solo12", options={"max_iter": 1}, client=client).table
    assert unconverged["status"][0] == "max_iterations" and unconverged["iterations"][0] == 1
    assert unconverged["message"][0].startswith("max_iter = 1 reached with stop = ")


def test_a_task_solves_until_its_budget_and_hands_back_the_rest(monkeypatch):
    """``solve_chunk`` in this process: within its budget every point, with its index; with none, the first point
    only and the others handed back in order; the rows are those of ``solve_one``."""
    monkeypatch.setattr(batch_module, "_loaded_frozen", True)  # this process's collector stays as other tests expect
    chunk = [(4, {"depth": 0.02, "horizon": 8}), (7, {"depth": 0.03, "horizon": 8})]
    whole = batch_module.solve_chunk("squat", "solo12", chunk, None, None, False, budget=60.0)
    assert [i for i, _, _ in whole.rows] == [4, 7] and whole.rest == []
    first = batch_module.solve_chunk("squat", "solo12", chunk, None, None, False, budget=0.0)
    assert [i for i, _, _ in first.rows] == [4] and first.rest == chunk[1:]
    assert first.rows[0][1]["cost"] == whole.rows[0][1]["cost"] == serial(chunk[0][1])[1].cost
    assert batch_module.deal(chunk * 3, 4) == [[chunk[0], chunk[0]], [chunk[1], chunk[1]], [chunk[0]], [chunk[1]]]
    assert batch_module.deal(chunk, 5) == [[chunk[0]], [chunk[1]]]
    rest = [(i, {"depth": 0.01 * i}) for i in range(10)]
    assert [len(c) for c in batch_module.deal_rest(rest, 4)] == [3, 3, 2, 2]  # 3 solved in the budget
    assert [len(c) for c in batch_module.deal_rest(rest, 1)] == [1] * 10
    assert sorted(p for c in batch_module.deal_rest(rest, 6) for p in c) == rest


def test_short_solves_take_a_task_a_worker_long_ones_a_task_each(client, monkeypatch):
    """The points of a batch dealt to the two workers in turn: squats that fit in a task's budget are one task a
    worker, on each of them even when the tasks wait for the compiling (the cache not stamped warm: its result lives
    on one worker), and with no budget each point is a task of its own, the rest dealt again after each; the rows
    are the same either way."""
    points = [{"depth": d, "horizon": 8} for d in np.linspace(0.01, 0.04, 6)]
    monkeypatch.setattr(batch_module, "TASK_SECONDS", 60.0)
    _stamp(Spec("squat", "solo12", "fddp")).unlink(missing_ok=True)
    one = solve_many("squat", points, "solo12", client=client)
    assert one.compile_time == 0.0 and is_warm(Spec("squat", "solo12", "fddp"))  # the kernels were in the cache
    monkeypatch.setattr(batch_module, "TASK_SECONDS", 0.0)
    each = solve_many("squat", points, "solo12", client=client)
    assert (one.tasks, each.tasks) == (2, 6)
    assert one.table["worker"].nunique() == 2
    pd.testing.assert_frame_equal(one.table.drop(columns=["solve_time", "wall_time", "worker"]),
                                  each.table.drop(columns=["solve_time", "wall_time", "worker"]))


def test_a_worker_killed_mid_sweep_loses_nothing(client, monkeypatch):
    """One worker is killed (SIGKILL) while it runs a task, after the first row: its tasks run again elsewhere and
    every point has exactly one row, each the solve done here. Each task solves one point (no budget), the rest
    dealt again: tasks are running when the first row arrives."""
    monkeypatch.setattr(batch_module, "TASK_SECONDS", 0.0)
    points = [{"depth": d, "horizon": 12} for d in np.linspace(0.01, 0.04, 12)]
    killed: dict = {}

    def kill_a_busy_worker(index, row, solution):
        if killed:
            return
        # the tasks dealt again after this row's reach the scheduler in an instant: wait for one to be running
        deadline = time.monotonic() + 10.0
        while True:
            processing = client.processing()
            busy = [w for w, tasks in processing.items() if tasks]
            if busy or time.monotonic() > deadline:
                break
            time.sleep(0.001)
        assert busy, "no task running when the worker was to be killed"
        pid = client.run(os.getpid, workers=[busy[0]])[busy[0]]
        os.kill(pid, signal.SIGKILL)
        killed.update(worker=busy[0], tasks=len(processing[busy[0]]))

    table = solve_many("squat", points, "solo12", client=client, on_result=kill_a_busy_worker).table
    assert killed["tasks"] >= 1
    assert len(table) == len(points) and list(table["depth"]) == [p["depth"] for p in points]
    assert (table["status"] == "converged").all()
    # The killed worker's rows are those it finished before dying: more than the first one when the client had
    # gathered several results before the first reached on_result (short solves). The tasks it still held ran on
    # the other worker, beside that worker's own (at most one of them finishing in the instant before the kill).
    assert table["worker"].ne(killed["worker"]).sum() >= killed["tasks"]
    for k in (0, len(points) - 1):
        assert table["cost"][k] == pytest.approx(serial(points[k])[1].cost, rel=1e-12)


# ---- compiling once ---------------------------------------------------------------------------------------------

def reach_builder():
    """A builder of ur5 reaching a point (x, 0.2, 0.5) in 20 knots: a problem of the user's own, sent to the
    workers by value (it is defined here, in a function, so that they need not import this test module)."""

    def reach(x: float):
        import lietraj
        from lietraj.optimal_control import (ActionModel, CostSum, FramePlacementResidual, Problem, ResidualCost,
                                             RobotDynamics, control_regularization, state_regularization)
        from lietraj.problems import ExampleProblem

        ur5 = lietraj.load_robot("ur5")
        x0 = ur5.state_space.neutral()
        target = np.eye(4)
        target[:3, 3] = [x, 0.2, 0.5]
        running = CostSum(ur5.state_space, ur5.n)
        running.add("x", state_regularization(ur5.state_space, x0, 1e-4, ur5.n))
        running.add("u", control_regularization(ur5.n, 1e-5))
        terminal = CostSum(ur5.state_space, 0)
        terminal.add("tool", ResidualCost(FramePlacementResidual(ur5, "tool0", target, nu=0)), 100.0)
        problem = Problem(x0, ActionModel(RobotDynamics(ur5, 0.02), running), terminal, horizon=20)
        return ExampleProblem("reach", ur5, problem, np.zeros((20, ur5.n)))

    return reach


def count_compiles(dask_worker) -> None:
    """Run on each worker (``client.run``): record the task running at each numba compilation."""
    import numba.core.event
    from distributed.worker import thread_state

    events = dask_worker.compiles = []

    class Recorder(numba.core.event.Listener):
        def on_start(self, event):
            events.append(str(getattr(thread_state, "key", "")).split("-")[0])

        def on_end(self, event):
            pass

    numba.core.event.register("numba:compile", Recorder())


def compiles(dask_worker) -> list[str]:
    return dask_worker.compiles


def test_kernels_compile_once_for_all_workers_and_not_at_all_on_a_warm_cache(tmp_path, monkeypatch):
    """From an empty cache (``NUMBA_CACHE_DIR``, which the workers inherit), the compiling tasks compile every
    kernel and the solves none; a new cluster on that cache compiles nothing and its workers start solving at
    once (their first solve loads the kernels from disk)."""
    from distributed import Client

    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path / "cache"))
    points = [{"x": x} for x in (0.3, 0.4, 0.5, 0.6)]
    results = []
    for _ in range(2):
        cluster = local_cluster(2)
        with Client(cluster) as c:
            c.run(count_compiles)
            batch = solve_many(reach_builder(), points, client=c)
            results.append((batch, [k for events in c.run(compiles).values() for k in events]))
        cluster.close()
    (cold, cold_compiles), (warm, warm_compiles) = results
    assert (cold.table["status"] == "converged").all() and cold.compile_time > 0
    assert len(cold_compiles) > 50 and set(cold_compiles) <= {"_prime", "_primed"}
    assert next((tmp_path / "cache").rglob("*.nbi"), None) is not None
    assert warm_compiles == [] and warm.compile_time == 0
    assert warm.table["cost"].tolist() == cold.table["cost"].tolist()
    assert warm.table["wall_time"].max() < 10.0  # loading, not compiling (~1 s here; the cold compile takes ~40 s)


# ---- sweeps ---------------------------------------------------------------------------------------------------

def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    return code, out, err


# dask 2026.8's Parquet reader calls reset_index(inplace=True), which pandas 3.1 deprecates
@pytest.mark.filterwarnings("ignore:The inplace keyword in DataFrame.reset_index")
def test_sweep_writes_table_solutions_and_figure(tmp_path, capsys):
    """`lietraj sweep` on its own local cluster: the table (pandas and Dask read it), one .npz per solution as
    `--save` writes it, the summary figure; a second run skips every row."""
    import dask.dataframe as dd

    out = tmp_path / "squats"
    argv = ["sweep", "squat", "--robot", "solo12", "--grid", "depth=0.02:0.03:2", "--grid", "horizon=8,10",
            "--set", "dt=0.05", "--workers", "1", "--out", str(out)]
    code, stdout, err = run(capsys, *argv)
    assert code == 0, err
    assert "4 points (2 depth x 2 horizon) on 1 local worker" in stdout and "rows: 4 converged" in stdout
    assert "4/4" in err  # the progress bar
    table = pd.read_parquet(out / "results.parquet")
    assert len(table) == 4 and (table["dt"] == 0.05).all() and set(table["horizon"]) == {8, 10}
    assert dd.read_parquet(out / "results.parquet").compute()["cost"].sum() == pytest.approx(table["cost"].sum())
    for _, row in table.iterrows():
        saved = load_solution(out / "solutions" / row["solution"])
        assert saved.cost == row["cost"] and saved.iterations == row["iterations"]
        assert saved.metadata["parameters"] == {"dt": 0.05, "depth": row["depth"], "horizon": row["horizon"]}
        assert saved.metadata["problem"] == "squat" and saved.metadata["key"] == row["key"]
    assert (out / "summary.png").stat().st_size > 20_000
    figure = summary_figure(read_table(out), "squats")
    panels = {ax.get_title(): ax for ax in figure.axes if ax.get_visible()}
    assert list(panels)[:3] == ["cost", "iterations", "wall_time"] and "depth_mm" in panels
    lines = [line for line in panels["depth_mm"].get_lines() if line.get_label() in ("horizon=8", "horizon=10")]
    assert len(lines) == 2  # one line per horizon, over the depth
    for line in lines:
        rows = table[table["horizon"] == int(line.get_label().split("=")[1])].sort_values("depth")
        np.testing.assert_array_equal(line.get_xdata(), rows["depth"])
        np.testing.assert_array_equal(line.get_ydata(), rows["depth_mm"])
    before = {p.name: p.stat().st_mtime_ns for p in (out / "rows").iterdir()}
    code, stdout, _ = run(capsys, *argv)
    assert code == 0 and "4 point(s) were done already" in stdout and "solved" not in stdout
    assert {p.name: p.stat().st_mtime_ns for p in (out / "rows").iterdir()} == before


def test_a_stopped_sweep_resumes_with_every_row_once(client, tmp_path, capsys, monkeypatch):
    """Ctrl-C after the second row: exit 130, the rows finished are kept; the same command solves the rest only."""
    out = tmp_path / "squats"
    argv = ["sweep", "squat", "--robot", "solo12", "--grid", "depth=0.01:0.04:6", "--set", "horizon=8",
            "--scheduler", client.scheduler.address, "--out", str(out)]
    real = cli._ProgressBar.__call__

    def interrupted(self, done, total, row):
        real(self, done, total, row)
        if done == 2:
            raise KeyboardInterrupt

    monkeypatch.setattr(cli._ProgressBar, "__call__", interrupted)
    code, _, err = run(capsys, *argv)
    assert code == 130 and "the same command resumes" in err
    assert len(pd.read_parquet(out / "results.parquet")) == 2
    monkeypatch.undo()
    code, stdout, _ = run(capsys, *argv)
    assert code == 0 and "2 point(s) were done already" in stdout and "solved 4 point(s)" in stdout
    table = pd.read_parquet(out / "results.parquet")
    assert sorted(table["depth"]) == pytest.approx(list(np.linspace(0.01, 0.04, 6)))
    assert table["key"].is_unique and len(list((out / "solutions").iterdir())) == 6


def test_ctrl_c_in_a_terminal_stops_the_sweep_without_a_traceback(tmp_path):
    """SIGINT to the command's whole process group, as a terminal's Ctrl-C sends it, workers included: the command
    says it was interrupted (exit 130) and no worker prints a KeyboardInterrupt traceback; the rows done are kept."""
    out = tmp_path / "squats"
    command = [sys.executable, "-m", "lietraj.cli", "sweep", "squat", "--robot", "solo12", "--grid",
               "depth=0.01:0.05:400", "--set", "horizon=8", "--workers", "2", "--out", str(out)]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               start_new_session=True, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        deadline = time.monotonic() + 120
        while not any((out / "rows").glob("*.json")) and process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        os.killpg(process.pid, signal.SIGINT)
        stdout, stderr = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 130, stdout + stderr
    assert "Traceback" not in stderr and "KeyboardInterrupt" not in stderr, stderr
    assert "lietraj: error: interrupted (Ctrl-C)" in stderr
    assert 1 <= len(pd.read_parquet(out / "results.parquet")) < 400


def test_lost_rows_are_solved_again_and_other_rows_kept(client, tmp_path):
    """A row recorded "lost" (its workers kept dying) is solved by the next run; a failed one is the problem's."""
    out = tmp_path / "sweep"
    points = [{"depth": 0.02, "horizon": 8}, {"depth": 0.9, "horizon": 8}, {"horizon": 8, "depth": 0.02}]
    first = run_sweep(out, "squat", points, "solo12", client=client, figure=False)
    assert list(first.table.sort_values("depth")["status"]) == ["converged", "error"]  # a point twice: one row
    lost = next((out / "rows").glob("*.json"))
    row = json.loads(lost.read_text())
    lost.write_text(json.dumps({**row, "status": "lost"}))
    again = run_sweep(out, "squat", points, "solo12", client=client, figure=False)
    assert (again.solved, again.skipped) == (1, 1)
    assert sorted(read_table(out)["status"]) == ["converged", "error"]


def test_a_directory_of_another_sweep_is_refused(client, tmp_path, no_worker):
    out = tmp_path / "sweep"
    sweep_module._open(out, {"problem": "squat", "robot": "solo12", "solver": None, "options": {}})
    with pytest.raises(ValueError, match="holds another sweep: robot 'solo12' \\(now 'anymal'\\)"):
        run_sweep(out, "squat", [{"depth": 0.02}], "anymal", client=client)


@pytest.mark.parametrize("grid, message", [
    (["--grid", "dept=0.1,0.2"], "--grid dept=0.1,0.2: problem 'squat' has no parameter 'dept'"),
    (["--grid", "depth=0.1:0.2:0"], "--grid depth=0.1:0.2:0: COUNT must be a positive integer"),
    (["--grid", "depth="], "--grid depth=: no values"),
    (["--grid", "depth=a,b"], "--grid depth=a,b: expected a finite number"),
    (["--grid", "horizon=2,8"], "--grid horizon=2,8: the horizon must be at least 4 knots"),
    (["--grid", "horizon=8:11:3"], "--grid horizon=8:11:3: expected an integer"),
    (["--grid", "depth=0.02", "--set", "depth=0.03"], "--set depth=0.03 and --grid depth=0.02 both set depth"),
    (["--grid", "robot=solo12,anymal"], "sweep one robot at a time"),
    ([], "give the parameters to sweep with --grid"),
    (["--grid", "depth=0.02", "--workers", "0"], "--workers 0: at least 1"),
])
def test_sweep_bad_grid_is_one_error_line_before_any_worker(tmp_path, capsys, no_worker, grid, message):
    out = tmp_path / "never"
    code, stdout, err = run(capsys, "sweep", "squat", "--robot", "solo12", *grid, "--out", str(out))
    assert code == 2 and stdout == "" and err == f"lietraj: error: {err[len('lietraj: error: '):]}"
    assert message in err and err.count("\n") == 1
    assert not out.exists()


def test_ctrl_c_while_a_row_is_written_stops_after_it(tmp_path):
    """A Ctrl-C that arrives while a row's solution is being written is delivered once the row is whole: the file
    loads, and the KeyboardInterrupt (not zipfile's ValueError) reaches the caller. The Ctrl-C is what the process's
    Python handler for SIGINT receives in the main thread, called directly: the suite's other threads (a solver's
    second thread, Dask's, numba compiling) made the delivery of a raised SIGINT come too late twice in CI, on
    code this test does not cover."""
    result = make_problem("squat", "solo12", horizon=8).solve()
    path = tmp_path / "row.npz"
    written = []
    outer = signal.signal(signal.SIGINT, signal.default_int_handler)  # a command's process: Python's own handler
    try:
        with pytest.raises(KeyboardInterrupt):
            with sweep_module._interrupt_after():
                signal.getsignal(signal.SIGINT)(signal.SIGINT, None)
                sweep_module.save_solution(path, result)
                written.append(path)
    finally:
        signal.signal(signal.SIGINT, outer)
    assert written and load_solution(path).us.shape == result.us.shape


def test_an_interrupted_batch_drops_only_the_report_of_a_gather_cut_short():
    """After Ctrl-C the workers of a terminal's process group are gone while Dask's thread still gathers a result:
    tornado's report of that gather (a CommClosedError with its traceback, seen once in CI) is dropped; any other
    report of tornado's is not."""
    import logging

    from distributed.comm.core import CommClosedError

    from lietraj.batch.solves import _ClosedGather

    def record(message: str, error: BaseException) -> logging.LogRecord:
        try:
            raise error
        except BaseException:
            return logging.LogRecord("tornado.application", logging.ERROR, __file__, 1, message, (), sys.exc_info())

    track = "Exception in callback functools.partial(<...>, <Task finished coro=<as_completed._track_future() done>>)"
    keep = _ClosedGather()
    assert not keep.filter(record(track, CommClosedError("in <TCP (closed) ConnectionPool.gather>: Stream is closed")))
    assert keep.filter(record(track, ValueError("a real error")))
    assert keep.filter(record("Exception in callback <something else>", CommClosedError("closed")))
