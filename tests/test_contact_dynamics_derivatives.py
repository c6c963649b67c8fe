"""Derivatives of the contact-constrained forward dynamics: geometric finite differences and Pinocchio.

Cases: a humanoid on both soles (6d) and a quadruped on its four point feet (3d), with and without Baumgarte
gains, LOCAL and LOCAL_WORLD_ALIGNED, targets slightly off the current foot poses (so the position term acts);
a fixed-base arm with its tool held (3d). Trajectories (one compiled call) must equal the knot-wise results
exactly, also when reusing ``out`` and passing the solved ``dynamics``.
The oracle is Pinocchio's ``computeConstraintDynamicsDerivatives`` after ``constraintDynamics`` with one
frame-to-world rigid constraint per contact. For 6d LOCAL_WORLD_ALIGNED contacts with Kp != 0 Pinocchio 4.0.0's
q-derivatives disagree with its own ``constraintDynamics`` (by ~3e-2 relative on talos) while ours agree with
finite differences; there only its v- and tau-blocks are compared.
"""

from __future__ import annotations


import numpy as np
import pinocchio as pin
import pytest

from conftest import relative_error
from lietraj.dynamics import se3
from lietraj.dynamics.algorithms.aba_derivatives import aba_derivatives
from lietraj.dynamics.contacts.contact_dynamics import Contact, contact_dynamics
from lietraj.dynamics.contacts.contact_dynamics_derivatives import contact_dynamics_derivatives
from lietraj.dynamics.lie.finite_differences import numerical_jacobian
from lietraj.dynamics.kinematics.kinematics import frame_placement
from test_contact_dynamics import FEET, GAINS, case, pinocchio_constraint_dynamics, robot

REFERENCES = ["local", "local_world_aligned"]
BLOCKS = ("da_dq", "da_dv", "da_dtau", "df_dq", "df_dv", "df_dtau")
PIN_BLOCKS = ("ddq_dq", "ddq_dv", "ddq_dtau", "dlambda_dq", "dlambda_dv", "dlambda_dtau")
FD_TOL, PIN_TOL = 1e-6, 1e-9


def fd_blocks(model, x, tau, contacts, damping=0.0):
    """The six blocks by central geometric finite differences of contact_dynamics."""
    nv = model.nv
    Ja, Ja_tau = numerical_jacobian(lambda xx, uu: contact_dynamics(model, xx, uu, contacts, damping).a, x, tau)
    Jf, Jf_tau = numerical_jacobian(lambda xx, uu: contact_dynamics(model, xx, uu, contacts, damping).lagrangian,
                                    x, tau)
    return dict(zip(BLOCKS, (Ja[:, :nv], Ja[:, nv:], Ja_tau, Jf[:, :nv], Jf[:, nv:], Jf_tau)))


def pinocchio_blocks(name, model, x, tau, contacts):
    pm, pd, cmodels, cdatas, _ = pinocchio_constraint_dynamics(name, model, x, tau, contacts)
    pin.computeConstraintDynamicsDerivatives(pm, pd, cmodels, cdatas)
    return {ours: np.array(getattr(pd, theirs)) for ours, theirs in zip(BLOCKS, PIN_BLOCKS)}


@pytest.mark.parametrize("reference", REFERENCES)
@pytest.mark.parametrize("gains", GAINS)
@pytest.mark.parametrize("name", list(FEET))
def test_matches_finite_differences(name, gains, reference):
    model, x, tau, contacts = case(name, 0, gains, reference)
    d = contact_dynamics_derivatives(model, x, tau, contacts)
    r = contact_dynamics(model, x, tau, contacts)
    assert np.array_equal(d.a, r.a) and np.array_equal(d.forces, r.lagrangian)
    fd = fd_blocks(model, x, tau, contacts)
    for block in BLOCKS:
        assert relative_error(getattr(d, block), fd[block]) <= FD_TOL, block


@pytest.mark.parametrize("reference", REFERENCES)
@pytest.mark.parametrize("gains", GAINS)
@pytest.mark.parametrize("name", list(FEET))
def test_matches_pinocchio(name, gains, reference):
    pinocchio_q_wrong = FEET[name][1] == "6d" and reference == "local_world_aligned" and gains[0] != 0.0
    for seed in range(2):
        model, x, tau, contacts = case(name, seed, gains, reference)
        d = contact_dynamics_derivatives(model, x, tau, contacts)
        p = pinocchio_blocks(name, model, x, tau, contacts)
        for block in BLOCKS:
            if pinocchio_q_wrong and block.endswith("_dq"):
                continue
            assert relative_error(getattr(d, block), p[block]) <= PIN_TOL, block


def test_damped_redundant_contacts_match_finite_differences():
    """The same sole twice with damping: the damped KKT system (J a + gamma + damping lambda = 0)."""
    model, x, tau, contacts = case("talos", 1, GAINS[1])
    contacts = contacts + [contacts[0]]
    d = contact_dynamics_derivatives(model, x, tau, contacts, damping=1e-3)
    fd = fd_blocks(model, x, tau, contacts, damping=1e-3)
    for block in BLOCKS:
        assert relative_error(getattr(d, block), fd[block]) <= FD_TOL, block


