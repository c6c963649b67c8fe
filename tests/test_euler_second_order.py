"""The second-order term of the Euler step on the group against second differences of the step itself."""

import numpy as np
import pytest

import lietraj
from conftest import relative_error
from lietraj.optimal_control import RobotDynamics
from lietraj.dynamics import se3
from lietraj.optimal_control.euler_second_order import _right_jacobian_derivative_contraction, euler_hessian_contraction
from test_rnea_derivatives import pitched


def numerical_hessian(dyn, x, u, lam, h=1e-4):
    """Central second differences of lam^T log(x'^-1 f(x exp dx, u + du)) in d = (dx, du), all at once."""
    space = dyn.state_space
    x_next = dyn.step(x, u)
    ndx = space.ndx
    m = ndx + u.shape[0]

    def g(d):
        return lam @ space.difference(x_next, dyn.step(space.integrate(x, d[:ndx]), u + d[ndx:]))

    H = np.empty((m, m))
    E = np.eye(m) * h
    for a in range(m):
        for b in range(a, m):
            H[a, b] = H[b, a] = (g(E[a] + E[b]) - g(E[a] - E[b]) - g(E[b] - E[a]) + g(-E[a] - E[b])) / (4 * h * h)
    return H


@pytest.mark.parametrize("name, pitch", [("solo12", None), ("solo12", np.pi / 2), ("ur5", None)])
def test_matches_second_differences_of_the_step(name, pitch, rng):
    model = lietraj.load_robot(name)
    dyn = RobotDynamics(model, 0.05)
    x = model.state_space.random(rng, scale=0.5)
    if pitch is not None:
        x = pitched(model, x, pitch)
    if model.floating_base:
        x.v[:6] *= 6.0  # a fast-turning base, so that the curvature of exp on SE(3) matters
    u, lam = rng.normal(size=model.n), rng.normal(size=model.state_space.ndx)
    H = euler_hessian_contraction(model, dyn.dt, x, u, lam)
    ref = numerical_hessian(dyn, x, u, lam)
    ndx = model.state_space.ndx
    full = np.block([[H.xx, H.xu], [H.xu.T, H.uu]])
    assert relative_error(full, ref) < 1e-5
    assert relative_error(H.xx, ref[:ndx, :ndx]) < 1e-5


def test_right_jacobian_derivative_series(rng):
    """K[i, j] = lam^T (dJr(c)/dc_i) e_j, summed from the series, against central differences of se3.right_jacobian."""
    for scale in (1e-3, 0.5, 2.5):
        c, lam, h = scale * rng.normal(size=6), rng.normal(size=6), 1e-6
        K = _right_jacobian_derivative_contraction(c, lam)
        ref = np.array([lam @ (se3.right_jacobian(c + h * e) - se3.right_jacobian(c - h * e)) / (2 * h)
                        for e in np.eye(6)])
        assert relative_error(K, ref) < 1e-8


def test_robot_dynamics_exposes_it(rng):
    model = lietraj.load_robot("ur5")
    x, u, lam = model.state_space.random(rng), rng.normal(size=model.n), rng.normal(size=model.state_space.ndx)
    H = RobotDynamics(model, 0.01).hessian_contraction(x, u, lam)
    np.testing.assert_array_equal(H.xx, euler_hessian_contraction(model, 0.01, x, u, lam).xx)
    with pytest.raises(NotImplementedError, match="Euler"):
        RobotDynamics(model, 0.01, integrator="rk4").hessian_contraction(x, u, lam)
    with pytest.raises(ValueError, match="lam"):
        euler_hessian_contraction(model, 0.01, x, u, lam[:3])
