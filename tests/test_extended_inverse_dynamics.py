"""Extended inverse dynamics EIDAmb (seed 000 Table 4): tau_bar, the base blocks M11, M12, h1, consistent inputs."""

from __future__ import annotations

import numpy as np
import pinocchio as pin
import pytest

from lietraj import load_robot
from lietraj.dynamics.algorithms.extended_inverse_dynamics import ExtendedIDResult, extended_inverse_dynamics
from lietraj.dynamics.model.pinocchio_interop import to_pinocchio
from lietraj.dynamics.algorithms.rnea import rnea

from pin_oracle import pin_model

ROBOTS = ["talos", "icub", "solo12", "go1", "anymal", "hyq"]
SEEDS = [0, 1, 2]


def rel_err(x, ref):
    return np.max(np.abs(x - ref)) / max(1.0, np.max(np.abs(ref)))


def setup(name, seed):
    model = load_robot(name)
    rng = np.random.default_rng(seed)
    return model, model.state_space.random(rng), rng.standard_normal(model.nv)


@pytest.mark.parametrize("name", ROBOTS)
def test_tau_bar_is_rnea_for_inconsistent_accelerations(name):
    for seed in SEEDS:
        model, x, a = setup(name, seed)
        res = extended_inverse_dynamics(model, x, a)
        assert rel_err(res.tau, rnea(model, x, a)) < 1e-10
        assert np.array_equal(res.a, a)


@pytest.mark.parametrize("name", ROBOTS)
def test_blocks_are_those_of_the_mass_matrix_and_bias(name):
    """M11, M12 against M from RNEA columns and Pinocchio's CRBA; h1 against the base part of h."""
    pm = pin_model(name)
    data = pm.createData()
    for seed in SEEDS:
        model, x, a = setup(name, seed)
        res = extended_inverse_dynamics(model, x, a)
        h = rnea(model, x, np.zeros(model.nv))
        M = np.column_stack([rnea(model, x, e) - h for e in np.eye(model.nv)])
        assert rel_err(res.M11, M[:6, :6]) < 1e-10 and rel_err(res.M12, M[:6, 6:]) < 1e-10
        assert rel_err(res.h1, h[:6]) < 1e-10
        q, v = to_pinocchio(model, x)
        Mp = pin.crba(pm, data, q).copy()
        Mp = np.triu(Mp) + np.triu(Mp, 1).T
        assert rel_err(res.M11, Mp[:6, :6]) < 1e-10 and rel_err(res.M12, Mp[:6, 6:]) < 1e-10
        assert rel_err(res.h1, pin.nonLinearEffects(pm, data, q, v)[:6]) < 1e-10
        assert rel_err(res.tau, pin.rnea(pm, data, q, v, a)) < 1e-10


@pytest.mark.parametrize("name", ["talos", "solo12"])
def test_base_wrench_is_composite_inertia_times_base_acceleration_plus_bc0(name):
    """Digest identity tau_b = M^c_0 a_0 + b^c_0, with b^c_0 the base wrench at zero base acceleration."""
    for seed in SEEDS:
        model, x, a = setup(name, seed)
        res = extended_inverse_dynamics(model, x, a)
        bc0 = rnea(model, x, np.concatenate([np.zeros(6), a[6:]]))[:6]
        assert rel_err(res.tau[:6], res.M11 @ a[:6] + bc0) < 1e-10


@pytest.mark.parametrize("name", ROBOTS)
def test_consistent_base_acceleration_has_zero_base_wrench_and_matches_aba(name):
    pm = pin_model(name)
    data = pm.createData()
    for seed in SEEDS:
        model, x, a = setup(name, seed)
        res = extended_inverse_dynamics(model, x, a, consistent=True)
        assert np.max(np.abs(res.tau[:6])) < 1e-10 * max(1.0, np.max(np.abs(res.tau)))
        assert np.array_equal(res.a[6:], a[6:])
        tau = np.concatenate([np.zeros(6), res.tau[6:]])
        q, v = to_pinocchio(model, x)
        # The base part only: aba's joint part (our input) loses digits on icub, whose M has a condition number ~1e9.
        assert rel_err(res.a[:6], pin.aba(pm, data, q, v, tau)[:6].copy()) < 1e-10
        assert rel_err(res.tau, rnea(model, x, res.a)) < 1e-10


@pytest.mark.parametrize("consistent", [False, True])
def test_batch_equals_per_state(consistent):
    model = load_robot("talos")
    rng = np.random.default_rng(3)
    N = 4
    X = model.state_space.random_trajectory(N, rng)
    A = rng.standard_normal((N, model.nv))
    res = extended_inverse_dynamics(model, X, A, consistent)
    assert isinstance(res, ExtendedIDResult) and res.M12.shape == (N, 6, model.n)
    for k in range(N):
        one = extended_inverse_dynamics(model, X[k], A[k], consistent)
        for field in ("tau", "a", "M11", "M12", "h1"):
            np.testing.assert_array_equal(getattr(res, field)[k], getattr(one, field))


def test_bad_inputs_raise_value_error():
    with pytest.raises(ValueError, match="fixed base.*rnea"):
        ur5 = load_robot("ur5")
        extended_inverse_dynamics(ur5, ur5.state_space.random(0), np.zeros(ur5.nv))
    model = load_robot("solo12")
    x = model.state_space.random(0)
    with pytest.raises(ValueError, match="acceleration must have shape"):
        extended_inverse_dynamics(model, x, np.zeros(model.nv - 1))
    a = np.zeros(model.nv)
    a[3] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        extended_inverse_dynamics(model, x, a)
    x.H = x.H.copy()
    x.H[0, 0] = 3.0
    with pytest.raises(ValueError, match="rotation"):
        extended_inverse_dynamics(model, x, np.zeros(model.nv))
    X = model.state_space.random_trajectory(3, 0)
    with pytest.raises(ValueError, match="same number of knots"):
        extended_inverse_dynamics(model, X, np.zeros((2, model.nv)))
    with pytest.raises(ValueError, match="at knot 2"):
        A = np.zeros((3, model.nv))
        A[2, 7] = np.inf
        extended_inverse_dynamics(model, X, A)
