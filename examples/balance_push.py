"""Push a standing humanoid and a standing quadruped sideways and let a balancing LQR catch them.

Talos stands on both soles, solo12 on its four feet (rigid contacts). ``balance_controller`` linearizes the
contact-constrained dynamics about the posture (``contact_linearization``), takes the torques that hold it from
``static_equilibrium`` and solves an LQR on the motions the contacts allow. Each robot then gets an impulsive
lateral push on its base and is simulated for a few seconds on the nonlinear contact dynamics (semi-implicit
Euler, 5 ms), once with the LQR and once holding the equilibrium torques only. Run: ``python examples/balance_push.py``.
"""

import numpy as np

from lietraj import load_robot
from lietraj.dynamics.contacts.contact_dynamics import Contact
from lietraj.dynamics.kinematics.kinematics import frame_placement
from lietraj.optimal_control.feedback.balance import balance_controller, push
from lietraj.optimal_control.dynamics.contact_robot_dynamics import ContactRobotDynamics
from lietraj.optimal_control.feedback.lqr import simulate

DT, FRICTION = 0.005, 0.7
SOLE = (0.1, 0.05)  # Talos' sole half length and half width (m)
ROBOTS = {  # posture, feet, contact kind, force reference, lateral push (m/s), seconds
    "talos": ("half_sitting", ("left_sole_link", "right_sole_link"), "6d", "local", 0.2, 3.0),
    "solo12": ("standing", ("FL_FOOT", "FR_FOOT", "HL_FOOT", "HR_FOOT"), "3d", "local_world_aligned", 0.4, 2.0),
}


def report(label, model, x_eq, dyn, sim, kind):
    """One line: how far the base went and where it ended, and how much of the friction cones (and soles) it used."""
    xs, us = sim.xs, sim.us
    sp = model.state_space
    error = np.array([sp.difference(x_eq, xs[k])[:6] for k in range(len(xs))])
    forces = dyn.contact_forces(xs[:-1], us)
    d = 6 if kind == "6d" else 3
    fz = forces[:, 2::d]
    ratio = np.hypot(forces[:, 0::d], forces[:, 1::d]) / np.maximum(fz, 1e-9)
    outside = np.flatnonzero((fz <= 0).any(axis=1) | (ratio > FRICTION).any(axis=1))
    status = "run completed" if sim.completed else f"run diverged at t = {len(us) * DT:.2f} s"
    line = (f"  {label:<9} {status:<24} base excursion {1e3 * np.abs(error[:, :3]).max():9.3g} mm, "
            f"final base error {np.abs(error[-1]).max():9.2e}, min normal force {fz.min():9.3g} N, max |f_t|/f_z "
            f"{ratio.max():9.3g}")
    if d == 6:
        cop = np.maximum(np.abs(forces[:, 4::6]) / SOLE[0], np.abs(forces[:, 3::6]) / SOLE[1]) / np.maximum(fz, 1e-9)
        line += f", max CoP / sole size {cop.max():9.3g}"
    if outside.size:
        line += f"; forces leave the friction cones at t = {outside[0] * DT:.3f} s"
    print(line)


def main():
    for name, (posture, feet, kind, reference, speed, seconds) in ROBOTS.items():
        model = load_robot(name)
        x_eq = model.reference_state(posture)
        # Baumgarte gains only keep the simulated feet from drifting numerically; the LQR does not depend on them.
        contacts = [Contact(f, kind, reference, (100.0, 20.0), frame_placement(model, x_eq, f)) for f in feet]
        ctrl = balance_controller(model, x_eq, contacts, dt=DT, friction=FRICTION,
                                  sole={f: SOLE for f in feet} if kind == "6d" else None)
        dyn = ContactRobotDynamics(model, DT, contacts)
        x0 = push(model, x_eq, contacts, np.array([0.0, speed, 0.0]))
        steps = int(round(seconds / DT))
        print(f"{name}: pushed sideways at {speed} m/s, {seconds} s simulated, friction {FRICTION}; {ctrl}")
        report("LQR", model, x_eq, dyn, simulate(dyn, ctrl, x0, steps), kind)
        report("open loop", model, x_eq, dyn, simulate(dyn, lambda k, x: ctrl.u_eq, x0, steps), kind)


if __name__ == "__main__":
    main()
