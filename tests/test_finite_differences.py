"""The public geometric finite-difference utility, on functions whose Jacobians are known in closed form."""

import numpy as np
import pytest

import lietraj
from conftest import relative_error
from lietraj.dynamics import se3
from lietraj.dynamics.lie.finite_differences import numerical_jacobian
from lietraj.dynamics.lie.state import StateSpace


@pytest.mark.parametrize("floating", [True, False])
def test_state_valued_function_gives_the_integrate_jacobian(floating, rng):
    space = StateSpace(4, floating)
    x, z = space.random(rng), rng.normal(size=space.ndx)
    J_x, J_z = space.integrate_jacobians(x, z)
    J, J_u = numerical_jacobian(lambda y, u: space.integrate(y, u), x, z)
    assert relative_error(J, J_x) < 1e-8
    assert relative_error(J_u, J_z) < 1e-8


def test_se3_valued_function_uses_the_right_chart(rng):
    """f(x) = H T for a constant T: the body perturbation exp(z) of H becomes Ad_{T^-1} z at H T."""
    space = StateSpace(2, True)
    x, T = space.random(rng), se3.random(rng)
    J = numerical_jacobian(lambda y: y.H @ T, x, output="se3")
    expected = np.zeros((6, space.ndx))
    expected[:, :6] = se3.Ad(se3.inverse(T))
    assert relative_error(J, expected) < 1e-8


def test_vector_valued_function_keeps_the_output_shape(rng):
    space = StateSpace(3, False)
    x = space.random(rng)
    A = rng.normal(size=(2, 5, space.ndx))
    J = numerical_jacobian(lambda y: A @ np.concatenate([y.s, y.v]), x)
    assert J.shape == (2, 5, space.ndx)
    assert relative_error(J, A) < 1e-8


def test_checks_its_inputs(rng):
    model = lietraj.load_robot("ur5")
    x = model.state_space.random(rng)
    with pytest.raises(ValueError, match="eps"):
        numerical_jacobian(lambda y: y.s, x, eps=0.0)
    with pytest.raises(TypeError, match="State"):
        numerical_jacobian(lambda y: y, np.zeros(3))
    with pytest.raises(ValueError, match="output"):
        numerical_jacobian(lambda y: y.s, x, output="quaternion")
    with pytest.raises(FloatingPointError, match="non-finite value at column 0"):
        numerical_jacobian(lambda y: np.sqrt(-((y.s - x.s) ** 2)), x)
    with pytest.raises(FloatingPointError, match="non-finite value at x"):
        numerical_jacobian(lambda y: y.s / 0.0, x)
