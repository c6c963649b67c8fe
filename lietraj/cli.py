"""The ``lietraj`` command: ``lietraj list`` shows the ready problems, the closed-loop scenarios and their robots;
``lietraj solve PROBLEM`` builds one, solves it with the solver's log on the terminal, prints what the solution
achieves, and saves it; ``lietraj mpc SCENARIO`` runs a receding-horizon controller against MuJoCo and prints its
tick times, tracking and whether the robot fell.

    lietraj solve talos_reach
    lietraj solve squat --robot solo12 --solver ilqr --horizon 60 --dt 0.03 --save squat.npz
    lietraj solve balance --robot talos_legs --set lift=right_sole_link
    lietraj solve jump --robot anymal --plot jump.png --html jump.html
    lietraj solve trot --view
    lietraj mpc trot --robot solo12 --duration 10 --plot trot.png --html trot.html
    lietraj mpc squat --set depth=0.08
    lietraj sweep squat --robot solo12 --grid depth=0.01:0.05:9 --grid horizon=20,30 --out squats
    lietraj warmup                  # compile the kernels of every ready problem ahead of time, on every core

Every mistake of the user's (an option, a parameter, an output file) is reported before the solve, and before
anything is built when the command can tell, as one ``lietraj: error: ...`` line on stderr naming the option as
typed, with exit code 2. A solve that does not converge says so on stderr and exits with 1 (130 after Ctrl-C, which
keeps the iterate reached); the files asked for are still written if its trajectory is finite, with a line saying
what they hold. ``lietraj sweep`` exits with 0 once every point of its grid has its row, converged or not (the table
says), 1 if some were lost with their workers, 130 after Ctrl-C; the same command resumes it.
"""

from __future__ import annotations

import argparse
import ast
import inspect
import os
import re
import sys
import time
from dataclasses import dataclass, replace
from numbers import Real
from pathlib import Path
from typing import TextIO

import numpy as np

from lietraj.optimal_control.solution_io import save_solution
from lietraj.optimal_control.solvers.augmented_lagrangian import ConstrainedLogTable
from lietraj.optimal_control.solvers.solvers import LogTable, SolverOptions, SolverResult
from lietraj.mpc import SOLVERS as MPC_SOLVERS
from lietraj.problems import PROBLEMS, SOLVERS, make_problem
from lietraj.problems.parameters import expected_kind
from lietraj.problems.support import CONSTRAINTS
from lietraj.scenarios import SCENARIOS, make_scenario, run_scenario
from lietraj.warmup import ColdStart, CompileNotice, Spec, default_specs, is_warm, mark_warm, warm_up

# The shortest horizon, in knots, on which the ready problems mean something: a squat's CoM reference needs a knot
# on the way down, one at the bottom and one on the way up after the start, and the contacts' Baumgarte terms pull
# the feet back over a time constant of 4 knots (problems.support.CONTACT_TIME_CONSTANT). On fewer knots the
# reference hardly leaves the start and a solver "converges" at once on a problem that asks for nothing.
MIN_HORIZON = 4

# What a problem builder raises on a value it rejects: its own checks raise ValueError, numpy on a value of the
# wrong kind TypeError, ValueError or an arithmetic error.
_BUILD_ERRORS = (ValueError, TypeError, KeyError, IndexError, ArithmeticError)


@dataclass(frozen=True)
class Setting:
    """One builder parameter the user gave: its ``key``, its parsed ``value`` and the ``text`` it was typed as
    (``--set depth=abc`` or ``--dt 0``), which every message about it quotes."""

    key: str
    value: object
    text: str


def _literal(text: str) -> object:
    """``text`` as a Python literal (a number, a tuple, None) or else the string itself."""
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return text


