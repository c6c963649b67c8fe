"""Hybrid-dynamics derivatives (seed 002 Table 7): geometric finite differences, Pinocchio's ABA derivatives (all
accelerations unknown) and RNEA derivatives (all known)."""

from __future__ import annotations

import numpy as np
import pinocchio as pin
import pytest

import lietraj
from conftest import ORACLE_ROBOTS, relative_error
from lietraj.dynamics import se3
from lietraj.dynamics.model.builder import random_tree
from lietraj.dynamics.algorithms.crba import mass_matrix
from lietraj.dynamics.lie.finite_differences import numerical_jacobian
from lietraj.dynamics.algorithms.hybrid_dynamics import hybrid_dynamics
from lietraj.dynamics.algorithms.hybrid_dynamics_derivatives import HybridDerivatives, hybrid_dynamics_derivatives
from lietraj.dynamics.model.pinocchio_interop import to_pinocchio
from pin_oracle import pin_model, pin_model_from

FD_MODELS = ["talos", "solo12", "ur5", "panda", "tree_fixed", "tree_floating"]


def load(name):
    if name.startswith("tree_"):
        return random_tree(12, 5, floating_base=name == "tree_floating", prismatic_fraction=0.5)
    return lietraj.load_robot(name)


def masks(model, rng):
    """Random masks; for a floating base, one with the base acceleration given and one with its wrench given."""
    out = []
    for base_known in ([True, False] if model.floating_base else [None, None]):
        known = rng.random(model.nv) < 0.5
        if model.floating_base:
            known[:6] = base_known
        out.append(known)
    return out


def pitched(x, angle):
    """x with the base rotated to pitch ``angle`` about the world y axis."""
    H = x.H.copy()
    H[:3, :3] = se3.exp(np.array([0.0, 0.0, 0.0, 0.0, angle, 0.0]))[:3, :3]
    return lietraj.State(H, x.s, x.v)


def check_against_finite_differences(model, x, known, u, fext) -> float:
    """Largest relative error of the six Jacobians against central geometric differences of hybrid_dynamics."""
    nv = model.nv

    def f(xx, uu):
        r = hybrid_dynamics(model, xx, known, uu, uu, fext)
        return np.concatenate([r.a, r.tau])

    J_x, J_u = numerical_jacobian(f, x, u, eps=1e-5)  # |a| reaches 1e5 on solo12: 1e-6 loses digits to rounding
    d = hybrid_dynamics_derivatives(model, x, known, u, u, fext)
    ref = hybrid_dynamics(model, x, known, u, u, fext)
    assert relative_error(d.a, ref.a) < 1e-12 and relative_error(d.tau, ref.tau) < 1e-12
    pairs = [(d.da_dq, J_x[:nv, :nv]), (d.da_dv, J_x[:nv, nv:]), (d.dtau_dq, J_x[nv:, :nv]),
             (d.dtau_dv, J_x[nv:, nv:]), (d.da_du, J_u[:nv]), (d.dtau_du, J_u[nv:])]
    return max(relative_error(ana, num) for ana, num in pairs)


@pytest.mark.parametrize("name", FD_MODELS)
def test_matches_finite_differences(name, rng):
    model = load(name)
    worst = 0.0
    for known in masks(model, rng):
        for with_fext in (False, True):
            x, u = model.state_space.random(rng), rng.normal(size=model.nv)
            fext = 10.0 * rng.normal(size=(model.nb, 6)) if with_fext else None
            worst = max(worst, check_against_finite_differences(model, x, known, u, fext))
    assert worst < 1e-6


@pytest.mark.parametrize("name", ["talos", "solo12", "tree_floating"])
def test_base_pitched_to_ninety_degrees_matches_finite_differences(name, rng):
    """No Euler angles anywhere: at pitch ±90° the Jacobians in the body-twist chart are as good as elsewhere."""
    model = load(name)
    for known in masks(model, rng):
        for angle in (np.pi / 2, -np.pi / 2):
            x = pitched(model.state_space.random(rng), angle)
            u, fext = rng.normal(size=model.nv), rng.normal(size=(model.nb, 6))
            assert check_against_finite_differences(model, x, known, u, fext) < 1e-6