def test_trajectory_equals_states():
    model, _, _, contacts = case("solo12", 0, GAINS[1], "local_world_aligned")
    X = model.state_space.random_trajectory(3, np.random.default_rng(5))
    TAU = np.random.default_rng(6).standard_normal((3, model.nv))
    D = contact_dynamics_derivatives(model, X, TAU, contacts)
    assert D.df_dq.shape == (3, 12, model.nv)
    for k in range(3):
        d = contact_dynamics_derivatives(model, X[k], TAU[k], contacts)
        for block in ("a", "forces") + BLOCKS:
            assert np.array_equal(getattr(D, block)[k], getattr(d, block)), block


def test_no_contacts_is_aba_derivatives():
    model, x, tau, _ = case("solo12", 0, GAINS[0])
    d = contact_dynamics_derivatives(model, x, tau, [])
    e = aba_derivatives(model, x, tau)
    for ours, theirs in (("da_dq", "da_dq"), ("da_dv", "da_dv"), ("da_dtau", "da_dtau")):
        assert relative_error(getattr(d, ours), getattr(e, theirs)) <= 1e-9
    assert d.df_dq.shape == (0, model.nv)


def test_bad_inputs_raise():
    model, x, tau, contacts = case("solo12", 0, GAINS[0])
    with pytest.raises(ValueError, match="unknown contact frame"):
        contact_dynamics_derivatives(model, x, tau, [Contact("nope", "3d")])
    with pytest.raises(ValueError, match="NaN"):
        contact_dynamics_derivatives(model, x, np.full(model.nv, np.nan), contacts)
    with pytest.raises(ValueError, match="shape"):
        contact_dynamics_derivatives(model, x, tau[:-1], contacts)
    talos, xt, taut, feet = case("talos", 0, GAINS[0])
    with pytest.raises(ValueError, match="rank deficient"):
        contact_dynamics_derivatives(talos, xt, taut, feet + [feet[0]])


@pytest.mark.parametrize("reference", REFERENCES)
def test_fixed_base_matches_finite_differences_and_pinocchio(reference):
    """An arm holding its tool against the world (3d, with gains and an offset target): the fixed-base path."""
    model = robot("ur5")
    rng = np.random.default_rng(11)
    x = model.state_space.random(rng)
    tau = rng.standard_normal(model.nv)
    contacts = [Contact("tool0", "3d", reference, GAINS[1], frame_placement(model, x, "tool0")
                        @ se3.exp(0.05 * rng.standard_normal(6)))]
    d = contact_dynamics_derivatives(model, x, tau, contacts)
    fd = fd_blocks(model, x, tau, contacts)
    p = pinocchio_blocks("ur5", model, x, tau, contacts)
    for block in BLOCKS:
        assert relative_error(getattr(d, block), fd[block]) <= FD_TOL, block
        assert relative_error(getattr(d, block), p[block]) <= PIN_TOL, block


def test_trajectory_out_and_dynamics_reuse():
    """Talos on both soles (6d, world-aligned, position term): the trajectory call equals the knot-wise calls,
    also when writing into a previous result (``out``) and given the solved dynamics (``dynamics``)."""
    model, _, _, contacts = case("talos", 1, GAINS[1], "local_world_aligned")
    X = model.state_space.random_trajectory(4, np.random.default_rng(7))
    TAU = np.random.default_rng(8).standard_normal((4, model.nv))
    D = contact_dynamics_derivatives(model, X, TAU, contacts)
    prev = contact_dynamics_derivatives(model, model.state_space.random_trajectory(4, np.random.default_rng(9)),
                                        TAU[::-1], contacts)
    again = contact_dynamics_derivatives(model, X, TAU, contacts, out=prev,
                                         dynamics=contact_dynamics(model, X, TAU, contacts))
    assert again is prev
    for k in range(4):
        d = contact_dynamics_derivatives(model, X[k], TAU[k], contacts)
        for block in ("a", "forces") + BLOCKS:
            assert np.array_equal(getattr(D, block)[k], getattr(d, block)), block
            assert np.array_equal(getattr(again, block)[k], getattr(d, block)), block
    single = contact_dynamics_derivatives(model, X[0], TAU[0], contacts)
    assert contact_dynamics_derivatives(model, X[0], None, contacts, out=single,
                                        dynamics=contact_dynamics(model, X[0], TAU[0], contacts)) is single
    assert np.array_equal(single.df_dq, D.df_dq[0])


def test_bad_out_and_dynamics_raise():
    model, x, tau, contacts = case("solo12", 0, GAINS[0])
    d = contact_dynamics_derivatives(model, x, tau, contacts)
    with pytest.raises(ValueError, match="out.forces"):
        contact_dynamics_derivatives(model, x, tau, contacts[:2], out=d)
    with pytest.raises(ValueError, match="dynamics must hold"):
        contact_dynamics_derivatives(model, x, tau, contacts[:2], dynamics=contact_dynamics(model, x, tau, contacts))
    bad = x.copy()
    bad.v[0] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        contact_dynamics_derivatives(model, bad, tau, contacts, dynamics=contact_dynamics(model, x, tau, contacts))