def _parameter(text: str) -> Setting:
    """``KEY=VALUE`` with VALUE a Python literal (a number, a tuple, None) or else a string."""
    key, sep, value = text.partition("=")
    if not sep or not key.isidentifier():
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return Setting(key, _literal(value), f"--set {text}")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="lietraj", description="Solve ready-made trajectory optimization problems.")
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("list", help="the problems and the robots each takes")
    solve = commands.add_parser("solve", help="build and solve a problem")
    solve.add_argument("problem", choices=sorted(PROBLEMS))
    solve.add_argument("--robot", help="the robot (default: the problem's first; see `lietraj list`)")
    solve.add_argument("--solver", choices=SOLVERS, help="default: the problem's own (fddp; ddp for falling_cat)")
    # --horizon and --dt are kept as typed and checked with the --set parameters, so that every message quotes them
    solve.add_argument("--horizon", metavar="KNOTS", help=f"number of knots (at least {MIN_HORIZON})")
    solve.add_argument("--dt", metavar="SECONDS", help="time step in seconds (positive)")
    solve.add_argument("--max-iter", type=int, help="iteration limit (default: the problem's)")
    solve.add_argument("--constraints", choices=CONSTRAINTS,
                       help="limits as constraints met by the augmented-Lagrangian solver (hard, the default) or as "
                            "barrier costs (soft); balance, squat, jump and trot")
    solve.add_argument("--threads", type=int, default=1,
                       help="1 (the default), or 2 to split the dynamics' derivatives over two cores (their "
                            "two-thread kernels compile once, some 10 s; it pays on solves of a second or more)")
    solve.add_argument("--set", type=_parameter, action="append", default=[], metavar="KEY=VALUE",
                       help="another parameter of the problem's builder, e.g. depth=0.08 or lift=FL_FOOT")
    solve.add_argument("--save", metavar="FILE", help="write the solution (.npz, lossless; load_solution reads it)")
    solve.add_argument("--plot", metavar="FILE", help="write a summary figure of the solution (.png or .pdf)")
    solve.add_argument("--html", metavar="FILE", help="write the animated solution as one self-contained HTML page")
    solve.add_argument("--view", action="store_true",
                       help="show the iterates and then the solution in the browser (local Meshcat server)")
    solve.add_argument("--quiet", action="store_true", help="no per-iteration log")
    mpc = commands.add_parser("mpc", help="run a receding-horizon controller in closed loop against MuJoCo")
    mpc.add_argument("scenario", choices=sorted(SCENARIOS))
    mpc.add_argument("--robot", help="the robot (default: the scenario's first; see `lietraj list`)")
    mpc.add_argument("--duration", metavar="SECONDS", help="simulated time (default: the scenario's)")
    mpc.add_argument("--solver", choices=MPC_SOLVERS, help="the solver of every tick (default fddp)")
    mpc.add_argument("--iterations", metavar="N", help="solver iterations per tick at most (default 1)")
    mpc.add_argument("--prepare", action="store_true",
                     help="a real-time iteration: linearize each window while the plant runs, before its state is "
                          "measured; a tick then sweeps and steps only")
    mpc.add_argument("--threads", type=int, default=1, choices=(1, 2),
                     help="1 (the default), or 2 to split each tick's derivatives over two cores (their two-thread "
                          "kernels compile on the first run, some 10 s more)")
    mpc.add_argument("--set", type=_parameter, action="append", default=[], metavar="KEY=VALUE",
                     help="another parameter of the scenario, e.g. velocity=0.3, depth=0.08 or push=50")
    mpc.add_argument("--plot", metavar="FILE", help="write tick times, tracking and contact forces (.png or .pdf)")
    mpc.add_argument("--html", metavar="FILE",
                     help="write the simulated motion, the plan's end as a ghost, as one self-contained HTML page")
    mpc.add_argument("--quiet", action="store_true", help="no progress lines")
    sweep = commands.add_parser("sweep", help="solve a problem over a grid of parameters on Dask workers; resumable")
    sweep.add_argument("problem", choices=sorted(PROBLEMS))
    sweep.add_argument("--robot", help="the robot (default: the problem's first; see `lietraj list`)")
    sweep.add_argument("--grid", action="append", default=[], metavar="KEY=START:STOP:COUNT|KEY=V1,V2",
                       help="a parameter's values: COUNT numbers from START to STOP, or a list; several --grid: every "
                            "combination")
    sweep.add_argument("--set", type=_parameter, action="append", default=[], metavar="KEY=VALUE",
                       help="a parameter of every solve, e.g. horizon=30")
    sweep.add_argument("--solver", choices=SOLVERS, help="default: the problem's own")
    sweep.add_argument("--max-iter", type=int, help="iteration limit (default: the problem's)")
    sweep.add_argument("--workers", type=int, help="local worker processes (default: one per core)")
    sweep.add_argument("--scheduler", metavar="ADDRESS",
                       help="run on the Dask cluster of this scheduler (e.g. tcp://host:8786) instead of local workers")
    sweep.add_argument("--out", required=True, metavar="DIR",
                       help="the sweep's directory: results.parquet, solutions/*.npz, summary.png; run again to resume")
    sweep.add_argument("--quiet", action="store_true", help="no progress bar")
    warmup = commands.add_parser("warmup", help="compile the kernels ahead of time (what a first run does)")
    warmup.add_argument("problems", nargs="*", metavar="PROBLEM",
                        help=f"only these problems (default: every ready problem: {', '.join(PROBLEMS)})")
    warmup.add_argument("--workers", type=int, help="worker processes (default: one per core)")
    warmup.add_argument("--force", action="store_true", help="compile again what the cache already holds")
    warmup.add_argument("--threads", type=int, default=1,
                        help="compile for solves on 1 thread (the default) or 2 (`lietraj solve --threads 2`)")
    return parser


