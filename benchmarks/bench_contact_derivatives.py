"""lietraj vs Pinocchio: time per state of the contact-dynamics derivatives, single and batched over a trajectory.

Robots and contacts: talos on both soles (2 x 6d), solo12 and anymal on their four feet (4 x 3d), LOCAL, with
Baumgarte gains (Kp, Kv) = (30, 8) and targets slightly off the current feet (so that every term is computed).
Pinocchio gets the same model, state and torque, with one frame-to-world ``RigidConstraintModel`` per contact
(as in ``tests/test_contact_dynamics_derivatives.py``). Two comparisons per robot:

- ``derivatives``: ``contact_dynamics_derivatives(..., dynamics=r)`` given the solution ``r`` of
  ``contact_dynamics`` vs ``computeConstraintDynamicsDerivatives`` after one ``constraintDynamics``;
- ``dyn+deriv``: ``contact_dynamics_derivatives`` (which solves ``contact_dynamics`` first) vs
  ``constraintDynamics`` + ``computeConstraintDynamicsDerivatives``.

Columns: lietraj on one State, Pinocchio, and lietraj on a Trajectory of ``--knots`` knots (one call) divided by the
knot count, with its ratio to Pinocchio. lietraj calls write into the arrays of the previous result (``out=``) as
a solver does. The three contenders are timed in interleaved rounds (these machines are shared and noisy) and
the medians are reported. Run with ``OMP_NUM_THREADS=1``:

    python benchmarks/bench_contact_derivatives.py            # talos, solo12, anymal
    python benchmarks/bench_contact_derivatives.py --quick
    python benchmarks/bench_contact_derivatives.py --robots ur5
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pinocchio as pin

import lietraj
from bench_dynamics import per_call_us
from lietraj.dynamics import Workspace, se3
from lietraj.dynamics.contacts.contact_dynamics import Contact, contact_dynamics
from lietraj.dynamics.contacts.contact_dynamics_derivatives import contact_dynamics_derivatives
from lietraj.dynamics.kinematics.kinematics import frame_placement
from lietraj.dynamics.model.pinocchio_interop import to_pinocchio

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from pin_oracle import PROXIMAL_SETTINGS, pin_constraints  # noqa: E402

FEET = {
    "talos": (("left_sole_link", "right_sole_link"), "6d"),
    "solo12": (("FL_FOOT", "FR_FOOT", "HL_FOOT", "HR_FOOT"), "3d"),
    "anymal": (("LF_FOOT", "RF_FOOT", "LH_FOOT", "RH_FOOT"), "3d"),
    "ur5": (("tool0",), "3d"),  # a fixed-base arm pressing its tool on the world
}
GAINS = (30.0, 8.0)


def bench_robot(name: str, number: int, rounds: int, knots: int) -> list[tuple]:
    model = lietraj.load_robot(name)
    rng = np.random.default_rng(0)
    x = model.state_space.random(rng)
    tau = np.concatenate([np.zeros(model.nv - model.n), rng.normal(size=model.n)])
    frames, kind = FEET[name]
    contacts = [Contact(f, kind, "local", GAINS, frame_placement(model, x, f) @ se3.exp(0.05 * rng.normal(size=6)))
                for f in frames]
    X = model.state_space.random_trajectory(knots, rng)
    T = np.concatenate([np.zeros((knots, model.nv - model.n)), rng.normal(size=(knots, model.n))], axis=1)

    pm, pd, cmodels, cdatas = pin_constraints(name, contacts)
    q, v = to_pinocchio(model, x)
    settings = pin.ProximalSettings(*PROXIMAL_SETTINGS)
    pin.constraintDynamics(pm, pd, q, v, tau, cmodels, cdatas, settings)

    ws = Workspace(model)  # made once, as Pinocchio's data
    r, R = contact_dynamics(model, x, tau, contacts, workspace=ws), contact_dynamics(model, X, T, contacts, workspace=ws)
    d = contact_dynamics_derivatives(model, x, tau, contacts, workspace=ws)
    D = contact_dynamics_derivatives(model, X, T, contacts, workspace=ws)
    cases = [
        ("derivatives",
         lambda: contact_dynamics_derivatives(model, x, tau, contacts, out=d, dynamics=r, workspace=ws),
         lambda: pin.computeConstraintDynamicsDerivatives(pm, pd, cmodels, cdatas),
         lambda: contact_dynamics_derivatives(model, X, T, contacts, out=D, dynamics=R, workspace=ws)),
        ("dyn+deriv",
         lambda: contact_dynamics_derivatives(model, x, tau, contacts, out=d, workspace=ws),
         lambda: (pin.constraintDynamics(pm, pd, q, v, tau, cmodels, cdatas, settings),
                  pin.computeConstraintDynamicsDerivatives(pm, pd, cmodels, cdatas)),
         lambda: contact_dynamics_derivatives(model, X, T, contacts, out=D, workspace=ws)),
    ]
    rows = []
    for label, ours, theirs, batch in cases:
        ours(), theirs(), batch()  # compile / warm up
        t_ours, t_pin, t_batch = [], [], []
        for _ in range(rounds):
            t_ours += per_call_us(ours, number, 1)
            t_pin += per_call_us(theirs, number, 1)
            t_batch += [t / knots for t in per_call_us(batch, max(1, number // knots), 1)]
        o, p, b = (float(np.median(t)) for t in (t_ours, t_pin, t_batch))
        rows.append((name, label, o, p, o / p, b, b / p))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer rounds")
    parser.add_argument("--robots", nargs="+", default=["talos", "solo12", "anymal"], choices=list(FEET))
    parser.add_argument("--knots", type=int, default=60)
    args = parser.parse_args()
    number, rounds = (120, 7) if args.quick else (600, 25)
    print(f"pinocchio {pin.__version__}, lietraj {lietraj.__version__}; medians of {rounds} interleaved rounds of "
          f"{number} calls; batched = one call over {args.knots} knots, per knot")
    print(f"{'robot':8s} {'what':12s} {'lietraj us':>10s} {'pinocchio us':>12s} {'ratio':>6s} {'batched us/knot':>16s} "
          f"{'ratio':>6s}")
    for name in args.robots:
        for row in bench_robot(name, number, rounds, args.knots):
            print(f"{row[0]:8s} {row[1]:12s} {row[2]:10.2f} {row[3]:12.2f} {row[4]:6.2f} {row[5]:16.2f} {row[6]:6.2f}")


if __name__ == "__main__":
    main()
