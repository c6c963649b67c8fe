"""A one-line progress display for long solves, as a solver callback.

The solvers report through callbacks and print nothing themselves; pass ``callback=ProgressDisplay()`` to see,
on one line rewritten in place, the iteration, the cost, the stationarity measure against its tolerance, the gap
and the elapsed time. On a terminal the line is redrawn at most every ``interval`` seconds; elsewhere (a log file,
a notebook cell) a full line is printed at that interval instead.
"""

from __future__ import annotations

import math
import sys
import time

from lietraj.optimal_control.solvers.solvers import IterationInfo


class ProgressDisplay:
    """Callback showing a solve's progress: ``solve_ddp(problem, callback=ProgressDisplay(tol=1e-9))``.

    ``tol`` (the solver's stopping tolerance) adds how many decades the stationarity measure still has to fall;
    ``max_iter`` adds the iteration budget. Call ``close()`` (or use it as a context manager) to end the line.
    """

    def __init__(self, stream=None, interval: float = 0.2, tol: float | None = None, max_iter: int | None = None):
        if not interval >= 0.0:
            raise ValueError(f"ProgressDisplay: interval must be >= 0, got {interval!r}")
        self.stream, self.interval, self.tol, self.max_iter = stream, float(interval), tol, max_iter
        self._start: float | None = None
        self._last = -float("inf")
        self._open = False

    def _out(self):
        return self.stream or sys.stderr

    def line(self, info: IterationInfo, elapsed: float) -> str:
        """The text shown for one iteration."""
        budget = f"/{self.max_iter}" if self.max_iter else ""
        text = f"{info.solver} it {info.iteration}{budget}  cost {info.cost:.6e}  stop {info.stop:.2e}"
        if self.tol and info.stop > 0:
            text += f" ({max(0.0, math.log10(info.stop / self.tol)):.1f} decades to go)"
        if info.gap_norm:
            text += f"  gap {info.gap_norm:.1e}"
        return text + f"  {elapsed:.1f} s"

    def __call__(self, info: IterationInfo) -> None:
        now = time.perf_counter()
        if self._start is None:
            self._start = now - info.time
        if now - self._last < self.interval:
            return
        self._last = now
        out = self._out()
        text = self.line(info, now - self._start)
        if getattr(out, "isatty", lambda: False)():
            out.write("\r\x1b[K" + text)
            self._open = True
        else:
            out.write(text + "\n")
        out.flush()

    def close(self) -> None:
        """End the progress line (on a terminal) and reset for the next solve."""
        if self._open:
            self._out().write("\n")
            self._out().flush()
        self._start, self._last, self._open = None, -float("inf"), False

    def __enter__(self) -> ProgressDisplay:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