def _list() -> None:
    for title, registry in (("problems (lietraj solve PROBLEM)", PROBLEMS),
                            ("closed-loop scenarios against MuJoCo (lietraj mpc SCENARIO)", SCENARIOS)):
        print(title)
        for name, entry in registry.items():
            print(f"  {name}: {entry.summary}")
            print(f"      robots: {', '.join(entry.robots)} (default {entry.robots[0]})")


def _check_output(path: str | None, suffixes: tuple[str, ...], option: str) -> None:
    """Fail before the solve, not after it, on an output file that cannot be written."""
    if path is None:
        return
    p = Path(path)
    if p.suffix.lower() not in suffixes:
        raise ValueError(f"{option} {path}: the file must end in {' or '.join(suffixes)}")
    folder = p.resolve().parent
    if not folder.is_dir():
        raise ValueError(f"{option} {path}: the folder {folder} does not exist")
    if p.is_dir():
        raise ValueError(f"{option} {path}: this is a folder, not a file")
    if not os.access(folder, os.W_OK) or (p.exists() and not os.access(p, os.W_OK)):
        raise ValueError(f"{option} {path}: no permission to write there")


# ---- the problem's parameters ----------------------------------------------------------------------------------

def _check_value(setting: Setting, parameter: inspect.Parameter) -> None:
    """Raise ValueError, quoting the setting as typed, if its value is not of the kind the builder takes (a finite
    number, an integer, a name, a point of as many numbers as the default: ``problems.parameters``)."""
    what = expected_kind(setting.value, parameter)
    if not what:
        return
    value = setting.value
    got = f"the text {value!r}" if isinstance(value, str) else repr(value)
    if isinstance(parameter.default, tuple):
        what += f" such as {setting.key}={','.join(f'{v:g}' for v in parameter.default)}"
    raise ValueError(f"{setting.text}: expected {what}, got {got}")


def _check_range(setting: Setting) -> None:
    """The parameters every problem shares, checked here on the user's value before anything is built (a robot
    loaded, a compiling worker started), which the builders would check only then."""
    key, value = setting.key, setting.value
    if not isinstance(value, Real):  # a parameter of another kind: the builder checks it
        return
    if key == "horizon" and value < MIN_HORIZON:
        raise ValueError(f"{setting.text}: the horizon must be at least {MIN_HORIZON} knots: the motion needs knots "
                         "on its way, at its turn and on its way back; on fewer a solve 'converges' on a problem that asks "
                         "for nothing")
    if key == "dt" and not value > 0:
        raise ValueError(f"{setting.text}: the time step must be a positive number of seconds")
    if key == "duration" and not value > 0:
        raise ValueError(f"{setting.text}: the duration must be a positive number of seconds")
    if key == "friction" and not value > 0:
        raise ValueError(f"{setting.text}: the friction coefficient must be a positive number")


