"""Start-up cost: ``import lietraj`` plus the first call, with an empty and then a warm numba cache.

Each measurement is a fresh Python process whose numba cache lives in a new temporary directory, so the
first run compiles every kernel it calls and the second loads them from the cache. Run:

    python benchmarks/bench_startup.py
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile

SCRIPT = """
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


def run(names: list[str], cache_dir: str) -> tuple[float, float]:
    script = SCRIPT.format(names=", ".join(names), calls="\n".join(CALLS[n] for n in names))
    env = dict(os.environ, NUMBA_CACHE_DIR=cache_dir)
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True)
    t_import, t_call = map(float, out.stdout.split())
    return t_import, t_call


def main() -> None:
    print(f"{'first call of':48s} {'cache':6s} {'import+load s':>13s} {'calls s':>8s} {'total s':>8s}")
    for names in (["rnea"], list(CALLS)):
        with tempfile.TemporaryDirectory() as cache:
            for label in ("empty", "warm"):
                t_import, t_call = run(names, cache)
                print(f"{' + '.join(names):48s} {label:6s} {t_import:13.2f} {t_call:8.2f} {t_import + t_call:8.2f}")


if __name__ == "__main__":
    main()
