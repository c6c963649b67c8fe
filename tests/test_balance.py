"""Balancing LQR under contacts: Talos on both soles and solo12 on four feet, pushed, in closed-loop simulation.

The closed loop runs on the nonlinear contact dynamics (``ContactRobotDynamics``, semi-implicit Euler, dt = 5 ms,
Baumgarte gains against the numerical drift of the feet) from the state right after an impulsive lateral push on
the base. It must come back to the equilibrium with the contact forces inside the friction cones (and the centres
of pressure inside the soles) all along, while the open loop (equilibrium torques only) drifts away or falls.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
import pytest

from lietraj.dynamics.contacts.contact_dynamics import Contact, contact_dynamics
from lietraj.dynamics.kinematics.kinematics import frame_placement
from lietraj.dynamics.model.robots import load_robot
from lietraj.dynamics.lie.state import State, Trajectory
from lietraj.optimal_control.feedback.balance import balance_controller, constraint_basis, push
from lietraj.optimal_control.dynamics.contact_robot_dynamics import ContactRobotDynamics
from lietraj.optimal_control.feedback.lqr import lqr, simulate

FRICTION = 0.7
SOLES = {"left_sole_link": (0.1, 0.05), "right_sole_link": (0.1, 0.05)}
SETUPS = {  # posture, feet, kind, force reference, lateral push (m/s), simulated time (s)
    "talos": ("half_sitting", tuple(SOLES), "6d", "local", 0.2, 3.0),
    "solo12": ("standing", ("FL_FOOT", "FR_FOOT", "HL_FOOT", "HR_FOOT"), "3d", "local_world_aligned", 0.4, 2.0),
}
DT = 0.005
GAINS = (100.0, 20.0)


@lru_cache(maxsize=None)
def setup(name: str, gains: tuple[float, float] = GAINS):
    """(model, x_eq, contacts, controller): contacts held on the feet's current poses."""
    model = load_robot(name)
    posture, feet, kind, reference, _, _ = SETUPS[name]
    x = model.reference_state(posture)
    contacts = tuple(Contact(f, kind, reference, gains, frame_placement(model, x, f)) for f in feet)
    return model, x, contacts, balance_controller(model, x, contacts, dt=DT, friction=FRICTION,
                                                  sole=SOLES if kind == "6d" else None)


def cone_usage(forces: np.ndarray, kind: str) -> tuple[float, float, float]:
    """(smallest normal force, largest |f_t| / f_z, largest CoP / sole half size) over knots and contacts."""
    d = 6 if kind == "6d" else 3
    fz = forces[:, 2::d]
    mu = float((np.hypot(forces[:, 0::d], forces[:, 1::d]) / np.maximum(fz, 1e-9)).max())
    cop = 0.0
    if d == 6:
        hl, hw = SOLES["left_sole_link"]
        cop = float(np.maximum(np.abs(forces[:, 4::6]) / hl, np.abs(forces[:, 3::6]) / hw).max(initial=0.0)
                    / max(fz.min(), 1e-9))
    return float(fz.min()), mu, cop


@pytest.mark.parametrize("name", list(SETUPS))
def test_push_recovery(name):
    model, x_eq, contacts, ctrl = setup(name)
    _, _, kind, _, speed, duration = SETUPS[name]
    dyn = ContactRobotDynamics(model, DT, contacts)
    x0 = push(model, x_eq, contacts, np.array([0.0, speed, 0.0]))
    steps = int(round(duration / DT))
    sp = model.state_space
    closed = simulate(dyn, ctrl, x0, steps)
    assert closed.completed, closed.status
    xs, us = closed.xs, closed.us
    error = np.array([sp.difference(x_eq, xs[k]) for k in range(len(xs))])
    assert np.abs(error[:, :3]).max() > 0.01  # the push moved the base ...
    assert np.abs(error[-1, :6]).max() < 2e-3  # ... and it came back
    assert np.abs(xs.v[-1]).max() < 2e-2
    forces = dyn.contact_forces(Trajectory(xs.H[:-1], xs.s[:-1], xs.v[:-1]), us)
    fz_min, mu, cop = cone_usage(forces, kind)
    assert fz_min > 0.3 * ctrl.forces_eq[2]
    assert mu < FRICTION
    assert cop < 0.9
    # The feet stayed put (Baumgarte), so these forces are those of a robot standing on them.
    for c in contacts:
        drift = np.linalg.norm(frame_placement(model, xs, c.frame)[:, :3, 3] - c.target[:3, 3], axis=1).max()
        assert drift < 1e-3

    open_loop = simulate(dyn, lambda k, y: ctrl.u_eq, x0, steps)
    if open_loop.completed:
        forces = dyn.contact_forces(Trajectory(open_loop.xs.H[:-1], open_loop.xs.s[:-1], open_loop.xs.v[:-1]),
                                    open_loop.us)
        fz_min, mu, _ = cone_usage(forces, kind)
        assert fz_min < 0.0 or mu > FRICTION  # it would have lifted a foot or slipped
        assert np.abs(sp.difference(x_eq, open_loop.xs[-1])[:6]).max() > 50 * np.abs(error[-1, :6]).max()


