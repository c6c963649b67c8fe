"""Impulse dynamics at touchdown and its derivatives: Pinocchio, geometric finite differences, impact identities.

Cases: a humanoid on both soles (6d) and a quadruped on its four point feet (3d), LOCAL and LOCAL_WORLD_ALIGNED,
inelastic and with restitution. The oracle is Pinocchio's ``impulseDynamics`` / ``computeImpulseDynamicsDerivatives``
with one frame-to-world rigid constraint per contact; its ``ddq_dv`` is ``d(v⁺ - v)/dv`` (ours is ``dv⁺/dv``).
Redundant contacts with damping are checked against the Jacobian form ``impulseDynamics(q, v, J, e, damping)``.
"""

from __future__ import annotations

import numpy as np
import pinocchio as pin
import pytest

from conftest import relative_error
from lietraj.dynamics.contacts.contact_dynamics import Contact
from lietraj.dynamics.algorithms.crba import mass_matrix
from lietraj.dynamics.lie.finite_differences import numerical_jacobian
from lietraj.dynamics.algorithms.rnea_derivatives import rnea_derivatives
from lietraj.dynamics.contacts.impulse_dynamics import (
    _impact,
    _in_references,
    impulse_dynamics,
    impulse_dynamics_derivatives,
    impulse_inputs,
    no_gravity,
)
from lietraj.dynamics.kinematics.kinematics import frame_velocity
from lietraj.dynamics.kinematics.kinematics_derivatives import frame_velocity_derivatives
from lietraj.dynamics.model.pinocchio_interop import to_pinocchio
from lietraj.dynamics.lie.state import State, Trajectory
from lietraj.dynamics.model.workspace import Workspace
from pin_oracle import PROXIMAL_SETTINGS, pin_constraints, pin_model
from test_contact_dynamics import FEET, GAINS, case, robot

REFERENCES = ["local", "local_world_aligned"]
RESTITUTIONS = [0.0, 0.4]
BLOCKS = ("dvplus_dq", "dvplus_dv", "dimpulse_dq", "dimpulse_dv")
FD_TOL, PIN_TOL = 1e-6, 1e-9


def impact_case(name: str, seed: int, reference: str = "local"):
    """(model, x, contacts): a random state, contacts on the feet (without Baumgarte gains)."""
    model, x, _, contacts = case(name, seed, GAINS[0], reference)
    return model, x, contacts


def pinocchio_impulse(name: str, model, x, contacts, restitution: float):
    """Pinocchio's (v+, impulses, {our block name: its derivative}) with one frame-to-world constraint per contact."""
    pm, pd, cmodels, cdatas = pin_constraints(name, contacts)
    q, v = to_pinocchio(model, x)
    settings = pin.ProximalSettings(*PROXIMAL_SETTINGS)
    v_plus = np.array(pin.impulseDynamics(pm, pd, q, v, cmodels, cdatas, restitution, settings))
    impulses = np.array(pd.impulse_c)
    pin.computeImpulseDynamicsDerivatives(pm, pd, cmodels, cdatas, restitution, settings)
    blocks = {"dvplus_dq": np.array(pd.ddq_dq), "dvplus_dv": np.array(pd.ddq_dv) + np.eye(model.nv),
              "dimpulse_dq": np.array(pd.dlambda_dq), "dimpulse_dv": np.array(pd.dlambda_dv)}
    return v_plus, impulses, blocks


def fd_blocks(model, x, contacts, restitution=0.0, damping=0.0):
    """The four blocks by central geometric finite differences of impulse_dynamics."""
    nv = model.nv

    def f(y):
        r = impulse_dynamics(model, y, contacts, restitution, damping)
        return np.concatenate([r.v_plus, r.lagrangian])

    J = numerical_jacobian(f, x)
    return dict(zip(BLOCKS, (J[:nv, :nv], J[:nv, nv:], J[nv:, :nv], J[nv:, nv:])))


@pytest.mark.parametrize("restitution", RESTITUTIONS)
@pytest.mark.parametrize("reference", REFERENCES)
@pytest.mark.parametrize("name", list(FEET))
def test_matches_pinocchio(name, reference, restitution):
    for seed in range(2):
        model, x, contacts = impact_case(name, seed, reference)
        r = impulse_dynamics(model, x, contacts, restitution)
        d = impulse_dynamics_derivatives(model, x, contacts, restitution)
        v_plus, impulses, blocks = pinocchio_impulse(name, model, x, contacts, restitution)
        assert relative_error(r.v_plus, v_plus) <= PIN_TOL
        assert relative_error(r.lagrangian, impulses) <= PIN_TOL
        assert np.array_equal(d.v_plus, r.v_plus) and np.array_equal(d.impulses, r.lagrangian)
        assert np.array_equal(np.concatenate(r.impulses), r.lagrangian)
        for block in BLOCKS:
            assert relative_error(getattr(d, block), blocks[block]) <= PIN_TOL, block


