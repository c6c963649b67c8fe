"""IDSVA (rnea_derivatives) against Pinocchio's computeRNEADerivatives and geometric finite differences."""

import numpy as np
import pinocchio as pin
import pytest

import lietraj
from conftest import ORACLE_ROBOTS, relative_error
from lietraj.dynamics import se3
from lietraj.dynamics.model.builder import random_tree
from lietraj.dynamics.algorithms.crba import mass_matrix
from lietraj.dynamics.lie.finite_differences import numerical_jacobian
from lietraj.dynamics.model.pinocchio_interop import to_pinocchio
from lietraj.dynamics.algorithms.rnea import body_frame_wrenches, rnea
from lietraj.dynamics.algorithms.rnea_derivatives import rnea_derivatives
from pin_oracle import pin_model, pin_model_from


def pin_rnea_derivatives(pm, q, v, a, fext=None):
    pd = pm.createData()
    args = (pm, pd, q, v, a) if fext is None else (pm, pd, q, v, a, [pin.Force.Zero()] + [pin.Force(f) for f in fext])
    return [np.array(t) for t in pin.computeRNEADerivatives(*args)]


@pytest.mark.parametrize("name", ORACLE_ROBOTS)
def test_matches_pinocchio(name, rng):
    model, pm = lietraj.load_robot(name), pin_model(name)
    for k in range(3):
        x = model.state_space.random(rng)
        a = rng.normal(size=model.nv)
        fext = rng.normal(size=(model.nb, 6)) if k else None
        d = rnea_derivatives(model, x, a, fext)
        dq, dv, M = pin_rnea_derivatives(pm, *to_pinocchio(model, x), a, fext)
        assert relative_error(d.dtau_dq, dq) < 1e-9
        assert relative_error(d.dtau_dv, dv) < 1e-9
        assert relative_error(d.M, M) < 1e-9
        np.testing.assert_allclose(d.tau, rnea(model, x, a, fext), rtol=0, atol=1e-9 * max(1, np.abs(d.tau).max()))


@pytest.mark.parametrize("floating", [False, True])
def test_random_trees_with_prismatic_joints_match_pinocchio(floating, rng):
    for seed in range(3):
        model = random_tree(12, seed, floating_base=floating)
        x, a = model.state_space.random(rng), rng.normal(size=model.nv)
        d = rnea_derivatives(model, x, a)
        dq, dv, M = pin_rnea_derivatives(pin_model_from(model), *to_pinocchio(model, x), a)
        assert relative_error(d.dtau_dq, dq) < 1e-9
        assert relative_error(d.dtau_dv, dv) < 1e-9
        assert relative_error(d.M, M) < 1e-9


def pitched(model, x, angle):
    """x with the base rotated to pitch ``angle`` about the world y axis (Euler angles are singular at ±90°)."""
    H = np.eye(4)
    H[:3, :3] = se3.exp(np.array([0, 0, 0, 0, angle, 0]))[:3, :3]
    H[:3, 3] = x.H[:3, 3]
    return lietraj.State(H, x.s, x.v)


@pytest.mark.parametrize("name, fext_reference", [("talos", "local"), ("solo12", "world"), ("ur5", "world"),
                                                  ("panda", "local")])
def test_matches_finite_differences_with_external_wrenches(name, fext_reference, rng):
    model = lietraj.load_robot(name)
    xs = [model.state_space.random(rng)]
    if model.floating_base:
        xs += [pitched(model, xs[0], np.pi / 2), pitched(model, xs[0], -np.pi / 2)]
    for x in xs:
        a, fext = rng.normal(size=model.nv), rng.normal(size=(model.nb, 6))
        d = rnea_derivatives(model, x, a, fext, fext_reference)
        J = numerical_jacobian(lambda y: rnea(model, y, a, fext, fext_reference), x)
        assert relative_error(d.dtau_dq, J[:, :model.nv]) < 1e-6
        assert relative_error(d.dtau_dv, J[:, model.nv:]) < 1e-6
        assert relative_error(d.tau, rnea(model, x, a, fext, fext_reference)) < 1e-12


def test_world_wrenches_differ_from_local_ones_only_in_dq(rng):
    """The same wrenches, once given in the world frame: equal tau and dtau/dv, different dtau/dq."""
    model = lietraj.load_robot("solo12")
    x, a, fw = model.state_space.random(rng), rng.normal(size=model.nv), rng.normal(size=(model.nb, 6))
    world = rnea_derivatives(model, x, a, fw, "world")
    local = rnea_derivatives(model, x, a, body_frame_wrenches(model, x, fw), "local")
    assert relative_error(world.tau, local.tau) < 1e-12
    assert relative_error(world.dtau_dv, local.dtau_dv) < 1e-12
    assert relative_error(world.dtau_dq, local.dtau_dq) > 1e-3


def test_mass_matrix_and_zero_pattern(rng):
    """M equals the CRBA; dofs on different branches of Talos (left leg vs right arm) do not couple."""
    model = lietraj.load_robot("talos")
    x, a = model.state_space.random(rng), rng.normal(size=model.nv)
    d = rnea_derivatives(model, x, a)
    assert relative_error(d.M, mass_matrix(model, x)) < 1e-12
    leg = 6 + model.joint_index("leg_left_4_joint")
    arm = 6 + model.joint_index("arm_right_4_joint")
    assert d.dtau_dq[leg, arm] == d.dtau_dq[arm, leg] == d.dtau_dv[leg, arm] == 0.0


def test_trajectory_equals_per_state(rng):
    model = lietraj.load_robot("talos")
    X = model.state_space.random_trajectory(4, rng)
    A, F = rng.normal(size=(4, model.nv)), rng.normal(size=(4, model.nb, 6))
    D = rnea_derivatives(model, X, A, F, "world")
    for k in range(4):
        d = rnea_derivatives(model, X[k], A[k], F[k], "world")
        for field in ("tau", "dtau_dq", "dtau_dv", "M"):
            np.testing.assert_array_equal(getattr(D, field)[k], getattr(d, field))


def test_bad_input_raises(rng):
    model = lietraj.load_robot("ur5")
    x = model.state_space.random(rng)
    with pytest.raises(ValueError, match="acceleration"):
        rnea_derivatives(model, x, np.zeros(model.nv + 1))
    with pytest.raises(ValueError, match="NaN"):
        rnea_derivatives(model, x, np.full(model.nv, np.nan))
    with pytest.raises(ValueError, match="fext_reference"):
        rnea_derivatives(model, x, np.zeros(model.nv), np.zeros((model.nb, 6)), "body")
    with pytest.raises(ValueError, match="external wrenches"):
        rnea_derivatives(model, x, np.zeros(model.nv), np.zeros((model.nb + 1, 6)))


def test_out_is_reused_and_checked(rng):
    model = lietraj.load_robot("solo12")
    X, A = model.state_space.random_trajectory(3, rng), rng.normal(size=(3, model.nv))
    first = rnea_derivatives(model, X, A)
    out = rnea_derivatives(model, X, A + 1.0)
    again = rnea_derivatives(model, X, A, out=out)
    assert again is out
    for field in ("tau", "dtau_dq", "dtau_dv", "M"):
        np.testing.assert_array_equal(getattr(out, field), getattr(first, field))
    with pytest.raises(ValueError, match="out.tau"):
        rnea_derivatives(model, X[0], A[0], out=out)
    with pytest.raises(TypeError, match="InverseDynamicsDerivatives"):
        rnea_derivatives(model, X, A, out=first.tau)
