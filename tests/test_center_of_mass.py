"""Centre of mass, its velocity and its Jacobian: Pinocchio agreement, finite differences and identities."""

from __future__ import annotations

import warnings
import zlib
from functools import lru_cache

import numpy as np
import pinocchio as pin
import pytest

from lietraj.dynamics.kinematics.center_of_mass import center_of_mass, center_of_mass_jacobian, center_of_mass_velocity
from lietraj.dynamics.model.pinocchio_interop import to_pinocchio
from lietraj.dynamics.model.robots import load_robot
from lietraj.dynamics.lie.state import State, Trajectory
from pin_oracle import pin_model

ROBOTS = ["ur5", "panda", "solo12", "anymal", "go1", "talos", "icub", "romeo"]
RTOL = 1e-10


@lru_cache(maxsize=None)
def robot(name: str):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # romeo's massless finger joints
        return load_robot(name)


def random_states(model, count: int, seed: int):
    rng = np.random.default_rng(seed)
    return [model.state_space.random(rng) for _ in range(count)]


def assert_close(actual, expected, rtol=RTOL):
    expected = np.asarray(expected)
    scale = max(1.0, float(np.max(np.abs(expected), initial=0.0)))
    np.testing.assert_allclose(actual, expected, rtol=0.0, atol=rtol * scale)


@pytest.mark.parametrize("name", ROBOTS)
def test_center_of_mass_and_its_velocity_match_pinocchio(name):
    model, pm = robot(name), pin_model(name)
    pd = pm.createData()
    for x in random_states(model, 4, zlib.crc32(name.encode())):
        q, v = to_pinocchio(model, x)
        c = pin.centerOfMass(pm, pd, q, v).copy()
        assert_close(center_of_mass(model, x), c)
        assert_close(center_of_mass_velocity(model, x), pd.vcom[0].copy())


@pytest.mark.parametrize("name", ROBOTS)
def test_center_of_mass_jacobian_matches_pinocchio(name):
    model, pm = robot(name), pin_model(name)
    pd = pm.createData()
    for x in random_states(model, 4, zlib.crc32(name.encode())):
        q, _ = to_pinocchio(model, x)
        J = center_of_mass_jacobian(model, x)
        assert J.shape == (3, model.nv)
        assert_close(J, pin.jacobianCenterOfMass(pm, pd, q).copy())


@pytest.mark.parametrize("name", ["ur5", "panda", "solo12", "talos"])
def test_center_of_mass_jacobian_times_v_is_its_velocity(name):
    model = robot(name)
    for x in random_states(model, 3, 5):
        assert_close(center_of_mass_jacobian(model, x) @ x.v, center_of_mass_velocity(model, x))


@pytest.mark.parametrize("name", ["panda", "solo12", "talos"])
def test_center_of_mass_jacobian_is_the_derivative_along_the_configuration_tangent(name):
    """Column k = d/de c(x ⊕ e z_k), z_k the k-th configuration direction of the tangent ([z_H; z_s])."""
    model, h = robot(name), 1e-6
    space = model.state_space
    x = random_states(model, 1, 9)[0]
    fd = np.empty((3, model.nv))
    for k in range(model.nv):
        z = np.zeros(space.ndx)
        z[k] = h
        fd[:, k] = (center_of_mass(model, space.integrate(x, z)) - center_of_mass(model, space.integrate(x, -z))) / (2 * h)
    np.testing.assert_allclose(center_of_mass_jacobian(model, x), fd, rtol=0, atol=1e-8)


@pytest.mark.parametrize("name", ["panda", "talos"])
def test_trajectory_form_equals_per_state_form(name):
    model = robot(name)
    X = model.state_space.random_trajectory(5, 3)
    C, V, J = center_of_mass(model, X), center_of_mass_velocity(model, X), center_of_mass_jacobian(model, X)
    assert (C.shape, V.shape, J.shape) == ((5, 3), (5, 3), (5, 3, model.nv))
    for t in range(len(X)):
        np.testing.assert_array_equal(C[t], center_of_mass(model, X[t]))
        np.testing.assert_array_equal(V[t], center_of_mass_velocity(model, X[t]))
        np.testing.assert_array_equal(J[t], center_of_mass_jacobian(model, X[t]))


def test_bad_inputs_raise_value_error():
    model = robot("solo12")
    x = model.state_space.random(0)
    nan_v = x.copy()
    nan_v.v[0] = np.nan
    bad_H = x.copy()
    bad_H.H[3, 0] = 1.0
    with pytest.raises(ValueError, match="joint positions"):
        center_of_mass(model, State(x.H, x.s[:3], x.v))
    with pytest.raises(ValueError, match="NaN"):
        center_of_mass_velocity(model, nan_v)
    with pytest.raises(ValueError, match="homogeneous"):
        center_of_mass_jacobian(model, bad_H)
    X = model.state_space.random_trajectory(3, 0)
    with pytest.raises(ValueError, match="same number of knots"):
        center_of_mass(model, Trajectory(X.H[:2], X.s, X.v))
    X.v[1, 4] = np.inf
    with pytest.raises(ValueError, match="at knot 1"):
        center_of_mass_velocity(model, X)


def test_massless_robot_has_no_center_of_mass():
    model = robot("ur5")
    massless = model.replace(mass=np.zeros(model.nb), com=np.zeros((model.nb, 3)))
    with pytest.raises(ValueError, match="no mass"):
        center_of_mass(massless, massless.state_space.random(0))
