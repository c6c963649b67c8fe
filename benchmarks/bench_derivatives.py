"""lietraj vs Pinocchio: per-call time of the inverse- and forward-dynamics derivatives, and of the linearization.

For each robot: dRNEA (``rnea_derivatives`` vs ``computeRNEADerivatives``), dABA (``aba_derivatives`` vs
``computeABADerivatives``) and A, B (``linearize`` vs ``computeABADerivatives`` plus the same assembly of A and B
in numpy, which is what a Pinocchio user writes). Same states for both, rounds interleaved, medians reported;
the last column is lietraj's batched time per knot over a 100-knot trajectory (one compiled call, writing into
the arrays of the previous call's result as a solver does; fresh arrays add the first-touch cost of their
memory, about 1 us per 4 KiB page). lietraj computes in a workspace made once, as Pinocchio in its ``data``. Run:

    python benchmarks/bench_derivatives.py            # ur5, solo12, talos
    python benchmarks/bench_derivatives.py --quick
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pinocchio as pin

import lietraj
from bench_dynamics import run, time_cases
from lietraj.dynamics import Workspace, aba_derivatives, rnea_derivatives
from lietraj.dynamics.algorithms.linearization import linearize
from lietraj.dynamics.model.pinocchio_interop import to_pinocchio

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from pin_oracle import pin_model  # noqa: E402


def pin_linearize(pm, pd, q, v, tau, nu, n):
    """A, B from Pinocchio's ABA derivatives, assembled as lietraj does."""
    dq, dv, Minv = pin.computeABADerivatives(pm, pd, q, v, tau)
    nv = pm.nv
    A = np.zeros((2 * nv, 2 * nv))
    A[:nv, nv:] = np.eye(nv)
    A[nv:, :nv], A[nv:, nv:] = dq, dv
    if nu is not None:
        A[:6, :6] -= pin.Motion(nu).action
    B = np.zeros((2 * nv, n))
    B[nv:] = Minv[:, nv - n:]
    return A, B


def bench_robot(name: str, number: int, rounds: int, knots: int) -> list[tuple]:
    model, pm = lietraj.load_robot(name), pin_model(name)
    ws, pd = Workspace(model), pm.createData()
    rng = np.random.default_rng(0)
    x = model.state_space.random(rng)
    a, u = rng.normal(size=model.nv), rng.normal(size=model.n)
    tau = np.concatenate([np.zeros(model.nv - model.n), u])
    q, v = to_pinocchio(model, x)
    X = model.state_space.random_trajectory(knots, rng)
    A, U = rng.normal(size=(knots, model.nv)), rng.normal(size=(knots, model.n))
    T = np.concatenate([np.zeros((knots, model.nv - model.n)), U], axis=1)
    nu = x.v[:6] if model.floating_base else None
    d_id, d_fd, lin = rnea_derivatives(model, X, A), aba_derivatives(model, X, T), linearize(model, X, U)
    cases = [
        ("dRNEA", lambda: rnea_derivatives(model, x, a, workspace=ws),
         lambda: pin.computeRNEADerivatives(pm, pd, q, v, a), lambda: rnea_derivatives(model, X, A, out=d_id, workspace=ws)),
        ("dABA", lambda: aba_derivatives(model, x, tau, workspace=ws),
         lambda: pin.computeABADerivatives(pm, pd, q, v, tau),
         lambda: aba_derivatives(model, X, T, out=d_fd, workspace=ws)),
        ("A, B", lambda: linearize(model, x, u, workspace=ws), lambda: pin_linearize(pm, pd, q, v, tau, nu, model.n),
         lambda: linearize(model, X, U, out=lin, workspace=ws)),
    ]
    return time_cases(name, cases, number, rounds, knots)


if __name__ == "__main__":
    run(__doc__.splitlines()[0], bench_robot, (200, 7), (1000, 25))