@pytest.mark.parametrize("name", ["solo12", "panda", "tree_floating"])
def test_zero_and_identity_blocks(name, rng):
    """Given entries: their rows of da_du (known) or dtau_du (unknown) are identity rows, their q, v rows zero."""
    model = load(name)
    for known in masks(model, rng):
        x, u = model.state_space.random(rng), rng.normal(size=model.nv)
        d = hybrid_dynamics_derivatives(model, x, known, u, u)
        eye = np.eye(model.nv)
        np.testing.assert_array_equal(d.da_du[known], eye[known])
        np.testing.assert_array_equal(d.dtau_du[~known], eye[~known])
        for J in (d.da_dq, d.da_dv):
            np.testing.assert_array_equal(J[known], 0.0)
        for J in (d.dtau_dq, d.dtau_dv):
            np.testing.assert_array_equal(J[~known], 0.0)


def pin_derivatives(pm, function, q, v, w, fext):
    pd = pm.createData()
    args = (pm, pd, q, v, w) if fext is None else (pm, pd, q, v, w, [pin.Force.Zero()] + [pin.Force(f) for f in fext])
    dq, dv, dw = (np.array(t) for t in function(*args))
    return dq, dv, np.triu(dw) + np.triu(dw, 1).T  # M and M^-1 come as upper triangles


def forward_tolerance(pm, q) -> float:
    """1e-9, widened in proportion to cond(M) beyond 1e6: icub's tiny links give cond(M) ~ 1e9 at random states,
    where Pinocchio's M^-1 itself differs from numpy's inverse of M by ~1e-7 relative."""
    M = pin.crba(pm, pm.createData(), q)
    return 1e-9 * max(1.0, np.linalg.cond(np.triu(M) + np.triu(M, 1).T) / 1e6)


def check_against_pinocchio(model, pm, x, tau, a, fext, tol_forward):
    q, v = to_pinocchio(model, x)
    nv = model.nv
    d = hybrid_dynamics_derivatives(model, x, np.zeros(nv, bool), a, tau, fext)
    dq, dv, Minv = pin_derivatives(pm, pin.computeABADerivatives, q, v, tau, fext)
    tol = tol_forward(pm, q)
    assert relative_error(d.da_dq, dq) < tol
    assert relative_error(d.da_dv, dv) < tol
    assert relative_error(d.da_du, Minv) < tol
    d = hybrid_dynamics_derivatives(model, x, np.ones(nv, bool), a, tau, fext)
    dq, dv, M = pin_derivatives(pm, pin.computeRNEADerivatives, q, v, a, fext)
    assert relative_error(d.dtau_dq, dq) < 1e-9
    assert relative_error(d.dtau_dv, dv) < 1e-9
    assert relative_error(d.dtau_du, M) < 1e-9


@pytest.mark.parametrize("name", ORACLE_ROBOTS)
def test_extreme_masks_match_pinocchio(name, rng):
    """All unknown: computeABADerivatives (da/du = M^-1); all known: computeRNEADerivatives (dtau/du = M)."""
    model, pm = lietraj.load_robot(name), pin_model(name)
    for k in range(4):
        x, tau, a = model.state_space.random(rng), rng.normal(size=model.nv), rng.normal(size=model.nv)
        fext = rng.normal(size=(model.nb, 6)) if k % 2 else None
        check_against_pinocchio(model, pm, x, tau, a, fext, forward_tolerance)


@pytest.mark.parametrize("name", ["icub", "talos"])
def test_forward_derivatives_are_minus_inverse_mass_matrix_times_inverse_derivatives(name, rng):
    """d FD/d(q, v) = -M^-1 d ID/d(q, v) at a = FD(tau), with both sides from this module and M^-1 from numpy:
    on icub this holds far tighter than the cond(M)-widened tolerance against Pinocchio above."""
    model = lietraj.load_robot(name)
    nv = model.nv
    for _ in range(4):
        x, tau = model.state_space.random(rng), rng.normal(size=nv)
        fd = hybrid_dynamics_derivatives(model, x, np.zeros(nv, bool), tau, tau)
        inv = hybrid_dynamics_derivatives(model, x, np.ones(nv, bool), fd.a, tau)
        M = mass_matrix(model, x)
        tol = 1e-9 * max(1.0, np.linalg.cond(M) / 1e8)
        assert relative_error(fd.da_dq, -np.linalg.solve(M, inv.dtau_dq)) < tol
        assert relative_error(fd.da_dv, -np.linalg.solve(M, inv.dtau_dv)) < tol
        assert relative_error(fd.da_du, np.linalg.inv(M)) < tol
        assert relative_error(inv.dtau_du, M) < 1e-12


