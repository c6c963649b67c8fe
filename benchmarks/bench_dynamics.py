"""lietraj vs Pinocchio: per-call time of RNEA, CRBA, ABA and M^-1 from Python, plus batched per-knot time.

Both libraries get the same states in the same run; rounds of the two are interleaved and the median over
rounds is reported, because these machines are shared and noisy. lietraj computes in a workspace made once, as
Pinocchio computes in a ``data`` made once. Run:

    python benchmarks/bench_dynamics.py            # ur5, solo12, talos
    python benchmarks/bench_dynamics.py --quick    # fewer rounds
"""

from __future__ import annotations

import argparse
import sys
import timeit
from pathlib import Path

import numpy as np
import pinocchio as pin

import lietraj
from lietraj.dynamics import Workspace, aba, inverse_mass_matrix, mass_matrix, rnea
from lietraj.dynamics.model.pinocchio_interop import to_pinocchio

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from pin_oracle import pin_model  # noqa: E402


def per_call_us(f, number: int, rounds: int) -> list[float]:
    return [timeit.timeit(f, number=number) / number * 1e6 for _ in range(rounds)]


def interleaved(ours, theirs, number: int, rounds: int) -> tuple[float, float]:
    """Median per-call times (us), alternating the two contenders round by round."""
    a, b = [], []
    for _ in range(rounds):
        a += per_call_us(ours, number, 1)
        b += per_call_us(theirs, number, 1)
    return float(np.median(a)), float(np.median(b))


def bench_robot(name: str, number: int, rounds: int, knots: int) -> list[tuple]:
    model, pm = lietraj.load_robot(name), pin_model(name)
    ws, pd = Workspace(model), pm.createData()
    rng = np.random.default_rng(0)
    x = model.state_space.random(rng)
    a = rng.normal(size=model.nv)
    q, v = to_pinocchio(model, x)
    X = model.state_space.random_trajectory(knots, rng)
    A = rng.normal(size=(knots, model.nv))
    cases = [
        ("RNEA", lambda: rnea(model, x, a, workspace=ws), lambda: pin.rnea(pm, pd, q, v, a),
         lambda: rnea(model, X, A, workspace=ws)),
        ("CRBA", lambda: mass_matrix(model, x, ws), lambda: pin.crba(pm, pd, q), lambda: mass_matrix(model, X, ws)),
        ("ABA", lambda: aba(model, x, a, workspace=ws), lambda: pin.aba(pm, pd, q, v, a),
         lambda: aba(model, X, A, workspace=ws)),
        ("M^-1", lambda: inverse_mass_matrix(model, x, ws), lambda: pin.computeMinverse(pm, pd, q),
         lambda: inverse_mass_matrix(model, X, ws)),
    ]
    return time_cases(name, cases, number, rounds, knots)


def time_cases(name: str, cases, number: int, rounds: int, knots: int) -> list[tuple]:
    """Rows (robot, label, ours, pinocchio, ratio, batched per knot) for cases (label, ours, theirs, batch)."""
    rows = []
    for label, ours, theirs, batch in cases:
        ours(), theirs(), batch()  # compile / warm up
        t_ours, t_pin = interleaved(ours, theirs, number, rounds)
        t_batch = float(np.median(per_call_us(batch, max(1, number // knots), rounds))) / knots
        rows.append((name, label, t_ours, t_pin, t_ours / t_pin, t_batch))
    return rows


def run(description: str, bench_robot, quick: tuple[int, int], full: tuple[int, int]) -> None:
    """Parse the command line, time every robot with ``bench_robot(name, number, rounds, knots)`` and print."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--quick", action="store_true", help="fewer rounds")
    parser.add_argument("--robots", nargs="+", default=["ur5", "solo12", "talos"])
    args = parser.parse_args()
    number, rounds = quick if args.quick else full
    print(f"pinocchio {pin.__version__}, lietraj {lietraj.__version__}; median of {rounds} interleaved rounds "
          f"of {number} calls; batched = one call over a 100-knot trajectory, per knot")
    print(f"{'robot':8s} {'function':9s} {'lietraj us':>10s} {'pinocchio us':>12s} {'ratio':>6s} {'batched us/knot':>16s}")
    for name in args.robots:
        for row in bench_robot(name, number, rounds, 100):
            print(f"{row[0]:8s} {row[1]:9s} {row[2]:10.2f} {row[3]:12.2f} {row[4]:6.2f} {row[5]:16.2f}")


def main() -> None:
    run(__doc__.splitlines()[0], bench_robot, (300, 7), (2000, 25))


if __name__ == "__main__":
    main()
