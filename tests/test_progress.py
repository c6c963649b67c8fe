"""The progress display callback: what it prints, how often, and on a terminal versus a file."""

import io

import numpy as np
import pytest

from lietraj.optimal_control import ActionModel, CostSum, LinearDynamics, Problem, control_regularization, \
    solve_fddp, state_regularization
from lietraj.optimal_control.solvers.progress import ProgressDisplay


class _Terminal(io.StringIO):
    def isatty(self):
        return True


def _problem():
    rng = np.random.default_rng(0)
    dyn = LinearDynamics(np.eye(4) + 0.1 * rng.normal(size=(4, 4)), rng.normal(size=(4, 2)))
    sp = dyn.state_space
    x0 = sp.neutral()
    x0.s[:] = 1.0
    running = CostSum(sp, 2)
    running.add("x", state_regularization(sp, sp.neutral(), 1.0, 2))
    running.add("u", control_regularization(2, 0.1, state_space=sp))
    return Problem(x0, ActionModel(dyn, running), state_regularization(sp, sp.neutral(), 10.0, 0), horizon=20)


def test_prints_each_iteration_to_a_file_and_rewrites_one_line_on_a_terminal():
    log = io.StringIO()
    result = solve_fddp(_problem(), xs0=None, callback=ProgressDisplay(log, interval=0.0, tol=1e-9, max_iter=100))
    lines = log.getvalue().splitlines()
    assert len(lines) == len(result.history) >= 1
    assert lines[0].startswith("FDDP it 1/100 ")
    assert "decades to go" in lines[0] and "cost" in lines[0]
    terminal = _Terminal()
    with ProgressDisplay(terminal, interval=0.0) as progress:
        solve_fddp(_problem(), callback=progress)
    text = terminal.getvalue()
    assert text.count("\r\x1b[K") == len(result.history) and text.endswith("\n") and text.count("\n") == 1


def test_throttles_and_rejects_a_bad_interval():
    log = io.StringIO()
    solve_fddp(_problem(), callback=ProgressDisplay(log, interval=3600.0))
    assert len(log.getvalue().splitlines()) == 1  # only the first iteration within the hour
    with pytest.raises(ValueError, match="interval"):
        ProgressDisplay(interval=-1.0)
