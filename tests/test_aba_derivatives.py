"""Forward-dynamics derivatives against Pinocchio's computeABADerivatives and geometric finite differences."""

import numpy as np
import pinocchio as pin
import pytest

import lietraj
from conftest import ORACLE_ROBOTS, relative_error
from lietraj.dynamics.algorithms.aba import aba
from lietraj.dynamics.algorithms.aba_derivatives import aba_derivatives
from lietraj.dynamics.model.builder import random_tree
from lietraj.dynamics.lie.finite_differences import numerical_jacobian
from lietraj.dynamics.algorithms.inverse_mass_matrix import inverse_mass_matrix
from lietraj.dynamics.model.pinocchio_interop import to_pinocchio
from lietraj.dynamics.algorithms.rnea import body_frame_wrenches, rnea
from lietraj.dynamics.algorithms.rnea_derivatives import rnea_derivatives
from pin_oracle import pin_model, pin_model_from
from test_rnea_derivatives import pitched


def pin_aba_derivatives(pm, q, v, tau, fext=None):
    pd = pm.createData()
    args = (pm, pd, q, v, tau) if fext is None else (pm, pd, q, v, tau, [pin.Force.Zero()] + [pin.Force(f) for f in fext])
    return [np.array(t) for t in pin.computeABADerivatives(*args)]


@pytest.mark.parametrize("name", ORACLE_ROBOTS)
def test_matches_pinocchio(name, rng):
    model, pm = lietraj.load_robot(name), pin_model(name)
    for k in range(3):
        x, tau = model.state_space.random(rng), rng.normal(size=model.nv)
        fext = rng.normal(size=(model.nb, 6)) if k else None
        d = aba_derivatives(model, x, tau, fext)
        dq, dv, Minv = pin_aba_derivatives(pm, *to_pinocchio(model, x), tau, fext)
        # icub's mass matrix reaches cond ~ 1e10 at random states; Pinocchio's own results carry that error
        tol = 1e-9 if name != "icub" else 1e-8
        assert relative_error(d.da_dq, dq) < tol
        assert relative_error(d.da_dv, dv) < tol
        assert relative_error(d.da_dtau, Minv) < tol
        assert relative_error(d.a, aba(model, x, tau, fext)) < 1e-12


@pytest.mark.parametrize("floating", [False, True])
def test_random_trees_match_pinocchio(floating, rng):
    for seed in range(3):
        model = random_tree(12, seed, floating_base=floating)
        x, tau = model.state_space.random(rng), rng.normal(size=model.nv)
        d = aba_derivatives(model, x, tau)
        dq, dv, Minv = pin_aba_derivatives(pin_model_from(model), *to_pinocchio(model, x), tau)
        assert relative_error(d.da_dq, dq) < 1e-9
        assert relative_error(d.da_dv, dv) < 1e-9


@pytest.mark.parametrize("name, fext_reference", [("talos", "world"), ("solo12", "local"), ("panda", "world")])
def test_matches_finite_differences(name, fext_reference, rng):
    model = lietraj.load_robot(name)
    x0 = model.state_space.random(rng, scale=0.5)
    xs = [x0, pitched(model, x0, np.pi / 2), pitched(model, x0, -np.pi / 2)] if model.floating_base else [x0]
    for x in xs:
        tau, fext = rng.normal(size=model.nv), rng.normal(size=(model.nb, 6))
        d = aba_derivatives(model, x, tau, fext, fext_reference)
        J, J_tau = numerical_jacobian(lambda y, t: aba(model, y, t, body_frame_wrenches(model, y, fext)
                                                       if fext_reference == "world" else fext), x, tau)
        assert relative_error(d.da_dq, J[:, :model.nv]) < 1e-6
        assert relative_error(d.da_dv, J[:, model.nv:]) < 1e-6
        assert relative_error(d.da_dtau, J_tau) < 1e-6


def test_is_minus_minv_times_id_derivatives_at_the_consistent_acceleration(rng):
    """seed 001 eq. 5, and its pitfall: at any other acceleration the product is not dFD/dq."""
    model = lietraj.load_robot("solo12")
    x, tau = model.state_space.random(rng), rng.normal(size=model.nv)
    d = aba_derivatives(model, x, tau)
    Minv = inverse_mass_matrix(model, x)
    assert relative_error(d.da_dtau, Minv) < 1e-12
    consistent = rnea_derivatives(model, x, d.a)
    assert relative_error(d.da_dq, -Minv @ consistent.dtau_dq) < 1e-10
    assert relative_error(d.da_dv, -Minv @ consistent.dtau_dv) < 1e-10
    assert relative_error(rnea(model, x, d.a), tau) < 1e-10
    wrong = rnea_derivatives(model, x, np.zeros(model.nv))
    assert relative_error(d.da_dq, -Minv @ wrong.dtau_dq) > 1e-3


def test_trajectory_equals_per_state(rng):
    model = lietraj.load_robot("talos")
    X = model.state_space.random_trajectory(3, rng)
    T, F = rng.normal(size=(3, model.nv)), rng.normal(size=(3, model.nb, 6))
    D = aba_derivatives(model, X, T, F, "world")
    for k in range(3):
        d = aba_derivatives(model, X[k], T[k], F[k], "world")
        for field in ("a", "da_dq", "da_dv", "da_dtau"):
            np.testing.assert_array_equal(getattr(D, field)[k], getattr(d, field))


def test_bad_input_raises(rng):
    model = lietraj.load_robot("solo12")
    x = model.state_space.random(rng)
    with pytest.raises(ValueError, match="torques"):
        aba_derivatives(model, x, np.zeros(3))
    bad = lietraj.State(x.H.copy(), x.s, x.v)
    bad.H[0, 0] = 2.0
    with pytest.raises(ValueError, match="rotation"):
        aba_derivatives(model, bad, np.zeros(model.nv))
    with pytest.raises(ValueError, match="trajectory"):
        aba_derivatives(model, model.state_space.random_trajectory(2, rng), np.zeros(model.nv))