def _settings(args: argparse.Namespace, build, what: str, options: tuple[str, ...], names: tuple[str, ...] = ()
              ) -> list[Setting]:
    """The builder parameters of the ``options`` given (``--horizon``, ``--dt``, ...; those in ``names`` kept as
    typed, the others read as literals) and of ``--set``, each checked against the signature of ``build`` (a known
    name, a value of its kind) and the shared ranges, before anything is built; ``what`` ("problem 'squat'") names
    the builder in the messages."""
    settings = list(args.set)
    for key in options:
        text = getattr(args, key)
        if text is not None:
            settings.append(Setting(key, text if key in names else _literal(text), f"--{key} {text}"))
    accepted = {name: p for name, p in inspect.signature(build).parameters.items() if name != "robot"}
    seen: dict[str, Setting] = {}
    for setting in settings:
        if setting.key == "robot":
            raise ValueError(f"{setting.text}: the robot is an option of its own: --robot {setting.value}")
        if setting.key not in accepted:
            raise ValueError(f"{setting.text}: {what} has no parameter {setting.key!r}; its "
                             f"parameters: {', '.join(accepted)}")
        if setting.key in seen:
            raise ValueError(f"{seen[setting.key].text} and {setting.text} both set {setting.key}; give it once")
        seen[setting.key] = setting
        _check_value(setting, accepted[setting.key])
        if setting.value is not None:
            _check_range(setting)
    return settings


def _built(make, settings: list[Setting]):
    """``make()``: a builder's rejection of a value reported as the user's setting's (``_blame``)."""
    try:
        return make()
    except _BUILD_ERRORS as e:
        if not settings:
            raise
        raise ValueError(_blame(e, settings)) from e


def _blame(error: Exception, settings: list[Setting]) -> str:
    """A builder's error message prefixed with the settings it is about: those it names, else all the user gave (a
    numpy message names no parameter)."""
    named = [s for s in settings if re.search(rf"\b{re.escape(s.key)}\b", str(error))]
    return f"{', '.join(s.text for s in named or settings)}: {error}"


# ---- the solve ------------------------------------------------------------------------------------------------

def _calling_each(callbacks: list):
    """One solver callback calling each of ``callbacks`` (None for none)."""
    if len(callbacks) <= 1:
        return callbacks[0] if callbacks else None

    def callback(info) -> None:
        for c in callbacks:
            c(info)

    return callback


def _result_line(result: SolverResult, wall: float) -> str:
    return (f"{result.solver}: {result.status} after {result.iterations} iteration(s), cost {result.cost:.8e}, "
            f"stop {result.stop:.3e}, gap {result.gap_norm:.2e}, {wall:.2f} s")


def _interrupted(result: SolverResult) -> bool:
    return result.status.startswith("interrupted")


def _what_went_wrong(result: SolverResult, options: SolverOptions) -> str:
    """Why ``result`` is not a solution, in a sentence for the user."""
    status, done = result.status, f"after {result.iterations} iteration(s)"
    if _interrupted(result):
        return f"interrupted (Ctrl-C) {done}: the result is the iterate reached so far, not a solution"
    if status.startswith("failed: "):
        return f"the solve failed {done}: {status[len('failed: '):]}"
    if status.startswith("infeasible: "):
        return f"the constraints cannot all be met ({done}): {status[len('infeasible: '):]}"
    if status == "max_iterations":
        gaps = f" and gaps of {result.gap_norm:.3g} left open" if result.gap_norm > 0 else ""
        return (f"the solve did not converge: {result.solver} reached the iteration limit (max_iter = {options.max_iter}; "
                f"--max-iter raises it) with the stationarity measure {result.stop:.3g} above tol = {options.tol:g}{gaps}")
    return f"the solve did not converge: {status} {done}"


def _metrics(example, result: SolverResult, finite: bool) -> None:
    if not finite:
        print("  (no metrics: the trajectory is not finite)")
        return
    try:
        metrics = example.metrics(result)
    except (ValueError, ArithmeticError) as e:  # an unconverged iterate may be one the contact model cannot evaluate
        print(f"  (no metrics: {e})")
        return
    for key, value in metrics.items():
        print(f"  {key:>22s}: {value:.6g}")


