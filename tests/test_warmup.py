"""Compiling ahead of time (``lietraj.warmup``): the notice of a first compile, the stamps of compiled problems,
``lietraj warmup`` in worker processes, and the first ``lietraj solve`` with a worker beside it."""

from __future__ import annotations

import io
import os

import numba
import numba.core.event
import pytest

from lietraj.cli import main
from lietraj.warmup import STAGES, CompileNotice, Spec, _stamp, is_warm, mark_warm, stages_for, warm_up


def test_the_notice_is_one_line_at_the_first_compile_and_none_without():
    out = io.StringIO()
    notice = CompileNotice(out).install()
    try:
        assert out.getvalue() == ""

        @numba.njit
        def twice(x):
            return 2.0 * x

        assert twice(1.5) == 3.0 and twice(2.5) == 5.0  # one compile
        twice(1)  # another signature: still one line

        assert out.getvalue().count("\n") == 1
        assert out.getvalue().startswith("compiling kernels, first run only")
        assert "lietraj warmup" in out.getvalue()
    finally:
        numba.core.event.unregister("numba:compile", notice)


def test_a_long_compile_reports_its_progress():
    """While kernels compile for longer than ``every`` seconds, a line as a kernel's compile starts or ends says how
    many have compiled, for how long and which one; the helpers a kernel compiles are not counted apart."""
    out = io.StringIO()
    notice = CompileNotice(out, every=0.0).install()
    try:
        @numba.njit
        def inner(x):
            return x + 1.0

        @numba.njit
        def outer(x):
            return 2.0 * inner(x)

        assert outer(1.0) == 4.0
        lines = out.getvalue().splitlines()
        assert lines[0].startswith("compiling kernels, first run only")
        assert len(lines) == 3 and lines[1].startswith("  ... 0 kernels compiled in ")
        assert lines[1].endswith("(now: outer)")
        assert lines[2].startswith("  ... 1 kernel compiled in ") and lines[2].endswith("(the last: outer)")
    finally:
        numba.core.event.unregister("numba:compile", notice)


def test_ddp_adds_the_second_order_stage_and_two_threads_the_split_kernels():
    assert stages_for("fddp") == tuple(s for s in STAGES if s not in ("second_order", "split"))
    assert stages_for("ddp") == tuple(s for s in STAGES if s != "split")
    assert stages_for("fddp", 2) == tuple(s for s in STAGES if s != "second_order")
    assert stages_for("ddp", 2) == STAGES
    assert str(Spec("trot", "solo12", "ddp", 2)) == "trot --robot solo12 --solver ddp --threads 2"


def test_a_stamp_marks_a_spec_compiled_for_these_sources():
    spec = Spec("squat", "solo12", "ilqr")
    _stamp(spec).unlink(missing_ok=True)
    assert not is_warm(spec)
    mark_warm(spec)
    assert is_warm(spec)
    assert not is_warm(Spec("squat", "anymal", "ilqr")) or _stamp(Spec("squat", "anymal", "ilqr")).exists()
    _stamp(spec).unlink()


def test_warm_up_compiles_in_worker_processes_and_skips_what_is_done():
    spec = Spec("squat", "solo12", "fddp")
    out = io.StringIO()
    report = warm_up([spec], workers=2, stream=out, force=True)
    label = "squat --robot solo12"
    assert report.errors == {}
    assert report.seconds[label] is not None and report.seconds[label] > 0
    assert label in out.getvalue() and "fddp" in out.getvalue()
    assert is_warm(spec)
    again = warm_up([spec], workers=2, stream=io.StringIO())
    assert again.seconds[label] == 0.0  # skipped: the stamp says it is compiled


def test_warmup_command_rejects_bad_arguments(capsys):
    assert main(["warmup", "no_such_problem"]) == 2
    assert "unknown problem 'no_such_problem'" in capsys.readouterr().err
    assert main(["warmup", "squat", "--workers", "0"]) == 2
    assert "--workers must be at least 1" in capsys.readouterr().err
    assert main(["warmup", "squat", "--threads", "3"]) == 2
    assert "--threads must be 1 or 2" in capsys.readouterr().err


@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="the worker runs beside the command on a second core")
def test_first_solve_compiles_with_a_worker_then_runs_warm(capsys):
    spec = Spec("squat", "solo12", "fddp")
    _stamp(spec).unlink(missing_ok=True)
    assert main(["solve", "squat", "--robot", "solo12", "--quiet"]) == 0
    first = capsys.readouterr()
    assert "compiling kernels, first run only, on two cores" in first.err
    assert "converged" in first.out
    assert is_warm(spec)
    assert main(["solve", "squat", "--robot", "solo12", "--quiet"]) == 0
    assert "compiling kernels" not in capsys.readouterr().err


@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="the worker runs beside the command on a second core")
def test_a_first_solve_on_two_threads_compiles_the_split_kernels_once():
    """``--threads 2`` has a spec of its own: its first run compiles the split kernels (the command, once the
    worker has cached the kernels they call), and stamps it."""
    spec = Spec("squat", "solo12", "fddp", 2)
    _stamp(spec).unlink(missing_ok=True)
    assert main(["solve", "squat", "--robot", "solo12", "--quiet", "--threads", "2"]) == 0
    assert is_warm(spec)


def test_no_kernel_is_compiled_for_a_constant_argument():
    """A kernel called from compiled code with a constant compiles once per constant value (``lietraj/_jit.py``):
    after a solve, no kernel of lietraj has a literal type in its signatures."""
    import importlib
    import pkgutil

    import lietraj
    from lietraj.problems import make_problem

    example = make_problem("squat", "solo12", horizon=8)
    example.solve("fddp", example.options, verbose=False)
    literal = []
    for info in pkgutil.walk_packages(lietraj.__path__, "lietraj."):
        if info.name.startswith("lietraj.viz"):
            continue
        module = importlib.import_module(info.name)
        for name, obj in vars(module).items():
            if isinstance(obj, numba.core.registry.CPUDispatcher):
                literal += [f"{info.name}.{name}{sig}" for sig in obj.signatures
                            if any(isinstance(t, numba.types.Literal) for t in sig)]
    assert literal == []
