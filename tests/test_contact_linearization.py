"""Geometric linearization of the contact-constrained dynamics against finite differences on the group.

``A = D lambda o DL - ad_lambda`` and ``B = D_u lambda`` (seed 000 eqs. 12-13) with the field
``lambda = (nu, sdot, contact_dynamics(x, u).a)`` differentiated by central geometric finite differences: Talos on
both soles (6d), solo12 on its four point feet (3d), each also with the base pitched at +-90 degrees, and a fixed-base
arm with its tool held at a point. Baumgarte gains with targets off the current poses, so every term is exercised.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
import pytest

from conftest import relative_error
from lietraj.dynamics import se3
from lietraj.dynamics.contacts.contact_dynamics import Contact, contact_dynamics
from lietraj.dynamics.contacts.contact_linearization import contact_linearization
from lietraj.dynamics.lie.finite_differences import numerical_jacobian
from lietraj.dynamics.kinematics.kinematics import frame_placement
from lietraj.dynamics.algorithms.linearization import linearize
from lietraj.dynamics.model.robots import load_robot
from lietraj.dynamics.lie.state import State, Trajectory

FEET = {
    "talos": (("left_sole_link", "right_sole_link"), "6d"),
    "solo12": (("FL_FOOT", "FR_FOOT", "HL_FOOT", "HR_FOOT"), "3d"),
    "ur5": (("tool0",), "3d"),
}
FD_TOL = 1e-6


@lru_cache(maxsize=None)
def robot(name: str):
    return load_robot(name)


def pitched(x: State, angle: float) -> State:
    """x with the base turned to pitch ``angle`` about the world y axis (Euler angles are singular at +-90 deg)."""
    H = x.H.copy()
    H[:3, :3] = se3.exp(np.array([0, 0, 0, 0, angle, 0]))[:3, :3]
    return State(H, x.s, x.v)


def case(name: str, seed: int, pitch: float | None = None, reference: str = "local"):
    """(model, x, u, contacts): a random state and torque, contacts with Baumgarte gains and targets off the poses."""
    model = robot(name)
    rng = np.random.default_rng(seed)
    x = model.state_space.random(rng, scale=0.5)
    if pitch is not None:
        x = pitched(x, pitch)
    frames, kind = FEET[name]
    contacts = [Contact(f, kind, reference, (30.0, 8.0), frame_placement(model, x, f) @ se3.exp(0.05 * rng.normal(size=6)))
                for f in frames]
    return model, x, rng.normal(size=model.n), contacts


def field(model, x, u, contacts):
    """The left-trivialized field lambda = (v, a) of the contact-constrained dynamics."""
    tau = np.concatenate([np.zeros(6), u]) if model.floating_base else u
    return np.concatenate([x.v, contact_dynamics(model, x, tau, contacts).a])


def forces(model, x, u, contacts):
    tau = np.concatenate([np.zeros(6), u]) if model.floating_base else u
    return contact_dynamics(model, x, tau, contacts).lagrangian


CASES = [("talos", None, "local"), ("talos", np.pi / 2, "local_world_aligned"), ("talos", -np.pi / 2, "local"),
         ("solo12", None, "local_world_aligned"), ("solo12", np.pi / 2, "local"), ("solo12", -np.pi / 2, "local"),
         ("ur5", None, "local")]


@pytest.mark.parametrize("name, pitch, reference", CASES)
def test_matches_geometric_finite_differences(name, pitch, reference):
    model, x, u, contacts = case(name, 3, pitch, reference)
    lin = contact_linearization(model, x, u, contacts)
    J_x, J_u = numerical_jacobian(lambda y, w: field(model, y, w, contacts), x, u)
    if model.floating_base:
        J_x[:6, :6] -= se3.ad(x.v[:6])  # eq. (12): - ad_lambda on the SE(3) rows
    assert relative_error(lin.A, J_x) < FD_TOL
    assert relative_error(lin.B, J_u) < FD_TOL
    F_x, F_u = numerical_jacobian(lambda y, w: forces(model, y, w, contacts), x, u)
    assert relative_error(lin.F_z, F_x) < FD_TOL
    assert relative_error(lin.F_w, F_u) < FD_TOL
    assert relative_error(lin.a, field(model, x, u, contacts)[model.nv:]) < 1e-12
    assert relative_error(lin.forces, forces(model, x, u, contacts)) < 1e-12
    # The contacts matter: the unconstrained linearization is far from this one.
    assert relative_error(linearize(model, x, u).A, lin.A) > 1e-2


@pytest.mark.parametrize("name", ["talos", "solo12"])
def test_contact_structure(name):
    """Torques cannot move the contacts (J B = 0), and the error dynamics match the group ODE in any direction."""
    model, x, u, contacts = case(name, 5)
    lin, nv = contact_linearization(model, x, u, contacts), model.nv
    J = contact_dynamics(model, x, np.zeros(nv), contacts).jacobian
    assert np.abs(J @ lin.B[nv:]).max() < 1e-9 * np.abs(lin.B).max()
    np.testing.assert_array_equal(lin.A[6:nv, nv:], np.eye(nv)[6:])
    assert relative_error(lin.A[:6, :6], -se3.ad(x.v[:6])) < 1e-15


def test_no_contacts_is_linearize_and_trajectory_is_per_knot():
    model = robot("solo12")
    rng = np.random.default_rng(7)
    x, u = model.state_space.random(rng), rng.normal(size=model.n)
    free, ref = contact_linearization(model, x, u, []), linearize(model, x, u)
    assert relative_error(free.A, ref.A) < 1e-9 and relative_error(free.B, ref.B) < 1e-9
    assert free.forces.shape == (0,) and free.F_z.shape == (0, 2 * model.nv)
    _, _, _, contacts = case("solo12", 1)
    xs = [model.state_space.random(rng, scale=0.5) for _ in range(3)]
    U = rng.normal(size=(3, model.n))
    L = contact_linearization(model, Trajectory.from_states(xs), U, contacts)
    assert L.A.shape == (3, 36, 36) and L.B.shape == (3, 36, 12) and L.F_z.shape == (3, 12, 36)
    for k in range(3):
        lk = contact_linearization(model, xs[k], U[k], contacts)
        for f in ("A", "B", "a", "forces", "F_z", "F_w"):
            assert relative_error(getattr(L, f)[k], getattr(lk, f)) < 1e-13, f


def test_bad_input_raises():
    model, x, u, contacts = case("solo12", 0)
    with pytest.raises(ValueError, match="joint torques"):
        contact_linearization(model, x, np.zeros(model.nv), contacts)
    with pytest.raises(ValueError, match="u must have shape"):
        contact_linearization(model, x, np.zeros((2, model.n)), contacts)
    with pytest.raises(ValueError, match="NaN"):
        contact_linearization(model, x, np.full(model.n, np.nan), contacts)
    with pytest.raises(ValueError, match="rank deficient"):
        contact_linearization(model, x, u, contacts + contacts[:1])
