"""Geometric linearization A, B (seed 000 Props. 1-3) against finite differences on the group."""

import os
import subprocess
import sys

import numpy as np
import pytest

import lietraj
from conftest import relative_error
from lietraj.dynamics import se3
from lietraj.dynamics.algorithms.aba import aba
from lietraj.dynamics.algorithms.extended_inverse_dynamics import extended_inverse_dynamics_derivatives
from lietraj.dynamics.lie.finite_differences import numerical_jacobian
from lietraj.dynamics.algorithms.linearization import linearize
from lietraj.dynamics.algorithms.crba import mass_matrix
from test_rnea_derivatives import pitched


def generalized(model, u):
    return np.concatenate([np.zeros(6), u]) if model.floating_base else u


def vector_field(model, x, u):
    """The left-trivialized field lambda(x, u) = (nu, sdot, nu_dot, sddot) = (v, FD(x, u))."""
    return np.concatenate([x.v, aba(model, x, generalized(model, u))])


def error_dynamics_rate(model, x_bar, u, z):
    """d/dt log(x_bar^-1 x) at x = x_bar exp(z), from the exact group ODEs of x and x_bar (not from seed 000):
    zdot = Jr(z_H)^-1 (lambda_H(x) - Ad_{exp(-z_H)} lambda_H(x_bar)) on SE(3), a plain difference elsewhere."""
    space = model.state_space
    x = space.integrate(x_bar, z)
    rate = vector_field(model, x, u) - vector_field(model, x_bar, u)
    if model.floating_base:
        rate[:6] = se3.right_jacobian_inverse(z[:6]) @ (x.v[:6] - se3.Ad(se3.exp(-z[:6])) @ x_bar.v[:6])
    return rate


STATES = {
    "solo12": lambda model, rng: model.state_space.random(rng, scale=0.5),
    "solo12 pitched +90": lambda model, rng: pitched(model, model.state_space.random(rng, scale=0.5), np.pi / 2),
    "talos pitched -90": lambda model, rng: pitched(model, model.state_space.random(rng, scale=0.3), -np.pi / 2),
    "panda": lambda model, rng: model.state_space.random(rng),
}


@pytest.mark.parametrize("case", list(STATES))
def test_matches_the_error_dynamics_of_the_group_ode(case, rng):
    """A z = d/dt log(x_bar^-1 x) to first order in z, for any direction z (digest §8 item 9: what catches P1)."""
    model = lietraj.load_robot(case.split()[0])
    x, u = STATES[case](model, rng), rng.normal(size=model.n)
    lin = linearize(model, x, u)
    for _ in range(3):
        z, eps = rng.normal(size=2 * model.nv), 1e-6
        rate = (error_dynamics_rate(model, x, u, eps * z) - error_dynamics_rate(model, x, u, -eps * z)) / (2 * eps)
        assert relative_error(lin.A @ z, rate) < 1e-6


@pytest.mark.parametrize("case", list(STATES))
def test_blocks_match_geometric_finite_differences(case, rng):
    """A = D lambda o DL - ad_lambda (eq. 12) and B = D_u lambda (eq. 13) with lambda differentiated numerically."""
    model = lietraj.load_robot(case.split()[0])
    x, u = STATES[case](model, rng), rng.normal(size=model.n)
    lin = linearize(model, x, u)
    J_x, J_u = numerical_jacobian(lambda y, w: vector_field(model, y, w), x, u)
    if model.floating_base:
        J_x[:6, :6] -= se3.ad(x.v[:6])
    assert relative_error(lin.A, J_x) < 1e-6
    assert relative_error(lin.B, J_u) < 1e-6
    assert relative_error(lin.a, aba(model, x, generalized(model, u))) < 1e-12


