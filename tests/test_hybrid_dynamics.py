"""Hybrid dynamics (seed 002 Table 4): against RNEA, forward dynamics, the naive formula (eq. 33) and Pinocchio's ABA."""

from __future__ import annotations

import numpy as np
import pinocchio as pin
import pytest

from lietraj import load_robot
from lietraj.dynamics.algorithms.hybrid_dynamics import HybridResult, hybrid_dynamics
from lietraj.dynamics.model.pinocchio_interop import to_pinocchio
from lietraj.dynamics.algorithms.rnea import rnea

from pin_oracle import pin_model

ROBOTS = ["talos", "solo12", "go1", "panda", "ur5"]
SEEDS = [0, 1, 2]


def rel_err(x, ref):
    return np.max(np.abs(x - ref)) / max(1.0, np.max(np.abs(ref)))


def setup(name, seed, with_fext=False):
    model = load_robot(name)
    rng = np.random.default_rng(seed)
    x = model.state_space.random(rng)
    a = rng.standard_normal(model.nv)
    fext = 10.0 * rng.standard_normal((model.nb, 6)) if with_fext else None
    return model, rng, x, a, fext


def mass_matrix(model, x):
    """M from RNEA columns (no fext: M does not depend on it)."""
    h = rnea(model, x, np.zeros(model.nv))
    return np.column_stack([rnea(model, x, e) - h for e in np.eye(model.nv)])


def random_mask(model, rng, base_known):
    known = rng.random(model.nv) < 0.5
    if model.floating_base:
        known[:6] = base_known
    return known


def pin_fext(model, fext):
    """Pinocchio's fext is indexed by joint (0 = universe); ours by body (body i is joint i + 1)."""
    return [pin.Force.Zero()] + [pin.Force(np.asarray(f)) for f in fext]


@pytest.mark.parametrize("name", ROBOTS)
@pytest.mark.parametrize("with_fext", [False, True])
def test_all_known_is_rnea(name, with_fext):
    for seed in SEEDS:
        model, rng, x, a, fext = setup(name, seed, with_fext)
        res = hybrid_dynamics(model, x, np.ones(model.nv, bool), a, np.full(model.nv, np.nan), fext)
        assert rel_err(res.tau, rnea(model, x, a, fext)) < 1e-10
        assert np.array_equal(res.a, a)


@pytest.mark.parametrize("name", ROBOTS)
def test_none_known_is_forward_dynamics(name):
    for seed in SEEDS:
        model, rng, x, _, _ = setup(name, seed)
        tau = 10.0 * rng.standard_normal(model.nv)
        res = hybrid_dynamics(model, x, np.zeros(model.nv, bool), np.full(model.nv, np.nan), tau)
        expected = np.linalg.solve(mass_matrix(model, x), tau - rnea(model, x, np.zeros(model.nv)))
        assert rel_err(res.a, expected) < 1e-10
        assert np.array_equal(res.tau, tau)


@pytest.mark.parametrize("name", ROBOTS)
@pytest.mark.parametrize("with_fext", [False, True])
def test_none_known_matches_pinocchio_aba(name, with_fext):
    pm = pin_model(name)
    data = pm.createData()
    for seed in SEEDS:
        model, rng, x, _, fext = setup(name, seed, with_fext)
        tau = 10.0 * rng.standard_normal(model.nv)
        q, v = to_pinocchio(model, x)
        if with_fext:
            expected = pin.aba(pm, data, q, v, tau, pin_fext(model, fext)).copy()
        else:
            expected = pin.aba(pm, data, q, v, tau).copy()
        res = hybrid_dynamics(model, x, np.zeros(model.nv, bool), np.zeros(model.nv), tau, fext)
        assert rel_err(res.a, expected) < 1e-10