@pytest.mark.parametrize("restitution", RESTITUTIONS)
@pytest.mark.parametrize("reference", REFERENCES)
@pytest.mark.parametrize("name", list(FEET))
def test_matches_finite_differences(name, reference, restitution):
    model, x, contacts = impact_case(name, 2, reference)
    d = impulse_dynamics_derivatives(model, x, contacts, restitution)
    fd = fd_blocks(model, x, contacts, restitution)
    for block in BLOCKS:
        assert relative_error(getattr(d, block), fd[block]) <= FD_TOL, block
    # The configuration matters: without the dM/dq and dJ/dq terms dv+/dq would vanish.
    assert np.abs(d.dvplus_dq).max() > 1e-2


@pytest.mark.parametrize("restitution", [0.0, 0.5, 1.0])
@pytest.mark.parametrize("reference", REFERENCES)
def test_falling_quadruped_lands(reference, restitution):
    """solo12 falling onto its feet: the feet's velocities become -e times what they were, the velocity jump is
    M^-1 J^T Lambda, and the kinetic energy drops (inelastic) or is conserved (e = 1)."""
    model = robot("solo12")
    xr = model.reference_state("standing")
    v = 0.3 * np.random.default_rng(3).standard_normal(model.nv)
    v[:3] = (0.2, -0.1, -1.0)  # falling
    x = State(xr.H, xr.s, v)
    feet = FEET["solo12"][0]
    contacts = [Contact(f, "3d", reference) for f in feet]
    r = impulse_dynamics(model, x, contacts, restitution)
    after = State(x.H, x.s, r.v_plus)
    for f in feet:
        before_f = frame_velocity(model, x, f, "local")[:3]
        assert np.abs(before_f).max() > 0.1
        assert relative_error(frame_velocity(model, after, f, "local")[:3], -restitution * before_f) <= 1e-12
    M = mass_matrix(model, x)
    assert relative_error(M @ (r.v_plus - v), r.jacobian.T @ r.lagrangian) <= 1e-12
    assert relative_error(r.jacobian @ r.v_plus, -restitution * (r.jacobian @ v)) <= 1e-12
    energy, energy_after = 0.5 * v @ M @ v, 0.5 * r.v_plus @ M @ r.v_plus
    if restitution == 1.0:
        assert abs(energy_after - energy) <= 1e-12 * energy
    else:
        assert energy_after < energy
    # Vertical impulses push up on the feet (world z, the ground's normal).
    vertical = r.lagrangian[2::3] if reference == "local_world_aligned" else None
    if vertical is not None:
        assert (vertical > 0).all()


def test_gains_and_targets_play_no_part():
    model, x, contacts = impact_case("talos", 0)
    with_gains = case("talos", 0, GAINS[1])[3]
    a = impulse_dynamics_derivatives(model, x, contacts, 0.3)
    b = impulse_dynamics_derivatives(model, x, with_gains, 0.3)
    for block in ("v_plus", "impulses") + BLOCKS:
        assert np.array_equal(getattr(a, block), getattr(b, block)), block


@pytest.mark.parametrize("name", list(FEET))
def test_trajectory_equals_states(name):
    model, _, contacts = impact_case(name, 0, "local_world_aligned")
    X = model.state_space.random_trajectory(3, np.random.default_rng(5))
    R = impulse_dynamics(model, X, contacts, 0.2)
    D = impulse_dynamics_derivatives(model, X, contacts, 0.2)
    nc = sum(c.dim for c in contacts)
    assert R.v_plus.shape == (3, model.nv) and R.lagrangian.shape == (3, nc) and R.jacobian.shape == (3, nc, model.nv)
    assert D.dimpulse_dq.shape == (3, nc, model.nv) and D.dvplus_dv.shape == (3, model.nv, model.nv)
    for k in range(3):
        r = impulse_dynamics(model, X[k], contacts, 0.2)
        d = impulse_dynamics_derivatives(model, X[k], contacts, 0.2)
        assert relative_error(R.v_plus[k], r.v_plus) <= 1e-12 and relative_error(R.lagrangian[k], r.lagrangian) <= 1e-12
        assert all(relative_error(F[k], f) <= 1e-12 for F, f in zip(R.impulses, r.impulses))
        for block in BLOCKS:
            assert relative_error(getattr(D, block)[k], getattr(d, block)) <= 1e-12, block


