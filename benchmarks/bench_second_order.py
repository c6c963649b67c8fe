"""Second-order inverse-dynamics derivatives (IDSVA SO) next to the first-order ones, lietraj and Pinocchio.

Pinocchio's Python bindings do not expose its second-order derivatives, so the peer column is its first-order
``computeRNEADerivatives``; the figure to compare is the SO/FO ratio (seed 003: it grows with the tree depth;
Pinocchio's C++ ratio on this kind of machine is about 7.6 for hyq and 10 for talos). The last column is the
contraction ``mu . SO`` that DDP uses (``rnea_second_order_contraction``), accumulated without the tensors. Run:

    python benchmarks/bench_second_order.py            # solo12, hyq, talos
    python benchmarks/bench_second_order.py --quick
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pinocchio as pin

import lietraj
from bench_dynamics import interleaved
from lietraj.dynamics import Workspace, rnea_derivatives, rnea_second_order_contraction, rnea_second_order_derivatives
from lietraj.dynamics.model.pinocchio_interop import to_pinocchio

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from pin_oracle import pin_model  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer rounds")
    parser.add_argument("--robots", nargs="+", default=["solo12", "hyq", "talos"])
    args = parser.parse_args()
    number, rounds = (20, 5) if args.quick else (100, 15)
    print(f"pinocchio {pin.__version__}, lietraj {lietraj.__version__}; median of {rounds} interleaved rounds")
    print(f"{'robot':8s} {'SO us':>9s} {'FO us':>9s} {'SO/FO':>6s} {'pin FO us':>10s} {'SO/pin FO':>10s} {'mu.SO us':>10s}")
    for name in args.robots:
        model, pm = lietraj.load_robot(name), pin_model(name)
        pd, ws = pm.createData(), Workspace(model)  # lietraj's work arrays made once, as Pinocchio's data
        rng = np.random.default_rng(0)
        x, a = model.state_space.random(rng), rng.normal(size=model.nv)
        q, v = to_pinocchio(model, x)
        mu = rng.normal(size=model.nv)
        # Results are written into preallocated arrays (out=), as a solver does over its iterations, so the time is
        # the kernel's and not that of first-touching 4 nv^3 fresh entries.
        so_out, fo_out = rnea_second_order_derivatives(model, x, a), rnea_derivatives(model, x, a)
        hess_out = rnea_second_order_contraction(model, x, a, mu)
        so = lambda: rnea_second_order_derivatives(model, x, a, out=so_out, workspace=ws)  # noqa: E731
        hess = lambda: rnea_second_order_contraction(model, x, a, mu, out=hess_out, workspace=ws)  # noqa: E731
        fo = lambda: rnea_derivatives(model, x, a, out=fo_out, workspace=ws)  # noqa: E731
        pin_fo = lambda: pin.computeRNEADerivatives(pm, pd, q, v, a)  # noqa: E731
        t_so, t_fo = interleaved(so, fo, number, rounds)
        t_hess, _ = interleaved(hess, fo, number, rounds)
        _, t_pin = interleaved(fo, pin_fo, 10 * number, rounds)
        print(f"{name:8s} {t_so:9.1f} {t_fo:9.2f} {t_so / t_fo:6.1f} {t_pin:10.2f} {t_so / t_pin:10.1f} "
              f"{t_hess:10.1f}")


if __name__ == "__main__":
    main()