def _solve(args: argparse.Namespace) -> int:
    entry = PROBLEMS[args.problem]
    if args.robot is not None and args.robot not in entry.robots:
        raise ValueError(f"--robot {args.robot}: problem {args.problem!r} takes the robots {', '.join(entry.robots)}")
    if args.max_iter is not None and args.max_iter < 0:
        raise ValueError(f"--max-iter {args.max_iter}: the iteration limit must be 0 or more")
    if args.threads < 1:
        raise ValueError(f"--threads {args.threads}: at least 1")
    settings = _settings(args, entry.build, f"problem {args.problem!r}", ("horizon", "dt", "constraints"),
                         ("constraints",))
    _check_output(args.save, (".npz",), "--save")
    _check_output(args.plot, (".png", ".pdf"), "--plot")
    _check_output(args.html, (".html", ".htm"), "--html")
    parameters = {s.key: s.value for s in settings}
    notice = CompileNotice().install()
    spec = Spec(args.problem, args.robot, args.solver or entry.solver, min(args.threads, 2))
    cold = None if is_warm(spec) else ColdStart(spec, notice, parameters).start()
    try:
        example = _built(lambda: make_problem(args.problem, args.robot, **parameters), settings)
        if cold is not None:
            cold.compile(example)
    finally:
        if cold is not None:
            cold.close()
    options = replace(example.options, threads=args.threads,
                      **({} if args.max_iter is None else {"max_iter": args.max_iter}))
    print(f"{example.name}: {example.description}")
    print(f"  {example.problem}, dt = {example.dt:g} s")
    table = ConstrainedLogTable if example.problem.has_constraints else LogTable
    viewer, callbacks = None, [] if args.quiet else [table()]
    if args.view:
        from lietraj.viz.scene import RobotViewer  # meshcat loads only when a view is asked for

        viewer = RobotViewer(example.model)
        print(f"viewer: {viewer.serve(open_browser=True)}")
        callbacks.append(viewer.solver_callback(example.dt))
    start = time.perf_counter()
    # The log table comes as a callback and not with verbose=True, which would print the result line a second time.
    # Ctrl-C during the iterations ends the solve with the status "interrupted" and the iterate reached (Solver.solve);
    # during the evaluation of the guess it reaches main, with nothing to keep.
    result = example.solve(args.solver, options, callback=_calling_each(callbacks))
    print(_result_line(result, time.perf_counter() - start))
    mark_warm(spec)
    finite = bool(result.xs.is_finite() and np.isfinite(result.us).all())
    _metrics(example, result, finite)
    files = [f"{option} {path}" for option, path in (("--save", args.save), ("--plot", args.plot),
                                                    ("--html", args.html)) if path]
    problem = None if result.converged else _what_went_wrong(result, options)
    if problem is not None and files:
        if finite:
            what = "an interrupted" if _interrupted(result) else "a failed" if result.status.startswith("failed") \
                else "an unconverged"
            print(f"note: the files below hold {what} solve ({result.status}), not a solution")
        else:
            problem += f"; its trajectory is not finite, so {', '.join(files)} {'was' if len(files) == 1 else 'were'} not written"
    if finite:
        if args.save:
            save_solution(args.save, result, metadata={"problem": example.name, "robot": example.model.name,
                                                       "parameters": {s.key: repr(s.value) for s in settings}})
            print(f"saved to {args.save}")
        if args.plot:
            from lietraj.viz.plots import save_summary  # matplotlib loads only when a plot is asked for

            save_summary(args.plot, example, result)
            print(f"plot written to {args.plot}")
        if args.html or viewer is not None:
            points, forces = example.contact_arrays(result)
            extras = dict(com=True, contact_points=points, contact_forces=forces, targets=example.targets)
            if args.html:
                from lietraj.viz.html import export_html

                print(f"animation written to {export_html(example.model, result.xs, example.dt, args.html, **extras)}")
            if viewer is not None:
                viewer.animate(result.xs, example.dt, **extras)
    if problem is not None:
        print(f"lietraj: error: {problem}", file=sys.stderr)
    if viewer is not None:
        try:
            input(f"the solution plays at {viewer.url}; press Enter to stop the viewer ")
        except (EOFError, OSError):  # no terminal to wait on
            pass
        viewer.close()
    return 0 if result.converged else 130 if _interrupted(result) else 1