def test_no_contacts_keeps_the_velocity():
    model, x, _ = impact_case("solo12", 0)
    r = impulse_dynamics(model, x, [])
    d = impulse_dynamics_derivatives(model, x, [])
    assert np.array_equal(r.v_plus, x.v) and r.lagrangian.shape == (0,) and r.jacobian.shape == (0, model.nv)
    assert np.array_equal(d.dvplus_dv, np.eye(model.nv)) and not d.dvplus_dq.any()
    assert d.dimpulse_dq.shape == (0, model.nv)


def test_damped_redundant_contacts():
    """The same sole twice: rank deficient. Without damping a clear error; with damping Pinocchio's damped
    impulseDynamics on the same J, and derivatives that match finite differences."""
    model, x, contacts = impact_case("talos", 1)
    contacts = contacts + [contacts[0]]
    with pytest.raises(ValueError, match="rank deficient"):
        impulse_dynamics(model, x, contacts)
    damping, e = 1e-4, 0.3
    r = impulse_dynamics(model, x, contacts, e, damping)
    pm = pin_model("talos")
    pd = pm.createData()
    q, v = to_pinocchio(model, x)
    v_plus = np.array(pin.impulseDynamics(pm, pd, q, v, r.jacobian, e, damping))
    assert relative_error(r.v_plus, v_plus) <= PIN_TOL
    assert relative_error(r.lagrangian, np.array(pd.impulse_c)) <= PIN_TOL
    d = impulse_dynamics_derivatives(model, x, contacts, e, damping)
    fd = fd_blocks(model, x, contacts, e, damping)
    for block in BLOCKS:
        assert relative_error(getattr(d, block), fd[block]) <= FD_TOL, block


def test_bad_inputs_raise():
    model, x, contacts = impact_case("solo12", 0)
    for f in (impulse_dynamics, impulse_dynamics_derivatives):
        with pytest.raises(ValueError, match="unknown contact frame"):
            f(model, x, [Contact("nope", "3d")])
        with pytest.raises(TypeError, match="Contact objects"):
            f(model, x, ["FL_FOOT"])
        with pytest.raises(ValueError, match="restitution"):
            f(model, x, contacts, 1.5)
        with pytest.raises(ValueError, match="damping"):
            f(model, x, contacts, 0.0, -1.0)
        with pytest.raises(ValueError, match="NaN"):
            f(model, State(x.H, x.s, np.full(model.nv, np.nan)), contacts)
        with pytest.raises(ValueError, match="shape"):
            f(model, State(x.H, x.s, x.v[:-1]), contacts)
        with pytest.raises(TypeError, match="State or a Trajectory"):
            f(model, (x.H, x.s, x.v), contacts)
        with pytest.raises(ValueError, match="rank deficient"):
            f(model, x, contacts + [contacts[0]])


def _hat(w):
    """Skew matrices (..., 3, 3) of vectors (..., 3)."""
    H = np.zeros(w.shape[:-1] + (3, 3))
    H[..., 0, 1], H[..., 0, 2], H[..., 1, 2] = -w[..., 2], w[..., 1], -w[..., 0]
    H[..., 1, 0], H[..., 2, 0], H[..., 2, 1] = w[..., 2], -w[..., 1], w[..., 0]
    return H


