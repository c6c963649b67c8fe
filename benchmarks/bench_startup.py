"""Start-up cost: what a new user waits for before lietraj computes anything, from an empty numba cache.

Every measurement is a fresh Python process; the numba cache lives in a new temporary directory
(``NUMBA_CACHE_DIR``), so the first command compiles every kernel it calls and later ones load them.

1. The main job, ``lietraj solve talos_reach``: seconds until its first iteration line, cold and then warm.
2. A first tour on the same cache, one command after the other as a new user would go (``squat``, ``trot``,
   ``jump``, then ``talos_reach --solver ddp``): each command's wall time cold (its first run) and warm (run
   again), the difference being its compile time.
3. ``import lietraj`` plus the first call of RNEA, and of RNEA, ABA, CRBA and M⁻¹, cold and warm.

Run ``python benchmarks/bench_startup.py`` (``--quick``: only the main job). The load average is printed with
the figures: compile time is CPU-bound, and a busy machine inflates it.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time

from machine import describe

CALL_SCRIPT = """
import time
t0 = time.perf_counter()
import numpy as np
import lietraj
from lietraj.dynamics import {names}
model = lietraj.load_robot("talos")
x = model.state_space.random(np.random.default_rng(0))
t1 = time.perf_counter()
{calls}
t2 = time.perf_counter()
print(f"{{t1 - t0:.2f}} {{t2 - t1:.2f}}")
"""

CALLS = {
    "rnea": "rnea(model, x, np.zeros(model.nv))",
    "aba": "aba(model, x, np.zeros(model.nv))",
    "mass_matrix": "mass_matrix(model, x)",
    "inverse_mass_matrix": "inverse_mass_matrix(model, x)",
}

TOUR = (["squat"], ["trot"], ["jump"], ["talos_reach", "--solver", "ddp"])


def command(args: list[str], cache: str) -> tuple[float, float]:
    """Run ``lietraj ARGS`` in a fresh process: (seconds to the first iteration line, seconds in all)."""
    env = dict(os.environ, NUMBA_CACHE_DIR=cache, PYTHONUNBUFFERED="1")
    start = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "lietraj.cli", *args], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    first = float("nan")
    lines = []
    for line in proc.stdout:
        lines.append(line)
        if first != first and line.split()[:1] == ["1"]:
            first = time.perf_counter() - start
    if proc.wait() not in (0, 1):
        raise RuntimeError(f"lietraj {' '.join(args)} failed:\n{''.join(lines[-20:])}")
    return first, time.perf_counter() - start


def first_calls(names: list[str], cache: str) -> tuple[float, float]:
    script = CALL_SCRIPT.format(names=", ".join(names), calls="\n".join(CALLS[n] for n in names))
    out = subprocess.run([sys.executable, "-c", script], env=dict(os.environ, NUMBA_CACHE_DIR=cache),
                         capture_output=True, text=True, check=True)
    t_import, t_call = map(float, out.stdout.split())
    return t_import, t_call


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="only the main job")
    quick = parser.parse_args().quick
    print(describe())
    with tempfile.TemporaryDirectory() as cache:
        print(f"\n{'command (fresh process)':44s} {'cache':6s} {'first iteration s':>18s} {'total s':>8s}")
        for label in ("empty", "warm"):
            first, total = command(["solve", "talos_reach"], cache)
            print(f"{'lietraj solve talos_reach':44s} {label:6s} {first:18.1f} {total:8.1f}")
        if quick:
            print(describe())
            return
        print(f"\n{'first tour, one after the other':44s} {'cold s':>8s} {'warm s':>8s} {'compile s':>10s}")
        compiled = 0.0
        for args in TOUR:
            cold = command(["solve", *args, "--quiet"], cache)[1]
            warm = command(["solve", *args, "--quiet"], cache)[1]
            compiled += cold - warm
            print(f"{'lietraj solve ' + ' '.join(args):44s} {cold:8.1f} {warm:8.1f} {cold - warm:10.1f}")
        print(f"{'tour in all':44s} {'':8s} {'':8s} {compiled:10.1f}")
    print(f"\n{'first call of':48s} {'cache':6s} {'import s':>9s} {'calls s':>8s}")
    for names in (["rnea"], list(CALLS)):
        with tempfile.TemporaryDirectory() as cache:
            for label in ("empty", "warm"):
                t_import, t_call = first_calls(names, cache)
                print(f"{' + '.join(names):48s} {label:6s} {t_import:9.2f} {t_call:8.2f}")
    print(describe())


if __name__ == "__main__":
    main()