def _mpc(args: argparse.Namespace) -> int:
    """``lietraj mpc``: build the scenario, run it against MuJoCo with a progress line per simulated second, print
    its report, write the files asked for; exit 1 if the robot fell or the simulation failed."""
    entry = SCENARIOS[args.scenario]
    if args.robot is not None and args.robot not in entry.robots:
        raise ValueError(f"--robot {args.robot}: scenario {args.scenario!r} takes the robots {', '.join(entry.robots)}")
    settings = _settings(args, entry.build, f"scenario {args.scenario!r}", ("duration", "iterations", "solver"),
                         ("solver",))
    _check_output(args.plot, (".png", ".pdf"), "--plot")
    _check_output(args.html, (".html", ".htm"), "--html")
    CompileNotice().install()
    parameters = {s.key: s.value for s in settings}
    scenario = _on_threads(_built(lambda: make_scenario(args.scenario, args.robot, **parameters), settings),
                           args.threads)
    options = scenario.controller.options
    options.preparation = options.preparation or args.prepare
    deadline = "none" if options.deadline is None else f"{1e3 * options.deadline:g} ms"
    print(scenario.description)
    print(f"  {options.horizon} knots a window, {options.iterations} {options.solver} iteration(s) a tick, deadline "
          f"{deadline}; MuJoCo at {1e3 * scenario.inner_period:g} ms with the feedback policy"
          + ("; each window prepared before its state is measured" if options.preparation else ""))
    spec = Spec(f"mpc {args.scenario}", scenario.robot.name, options.solver, args.threads)
    if not is_warm(spec):
        print("  a first run: its kernels compile before the loop starts, so that no tick waits for them", flush=True)
        _prime(_on_threads(make_scenario(args.scenario, args.robot, **parameters), args.threads))
    report = run_scenario(scenario, on_tick=None if args.quiet else _progress(scenario))
    for line in report.lines()[1:]:  # its first line, the description, opened the run
        print(line)
    if args.plot:
        from lietraj.viz.closed_loop import save_closed_loop_plot  # matplotlib loads only when a plot is asked for

        print(f"plot written to {save_closed_loop_plot(args.plot, report)}")
    if args.html:
        from lietraj.viz.closed_loop import export_closed_loop_html

        print(f"animation written to {export_closed_loop_html(report, args.html)}")
    mark_warm(spec)
    if not report.ok:
        print(f"lietraj: error: {report.fell or report.log.error}", file=sys.stderr)
    return 0 if report.ok else 1


def _on_threads(scenario, threads: int):
    """``scenario`` with its controller's solver on ``threads`` threads."""
    options = scenario.controller.options
    if threads != 1:
        options.solver_options = replace(options.solver_options or SolverOptions(), threads=threads)
    return scenario


def _prime(scenario) -> None:
    """Compile, before the loop's clock starts, every kernel a run of ``scenario`` calls: its controller ticks along
    its own plans through one whole schedule (every phase and impact enters a window) and evaluates the feedback
    policy, so that no tick of the run pays a compilation (a cold solo12 trot's ticks reached 0.5 s without it)."""
    controller = scenario.controller
    tick = controller.start(scenario.x0)
    for _ in range(controller.schedule.length + controller.options.horizon):
        tick.control(tick.plan.xs[0], 0.5 * tick.dt)
        tick = controller.tick(tick.plan.xs[1])


def _progress(scenario):
    """An ``on_tick`` printing, once per simulated second, the ticks' median time and the tracked point's error, and
    at once every tick whose solve failed (the previous plan goes on)."""
    window: list[float] = []
    state = {"next": 1.0}

    def show(tick, x) -> None:
        window.append(tick.solve_time)
        t = scenario.controller.time
        if tick.failed:
            print(f"  t = {t:5.2f} s: the tick's solve {tick.status}; its feedback policy goes on", flush=True)
        if t + 1e-9 >= state["next"]:
            error = ""
            if scenario.measure is not None:
                miss = np.linalg.norm(scenario.measure(x) - scenario.reference(t))
                error = f", {scenario.tracked} {1e3 * miss:.1f} mm from its reference"
            print(f"  t = {t:5.2f} s: ticks {1e3 * float(np.median(window)):.2f} ms median{error}", flush=True)
            window.clear()
            state["next"] += 1.0

    return show