def composed_derivatives(model, x, contacts, restitution, damping):
    """The four blocks composed from the public building blocks with numpy (module docstring's formulas, as
    impulse_dynamics_derivatives computed them before its compiled pass): IDSVA of the gravity-free model for dF/dq,
    the frame velocity derivatives at (q, v+) and (q, v) for dC/dq, then the dense Schur solve."""
    what = "composed_derivatives"
    x, contacts, restitution, damping, ids = impulse_inputs(model, x, contacts, restitution, damping, what)
    workspace = Workspace(model)
    s = _impact(model, x, contacts, restitution, damping, what, workspace, ids)
    nv, lead = model.nv, x.v.shape[:-1]
    fext = np.zeros(lead + (model.nb, 6))
    o = 0
    for c, k in zip(contacts, ids):
        fr = model.frames[k]
        f = s.lambda_c[..., o:o + 3]
        fext[..., fr.body, :3] += f @ fr.R.T
        fext[..., fr.body, 3:] += f @ (_hat(fr.p) @ fr.R).T
        if c.dim == 6:
            fext[..., fr.body, 3:] += s.lambda_c[..., o + 3:o + 6] @ fr.R.T
        o += c.dim
    free, free_workspace = no_gravity(model, workspace)
    kind = State if type(x) is State else Trajectory
    dF_dq = rnea_derivatives(free, kind(x.H, x.s, np.zeros_like(x.v)), s.v_plus - x.v, fext, "local",
                             workspace=free_workspace).dtau_dq
    nc = s.J.shape[-2]
    dC_dq, J_ang, o = np.empty(lead + (nc, nv)), [], 0
    for c, k in zip(contacts, ids):
        dv_dq, J = frame_velocity_derivatives(model, kind(x.H, x.s, s.v_plus), k, "local", workspace)
        dC_dq[..., o:o + c.dim, :] = dv_dq[..., :c.dim, :]
        dC_dq[..., o:o + c.dim, :] += restitution * frame_velocity_derivatives(model, x, k, "local",
                                                                               workspace)[0][..., :c.dim, :]
        J_ang.append(J[..., 3:, :])
        o += c.dim
    rhs = np.concatenate([np.swapaxes(s.MinvJt, -1, -2) @ dF_dq - dC_dq, -(1.0 + restitution) * s.J], axis=-1)
    dlambda = np.linalg.solve(s.S, rhs)
    dv = s.MinvJt @ dlambda
    dv[..., :nv] -= s.Minv @ dF_dq
    dv[..., nv:] += np.eye(nv)
    o = 0
    for c, P, Ja in zip(contacts, s.poses, J_ang):
        if P is not None:
            for r in range(o, o + c.dim, 3):
                dlambda[..., r:r + 3, :nv] -= _hat(s.lambda_c[..., r:r + 3]) @ Ja
        o += c.dim
    dlambda = _in_references(contacts, s.poses, dlambda)
    return dict(zip(BLOCKS, (dv[..., :nv], dv[..., nv:], dlambda[..., :nv], dlambda[..., nv:])))


@pytest.mark.parametrize("damping", [0.0, 1e-3])
@pytest.mark.parametrize("restitution", [0.0, 0.5])
@pytest.mark.parametrize("reference", REFERENCES)
@pytest.mark.parametrize("name", list(FEET))
def test_compiled_equals_composition(name, reference, restitution, damping):
    """The compiled pass against the same formulas composed from the building blocks, on a trajectory (one
    compiled call) and on each of its knots as a State."""
    model, _, contacts = impact_case(name, 0, reference)
    X = model.state_space.random_trajectory(4, np.random.default_rng(11))
    D = impulse_dynamics_derivatives(model, X, contacts, restitution, damping)
    oracle = composed_derivatives(model, X, contacts, restitution, damping)
    for block in BLOCKS:
        assert relative_error(getattr(D, block), oracle[block]) <= 1e-12, block
    for k in (0, 3):
        d = impulse_dynamics_derivatives(model, X[k], contacts, restitution, damping)
        one = composed_derivatives(model, X[k], contacts, restitution, damping)
        for block in BLOCKS:
            assert relative_error(getattr(d, block), one[block]) <= 1e-12, block
            assert relative_error(getattr(d, block), getattr(D, block)[k]) <= 1e-12, block


def test_compiled_equals_composition_fixed_base():
    """An arm's tool hitting a wall: no base columns (the kernel's closed-form base columns are skipped)."""
    model = robot("ur5")
    X = model.state_space.random_trajectory(3, np.random.default_rng(12))
    for contacts in ([Contact("tool0", "3d", "local_world_aligned")], [Contact("tool0", "6d", "local")]):
        D = impulse_dynamics_derivatives(model, X, contacts, 0.5)
        oracle = composed_derivatives(model, X, contacts, 0.5, 0.0)
        for block in BLOCKS:
            assert relative_error(getattr(D, block), oracle[block]) <= 1e-12, block


def test_trajectory_errors_name_the_knot():
    model, _, contacts = impact_case("solo12", 0)
    X = model.state_space.random_trajectory(3, np.random.default_rng(13))
    X.v[2, 4] = np.nan
    with pytest.raises(ValueError, match=r"at knot 2: .*x\.v\[2, 4\] = nan"):
        impulse_dynamics_derivatives(model, X, contacts)
    X.v[2, 4] = 0.0
    with pytest.raises(ValueError, match="at knot 0: .*rank deficient"):
        impulse_dynamics_derivatives(model, X, contacts + [contacts[0]])