@pytest.mark.parametrize("name", list(SETUPS))
def test_controller_on_the_constraint_consistent_subspace(name):
    model, x_eq, contacts, ctrl = setup(name)
    T, nv = ctrl.basis, model.nv
    nc = sum(c.dim for c in contacts)
    assert T.shape == (2 * nv, 2 * (nv - nc))
    np.testing.assert_allclose(T.T @ T, np.eye(T.shape[1]), atol=1e-12)
    J = contact_dynamics(model, x_eq, np.zeros(nv), contacts).jacobian
    assert np.abs(J @ T[:nv]).max() < 1e-10 and np.abs(J @ T[nv:]).max() < 1e-10
    # The gain ignores the contact-violating directions, and the balance is stable ...
    assert np.abs(ctrl.K - ctrl.K @ T @ T.T).max() < 1e-9 * np.abs(ctrl.K).max()
    assert ctrl.constrained_spectral_radius < 1.0
    # ... also for the simulator's exact Euler Jacobians (the controller uses the zero-order hold of A, B).
    F_x, F_u = ContactRobotDynamics(model, DT, contacts).derivatives(x_eq, ctrl.u_eq)
    assert np.abs(np.linalg.eigvals(T.T @ (F_x + F_u @ ctrl.K) @ T)).max() < 1.0
    # The equilibrium forces are those of the equilibrium torques.
    res = contact_dynamics(model, x_eq, np.r_[np.zeros(6), ctrl.u_eq], contacts)
    np.testing.assert_allclose(res.lagrangian, ctrl.forces_eq, atol=1e-8 * model.total_mass)
    assert np.abs(res.a).max() < 1e-8


def test_without_baumgarte_the_full_riccati_equation_fails_but_the_subspace_one_does_not():
    """The contact-violating modes are uncontrollable and marginal without Baumgarte gains (module docstring)."""
    model, x_eq, contacts, _ = setup("solo12", (0.0, 0.0))
    ctrl = setup("solo12", (0.0, 0.0))[3]
    assert ctrl.constrained_spectral_radius < 1.0
    assert ctrl.spectral_radius > 1.0 - 1e-9  # the contact modes: eigenvalue 1, untouched by the torques
    dyn = ContactRobotDynamics(model, DT, contacts)
    with pytest.raises(ValueError, match="stabiliz"):
        lqr(dyn, x_eq, ctrl.u_eq, np.eye(model.state_space.ndx), np.eye(model.n))


def test_push_keeps_the_contacts_and_sets_the_base_velocity():
    model, x_eq, contacts, _ = setup("talos")
    dv = np.array([0.1, -0.3, 0.05])
    x = push(model, x_eq, contacts, dv)
    J = contact_dynamics(model, x_eq, np.zeros(model.nv), contacts).jacobian
    assert np.abs(J @ x.v).max() < 1e-12
    np.testing.assert_allclose(x.H[:3, :3] @ x.v[:3], dv, atol=1e-12)
    with pytest.raises(ValueError, match="fixed base"):
        ur5 = load_robot("ur5")
        push(ur5, ur5.state_space.neutral(), [], dv)


def test_bad_input_raises():
    model, x_eq, contacts, ctrl = setup("talos")
    with pytest.raises(ValueError, match="no static equilibrium"):  # the CoM is between the feet, not above one
        balance_controller(model, x_eq, contacts[:1], sole=SOLES)
    with pytest.raises(ValueError, match="not at rest"):
        balance_controller(model, x_eq, contacts, u_eq=ctrl.u_eq + 1.0)
    with pytest.raises(ValueError, match="at rest"):
        balance_controller(model, State(x_eq.H, x_eq.s, np.ones(model.nv)), contacts, sole=SOLES)
    with pytest.raises(ValueError, match="at least one contact"):
        balance_controller(model, x_eq, [], u_eq=ctrl.u_eq)
    solo, xs, cs, cq = setup("solo12")
    # Nothing weighted but the torques: the minimum-energy stabilizing gain (the Riccati solution is the stabilizing one).
    lazy = balance_controller(solo, xs, cs, Q=np.zeros(solo.state_space.ndx), W=np.zeros(12), u_eq=cq.u_eq)
    assert lazy.constrained_spectral_radius < 1.0
    with pytest.raises(ValueError, match="R must be positive definite"):
        balance_controller(solo, xs, cs, R=np.zeros(solo.n), u_eq=cq.u_eq)
    assert constraint_basis(solo, xs, cs).shape == (36, 12)