def _warmup(args: argparse.Namespace) -> int:
    unknown = [p for p in args.problems if p not in PROBLEMS]
    if unknown:
        raise ValueError(f"unknown problem {', '.join(map(repr, unknown))}; known: {', '.join(PROBLEMS)}")
    if args.threads not in (1, 2):
        raise ValueError(f"--threads must be 1 or 2, got {args.threads}")
    specs = [s for s in default_specs(args.threads) if not args.problems or s.problem in args.problems]
    if args.workers is not None and args.workers < 1:
        raise ValueError(f"--workers must be at least 1, got {args.workers}")
    print(f"compiling the kernels of {len(specs)} problem and solver pairs")
    report = warm_up(specs, args.workers, force=args.force)
    print(f"done in {report.total:.1f} s" + (f"; {len(report.errors)} failed" if report.errors else ""))
    return 1 if report.errors else 0


def _sweep(args: argparse.Namespace) -> int:
    """``lietraj sweep``: check the grid and every option before a worker starts, solve the points the directory does
    not hold yet with a progress bar, print what the rows say; exit 1 if a row was lost (its workers kept dying: a
    run again solves it), 130 after Ctrl-C (the rows finished are kept: a run again resumes)."""
    from lietraj.batch import GridError, connect, grid_points, parse_axis

    entry = PROBLEMS[args.problem]
    if args.robot is not None and args.robot not in entry.robots:
        raise ValueError(f"--robot {args.robot}: problem {args.problem!r} takes the robots {', '.join(entry.robots)}")
    if args.max_iter is not None and args.max_iter < 0:
        raise ValueError(f"--max-iter {args.max_iter}: the iteration limit must be 0 or more")
    if args.workers is not None and args.workers < 1:
        raise ValueError(f"--workers {args.workers}: at least 1")
    if args.workers is not None and args.scheduler is not None:
        raise ValueError("--workers and --scheduler: the workers are the cluster's when a scheduler is given; give one")
    if not args.grid:
        raise ValueError("give the parameters to sweep with --grid KEY=START:STOP:COUNT or --grid KEY=V1,V2")
    out = Path(args.out)
    if out.exists() and not out.is_dir():
        raise ValueError(f"--out {args.out}: this is a file, not a directory")
    if not out.resolve().parent.is_dir():
        raise ValueError(f"--out {args.out}: the folder {out.resolve().parent} does not exist")
    what = f"problem {args.problem!r}"
    fixed = _settings(args, entry.build, what, ())
    accepted = {name: p for name, p in inspect.signature(entry.build).parameters.items() if name != "robot"}
    axes: dict[str, list] = {}
    given = {s.key: s.text for s in fixed}
    for text in args.grid:
        try:
            key, values = parse_axis(text)
        except GridError as e:
            raise ValueError(str(e)) from e
        if key == "robot":
            raise ValueError(f"--grid {text}: sweep one robot at a time (--robot); a run per robot")
        if key not in accepted:
            raise ValueError(f"--grid {text}: {what} has no parameter {key!r}; its parameters: {', '.join(accepted)}")
        if key in given:
            raise ValueError(f"{given[key]} and --grid {text} both set {key}; give it once")
        given[key] = f"--grid {text}"
        for value in values:
            setting = Setting(key, value, f"--grid {text}")
            _check_value(setting, accepted[key])
            if value is not None:
                _check_range(setting)
        axes[key] = values
    points = [{**{s.key: s.value for s in fixed}, **p} for p in grid_points(axes)]
    options = {} if args.max_iter is None else {"max_iter": args.max_iter}
    sizes = " x ".join(f"{len(v)} {k}" for k, v in axes.items())
    # connected before anything is printed or written: a wrong address is a user error like the others
    try:
        client = None if args.scheduler is None else connect(args.scheduler)
    except ValueError as e:
        raise ValueError(f"--scheduler: {e}") from e
    try:
        return _run_sweep(args, out, points, options, sizes, client)
    finally:
        if client is not None:
            client.close()


