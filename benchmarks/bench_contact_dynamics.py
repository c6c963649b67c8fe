"""lietraj vs Pinocchio: contact-constrained forward dynamics per state, from Python.

For each robot on its feet (talos: two 6d soles; solo12, anymal: four 3d point feet; ur5: its tool held, 6d), with
Baumgarte gains and targets: ``contact_dynamics`` on one state against Pinocchio's ``constraintDynamics`` (rigid
constraint models to the world, one proximal iteration, i.e. the same KKT solve), rounds interleaved, medians
reported. Further columns: Pinocchio's ``forwardDynamics(q, v, tau, J, gamma)`` with J and gamma given (a lower
bound: it leaves out the contact kinematics), lietraj's batched call over a 60-knot trajectory per knot and its
ratio to the single call, and ``ContactRobotDynamics.rollout_policy`` (the solvers' forward pass, one compiled
call over 60 knots, dt = 0.01) per knot. Run:

    python benchmarks/bench_contact_dynamics.py            # talos, solo12, anymal, ur5
    python benchmarks/bench_contact_dynamics.py --quick
"""

from __future__ import annotations

import argparse
import sys
import timeit
from pathlib import Path

import numpy as np
import pinocchio as pin

import lietraj
from lietraj.dynamics import Workspace, se3
from lietraj.dynamics.contacts.contact_dynamics import Contact, contact_dynamics
from lietraj.dynamics.kinematics.kinematics import frame_placement
from lietraj.dynamics.model.pinocchio_interop import to_pinocchio
from lietraj.dynamics.lie.state import State, Trajectory
from lietraj.optimal_control.dynamics.contact_robot_dynamics import ContactRobotDynamics

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from pin_oracle import PROXIMAL_SETTINGS, pin_constraints  # noqa: E402

CONTACTS = {
    "talos": (("left_sole_link", "right_sole_link"), "6d"),
    "solo12": (("FL_FOOT", "FR_FOOT", "HL_FOOT", "HR_FOOT"), "3d"),
    "anymal": (("LF_FOOT", "LH_FOOT", "RF_FOOT", "RH_FOOT"), "3d"),
    "ur5": (("tool0",), "6d"),
}
GAINS = (30.0, 8.0)
KNOTS = 60


def per_call_us(f, number: int) -> float:
    return timeit.timeit(f, number=number) / number * 1e6


def interleaved(fs, number: int, rounds: int) -> list[float]:
    """Median per-call times (us) of the callables fs, alternating them round by round."""
    times = [[] for _ in fs]
    for _ in range(rounds):
        for f, t in zip(fs, times):
            t.append(per_call_us(f, number))
    return [float(np.median(t)) for t in times]


def pinocchio_calls(name: str, model, x, tau, contacts, J, gamma):
    """constraintDynamics and forwardDynamics(J, gamma) on Pinocchio's model of the robot, as callables."""
    pm, pd, cmodels, cdatas = pin_constraints(name, contacts)
    pd2 = pm.createData()
    q, v = to_pinocchio(model, x)
    settings = pin.ProximalSettings(*PROXIMAL_SETTINGS)
    return (lambda: pin.constraintDynamics(pm, pd, q, v, tau, cmodels, cdatas, settings),
            lambda: pin.forwardDynamics(pm, pd2, q, v, tau, J, gamma, 0.0))


def rollout_call(model, contacts, x0, rng):
    """ContactRobotDynamics.rollout_policy over KNOTS knots from x0 with small random controls and gains."""
    dyn = ContactRobotDynamics(model, 0.01, contacts)
    sp = dyn.state_space
    X_ref = Trajectory.from_states([x0] * (KNOTS + 1))
    U = 0.01 * rng.standard_normal((KNOTS, model.n))
    k, K = np.zeros((KNOTS, model.n)), 1e-3 * rng.standard_normal((KNOTS, model.n, sp.ndx))
    if not dyn.rollout_policy(x0, X_ref, U, k, K, 1.0).ok:
        raise RuntimeError(f"{model.name}: the benchmark's rollout fails")
    return lambda: dyn.rollout_policy(x0, X_ref, U, k, K, 1.0)


def bench_robot(name: str, number: int, rounds: int) -> tuple:
    model = lietraj.load_robot(name)
    rng = np.random.default_rng(0)
    x = model.state_space.random(rng)
    tau = rng.standard_normal(model.nv)
    frames, kind = CONTACTS[name]
    contacts = [Contact(f, kind, "local", GAINS, frame_placement(model, x, f) @ se3.exp(0.05 * rng.standard_normal(6)))
                for f in frames]
    r = contact_dynamics(model, x, tau, contacts)
    constraint, forward = pinocchio_calls(name, model, x, tau, contacts, r.jacobian, r.drift)
    X = model.state_space.random_trajectory(KNOTS, rng)
    TAU = rng.standard_normal((KNOTS, model.nv))
    ws = Workspace(model)  # made once, as Pinocchio's data
    ours = lambda: contact_dynamics(model, x, tau, contacts, workspace=ws)  # noqa: E731
    batch = lambda: contact_dynamics(model, X, TAU, contacts, workspace=ws)  # noqa: E731
    # The rollout starts at rest at the reference posture (a fixed base: at x's joint positions, away from the
    # arm's singular reference posture), the contacts holding the frames where they are.
    x0 = model.reference_state() if model.floating_base else State(None, x.s, np.zeros(model.nv))
    rollout = rollout_call(model, [Contact(f, kind, "local", GAINS) for f in frames], x0, rng)
    for f in (ours, batch, rollout, constraint, forward):
        f()  # compile / warm up
    t_ours, t_pin, t_fwd = interleaved((ours, constraint, forward), number, rounds)
    t_batch = float(np.median([per_call_us(batch, max(1, number // KNOTS)) for _ in range(rounds)])) / KNOTS
    t_roll = float(np.median([per_call_us(rollout, max(1, number // KNOTS)) for _ in range(rounds)])) / KNOTS
    return name, f"{len(frames)}x{kind}", t_ours, t_pin, t_ours / t_pin, t_fwd, t_batch, t_batch / t_ours, t_roll


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer rounds")
    parser.add_argument("--robots", nargs="+", default=list(CONTACTS))
    args = parser.parse_args()
    number, rounds = (300, 7) if args.quick else (2000, 25)
    print(f"pinocchio {pin.__version__}, lietraj {lietraj.__version__}; median of {rounds} interleaved rounds of "
          f"{number} calls; batched and rollout: one call over {KNOTS} knots, per knot")
    print(f"{'robot':7s} {'contacts':8s} {'lietraj us':>10s} {'pin cD us':>9s} {'ratio':>6s} {'pin fD(J) us':>12s} "
          f"{'batched us/knot':>15s} {'batch/single':>12s} {'rollout us/knot':>15s}")
    for name in args.robots:
        row = bench_robot(name, number, rounds)
        print(f"{row[0]:7s} {row[1]:8s} {row[2]:10.2f} {row[3]:9.2f} {row[4]:6.2f} {row[5]:12.2f} {row[6]:15.2f} "
              f"{row[7]:12.2f} {row[8]:15.2f}")


if __name__ == "__main__":
    main()