@pytest.mark.parametrize("floating", [False, True])
def test_extreme_masks_on_random_trees_match_pinocchio(floating, rng):
    for seed in range(3):
        model = random_tree(10, seed, floating_base=floating, prismatic_fraction=0.4)
        x, tau, a = model.state_space.random(rng), rng.normal(size=model.nv), rng.normal(size=model.nv)
        check_against_pinocchio(model, pin_model_from(model), x, tau, a, rng.normal(size=(model.nb, 6)),
                                lambda pm, q: 1e-9)


@pytest.mark.parametrize("name", ["talos", "ur5"])
@pytest.mark.parametrize("with_fext", [False, True])
def test_batch_equals_per_state(name, with_fext, rng):
    model = lietraj.load_robot(name)
    N = 4
    X = model.state_space.random_trajectory(N, rng)
    A, TAU = rng.normal(size=(N, model.nv)), rng.normal(size=(N, model.nv))
    F = rng.normal(size=(N, model.nb, 6)) if with_fext else None
    known = masks(model, rng)[1]
    res = hybrid_dynamics_derivatives(model, X, known, A, TAU, F)
    assert isinstance(res, HybridDerivatives)
    fields = ("a", "tau", "da_dq", "da_dv", "da_du", "dtau_dq", "dtau_dv", "dtau_du")
    for k in range(N):
        one = hybrid_dynamics_derivatives(model, X[k], known, A[k], TAU[k], None if F is None else F[k])
        for field in fields:
            np.testing.assert_array_equal(getattr(res, field)[k], getattr(one, field))
    assert res.da_dq.shape == (N, model.nv, model.nv) and res.a.shape == (N, model.nv)


def test_bad_inputs_raise_value_error():
    model = lietraj.load_robot("solo12")
    x = model.state_space.random(0)
    nv, z = model.nv, np.zeros(model.nv)
    known = np.zeros(nv, bool)
    with pytest.raises(ValueError, match="known must have shape"):
        hybrid_dynamics_derivatives(model, x, known[:-1], z, z)
    with pytest.raises(ValueError, match="boolean mask"):
        hybrid_dynamics_derivatives(model, x, np.zeros(nv), z, z)
    mixed = known.copy()
    mixed[2] = True
    with pytest.raises(ValueError, match="six base entries"):
        hybrid_dynamics_derivatives(model, x, mixed, z, z)
    with pytest.raises(ValueError, match="torques must have shape"):
        hybrid_dynamics_derivatives(model, x, known, z, z[:-1])
    bad = z.copy()
    bad[8] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        hybrid_dynamics_derivatives(model, x, known, z, bad)
    with pytest.raises(ValueError, match="external wrenches"):
        hybrid_dynamics_derivatives(model, x, known, z, z, np.zeros((model.nb, 3)))
    nan_state = x.copy()
    nan_state.s[3] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        hybrid_dynamics_derivatives(model, nan_state, known, z, z)
    X = model.state_space.random_trajectory(3, 0)
    with pytest.raises(ValueError, match="same number of knots"):
        hybrid_dynamics_derivatives(model, X, known, np.zeros((2, nv)), np.zeros((3, nv)))
    X.v[1, 4] = np.inf
    with pytest.raises(ValueError, match="at knot 1"):
        hybrid_dynamics_derivatives(model, X, known, np.zeros((3, nv)), np.zeros((3, nv)))
    with pytest.raises(TypeError):
        hybrid_dynamics_derivatives(model, (x.H, x.s, x.v), known, z, z)
