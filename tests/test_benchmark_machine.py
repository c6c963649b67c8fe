"""The benchmarks' quietness verdict (``benchmarks/machine.py``): a child process started after its parent settled
judges its run from the parent's moment, so that its own start is not a load found at its start."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


def _child_quietness(env: dict) -> tuple[float, float]:
    code = ("import sys; sys.path.insert(0, sys.argv[1]); from machine import Quietness; "
            "q = Quietness.started_by_parent(2); print(q.load_at_start, q.started, q.threads)")
    out = subprocess.run([sys.executable, "-c", code, str(BENCHMARKS)], env=env, capture_output=True, text=True,
                         check=True).stdout.split()
    assert out[2] == "2"
    return float(out[0]), float(out[1])


def test_a_child_judges_its_run_from_the_moment_its_parent_settled():
    sys.path.insert(0, str(BENCHMARKS))
    try:
        from machine import SETTLED
    finally:
        sys.path.remove(str(BENCHMARKS))
    before = time.monotonic()
    load, started = _child_quietness(dict(os.environ, **{SETTLED: f"{0.125!r},{before - 30.0!r}"}))
    assert load == 0.125 and started == before - 30.0  # the parent's figures, to the bit
    env = {k: v for k, v in os.environ.items() if k != SETTLED}
    load, started = _child_quietness(env)  # started alone: its own start
    assert started >= before and load >= 0.0