@pytest.mark.parametrize("name", ROBOTS)
@pytest.mark.parametrize("base_known", [False, True])
def test_mixed_mask_matches_naive_formula(name, base_known):
    """Seed 002 eq. (33): a_p = M_pp^-1 (tau_p - h_p - M_pa a_a), tau_a = M_a: a + h_a."""
    for seed in SEEDS:
        model, rng, x, a_in, fext = setup(name, seed, with_fext=seed == 1)
        known = random_mask(model, rng, base_known)
        tau_in = 10.0 * rng.standard_normal(model.nv)
        M, h = mass_matrix(model, x), rnea(model, x, np.zeros(model.nv), fext)
        ka, kp = np.flatnonzero(known), np.flatnonzero(~known)
        a = a_in.copy()
        a[kp] = np.linalg.solve(M[np.ix_(kp, kp)], tau_in[kp] - h[kp] - M[np.ix_(kp, ka)] @ a_in[ka])
        tau = tau_in.copy()
        tau[ka] = M[ka] @ a + h[ka]
        res = hybrid_dynamics(model, x, known, a_in, tau_in, fext)
        assert rel_err(res.a, a) < 1e-10
        assert rel_err(res.tau, tau) < 1e-10
        assert np.array_equal(res.a[ka], a_in[ka]) and np.array_equal(res.tau[kp], tau_in[kp])


@pytest.mark.parametrize("name", ["talos", "panda"])
def test_result_satisfies_the_equations_of_motion(name):
    """Whatever the mask, rnea at the returned acceleration gives back the returned torque."""
    for seed in SEEDS:
        model, rng, x, a_in, fext = setup(name, seed, with_fext=True)
        known = random_mask(model, rng, seed % 2 == 0)
        res = hybrid_dynamics(model, x, known, a_in, 10.0 * rng.standard_normal(model.nv), fext)
        assert rel_err(rnea(model, x, res.a, fext), res.tau) < 1e-10


@pytest.mark.parametrize("name", ["talos", "ur5"])
@pytest.mark.parametrize("with_fext", [False, True])
def test_batch_equals_per_state(name, with_fext):
    model = load_robot(name)
    rng = np.random.default_rng(7)
    N = 4
    X = model.state_space.random_trajectory(N, rng)
    A, TAU = rng.standard_normal((N, model.nv)), rng.standard_normal((N, model.nv))
    F = rng.standard_normal((N, model.nb, 6)) if with_fext else None
    known = random_mask(model, rng, False)
    res = hybrid_dynamics(model, X, known, A, TAU, F)
    assert isinstance(res, HybridResult) and res.a.shape == res.tau.shape == (N, model.nv)
    for k in range(N):
        one = hybrid_dynamics(model, X[k], known, A[k], TAU[k], None if F is None else F[k])
        np.testing.assert_array_equal(res.a[k], one.a)
        np.testing.assert_array_equal(res.tau[k], one.tau)


def test_bad_inputs_raise_value_error():
    model = load_robot("solo12")
    x = model.state_space.random(0)
    nv, z = model.nv, np.zeros(model.nv)
    known = np.zeros(nv, bool)
    with pytest.raises(ValueError, match="known must have shape"):
        hybrid_dynamics(model, x, known[:-1], z, z)
    with pytest.raises(ValueError, match="boolean mask"):
        hybrid_dynamics(model, x, np.zeros(nv), z, z)
    mixed = known.copy()
    mixed[2] = True
    with pytest.raises(ValueError, match="six base entries"):
        hybrid_dynamics(model, x, mixed, z, z)
    with pytest.raises(ValueError, match="acceleration must have shape"):
        hybrid_dynamics(model, x, known, z[:-1], z)
    with pytest.raises(ValueError, match="torques must have shape"):
        hybrid_dynamics(model, x, known, z, z[:-1])
    bad = z.copy()
    bad[8] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        hybrid_dynamics(model, x, known, z, bad)
    hybrid_dynamics(model, x, known, bad, z)  # an unread entry may be anything
    with pytest.raises(ValueError, match="external wrenches"):
        hybrid_dynamics(model, x, known, z, z, np.zeros((model.nb, 3)))
    x.v = x.v[:-1]
    with pytest.raises(ValueError, match="velocity"):
        hybrid_dynamics(model, x, known, z, z)
    X = model.state_space.random_trajectory(3, 0)
    with pytest.raises(ValueError, match="same number of knots"):
        hybrid_dynamics(model, X, known, np.zeros((2, nv)), np.zeros((3, nv)))
    with pytest.raises(ValueError, match="at knot 1"):
        T = np.zeros((3, nv))
        T[1, 0] = np.inf
        hybrid_dynamics(model, X, known, np.zeros((3, nv)), T)
    with pytest.raises(TypeError):
        hybrid_dynamics(model, (x.H, x.s, x.v), known, z, z)
