"""What a benchmark figure is worth: the machine it was measured on, and whether anything else was running.

The machines are shared and noisy, and Crocoddyl slows down more than lietraj when another process competes for
the cores: a ratio measured on a busy machine flatters lietraj. So every benchmark that compares with a peer prints
``describe()`` (CPU model, cores, load average) when it starts and when it ends, and a ``Quietness`` verdict beside
its ratios, which says "quiet" only if the machine was idle when the run began and nothing else joined it.

The load average is the kernel's exponential average of the runnable threads with a one-minute time constant. A
run of ``threads`` busy threads for ``t`` seconds raises it from ``L0`` to ``L0 e^(-t/60) + threads (1 - e^(-t/60))``
by itself; a run ends quiet when it started below ``QUIET_LOAD`` and ended less than ``QUIET_LOAD`` above that.
"""

from __future__ import annotations

import math
import os
import platform
import time
from dataclasses import dataclass, field

QUIET_LOAD = 0.5


def crocoddyl_threads(problem):
    """``problem`` (a Crocoddyl ``ShootingProblem``) set to the run's thread count, ``OMP_NUM_THREADS``: Crocoddyl
    3.2.1's problems start with two threads whatever ``OMP_NUM_THREADS`` says (their OpenMP loops name their own
    count; ``bench_mpc.py`` measured CPU / wall = 1.99 under ``OMP_NUM_THREADS=1``), so without this a "one thread"
    figure of Crocoddyl's is a two-thread one."""
    problem.nthreads = int(os.environ.get("OMP_NUM_THREADS", "1"))
    return problem


def cpu_model() -> str:
    """The CPU's model name (``/proc/cpuinfo``), or what the platform says."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def describe() -> str:
    """``CPU model, N cores, load average a b c`` (1, 5 and 15 minutes)."""
    loads = " ".join(f"{v:.2f}" for v in os.getloadavg())
    return f"{cpu_model()}, {os.cpu_count()} cores, load average {loads}"


def settle(timeout: float = 120.0) -> float:
    """Wait up to ``timeout`` seconds for the load average to fall below ``QUIET_LOAD`` (after an earlier run of
    the same benchmark, say); returns it."""
    deadline = time.monotonic() + timeout
    while os.getloadavg()[0] >= QUIET_LOAD and time.monotonic() < deadline:
        time.sleep(5.0)
    return os.getloadavg()[0]


# the load average and the clock when a parent process settled, handed to the child process that runs the benchmark
SETTLED = "LIETRAJ_BENCHMARK_SETTLED"


def settled_environment(env: dict) -> dict:
    """``settle()``, then ``env`` with the load average and the clock of that moment for a child process that runs
    the benchmark (``Quietness.started_by_parent``): its own start (imports, loading kernels, building the problem,
    a warm-up solve) belongs to its run, not to a load found at its start (a child's start took the load average
    from 0.48 to 0.51 and its quiet run was marked busy)."""
    load = settle()
    return dict(env, **{SETTLED: f"{load!r},{time.monotonic()!r}"})


@dataclass
class Quietness:
    """Started when a run starts (``threads``: the busy threads the run itself keeps); ``verdict()`` at its end."""

    threads: int = 1
    load_at_start: float = field(default_factory=lambda: os.getloadavg()[0])
    started: float = field(default_factory=time.monotonic)

    @classmethod
    def started_by_parent(cls, threads: int) -> Quietness:
        """Started when the parent process settled (``settled_environment``; ``time.monotonic`` is one clock for
        the machine's processes), or now when this process was not started so."""
        settled = os.environ.get(SETTLED)
        if settled is None:
            return cls(threads)
        load, started = (float(v) for v in settled.split(","))
        return cls(threads, load, started)

    def own_load(self) -> float:
        """The load average this run alone would have raised the one at its start to by now."""
        decay = math.exp(-(time.monotonic() - self.started) / 60.0)
        return self.load_at_start * decay + self.threads * (1.0 - decay)

    @property
    def quiet(self) -> bool:
        return self.load_at_start < QUIET_LOAD and os.getloadavg()[0] < self.own_load() + QUIET_LOAD

    def verdict(self) -> str:
        """"quiet", or why the run's ratios are not to be quoted."""
        end = os.getloadavg()[0]
        if self.load_at_start >= QUIET_LOAD:
            return (f"BUSY: load average {self.load_at_start:.2f} at the start (quiet below {QUIET_LOAD}); these ratios "
                    "flatter lietraj, do not quote them")
        if end >= self.own_load() + QUIET_LOAD:
            return (f"BUSY: load average {end:.2f} at the end, {self.own_load():.2f} expected from this run alone; "
                    "another process ran, do not quote these ratios")
        return "quiet"