def _run_sweep(args: argparse.Namespace, out: Path, points: list[dict], options: dict, sizes: str, client) -> int:
    """``lietraj sweep`` once its arguments are checked (``_sweep``): run it with a progress bar and report."""
    from lietraj.batch import run_sweep

    entry = PROBLEMS[args.problem]
    where = f"the cluster at {args.scheduler}" if args.scheduler else \
        f"{args.workers or os.cpu_count() or 1} local worker process(es)"
    print(f"{args.problem}{f' on {args.robot}' if args.robot else ''}: {len(points)} points ({sizes}) on {where}; "
          f"in {out}", flush=True)
    if args.scheduler is None and not is_warm(Spec(args.problem, args.robot, args.solver or entry.solver)):
        print("the workers compile the problem's kernels first (first run only; `lietraj warmup` does it ahead of time)",
              flush=True)
    bar = None if args.quiet else _ProgressBar()
    try:
        report = run_sweep(out, args.problem, points, args.robot, solver=args.solver, options=options, client=client,
                           workers=args.workers, on_result=bar)
    except KeyboardInterrupt:
        if bar is not None:
            bar.close()
        print(f"lietraj: error: interrupted (Ctrl-C); the rows finished are in {out}: the same command resumes",
              file=sys.stderr)
        return 130
    if bar is not None:
        bar.close()
    table = report.table
    if report.skipped:
        print(f"{report.skipped} point(s) were done already in {out}: skipped")
    if report.solved:
        print(f"solved {report.solved} point(s) in {report.wall_time:.1f} s"
              + (f" after {report.compile_time:.1f} s compiling kernels on the workers" if report.compile_time else ""))
    counts = table["status"].value_counts()
    print("rows: " + ", ".join(f"{n} {status}" for status, n in counts.items()))
    print(f"table {out / 'results.parquet'}, solutions in {out / 'solutions'}, figure {out / 'summary.png'}")
    lost = int(counts.get("lost", 0))
    if lost:
        print(f"lietraj: error: {lost} row(s) lost with their workers; the same command solves them again",
              file=sys.stderr)
    return 1 if lost else 0


class _ProgressBar:
    """``lietraj sweep``'s progress on stderr: a bar redrawn in place on a terminal, else a line every tenth."""

    WIDTH = 30

    def __init__(self, stream: TextIO | None = None):
        self.stream = stream or sys.stderr
        self.tty = self.stream.isatty()
        self.start = time.perf_counter()
        self.first: int | None = None
        self.first_time = self.start
        self.shown_tenth = -1
        self.not_converged = 0

    def __call__(self, done: int, total: int, row: dict) -> None:
        now = time.perf_counter()
        if self.first is None:  # the rate is counted from the first row, after the workers' start and compiling
            self.first, self.first_time = done, now
        self.not_converged += row.get("status") != "converged"
        elapsed, counted = now - self.start, now - self.first_time
        rate = (done - self.first) / counted if counted > 0 else 0.0
        left = f", about {(total - done) / rate:.0f} s left" if rate > 0 and done < total else ""
        filled = self.WIDTH * done // max(total, 1)
        line = (f"[{'#' * filled}{'-' * (self.WIDTH - filled)}] {done}/{total}, {self.not_converged} not converged, "
                f"{elapsed:.0f} s{left}")
        if self.tty:
            print(f"\r{line}\x1b[K", end="", file=self.stream, flush=True)
        elif 10 * done // max(total, 1) > self.shown_tenth:
            self.shown_tenth = 10 * done // max(total, 1)
            print(line, file=self.stream, flush=True)

    def close(self) -> None:
        if self.tty and self.first is not None:
            print(file=self.stream, flush=True)


def main(argv: list[str] | None = None) -> int:
    """Run the command of ``argv`` (default: the process's arguments); the exit code: 0 done, 1 the solve did not
    converge (or a warm-up task failed), 2 a user error (bad option, parameter or file), 130 interrupted."""
    args = _parser().parse_args(argv)
    if args.command == "list":
        _list()
        return 0
    try:
        return {"warmup": _warmup, "mpc": _mpc, "sweep": _sweep}.get(args.command, _solve)(args)
    except KeyboardInterrupt:  # before the solve's first iteration, or while writing the files: nothing to keep
        print("lietraj: error: interrupted (Ctrl-C)", file=sys.stderr)
        return 130
    except (ValueError, KeyError, TypeError, OSError) as e:
        print(f"lietraj: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