def test_structure_of_propositions_1_and_2(rng):
    """Kinematic rows, -ad(nu) block, B = [0; M^-1 S], and the closed form of the H columns (digest §4.2)."""
    model = lietraj.load_robot("talos")
    x, u = model.state_space.random(rng), rng.normal(size=model.n)
    lin, nv = linearize(model, x, u), model.nv
    np.testing.assert_array_equal(lin.A[6:nv, nv:], np.eye(nv)[6:])
    assert relative_error(lin.A[:6, :6], -se3.ad(x.v[:6])) < 1e-15
    np.testing.assert_array_equal(lin.A[6:nv, :nv], 0.0)
    assert relative_error(lin.B[nv:], np.linalg.inv(mass_matrix(model, x))[:, 6:]) < 1e-9
    g_b = x.H[:3, :3].T @ -model.gravity
    expected = np.zeros((nv, 6))
    expected[:3, 3:] = -se3.ad(np.r_[np.zeros(3), g_b])[:3, :3]
    assert relative_error(lin.A[nv:, :6], expected) < 1e-12


def test_extended_id_h_derivative_closed_form_with_inconsistent_inputs(rng):
    """Table 5 in the body-twist chart: D1 ID-bar o DL_H = M[:, :6] (a_0^r x), a_0^r = [R^T (-g); 0], any a."""
    model = lietraj.load_robot("hyq")
    x, a = model.state_space.random(rng), rng.normal(size=model.nv)
    d = extended_inverse_dynamics_derivatives(model, x, a)
    a0 = np.r_[x.H[:3, :3].T @ -model.gravity, np.zeros(3)]
    assert relative_error(d.d_dH, d.M[:, :6] @ se3.ad(a0)) < 1e-12
    J = numerical_jacobian(lambda y: lietraj.dynamics.rnea(model, y, a), x)
    nv = model.nv
    for block, ref in ((d.d_dH, J[:, :6]), (d.d_ds, J[:, 6:nv]), (d.d_dnu, J[:, nv:nv + 6]), (d.d_dsdot, J[:, nv + 6:])):
        assert relative_error(block, ref) < 1e-6


def test_fixed_base_and_trajectory(rng):
    model = lietraj.load_robot("ur5")
    X, U = model.state_space.random_trajectory(5, rng), rng.normal(size=(5, model.n))
    L = linearize(model, X, U)
    assert L.A.shape == (5, 12, 12) and L.B.shape == (5, 12, 6)
    for k in range(5):
        lk = linearize(model, X[k], U[k])
        np.testing.assert_array_equal(L.A[k], lk.A)
        np.testing.assert_array_equal(L.B[k], lk.B)
    np.testing.assert_array_equal(L.A[0][:6, :6], 0.0)
    out = linearize(model, X, U + 1.0)
    assert linearize(model, X, U, out=out) is out
    np.testing.assert_array_equal(out.A, L.A)
    np.testing.assert_array_equal(out.B, L.B)
    np.testing.assert_array_equal(out.a, L.a)


def test_bad_input_raises(rng):
    model = lietraj.load_robot("solo12")
    x = model.state_space.random(rng)
    with pytest.raises(ValueError, match="joint torques"):
        linearize(model, x, np.zeros(model.nv))
    with pytest.raises(ValueError, match="fixed base"):
        extended_inverse_dynamics_derivatives(lietraj.load_robot("ur5"), lietraj.load_robot("ur5").state_space.random(rng),
                                              np.zeros(6))


def test_kernels_run_without_jit(rng):
    """NUMBA_DISABLE_JIT=1 (pure Python, for debugging): IDSVA, the FD derivatives and A, B as compiled."""
    code = ("import numpy as np, lietraj; from lietraj.dynamics import linearize;"
            "m = lietraj.load_robot('solo12'); x = m.state_space.random(np.random.default_rng(0));"
            "print(repr(linearize(m, x, np.arange(m.n) / 10.0).A.tolist()))")
    env = dict(os.environ, NUMBA_DISABLE_JIT="1")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
    model = lietraj.load_robot("solo12")
    expected = linearize(model, model.state_space.random(np.random.default_rng(0)), np.arange(model.n) / 10.0).A
    np.testing.assert_allclose(eval(out), expected, rtol=0, atol=1e-10 * np.abs(expected).max())
