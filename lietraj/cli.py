"""The ``lietraj`` command: ``lietraj list`` shows the ready problems and their robots; ``lietraj solve PROBLEM``
builds one, solves it with the solver's log on the terminal, prints what the solution achieves, and saves it.

    lietraj solve talos_reach
    lietraj solve squat --robot solo12 --solver ilqr --horizon 60 --dt 0.03 --save squat.npz
    lietraj solve balance --robot talos_legs --set lift=right_sole_link
    lietraj solve jump --robot anymal --plot jump.png --html jump.html
    lietraj solve trot --view
    lietraj warmup                  # compile the kernels of every ready problem ahead of time, on every core
"""

from __future__ import annotations

import argparse
import ast
import sys
import time
from dataclasses import replace
from pathlib import Path

from lietraj.optimal_control.solution_io import save_solution
from lietraj.problems import PROBLEMS, SOLVERS, make_problem
from lietraj.warmup import ColdStart, CompileNotice, Spec, default_specs, is_warm, mark_warm, warm_up


def _parameter(text: str) -> tuple[str, object]:
    """``KEY=VALUE`` with VALUE a Python literal (a number, a tuple, None) or else a string."""
    key, sep, value = text.partition("=")
    if not sep or not key.isidentifier():
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    try:
        return key, ast.literal_eval(value)
    except (ValueError, SyntaxError):
        return key, value


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="lietraj", description="Solve ready-made trajectory optimization problems.")
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("list", help="the problems and the robots each takes")
    solve = commands.add_parser("solve", help="build and solve a problem")
    solve.add_argument("problem", choices=sorted(PROBLEMS))
    solve.add_argument("--robot", help="the robot (default: the problem's first; see `lietraj list`)")
    solve.add_argument("--solver", choices=SOLVERS, help="default: the problem's own (fddp)")
    solve.add_argument("--horizon", type=int, help="number of knots")
    solve.add_argument("--dt", type=float, help="time step in seconds")
    solve.add_argument("--max-iter", type=int, help="iteration limit (default: the problem's)")
    solve.add_argument("--set", type=_parameter, action="append", default=[], metavar="KEY=VALUE",
                       help="another parameter of the problem's builder, e.g. depth=0.08 or lift=FL_FOOT")
    solve.add_argument("--save", metavar="FILE", help="write the solution (.npz, lossless; load_solution reads it)")
    solve.add_argument("--plot", metavar="FILE", help="write a summary figure of the solution (.png or .pdf)")
    solve.add_argument("--html", metavar="FILE", help="write the animated solution as one self-contained HTML page")
    solve.add_argument("--view", action="store_true",
                       help="show the iterates and then the solution in the browser (local Meshcat server)")
    solve.add_argument("--quiet", action="store_true", help="no per-iteration log")
    warmup = commands.add_parser("warmup", help="compile the kernels ahead of time (what a first run does)")
    warmup.add_argument("problems", nargs="*", metavar="PROBLEM",
                        help=f"only these problems (default: every ready problem: {', '.join(PROBLEMS)})")
    warmup.add_argument("--workers", type=int, help="worker processes (default: one per core)")
    warmup.add_argument("--force", action="store_true", help="compile again what the cache already holds")
    return parser


def _list() -> None:
    for name, entry in PROBLEMS.items():
        print(f"{name}: {entry.summary}")
        print(f"    robots: {', '.join(entry.robots)} (default {entry.robots[0]})")


def _check_output(path: str | None, suffixes: tuple[str, ...], option: str) -> None:
    """Fail before the solve, not after it, on an output file that cannot be written."""
    if path is None:
        return
    p = Path(path)
    if p.suffix.lower() not in suffixes:
        raise ValueError(f"{option} {path}: the file must end in {' or '.join(suffixes)}")
    if not p.resolve().parent.is_dir():
        raise ValueError(f"{option} {path}: the folder {p.resolve().parent} does not exist")


def _solve(args: argparse.Namespace) -> int:
    _check_output(args.plot, (".png", ".pdf"), "--plot")
    _check_output(args.html, (".html", ".htm"), "--html")
    parameters = dict(args.set)
    for key in ("horizon", "dt"):
        if getattr(args, key) is not None:
            parameters[key] = getattr(args, key)
    notice = CompileNotice().install()
    spec = Spec(args.problem, args.robot, args.solver or "fddp")
    cold = None if is_warm(spec) else ColdStart(spec, notice, parameters).start()
    try:
        example = make_problem(args.problem, args.robot, **parameters)
        if cold is not None:
            cold.compile(example)
    finally:
        if cold is not None:
            cold.close()
    options = example.options if args.max_iter is None else replace(example.options, max_iter=args.max_iter)
    print(f"{example.name}: {example.description}")
    print(f"  {example.problem}, dt = {example.dt:g} s")
    viewer, callback = None, None
    if args.view:
        from lietraj.viz.scene import RobotViewer  # meshcat loads only when a view is asked for

        viewer = RobotViewer(example.model)
        print(f"viewer: {viewer.serve(open_browser=True)}")
        callback = viewer.solver_callback(example.dt)
    start = time.perf_counter()
    result = example.solve(args.solver, options, callback=callback, verbose=not args.quiet)
    print(f"{result!r} (wall {time.perf_counter() - start:.2f} s)")
    mark_warm(spec)
    for key, value in example.metrics(result).items():
        print(f"  {key:>22s}: {value:.6g}")
    if args.save:
        save_solution(args.save, result, metadata={"problem": example.name, "robot": example.model.name,
                                                   "parameters": {k: repr(v) for k, v in parameters.items()}})
        print(f"saved to {args.save}")
    if result.xs.is_finite():
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
    if viewer is not None:
        try:
            input(f"the solution plays at {viewer.url}; press Enter to stop the viewer ")
        except (EOFError, OSError):  # no terminal to wait on
            pass
        viewer.close()
    return 0 if result.converged else 1


def _warmup(args: argparse.Namespace) -> int:
    unknown = [p for p in args.problems if p not in PROBLEMS]
    if unknown:
        raise ValueError(f"unknown problem {', '.join(map(repr, unknown))}; known: {', '.join(PROBLEMS)}")
    specs = [s for s in default_specs() if not args.problems or s.problem in args.problems]
    if args.workers is not None and args.workers < 1:
        raise ValueError(f"--workers must be at least 1, got {args.workers}")
    print(f"compiling the kernels of {len(specs)} problem and solver pairs")
    report = warm_up(specs, args.workers, force=args.force)
    print(f"done in {report.total:.1f} s" + (f"; {len(report.errors)} failed" if report.errors else ""))
    return 1 if report.errors else 0


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "list":
        _list()
        return 0
    try:
        return _warmup(args) if args.command == "warmup" else _solve(args)
    except (ValueError, KeyError, TypeError) as e:
        print(f"lietraj: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
